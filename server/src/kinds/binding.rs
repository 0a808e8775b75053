//! A pod's `binding` subresource: what a scheduler posts to assign a pending pod to a node,
//! as kube-apiserver's `BindingREST` does it — `spec.nodeName` set, the binding's annotations
//! copied, the `PodScheduled` condition true, in one compare-and-swap on the pod. A pod that
//! is being deleted, already assigned or still gated is refused with kube's `409`.

use serde_json::{json, Value};

use crate::kinds::eviction::created;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::machinery::timestamp::now_rfc3339;
use crate::registry::options::WriteOptions;
use crate::registry::reply::Reply;
use crate::registry::ResourceRequest;
use crate::store::{keys, Cas, Store};

/// Attempts when the pod keeps changing under the binding.
const ATTEMPTS: usize = 16;

/// kube's `ValidatePodBinding`, its errors as its aggregate prints them (they reach the client
/// as a `500` with no reason, as kube-apiserver's do).
fn validate(binding: &Value) -> ApiResult<()> {
    let mut errors = Vec::new();
    let kind = binding["target"]["kind"].as_str().unwrap_or_default();
    if !kind.is_empty() && kind != "Node" {
        errors.push(format!(
            "target.kind: Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""
        ));
    }
    if binding["target"]["name"].as_str().unwrap_or_default().is_empty() {
        errors.push("target.name: Required value".to_string());
    }
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(ApiError::unknown(one.clone())),
        many => Err(ApiError::unknown(format!("[{}]", many.join(", ")))),
    }
}

/// The pod bound to `node`, or why it cannot be.
fn bound(pod: &Value, binding: &Value, node: &str) -> Result<Value, String> {
    let name = meta_str(pod, "name").unwrap_or_default();
    if meta_str(pod, "deletionTimestamp").is_some() {
        return Err(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(assigned) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(format!("pod {name} is already assigned to node {assigned:?}"));
    }
    if pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty())
    {
        return Err(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    let mut next = pod.clone();
    next["spec"]["nodeName"] = json!(node);
    if let Some(added) = binding["metadata"]["annotations"]
        .as_object()
        .filter(|a| !a.is_empty())
    {
        if !next["metadata"]["annotations"].is_object() {
            next["metadata"]["annotations"] = json!({});
        }
        for (k, v) in added {
            next["metadata"]["annotations"][k] = v.clone();
        }
    }
    if !next["status"]["conditions"].is_array() {
        next["status"]["conditions"] = json!([]);
    }
    if let Some(conditions) = next["status"]["conditions"].as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == "PodScheduled") {
            Some(c) if c["status"] == "True" => {}
            Some(c) => {
                c["status"] = json!("True");
                c["lastTransitionTime"] = json!(now_rfc3339());
                if let Some(o) = c.as_object_mut() {
                    o.remove("reason");
                    o.remove("message");
                }
            }
            None => conditions.push(json!({"type": "PodScheduled", "status": "True",
                                           "lastProbeTime": null, "lastTransitionTime": now_rfc3339()})),
        }
    }
    Ok(next)
}

/// POST `pods/NAME/binding`.
pub async fn create(
    store: &Store,
    req: &ResourceRequest,
    opts: &WriteOptions,
    binding: Value,
) -> ApiResult<Reply> {
    let name = req.name.as_deref().unwrap_or_default();
    if meta_str(&binding, "name") != Some(name) {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    validate(&binding)?;
    let node = binding["target"]["name"].as_str().unwrap_or_default();
    let key = keys::object("", "pods", req.namespace.as_deref(), name);
    for _ in 0..ATTEMPTS {
        let pod = store
            .get(&key, true)
            .await?
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        if let Some(uid) = meta_str(&binding, "uid").filter(|u| !u.is_empty()) {
            let actual = meta_str(&pod.obj, "uid").unwrap_or_default();
            if uid != actual {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if let Some(rv) = meta_str(&binding, "resourceVersion").filter(|r| !r.is_empty()) {
            if rv != pod.rv.to_string() {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
        }
        let next = bound(&pod.obj, &binding, node)
            .map_err(|why| ApiError::conflict("", "pods/binding", name, &why))?;
        if opts.dry_run {
            return Ok(created());
        }
        if let Cas::Done(_) = store.update(&key, &next, pod.rv).await? {
            return Ok(created());
        }
    }
    Err(ApiError::conflict(
        "",
        "pods/binding",
        name,
        "the pod kept changing; try again",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_assigns_a_pending_pod_once() {
        let pod = json!({"metadata": {"name": "p", "annotations": {"a": "1"}}, "spec": {},
                         "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
        let binding = json!({"metadata": {"name": "p", "annotations": {"b": "2"}}, "target": {"kind": "Node", "name": "n1"}});
        let next = bound(&pod, &binding, "n1").unwrap();
        assert_eq!(next["spec"]["nodeName"], "n1");
        assert_eq!(next["metadata"]["annotations"], json!({"a": "1", "b": "2"}));
        let scheduled = &next["status"]["conditions"][0];
        assert_eq!(scheduled["status"], "True");
        assert!(scheduled.get("reason").is_none());
        assert_eq!(
            bound(&next, &binding, "n2").unwrap_err(),
            "pod p is already assigned to node \"n1\""
        );
        let gated = json!({"metadata": {"name": "g"}, "spec": {"schedulingGates": [{"name": "x"}]}});
        assert_eq!(
            bound(&gated, &binding, "n1").unwrap_err(),
            "pod g has non-empty .spec.schedulingGates"
        );
        assert_eq!(
            validate(&json!({"target": {"kind": "Pod"}})).unwrap_err().message,
            "[target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\", target.name: Required value]"
        );
    }
}
