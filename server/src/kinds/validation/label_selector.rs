//! apimachinery's checks of label maps and label selectors embedded in objects
//! (`ValidateLabels`, `ValidateLabelName`, `ValidateLabelSelector`): every key a qualified
//! name, every value a label value, and each selector requirement's operator known with the
//! values it needs; and the label keys merged into a selector. Pod affinity terms, topology
//! spread constraints and node selectors use them; each reason kube gives is its own cause.

use std::collections::HashSet;

use serde_json::Value;

use super::{keys, list_of, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{label_value_reasons, qualified_name_reasons, Causes};

/// Whether a selector's values must be label values (kube relaxes it only for objects stored
/// before it checked them, and for preferred node affinity terms).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Values {
    Checked,
    Unchecked,
}

/// kube's `Invalid value` cause for a string.
fn invalid(path: &str, value: &str, why: &str, causes: &mut Causes) {
    causes.push((
        path.to_string(),
        format!("Invalid value: {}: {why}", go_quote(value)),
    ));
}

/// `ValidateLabelName`: every reason `key` is not a qualified name, at `path`.
pub fn label_name(key: &str, path: &str, causes: &mut Causes) {
    for why in qualified_name_reasons(key) {
        invalid(path, key, &why, causes);
    }
}

/// `IsValidLabelValue` for each reason `value` is not a label value, at `path`.
pub fn label_value(value: &str, path: &str, causes: &mut Causes) {
    for why in label_value_reasons(value) {
        invalid(path, value, &why, causes);
    }
}

/// `ValidateLabels`: the keys and values of a label map, all reported at `path`.
pub fn labels(map: &Value, path: &str, causes: &mut Causes) {
    for (k, v) in keys(map) {
        label_name(k, path, causes);
        label_value(v.as_str().unwrap_or_default(), path, causes);
    }
}

/// `ValidateLabelSelector` of the selector at `path` (nothing when it is absent).
pub fn label_selector(selector: &Value, values: Values, path: &str, causes: &mut Causes) {
    if !selector.is_object() {
        return;
    }
    labels(&selector["matchLabels"], &format!("{path}.matchLabels"), causes);
    for (i, e) in list_of(selector, "matchExpressions").iter().enumerate() {
        requirement(e, values, &format!("{path}.matchExpressions[{i}]"), causes);
    }
}

/// `ValidateLabelSelectorRequirement`.
fn requirement(e: &Value, values: Values, path: &str, causes: &mut Causes) {
    let given = list_of(e, "values");
    match str_of(e, "operator") {
        "In" | "NotIn" if given.is_empty() => causes.push((
            format!("{path}.values"),
            "Required value: must be specified when `operator` is 'In' or 'NotIn'".to_string(),
        )),
        "Exists" | "DoesNotExist" if !given.is_empty() => causes.push((
            format!("{path}.values"),
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_string(),
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
        other => invalid(
            &format!("{path}.operator"),
            other,
            "not a valid selector operator",
            causes,
        ),
    }
    key_and_values(e, given, values, path, causes);
}

/// A requirement's `key` (a label name) and, when `values` says so, each of its `values`
/// (label values), at `path`: what label selector and node selector requirements share.
pub fn key_and_values(req: &Value, given: &[Value], values: Values, path: &str, causes: &mut Causes) {
    label_name(str_of(req, "key"), &format!("{path}.key"), causes);
    if values == Values::Checked {
        for (i, v) in given.iter().enumerate() {
            label_value(
                v.as_str().unwrap_or_default(),
                &format!("{path}.values[{i}]"),
                causes,
            );
        }
    }
}

/// kube's `ValidateMatchLabelKeysAndMismatchLabelKeys` for the pod affinity term or topology
/// spread constraint `term` at `path`: the keys are label names, given only with a label
/// selector; a `matchLabelKeys` key not required twice by the selector (once merged from the
/// key, on a pod's create, and once as written), nor in `mismatchLabelKeys`.
pub fn label_keys(term: &Value, path: &str, causes: &mut Causes) {
    let selector = &term["labelSelector"];
    let strings = |field: &str| -> Vec<&str> {
        list_of(term, field)
            .iter()
            .map(|k| k.as_str().unwrap_or_default())
            .collect()
    };
    let (matching, mismatching) = (strings("matchLabelKeys"), strings("mismatchLabelKeys"));
    for (field, list) in [("matchLabelKeys", &matching), ("mismatchLabelKeys", &mismatching)] {
        let at = format!("{path}.{field}");
        if list.is_empty() {
            continue;
        }
        if !selector.is_object() {
            causes.push((
                at,
                "Forbidden: must not be specified when labelSelector is not set".to_string(),
            ));
            continue;
        }
        for (i, key) in list.iter().enumerate() {
            label_name(key, &format!("{at}[{i}]"), causes);
        }
    }
    if selector.is_object() {
        let mut seen: HashSet<&str> = keys(&selector["matchLabels"]).map(|(k, _)| k.as_str()).collect();
        for e in list_of(selector, "matchExpressions") {
            let key = str_of(e, "key");
            if let Some(i) = matching
                .iter()
                .rposition(|k| *k == key)
                .filter(|_| seen.contains(key))
            {
                // kube indexes the term itself here, not its matchLabelKeys.
                causes.push((
                    format!("{path}[{i}]"),
                    format!(
                        "Invalid value: {}: exists in both matchLabelKeys and labelSelector",
                        go_quote(key)
                    ),
                ));
            }
            seen.insert(key);
        }
    }
    for (i, key) in matching.iter().enumerate() {
        if mismatching.contains(key) {
            causes.push((
                format!("{path}.matchLabelKeys[{i}]"),
                format!(
                    "Invalid value: {}: exists in both matchLabelKeys and mismatchLabelKeys",
                    go_quote(key)
                ),
            ));
        }
    }
}
