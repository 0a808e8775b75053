//! The controller that empties a deleted CustomResourceDefinition: it marks it `Terminating`,
//! deletes every object of the resource (their own finalizers and owners honoured), then drops
//! the cleanup finalizer so the definition goes. Like the namespace controller it acts only on the leader and keeps no
//! state, so a new leader continues where the old one stopped.

use std::time::Duration;

use serde_json::{json, Value};

use crate::apiextensions::definition::{self, CLEANUP_FINALIZER};
use crate::apiextensions::{crd_prefix, types_of};
use crate::machinery::errors::ApiResult;
use crate::machinery::meta::meta_str;
use crate::registry::delete::{self, DeleteOptions, Propagation};
use crate::registry::ResourceRequest;
use crate::store::keys;
use crate::store::{Cas, Store};

/// One pass: returns how many definitions still wait for their objects to go.
pub async fn reconcile(store: &Store) -> ApiResult<usize> {
    let (crds, _) = store.list(&crd_prefix(), false).await?;
    let mut pending = 0;
    for crd in crds {
        let finalizers = delete::finalizers_of(&crd.obj);
        if meta_str(&crd.obj, "deletionTimestamp").is_none()
            || !finalizers.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            continue;
        }
        let Some(name) = meta_str(&crd.obj, "name").map(str::to_string) else {
            continue;
        };
        let key = format!("{}{name}", crd_prefix());
        let terminating = crd.obj["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Terminating"));
        if !terminating {
            // Say so first (the next pass goes on with the objects).
            let mut next = crd.obj.clone();
            next["status"] = definition::status(&crd.obj, crd.obj.get("status"));
            store.update(&key, &next, crd.rv).await?;
            pending += 1;
            continue;
        }
        let mut remaining = 0;
        if let Some(rt) = types_of(&crd.obj).into_iter().next() {
            let (objects, _) = store.list(&keys::of_type(&rt), false).await?;
            let background = DeleteOptions {
                propagation: Some(Propagation::Background),
                ..DeleteOptions::default()
            };
            for object in objects {
                remaining += 1;
                let req = ResourceRequest {
                    rt: rt.clone(),
                    namespace: meta_str(&object.obj, "namespace").map(str::to_string),
                    name: meta_str(&object.obj, "name").map(str::to_string),
                    subresource: None,
                    watch_path: false,
                    requester: None,
                };
                if let Err(e) = delete::delete(store, &req, &background).await {
                    if e.code != 404 {
                        tracing::warn!(definition = %name, error = %e.message, "deleting a custom resource");
                    }
                }
            }
        }
        if remaining > 0 {
            pending += 1;
            continue;
        }
        let rest: Vec<String> = finalizers
            .into_iter()
            .filter(|f| f != CLEANUP_FINALIZER)
            .collect();
        let outcome = if rest.is_empty() {
            store.delete(&key, crd.rv).await?
        } else {
            let mut next: Value = crd.obj.clone();
            next["metadata"]["finalizers"] = json!(rest);
            store.update(&key, &next, crd.rv).await?
        };
        match outcome {
            Cas::Done(_) => tracing::info!(definition = %name, "custom resource definition cleaned up"),
            Cas::Failed(_) => pending += 1,
        }
    }
    Ok(pending)
}

/// How often the controller looks for deleted definitions to empty.
const PASS_INTERVAL: Duration = Duration::from_millis(500);

/// Runs the controller while this replica leads.
pub fn spawn(store: Store) {
    super::run_while_leader(store, "crd-finalizer", |store| async move {
        loop {
            if let Err(e) = reconcile(&store).await {
                tracing::warn!(error = %e.message, "custom resource cleanup pass failed");
            }
            tokio::time::sleep(PASS_INTERVAL).await;
        }
    });
}
