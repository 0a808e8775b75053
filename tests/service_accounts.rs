//! ServiceAccounts as clusters have them, on a real three-replica cluster: every namespace gets
//! a `default` ServiceAccount and a `kube-root-ca.crt` ConfigMap holding the cluster CA (kept
//! by the leader's controllers: recreated when deleted, its data put back when edited), and
//! the `ServiceAccount` admission plugin gives every pod its ServiceAccount and the projected
//! token volume, driven by kubectl, plain HTTP and kube-rs.

mod support;

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use support::kube::Kube;
use support::{eventually, Cluster, Options};

const T: Duration = Duration::from_secs(30);

const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// What the token volume projects, as kube-apiserver's admission plugin writes it.
fn projected() -> Value {
    json!({"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}
    ]})
}

/// The name of a token volume, checked to be `kube-api-access-` and five characters of kube's
/// random alphabet.
fn token_volume_name(volume: &Value) -> String {
    let name = volume["name"]
        .as_str()
        .unwrap_or_else(|| panic!("not a volume: {volume}"))
        .to_string();
    let suffix = name
        .strip_prefix("kube-api-access-")
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        suffix.len() == 5 && suffix.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
        "{name}"
    );
    name
}

/// The mount every container gets.
fn token_mount(volume: &str) -> Value {
    json!({"mountPath": MOUNT_PATH, "name": volume, "readOnly": true})
}

/// GET of `path` through replica `node`: the object, or `None` on 404.
async fn get(k: &Kube, node: usize, path: &str) -> Option<Value> {
    match k.send(Method::GET, node, path, None).await {
        (200, body) => Some(body),
        (404, _) => None,
        (code, body) => panic!("GET {path}: {code} {body}"),
    }
}

/// Waits until `path` exists with a uid other than `old`, and returns it.
async fn recreated(k: &Kube, path: &str, old: &Value) -> Value {
    eventually(T, || async {
        match get(k, 1, path).await {
            Some(o) if o["metadata"]["uid"] != *old => Ok(o),
            Some(_) => Err(format!("{path} not deleted yet")),
            None => Err(format!("{path} not recreated yet")),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_gets_a_default_service_account_and_the_cluster_ca() {
    let k = Kube::start().await;
    let ca = k.cluster.ca_pem();
    // The system namespaces have theirs from the start.
    let listed = k.ok(
        "node-2",
        &[
            "get",
            "sa,cm",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
        ],
    );
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            listed.contains(&format!("ServiceAccount {ns}/default\n")),
            "{listed}"
        );
        assert!(
            listed.contains(&format!("ConfigMap {ns}/kube-root-ca.crt\n")),
            "{listed}"
        );
    }

    k.ok("node-2", &["create", "namespace", "team"]);
    let sa_path = "/api/v1/namespaces/team/serviceaccounts/default";
    let cm_path = "/api/v1/namespaces/team/configmaps/kube-root-ca.crt";
    k.wait_namespace_populated("team").await;
    let sa = k.json("node-3", &["-n", "team", "get", "serviceaccount", "default"]);
    assert_eq!(sa["metadata"]["name"], "default");
    assert!(sa["metadata"].get("labels").is_none(), "{sa}");
    assert!(sa["metadata"].get("annotations").is_none(), "{sa}");
    let table = k.ok("node-1", &["-n", "team", "get", "sa"]);
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "SECRETS", "AGE"], "{table}");
    assert_eq!((rows.len(), &rows[1][..2]), (2, &["default", "0"][..]), "{table}");
    let cm = k.json("node-3", &["-n", "team", "get", "configmap", "kube-root-ca.crt"]);
    assert_eq!(
        cm["data"],
        json!({"ca.crt": ca}),
        "the cluster CA, as its file holds it"
    );
    assert_eq!(
        cm["metadata"]["annotations"],
        json!({"kubernetes.io/description": DESCRIPTION})
    );
    // Written as kube-controller-manager writes them (kubectl hides managedFields): the
    // ConfigMap's data is its field; the ServiceAccount sets no field at all, so, as in kube,
    // it has no managedFields entry.
    let raw = get(&k, 0, cm_path).await.expect("it exists");
    assert_eq!(
        raw["metadata"]["managedFields"][0]["manager"], "kube-controller-manager",
        "{raw}"
    );
    let raw = get(&k, 0, sa_path).await.expect("it exists");
    assert!(raw["metadata"].get("managedFields").is_none(), "{raw}");

    // Deleted, each comes back (a new object).
    k.ok("node-1", &["-n", "team", "delete", "serviceaccount", "default"]);
    let again = recreated(&k, sa_path, &sa["metadata"]["uid"]).await;
    assert_eq!(again["metadata"]["name"], "default");
    k.ok(
        "node-3",
        &["-n", "team", "delete", "configmap", "kube-root-ca.crt"],
    );
    let again = recreated(&k, cm_path, &cm["metadata"]["uid"]).await;
    assert_eq!(again["data"], json!({"ca.crt": ca}));

    // Edited, the data and the description are put back; labels and other annotations stay.
    k.ok(
        "node-2",
        &[
            "-n",
            "team",
            "patch",
            "configmap",
            "kube-root-ca.crt",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"mine":"yes"}},"data":{"ca.crt":"forged","extra":"x"}}"#,
        ],
    );
    k.ok(
        "node-3",
        &[
            "-n",
            "team",
            "annotate",
            "configmap",
            "kube-root-ca.crt",
            "kubernetes.io/description-",
            "note=kept",
        ],
    );
    let fixed = eventually(T, || async {
        let cm = get(&k, 2, cm_path).await.ok_or("the ConfigMap is gone")?;
        let described = cm["metadata"]["annotations"]["kubernetes.io/description"] == DESCRIPTION;
        if cm["data"] == json!({"ca.crt": ca}) && described {
            Ok(cm)
        } else {
            Err(format!("not put back: {cm}"))
        }
    })
    .await;
    assert_eq!(fixed["metadata"]["labels"], json!({"mine": "yes"}));
    assert_eq!(fixed["metadata"]["annotations"]["note"], "kept");

    // A namespace being deleted is emptied and goes: nothing is recreated in it.
    k.ok("node-1", &["delete", "namespace", "team", "--wait=false"]);
    eventually(T, || async {
        match get(&k, 0, "/api/v1/namespaces/team").await {
            None => Ok(()),
            Some(ns) => Err(format!("still there: {}", ns["status"])),
        }
    })
    .await;
    assert!(get(&k, 2, sa_path).await.is_none());
    assert!(get(&k, 2, cm_path).await.is_none());
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: apps
spec:
  initContainers:
  - name: setup
    image: busybox
  containers:
  - name: nginx
    image: nginx:1.27
  - name: sidecar
    image: busybox
    volumeMounts:
    - name: own
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
  volumes:
  - name: own
    emptyDir: {}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_as_their_service_account_with_the_token_volume() {
    let k = Kube::start().await;
    // A namespace and a pod in it right after, through different replicas: the pod waits for
    // the namespace's default ServiceAccount instead of being refused.
    let (code, body) = k
        .send(
            Method::POST,
            1,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": "apps"}})),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let (code, first) = k
        .send(
            Method::POST,
            2,
            "/api/v1/namespaces/apps/pods",
            Some(&json!({"metadata": {"name": "first"},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}})),
        )
        .await;
    assert_eq!(code, 201, "{first}");
    assert_eq!(first["spec"]["serviceAccountName"], "default");

    // kubectl: the ServiceAccount, the volume and the mounts exactly as kube-apiserver adds them;
    // a container that mounts something at the token path keeps it.
    let manifest = k.manifest("pod.yaml", POD);
    let out = k.ok("node-1", &["create", "-f", &manifest]);
    assert!(out.contains("pod/web created"), "{out}");
    let pod = k.json("node-2", &["-n", "apps", "get", "pod", "web"]);
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec["serviceAccount"], "default");
    let volume = token_volume_name(&spec["volumes"][1]);
    assert_eq!(
        spec["volumes"],
        json!([{"name": "own", "emptyDir": {}}, {"name": volume, "projected": projected()}])
    );
    assert_eq!(
        spec["initContainers"][0]["volumeMounts"],
        json!([token_mount(&volume)])
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([token_mount(&volume)])
    );
    assert_eq!(
        spec["containers"][1]["volumeMounts"],
        json!([{"mountPath": MOUNT_PATH, "name": "own"}])
    );
    let described = k.ok("node-3", &["-n", "apps", "describe", "pod", "web"]);
    assert!(
        described.contains(&volume) && described.contains("kube-root-ca.crt"),
        "{described}"
    );
    // What admission added belongs to no field manager (kube-apiserver's field manager runs
    // before admission), and a server-side apply of the same manifest keeps it.
    let raw = get(&k, 0, "/api/v1/namespaces/apps/pods/web")
        .await
        .expect("the pod");
    let owned = raw["metadata"]["managedFields"].to_string();
    assert!(owned.contains("kubectl-create"), "{owned}");
    for added in [
        "f:serviceAccountName",
        "kube-api-access",
        "f:tolerations",
        "f:priority\"",
    ] {
        assert!(!owned.contains(added), "{added} owned: {owned}");
    }
    k.ok("node-2", &["apply", "--server-side", "-f", &manifest]);
    let applied = k.json("node-3", &["-n", "apps", "get", "pod", "web"]);
    assert_eq!(applied["spec"]["volumes"], pod["spec"]["volumes"]);
    assert_eq!(applied["spec"]["containers"], pod["spec"]["containers"]);
    assert_eq!(applied["spec"]["initContainers"], pod["spec"]["initContainers"]);

    // `kubectl run`, and a server-side dry run that shows the same and stores nothing.
    k.ok(
        "node-3",
        &["-n", "apps", "run", "plain", "--image=nginx", "--restart=Never"],
    );
    let plain = k.json("node-1", &["-n", "apps", "get", "pod", "plain"]);
    let volume = token_volume_name(&plain["spec"]["volumes"][0]);
    assert_eq!(
        plain["spec"]["volumes"],
        json!([{"name": volume, "projected": projected()}])
    );
    assert_eq!(
        plain["spec"]["containers"][0]["volumeMounts"],
        json!([token_mount(&volume)])
    );
    let dry: Value = serde_json::from_str(&k.ok(
        "node-2",
        &[
            "-n",
            "apps",
            "run",
            "dry",
            "--image=nginx",
            "--restart=Never",
            "--dry-run=server",
            "-o",
            "json",
        ],
    ))
    .expect("JSON");
    assert_eq!(dry["spec"]["serviceAccountName"], "default");
    assert_eq!(dry["spec"]["volumes"][0]["projected"], projected());
    assert!(get(&k, 0, "/api/v1/namespaces/apps/pods/dry").await.is_none());

    // automountServiceAccountToken: false on the pod, or on its ServiceAccount (unless the pod
    // says true): no volume, no mounts.
    let pod_off = k.json(
        "node-1",
        &[
            "-n",
            "apps",
            "run",
            "quiet",
            "--image=nginx",
            "--restart=Never",
            "--overrides",
            r#"{"spec":{"automountServiceAccountToken":false}}"#,
        ],
    );
    assert_eq!(pod_off["spec"]["serviceAccountName"], "default");
    assert!(pod_off["spec"].get("volumes").is_none(), "{}", pod_off["spec"]);
    assert!(pod_off["spec"]["containers"][0].get("volumeMounts").is_none());
    // Created with the setting (an edit could reach a replica's watch cache a moment after
    // the pod does; the object itself cannot: a cache miss reads the store).
    let (code, robot) = k
        .send(
            Method::POST,
            2,
            "/api/v1/namespaces/apps/serviceaccounts",
            Some(&json!({"metadata": {"name": "robot"}, "automountServiceAccountToken": false})),
        )
        .await;
    assert_eq!(code, 201, "{robot}");
    for (name, pod_says, mounted) in [("robot-off", None, false), ("robot-on", Some(true), true)] {
        let mut spec = json!({"serviceAccountName": "robot",
                              "containers": [{"name": "c", "image": "nginx"}]});
        if let Some(on) = pod_says {
            spec["automountServiceAccountToken"] = json!(on);
        }
        let (code, pod) = k
            .send(
                Method::POST,
                0,
                "/api/v1/namespaces/apps/pods",
                Some(&json!({"metadata": {"name": name}, "spec": spec})),
            )
            .await;
        assert_eq!(code, 201, "{pod}");
        assert_eq!(pod["spec"]["serviceAccountName"], "robot");
        assert_eq!(
            pod["spec"].get("volumes").is_some(),
            mounted,
            "{name}: {}",
            pod["spec"]
        );
    }

    // A ServiceAccount that does not exist: refused at once, with kube-apiserver's 403.
    let started = Instant::now();
    let (code, status) = k
        .send(
            Method::POST,
            2,
            "/api/v1/namespaces/apps/pods",
            Some(&json!({"metadata": {"name": "ghost"},
                         "spec": {"serviceAccountName": "nope", "containers": [{"name": "c", "image": "nginx"}]}})),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(2), "not waited for");
    let message = "pods \"ghost\" is forbidden: error looking up service account apps/nope: serviceaccount \"nope\" not found";
    assert_eq!(
        (code, status),
        (403, support::forbidden_status("pods", "ghost", message))
    );
    let (ok, _, err) = k.kubectl(
        "node-1",
        &[
            "-n",
            "apps",
            "run",
            "ghost",
            "--image=nginx",
            "--restart=Never",
            "--overrides",
            r#"{"spec":{"serviceAccountName":"nope"}}"#,
        ],
    );
    assert!(!ok);
    assert!(
        err.contains(
            r#"pods "ghost" is forbidden: error looking up service account apps/nope: serviceaccount "nope" not found"#
        ),
        "{err}"
    );

    // The default ServiceAccount deleted a moment ago: the pod waits until it is back.
    k.ok("node-3", &["-n", "apps", "delete", "serviceaccount", "default"]);
    let (code, pod) = k
        .send(
            Method::POST,
            1,
            "/api/v1/namespaces/apps/pods",
            Some(&json!({"metadata": {"name": "after"},
                         "spec": {"containers": [{"name": "c", "image": "nginx"}]}})),
        )
        .await;
    assert_eq!(code, 201, "{pod}");
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_pods_see_their_service_account_and_the_ca() {
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::api::{Api, PostParams};

    let k = Kube::start().await;
    let pods: Api<Pod> = Api::namespaced(k.kube_client(1), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "typed"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .expect("a pod");
    let created = pods.create(&PostParams::default(), &pod).await.expect("create");
    let spec = created.spec.expect("a spec");
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let volumes = spec.volumes.expect("volumes");
    assert_eq!(volumes.len(), 1);
    let projected_volume = volumes[0].projected.as_ref().expect("a projected volume");
    assert_eq!(projected_volume.default_mode, Some(420));
    let sources = projected_volume.sources.as_deref().unwrap_or_default();
    assert_eq!(
        sources[0]
            .service_account_token
            .as_ref()
            .and_then(|t| t.expiration_seconds),
        Some(3607)
    );
    assert_eq!(
        sources[1].config_map.as_ref().map(|c| c.name.as_str()),
        Some("kube-root-ca.crt")
    );
    let mounts = spec.containers[0].volume_mounts.as_deref().unwrap_or_default();
    assert_eq!(
        (mounts[0].mount_path.as_str(), mounts[0].read_only),
        (MOUNT_PATH, Some(true))
    );
    let cms: Api<ConfigMap> = Api::namespaced(k.kube_client(2), "default");
    let ca = cms.get("kube-root-ca.crt").await.expect("the CA ConfigMap");
    assert_eq!(
        ca.data.and_then(|d| d.get("ca.crt").cloned()),
        Some(k.cluster.ca_pem())
    );
}

/// `serve --insecure` has no CA: namespaces get their `default` ServiceAccount but no
/// `kube-root-ca.crt`, as kube-controller-manager publishes nothing without a root CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_ca_no_root_ca_configmap_is_published() {
    let mut c = Cluster::start(Options {
        nodes: 1,
        insecure: true,
        ..Options::default()
    });
    c.wait_bootstrapped(T).await;
    let http = c.http();
    let base = c.base_url(0);
    let send = |method: Method, path: &str, body: Option<Value>| {
        let mut req = http.request(method, format!("{base}{path}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        async move {
            let r = req.send().await.expect("the replica answers");
            let code = r.status().as_u16();
            (code, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (code, ns) = send(
        Method::POST,
        "/api/v1/namespaces",
        Some(json!({"metadata": {"name": "open"}})),
    )
    .await;
    assert_eq!(code, 201, "{ns}");
    eventually(T, || async {
        match send(
            Method::GET,
            "/api/v1/namespaces/open/serviceaccounts/default",
            None,
        )
        .await
        {
            (200, _) => Ok(()),
            (code, body) => Err(format!("{code} {body}")),
        }
    })
    .await;
    let (code, pod) = send(
        Method::POST,
        "/api/v1/namespaces/open/pods",
        Some(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})),
    )
    .await;
    assert_eq!(code, 201, "{pod}");
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    for path in ["/api/v1/configmaps", "/api/v1/namespaces/open/configmaps"] {
        let (code, list) = send(Method::GET, path, None).await;
        assert_eq!((code, &list["items"]), (200, &json!([])), "{path}: {list}");
    }
}

/// A request as the bearer of `token` (no client certificate): the status and body.
async fn as_bearer(
    k: &Kube,
    node: usize,
    method: Method,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let http = k.cluster.http_builder().build().unwrap();
    let mut req = http.request(method, k.url(node, path)).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(b);
    }
    let resp = req.send().await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.json().await.unwrap_or(Value::Null))
}

/// Waits until the Secret `ops/name` is gone, as kubectl on `context` sees it.
async fn secret_deleted(k: &Kube, context: &str, name: &str) {
    eventually(T, || async {
        let (ok, out, err) = k.kubectl(context, &["-n", "ops", "get", "secret", name, "-o", "name"]);
        if !ok && err.contains("NotFound") {
            Ok(())
        } else {
            Err(format!("{out}{err}"))
        }
    })
    .await;
}

/// The status of a list of `ops`'s ConfigMaps through replica `node` as the bearer of `token`.
async fn ops_configmaps_as(k: &Kube, node: usize, token: &str) -> (u16, Value) {
    as_bearer(
        k,
        node,
        Method::GET,
        "/api/v1/namespaces/ops/configmaps",
        token,
        None,
    )
    .await
}

fn decoded(data: &Value) -> String {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_str().unwrap_or_else(|| panic!("not base64 text: {data}")))
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_token_secrets_are_filled_in_and_work_while_secret_and_account_exist() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "ops"]);
    k.wait_namespace_populated("ops").await;
    k.ok("node-1", &["-n", "ops", "create", "serviceaccount", "robot"]);
    k.ok(
        "node-1",
        &[
            "-n",
            "ops",
            "create",
            "rolebinding",
            "robot-view",
            "--clusterrole=view",
            "--serviceaccount=ops:robot",
        ],
    );
    let manifest = k.manifest(
        "robot-token.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: robot-token\n  namespace: ops\n  annotations:\n    kubernetes.io/service-account.name: robot\ntype: kubernetes.io/service-account-token\n",
    );
    k.ok("node-1", &["apply", "-f", &manifest]);

    // The leader's tokens controller fills the Secret in, as kube-controller-manager does.
    let filled = || async {
        let s = k.json("node-2", &["-n", "ops", "get", "secret", "robot-token"]);
        if s["data"]["token"].is_string() {
            Ok(s)
        } else {
            Err(s.to_string())
        }
    };
    let secret = eventually(T, filled).await;
    let account = k.json("node-1", &["-n", "ops", "get", "serviceaccount", "robot"]);
    assert_eq!(
        secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"],
        account["metadata"]["uid"]
    );
    assert_eq!(decoded(&secret["data"]["ca.crt"]), k.cluster.ca_pem());
    assert_eq!(decoded(&secret["data"]["namespace"]), "ops");
    let token = decoded(&secret["data"]["token"]);
    let claims: Value = {
        use base64::Engine;
        let payload = token.split('.').nth(1).expect("a JWT");
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(
        claims,
        json!({
            "iss": "kubernetes/serviceaccount",
            "kubernetes.io/serviceaccount/namespace": "ops",
            "kubernetes.io/serviceaccount/secret.name": "robot-token",
            "kubernetes.io/serviceaccount/service-account.name": "robot",
            "kubernetes.io/serviceaccount/service-account.uid": account["metadata"]["uid"],
            "sub": "system:serviceaccount:ops:robot",
        })
    );

    // The token authenticates as the ServiceAccount, on every replica, with what RBAC grants it.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    for node in 0..3 {
        let (code, me) = as_bearer(
            &k,
            node,
            Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &token,
            Some(&review),
        )
        .await;
        assert_eq!(code, 201, "{me}");
        assert_eq!(
            me["status"]["userInfo"],
            json!({
                "username": "system:serviceaccount:ops:robot",
                "uid": account["metadata"]["uid"],
                "groups": ["system:serviceaccounts", "system:serviceaccounts:ops", "system:authenticated"],
            })
        );
        let (code, list) = ops_configmaps_as(&k, node, &token).await;
        assert_eq!((code, &list["kind"]), (200, &json!("ConfigMapList")), "{list}");
    }
    let (code, denied) = as_bearer(
        &k,
        0,
        Method::GET,
        "/api/v1/namespaces/default/configmaps",
        &token,
        None,
    )
    .await;
    assert_eq!(code, 403, "{denied}");

    // A token the Secret no longer holds is refused: deleting the Secret ends it.
    k.ok("node-1", &["-n", "ops", "delete", "secret", "robot-token"]);
    for node in 0..3 {
        eventually(T, || async {
            match ops_configmaps_as(&k, node, &token).await {
                (401, _) => Ok(()),
                (code, body) => Err(format!("{code} {body}")),
            }
        })
        .await;
    }

    // Recreated, it gets a new token; deleting the ServiceAccount deletes the Secret with it.
    k.ok("node-1", &["apply", "-f", &manifest]);
    let again = eventually(T, filled).await;
    let second = decoded(&again["data"]["token"]);
    assert_ne!(second, token);
    let (code, _) = ops_configmaps_as(&k, 1, &second).await;
    assert_eq!(code, 200);
    k.ok("node-1", &["-n", "ops", "delete", "serviceaccount", "robot"]);
    secret_deleted(&k, "node-3", "robot-token").await;
    let (code, body) = ops_configmaps_as(&k, 2, &second).await;
    assert_eq!(code, 401, "{body}");

    // A Secret naming a ServiceAccount that does not exist is deleted, as kube does.
    let orphan = k.manifest(
        "orphan-token.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: nobody-token\n  namespace: ops\n  annotations:\n    kubernetes.io/service-account.name: nobody\ntype: kubernetes.io/service-account-token\n",
    );
    k.ok("node-1", &["apply", "-f", &orphan]);
    secret_deleted(&k, "node-1", "nobody-token").await;
}
