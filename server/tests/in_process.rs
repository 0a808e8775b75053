//! The server's core driven in process: a single-replica node in a temp dir and the router of
//! its API port, called through `tower::ServiceExt::oneshot` — no process, no port. The
//! end-to-end suites (`tests/` at the workspace root) drive real processes; these check the
//! request pipeline, the verbs, admission and watches directly and fail fast.

use std::path::Path;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use futures::StreamExt;
use kuberaft::config::ServiceRanges;
use kuberaft::config::{MemberConfig, ServeConfig};
use kuberaft::server::{Replica, Security};
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::{json, Value};
use tower::ServiceExt;

const T: Duration = Duration::from_secs(30);

/// A one-member cluster in `dir`, started, with its API ready and its system namespaces made.
async fn replica(dir: &Path) -> Replica {
    let config = ServeConfig {
        id: 1,
        cluster_name: "in-process".into(),
        data_dir: dir.to_path_buf(),
        peer_listen: None,
        api_listen: None,
        members: vec![MemberConfig {
            id: 1,
            peer_addr: "127.0.0.1:1".into(),
            api_addr: "127.0.0.1:2".into(),
        }],
        raft: Default::default(),
        compaction: Default::default(),
        request_timeout_seconds: ServeConfig::DEFAULT_REQUEST_TIMEOUT_SECONDS,
        quota_backend_bytes: ServeConfig::DEFAULT_QUOTA_BACKEND_BYTES,
        watch_buffer: 64,
        feature_gates: Default::default(),
        security: None,
        audit: None,
        admission_config_file: None,
        backup: None,
        service_cluster_ip_range: ServiceRanges::DEFAULT_CLUSTER_IP_RANGE.into(),
        service_node_port_range: ServiceRanges::DEFAULT_NODE_PORT_RANGE.into(),
        max_requests_inflight: ServeConfig::DEFAULT_MAX_REQUESTS_INFLIGHT,
        max_mutating_requests_inflight: ServeConfig::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
        enable_priority_and_fairness: true,
    };
    let metrics = PrometheusBuilder::new().build_recorder().handle();
    let replica = Replica::start(&config, metrics, &Security::insecure(), None)
        .await
        .expect("replica starts");
    let deadline = tokio::time::Instant::now() + T;
    loop {
        let ready = call(&replica.router, Method::GET, "/readyz", None).await.0 == StatusCode::OK;
        let ns = call(&replica.router, Method::GET, "/api/v1/namespaces/default", None)
            .await
            .0;
        if ready && ns == StatusCode::OK {
            return replica;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replica did not become ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn request(method: Method, path: &str, body: Option<&Value>) -> Request<Body> {
    let builder = Request::builder().method(method).uri(path);
    match body {
        Some(b) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(b.to_string()))
            .expect("a request"),
        None => builder.body(Body::empty()).expect("a request"),
    }
}

async fn json_of(response: Response) -> Value {
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .expect("a body");
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

async fn call(router: &Router, method: Method, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
    let response = router
        .clone()
        .oneshot(request(method, path, body))
        .await
        .expect("the router answers");
    (response.status(), json_of(response).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_routes_verbs_and_never_lets_a_bad_path_touch_an_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = replica(dir.path()).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, created) = call(
        &r.router,
        Method::POST,
        cms,
        Some(&json!({"metadata": {"name": "c"}, "data": {"a": "1"}})),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let rv = created["metadata"]["resourceVersion"].clone();

    let (code, body) = call(&r.router, Method::DELETE, &format!("{cms}/c/bogus"), None).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::NOT_FOUND, Some("NotFound"))
    );
    let (code, body) = call(&r.router, Method::POST, &format!("{cms}/c"), Some(&json!({}))).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::METHOD_NOT_ALLOWED, Some("MethodNotAllowed"))
    );
    let (code, body) = call(&r.router, Method::GET, &format!("{cms}/c"), None).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(
        body["metadata"]["resourceVersion"], rv,
        "the object was not touched"
    );

    // Every response carries an Audit-Id: the client's own, or a fresh one.
    let response = r
        .router
        .clone()
        .oneshot(request(Method::GET, "/livez", None))
        .await
        .expect("the router answers");
    let generated = response.headers().get("audit-id").expect("an audit id");
    assert_eq!(generated.len(), 36, "{generated:?}");
    let mut given = request(Method::GET, &format!("{cms}/c"), None);
    given
        .headers_mut()
        .insert("audit-id", "my-request".parse().expect("a header value"));
    let response = r.router.clone().oneshot(given).await.expect("the router answers");
    assert_eq!(
        response.headers().get("audit-id").map(|v| v.as_bytes()),
        Some(&b"my-request"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_mutates_pods_and_refuses_content_in_a_missing_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = replica(dir.path()).await;
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    let (code, created) = call(
        &r.router,
        Method::POST,
        "/api/v1/namespaces/default/pods",
        Some(&pod),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["serviceAccountName"], "default");
    let token_volume = created["spec"]["volumes"][0]["name"].as_str().unwrap_or_default();
    assert!(token_volume.starts_with("kube-api-access-"), "{created}");
    assert_eq!(
        created["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
        "/var/run/secrets/kubernetes.io/serviceaccount"
    );
    assert_eq!(created["spec"]["priority"], 0);
    assert_eq!(created["spec"]["preemptionPolicy"], "PreemptLowerPriority");
    let tolerated: Vec<&str> = created["spec"]["tolerations"]
        .as_array()
        .expect("tolerations")
        .iter()
        .filter(|t| t["tolerationSeconds"] == 300)
        .filter_map(|t| t["key"].as_str())
        .collect();
    assert_eq!(
        tolerated,
        ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
    );

    let (code, body) = call(
        &r.router,
        Method::POST,
        "/api/v1/namespaces/nowhere/configmaps",
        Some(&json!({"metadata": {"name": "c"}})),
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["message"], "namespaces \"nowhere\" not found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_streams_the_events_of_the_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = replica(dir.path()).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, list) = call(&r.router, Method::GET, cms, None).await;
    assert_eq!(code, StatusCode::OK, "{list}");
    let from = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("a list revision")
        .to_string();
    let response = r
        .router
        .clone()
        .oneshot(request(
            Method::GET,
            &format!("{cms}?watch=true&resourceVersion={from}"),
            None,
        ))
        .await
        .expect("the router answers");
    assert_eq!(response.status(), StatusCode::OK);
    let mut frames = response.into_body().into_data_stream();
    let (code, created) = call(
        &r.router,
        Method::POST,
        cms,
        Some(&json!({"metadata": {"name": "w"}})),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let frame = tokio::time::timeout(T, frames.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
        .expect("a frame");
    let event: Value = serde_json::from_slice(&frame).expect("one JSON event per frame");
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "w");
    assert_eq!(
        event["object"]["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}
