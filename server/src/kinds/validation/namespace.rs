//! kube's `ValidateNamespace`: the finalizers of a Namespace's `spec` are qualified names, and
//! one without a prefix is one of Kubernetes' own (`kubernetes`, `orphan`,
//! `foregroundDeletion`).

use serde_json::Value;

use super::list_of;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{qualified_name_error, Causes};

/// The finalizers Kubernetes itself uses, which need no domain prefix.
const STANDARD_FINALIZERS: &[&str] = &["kubernetes", "orphan", "foregroundDeletion"];

/// A Namespace.
pub fn namespace(obj: &Value, causes: &mut Causes) {
    let finalizers = list_of(&obj["spec"], "finalizers");
    for name in finalizers.iter().filter_map(Value::as_str) {
        if let Some(e) = qualified_name_error(name) {
            causes.push(("spec.finalizers".to_string(), e));
        }
        if !name.contains('/') && !STANDARD_FINALIZERS.contains(&name) {
            causes.push((
                "spec.finalizers".to_string(),
                format!(
                    "Invalid value: {}: name is neither a standard finalizer name nor is it fully qualified",
                    go_quote(name)
                ),
            ));
        }
    }
}
