//! CRD conversion webhooks on a real three-replica cluster: a CustomResourceDefinition whose
//! versions name a field differently (`v1`, the storage version, has `spec.host`; `v2` has
//! `spec.hostname`) and converts them with `conversion.strategy: Webhook`, reaching a
//! conversion webhook that runs in the test (HTTPS, its own rcgen CA). Objects written through
//! either version read through the other with kubectl and HTTP on every replica, lists go to
//! the webhook in one review, watches through both versions get converted events, and a
//! webhook that is down is kube's error while nothing stored is harmed. Invalid conversion
//! settings are refused with kube's messages.

mod support;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use reqwest::Method;
use serde_json::{json, Value};
use support::kube::Kube;
use support::tls_server::TlsServer;
use support::*;

/// The reviews the webhook received.
type Reviews = Arc<Mutex<Vec<Value>>>;

/// Renames `spec.from` to `spec.to`, if present.
fn rename(obj: &mut Value, from: &str, to: &str) {
    if let Some(spec) = obj["spec"].as_object_mut() {
        if let Some(v) = spec.remove(from) {
            spec.insert(to.to_string(), v);
        }
    }
}

/// The conversion webhook: `spec.host` (v1) ⇄ `spec.hostname` (v2).
async fn convert(State(reviews): State<Reviews>, Json(review): Json<Value>) -> Json<Value> {
    reviews.lock().unwrap().push(review.clone());
    let req = &review["request"];
    let desired = req["desiredAPIVersion"].as_str().unwrap_or_default().to_string();
    let converted: Vec<Value> = req["objects"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut obj| {
            if desired.ends_with("/v2") {
                rename(&mut obj, "host", "hostname");
            } else {
                rename(&mut obj, "hostname", "host");
            }
            obj["apiVersion"] = json!(desired);
            obj
        })
        .collect();
    Json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": req["uid"], "convertedObjects": converted, "result": {"status": "Success"}},
    }))
}

fn schema(field: &str) -> Value {
    json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {field: {"type": "string"}}}}}})
}

/// The definition, converting through `client_config`.
fn definition(client_config: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("host")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("hostname")},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client_config, "conversionReviewVersions": ["v1"]}},
        },
    })
}

fn crontab(version: &str, name: &str, field: &str, value: &str) -> Value {
    json!({
        "apiVersion": format!("stable.example.com/{version}"),
        "kind": "CronTab",
        "metadata": {"name": name, "labels": {"app": "conv"}},
        "spec": {field: value},
    })
}

const V1: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const V2: &str = "/apis/stable.example.com/v2/namespaces/default/crontabs";

/// The `spec`s of the crontabs listed through `version` with kubectl.
fn specs(k: &Kube, node: &str, version: &str) -> Vec<Value> {
    let resource = format!("crontabs.{version}.stable.example.com");
    let list = k.json(node, &["get", &resource, "-o", "json"]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["spec"].clone())
        .collect()
}

/// The events of a watch that ends after `seconds`: (type, apiVersion, spec).
async fn watch(k: &Kube, node: usize, path: &str, rv: &str, seconds: u32) -> Vec<(String, String, Value)> {
    let url = k.url(
        node,
        &format!("{path}?watch=true&resourceVersion={rv}&timeoutSeconds={seconds}"),
    );
    k.text(&url)
        .await
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|e| {
            let o = &e["object"];
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                o["apiVersion"].as_str().unwrap_or_default().to_string(),
                if e["type"] == "ERROR" {
                    o.clone()
                } else {
                    o["spec"].clone()
                },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversion_webhook_converts_reads_writes_lists_and_watches() {
    let reviews: Reviews = Arc::default();
    let app = Router::new()
        .route("/convert", post(convert))
        .with_state(reviews.clone());
    let server = TlsServer::start(app, &[]);
    let k = Kube::start().await;
    let client = json!({"url": server.url("convert"), "caBundle": server.ca_bundle()});

    // Invalid conversion settings are refused with kube's messages.
    let mut invalid = definition(client.clone());
    invalid["spec"]["conversion"]["webhook"] = json!({"conversionReviewVersions": ["v3", "v3"]});
    let file = k.manifest("invalid.json", &invalid.to_string());
    let (ok, _, err) = k.kubectl("node-1", &["create", "-f", &file]);
    assert!(!ok);
    for expected in [
        "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
        r#"spec.conversion.conversionReviewVersions[1]: Invalid value: "v3": duplicate version"#,
        r#"spec.conversion.conversionReviewVersions: Invalid value: []string{"v3", "v3"}: must include at least one of v1, v1beta1"#,
    ] {
        assert!(err.contains(expected), "{expected}\n{err}");
    }
    invalid["spec"]["conversion"] =
        json!({"strategy": "None", "webhook": {"clientConfig": client, "conversionReviewVersions": ["v1"]}});
    let file = k.manifest("none.json", &invalid.to_string());
    let (ok, _, err) = k.kubectl("node-1", &["create", "-f", &file]);
    assert!(!ok);
    assert!(
        err.contains("spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"),
        "{err}"
    );

    let file = k.manifest("crd.json", &definition(client.clone()).to_string());
    k.ok("node-1", &["create", "-f", &file]);
    k.ok(
        "node-2",
        &[
            "wait",
            "--for=condition=Established",
            "crd/crontabs.stable.example.com",
        ],
    );
    let (_, start) = k.send(Method::GET, 0, V1, None).await;
    let start_rv = start["metadata"]["resourceVersion"].as_str().unwrap().to_string();

    // Written through v1 (the storage version): no conversion; read through v2 on every
    // replica, with kubectl and HTTP: converted.
    let file = k.manifest("a.json", &crontab("v1", "a", "host", "a.example.com").to_string());
    k.ok("node-1", &["create", "-f", &file]);
    assert!(reviews.lock().unwrap().is_empty());
    for (i, node) in ["node-1", "node-2", "node-3"].iter().enumerate() {
        let a = k.json(
            node,
            &["get", "crontabs.v2.stable.example.com", "a", "-o", "json"],
        );
        assert_eq!(a["apiVersion"], "stable.example.com/v2", "{a}");
        assert_eq!(a["spec"], json!({"hostname": "a.example.com"}), "{a}");
        let (code, a) = k.send(Method::GET, i, &format!("{V2}/a"), None).await;
        assert_eq!(code, 200, "{a}");
        assert_eq!(a["spec"], json!({"hostname": "a.example.com"}), "{a}");
        assert_eq!(a["metadata"]["labels"], json!({"app": "conv"}), "{a}");
    }
    let review = reviews.lock().unwrap().last().cloned().unwrap();
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["request"]["desiredAPIVersion"], "stable.example.com/v2");
    assert_eq!(
        review["request"]["objects"][0]["spec"],
        json!({"host": "a.example.com"})
    );

    // Written through v2: stored in v1 (converted first), read back through v1.
    let (code, b) = k
        .send(
            Method::POST,
            1,
            V2,
            Some(&crontab("v2", "b", "hostname", "b.example.com")),
        )
        .await;
    assert_eq!(code, 201, "{b}");
    assert_eq!(b["apiVersion"], "stable.example.com/v2", "{b}");
    assert_eq!(b["spec"], json!({"hostname": "b.example.com"}), "{b}");
    let b1 = k.json(
        "node-3",
        &["get", "crontabs.v1.stable.example.com", "b", "-o", "json"],
    );
    assert_eq!(b1["spec"], json!({"host": "b.example.com"}), "{b1}");

    // An update through v2 converts the stored object to v2 and the result back to v1.
    k.ok(
        "node-2",
        &[
            "patch",
            "crontabs.v2.stable.example.com",
            "b",
            "--type=merge",
            "-p",
            r#"{"spec":{"hostname":"b2.example.com"}}"#,
        ],
    );
    let (_, b1) = k.send(Method::GET, 0, &format!("{V1}/b"), None).await;
    assert_eq!(b1["spec"], json!({"host": "b2.example.com"}), "{b1}");

    // Lists through both versions: through v2 every item is converted, in one review.
    let before = reviews.lock().unwrap().len();
    assert_eq!(
        specs(&k, "node-2", "v2"),
        vec![
            json!({"hostname": "a.example.com"}),
            json!({"hostname": "b2.example.com"})
        ]
    );
    let (_, list) = k.send(Method::GET, 2, V2, None).await;
    assert_eq!(
        list["items"][1]["spec"],
        json!({"hostname": "b2.example.com"}),
        "{list}"
    );
    let (_, list) = k.send(Method::GET, 0, V1, None).await;
    assert_eq!(
        list["items"][0]["spec"],
        json!({"host": "a.example.com"}),
        "{list}"
    );
    let lists: Vec<Value> = reviews.lock().unwrap()[before..].to_vec();
    assert!(
        lists
            .iter()
            .all(|r| r["request"]["objects"].as_array().unwrap().len() == 2),
        "{lists:?}"
    );

    // Watches through both versions: every event in the watcher's version.
    let v2_events = watch(&k, 1, V2, &start_rv, 1).await;
    let expected_v2 = vec![
        (
            "ADDED".to_string(),
            "stable.example.com/v2".to_string(),
            json!({"hostname": "a.example.com"}),
        ),
        (
            "ADDED".to_string(),
            "stable.example.com/v2".to_string(),
            json!({"hostname": "b.example.com"}),
        ),
        (
            "MODIFIED".to_string(),
            "stable.example.com/v2".to_string(),
            json!({"hostname": "b2.example.com"}),
        ),
    ];
    assert_eq!(v2_events, expected_v2);
    let v1_events = watch(&k, 2, V1, &start_rv, 1).await;
    assert_eq!(v1_events.len(), 3, "{v1_events:?}");
    assert_eq!(
        v1_events[2],
        (
            "MODIFIED".to_string(),
            "stable.example.com/v1".to_string(),
            json!({"host": "b2.example.com"})
        )
    );

    // The webhook goes down: reads and writes through v2 fail with kube's error, watches
    // through v2 end with it, and nothing is stored or harmed: v1 reads the objects as they
    // were.
    let down = format!("https://127.0.0.1:{}/convert", free_port());
    let mut crd = k.json(
        "node-1",
        &["get", "crd", "crontabs.stable.example.com", "-o", "json"],
    );
    crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = json!(down);
    let file = k.manifest("down.json", &crd.to_string());
    k.ok("node-1", &["replace", "-f", &file]);
    let prefix = format!(
        "conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post \"{down}?timeout=30s\": "
    );
    let (code, status) = k.send(Method::GET, 2, &format!("{V2}/a"), None).await;
    assert_eq!(code, 500, "{status}");
    assert_eq!(status.get("reason"), None, "{status}");
    assert!(
        status["message"].as_str().unwrap().starts_with(&prefix),
        "{status}"
    );
    let (ok, _, err) = k.kubectl("node-3", &["get", "crontabs.v2.stable.example.com"]);
    assert!(!ok);
    assert!(err.contains(&format!("Error from server: {prefix}")), "{err}");
    let (code, status) = k
        .send(
            Method::POST,
            0,
            V2,
            Some(&crontab("v2", "c", "hostname", "c.example.com")),
        )
        .await;
    assert_eq!(code, 500, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("conversion webhook for stable.example.com/v2, Kind=CronTab failed: Post "),
        "{status}"
    );
    let events = watch(&k, 1, V2, &start_rv, 5).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].0, "ERROR");
    assert_eq!(events[0].2["code"], 500, "{events:?}");
    assert!(
        events[0].2["message"].as_str().unwrap().starts_with(&prefix),
        "{events:?}"
    );
    for node in ["node-1", "node-2", "node-3"] {
        assert_eq!(
            specs(&k, node, "v1"),
            vec![
                json!({"host": "a.example.com"}),
                json!({"host": "b2.example.com"})
            ],
            "{node}"
        );
    }
}
