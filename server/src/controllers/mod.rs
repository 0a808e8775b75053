//! Controllers: leader-only reconcilers over the generic store, the part of
//! kube-controller-manager that an API server needs to behave like a cluster — namespace
//! deletion, garbage collection of dependents, removal of a deleted definition's objects,
//! ClusterRole aggregation, the `default` ServiceAccount and `kube-root-ca.crt` ConfigMap of
//! every namespace (one mechanism for both: `per_namespace`), the legacy token Secrets of
//! ServiceAccounts (`service_account_token`), the usage of ResourceQuotas (`resource_quota`),
//! and what kube-apiserver itself keeps: the
//! `default/kubernetes` Service and its endpoints, pointing at the replicas
//! (`kubernetes_service`), the local APIServices of the served group-versions
//! (`local_apiservices`), the availability of aggregated ones (`apiservice_availability`) and
//! the `extension-apiserver-authentication` ConfigMap aggregated servers trust callers by
//! (`extension_auth`), and the default priority and fairness configuration with its
//! FlowSchemas' `Dangling` conditions (`flowcontrol_configuration`).
//!
//! Each runs through [`run_while_leader`], written once: its work starts when this replica
//! becomes the leader (told by the Raft node's leader changes, not by polling) and is dropped
//! the moment it stops leading. The controllers keep no state of their own, so a new leader
//! continues where the old one stopped.

pub mod apiservice_availability;
pub mod clusterrole_aggregation;
pub mod crd_finalizer;
pub mod extension_auth;
pub mod flowcontrol_configuration;
pub mod garbage_collector;
pub mod kubernetes_service;
pub mod local_apiservices;
pub mod namespace;
pub mod per_namespace;
pub mod resource_quota;
pub mod root_ca_publisher;
pub mod service_account;
pub mod service_account_token;

use std::future::Future;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use serde_json::Value;

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::Decoded;
use crate::registry::options::WriteOptions;
use crate::registry::{create, update, ResourceRequest};
use crate::scheme::Registry;
use crate::store::cacher::Published;
use crate::store::{keys, Store};

/// How long a level-triggered controller waits for a relevant change before it looks again
/// anyway.
pub const RESYNC: Duration = Duration::from_secs(30);
/// The first wait after a failed pass (doubled while passes keep failing, up to [`RESYNC`]).
pub const RETRY: Duration = Duration::from_secs(1);

/// Whose writes the objects kube-apiserver itself keeps are, in `managedFields`.
const FIELD_MANAGER: &str = "kube-apiserver";

/// A controller's request for a core-group resource in `namespace` (one object when `name`
/// is given, the collection otherwise), with no requester: controllers act as the system.
pub fn core_request(
    registry: &Registry,
    plural: &str,
    namespace: &str,
    name: Option<&str>,
) -> ApiResult<ResourceRequest> {
    request(registry, ("", plural), Some(namespace), name)
}

/// [`core_request`] for a `v1` resource of any group (`namespace`: none for a cluster-scoped
/// one).
pub fn request(
    registry: &Registry,
    (group, plural): (&str, &str),
    namespace: Option<&str>,
    name: Option<&str>,
) -> ApiResult<ResourceRequest> {
    let rt = registry
        .lookup(group, "v1", plural)
        .ok_or_else(|| ApiError::internal(format!("the type table has no {plural}")))?;
    Ok(ResourceRequest {
        rt: rt.clone(),
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: None,
        watch_path: false,
        requester: None,
    })
}

/// Creates the object `desired` (written as `kube-apiserver`) when absent; when present and its `reconciled` fields (top-level fields,
/// or `labels` for the metadata's) differ from `desired`'s, updates them. A write that lost a race is no failure: the
/// change that won brings another pass.
pub async fn ensure(
    store: &Store,
    registry: &Registry,
    (group, plural): (&str, &str),
    desired: Value,
    reconciled: &[&str],
) -> ApiResult<()> {
    let opts = WriteOptions::by(FIELD_MANAGER);
    let namespace = desired["metadata"]["namespace"].as_str();
    let name = desired["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let key = keys::object(group, plural, namespace, &name);
    let current = store
        .cache()
        .get(&key)
        .map_err(|why| ApiError::internal(format!("{key} is unreadable: {why}")))?
        .map(|c| c.value());
    let outcome = match current {
        None => {
            let req = request(registry, (group, plural), namespace, None)?;
            let body = Decoded {
                value: desired,
                duplicates: Vec::new(),
            };
            create::create(store, &req, &opts, body).await.map(drop)
        }
        Some(current) => {
            let labels_differ = reconciled.contains(&"labels")
                && current["metadata"]["labels"] != desired["metadata"]["labels"];
            let differs = labels_differ
                || reconciled
                    .iter()
                    .filter(|f| **f != "labels")
                    .any(|f| current[*f] != desired[*f]);
            if !differs {
                return Ok(());
            }
            let mut next = current.clone();
            for f in reconciled {
                if *f == "labels" {
                    next["metadata"]["labels"] = desired["metadata"]["labels"].clone();
                } else if desired[*f].is_null() {
                    if let Some(o) = next.as_object_mut() {
                        o.remove(*f);
                    }
                } else {
                    next[*f] = desired[*f].clone();
                }
            }
            let req = request(registry, (group, plural), namespace, Some(&name))?;
            let body = Decoded {
                value: next,
                duplicates: Vec::new(),
            };
            update::update(store, &req, &opts, body).await.map(drop)
        }
    };
    match outcome {
        Ok(()) => {
            tracing::info!(resource = plural, name, "{plural} {name} written");
            Ok(())
        }
        Err(e) if matches!(e.code, 404 | 409) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A write that lost a race (or met an object deleted meanwhile) is no failure: the change
/// that won brings another pass.
pub fn settled(outcome: ApiResult<()>) -> ApiResult<()> {
    match outcome {
        Err(e) if matches!(e.code, 404 | 409) => Ok(()),
        other => other,
    }
}

/// The objects of `group`'s cluster-scoped `plural` in the watch cache, by name.
pub fn stored_by_name(
    store: &Store,
    group: &str,
    plural: &str,
) -> ApiResult<std::collections::BTreeMap<String, Value>> {
    Ok(store
        .cache()
        .list(&keys::type_prefix(group, plural), None, None)
        .ok_or_else(|| ApiError::internal("the watch cache moved on".to_string()))?
        .objects
        .into_iter()
        .map(|(_, o)| o.value())
        .filter_map(|o| Some((o["metadata"]["name"].as_str()?.to_string(), o)))
        .collect())
}

/// The loop of a level-triggered controller: runs `pass` at once, then after every batch of
/// the watch cache's changes that touches a key `relevant` picks (or after the cache was
/// reloaded, or the loop fell behind), and every [`RESYNC`] in any case. A failed pass is
/// retried after [`RETRY`], later and later while it keeps failing — never at once. Returns
/// when the replica stops.
pub async fn run_passes<F, Fut>(
    store: &Store,
    controller: &'static str,
    relevant: impl Fn(&str) -> bool,
    pass: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ApiResult<()>>,
{
    run_passes_also_on(store, controller, relevant, futures::stream::pending(), pass).await;
}

/// [`run_passes`], with a pass also after each item of `wake`: what the controller follows
/// besides the store (the cluster's members, say).
pub async fn run_passes_also_on<F, Fut>(
    store: &Store,
    controller: &'static str,
    relevant: impl Fn(&str) -> bool,
    wake: impl Stream<Item = ()>,
    mut pass: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ApiResult<()>>,
{
    // Subscribing through an empty prefix copies nothing: only the changes are wanted.
    let mut changes = store.cache().list_and_watch("\u{0}").1;
    let mut backoff = RETRY;
    tokio::pin!(wake);
    loop {
        if let Err(e) = pass().await {
            tracing::warn!(controller, error = %e.message, retry = ?backoff, "pass failed");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(RESYNC);
            continue;
        }
        backoff = RETRY;
        let resync = tokio::time::sleep(RESYNC);
        tokio::pin!(resync);
        loop {
            tokio::select! {
                () = &mut resync => break,
                Some(()) = wake.next() => break,
                batch = changes.recv() => match batch {
                    Ok(batch) => match &*batch {
                        Published::Changes { events, .. } if !events.iter().any(|e| relevant(&e.key)) => {}
                        _ => break,
                    },
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                },
            }
        }
    }
}

/// Runs `work` while this replica leads, for as long as the node lives: started when it
/// becomes the leader (at once if it is), cancelled when it stops leading, started afresh when
/// it leads again. `work` is a controller's loop and is not expected to return; if it does,
/// it is started again only at the next term this replica leads.
pub fn run_while_leader<F, Fut>(store: Store, controller: &'static str, mut work: F)
where
    F: FnMut(Store) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let me = store.replica_id();
        let mut leader = store.leader_changes();
        loop {
            if !wait_until(&mut leader, |l| l == Some(me)).await {
                return;
            }
            tracing::debug!(controller, "this replica leads: controller started");
            let mut lost = leader.clone();
            let node_alive = tokio::select! {
                () = work(store.clone()) => wait_until(&mut lost, |l| l != Some(me)).await,
                alive = wait_until(&mut lost, |l| l != Some(me)) => alive,
            };
            if !node_alive {
                return;
            }
            tracing::debug!(controller, "this replica no longer leads: controller stopped");
        }
    });
}

/// Waits until the leader id satisfies `cond`; `false` when the node has stopped.
async fn wait_until(leader: &mut watch::Receiver<Option<u64>>, cond: impl Fn(Option<u64>) -> bool) -> bool {
    leader.wait_for(|l| cond(*l)).await.is_ok()
}
