//! Cascading deletion on a real three-replica cluster: `propagationPolicy` (Orphan, Background,
//! Foreground) through the real `kubectl` and plain HTTP, the garbage collector that runs on
//! the leader, and a cascade that a new leader finishes after the old one is killed.
//!
//! There is no controller-manager: the tests create the replicasets and pods themselves, with
//! `ownerReferences`, as the deployment and replicaset controllers would.

mod support;

use std::time::Duration;

use reqwest::Method as M;
use serde_json::{json, Value};
use support::eventually;
use support::kube::Kube;

const T: Duration = Duration::from_secs(30);

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const REPLICASETS: &str = "/apis/apps/v1/namespaces/default/replicasets";
const PODS: &str = "/api/v1/namespaces/default/pods";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// An owner reference to `owner` (as read back from the server).
fn owner_ref(owner: &Value, block: bool) -> Value {
    json!({
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": true,
        "blockOwnerDeletion": block,
    })
}

fn template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"selector": {"matchLabels": {"app": name}}, "template": template(name)}})
}

fn replicaset(name: &str, app: &str, labels: Value, owners: Vec<Value>) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
           "metadata": {"name": name, "labels": labels, "ownerReferences": owners},
           "spec": {"selector": {"matchLabels": {"app": app}}, "template": template(app)}})
}

fn pod(name: &str, owners: Vec<Value>, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers},
           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn configmap(name: &str, owners: Vec<Value>, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers}})
}

/// POSTs `obj` to `collection` on replica `node` and returns the stored object.
async fn create(k: &Kube, node: usize, collection: &str, obj: Value) -> Value {
    let (code, body) = k.send(M::POST, node, collection, Some(&obj)).await;
    assert_eq!(code, 201, "create in {collection}: {body}");
    body
}

/// A deployment owning a replicaset (blocking) owning `pods` pods (blocking); the names are
/// `<name>`, `<name>-rs` and `<name>-rs-<i>`.
async fn tree(k: &Kube, node: usize, name: &str, pods: usize) -> (Value, Value, Vec<Value>) {
    let d = create(k, node, DEPLOYMENTS, deployment(name)).await;
    let rs = create(
        k,
        node,
        REPLICASETS,
        replicaset(&format!("{name}-rs"), name, json!({}), vec![owner_ref(&d, true)]),
    )
    .await;
    let mut out = Vec::new();
    for i in 0..pods {
        out.push(
            create(
                k,
                node,
                PODS,
                pod(&format!("{name}-rs-{i}"), vec![owner_ref(&rs, true)], &[]),
            )
            .await,
        );
    }
    (d, rs, out)
}

/// GET of `path` on replica `node`: the object, or `None` on 404.
async fn get(k: &Kube, node: usize, path: &str) -> Option<Value> {
    let (code, body) = k.send(M::GET, node, path, None).await;
    match code {
        200 => Some(body),
        404 => None,
        other => panic!("GET {path}: {other} {body}"),
    }
}

/// Waits until `path` is gone.
async fn gone(k: &Kube, node: usize, path: &str) {
    eventually(T, || async move {
        match get(k, node, path).await {
            None => Ok(()),
            Some(o) => Err(format!("{path} still exists: {}", o["metadata"])),
        }
    })
    .await;
}

fn finalizers(obj: &Value) -> Vec<&str> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn owner_uids(obj: &Value) -> Vec<&str> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .map(|r| r.iter().filter_map(|r| r["uid"].as_str()).collect())
        .unwrap_or_default()
}

/// `kubectl delete --cascade=foreground|background|orphan` on deployments owning replicasets
/// owning pods, plus the uid rule and dependents with more than one owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_cascades_foreground_background_and_orphan() {
    let k = Kube::start().await;

    // Foreground: kubectl waits for the deployment, which goes only after its replicaset,
    // which goes only after its pods; a non-blocking dependent is deleted as well.
    let (d, _, _) = tree(&k, 1, "front", 3).await;
    create(
        &k,
        2,
        CONFIGMAPS,
        configmap("front-extra", vec![owner_ref(&d, false)], &[]),
    )
    .await;
    let out = k.ok(
        "node-1",
        &[
            "delete",
            "deployment",
            "front",
            "--cascade=foreground",
            "--timeout=30s",
        ],
    );
    assert!(out.contains("deployment.apps \"front\" deleted"), "{out}");
    assert!(get(&k, 0, &format!("{REPLICASETS}/front-rs")).await.is_none());
    for i in 0..3 {
        assert!(
            get(&k, 2, &format!("{PODS}/front-rs-{i}")).await.is_none(),
            "pod {i} outlived its deployment in a foreground deletion"
        );
    }
    gone(&k, 0, &format!("{CONFIGMAPS}/front-extra")).await;

    // Background: the deployment goes at once, the collector deletes the rest. A dependent
    // with another live owner only loses the reference to the deleted one.
    let (d, _, _) = tree(&k, 2, "back", 2).await;
    let keeper = create(&k, 0, CONFIGMAPS, configmap("keeper", vec![], &[])).await;
    create(
        &k,
        0,
        CONFIGMAPS,
        configmap(
            "shared",
            vec![owner_ref(&d, true), owner_ref(&keeper, false)],
            &[],
        ),
    )
    .await;
    let out = k.ok(
        "node-2",
        &["delete", "deployment", "back", "--cascade=background"],
    );
    assert!(out.contains("deployment.apps \"back\" deleted"), "{out}");
    assert!(get(&k, 1, &format!("{DEPLOYMENTS}/back")).await.is_none());
    gone(&k, 1, &format!("{REPLICASETS}/back-rs")).await;
    for i in 0..2 {
        gone(&k, 1, &format!("{PODS}/back-rs-{i}")).await;
    }
    let keeper_uid = keeper["metadata"]["uid"].as_str().unwrap().to_string();
    let shared = eventually(T, || async {
        let shared = get(&k, 2, &format!("{CONFIGMAPS}/shared"))
            .await
            .ok_or("the shared dependent was deleted although it has a live owner")?;
        if owner_uids(&shared) == [keeper_uid.as_str()] {
            Ok(shared)
        } else {
            Err(format!("owners: {}", shared["metadata"]["ownerReferences"]))
        }
    })
    .await;
    assert_eq!(shared["metadata"]["name"], "shared");

    // Owners are matched by uid: a reference to "keeper" with another uid is dangling, so its
    // dependent is collected while "keeper" still exists.
    let mut impostor = keeper.clone();
    impostor["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    create(
        &k,
        1,
        CONFIGMAPS,
        configmap("stale", vec![owner_ref(&impostor, false)], &[]),
    )
    .await;
    gone(&k, 1, &format!("{CONFIGMAPS}/stale")).await;
    assert!(get(&k, 0, &format!("{CONFIGMAPS}/keeper")).await.is_some());

    // Orphan: the deployment goes after its replicaset lost the reference; the replicaset and
    // its pods stay.
    let (d, rs, _) = tree(&k, 0, "orph", 2).await;
    let out = k.ok("node-3", &["delete", "deployment", "orph", "--cascade=orphan"]);
    assert!(out.contains("deployment.apps \"orph\" deleted"), "{out}");
    gone(&k, 0, &format!("{DEPLOYMENTS}/orph")).await;
    let left = get(&k, 1, &format!("{REPLICASETS}/orph-rs"))
        .await
        .expect("an orphaned replicaset stays");
    assert!(
        left["metadata"].get("ownerReferences").is_none(),
        "{}",
        left["metadata"]
    );
    assert!(left["metadata"].get("deletionTimestamp").is_none());
    let d_uid = d["metadata"]["uid"].as_str().unwrap();
    assert!(!owner_uids(&left).contains(&d_uid));
    // Give the collector time to do something wrong before checking the pods are untouched.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in 0..2 {
        let p = get(&k, 2, &format!("{PODS}/orph-rs-{i}"))
            .await
            .expect("pods of an orphaned replicaset stay");
        assert_eq!(owner_uids(&p), [rs["metadata"]["uid"].as_str().unwrap()]);
    }
}

/// deletecollection with a label selector and a propagation policy, `DeleteOptions` in the
/// body or the query (the body wins), validation, dry-run, and kube-apiserver's per-type
/// default policies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_options_and_deletecollection() {
    let k = Kube::start().await;

    // An unsupported policy is a 422 for the DeleteOptions kind, with kube's message.
    create(&k, 0, CONFIGMAPS, configmap("target", vec![], &[])).await;
    let (code, status) = k
        .send(
            M::DELETE,
            1,
            &format!("{CONFIGMAPS}/target?propagationPolicy=Sideways"),
            None,
        )
        .await;
    assert_eq!((code, &status["reason"]), (422, &json!("Invalid")), "{status}");
    assert_eq!(
        status["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    assert_eq!(status["details"]["kind"], "DeleteOptions");
    assert_eq!(status["details"]["group"], "meta.k8s.io");
    assert_eq!(status["details"]["causes"][0]["field"], "propagationPolicy");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueNotSupported");
    let body = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
    let (code, status) = k
        .send(M::DELETE, 1, &format!("{CONFIGMAPS}/target"), Some(&body))
        .await;
    assert_eq!(code, 422, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("orphanDependents and deletionPropagation cannot be both set"),
        "{status}"
    );
    assert!(get(&k, 2, &format!("{CONFIGMAPS}/target")).await.is_some());

    // The query is read when the body is empty ...
    let child = |owner: &Value, name: &str| configmap(name, vec![owner_ref(owner, true)], &[]);
    let owner = create(
        &k,
        0,
        CONFIGMAPS,
        configmap("q-owner", vec![], &["example.com/hold"]),
    )
    .await;
    create(&k, 0, CONFIGMAPS, child(&owner, "q-child")).await;
    let (code, marked) = k
        .send(
            M::DELETE,
            1,
            &format!("{CONFIGMAPS}/q-owner?propagationPolicy=Foreground"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(finalizers(&marked), ["example.com/hold", "foregroundDeletion"]);
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    gone(&k, 2, &format!("{CONFIGMAPS}/q-child")).await;
    // ... then the owner loses foregroundDeletion and waits only for its own finalizer.
    let held = eventually(T, || async {
        let o = get(&k, 2, &format!("{CONFIGMAPS}/q-owner"))
            .await
            .ok_or("owner vanished")?;
        if finalizers(&o) == ["example.com/hold"] {
            Ok(o)
        } else {
            Err(format!("finalizers {:?}", finalizers(&o)))
        }
    })
    .await;
    assert!(held["metadata"]["deletionTimestamp"].is_string());

    // ... and ignored when there is one: the body's Orphan wins over the query's Foreground.
    let owner = create(&k, 0, CONFIGMAPS, configmap("b-owner", vec![], &[])).await;
    create(&k, 0, CONFIGMAPS, child(&owner, "b-child")).await;
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan",
                      "preconditions": {"uid": owner["metadata"]["uid"]}});
    let (code, marked) = k
        .send(
            M::DELETE,
            1,
            &format!("{CONFIGMAPS}/b-owner?propagationPolicy=Foreground"),
            Some(&body),
        )
        .await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(finalizers(&marked), ["orphan"]);
    gone(&k, 2, &format!("{CONFIGMAPS}/b-owner")).await;
    let orphan = get(&k, 2, &format!("{CONFIGMAPS}/b-child"))
        .await
        .expect("orphaned child stays");
    assert!(orphan["metadata"].get("ownerReferences").is_none(), "{orphan}");

    // The deprecated orphanDependents=false is Background, answered 202 while the object stays
    // for another finalizer.
    let (code, marked) = k
        .send(
            M::DELETE,
            0,
            &format!("{CONFIGMAPS}/q-owner"),
            Some(&json!({"orphanDependents": false})),
        )
        .await;
    assert_eq!(code, 202, "{marked}");
    assert_eq!(finalizers(&marked), ["example.com/hold"]);

    // dryRun=All (query or body) decides everything and changes nothing.
    let owner = create(&k, 0, CONFIGMAPS, configmap("dry-owner", vec![], &[])).await;
    create(&k, 0, CONFIGMAPS, child(&owner, "dry-child")).await;
    let (code, preview) = k
        .send(
            M::DELETE,
            2,
            &format!("{CONFIGMAPS}/dry-owner?dryRun=All&propagationPolicy=Foreground"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{preview}");
    assert_eq!(finalizers(&preview), ["foregroundDeletion"]);
    assert!(preview["metadata"]["deletionTimestamp"].is_string());
    let body = json!({"dryRun": ["All"], "propagationPolicy": "Background"});
    let (code, _) = k
        .send(M::DELETE, 2, &format!("{CONFIGMAPS}/dry-owner"), Some(&body))
        .await;
    assert_eq!(code, 200);
    let (code, status) = k
        .send(M::DELETE, 2, &format!("{CONFIGMAPS}/dry-owner?dryRun=Some"), None)
        .await;
    assert_eq!((code, &status["reason"]), (422, &json!("Invalid")), "{status}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let still = get(&k, 0, &format!("{CONFIGMAPS}/dry-owner"))
        .await
        .expect("dry run deleted the owner");
    assert!(still["metadata"].get("deletionTimestamp").is_none(), "{still}");
    assert!(finalizers(&still).is_empty());
    let child_left = get(&k, 0, &format!("{CONFIGMAPS}/dry-child"))
        .await
        .expect("dry run deleted a dependent");
    assert_eq!(
        owner_uids(&child_left),
        [owner["metadata"]["uid"].as_str().unwrap()]
    );

    // Defaults as kube-apiserver 1.35 has them: batch/v1 Jobs and v1 ReplicationControllers
    // orphan their dependents when the delete names no policy; apps/v1 types do not.
    let job = create(
        &k,
        0,
        "/apis/batch/v1/namespaces/default/jobs",
        json!({"metadata": {"name": "job"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}),
    )
    .await;
    create(&k, 0, PODS, pod("job-pod", vec![owner_ref(&job, true)], &[])).await;
    let (code, marked) = k
        .send(M::DELETE, 1, "/apis/batch/v1/namespaces/default/jobs/job", None)
        .await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(finalizers(&marked), ["orphan"]);
    gone(&k, 1, "/apis/batch/v1/namespaces/default/jobs/job").await;
    let p = get(&k, 2, &format!("{PODS}/job-pod"))
        .await
        .expect("a job's pod is orphaned by default");
    assert!(p["metadata"].get("ownerReferences").is_none(), "{p}");
    let rc = create(
        &k,
        0,
        "/api/v1/namespaces/default/replicationcontrollers",
        json!({"metadata": {"name": "rc"}, "spec": {"selector": {"app": "rc"}, "template": template("rc")}}),
    )
    .await;
    let (code, marked) = k
        .send(
            M::DELETE,
            1,
            "/api/v1/namespaces/default/replicationcontrollers/rc",
            None,
        )
        .await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(finalizers(&marked), ["orphan"], "{}", rc["metadata"]);
    let d = create(&k, 0, DEPLOYMENTS, deployment("plain")).await;
    create(&k, 0, CONFIGMAPS, child(&d, "plain-child")).await;
    let (code, deleted) = k.send(M::DELETE, 1, &format!("{DEPLOYMENTS}/plain"), None).await;
    assert_eq!(code, 200, "{deleted}");
    // An immediate delete answers kube-apiserver's success Status (kind is the resource).
    assert_eq!(
        deleted,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "plain", "group": "apps", "kind": "deployments",
                           "uid": d["metadata"]["uid"]}})
    );
    assert!(get(&k, 2, &format!("{DEPLOYMENTS}/plain")).await.is_none());
    gone(&k, 2, &format!("{CONFIGMAPS}/plain-child")).await;

    // deletecollection with a label selector: Orphan for tier=a keeps the pods of those
    // replicasets; Background (from the query) for tier=b collects them; tier=c is untouched.
    for (name, tier) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c")] {
        let rs = create(
            &k,
            0,
            REPLICASETS,
            replicaset(name, name, json!({"tier": tier}), vec![]),
        )
        .await;
        create(
            &k,
            0,
            PODS,
            pod(&format!("{name}-pod"), vec![owner_ref(&rs, true)], &[]),
        )
        .await;
    }
    let (code, list) = k
        .send(
            M::DELETE,
            1,
            &format!("{REPLICASETS}?labelSelector=tier%3Da"),
            Some(&json!({"propagationPolicy": "Orphan"})),
        )
        .await;
    assert_eq!(code, 200, "{list}");
    // As kube-apiserver does, the answer lists the objects as they were before the delete.
    let listed: Vec<(&str, bool)> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap(),
                i["metadata"].get("deletionTimestamp").is_some(),
            )
        })
        .collect();
    assert_eq!(listed, [("a1", false), ("a2", false)], "{list}");
    let (code, list) = k
        .send(
            M::DELETE,
            2,
            &format!("{REPLICASETS}?labelSelector=tier%3Db&propagationPolicy=Background"),
            None,
        )
        .await;
    assert_eq!(code, 200, "{list}");
    for name in ["a1", "a2", "b1"] {
        gone(&k, 0, &format!("{REPLICASETS}/{name}")).await;
    }
    gone(&k, 0, &format!("{PODS}/b1-pod")).await;
    for name in ["a1", "a2"] {
        let p = get(&k, 0, &format!("{PODS}/{name}-pod"))
            .await
            .expect("orphaned pod stays");
        assert!(p["metadata"].get("ownerReferences").is_none(), "{p}");
    }
    assert!(get(&k, 0, &format!("{REPLICASETS}/c1")).await.is_some());
    let p = get(&k, 0, &format!("{PODS}/c1-pod"))
        .await
        .expect("untouched pod");
    assert_eq!(owner_uids(&p).len(), 1);
}

/// A foreground cascade held by a finalizer on a pod: the old leader starts it, is killed, and
/// the new leader finishes it once the pod is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascade_finishes_after_a_leader_change() {
    let mut k = Kube::start().await;
    let leader = k.cluster.wait_leader(T).await;
    let node = k.cluster.follower_of(leader);
    let (_, _, _) = tree(&k, node, "held", 2).await;
    let rs = get(&k, node, &format!("{REPLICASETS}/held-rs")).await.unwrap();
    create(
        &k,
        node,
        PODS,
        pod("held-rs-hold", vec![owner_ref(&rs, true)], &["example.com/hold"]),
    )
    .await;
    let context = format!("node-{}", k.cluster.replicas[node].id);
    k.ok(
        &context,
        &[
            "delete",
            "deployment",
            "held",
            "--cascade=foreground",
            "--wait=false",
        ],
    );

    // The cascade runs down to the held pod and stops there.
    let hold = format!("{PODS}/held-rs-hold");
    for i in 0..2 {
        gone(&k, node, &format!("{PODS}/held-rs-{i}")).await;
    }
    eventually(T, || async {
        let p = get(&k, node, &hold).await.ok_or("the held pod vanished")?;
        p["metadata"]["deletionTimestamp"]
            .as_str()
            .map(|_| ())
            .ok_or_else(|| format!("held pod not marked: {}", p["metadata"]))
    })
    .await;
    let rs = get(&k, node, &format!("{REPLICASETS}/held-rs"))
        .await
        .expect("the replicaset waits");
    assert_eq!(finalizers(&rs), ["foregroundDeletion"]);
    assert!(rs["metadata"]["deletionTimestamp"].is_string());
    let d = get(&k, node, &format!("{DEPLOYMENTS}/held"))
        .await
        .expect("the deployment waits");
    assert_eq!(finalizers(&d), ["foregroundDeletion"]);

    k.cluster.kill(leader);
    let new_leader = k.cluster.wait_leader(T).await;
    assert_ne!(new_leader, leader);
    let r = k
        .http
        .patch(k.url(node, &hold))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"metadata":{"finalizers":null}}"#)
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    assert_eq!(code, 200, "{text}");
    gone(&k, node, &hold).await;
    gone(&k, node, &format!("{REPLICASETS}/held-rs")).await;
    gone(&k, node, &format!("{DEPLOYMENTS}/held")).await;
}

/// The collector acts on the changes that concern it as they happen, not at its periodic pass
/// (10 s apart at least), and writes that change nothing it decides by leave it idle: a
/// dependent whose owner stands is kept however often it is written; when the owner is deleted
/// (the dependent was created after the collector's last pass, so only the create told it whom
/// it names) the dependent follows within seconds, and so does a dependent created for an
/// owner that never existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_collector_acts_on_the_changes_that_concern_it_at_once() {
    let k = Kube::start().await;
    let prompt = Duration::from_secs(5);
    let owner = create(&k, 0, CONFIGMAPS, configmap("owner", vec![], &[])).await;
    let dependent = format!("{CONFIGMAPS}/dependent");
    create(
        &k,
        1,
        CONFIGMAPS,
        configmap("dependent", vec![owner_ref(&owner, false)], &[]),
    )
    .await;
    for i in 0..5 {
        let r = k
            .http
            .patch(k.url(i % 3, &dependent))
            .header("content-type", "application/merge-patch+json")
            .body(json!({"metadata": {"labels": {"round": i.to_string()}}}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert!(
        get(&k, 2, &dependent).await.is_some(),
        "a dependent of a live owner was collected"
    );

    let started = std::time::Instant::now();
    let (code, body) = k
        .send(
            M::DELETE,
            2,
            &format!("{CONFIGMAPS}/owner"),
            Some(&json!({"propagationPolicy": "Background"})),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    gone(&k, 0, &dependent).await;
    assert!(
        started.elapsed() < prompt,
        "collected after {:?}",
        started.elapsed()
    );

    let ghost = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                       "uid": "00000000-0000-0000-0000-000000000001"});
    let started = std::time::Instant::now();
    create(&k, 1, CONFIGMAPS, configmap("haunted", vec![ghost], &[])).await;
    gone(&k, 1, &format!("{CONFIGMAPS}/haunted")).await;
    assert!(
        started.elapsed() < prompt,
        "collected after {:?}",
        started.elapsed()
    );
}
