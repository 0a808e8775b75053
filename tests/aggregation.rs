//! The aggregation layer on a real three-replica cluster: a small aggregated API server in the
//! test (its own serving CA made with rcgen, HTTPS on a local port, serving
//! `metrics.example.com/v1beta1` with one resource, `widgets`) that trusts only callers whose
//! client certificate the front-proxy CA of the published `extension-apiserver-authentication`
//! ConfigMap verifies, and echoes the identity headers it was given. Registered through a
//! Service, an EndpointSlice and an APIService, it is reached with kubectl through every
//! replica; stopped, its group answers `503` while the rest of the API works, and its
//! APIService turns unavailable with kube's reason. The local APIServices are listed too.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use base64::Engine;
use futures::StreamExt;
use kuberaft::authentication::ClientConnection;
use serde_json::{json, Value};
use support::kube::Kube;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GROUP_VERSION: &str = "metrics.example.com/v1beta1";
/// The aggregated discovery document's media type.
const AGGREGATED_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// Bytes of a body larger than kube-apiserver's 3 MiB request limit, proxied either way.
const BIG: usize = 5 << 20;

/// What the aggregated server was told about its callers: (X-Remote-User, X-Remote-Group).
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// The backend's state: the names its proxy's certificate may carry, and what it saw.
#[derive(Clone)]
struct Backend {
    allowed_names: Arc<Vec<String>>,
    seen: Seen,
}

/// Refuses a caller whose verified certificate does not carry an allowed name, as an
/// aggregated server's request-header authenticator does; else records its identity headers.
fn caller(
    b: &Backend,
    conn: &ClientConnection,
    headers: &HeaderMap,
) -> Result<(String, Vec<String>), (StatusCode, String)> {
    let leaf = conn
        .chain
        .first()
        .ok_or_else(|| (StatusCode::UNAUTHORIZED, "no client certificate".to_string()))?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|_| {
        (
            StatusCode::UNAUTHORIZED,
            "unreadable client certificate".to_string(),
        )
    })?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
        .unwrap_or_default()
        .to_string();
    if !b.allowed_names.contains(&cn) {
        return Err((StatusCode::UNAUTHORIZED, format!("{cn} is not an allowed proxy")));
    }
    let user = headers
        .get("x-remote-user")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let groups: Vec<String> = headers
        .get_all("x-remote-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    b.seen.lock().unwrap().push((user.clone(), groups.clone()));
    Ok((user, groups))
}

async fn discovery(
    State(b): State<Backend>,
    Extension(conn): Extension<ClientConnection>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = caller(&b, &conn, &headers) {
        return refused.into_response();
    }
    Json(json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
        "resources": [{"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget",
                       "verbs": ["get", "list"], "shortNames": ["wd"]}],
    }))
    .into_response()
}

/// The backend's OpenAPI v3 document of its group-version.
fn openapi_v3() -> Value {
    json!({"openapi": "3.0.0", "info": {"title": "metrics", "version": "v1beta1"},
           "paths": {"/apis/metrics.example.com/v1beta1/namespaces/{namespace}/widgets": {"get": {"operationId": "listWidgets"}}},
           "components": {"schemas": {"com.example.metrics.v1beta1.Widget": {"type": "object"}}}})
}

/// The backend's Swagger 2.0 document, which (as a real extension server's) also describes
/// types kuberaft has: those are kuberaft's.
fn openapi_v2() -> Value {
    json!({"swagger": "2.0", "info": {"title": "metrics", "version": "v1beta1"},
           "paths": {"/apis/metrics.example.com/v1beta1/namespaces/{namespace}/widgets": {"get": {"operationId": "listMetricsV1beta1NamespacedWidget"}}},
           "definitions": {
               "com.example.metrics.v1beta1.Widget": {"type": "object",
                   "x-kubernetes-group-version-kind": [{"group": "metrics.example.com", "version": "v1beta1", "kind": "Widget"}]},
               "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "string"}}})
}

/// `/openapi/v2` or the group-version's `/openapi/v3` document.
async fn openapi(
    State(b): State<Backend>,
    Extension(conn): Extension<ClientConnection>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let doc = if uri.path() == "/openapi/v2" {
        openapi_v2()
    } else {
        openapi_v3()
    };
    match caller(&b, &conn, &headers) {
        Ok(_) => Json(doc).into_response(),
        Err(refused) => refused.into_response(),
    }
}

fn widget(name: &str, user: &str, groups: &[String]) -> Value {
    json!({"apiVersion": GROUP_VERSION, "kind": "Widget",
           "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z",
                        "annotations": {"seen-user": user, "seen-groups": groups.join(",")}}})
}

/// `widgets` (all, or in a namespace) and `widgets/NAME`; anything else is `404`.
async fn resources(
    State(b): State<Backend>,
    Extension(conn): Extension<ClientConnection>,
    Path(rest): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (user, groups) = match caller(&b, &conn, &headers) {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let name = match parts.as_slice() {
        ["widgets"] | ["namespaces", _, "widgets"] if watch => {
            // One event, then the stream stays open as a watch does.
            let event = json!({"type": "ADDED", "object": widget("w1", &user, &groups)});
            let first = futures::stream::once(async move { Ok::<_, std::io::Error>(format!("{event}\n")) });
            return Body::from_stream(first.chain(futures::stream::pending())).into_response();
        }
        ["widgets"] | ["namespaces", _, "widgets"] => {
            return Json(json!({
                "apiVersion": GROUP_VERSION, "kind": "WidgetList", "metadata": {"resourceVersion": "1"},
                "items": [widget("w1", &user, &groups)],
            }))
            .into_response()
        }
        ["namespaces", _, "widgets", name] => name.to_string(),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    match name.as_str() {
        "w1" => Json(widget("w1", &user, &groups)).into_response(),
        "big" => {
            let mut w = widget("big", &user, &groups);
            w["metadata"]["annotations"]["payload"] = json!("b".repeat(BIG));
            Json(w).into_response()
        }
        _ => (
            StatusCode::NOT_FOUND,
            Json(
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("widgets.metrics.example.com \"{name}\" not found"),
                        "reason": "NotFound", "code": 404}),
            ),
        )
            .into_response(),
    }
}

/// Creates a widget: answers what it was sent with the number of bytes it received, so a
/// body larger than any buffer of the proxy shows it arrived whole.
async fn create(
    State(b): State<Backend>,
    Extension(conn): Extension<ClientConnection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (user, groups) = match caller(&b, &conn, &headers) {
        Ok(c) => c,
        Err(refused) => return refused.into_response(),
    };
    let mut received = 0;
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(c) => received += c.len(),
            Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        }
    }
    let mut w = widget("created", &user, &groups);
    w["metadata"]["annotations"]["received-bytes"] = json!(received.to_string());
    (StatusCode::CREATED, Json(w)).into_response()
}

/// The protocol the backend's `echo` subresource switches to: every byte sent comes back.
const ECHO: &str = "kuberaft-test-echo";

/// `widgets/NAME/echo`: an upgrade to [`ECHO`] (as `exec` upgrades to a websocket or SPDY
/// stream), answering with the caller's `X-Echo-Key` so the test sees headers pass both ways.
async fn echo(
    State(b): State<Backend>,
    Extension(conn): Extension<ClientConnection>,
    mut request: axum::extract::Request,
) -> Response {
    if let Err(refused) = caller(&b, &conn, request.headers()) {
        return refused.into_response();
    }
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    if !header("connection").eq_ignore_ascii_case("upgrade") || header("upgrade") != ECHO {
        return (
            StatusCode::BAD_REQUEST,
            "an upgrade to the echo protocol expected",
        )
            .into_response();
    }
    let key = header("x-echo-key");
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let upgraded = hyper_util::rt::TokioIo::new(upgrade.await.expect("the proxy upgrades"));
        let (mut from, mut to) = tokio::io::split(upgraded);
        let _ = tokio::io::copy(&mut from, &mut to).await;
        let _ = to.shutdown().await;
    });
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "Upgrade")
        .header("upgrade", ECHO)
        .header("x-echo-key", key)
        .body(Body::empty())
        .unwrap()
}

/// A running aggregated server: its port, serving CA and what it saw; dropping `stop` stops it.
struct Aggregated {
    port: u16,
    ca_pem: String,
    seen: Seen,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Starts the aggregated server on its own runtime with a certificate for
/// `widgets.metrics.svc`, trusting clients the front-proxy CA `front_proxy_ca` verifies.
fn start_backend(front_proxy_ca: &str, allowed_names: Vec<String>) -> Aggregated {
    let (ca_pem, certs, key) = test_server_cert("metrics-test-ca", &["widgets.metrics.svc"]);
    let tls = mutual_tls(front_proxy_ca, certs, key, &[b"h2", b"http/1.1"]);
    let seen: Seen = Arc::default();
    let state = Backend {
        allowed_names: Arc::new(allowed_names),
        seen: seen.clone(),
    };
    let app = Router::new()
        .route("/apis/metrics.example.com/v1beta1", get(discovery))
        .route("/openapi/v3/apis/metrics.example.com/v1beta1", get(openapi))
        .route("/openapi/v2", get(openapi))
        .route(
            "/apis/metrics.example.com/v1beta1/namespaces/{namespace}/widgets/{name}/echo",
            get(echo),
        )
        .route(
            "/apis/metrics.example.com/v1beta1/{*rest}",
            get(resources).post(create),
        )
        .with_state(state);
    let (port, stop) = spawn_https(app, tls);
    Aggregated {
        port,
        ca_pem,
        seen,
        stop: Some(stop),
    }
}

/// The Available condition of APIService `name`: (status, reason).
fn available(k: &Kube, name: &str) -> (String, String) {
    let s = k.json("node-2", &["get", "apiservice", name]);
    let c = s["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
        .unwrap_or(Value::Null);
    (
        c["status"].as_str().unwrap_or_default().to_string(),
        c["reason"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregated_api_is_served_through_every_replica_with_the_callers_identity() {
    let k = Kube::start().await;

    // The local APIServices: one per served group-version, always available.
    let local = eventually(Duration::from_secs(30), || async {
        let out = k.ok("node-3", &["get", "apiservices"]);
        let has = |name: &str| {
            out.lines().any(|l| {
                l.split_whitespace().collect::<Vec<_>>()
                    == [name, "Local", "True", l.split_whitespace().last().unwrap_or("")]
            })
        };
        if has("v1.") && has("v1.apps") && has("v1.apiregistration.k8s.io") {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .await;
    assert!(local.starts_with("NAME"), "{local}");
    assert!(local
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .eq(["NAME", "SERVICE", "AVAILABLE", "AGE"]));

    // What an aggregated server needs to trust the proxy, as kube publishes it.
    let auth = eventually(Duration::from_secs(30), || async {
        let (ok, out, err) = k.kubectl(
            "node-1",
            &[
                "-n",
                "kube-system",
                "get",
                "configmap",
                "extension-apiserver-authentication",
                "-o",
                "json",
            ],
        );
        if ok {
            Ok(serde_json::from_str::<Value>(&out).unwrap())
        } else {
            Err(err)
        }
    })
    .await;
    let data = &auth["data"];
    assert_eq!(data["client-ca-file"].as_str().unwrap(), k.cluster.ca_pem());
    assert_eq!(data["requestheader-username-headers"], "[\"X-Remote-User\"]");
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        "[\"X-Remote-Extra-\"]"
    );
    let allowed: Vec<String> =
        serde_json::from_str(data["requestheader-allowed-names"].as_str().unwrap()).unwrap();
    let mut backend = start_backend(data["requestheader-client-ca-file"].as_str().unwrap(), allowed);

    k.ok("node-1", &["create", "namespace", "metrics"]);
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "widgets", "namespace": "metrics"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "widgets-1", "namespace": "metrics", "labels": {"kubernetes.io/service-name": "widgets"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
         "ports": [{"name": "https", "port": backend.port, "protocol": "TCP"}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.metrics.example.com"},
         "spec": {"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                  "service": {"namespace": "metrics", "name": "widgets"},
                  "caBundle": base64::engine::general_purpose::STANDARD.encode(&backend.ca_pem)}},
    ]});
    let file = k.manifest("aggregated.json", &objects.to_string());
    k.ok("node-1", &["create", "-f", &file]);

    eventually(Duration::from_secs(30), || async {
        match available(&k, "v1beta1.metrics.example.com") {
            (s, r) if s == "True" && r == "Passed" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let listed = k.ok("node-1", &["get", "apiservice", "v1beta1.metrics.example.com"]);
    assert!(
        listed.contains("metrics/widgets") && listed.contains("True"),
        "{listed}"
    );

    for node in ["node-1", "node-2", "node-3"] {
        let out = eventually(Duration::from_secs(30), || async {
            match k.kubectl(node, &["get", "widgets.metrics.example.com"]) {
                (true, out, _) if out.contains("w1") => Ok(out),
                (_, out, err) => Err(format!("{out}{err}")),
            }
        })
        .await;
        assert!(out.lines().next().unwrap().starts_with("NAME"), "{out}");
        let w = k.json(node, &["get", "widgets.metrics.example.com", "w1"]);
        assert_eq!(w["metadata"]["annotations"]["seen-user"], ADMIN, "{w}");
        let (ok, _, err) = k.kubectl(node, &["get", "widgets.metrics.example.com", "nope"]);
        assert!(
            !ok && err.contains("widgets.metrics.example.com \"nope\" not found"),
            "{err}"
        );
    }
    let (user, groups) = backend.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(user, ADMIN);
    assert!(groups.contains(&"system:masters".to_string()), "{groups:?}");
    assert!(groups.contains(&"system:authenticated".to_string()), "{groups:?}");

    // Proxied requests are in no request series (kube's proxy handler is not an instrumented
    // REST handler), on any replica.
    for node in 0..3 {
        let scrape = k.text(&k.url(node, "/metrics")).await;
        let proxied: Vec<&str> = scrape
            .lines()
            .filter(|l| l.starts_with("apiserver_request_") && l.contains("group=\"metrics.example.com\""))
            .collect();
        assert!(proxied.is_empty(), "{proxied:?}");
    }

    let group: Value = serde_json::from_str(&k.text(&k.url(1, "/apis/metrics.example.com")).await).unwrap();
    assert_eq!(
        group,
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": "metrics.example.com",
               "versions": [{"groupVersion": GROUP_VERSION, "version": "v1beta1"}],
               "preferredVersion": {"groupVersion": GROUP_VERSION, "version": "v1beta1"}})
    );
    let legacy: Value = serde_json::from_str(&k.text(&k.url(0, "/apis")).await).unwrap();
    assert!(
        legacy["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "metrics.example.com"),
        "{legacy}"
    );

    let resources = k.ok("node-2", &["api-resources", "--api-group", "metrics.example.com"]);
    let row: Vec<&str> = resources
        .lines()
        .find(|l| l.starts_with("widgets "))
        .unwrap_or_else(|| panic!("{resources}"))
        .split_whitespace()
        .collect();
    assert_eq!(row, ["widgets", "wd", GROUP_VERSION, "true", "Widget"]);

    // Bodies stream through whole either way, beyond the 3 MiB kube-apiserver allows its own
    // resources: a large create reaches the backend, a large object comes back.
    let payload = json!({"apiVersion": GROUP_VERSION, "kind": "Widget",
                         "metadata": {"name": "created", "annotations": {"payload": "a".repeat(BIG)}}})
    .to_string();
    let sent = payload.len();
    let created = k
        .http
        .post(k.url(0, "/apis/metrics.example.com/v1beta1/namespaces/default/widgets"))
        .header("content-type", "application/json")
        .body(payload)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(
        created["metadata"]["annotations"]["received-bytes"],
        sent.to_string()
    );
    let big: Value = serde_json::from_str(
        &k.text(&k.url(
            1,
            "/apis/metrics.example.com/v1beta1/namespaces/default/widgets/big",
        ))
        .await,
    )
    .unwrap();
    assert_eq!(
        big["metadata"]["annotations"]["payload"].as_str().map(str::len),
        Some(BIG)
    );

    // A watch streams through: its first event arrives while the backend keeps it open.
    let url = k.url(
        2,
        "/apis/metrics.example.com/v1beta1/namespaces/default/widgets?watch=true",
    );
    let event = first_watch_event(&k.http, &url).await;
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("w1"))
    );

    // A connection upgrade is tunnelled both ways, through every replica: the backend switches
    // protocols, the caller's headers reach it and its headers come back, and bytes written on
    // either side arrive on the other until the caller closes.
    for node in 0..3 {
        let answer = k
            .http
            .get(k.url(
                node,
                "/apis/metrics.example.com/v1beta1/namespaces/default/widgets/w1/echo",
            ))
            .header("connection", "Upgrade")
            .header("upgrade", ECHO)
            .header("x-echo-key", format!("key-{node}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 101, "replica {node}");
        assert_eq!(answer.headers()["upgrade"], ECHO);
        assert_eq!(answer.headers()["x-echo-key"], format!("key-{node}").as_str());
        let mut stream = answer.upgrade().await.unwrap();
        for round in 0..3 {
            let sent = format!("round {round} through replica {node}\n").repeat(1000);
            stream.write_all(sent.as_bytes()).await.unwrap();
            let mut back = vec![0; sent.len()];
            tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut back))
                .await
                .expect("the echo within 10 s")
                .unwrap();
            assert_eq!(back, sent.as_bytes());
        }
        stream.shutdown().await.unwrap();
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
            .await
            .expect("the tunnel closes after the caller")
            .unwrap();
        assert!(rest.is_empty());
    }
    // A request that does not upgrade is answered as any other.
    let plain = k
        .http
        .get(k.url(
            0,
            "/apis/metrics.example.com/v1beta1/namespaces/default/widgets/w1/echo",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status().as_u16(), 400);

    // A custom resource in the same group, another version: the group has a version served
    // here and one served by the backend, side by side in discovery as kube-aggregator lists
    // them (an APIService per group-version), and kubectl reaches both.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let file = k.manifest("gadgets.json", &crd.to_string());
    k.ok("node-1", &["create", "-f", &file]);
    let both = json!({"kind": "APIGroup", "apiVersion": "v1", "name": "metrics.example.com",
        "versions": [{"groupVersion": "metrics.example.com/v1", "version": "v1"},
                     {"groupVersion": GROUP_VERSION, "version": "v1beta1"}],
        "preferredVersion": {"groupVersion": "metrics.example.com/v1", "version": "v1"}});
    for node in 0..3 {
        eventually(Duration::from_secs(30), || async {
            let group: Value = serde_json::from_str(&k.text(&k.url(node, "/apis/metrics.example.com")).await)
                .map_err(|e| e.to_string())?;
            if group == both {
                Ok(())
            } else {
                Err(format!("replica {node}: {group}"))
            }
        })
        .await;
    }
    let legacy: Value = serde_json::from_str(&k.text(&k.url(1, "/apis")).await).unwrap();
    let listed: Vec<&Value> = legacy["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["name"] == "metrics.example.com")
        .collect();
    assert_eq!(listed.len(), 1, "{legacy}");
    assert_eq!(listed[0]["versions"], both["versions"]);
    let aggregated = k.json_as(2, "/apis", AGGREGATED_DISCOVERY).await.unwrap();
    let group = aggregated["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "metrics.example.com")
        .unwrap_or_else(|| panic!("{aggregated}"));
    let versions: Vec<(&str, &str)> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_str().unwrap(),
                v["resources"][0]["resource"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(versions, [("v1", "gadgets"), ("v1beta1", "widgets")]);
    let resources = k.ok("node-3", &["api-resources", "--api-group", "metrics.example.com"]);
    for (name, group_version) in [("gadgets", "metrics.example.com/v1"), ("widgets", GROUP_VERSION)] {
        assert!(
            resources.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.first() == Some(&name) && cols.contains(&group_version)
            }),
            "{resources}"
        );
    }
    let gadget = json!({"apiVersion": "metrics.example.com/v1", "kind": "Gadget",
                        "metadata": {"name": "g1", "namespace": "default"}});
    let file = k.manifest("gadget.json", &gadget.to_string());
    eventually(Duration::from_secs(30), || async {
        match k.kubectl("node-2", &["create", "-f", &file]) {
            (true, out, _) => Ok(out),
            (_, out, err) => Err(format!("{out}{err}")),
        }
    })
    .await;
    assert!(k
        .ok("node-2", &["get", "gadgets", "-n", "default"])
        .contains("g1"));
    assert!(k
        .ok("node-2", &["get", "widgets.metrics.example.com", "-n", "default"])
        .contains("w1"));
    k.ok("node-1", &["delete", "crd", "gadgets.metrics.example.com"]);
    eventually(Duration::from_secs(30), || async {
        let group: Value = serde_json::from_str(&k.text(&k.url(0, "/apis/metrics.example.com")).await)
            .map_err(|e| e.to_string())?;
        match group["versions"].as_array().map(Vec::len) {
            Some(1) => Ok(()),
            _ => Err(group.to_string()),
        }
    })
    .await;

    // Its OpenAPI v3 document is listed and served with kuberaft's own.
    let index = eventually(Duration::from_secs(30), || async {
        let index: Value = serde_json::from_str(&k.text(&k.url(1, "/openapi/v3")).await).unwrap();
        match index["paths"]["apis/metrics.example.com/v1beta1"]["serverRelativeURL"].as_str() {
            Some(url) => Ok(url.to_string()),
            None => Err(index.to_string()),
        }
    })
    .await;
    assert!(
        index.starts_with("/openapi/v3/apis/metrics.example.com/v1beta1?hash="),
        "{index}"
    );
    let doc: Value = serde_json::from_str(&k.text(&k.url(2, &index)).await).unwrap();
    assert_eq!(doc, openapi_v3());
    // Its Swagger 2.0 document is merged into kuberaft's: what kuberaft has stays kuberaft's.
    for node in 0..3 {
        let swagger = eventually(Duration::from_secs(30), || async {
            let doc: Value = serde_json::from_str(&k.text(&k.url(node, "/openapi/v2")).await).unwrap();
            match doc["definitions"].get("com.example.metrics.v1beta1.Widget") {
                Some(_) => Ok(doc),
                None => Err(format!("replica {node} has no Widget in /openapi/v2")),
            }
        })
        .await;
        let backend = openapi_v2();
        let path = "/apis/metrics.example.com/v1beta1/namespaces/{namespace}/widgets";
        assert_eq!(swagger["paths"][path], backend["paths"][path]);
        let meta = &swagger["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"];
        assert_eq!(meta["type"], "object", "{meta}");
        assert!(swagger["definitions"]["io.k8s.api.apps.v1.Deployment"].is_object());
    }
    assert!(k
        .text(&k.url(0, "/openapi/v3"))
        .await
        .contains("\"apis/apps/v1\""));

    // The backend goes away: its group answers 503, the rest of the API is unaffected, and
    // its APIService turns unavailable with kube's reason.
    drop(backend.stop.take());
    let path = "/apis/metrics.example.com/v1beta1/namespaces/default/widgets";
    eventually(Duration::from_secs(30), || async {
        let r = k
            .http
            .get(k.url(0, path))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        match r.status().as_u16() {
            503 => Ok(()),
            other => Err(format!("{other}")),
        }
    })
    .await;
    let (ok, _, err) = k.kubectl("node-3", &["get", "--raw", path]);
    assert!(!ok);
    assert!(
        err.contains("ServiceUnavailable") || err.contains("service unavailable"),
        "{err}"
    );
    k.ok("node-3", &["get", "configmaps", "-A"]);
    eventually(Duration::from_secs(30), || async {
        match available(&k, "v1beta1.metrics.example.com") {
            (s, r) if s == "False" && r == "FailedDiscoveryCheck" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let listed = k.ok("node-1", &["get", "apiservice", "v1beta1.metrics.example.com"]);
    assert!(listed.contains("False (FailedDiscoveryCheck)"), "{listed}");
    // The legacy group list still names the group of an unavailable APIService, as
    // kube-aggregator's does, once discovery's cache has dropped what the backend served.
    eventually(Duration::from_secs(30), || async {
        let doc = k.json_as(2, "/apis", AGGREGATED_DISCOVERY).await?;
        match doc["items"].as_array() {
            Some(items)
                if !items
                    .iter()
                    .any(|g| g["metadata"]["name"] == "metrics.example.com") =>
            {
                Ok(())
            }
            _ => Err("the aggregated discovery still lists the group".to_string()),
        }
    })
    .await;
    let legacy: Value = serde_json::from_str(&k.text(&k.url(2, "/apis")).await).unwrap();
    assert!(
        legacy["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "metrics.example.com" && g["preferredVersion"]["version"] == "v1beta1"),
        "{legacy}"
    );

    // The proxy's own refusal of an unavailable backend is counted as kube counts it: a
    // termination by the aggregator, not a request served.
    eventually(Duration::from_secs(30), || async {
        let r = k
            .http
            .get(k.url(1, path))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let (code, body) = (r.status().as_u16(), r.text().await.unwrap_or_default());
        if code != 503 || body != "service unavailable\n" {
            return Err(format!("{code} {body}"));
        }
        let scrape = k.text(&k.url(1, "/metrics")).await;
        let terminated = scrape.lines().find(|l| {
            l.starts_with("apiserver_request_terminations_total{")
                && [
                    "component=\"aggregator\"",
                    "group=\"metrics.example.com\"",
                    "version=\"v1beta1\"",
                    "resource=\"widgets\"",
                    "scope=\"namespace\"",
                    "verb=\"LIST\"",
                    "code=\"503\"",
                ]
                .iter()
                .all(|label| l.contains(label))
        });
        match terminated {
            Some(_) => Ok(()),
            None => Err(scrape
                .lines()
                .filter(|l| l.contains("terminations"))
                .collect::<Vec<_>>()
                .join("\n")),
        }
    })
    .await;
    let scrape = k.text(&k.url(1, "/metrics")).await;
    assert!(
        !scrape
            .lines()
            .any(|l| l.starts_with("apiserver_request_total{") && l.contains("resource=\"widgets\"")),
        "{scrape}"
    );
}
