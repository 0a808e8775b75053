//! Jobs: a generation, an empty status, dependents orphaned by default (kept in `batch/v1`
//! for backward compatibility), and — unless the Job asks for a manual selector — its pods
//! labelled with its name and uid and selected by the uid.

use serde_json::{json, Value};

use crate::kinds::strategy::Builtin;
use crate::registry::strategy::GcPolicy;

/// The Job strategy.
pub const JOB: Builtin = Builtin {
    generation: true,
    initial_status: Some(|| json!({})),
    on_create: Some(select_pods),
    gc: GcPolicy::Orphan,
    ..Builtin::new("batch", "Job")
};

/// Unless the Job asks for a manual selector, its pods are labelled with the Job's name and
/// uid and the Job selects them by uid.
fn select_pods(job: &mut Value) {
    let Some(job) = job.as_object_mut() else {
        return;
    };
    let spec_manual = job
        .get("spec")
        .and_then(|s| s.get("manualSelector"))
        .and_then(Value::as_bool);
    if spec_manual == Some(true) {
        return;
    }
    let name = job
        .get("metadata")
        .and_then(|m| m.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    let uid = job
        .get("metadata")
        .and_then(|m| m.get("uid"))
        .cloned()
        .unwrap_or(Value::Null);
    let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
        let meta = template.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if labels.is_null() {
                *labels = json!({});
            }
            if let Some(labels) = labels.as_object_mut() {
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", &uid),
                    ("batch.kubernetes.io/job-name", &name),
                    ("controller-uid", &uid),
                    ("job-name", &name),
                ] {
                    labels.entry(k).or_insert_with(|| v.clone());
                }
            }
        }
    }
    let selector = spec.entry("selector").or_insert_with(|| json!({}));
    if selector.is_null() {
        *selector = json!({});
    }
    if let Some(selector) = selector.as_object_mut() {
        let labels = selector.entry("matchLabels").or_insert_with(|| json!({}));
        if labels.is_null() {
            *labels = json!({});
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.entry("batch.kubernetes.io/controller-uid").or_insert(uid);
        }
    }
}
