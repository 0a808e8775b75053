//! The aggregation filter: after authorization, a request under `/apis/<group>/<version>`
//! that nothing here serves and that an APIService hands to a Service is proxied to it
//! (`aggregator::proxy`), as kube-aggregator sits in front of kube-apiserver's own handlers;
//! `/apis/<group>` of an aggregated group is answered from the APIServices, as kube-aggregator's
//! group handler answers it; everything else goes on to the endpoints. Proxied requests are
//! recorded in no request series (kube's proxy handler bypasses its instrumented handlers);
//! the proxy's own refusals are counted in `apiserver_request_terminations_total`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::aggregator::{backend_of, group_version_of};
use crate::authentication::UserInfo;
use crate::endpoints::discovery;
use crate::endpoints::request_info::{RequestInfo, Target};
use crate::endpoints::Api;
use crate::filters::metrics as request_metrics;

/// The `component` label of the aggregator's own metrics.
const AGGREGATOR: &str = "aggregator";

/// The aggregation filter.
pub async fn filter(State(api): State<Api>, request: Request, next: Next) -> Response {
    let local = !matches!(
        request.extensions().get::<RequestInfo>(),
        Some(RequestInfo::Unserved(_) | RequestInfo::Discovery(Target::ResourceList { .. }))
    );
    // `/apis/<group>` of a group nothing here serves: parsed as a group document or unserved.
    let unserved = matches!(
        request.extensions().get::<RequestInfo>(),
        Some(RequestInfo::Unserved(_) | RequestInfo::Discovery(Target::Group(_)))
    );
    let group = request
        .uri()
        .path()
        .strip_prefix("/apis/")
        .filter(|g| !g.is_empty() && !g.contains('/'));
    if let (true, Some(group)) = (unserved, group) {
        let served_here = api.registry.current().groups().iter().any(|(g, _)| *g == group);
        if let Some(doc) = discovery::remote_group(&api.aggregated.served(), group).filter(|_| !served_here) {
            return Json(doc).into_response();
        }
    }
    let backend = if local {
        None
    } else {
        group_version_of(request.uri().path())
            .and_then(|(group, version)| backend_of(api.store.cache(), group, version))
    };
    let (Some(backend), Some(user)) = (backend, request.extensions().get::<Arc<UserInfo>>().cloned()) else {
        return next.run(request).await;
    };
    // kube's proxy handler is not an instrumented REST handler: what it proxies is in no
    // request series, and only its own refusals are counted, as terminations.
    let termination = request_metrics::Termination::of(&request, AGGREGATOR);
    match api.aggregator.proxy(&backend, &user, request).await {
        Ok(response) => response,
        Err(refusal) => {
            termination.record(refusal.code);
            refusal.response()
        }
    }
}
