//! The ClusterRole aggregation controller: keeps every ClusterRole that has an
//! `aggregationRule` equal to the union of the rules of the ClusterRoles its selectors match
//! (how `admin`, `edit` and `view` come to hold what `system:aggregate-to-*` and users' own
//! `aggregate-to-*` roles grant), as kube-controller-manager's `clusterrole-aggregation` does.
//!
//! Like the other controllers it acts only on the leader and keeps no state: each pass reads
//! the ClusterRoles from the watch cache and rewrites the aggregated ones whose rules differ,
//! and a pass runs at start and after every change to a ClusterRole. Its own writes trigger one
//! more pass, which finds nothing to do once the roles (aggregates of aggregates included)
//! have converged.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::ClusterRole;
use tokio::sync::broadcast::error::RecvError;

use crate::authorization::rbac::{self, RBAC_GROUP};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::store::cacher::{CachedObject, Published};
use crate::store::{keys, Cas, Store};

/// How long a failed pass waits before the next.
const RETRY: Duration = Duration::from_secs(1);

/// The ClusterRoles that must change: `(key, stored object, the rules it must hold)`.
fn plan(cached: &[(String, Arc<CachedObject>)]) -> Vec<(String, Arc<CachedObject>, ClusterRole)> {
    let decoded: Vec<(String, Arc<CachedObject>, ClusterRole)> = cached
        .iter()
        .filter_map(|(key, obj)| {
            let role = serde_json::from_slice::<ClusterRole>(obj.item_json())
                .inspect_err(|e| tracing::warn!(key, error = %e, "ClusterRole not decodable; not aggregated"))
                .ok()?;
            Some((key.clone(), obj.clone(), role))
        })
        .collect();
    let roles: Vec<ClusterRole> = decoded.iter().map(|(_, _, r)| r.clone()).collect();
    decoded
        .into_iter()
        .filter_map(|(key, obj, mut role)| {
            let rules = rbac::aggregated_rules(&role, &roles)?;
            if role.rules.as_deref().unwrap_or_default() == rules.as_slice() {
                return None;
            }
            role.rules = Some(rules);
            Some((key, obj, role))
        })
        .collect()
}

/// One pass over the cached ClusterRoles; returns how many it rewrote. A role that changed
/// meanwhile is left to the pass its change triggers.
pub async fn reconcile(store: &Store) -> ApiResult<usize> {
    let prefix = keys::type_prefix(RBAC_GROUP, "clusterroles");
    let Some(snapshot) = store.cache().list(&prefix, None, None) else {
        return Ok(0);
    };
    let mut written = 0;
    for (key, stored, role) in plan(&snapshot.objects) {
        let mut next = stored.value();
        next["rules"] = serde_json::to_value(&role.rules).map_err(|e| ApiError::internal(e.to_string()))?;
        if let Cas::Done(_) = store.update(&key, &next, stored.rv).await? {
            tracing::info!(
                clusterrole = role.metadata.name.as_deref().unwrap_or_default(),
                "aggregated"
            );
            written += 1;
        }
    }
    Ok(written)
}

/// Runs passes: one at once, then one after every batch of changes that touches a
/// ClusterRole (or after the cache was reloaded, or this controller fell behind).
async fn run(store: Store) {
    let prefix = keys::type_prefix(RBAC_GROUP, "clusterroles");
    let mut live = store.cache().list_and_watch(&prefix).1;
    loop {
        if let Err(e) = reconcile(&store).await {
            tracing::warn!(error = %e.message, "ClusterRole aggregation pass failed");
            tokio::time::sleep(RETRY).await;
            continue;
        }
        loop {
            match live.recv().await {
                Ok(batch) => match &*batch {
                    Published::Changes { events, .. }
                        if !events.iter().any(|e| e.key.starts_with(&prefix)) => {}
                    _ => break,
                },
                Err(RecvError::Lagged(_)) => break,
                Err(RecvError::Closed) => return,
            }
        }
    }
}

/// Runs the aggregation controller while this replica leads.
pub fn spawn(store: Store) {
    super::run_while_leader(store, "clusterrole-aggregation", run);
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn cached(obj: Value) -> (String, Arc<CachedObject>) {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = keys::object(RBAC_GROUP, "clusterroles", None, &name);
        let obj = CachedObject::new(&key, obj, 7);
        (key, obj)
    }

    #[test]
    fn a_pass_plans_only_the_aggregated_roles_that_differ() {
        let pods = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
        let objects = vec![
            cached(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "agg"},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-agg": "true"}}]}}),
            ),
            cached(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "done"}, "rules": pods,
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-done": "true"}}]}}),
            ),
            cached(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "part", "labels": {"to-agg": "true", "to-done": "true"}},
                "rules": pods}),
            ),
            cached(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "broken"}, "rules": "not a list"}),
            ),
        ];
        let planned = plan(&objects);
        assert_eq!(planned.len(), 1);
        let (key, stored, role) = &planned[0];
        assert_eq!(key, &keys::object(RBAC_GROUP, "clusterroles", None, "agg"));
        assert_eq!(stored.rv, 7);
        assert_eq!(
            serde_json::to_value(&role.rules).expect("serializable"),
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
        );
    }
}
