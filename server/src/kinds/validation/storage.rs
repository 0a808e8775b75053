//! kube's rules for the volumes, claims and leases commonly written by hand: a
//! PersistentVolume has known access modes, a storage capacity, a known reclaim policy and
//! volume mode, valid node affinity, a class name that is a DNS subdomain, and exactly one
//! valid volume source ([`pv_sources`]; a local one with node affinity); a
//! PersistentVolumeClaim asks for at least one access mode kube knows and for storage; a
//! Lease's duration is positive and its transitions not negative.

use serde_json::Value;

use super::affinity::node_selector;
use super::{list_of, not_supported, pv_sources, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_subdomain_reasons, Causes};

/// The access modes kube knows, as its error lists them (sorted).
const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

/// A PersistentVolumeClaim.
pub fn persistent_volume_claim(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    let modes = list_of(spec, "accessModes");
    if modes.is_empty() {
        causes.push((
            "spec.accessModes".to_string(),
            "Required value: at least 1 access mode is required".to_string(),
        ));
    }
    for mode in modes {
        let mode = mode.as_str().unwrap_or_default();
        if !ACCESS_MODES.contains(&mode) {
            causes.push(("spec.accessModes".to_string(), not_supported(mode, &ACCESS_MODES)));
        }
    }
    if spec["resources"]["requests"].get("storage").is_none() {
        causes.push((
            "spec.resources[storage]".to_string(),
            "Required value".to_string(),
        ));
    }
}

/// A PersistentVolume (kube's `ValidatePersistentVolumeSpec`).
pub fn persistent_volume(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    let modes: Vec<&str> = list_of(spec, "accessModes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if modes.is_empty() {
        causes.push(("spec.accessModes".to_string(), "Required value".to_string()));
    }
    for mode in modes.iter().filter(|m| !ACCESS_MODES.contains(m)) {
        causes.push(("spec.accessModes".to_string(), not_supported(mode, &ACCESS_MODES)));
    }
    let once_pod = modes.contains(&"ReadWriteOncePod");
    if once_pod
        && modes
            .iter()
            .any(|m| *m != "ReadWriteOncePod" && ACCESS_MODES.contains(m))
    {
        causes.push((
            "spec.accessModes".to_string(),
            "Forbidden: may not use ReadWriteOncePod with other access modes".to_string(),
        ));
    }
    let capacity = spec.get("capacity").and_then(Value::as_object);
    if capacity.is_none_or(|c| c.is_empty()) {
        causes.push(("spec.capacity".to_string(), "Required value".to_string()));
    }
    if capacity.is_none_or(|c| c.len() != 1 || !c.contains_key("storage")) {
        // kube prints the Go map (`core.ResourceList(nil)` when there is none).
        let shown = match capacity {
            None => "core.ResourceList(nil)".to_string(),
            Some(c) => format!("core.ResourceList{}", Value::Object(c.clone())),
        };
        causes.push((
            "spec.capacity".to_string(),
            format!("Unsupported value: {shown}: supported values: \"storage\""),
        ));
    }
    let policy = str_of(spec, "persistentVolumeReclaimPolicy");
    if !policy.is_empty() && !["Delete", "Recycle", "Retain"].contains(&policy) {
        causes.push((
            "spec.persistentVolumeReclaimPolicy".to_string(),
            not_supported(policy, &["Delete", "Recycle", "Retain"]),
        ));
    }
    if spec["nodeAffinity"].is_object() {
        match &spec["nodeAffinity"]["required"] {
            Value::Null => causes.push((
                "spec.nodeAffinity.required".to_string(),
                "Required value: must specify required node constraints".to_string(),
            )),
            required => node_selector(required, "spec.nodeAffinity.required", causes),
        }
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    pv_sources::sources(spec, name, causes);
    let host_root = spec["hostPath"]["path"]
        .as_str()
        .is_some_and(|p| p.trim_end_matches('/').is_empty() && p.starts_with('/'));
    if host_root && policy == "Recycle" {
        causes.push((
            "spec.persistentVolumeReclaimPolicy".to_string(),
            "Forbidden: may not be 'recycle' for a hostPath mount of '/'".to_string(),
        ));
    }
    class_name(spec, "storageClassName", causes);
    let mode = str_of(spec, "volumeMode");
    if !mode.is_empty() && !["Block", "Filesystem"].contains(&mode) {
        causes.push((
            "spec.volumeMode".to_string(),
            not_supported(mode, &["Block", "Filesystem"]),
        ));
    }
}

/// kube's `ValidateClassName` of a set class name at `spec.<field>`: a DNS subdomain.
fn class_name(spec: &Value, field: &str, causes: &mut Causes) {
    let class = str_of(spec, field);
    if class.is_empty() {
        return;
    }
    for why in dns_subdomain_reasons(class.as_bytes()) {
        causes.push((
            format!("spec.{field}"),
            format!("Invalid value: {}: {why}", go_quote(class)),
        ));
    }
}

/// A Lease.
pub fn lease(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    if let Some(d) = spec["leaseDurationSeconds"].as_i64().filter(|d| *d <= 0) {
        causes.push((
            "spec.leaseDurationSeconds".to_string(),
            format!("Invalid value: {d}: must be greater than 0"),
        ));
    }
    if let Some(t) = spec["leaseTransitions"].as_i64().filter(|t| *t < 0) {
        causes.push((
            "spec.leaseTransitions".to_string(),
            format!("Invalid value: {t}: must be greater than or equal to 0"),
        ));
    }
}
