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
use kube::Client;
use serde_json::json;
use support::kube::Kube;

fn client(k: &Kube, node: usize) -> Client {
    k.kube_client(node)
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

/// A TCP forwarder standing for a load balancer in front of the replicas: it sends new
/// connections to the current upstream, and `switch` moves it to another replica, cutting
/// the open connections so clients reconnect there.
struct Balancer {
    addr: String,
    upstream: std::sync::Arc<std::sync::Mutex<String>>,
    cut: tokio::sync::watch::Sender<u64>,
}

impl Balancer {
    async fn start(upstream: String) -> Balancer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let upstream = std::sync::Arc::new(std::sync::Mutex::new(upstream));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let target = upstream.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let to = target.lock().unwrap().clone();
                let mut cuts = cuts.clone();
                cuts.mark_unchanged();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&to).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cuts.changed() => {}
                    }
                });
            }
        });
        Balancer { addr, upstream, cut }
    }

    fn switch(&self, upstream: String) {
        *self.upstream.lock().unwrap() = upstream;
        self.cut.send_modify(|n| *n += 1);
    }
}

/// Names and resourceVersions, sorted: what a reflector's store must agree on with the server.
fn summary<'a>(objects: impl IntoIterator<Item = &'a ConfigMap>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = objects
        .into_iter()
        .map(|cm| {
            (
                cm.metadata.name.clone().unwrap_or_default(),
                cm.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

/// kube-rs reflectors (as controllers run them, with the default backoff) keep an exact copy
/// of the collection while writes go through another replica: one lists then watches through
/// a replica that is restarted mid-watch, the other uses a streaming list through a balancer
/// that moves it to another replica mid-stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_reflectors_survive_a_restart_and_a_replica_switch() {
    use kube::runtime::{reflector, WatchStreamExt};
    let mut k = Kube::start().await;
    let writer: Api<ConfigMap> = Api::namespaced(client(&k, 0), "default");
    for i in 0..5 {
        writer
            .create(
                &PostParams::default(),
                &config_map(&format!("r{i}"), &[("n", "0")]),
            )
            .await
            .expect("create");
    }

    let listing = watcher::Config::default().labels("app=kube-rs");
    let (restarted, store) = reflector::store::<ConfigMap>();
    let stream = reflector(
        store,
        watcher::watcher(Api::namespaced(client(&k, 1), "default"), listing.clone()),
    );
    tokio::spawn(stream.default_backoff().for_each(|_| async {}));
    let balancer = Balancer::start(k.cluster.replicas[2].api_addr.clone()).await;
    let via_balancer =
        Client::try_from(k.kube_config_at(&format!("{}://{}", k.cluster.scheme(), balancer.addr))).unwrap();
    let (switched, store) = reflector::store::<ConfigMap>();
    let stream = reflector(
        store,
        watcher::watcher(
            Api::namespaced(via_balancer, "default"),
            listing.streaming_lists(),
        ),
    );
    tokio::spawn(stream.default_backoff().for_each(|_| async {}));
    for reader in [&restarted, &switched] {
        tokio::time::timeout(Duration::from_secs(20), reader.wait_until_ready())
            .await
            .expect("the reflector syncs")
            .expect("a store");
    }

    let converged = |what: &'static str| {
        let (restarted, switched, writer) = (restarted.clone(), switched.clone(), writer.clone());
        async move {
            let mut last = None;
            for _ in 0..200 {
                let truth = summary(
                    &writer
                        .list(&ListParams::default().labels("app=kube-rs"))
                        .await
                        .unwrap()
                        .items,
                );
                let a = summary(restarted.state().iter().map(|o| &**o));
                let b = summary(switched.state().iter().map(|o| &**o));
                if a == truth && b == truth {
                    return truth;
                }
                last = Some((truth, a, b));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            panic!("{what}: the reflectors did not converge: {last:?}");
        }
    };
    let first = converged("after the initial sync").await;
    assert_eq!(first.len(), 5);

    // Replica 2 stops (SIGTERM) while writes continue through replica 1, then comes back; its
    // reflector resumes from its last resourceVersion.
    k.cluster.stop(1);
    let patch = |name: &str, n: &str| {
        let writer = writer.clone();
        let (name, n) = (name.to_string(), n.to_string());
        async move {
            writer
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"n": n}})),
                )
                .await
                .expect("patch");
        }
    };
    patch("r0", "1").await;
    writer
        .delete("r1", &DeleteParams::default())
        .await
        .expect("delete");
    writer
        .create(&PostParams::default(), &config_map("r5", &[("n", "0")]))
        .await
        .expect("create");
    k.cluster.restart(1);
    patch("r2", "1").await;
    let after_restart = converged("after the restart").await;
    assert_eq!(after_restart.len(), 5);

    // The balancer moves the streaming reflector to replica 1 mid-stream, and replica 3 goes
    // away: whatever it receives from now on comes through replica 1.
    balancer.switch(k.cluster.replicas[0].api_addr.clone());
    k.cluster.kill(2);
    patch("r3", "1").await;
    writer
        .delete("r4", &DeleteParams::default())
        .await
        .expect("delete");
    writer
        .create(&PostParams::default(), &config_map("r6", &[("n", "0")]))
        .await
        .expect("create");
    let after_switch = converged("after the switch").await;
    let names: Vec<&str> = after_switch.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["r0", "r2", "r3", "r5", "r6"]);
}
