//! kube's `ValidateNode` and `ValidateNodeUpdate`, for what clients of a node write: taints
//! with a label-name key, a label value and a known effect, unique by key and effect; and a
//! provider id or pod CIDRs that, once set, do not change.

use serde_json::Value;

use super::{list_of, not_supported, str_of};
use crate::machinery::meta::{label_value_error, qualified_name_error, Causes};

/// The effects a taint may have.
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A Node.
pub fn node(obj: &Value, causes: &mut Causes) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in list_of(&obj["spec"], "taints").iter().enumerate() {
        let at = format!("spec.taints[{i}]");
        let (key, value, effect) = (
            str_of(taint, "key"),
            str_of(taint, "value"),
            str_of(taint, "effect"),
        );
        if let Some(e) = qualified_name_error(key) {
            causes.push((format!("{at}.key"), e));
        }
        if let Some(e) = label_value_error(value) {
            causes.push((format!("{at}.value"), e));
        }
        match effect {
            "" => causes.push((format!("{at}.effect"), "Required value".to_string())),
            e if !EFFECTS.contains(&e) => causes.push((format!("{at}.effect"), not_supported(e, EFFECTS))),
            _ => {}
        }
        if seen.contains(&(key, effect)) {
            let added = taint
                .get("timeAdded")
                .and_then(Value::as_str)
                .map_or("<nil>".to_string(), |t| format!("{t:?}"));
            causes.push((
                at,
                format!(
                    "Duplicate value: core.Taint{{Key:{key:?}, Value:{value:?}, Effect:{effect:?}, TimeAdded:{added}}}: taints must be unique by key and effect pair"
                ),
            ));
            continue;
        }
        seen.push((key, effect));
    }
}

/// A Node's update: a provider id and pod CIDRs, once set, stay as they are.
pub fn node_update(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["spec"], &new["spec"]);
    if !str_of(before, "providerID").is_empty() && before["providerID"] != after["providerID"] {
        causes.push((
            "spec.providerID".to_string(),
            "Forbidden: node updates may not change providerID except from \"\" to valid".to_string(),
        ));
    }
    let (was, is) = (list_of(before, "podCIDRs"), list_of(after, "podCIDRs"));
    if !was.is_empty() && was != is {
        causes.push((
            "spec.podCIDRs".to_string(),
            "Forbidden: node updates may not change podCIDR except from \"\" to valid".to_string(),
        ));
    }
}
