//! kube's rules for the workloads that carry a pod template (`pkg/apis/apps/validation`,
//! `pkg/apis/batch/validation`, and the ReplicationController's in core): a selector that is
//! set, not empty and matches the template's labels, the template's pod spec, the restart
//! policy the workload's pods may have, and the fields fixed once the workload exists (the
//! selector; a Job's template, completions and completion mode).

use serde_json::Value;

use super::cron;
use super::pod::pod_template;
use super::{go_string_map, not_supported, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;
use crate::machinery::selector::{selector_string, LabelSelector};

/// kube's message for a template whose labels the selector does not match.
const SELECTOR_MISMATCH: &str = "`selector` does not match template `labels`";

/// A Deployment.
pub fn deployment(obj: &Value, causes: &mut Causes) {
    apps_workload(obj, "deployment", causes);
}

/// A ReplicaSet (kube names it a deployment in this message too).
pub fn replica_set(obj: &Value, causes: &mut Causes) {
    apps_workload(obj, "deployment", causes);
}

/// A StatefulSet.
pub fn stateful_set(obj: &Value, causes: &mut Causes) {
    apps_workload(obj, "statefulset", causes);
}

/// A DaemonSet.
pub fn daemon_set(obj: &Value, causes: &mut Causes) {
    apps_workload(obj, "daemonset", causes);
}

/// The `apps/v1` workloads: replicas not negative, a non-empty selector matching the
/// template's labels, the template's spec, and pods that always restart.
fn apps_workload(obj: &Value, what: &str, causes: &mut Causes) {
    let spec = &obj["spec"];
    replicas(spec, causes);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => causes.push(("spec.selector".to_string(), "Required value".to_string())),
        Some(selector) if selector_string(selector).is_empty() => causes.push((
            "spec.selector".to_string(),
            format!(
                "Invalid value: {}: empty selector is invalid for {what}",
                label_selector_go(selector)
            ),
        )),
        Some(selector) => template_matches(selector, &spec["template"], causes),
    }
    pod_template(&spec["template"], "spec.template", causes);
    let restart = str_of(&spec["template"]["spec"], "restartPolicy");
    if restart != "Always" {
        causes.push((
            "spec.template.spec.restartPolicy".to_string(),
            not_supported(restart, &["Always"]),
        ));
    }
}

/// A ReplicationController: its selector (a label map) set and matching the template.
pub fn replication_controller(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    let selector = spec
        .get("selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty());
    if selector.is_none() {
        causes.push(("spec.selector".to_string(), "Required value".to_string()));
    }
    replicas(spec, causes);
    let template = &spec["template"];
    if template.is_null() {
        causes.push(("spec.template".to_string(), "Required value".to_string()));
        return;
    }
    if let Some(selector) = selector {
        let labels = &template["metadata"]["labels"];
        let matched = selector.iter().all(|(k, v)| labels.get(k) == Some(v));
        if !matched {
            causes.push((
                "spec.template.metadata.labels".to_string(),
                format!(
                    "Invalid value: {}: {SELECTOR_MISMATCH}",
                    go_string_map(template["metadata"].get("labels"))
                ),
            ));
        }
    }
    pod_template(template, "spec.template", causes);
    let restart = str_of(&template["spec"], "restartPolicy");
    if restart != "Always" {
        causes.push((
            "spec.template.spec.restartPolicy".to_string(),
            not_supported(restart, &["Always"]),
        ));
    }
}

fn replicas(spec: &Value, causes: &mut Causes) {
    if let Some(n) = spec.get("replicas").and_then(Value::as_i64).filter(|n| *n < 0) {
        causes.push((
            "spec.replicas".to_string(),
            format!("Invalid value: {n}: must be greater than or equal to 0"),
        ));
    }
}

/// The template's labels must satisfy `selector` (a `LabelSelector`).
fn template_matches(selector: &Value, template: &Value, causes: &mut Causes) {
    match LabelSelector::parse(&selector_string(selector)) {
        Ok(parsed) if !parsed.matches(template) => causes.push((
            "spec.template.metadata.labels".to_string(),
            format!(
                "Invalid value: {}: {SELECTOR_MISMATCH}",
                go_string_map(template["metadata"].get("labels"))
            ),
        )),
        Ok(_) => {}
        Err(_) => causes.push((
            "spec.selector".to_string(),
            format!(
                "Invalid value: {}: invalid label selector",
                label_selector_go(selector)
            ),
        )),
    }
}

/// The `apps/v1` workloads' selector is fixed once set.
pub fn selector_update(old: &Value, new: &Value, causes: &mut Causes) {
    immutable_selector(old, new, causes);
}

fn immutable_selector(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["spec"]["selector"], &new["spec"]["selector"]);
    if selector_string(before) != selector_string(after) || before.is_null() != after.is_null() {
        causes.push((
            "spec.selector".to_string(),
            format!("Invalid value: {}: field is immutable", label_selector_go(after)),
        ));
    }
}

/// A Job: a selector matching the template, the template's spec, and pods that do not
/// always restart.
pub fn job(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => causes.push(("spec.selector".to_string(), "Required value".to_string())),
        Some(selector) => template_matches(selector, &spec["template"], causes),
    }
    pod_template(&spec["template"], "spec.template", causes);
    job_restart_policy(&spec["template"], "spec.template.spec.restartPolicy", causes);
}

/// A Job's pods restart on failure or never.
fn job_restart_policy(template: &Value, path: &str, causes: &mut Causes) {
    match str_of(&template["spec"], "restartPolicy") {
        "OnFailure" | "Never" => {}
        "Always" | "" => causes.push((
            path.to_string(),
            "Required value: valid values: \"OnFailure\", \"Never\"".to_string(),
        )),
        other => causes.push((path.to_string(), not_supported(other, &["OnFailure", "Never"]))),
    }
}

/// What a suspended Job that never started may still change in its template: where and
/// when its pods schedule, and their labels and annotations.
const SCHEDULING_DIRECTIVES: [(&str, &str); 6] = [
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "affinity"),
    ("spec", "schedulingGates"),
    ("metadata", "labels"),
    ("metadata", "annotations"),
];

/// A Job's update: its selector, completions, completion mode and template are fixed (but
/// for the scheduling directives of a suspended Job that never started).
pub fn job_update(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["spec"], &new["spec"]);
    for field in ["completions", "completionMode"] {
        let value = after.get(field).unwrap_or(&Value::Null);
        if before.get(field).unwrap_or(&Value::Null) != value {
            causes.push((
                format!("spec.{field}"),
                format!("Invalid value: {}: field is immutable", go_scalar(value)),
            ));
        }
    }
    immutable_selector(old, new, causes);
    let mut template = after["template"].clone();
    let unstarted = before["suspend"] == Value::Bool(true) && old["status"].get("startTime").is_none();
    if unstarted {
        for (part, field) in SCHEDULING_DIRECTIVES {
            let stored = before["template"][part].get(field).cloned();
            if let Some(p) = template.get_mut(part).and_then(Value::as_object_mut) {
                match stored {
                    Some(v) => p.insert(field.into(), v),
                    None => p.remove(field),
                };
            }
        }
    }
    if template != before["template"] {
        causes.push((
            "spec.template".to_string(),
            format!("Invalid value: {}: field is immutable", after["template"]),
        ));
    }
}

/// A new CronJob: a schedule without `TZ=`, and its job template.
pub fn cron_job_create(obj: &Value, causes: &mut Causes) {
    cron_job(obj, false, causes);
}

/// A CronJob's update: as on create, but a `TZ=` the stored schedule had stays accepted.
pub fn cron_job_update(old: &Value, new: &Value, causes: &mut Causes) {
    cron_job(new, str_of(&old["spec"], "schedule").contains("TZ"), causes);
}

/// A CronJob: a schedule and time zone ([`cron`]), and a job template whose pods do not always
/// restart.
fn cron_job(obj: &Value, tz_allowed: bool, causes: &mut Causes) {
    let spec = &obj["spec"];
    cron::schedule(spec, tz_allowed, causes);
    let template = &spec["jobTemplate"]["spec"]["template"];
    pod_template(template, "spec.jobTemplate.spec.template", causes);
    job_restart_policy(
        template,
        "spec.jobTemplate.spec.template.spec.restartPolicy",
        causes,
    );
}

/// A scalar as kube's field errors print it (`null` when absent).
fn go_scalar(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

/// A `LabelSelector` as its generated Go `String()` prints it, as kube's field errors show
/// it: `&LabelSelector{MatchLabels:map[string]string{app: web,},MatchExpressions:[]LabelSelectorRequirement{},}`.
fn label_selector_go(selector: &Value) -> String {
    if selector.is_null() {
        return "nil".to_string();
    }
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let mut labels: Vec<(&String, &Value)> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .collect();
    labels.sort_by(|a, b| a.0.cmp(b.0));
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {},", text(v))).collect();
    let expressions: String = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let values: Vec<String> = e["values"].as_array().into_iter().flatten().map(text).collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                text(&e["key"]),
                text(&e["operator"]),
                values.join(" ")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )
}
