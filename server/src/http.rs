//! The HTTP listener of a replica: health and metrics endpoints (the Kubernetes API joins it).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use kuberaft_raft::RaftNode;
use metrics_exporter_prometheus::PrometheusHandle;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct HttpState {
    /// The replica.
    pub node: Arc<RaftNode>,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
}

/// The HTTP routes of a replica.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
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
    match s.node.ready() {
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
