//! The kube-rs client (kube 5 with k8s-openapi, as Rust controllers use it) against a real
//! three-replica cluster: typed CRUD, server-side apply, strategic merge patch, metadata-only
//! lists, and the runtime watcher following writes made through other replicas.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config};
use serde_json::json;
use support::kube::Kube;

fn client(k: &Kube, node: usize) -> Client {
    let url = k.url(node, "").parse().expect("a URL");
    Client::try_from(Config::new(url)).expect("a client")
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([("app".to_string(), "kube-rs".to_string())])),
            ..Default::default()
        },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_crud_apply_and_watch_across_replicas() {
    let k = Kube::start().await;
    let writer: Api<ConfigMap> = Api::namespaced(client(&k, 0), "default");
    let reader: Api<ConfigMap> = Api::namespaced(client(&k, 1), "default");
    let watched: Api<ConfigMap> = Api::namespaced(client(&k, 2), "default");

    // The watcher (list, then watch) runs against the third replica.
    let mut events = watcher::watcher(watched, watcher::Config::default().labels("app=kube-rs")).boxed();
    let mut seen_init_done = false;
    while !seen_init_done {
        match tokio::time::timeout(Duration::from_secs(20), events.try_next()).await {
            Ok(Ok(Some(Event::InitDone))) => seen_init_done = true,
            Ok(Ok(Some(_))) => {}
            other => panic!("the watcher did not start: {other:?}"),
        }
    }

    let created = writer
        .create(&PostParams::default(), &config_map("one", &[("a", "1")]))
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
    let got = reader.get("one").await.expect("get from another replica");
    assert_eq!(
        got.data.as_ref().and_then(|d| d.get("a")).map(String::as_str),
        Some("1")
    );

    // Strategic merge patch and server-side apply.
    reader
        .patch(
            "one",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"b": "2"}})),
        )
        .await
        .expect("strategic merge patch");
    let applied = writer
        .patch(
            "two",
            &PatchParams::apply("kube-rs-test"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "two", "labels": {"app": "kube-rs"}}, "data": {"x": "y"}})),
        )
        .await
        .expect("server-side apply creates");
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["kube-rs-test"]);
    let conflict = reader
        .patch(
            "two",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "two"}, "data": {"x": "z"}})),
        )
        .await
        .expect_err("a conflict");
    match conflict {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}"),
        other => panic!("expected a 409, got {other:?}"),
    }

    // Lists, with selectors and metadata only.
    let list = reader
        .list(&ListParams::default().labels("app=kube-rs"))
        .await
        .expect("list");
    let mut names: Vec<String> = list
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["one", "two"]);
    let meta = reader
        .list_metadata(&ListParams::default())
        .await
        .expect("metadata list");
    assert!(meta
        .items
        .iter()
        .any(|m| m.metadata.name.as_deref() == Some("two")));

    // The watcher saw both objects arrive and the patch, in order, on another replica.
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match tokio::time::timeout(Duration::from_secs(20), events.try_next()).await {
            Ok(Ok(Some(Event::Apply(cm)))) => seen.push((
                cm.metadata.name.clone().unwrap_or_default(),
                cm.data.unwrap_or_default().len(),
            )),
            Ok(Ok(Some(_))) => {}
            other => panic!("watch ended early after {seen:?}: {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("one".to_string(), 1),
            ("one".to_string(), 2),
            ("two".to_string(), 1)
        ]
    );

    // Typed errors and deletion.
    let missing = reader.get("nope").await.expect_err("404");
    assert!(
        matches!(missing, kube::Error::Api(ref s) if s.code == 404),
        "{missing:?}"
    );
    writer
        .delete("one", &DeleteParams::default())
        .await
        .expect("delete");
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.try_next()).await {
            Ok(Ok(Some(Event::Delete(cm)))) => {
                assert_eq!(cm.metadata.name.as_deref(), Some("one"));
                break;
            }
            Ok(Ok(Some(_))) => {}
            other => panic!("no delete event: {other:?}"),
        }
    }

    // A typed Deployment round-trips with the server's defaults filled in.
    let deployments: Api<Deployment> = Api::namespaced(client(&k, 1), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}
    }))
    .expect("a deployment");
    let created = deployments
        .create(&PostParams::default(), &d)
        .await
        .expect("create deployment");
    let spec = created.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
}
