//! Per-type behaviour layered on the generic store: defaults on create, which types may be
//! created by a PUT, and how the status subresource splits an object.

use serde_json::{json, Value};

use super::registry::ResourceType;

/// Fills in defaults kube-apiserver applies when an object is created.
pub fn default_on_create(rt: &ResourceType, obj: &mut Value) {
    if let ("", "namespaces") = (rt.group, rt.plural) {
        let name = obj["metadata"]["name"].clone();
        obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        if obj.get("spec").and_then(|s| s.get("finalizers")).is_none() {
            obj["spec"]["finalizers"] = json!(["kubernetes"]);
        }
        obj["status"] = json!({"phase": "Active"});
    }
    if let ("", "secrets") = (rt.group, rt.plural) {
        if obj.get("type").is_none() {
            obj["type"] = json!("Opaque");
        }
    }
}

/// Whether a PUT of an absent object creates it (kube-apiserver's AllowCreateOnUpdate).
pub fn allow_create_on_update(rt: &ResourceType) -> bool {
    matches!(
        (rt.group, rt.plural),
        ("", "endpoints") | ("", "events") | ("events.k8s.io", "events") | ("coordination.k8s.io", "leases")
    )
}

/// For types with a status subresource: a write to the main resource keeps the stored status.
pub fn keep_status(rt: &ResourceType, old: &Value, new: &mut Value) {
    if !rt.has_status {
        return;
    }
    if let Some(o) = new.as_object_mut() {
        match old.get("status") {
            Some(s) => {
                o.insert("status".into(), s.clone());
            }
            None => {
                o.remove("status");
            }
        }
    }
}

/// For a write to the status subresource: everything but the status comes from the stored
/// object (metadata changes through `/status` are ignored, as kube-apiserver does).
pub fn take_status_only(old: &Value, new: &Value) -> Value {
    let mut out = old.clone();
    if let Some(o) = out.as_object_mut() {
        match new.get("status") {
            Some(s) => {
                o.insert("status".into(), s.clone());
            }
            None => {
                o.remove("status");
            }
        }
    }
    out
}
