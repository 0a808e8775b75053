//! kube's rules for the claims and leases commonly written by hand: a PersistentVolumeClaim
//! asks for at least one access mode kube knows and for storage; a Lease's duration is
//! positive and its transitions not negative.

use serde_json::Value;

use super::{list_of, not_supported};
use crate::machinery::meta::Causes;

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
