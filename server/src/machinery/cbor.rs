//! The CBOR encoding (`application/cbor`, `application/cbor-seq` for watches,
//! `application/apply-patch+cbor` for server-side apply) with Kubernetes' CBOR profile, between
//! CBOR bytes and the JSON values the rest of the server works on.
//!
//! Encoding follows kube-apiserver's encoder (apimachinery's `cbor/internal/modes`): every
//! object is enclosed in the self-described tag 55799 (`d9 d9 f7`); lengths are definite;
//! strings and map keys are byte strings (kube encodes Go strings as byte strings); map keys are
//! sorted bytewise by their encoding (RFC 8949 §4.2.1, so the same object always has the same
//! bytes); floats take the shortest width that keeps their value. The `[]byte` fields of
//! built-in types (a Secret's `data`, a ConfigMap's `binaryData`, a CSR's `request`, …), base64
//! text in JSON, are their raw bytes in a byte string under tag 22 ("expected base64"), as kube
//! writes Go byte slices; the type facts ([`crate::machinery::type_facts`]) say which they are.
//!
//! Decoding follows its decoder: tags are accepted (55799 is transparent, 21/22/23 turn their
//! byte string into base64url/base64/hex text as JSON has it), text strings must be UTF-8,
//! byte strings become strings (at a `[]byte` field of a built-in type, the base64 of their
//! bytes), indefinite lengths are accepted; duplicate map keys, NaN and
//! infinities, integers beyond `int64`, nesting deeper than 64 and arrays or maps of more than
//! 1024 entries are refused, with the decoder's words. Input is untrusted: the decoder borrows
//! from the body and checks every declared length against the bytes present before using it,
//! so a header claiming more than the body holds costs nothing.

use base64::Engine;
use minicbor::data::{Tag, Type};
use minicbor::{Decoder, Encoder};
use serde_json::{Map, Number, Value};

use crate::machinery::protobuf::message_for_kind;
use crate::machinery::type_facts::{facts, FieldFacts, FieldKind, MapValueKind, MessageFacts};

/// The media type of CBOR objects.
pub const MEDIA_TYPE: &str = "application/cbor";
/// The media type of a CBOR watch stream: a CBOR sequence of watch events.
pub const SEQ_MEDIA_TYPE: &str = "application/cbor-seq";
/// The media type of a CBOR server-side apply configuration.
pub const APPLY_PATCH: &str = "application/apply-patch+cbor";
/// The head of the self-described CBOR tag (55799) that opens every encoded object.
pub const SELF_DESCRIBED: [u8; 3] = [0xd9, 0xd9, 0xf7];
/// The deepest nesting of arrays, maps and tags the decoder accepts (kube's `MaxNestedLevels`).
pub const MAX_DEPTH: usize = 64;
/// The most elements of an array, or pairs of a map, the decoder accepts (kube's
/// `MaxArrayElements` and `MaxMapPairs`).
pub const MAX_ENTRIES: usize = 1024;

/// Why a body is not acceptable CBOR, worded as kube-apiserver's decoder words it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CborError {
    /// The input ended inside a data item.
    #[error("unexpected EOF")]
    UnexpectedEof,
    /// Bytes follow the one data item.
    #[error("cbor: {0} bytes of extraneous data starting at index {1}")]
    Extraneous(usize, usize),
    /// Not well-formed CBOR.
    #[error("cbor: {0}")]
    Malformed(String),
    /// Arrays, maps and tags nested deeper than [`MAX_DEPTH`].
    #[error("cbor: exceeded max nested level {MAX_DEPTH}")]
    TooDeep,
    /// An array of more than [`MAX_ENTRIES`] elements.
    #[error("cbor: exceeded max number of elements {MAX_ENTRIES} for CBOR array")]
    TooManyElements,
    /// A map of more than [`MAX_ENTRIES`] pairs.
    #[error("cbor: exceeded max number of key-value pairs {MAX_ENTRIES} for CBOR map")]
    TooManyPairs,
    /// A map key seen twice (the key, the index of its second pair).
    #[error("cbor: found duplicate map key \"{0}\" at map element index {1}")]
    DuplicateKey(String, usize),
    /// A text string that is not UTF-8.
    #[error("cbor: invalid UTF-8 string")]
    InvalidUtf8,
    /// NaN or an infinity (`"NaN"` or `"infinity"`), which JSON cannot hold.
    #[error("cbor: data item of cbor type primitives is not accepted by protocol: floating-point {0}")]
    Float(&'static str),
    /// A data item that has no place in an object (the CBOR type, the Go type wanted, why).
    #[error("cbor: cannot unmarshal {0} into Go value of type {1}{2}")]
    Unmarshal(&'static str, &'static str, String),
}

impl CborError {
    /// Whether the error is one of well-formedness or of the decoder's limits, which
    /// kube-apiserver finds before it can read the object's `apiVersion` and `kind`.
    pub fn is_structural(&self) -> bool {
        matches!(
            self,
            CborError::UnexpectedEof
                | CborError::Extraneous(..)
                | CborError::Malformed(_)
                | CborError::TooDeep
                | CborError::TooManyElements
                | CborError::TooManyPairs
        )
    }
}

impl From<minicbor::decode::Error> for CborError {
    fn from(e: minicbor::decode::Error) -> Self {
        if e.is_end_of_input() {
            CborError::UnexpectedEof
        } else {
            CborError::Malformed(e.to_string())
        }
    }
}

/// What the type facts say a value is, as far as CBOR cares: `[]byte` (raw bytes under tag 22
/// in CBOR, base64 in JSON), a built-in message whose fields may be, or anything else.
#[derive(Clone, Copy)]
pub enum Shape {
    /// No known `[]byte` anywhere in it.
    Any,
    /// A `[]byte` field.
    Bytes,
    /// A list of `[]byte`.
    BytesList,
    /// A `map[string][]byte`.
    BytesMap,
    /// A built-in message.
    Message(&'static MessageFacts),
    /// A list of a built-in message.
    MessageList(&'static MessageFacts),
    /// A map of a built-in message.
    MessageMap(&'static MessageFacts),
}

impl Shape {
    /// The shape of an object of `kind` in `api_version`: its message when it is a built-in
    /// type, else [`Shape::Any`] (custom resources are unstructured: their strings stay strings).
    pub fn of_kind(api_version: &str, kind: &str) -> Shape {
        message_for_kind(api_version, kind)
            .and_then(|name| facts().message(name))
            .map_or(Shape::Any, message_shape)
    }

    /// The shape of an object, from its own `apiVersion` and `kind`.
    pub fn of(value: &Value) -> Shape {
        let text = |f: &str| value.get(f).and_then(Value::as_str).unwrap_or_default();
        Shape::of_kind(text("apiVersion"), text("kind"))
    }

    /// The shape of the value of `key` in a value of this shape.
    fn field(self, key: &str) -> Shape {
        match self {
            Shape::Message(m) => field_of(m, key).map_or(Shape::Any, field_shape),
            Shape::BytesMap => Shape::Bytes,
            Shape::MessageMap(m) => message_shape(m),
            _ => Shape::Any,
        }
    }

    /// The shape of the items of a list of this shape.
    fn item(self) -> Shape {
        match self {
            Shape::BytesList => Shape::Bytes,
            Shape::MessageList(m) => message_shape(m),
            _ => Shape::Any,
        }
    }
}

/// A message's shape; messages that hold arbitrary JSON in a `raw` bytes field
/// (`RawExtension`, `FieldsV1`, apiextensions' `JSON`) are [`Shape::Any`] in JSON and CBOR.
fn message_shape(m: &'static MessageFacts) -> Shape {
    if m.fields
        .iter()
        .any(|f| f.name == "raw" && f.kind == FieldKind::Bytes)
    {
        Shape::Any
    } else {
        Shape::Message(m)
    }
}

/// The field of `m` named `key` in JSON, looking into inlined (embedded) messages too.
fn field_of(m: &'static MessageFacts, key: &str) -> Option<&'static FieldFacts> {
    m.fields.iter().find(|f| !f.inline && f.name == key).or_else(|| {
        m.fields
            .iter()
            .filter(|f| f.inline)
            .filter_map(|f| f.message.as_deref().and_then(|name| facts().message(name)))
            .find_map(|inner| field_of(inner, key))
    })
}

/// The shape of a field's value.
fn field_shape(f: &'static FieldFacts) -> Shape {
    let message = f
        .message
        .as_deref()
        .and_then(|name| facts().message(name))
        .map(message_shape);
    match (f.kind, f.value, f.repeated, message) {
        (FieldKind::Bytes, _, false, _) => Shape::Bytes,
        (FieldKind::Bytes, _, true, _) => Shape::BytesList,
        (FieldKind::Map, Some(MapValueKind::Bytes), _, _) => Shape::BytesMap,
        (FieldKind::Map, Some(MapValueKind::Message), _, Some(Shape::Message(m))) => Shape::MessageMap(m),
        (FieldKind::Message, _, true, Some(Shape::Message(m))) => Shape::MessageList(m),
        (FieldKind::Message, _, false, Some(shape)) => shape,
        _ => Shape::Any,
    }
}

/// Encodes an object as a CBOR object: the self-described tag, then the value, its `[]byte`
/// fields found from its own `apiVersion` and `kind`.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&SELF_DESCRIBED);
    write_shaped(&mut out, value, Shape::of(value));
    out
}

/// Encodes a value of `shape` without the self-described tag (an item nested in a larger
/// encoding, such as a list item, which has no `kind` of its own).
pub fn encode_item(value: &Value, shape: Shape) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_shaped(&mut out, value, shape);
    out
}

/// A list's CBOR around its `count` items, for writing the already encoded items (each an
/// [`encode_item`], or a whole object without its tag) in between: the tag and the list's own
/// fields from `body` (its `items` ignored) in sorted order, split where the items go. The
/// array is of definite length, as kube-apiserver writes it.
pub fn list_frame(body: &Value, count: usize) -> (Vec<u8>, Vec<u8>) {
    let (mut before, mut after) = (Vec::with_capacity(256), Vec::with_capacity(256));
    before.extend_from_slice(&SELF_DESCRIBED);
    let empty = Map::new();
    let fields = body.as_object().unwrap_or(&empty);
    let mut keys: Vec<&str> = fields
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "items")
        .collect();
    keys.push("items");
    sort_keys(&mut keys);
    head(&mut before, 5, keys.len() as u64);
    let mut past_items = false;
    for key in keys {
        let out = if past_items { &mut after } else { &mut before };
        write_bytes(out, key.as_bytes());
        if key == "items" {
            head(out, 4, count as u64);
            past_items = true;
        } else {
            write_value(out, &fields[key]);
        }
    }
    (before, after)
}

/// A watch event (`metav1.WatchEvent`) around an already encoded object (with its own
/// self-described tag, as kube embeds it): `{"type": …, "object": …}` in sorted key order.
pub fn watch_event(kind: &str, object: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(object.len() + kind.len() + 20);
    out.extend_from_slice(&SELF_DESCRIBED);
    head(&mut out, 5, 2);
    write_bytes(&mut out, b"type");
    write_bytes(&mut out, kind.as_bytes());
    write_bytes(&mut out, b"object");
    out.extend_from_slice(object);
    out
}

/// Sorts map keys as their byte string encodings sort: shorter first, then bytewise.
fn sort_keys(keys: &mut [&str]) {
    keys.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
}

/// Writes a value of `shape`: `[]byte` fields as tag 22 around their raw bytes.
fn write_shaped(out: &mut Vec<u8>, value: &Value, shape: Shape) {
    match (shape, value) {
        (Shape::Any, _) => write_value(out, value),
        (Shape::Bytes, Value::String(text)) => match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(raw) => {
                head(out, 6, 22);
                write_bytes(out, &raw);
            }
            Err(_) => write_value(out, value),
        },
        (_, Value::Array(items)) => {
            head(out, 4, items.len() as u64);
            for item in items {
                write_shaped(out, item, shape.item());
            }
        }
        (_, Value::Object(fields)) => {
            let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
            sort_keys(&mut keys);
            head(out, 5, keys.len() as u64);
            for key in keys {
                write_bytes(out, key.as_bytes());
                write_shaped(out, &fields[key], shape.field(key));
            }
        }
        _ => write_value(out, value),
    }
}

/// Writes a data item's head: major type and argument, in the shortest form.
fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    match n {
        0..=23 => out.push(m | n as u8),
        24..=0xff => out.extend_from_slice(&[m | 24, n as u8]),
        0x100..=0xffff => {
            out.push(m | 25);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(m | 26);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        _ => {
            out.push(m | 27);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    head(out, 2, b.len() as u64);
    out.extend_from_slice(b);
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.push(0xf6),
        Value::Bool(b) => out.push(if *b { 0xf5 } else { 0xf4 }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_bytes(out, s.as_bytes()),
        Value::Array(items) => {
            head(out, 4, items.len() as u64);
            for item in items {
                write_value(out, item);
            }
        }
        Value::Object(fields) => {
            let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
            sort_keys(&mut keys);
            head(out, 5, keys.len() as u64);
            for key in keys {
                write_bytes(out, key.as_bytes());
                write_value(out, &fields[key]);
            }
        }
    }
}

/// Integers as integers; floats in the shortest of half, single and double precision that
/// holds them exactly (kube's `ShortestFloat16`).
fn write_number(out: &mut Vec<u8>, n: &Number) {
    if let Some(u) = n.as_u64() {
        head(out, 0, u);
    } else if let Some(i) = n.as_i64() {
        // A negative integer n is encoded as -1 - n.
        head(out, 1, !(i as u64));
    } else {
        let x = n.as_f64().unwrap_or_default();
        let single = x as f32;
        let mut enc = Encoder::new(Vec::with_capacity(9));
        let written = if f64::from(single) == x {
            if half::f16::from_f32(single).to_f32() == single {
                enc.f16(single)
            } else {
                enc.f32(single)
            }
        } else {
            enc.f64(x)
        };
        // Writing to a Vec cannot fail.
        if written.is_ok() {
            out.extend_from_slice(enc.writer());
        }
    }
}

/// Decodes one CBOR data item (the whole body) into a JSON value; an object of a built-in type
/// (by its `apiVersion` and `kind`) has its `[]byte` fields' byte strings turned into base64.
pub fn decode(body: &[u8]) -> Result<Value, CborError> {
    let (api_version, kind) = read_type_fields(&mut Decoder::new(body)).unwrap_or_default();
    let mut d = Decoder::new(body);
    let value = read_value(&mut d, 0, Shape::of_kind(&api_version, &kind))?;
    let end = d.position();
    if end < body.len() {
        return Err(CborError::Extraneous(body.len() - end, end));
    }
    Ok(value)
}

/// The `apiVersion` and `kind` of a CBOR object, read as kube-apiserver's meta factory reads
/// them before decoding the rest: the whole body checked for well-formedness and the decoder's
/// limits first, then the top-level keys (refusing duplicates among them) and the values of
/// these two, other values skipped unchecked. Empty when absent.
pub fn type_meta(body: &[u8]) -> Result<(String, String), CborError> {
    let mut d = Decoder::new(body);
    skip_value(&mut d, 0)?;
    if d.position() < body.len() {
        return Err(CborError::Extraneous(body.len() - d.position(), d.position()));
    }
    d.set_position(0);
    read_type_fields(&mut d)
}

/// Reads the top-level keys of the object at `d`: the values of `apiVersion` and `kind`,
/// other values skipped unchecked; a duplicate key is an error.
fn read_type_fields(d: &mut Decoder<'_>) -> Result<(String, String), CborError> {
    let mut found = (String::new(), String::new());
    while d.datatype()? == Type::Tag {
        d.tag()?;
    }
    if !matches!(d.datatype()?, Type::Map | Type::MapIndef) {
        return Ok(found);
    }
    let len = d.map()?;
    let mut seen = std::collections::HashSet::new();
    let mut index = 0;
    while next_entry(d, len, index)? {
        let key = read_key(d)?;
        match (key.as_str(), d.datatype()?) {
            ("apiVersion" | "kind", Type::String | Type::StringIndef | Type::Bytes | Type::BytesIndef) => {
                if let Value::String(v) = read_value(d, MAX_DEPTH, Shape::Any)? {
                    if key == "kind" {
                        found.1 = v;
                    } else {
                        found.0 = v;
                    }
                }
            }
            _ => skip_value(d, 1)?,
        }
        if !seen.insert(key.clone()) {
            return Err(CborError::DuplicateKey(key, index));
        }
        index += 1;
    }
    Ok(found)
}

/// Steps over one data item, checking that it is well-formed and within the decoder's limits
/// but not what it holds (text strings are not checked for UTF-8 here).
fn skip_value(d: &mut Decoder<'_>, depth: usize) -> Result<(), CborError> {
    match d.datatype()? {
        Type::String => skip_text(d),
        Type::StringIndef => {
            d.set_position(d.position() + 1);
            while d.datatype()? != Type::Break {
                if d.datatype()? != Type::String {
                    return Err(CborError::Malformed(
                        "wrong element type for indefinite-length UTF-8 text string".into(),
                    ));
                }
                skip_text(d)?;
            }
            d.set_position(d.position() + 1);
            Ok(())
        }
        t @ (Type::Array | Type::ArrayIndef | Type::Map | Type::MapIndef) => {
            if depth >= MAX_DEPTH {
                return Err(CborError::TooDeep);
            }
            let map = matches!(t, Type::Map | Type::MapIndef);
            let (len, too_many) = if map {
                (d.map()?, CborError::TooManyPairs)
            } else {
                (d.array()?, CborError::TooManyElements)
            };
            if len.is_some_and(|n| n > MAX_ENTRIES as u64) {
                return Err(too_many);
            }
            let mut index = 0;
            while next_entry(d, len, index)? {
                if index == MAX_ENTRIES {
                    return Err(too_many);
                }
                if map {
                    skip_value(d, depth + 1)?;
                }
                skip_value(d, depth + 1)?;
                index += 1;
            }
            Ok(())
        }
        Type::Tag => {
            if depth >= MAX_DEPTH {
                return Err(CborError::TooDeep);
            }
            d.tag()?;
            skip_value(d, depth + 1)
        }
        Type::Break => Err(CborError::Malformed("unexpected \"break\" code".into())),
        Type::Unknown(b) => Err(unknown(b)),
        _ => Ok(d.skip()?),
    }
}

/// Steps over a definite-length text string without reading it as UTF-8, its length checked
/// against the bytes present.
fn skip_text(d: &mut Decoder<'_>) -> Result<(), CborError> {
    let input = d.input();
    let at = d.position();
    let info = input.get(at).map(|b| b & 0x1f).ok_or(CborError::UnexpectedEof)?;
    let (head, len) = match info {
        0..=23 => (1, u64::from(info)),
        24..=27 => {
            let width = 1usize << (info - 24);
            let arg = input
                .get(at + 1..at + 1 + width)
                .ok_or(CborError::UnexpectedEof)?;
            (1 + width, arg.iter().fold(0u64, |n, b| (n << 8) | u64::from(*b)))
        }
        _ => return Err(unknown(input[at])),
    };
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| (at + head).checked_add(len))
        .filter(|end| *end <= input.len())
        .ok_or(CborError::UnexpectedEof)?;
    d.set_position(end);
    Ok(())
}

/// The error of an initial byte with reserved additional information.
fn unknown(b: u8) -> CborError {
    CborError::Malformed(format!(
        "invalid additional information {} for type {}",
        b & 0x1f,
        type_name_of_major(b >> 5)
    ))
}

/// The name of a CBOR type as kube's decoder names it in errors.
fn type_name(t: Type) -> &'static str {
    match t {
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => "positive integer",
        Type::I8 | Type::I16 | Type::I32 | Type::I64 | Type::Int => "negative integer",
        Type::Bytes | Type::BytesIndef => "byte string",
        Type::String | Type::StringIndef => "UTF-8 text string",
        Type::Array | Type::ArrayIndef => "array",
        Type::Map | Type::MapIndef => "map",
        Type::Tag => "tag",
        _ => "primitives",
    }
}

/// A map key: a text or byte string.
fn read_key(d: &mut Decoder<'_>) -> Result<String, CborError> {
    match d.datatype()? {
        Type::String | Type::StringIndef => read_text(d),
        Type::Bytes | Type::BytesIndef => Ok(String::from_utf8_lossy(&read_byte_string(d)?).into_owned()),
        other => Err(CborError::Unmarshal(type_name(other), "string", String::new())),
    }
}

/// A text string, checked to be UTF-8.
fn read_text(d: &mut Decoder<'_>) -> Result<String, CborError> {
    let utf8 = |e: minicbor::decode::Error| {
        if e.is_end_of_input() {
            CborError::UnexpectedEof
        } else if e.is_type_mismatch() {
            CborError::Malformed("wrong element type for indefinite-length UTF-8 text string".into())
        } else {
            CborError::InvalidUtf8
        }
    };
    if d.datatype()? == Type::String {
        return d.str().map(str::to_string).map_err(utf8);
    }
    let mut s = String::new();
    for chunk in d.str_iter().map_err(utf8)? {
        s.push_str(chunk.map_err(utf8)?);
    }
    Ok(s)
}

/// A byte string's bytes, concatenating the chunks of an indefinite one.
fn read_byte_string(d: &mut Decoder<'_>) -> Result<Vec<u8>, CborError> {
    if d.datatype()? == Type::Bytes {
        return Ok(d.bytes()?.to_vec());
    }
    let mut b = Vec::new();
    for chunk in d.bytes_iter()? {
        b.extend_from_slice(chunk?);
    }
    Ok(b)
}

/// One entry of a container: `None` at the end of an indefinite-length one.
fn next_entry(d: &mut Decoder<'_>, len: Option<u64>, index: usize) -> Result<bool, CborError> {
    match len {
        Some(n) => Ok((index as u64) < n),
        None if d.datatype()? == Type::Break => {
            d.set_position(d.position() + 1);
            Ok(false)
        }
        None => Ok(true),
    }
}

fn read_value(d: &mut Decoder<'_>, depth: usize, shape: Shape) -> Result<Value, CborError> {
    let t = d.datatype()?;
    Ok(match t {
        Type::Bool => Value::Bool(d.bool()?),
        Type::Null => {
            d.null()?;
            Value::Null
        }
        Type::Undefined => {
            d.undefined()?;
            Value::Null
        }
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => {
            let u = d.u64()?;
            if u > i64::MAX as u64 {
                return Err(CborError::Unmarshal(
                    "positive integer",
                    "int64",
                    format!(" ({u} overflows Go's int64)"),
                ));
            }
            Value::from(u)
        }
        Type::I8 | Type::I16 | Type::I32 | Type::I64 => Value::from(d.i64()?),
        Type::Int => {
            let n = d.int()?;
            return Err(CborError::Unmarshal(
                "negative integer",
                "int64",
                format!(" ({n} overflows Go's int64)"),
            ));
        }
        Type::F16 | Type::F32 | Type::F64 => {
            let x = d.f64()?;
            if x.is_nan() {
                return Err(CborError::Float("NaN"));
            }
            Number::from_f64(x)
                .map(Value::Number)
                .ok_or(CborError::Float("infinity"))?
        }
        Type::Bytes | Type::BytesIndef => {
            let raw = read_byte_string(d)?;
            Value::String(match shape {
                Shape::Bytes => base64::engine::general_purpose::STANDARD.encode(&raw),
                _ => String::from_utf8_lossy(&raw).into_owned(),
            })
        }
        Type::String | Type::StringIndef => Value::String(read_text(d)?),
        Type::Array | Type::ArrayIndef => {
            if depth >= MAX_DEPTH {
                return Err(CborError::TooDeep);
            }
            let len = d.array()?;
            if len.is_some_and(|n| n > MAX_ENTRIES as u64) {
                return Err(CborError::TooManyElements);
            }
            let mut items = Vec::with_capacity(len.unwrap_or(0) as usize);
            while next_entry(d, len, items.len())? {
                if items.len() == MAX_ENTRIES {
                    return Err(CborError::TooManyElements);
                }
                items.push(read_value(d, depth + 1, shape.item())?);
            }
            Value::Array(items)
        }
        Type::Map | Type::MapIndef => {
            if depth >= MAX_DEPTH {
                return Err(CborError::TooDeep);
            }
            let len = d.map()?;
            if len.is_some_and(|n| n > MAX_ENTRIES as u64) {
                return Err(CborError::TooManyPairs);
            }
            let mut fields = Map::new();
            let mut index = 0;
            while next_entry(d, len, index)? {
                if index == MAX_ENTRIES {
                    return Err(CborError::TooManyPairs);
                }
                let key = read_key(d)?;
                let value = read_value(d, depth + 1, shape.field(&key))?;
                if fields.contains_key(&key) {
                    return Err(CborError::DuplicateKey(key, index));
                }
                fields.insert(key, value);
                index += 1;
            }
            Value::Object(fields)
        }
        Type::Tag => {
            if depth >= MAX_DEPTH {
                return Err(CborError::TooDeep);
            }
            let tag: Tag = d.tag()?;
            let number = u64::from(tag);
            let content = d.datatype()?;
            match number {
                21..=23 if matches!(content, Type::Bytes | Type::BytesIndef) => {
                    let raw = read_byte_string(d)?;
                    Value::String(match number {
                        21 => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw),
                        22 => base64::engine::general_purpose::STANDARD.encode(&raw),
                        _ => raw.iter().map(|b| format!("{b:02x}")).collect(),
                    })
                }
                // Self-described CBOR (55799) and every other tag: the content, as kube's
                // decoder takes unrecognized tags.
                _ => read_value(d, depth + 1, shape)?,
            }
        }
        Type::Simple => {
            return Err(CborError::Unmarshal(
                "primitives",
                "interface {}",
                format!(" (simple value {})", d.simple()?),
            ))
        }
        Type::Break => return Err(CborError::Malformed("unexpected \"break\" code".into())),
        Type::Unknown(b) => return Err(unknown(b)),
    })
}

fn type_name_of_major(major: u8) -> &'static str {
    match major {
        0 => "positive integer",
        1 => "negative integer",
        2 => "byte string",
        3 => "UTF-8 text string",
        4 => "array",
        5 => "map",
        6 => "tag",
        _ => "primitives",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_encode_with_the_profile_and_decode_back() {
        let pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"priority": -5, "n": 70000, "ratio": 0.5, "big": 1.1, "x": null, "t": true, "l": []}});
        let bytes = encode(&pod);
        assert_eq!(&bytes[..3], &SELF_DESCRIBED);
        // Sorted keys: `kind` (4 bytes) before `spec`, `metadata` and `apiVersion`; strings
        // are byte strings.
        assert_eq!(&bytes[3..9], &[0xa4, 0x44, b'k', b'i', b'n', b'd']);
        assert_eq!(&bytes[9..13], &[0x43, b'P', b'o', b'd']);
        assert_eq!(decode(&bytes).unwrap(), pod);
        // Shortest floats: 0.5 in half precision, 1.1 in double.
        assert_eq!(encode_item(&json!(0.5), Shape::Any), vec![0xf9, 0x38, 0x00]);
        assert_eq!(encode_item(&json!(1.1), Shape::Any)[0], 0xfb);
        assert_eq!(encode_item(&json!(-1), Shape::Any), vec![0x20]);
        assert_eq!(encode_item(&json!(100000.0), Shape::Any)[0], 0xfa);
    }

    #[test]
    fn lists_and_watch_events_splice_encoded_items() {
        let item = encode_item(&json!({"metadata": {"name": "a"}}), Shape::Any);
        let (before, after) = list_frame(
            &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"}, "items": []}),
            1,
        );
        let list = [before, item, after].concat();
        let whole = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "5"},
            "items": [{"metadata": {"name": "a"}}]});
        assert_eq!(list, encode(&whole));
        let event = watch_event("ADDED", &encode(&json!({"kind": "Pod"})));
        assert_eq!(
            decode(&event).unwrap(),
            json!({"type": "ADDED", "object": {"kind": "Pod"}})
        );
    }

    #[test]
    fn byte_fields_of_built_in_types_are_raw_bytes_under_tag_22() {
        let secret = json!({"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"},
            "data": {"k": "aGk="}, "type": "Opaque"});
        let bytes = encode(&secret);
        // "data": {"k": 22("hi")}
        let data = [
            0x44, b'd', b'a', b't', b'a', 0xa1, 0x41, b'k', 0xd6, 0x42, b'h', b'i',
        ];
        let at = bytes.windows(data.len()).position(|w| w == data);
        assert!(at.is_some(), "{bytes:02x?}");
        assert_eq!(decode(&bytes).unwrap(), secret);
        // An untagged byte string at a []byte field is its raw bytes too (what cbor2 writes).
        let mut untagged = bytes.clone();
        untagged.remove(at.unwrap() + 8);
        assert_eq!(decode(&untagged).unwrap(), secret);
        // A list's items; a custom resource's strings stay strings.
        let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": [{"data": {"k": "aGk="}}]});
        assert!(encode(&list).windows(data.len()).any(|w| w == data));
        let custom = json!({"kind": "Secret", "apiVersion": "example.com/v1", "data": {"k": "aGk="}});
        assert!(!encode(&custom).windows(data.len()).any(|w| w == data));
        // managedFields' fieldsV1 is arbitrary JSON, not bytes.
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"managedFields": [{"fieldsV1": {"f:data": {}}}]}});
        assert_eq!(decode(&encode(&cm)).unwrap(), cm);
    }

    #[test]
    fn the_decoder_refuses_what_kube_refuses() {
        // {"a": 1, "a": 2}
        assert_eq!(
            decode(&[0xa2, 0x61, b'a', 1, 0x61, b'a', 2])
                .unwrap_err()
                .to_string(),
            "cbor: found duplicate map key \"a\" at map element index 1"
        );
        assert_eq!(decode(&[0x62, 0xc3, 0x28]).unwrap_err(), CborError::InvalidUtf8);
        assert_eq!(decode(&[0xf9, 0x7e, 0x00]).unwrap_err(), CborError::Float("NaN"));
        assert_eq!(
            decode(&[0xf9, 0x7c, 0x00]).unwrap_err(),
            CborError::Float("infinity")
        );
        let deep: Vec<u8> = std::iter::repeat_n(0x81, 65).chain([0x01]).collect();
        assert_eq!(decode(&deep).unwrap_err(), CborError::TooDeep);
        let shallow: Vec<u8> = std::iter::repeat_n(0x81, 64).chain([0x01]).collect();
        assert!(decode(&shallow).is_ok());
        // A byte string claiming 4 GiB, and an array claiming 2^32 elements.
        assert_eq!(
            decode(&[0x5a, 0xff, 0xff, 0xff, 0xff, 0]).unwrap_err(),
            CborError::UnexpectedEof
        );
        assert_eq!(
            decode(&[0x9a, 0xff, 0xff, 0xff, 0xff]).unwrap_err(),
            CborError::TooManyElements
        );
        let indefinite: Vec<u8> = [0x9f]
            .into_iter()
            .chain(std::iter::repeat_n(0x01, 1025))
            .chain([0xff])
            .collect();
        assert_eq!(decode(&indefinite).unwrap_err(), CborError::TooManyElements);
        assert_eq!(
            decode(&[0x01, 0x02]).unwrap_err().to_string(),
            "cbor: 1 bytes of extraneous data starting at index 1"
        );
        assert_eq!(decode(&[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).unwrap_err().to_string(),
            "cbor: cannot unmarshal positive integer into Go value of type int64 (18446744073709551615 overflows Go's int64)");
        assert!(decode(&[0xa1, 0x01, 0x02]).is_err());
        assert_eq!(decode(&[]).unwrap_err(), CborError::UnexpectedEof);
    }

    #[test]
    fn the_decoder_accepts_what_other_encoders_write() {
        // Indefinite-length map and text, the self-described tag, tag 22 bytes.
        let body = [
            0xd9, 0xd9, 0xf7, 0xbf, 0x7f, 0x61, b'a', 0x61, b'b', 0xff, 0xd6, 0x42, 0x68, 0x69, 0xff,
        ];
        assert_eq!(decode(&body).unwrap(), json!({"ab": "aGk="}));
        assert_eq!(
            type_meta(&encode(
                &json!({"spec": {"a": [1]}, "kind": "Pod", "apiVersion": "v1"})
            )),
            Ok(("v1".to_string(), "Pod".to_string()))
        );
        // {"kind": "a", "kind": "b"}: a duplicate among the top-level keys.
        let twice = [
            0xa2, 0x44, b'k', b'i', b'n', b'd', 0x41, b'a', 0x44, b'k', b'i', b'n', b'd', 0x41, b'b',
        ];
        assert_eq!(type_meta(&twice), Err(CborError::DuplicateKey("kind".into(), 1)));
        // {"a": "\xc3\x28", "b": [[...65 deep...]]}: the depth is found before the type is read,
        // the invalid text is not.
        let mut late: Vec<u8> = vec![0xa2, 0x41, b'a', 0x62, 0xc3, 0x28, 0x41, b'b'];
        late.extend(std::iter::repeat_n(0x81, 65));
        late.push(0x01);
        assert_eq!(decode(&late).unwrap_err(), CborError::InvalidUtf8);
        assert_eq!(type_meta(&late).unwrap_err(), CborError::TooDeep);
        assert_eq!(type_meta(&late[..8]), Err(CborError::UnexpectedEof));
    }
}
