//! Pods: a new pod starts `Pending` with its QoS class, and a delete of a pod that is
//! scheduled and not finished waits for its kubelet (graceful deletion).

use serde_json::{json, Value};

use crate::kinds::qos;
use crate::kinds::strategy::Builtin;

/// The Pod strategy.
pub const POD: Builtin = Builtin {
    generation: true,
    on_create: Some(on_create),
    grace_period: Some(grace_period),
    returns_deleted_object: true,
    ..Builtin::new("", "Pod")
};

/// The status a new pod starts with (`ServiceAccount`, `Priority` and
/// `DefaultTolerationSeconds` add the rest at admission).
fn on_create(pod: &mut Value) {
    let qos_class = qos::pod_qos(pod.get("spec").unwrap_or(&Value::Null));
    if let Some(o) = pod.as_object_mut() {
        o.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": qos_class}),
        );
    }
}

/// As kube-apiserver's pod strategy decides it: a pod that is scheduled and not finished
/// waits for its kubelet (the request's period, else its `terminationGracePeriodSeconds`); any
/// other is deleted at once.
fn grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let scheduled = pod["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty());
    let finished = matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if !scheduled || finished {
        return 0;
    }
    match requested.or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64()) {
        Some(p) if p < 0 => 1,
        Some(p) => p,
        None => 0,
    }
}
