//! Admission webhooks on a real three-replica cluster: a webhook server in the test (its own CA
//! made with rcgen, HTTPS on a local port) registered by `url` or through a Service, driven with
//! kubectl and HTTP — mutation by JSONPatch seen on every replica, denials with the webhook's
//! message, warnings kubectl prints, reinvocation, namespace and object selectors, deletes with
//! the old object, dry runs, timeouts and unreachable webhooks under both failure policies,
//! configurations that no webhook can block, and invalid configurations refused with kube's
//! messages.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::Version;
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use reqwest::Method;
use serde_json::{json, Value};
use support::kube::Kube;
use support::tls_server::TlsServer;
use support::*;

/// What the webhook server saw: calls per path, the last review per path, and the HTTP
/// versions it was spoken to in.
#[derive(Default)]
struct Seen {
    calls: HashMap<String, usize>,
    last: HashMap<String, Value>,
    versions: Vec<Version>,
}

/// The webhook server running in the test.
struct Hooks {
    server: TlsServer,
    seen: Arc<Mutex<Seen>>,
}

impl Hooks {
    fn calls(&self, path: &str) -> usize {
        self.seen.lock().unwrap().calls.get(path).copied().unwrap_or(0)
    }

    fn last(&self, path: &str) -> Value {
        self.seen
            .lock()
            .unwrap()
            .last
            .get(path)
            .cloned()
            .unwrap_or(Value::Null)
    }

    fn ca_bundle(&self) -> String {
        self.server.ca_bundle()
    }

    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }
}

/// A JSONPatch that sets `metadata.<field>.<key>` to `value`.
fn set_patch(obj: &Value, field: &str, key: &str, value: &str) -> Value {
    if obj["metadata"][field].is_object() {
        json!([{"op": "add", "path": format!("/metadata/{field}/{key}"), "value": value}])
    } else {
        json!([{"op": "add", "path": format!("/metadata/{field}"), "value": {key: value}}])
    }
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// What each path of the webhook server does.
async fn review(
    State(seen): State<Arc<Mutex<Seen>>>,
    Path(path): Path<String>,
    version: Version,
    Json(review): Json<Value>,
) -> Json<Value> {
    {
        let mut s = seen.lock().unwrap();
        *s.calls.entry(path.clone()).or_default() += 1;
        s.last.insert(path.clone(), review.clone());
        s.versions.push(version);
    }
    let req = &review["request"];
    let obj = &req["object"];
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let mut response = json!({"uid": req["uid"], "allowed": true});
    let mut patch = None;
    // `beta-X` does what `X` does, answering as a bare `admission.k8s.io/v1beta1` webhook may.
    let beta = path.strip_prefix("beta-");
    match beta.unwrap_or(&path) {
        // A delete is admitted with no object: there is nothing to label.
        "label" if !obj.is_null() => patch = Some(set_patch(obj, "labels", "webhook-added", "yes")),
        "stamp" => {
            patch = Some(json!([{"op": "add", "path": "/metadata/annotations", "value": {"stamped": "yes"}}]))
        }
        "first" => {
            let seen_b = label(obj, "b").is_some().to_string();
            patch = Some(set_patch(obj, "annotations", "seen-b", &seen_b));
        }
        "second" => patch = Some(set_patch(obj, "labels", "b", "1")),
        "note" => {
            let note = format!("{} (noted)", obj["note"].as_str().unwrap_or_default());
            patch = Some(json!([{"op": "add", "path": "/note", "value": note}]));
        }
        "deny" if label(obj, "forbidden") == Some("true") => {
            response["allowed"] = json!(false);
            response["status"] =
                json!({"message": "label forbidden is not allowed", "reason": "Forbidden", "code": 403});
        }
        "deny" if req["operation"] == "DELETE" && label(&req["oldObject"], "keep") == Some("true") => {
            response["allowed"] = json!(false);
            response["status"] = json!({"message": "this configmap is kept"});
        }
        "deny" => response["warnings"] = json!([format!("configmap {name} looks fine")]),
        "slow" => tokio::time::sleep(Duration::from_secs(4)).await,
        "no-rm"
            if obj["command"]
                .as_array()
                .is_some_and(|c| c.iter().any(|w| w == "rm")) =>
        {
            response["allowed"] = json!(false);
            response["status"] = json!({"message": "no rm in exec", "reason": "Forbidden", "code": 403});
        }
        _ => {}
    }
    if let Some(p) = patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(p.to_string()));
    }
    if beta.is_some() {
        // No apiVersion, kind, uid or patchType: kube never checked them in v1beta1.
        let response = response.as_object_mut().expect("the response is an object");
        response.remove("uid");
        response.remove("patchType");
        return Json(json!({"response": response}));
    }
    Json(json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}))
}

/// Starts the webhook server, with a certificate of a fresh CA for `127.0.0.1` and
/// `hooks.webhooks.svc`.
fn start_hooks() -> Hooks {
    start_hooks_with_ca("webhook-test-ca")
}

/// Like [`start_hooks`], its CA named `ca`.
fn start_hooks_with_ca(ca: &str) -> Hooks {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = Router::new()
        .route("/{*path}", post(review))
        .with_state(seen.clone());
    let server = TlsServer::start_with_ca(app, &["hooks.webhooks.svc"], ca);
    Hooks { server, seen }
}

/// One webhook of a configuration, for configmaps in namespaces labelled `webhooks=<scope>`.
fn webhook(name: &str, client: Value, scope: &str, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": client,
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "namespaceSelector": {"matchLabels": {"webhooks": scope}},
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        w[k] = v.clone();
    }
    w
}

fn by_url(hooks: &Hooks, path: &str) -> Value {
    json!({"url": hooks.url(path), "caBundle": hooks.ca_bundle()})
}

/// Creates a webhook configuration through replica 1 with kubectl.
fn configure(k: &Kube, kind: &str, name: &str, webhooks: Vec<Value>) {
    let config = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": webhooks,
    });
    let file = k.manifest(&format!("{name}.json"), &config.to_string());
    k.ok("node-1", &["create", "-f", &file]);
}

fn namespace(k: &Kube, name: &str, scope: &str) {
    k.ok("node-1", &["create", "namespace", name]);
    k.ok(
        "node-1",
        &["label", "namespace", name, &format!("webhooks={scope}")],
    );
}

fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"a": "b"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_mutate_and_validate_writes_on_every_replica() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    namespace(&k, "hooked", "on");
    k.ok("node-1", &["create", "namespace", "plain"]);
    configure(
        &k,
        "MutatingWebhookConfiguration",
        "labels",
        vec![
            webhook("label.example.com", by_url(&hooks, "label"), "on", json!({})),
            webhook(
                "first.example.com",
                by_url(&hooks, "first"),
                "on",
                json!({"reinvocationPolicy": "IfNeeded", "objectSelector": {"matchLabels": {"reinvoke": "yes"}}}),
            ),
            webhook(
                "second.example.com",
                by_url(&hooks, "second"),
                "on",
                json!({"objectSelector": {"matchLabels": {"reinvoke": "yes"}}}),
            ),
        ],
    );
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "deny",
        vec![webhook(
            "deny.example.com",
            by_url(&hooks, "deny"),
            "on",
            json!({}),
        )],
    );

    // Written through another replica right after the configurations: the mutating webhook's
    // label is there on every replica, and the validating webhook's warning is printed.
    let (ok, out, err) = k.kubectl(
        "node-2",
        &["-n", "hooked", "create", "configmap", "cm", "--from-literal=a=b"],
    );
    assert!(ok, "{out}{err}");
    assert!(err.contains("Warning: configmap cm looks fine"), "{err}");
    for node in ["node-1", "node-2", "node-3"] {
        let cm = k.json(node, &["-n", "hooked", "get", "configmap", "cm"]);
        assert_eq!(label(&cm, "webhook-added"), Some("yes"), "{node}: {cm}");
    }
    let review = hooks.last("label");
    assert_eq!(review["request"]["operation"], "CREATE");
    assert_eq!(review["request"]["namespace"], "hooked");
    assert_eq!(
        review["request"]["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(
        review["request"]["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(review["request"]["userInfo"]["username"], ADMIN);
    assert_eq!(review["request"]["dryRun"], false);
    assert!(hooks
        .seen
        .lock()
        .unwrap()
        .versions
        .iter()
        .all(|v| *v == Version::HTTP_2));

    // The namespace selector: nothing happens in a namespace without the label.
    k.ok(
        "node-3",
        &["-n", "plain", "create", "configmap", "cm", "--from-literal=a=b"],
    );
    let cm = k.json("node-3", &["-n", "plain", "get", "configmap", "cm"]);
    assert_eq!(label(&cm, "webhook-added"), None, "{cm}");

    // A denial: the webhook's Status, its message prefixed, through kubectl and HTTP.
    let file = k.manifest(
        "forbidden.json",
        &configmap("bad", json!({"forbidden": "true"})).to_string(),
    );
    let (ok, _, err) = k.kubectl("node-3", &["-n", "hooked", "create", "-f", &file]);
    assert!(!ok);
    assert!(
        err.contains(
            r#"admission webhook "deny.example.com" denied the request: label forbidden is not allowed"#
        ),
        "{err}"
    );
    let path = "/api/v1/namespaces/hooked/configmaps";
    let (code, status) = k
        .send(
            Method::POST,
            1,
            path,
            Some(&configmap("bad", json!({"forbidden": "true"}))),
        )
        .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "admission webhook \"deny.example.com\" denied the request: label forbidden is not allowed",
            "reason": "Forbidden", "code": 403})
    );

    // Reinvocation: the first webhook runs again after the second changed the object; the
    // object selector keeps both away from other objects.
    let before = hooks.calls("first");
    k.ok(
        "node-1",
        &[
            "-n",
            "hooked",
            "create",
            "configmap",
            "other",
            "--from-literal=a=b",
        ],
    );
    assert_eq!(hooks.calls("first"), before);
    let file = k.manifest(
        "re.json",
        &configmap("re", json!({"reinvoke": "yes"})).to_string(),
    );
    k.ok("node-2", &["-n", "hooked", "create", "-f", &file]);
    assert_eq!(hooks.calls("first"), before + 2);
    let cm = k.json("node-1", &["-n", "hooked", "get", "configmap", "re"]);
    assert_eq!(cm["metadata"]["annotations"]["seen-b"], "true", "{cm}");
    assert_eq!(label(&cm, "b"), Some("1"), "{cm}");

    // A delete reaches the validating webhook with the old object, and it may refuse it.
    k.ok(
        "node-1",
        &["-n", "hooked", "label", "configmap", "cm", "keep=true"],
    );
    let (ok, _, err) = k.kubectl("node-2", &["-n", "hooked", "delete", "configmap", "cm"]);
    assert!(!ok);
    assert!(
        err.contains(r#"admission webhook "deny.example.com" denied the request: this configmap is kept"#),
        "{err}"
    );
    assert_eq!(
        hooks.last("deny")["request"]["oldObject"]["metadata"]["name"],
        "cm"
    );
    k.ok("node-3", &["-n", "hooked", "get", "configmap", "cm"]);
    let (code, status) = k
        .send(Method::DELETE, 2, "/api/v1/namespaces/hooked/configmaps/cm", None)
        .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status.get("reason"), None, "{status}");
    assert_eq!(
        status["message"],
        "admission webhook \"deny.example.com\" denied the request: this configmap is kept"
    );
    k.ok("node-1", &["-n", "hooked", "label", "configmap", "cm", "keep-"]);
    k.ok("node-2", &["-n", "hooked", "delete", "configmap", "cm"]);
    // The mutating webhooks see the delete first, before the object is read, with neither
    // object, as kube-apiserver admits it.
    let review = hooks.last("label");
    assert_eq!(review["request"]["operation"], "DELETE");
    assert_eq!(review["request"]["name"], "cm");
    assert!(
        review["request"]["object"].is_null() && review["request"]["oldObject"].is_null(),
        "{review}"
    );
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");

    // A mutating webhook that answers a delete with a patch fails it as kube fails it: there
    // is no object to patch. The object stays.
    namespace(&k, "stamped", "stamp");
    k.ok(
        "node-1",
        &["-n", "stamped", "create", "configmap", "cm", "--from-literal=a=b"],
    );
    let mut stamp = webhook("stamp.example.com", by_url(&hooks, "stamp"), "stamp", json!({}));
    stamp["rules"][0]["operations"] = json!(["DELETE"]);
    configure(&k, "MutatingWebhookConfiguration", "stamper", vec![stamp]);
    let (code, status) = k
        .send(
            Method::DELETE,
            0,
            "/api/v1/namespaces/stamped/configmaps/cm",
            None,
        )
        .await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(
        status["message"],
        "Internal error occurred: admission webhook \"stamp.example.com\" attempted to modify the object, which is not supported for this operation"
    );
    k.ok("node-2", &["-n", "stamped", "get", "configmap", "cm"]);
    k.ok("node-1", &["delete", "mutatingwebhookconfiguration", "stamper"]);
    k.ok("node-1", &["-n", "stamped", "delete", "configmap", "cm"]);

    // A CONNECT reaches webhooks with its options as the object: `kubectl exec` is refused
    // before any kubelet is asked, or passes on to find the pod has none.
    let mut no_rm = webhook("no-rm.example.com", by_url(&hooks, "no-rm"), "on", json!({}));
    no_rm["rules"] = json!([{"operations": ["CONNECT"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/exec"]}]);
    configure(&k, "ValidatingWebhookConfiguration", "no-rm", vec![no_rm]);
    k.ok("node-1", &["-n", "hooked", "run", "shell", "--image=busybox"]);
    k.refused(
        "node-2",
        &["-n", "hooked", "exec", "shell", "--", "rm", "-rf", "/"],
        r#"Error from server (Forbidden): admission webhook "no-rm.example.com" denied the request: no rm in exec"#,
    );
    let request = hooks.seen.lock().unwrap().last["no-rm"]["request"].clone();
    assert_eq!(
        (
            &request["operation"],
            &request["kind"],
            &request["resource"],
            &request["subResource"],
            &request["name"]
        ),
        (
            &json!("CONNECT"),
            &json!({"group": "", "version": "v1", "kind": "PodExecOptions"}),
            &json!({"group": "", "version": "v1", "resource": "pods"}),
            &json!("exec"),
            &json!("shell")
        )
    );
    assert_eq!(
        request["object"],
        json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdout": true, "stderr": true,
               "container": "shell", "command": ["rm", "-rf", "/"]})
    );
    assert_eq!(request["options"], Value::Null);
    k.refused(
        "node-3",
        &["-n", "hooked", "exec", "shell", "--", "ls"],
        "Error from server (BadRequest): pod shell does not have a host assigned",
    );
    k.ok("node-1", &["delete", "validatingwebhookconfiguration", "no-rm"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configurations_dry_runs_timeouts_and_unreachable_webhooks() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    let down = format!("https://127.0.0.1:{}/down", free_port());
    let down = json!({"url": down, "caBundle": hooks.ca_bundle()});
    for scope in ["none", "slow-fail", "slow-ignore", "down-fail", "down-ignore"] {
        namespace(&k, scope, scope);
    }
    // In admissionregistration.k8s.io/v1 a webhook must be free of side effects on dry runs
    // (kube refuses `Unknown` and `Some`), with kube's messages.
    let unknown = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "unknown"},
        "webhooks": [webhook("unknown", by_url(&hooks, "unknown"), "none", json!({"sideEffects": "Unknown", "timeoutSeconds": 31}))],
    });
    let file = k.manifest("unknown.json", &unknown.to_string());
    let (ok, _, err) = k.kubectl("node-1", &["create", "-f", &file]);
    assert!(!ok);
    let expected = r#"The ValidatingWebhookConfiguration "unknown" is invalid: 
* webhooks[0].name: Invalid value: "unknown": should be a domain with at least three segments separated by dots
* webhooks[0].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"
* webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"#;
    assert!(err.contains(expected), "{err}");
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "policies",
        vec![
            webhook("none.example.com", by_url(&hooks, "none"), "none", json!({})),
            webhook(
                "slow-fail.example.com",
                by_url(&hooks, "slow"),
                "slow-fail",
                json!({"timeoutSeconds": 1}),
            ),
            webhook(
                "slow-ignore.example.com",
                by_url(&hooks, "slow"),
                "slow-ignore",
                json!({"timeoutSeconds": 1, "failurePolicy": "Ignore"}),
            ),
            webhook(
                "down-fail.example.com",
                down.clone(),
                "down-fail",
                json!({"failurePolicy": "Fail"}),
            ),
            webhook(
                "down-ignore.example.com",
                down,
                "down-ignore",
                json!({"failurePolicy": "Ignore"}),
            ),
        ],
    );
    let create = |node: &str, ns: &str, extra: &[&str]| {
        let mut args = vec!["-n", ns, "create", "configmap", "x", "--from-literal=a=b"];
        args.extend(extra);
        k.kubectl(node, &args)
    };

    // sideEffects None: the dry run is sent, marked as one.
    let (ok, _, err) = create("node-3", "none", &["--dry-run=server"]);
    assert!(ok, "{err}");
    assert_eq!(hooks.last("none")["request"]["dryRun"], true);
    assert_eq!(hooks.last("none")["request"]["options"]["dryRun"], json!(["All"]));
    assert_eq!(hooks.calls("none"), 1);

    // A webhook that does not answer in time, and one that is down.
    let (ok, _, err) = create("node-1", "slow-fail", &[]);
    assert!(!ok);
    assert!(
        err.contains(r#"Internal error occurred: failed calling webhook "slow-fail.example.com": failed to call webhook: Post "https://127.0.0.1:"#)
            && err.contains("/slow?timeout=1s\": context deadline exceeded"),
        "{err}"
    );
    let (ok, _, err) = create("node-1", "slow-ignore", &[]);
    assert!(ok, "{err}");
    let (code, status) = k
        .send(
            Method::POST,
            2,
            "/api/v1/namespaces/down-fail/configmaps",
            Some(&configmap("x", json!({}))),
        )
        .await;
    assert_eq!(
        (code, &status["reason"]),
        (500, &json!("InternalError")),
        "{status}"
    );
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(r#"Internal error occurred: failed calling webhook "down-fail.example.com": failed to call webhook: Post "#),
        "{status}"
    );
    let (ok, _, err) = create("node-3", "down-ignore", &[]);
    assert!(ok, "{err}");

    // A webhook that refuses everything cannot keep its own configuration from being removed.
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "everything",
        vec![json!({
            "name": "everything.example.com",
            "clientConfig": {"url": format!("https://127.0.0.1:{}/x", free_port()), "caBundle": hooks.ca_bundle()},
            "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })],
    );
    let (ok, _, err) = create("node-2", "default", &[]);
    assert!(
        !ok && err.contains(r#"failed calling webhook "everything.example.com""#),
        "{err}"
    );
    k.ok(
        "node-2",
        &["delete", "validatingwebhookconfiguration", "everything"],
    );
    let (ok, _, err) = create("node-3", "default", &[]);
    assert!(ok, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_reached_through_its_service_endpoints() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    namespace(&k, "webhooks", "svc");
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks", "namespace": "webhooks"},
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "hooks-1", "namespace": "webhooks", "labels": {"kubernetes.io/service-name": "hooks"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
         "ports": [{"name": "https", "port": hooks.server.port, "protocol": "TCP"}]},
    ]});
    let file = k.manifest("service.json", &objects.to_string());
    k.ok("node-1", &["create", "-f", &file]);
    let service = json!({"service": {"namespace": "webhooks", "name": "hooks", "path": "/deny"}, "caBundle": hooks.ca_bundle()});
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "by-service",
        vec![webhook("svc.example.com", service, "svc", json!({}))],
    );
    let file = k.manifest(
        "forbidden.json",
        &configmap("bad", json!({"forbidden": "true"})).to_string(),
    );
    let (ok, _, err) = k.kubectl("node-3", &["-n", "webhooks", "create", "-f", &file]);
    assert!(!ok);
    assert!(
        err.contains(
            r#"admission webhook "svc.example.com" denied the request: label forbidden is not allowed"#
        ),
        "{err}"
    );
    assert_eq!(hooks.calls("deny"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn match_conditions_decide_which_writes_reach_a_webhook() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    for scope in ["cond", "err-fail", "err-ignore"] {
        namespace(&k, scope, scope);
    }
    // Conditions that cannot work are refused when the configuration is written.
    let conditions = json!([
        {"name": "params", "expression": "params.x == 1"},
        {"name": "sum", "expression": "1 + 2"},
        {"name": "sum", "expression": " "},
        {"name": "not a name!", "expression": "true"},
    ]);
    let invalid = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "invalid"},
        "webhooks": [webhook("invalid.example.com", by_url(&hooks, "cond"), "cond", json!({"matchConditions": conditions}))],
    });
    let file = k.manifest("invalid.json", &invalid.to_string());
    let (ok, _, err) = k.kubectl("node-1", &["create", "-f", &file]);
    assert!(!ok);
    for expected in [
        r#"The ValidatingWebhookConfiguration "invalid" is invalid: "#,
        r#"* webhooks[0].matchConditions[0].expression: Invalid value: "params.x == 1": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')"#,
        r#"* webhooks[0].matchConditions[1].expression: Invalid value: "1 + 2": must evaluate to bool"#,
        "* webhooks[0].matchConditions[2].expression: Required value",
        r#"* webhooks[0].matchConditions[2].name: Duplicate value: "sum""#,
        r#"* webhooks[0].matchConditions[3].name: Invalid value: "not a name!": name part must consist of alphanumeric characters"#,
    ] {
        assert!(err.contains(expected), "{expected}\n{err}");
    }
    let too_many: Vec<Value> = (0..65)
        .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
        .collect();
    let mut many = invalid.clone();
    many["webhooks"][0]["matchConditions"] = json!(too_many);
    let (code, status) = k
        .send(
            Method::POST,
            2,
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            Some(&many),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"invalid\" is invalid: webhooks[0].matchConditions: Too many: 65: must have at most 64 items"
    );

    let failing = json!([{"name": "missing", "expression": "object.data.missing == 'x'"}]);
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "conditions",
        vec![
            webhook(
                "cond.example.com",
                by_url(&hooks, "cond"),
                "cond",
                json!({"matchConditions": [
                    {"name": "creates", "expression": "request.operation == 'CREATE'"},
                    {"name": "named", "expression": "object.metadata.name.startsWith('in-') && oldObject == null"},
                    {"name": "secret-readers", "expression": "authorizer.group('').resource('secrets').namespace('cond').check('get').allowed() && authorizer.requestResource.check('create').allowed()"},
                ]}),
            ),
            webhook(
                "err-fail.example.com",
                by_url(&hooks, "err-fail"),
                "err-fail",
                json!({"matchConditions": failing}),
            ),
            webhook(
                "err-ignore.example.com",
                by_url(&hooks, "err-ignore"),
                "err-ignore",
                json!({"failurePolicy": "Ignore", "matchConditions": failing}),
            ),
        ],
    );

    // All conditions true: the webhook is called; any false: it is not.
    let create = |node: &str, ns: &str, name: &str| {
        k.kubectl(
            node,
            &["-n", ns, "create", "configmap", name, "--from-literal=a=b"],
        )
    };
    let (ok, _, err) = create("node-2", "cond", "in-a");
    assert!(ok, "{err}");
    assert_eq!(hooks.calls("cond"), 1);
    assert_eq!(hooks.last("cond")["request"]["name"], "in-a");
    let (ok, _, err) = create("node-3", "cond", "out-b");
    assert!(ok, "{err}");
    assert_eq!(hooks.calls("cond"), 1);
    k.ok("node-1", &["-n", "cond", "label", "configmap", "in-a", "x=y"]);
    assert_eq!(hooks.calls("cond"), 1);
    // The authorizer answers for the request's user: carol may create ConfigMaps but not read
    // Secrets, so her create does not reach the webhook.
    k.ok(
        "node-1",
        &[
            "-n",
            "cond",
            "create",
            "role",
            "cm-creator",
            "--verb=create",
            "--resource=configmaps",
        ],
    );
    k.ok(
        "node-1",
        &[
            "-n",
            "cond",
            "create",
            "rolebinding",
            "carol",
            "--role=cm-creator",
            "--user=carol",
        ],
    );
    let carol = k.kubeconfig_for("carol", &[]);
    let (ok, _, err) = k.kubectl_with(&carol, 2, &["-n", "cond", "create", "configmap", "in-carol"]);
    assert!(ok, "{err}");
    assert_eq!(hooks.calls("cond"), 1);

    // A condition that fails to evaluate: kube's Forbidden under Fail (the webhook is not
    // called), the write goes through without the webhook under Ignore.
    let (ok, _, err) = create("node-1", "err-fail", "x");
    assert!(!ok);
    let message = r#"configmaps "x" is forbidden: expression 'object.data.missing == 'x'' resulted in error: no such key: missing"#;
    assert!(err.contains(message), "{err}");
    let (code, status) = k
        .send(
            Method::POST,
            0,
            "/api/v1/namespaces/err-fail/configmaps",
            Some(&configmap("x", json!({}))),
        )
        .await;
    assert_eq!((code, &status["reason"]), (403, &json!("Forbidden")), "{status}");
    assert_eq!(status["message"], message);
    let (ok, _, err) = create("node-2", "err-ignore", "x");
    assert!(ok, "{err}");
    assert_eq!(hooks.calls("err-fail") + hooks.calls("err-ignore"), 0);
}

/// `matchPolicy: Equivalent`: webhooks registered for `autoscaling/v2` see an autoscaler
/// written through `autoscaling/v1` converted to v2 (kind and resource in v2, `requestKind`
/// and `requestResource` in v1), and a mutating webhook's patch to the v2 object is converted
/// back into what v1 stores and shows; an `Exact` webhook for v2 is not called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_for_another_version_get_the_object_converted() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    namespace(&k, "scaled", "hpa");
    let v2_rule = json!([{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v2"], "resources": ["horizontalpodautoscalers"]}]);
    configure(
        &k,
        "MutatingWebhookConfiguration",
        "hpa-labels",
        vec![webhook(
            "label.example.com",
            by_url(&hooks, "label"),
            "hpa",
            json!({"rules": v2_rule}),
        )],
    );
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "hpa-checks",
        vec![
            webhook(
                "equivalent.example.com",
                by_url(&hooks, "equivalent"),
                "hpa",
                json!({"rules": v2_rule}),
            ),
            webhook(
                "exact.example.com",
                by_url(&hooks, "exact"),
                "hpa",
                json!({"rules": v2_rule, "matchPolicy": "Exact"}),
            ),
        ],
    );
    let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "scaled"},
        "spec": {"maxReplicas": 5, "targetCPUUtilizationPercentage": 70,
                 "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}});
    let file = k.manifest("hpa-v1.json", &v1.to_string());
    k.ok("node-2", &["create", "-f", &file]);

    assert_eq!(hooks.calls("exact"), 0);
    assert_eq!(hooks.calls("label"), 1);
    let review = hooks.last("equivalent");
    let req = &review["request"];
    assert_eq!(
        req["kind"],
        json!({"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "autoscaling", "version": "v2", "resource": "horizontalpodautoscalers"})
    );
    assert_eq!(
        req["requestKind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"})
    );
    assert_eq!(req["requestResource"]["version"], "v1");
    assert_eq!(req["object"]["apiVersion"], "autoscaling/v2");
    assert_eq!(
        req["object"]["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 70,
        "{review}"
    );
    // The validating webhook saw the mutating one's label, and so does every reader, in v1.
    assert_eq!(label(&req["object"], "webhook-added"), Some("yes"));
    let stored = k.json(
        "node-3",
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-n",
            "scaled",
        ],
    );
    assert_eq!(stored["apiVersion"], "autoscaling/v1");
    assert_eq!(label(&stored, "webhook-added"), Some("yes"));
    assert_eq!(stored["spec"]["targetCPUUtilizationPercentage"], 70);
    assert_eq!(hooks.last("label")["request"]["requestKind"]["version"], "v1");
}

/// A webhook whose `admissionReviewVersions` lists `v1beta1` as the first version kube knows
/// gets an `admission.k8s.io/v1beta1` review, and its answer (without apiVersion, kind, uid or
/// patchType, which kube never checked in v1beta1) denies and patches; a configuration naming
/// no version kube knows is refused with kube's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_speaking_v1beta1_get_and_answer_v1beta1_reviews() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    namespace(&k, "beta", "beta");
    let v2 = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "v2"},
        "webhooks": [webhook("v2.example.com", by_url(&hooks, "none"), "beta", json!({"admissionReviewVersions": ["v2"]}))],
    });
    let file = k.manifest("v2.json", &v2.to_string());
    let (ok, _, err) = k.kubectl("node-1", &["create", "-f", &file]);
    assert!(!ok);
    assert!(
        err.contains(r#"The ValidatingWebhookConfiguration "v2" is invalid: webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, v1beta1"#),
        "{err}"
    );
    configure(
        &k,
        "MutatingWebhookConfiguration",
        "beta-labels",
        vec![webhook(
            "label.beta.example.com",
            by_url(&hooks, "beta-label"),
            "beta",
            json!({"admissionReviewVersions": ["v2", "v1beta1", "v1"]}),
        )],
    );
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "beta-checks",
        vec![webhook(
            "deny.beta.example.com",
            by_url(&hooks, "beta-deny"),
            "beta",
            json!({"admissionReviewVersions": ["v1beta1"]}),
        )],
    );
    k.ok(
        "node-2",
        &["-n", "beta", "create", "configmap", "fine", "--from-literal=a=b"],
    );
    for path in ["beta-label", "beta-deny"] {
        let review = hooks.last(path);
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1", "{review}");
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(review["request"]["operation"], "CREATE");
        assert_eq!(review["request"]["object"]["metadata"]["name"], "fine");
    }
    // The validating webhook saw the mutating one's patch, and so does every reader.
    assert_eq!(
        label(&hooks.last("beta-deny")["request"]["object"], "webhook-added"),
        Some("yes")
    );
    let stored = k.json("node-3", &["-n", "beta", "get", "configmap", "fine"]);
    assert_eq!(label(&stored, "webhook-added"), Some("yes"), "{stored}");

    let (code, status) = k
        .send(
            Method::POST,
            1,
            "/api/v1/namespaces/beta/configmaps",
            Some(&configmap("denied", json!({"forbidden": "true"}))),
        )
        .await;
    assert_eq!(
        (code, status["reason"].as_str(), status["message"].as_str()),
        (
            403,
            Some("Forbidden"),
            Some(
                r#"admission webhook "deny.beta.example.com" denied the request: label forbidden is not allowed"#
            )
        ),
        "{status}"
    );
    assert_eq!(hooks.calls("none"), 0);
}

/// A webhook without a `caBundle` is verified against the system's trust roots, which the
/// replicas read from `SSL_CERT_FILE` as kube-apiserver's Go does: one whose CA is there is
/// called; one whose CA is not fails with Go's x509 error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_without_a_ca_bundle_are_verified_with_the_system_roots() {
    let trusted = start_hooks();
    let unknown = start_hooks_with_ca("another-test-ca");
    let roots = tempfile::tempdir().unwrap();
    let roots_file = roots.path().join("roots.pem");
    std::fs::write(&roots_file, &trusted.server.ca_pem).unwrap();
    let k = Kube::start_with(Options {
        env: vec![("SSL_CERT_FILE".into(), roots_file.display().to_string())],
        ..Options::default()
    })
    .await;
    namespace(&k, "trusted", "trusted");
    namespace(&k, "unknown", "unknown");
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "system-roots",
        vec![
            webhook(
                "trusted.example.com",
                json!({"url": trusted.url("deny")}),
                "trusted",
                json!({}),
            ),
            webhook(
                "unknown.example.com",
                json!({"url": unknown.url("deny")}),
                "unknown",
                json!({}),
            ),
        ],
    );
    for node in ["node-1", "node-2", "node-3"] {
        let name = format!("from-{node}");
        let (ok, _, err) = k.kubectl(
            node,
            &[
                "-n",
                "trusted",
                "create",
                "configmap",
                &name,
                "--from-literal=a=b",
            ],
        );
        assert!(ok, "{err}");
        assert!(
            err.contains(&format!("Warning: configmap {name} looks fine")),
            "{err}"
        );
    }
    assert_eq!(trusted.calls("deny"), 3);

    let (code, status) = k
        .send(
            Method::POST,
            2,
            "/api/v1/namespaces/unknown/configmaps",
            Some(&configmap("x", json!({}))),
        )
        .await;
    let expected = format!(
        r#"Internal error occurred: failed calling webhook "unknown.example.com": failed to call webhook: Post "{}?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority"#,
        unknown.url("deny")
    );
    assert_eq!(
        (code, status["message"].as_str()),
        (500, Some(expected.as_str())),
        "{status}"
    );
    assert_eq!(unknown.calls("deny"), 0);
}

/// events.k8s.io Events are core Events in kube (one storage kind, kube's equivalent
/// resources): under `matchPolicy: Equivalent` a webhook for `events.k8s.io/v1 events` is
/// called for a core Event created with kubectl, with the Event in events.k8s.io/v1 terms
/// (`note` for `message`, `regarding` for `involvedObject`), `kind` and `resource` in its
/// group, `requestKind` and `requestResource` in the request's, and a mutating webhook's
/// patch converted back into the core Event stored; an `Exact` webhook is not called. The
/// other way round, a webhook for core events sees an events.k8s.io Event as a core one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_for_events_k8s_io_see_core_events_and_back() {
    let hooks = start_hooks();
    let k = Kube::start().await;
    namespace(&k, "evented", "events");
    let rule = |group: &str| json!([{"operations": ["CREATE"], "apiGroups": [group], "apiVersions": ["v1"], "resources": ["events"]}]);
    configure(
        &k,
        "MutatingWebhookConfiguration",
        "event-notes",
        vec![webhook(
            "note.example.com",
            by_url(&hooks, "note"),
            "events",
            json!({"rules": rule("events.k8s.io")}),
        )],
    );
    configure(
        &k,
        "ValidatingWebhookConfiguration",
        "event-checks",
        vec![
            webhook(
                "equivalent.example.com",
                by_url(&hooks, "equivalent"),
                "events",
                json!({"rules": rule("events.k8s.io")}),
            ),
            webhook(
                "exact.example.com",
                by_url(&hooks, "exact"),
                "events",
                json!({"rules": rule("events.k8s.io"), "matchPolicy": "Exact"}),
            ),
            webhook(
                "core.example.com",
                by_url(&hooks, "core"),
                "events",
                json!({"rules": rule(""), "matchPolicy": "Equivalent"}),
            ),
        ],
    );
    let core = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "started", "namespace": "evented"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "evented"},
        "reason": "Started", "message": "container started", "type": "Normal",
        "source": {"component": "kubelet"}, "count": 1});
    let file = k.manifest("core-event.json", &core.to_string());
    k.ok("node-2", &["create", "-f", &file]);

    assert_eq!(hooks.calls("exact"), 0);
    assert_eq!(hooks.calls("note"), 1);
    assert_eq!(hooks.calls("core"), 1);
    let review = hooks.last("equivalent");
    let req = &review["request"];
    assert_eq!(
        (&req["kind"], &req["resource"]),
        (
            &json!({"group": "events.k8s.io", "version": "v1", "kind": "Event"}),
            &json!({"group": "events.k8s.io", "version": "v1", "resource": "events"})
        ),
        "{review}"
    );
    assert_eq!(
        (&req["requestKind"], &req["requestResource"]),
        (
            &json!({"group": "", "version": "v1", "kind": "Event"}),
            &json!({"group": "", "version": "v1", "resource": "events"})
        )
    );
    let seen = &req["object"];
    assert_eq!(seen["apiVersion"], "events.k8s.io/v1");
    assert_eq!(seen["regarding"]["name"], "web");
    assert_eq!(seen["deprecatedSource"]["component"], "kubelet");
    assert_eq!(seen["deprecatedCount"], 1);
    assert!(
        seen.get("message").is_none() && seen.get("involvedObject").is_none(),
        "{seen}"
    );
    // The mutating webhook's note is what the validating webhooks and every reader see.
    assert_eq!(seen["note"], "container started (noted)");
    assert_eq!(
        hooks.last("core")["request"]["object"]["message"],
        "container started (noted)"
    );
    let stored = k.json("node-3", &["-n", "evented", "get", "event", "started"]);
    assert_eq!(stored["message"], "container started (noted)", "{stored}");
    assert_eq!(stored["involvedObject"]["name"], "web");

    // The other way round: the events.k8s.io Event, as the core webhook's resource.
    let events = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "reported", "namespace": "evented"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/tests",
        "reportingInstance": "tests-1", "action": "Testing", "reason": "Tested", "type": "Normal",
        "note": "from events.k8s.io", "regarding": {"kind": "Pod", "name": "web", "namespace": "evented"}});
    let file = k.manifest("events-event.json", &events.to_string());
    k.ok("node-1", &["create", "-f", &file]);
    assert_eq!(hooks.calls("core"), 2);
    let review = hooks.last("core");
    let req = &review["request"];
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "Event"}),
        "{review}"
    );
    assert_eq!(req["requestKind"]["group"], "events.k8s.io");
    assert_eq!(req["object"]["apiVersion"], "v1");
    assert_eq!(req["object"]["message"], "from events.k8s.io (noted)");
    assert_eq!(req["object"]["reportingComponent"], "example.com/tests");
    assert_eq!(req["object"]["involvedObject"]["name"], "web");
    assert_eq!(hooks.calls("exact"), 1);
}
