//! A pod's `eviction` subresource: a delete that honours the PodDisruptionBudget covering the
//! pod, as kube-apiserver's `EvictionREST` decides it (`kubectl drain` evicts this way).
//!
//! A pod that is finished, pending or already being deleted is deleted at once. Otherwise the
//! one budget whose selector matches the pod must allow a disruption: its status (kept by the
//! disruption controller) must have observed the budget's generation and allow at least one;
//! the eviction then takes one (`disruptionsAllowed` down, the pod recorded under
//! `disruptedPods`) in a compare-and-swap on the budget, so two evictions can never both take
//! the last one, and deletes the pod with the eviction's `deleteOptions`. An unready pod is
//! deleted without taking one when the budget is met anyway, or when its
//! `unhealthyPodEvictionPolicy` is `AlwaysAllow`. A dry run decides everything and writes
//! nothing.

use serde_json::{json, Value};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::machinery::selector::{selector_string, LabelSelector};
use crate::machinery::timestamp::now_rfc3339;
use crate::registry::delete::{self, DeleteOptions};
use crate::registry::options::WriteOptions;
use crate::registry::reply::Reply;
use crate::registry::ResourceRequest;
use crate::store::{keys, Cas, Store, Stored};

/// Attempts when the budget or the pod keep changing under the eviction (kube's
/// `EvictionsRetry` steps).
const ATTEMPTS: usize = 5;
/// The most pods a budget may record as disrupted and not yet confirmed by its controller.
const MAX_DISRUPTED_PODS: usize = 2000;

/// The `Status` a successful create answers with (kube's create handler fills in the code).
pub(crate) fn created() -> Reply {
    Reply::object(
        201,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    )
}

/// `429 TooManyRequests` with a `DisruptionBudget` cause.
fn too_many_requests(message: &str, cause: String, retry_after: u64) -> ApiError {
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    ApiError {
        code: 429,
        reason: "TooManyRequests",
        message: message.to_string(),
        details: Some(details),
        retry_after: (retry_after > 0).then_some(retry_after),
        continue_token: None,
    }
}

fn still_processing(budget: &str) -> ApiError {
    too_many_requests(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        format!("The disruption budget {budget} is still being processed by the server."),
        10,
    )
}

/// The eviction's delete options, with the request's dry run where the body names none.
fn delete_options(eviction: &Value, opts: &WriteOptions) -> ApiResult<DeleteOptions> {
    let given = eviction.get("deleteOptions").filter(|o| !o.is_null());
    let body = given.map(Value::to_string).unwrap_or_default();
    let mut options = DeleteOptions::parse(body.as_bytes(), &Default::default())?;
    options.dry_run |= opts.dry_run;
    Ok(options)
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// A pod whose eviction needs no budget: finished, not yet running, or already going.
fn ignores_budgets(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed" | "Pending")
    ) || meta_str(pod, "deletionTimestamp").is_some()
}

/// The budgets of `namespace` whose selector matches `pod` (a budget without a selector
/// matches nothing; an invalid one neither).
async fn budgets_of(store: &Store, namespace: &str, pod: &Value) -> ApiResult<Vec<Stored>> {
    let prefix = format!(
        "{}{namespace}/",
        keys::type_prefix("policy", "poddisruptionbudgets")
    );
    let (budgets, _) = store.list(&prefix, true).await?;
    Ok(budgets
        .into_iter()
        .filter(|b| {
            let selector = &b.obj["spec"]["selector"];
            !selector.is_null()
                && LabelSelector::parse(&selector_string(selector)).is_ok_and(|s| s.matches(pod))
        })
        .collect())
}

/// Sets the budget's `DisruptionAllowed` condition from its `disruptionsAllowed`, keeping the
/// transition time when its status does not change.
fn set_allowed_condition(status: &mut Value) {
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0) > 0;
    let (state, reason) = if allowed {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    let observed = status["observedGeneration"].clone();
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    let fresh = json!({"type": "DisruptionAllowed", "status": state, "observedGeneration": observed,
                       "lastTransitionTime": now_rfc3339(), "reason": reason, "message": ""});
    match conditions.iter_mut().find(|c| c["type"] == "DisruptionAllowed") {
        Some(c) => {
            let since = if c["status"] == state {
                c["lastTransitionTime"].clone()
            } else {
                fresh["lastTransitionTime"].clone()
            };
            *c = fresh;
            c["lastTransitionTime"] = since;
        }
        None => conditions.push(fresh),
    }
}

/// Takes one disruption from the budget (kube's `checkAndDecrement`), or says why not;
/// `Ok(false)` when the budget changed meanwhile and must be read again.
async fn take_disruption(store: &Store, budget: &Stored, pod: &str, dry: bool) -> ApiResult<bool> {
    let name = meta_str(&budget.obj, "name").unwrap_or_default();
    let status = &budget.obj["status"];
    let generation = budget.obj["metadata"]["generation"].as_i64().unwrap_or(0);
    if status["observedGeneration"].as_i64().unwrap_or(0) < generation {
        return Err(still_processing(name));
    }
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    if allowed < 0 {
        return Err(ApiError::forbidden(
            "policy",
            "poddisruptionbudget",
            name,
            "pdb disruptions allowed is negative",
        ));
    }
    if status["disruptedPods"]
        .as_object()
        .is_some_and(|d| d.len() > MAX_DISRUPTED_PODS)
    {
        return Err(ApiError::forbidden(
            "policy",
            "poddisruptionbudget",
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0)
            ),
            0,
        ));
    }
    if dry {
        return Ok(true);
    }
    let mut next = budget.obj.clone();
    next["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed == 1 {
        set_allowed_condition(&mut next["status"]);
    }
    if !next["status"]["disruptedPods"].is_object() {
        next["status"]["disruptedPods"] = json!({});
    }
    next["status"]["disruptedPods"][pod] = json!(now_rfc3339());
    let key = keys::object(
        "policy",
        "poddisruptionbudgets",
        meta_str(&budget.obj, "namespace"),
        name,
    );
    Ok(matches!(
        store.update(&key, &next, budget.rv).await?,
        Cas::Done(_)
    ))
}

/// Marks the pod as the eviction's target (its `DisruptionTarget` condition), then deletes it
/// with `options`. `pinned`: only the pod as read (its resourceVersion), not a newer one.
async fn delete_pod(
    store: &Store,
    req: &ResourceRequest,
    pod: &Stored,
    mut options: DeleteOptions,
    pinned: bool,
) -> ApiResult<()> {
    let name = meta_str(&pod.obj, "name").unwrap_or_default();
    if pinned && options.resource_version.is_none() {
        options.resource_version = Some(pod.rv);
    }
    if let Some(uid) = &options.uid {
        if meta_str(&pod.obj, "uid") != Some(uid.as_str()) {
            return Err(ApiError::conflict("", "Pod", name, &format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                meta_str(&pod.obj, "uid").unwrap_or_default()
            )));
        }
    }
    if !options.dry_run {
        let mut marked = pod.obj.clone();
        let condition = json!({"type": "DisruptionTarget", "status": "True", "lastProbeTime": null,
                               "lastTransitionTime": now_rfc3339(), "reason": "EvictionByEvictionAPI",
                               "message": "Eviction API: evicting"});
        if !marked["status"]["conditions"].is_array() {
            marked["status"]["conditions"] = json!([]);
        }
        if let Some(conditions) = marked["status"]["conditions"].as_array_mut() {
            conditions.retain(|c| c["type"] != "DisruptionTarget");
            conditions.push(condition);
        }
        let key = keys::object("", "pods", meta_str(&pod.obj, "namespace"), name);
        match store.update(&key, &marked, pod.rv).await? {
            Cas::Done(rev) => {
                if options.resource_version.is_some() {
                    options.resource_version = Some(rev);
                }
            }
            Cas::Failed(_) => return Err(ApiError::conflict(
                "",
                "pods",
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )),
        }
    }
    let mut one = req.clone();
    one.subresource = None;
    delete::delete(store, &one, &options).await.map(drop)
}

/// POST `pods/NAME/eviction`.
pub async fn create(
    store: &Store,
    req: &ResourceRequest,
    opts: &WriteOptions,
    eviction: Value,
) -> ApiResult<Reply> {
    let name = req.name.as_deref().unwrap_or_default();
    let namespace = req.namespace.as_deref().unwrap_or_default();
    if meta_str(&eviction, "name") != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = delete_options(&eviction, opts)?;
    let key = keys::object("", "pods", Some(namespace), name);
    for _ in 0..ATTEMPTS {
        let pod = store
            .get(&key, true)
            .await?
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        if ignores_budgets(&pod.obj) {
            let finished = matches!(pod.obj["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
            let pinned = !finished && meta_str(&pod.obj, "deletionTimestamp").is_none();
            match delete_pod(store, req, &pod, options.clone(), pinned).await {
                Err(e) if e.code == 409 && options.resource_version.is_none() => continue,
                other => return other.map(|()| created()),
            }
        }
        let budgets = budgets_of(store, namespace, &pod.obj).await?;
        let budget = match budgets.as_slice() {
            [] => None,
            [one] => Some(one),
            _ => {
                return Ok(Reply::object(
                    500,
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                           "code": 500}),
                ))
            }
        };
        let mut pinned = false;
        if let Some(budget) = budget {
            let status = &budget.obj["status"];
            let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
            let unready_may_go = !is_ready(&pod.obj)
                && (budget.obj["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
                    || (status["currentHealthy"].as_i64().unwrap_or(0) >= desired && desired > 0));
            if unready_may_go {
                pinned = true;
            } else if !take_disruption(store, budget, name, options.dry_run).await? {
                continue;
            }
        }
        return match delete_pod(store, req, &pod, options.clone(), pinned).await {
            Err(e) if e.code == 409 && pinned && options.resource_version.is_none() => Err(still_processing(
                budget.and_then(|b| meta_str(&b.obj, "name")).unwrap_or_default(),
            )),
            other => other.map(|()| created()),
        };
    }
    Err(ApiError::timeout(format!(
        "couldn't update PodDisruptionBudget for pod {name:?} due to conflicts"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_condition_follows_the_count_and_keeps_its_transition_time() {
        let mut status = json!({"disruptionsAllowed": 0, "observedGeneration": 2});
        set_allowed_condition(&mut status);
        let first = status["conditions"][0].clone();
        assert_eq!(
            (&first["status"], &first["reason"], &first["observedGeneration"]),
            (&json!("False"), &json!("InsufficientPods"), &json!(2))
        );
        status["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        set_allowed_condition(&mut status);
        assert_eq!(
            status["conditions"][0]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        status["disruptionsAllowed"] = json!(1);
        set_allowed_condition(&mut status);
        assert_eq!(status["conditions"][0]["status"], "True");
        assert_ne!(
            status["conditions"][0]["lastTransitionTime"],
            "2020-01-01T00:00:00Z"
        );
        assert_eq!(status["conditions"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn budgets_are_ignored_for_pods_that_are_not_running() {
        for (phase, deleting, ignored) in [
            ("Pending", false, true),
            ("Succeeded", false, true),
            ("Failed", false, true),
            ("Running", true, true),
            ("Running", false, false),
        ] {
            let mut pod = json!({"metadata": {"name": "p"}, "status": {"phase": phase}});
            if deleting {
                pod["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
            }
            assert_eq!(ignores_budgets(&pod), ignored, "{pod}");
        }
    }
}
