//! The Kubernetes protobuf wire format on a real three-replica cluster: the real `kubectl`'s
//! typed commands (which send `application/vnd.kubernetes.protobuf` bodies and prefer protobuf
//! answers) create objects on one replica, and another replica serves them back as JSON. Raw
//! HTTP checks hand-built protobuf bytes in both directions.

mod support;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use serde_json::Value;
use support::kube::Kube;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_typed_commands_speak_protobuf() {
    let k = Kube::start().await;

    // Which content types kubectl really uses (logged at -v=8).
    let (ok, out, log) = k.kubectl("node-1", &["create", "namespace", "pb", "-v=8"]);
    assert!(ok && out.contains("namespace/pb created"), "{out}\n{log}");
    let post = log
        .lines()
        .skip_while(|l| !l.contains("] POST "))
        .take(12)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        post.contains(&format!("Content-Type: {PROTOBUF}")),
        "request headers:\n{post}"
    );
    assert!(
        post.contains(&format!("Accept: {PROTOBUF},")),
        "request headers:\n{post}"
    );
    let response = log
        .lines()
        .skip_while(|l| !l.contains("Response Status: 201"))
        .take(8)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        response.contains(&format!("Content-Type: {PROTOBUF}")),
        "response headers:\n{response}"
    );

    k.ok(
        "node-2",
        &[
            "-n",
            "pb",
            "create",
            "configmap",
            "c",
            "--from-literal=a=b",
            "--from-literal=x=y z",
        ],
    );
    k.ok(
        "node-1",
        &[
            "-n",
            "pb",
            "create",
            "secret",
            "generic",
            "s",
            "--from-literal=k=v",
        ],
    );
    k.ok(
        "node-2",
        &[
            "-n",
            "pb",
            "create",
            "deployment",
            "d",
            "--image=nginx",
            "--replicas=0",
            "--port=80",
        ],
    );
    k.ok(
        "node-1",
        &["-n", "pb", "create", "deployment", "d2", "--image=busybox"],
    );
    k.ok("node-2", &["-n", "pb", "create", "serviceaccount", "sa"]);

    // Everything reads back, as JSON, from another replica.
    let ns = k.json("node-3", &["get", "namespace", "pb"]);
    assert_eq!(ns["metadata"]["name"], "pb");
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["metadata"]["uid"].as_str().map(str::len), Some(36));

    let cm = k.json("node-3", &["-n", "pb", "get", "configmap", "c"]);
    assert_eq!(cm["data"]["a"], "b");
    assert_eq!(cm["data"]["x"], "y z");
    assert!(cm["metadata"]["creationTimestamp"].is_string(), "{cm}");
    assert!(
        cm["metadata"].get("resourceVersion").is_some_and(|v| v != ""),
        "{cm}"
    );

    let secret = k.json("node-3", &["-n", "pb", "get", "secret", "s"]);
    assert_eq!(secret["type"], "Opaque");
    let value = secret["data"]["k"].as_str().expect("secret data");
    assert_eq!(BASE64.decode(value).expect("secret data is base64"), b"v");

    let d = k.json("node-3", &["-n", "pb", "get", "deployment", "d"]);
    // An explicit zero survives the protobuf trip (the default would be 1).
    assert_eq!(d["spec"]["replicas"], 0, "{d}");
    assert_eq!(d["spec"]["selector"]["matchLabels"]["app"], "d");
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "nginx");
    assert_eq!(container["ports"][0]["containerPort"], 80);
    assert_eq!(d["spec"]["template"]["metadata"]["labels"]["app"], "d");
    // Empty Go strings on the wire are not stored as "".
    assert!(d["metadata"].get("namespace").is_some_and(|n| n == "pb"));
    assert!(container.get("workingDir").is_none(), "{container}");
    let d2 = k.json("node-3", &["-n", "pb", "get", "deployment", "d2"]);
    assert_eq!(d2["spec"]["replicas"], 1, "{d2}");

    let sa = k.json("node-3", &["-n", "pb", "get", "serviceaccount", "sa"]);
    assert_eq!(sa["metadata"]["name"], "sa");

    // Errors come back as protobuf Status objects kubectl can read.
    let (ok, _, err) = k.kubectl("node-1", &["-n", "pb", "create", "configmap", "c"]);
    assert!(!ok && err.contains("configmaps \"c\" already exists"), "{err}");

    // Delete, then the object is gone everywhere.
    let out = k.ok("node-2", &["-n", "pb", "delete", "configmap", "c"]);
    assert!(out.contains("configmap \"c\" deleted"), "{out}");
    let (ok, _, err) = k.kubectl("node-3", &["-n", "pb", "get", "configmap", "c"]);
    assert!(!ok && err.contains("NotFound"), "{err}");
}

/// A length-delimited field.
fn field(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag << 3 | 2);
    assert!(payload.len() < 128);
    out.push(payload.len() as u8);
    out.extend_from_slice(payload);
}

/// `k8s\0` + runtime.Unknown around a ConfigMap named `name` with data {a: b}.
fn config_map(name: &str) -> Vec<u8> {
    let mut meta = Vec::new();
    field(&mut meta, 1, name.as_bytes());
    let mut entry = Vec::new();
    field(&mut entry, 1, b"a");
    field(&mut entry, 2, b"b");
    let mut cm = Vec::new();
    field(&mut cm, 1, &meta);
    field(&mut cm, 2, &entry);
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, b"v1");
    field(&mut type_meta, 2, b"ConfigMap");
    let mut out = b"k8s\0".to_vec();
    field(&mut out, 1, &type_meta);
    field(&mut out, 2, &cm);
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_protobuf_bodies_and_answers() {
    let k = Kube::start().await;
    let http = k.http.clone();
    let cms = k.url(0, "/api/v1/namespaces/default/configmaps");

    // A hand-built protobuf ConfigMap, answered in JSON when JSON is preferred.
    let r = http
        .post(&cms)
        .header("content-type", PROTOBUF)
        .header("accept", "application/json")
        .body(config_map("raw"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"]["a"], "b");
    assert_eq!(body["kind"], "ConfigMap");

    // Read back from another replica in protobuf.
    let r = http
        .get(k.url(2, "/api/v1/namespaces/default/configmaps/raw"))
        .header("accept", format!("{PROTOBUF}, application/json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], PROTOBUF);
    let bytes = r.bytes().await.unwrap();
    assert!(bytes.starts_with(b"k8s\0"), "{bytes:?}");
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, b"v1");
    field(&mut type_meta, 2, b"ConfigMap");
    assert!(contains(&bytes, &type_meta), "{bytes:?}");
    assert!(
        contains(&bytes, &[0x12, 0x06, 0x0a, 0x01, b'a', 0x12, 0x01, b'b']),
        "{bytes:?}"
    );
    assert!(contains(&bytes, b"\x0a\x03raw"), "{bytes:?}");

    // Lists use the <Kind>List message.
    let r = http.get(&cms).header("accept", PROTOBUF).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let bytes = r.bytes().await.unwrap();
    assert!(contains(&bytes, b"ConfigMapList"), "{bytes:?}");

    // A truncated body is a 400 Status, in protobuf when protobuf is preferred.
    let whole = config_map("cut");
    let r = http
        .post(&cms)
        .header("content-type", PROTOBUF)
        .header("accept", PROTOBUF)
        .body(whole[..whole.len() - 3].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], PROTOBUF);
    let bytes = r.bytes().await.unwrap();
    assert!(
        bytes.starts_with(b"k8s\0") && contains(&bytes, b"Status"),
        "{bytes:?}"
    );
    assert!(contains(&bytes, b"truncated"), "{bytes:?}");

    // And as JSON for JSON clients; garbage without the magic is a 400 too.
    let r = http
        .post(&cms)
        .header("content-type", PROTOBUF)
        .body(b"\x0a\x02hi".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let status: Value = r.json().await.unwrap();
    assert_eq!(status["reason"], "BadRequest");

    // DELETE with protobuf DeleteOptions carrying a stale resourceVersion precondition.
    let mut pre = Vec::new();
    field(&mut pre, 2, b"1");
    let mut opts = Vec::new();
    field(&mut opts, 2, &pre);
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, b"v1");
    field(&mut type_meta, 2, b"DeleteOptions");
    let mut body = b"k8s\0".to_vec();
    field(&mut body, 1, &type_meta);
    field(&mut body, 2, &opts);
    let r = http
        .delete(k.url(1, "/api/v1/namespaces/default/configmaps/raw"))
        .header("content-type", PROTOBUF)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409, "{:?}", r.text().await);
}
