//! kube's rules for an in-place resize of a pod's containers (`pods/resize`,
//! `ValidatePodResize`), in kube-apiserver 1.35's order: a static or Windows pod cannot be
//! resized at all; the pod's QoS class may not change; a pod whose kubelet has not reported
//! its containers' resources, or with pod-level resources, cannot be resized; its containers
//! may not be added, removed, renamed or reordered; requests and limits once set stay set; and
//! only cpu and memory change, in its regular and sidecar containers.

use serde_json::{Map, Value};

use super::{list_of, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;
use crate::machinery::qos;

/// The annotation a kubelet puts on the mirror of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The resources a resize may change.
const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// What refuses the resize of `old` into `new` before anything else is looked at: kube answers
/// a static or Windows pod with this one cause alone.
pub fn refused_outright(old: &Value) -> Option<(String, String)> {
    if old["metadata"]["annotations"].get(MIRROR_ANNOTATION).is_some() {
        return Some((String::new(), "Forbidden: static pods cannot be resized".into()));
    }
    if old["spec"]["os"]["name"] == "windows" {
        return Some((String::new(), "Forbidden: windows pods cannot be resized".into()));
    }
    None
}

/// kube's `ValidatePodResize` after its outright refusals (see [`refused_outright`]): what is
/// wrong with resizing `old` into `new`.
pub fn resize(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["spec"], &new["spec"]);
    let old_class = old["status"]["qosClass"]
        .as_str()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| qos::pod_qos(before));
    if qos::pod_qos(after) != old_class {
        causes.push((
            "spec".into(),
            format!(
                "Invalid value: {}: Pod QOS Class may not change as a result of resizing",
                go_quote(old_class)
            ),
        ));
    }
    if !kubelet_reports_resources(old) {
        causes.push((
            "spec".into(),
            "Forbidden: Pod running on node without support for resize".into(),
        ));
    }
    if has_pod_level_resources(before) || has_pod_level_resources(after) {
        causes.push((
            String::new(),
            "Forbidden: resize of pods with pod-level resources is forbidden when InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled".into(),
        ));
        return;
    }
    let before_count = causes.len();
    for list in ["containers", "initContainers"] {
        ordering(list, list_of(before, list), list_of(after, list), causes);
    }
    if causes.len() > before_count {
        return;
    }
    let pairs = |list: &'static str| {
        list_of(before, list)
            .iter()
            .zip(list_of(after, list))
            .enumerate()
            .map(move |(i, (o, n))| (format!("spec.{list}[{i}]"), o, n))
    };
    let sidecar = |c: &Value| str_of(c, "restartPolicy") == "Always";
    for (path, o, n) in pairs("initContainers").filter(|(_, o, _)| sidecar(o)) {
        nothing_removed(&path, o, n, causes);
    }
    for (path, o, n) in pairs("containers") {
        nothing_removed(&path, o, n, causes);
    }
    for (_, o, n) in pairs("containers") {
        if !only_resizable_changed(o, n) {
            causes.push((
                "spec".into(),
                "Forbidden: only cpu and memory resources are mutable".into(),
            ));
        }
    }
    for (path, o, n) in pairs("initContainers") {
        match (sidecar(o), only_resizable_changed(o, n), o == n) {
            (true, false, _) => causes.push((
                path,
                "Forbidden: only cpu and memory resources for sidecar containers are mutable".into(),
            )),
            (false, _, false) => causes.push((
                "spec".into(),
                "Forbidden: resources for non-sidecar init containers are immutable".into(),
            )),
            _ => {}
        }
    }
    if causes.len() > before_count {
        return;
    }
    let mut masked = after.clone();
    for list in ["containers", "initContainers"] {
        if let Some(items) = masked.get_mut(list).and_then(Value::as_array_mut) {
            for (n, o) in items.iter_mut().zip(list_of(before, list)) {
                *n = with_old_resizable(o, n);
            }
        }
    }
    if masked != *before {
        causes.push((
            "spec".into(),
            "Forbidden: only cpu and memory resources are mutable".into(),
        ));
    }
}

/// Whether the pod's kubelet can resize it: the first running container's status carries its
/// resources (a kubelet that predates in-place resize does not report them). A pod with no
/// running container can always be resized.
fn kubelet_reports_resources(pod: &Value) -> bool {
    list_of(&pod["status"], "containerStatuses")
        .iter()
        .find(|s| s["state"].get("running").is_some_and(|r| !r.is_null()))
        .is_none_or(|s| s.get("resources").is_some_and(|r| !r.is_null()))
}

/// Whether a pod spec sets pod-level requests or limits.
fn has_pod_level_resources(spec: &Value) -> bool {
    ["requests", "limits"]
        .iter()
        .any(|k| spec["resources"][*k].as_object().is_some_and(|m| !m.is_empty()))
}

/// kube's `validatePodResizeContainerOrdering` for one list: the same containers by name, in
/// the same order.
fn ordering(list: &str, before: &[Value], after: &[Value], causes: &mut Causes) {
    if before.len() != after.len() {
        causes.push((
            format!("spec.{list}"),
            format!("Forbidden: {list} may not be added or removed on resize"),
        ));
        return;
    }
    for (i, (o, n)) in before.iter().zip(after).enumerate() {
        if str_of(o, "name") != str_of(n, "name") {
            causes.push((
                format!("spec.{list}[{i}].name"),
                format!("Forbidden: {list} may not be renamed or reordered on resize"),
            ));
        }
    }
}

/// A container's requests or limits that `old` set and `new` drops.
fn nothing_removed(path: &str, old: &Value, new: &Value, causes: &mut Causes) {
    for (kind, what) in [("requests", "requests"), ("limits", "limits")] {
        let kept = |name: &String| new["resources"][kind].get(name).is_some();
        if let Some(set) = old["resources"][kind].as_object() {
            if !set.keys().all(kept) {
                causes.push((
                    format!("{path}.resources.{kind}"),
                    format!("Forbidden: resource {what} cannot be removed"),
                ));
            }
        }
    }
}

/// Whether `new` differs from `old` in nothing but its cpu and memory requests and limits.
fn only_resizable_changed(old: &Value, new: &Value) -> bool {
    with_old_resizable(old, new) == *old
}

/// `new` with `old`'s cpu and memory requests and limits (as kube's `dropCPUMemoryUpdates`):
/// an empty list left behind counts as none.
fn with_old_resizable(old: &Value, new: &Value) -> Value {
    let mut out = new.clone();
    let Some(resources) = out.get_mut("resources").and_then(Value::as_object_mut) else {
        return out;
    };
    for kind in ["requests", "limits"] {
        let mut list: Map<String, Value> = resources
            .get(kind)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for name in RESIZABLE {
            match old["resources"][kind].get(name) {
                Some(v) => list.insert(name.to_string(), v.clone()),
                None => list.remove(name),
            };
        }
        if list.is_empty() && old["resources"].get(kind).is_none() {
            resources.remove(kind);
        } else {
            resources.insert(kind.to_string(), Value::Object(list));
        }
    }
    if resources.is_empty() && old.get("resources").is_none() {
        if let Some(c) = out.as_object_mut() {
            c.remove("resources");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(resources: Value) -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]},
            "status": {"qosClass": "Burstable",
                       "containerStatuses": [{"name": "c", "state": {"running": {}},
                                              "resources": {}}]}
        })
    }

    fn causes_of(old: &Value, new: &Value) -> Vec<String> {
        let mut causes = Causes::new();
        resize(old, new, &mut causes);
        causes.into_iter().map(|(f, m)| format!("{f}: {m}")).collect()
    }

    #[test]
    fn cpu_and_memory_change_and_nothing_else_does() {
        let old = pod(json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m"}}));
        let new = pod(json!({"requests": {"cpu": "150m", "memory": "96Mi"}, "limits": {"cpu": "300m"}}));
        assert_eq!(causes_of(&old, &new), Vec::<String>::new());

        let storage = pod(json!({"requests": {"cpu": "100m", "memory": "64Mi"},
                                 "limits": {"cpu": "200m", "ephemeral-storage": "1Gi"}}));
        assert_eq!(
            causes_of(&old, &storage),
            ["spec: Forbidden: only cpu and memory resources are mutable"]
        );
        let dropped = pod(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}));
        assert_eq!(
            causes_of(&old, &dropped),
            ["spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed"]
        );
    }

    #[test]
    fn the_qos_class_and_the_containers_stay_as_they_were() {
        let old = pod(json!({"requests": {"cpu": "100m"}}));
        let guaranteed = pod(json!({"requests": {"cpu": "1", "memory": "1Gi"},
                                    "limits": {"cpu": "1", "memory": "1Gi"}}));
        assert_eq!(
            causes_of(&old, &guaranteed),
            ["spec: Invalid value: \"Burstable\": Pod QOS Class may not change as a result of resizing"]
        );
        let mut renamed = old.clone();
        renamed["spec"]["containers"][0]["name"] = json!("d");
        assert_eq!(
            causes_of(&old, &renamed),
            ["spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"]
        );
        let mut added = old.clone();
        added["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "e", "image": "i"}));
        assert_eq!(
            causes_of(&old, &added),
            ["spec.containers: Forbidden: containers may not be added or removed on resize"]
        );
    }

    #[test]
    fn init_containers_resize_only_when_they_are_sidecars() {
        let mut old = pod(json!({"requests": {"cpu": "100m"}}));
        old["spec"]["initContainers"] = json!([
            {"name": "side", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "10m"}}},
            {"name": "setup", "image": "i", "resources": {"requests": {"cpu": "10m"}}}
        ]);
        let mut new = old.clone();
        new["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = json!("20m");
        assert_eq!(causes_of(&old, &new), Vec::<String>::new());
        new["spec"]["initContainers"][1]["resources"]["requests"]["cpu"] = json!("20m");
        assert_eq!(
            causes_of(&old, &new),
            ["spec: Forbidden: resources for non-sidecar init containers are immutable"]
        );
    }

    #[test]
    fn static_windows_and_unsupported_pods_are_refused() {
        let mut old = pod(json!({}));
        assert_eq!(refused_outright(&old), None);
        old["spec"]["os"] = json!({"name": "windows"});
        assert_eq!(
            refused_outright(&old).map(|c| c.1).as_deref(),
            Some("Forbidden: windows pods cannot be resized")
        );
        let mut old = pod(json!({"requests": {"cpu": "100m"}}));
        old["status"]["containerStatuses"][0]
            .as_object_mut()
            .unwrap()
            .remove("resources");
        let new = pod(json!({"requests": {"cpu": "200m"}}));
        assert_eq!(
            causes_of(&old, &new),
            ["spec: Forbidden: Pod running on node without support for resize"]
        );
    }
}
