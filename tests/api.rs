//! The Kubernetes REST API on a real three-replica cluster, driven by the real `kubectl` and by
//! plain HTTP.

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::kube::Kube;
use support::*;

const T: Duration = Duration::from_secs(30);

/// kubectl's output format for `namespace/name` lines.
const NAMESPACED_NAMES: &str =
    "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}";

const DEMO: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: demo
data:
  a: \"1\"
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_on_one_replica_and_reads_from_another() {
    let k = Kube::start().await;
    let out = k.ok("node-1", &["get", "ns", "-o", "name"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(out.contains(&format!("namespace/{ns}")), "{out}");
    }
    let file = k.cluster.dir.path().join("demo.yaml");
    std::fs::write(&file, DEMO).unwrap();
    let out = k.ok(
        "node-2",
        &["create", "--validate=false", "-f", file.to_str().unwrap()],
    );
    assert!(
        out.contains("namespace/demo created") && out.contains("configmap/app created"),
        "{out}"
    );
    k.wait_namespace_populated("demo").await;
    let yaml = k.ok("node-3", &["-n", "demo", "get", "configmap", "app", "-o", "json"]);
    let cm: Value = serde_json::from_str(&yaml).unwrap();
    assert_eq!(cm["data"]["a"], "1");
    assert_eq!(cm["metadata"]["uid"].as_str().unwrap().len(), 36);
    assert!(cm["metadata"]["creationTimestamp"].is_string());
    let rv: i64 = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv > 0);
    k.ok("node-1", &["-n", "demo", "label", "configmap", "app", "tier=web"]);
    k.ok(
        "node-3",
        &[
            "-n",
            "demo",
            "annotate",
            "configmap",
            "app",
            "note=hi",
            "--overwrite",
        ],
    );
    let out = k.ok("node-2", &["get", "cm", "-A", "-l", "tier=web", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/app");
    // Every other ConfigMap is the CA bundle each namespace gets, and the trust aggregated API
    // servers read in kube-system.
    let out = k.ok(
        "node-2",
        &["get", "cm", "-A", "-l", "tier!=web", "-o", NAMESPACED_NAMES],
    );
    assert_eq!(
        out,
        "default/kube-root-ca.crt\ndemo/kube-root-ca.crt\nkube-node-lease/kube-root-ca.crt\n\
         kube-public/kube-root-ca.crt\nkube-system/extension-apiserver-authentication\n\
         kube-system/kube-root-ca.crt\n"
    );
    let out = k.ok(
        "node-1",
        &[
            "-n",
            "demo",
            "get",
            "cm",
            "app",
            "-o",
            "jsonpath={.metadata.annotations.note}",
        ],
    );
    assert_eq!(out, "hi");
    let table = k.ok("node-1", &["get", "cm", "-A"]);
    assert!(
        table.starts_with("NAMESPACE") && table.contains("demo") && table.contains("app"),
        "{table}"
    );
    // A duplicate create is AlreadyExists.
    let (ok, _, err) = k.kubectl(
        "node-1",
        &["create", "--validate=false", "-f", file.to_str().unwrap()],
    );
    assert!(!ok && err.contains("AlreadyExists"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_hold_an_object_and_namespace_deletion_cascades() {
    let k = Kube::start().await;
    let file = k.cluster.dir.path().join("demo.yaml");
    std::fs::write(
        &file,
        format!("{DEMO}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: demo, finalizers: [example.com/hold]}}\n"),
    )
    .unwrap();
    k.ok(
        "node-1",
        &["create", "--validate=false", "-f", file.to_str().unwrap()],
    );
    k.ok("node-2", &["-n", "demo", "delete", "cm", "held", "--wait=false"]);
    let ts = k.ok(
        "node-3",
        &[
            "-n",
            "demo",
            "get",
            "cm",
            "held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    );
    assert!(!ts.is_empty(), "held by its finalizer, marked for deletion");
    k.ok(
        "node-1",
        &[
            "-n",
            "demo",
            "patch",
            "cm",
            "held",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    );
    let (ok, _, err) = k.kubectl("node-1", &["-n", "demo", "get", "cm", "held"]);
    assert!(
        !ok && err.contains("NotFound"),
        "gone once the finalizer is removed: {err}"
    );
    // Deleting the namespace marks it Terminating, forbids new content, empties it, removes it.
    k.ok("node-1", &["delete", "ns", "demo", "--wait=false"]);
    let resp = k
        .http
        .clone()
        .post(k.url(1, "/api/v1/namespaces/demo/configmaps"))
        .json(&json!({"metadata": {"name": "late"}}))
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    assert!(
        code == 403 || code == 404,
        "create in a terminating namespace: {code}"
    );
    eventually(T, || async {
        let (ok, _, err) = k.kubectl("node-3", &["get", "ns", "demo"]);
        if !ok && err.contains("NotFound") {
            Ok(())
        } else {
            Err("namespace still there".to_string())
        }
    })
    .await;
    // Nothing of demo is left; the system namespaces keep their CA bundles.
    assert_eq!(
        k.ok("node-2", &["get", "cm", "-A", "-o", NAMESPACED_NAMES]),
        "default/kube-root-ca.crt\nkube-node-lease/kube-root-ca.crt\nkube-public/kube-root-ca.crt\n\
         kube-system/extension-apiserver-authentication\nkube-system/kube-root-ca.crt\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_streams_changes() {
    let k = Kube::start().await;
    let child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k.kubeconfig)
        .arg("--cache-dir")
        .arg(&k.cache_dir)
        .args([
            "--context",
            "node-3",
            "get",
            "cm",
            "-n",
            "default",
            "-w",
            "-o",
            "name",
            "--request-timeout",
            "8s",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let http = k.http.clone();
    for name in ["w1", "w2"] {
        let r = http
            .post(k.url(0, "/api/v1/namespaces/default/configmaps"))
            .json(&json!({"metadata": {"name": name}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("configmap/w1") && text.contains("configmap/w2"),
        "{text}"
    );
}

async fn call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    ctype: &str,
    body: &str,
) -> (u16, Value) {
    let r = http
        .request(method, url)
        .header("content-type", ctype)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_status_codes_and_status_bodies() {
    use reqwest::Method as M;
    let k = Kube::start().await;
    let cms = k.url(1, "/api/v1/namespaces/default/configmaps");
    let j = "application/json";
    let (code, body) = call(
        &k.http,
        M::POST,
        &cms,
        j,
        r#"{"metadata":{"name":"c1"},"data":{"k":"v"}}"#,
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let rv = body["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let cases: Vec<(M, String, &str, String, u16, &str)> = vec![
        (
            M::POST,
            cms.clone(),
            j,
            r#"{"metadata":{"name":"c1"}}"#.into(),
            409,
            "AlreadyExists",
        ),
        (
            M::GET,
            format!("{cms}/missing"),
            j,
            String::new(),
            404,
            "NotFound",
        ),
        (M::POST, cms.clone(), j, "{not json".into(), 400, "BadRequest"),
        (
            M::POST,
            cms.clone(),
            "text/plain",
            "x".into(),
            415,
            "UnsupportedMediaType",
        ),
        (
            M::POST,
            cms.clone(),
            j,
            r#"{"metadata":{"name":"Bad_Name"}}"#.into(),
            422,
            "Invalid",
        ),
        (
            M::POST,
            cms.clone(),
            j,
            r#"{"kind":"Secret","metadata":{"name":"x"}}"#.into(),
            400,
            "BadRequest",
        ),
        (
            M::POST,
            cms.clone(),
            j,
            r#"{"metadata":{"name":"x","namespace":"other"}}"#.into(),
            400,
            "BadRequest",
        ),
        (
            M::POST,
            k.url(0, "/api/v1/namespaces/nope/configmaps"),
            j,
            r#"{"metadata":{"name":"x"}}"#.into(),
            404,
            "NotFound",
        ),
        (
            M::PUT,
            format!("{cms}/c1"),
            j,
            format!(
                r#"{{"metadata":{{"name":"c1","resourceVersion":"{}"}}}}"#,
                rv.parse::<i64>().unwrap() - 1
            ),
            409,
            "Conflict",
        ),
        (
            M::GET,
            k.url(2, "/api/v1/widgets"),
            j,
            String::new(),
            404,
            "NotFound",
        ),
        (
            M::POST,
            cms.clone(),
            "application/yaml",
            "a: &a [x,x]\nb: [*a, *a\n".into(),
            400,
            "BadRequest",
        ),
        (M::POST, cms.clone(), j, "[".repeat(100_000), 400, "BadRequest"),
        (
            M::DELETE,
            format!("{cms}/c1"),
            j,
            r#"{"preconditions":{"uid":"wrong"}}"#.into(),
            409,
            "Conflict",
        ),
    ];
    for (i, (method, url, ctype, body, want, reason)) in cases.into_iter().enumerate() {
        let (code, status) = call(&k.http, method, &url, ctype, &body).await;
        assert_eq!(code, want, "case {i}: {status}");
        assert_eq!(status["kind"], "Status", "case {i}");
        assert_eq!(status["reason"], reason, "case {i}: {status}");
        assert_eq!(status["code"], want, "case {i}");
    }
    // A body over 3 MiB is refused before it is read.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = k.cluster.tls_stream(1).await;
        s.write_all(
            b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{",
        )
        .await
        .unwrap();
        let mut resp = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut resp)).await;
        let resp = String::from_utf8_lossy(&resp);
        assert!(resp.starts_with("HTTP/1.1 413"), "{resp}");
        assert!(resp.contains("RequestEntityTooLarge"), "{resp}");
    }
    // None of the failed writes changed anything.
    let (code, list) = call(&k.http, M::GET, &cms, j, "").await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "ConfigMapList");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["c1", "kube-root-ca.crt"]);
    // YAML out, 406 for what we cannot produce, merge patch, and a correct PUT.
    let r = k
        .http
        .clone()
        .get(format!("{cms}/c1"))
        .header("accept", "application/yaml")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/yaml");
    assert!(r.text().await.unwrap().contains("name: c1"));
    let r = k
        .http
        .clone()
        .get(format!("{cms}/c1"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    let status: Value = r.json().await.unwrap();
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor"
    );
    // A body in an encoding no decoder reads: kube's 415, naming the ones it reads.
    let (code, status) = call(&k.http, M::POST, &cms, "text/plain", "name: c9").await;
    assert_eq!((code, &status["reason"]), (415, &json!("UnsupportedMediaType")));
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/cbor"
    );
    let (code, patched) = call(
        &k.http,
        M::PATCH,
        &format!("{cms}/c1"),
        "application/merge-patch+json",
        r#"{"data":{"k":null,"n":"1"}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["data"], json!({"n": "1"}));
    let rv = patched["metadata"]["resourceVersion"].as_str().unwrap();
    let (code, put) = call(
        &k.http,
        M::PUT,
        &format!("{cms}/c1"),
        j,
        &format!(r#"{{"metadata":{{"name":"c1","resourceVersion":"{rv}"}},"data":{{"z":"2"}}}}"#),
    )
    .await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(put["metadata"]["uid"], body["metadata"]["uid"]);
    let (code, _) = call(
        &k.http,
        M::PATCH,
        &format!("{cms}/c1"),
        "application/json-patch+json",
        r#"[{"op":"test","path":"/data/z","value":"nope"}]"#,
    )
    .await;
    assert_eq!(code, 422);
    // Discovery and version.
    let (code, v) = call(&k.http, M::GET, &k.url(0, "/version"), j, "").await;
    assert_eq!((code, v["major"].as_str()), (200, Some("1")));
    let (_, apps) = call(&k.http, M::GET, &k.url(0, "/apis/apps/v1"), j, "").await;
    assert!(apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "deployments/scale"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_lifecycle_over_http() {
    use reqwest::Method as M;
    let k = Kube::start().await;
    let j = "application/json";
    let cms = k.url(0, "/api/v1/namespaces/default/configmaps");

    // generateName: the server picks a unique name with the prefix.
    let mut generated = Vec::new();
    for node in 0..3 {
        let (code, cm) = call(
            &k.http,
            M::POST,
            &k.url(node, "/api/v1/namespaces/default/configmaps"),
            j,
            r#"{"metadata":{"generateName":"job-","labels":{"tier":"tmp"}}}"#,
        )
        .await;
        assert_eq!(code, 201, "{cm}");
        let name = cm["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("job-") && name.len() > 4, "{name}");
        assert_eq!(cm["metadata"]["generateName"], "job-");
        generated.push(name);
    }
    generated.sort();
    generated.dedup();
    assert_eq!(generated.len(), 3);

    // PUT creates only for the types that allow it.
    let (code, lease) = call(
        &k.http,
        M::PUT,
        &k.url(1, "/apis/coordination.k8s.io/v1/namespaces/default/leases/l1"),
        j,
        r#"{"metadata":{"name":"l1"},"spec":{"holderIdentity":"a"}}"#,
    )
    .await;
    assert_eq!(code, 201, "{lease}");
    let (code, status) = call(
        &k.http,
        M::PUT,
        &format!("{cms}/absent"),
        j,
        r#"{"metadata":{"name":"absent"}}"#,
    )
    .await;
    assert_eq!((code, &status["reason"]), (404, &json!("NotFound")), "{status}");

    // Tables: v1 and v1beta1, and each includeObject.
    let table = |version: &str, include: &str| {
        let url = format!("{cms}?includeObject={include}");
        let accept = format!("application/json;as=Table;g=meta.k8s.io;v={version}");
        let http = k.http.clone();
        async move {
            let r = http.get(url).header("accept", accept).send().await.unwrap();
            assert_eq!(r.status(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    let t = table("v1beta1", "None").await;
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
    // The three created here and the namespace's `kube-root-ca.crt`, in name order.
    let names: Vec<&str> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"][0].as_str().unwrap())
        .collect();
    let mut expected: Vec<&str> = generated.iter().map(String::as_str).collect();
    expected.push("kube-root-ca.crt");
    expected.sort_unstable();
    assert_eq!(names, expected, "{t}");
    assert!(t["rows"][0]["object"].is_null(), "{t}");
    let t = table("v1", "Metadata").await;
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(t["rows"][0]["object"].get("data").is_none());
    let t = table("v1", "Object").await;
    assert_eq!(t["rows"][0]["object"]["kind"], "ConfigMap");
    let (code, status) = call(&k.http, M::GET, &format!("{cms}?includeObject=All"), j, "").await;
    assert_eq!(code, 200, "without a Table, includeObject is not used: {status}");

    // ?pretty indents.
    let pretty = k.text(&format!("{cms}/{}?pretty=true", generated[0])).await;
    assert!(pretty.contains("\n  \"metadata\": {"), "{pretty}");

    // Delete preconditions: a stale resourceVersion is a conflict and deletes nothing.
    let (_, cm) = call(&k.http, M::GET, &format!("{cms}/{}", generated[0]), j, "").await;
    let rv: i64 = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let (code, status) = call(
        &k.http,
        M::DELETE,
        &format!("{cms}/{}", generated[0]),
        j,
        &format!(r#"{{"preconditions":{{"resourceVersion":"{}"}}}}"#, rv - 1),
    )
    .await;
    assert_eq!((code, &status["reason"]), (409, &json!("Conflict")), "{status}");
    let (code, _) = call(
        &k.http,
        M::DELETE,
        &format!("{cms}/{}", generated[0]),
        j,
        &format!(r#"{{"preconditions":{{"resourceVersion":"{rv}"}}}}"#),
    )
    .await;
    assert_eq!(code, 200);

    // deletecollection with a label selector removes exactly the matching objects.
    let (code, _) = call(&k.http, M::POST, &cms, j, r#"{"metadata":{"name":"keep"}}"#).await;
    assert_eq!(code, 201);
    let (code, status) = call(
        &k.http,
        M::DELETE,
        &format!("{cms}?labelSelector=tier%3Dtmp"),
        j,
        "",
    )
    .await;
    assert_eq!(code, 200, "{status}");
    let (_, list) = call(
        &k.http,
        M::GET,
        &k.url(2, "/api/v1/namespaces/default/configmaps"),
        j,
        "",
    )
    .await;
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["keep", "kube-root-ca.crt"]);

    // Graceful deletion: a scheduled pod waits for its kubelet; grace 0 removes it; an
    // unscheduled pod goes at once.
    let pods = k.url(1, "/api/v1/namespaces/default/pods");
    let pod = |name: &str, node: Option<&str>| {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        json!({"metadata": {"name": name}, "spec": spec}).to_string()
    };
    let (code, _) = call(&k.http, M::POST, &pods, j, &pod("running", Some("node-a"))).await;
    assert_eq!(code, 201);
    let (code, _) = call(&k.http, M::POST, &pods, j, &pod("pending", None)).await;
    assert_eq!(code, 201);
    let (code, marked) = call(&k.http, M::DELETE, &format!("{pods}/running"), j, "").await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    let (code, still) = call(
        &k.http,
        M::GET,
        &k.url(2, "/api/v1/namespaces/default/pods/running"),
        j,
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(still["metadata"]["deletionGracePeriodSeconds"], 30);
    let (code, shorter) = call(
        &k.http,
        M::DELETE,
        &format!("{pods}/running?gracePeriodSeconds=5"),
        j,
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(shorter["metadata"]["deletionGracePeriodSeconds"], 5);
    let (code, _) = call(
        &k.http,
        M::DELETE,
        &format!("{pods}/running"),
        j,
        r#"{"gracePeriodSeconds":0}"#,
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = call(&k.http, M::GET, &format!("{pods}/running"), j, "").await;
    assert_eq!(code, 404);
    // Pods are among the types whose delete answers with the deleted object.
    let (code, deleted) = call(&k.http, M::DELETE, &format!("{pods}/pending"), j, "").await;
    assert_eq!(code, 200);
    assert_eq!(
        (&deleted["kind"], &deleted["metadata"]["name"]),
        (&json!("Pod"), &json!("pending")),
        "{deleted}"
    );
    let (code, _) = call(&k.http, M::GET, &format!("{pods}/pending"), j, "").await;
    assert_eq!(code, 404);
    let (code, status) = call(
        &k.http,
        M::DELETE,
        &format!("{cms}/keep?gracePeriodSeconds=soon"),
        j,
        "",
    )
    .await;
    assert_eq!((code, &status["reason"]), (400, &json!("BadRequest")), "{status}");

    // A YAML alias bomb is refused quickly, with bounded memory, and stores nothing.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    bomb.push_str("metadata: {name: bomb}\n");
    let started = std::time::Instant::now();
    let (code, status) = call(&k.http, M::POST, &cms, "application/yaml", &bomb).await;
    assert_eq!((code, &status["reason"]), (400, &json!("BadRequest")), "{status}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let (code, _) = call(&k.http, M::GET, &format!("{cms}/bomb"), j, "").await;
    assert_eq!(code, 404);
}

/// Namespace deletion runs on the leader; a new leader finishes what the old one started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_deletion_finishes_after_a_leader_change() {
    use reqwest::Method as M;
    let mut k = Kube::start().await;
    let leader = k.cluster.wait_leader(T).await;
    let node = k.cluster.follower_of(leader);
    let j = "application/json";
    let (code, _) = call(
        &k.http,
        M::POST,
        &k.url(node, "/api/v1/namespaces"),
        j,
        r#"{"metadata":{"name":"doomed"}}"#,
    )
    .await;
    assert_eq!(code, 201);
    let cms = k.url(node, "/api/v1/namespaces/doomed/configmaps");
    for i in 0..10 {
        let (code, _) = call(
            &k.http,
            M::POST,
            &cms,
            j,
            &format!(r#"{{"metadata":{{"name":"c{i}"}}}}"#),
        )
        .await;
        assert_eq!(code, 201);
    }
    let (code, _) = call(
        &k.http,
        M::POST,
        &cms,
        j,
        r#"{"metadata":{"name":"held","finalizers":["example.com/hold"]}}"#,
    )
    .await;
    assert_eq!(code, 201);
    let (code, ns) = call(
        &k.http,
        M::DELETE,
        &k.url(node, "/api/v1/namespaces/doomed"),
        j,
        "",
    )
    .await;
    assert_eq!(code, 200, "{ns}");
    assert_eq!(ns["status"]["phase"], "Terminating");
    // The held object keeps the namespace Terminating: new content is forbidden.
    let (code, status) = call(&k.http, M::POST, &cms, j, r#"{"metadata":{"name":"late"}}"#).await;
    assert_eq!((code, &status["reason"]), (403, &json!("Forbidden")), "{status}");
    eventually(T, || async {
        let (_, list) = call(&k.http, M::GET, &cms, j, "").await;
        match list["items"].as_array().map(Vec::len) {
            Some(1) => Ok(()),
            n => Err(format!("{n:?} objects left")),
        }
    })
    .await;

    // Kill the leader, then release the last object through the survivors.
    k.cluster.kill(leader);
    let new_leader = k.cluster.wait_leader(T).await;
    assert_ne!(new_leader, leader);
    let (code, patched) = call(
        &k.http,
        M::PATCH,
        &format!("{cms}/held"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    eventually(T, || async {
        let (code, ns) = call(&k.http, M::GET, &k.url(node, "/api/v1/namespaces/doomed"), j, "").await;
        if code == 404 {
            Ok(())
        } else {
            Err(format!("{code}: {ns}"))
        }
    })
    .await;
}

/// Namespace admission on every replica: content is admitted as soon as its namespace exists
/// (also through replicas whose caches have not seen the namespace yet), and refused with
/// kube-apiserver's 403 while the namespace is terminating.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_admission_follows_the_namespace_on_every_replica() {
    use reqwest::Method as M;
    let k = Kube::start().await;
    let j = "application/json";
    for round in 0..5 {
        let ns = format!("fresh-{round}");
        let body = json!({"metadata": {"name": ns}}).to_string();
        let (code, reply) = call(
            &k.http,
            M::POST,
            &k.url(round % 3, "/api/v1/namespaces"),
            j,
            &body,
        )
        .await;
        assert_eq!(code, 201, "{reply}");
        for node in 0..3 {
            let url = k.url(node, &format!("/api/v1/namespaces/{ns}/configmaps"));
            let body = json!({"metadata": {"name": format!("cm-{node}")}}).to_string();
            let (code, reply) = call(&k.http, M::POST, &url, j, &body).await;
            assert_eq!(
                code, 201,
                "create in {ns} right after it, through replica {node}: {reply}"
            );
        }
    }
    let missing = k.url(2, "/api/v1/namespaces/nowhere/configmaps");
    let (code, reply) = call(&k.http, M::POST, &missing, j, r#"{"metadata":{"name":"x"}}"#).await;
    assert_eq!(
        (code, reply["reason"].as_str()),
        (404, Some("NotFound")),
        "{reply}"
    );
    assert_eq!(reply["details"]["kind"], "namespaces", "{reply}");

    // An object held by a finalizer keeps the namespace terminating.
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}).to_string();
    let url = k.url(0, "/api/v1/namespaces/fresh-0/configmaps");
    assert_eq!(call(&k.http, M::POST, &url, j, &held).await.0, 201);
    let (code, reply) = call(&k.http, M::DELETE, &k.url(1, "/api/v1/namespaces/fresh-0"), j, "").await;
    assert_eq!(code, 200, "{reply}");
    for node in 0..3 {
        let url = k.url(node, "/api/v1/namespaces/fresh-0/configmaps");
        let reply = eventually(T, || async {
            match call(&k.http, M::POST, &url, j, r#"{"metadata":{"name":"late"}}"#).await {
                (403, reply) => Ok(reply),
                (code, reply) => Err(format!("replica {node} answered {code}: {reply}")),
            }
        })
        .await;
        assert_eq!(reply["reason"], "Forbidden", "{reply}");
        assert_eq!(
            reply["message"],
            "configmaps \"late\" is forbidden: unable to create new content in namespace fresh-0 because it is being terminated",
            "{reply}"
        );
    }
    // Released, the namespace goes with everything in it.
    let url = k.url(2, "/api/v1/namespaces/fresh-0/configmaps/held");
    let patch = r#"{"metadata":{"finalizers":null}}"#;
    let (code, reply) = call(&k.http, M::PATCH, &url, "application/merge-patch+json", patch).await;
    assert_eq!(code, 200, "{reply}");
    eventually(T, || async {
        match call(&k.http, M::GET, &k.url(0, "/api/v1/namespaces/fresh-0"), j, "").await {
            (404, _) => Ok(()),
            (code, _) => Err(format!("namespace still there ({code})")),
        }
    })
    .await;
    let (_, list) = call(
        &k.http,
        M::GET,
        &k.url(1, "/api/v1/namespaces/fresh-0/configmaps"),
        j,
        "",
    )
    .await;
    assert_eq!(list["items"], json!([]), "{list}");
}

/// Every verb against every subresource path, on a type without subresources (ConfigMap), one
/// with `status` and its own (Pod) and one with `status` and `scale` (Deployment): a subresource the type
/// does not serve is `404`, a verb a subresource does not serve is `405` with kube-apiserver's
/// `Status`, and neither touches the object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_against_every_subresource() {
    use reqwest::Method as M;
    let k = Kube::start().await;
    let ns = "/api/v1/namespaces/default";
    let objects = [
        (
            format!("{ns}/configmaps"),
            json!({"metadata": {"name": "c1"}, "data": {"a": "1"}}),
        ),
        (
            format!("{ns}/pods"),
            json!({"metadata": {"name": "p1"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments".to_string(),
            json!({"metadata": {"name": "d1"}, "spec": {
                "selector": {"matchLabels": {"app": "d1"}},
                "template": {"metadata": {"labels": {"app": "d1"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        ),
    ];
    for (collection, body) in &objects {
        let (code, created) = k.send(M::POST, 0, collection, Some(body)).await;
        assert_eq!(code, 201, "{created}");
    }
    let object = |i: usize| format!("{}/{}", objects[i].0, ["c1", "p1", "d1"][i]);
    // (object, subresource, [GET, PUT, PATCH, POST, DELETE]); DELETE of the object itself
    // comes last, below.
    let ok = [200, 200, 200, 405, 0];
    let no_write_verbs = [200, 200, 200, 405, 405];
    let absent = [404; 5];
    let create_only = [405, 405, 405, 400, 405];
    let table: Vec<(usize, &str, [u16; 5])> = vec![
        (0, "", ok),
        (0, "/status", absent),
        (0, "/scale", absent),
        (0, "/bogus", absent),
        (0, "/log", absent),
        (1, "", ok),
        (1, "/status", no_write_verbs),
        (1, "/scale", absent),
        // Read from the pod's kubelet: an unscheduled pod's log is empty, and its exec is
        // refused for want of a node (tests/kubectl.rs has them with a kubelet).
        (1, "/log", [200, 405, 405, 405, 405]),
        (1, "/exec", [400, 405, 405, 400, 405]),
        (1, "/anything", absent),
        // A proxy to the pod: an unscheduled pod has no address to proxy to, whatever the verb.
        (1, "/proxy/", [400; 5]),
        (1, "/ephemeralcontainers", no_write_verbs),
        // Created only, from a Binding or an Eviction naming the pod (not `{}`).
        (1, "/binding", create_only),
        (1, "/eviction", create_only),
        (2, "", ok),
        (2, "/status", no_write_verbs),
        (2, "/scale", no_write_verbs),
        (2, "/rollback", absent),
    ];
    let status_405 = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server does not allow this method on the requested resource",
        "reason": "MethodNotAllowed", "details": {}, "code": 405});
    let status_404 = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound", "details": {}, "code": 404});
    for (i, sub, expected) in &table {
        let path = format!("{}{sub}", object(*i));
        let methods = [M::GET, M::PUT, M::PATCH, M::POST, M::DELETE];
        for (method, want) in methods.iter().zip(expected) {
            if *want == 0 {
                continue;
            }
            let (code, current) = k.send(M::GET, 0, &path, None).await;
            let (got, body) = match *method {
                M::PUT if code == 200 => k.send(M::PUT, 1, &path, Some(&current)).await,
                M::PATCH => {
                    let r = k
                        .http
                        .patch(k.url(1, &path))
                        .header("content-type", "application/merge-patch+json")
                        .body("{}")
                        .send()
                        .await
                        .unwrap();
                    let code = r.status().as_u16();
                    (code, r.json().await.unwrap_or(Value::Null))
                }
                ref m => k.send(m.clone(), 1, &path, Some(&json!({}))).await,
            };
            assert_eq!(got, *want, "{method} {path}: {body}");
            match got {
                405 => assert_eq!(body, status_405, "{method} {path}"),
                404 => assert_eq!(body, status_404, "{method} {path}"),
                _ => {}
            }
        }
        for j in 0..objects.len() {
            let (code, body) = k.send(M::GET, 2, &object(j), None).await;
            assert_eq!(code, 200, "object {j} after {path}: {body}");
        }
    }
    // A path under a Namespace that names no resource, and a watch of a subresource.
    let (code, body) = k.send(M::GET, 0, &format!("{ns}/nosuchresource"), None).await;
    assert_eq!((code, body), (404, status_404.clone()));
    let (code, _) = k.send(M::DELETE, 0, &format!("{ns}/nosuchresource"), None).await;
    assert_eq!(code, 404);
    let (code, body) = k.send(M::GET, 0, ns, None).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = k
        .send(M::GET, 0, &format!("{}/status?watch=true", object(1)), None)
        .await;
    assert_eq!((code, body["kind"].as_str()), (200, Some("Pod")));
    // DELETE of the objects themselves still works.
    for i in 0..objects.len() {
        let (code, body) = k.send(M::DELETE, 1, &object(i), None).await;
        assert_eq!(code, 200, "{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn boolean_options_are_read_as_kube_reads_them() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "configmap", "flags", "--from-literal=a=1"]);
    let cms = k.url(0, "/api/v1/namespaces/default/configmaps");

    // The Python client's `watch=True` (and `allowWatchBookmarks=True`) is a watch, not a list.
    let event = first_watch_event(
        &k.http,
        &format!("{cms}?watch=True&allowWatchBookmarks=True&fieldSelector=metadata.name%3Dflags"),
    )
    .await;
    assert_eq!(
        (&event["type"], &event["object"]["metadata"]["name"]),
        (&json!("ADDED"), &json!("flags"))
    );
    // `watch=False` is the list.
    let (code, list) = call(
        &k.http,
        reqwest::Method::GET,
        &format!("{cms}?watch=False"),
        "application/json",
        "",
    )
    .await;
    assert_eq!((code, &list["kind"]), (200, &json!("ConfigMapList")));

    // `pretty=True` indents.
    let pretty = k.text(&format!("{cms}/flags?pretty=True")).await;
    assert!(pretty.contains("\n  \"metadata\": {"), "{pretty}");

    // `force=True` is force for an apply, and refused for any other patch.
    let apply = |force: &str, content_type: &'static str, body: &'static str| {
        let url = format!("{cms}/flags?fieldManager=robot&force={force}");
        let http = k.http.clone();
        async move {
            let r = http
                .patch(url)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            let code = r.status().as_u16();
            (code, r.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (code, applied) = apply(
        "True",
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: flags\ndata:\n  a: taken\n",
    )
    .await;
    assert_eq!((code, &applied["data"]["a"]), (200, &json!("taken")), "{applied}");
    let (code, refused) = apply("True", "application/merge-patch+json", r#"{"data":{"a":"x"}}"#).await;
    assert_eq!(code, 400, "{refused}");
    assert_eq!(
        refused["message"],
        "force: Forbidden: may not be specified for non-apply patch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn immortal_namespaces_cannot_be_deleted() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "namespace", "scratch"]);
    k.ok("node-1", &["create", "configmap", "keep", "--from-literal=a=1"]);
    // kube-apiserver's exact refusal, over plain HTTP.
    let (code, status) = k
        .send(reqwest::Method::DELETE, 1, "/api/v1/namespaces/kube-public", None)
        .await;
    let message = "namespaces \"kube-public\" is forbidden: this namespace may not be deleted";
    assert_eq!(
        (code, status),
        (403, forbidden_status("namespaces", "kube-public", message))
    );
    // `kubectl delete namespace --all` deletes the others and reports the three it may not.
    let (ok, out, err) = k.kubectl("node-1", &["delete", "namespace", "--all", "--wait=false"]);
    assert!(!ok, "{out}{err}");
    for ns in ["default", "kube-system", "kube-public"] {
        assert!(
            err.contains(&format!(
                "namespaces \"{ns}\" is forbidden: this namespace may not be deleted"
            )),
            "{err}"
        );
    }
    assert!(out.contains("namespace \"scratch\" deleted"), "{out}");
    // Nothing of theirs was touched.
    let names = k.ok(
        "node-2",
        &[
            "get",
            "namespace",
            "default",
            "kube-system",
            "kube-public",
            "-o",
            "name",
        ],
    );
    assert_eq!(
        names,
        "namespace/default\nnamespace/kube-system\nnamespace/kube-public\n"
    );
    let default = k.json("node-2", &["get", "namespace", "default"]);
    assert!(
        default["metadata"].get("deletionTimestamp").is_none(),
        "{default}"
    );
    assert_eq!(
        k.ok("node-3", &["get", "configmap", "keep", "-o", "name"]),
        "configmap/keep\n"
    );
}

/// Issue 20, bug 4: a write whose result equals the stored object stores nothing — the
/// resourceVersion stays, no watcher hears of it, and kubectl says "(no change)" — for a
/// patch, a PUT, a label set to its value and a repeated server-side apply alike.
#[tokio::test]
async fn writes_that_change_nothing_store_nothing() {
    let k = Kube::start().await;
    k.ok("node-1", &["create", "configmap", "same", "--from-literal=a=1"]);
    let rv =
        |k: &Kube| k.json("node-2", &["get", "configmap", "same"])["metadata"]["resourceVersion"].clone();
    let before = rv(&k);
    let out = k.ok(
        "node-1",
        &["patch", "configmap", "same", "-p", r#"{"data":{"a":"1"}}"#],
    );
    assert_eq!(out, "configmap/same patched (no change)\n");
    k.ok("node-1", &["label", "configmap", "same", "tier=web"]);
    let labelled = rv(&k);
    assert_ne!(labelled, before, "a real change is stored");
    let out = k.ok(
        "node-2",
        &["label", "configmap", "same", "tier=web", "--overwrite"],
    );
    assert_eq!(out, "configmap/same not labeled\n");
    // A PUT of the object as read.
    let path = "/api/v1/namespaces/default/configmaps/same";
    let (_, current) = k.send(reqwest::Method::GET, 0, path, None).await;
    let (code, put) = k.send(reqwest::Method::PUT, 1, path, Some(&current)).await;
    assert_eq!(
        (code, &put["metadata"]["resourceVersion"]),
        (200, &labelled),
        "{put}"
    );
    assert_eq!(put, current, "the stored object comes back as it was");
    // Server-side apply of the same configuration, twice.
    let manifest = k.manifest(
        "same.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  b: \"2\"\n",
    );
    k.ok("node-1", &["apply", "--server-side", "-f", &manifest]);
    let applied = k.json("node-1", &["get", "configmap", "applied"]);
    k.ok("node-3", &["apply", "--server-side", "-f", &manifest]);
    let again = k.json("node-3", &["get", "configmap", "applied"]);
    assert_eq!(
        again, applied,
        "a repeated apply changes nothing, managedFields' times included"
    );
    // A watch from before the no-op writes sees only the real changes after it.
    k.ok(
        "node-1",
        &["patch", "configmap", "same", "-p", r#"{"data":{"a":"2"}}"#],
    );
    let events = k
        .text(&k.url(
            2,
            &format!(
                "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={}&timeoutSeconds=2&fieldSelector=metadata.name%3Dsame",
                before.as_str().unwrap()
            ),
        ))
        .await;
    let seen: Vec<(String, String)> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    let last = rv(&k);
    assert_eq!(
        seen,
        vec![
            ("MODIFIED".to_string(), labelled.as_str().unwrap().to_string()),
            ("MODIFIED".to_string(), last.as_str().unwrap().to_string()),
        ],
        "{events}"
    );
}

/// Issue 20, bug 5: `resourceVersion: "0"` in an update names no revision, so the update is
/// unconditional, as kube-apiserver treats it — except for types that require a precondition
/// (PodDisruptionBudgets), which refuse an update without one with kube's 422.
#[tokio::test]
async fn an_update_with_resource_version_zero_is_unconditional() {
    let k = Kube::start().await;
    let node = k.manifest(
        "node.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: worker-1\n  labels:\n    zone: a\n",
    );
    k.ok("node-1", &["create", "-f", &node]);
    let mut stored = k.json("node-2", &["get", "node", "worker-1"]);
    stored["metadata"]["resourceVersion"] = json!("0");
    stored["metadata"]["labels"]["zone"] = json!("b");
    let replaced = k.manifest("node-rv0.json", &stored.to_string());
    let out = k.ok("node-3", &["replace", "-f", &replaced]);
    assert_eq!(out, "node/worker-1 replaced\n");
    let now = k.json("node-1", &["get", "node", "worker-1"]);
    assert_eq!(now["metadata"]["labels"]["zone"], "b");
    // Over HTTP, a ConfigMap alike.
    k.ok("node-1", &["create", "configmap", "zero", "--from-literal=a=1"]);
    let path = "/api/v1/namespaces/default/configmaps/zero";
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "zero", "resourceVersion": "0"}, "data": {"a": "2"}});
    let (code, put) = k.send(reqwest::Method::PUT, 1, path, Some(&body)).await;
    assert_eq!((code, &put["data"]["a"]), (200, &json!("2")), "{put}");
    // PodDisruptionBudgets must name the revision they replace.
    let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    let (code, created) = k.send(reqwest::Method::POST, 0, pdbs, Some(&pdb)).await;
    assert_eq!(code, 201, "{created}");
    let mut unpinned = pdb.clone();
    unpinned["spec"]["minAvailable"] = json!(2);
    for rv in [None, Some("0")] {
        if let Some(rv) = rv {
            unpinned["metadata"]["resourceVersion"] = json!(rv);
        }
        let (code, status) = k
            .send(reqwest::Method::PUT, 2, &format!("{pdbs}/web"), Some(&unpinned))
            .await;
        assert_eq!(
            (code, status),
            (
                422,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "poddisruptionbudgets.policy \"web\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                    "reason": "Invalid",
                    "details": {"name": "web", "group": "policy", "kind": "poddisruptionbudgets",
                        "causes": [{"reason": "FieldValueInvalid",
                            "message": "Invalid value: 0x0: must be specified for an update",
                            "field": "metadata.resourceVersion"}]},
                    "code": 422})
            )
        );
    }
    unpinned["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    let (code, updated) = k
        .send(reqwest::Method::PUT, 2, &format!("{pdbs}/web"), Some(&unpinned))
        .await;
    assert_eq!(
        (code, &updated["spec"]["minAvailable"]),
        (200, &json!(2)),
        "{updated}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_space_quota_writes_are_refused_until_deletes_and_compaction_free_space() {
    let k = Kube::start_with(Options {
        quota_backend_bytes: 3_000_000,
        retention_seconds: 1,
        ..Options::default()
    })
    .await;
    // Values RocksDB cannot compress away.
    let blob = |seed: u64| -> String {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..700_000)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                char::from(b'a' + ((x >> 33) % 26) as u8)
            })
            .collect()
    };
    let path = "/api/v1/namespaces/default/configmaps";
    let mut created = Vec::new();
    let mut refused = None;
    for i in 0..40u64 {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{i}")}, "data": {"v": blob(i)}});
        let (code, status) = k
            .send(reqwest::Method::POST, (i % 3) as usize, path, Some(&body))
            .await;
        match code {
            201 => created.push(format!("big-{i}")),
            _ => {
                refused = Some((code, status));
                break;
            }
        }
        // The size is measured twice a second.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let (code, status) = refused.expect("the quota was never reached");
    assert_eq!(code, 500, "{status}");
    assert_eq!(status["reason"], "InternalError", "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("database space exceeded"), "{status}");
    assert!(created.len() >= 2, "{created:?}");
    // Readiness says why.
    let anonymous = k.cluster.http_builder().build().unwrap();
    let ready = eventually(T, || async {
        let r = anonymous
            .get(k.url(0, "/readyz"))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let (code, text) = (r.status(), r.text().await.unwrap_or_default());
        if code == 500 && text.contains("database space exceeded") {
            Ok(text)
        } else {
            Err(format!("{code}: {text}"))
        }
    })
    .await;
    assert!(ready.contains("[-]"), "{ready}");
    // Deletes still work, and the alarm clears by itself once compaction frees the space.
    for name in &created {
        let (code, status) = k
            .send(reqwest::Method::DELETE, 1, &format!("{path}/{name}"), None)
            .await;
        assert_eq!(code, 200, "{status}");
    }
    eventually(Duration::from_secs(90), || async {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "small"}});
        match k.send(reqwest::Method::POST, 2, path, Some(&body)).await {
            (201, _) => Ok(()),
            (code, status) => Err(format!("{code}: {status}")),
        }
    })
    .await;
    for i in 0..3 {
        eventually(T, || async {
            let r = anonymous
                .get(k.url(i, "/readyz"))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if r.status() == 200 {
                Ok(())
            } else {
                Err(r.text().await.unwrap_or_default())
            }
        })
        .await;
    }
}

/// A request's status and the exact bytes of its body, over plain HTTP (a PATCH is a
/// strategic merge patch, any other body JSON).
async fn raw(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    accept: Option<&str>,
    body: &str,
) -> (u16, String) {
    let ctype = if method == reqwest::Method::PATCH {
        "application/strategic-merge-patch+json"
    } else {
        "application/json"
    };
    let mut req = http.request(method, url).header("content-type", ctype);
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    let r = req
        .body(body.to_string())
        .send()
        .await
        .expect("the replica answers");
    let code = r.status().as_u16();
    (code, r.text().await.expect("a body"))
}

/// Status bodies, lists and tables come out byte for byte as kube-apiserver writes them: Go
/// struct field order, Go's string escapes, a newline after each object; a body that is not
/// JSON, or a strategic merge patch whose result is not the type, is refused with kube's
/// decoder's words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_have_kube_apiservers_bytes() {
    use reqwest::Method as M;
    let mut c = Cluster::start(Options {
        insecure: true,
        ..Options::default()
    });
    c.wait_bootstrapped(T).await;
    let http = reqwest::Client::new();
    let url = |i: usize, path: &str| format!("{}{path}", c.base_url(i));
    let cms = "/api/v1/namespaces/default/configmaps";

    let (code, body) = raw(&http, M::GET, &url(1, &format!("{cms}/missing")), None, "").await;
    assert_eq!(code, 404);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"missing\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"missing\",\"kind\":\"configmaps\"},\"code\":404}\n"
    );

    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"twice"}}"#;
    assert_eq!(raw(&http, M::POST, &url(0, cms), None, cm).await.0, 201);
    let (code, body) = raw(&http, M::POST, &url(2, cms), None, cm).await;
    assert_eq!(code, 409);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"configmaps \\\"twice\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"twice\",\"kind\":\"configmaps\"},\"code\":409}\n"
    );

    let bad = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#;
    let (code, body) = raw(&http, M::POST, &url(1, cms), None, bad).await;
    assert_eq!(code, 422);
    let why = "Invalid value: \\\"Bad_Name\\\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    assert_eq!(
        body,
        format!("{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":\"ConfigMap \\\"Bad_Name\\\" is invalid: metadata.name: {why}\",\"reason\":\"Invalid\",\"details\":{{\"name\":\"Bad_Name\",\"kind\":\"ConfigMap\",\"causes\":[{{\"reason\":\"FieldValueInvalid\",\"message\":\"{why}\",\"field\":\"metadata.name\"}}]}},\"code\":422}}\n")
    );

    // A body that is not JSON: kube's decoder could not read its kind.
    let (code, body) = raw(
        &http,
        M::POST,
        &url(0, "/api/v1/namespaces"),
        None,
        r#"{"apiVersion":"v1","kind":"Namespace""#,
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: unexpected end of JSON input ({\\\"apiVersion\\\":\\\"v1\\\",\\\"kind\\\":\\\"Nam ...)\",\"reason\":\"BadRequest\",\"code\":400}\n"
    );
    let (code, body) = raw(
        &http,
        M::PUT,
        &url(2, &format!("{cms}/twice")),
        None,
        "{\"kind\" 1}",
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character '1' after object key ({\\\"kind\\\" 1})\",\"reason\":\"BadRequest\",\"code\":400}\n"
    );

    // A strategic merge patch whose result is not a ConfigMap: kube's converter refuses it.
    let (code, body) = raw(
        &http,
        M::PATCH,
        &url(1, &format!("{cms}/twice")),
        None,
        r#"{"data":"x<y"}"#,
    )
    .await;
    assert_eq!(code, 422);
    let why = "Invalid value: \\\"map[data:x\\u003cy]\\\": cannot restore map from string";
    assert_eq!(
        body,
        format!("{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Failure\",\"message\":\" \\\"\\\" is invalid: patch: {why}\",\"reason\":\"Invalid\",\"details\":{{\"causes\":[{{\"reason\":\"FieldValueInvalid\",\"message\":\"{why}\",\"field\":\"patch\"}}]}},\"code\":422}}\n")
    );
    // Strings are escaped as Go's encoder escapes them.
    let odd = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a<b&c"}}"#;
    let (code, body) = raw(&http, M::POST, &url(2, cms), None, odd).await;
    assert_eq!(code, 422);
    assert!(
        body.contains("\"message\":\"ConfigMap \\\"a\\u003cb\\u0026c\\\" is invalid: metadata.name: Invalid value: \\\"a\\u003cb\\u0026c\\\": "),
        "{body}"
    );

    // A list opens with its own fields in kube's order and ends with a newline.
    let (code, body) = raw(&http, M::GET, &url(1, cms), None, "").await;
    assert_eq!(code, 200);
    assert!(
        body.starts_with(
            "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\""
        ),
        "{body}"
    );
    assert!(body.ends_with("]}\n"), "{body}");
    // So does a Table.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let (code, body) = raw(&http, M::GET, &url(2, cms), Some(table), "").await;
    assert_eq!(code, 200);
    assert!(
        body.starts_with(
            "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\""
        ),
        "{body}"
    );
    assert!(body.contains("\"columnDefinitions\":[{\"name\":\"Name\",\"type\":\"string\",\"format\":\"name\",\"description\":"), "{body}");
    assert!(body.ends_with("}\n"), "{body}");
    // An object read back is one JSON line too.
    let (code, body) = raw(&http, M::GET, &url(0, &format!("{cms}/twice")), None, "").await;
    assert_eq!(code, 200);
    assert!(
        body.starts_with("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\","),
        "{body}"
    );
    assert!(body.ends_with("}\n") && !body.ends_with("\n\n"), "{body}");
}

/// A POST by `user` to replica `node` whose body never arrives: it holds a mutating seat for
/// as long as the returned connection stays open.
async fn stalled_create(
    cluster: &Cluster,
    node: usize,
    user: &str,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (cert, key) = cluster.user_pem(user, &[]);
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cluster.ca_pem().as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(
        vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
        PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
    )
    .unwrap();
    let addr = cluster.replicas[node].api_addr.clone();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let host = addr.rsplit_once(':').unwrap().0.to_string();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(ServerName::try_from(host).unwrap(), tcp)
        .await
        .unwrap();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    // Reading drives the client's side of the TLS session (without it the request was seen to
    // sit unsent); nothing may come back, since the server is waiting for the body.
    let mut buf = [0u8; 512];
    match tokio::time::timeout(Duration::from_millis(500), tls.read(&mut buf)).await {
        Err(_) => {}
        Ok(read) => panic!(
            "the server answered a request whose body never came: {read:?} {}",
            String::from_utf8_lossy(&buf)
        ),
    }
    tls
}

/// kube-apiserver's in-flight limits (priority and fairness turned off): beyond
/// `maxMutatingRequestsInflight` executing writes a replica answers `429` with `Retry-After`
/// at once; reads, lease writes, `system:masters` and the other replicas keep being served,
/// and the refusals are counted in kube's series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_beyond_the_in_flight_limit_are_refused_with_429() {
    let k = Kube::start_with(Options {
        inflight: (8, 2),
        priority_and_fairness: false,
        ..Options::default()
    })
    .await;
    let alice = k.cluster_admin("alice")();
    let configmap = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    let create = |node: usize, name: &str| {
        let req = alice
            .post(k.url(node, "/api/v1/namespaces/default/configmaps"))
            .json(&configmap(name));
        async move { req.send().await.unwrap() }
    };
    // Alice's access works while the seats are free.
    assert_eq!(create(0, "before").await.status(), 201);

    let stalled = [
        stalled_create(&k.cluster, 0, "alice").await,
        stalled_create(&k.cluster, 0, "alice").await,
    ];
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let refused = eventually(Duration::from_secs(10), || async {
        let n = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let r = create(0, &format!("refused-{n}")).await;
        if r.status() == 429 {
            Ok(r)
        } else {
            Err(format!("{}", r.status()))
        }
    })
    .await;
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        refused.text().await.unwrap(),
        "Too many requests, please try again later.\n"
    );

    // Reads and lease writes take seats of their own; the admin is never limited; another
    // replica has seats of its own.
    let list = alice
        .get(k.url(0, "/api/v1/namespaces/default/configmaps"))
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-a"},
                       "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 40}});
    let renewed = alice
        .post(k.url(
            0,
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
        ))
        .json(&lease)
        .send()
        .await
        .unwrap();
    assert_eq!(renewed.status(), 201);
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            0,
            "/api/v1/namespaces/default/configmaps",
            Some(&configmap("by-admin")),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(create(1, "elsewhere").await.status(), 201);

    let metrics = k.text(&k.url(0, "/metrics")).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("apiserver_request_terminations_total{")
                && l.contains("verb=\"POST\"")
                && l.contains("resource=\"configmaps\"")
                && l.contains("code=\"429\"")),
        "no 429 termination recorded"
    );

    // Once the stalled writes go, their seats are free again.
    drop(stalled);
    eventually(Duration::from_secs(15), || async {
        match create(0, "after").await.status().as_u16() {
            201 => Ok(()),
            code => Err(format!("{code}")),
        }
    })
    .await;
}

/// The FlowSchema and priority level uids a response names.
fn pf_headers(r: &reqwest::Response) -> (String, String) {
    let h = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    };
    (
        h("X-Kubernetes-PF-FlowSchema-UID"),
        h("X-Kubernetes-PF-PriorityLevel-UID"),
    )
}

/// API Priority and Fairness, as kube-apiserver has it by default: kube's FlowSchemas and
/// priority levels exist (a deleted suggested one comes back, a changed mandatory one is
/// restored), each FlowSchema says whether its level exists, every response names the
/// FlowSchema and level that took it, and a level's overflow waits in its queue, is refused
/// with `429` once the queue is full (or at once by a level that does not queue), and runs
/// when a seat frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_and_fairness_classifies_queues_and_refuses() {
    // Two seats per replica: a level with one share of 246 gets one.
    let k = Kube::start_with(Options {
        inflight: (1, 1),
        ..Options::default()
    })
    .await;
    let names = |kind: &str| -> Vec<String> {
        let out = k.ok(
            "node-1",
            &["get", kind, "-o", "jsonpath={.items[*].metadata.name}"],
        );
        let mut names: Vec<String> = out.split_whitespace().map(str::to_string).collect();
        names.sort();
        names
    };
    let want_schemas = [
        "catch-all",
        "exempt",
        "global-default",
        "kube-controller-manager",
        "kube-scheduler",
        "kube-system-service-accounts",
        "probes",
        "service-accounts",
        "system-leader-election",
        "system-node-high",
        "system-nodes",
    ];
    let want_levels = [
        "catch-all",
        "exempt",
        "global-default",
        "leader-election",
        "node-high",
        "system",
        "workload-high",
        "workload-low",
    ];
    eventually(Duration::from_secs(30), || async {
        let (schemas, levels) = (names("flowschemas"), names("prioritylevelconfigurations"));
        if schemas == want_schemas && levels == want_levels {
            Ok(())
        } else {
            Err(format!("{schemas:?} {levels:?}"))
        }
    })
    .await;
    // Every FlowSchema's level exists, and kubectl's MISSINGPL column says so.
    eventually(Duration::from_secs(30), || async {
        let table = k.ok("node-1", &["get", "flowschemas", "--no-headers"]);
        let missing: Vec<&str> = table
            .lines()
            .filter(|l| l.split_whitespace().last() != Some("False"))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("{missing:?}"))
        }
    })
    .await;
    let exempt: Value = serde_json::from_str(&k.ok(
        "node-1",
        &[
            "get",
            "flowschema",
            "exempt",
            "-o",
            "json",
            "--show-managed-fields",
        ],
    ))
    .unwrap();
    assert_eq!(
        exempt["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );
    assert_eq!(
        exempt["status"]["conditions"][0]["message"],
        "This FlowSchema references the PriorityLevelConfiguration object named \"exempt\" and it exists"
    );
    let managers: Vec<&str> = exempt["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(
        managers,
        [
            "api-priority-and-fairness-config-producer-v1",
            "api-priority-and-fairness-config-consumer-v1"
        ]
    );

    // The mandatory objects are fixed; the producer brings a deleted suggested object back and
    // reverts a change to one whose annotation says it keeps it current.
    let (ok, _, err) = k.kubectl(
        "node-1",
        &[
            "patch",
            "prioritylevelconfiguration",
            "catch-all",
            "--type=merge",
            "-p",
            r#"{"spec":{"limited":{"nominalConcurrencyShares":77}}}"#,
        ],
    );
    assert!(
        !ok && err.contains("spec of 'catch-all' must equal the fixed value"),
        "{err}"
    );
    k.ok("node-1", &["delete", "flowschema", "service-accounts"]);
    k.ok(
        "node-1",
        &[
            "patch",
            "prioritylevelconfiguration",
            "global-default",
            "--type=merge",
            "-p",
            r#"{"spec":{"limited":{"nominalConcurrencyShares":77}}}"#,
        ],
    );
    eventually(Duration::from_secs(40), || async {
        let (ok, _, _) = k.kubectl("node-1", &["get", "flowschema", "service-accounts"]);
        let shares = k.ok(
            "node-1",
            &[
                "get",
                "prioritylevelconfiguration",
                "global-default",
                "-o",
                "jsonpath={.spec.limited.nominalConcurrencyShares}",
            ],
        );
        if ok && shares == "20" {
            Ok(())
        } else {
            Err(format!(
                "service-accounts back: {ok}; global-default shares {shares}"
            ))
        }
    })
    .await;

    let uid = |kind: &str, name: &str| k.ok("node-1", &["get", kind, name, "-o", "jsonpath={.metadata.uid}"]);
    let alice = k.cluster_admin("alice")();
    let admin = k
        .cluster
        .http_builder_as("admin", &["system:masters"])
        .build()
        .unwrap();
    let anonymous = k.cluster.http_builder().build().unwrap();
    let list = |client: &reqwest::Client, node: usize| {
        let req = client.get(k.url(node, "/api/v1/namespaces/default/configmaps"));
        async move { req.send().await.unwrap() }
    };
    let r = list(&alice, 0).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        pf_headers(&r),
        (
            uid("flowschema", "global-default"),
            uid("prioritylevelconfiguration", "global-default")
        )
    );
    let r = list(&admin, 1).await;
    assert_eq!(
        pf_headers(&r),
        (
            uid("flowschema", "exempt"),
            uid("prioritylevelconfiguration", "exempt")
        )
    );
    let r = anonymous.get(k.url(2, "/readyz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        pf_headers(&r),
        (
            uid("flowschema", "probes"),
            uid("prioritylevelconfiguration", "exempt")
        )
    );

    // Alice's own level: one seat, one queue of one.
    let level = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "tiny"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}});
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "tiny"},
        "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "clusterScope": true, "namespaces": ["*"]}]}]}});
    for (path, body) in [
        (
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            &level,
        ),
        ("/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", &schema),
    ] {
        let (code, body) = k.send(reqwest::Method::POST, 0, path, Some(body)).await;
        assert_eq!(code, 201, "{body}");
    }
    let tiny = (
        uid("flowschema", "tiny"),
        uid("prioritylevelconfiguration", "tiny"),
    );
    eventually(Duration::from_secs(10), || async {
        let r = list(&alice, 0).await;
        if pf_headers(&r) == tiny {
            Ok(())
        } else {
            Err(format!("{:?}", pf_headers(&r)))
        }
    })
    .await;

    // A stalled write holds the seat; the next request waits in the queue, the one after it
    // finds the queue full.
    let stalled = stalled_create(&k.cluster, 0, "alice").await;
    let waiting = tokio::spawn(list(&alice, 0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "the second request waits for the seat");
    let full = list(&alice, 0).await;
    assert_eq!(full.status(), 429);
    assert_eq!(full.headers()["retry-after"], "1");
    assert_eq!(pf_headers(&full), tiny);
    assert_eq!(
        full.text().await.unwrap(),
        "Too many requests, please try again later.\n"
    );
    // Other users, and the same user on another replica, are not held back.
    assert_eq!(list(&alice, 1).await.status(), 200);
    assert_eq!(list(&admin, 0).await.status(), 200);
    drop(stalled);
    let served = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the queued request runs once the seat frees")
        .unwrap();
    assert_eq!(served.status(), 200);

    let patch_tiny = |patch: &str| {
        k.ok(
            "node-1",
            &[
                "patch",
                "prioritylevelconfiguration",
                "tiny",
                "--type=merge",
                "-p",
                patch,
            ],
        );
    };
    // A level that does not queue refuses at once.
    patch_tiny(r#"{"spec":{"limited":{"limitResponse":{"type":"Reject","queuing":null}}}}"#);
    let stalled = eventually(Duration::from_secs(10), || async {
        let stalled = stalled_create(&k.cluster, 0, "alice").await;
        let started = std::time::Instant::now();
        let r = list(&alice, 0).await;
        if r.status() == 429 && started.elapsed() < Duration::from_secs(2) {
            Ok(stalled)
        } else {
            Err(format!("{} after {:?}", r.status(), started.elapsed()))
        }
    })
    .await;
    drop(stalled);

    // Allowed to borrow one seat (100 % of its one), the level runs a second request on the
    // seats the other levels lend while they are idle.
    patch_tiny(r#"{"spec":{"limited":{"borrowingLimitPercent":100}}}"#);
    let stalled = eventually(Duration::from_secs(10), || async {
        let stalled = stalled_create(&k.cluster, 0, "alice").await;
        let r = list(&alice, 0).await;
        if r.status() == 200 {
            Ok(stalled)
        } else {
            Err(format!("{}", r.status()))
        }
    })
    .await;
    // With its own seat and the borrowed one both held, a third request is refused.
    let borrowed = stalled_create(&k.cluster, 0, "alice").await;
    let third = list(&alice, 0).await;
    assert_eq!(
        third.status(),
        429,
        "one own seat and one borrowed: a third is refused"
    );
    drop((stalled, borrowed));

    // kube's validation of the configuration objects.
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            0,
            "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
            Some(
                &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                "metadata": {"name": "bad"},
                "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 10001,
                    "rules": [{"subjects": [{"kind": "User", "user": {"name": "bob"}}],
                        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/a/*/b"]}]}]}}),
            ),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "FlowSchema.flowcontrol.apiserver.k8s.io \"bad\" is invalid: [spec.matchingPrecedence: Invalid value: 10001: \
         must not be greater than 10000, spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"/a/*/b\": \
         wildcard can only do suffix matching]"
    );
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            0,
            "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations",
            Some(
                &json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
                "metadata": {"name": "wide"},
                "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue",
                    "queuing": {"queues": 512, "handSize": 8}}}}}),
            ),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io \"wide\" is invalid: \
         spec.limited.limitResponse.queuing.handSize: Invalid value: 8: required entropy bits of deckSize 512 and \
         handSize 8 should not be greater than 60"
    );
    // kube's defaults fill in what a level leaves out.
    let shares = k.ok(
        "node-1",
        &[
            "get",
            "prioritylevelconfiguration",
            "tiny",
            "-o",
            "jsonpath={.spec.limited.lendablePercent}",
        ],
    );
    assert_eq!(shares, "0");

    // kube's dump of the levels: tiny refused and dispatched requests on replica 0.
    let dump = k
        .text(&k.url(0, "/debug/api_priority_and_fairness/dump_priority_levels"))
        .await;
    let mut lines = dump.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split(',').map(str::trim).collect::<Vec<_>>()),
        Some(vec![
            "PriorityLevelName",
            "ActiveQueues",
            "IsIdle",
            "IsQuiescing",
            "WaitingRequests",
            "ExecutingRequests",
            "DispatchedRequests",
            "RejectedRequests",
            "TimedoutRequests",
            "CancelledRequests",
        ]),
        "{dump}"
    );
    let tiny: Vec<u64> = lines
        .find(|l| l.starts_with("tiny,"))
        .map(|l| {
            l.split(',')
                .skip(4)
                .filter_map(|c| c.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        tiny.len() == 6 && tiny[2] >= 3 && tiny[3] >= 2,
        "tiny's waiting, executing, dispatched, rejected, timed out, cancelled: {tiny:?}\n{dump}"
    );

    let metrics = k.text(&k.url(0, "/metrics")).await;
    for reason in ["queue-full", "concurrency-limit"] {
        assert!(
            metrics.lines().any(
                |l| l.starts_with("apiserver_flowcontrol_rejected_requests_total{")
                    && l.contains("flow_schema=\"tiny\"")
                    && l.contains(&format!("reason=\"{reason}\""))
            ),
            "no {reason} rejection recorded"
        );
    }
    assert!(metrics.lines().any(
        |l| l.starts_with("apiserver_flowcontrol_dispatched_requests_total{")
            && l.contains("flow_schema=\"global-default\"")
    ));
    assert!(metrics.contains("apiserver_flowcontrol_nominal_limit_seats{priority_level=\"tiny\"} 1"));
}
