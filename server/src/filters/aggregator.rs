//! The aggregation filter: after authorization, a request under `/apis/<group>/<version>`
//! that nothing here serves and that an APIService hands to a Service is proxied to it
//! (`aggregator::proxy`), as kube-aggregator sits in front of kube-apiserver's own handlers;
//! `/apis/<group>` of an aggregated group is answered from the APIServices, as kube-aggregator's
//! group handler answers it; everything else goes on to the endpoints.

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
    api.aggregator.proxy(&backend, &user, request).await
}
