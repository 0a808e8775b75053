//! Pods: a new pod starts `Pending` with its QoS class, a delete of a pod that is scheduled
//! and not finished waits for its kubelet (graceful deletion), ephemeral containers are added
//! through their subresource and never changed or removed, and the `eviction` and `binding`
//! subresources ([`crate::kinds::eviction`], [`crate::kinds::binding`]) are the pod's, as are
//! the streams its kubelet serves ([`crate::kinds::connect`]).

use std::collections::HashSet;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::kinds::strategy::Builtin;
use crate::kinds::{apparmor, binding, connect, defaults, eviction, label_keys};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::{meta_str, Causes};
use crate::machinery::qos;
use crate::registry::options::WriteOptions;
use crate::registry::reply::Reply;
use crate::registry::strategy::{GcPolicy, Location, Strategy};
use crate::registry::ResourceRequest;
use crate::scheme::ResourceType;
use crate::store::Store;

/// What Pods share with the other built-in kinds.
const POD: Builtin = Builtin {
    generation: true,
    on_create: Some(on_create),
    grace_period: Some(grace_period),
    returns_deleted_object: true,
    ..Builtin::new("", "Pod")
};

/// The status a new pod starts with (`ServiceAccount`, `Priority` and
/// `DefaultTolerationSeconds` add the rest at admission), its label keys merged into its
/// selectors, and its AppArmor annotations as fields.
fn on_create(pod: &mut Value) {
    label_keys::merge_into_selectors(pod);
    apparmor::fields_from_annotations(pod);
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

/// The Pod strategy: the built-in kind's, and the pod's own subresources.
pub struct Pod;

impl Strategy for Pod {
    fn tracks_generation(&self, rt: &ResourceType) -> bool {
        POD.tracks_generation(rt)
    }

    fn prepare_for_create(&self, rt: &ResourceType, obj: &mut Value) {
        POD.prepare_for_create(rt, obj);
    }

    fn prepare_for_update(&self, rt: &ResourceType, old: &Value, new: &mut Value) -> ApiResult<()> {
        POD.prepare_for_update(rt, old, new)
    }

    fn grace_period(&self, obj: &Value, requested: Option<i64>) -> i64 {
        POD.grace_period(obj, requested)
    }

    fn validate(&self, rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
        POD.validate(rt, old, obj)
    }

    fn gc_policy(&self) -> GcPolicy {
        POD.gc_policy()
    }

    fn returns_deleted_object(&self) -> bool {
        POD.returns_deleted_object
    }

    /// `ephemeralcontainers`: the new ones defaulted and checked, the existing ones unchanged.
    fn update_subresource(
        &self,
        rt: &ResourceType,
        subresource: &str,
        old: &Value,
        new: &mut Value,
    ) -> ApiResult<()> {
        if subresource != "ephemeralcontainers" {
            return Ok(());
        }
        defaults::apply(rt, new);
        let causes = ephemeral_container_causes(old, new);
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                "",
                "Pod",
                meta_str(old, "name").unwrap_or(""),
                &causes,
            ))
        }
    }

    fn create_subresource<'a>(
        &'a self,
        store: &'a Store,
        req: &'a ResourceRequest,
        opts: &'a WriteOptions,
        body: Value,
    ) -> Option<BoxFuture<'a, ApiResult<Reply>>> {
        match req.subresource.as_deref()? {
            "eviction" => Some(Box::pin(eviction::create(store, req, opts, body))),
            "binding" => Some(Box::pin(binding::create(store, req, opts, body))),
            _ => None,
        }
    }

    fn stream_location<'a>(
        &'a self,
        store: &'a Store,
        req: &'a ResourceRequest,
        options: &'a Value,
    ) -> Option<BoxFuture<'a, ApiResult<Option<Location>>>> {
        Some(Box::pin(connect::location(store, req, options)))
    }
}

/// Fields an ephemeral container may not have, as kube's validation lists them.
const NOT_FOR_EPHEMERAL: [&str; 6] = [
    "ports",
    "resources",
    "lifecycle",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
];

/// What is wrong with `new`'s ephemeral containers over `old`'s, as kube's
/// `ValidatePodEphemeralContainersUpdate` words it: existing ones may not be removed or
/// changed; new ones need a unique name and an image, may not have ports, resources,
/// lifecycle or probes, and may target only a container of the pod.
fn ephemeral_container_causes(old: &Value, new: &Value) -> Causes {
    let path = "spec.ephemeralContainers";
    let empty = Vec::new();
    let list = |pod: &Value| {
        pod["spec"]["ephemeralContainers"]
            .as_array()
            .unwrap_or(&empty)
            .clone()
    };
    let (before, after) = (list(old), list(new));
    let mut causes = Vec::new();
    for o in &before {
        let name = o["name"].as_str().unwrap_or_default();
        match after.iter().find(|n| n["name"] == o["name"]) {
            None => causes.push((
                path.to_string(),
                format!("Forbidden: existing ephemeral containers {name:?} may not be removed\n"),
            )),
            Some(n) if n != o => causes.push((
                format!("{path}[{name}]"),
                format!("Forbidden: existing ephemeral containers {name:?} may not be changed"),
            )),
            Some(_) => {}
        }
    }
    let containers = |field: &str| {
        new["spec"][field]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let regular: Vec<String> = containers("containers")
        .into_iter()
        .chain(containers("initContainers"))
        .collect();
    let mut seen: HashSet<String> = regular.iter().cloned().collect();
    for (i, c) in after.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match c["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push((format!("{at}.name"), "Required value".to_string())),
            Some(name) if !seen.insert(name.to_string()) => {
                causes.push((format!("{at}.name"), format!("Duplicate value: {name:?}")));
            }
            Some(_) => {}
        }
        if before.iter().any(|o| o["name"] == c["name"]) {
            continue;
        }
        if c["image"].as_str().is_none_or(str::is_empty) {
            causes.push((format!("{at}.image"), "Required value".to_string()));
        }
        for field in NOT_FOR_EPHEMERAL {
            let set = c.get(field).is_some_and(|v| match v {
                Value::Null => false,
                Value::Object(o) => !o.is_empty(),
                Value::Array(a) => !a.is_empty(),
                _ => true,
            });
            if set {
                causes.push((
                    format!("{at}.{field}"),
                    "Forbidden: cannot be set for an Ephemeral Container".to_string(),
                ));
            }
        }
        if let Some(target) = c["targetContainerName"].as_str().filter(|t| !t.is_empty()) {
            if !regular.iter().any(|r| r == target) {
                causes.push((
                    format!("{at}.targetContainerName"),
                    format!("Not found: {target:?}"),
                ));
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ephemeral_containers_are_added_never_changed_and_checked_as_kube_does() {
        let old = json!({"spec": {"containers": [{"name": "app"}],
                                  "ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = json!([
            {"name": "dbg", "image": "busybox:2"},
            {"name": "app", "image": "x", "resources": {}, "ports": [{"containerPort": 80}]},
            {"name": "t", "targetContainerName": "nope"},
        ]);
        let causes: Vec<String> = ephemeral_container_causes(&old, &new)
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect();
        assert_eq!(
            causes,
            [
                "spec.ephemeralContainers[dbg]: Forbidden: existing ephemeral containers \"dbg\" may not be changed",
                "spec.ephemeralContainers[1].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[2].image: Required value",
                "spec.ephemeralContainers[2].targetContainerName: Not found: \"nope\"",
            ]
        );
        let mut added = old.clone();
        added["spec"]["ephemeralContainers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "dbg2", "image": "busybox", "targetContainerName": "app"}));
        assert!(ephemeral_container_causes(&old, &added).is_empty());
    }
}
