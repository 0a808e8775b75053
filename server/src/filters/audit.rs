//! The audit filter (kube-apiserver's `WithAudit`, and `WithFailedAuthenticationAudit` for
//! `401`s): the outermost filter after the request id and panic recovery, so that every
//! request it lets through — a refused one too — can be recorded. It puts the request's
//! [`AuditContext`] into its extensions; the filters below record into it through the
//! functions here — [`authenticated`] (the user, which decides the level, and the request
//! body when the level wants it), [`impersonated`], [`authorized`] — and on the way back this
//! filter writes the response's stage: `ResponseComplete`, or for a watch `ResponseStarted`
//! as its headers go out and `ResponseComplete` when its stream ends. A panic below is
//! written as the `Panic` stage and passed on to the panic recovery.
//!
//! Bodies are only taken when the policy asks: the request body (bounded by the request size
//! limit) is copied as the endpoint reads it, the response body of a complete response is
//! collected at `RequestResponse`; a watch stream is never buffered. Without an `audit`
//! section the filter is not installed and the calls here find no record and return.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;

use crate::admission::audit_annotations;
use crate::audit::context::{AuditContext, Plan, Received};
use crate::audit::Auditor;
use crate::authentication::UserInfo;
use crate::authorization::Decision;
use crate::endpoints::body::MAX_BODY_BYTES;
use crate::filters::observed_body::{Observed, Observer};
use crate::machinery::errors::{ApiError, ResponseStatus};

/// The annotation kube-apiserver's authorization filter writes: `allow` or `forbid`.
const DECISION: &str = "authorization.k8s.io/decision";
/// The annotation with the authorizer's reason.
const REASON: &str = "authorization.k8s.io/reason";

/// The audit filter.
pub async fn filter(State(auditor): State<Auditor>, mut request: Request, next: Next) -> Response {
    let context = auditor.context();
    request.extensions_mut().insert(context.clone());
    let served = audit_annotations::collect(AssertUnwindSafe(next.run(request)).catch_unwind()).await;
    match served {
        (Ok(response), annotations) => {
            // What admission annotated (policies, webhooks, PodSecurity), as kube records it.
            for (key, value) in &annotations {
                context.annotate(key, value);
            }
            record_response(&context, response).await
        }
        (Err(panic), _) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            context.panicked(&message).await;
            std::panic::resume_unwind(panic)
        }
    }
}

/// Records the response and returns it (its body rebuilt when it was collected, or wrapped to
/// note the end of a stream).
async fn record_response(context: &AuditContext, response: Response) -> Response {
    let (parts, body) = response.into_parts();
    let status = parts.extensions.get::<ResponseStatus>();
    let (want_body, streaming) = match context.plan(status.is_some()) {
        Plan::Skip => return Response::from_parts(parts, body),
        Plan::Record { body, streaming } => (body, streaming),
    };
    let media_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let code = parts.status.as_u16();
    let (body, collected) = if want_body && body.size_hint().exact().is_some() {
        match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => (Body::from(bytes.clone()), Some(bytes)),
            Err(e) => {
                context.respond(code, status, None).await;
                return ApiError::internal(format!("cannot read the response: {e}")).into_response();
            }
        }
    } else {
        (body, None)
    };
    context
        .respond(code, status, collected.as_deref().map(|b| (media_type, b)))
        .await;
    let body = if streaming {
        Observed::body(
            body,
            StreamEnd {
                context: context.clone(),
            },
        )
    } else {
        body
    };
    Response::from_parts(parts, body)
}

/// The authentication filter has named the user (`None`: authentication failed): the policy
/// decides the level, `RequestReceived` is written, and the body is copied as the endpoint
/// reads it when the level wants it.
pub async fn authenticated(request: &mut Request, user: Option<&UserInfo>) {
    let Some(context) = request.extensions().get::<AuditContext>().cloned() else {
        return;
    };
    let begun = context.begin(
        &Received {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            remote: request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
        },
        user,
    );
    if begun.capture_body {
        let media_type = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let inner = std::mem::take(request.body_mut());
        *request.body_mut() = Observed::body(
            inner,
            Tee {
                media_type,
                seen: Vec::new(),
                size: 0,
                overflow: false,
                context: context.clone(),
            },
        );
    }
    context.send(begun.line).await;
}

/// The impersonation filter serves the request as `user`.
pub fn impersonated(request: &Request, user: &UserInfo) {
    if let Some(context) = request.extensions().get::<AuditContext>() {
        context.impersonated(user);
    }
}

/// The authorization filter's decision, as kube-apiserver annotates it.
pub fn authorized(request: &Request, decision: &Decision) {
    if let Some(context) = request.extensions().get::<AuditContext>() {
        let verdict = if decision.is_allowed() { "allow" } else { "forbid" };
        context.annotate(DECISION, verdict);
        context.annotate(REASON, decision.reason());
    }
}

/// A request body's observer that hands a copy of what was read to the audit record when the
/// body is dropped (the endpoint drops it once read, before it answers). A body past the
/// request size limit is refused by the endpoint and not recorded.
struct Tee {
    media_type: String,
    seen: Vec<Bytes>,
    size: usize,
    overflow: bool,
    context: AuditContext,
}

impl Observer for Tee {
    fn data(&mut self, data: &Bytes) {
        if self.size + data.len() <= MAX_BODY_BYTES {
            self.size += data.len();
            self.seen.push(data.clone());
        } else {
            self.overflow = true;
        }
    }

    fn dropped(&mut self, _ended: bool) {
        if !self.overflow && !self.seen.is_empty() {
            self.context.request_body(
                std::mem::take(&mut self.media_type),
                std::mem::take(&mut self.seen),
            );
        }
    }
}

/// A long-running response's observer that writes `ResponseComplete` when the body is dropped:
/// after its last frame, or when the client went away.
struct StreamEnd {
    context: AuditContext,
}

impl Observer for StreamEnd {
    fn dropped(&mut self, _ended: bool) {
        self.context.stream_ended();
    }
}
