//! The ResourceQuota controller (kube-controller-manager's `resourcequota`): keeps every
//! quota's `status.hard` equal to its `spec.hard` and its `status.used` equal to what the
//! objects of its namespace use.
//!
//! Writes charge quotas themselves, in their own transactions (`admission::resource_quota`);
//! this controller gives back what deletes release, counts what was written before a quota
//! existed, and stops counting pods that finished. A pass reads each quota from the leader's
//! watch cache, counts the objects after it (so the count includes every write that charged
//! the quota up to the revision it was read at), and writes the status only if the quota is
//! still at that revision: a write that charged it meanwhile makes the controller count
//! again, never lose the charge. A pass runs after every change in a namespace that has a
//! quota, and every [`super::RESYNC`] in any case (pods whose grace period ends are noticed
//! then).

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission::resource_quota::{recount, resources};
use crate::machinery::errors::ApiResult;
use crate::machinery::meta::meta_str;
use crate::store::keys::{self, ROOT};
use crate::store::Store;

/// The namespaces that have a quota, as the last pass saw them.
type Watched = Arc<RwLock<BTreeSet<String>>>;

/// The namespace of a namespaced object's key (`/registry/<group>/<plural>/<ns>/<name>`).
fn namespace_of(key: &str) -> Option<&str> {
    let mut parts = key.strip_prefix(ROOT)?.split('/');
    let (_, _, namespace, _) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    Some(namespace)
}

/// The status `quota` must have: `hard` from its spec, `used` from the objects of its
/// namespace; `None` when it has it already (quantities compared by value).
fn wanted_status(store: &Store, quota: &Value, now: i64) -> Option<Value> {
    let hard = resources::parse(&quota["spec"]["hard"]);
    let used = recount(store.cache(), quota, now);
    let values = |r: &resources::Resources| r.iter().map(|(k, v)| (k.clone(), v.value)).collect::<Vec<_>>();
    let status = &quota["status"];
    let same = status["hard"].is_object()
        && status["used"].is_object()
        && values(&resources::parse(&status["hard"])) == values(&hard)
        && values(&resources::parse(&status["used"])) == values(&used);
    (!same).then(|| json!({"hard": resources::to_json(&hard), "used": resources::to_json(&used)}))
}

/// How long a pass waits for more changes before it counts: under a stream of writes into a
/// namespace with a quota, the controller counts a few times a second, not after every write
/// (the writes charge the quota themselves).
const SETTLE: Duration = Duration::from_millis(200);

/// One pass over every quota.
async fn pass(store: &Store, watched: &Watched) -> ApiResult<()> {
    tokio::time::sleep(SETTLE).await;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let prefix = keys::type_prefix("", "resourcequotas");
    let quotas = store
        .cache()
        .list(&prefix, None, None)
        .map(|s| s.objects)
        .unwrap_or_default();
    let namespaces = quotas
        .iter()
        .filter_map(|(key, _)| namespace_of(key).map(str::to_string))
        .collect();
    *watched.write().unwrap_or_else(|p| p.into_inner()) = namespaces;
    for (key, cached) in quotas {
        let mut quota = cached.value();
        let Some(status) = wanted_status(store, &quota, now) else {
            continue;
        };
        quota["status"] = status;
        // A quota charged or changed meanwhile is counted again at the pass its change brings.
        store.update(&key, &quota, cached.rv).await?;
        tracing::debug!(
            quota = meta_str(&quota, "name").unwrap_or(""),
            namespace = meta_str(&quota, "namespace").unwrap_or(""),
            "quota usage recounted"
        );
    }
    Ok(())
}

/// Runs the controller while this replica leads.
pub fn spawn(store: Store) {
    super::run_while_leader(store, "resourcequota", move |store| async move {
        let watched: Watched = Arc::default();
        let quotas = keys::type_prefix("", "resourcequotas");
        let seen = watched.clone();
        let relevant = move |key: &str| {
            key.starts_with(&quotas)
                || namespace_of(key)
                    .is_some_and(|ns| seen.read().unwrap_or_else(|p| p.into_inner()).contains(ns))
        };
        super::run_passes(&store, "resourcequota", relevant, || pass(&store, &watched)).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_namespace_only_when_namespaced() {
        assert_eq!(namespace_of("/registry/core/pods/shop/web"), Some("shop"));
        assert_eq!(namespace_of("/registry/apps/deployments/shop/web"), Some("shop"));
        assert_eq!(namespace_of("/registry/core/namespaces/shop"), None);
    }
}
