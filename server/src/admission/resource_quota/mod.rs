//! ResourceQuota: what a write would use of the quotas of its namespace, checked as
//! kube-apiserver's `ResourceQuota` admission plugin checks it, and charged **in the write's
//! own Raft transaction**.
//!
//! kube-apiserver charges a quota (an `UpdateStatus` of it) before it stores the object, and
//! leaves kube-controller-manager to correct what that gets wrong. Here the charge is part of
//! the write: the object and the quotas' new `status.used` are stored in one transaction, or
//! neither is, so two replicas admitting the last unit of a quota at once cannot both succeed.
//!
//! The charge is a merge ([`charge`]): the transaction carries what the object adds to each
//! quota, and the state machine adds it to the quota as the log has it when the write is
//! applied, refusing the whole write if that would go over a hard limit. Charges through any
//! replicas therefore never conflict with one another, and creates into a namespace with a
//! quota go as fast as any writes (`kuberaft-bench admission`). A refused charge is planned
//! again over the fresh quota, which then gives kube's `exceeded quota` message.
//!
//! Where the encryption configuration encrypts ResourceQuotas, the state machine (which holds
//! no keys) cannot compute them, and the charge is the quota's whole new value instead,
//! guarded by the revision its usage was read at ([`Guarded`]): a concurrent charge outdates
//! it and it is planned again. On one replica those charges to one namespace take turns (a
//! lock held from the plan to the end of the write), so that only charges through different
//! replicas collide.
//!
//! The check runs last, after the validating plugins and webhooks, where kube's order puts
//! it, because it is part of the write. Deletes release nothing here: the quota controller
//! ([`recount`], run by `controllers::resource_quota`) works out `status.used` from the
//! objects themselves, as kube's controller does, and is the only writer of `status.hard`.

pub mod charge;
pub mod resources;
pub mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use self::resources::{Amount, Resources};
use super::Attributes;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::store::cacher::WatchCache;
use crate::store::{keys, Alongside, Guarded, Plan, Store};

/// The quotas of a write's namespace that its object is charged to, planned for each attempt
/// of the write (see the module's documentation).
pub struct Charge<'a> {
    attrs: &'a Attributes<'a>,
}

impl<'a> Charge<'a> {
    /// The charge of the write `attrs` describe.
    pub fn new(attrs: &'a Attributes<'a>) -> Self {
        Charge { attrs }
    }
}

impl Alongside for Charge<'_> {
    fn plan<'b>(&'b self, store: &'b Store, obj: &'b Value) -> BoxFuture<'b, ApiResult<Plan>> {
        Box::pin(async move {
            let a = self.attrs;
            let Some(namespace) = a.namespace.filter(|_| a.namespaced) else {
                return Ok(Plan::default());
            };
            if !usage::handles(a.group, a.resource, a.operation, a.subresource)
                || !has_quotas(store.cache(), namespace)
            {
                return Ok(Plan::default());
            }
            if !store.encrypts(&quota_prefix(namespace)) {
                let quotas = quotas_in(store.cache(), namespace);
                let charged = check(a, &quotas, obj, now())?;
                return Ok(Plan {
                    merged: charged.iter().map(Charged::merged).collect(),
                    ..Plan::default()
                });
            }
            // This replica's guarded charges to one namespace's quotas take turns: each plans
            // over the quotas as the previous one left them, instead of all planning over the
            // same revision and all but one failing their condition.
            let hold = namespace_lock(namespace).lock_owned().await;
            let last = *hold;
            if store.cache().wait_for(last, CACHE_WAIT).await.is_err() {
                tracing::debug!(
                    namespace,
                    revision = last,
                    "quota planned before the cache caught up"
                );
            }
            let quotas = quotas_in(store.cache(), namespace);
            let charged = check(a, &quotas, obj, now())?;
            let guarded: Vec<Guarded> = charged.iter().map(Charged::guarded).collect();
            let hold = (!guarded.is_empty()).then_some(hold);
            Ok(Plan {
                guarded,
                hold,
                ..Plan::default()
            })
        })
    }
}

/// How long a guarded charge waits for this replica's cache to hold the previous one.
const CACHE_WAIT: Duration = Duration::from_secs(1);

/// The lock of `namespace`'s guarded quota charges on this replica (idle locks are dropped
/// when a namespace's lock is first made).
fn namespace_lock(namespace: &str) -> Arc<tokio::sync::Mutex<i64>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<i64>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(lock) = locks.get(namespace) {
        return lock.clone();
    }
    locks.retain(|_, lock| Arc::strong_count(lock) > 1);
    let lock = Arc::new(tokio::sync::Mutex::new(0));
    locks.insert(namespace.to_string(), lock.clone());
    lock
}

/// The current time, in unix seconds.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A quota as read from the cache: its key, mod revision and object.
#[derive(Debug)]
struct Quota {
    key: String,
    rev: i64,
    obj: Value,
}

impl Quota {
    fn name(&self) -> &str {
        meta_str(&self.obj, "name").unwrap_or("")
    }
}

/// Where the quotas of `namespace` are stored.
fn quota_prefix(namespace: &str) -> String {
    format!("{}{namespace}/", keys::type_prefix("", "resourcequotas"))
}

/// Whether `namespace` has a quota in this replica's cache (without decoding any).
fn has_quotas(cache: &WatchCache, namespace: &str) -> bool {
    cache
        .list(&quota_prefix(namespace), None, None)
        .is_some_and(|s| !s.objects.is_empty())
}

/// The quotas of `namespace` in this replica's cache.
fn quotas_in(cache: &WatchCache, namespace: &str) -> Vec<Quota> {
    let prefix = quota_prefix(namespace);
    cache
        .list(&prefix, None, None)
        .map(|s| s.objects)
        .unwrap_or_default()
        .into_iter()
        .map(|(key, cached)| Quota {
            key,
            rev: cached.rv,
            obj: cached.value(),
        })
        .collect()
}

/// The refusal of the write, in kube's words for admission's refusals.
fn forbidden(a: &Attributes<'_>, obj: &Value, why: &str) -> ApiError {
    let name = meta_str(obj, "name").unwrap_or(a.name);
    ApiError::forbidden(a.group, a.resource, name, why)
}

/// One quota's charge: what the write adds to it, and its usage with that added.
#[derive(Debug)]
struct Charged<'q> {
    quota: &'q Quota,
    requested: Resources,
    used_after: Resources,
    enforced: bool,
}

impl Charged<'_> {
    /// The charge as a merge of what the write adds.
    fn merged(&self) -> crate::store::Merged {
        charge::merged(
            &self.quota.key,
            &charge::Operand {
                uid: meta_str(&self.quota.obj, "uid").unwrap_or("").to_string(),
                requested: resources::to_json(&self.requested),
                enforced: self.enforced,
            },
        )
    }

    /// The charge as the quota's new value, guarded by the revision it was read at.
    fn guarded(&self) -> Guarded {
        let mut value = self.quota.obj.clone();
        value["status"]["used"] = resources::to_json(&self.used_after);
        Guarded {
            key: self.quota.key.clone(),
            mod_revision: self.quota.rev,
            value,
        }
    }
}

/// kube's `CheckRequest`: the quotas `obj` counts against, each with what the write adds to
/// it; a `403` when one would go over its hard limit, when a container does not state a
/// resource a quota limits, or when a quota's usage is not known yet.
fn check<'q>(a: &Attributes<'_>, quotas: &'q [Quota], obj: &Value, now: i64) -> ApiResult<Vec<Charged<'q>>> {
    let (group, plural) = (a.group, a.resource);
    let mut pertinent = Vec::new();
    for q in quotas {
        let hard = resources::parse(&q.obj["status"]["hard"]);
        let restricted: Vec<&str> = hard
            .keys()
            .map(String::as_str)
            .filter(|n| usage::tracks(group, plural, n))
            .collect();
        if restricted.is_empty() || !usage::in_scope(&q.obj, group, plural, obj) {
            continue;
        }
        if let Some(why) = usage::missing_requirements(group, plural, &restricted, obj) {
            return Err(forbidden(a, obj, &format!("failed quota: {}: {why}", q.name())));
        }
        let used = resources::parse(&q.obj["status"]["used"]);
        if restricted.iter().any(|n| !used.contains_key(*n)) {
            let mut names = restricted.clone();
            names.sort_unstable();
            return Err(forbidden(
                a,
                obj,
                &format!(
                    "status unknown for quota: {}, resources: {}",
                    q.name(),
                    names.join(",")
                ),
            ));
        }
        pertinent.push((q, hard, used));
    }
    if pertinent.is_empty() {
        return Ok(Vec::new());
    }
    let input = usage::usage(group, plural, obj, now);
    let negative: Vec<&str> = input
        .iter()
        .filter(|(_, q)| q.value < 0)
        .map(|(n, _)| n.as_str())
        .collect();
    if !negative.is_empty() {
        return Err(forbidden(
            a,
            obj,
            &format!("quota usage is negative for resource(s): {}", negative.join(",")),
        ));
    }
    let old_usage = a.old.map(|old| (old, usage::usage(group, plural, old, now)));
    let mut charged = Vec::new();
    for (q, hard, used) in pertinent {
        // An update is charged what it adds to a quota that counted the old object too.
        let delta = match &old_usage {
            Some((old, before)) if usage::in_scope(&q.obj, group, plural, old) => {
                resources::subtract_non_negative(&input, before)
            }
            _ => input.clone(),
        };
        let requested: Resources = resources::mask(&delta, hard.keys())
            .into_iter()
            .filter(|(_, q)| q.value != 0)
            .collect();
        if requested.is_empty() {
            continue;
        }
        let mut new_used = used.clone();
        resources::add(&mut new_used, &requested);
        let enforced = a.subresource != Some("status");
        if enforced {
            let exceeded: Vec<String> = requested
                .keys()
                .filter(|n| {
                    let total = new_used.get(*n).map_or(0, |u| u.value);
                    hard.get(*n).is_some_and(|h| total > h.value)
                })
                .cloned()
                .collect();
            if !exceeded.is_empty() {
                return Err(forbidden(
                    a,
                    obj,
                    &format!(
                        "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                        q.name(),
                        resources::pretty(&resources::mask(&requested, &exceeded)),
                        resources::pretty(&resources::mask(&used, &exceeded)),
                        resources::pretty(&resources::mask(&hard, &exceeded)),
                    ),
                ));
            }
        }
        charged.push(Charged {
            quota: q,
            requested,
            used_after: new_used,
            enforced,
        });
    }
    Ok(charged)
}

/// What `quota` uses now: for each resource of its `spec.hard`, the sum over the objects of
/// its namespace in `cache` that it counts (those in its scopes), at `now` (unix seconds).
/// Resources no kind of object counts are left out.
pub fn recount(cache: &WatchCache, quota: &Value, now: i64) -> Resources {
    let namespace = meta_str(quota, "namespace").unwrap_or("");
    let hard = resources::parse(&quota["spec"]["hard"]);
    let mut by_resource: std::collections::BTreeMap<(String, String), Vec<&String>> = Default::default();
    for name in hard.keys() {
        if let Some(resource) = usage::counted_resource(name) {
            by_resource.entry(resource).or_default().push(name);
        }
    }
    let mut used = Resources::new();
    for ((group, plural), names) in by_resource {
        let mut total: Resources = names.iter().map(|n| ((*n).clone(), Amount::default())).collect();
        let prefix = format!("{}{namespace}/", keys::type_prefix(&group, &plural));
        let objects = cache
            .list(&prefix, None, None)
            .map(|s| s.objects)
            .unwrap_or_default();
        if usage::counts_only_itself(&group, &plural) {
            // No need to read the objects: each counts one, and only pods have scopes.
            let n = if usage::scopes(quota).is_empty() {
                objects.len()
            } else {
                0
            };
            let n = i128::try_from(n).unwrap_or(i128::MAX);
            used.extend(names.iter().map(|name| ((*name).clone(), Amount::count(n))));
            continue;
        }
        for (_, cached) in objects {
            let obj = cached.value();
            if !usage::in_scope(quota, &group, &plural, &obj) {
                continue;
            }
            let counted = usage::usage(&group, &plural, &obj, now);
            resources::add(&mut total, &resources::mask(&counted, names.iter().copied()));
        }
        used.extend(total);
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use serde_json::json;

    fn attrs(op: Operation, old: Option<&Value>) -> Attributes<'_> {
        Attributes {
            operation: op,
            group: "",
            version: "v1",
            kind: "Pod",
            resource: "pods",
            namespaced: true,
            namespace: Some("shop"),
            name: "p",
            subresource: None,
            dry_run: false,
            user: None,
            authorizer: None,
            versions: None,
            old,
        }
    }

    fn quota(hard: Value, used: Value) -> Quota {
        Quota {
            key: "/registry/core/resourcequotas/shop/q".into(),
            rev: 7,
            obj: json!({"metadata": {"name": "q", "namespace": "shop"},
                        "spec": {"hard": hard.clone()}, "status": {"hard": hard, "used": used}}),
        }
    }

    fn pod(cpu: &str) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}})
    }

    #[test]
    fn a_create_is_charged_guarded_by_the_quotas_revision() {
        let q = quota(
            json!({"pods": "2", "requests.cpu": "1"}),
            json!({"pods": "1", "requests.cpu": "250m"}),
        );
        let quotas = [q];
        let charged =
            check(&attrs(Operation::Create, None), &quotas, &pod("500m"), 0).expect("within the quota");
        assert_eq!(charged.len(), 1);
        let guarded = charged[0].guarded();
        assert_eq!(guarded.mod_revision, 7);
        assert_eq!(
            guarded.value["status"]["used"],
            json!({"pods": "2", "requests.cpu": "750m"})
        );
        let merged = charged[0].merged();
        assert_eq!(merged.key, "/registry/core/resourcequotas/shop/q");
        let operand: charge::Operand = serde_json::from_slice(&merged.operand).unwrap();
        assert_eq!(operand.requested, json!({"pods": "1", "requests.cpu": "500m"}));
        assert!(operand.enforced);
    }

    #[test]
    fn going_over_the_limit_is_kubes_forbidden() {
        let q = quota(
            json!({"pods": "2", "requests.cpu": "1"}),
            json!({"pods": "1", "requests.cpu": "750m"}),
        );
        let e = check(&attrs(Operation::Create, None), &[q], &pod("500m"), 0).expect_err("over the quota");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=750m, limited: requests.cpu=1"
        );
    }

    #[test]
    fn containers_must_state_limited_resources_and_usage_must_be_known() {
        let q = quota(json!({"limits.memory": "1Gi"}), json!({"limits.memory": "0"}));
        let e = check(&attrs(Operation::Create, None), &[q], &pod("1"), 0).expect_err("no memory limit");
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: failed quota: q: must specify limits.memory for: c"
        );
        let q = quota(json!({"pods": "2"}), json!({}));
        let e = check(&attrs(Operation::Create, None), &[q], &pod("1"), 0).expect_err("no usage yet");
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: status unknown for quota: q, resources: pods"
        );
    }

    #[test]
    fn an_update_is_charged_only_what_it_adds() {
        let old = pod("500m");
        let quotas = [quota(
            json!({"requests.cpu": "1"}),
            json!({"requests.cpu": "500m"}),
        )];
        let same = check(&attrs(Operation::Update, Some(&old)), &quotas, &pod("500m"), 0).expect("no change");
        assert!(same.is_empty());
        let more = check(&attrs(Operation::Update, Some(&old)), &quotas, &pod("750m"), 0).expect("within");
        assert_eq!(
            more[0].guarded().value["status"]["used"],
            json!({"requests.cpu": "750m"})
        );
        assert_eq!(
            more[0].requested,
            resources::parse(&json!({"requests.cpu": "250m"}))
        );
    }
}
