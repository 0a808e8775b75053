//! Rendering a verb's reply in the negotiated representation: JSON, CBOR and protobuf (lists
//! streamed from the cached objects' shared encodings), YAML, Table and PartialObjectMetadata,
//! with `Warning` headers.

use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use super::discovery;
use super::list_body::ListBody;
use axum::http::HeaderMap;

use super::negotiation::{negotiate, Format, Offer};
use crate::endpoints::table;
use crate::machinery::cbor;
use crate::machinery::errors::{ApiError, ApiResult, ResponseStatus};
use crate::machinery::go_json;
use crate::machinery::meta;
use crate::machinery::protobuf;
use crate::machinery::query::Query;
use crate::registry::reply::{strip_type, Reply};
use crate::registry::ResourceRequest;
use crate::store::cacher;

/// JSON as kube-apiserver's serializer writes it: compact with a newline after the object
/// (Go's `json.Encoder`), or indented without one (`json.MarshalIndent`, for `pretty`).
pub fn json_bytes<T: Serialize + ?Sized>(body: &T, pretty: bool) -> serde_json::Result<Vec<u8>> {
    let mut bytes = go_json::encode(body, pretty)?;
    if !pretty {
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// A value's JSON as kube-apiserver writes it ([`json_bytes`]), the documents kuberaft builds
/// itself (Status, Table, Scale, reviews) in kube's field order.
pub fn value_json_bytes(body: &Value, pretty: bool) -> serde_json::Result<Vec<u8>> {
    match go_json::shape_of(body) {
        Some(shape) => json_bytes(&go_json::Ordered(body, shape), pretty),
        None => json_bytes(body, pretty),
    }
}

/// Renders a document kuberaft builds itself as a typed struct (discovery) in `wire`: JSON keeps
/// the struct's field order, which is kube's; YAML, protobuf and CBOR go through the value
/// (YAML and CBOR sort keys, as kube-apiserver's encoders do). An aggregated discovery document
/// (`format`) answers with its own media type, in JSON or protobuf.
pub fn render_document<T: Serialize>(
    code: u16,
    doc: &T,
    format: Format,
    wire: Format,
    pretty: bool,
) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    match (format, wire) {
        (Format::AggregatedDiscovery(version), Format::Protobuf) => {
            let encoded = serde_json::to_value(doc)
                .map_err(|e| e.to_string())
                .and_then(|v| protobuf::encode_object(&v).map_err(|e| e.to_string()));
            match encoded {
                Ok(bytes) => (
                    status,
                    [
                        (
                            header::CONTENT_TYPE,
                            discovery::aggregated_content_type(protobuf::MEDIA_TYPE, version),
                        ),
                        (header::VARY, "Accept".to_string()),
                    ],
                    bytes,
                )
                    .into_response(),
                Err(e) => ApiError::internal(e).into_response(),
            }
        }
        (_, Format::Yaml | Format::Protobuf | Format::Cbor) => match serde_json::to_value(doc) {
            Ok(mut value) => {
                // `APIVersions` is written without `apiVersion` in JSON; the protobuf envelope
                // names the group version discovery types are registered in.
                if wire == Format::Protobuf && value.get("apiVersion").is_none() {
                    value["apiVersion"] = Value::from("v1");
                }
                render(code, &value, wire, pretty)
            }
            Err(e) => ApiError::internal(e.to_string()).into_response(),
        },
        _ => match json_bytes(doc, pretty) {
            Ok(b) => json_response(code, b, format),
            Err(e) => ApiError::internal(e.to_string()).into_response(),
        },
    }
}

/// JSON bytes as a response: an aggregated discovery document with its own media type (and
/// `Vary: Accept`, since `/api` and `/apis` answer two forms), anything else as
/// `application/json`.
fn json_response(code: u16, bytes: Vec<u8>, format: Format) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    match format {
        Format::AggregatedDiscovery(version) => (
            code,
            [
                (
                    header::CONTENT_TYPE,
                    discovery::aggregated_content_type("application/json", version),
                ),
                (header::VARY, "Accept".to_string()),
            ],
            bytes,
        )
            .into_response(),
        _ => (code, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
    }
}

/// Renders a value in the negotiated representation.
pub fn render(code: u16, body: &Value, format: Format, pretty: bool) -> Response {
    match format {
        Format::Protobuf => {
            match protobuf::response(StatusCode::from_u16(code).unwrap_or(StatusCode::OK), body) {
                Some(r) => r,
                None => render(code, body, Format::Json, pretty),
            }
        }
        Format::Cbor => cbor_response(code, cbor::encode(body)),
        Format::Yaml => match yaml_serde::to_string(body) {
            Ok(s) => (
                StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
                [(header::CONTENT_TYPE, "application/yaml")],
                s,
            )
                .into_response(),
            Err(e) => ApiError::internal(e.to_string()).into_response(),
        },
        Format::Json | Format::Table(_) | Format::Metadata(_) | Format::AggregatedDiscovery(_) => {
            match value_json_bytes(body, pretty) {
                Ok(b) => json_response(code, b, format),
                Err(e) => ApiError::internal(e.to_string()).into_response(),
            }
        }
    }
}

/// CBOR bytes as an `application/cbor` response.
fn cbor_response(code: u16, bytes: impl Into<bytes::Bytes>) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    (code, [(header::CONTENT_TYPE, cbor::MEDIA_TYPE)], bytes.into()).into_response()
}

/// A `Warning` header value as kube-apiserver writes it: code 299, no agent, quoted text.
pub fn warning_header(text: &str) -> String {
    format!("299 - \"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Renders a reply in the negotiated representation.
pub fn respond(
    req: &ResourceRequest,
    q: &Query,
    reply: Reply,
    format: Format,
    wire: Format,
    pretty: bool,
) -> ApiResult<Response> {
    if let Format::Table(version) = format {
        let rows = match (&reply.table_rows, &reply.items, &reply.cached) {
            (Some((objects, rv)), _, _) => Some((objects.clone(), rv.clone())),
            (None, Some(items), _) => Some((
                items.iter().map(|o| o.value()).collect(),
                reply.body["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )),
            (None, None, Some(obj)) => Some((vec![obj.value()], obj.rv.to_string())),
            (None, None, None) => None,
        };
        if let Some((objects, rv)) = rows {
            let table = table_of(req, q, &reply, &objects, &rv, version)?;
            // JSON (in kube's field order) or YAML.
            let encoding = match wire {
                Format::Yaml => Format::Yaml,
                _ => format,
            };
            return Ok(render(reply.code, &table, encoding, pretty));
        }
    }
    if let Format::Metadata(version) = format {
        let mut body = match &reply.cached {
            Some(obj) => obj.value(),
            None => reply.body,
        };
        if let Some(items) = &reply.items {
            body["items"] = items.iter().map(|o| strip_type(o.value())).collect();
        }
        return Ok(render(
            reply.code,
            &meta::partial_object_metadata(body, version),
            wire,
            pretty,
        ));
    }
    match (reply.items, reply.cached) {
        (Some(items), _) => Ok(render_list(
            reply.code,
            reply.body,
            items,
            wire,
            pretty,
            req.rt.custom.is_some(),
        )),
        // A cached object in compact JSON: its shared encoding, not copied.
        (None, Some(obj)) if wire == Format::Json && !pretty => {
            let status = StatusCode::from_u16(reply.code).unwrap_or(StatusCode::OK);
            let mut json =
                bytes::BytesMut::with_capacity(obj.item_json().len() + obj.type_fields().len() + 3);
            obj.write_json(&mut json);
            json.extend_from_slice(b"\n");
            Ok((
                status,
                [(header::CONTENT_TYPE, "application/json")],
                json.freeze(),
            )
                .into_response())
        }
        // A cached object in CBOR: its shared encoding.
        (None, Some(obj)) if wire == Format::Cbor => Ok(cbor_response(reply.code, obj.cbor().clone())),
        (None, Some(obj)) => Ok(render(reply.code, &obj.value(), wire, pretty)),
        (None, None) => {
            let mut response = render(reply.code, &reply.body, wire, pretty);
            // A delete's success Status, for the audit log (errors carry theirs already).
            if let Some(status) = ResponseStatus::of(&reply.body) {
                response.extensions_mut().insert(status);
            }
            Ok(response)
        }
    }
}

/// A get or list as a Table.
fn table_of(
    req: &ResourceRequest,
    q: &Query,
    reply: &Reply,
    objects: &[Value],
    rv: &str,
    version: &'static str,
) -> ApiResult<Value> {
    let include = table::IncludeObject::parse(q.get("includeObject").map(String::as_str))?;
    let mut t = table::table(&req.rt, objects, rv, version, include);
    // A paged list's Table pages on like the list itself.
    for field in ["continue", "remainingItemCount"] {
        if let Some(v) = reply.body["metadata"].get(field) {
            t["metadata"][field] = v.clone();
        }
    }
    Ok(t)
}

/// Renders a list whose items are cached objects. Compact JSON, CBOR and protobuf are streamed
/// from each object's shared encodings ([`ListBody`]); other representations build the whole
/// value. Items of custom resources keep their `kind` and `apiVersion` (`typed`), as
/// kube-apiserver lists them.
fn render_list(
    code: u16,
    mut body: Value,
    items: Vec<Arc<cacher::CachedObject>>,
    format: Format,
    pretty: bool,
    typed: bool,
) -> Response {
    let items = match format {
        Format::Cbor => return ListBody::cbor(&body, items, typed).response(code, cbor::MEDIA_TYPE),
        Format::Protobuf if !typed => match ListBody::protobuf(&body, items.clone()) {
            Some(list) => return list.response(code, protobuf::MEDIA_TYPE),
            None => items,
        },
        _ => items,
    };
    if !matches!(format, Format::Json | Format::Protobuf) || pretty {
        body["items"] = items
            .iter()
            .map(|o| if typed { o.value() } else { strip_type(o.value()) })
            .collect();
        return render(code, &body, format, pretty);
    }
    // JSON, and protobuf for lists without a protobuf form, which clients asking for protobuf
    // accept as JSON.
    match ListBody::json(&body, items, typed) {
        Ok(list) => list.response(code, "application/json"),
        Err(_) => ApiError::internal("cannot encode a list").into_response(),
    }
}

/// The representation errors answer in: protobuf or CBOR when the client prefers protobuf or
/// CBOR objects (as kube-apiserver negotiates its `Status` responses), else JSON.
pub fn error_format(headers: &HeaderMap) -> Format {
    match negotiate(headers, Offer::Resource) {
        Ok(f @ (Format::Protobuf | Format::Cbor)) => f,
        _ => Format::Json,
    }
}

/// An error as a `Status` in `format` (see [`error_format`]), keeping its code and headers.
pub fn error_response(e: ApiError, format: Format) -> Response {
    match format {
        Format::Protobuf => protobuf::error_response(e),
        Format::Cbor => {
            let bytes = cbor::encode(&e.body());
            let (mut parts, _) = e.into_response().into_parts();
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(cbor::MEDIA_TYPE),
            );
            Response::from_parts(parts, axum::body::Body::from(bytes))
        }
        _ => e.into_response(),
    }
}
