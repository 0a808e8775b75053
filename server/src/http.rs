//! The HTTP listener of a replica: health, metrics and the Kubernetes API.

use std::sync::Arc;

use axum::body::HttpBody;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kuberaft_raft::RaftNode;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::compression::{CompressionLayer, Predicate};

use crate::api::cache::WatchCache;
use crate::api::{self, Api};

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

/// The HTTP routes of a replica: health, metrics, `/version`, and the Kubernetes API.
pub fn router(state: HttpState, api: Api) -> Router {
    let openapi_v3 = Router::new()
        .route("/openapi/v3", get(api::openapi::v3_index))
        .route(
            "/openapi/v3/{*group_version}",
            get(api::openapi::v3_group_version),
        )
        .with_state(api.clone());
    let kube = Router::new().fallback(api::dispatch).with_state(api);
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/version", get(version))
        .route("/openapi/v2", get(api::openapi::v2))
        .with_state(state)
        .merge(openapi_v3)
        .fallback_service(kube)
        .layer(
            CompressionLayer::new()
                .no_br()
                .no_deflate()
                .no_zstd()
                .compress_when(LargeComplete),
        )
}

/// Responses at least this large are gzipped for clients that accept it, as kube-apiserver does.
const GZIP_THRESHOLD_BYTES: u64 = 128 * 1024;

/// Compress complete responses of [`GZIP_THRESHOLD_BYTES`] or more. Streams (watches) have no
/// known size and are never compressed: an encoder would hold events back instead of flushing
/// each one.
#[derive(Debug, Clone, Copy)]
struct LargeComplete;

impl Predicate for LargeComplete {
    fn should_compress<B: HttpBody>(&self, response: &axum::http::Response<B>) -> bool {
        response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|n| n >= GZIP_THRESHOLD_BYTES)
    }
}

async fn version() -> Response {
    axum::Json(api::discovery::version()).into_response()
}

async fn livez(State(s): State<HttpState>) -> Response {
    if s.node.raft.metrics().borrow().running_state.is_ok() {
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
