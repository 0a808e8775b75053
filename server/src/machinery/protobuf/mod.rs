//! The Kubernetes protobuf wire format (`application/vnd.kubernetes.protobuf`), which client-go's
//! typed clients — and so `kubectl create …` and `kubectl delete` — send and prefer.
//!
//! Objects are transcoded to and from the JSON values the rest of the server works on by a
//! table-driven walk over the type facts ([`crate::machinery::type_facts`]): no generated code for
//! the Kubernetes types. On the wire an object is the magic `k8s\0` followed by a
//! `runtime.Unknown { typeMeta { apiVersion = 1, kind = 2 } = 1, raw = 2, contentEncoding = 3,
//! contentType = 4 }` whose `raw` is the object's own message (which has no apiVersion/kind).
//!
//! Input is untrusted: lengths are checked against the bytes present, nothing is preallocated
//! from a length prefix, nesting is bounded ([`transcode::MAX_DEPTH`]), and every failure is a
//! 400 naming where in the object it happened.

mod special;
pub mod transcode;
pub mod wire;

#[cfg(test)]
mod tests;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::type_facts::facts;
use transcode::{decode_message, encode_message};
use wire::{ProtoError, Reader, Reason, Result, Write, LEN};

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf object starts with.
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// Where the protobuf packages of API groups live, tried in order.
const PACKAGE_ROOTS: [&str; 4] = [
    "k8s.io.api.",
    "k8s.io.apiextensions_apiserver.pkg.apis.",
    "k8s.io.kube_aggregator.pkg.apis.",
    "k8s.io.apimachinery.pkg.apis.",
];

/// The protobuf message of `kind` in `apiVersion` (`apps/v1`, `Deployment` →
/// `k8s.io.api.apps.v1.Deployment`). Kinds every group version serves (`Status`,
/// `DeleteOptions`, `WatchEvent`, …) come from `meta/v1`.
pub fn message_for_kind(api_version: &str, kind: &str) -> Option<&'static str> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let valid = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    if !valid(version) || !valid(kind) {
        return None;
    }
    // The package is the group's first label: `rbac.authorization.k8s.io` → `rbac`.
    let package = match group {
        "" => "core",
        "internal.apiserver.k8s.io" => "apiserverinternal",
        g => g.split('.').next().unwrap_or(g),
    };
    let messages = &facts().messages;
    PACKAGE_ROOTS
        .iter()
        .map(|root| format!("{root}{package}.{version}.{kind}"))
        .chain(std::iter::once(format!(
            "k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"
        )))
        .find_map(|name| messages.get_key_value(&name).map(|(k, _)| k.as_str()))
}

/// Decodes a protobuf object (envelope included) into its JSON value, with `apiVersion` and
/// `kind` taken from the envelope.
pub fn decode_object(body: &[u8]) -> Result<Value> {
    decode_envelope(body, 1)
}

/// The parts of an envelope the decoder uses.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    message: &'static str,
    raw: &'a [u8],
}

/// Reads the magic and the `runtime.Unknown` around an object.
#[inline(never)]
fn open_envelope(body: &[u8]) -> Result<Envelope<'_>> {
    let invalid = |m: String| ProtoError::from(Reason::Invalid(m));
    let unknown = body
        .strip_prefix(&MAGIC)
        .ok_or_else(|| invalid("the body does not start with the protobuf magic \"k8s\\x00\"".into()))?;
    let (mut api_version, mut kind) = (String::new(), String::new());
    let (mut raw, mut encoding, mut content_type): (&[u8], String, String) =
        (&[], String::new(), String::new());
    let mut r = Reader::new(unknown);
    while let Some((tag, wire)) = r.key()? {
        if !(1..=4).contains(&tag) {
            r.skip(wire)?;
            continue;
        }
        if wire != LEN {
            return Err(Reason::Mismatch {
                found: wire as u8,
                expected: "envelope field",
            }
            .into());
        }
        let payload = r.bytes()?;
        match tag {
            1 => {
                let mut tm = Reader::new(payload);
                while let Some((t, w)) = tm.key()? {
                    match (t, w) {
                        (1, LEN) => api_version = transcode::utf8(tm.bytes()?)?,
                        (2, LEN) => kind = transcode::utf8(tm.bytes()?)?,
                        (_, w) => tm.skip(w)?,
                    }
                }
            }
            2 => raw = payload,
            3 => encoding = transcode::utf8(payload)?,
            _ => content_type = transcode::utf8(payload)?,
        }
    }
    if !encoding.is_empty() {
        return Err(invalid(format!("unsupported contentEncoding {encoding:?}")));
    }
    if !content_type.is_empty() && content_type != MEDIA_TYPE {
        return Err(invalid(format!("unsupported contentType {content_type:?}")));
    }
    if kind.is_empty() {
        return Err(invalid("the envelope names no kind".into()));
    }
    let message = message_for_kind(&api_version, &kind).ok_or_else(|| {
        invalid(format!(
            "no kind {kind:?} is registered for version {api_version:?}"
        ))
    })?;
    Ok(Envelope {
        api_version,
        kind,
        message,
        raw,
    })
}

/// Decodes an envelope whose object sits at JSON nesting level `depth`.
fn decode_envelope(body: &[u8], depth: usize) -> Result<Value> {
    let env = open_envelope(body)?;
    let mut v = decode_message(env.message, env.raw, depth)?;
    if let Value::Object(o) = &mut v {
        if !env.api_version.is_empty() {
            o.insert("apiVersion".into(), Value::String(env.api_version));
        }
        o.insert("kind".into(), Value::String(env.kind));
    }
    Ok(v)
}

/// Encodes a JSON object (with `apiVersion` and `kind`) as a protobuf object, envelope included.
pub fn encode_object(obj: &Value) -> Result<Vec<u8>> {
    let field = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let message = message_for_kind(api_version, kind).ok_or_else(|| {
        ProtoError::from(Reason::Invalid(format!(
            "no protobuf message for kind {kind:?} in {api_version:?}"
        )))
    })?;
    let mut raw = Vec::new();
    encode_message(message, obj, 1, &mut raw)?;
    Ok(envelope(api_version, kind, &raw))
}

/// `k8s\0` + `runtime.Unknown`, written as Go writes it (empty contentEncoding and contentType
/// included: they are plain string fields).
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let (mut out, tail) = envelope_around(api_version, kind, raw.len());
    out.extend_from_slice(raw);
    out.extend_from_slice(&tail);
    out
}

/// The envelope before and after a `raw` of `raw_len` bytes.
fn envelope_around(api_version: &str, kind: &str, raw_len: usize) -> (Vec<u8>, Vec<u8>) {
    let mut type_meta = Vec::new();
    type_meta.len_field(1, api_version.as_bytes());
    type_meta.len_field(2, kind.as_bytes());
    let mut head = Vec::with_capacity(type_meta.len() + 32);
    head.extend_from_slice(&MAGIC);
    head.len_field(1, &type_meta);
    head.len_prefix(2, raw_len);
    let mut tail = Vec::with_capacity(4);
    tail.len_field(3, b"");
    tail.len_field(4, b"");
    (head, tail)
}

/// The object's own message inside an object encoded by [`encode_object`] (the envelope's
/// `raw`): what a list carries as one of its items.
pub fn object_message(object: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(object.strip_prefix(&MAGIC)?);
    while let Some((tag, wire)) = r.key().ok()? {
        if wire != LEN {
            return None;
        }
        let payload = r.bytes().ok()?;
        if tag == 2 {
            return Some(payload);
        }
    }
    None
}

/// A list's protobuf around its items, for writing the items in between: the envelope and the
/// list's own fields (from `list`, without `items`) before them, the envelope's end after.
#[derive(Debug)]
pub struct ListFrame {
    /// Everything before the first item.
    pub head: Vec<u8>,
    /// Everything after the last item.
    pub tail: Vec<u8>,
    /// The field number of the list's `items`, which each item is written as.
    pub items_tag: u32,
}

impl ListFrame {
    /// The frame of `list` (its `apiVersion`, `kind` and `metadata`) around items whose
    /// messages (each an [`object_message`]) are `item_lens` bytes long.
    pub fn new(list: &Value, item_lens: impl Iterator<Item = usize>) -> Result<ListFrame> {
        let field = |k: &str| list.get(k).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let message = message_for_kind(api_version, kind).ok_or_else(|| {
            ProtoError::from(Reason::Invalid(format!(
                "no protobuf message for kind {kind:?} in {api_version:?}"
            )))
        })?;
        let items_tag = transcode::message(message)?
            .fields
            .iter()
            .find(|f| f.name == "items" && !f.inline)
            .map(|f| f.tag)
            .ok_or_else(|| ProtoError::from(Reason::Invalid(format!("{message} has no items"))))?;
        let mut own_fields = list.clone();
        if let Value::Object(o) = &mut own_fields {
            o.remove("items");
        }
        let mut own = Vec::new();
        encode_message(message, &own_fields, 1, &mut own)?;
        let items_len: usize = item_lens.map(|n| field_prefix_len(items_tag, n) + n).sum();
        let (mut head, tail) = envelope_around(api_version, kind, own.len() + items_len);
        head.extend_from_slice(&own);
        Ok(ListFrame {
            head,
            tail,
            items_tag,
        })
    }
}

/// How many bytes the key and length of a length-delimited field `tag` of `len` bytes take.
pub fn field_prefix_len(tag: u32, len: usize) -> usize {
    prost::encoding::key_len(tag) + prost::encoding::encoded_len_varint(len as u64)
}

/// Writes the key and length of a length-delimited field `tag` of `len` bytes.
pub fn put_field_prefix(tag: u32, len: usize, out: &mut impl bytes::BufMut) {
    prost::encoding::encode_key(tag, LEN, out);
    prost::encoding::encode_varint(len as u64, out);
}

/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// One frame of a protobuf watch stream: a 4-byte big-endian length, then a `meta/v1`
/// `WatchEvent { type = 1, object = 2 (RawExtension { raw = 1 }) }` without envelope, whose
/// `raw` is the object with its envelope (`object`, from [`encode_object`]).
pub fn watch_frame(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut raw_ext = Vec::with_capacity(object.len() + 8);
    raw_ext.len_field(1, object);
    let mut event = Vec::with_capacity(raw_ext.len() + event_type.len() + 8);
    event.len_field(1, event_type.as_bytes());
    event.len_field(2, &raw_ext);
    let mut out = Vec::with_capacity(event.len() + 4);
    out.extend_from_slice(&(event.len() as u32).to_be_bytes());
    out.extend_from_slice(&event);
    out
}

/// Decodes a protobuf request body; failures are a 400.
pub fn decode_request(body: &[u8]) -> ApiResult<Value> {
    decode_object(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the body of the request could not be decoded as protobuf: {e}"
        ))
    })
}

/// Turns a protobuf request body into JSON bytes (for handlers that parse JSON themselves, such
/// as DELETE's `DeleteOptions`); other bodies pass through.
pub fn json_body(content_type: &str, body: bytes::Bytes) -> ApiResult<bytes::Bytes> {
    if content_type != MEDIA_TYPE || body.is_empty() {
        return Ok(body);
    }
    let v = decode_request(&body)?;
    serde_json::to_vec(&v)
        .map(Into::into)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// A protobuf response for a JSON body, or `None` if the body has no protobuf form (a kind
/// without a message, or a stored value of the wrong shape): the caller then answers JSON,
/// which clients asking for protobuf also accept.
pub fn response(code: StatusCode, body: &Value) -> Option<Response> {
    match encode_object(body) {
        Ok(bytes) => Some((code, [(header::CONTENT_TYPE, MEDIA_TYPE)], bytes).into_response()),
        Err(e) => {
            tracing::debug!(error = %e, "answering JSON: no protobuf form");
            None
        }
    }
}

/// An error as a protobuf `Status`, keeping the code and `Retry-After`.
pub fn error_response(e: ApiError) -> Response {
    let Ok(bytes) = encode_object(&e.body()) else {
        return e.into_response();
    };
    let (mut parts, _) = e.into_response().into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    Response::from_parts(parts, Body::from(bytes))
}
