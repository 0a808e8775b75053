//! kube's pod strategy merges a new pod's `matchLabelKeys` and `mismatchLabelKeys` into the
//! label selectors they qualify (`mutatePodAffinity`, `mutateTopologySpreadConstraints`): each
//! key the pod has a label for becomes a requirement `key In (value)` (`NotIn` for a
//! mismatch key), so that the scheduler and every other reader sees the selector the pod
//! means. Terms without a selector match nothing and are left alone.

use serde_json::{json, Value};

/// The lists of pod (anti-)affinity terms, and where each term sits in a list's items.
const AFFINITY_TERMS: [(&str, &str, Option<&str>); 4] = [
    (
        "podAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        None,
    ),
    (
        "podAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        Some("podAffinityTerm"),
    ),
    (
        "podAntiAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        None,
    ),
    (
        "podAntiAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        Some("podAffinityTerm"),
    ),
];

/// Merges the label keys of the new pod `pod` into its affinity terms' and topology spread
/// constraints' selectors.
pub fn merge_into_selectors(pod: &mut Value) {
    let labels = pod["metadata"]["labels"].clone();
    let Some(spec) = pod.get_mut("spec") else {
        return;
    };
    for (kind, list, nested) in AFFINITY_TERMS {
        let items = spec
            .get_mut("affinity")
            .and_then(|a| a.get_mut(kind))
            .and_then(|a| a.get_mut(list))
            .and_then(Value::as_array_mut);
        for item in items.into_iter().flatten() {
            let term = match nested {
                Some(field) => item.get_mut(field),
                None => Some(item),
            };
            if let Some(term) = term {
                merge(
                    term,
                    &labels,
                    &[("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")],
                );
            }
        }
    }
    if let Some(constraints) = spec
        .get_mut("topologySpreadConstraints")
        .and_then(Value::as_array_mut)
    {
        for c in constraints {
            merge(c, &labels, &[("matchLabelKeys", "In")]);
        }
    }
}

/// kube's `applyLabelKeysToLabelSelector` for each list of keys of `term` and its operator.
fn merge(term: &mut Value, labels: &Value, lists: &[(&str, &str)]) {
    if !term["labelSelector"].is_object() {
        return;
    }
    let mut added = Vec::new();
    for (list, operator) in lists {
        for key in term[*list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if let Some(value) = labels.get(key).and_then(Value::as_str) {
                added.push(json!({"key": key, "operator": operator, "values": [value]}));
            }
        }
    }
    if added.is_empty() {
        return;
    }
    let selector = &mut term["labelSelector"];
    match selector.get_mut("matchExpressions").and_then(Value::as_array_mut) {
        Some(expressions) => expressions.extend(added),
        None => selector["matchExpressions"] = Value::Array(added),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::merge_into_selectors;

    #[test]
    fn label_keys_the_pod_has_become_requirements_of_the_selectors() {
        let mut pod = json!({"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
            "spec": {
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"tier": "db"}}, "topologyKey": "zone",
                         "matchLabelKeys": ["pod-template-hash", "missing"], "mismatchLabelKeys": ["app"]},
                        {"topologyKey": "zone", "matchLabelKeys": ["app"]}]},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                        "podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                            "topologyKey": "host", "matchLabelKeys": ["app"]}}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {}, "matchLabelKeys": ["pod-template-hash"]}]}});
        merge_into_selectors(&mut pod);
        let affinity = &pod["spec"]["affinity"];
        assert_eq!(
            affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"],
            json!({"matchLabels": {"tier": "db"}, "matchExpressions": [
                {"key": "pod-template-hash", "operator": "In", "values": ["abc"]},
                {"key": "app", "operator": "NotIn", "values": ["web"]}]})
        );
        assert!(
            affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][1]
                .get("labelSelector")
                .is_none()
        );
        assert_eq!(
            affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
                ["podAffinityTerm"]["labelSelector"]["matchExpressions"],
            json!([{"key": "x", "operator": "Exists"}, {"key": "app", "operator": "In", "values": ["web"]}])
        );
        assert_eq!(
            pod["spec"]["topologySpreadConstraints"][0]["labelSelector"],
            json!({"matchExpressions": [{"key": "pod-template-hash", "operator": "In", "values": ["abc"]}]})
        );
    }
}
