//! Discovery and the other views of the API on a real three-replica cluster: what
//! `kubectl api-resources` / `api-versions` see (through aggregated discovery, as kubectl asks
//! for it first), `PartialObjectMetadata` views, gzip for large responses, and a multi-document
//! `kubectl apply -f` of new objects.

mod support;

use std::io::Read;

use serde_json::{json, Value};
use support::kube::Kube;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// The whitespace-separated words of every table row after the header.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_discovers_every_resource_through_aggregated_discovery() {
    let k = Kube::start().await;

    // kubectl asks /api and /apis for the aggregated form and gets it.
    let (ok, _, log) = k.kubectl("node-2", &["api-resources", "-v=8"]);
    assert!(ok, "{log}");
    assert!(
        log.contains("Content-Type: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        "kubectl did not receive aggregated discovery:\n{log}"
    );
    assert!(
        !log.lines()
            .any(|l| l.contains("] GET ") && l.contains("/apis/apps/v1")),
        "kubectl fell back to per-group-version discovery:\n{log}"
    );

    let table = k.ok("node-2", &["api-resources"]);
    let rows = rows(&table);
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.first().map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from\n{table}"))
            .clone()
    };
    assert_eq!(find("pods"), ["pods", "po", "v1", "true", "Pod"]);
    assert_eq!(
        find("deployments"),
        ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    );
    assert_eq!(
        find("namespaces"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    assert_eq!(
        find("leases"),
        ["leases", "coordination.k8s.io/v1", "true", "Lease"]
    );
    assert_eq!(
        find("customresourcedefinitions"),
        [
            "customresourcedefinitions",
            "crd,crds",
            "apiextensions.k8s.io/v1",
            "false",
            "CustomResourceDefinition"
        ]
    );
    // The list of types is served, each once.
    for plural in [
        "configmaps",
        "secrets",
        "services",
        "serviceaccounts",
        "events",
        "nodes",
        "endpoints",
        "persistentvolumes",
        "persistentvolumeclaims",
        "limitranges",
        "resourcequotas",
        "replicationcontrollers",
        "replicasets",
        "statefulsets",
        "daemonsets",
        "controllerrevisions",
        "jobs",
        "cronjobs",
        "roles",
        "rolebindings",
        "clusterroles",
        "clusterrolebindings",
        "endpointslices",
        "poddisruptionbudgets",
        "ingresses",
        "networkpolicies",
        "ingressclasses",
        "storageclasses",
        "priorityclasses",
        "horizontalpodautoscalers",
    ] {
        find(plural);
    }
    let cluster_scoped = k.ok("node-3", &["api-resources", "--namespaced=false", "-o", "name"]);
    for name in [
        "namespaces",
        "nodes",
        "persistentvolumes",
        "clusterroles.rbac.authorization.k8s.io",
    ] {
        assert!(
            cluster_scoped.lines().any(|l| l == name),
            "{name} in\n{cluster_scoped}"
        );
    }
    assert!(!cluster_scoped.lines().any(|l| l == "pods"), "{cluster_scoped}");
    let all = k.ok("node-1", &["api-resources", "--categories=all", "-o", "name"]);
    for name in ["pods", "services", "deployments.apps", "jobs.batch"] {
        assert!(all.lines().any(|l| l == name), "{name} in category all:\n{all}");
    }

    let versions = k.ok("node-1", &["api-versions"]);
    for gv in [
        "v1",
        "apps/v1",
        "batch/v1",
        "autoscaling/v2",
        "rbac.authorization.k8s.io/v1",
        "apiextensions.k8s.io/v1",
        "networking.k8s.io/v1",
    ] {
        assert!(versions.lines().any(|l| l == gv), "{gv} missing from\n{versions}");
    }

    // The same documents over plain HTTP, with the aggregated media type and legacy fallback.
    for (path, expected_group) in [("/api", ""), ("/apis", "apps")] {
        let r = k
            .http
            .get(k.url(0, path))
            .header("accept", AGGREGATED)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.headers()["content-type"],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["kind"], "APIGroupDiscoveryList");
        assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
        let names: Vec<&str> = doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["metadata"]["name"].as_str().unwrap_or(""))
            .collect();
        assert!(names.contains(&expected_group), "{names:?}");
        if path == "/api" {
            assert_eq!(names, [""]);
            assert_eq!(doc["items"][0]["versions"][0]["version"], "v1");
        } else {
            assert!(!names.contains(&""), "{names:?}");
        }
    }
    let legacy: Value = k
        .http
        .get(k.url(1, "/apis"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(legacy["kind"], "APIGroupList");
    let (code, status) = {
        let r = k
            .http
            .get(k.url(1, "/apis/apps/v1"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        (
            r.status().as_u16(),
            r.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    assert_eq!(
        (code, &status["reason"]),
        (406, &json!("NotAcceptable")),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_views_gzip_and_multi_document_apply() {
    let k = Kube::start().await;
    let file = k.manifest(
        "app.yaml",
        "apiVersion: v1
kind: Namespace
metadata:
  name: meta
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: meta
  labels: {app: shop}
data:
  mode: fast
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shop
  namespace: meta
spec:
  replicas: 2
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers:
      - name: web
        image: nginx
",
    );
    let out = k.ok("node-1", &["apply", "-f", &file]);
    for line in [
        "namespace/meta created",
        "configmap/settings created",
        "deployment.apps/shop created",
    ] {
        assert!(out.contains(line), "{out}");
    }
    k.wait_namespace_populated("meta").await;
    // Client-side apply records the manifest it applied, read back from another replica.
    let cm = k.json("node-3", &["-n", "meta", "get", "configmap", "settings"]);
    let last = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("last-applied-configuration");
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["data"]["mode"], "fast");
    let describe = k.ok("node-2", &["-n", "meta", "describe", "deployment", "shop"]);
    assert!(
        describe.contains("Replicas:") && describe.contains("nginx"),
        "{describe}"
    );

    // PartialObjectMetadata(List): metadata only.
    let r = k
        .http
        .get(k.url(1, "/api/v1/namespaces/meta/configmaps"))
        .header(
            "accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let list: Value = r.json().await.unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"].is_string(), "{list}");
    let items = list["items"].as_array().expect("items");
    let names: Vec<&str> = items
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["kube-root-ca.crt", "settings"], "{list}");
    assert!(
        items
            .iter()
            .all(|i| i["kind"] == "PartialObjectMetadata" && i.get("data").is_none()),
        "{list}"
    );
    assert_eq!(items[1]["metadata"]["labels"]["app"], "shop");
    let one: Value = k
        .http
        .get(k.url(2, "/apis/apps/v1/namespaces/meta/deployments/shop"))
        .header(
            "accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "shop");
    assert!(one.get("spec").is_none(), "{one}");

    // Large responses are gzipped for clients that accept it; small ones and watches are not.
    let big = "x".repeat(16 * 1024);
    for i in 0..12 {
        let (code, body) = k
            .send(
                reqwest::Method::POST,
                i % 3,
                "/api/v1/namespaces/meta/configmaps",
                Some(&json!({"metadata": {"name": format!("big-{i}")}, "data": {"blob": big}})),
            )
            .await;
        assert_eq!(code, 201, "{body}");
    }
    let get = |path: &str| k.http.get(k.url(0, path)).header("accept-encoding", "gzip");
    let r = get("/api/v1/namespaces/meta/configmaps").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers().get("content-encoding").map(|v| v.to_str().unwrap()),
        Some("gzip")
    );
    let compressed = r.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&compressed[..])
        .read_to_string(&mut text)
        .expect("a gzip body");
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        list["items"].as_array().map(Vec::len),
        Some(14),
        "12 big ones, settings and kube-root-ca.crt"
    );
    assert!(
        compressed.len() * 10 < text.len(),
        "{} -> {}",
        text.len(),
        compressed.len()
    );
    let r = get("/api/v1/namespaces/meta/configmaps/settings")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("content-encoding").is_none());
    let r = get("/api/v1/namespaces/meta/configmaps?watch=1&timeoutSeconds=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers().get("content-encoding").is_none(),
        "watch streams stay uncompressed"
    );
    // kubectl accepts gzip and reads the same list.
    let names = k.ok("node-1", &["-n", "meta", "get", "cm", "-o", "name"]);
    assert_eq!(names.lines().count(), 14, "{names}");
}

/// Discovery documents as kube-apiserver writes them, byte for byte where they do not depend
/// on what is served: Go struct field order, `apiVersion` left out of the core group's
/// documents, a newline after each, and every resource's `storageVersionHash` (the values a
/// real kube-apiserver publishes for ConfigMaps and Deployments).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_documents_have_kube_apiservers_bytes() {
    use support::{Cluster, Options};
    let mut c = Cluster::start(Options {
        insecure: true,
        ..Options::default()
    });
    c.wait_bootstrapped(std::time::Duration::from_secs(30)).await;
    let http = reqwest::Client::new();
    let get = |i: usize, path: &str, accept: &str| {
        let req = http
            .get(format!("{}{path}", c.base_url(i)))
            .header("accept", accept);
        async move {
            let r = req.send().await.expect("the replica answers");
            assert_eq!(r.status().as_u16(), 200);
            let ctype = r.headers()["content-type"]
                .to_str()
                .unwrap_or_default()
                .to_string();
            (ctype, r.text().await.expect("a body"))
        }
    };
    let json = "application/json";

    let (_, body) = get(0, "/api", json).await;
    assert_eq!(
        body,
        format!(
            "{{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],\"serverAddressByClientCIDRs\":[{{\"clientCIDR\":\"0.0.0.0/0\",\"serverAddress\":\"{}\"}}]}}\n",
            c.replicas[0].api_addr
        )
    );

    let (_, body) = get(1, "/api/v1", json).await;
    assert!(
        body.starts_with("{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":[{"),
        "{body}"
    );
    assert!(body.ends_with("}]}\n"), "{body}");
    assert!(
        body.contains("{\"name\":\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,\"kind\":\"ConfigMap\",\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\",\"patch\",\"update\",\"watch\"],\"shortNames\":[\"cm\"],\"storageVersionHash\":\"qFsyl6wFWjQ=\"}"),
        "{body}"
    );
    assert!(
        body.contains("{\"name\":\"pods/status\",\"singularName\":\"\",\"namespaced\":true,\"kind\":\"Pod\",\"verbs\":[\"get\",\"patch\",\"update\"]}"),
        "{body}"
    );

    let (_, body) = get(2, "/apis/apps/v1", json).await;
    assert!(body.starts_with("{\"kind\":\"APIResourceList\",\"apiVersion\":\"v1\",\"groupVersion\":\"apps/v1\",\"resources\":[{"), "{body}");
    assert!(body.ends_with("}]}\n"), "{body}");
    assert!(
        body.contains("{\"name\":\"deployments\",\"singularName\":\"deployment\",\"namespaced\":true,\"kind\":\"Deployment\",\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\",\"patch\",\"update\",\"watch\"],\"shortNames\":[\"deploy\"],\"categories\":[\"all\"],\"storageVersionHash\":\"8aSe+NMegvE=\"}"),
        "{body}"
    );
    assert!(
        body.contains("{\"name\":\"deployments/scale\",\"singularName\":\"\",\"namespaced\":true,\"group\":\"autoscaling\",\"version\":\"v1\",\"kind\":\"Scale\",\"verbs\":[\"get\",\"patch\",\"update\"]}"),
        "{body}"
    );

    let (_, body) = get(0, "/apis/apps", json).await;
    assert!(
        body.starts_with("{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":\"apps\",\"versions\":[{\"groupVersion\":\"apps/v1\",\"version\":\"v1\"}"),
        "{body}"
    );
    assert!(
        body.ends_with("\"preferredVersion\":{\"groupVersion\":\"apps/v1\",\"version\":\"v1\"}}\n"),
        "{body}"
    );

    let (_, body) = get(1, "/apis", json).await;
    assert!(
        body.starts_with("{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[{\"name\":\""),
        "{body}"
    );
    assert!(
        body.contains("{\"name\":\"apps\",\"versions\":[{\"groupVersion\":\"apps/v1\",\"version\":\"v1\"}"),
        "{body}"
    );
    assert!(body.ends_with("}]}\n"), "{body}");

    let (ctype, body) = get(2, "/api", AGGREGATED).await;
    assert!(ctype.contains("as=APIGroupDiscoveryList"), "{ctype}");
    assert!(
        body.starts_with("{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/v2\",\"metadata\":{},\"items\":[{\"metadata\":{\"creationTimestamp\":null},\"versions\":[{\"version\":\"v1\",\"resources\":[{\"resource\":"),
        "{body}"
    );
    assert!(
        body.contains("{\"resource\":\"configmaps\",\"responseKind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"ConfigMap\"},\"scope\":\"Namespaced\",\"singularResource\":\"configmap\",\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\",\"patch\",\"update\",\"watch\"],\"shortNames\":[\"cm\"]}"),
        "{body}"
    );
    assert!(body.ends_with("\"freshness\":\"Current\"}]}]}\n"), "{body}");
    let (_, body) = get(0, "/apis", AGGREGATED).await;
    assert!(body.contains("{\"metadata\":{\"name\":\"apps\",\"creationTimestamp\":null},\"versions\":[{\"version\":\"v1\",\"resources\":["), "{body}");

    // /version is indented, with no newline after it (kube's `WriteRawJSON`).
    let (_, body) = get(1, "/version", json).await;
    assert!(
        body.starts_with("{\n  \"major\": \"1\",\n  \"minor\": \"35\",\n  \"emulationMajor\": \"1\",\n  \"emulationMinor\": \"35\",\n  \"minCompatibilityMajor\": \"1\",\n  \"minCompatibilityMinor\": \"34\",\n  \"gitVersion\": \"v1.35."),
        "{body}"
    );
    assert!(body.ends_with("\"\n}"), "{body}");
}

/// Discovery documents and the PartialObjectMetadata view come in every encoding kube-apiserver
/// writes them in (protobuf with its `k8s\0` envelope, CBOR with the self-described tag), a
/// Table in JSON or YAML only, and aggregated discovery in protobuf with its own media type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_views_in_every_encoding() {
    const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
    let k = Kube::start().await;
    k.ok(
        "node-1",
        &["create", "configmap", "settings", "--from-literal=a=1"],
    );
    let get = |node: usize, path: &str, accept: &str| {
        let r = k.http.get(k.url(node, path)).header("accept", accept);
        async move {
            let r = r.send().await.unwrap();
            let code = r.status().as_u16();
            let ctype = r.headers()["content-type"].to_str().unwrap().to_string();
            (code, ctype, r.bytes().await.unwrap().to_vec())
        }
    };
    let has = |body: &[u8], s: &str| body.windows(s.len()).any(|w| w == s.as_bytes());
    for (path, kind) in [
        ("/api", "APIVersions"),
        ("/apis", "APIGroupList"),
        ("/apis/apps", "APIGroup"),
        ("/apis/apps/v1", "APIResourceList"),
    ] {
        let (code, ctype, body) = get(1, path, PROTOBUF).await;
        assert_eq!((code, ctype.as_str()), (200, PROTOBUF), "{path}");
        assert!(body.starts_with(b"k8s\0") && has(&body, kind), "{path}: {body:?}");
        let (code, ctype, body) = get(2, path, "application/cbor").await;
        assert_eq!((code, ctype.as_str()), (200, "application/cbor"), "{path}");
        assert!(
            body.starts_with(&[0xd9, 0xd9, 0xf7]) && has(&body, kind),
            "{path}"
        );
    }
    assert!(has(&get(1, "/apis/apps/v1", PROTOBUF).await.2, "deployments"));

    let aggregated =
        "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let (code, ctype, body) = get(0, "/apis", aggregated).await;
    assert_eq!((code, ctype.as_str()), (200, aggregated));
    assert!(body.starts_with(b"k8s\0") && has(&body, "APIGroupDiscoveryList") && has(&body, "deployments"));

    // What client-go's metadata client (the garbage collector's informers) asks for.
    let cms = "/api/v1/namespaces/default/configmaps";
    let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let (code, ctype, body) = get(2, cms, metadata).await;
    assert_eq!((code, ctype.as_str()), (200, PROTOBUF));
    let list = kuberaft::machinery::protobuf::decode_object(&body).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    let item = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["metadata"]["name"] == "settings")
        .expect("settings listed");
    assert!(item.get("data").is_none(), "metadata only: {item}");
    let (code, ctype, body) = get(
        1,
        &format!("{cms}/settings"),
        "application/cbor;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!((code, ctype.as_str()), (200, "application/cbor"));
    assert!(body.starts_with(&[0xd9, 0xd9, 0xf7]) && has(&body, "PartialObjectMetadata"));
    let (code, ctype, body) = get(
        1,
        cms,
        "application/yaml;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!((code, ctype.as_str()), (200, "application/yaml"));
    assert!(
        text.contains("kind: PartialObjectMetadataList") && text.contains("name: settings"),
        "{text}"
    );
    // A watch of metadata in protobuf: length-prefixed WatchEvents carrying metadata only.
    let (code, ctype, body) = get(
        2,
        &format!("{cms}?watch=1&timeoutSeconds=1&fieldSelector=metadata.name=settings"),
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(
        (code, ctype.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    assert!(has(&body, "ADDED") && has(&body, "PartialObjectMetadata") && has(&body, "settings"));
    assert!(!has(&body, "ConfigMap"), "metadata only");

    // A Table in YAML; in protobuf there is none, so the next range answers.
    let table = "application/yaml;as=Table;g=meta.k8s.io;v=v1";
    let (code, ctype, body) = get(0, cms, table).await;
    let text = String::from_utf8_lossy(&body);
    assert_eq!((code, ctype.as_str()), (200, "application/yaml"));
    assert!(
        text.contains("kind: Table") && text.contains("columnDefinitions:"),
        "{text}"
    );
    let (code, ctype, _) = get(
        0,
        cms,
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!((code, ctype.as_str()), (200, "application/json"));
    let (code, _, _) = get(
        0,
        cms,
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(code, 406);
}
