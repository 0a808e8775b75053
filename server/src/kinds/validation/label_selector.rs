//! apimachinery's checks of label maps and label selectors embedded in objects
//! (`ValidateLabels`, `ValidateLabelName`, `ValidateLabelSelector`): every key a qualified
//! name, every value a label value, and each selector requirement's operator known with the
//! values it needs. Pod affinity terms, topology spread constraints and node selectors use
//! them; each reason kube gives is its own cause.

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
    label_name(str_of(e, "key"), &format!("{path}.key"), causes);
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
