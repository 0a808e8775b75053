//! The request info filter: parses every request into a `RequestInfo` once
//! (`endpoints::request_info`) and stores it in the request's extensions — kube-apiserver's
//! `WithRequestInfo`. A path that serves nothing (`404`) or not this verb (`405`) is kept as
//! `RequestInfo::Unserved`: authorization decides on it first, as kube's does, and the endpoint
//! answers the error without touching anything.

use axum::extract::{Request, State};
use axum::http::{Method, Uri};
use axum::middleware::Next;
use axum::response::Response;

use crate::apiextensions;
use crate::endpoints::request_info::{parse_path, RequestInfo, Target};
use crate::endpoints::response::{error_format, error_response};
use crate::endpoints::Api;
use crate::machinery::errors::ApiResult;
use crate::machinery::query::watch_requested;

/// The request info filter: parses the request into a [`RequestInfo`] and stores it in the
/// request's extensions (a `404`/`405` as [`RequestInfo::Unserved`]); any other failure to
/// resolve the path (no quorum to look up new types) is answered here.
pub async fn filter(State(api): State<Api>, mut request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    let info = match resolve(&api, &method, &uri).await {
        Ok(info) => info,
        Err(e) if e.code == 404 || e.code == 405 => RequestInfo::Unserved(e),
        Err(e) => return error_response(e, error_format(request.headers())),
    };
    request.extensions_mut().insert(info);
    next.run(request).await
}

async fn resolve(api: &Api, method: &Method, uri: &Uri) -> ApiResult<RequestInfo> {
    let path = uri.path();
    let under_api = ["/api", "/apis"]
        .iter()
        .any(|root| path == *root || path.strip_prefix(root).is_some_and(|rest| rest.starts_with('/')));
    if !under_api {
        return Ok(RequestInfo::NonResource {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
        });
    }
    let target = match parse_path(&api.registry.current(), path) {
        // A type defined an instant ago (perhaps through another replica) is served as soon
        // as its definition's creation is acknowledged: look again at a linearizable point.
        Err(e) if e.code == 404 => {
            apiextensions::refresh(api.store.cache(), &api.registry).await?;
            parse_path(&api.registry.current(), path)?
        }
        other => other?,
    };
    match target {
        Target::Resource(resource) => {
            let verb = resource.verb(method, watch_requested(uri.query()).unwrap_or(false))?;
            Ok(RequestInfo::Resource {
                request: resource,
                verb,
            })
        }
        other => Ok(RequestInfo::Discovery(other)),
    }
}
