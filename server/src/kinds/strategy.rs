//! Per-type behaviour layered on the generic store, as kube-apiserver's strategies do it: which
//! types track `metadata.generation`, what status a new object starts with, defaulting on every
//! write, the status/spec split, which types may be created by a PUT, and the admission-time
//! fields of pods and jobs.
//!
//! The differences between types are data ([`BEHAVIOURS`], [`crate::kinds::defaults`]); the few that
//! are behaviour (pods, jobs, namespaces, services) are small functions called from here.

use serde_json::{json, Map, Value};

use crate::apiextensions::{self, definition, structural};
use crate::kinds::allocation;
use crate::kinds::defaults;
use crate::kinds::qos;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::registry::ResourceType;
use crate::store::{Cas, Store};

/// What a built-in type does beyond defaulting.
struct Behaviour {
    group: &'static str,
    kind: &'static str,
    /// `metadata.generation` starts at 1 and moves with every change of `spec`.
    generation: bool,
    /// The status a new object starts with (clients cannot set it on create).
    initial_status: Option<fn() -> Value>,
}

const fn b(
    group: &'static str,
    kind: &'static str,
    generation: bool,
    initial_status: Option<fn() -> Value>,
) -> Behaviour {
    Behaviour {
        group,
        kind,
        generation,
        initial_status,
    }
}

/// Built-in types with a generation or a reset status, as kube-apiserver 1.35 has them.
const BEHAVIOURS: &[Behaviour] = &[
    b("", "Pod", true, None),
    b("", "ReplicationController", true, Some(|| json!({"replicas": 0}))),
    b("", "Service", false, Some(|| json!({"loadBalancer": {}}))),
    b(
        "",
        "PersistentVolume",
        false,
        Some(|| json!({"phase": "Pending"})),
    ),
    b(
        "",
        "PersistentVolumeClaim",
        false,
        Some(|| json!({"phase": "Pending"})),
    ),
    b("", "Namespace", false, Some(|| json!({"phase": "Active"}))),
    b("", "ResourceQuota", false, Some(|| json!({}))),
    b("apps", "Deployment", true, Some(|| json!({}))),
    b("apps", "ReplicaSet", true, Some(|| json!({"replicas": 0}))),
    b(
        "apps",
        "StatefulSet",
        true,
        Some(|| json!({"replicas": 0, "availableReplicas": 0})),
    ),
    b(
        "apps",
        "DaemonSet",
        true,
        Some(
            || json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}),
        ),
    ),
    b("batch", "Job", true, Some(|| json!({}))),
    b("batch", "CronJob", true, Some(|| json!({}))),
    b(
        "autoscaling",
        "HorizontalPodAutoscaler",
        false,
        Some(|| json!({"desiredReplicas": 0})),
    ),
    b(
        "policy",
        "PodDisruptionBudget",
        true,
        Some(
            || json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
        ),
    ),
    b(
        "networking.k8s.io",
        "Ingress",
        true,
        Some(|| json!({"loadBalancer": {}})),
    ),
    b("networking.k8s.io", "IngressClass", true, None),
    b("networking.k8s.io", "NetworkPolicy", true, None),
    b("discovery.k8s.io", "EndpointSlice", true, None),
    b("apiextensions.k8s.io", "CustomResourceDefinition", true, None),
];

fn behaviour(rt: &ResourceType) -> Option<&'static Behaviour> {
    BEHAVIOURS
        .iter()
        .find(|b| b.group == &*rt.group && b.kind == &*rt.kind)
}

/// Whether objects of `rt` carry a `metadata.generation` (every custom resource does).
pub fn tracks_generation(rt: &ResourceType) -> bool {
    rt.custom.is_some() || behaviour(rt).is_some_and(|b| b.generation)
}

fn is_definition(rt: &ResourceType) -> bool {
    (&*rt.group, &*rt.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition")
}

/// What counts as a change of the spec for the generation: `spec` for built-in types; for a
/// custom resource everything but `metadata` (and `status` when it is a subresource).
fn generation_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    if rt.custom.is_none() {
        return old.get("spec") != new.get("spec");
    }
    let content = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| k.as_str() != "metadata" && !(rt.has_status && k.as_str() == "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    content(old) != content(new)
}

/// Checks a write of `obj` (over `old`, for an update) beyond its metadata: a custom resource
/// against its version's schema, a CustomResourceDefinition against the rules that keep it
/// servable. A `422` naming every problem.
pub fn validate(rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or_default();
    let causes = if let Some(custom) = &rt.custom {
        if old.is_none() && custom.terminating {
            return Err(ApiError::method_not_allowed_because(
                "create not allowed while custom resource definition is terminating",
            ));
        }
        structural::validate(&custom.declared, &custom.patterns, obj)
    } else if is_definition(rt) {
        match old {
            Some(old) => definition::validate_update(old, obj),
            None => definition::validate(obj),
        }
    } else {
        Vec::new()
    };
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&rt.group, &rt.kind, name, &causes))
    }
}

fn set_generation(obj: &mut Value, generation: i64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(generation));
    }
}

/// Prepares a new object after its metadata is set: defaults, initial status, generation, and
/// the fields admission adds to pods and jobs.
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    if let Some(custom) = &rt.custom {
        if let Some(o) = obj.as_object_mut().filter(|_| rt.has_status) {
            o.remove("status");
        }
        structural::apply_defaults(&custom.declared, obj);
        set_generation(obj, 1);
        return;
    }
    if is_definition(rt) {
        definition::apply_defaults(obj, true);
        let status = definition::status(obj, None);
        obj["status"] = status;
    }
    defaults::apply(rt, obj);
    if let Some(b) = behaviour(rt) {
        if let (Some(status), Some(o)) = (b.initial_status, obj.as_object_mut()) {
            o.insert("status".into(), status());
        }
        if b.generation {
            set_generation(obj, 1);
        }
    }
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match (&*rt.group, &*rt.kind) {
        ("", "Pod") => pod_on_create(o),
        ("batch", "Job") => job_selector(o),
        ("", "Namespace") => {
            let spec = o.entry("spec").or_insert_with(|| json!({}));
            if let Some(spec) = spec.as_object_mut() {
                spec.entry("finalizers").or_insert_with(|| json!(["kubernetes"]));
            }
        }
        _ => {}
    }
    // Objects are defaulted again when read back from storage; apply that here once, so that
    // fields derived from generated ones (a Job's labels) show from the start.
    defaults::apply(rt, obj);
}

/// What a new pod starts with: its status (phase, QoS class). `ServiceAccount`, `Priority`
/// and `DefaultTolerationSeconds` add the rest at admission.
fn pod_on_create(pod: &mut Map<String, Value>) {
    let qos_class = qos::pod_qos(pod.get("spec").unwrap_or(&Value::Null));
    pod.insert(
        "status".into(),
        json!({"phase": "Pending", "qosClass": qos_class}),
    );
}

/// Unless the Job asks for a manual selector, its pods are labelled with the Job's name and
/// uid and the Job selects them by uid.
fn job_selector(job: &mut Map<String, Value>) {
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

/// Prepares an update of the main resource after its metadata is checked (and its generation
/// carried over from `old`): defaults, the stored status, the fields a Service keeps once
/// allocated, and a new generation when the spec changed.
pub fn prepare_for_update(rt: &ResourceType, old: &Value, new: &mut Value) -> ApiResult<()> {
    match &rt.custom {
        Some(custom) => structural::apply_defaults(&custom.declared, new),
        None => defaults::apply(rt, new),
    }
    keep_status(rt, old, new);
    if is_definition(rt) {
        definition::apply_defaults(new, false);
        let status = definition::status(new, old.get("status"));
        new["status"] = status;
    }
    if (&*rt.group, &*rt.kind) == ("", "Service") {
        allocation::keep_allocated(old, new).map_err(|causes| {
            ApiError::invalid(&rt.group, &rt.kind, meta_str(old, "name").unwrap_or(""), &causes)
        })?;
    }
    if tracks_generation(rt) && generation_changed(rt, old, new) {
        let current = new
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        set_generation(new, current + 1);
    }
    Ok(())
}

/// Writes a new object (absent key): Services allocate their cluster IP and node ports in the
/// same transaction; every other type is a plain create.
pub async fn create(store: &Store, rt: &ResourceType, key: &str, obj: &mut Value) -> ApiResult<Cas> {
    if (&*rt.group, &*rt.kind) == ("", "Service") {
        return allocation::write(store, key, obj, None).await;
    }
    match stored_form(rt, obj) {
        Some(stored) => store.create(key, &stored).await,
        None => store.create(key, obj).await,
    }
}

/// A custom resource as it is stored: in its definition's storage version, whichever served
/// version it was written through (`None` when that is already the case).
fn stored_form(rt: &ResourceType, obj: &Value) -> Option<Value> {
    let stored = apiextensions::storage_api_version(rt)?;
    if obj["apiVersion"] == stored.as_str() {
        return None;
    }
    let mut out = obj.clone();
    out["apiVersion"] = json!(stored);
    Some(out)
}

/// Replaces an object whose mod revision is still `rev` (allocating for Services as
/// [`create`] does).
pub async fn update(
    store: &Store,
    rt: &ResourceType,
    key: &str,
    obj: &mut Value,
    rev: i64,
) -> ApiResult<Cas> {
    if (&*rt.group, &*rt.kind) == ("", "Service") {
        return allocation::write(store, key, obj, Some(rev)).await;
    }
    match stored_form(rt, obj) {
        Some(stored) => store.update(key, &stored, rev).await,
        None => store.update(key, obj, rev).await,
    }
}

/// For a dry-run create: fills in what the write would allocate, without writing.
pub async fn preview(store: &Store, rt: &ResourceType, key: &str, obj: &mut Value) -> ApiResult<()> {
    if (&*rt.group, &*rt.kind) == ("", "Service") {
        allocation::plan(store, key, obj).await?;
    }
    Ok(())
}

/// After an object is deleted: a Service's cluster IP and node ports are released at once
/// (best effort — a claim left behind is free anyway once its owner is gone).
pub async fn after_delete(store: &Store, rt: &ResourceType, obj: &Value) {
    if (&*rt.group, &*rt.kind) == ("", "Service") {
        allocation::release(store, obj).await;
    }
}

/// The graceful-deletion period of `obj` for a delete that asked for `requested` seconds, as
/// kube-apiserver's strategies decide it: a pod that is scheduled and not finished waits for
/// its kubelet (the request's period, else its `terminationGracePeriodSeconds`); every other
/// object is deleted at once (0).
pub fn grace_period(rt: &ResourceType, obj: &Value, requested: Option<i64>) -> i64 {
    if (&*rt.group, &*rt.kind) != ("", "Pod") {
        return 0;
    }
    let scheduled = obj["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty());
    let finished = matches!(obj["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    if !scheduled || finished {
        return 0;
    }
    match requested.or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64()) {
        Some(p) if p < 0 => 1,
        Some(p) => p,
        None => 0,
    }
}

/// Whether a delete that removes an object at once answers with the object rather than a
/// success `Status` (kube-apiserver's ReturnDeletedObject, set for these types only).
pub fn returns_deleted_object(rt: &ResourceType) -> bool {
    matches!(
        (&*rt.group, &*rt.plural),
        ("", "pods")
            | ("", "services")
            | ("", "serviceaccounts")
            | ("", "namespaces")
            | ("storage.k8s.io", "storageclasses")
    )
}

/// Whether a PUT of an absent object creates it (kube-apiserver's AllowCreateOnUpdate).
pub fn allow_create_on_update(rt: &ResourceType) -> bool {
    matches!(
        (&*rt.group, &*rt.plural),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::meta::{prepare_create, prepare_update};
    use crate::registry::Registry;

    /// A new object as the generic store's create prepares it: metadata, then the type's
    /// strategy (admission, which needs the store, is tested with its plugins).
    fn created(group: &str, version: &str, plural: &str, mut obj: Value) -> Value {
        let r = Registry::new();
        let rt = r.lookup(group, version, plural).unwrap();
        prepare_create(rt, &mut obj, rt.namespaced.then_some("ns")).unwrap();
        prepare_for_create(rt, &mut obj);
        obj
    }

    fn updated(group: &str, version: &str, plural: &str, old: &Value, mut new: Value) -> Value {
        let r = Registry::new();
        let rt = r.lookup(group, version, plural).unwrap();
        let name = meta_str(old, "name").unwrap().to_string();
        prepare_update(rt, old, &mut new, &name).unwrap();
        prepare_for_update(rt, old, &mut new).unwrap();
        new
    }

    const DEPLOY: &str = r#"{"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}"#;

    #[test]
    fn generation_starts_at_one_and_moves_only_with_the_spec() {
        let d: Value = serde_json::from_str(DEPLOY).unwrap();
        let old = created("apps", "v1", "deployments", d.clone());
        assert_eq!(old["metadata"]["generation"], 1);
        assert_eq!(old["status"], json!({}));
        // The same manifest again (without the defaults it was stored with): no spec change.
        let same = updated("apps", "v1", "deployments", &old, d.clone());
        assert_eq!(same["metadata"]["generation"], 1);
        let mut labelled = d.clone();
        labelled["metadata"]["labels"] = json!({"tier": "web"});
        labelled["metadata"]["generation"] = json!(40);
        let labelled = updated("apps", "v1", "deployments", &old, labelled);
        assert_eq!(
            labelled["metadata"]["generation"], 1,
            "metadata changes and client-sent generations do not count"
        );
        let mut scaled = d.clone();
        scaled["spec"]["replicas"] = json!(3);
        let scaled = updated("apps", "v1", "deployments", &old, scaled);
        assert_eq!(scaled["metadata"]["generation"], 2);
        let mut status = scaled.clone();
        status["status"] = json!({"replicas": 3});
        let kept = updated("apps", "v1", "deployments", &scaled, status);
        assert_eq!(
            (kept["metadata"]["generation"].clone(), kept["status"].clone()),
            (json!(2), json!({})),
            "a write to the main resource keeps the stored status"
        );
    }

    #[test]
    fn types_without_generation_have_none() {
        let cm = created(
            "",
            "v1",
            "configmaps",
            json!({"metadata": {"name": "c", "generation": 5}, "data": {"a": "b"}}),
        );
        assert!(cm["metadata"].get("generation").is_none());
        let changed = updated(
            "",
            "v1",
            "configmaps",
            &cm,
            json!({"metadata": {"name": "c"}, "data": {"a": "c"}}),
        );
        assert!(changed["metadata"].get("generation").is_none());
    }

    #[test]
    fn pods_start_pending_with_their_qos_class() {
        let pod = created(
            "",
            "v1",
            "pods",
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}]},
                "status": {"phase": "Running"}}),
        );
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        assert_eq!(pod["metadata"]["generation"], 1);
        assert_eq!(pod["spec"]["enableServiceLinks"], true);
        let best_effort = created(
            "",
            "v1",
            "pods",
            json!({"metadata": {"name": "q"}, "spec": {"containers": []}}),
        );
        assert_eq!(best_effort["status"]["qosClass"], "BestEffort");
    }

    #[test]
    fn jobs_select_their_pods_by_uid() {
        let job = created(
            "batch",
            "v1",
            "jobs",
            json!({"metadata": {"name": "pi"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "pi", "image": "perl"}]}}}}),
        );
        let uid = job["metadata"]["uid"].as_str().unwrap();
        assert_eq!(
            job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            uid
        );
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["job-name"], "pi");
        assert_eq!(labels["controller-uid"], uid);
        assert_eq!(job["metadata"]["labels"]["batch.kubernetes.io/job-name"], "pi");
        assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn namespaces_get_finalizer_label_and_phase() {
        let ns = created("", "v1", "namespaces", json!({"metadata": {"name": "team"}}));
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(ns["status"]["phase"], "Active");
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "team");
    }
}
