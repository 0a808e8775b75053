//! The authentication filter: names the request's user (`authentication::Authenticator`) and
//! stores it in the request's extensions as an `Arc<UserInfo>`, or answers `401` with kube's
//! `Status` body. The `Authorization` header is removed once read, as kube-apiserver does, so
//! that nothing downstream (a log, a proxied request) sees the credential. The user, or the
//! failure, goes to the audit record, whose policy is decided by it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;

use crate::authentication::{Authenticator, ClientConnection};
use crate::endpoints::response::{error_format, error_response};
use crate::filters::audit;
use crate::machinery::errors::ApiError;

/// The authentication filter.
pub async fn filter(State(auth): State<Arc<Authenticator>>, mut request: Request, next: Next) -> Response {
    let verdict = auth.authenticate(
        request.headers(),
        request.extensions().get::<ClientConnection>(),
        request.uri().path(),
    );
    match verdict {
        Ok(user) => {
            request.headers_mut().remove(header::AUTHORIZATION);
            audit::authenticated(&mut request, Some(&user)).await;
            request.extensions_mut().insert(Arc::new(user));
            next.run(request).await
        }
        Err(why) => {
            tracing::debug!(path = %request.uri().path(), why, "unauthorized");
            audit::authenticated(&mut request, None).await;
            error_response(ApiError::unauthorized(), error_format(request.headers()))
        }
    }
}
