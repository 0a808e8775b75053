//! Audit logging as an operator meets it, on a real three-replica cluster whose replicas log
//! by the example policy in `deploy/audit-policy.yaml`: real kubectl commands (a namespace, a
//! Secret, ConfigMaps, a RoleBinding, a request RBAC refuses, one made `--as` another user)
//! and plain HTTP (a request without credentials, watches, a health check) against one
//! replica, then that replica's audit log read back: one `audit.k8s.io/v1` Event per line,
//! each at the level, stage and with the fields the policy and kube-apiserver give it — and a
//! Secret's data nowhere in it.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::kube::Kube;
use support::{eventually, Options, ADMIN};

const T: Duration = Duration::from_secs(30);

/// The Secret's value, in clear and as the API carries it (base64).
const SECRET: &str = "s3cr3t-value";
const SECRET_BASE64: &str = "czNjcjN0LXZhbHVl";

/// The parsed events of replica 0's audit log, with their lines.
fn events(k: &Kube) -> Vec<(String, Value)> {
    k.cluster
        .audit_log(0)
        .lines()
        .map(|line| {
            let event = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            (line.to_string(), event)
        })
        .collect()
}

/// The last event `matches` selects; `what` names it in the failure message.
fn last<'a>(all: &'a [(String, Value)], what: &str, matches: impl Fn(&Value) -> bool) -> &'a Value {
    all.iter()
        .map(|(_, e)| e)
        .filter(|e| matches(e))
        .last()
        .unwrap_or_else(|| {
            let lines: Vec<&str> = all.iter().map(|(l, _)| l.as_str()).collect();
            panic!("no audit event for {what} in:\n{}", lines.join("\n"))
        })
}

/// The events of one audit id, in the order they were written.
fn by_id<'a>(all: &'a [(String, Value)], id: &str) -> Vec<&'a (String, Value)> {
    all.iter().filter(|(_, e)| e["auditID"] == id).collect()
}

/// Whether `e` is `user`'s `verb` on `resource` in `namespace`.
fn is(e: &Value, user: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    e["user"]["username"] == user
        && e["verb"] == verb
        && e["objectRef"]["resource"] == resource
        && e["objectRef"]["namespace"].as_str().unwrap_or_default() == namespace
}

/// Whether `t` is a MicroTime as kube writes it: `2026-11-25T14:53:10.123456Z`.
fn is_micro_time(t: &Value) -> bool {
    let Some(t) = t.as_str() else {
        return false;
    };
    let b = t.as_bytes();
    b.len() == 27
        && b[10] == b'T'
        && b[19] == b'.'
        && b[26] == b'Z'
        && b[20..26].iter().all(u8::is_ascii_digit)
}

/// A cluster whose replicas log by the example policy in `deploy/audit-policy.yaml`.
async fn audited_cluster() -> Kube {
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/audit-policy.yaml");
    Kube::start_with(Options {
        audit_policy: Some(policy),
        ..Options::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_requests_as_the_policy_asks() {
    let k = audited_cluster().await;
    let ok = |args: &[&str]| k.ok("node-1", args);

    // Writes and reads through kubectl, all against replica 0 (context node-1).
    ok(&["create", "namespace", "shop"]);
    ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "shop",
        &format!("--from-literal=password={SECRET}"),
    ]);
    ok(&["create", "configmap", "app", "-n", "shop", "--from-literal=a=1"]);
    ok(&["get", "configmaps", "-n", "shop"]);
    ok(&[
        "create",
        "rolebinding",
        "vi-view",
        "--clusterrole=view",
        "--user=vi",
        "-n",
        "shop",
    ]);
    let vi = k.kubeconfig_for("vi", &[]);
    eventually(T, || async {
        let (good, _, err) = k.kubectl_with(&vi, 0, &["get", "configmaps", "-n", "shop", "-o", "name"]);
        if good {
            Ok(())
        } else {
            Err(err)
        }
    })
    .await;
    let (good, _, err) = k.kubectl_with(&vi, 0, &["get", "secrets", "-n", "shop"]);
    assert!(!good, "vi may not list secrets");
    assert!(err.contains("Forbidden") || err.contains("forbidden"), "{err}");
    ok(&["--as", "vi", "get", "configmaps", "-n", "shop", "-o", "name"]);

    // Plain HTTP, each request with an Audit-Id of its own (kept, as kube-apiserver keeps it).
    let get = |client: &reqwest::Client, path: &str, id: &str| {
        client
            .get(k.url(0, path))
            .header("Audit-Id", id)
            .header("User-Agent", "audit-test")
            .send()
    };
    let anonymous = k.cluster.http_builder().http1_only().build().unwrap();
    let r = get(&anonymous, "/api/v1/namespaces?limit=5", "audit-test-401")
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["audit-id"], "audit-test-401");
    let r = get(&anonymous, "/readyz", "audit-test-readyz").await.unwrap();
    assert_eq!(r.status(), 200);
    let proxy = k
        .cluster
        .http_builder_as("system:kube-proxy", &[])
        .http1_only()
        .build()
        .unwrap();
    let r = get(
        &proxy,
        "/api/v1/services?watch=true&timeoutSeconds=1",
        "audit-test-proxy",
    )
    .await
    .unwrap();
    let _ = r.bytes().await;
    let r = get(
        &k.http,
        "/api/v1/namespaces/shop/configmaps?watch=true&timeoutSeconds=1",
        "audit-test-watch",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    // Read to its end: the server closes it after timeoutSeconds.
    r.bytes().await.unwrap();
    let r = get(
        &k.http,
        "/api/v1/namespaces/shop/configmaps/app",
        "audit-test-marker",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);

    // Events are written by the replica's writer thread: wait for the last ones.
    let all = eventually(T, || async {
        let all = events(&k);
        let marker = by_id(&all, "audit-test-marker").len();
        let watch = by_id(&all, "audit-test-watch").len();
        if marker == 1 && watch == 2 {
            Ok(all)
        } else {
            Err(format!("{marker} marker and {watch} watch events so far"))
        }
    })
    .await;

    for (line, e) in &all {
        assert_eq!(
            (&e["kind"], &e["apiVersion"]),
            (&json!("Event"), &json!("audit.k8s.io/v1")),
            "{line}"
        );
        // omitStages: [RequestReceived] at the top of the policy.
        assert_ne!(e["stage"], "RequestReceived", "{line}");
        assert!(
            is_micro_time(&e["requestReceivedTimestamp"]) && is_micro_time(&e["stageTimestamp"]),
            "{line}"
        );
        assert!(
            !line.contains(SECRET) && !line.contains(SECRET_BASE64),
            "a Secret's data in the log: {line}"
        );
        // Health checks are not logged.
        assert!(
            !e["requestURI"]
                .as_str()
                .unwrap_or_default()
                .starts_with("/readyz"),
            "{line}"
        );
    }

    // A namespace create: other writes are logged at Request, with the request body only.
    let ns = last(&all, "create namespaces", |e| {
        is(e, ADMIN, "create", "namespaces", "")
    });
    assert_eq!(ns["level"], "Request");
    assert_eq!(ns["stage"], "ResponseComplete");
    assert_eq!(
        ns["objectRef"],
        json!({"resource": "namespaces", "name": "shop", "apiVersion": "v1"})
    );
    assert_eq!(ns["requestObject"]["kind"], "Namespace");
    assert_eq!(ns["requestObject"]["metadata"]["name"], "shop");
    assert_eq!(ns.get("responseObject"), None);
    assert_eq!(ns["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(
        ns["annotations"],
        json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
    );
    assert_eq!(
        ns["user"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    assert_eq!(ns["sourceIPs"], json!(["127.0.0.1"]));
    assert!(
        ns["userAgent"]
            .as_str()
            .unwrap_or_default()
            .starts_with("kubectl"),
        "{ns}"
    );
    assert!(
        ns["requestURI"]
            .as_str()
            .unwrap_or_default()
            .starts_with("/api/v1/namespaces?"),
        "{ns}"
    );

    // A Secret create is logged at Metadata: the name its body gives, never the body.
    let secret = last(&all, "create secrets", |e| {
        is(e, ADMIN, "create", "secrets", "shop")
    });
    assert_eq!(secret["level"], "Metadata");
    assert_eq!(
        secret["objectRef"],
        json!({"resource": "secrets", "namespace": "shop", "name": "s1", "apiVersion": "v1"})
    );
    assert_eq!(secret.get("requestObject"), None);
    assert_eq!(secret.get("responseObject"), None);
    assert_eq!(secret["responseStatus"]["code"], 201);

    // ConfigMaps too, reads and writes.
    let cm = last(&all, "create configmaps", |e| {
        is(e, ADMIN, "create", "configmaps", "shop")
    });
    assert_eq!(
        (&cm["level"], cm.get("requestObject")),
        (&json!("Metadata"), None)
    );
    let list = last(&all, "list configmaps", |e| {
        is(e, ADMIN, "list", "configmaps", "shop") && e.get("impersonatedUser").is_none()
    });
    assert_eq!(list["level"], "Metadata");
    assert_eq!(
        list["objectRef"],
        json!({"resource": "configmaps", "namespace": "shop", "apiVersion": "v1"})
    );
    assert_eq!(list["responseStatus"], json!({"metadata": {}, "code": 200}));
    assert_eq!(list.get("responseObject"), None);

    // An RBAC change is logged at RequestResponse: both bodies.
    let rb = last(&all, "create rolebindings", |e| {
        is(e, ADMIN, "create", "rolebindings", "shop")
    });
    assert_eq!(rb["level"], "RequestResponse");
    assert_eq!(
        rb["objectRef"],
        json!({"resource": "rolebindings", "namespace": "shop", "name": "vi-view", "apiGroup": "rbac.authorization.k8s.io", "apiVersion": "v1"})
    );
    assert_eq!(rb["requestObject"]["kind"], "RoleBinding");
    assert_eq!(rb["requestObject"]["roleRef"]["name"], "view");
    assert_eq!(rb["responseObject"]["metadata"]["name"], "vi-view");
    assert!(
        rb["responseObject"]["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty()),
        "{rb}"
    );
    assert_eq!(rb["responseStatus"]["code"], 201);

    // What RBAC allowed vi, and why; what it refused.
    let allowed = last(&all, "vi's list configmaps", |e| {
        is(e, "vi", "list", "configmaps", "shop")
            && e["annotations"]["authorization.k8s.io/decision"] == "allow"
    });
    assert_eq!(allowed["user"]["groups"], json!(["system:authenticated"]));
    assert!(
        allowed["annotations"]["authorization.k8s.io/reason"]
            .as_str()
            .is_some_and(|r| r.contains(r#"RoleBinding "vi-view/shop""#)),
        "{allowed}"
    );
    let refused = last(&all, "vi's list secrets", |e| {
        is(e, "vi", "list", "secrets", "shop")
    });
    assert_eq!(refused["level"], "Metadata");
    assert_eq!(
        refused["responseStatus"],
        json!({
            "metadata": {},
            "status": "Failure",
            "message": r#"secrets is forbidden: User "vi" cannot list resource "secrets" in API group "" in the namespace "shop""#,
            "reason": "Forbidden",
            "details": {"kind": "secrets"},
            "code": 403
        })
    );
    assert_eq!(
        refused["annotations"],
        json!({"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""})
    );

    // `kubectl --as vi`: the admin made the request, as vi, and vi's permissions decided it.
    let as_vi = last(&all, "list configmaps --as vi", |e| {
        is(e, ADMIN, "list", "configmaps", "shop") && e.get("impersonatedUser").is_some()
    });
    assert_eq!(
        as_vi["impersonatedUser"],
        json!({"username": "vi", "groups": ["system:authenticated"]})
    );
    assert_eq!(as_vi["user"]["username"], ADMIN);
    assert_eq!(as_vi["annotations"]["authorization.k8s.io/decision"], "allow");
    assert!(
        as_vi["annotations"]["authorization.k8s.io/reason"]
            .as_str()
            .is_some_and(|r| r.contains("vi-view")),
        "{as_vi}"
    );

    // A request without credentials: one ResponseStarted event, no user, kube's 401 — the whole
    // line, fields in kube's order, as kube-apiserver writes it.
    let unauthenticated = by_id(&all, "audit-test-401");
    assert_eq!(unauthenticated.len(), 1, "{unauthenticated:?}");
    let (line, e) = unauthenticated[0];
    let (t0, t1) = (
        e["requestReceivedTimestamp"].as_str().unwrap_or_default(),
        e["stageTimestamp"].as_str().unwrap_or_default(),
    );
    assert_eq!(
        line,
        &format!(
            concat!(
                r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"audit-test-401","#,
                r#""stage":"ResponseStarted","requestURI":"/api/v1/namespaces?limit=5","verb":"list","user":{{}},"#,
                r#""sourceIPs":["127.0.0.1"],"userAgent":"audit-test","objectRef":{{"resource":"namespaces","apiVersion":"v1"}},"#,
                r#""responseStatus":{{"metadata":{{}},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}},"#,
                r#""requestReceivedTimestamp":"{}","stageTimestamp":"{}"}}"#
            ),
            t0, t1
        )
    );

    // Not logged: health checks (anonymous) and kube-proxy's watches.
    assert!(by_id(&all, "audit-test-readyz").is_empty());
    assert!(by_id(&all, "audit-test-proxy").is_empty());

    // A watch: ResponseStarted when its headers went out, ResponseComplete when it ended.
    let watch = by_id(&all, "audit-test-watch");
    let (started, complete) = (&watch[0].1, &watch[1].1);
    assert_eq!(
        (&started["stage"], &complete["stage"]),
        (&json!("ResponseStarted"), &json!("ResponseComplete"))
    );
    for e in [started, complete] {
        assert_eq!(e["verb"], "watch");
        assert_eq!(e["level"], "Metadata");
        assert_eq!(
            e["requestURI"],
            "/api/v1/namespaces/shop/configmaps?watch=true&timeoutSeconds=1"
        );
        assert_eq!(
            e["objectRef"],
            json!({"resource": "configmaps", "namespace": "shop", "apiVersion": "v1"})
        );
        assert_eq!(e["responseStatus"], json!({"metadata": {}, "code": 200}));
        assert_eq!(e.get("responseObject"), None);
    }
    assert_eq!(
        started["requestReceivedTimestamp"],
        complete["requestReceivedTimestamp"]
    );
    let (t0, t1) = (
        started["stageTimestamp"].as_str().unwrap_or_default(),
        complete["stageTimestamp"].as_str().unwrap_or_default(),
    );
    assert!(t0 < t1, "the watch ended ({t1}) after it started ({t0})");

    // The marker: a get by name.
    let marker = by_id(&all, "audit-test-marker");
    assert_eq!(marker[0].1["verb"], "get");
    assert_eq!(
        marker[0].1["objectRef"],
        json!({"resource": "configmaps", "namespace": "shop", "name": "app", "apiVersion": "v1"})
    );
}

const AUDITED_POLICY: &str = r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
  "metadata": {"name": "labelled"},
  "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
           "validations": [{"expression": "true"}, {"expression": "has(object.metadata.labels) && 'team' in object.metadata.labels", "message": "every ConfigMap names its team"}],
           "auditAnnotations": [{"key": "size", "valueExpression": "string(size(object.data))"}]}}"#;

const AUDITED_BINDING: &str = r#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
  "metadata": {"name": "labelled-audit"},
  "spec": {"policyName": "labelled", "validationActions": ["Audit"],
           "matchResources": {"namespaceSelector": {"matchLabels": {"audited": "yes"}}}}}"#;

const PRIVILEGED: &str = "apiVersion: v1
kind: Pod
metadata:
  name: root
  namespace: watched
spec:
  containers:
  - name: c
    image: nginx
    securityContext:
      privileged: true
";

/// Admission's audit annotations reach the audit event: a ValidatingAdmissionPolicy bound with
/// `validationActions: [Audit]` lets the write through and records kube's
/// `validation_failure`, its `auditAnnotations` are published under the policy's name, and
/// PodSecurity records the enforced policy and the audit level's violations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_annotates_the_audit_events_of_the_writes_it_sees() {
    let k = audited_cluster().await;
    let ok = |args: &[&str]| k.ok("node-1", args);
    ok(&["create", "namespace", "watched"]);
    ok(&[
        "label",
        "namespace",
        "watched",
        "audited=yes",
        "pod-security.kubernetes.io/audit=restricted",
    ]);
    k.wait_namespace_populated("watched").await;
    ok(&["create", "-f", &k.manifest("policy.json", AUDITED_POLICY)]);
    ok(&["create", "-f", &k.manifest("binding.json", AUDITED_BINDING)]);

    // Audit only: the write passes, and the event says which validation failed.
    ok(&[
        "create",
        "configmap",
        "unlabelled",
        "-n",
        "watched",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    ok(&["create", "-f", &k.manifest("root.yaml", PRIVILEGED)]);
    let all = eventually(T, || async {
        let all = events(&k);
        let done = all
            .iter()
            .any(|(_, e)| is(e, ADMIN, "create", "pods", "watched") && e["stage"] == "ResponseComplete");
        if done {
            Ok(all)
        } else {
            Err("the pod's event is not logged yet".to_string())
        }
    })
    .await;
    let created = last(&all, "the ConfigMap's create", |e| {
        is(e, ADMIN, "create", "configmaps", "watched") && e["stage"] == "ResponseComplete"
    });
    assert_eq!(created["responseStatus"]["code"], 201, "{created}");
    let annotations = &created["annotations"];
    assert_eq!(
        annotations["validation.policy.admission.k8s.io/validation_failure"],
        r#"[{"message":"every ConfigMap names its team","policy":"labelled","binding":"labelled-audit","expressionIndex":1,"validationActions":["Audit"]}]"#,
        "{created}"
    );
    assert_eq!(annotations["labelled/size"], "2", "{created}");

    let pod = last(&all, "the pod's create", |e| {
        is(e, ADMIN, "create", "pods", "watched") && e["stage"] == "ResponseComplete"
    });
    assert_eq!(pod["responseStatus"]["code"], 201, "{pod}");
    assert_eq!(
        pod["annotations"]["pod-security.kubernetes.io/enforce-policy"], "privileged:latest",
        "{pod}"
    );
    let violations = pod["annotations"]["pod-security.kubernetes.io/audit-violations"]
        .as_str()
        .unwrap_or_default();
    assert!(
        violations.starts_with("would violate PodSecurity \"restricted:latest\": privileged (container \"c\" must not set securityContext.privileged=true)"),
        "{pod}"
    );
}

/// What the audit webhook received: each POST's `Authorization` header and body.
type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// An audit webhook on loopback (plain HTTP, as a kubeconfig may name one) that keeps what it
/// is sent; returns its URL.
async fn audit_webhook(received: Received) -> String {
    use axum::http::HeaderMap;
    let app = axum::Router::new().route(
        "/audit",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let received = received.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let list: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                received.lock().unwrap().push((auth, list));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://127.0.0.1:{port}/audit")
}

/// With `webhookConfigFile`, every replica also sends its events, in `audit.k8s.io/v1`
/// `EventList` batches, to the webhook its kubeconfig names, with that kubeconfig's token —
/// the same events its log has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_events_reach_the_webhook_in_batches() {
    let received = Received::default();
    let url = audit_webhook(received.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("audit-webhook.yaml");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: apiserver\n  user: {{token: hook-token}}\ncontexts:\n- name: audit\n  context: {{cluster: audit, user: apiserver}}\ncurrent-context: audit\n"
        ),
    )
    .unwrap();
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/audit-policy.yaml");
    let k = Kube::start_with(Options {
        audit_policy: Some(policy),
        audit_webhook: Some(kubeconfig),
        ..Options::default()
    })
    .await;
    k.ok("node-1", &["create", "configmap", "hooked", "-n", "default"]);

    let sent = eventually(T, || async {
        let lists = received.lock().unwrap().clone();
        let events: Vec<(String, Value)> = lists
            .iter()
            .flat_map(|(auth, list)| {
                list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |e| (auth.clone(), e.clone()))
            })
            .collect();
        let created = events.iter().find(|(_, e)| {
            is(e, ADMIN, "create", "configmaps", "default")
                && e["objectRef"]["name"] == "hooked"
                && e["stage"] == "ResponseComplete"
        });
        match created {
            Some(found) => Ok((lists, found.clone())),
            None => Err(format!(
                "no create of configmap hooked among {} events",
                events.len()
            )),
        }
    })
    .await;
    let (lists, (auth, event)) = sent;
    assert_eq!(auth, "Bearer hook-token");
    for (_, list) in &lists {
        assert_eq!(list["kind"], "EventList", "{list}");
        assert_eq!(list["apiVersion"], "audit.k8s.io/v1", "{list}");
    }
    assert_eq!(event["responseStatus"]["code"], 201, "{event}");
    // The same event, written to the log of the replica that served it.
    let id = event["auditID"].as_str().unwrap().to_string();
    eventually(T, || async {
        let logged = events(&k);
        let same = by_id(&logged, &id);
        if same.iter().any(|(_, e)| *e == event) {
            Ok(())
        } else {
            Err(format!("{id} is not in replica 0's log as the webhook got it"))
        }
    })
    .await;
}
