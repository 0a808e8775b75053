//! A pod's `topologySpreadConstraints`, as kube's `validateTopologySpreadConstraints` checks
//! them: a positive `maxSkew`, a `topologyKey`, a known `whenUnsatisfiable`, no two
//! constraints of one `{topologyKey, whenUnsatisfiable}` pair, a positive `minDomains` only
//! with `DoNotSchedule`, known node inclusion policies, `matchLabelKeys` that are label names
//! given with a selector that does not already name them, and a valid label selector.

use serde_json::Value;

use super::label_selector::{label_name, label_selector, Values};
use super::{keys, list_of, not_supported, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;

const WHEN_UNSATISFIABLE: [&str; 2] = ["DoNotSchedule", "ScheduleAnyway"];
const NODE_INCLUSION_POLICIES: [&str; 2] = ["Honor", "Ignore"];

/// Checks the topology spread constraints of the pod spec `spec` at `path`.
pub fn spread_constraints(spec: &Value, path: &str, causes: &mut Causes) {
    let constraints = list_of(spec, "topologySpreadConstraints");
    for (i, c) in constraints.iter().enumerate() {
        let here = format!("{path}.topologySpreadConstraints[{i}]");
        let skew = c.get("maxSkew").and_then(Value::as_i64).unwrap_or(0);
        if skew <= 0 {
            causes.push((
                format!("{here}.maxSkew"),
                format!("Invalid value: {skew}: must be greater than zero"),
            ));
        }
        let key = str_of(c, "topologyKey");
        if key.is_empty() {
            causes.push((
                format!("{here}.topologyKey"),
                "Required value: can not be empty".to_string(),
            ));
        }
        let action = str_of(c, "whenUnsatisfiable");
        if !WHEN_UNSATISFIABLE.contains(&action) {
            causes.push((
                format!("{here}.whenUnsatisfiable"),
                not_supported(action, &WHEN_UNSATISFIABLE),
            ));
        }
        let repeated = constraints[i + 1..]
            .iter()
            .any(|o| str_of(o, "topologyKey") == key && str_of(o, "whenUnsatisfiable") == action);
        if repeated {
            causes.push((
                format!("{here}.{{topologyKey, whenUnsatisfiable}}"),
                format!("Duplicate value: {}", go_quote(&format!("{{{key}, {action}}}"))),
            ));
        }
        if let Some(min) = c.get("minDomains").and_then(Value::as_i64) {
            let at = format!("{here}.minDomains");
            if min <= 0 {
                causes.push((
                    at.clone(),
                    format!("Invalid value: {min}: must be greater than zero"),
                ));
            }
            if action != "DoNotSchedule" {
                causes.push((
                    at,
                    format!("Invalid value: {min}: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"),
                ));
            }
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if let Some(p) = c.get(policy).and_then(Value::as_str) {
                if !NODE_INCLUSION_POLICIES.contains(&p) {
                    causes.push((
                        format!("{here}.{policy}"),
                        not_supported(p, &NODE_INCLUSION_POLICIES),
                    ));
                }
            }
        }
        match_label_keys(c, &format!("{here}.matchLabelKeys"), causes);
        label_selector(
            &c["labelSelector"],
            Values::Checked,
            &format!("{here}.labelSelector"),
            causes,
        );
    }
}

/// kube's `validateMatchLabelKeysInTopologySpread`.
fn match_label_keys(c: &Value, path: &str, causes: &mut Causes) {
    let given = list_of(c, "matchLabelKeys");
    if given.is_empty() {
        return;
    }
    let selector = &c["labelSelector"];
    if !selector.is_object() {
        causes.push((
            path.to_string(),
            "Forbidden: must not be specified when labelSelector is not set".to_string(),
        ));
    }
    let mut named: Vec<&str> = keys(&selector["matchLabels"]).map(|(k, _)| k.as_str()).collect();
    named.extend(
        list_of(selector, "matchExpressions")
            .iter()
            .map(|e| str_of(e, "key")),
    );
    for (i, key) in given.iter().enumerate() {
        let key = key.as_str().unwrap_or_default();
        let at = format!("{path}[{i}]");
        label_name(key, &at, causes);
        if named.contains(&key) {
            causes.push((
                at,
                format!(
                    "Invalid value: {}: exists in both matchLabelKeys and labelSelector",
                    go_quote(key)
                ),
            ));
        }
    }
}
