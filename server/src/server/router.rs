//! The HTTP listener of a replica: health, metrics and the Kubernetes API.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kuberaft_raft::RaftNode;
use metrics_exporter_prometheus::PrometheusHandle;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;

use crate::endpoints::{self, discovery, openapi, Api};
use crate::filters::{audit_id, compression, request_info};
use crate::store::cacher::WatchCache;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct HttpState {
    /// The replica.
    pub node: Arc<RaftNode>,
    /// The replica's watch cache (readiness waits until it is synced).
    pub cache: WatchCache,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
}

/// The HTTP routes of a replica (health, metrics, `/version`, OpenAPI and the Kubernetes API)
/// behind the filter chain.
pub fn router(state: HttpState, api: Api) -> Router {
    let openapi_v3 = Router::new()
        .route("/openapi/v3", get(openapi::v3_index))
        .route("/openapi/v3/{*group_version}", get(openapi::v3_group_version))
        .with_state(api.clone());
    let kube = Router::new()
        .fallback(endpoints::dispatch)
        .with_state(api.clone());
    let routes = Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/version", get(version))
        .route("/openapi/v2", get(openapi::v2))
        .with_state(state)
        .merge(openapi_v3)
        .fallback_service(kube);
    with_filters(routes, api)
}

/// The filter chain, in the order a request passes it (outermost first). Adding a filter is
/// adding one line here, at its place in this order.
fn with_filters(routes: Router, api: Api) -> Router {
    let chain = ServiceBuilder::new()
        // 1. Every response carries the request's `Audit-Id` (the client's, or a new UUID), as
        //    kube-apiserver's; a panic in anything below answers 500 instead of dropping the
        //    connection.
        .layer(audit_id::set())
        .layer(audit_id::propagate())
        .layer(CatchPanicLayer::custom(panic_response))
        // 2. Request info: the path parsed once into group, version, resource, namespace, name,
        //    subresource and verb; `404`/`405` for what no endpoint serves.
        .layer(middleware::from_fn_with_state(api, request_info::filter))
        // 3. gzip for large complete responses.
        .layer(compression::layer());
    // 4. authentication, 5. audit, 6. impersonation, 7. in-flight limits, 8. authorization:
    //    each a layer here, reading the request info that (2) stored.
    routes.layer(chain)
}

/// What a request that panicked gets, worded as kube-apiserver's panic recovery answers.
fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "This request caused apiserver to panic. Look in the logs for details.\n",
    )
        .into_response()
}

async fn version() -> Response {
    axum::Json(discovery::version()).into_response()
}

async fn livez(State(s): State<HttpState>) -> Response {
    if s.node.metrics().borrow().running_state.is_ok() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "[-]raft failed: raft has stopped\nlivez check failed\n",
        )
            .into_response()
    }
}

async fn readyz(State(s): State<HttpState>) -> Response {
    let ready = s.node.ready().and_then(|()| {
        if s.cache.synced() {
            Ok(())
        } else {
            Err("the watch cache has not loaded the store yet".into())
        }
    });
    match ready {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("[-]raft-ready failed: {why}\nreadyz check failed\n"),
        )
            .into_response(),
    }
}

async fn metrics(State(s): State<HttpState>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        s.metrics.render(),
    )
        .into_response()
}
