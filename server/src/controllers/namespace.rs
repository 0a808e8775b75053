//! Namespaces: the four that exist from the start, and the controller that empties a
//! Terminating namespace and then removes it.
//!
//! The controller runs on every replica but acts only while that replica is the leader. It keeps
//! no state of its own: each pass reads which namespaces carry a deletionTimestamp, so a new
//! leader simply continues where the old one stopped.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::machinery::errors::ApiResult;
use crate::machinery::field_validation::Decoded;
use crate::machinery::meta::meta_str;
use crate::registry::create;
use crate::registry::delete::{self, DeleteOptions, Propagation};
use crate::registry::options::{WriteOptions, SERVER_MANAGER};
use crate::registry::ResourceRequest;
use crate::scheme::{LiveRegistry, Registry};
use crate::store::keys;
use crate::store::{Cas, Store};

/// Namespaces every cluster has.
pub const SYSTEM_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

fn namespace_request(registry: &Registry, name: Option<&str>) -> Option<ResourceRequest> {
    Some(ResourceRequest {
        rt: registry.lookup("", "v1", "namespaces")?.clone(),
        namespace: None,
        name: name.map(str::to_string),
        subresource: None,
        watch_path: false,
        requester: None,
    })
}

/// Creates the system namespaces that do not exist yet (idempotent: a create that finds the
/// namespace already there is fine).
pub async fn ensure_system_namespaces(store: &Store, registry: &Registry) -> ApiResult<()> {
    let Some(req) = namespace_request(registry, None) else {
        return Ok(());
    };
    for ns in SYSTEM_NAMESPACES {
        if store
            .get(&keys::of_object(&req.rt, None, ns), true)
            .await?
            .is_some()
        {
            continue;
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match create::create(
            store,
            &req,
            &WriteOptions::by(SERVER_MANAGER),
            Decoded {
                value: obj,
                duplicates: Vec::new(),
            },
        )
        .await
        {
            Ok(_) => tracing::info!(namespace = ns, "created system namespace"),
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One pass over Terminating namespaces: deletes their contents, and each namespace once it is
/// empty. Returns how many namespaces are still terminating.
pub async fn reconcile(store: &Store, registry: &Registry) -> ApiResult<usize> {
    let Some(ns_req) = namespace_request(registry, None) else {
        return Ok(0);
    };
    // The leader's local state is enough for a level-triggered controller: no read index.
    let (namespaces, _) = store.list(&keys::of_type(&ns_req.rt), false).await?;
    let mut pending = 0;
    for ns in namespaces {
        if meta_str(&ns.obj, "deletionTimestamp").is_none() {
            continue;
        }
        let Some(name) = meta_str(&ns.obj, "name").map(str::to_string) else {
            continue;
        };
        let mut remaining = 0;
        // Contents go as kube-apiserver's namespace controller deletes them: dependents in
        // the background.
        let background = DeleteOptions {
            propagation: Some(Propagation::Background),
            ..DeleteOptions::default()
        };
        for rt in registry.collections().filter(|t| t.namespaced) {
            let req = ResourceRequest {
                rt: rt.clone(),
                namespace: Some(name.clone()),
                name: None,
                subresource: None,
                watch_path: false,
                requester: None,
            };
            let (items, _) = store
                .list(&format!("{}{name}/", keys::of_type(rt)), false)
                .await?;
            for item in items {
                remaining += 1;
                let mut one = req.clone();
                one.name = meta_str(&item.obj, "name").map(str::to_string);
                if let Err(e) = delete::delete(store, &one, &background).await {
                    if e.code != 404 {
                        tracing::warn!(namespace = %name, error = %e.message, "deleting namespace content");
                    }
                }
            }
        }
        if remaining > 0 {
            pending += 1;
            continue;
        }
        // Empty: drop the "kubernetes" finalizer, then the namespace goes once its own
        // metadata finalizers are gone too.
        let mut next = ns.obj.clone();
        let finalizers: Vec<Value> = next["spec"]["finalizers"]
            .as_array()
            .map(|f| f.iter().filter(|x| *x != "kubernetes").cloned().collect())
            .unwrap_or_default();
        next["spec"]["finalizers"] = json!(finalizers);
        let key = keys::of_object(&ns_req.rt, None, &name);
        let metadata_finalizers = next["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let outcome = if metadata_finalizers {
            store.update(&key, &next, ns.rv).await?
        } else {
            store.delete(&key, ns.rv).await?
        };
        match outcome {
            Cas::Done(_) if !metadata_finalizers => tracing::info!(namespace = %name, "namespace deleted"),
            _ => pending += 1,
        }
    }
    Ok(pending)
}

/// How often the controller looks for namespaces to finish deleting.
const PASS_INTERVAL: Duration = Duration::from_millis(500);

/// Runs the namespace controller while this replica leads (the system namespaces are created
/// by [`super::kubernetes_service`], as kube-apiserver's bootstrap controller creates them).
pub fn spawn(store: Store, live: Arc<LiveRegistry>) {
    super::run_while_leader(store, "namespace", move |store| {
        let live = live.clone();
        async move {
            loop {
                let registry = live.current();
                if let Err(e) = reconcile(&store, &registry).await {
                    tracing::warn!(error = %e.message, "namespace controller pass failed");
                }
                tokio::time::sleep(PASS_INTERVAL).await;
            }
        }
    });
}
