//! Writes the way kubectl makes them, on a real three-replica cluster: client-side `apply`
//! twice with edits (strategic merge patch against the last-applied configuration), `patch`
//! of every type, `edit` with a scripted editor, `diff`, server-side dry runs, server-side
//! field validation, and many concurrent patches through different replicas losing nothing.

mod support;

use std::process::Command;

use serde_json::{json, Value};
use support::kube::Kube;

const V1: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web, tier: front}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1
        env: [{name: MODE, value: fast}]
      - name: sidecar
        image: busybox
";

const V2: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:2
        env: [{name: MODE, value: fast}, {name: LEVEL, value: '3'}]
";

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_patch_edit_diff_and_dry_run() {
    let k = Kube::start().await;
    let v1 = k.manifest("v1.yaml", V1);
    let v2 = k.manifest("v2.yaml", V2);
    assert!(k
        .ok("node-1", &["apply", "-f", &v1])
        .contains("deployment.apps/web created"));

    // diff: nothing to show for the applied manifest (exit 0), the edit shows (exit 1).
    let (ok, out, err) = k.kubectl("node-2", &["diff", "-f", &v1]);
    assert!(ok, "no difference expected: {out}{err}");
    let (ok, out, err) = k.kubectl("node-2", &["diff", "-f", &v2]);
    assert!(!ok && err.is_empty(), "diff exits 1 on a difference: {err}");
    assert!(
        out.contains("-        image: nginx:1") && out.contains("+        image: nginx:2"),
        "{out}"
    );

    // A server-side dry run of the edit changes nothing.
    let out = k.ok("node-3", &["apply", "--dry-run=server", "-f", &v2]);
    assert!(out.contains("(server dry run)"), "{out}");
    let d = k.json("node-1", &["get", "deployment", "web"]);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1");
    assert_eq!(d["metadata"]["generation"], 1);

    // Client-side apply of the edit: the removed container and label go, the rest merges.
    assert!(k
        .ok("node-2", &["apply", "-f", &v2])
        .contains("deployment.apps/web configured"));
    let d = k.json("node-3", &["get", "deployment", "web"]);
    let containers = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["nginx"]);
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(names(&containers[0]["env"]), ["MODE", "LEVEL"]);
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(d["metadata"]["generation"], 2);
    // Defaults survive the merge.
    assert_eq!(containers[0]["terminationMessagePath"], "/dev/termination-log");
    assert!(k.ok("node-1", &["apply", "-f", &v2]).contains("unchanged"));

    // patch: strategic (kubectl's default), merge and json.
    k.ok(
        "node-1",
        &[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","env":[{"name":"EXTRA","value":"1"}]}]}}}}"#,
        ],
    );
    let env = k.json("node-2", &["get", "deployment", "web"])["spec"]["template"]["spec"]["containers"][0]
        ["env"]
        .clone();
    // kube-apiserver puts the patch's items first (the old ones keep their order after them).
    assert_eq!(names(&env), ["EXTRA", "MODE", "LEVEL"]);
    k.ok(
        "node-3",
        &[
            "patch",
            "deployment",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"replicas":2}}"#,
        ],
    );
    k.ok(
        "node-2",
        &[
            "patch",
            "deployment",
            "web",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/metadata/labels/patched","value":"yes"}]"#,
        ],
    );
    let d = k.json("node-1", &["get", "deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["metadata"]["labels"]["patched"], "yes");
    let (ok, _, err) = k.kubectl(
        "node-1",
        &["patch", "deployment", "web", "-p", r#"{"spec":{"replicaz":3}}"#],
    );
    // kubectl patch leaves fieldValidation at the server's default, Warn: dropped, with a warning.
    assert!(
        ok && err.contains("Warning: unknown field \"spec.replicaz\""),
        "{err}"
    );
    let d = k.json("node-2", &["get", "deployment", "web"]);
    assert!(d["spec"].get("replicaz").is_none(), "{d}");
    let r = k
        .http
        .patch(k.url(
            0,
            "/apis/apps/v1/namespaces/default/deployments/web?fieldValidation=Strict",
        ))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"spec":{"replicaz":3}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let status: Value = r.json().await.unwrap();
    assert_eq!(status["reason"], "BadRequest", "{status}");
    let (ok, _, err) = k.kubectl(
        "node-1",
        &[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}"#,
        ],
    );
    assert!(
        !ok && err.contains("merge key"),
        "a list item without its merge key: {err}"
    );

    // edit with a scripted editor, through another replica.
    let edit = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .arg("--cache-dir")
        .arg(&k.cache_dir)
        .args(["--context", "node-3", "edit", "deployment", "web"])
        .env("KUBE_EDITOR", "sed -i s/nginx:2/nginx:3/")
        .output()
        .expect("kubectl is installed");
    assert!(edit.status.success(), "{}", String::from_utf8_lossy(&edit.stderr));
    assert!(String::from_utf8_lossy(&edit.stdout).contains("deployment.apps/web edited"));
    let d = k.json("node-1", &["get", "deployment", "web"]);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:3");

    // Server-side dry runs of create and delete persist nothing.
    let out = k.ok(
        "node-2",
        &[
            "create",
            "configmap",
            "ghost",
            "--from-literal=a=b",
            "--dry-run=server",
            "-o",
            "name",
        ],
    );
    assert_eq!(out.trim(), "configmap/ghost");
    let (ok, _, err) = k.kubectl("node-3", &["get", "configmap", "ghost"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
    k.ok("node-1", &["delete", "deployment", "web", "--dry-run=server"]);
    k.ok("node-3", &["get", "deployment", "web"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_through_every_replica_lose_nothing() {
    let k = Kube::start().await;
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            0,
            "/api/v1/namespaces/default/configmaps",
            Some(&json!({"metadata": {"name": "shared"}})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let kinds = [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ];
    let mut tasks = Vec::new();
    for i in 0..45 {
        let url = k.url(i % 3, "/api/v1/namespaces/default/configmaps/shared");
        let http = k.http.clone();
        let kind = kinds[i % 2];
        tasks.push(tokio::spawn(async move {
            let r = http
                .patch(url)
                .header("content-type", kind)
                .body(json!({"data": {format!("k{i}"): i.to_string()}}).to_string())
                .send()
                .await
                .expect("the request completes");
            r.status().as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task"), 200);
    }
    for node in 0..3 {
        let (code, cm) = k
            .send(
                reqwest::Method::GET,
                node,
                "/api/v1/namespaces/default/configmaps/shared",
                None,
            )
            .await;
        assert_eq!(code, 200);
        let data = cm["data"].as_object().expect("data");
        assert_eq!(data.len(), 45, "every patch is reflected on node {node}: {cm}");
    }
}

const SSA_FIRST: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: default
  labels: {app: api, tier: back}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - {name: server, image: 'server:1'}
      - {name: sidecar, image: busybox}
";

const SSA_REPLICAS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: default
spec:
  replicas: 3
";

const SSA_SECOND: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: default
  labels: {app: api}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - {name: server, image: 'server:2'}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_with_kubectl() {
    let k = Kube::start().await;
    let first = k.manifest("first.yaml", SSA_FIRST);
    let replicas = k.manifest("replicas.yaml", SSA_REPLICAS);
    let second = k.manifest("second.yaml", SSA_SECOND);

    let out = k.ok("node-1", &["apply", "--server-side", "-f", &first]);
    assert!(out.contains("deployment.apps/api serverside-applied"), "{out}");
    let d = k.json("node-2", &["get", "deployment", "api", "--show-managed-fields"]);
    let entries = d["metadata"]["managedFields"].as_array().expect("managedFields");
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["manager"], "kubectl");
    assert_eq!(entries[0]["operation"], "Apply");
    assert_eq!(entries[0]["apiVersion"], "apps/v1");
    assert!(entries[0]["fieldsV1"]["f:spec"]["f:replicas"].is_object(), "{d}");
    // Defaults were applied to the created object as to any other.
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");

    // Another manager changing an owned field conflicts, naming owner and field.
    let (ok, _, err) = k.kubectl(
        "node-3",
        &[
            "apply",
            "--server-side",
            "--field-manager=scaler",
            "-f",
            &replicas,
        ],
    );
    assert!(!ok, "a conflict must fail");
    assert!(
        err.contains("Apply failed with 1 conflict: conflict with \"kubectl\"")
            && err.contains(".spec.replicas"),
        "{err}"
    );
    assert_eq!(
        k.json("node-1", &["get", "deployment", "api"])["spec"]["replicas"],
        1
    );
    // Forced, the scaler takes the field.
    k.ok(
        "node-3",
        &[
            "apply",
            "--server-side",
            "--field-manager=scaler",
            "--force-conflicts",
            "-f",
            &replicas,
        ],
    );
    let d = k.json("node-2", &["get", "deployment", "api", "--show-managed-fields"]);
    assert_eq!(d["spec"]["replicas"], 3);
    let owner_of_replicas: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fieldsV1"]["f:spec"].get("f:replicas").is_some())
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert_eq!(owner_of_replicas, ["scaler"]);

    // kubectl's next apply omits replicas, a label and a container: what only it owned goes,
    // the scaler's replicas stay.
    let out = k.ok("node-1", &["apply", "--server-side", "-f", &second]);
    assert!(out.contains("serverside-applied"), "{out}");
    let d = k.json("node-3", &["get", "deployment", "api"]);
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["metadata"]["labels"], json!({"app": "api"}));
    let containers = &d["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["server"]);
    assert_eq!(containers[0]["image"], "server:2");

    // A server-side dry run changes nothing; diff shows the change. (The first manifest
    // would conflict now: the scaler owns replicas.)
    let third = k.manifest("third.yaml", &SSA_SECOND.replace("server:2", "server:3"));
    let (ok, out, err) = k.kubectl("node-2", &["diff", "--server-side", "-f", &third]);
    assert!(!ok && out.contains("+      - image: server:3"), "{out}{err}");
    let (ok, _, err) = k.kubectl("node-2", &["diff", "--server-side", "-f", &first]);
    assert!(!ok && err.contains("conflict with \"scaler\""), "{err}");
    k.ok(
        "node-2",
        &["apply", "--server-side", "--dry-run=server", "-f", &third],
    );
    assert_eq!(
        k.json("node-1", &["get", "deployment", "api"])["spec"]["template"]["spec"]["containers"][0]["image"],
        "server:2"
    );

    // Over HTTP: apply needs a manager and no managedFields; managedFields [{}] resets them.
    let url = "/apis/apps/v1/namespaces/default/deployments/api";
    let apply = |query: &str, body: &str| {
        let r = k
            .http
            .patch(k.url(0, &format!("{url}{query}")))
            .header("content-type", "application/apply-patch+yaml")
            .body(body.to_string())
            .send();
        async move {
            let r = r.await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (code, status) = apply("", SSA_REPLICAS).await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap_or("")
            .contains("fieldManager: Required value"),
        "{status}"
    );
    let with_managed =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  managedFields: [{manager: x}]\n";
    let (code, status) = apply("?fieldManager=x", with_managed).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["message"], "metadata.managedFields must be nil");
    let (code, status) = apply("?fieldManager=x", "[1, 2]").await;
    assert_eq!(code, 400, "{status}");
    let (code, status) = k.send(reqwest::Method::PATCH, 1, url, None).await;
    assert_eq!(code, 415, "a PATCH without a patch type: {status}");
    let r = k
        .http
        .patch(k.url(1, url))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"metadata":{"managedFields":[{}]}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let d = k.json("node-3", &["get", "deployment", "api", "--show-managed-fields"]);
    assert!(d["metadata"].get("managedFields").is_none(), "{d}");
}

const PORTS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: ports
  namespace: default
spec:
  selector: {matchLabels: {app: ports}}
  template:
    metadata: {labels: {app: ports}}
    spec:
      containers:
      - name: web
        image: nginx
        ports: [{containerPort: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: ports
  namespace: default
spec:
  selector: {app: ports}
  ports: [{port: 80}]
";

/// Issue 20, bug 6: list-map items match on their keys with the keys' schema defaults filled
/// (`protocol: TCP` for container and service ports), so a re-apply is a no-op and a second
/// manager applying the same values shares them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_matches_list_items_by_defaulted_keys() {
    let k = Kube::start().await;
    let ports = k.manifest("ports.yaml", PORTS);
    for _ in 0..3 {
        k.ok("node-1", &["apply", "--server-side", "-f", &ports]);
    }
    let d = k.json("node-2", &["get", "deployment", "ports"]);
    assert_eq!(d["metadata"]["generation"], 1, "re-applies change nothing: {d}");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    let svc = k.json("node-2", &["get", "service", "ports"]);
    let svc_ports = svc["spec"]["ports"].as_array().expect("ports");
    assert_eq!(svc_ports.len(), 1, "{svc}");
    assert_eq!(svc_ports[0]["protocol"], "TCP");

    // A second manager applying the same values shares them instead of conflicting.
    let (ok, out, err) = k.kubectl(
        "node-3",
        &["apply", "--server-side", "--field-manager=other", "-f", &ports],
    );
    assert!(ok, "identical values are shared: {out}{err}");
    let d = k.json("node-1", &["get", "deployment", "ports", "--show-managed-fields"]);
    assert_eq!(d["metadata"]["generation"], 1, "{d}");
    let port_key = r#"k:{"containerPort":80,"protocol":"TCP"}"#;
    for manager in ["kubectl", "other"] {
        let entry = d["metadata"]["managedFields"]
            .as_array()
            .expect("managedFields")
            .iter()
            .find(|e| e["manager"] == manager)
            .unwrap_or_else(|| panic!("{manager} has an entry: {d}"));
        let ports = &entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"web"}"#]
            ["f:ports"];
        assert_eq!(
            ports[port_key],
            json!({".": {}, "f:containerPort": {}}),
            "{manager} owns the port by its defaulted key: {entry}"
        );
    }
}

const CSA_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: upgraded
  namespace: default
  labels: {app: upgraded}
spec:
  containers:
  - name: main
    image: busybox:1
";

/// Issue 20, bug 7: an object applied client-side (`kubectl apply`) can be applied
/// server-side by kubectl: the fields its last-applied configuration recorded move to the
/// `kubectl` manager instead of conflicting with `kubectl-client-side-apply`, and the
/// annotation follows the new configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_upgrades_to_server_side() {
    let k = Kube::start().await;
    let pod = k.manifest("pod.yaml", CSA_POD);
    let changed = k.manifest(
        "pod-changed.yaml",
        &CSA_POD
            .replace("busybox:1", "busybox:2")
            .replace("{app: upgraded}", "{app: upgraded, tier: new}"),
    );
    k.ok("node-1", &["apply", "-f", &pod]);

    // diff --server-side is a dry-run apply by the same manager: it shows the change.
    let (ok, out, err) = k.kubectl("node-2", &["diff", "--server-side", "-f", &changed]);
    assert!(!ok && err.is_empty(), "diff exits 1 on a difference: {out}{err}");
    assert!(
        out.contains("-  - image: busybox:1") && out.contains("+  - image: busybox:2"),
        "{out}"
    );

    // Another manager still conflicts with the client-side owner.
    let (ok, _, err) = k.kubectl(
        "node-2",
        &["apply", "--server-side", "--field-manager=other", "-f", &changed],
    );
    assert!(
        !ok && err.contains("conflict with \"kubectl-client-side-apply\""),
        "{err}"
    );

    // kubectl follows a successful apply with its own migration of the client-side
    // managers (an apply of the annotation, a JSON patch of managedFields, the apply again):
    // all of it succeeds, without warnings.
    let (ok, out, err) = k.kubectl("node-3", &["apply", "--server-side", "-f", &changed]);
    assert!(ok && err.is_empty(), "{out}{err}");
    assert!(out.contains("pod/upgraded serverside-applied"), "{out}");
    let p = k.json("node-1", &["get", "pod", "upgraded", "--show-managed-fields"]);
    assert_eq!(p["spec"]["containers"][0]["image"], "busybox:2");
    assert_eq!(p["metadata"]["labels"]["tier"], "new");
    let last: Value = serde_json::from_str(
        p["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .expect("the annotation is kept"),
    )
    .expect("the annotation is JSON");
    assert_eq!(last["spec"]["containers"][0]["image"], "busybox:2", "{last}");
    assert_eq!(last["metadata"]["labels"]["tier"], "new", "{last}");
    let entries = p["metadata"]["managedFields"].as_array().expect("managedFields");
    let owner_of_image: Vec<&str> = entries
        .iter()
        .filter(|e| {
            e["fieldsV1"]["f:spec"]["f:containers"][r#"k:{"name":"main"}"#]
                .get("f:image")
                .is_some()
        })
        .map(|e| e["manager"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(owner_of_image, ["kubectl"], "{entries:?}");
    assert!(
        entries
            .iter()
            .all(|e| e["manager"] != "kubectl-client-side-apply"),
        "kubectl migrated the client-side manager's fields to its own: {entries:?}"
    );

    // Client-side apply keeps working from the annotation the server-side apply kept current:
    // the original manifest is a change back, not a no-op.
    let out = k.ok("node-1", &["apply", "-f", &pod]);
    assert!(out.contains("pod/upgraded configured"), "{out}");
    let p = k.json("node-2", &["get", "pod", "upgraded"]);
    assert_eq!(p["spec"]["containers"][0]["image"], "busybox:1");
    assert!(p["metadata"]["labels"].get("tier").is_none(), "{p}");
}
