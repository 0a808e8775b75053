//! `/openapi/v2` and `/openapi/v3` on a real three-replica cluster: plain HTTP checks of the
//! documents and their caching headers, and the real `kubectl` using them for `explain` and
//! for its default (strict, client-side) schema validation.

mod support;

use serde_json::{json, Value};
use support::kube::Kube;

/// What kubectl asks for, and what kube-apiserver answers with (a Go-parsable media type).
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
const V2_PROTOBUF_ANSWER: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

fn header(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_serves_the_same_documents_with_kube_apiserver_headers() {
    let k = Kube::start().await;
    let http = k
        .cluster
        .http_builder_as(support::ADMIN, &["system:masters"])
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut apps_urls = Vec::new();
    for node in 0..3 {
        let r = http.get(k.url(node, "/openapi/v2")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), "application/json");
        let etag = header(&r, "etag");
        assert!(etag.starts_with('"') && etag.len() == 130, "{etag}");
        let v2: Value = r.json().await.unwrap();
        assert_eq!(v2["swagger"], "2.0");
        assert_eq!(
            v2["definitions"]["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"][0]["kind"],
            "Deployment"
        );
        // List types are described in upstream's words.
        let defs = &v2["definitions"];
        let cms = &defs["io.k8s.api.core.v1.ConfigMapList"];
        assert_eq!(
            cms["description"],
            "ConfigMapList is a resource containing a list of ConfigMap objects."
        );
        assert_eq!(
            cms["properties"]["items"]["description"],
            "Items is the list of ConfigMaps."
        );
        assert_eq!(
            cms["properties"]["metadata"]["description"],
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
        );
        let pods = &defs["io.k8s.api.core.v1.PodList"];
        assert_eq!(pods["description"], "PodList is a list of Pods.");
        assert_eq!(
            pods["properties"]["items"]["description"],
            "List of pods. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
        );
        assert_eq!(
            defs["io.k8s.api.rbac.v1.ClusterRoleList"]["description"],
            "ClusterRoleList is a collection of ClusterRoles"
        );
        // The Swagger lists in kube-apiserver's order, as its generated clients read them.
        let cm = &v2["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"];
        assert_eq!(
            cm["patch"]["consumes"],
            json!([
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
                "application/apply-patch+cbor"
            ])
        );
        assert_eq!(
            cm["get"]["produces"],
            json!([
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
                "application/cbor"
            ])
        );
        assert_eq!(
            v2["paths"]["/api/v1/configmaps"]["get"]["produces"],
            json!([
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
                "application/cbor",
                "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf;stream=watch",
                "application/cbor-seq"
            ])
        );

        let r = http
            .get(k.url(node, "/openapi/v2"))
            .header("accept", V2_PROTOBUF)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), V2_PROTOBUF_ANSWER);
        let pb = r.bytes().await.unwrap();
        assert_eq!(
            &pb[..5],
            b"\x0a\x032.0",
            "a gnostic Document starts with swagger = \"2.0\""
        );

        let r = http
            .get(k.url(node, "/openapi/v2"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 406);
        let r = http
            .get(k.url(node, "/openapi/v2"))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304);

        let r = http.get(k.url(node, "/openapi/v3")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), "application/json");
        let index: Value = r.json().await.unwrap();
        let paths = index["paths"].as_object().unwrap();
        for gv in [
            "api/v1",
            "apis/apps/v1",
            "apis/rbac.authorization.k8s.io/v1",
            "apis/autoscaling/v2",
        ] {
            assert!(paths.contains_key(gv), "{gv} missing from {paths:?}");
        }
        let url = paths["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_string();
        let r = http.get(k.url(node, &url)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), "application/json");
        assert_eq!(header(&r, "cache-control"), "public, immutable");
        assert!(!header(&r, "expires").is_empty());
        let etag = header(&r, "etag");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["openapi"], "3.0.0");
        let deploy = &doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
        assert!(deploy["properties"]["spec"]["allOf"].is_array(), "{deploy}");
        let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        // Every encoding the endpoints negotiate is listed, CBOR included, and the patch
        // types come in kube's order (generated clients send the first by default).
        let content_types = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(
            content_types(&patch["requestBody"]["content"]),
            [
                "application/apply-patch+cbor",
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/strategic-merge-patch+json"
            ]
        );
        let list = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["get"];
        assert_eq!(
            content_types(&list["responses"]["200"]["content"]),
            [
                "application/cbor",
                "application/cbor-seq",
                "application/json",
                "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf",
                "application/vnd.kubernetes.protobuf;stream=watch",
                "application/yaml"
            ]
        );

        let r = http
            .get(k.url(node, &url))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304);
        let r = http
            .get(k.url(node, "/openapi/v3/apis/apps/v1?hash=STALE"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 301);
        assert_eq!(header(&r, "location"), url);
        let r = http
            .get(k.url(node, "/openapi/v3/apis/nope.example.com/v1"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        apps_urls.push(url);
    }
    assert!(
        apps_urls.iter().all(|u| *u == apps_urls[0]),
        "replicas disagree on the document hash: {apps_urls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_v3_schemas() {
    let k = Kube::start().await;
    let out = k.ok("node-2", &["explain", "deployment.spec"]);
    assert!(out.contains("GROUP:      apps"), "{out}");
    assert!(out.contains("KIND:       Deployment"), "{out}");
    assert!(out.contains("FIELD: spec <DeploymentSpec>"), "{out}");
    for field in [
        "replicas\t<integer>",
        "template\t<PodTemplateSpec> -required-",
        "selector\t<LabelSelector> -required-",
    ] {
        assert!(out.contains(field), "{field:?} missing from:\n{out}");
    }
    let out = k.ok("node-3", &["explain", "pods.spec.containers"]);
    assert!(out.contains("FIELD: containers <[]Container>"), "{out}");
    for field in [
        "image\t<string>",
        "name\t<string> -required-",
        "ports\t<[]ContainerPort>",
    ] {
        assert!(out.contains(field), "{field:?} missing from:\n{out}");
    }
    let out = k.ok("node-1", &["explain", "svc.spec.ports.targetPort"]);
    assert!(out.contains("FIELD: targetPort <IntOrString>"), "{out}");
    let (ok, _, err) = k.kubectl("node-1", &["explain", "deployment.spec.replicaz"]);
    assert!(!ok && err.contains("field \"replicaz\" does not exist"), "{err}");
}

const GOOD: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
        resources:
          limits: {cpu: 500m, memory: 128Mi}
";

const UNKNOWN_FIELD: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: typo
  namespace: default
spec:
  replicaz: 2
  selector:
    matchLabels: {app: typo}
  template:
    metadata:
      labels: {app: typo}
    spec:
      containers:
      - name: web
        image: nginx:1.27
";

const WRONG_TYPE: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: bad
  namespace: default
data: [1, 2]
";

const APPLIED: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  selector: {app: web}
  ports:
  - port: 80
    targetPort: http
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_validates_manifests_against_the_schemas() {
    let k = Kube::start().await;
    let good = k.manifest("good.yaml", GOOD);
    let out = k.ok("node-1", &["create", "-f", &good]);
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let replicas = k.ok(
        "node-2",
        &["get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"],
    );
    assert_eq!(replicas, "2");

    // The documents advertise `fieldValidation`, so kubectl leaves the check to the server
    // (`fieldValidation=Strict`, kubectl's default) and shows kube-apiserver's message.
    let typo = k.manifest("typo.yaml", UNKNOWN_FIELD);
    let (ok, _, err) = k.kubectl("node-2", &["create", "-f", &typo]);
    assert!(!ok, "an unknown field must be rejected");
    assert!(
        err.contains("Error from server (BadRequest)")
            && err.contains("Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.replicaz\""),
        "{err}"
    );
    let (ok, _, err) = k.kubectl("node-3", &["get", "deployment", "typo"]);
    assert!(
        !ok && err.contains("NotFound"),
        "nothing reached the server: {err}"
    );

    let wrong = k.manifest("wrong.yaml", WRONG_TYPE);
    let (ok, _, err) = k.kubectl("node-3", &["create", "-f", &wrong]);
    assert!(
        !ok && err.contains("json: cannot unmarshal") && err.contains("Go struct field"),
        "{err}"
    );
    // With validation off the unknown field is dropped (with a warning) and the rest is stored.
    let (ok, _, err) = k.kubectl("node-1", &["create", "--validate=false", "-f", &typo]);
    assert!(ok, "{err}");
    let spec = k.json("node-3", &["get", "deployment", "typo"]);
    assert!(spec["spec"].get("replicaz").is_none(), "{spec}");

    let applied = k.manifest("svc.yaml", APPLIED);
    let out = k.ok("node-3", &["apply", "-f", &applied]);
    assert!(out.contains("service/web created"), "{out}");
    let target = k.ok(
        "node-1",
        &["get", "svc", "web", "-o", "jsonpath={.spec.ports[0].targetPort}"],
    );
    assert_eq!(target, "http");
}

const CRONTABS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, listKind: CronTabList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [cronSpec, note]
            properties:
              cronSpec: {type: string}
              replicas: {type: integer, minimum: 1}
              port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
              note: {type: string, nullable: true}
";

/// How long a replica may take to serve a new or deleted definition.
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The Swagger 2.0 document of replica `node` in `accept`: (ETag, body).
async fn v2_doc(k: &Kube, node: usize, accept: &str) -> (String, Vec<u8>) {
    let r = k
        .http
        .get(k.url(node, "/openapi/v2"))
        .header("Accept", accept)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let etag = header(&r, "etag");
    (etag, r.bytes().await.unwrap().to_vec())
}

/// kube-apiserver adds the custom resources to `/openapi/v2` as their definitions come and go,
/// in Swagger 2.0's terms, on every replica and in both encodings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_document_describes_custom_resources_while_they_are_defined() {
    let k = Kube::start().await;
    let (builtin_etag, _) = v2_doc(&k, 0, "application/json").await;
    let crd = k.manifest("crontabs.yaml", CRONTABS);
    k.ok("node-1", &["apply", "-f", &crd]);

    let name = "com.example.stable.v1.CronTab";
    for node in 0..3 {
        let doc: Value = support::eventually(WAIT, || async {
            let (_, body) = v2_doc(&k, node, "application/json").await;
            let doc: Value = serde_json::from_slice(&body).unwrap();
            if doc["definitions"].get(name).is_some() {
                Ok(doc)
            } else {
                Err(format!("replica {node} has no {name} yet"))
            }
        })
        .await;
        let def = &doc["definitions"][name];
        assert_eq!(
            def["x-kubernetes-group-version-kind"],
            json!([{"group": "stable.example.com", "version": "v1", "kind": "CronTab"}])
        );
        let spec = &def["properties"]["spec"];
        // Swagger 2.0 has no anyOf and no nullable: the int-or-string keeps its marker, the
        // nullable field loses its type and is no longer required.
        assert_eq!(
            spec["properties"]["port"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(spec["properties"]["note"], json!({}));
        assert_eq!(spec["required"], json!(["cronSpec"]));
        assert_eq!(
            spec["properties"]["replicas"],
            json!({"type": "integer", "minimum": 1})
        );
        assert_eq!(
            def["properties"]["metadata"]["$ref"],
            "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        );
        assert_eq!(
            doc["definitions"]["com.example.stable.v1.CronTabList"]["properties"]["items"]["items"]["$ref"],
            format!("#/definitions/{name}")
        );
        let item = &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"];
        assert_eq!(
            item["get"]["operationId"], "readStableExampleComV1NamespacedCronTab",
            "{item}"
        );
        assert!(doc["paths"]["/apis/stable.example.com/v1/crontabs"]["get"].is_object());
        // The built-in types are all still there.
        assert!(doc["definitions"]["io.k8s.api.apps.v1.Deployment"].is_object());

        let (etag, proto) = v2_doc(&k, node, V2_PROTOBUF).await;
        assert_ne!(etag, builtin_etag);
        for needle in [name.as_bytes(), b"/apis/stable.example.com/v1/crontabs"] {
            assert!(proto.windows(needle.len()).any(|w| w == needle), "{needle:?}");
        }
    }
    // A CronTab as the schema allows it: an int-or-string as a string, the nullable note null.
    let tab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "t"}, "spec": {"cronSpec": "* * * * */5", "port": "http", "note": null}});
    let (code, body) = k
        .send(
            reqwest::Method::POST,
            1,
            "/apis/stable.example.com/v1/namespaces/default/crontabs",
            Some(&tab),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"].get("note"), Some(&Value::Null), "{body}");

    k.ok("node-3", &["delete", "crd", "crontabs.stable.example.com"]);
    for node in 0..3 {
        support::eventually(WAIT, || async {
            let (etag, body) = v2_doc(&k, node, "application/json").await;
            let doc: Value = serde_json::from_slice(&body).unwrap();
            match doc["definitions"].get(name) {
                None if etag == builtin_etag => Ok(()),
                _ => Err(format!("replica {node} still describes {name} ({etag})")),
            }
        })
        .await;
    }
}
