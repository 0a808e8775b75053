//! Reading a request body: its media type and its bytes, bounded by kube-apiserver's limit, and
//! the bodies other encodings carry (protobuf or CBOR options, a CBOR apply configuration)
//! turned into the JSON the verbs read.

use axum::body::Body;
use axum::http::{header, HeaderMap};

use crate::machinery::cbor;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::protobuf;
use crate::registry::update::PatchType;

/// Largest request body accepted (kube-apiserver's limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The media type of a request body.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// The request body, refused with `413` past [`MAX_BODY_BYTES`] (by its declared length first).
pub async fn read_body(headers: &HeaderMap, body: Body) -> ApiResult<bytes::Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(ApiError::too_large(MAX_BODY_BYTES));
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::too_large(MAX_BODY_BYTES))
}

/// A JSON, protobuf or CBOR body (options, such as a delete's) as JSON.
pub fn json_body(content_type: &str, body: bytes::Bytes) -> ApiResult<bytes::Bytes> {
    if content_type != cbor::MEDIA_TYPE || body.is_empty() {
        return protobuf::json_body(content_type, body);
    }
    cbor_as_json(&body)
}

/// A CBOR body as JSON, refused with the CBOR decoder's words (as kube-apiserver refuses the
/// bodies it decodes without a type: options, apply configurations).
fn cbor_as_json(body: &[u8]) -> ApiResult<bytes::Bytes> {
    let value = cbor::decode(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    serde_json::to_vec(&value)
        .map(Into::into)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// The patch type of a PATCH body's media type; `415` listing the types kube-apiserver takes
/// for the resource (`strategic`: a built-in type, which also takes strategic merge patches).
/// JSON patches, merge patches and strategic merge patches have no CBOR form.
pub fn patch_type(media_type: &str, strategic: bool) -> ApiResult<PatchType> {
    if media_type == cbor::APPLY_PATCH {
        return Ok(PatchType::Apply);
    }
    PatchType::from_content_type(media_type).map_err(|_| ApiError::unsupported_patch_type(strategic))
}

/// A PATCH body as the patch verbs read it: a CBOR apply configuration becomes its JSON (which
/// the YAML apply decoder reads), refused with the CBOR decoder's words as kube-apiserver
/// refuses it; other bodies are used as sent.
pub fn patch_body(media_type: &str, body: bytes::Bytes) -> ApiResult<bytes::Bytes> {
    if media_type != cbor::APPLY_PATCH {
        return Ok(body);
    }
    cbor_as_json(&body)
}
