//! What one object counts against a ResourceQuota — kube's quota evaluators, as data: every
//! object counts `count/<resource>[.<group>]` (and the legacy names `configmaps`, `secrets`,
//! `replicationcontrollers`, `resourcequotas`); pods add the compute resources of their
//! containers, Services their load balancers and node ports, claims their storage (per
//! class too). Also which quota scopes a pod falls under, and the containers that must name
//! a resource a quota limits.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::resources::{self, Amount, Resources};
use crate::admission::Operation;
use crate::machinery::age::parse_time;
use crate::machinery::qos::pod_qos;

/// Core resources counted under their plain name as well as `count/<resource>`.
const LEGACY_COUNTS: [&str; 4] = [
    "configmaps",
    "secrets",
    "replicationcontrollers",
    "resourcequotas",
];

/// The compute resources a pod's usage names.
const POD_RESOURCES: [&str; 10] = [
    "pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// The resources a quota may require every container to state.
const CONSTRAINED: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// The resources of a Service's usage.
const SERVICE_RESOURCES: [&str; 3] = ["services", "services.loadbalancers", "services.nodeports"];

/// Where a storage class's own quota names end.
const CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// The object-count name of a resource (`count/pods`, `count/deployments.apps`).
pub fn object_count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// Whether a write changes what an object counts: every create, and updates of pods,
/// Services and claims (their resources, type or storage may change).
pub fn handles(group: &str, plural: &str, op: Operation, subresource: Option<&str>) -> bool {
    match op {
        Operation::Create => subresource.is_none(),
        Operation::Update => {
            group.is_empty()
                && match plural {
                    "pods" => matches!(subresource, None | Some("resize")),
                    "services" | "persistentvolumeclaims" => subresource.is_none(),
                    _ => false,
                }
        }
        Operation::Delete | Operation::Connect => false,
    }
}

/// Whether a quota's resource `name` counts objects of `group/plural`.
pub fn tracks(group: &str, plural: &str, name: &str) -> bool {
    if name == object_count_name(group, plural)
        || (group.is_empty() && LEGACY_COUNTS.contains(&plural) && name == plural)
    {
        return true;
    }
    if !group.is_empty() {
        return false;
    }
    match plural {
        "pods" => {
            POD_RESOURCES.contains(&name)
                || name.starts_with("hugepages-")
                || name.starts_with("requests.hugepages-")
                || name.strip_prefix("requests.").is_some_and(is_extended)
        }
        "services" => SERVICE_RESOURCES.contains(&name),
        "persistentvolumeclaims" => {
            matches!(name, "persistentvolumeclaims" | "requests.storage")
                || name.split_once(CLASS_SUFFIX).is_some_and(|(class, what)| {
                    !class.is_empty() && matches!(what, "requests.storage" | "persistentvolumeclaims")
                })
        }
        _ => false,
    }
}

/// The `(group, plural)` whose objects a quota's resource `name` counts, for working out its
/// usage from scratch.
pub fn counted_resource(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        let (plural, group) = rest.split_once('.').unwrap_or((rest, ""));
        return (!plural.is_empty()).then(|| (group.to_string(), plural.to_string()));
    }
    ["pods", "services", "persistentvolumeclaims"]
        .into_iter()
        .chain(LEGACY_COUNTS)
        .find(|plural| tracks("", plural, name))
        .map(|plural| (String::new(), plural.to_string()))
}

/// Whether what an object of `group/plural` counts is the same for every object (one of
/// it): all but pods, Services and claims, whose usage depends on their content.
pub fn counts_only_itself(group: &str, plural: &str) -> bool {
    !(group.is_empty() && matches!(plural, "pods" | "services" | "persistentvolumeclaims"))
}

/// A resource outside Kubernetes' own (`example.com/gpu`), which quotas name as
/// `requests.example.com/gpu`.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// What `obj`, an object of `group/plural`, counts at `now` (unix seconds).
pub fn usage(group: &str, plural: &str, obj: &Value, now: i64) -> Resources {
    let mut r = Resources::new();
    r.insert(object_count_name(group, plural), Amount::count(1));
    if group.is_empty() && LEGACY_COUNTS.contains(&plural) {
        r.insert(plural.to_string(), Amount::count(1));
    }
    if group.is_empty() {
        match plural {
            "pods" if counts_compute(obj, now) => {
                let spec = &obj["spec"];
                compute_usage(&pod_total(spec, "requests"), &pod_total(spec, "limits"), &mut r);
            }
            "services" => service_usage(&obj["spec"], &mut r),
            "persistentvolumeclaims" => claim_usage(obj, &mut r),
            _ => {}
        }
    }
    r
}

/// Whether a pod still counts its compute resources: not once it has finished, nor once its
/// graceful deletion is over.
fn counts_compute(pod: &Value, now: i64) -> bool {
    if matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
        return false;
    }
    let meta = &pod["metadata"];
    match (
        meta["deletionTimestamp"].as_str().and_then(parse_time),
        meta["deletionGracePeriodSeconds"].as_i64(),
    ) {
        (Some(at), Some(grace)) => now <= at.saturating_add(grace),
        _ => true,
    }
}

/// A container's `requests` or `limits`.
fn container_list(container: &Value, which: &str) -> Resources {
    resources::parse(&container["resources"][which])
}

/// Raises each entry of `into` to the one of `other` where that is larger.
fn max_into(into: &mut Resources, other: &Resources) {
    for (name, a) in other {
        match into.get_mut(name) {
            Some(x) if x.value >= a.value => {}
            Some(x) => *x = *a,
            None => {
                into.insert(name.clone(), *a);
            }
        }
    }
}

/// A pod's total `requests` or `limits`: its containers' sum, with the sidecars (init
/// containers that keep running) added, at least what any init container needs while it runs
/// next to the sidecars before it, plus the pod's overhead.
fn pod_total(spec: &Value, which: &str) -> Resources {
    let mut total = Resources::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        resources::add(&mut total, &container_list(c, which));
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let own = container_list(c, which);
        let running = if c["restartPolicy"] == "Always" {
            resources::add(&mut total, &own);
            resources::add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut with = own;
            resources::add(&mut with, &sidecars);
            with
        };
        max_into(&mut init_peak, &running);
    }
    max_into(&mut total, &init_peak);
    let overhead = resources::parse(&spec["overhead"]);
    if which == "requests" {
        resources::add(&mut total, &overhead);
    } else {
        let limited: BTreeSet<String> = total.keys().cloned().collect();
        resources::add(&mut total, &resources::mask(&overhead, &limited));
    }
    total
}

/// The compute usage of given requests and limits (a pod's, or one container's).
fn compute_usage(requests: &Resources, limits: &Resources, r: &mut Resources) {
    r.insert("pods".into(), Amount::count(1));
    for plain in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(plain) {
            r.insert(plain.into(), *q);
            r.insert(format!("requests.{plain}"), *q);
        }
        if let Some(q) = limits.get(plain) {
            r.insert(format!("limits.{plain}"), *q);
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            r.insert(name.clone(), *q);
            r.insert(format!("requests.{name}"), *q);
        } else if is_extended(name) {
            r.insert(format!("requests.{name}"), *q);
        }
    }
}

fn service_usage(spec: &Value, r: &mut Resources) {
    let ports = spec["ports"].as_array().map_or(&[][..], Vec::as_slice);
    let (balancers, node_ports) = match spec["type"].as_str() {
        Some("NodePort") => (0, ports.len()),
        Some("LoadBalancer") if spec["allocateLoadBalancerNodePorts"] == false => (
            1,
            ports
                .iter()
                .filter(|p| p["nodePort"].as_i64().is_some_and(|n| n > 0))
                .count(),
        ),
        Some("LoadBalancer") => (1, ports.len()),
        _ => (0, 0),
    };
    r.insert("services".into(), Amount::count(1));
    r.insert("services.loadbalancers".into(), Amount::count(balancers));
    r.insert(
        "services.nodeports".into(),
        Amount::count(i128::try_from(node_ports).unwrap_or(i128::MAX)),
    );
}

fn claim_usage(claim: &Value, r: &mut Resources) {
    r.insert("persistentvolumeclaims".into(), Amount::count(1));
    let storage = resources::parse(&claim["spec"]["resources"]["requests"])
        .get("storage")
        .copied();
    if let Some(q) = storage {
        r.insert("requests.storage".into(), q);
    }
    let class = claim["spec"]["storageClassName"]
        .as_str()
        .or_else(|| claim["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"].as_str())
        .unwrap_or("");
    if !class.is_empty() {
        r.insert(
            format!("{class}{CLASS_SUFFIX}persistentvolumeclaims"),
            Amount::count(1),
        );
        if let Some(q) = storage {
            r.insert(format!("{class}{CLASS_SUFFIX}requests.storage"), q);
        }
    }
}

/// One scope a quota applies to: a scope name, an operator and values
/// (`spec.scopes` entries are `Exists` with no values).
#[derive(Debug)]
pub struct Scope<'a> {
    name: &'a str,
    operator: &'a str,
    values: Vec<&'a str>,
}

/// The scopes of a quota: `spec.scopes`, then `spec.scopeSelector.matchExpressions`.
pub fn scopes(quota: &Value) -> Vec<Scope<'_>> {
    let plain = quota["spec"]["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|name| Scope {
            name,
            operator: "Exists",
            values: Vec::new(),
        });
    let selected = quota["spec"]["scopeSelector"]["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| Scope {
            name: e["scopeName"].as_str().unwrap_or(""),
            operator: e["operator"].as_str().unwrap_or(""),
            values: e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect(),
        });
    plain.chain(selected).collect()
}

/// Whether `obj` falls under every scope of `quota`: only pods have scopes, so a scoped quota
/// counts nothing else.
pub fn in_scope(quota: &Value, group: &str, plural: &str, obj: &Value) -> bool {
    let scopes = scopes(quota);
    scopes.is_empty() || (group.is_empty() && plural == "pods" && scopes.iter().all(|s| pod_in_scope(obj, s)))
}

fn pod_in_scope(pod: &Value, scope: &Scope<'_>) -> bool {
    let spec = &pod["spec"];
    match scope.name {
        "Terminating" => spec["activeDeadlineSeconds"].as_i64().is_some_and(|s| s >= 0),
        "NotTerminating" => spec["activeDeadlineSeconds"].as_i64().is_none_or(|s| s < 0),
        "BestEffort" => pod_qos(spec) == "BestEffort",
        "NotBestEffort" => pod_qos(spec) != "BestEffort",
        "CrossNamespacePodAffinity" => cross_namespace_affinity(spec),
        "PriorityClass" => {
            let class = spec["priorityClassName"].as_str().unwrap_or("");
            match scope.operator {
                "Exists" => !class.is_empty(),
                "In" => scope.values.contains(&class),
                "NotIn" => !scope.values.contains(&class),
                // The selector kube evaluates always holds the key, empty or not.
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether a pod's affinity or anti-affinity terms reach into other namespaces.
fn cross_namespace_affinity(spec: &Value) -> bool {
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let a = &spec["affinity"][kind];
        let required = a["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .into_iter()
            .flatten();
        let preferred = a["preferredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|w| &w["podAffinityTerm"]);
        required.chain(preferred).any(|term| {
            term["namespaces"].as_array().is_some_and(|n| !n.is_empty())
                || term["namespaceSelector"].is_object()
        })
    })
}

/// For a quota limiting `required` (its resources that count pods): the containers of `pod`
/// that do not state one of the compute resources a quota on it requires, in kube's words
/// (`must specify limits.cpu for: web; requests.memory for: init,web`).
pub fn missing_requirements(group: &str, plural: &str, required: &[&str], pod: &Value) -> Option<String> {
    if !(group.is_empty() && plural == "pods") {
        return None;
    }
    let required: BTreeSet<&str> = required
        .iter()
        .copied()
        .filter(|r| CONSTRAINED.contains(r))
        .collect();
    if required.is_empty() {
        return None;
    }
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let spec = &pod["spec"];
    for list in ["containers", "initContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            let mut stated = Resources::new();
            compute_usage(
                &container_list(c, "requests"),
                &container_list(c, "limits"),
                &mut stated,
            );
            for r in &required {
                if !stated.contains_key(*r) {
                    missing
                        .entry(r)
                        .or_default()
                        .insert(c["name"].as_str().unwrap_or(""));
                }
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| format!("{r} for: {}", names.iter().copied().collect::<Vec<_>>().join(",")))
        .collect();
    Some(format!("must specify {}", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers}, "status": {"phase": "Pending"}})
    }

    #[test]
    fn a_pod_counts_its_containers_requests_and_limits() {
        let p = pod(json!([
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "500m"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "64Mi", "example.com/gpu": "1"}}}
        ]));
        let u = resources::to_json(&usage("", "pods", &p, 0));
        assert_eq!(
            u,
            json!({"count/pods": "1", "pods": "1", "cpu": "500m", "requests.cpu": "500m",
                   "memory": "128Mi", "requests.memory": "128Mi", "limits.cpu": "500m",
                   "requests.example.com/gpu": "1"})
        );
    }

    #[test]
    fn init_containers_raise_the_total_and_sidecars_add_to_it() {
        let mut p = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
        p["spec"]["initContainers"] = json!([
            {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "2"}}}
        ]);
        let u = usage("", "pods", &p, 0);
        // The setup container runs next to the sidecar: 2 + 0.5 beats 1 + 0.5.
        assert_eq!(u["requests.cpu"].shown(), "2500m");
    }

    #[test]
    fn a_finished_pod_counts_only_as_an_object() {
        let mut p = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
        p["status"]["phase"] = json!("Succeeded");
        let u = usage("", "pods", &p, 0);
        assert_eq!(u.keys().collect::<Vec<_>>(), ["count/pods"]);
    }

    #[test]
    fn services_count_balancers_and_node_ports() {
        let svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}, {"port": 443}]}});
        let u = resources::to_json(&usage("", "services", &svc, 0));
        assert_eq!(
            u,
            json!({"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "2"})
        );
    }

    #[test]
    fn claims_count_their_storage_per_class() {
        let pvc =
            json!({"spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "5Gi"}}}});
        let u = resources::to_json(&usage("", "persistentvolumeclaims", &pvc, 0));
        assert_eq!(u["fast.storageclass.storage.k8s.io/requests.storage"], "5Gi");
        assert_eq!(u["requests.storage"], "5Gi");
        assert!(tracks(
            "",
            "persistentvolumeclaims",
            "fast.storageclass.storage.k8s.io/persistentvolumeclaims"
        ));
    }

    #[test]
    fn quota_names_lead_to_the_objects_they_count() {
        assert_eq!(
            counted_resource("count/deployments.apps"),
            Some(("apps".into(), "deployments".into()))
        );
        assert_eq!(
            counted_resource("count/widgets.example.com"),
            Some(("example.com".into(), "widgets".into()))
        );
        assert_eq!(
            counted_resource("requests.memory"),
            Some(("".into(), "pods".into()))
        );
        assert_eq!(
            counted_resource("configmaps"),
            Some(("".into(), "configmaps".into()))
        );
        assert_eq!(
            counted_resource("services.nodeports"),
            Some(("".into(), "services".into()))
        );
        assert_eq!(counted_resource("bogus"), None);
        assert!(tracks("apps", "deployments", "count/deployments.apps"));
        assert!(!tracks("apps", "deployments", "pods"));
    }

    #[test]
    fn scoped_quotas_count_only_the_pods_in_their_scopes() {
        let best_effort = json!({"spec": {"scopes": ["BestEffort"]}});
        let bare = pod(json!([{"name": "a"}]));
        let sized = pod(json!([{"name": "a", "resources": {"requests": {"cpu": "1"}}}]));
        assert!(in_scope(&best_effort, "", "pods", &bare));
        assert!(!in_scope(&best_effort, "", "pods", &sized));
        assert!(!in_scope(&best_effort, "", "configmaps", &json!({})));
        let high = json!({"spec": {"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        let mut p = bare.clone();
        assert!(!in_scope(&high, "", "pods", &p));
        p["spec"]["priorityClassName"] = json!("high");
        assert!(in_scope(&high, "", "pods", &p));
    }

    #[test]
    fn containers_must_state_what_a_quota_limits() {
        let p = pod(json!([
            {"name": "web", "resources": {"requests": {"cpu": "1"}}},
            {"name": "log"}
        ]));
        assert_eq!(
            missing_requirements("", "pods", &["requests.cpu", "limits.memory", "pods"], &p).as_deref(),
            Some("must specify limits.memory for: log,web; requests.cpu for: log")
        );
        assert_eq!(missing_requirements("", "pods", &["pods"], &p), None);
    }
}
