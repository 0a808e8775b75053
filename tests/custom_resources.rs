//! Custom resources on a real three-replica cluster, driven by kubectl, kube-rs and plain
//! HTTP: a CustomResourceDefinition created through one replica is served by every replica at
//! once (discovery, `kubectl explain`, short names, categories, printer columns); objects are
//! defaulted, pruned and validated by the definition's schema; merge and JSON patches work and
//! strategic merge patches are refused; the status and scale subresources, server-side apply
//! with conflicts, a second served version, watches, and deleting the definition with its
//! objects.

mod support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{pinned_kind, Scope};
use kube::runtime::watcher;
use kube::Client;
use serde_json::{json, Value};
use support::eventually;
use support::kube::Kube;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab, shortNames: [ct], categories: [all]}
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [cronSpec]
            properties:
              cronSpec: {type: string, pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
              image: {type: string}
              replicas: {type: integer, minimum: 0, maximum: 10, default: 1}
              mode: {type: string, enum: [fast, slow], default: fast}
              args: {type: array, items: {type: string}}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [port]
                items:
                  type: object
                  required: [port]
                  properties: {port: {type: integer}, name: {type: string}}
          status:
            type: object
            properties: {replicas: {type: integer}, selector: {type: string}}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    selectableFields:
    - {jsonPath: .spec.image}
"#;

const NIGHTLY: &str = r#"apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: nightly, namespace: default}
spec: {cronSpec: "0 3 * * *", image: "backup:1", ports: [{port: 80, name: http}]}
"#;

const BAD: &str = r#"apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: bad, namespace: default}
spec: {cronSpec: "nope", replicas: 20, mode: medium, ports: [{port: 1}, {port: 1}]}
"#;

const UNKNOWN: &str = r#"apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: unknown, namespace: default}
spec: {cronSpec: "* * * * *", bogus: 1}
"#;

const ALICE: &str = r#"apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: shared, namespace: default}
spec: {cronSpec: "*/5 * * * *", image: "a:1", args: [one, two], ports: [{port: 80, name: http}]}
"#;

const BOB: &str = r#"apiVersion: stable.example.com/v1beta1
kind: CronTab
metadata: {name: shared, namespace: default}
spec: {image: "b:2", args: [three]}
"#;

fn client(k: &Kube, node: usize) -> Client {
    k.kube_client(node)
}

/// `kubectl patch ct nightly <options> -p <body>` through `context`, which must succeed.
fn patch_nightly(k: &Kube, context: &str, options: &[&str], body: &str) {
    let mut args = vec!["patch", "ct", "nightly"];
    args.extend(options);
    args.extend(["-p", body]);
    k.ok(context, &args);
}

fn managers(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or_default().to_string(),
                        e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_serves_custom_resources_from_their_definitions() {
    let k = Kube::start().await;
    let crd = k.manifest("crd.yaml", CRD);
    assert!(k
        .ok("node-1", &["apply", "-f", &crd])
        .contains("customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"));
    // Established as soon as it is stored, with its names accepted.
    let stored = k.json("node-2", &["get", "crd", "crontabs.stable.example.com"]);
    let conditions = stored["status"]["conditions"].as_array().expect("conditions");
    for kind in ["NamesAccepted", "Established"] {
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True"),
            "{kind}: {conditions:?}"
        );
    }
    assert_eq!(stored["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(stored["status"]["acceptedNames"]["shortNames"], json!(["ct"]));
    assert_eq!(stored["spec"]["names"]["listKind"], "CronTabList");
    assert_eq!(
        stored["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );

    // Right after the definition's creation was acknowledged by node-1, node-3 serves it.
    let nightly = k.manifest("nightly.yaml", NIGHTLY);
    assert!(k
        .ok("node-3", &["apply", "-f", &nightly])
        .contains("crontab.stable.example.com/nightly created"));
    let table = k.ok("node-2", &["get", "ct"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SPEC", "REPLICAS"], "{table}");
    assert!(table.contains("nightly   0 3 * * *   1"), "{table}");
    assert!(
        k.ok("node-2", &["get", "all"])
            .contains("crontab.stable.example.com/nightly"),
        "the `all` category includes it"
    );
    let obj = k.json("node-2", &["get", "crontab", "nightly"]);
    assert_eq!(obj["apiVersion"], "stable.example.com/v1");
    assert_eq!(
        (obj["spec"]["replicas"].clone(), obj["spec"]["mode"].clone()),
        (json!(1), json!("fast")),
        "schema defaults are applied"
    );
    assert_eq!(obj["metadata"]["generation"], 1);
    // Client-side apply of an edit: kubectl diffs and patches custom resources with JSON merge
    // patches against its last-applied annotation.
    let edited = k.manifest("nightly-2.yaml", &NIGHTLY.replace("backup:1", "backup:1b"));
    let (ok, out, err) = k.kubectl("node-2", &["diff", "-f", &edited]);
    assert!(!ok && err.is_empty(), "diff exits 1 on a difference: {err}");
    assert!(
        out.contains("-  image: backup:1") && out.contains("+  image: backup:1b"),
        "{out}"
    );
    assert!(k
        .ok("node-1", &["apply", "-f", &edited])
        .contains("crontab.stable.example.com/nightly configured"));
    let reapplied = k.json("node-3", &["get", "ct", "nightly"]);
    assert_eq!(reapplied["spec"]["image"], "backup:1b");
    assert_eq!(reapplied["metadata"]["generation"], 2);
    // Field selectors over the definition's selectableFields.
    let selected = k.ok(
        "node-2",
        &[
            "get",
            "ct",
            "--field-selector",
            "spec.image=backup:1b",
            "-o",
            "name",
        ],
    );
    assert_eq!(selected.trim(), "crontab.stable.example.com/nightly");
    let none = k.ok(
        "node-3",
        &[
            "get",
            "ct",
            "--field-selector",
            "spec.image!=backup:1b",
            "-o",
            "name",
        ],
    );
    assert_eq!(none.trim(), "");
    let (ok, _, err) = k.kubectl("node-1", &["get", "ct", "--field-selector", "spec.mode=fast"]);
    assert!(
        !ok && err.contains("field label not supported: spec.mode"),
        "{err}"
    );
    assert!(
        reapplied["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .is_some_and(|a| a.contains("backup:1b"))
    );
    let explained = k.ok("node-1", &["explain", "crontabs.spec"]);
    assert!(
        explained.contains("cronSpec\t<string> -required-") && explained.contains("enum: fast, slow"),
        "{explained}"
    );

    // Validation: every problem at once, nothing stored.
    let bad = k.manifest("bad.yaml", BAD);
    let (ok, _, err) = k.kubectl("node-1", &["apply", "-f", &bad]);
    assert!(!ok);
    for problem in [
        "The CronTab \"bad\" is invalid",
        "spec.cronSpec: Invalid value: \"nope\": spec.cronSpec in body should match",
        "spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\"",
        "spec.ports[1]: Duplicate value: {\"port\":1}",
        "spec.replicas: Invalid value: 20: spec.replicas in body should be less than or equal to 10",
    ] {
        assert!(err.contains(problem), "{problem}: {err}");
    }
    assert!(!k.kubectl("node-2", &["get", "ct", "bad"]).0);
    // Unknown fields: refused under kubectl's strict validation, pruned with a warning otherwise.
    let unknown = k.manifest("unknown.yaml", UNKNOWN);
    let (ok, _, err) = k.kubectl("node-1", &["apply", "-f", &unknown]);
    assert!(
        !ok && err.contains("strict decoding error: unknown field \"spec.bogus\""),
        "{err}"
    );
    let (ok, _, err) = k.kubectl("node-1", &["apply", "--validate=warn", "-f", &unknown]);
    assert!(
        ok && err.contains("Warning: unknown field \"spec.bogus\""),
        "{err}"
    );
    let pruned = k.json("node-3", &["get", "ct", "unknown"]);
    assert!(pruned["spec"].get("bogus").is_none(), "{pruned}");

    // Patches: merge and JSON patches apply; a strategic merge patch is refused (415).
    patch_nightly(
        &k,
        "node-2",
        &["--type", "merge"],
        r#"{"spec":{"image":"backup:2"}}"#,
    );
    patch_nightly(
        &k,
        "node-3",
        &["--type", "json"],
        r#"[{"op":"add","path":"/spec/args","value":["--full"]}]"#,
    );
    let (ok, _, err) = k.kubectl(
        "node-1",
        &["patch", "ct", "nightly", "-p", r#"{"spec":{"image":"x"}}"#],
    );
    assert!(
        !ok && err.contains("application/strategic-merge-patch+json is not supported"),
        "{err}"
    );
    let patched = k.json("node-1", &["get", "ct", "nightly"]);
    assert_eq!(patched["spec"]["image"], "backup:2");
    assert_eq!(patched["spec"]["args"], json!(["--full"]));
    assert_eq!(patched["metadata"]["generation"], 4);

    // Subresources: status writes only status (and not the generation); main writes keep it;
    // scale reads and writes the declared paths.
    patch_nightly(
        &k,
        "node-2",
        &["--subresource", "status", "--type", "merge"],
        r#"{"status":{"replicas":2,"selector":"app=cron"},"spec":{"image":"ignored"}}"#,
    );
    patch_nightly(&k, "node-3", &["--type", "merge"], r#"{"status":{"replicas":9}}"#);
    let with_status = k.json("node-1", &["get", "ct", "nightly"]);
    assert_eq!(
        with_status["status"],
        json!({"replicas": 2, "selector": "app=cron"})
    );
    assert_eq!(with_status["spec"]["image"], "backup:2");
    assert_eq!(with_status["metadata"]["generation"], 4);
    assert!(k
        .ok("node-1", &["scale", "ct", "nightly", "--replicas", "4"])
        .contains("scaled"));
    let scale = k.json("node-2", &["get", "ct", "nightly", "--subresource", "scale"]);
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=cron"}));
    let (ok, _, err) = k.kubectl("node-2", &["scale", "ct", "nightly", "--replicas", "11"]);
    assert!(!ok && err.contains("should be less than or equal to 10"), "{err}");

    // Server-side apply, across versions: conflicts name the other manager, force takes over,
    // the kept fields stay, and each manager is recorded with the version it used.
    let alice = k.manifest("alice.yaml", ALICE);
    let bob = k.manifest("bob.yaml", BOB);
    k.ok(
        "node-1",
        &["apply", "--server-side", "--field-manager", "alice", "-f", &alice],
    );
    let (ok, _, err) = k.kubectl(
        "node-2",
        &["apply", "--server-side", "--field-manager", "bob", "-f", &bob],
    );
    assert!(!ok, "bob's apply conflicts");
    assert!(
        err.contains("Apply failed with 2 conflicts: conflicts with \"alice\":\n- ")
            && err.contains(".spec.args")
            && err.contains(".spec.image"),
        "{err}"
    );
    let (ok, _, err) = k.kubectl(
        "node-2",
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "bob",
            "--force-conflicts",
            "-f",
            &bob,
        ],
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: stable.example.com/v1beta1 CronTab is deprecated"),
        "{err}"
    );
    let shared = k.json("node-3", &["get", "ct", "shared", "--show-managed-fields"]);
    assert_eq!(shared["apiVersion"], "stable.example.com/v1");
    assert_eq!(
        shared["spec"]["cronSpec"], "*/5 * * * *",
        "alice still owns cronSpec"
    );
    assert_eq!(shared["spec"]["ports"], json!([{"port": 80, "name": "http"}]));
    assert_eq!(shared["spec"]["args"], json!(["three"]));
    assert_eq!(shared["spec"]["image"], "b:2");
    assert_eq!(
        managers(&shared),
        [
            ("alice".to_string(), "stable.example.com/v1".to_string()),
            ("bob".to_string(), "stable.example.com/v1beta1".to_string())
        ]
    );
    // The other version shows the same objects with its own apiVersion.
    let beta = k.json(
        "node-1",
        &["get", "crontabs.v1beta1.stable.example.com", "shared"],
    );
    assert_eq!(beta["apiVersion"], "stable.example.com/v1beta1");
    assert_eq!(beta["spec"]["image"], "b:2");

    // Deleting the definition deletes its objects, then the definition itself.
    assert!(k
        .ok("node-2", &["delete", "crd", "crontabs.stable.example.com"])
        .contains("deleted"));
    let (ok, _, err) = k.kubectl("node-3", &["get", "crontabs.stable.example.com"]);
    assert!(
        !ok && err.contains("the server doesn't have a resource type"),
        "{err}"
    );
    let (code, _) = k
        .send(
            reqwest::Method::GET,
            0,
            "/apis/stable.example.com/v1/crontabs",
            None,
        )
        .await;
    assert_eq!(code, 404);
    k.ok("node-1", &["apply", "-f", &crd]);
    let relisted = k.json("node-2", &["get", "ct", "-A"]);
    assert_eq!(relisted["items"], json!([]), "no object outlived its definition");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_dynamic_clients_and_watchers_use_custom_resources() {
    let k = Kube::start().await;
    let crd = k.manifest("crd.yaml", CRD);
    k.ok("node-1", &["apply", "-f", &crd]);
    let gvk = kube::api::GroupVersionKind::gvk("stable.example.com", "v1", "CronTab");
    let (resource, caps) = pinned_kind(&client(&k, 1), &gvk).await.expect("discovered");
    assert_eq!(resource.plural, "crontabs");
    assert!(matches!(caps.scope, Scope::Namespaced));
    let writer: Api<DynamicObject> = Api::namespaced_with(client(&k, 0), "default", &resource);
    let watched: Api<DynamicObject> = Api::namespaced_with(client(&k, 2), "default", &resource);
    let mut events = watcher::watcher(watched, watcher::Config::default()).boxed();
    // The initial (empty) list is done before anything is written.
    let first = events.try_next().await.expect("watch starts").expect("an event");
    assert!(matches!(first, watcher::Event::Init), "{first:?}");
    let listed = events.try_next().await.expect("the list").expect("an event");
    assert!(matches!(listed, watcher::Event::InitDone), "{listed:?}");

    let new: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "from-kube-rs"}, "spec": {"cronSpec": "1 * * * *"}}))
    .expect("an object");
    let created = writer
        .create(&PostParams::default(), &new)
        .await
        .expect("created");
    assert_eq!(created.data["spec"]["replicas"], 1, "defaulted");
    let invalid: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "invalid"}, "spec": {"cronSpec": 5}}))
    .expect("an object");
    match writer.create(&PostParams::default(), &invalid).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422);
            assert!(
                s.message.contains("spec.cronSpec in body must be of type string"),
                "{}",
                s.message
            );
        }
        other => panic!("expected a 422, got {other:?}"),
    }
    writer
        .patch(
            "from-kube-rs",
            &PatchParams::apply("kube-rs"),
            &Patch::Apply(json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                "metadata": {"name": "from-kube-rs"}, "spec": {"cronSpec": "1 * * * *", "image": "x:1"}})),
        )
        .await
        .expect("applied");

    // The watcher on node-3 sees the creation and the apply, typed and in order.
    let mut seen: Vec<(String, Option<String>)> = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .expect("an event in time")
            .expect("no watch error")
            .expect("the stream goes on");
        if let watcher::Event::Apply(o) = event {
            assert_eq!(
                o.types.as_ref().map(|t| t.api_version.as_str()),
                Some("stable.example.com/v1")
            );
            seen.push((
                o.metadata.name.clone().unwrap_or_default(),
                o.data["spec"]["image"].as_str().map(str::to_string),
            ));
        }
    }
    assert_eq!(
        seen,
        [
            ("from-kube-rs".to_string(), None),
            ("from-kube-rs".to_string(), Some("x:1".to_string()))
        ]
    );
    let listed = eventually(Duration::from_secs(5), || async {
        let list = Api::<DynamicObject>::all_with(client(&k, 1), &resource)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.len() == 1 {
            Ok(list)
        } else {
            Err(format!("{} items", list.items.len()))
        }
    })
    .await;
    assert_eq!(listed.items[0].data["spec"]["image"], "x:1");
}
