//! Namespaces: a new namespace starts `Active` with the `kubernetes` finalizer, and a delete
//! only marks it `Terminating` — the namespace controller empties it and then removes it.

use serde_json::{json, Value};

use crate::kinds::strategy::Builtin;

/// The Namespace strategy.
pub const NAMESPACE: Builtin = Builtin {
    initial_status: Some(|| json!({"phase": "Active"})),
    on_create: Some(on_create),
    terminating: Some(terminating),
    returns_deleted_object: true,
    ..Builtin::new("", "Namespace")
};

fn on_create(ns: &mut Value) {
    if let Some(o) = ns.as_object_mut() {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(spec) = spec.as_object_mut() {
            spec.entry("finalizers").or_insert_with(|| json!(["kubernetes"]));
        }
    }
}

fn terminating(ns: &mut Value) {
    ns["status"]["phase"] = json!("Terminating");
}
