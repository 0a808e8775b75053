//! kube's `ValidateNode` and `ValidateNodeUpdate`, for what clients of a node write: taints
//! with a label-name key, a label value and a known effect, unique by key and effect; no
//! `configSource`; capacity and allocatable quantities not negative (whole for resources
//! counted in units); on create pod CIDRs that are CIDRs, at most one per IP family; on
//! update addresses without duplicates, and a provider id or pod CIDRs that, once set, do not
//! change.

use ipnet::IpNet;
use serde_json::Value;

use super::resources;
use super::{keys, list_of, not_supported, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{label_value_error, qualified_name_error, Causes};

/// The effects a taint may have.
const EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// A Node.
pub fn node(obj: &Value, causes: &mut Causes) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, taint) in list_of(&obj["spec"], "taints").iter().enumerate() {
        // kube reports a Node's taints under `metadata`, the path its `ValidateNode` starts from.
        let at = format!("metadata.taints[{i}]");
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
    if !obj["spec"]["configSource"].is_null() {
        causes.push((
            "spec.configSource".to_string(),
            "Forbidden: configSource may not be set".to_string(),
        ));
    }
    for list in ["capacity", "allocatable"] {
        for (name, value) in keys(&obj["status"][list]) {
            resources::quantity(name, value, &format!("status.{list}.{name}"), causes);
        }
    }
}

/// A new Node: its pod CIDRs are CIDRs, at most one of each IP family, none twice.
pub fn node_create(obj: &Value, causes: &mut Causes) {
    let cidrs: Vec<&str> = list_of(&obj["spec"], "podCIDRs")
        .iter()
        .map(|c| c.as_str().unwrap_or_default())
        .collect();
    let mut families = Vec::new();
    for (i, cidr) in cidrs.iter().enumerate() {
        let at = format!("spec.podCIDRs[{i}]");
        match cidr.parse::<IpNet>() {
            _ if cidr.is_empty() => causes.push((at, "Required value".to_string())),
            Ok(net) => families.push(matches!(net, IpNet::V4(_))),
            Err(_) => causes.push((
                at,
                format!(
                    "Invalid value: {}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                    go_quote(cidr)
                ),
            )),
        }
    }
    if cidrs.len() < 2 {
        return;
    }
    let dual_stack = families.len() == cidrs.len() && families.contains(&true) && families.contains(&false);
    if !dual_stack || cidrs.len() > 2 {
        causes.push((
            "spec.podCIDRs".to_string(),
            format!(
                "Invalid value: {}: may specify no more than one CIDR for each IP family",
                Value::from(cidrs.clone())
            ),
        ));
    }
    for (i, cidr) in cidrs.iter().enumerate() {
        if cidrs[..i].contains(cidr) {
            causes.push((
                format!("spec.podCIDRs[{i}]"),
                format!("Duplicate value: {}", go_quote(cidr)),
            ));
        }
    }
}

/// A Node's update: its addresses are unique; a provider id and pod CIDRs, once set, stay as
/// they are.
pub fn node_update(old: &Value, new: &Value, causes: &mut Causes) {
    let addresses = list_of(&new["status"], "addresses");
    for (i, address) in addresses.iter().enumerate() {
        if addresses[..i].contains(address) {
            // kube shows the Go struct as JSON, with Go's field names.
            let shown = format!(
                "{{\"Type\":{},\"Address\":{}}}",
                Value::from(str_of(address, "type")),
                Value::from(str_of(address, "address"))
            );
            causes.push((
                format!("status.addresses[{i}]"),
                format!("Duplicate value: {shown}"),
            ));
        }
    }
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
