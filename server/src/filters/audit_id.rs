//! The `Audit-Id` of a request: the client's own when it sent one, else a new random UUID, set
//! on the request for the filters below and copied onto the response, as kube-apiserver does.
//! The UUID comes from a thread-local generator (no system call per request).

use axum::http::{HeaderName, HeaderValue, Request};
use tower_http::request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};

/// The header kube-apiserver sets on every response.
pub static AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// Makes a random (version 4) UUID per request.
#[derive(Debug, Clone, Copy, Default)]
pub struct MakeAuditId;

impl MakeRequestId for MakeAuditId {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
        let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
        HeaderValue::from_str(id.hyphenated().encode_lower(&mut text))
            .ok()
            .map(RequestId::new)
    }
}

/// Sets the request's `Audit-Id` (keeping the client's).
pub fn set() -> SetRequestIdLayer<MakeAuditId> {
    SetRequestIdLayer::new(AUDIT_ID.clone(), MakeAuditId)
}

/// Copies the request's `Audit-Id` onto the response.
pub fn propagate() -> PropagateRequestIdLayer {
    PropagateRequestIdLayer::new(AUDIT_ID.clone())
}
