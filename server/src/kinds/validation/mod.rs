//! kube-apiserver's validation of built-in objects, run on every write of the main resource
//! (create, update, patch, apply, and their dry runs): the generic checks every type gets
//! from its schema ([`schema`]), and the rules of kube's `pkg/apis/*/validation` for the
//! commonly used kinds, with kube's field paths and messages. A failure is one `422` naming
//! every problem, as kube joins them.
//!
//! The kinds' rules are data: [`RULES`] names, for each kind, what it checks on every write
//! and what it checks on an update against the stored object.

mod admission_policy;
mod affinity;
mod apiregistration;
pub mod certificates;
mod config;
mod cron;
mod flowcontrol;
mod ingress;
mod label_selector;
mod namespace;
mod node;
pub mod pod;
mod pod_resize;
mod pv_sources;
mod rbac;
mod resources;
mod schema;
mod security_context;
mod service;
mod storage;
mod storage_updates;
mod topology;
mod webhooks;
mod workloads;

use serde_json::Value;

use crate::machinery::errors::{go_quote, ApiError, ApiResult};
use crate::machinery::meta::{dns1035_label_reasons, meta_str, Causes};
use crate::machinery::schema::schemas;
use crate::scheme::ResourceType;

/// What one kind checks beyond its schema.
struct Rules {
    group: &'static str,
    kind: &'static str,
    /// Checks of the object itself, on every write.
    object: fn(&Value, &mut Causes),
    /// Checks of a new object only, on create.
    create: Option<fn(&Value, &mut Causes)>,
    /// Checks of an update against the stored object (immutable fields).
    update: Option<fn(&Value, &Value, &mut Causes)>,
}

const RULES: &[Rules] = &[
    Rules {
        group: "networking.k8s.io",
        kind: "Ingress",
        object: ingress::ingress,
        create: None,
        update: None,
    },
    Rules {
        group: "apiregistration.k8s.io",
        kind: "APIService",
        object: apiregistration::api_service,
        create: None,
        update: None,
    },
    Rules {
        group: "certificates.k8s.io",
        kind: "CertificateSigningRequest",
        // What kube checks depends on what the stored request already has (it tolerates it),
        // so every check is a create or an update check.
        object: |_, _| {},
        create: Some(certificates::create),
        update: Some(certificates::update),
    },
    Rules {
        group: "",
        kind: "Namespace",
        object: namespace::namespace,
        create: None,
        update: None,
    },
    Rules {
        group: "",
        kind: "Node",
        object: node::node,
        create: Some(node::node_create),
        update: Some(node::node_update),
    },
    Rules {
        group: "",
        kind: "Pod",
        object: pod::pod,
        create: Some(pod::pod_create),
        update: Some(pod::pod_update),
    },
    Rules {
        group: "",
        kind: "PodTemplate",
        object: pod::pod_template_object,
        create: None,
        update: None,
    },
    Rules {
        group: "",
        kind: "ReplicationController",
        object: workloads::replication_controller,
        create: None,
        update: None,
    },
    Rules {
        group: "apps",
        kind: "Deployment",
        object: workloads::deployment,
        create: None,
        update: Some(workloads::selector_update),
    },
    Rules {
        group: "apps",
        kind: "ReplicaSet",
        object: workloads::replica_set,
        create: None,
        update: Some(workloads::selector_update),
    },
    Rules {
        group: "apps",
        kind: "StatefulSet",
        object: workloads::stateful_set,
        create: None,
        update: Some(workloads::selector_update),
    },
    Rules {
        group: "apps",
        kind: "DaemonSet",
        object: workloads::daemon_set,
        create: None,
        update: Some(workloads::selector_update),
    },
    Rules {
        group: "batch",
        kind: "Job",
        object: workloads::job,
        create: None,
        update: Some(workloads::job_update),
    },
    Rules {
        group: "batch",
        kind: "CronJob",
        // A schedule's `TZ=` is accepted on update when the stored one had it, so every check
        // is a create or an update check.
        object: |_, _| {},
        create: Some(workloads::cron_job_create),
        update: Some(workloads::cron_job_update),
    },
    Rules {
        group: "",
        kind: "Service",
        object: service::service,
        create: None,
        update: None,
    },
    Rules {
        group: "",
        kind: "ConfigMap",
        object: config::config_map,
        create: None,
        update: Some(config::config_map_update),
    },
    Rules {
        group: "",
        kind: "Secret",
        object: config::secret,
        create: None,
        update: Some(config::secret_update),
    },
    Rules {
        group: "rbac.authorization.k8s.io",
        kind: "Role",
        object: rbac::role,
        create: None,
        update: None,
    },
    Rules {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        object: rbac::cluster_role,
        create: None,
        update: None,
    },
    Rules {
        group: "rbac.authorization.k8s.io",
        kind: "RoleBinding",
        object: rbac::role_binding,
        create: None,
        update: Some(rbac::binding_update),
    },
    Rules {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRoleBinding",
        object: rbac::cluster_role_binding,
        create: None,
        update: Some(rbac::binding_update),
    },
    Rules {
        group: "",
        kind: "PersistentVolume",
        object: storage::persistent_volume,
        create: None,
        update: Some(storage_updates::persistent_volume_update),
    },
    Rules {
        group: "",
        kind: "PersistentVolumeClaim",
        object: storage::persistent_volume_claim,
        create: None,
        update: Some(storage_updates::persistent_volume_claim_update),
    },
    Rules {
        group: "flowcontrol.apiserver.k8s.io",
        kind: "FlowSchema",
        object: flowcontrol::flow_schema,
        create: None,
        update: None,
    },
    Rules {
        group: "flowcontrol.apiserver.k8s.io",
        kind: "PriorityLevelConfiguration",
        object: flowcontrol::priority_level,
        create: None,
        update: None,
    },
    Rules {
        group: "coordination.k8s.io",
        kind: "Lease",
        object: storage::lease,
        create: None,
        update: None,
    },
    Rules {
        group: "admissionregistration.k8s.io",
        kind: "MutatingWebhookConfiguration",
        object: webhooks::mutating,
        create: None,
        update: None,
    },
    Rules {
        group: "admissionregistration.k8s.io",
        kind: "ValidatingAdmissionPolicy",
        object: admission_policy::validating_admission_policy,
        create: None,
        update: None,
    },
    Rules {
        group: "admissionregistration.k8s.io",
        kind: "ValidatingWebhookConfiguration",
        object: webhooks::validating,
        create: None,
        update: None,
    },
    Rules {
        group: "admissionregistration.k8s.io",
        kind: "ValidatingAdmissionPolicyBinding",
        object: admission_policy::validating_admission_policy_binding,
        create: None,
        update: None,
    },
];

/// Checks a write of the built-in object `obj` (over `old`, for an update): `422` naming every
/// problem.
pub fn validate(rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
    refuse_for(rt, obj, causes(rt, old, obj))
}

/// A resize of a pod's containers through `pods/resize` (`old` into `new`): the pod checked as
/// a pod, then [`pod_resize`]'s rules in place of an update's.
pub fn validate_pod_resize(rt: &ResourceType, old: &Value, new: &Value) -> ApiResult<()> {
    let causes = match pod_resize::refused_outright(old) {
        Some(cause) => vec![cause],
        None => causes_with(rt, new, |causes| pod_resize::resize(old, new, causes)),
    };
    refuse_for(rt, new, causes)
}

/// `Ok` without causes, else kube's `422` naming `obj`.
fn refuse_for(rt: &ResourceType, obj: &Value, causes: Causes) -> ApiResult<()> {
    if causes.is_empty() {
        return Ok(());
    }
    let name = meta_str(obj, "name").unwrap_or_default();
    Err(ApiError::invalid(&rt.group, &rt.kind, name, &causes))
}

/// Every problem with `obj` (on an update, against the stored `old`).
fn causes(rt: &ResourceType, old: Option<&Value>, obj: &Value) -> Causes {
    let rules = RULES
        .iter()
        .find(|r| r.group == &*rt.group && r.kind == &*rt.kind);
    causes_with(rt, obj, |causes| match (rules, old) {
        (
            Some(Rules {
                update: Some(update), ..
            }),
            Some(old),
        ) => update(old, obj, causes),
        (
            Some(Rules {
                create: Some(create), ..
            }),
            None,
        ) => create(obj, causes),
        _ => {}
    })
}

/// Every problem with `obj`: the kind's rules of every write first, then `write`'s (the rules
/// of this kind of write), then what its schema requires where the rules said nothing of that
/// field (they word it as kube does for the kind), nor of that duplicate.
fn causes_with(rt: &ResourceType, obj: &Value, write: impl FnOnce(&mut Causes)) -> Causes {
    let mut causes = Causes::new();
    if let Some(rules) = RULES
        .iter()
        .find(|r| r.group == &*rt.group && r.kind == &*rt.kind)
    {
        (rules.object)(obj, &mut causes);
    }
    write(&mut causes);
    if let Some(root) = schemas().builtin(&rt.group, &rt.version, &rt.kind) {
        for (field, message) in schema::check(root, obj) {
            let named = renamed(rt, &field);
            if !causes.iter().any(|(f, m)| {
                [&field, &named].iter().any(|n| covered(f, m, n)) || same_duplicate(f, m, &field, &message)
            }) {
                causes.push((field, message));
            }
        }
    }
    causes
}

/// kube's refusal of a volume source beside the first one, whose own fields it then leaves
/// unchecked.
const EXTRA_VOLUME_SOURCE: &str = "Forbidden: may not specify more than 1 volume type";

/// Whether the rules' cause `rule` at `rule_field` already speaks of `field`: it names it, or
/// it refuses a second volume source that holds it (kube does not look inside that one).
fn covered(rule_field: &str, rule: &str, field: &str) -> bool {
    rule_field == field || (rule == EXTRA_VOLUME_SOURCE && field.starts_with(&format!("{rule_field}.")))
}

/// Fields kube's rules report under another path than the schema's: group, kind, the
/// schema's prefix, kube's.
const RENAMED: &[(&str, &str, &str, &str)] = &[
    (
        "",
        "PersistentVolume",
        "spec.gcePersistentDisk.",
        "spec.persistentDisk.",
    ),
    ("", "PersistentVolume", "spec.cephfs.", "spec.cephFS."),
    ("", "Node", "spec.taints[", "metadata.taints["),
];

/// The path kube's rules name the schema's `field` by.
fn renamed(rt: &ResourceType, field: &str) -> String {
    RENAMED
        .iter()
        .filter(|(group, kind, ..)| *group == &*rt.group && *kind == &*rt.kind)
        .find_map(|(_, _, schema, kube)| field.strip_prefix(schema).map(|rest| format!("{kube}{rest}")))
        .unwrap_or_else(|| field.to_string())
}

/// Whether the rules' cause `rule` (at `rule_field`) already names the duplicate entry the
/// schema found at `field` (kube's rules name some duplicates at the first of the pair, or at
/// a field of it, as topology spread constraints do).
fn same_duplicate(rule_field: &str, rule: &str, field: &str, message: &str) -> bool {
    const DUPLICATE: &str = "Duplicate value";
    let list = field.rsplit_once('[').map(|(list, _)| list);
    message.starts_with(DUPLICATE)
        && rule.starts_with(DUPLICATE)
        && list.is_some_and(|list| rule_field.starts_with(&format!("{list}[")))
}

/// The keys of the JSON object `v` (none for anything else).
fn keys(v: &Value) -> impl Iterator<Item = (&String, &Value)> {
    v.as_object().into_iter().flatten()
}

/// A string field, `""` when absent.
fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// A list field, empty when absent.
fn list_of<'a>(v: &'a Value, field: &str) -> &'a [Value] {
    v.get(field).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// kube's `NotSupported`: `Unsupported value: "x": supported values: "a", "b"`.
fn not_supported(value: &str, supported: &[&str]) -> String {
    let shown: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    format!(
        "Unsupported value: {}: supported values: {}",
        go_quote(value),
        shown.join(", ")
    )
}

/// A field that must hold one of `supported`: kube's `Required value` when it is empty, its
/// `Unsupported value` when it holds another.
fn one_of(value: &str, supported: &[&str], field: String, causes: &mut Causes) {
    if value.is_empty() {
        causes.push((field, "Required value".to_string()));
    } else if !supported.contains(&value) {
        causes.push((field, not_supported(value, supported)));
    }
}

/// kube's `IsDNS1035Label` messages for `value` at `field`.
fn dns1035_label(value: &str, field: &str, causes: &mut Causes) {
    for why in dns1035_label_reasons(value.as_bytes()) {
        causes.push((
            field.to_string(),
            format!("Invalid value: {}: {why}", go_quote(value)),
        ));
    }
}

/// kube's `IsValidPortNum` for `port` at `field`.
fn port_number(port: i64, field: String, causes: &mut Causes) {
    if !(1..=65535).contains(&port) {
        causes.push((
            field,
            format!("Invalid value: {port}: must be between 1 and 65535, inclusive"),
        ));
    }
}

/// kube's `IsValidPortName` messages for `name` (an IANA service name).
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if name.len() > 15 {
        errors.push("must be no more than 15 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errors.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errors.push("must not begin or end with a hyphen");
    }
    errors
}

/// Go's `%#v` of a `map[string]string` (keys sorted, as `fmt` prints maps).
fn go_string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".to_string(),
        Some(m) => {
            let mut pairs: Vec<(&String, &Value)> = m.iter().collect();
            pairs.sort_by(|a, b| a.0.cmp(b.0));
            let shown: Vec<String> = pairs
                .iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_quote(v.as_str().unwrap_or_default())))
                .collect();
            format!("map[string]string{{{}}}", shown.join(", "))
        }
    }
}

#[cfg(test)]
mod tests;
