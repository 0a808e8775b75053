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

use crate::audit::Auditor;
use crate::authentication::service_account;
use crate::authorization::Authorizer;
use crate::endpoints::{self, discovery, openapi, Api};
use crate::filters::{
    aggregator, audit, audit_id, authentication, authorization, compression, impersonation, max_in_flight,
    metrics as request_metrics, priority_and_fairness, request_info,
};
use crate::flowcontrol::PriorityAndFairness;

/// How a replica protects itself from overload.
#[derive(Debug, Clone)]
pub enum Overload {
    /// API Priority and Fairness.
    PriorityAndFairness(Arc<PriorityAndFairness>),
    /// kube's in-flight limits alone (priority and fairness turned off).
    MaxInFlight(Arc<max_in_flight::Limits>),
}
use crate::machinery::errors::ApiError;
use crate::machinery::go_json;
use crate::store::cacher::WatchCache;
use crate::store::keys;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct HttpState {
    /// The replica.
    pub node: Arc<RaftNode>,
    /// The replica's watch cache (readiness waits until it is synced).
    pub cache: WatchCache,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The authorizer (readiness waits until it has loaded the RBAC objects).
    pub authorizer: Authorizer,
}

/// The HTTP routes of a replica (health, metrics, `/version`, OpenAPI and the Kubernetes API)
/// behind the filter chain; `auditor` when audit logging is on; `overload` the replica's
/// protection from overload.
pub fn router(state: HttpState, api: Api, auditor: Option<Auditor>, overload: Overload) -> Router {
    let openid = Router::new()
        .route("/.well-known/openid-configuration", get(openid_configuration))
        .route("/openid/v1/jwks", get(jwks))
        .with_state(api.clone());
    let openapi = Router::new()
        .route("/openapi/v2", get(openapi::v2))
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
        // kube-apiserver's version service is `GET /version/`; the Python client asks for that.
        .route("/version/", get(version))
        .with_state(state)
        .merge(openapi)
        .merge(openid)
        .fallback_service(kube);
    let routes = match &overload {
        Overload::PriorityAndFairness(pf) => routes.merge(
            Router::new()
                .route(
                    "/debug/api_priority_and_fairness/dump_priority_levels",
                    get(dump_priority_levels),
                )
                .with_state(pf.clone()),
        ),
        Overload::MaxInFlight(_) => routes,
    };
    with_filters(routes, api, auditor, overload)
}

/// kube's dump of the priority levels' state, as plain text.
async fn dump_priority_levels(State(pf): State<Arc<PriorityAndFairness>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        pf.dump_priority_levels(),
    )
        .into_response()
}

/// The filter chain, in the order a request passes it (outermost first). Adding a filter is
/// adding one line here, at its place in this order.
fn with_filters(routes: Router, api: Api, auditor: Option<Auditor>, overload: Overload) -> Router {
    let (fairness, limits) = match overload {
        Overload::PriorityAndFairness(pf) => (Some(pf), None),
        Overload::MaxInFlight(limits) => (None, Some(limits)),
    };
    let chain = ServiceBuilder::new()
        // 1. Every response carries the request's `Audit-Id` (the client's, or a new UUID), as
        //    kube-apiserver's; a panic in anything below answers 500 instead of dropping the
        //    connection.
        .layer(audit_id::set())
        .layer(audit_id::propagate())
        .layer(CatchPanicLayer::custom(panic_response))
        // 2. Response sizes as the client receives them (after the gzip of 2b), for the
        //    responses the request metrics (9) marked.
        .layer(middleware::from_fn(request_metrics::sizes))
        // 2b. gzip for large complete responses.
        .layer(compression::layer())
        // 3. Audit (only when configured): outside authentication, so that a `401` is audited
        //    too, and inside compression, so that a recorded response body is the object, not
        //    its gzip. The filters below record the user, impersonation and decision into it.
        .option_layer(auditor.map(|a| middleware::from_fn_with_state(a, audit::filter)))
        // 4. Authentication: the user from the client certificate or bearer token, anonymous
        //    on the public paths, `401` otherwise — before anything tells an unauthenticated
        //    client which resources exist.
        .layer(middleware::from_fn_with_state(
            api.authenticator.clone(),
            authentication::filter,
        ))
        // 5. Impersonation: `Impersonate-*` headers make the request another user's, if the
        //    authenticated one may `impersonate` each part.
        .layer(middleware::from_fn_with_state(
            api.authorizer.clone(),
            impersonation::filter,
        ))
        // 6. Request info: the path parsed once into group, version, resource, namespace,
        //    name, subresource and verb; `404`/`405` for what no endpoint serves.
        .layer(middleware::from_fn_with_state(api.clone(), request_info::filter))
        // 7. Priority and fairness: the request classified into a priority level, a seat from
        //    it (perhaps after a fair queue's wait) or `429`; or, with it off, the in-flight
        //    limits. Both read the user (4, 5) and the request info (6).
        .option_layer(fairness.map(|pf| middleware::from_fn_with_state(pf, priority_and_fairness::filter)))
        .option_layer(limits.map(|l| middleware::from_fn_with_state(l, max_in_flight::filter)))
        // 8. Authorization: RBAC from the watch cache; `403` with kube's message.
        .layer(middleware::from_fn_with_state(
            api.authorizer.clone(),
            authorization::filter,
        ))
        // 8b. Aggregation: a group-version an APIService hands to a Service is proxied to
        //     it, authenticated and authorized as everything else.
        .layer(middleware::from_fn_with_state(api.clone(), aggregator::filter))
        // 9. Request metrics: what the endpoints serve, in kube-apiserver's request series
        //    (after authorization: kube records what its handlers answer, not refusals).
        .layer(middleware::from_fn(request_metrics::filter));
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

/// The ServiceAccount issuer's OpenID discovery document (404 without a signing key).
async fn openid_configuration(State(api): State<Api>, headers: axum::http::HeaderMap) -> Response {
    if api.authenticator.service_accounts().is_none() {
        return StatusCode::NOT_FOUND.into_response();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("kubernetes.default.svc");
    axum::Json(service_account::openid_configuration(host)).into_response()
}

/// The public key ServiceAccount tokens are signed with, as a JSON Web Key Set.
async fn jwks(State(api): State<Api>) -> Response {
    match api.authenticator.service_accounts() {
        Some(sa) => (
            [(header::CONTENT_TYPE, "application/jwk-set+json")],
            sa.jwks().to_string(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// `/version`, written as kube-apiserver writes it (`responsewriters.WriteRawJSON`): indented,
/// with no newline after it.
async fn version() -> Response {
    match go_json::encode(&discovery::version(), true) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
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
        if !s.cache.synced() {
            Err("the watch cache has not loaded the store yet".into())
        } else if !s.authorizer.synced() {
            Err("the authorizer has not loaded the RBAC policy yet".into())
        } else {
            bootstrapped(&s.cache)
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

/// Whether what every cluster has from the start — the system namespaces and the
/// `default/kubernetes` Service — is in this replica's cache: a client told "ready" finds them.
fn bootstrapped(cache: &WatchCache) -> Result<(), String> {
    use crate::controllers::{kubernetes_service, namespace::SYSTEM_NAMESPACES};
    let namespaces = SYSTEM_NAMESPACES.iter().map(|ns| {
        (
            format!("namespace {ns}"),
            keys::object("", "namespaces", None, ns),
        )
    });
    let service = (
        format!(
            "service {}/{}",
            kubernetes_service::NAMESPACE,
            kubernetes_service::NAME
        ),
        keys::object(
            "",
            "services",
            Some(kubernetes_service::NAMESPACE),
            kubernetes_service::NAME,
        ),
    );
    for (what, key) in namespaces.chain([service]) {
        if !matches!(cache.get(&key), Ok(Some(_))) {
            return Err(format!("{what} does not exist yet"));
        }
    }
    Ok(())
}

async fn metrics(State(s): State<HttpState>) -> Response {
    let mut text = s.metrics.render();
    crate::filters::read_vs_write::render(&mut text);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
        .into_response()
}
