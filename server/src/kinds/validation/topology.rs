//! A pod's `topologySpreadConstraints`, as kube's `validateTopologySpreadConstraints` checks
//! them: a positive `maxSkew`, a `topologyKey`, a known `whenUnsatisfiable`, no two
//! constraints of one `{topologyKey, whenUnsatisfiable}` pair, a positive `minDomains` only
//! with `DoNotSchedule`, known node inclusion policies, `matchLabelKeys` checked as pod
//! affinity terms' are (kube merges them into the selector, as it does for those), and a
//! valid label selector.

use serde_json::Value;

use super::label_selector::{label_keys, label_selector, Values};
use super::{list_of, not_supported, str_of};
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
        label_keys(c, &here, causes);
        label_selector(
            &c["labelSelector"],
            Values::Checked,
            &format!("{here}.labelSelector"),
            causes,
        );
    }
}
