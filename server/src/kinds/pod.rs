//! Pods: a new pod starts `Pending` with its QoS class, a delete of a pod that is scheduled
//! and not finished waits for its kubelet (graceful deletion), ephemeral containers are added
//! through their subresource and never changed or removed, and the `eviction` and `binding`
//! subresources ([`crate::kinds::eviction`], [`crate::kinds::binding`]) are the pod's, as are
//! the streams its kubelet serves ([`crate::kinds::connect`]), and where its proxy leads
//! ([`crate::kinds::proxy`]).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::kinds::strategy::Builtin;
use crate::kinds::{apparmor, binding, connect, defaults, eviction, label_keys, proxy, validation};
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

    fn validate_update(
        &self,
        rt: &ResourceType,
        subresource: Option<&str>,
        old: &Value,
        obj: &Value,
    ) -> ApiResult<()> {
        match subresource {
            Some("resize") => validation::validate_pod_resize(rt, old, obj),
            _ => POD.validate(rt, Some(old), obj),
        }
    }

    fn gc_policy(&self) -> GcPolicy {
        POD.gc_policy()
    }

    fn returns_deleted_object(&self) -> bool {
        POD.returns_deleted_object
    }

    /// `ephemeralcontainers`: the new ones defaulted and checked, the existing ones unchanged;
    /// `resize`: only the containers' resources and resize policies taken (checked with the
    /// pod, see [`Strategy::validate_update`]).
    fn update_subresource(
        &self,
        rt: &ResourceType,
        subresource: &str,
        old: &Value,
        new: &mut Value,
    ) -> ApiResult<()> {
        if subresource == "resize" {
            defaults::apply(rt, new);
            keep_only_resize(old, new);
            return Ok(());
        }
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
        Some(match req.subresource.as_deref() {
            Some("proxy") => Box::pin(proxy::pod(store, req)),
            _ => Box::pin(connect::location(store, req, options)),
        })
    }
}

/// A resize of `old` into `new` (whose spec is the one the client wrote) as kube's resize
/// strategy prepares it: `old`'s spec with only its containers' and init containers' resources
/// and resize policies taken from `new` — unless a container was added, removed, renamed or
/// reordered, which leaves `new`'s spec whole for the resize rules to refuse. A spec that
/// changes moves the pod to its next generation.
fn keep_only_resize(old: &Value, new: &mut Value) {
    const TAKEN: [&str; 2] = ["resources", "resizePolicy"];
    let same_containers = ["containers", "initContainers"].iter().all(|list| {
        let (before, after) = (&old["spec"][*list], &new["spec"][*list]);
        let names = |v: &Value| {
            v.as_array()
                .map(|items| items.iter().map(|c| c["name"].clone()).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        names(before) == names(after)
    });
    if same_containers {
        let mut spec = old["spec"].clone();
        for list in ["containers", "initContainers"] {
            let written = new["spec"][list].as_array().map_or(&[][..], Vec::as_slice);
            let Some(items) = spec.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for (item, w) in items.iter_mut().zip(written) {
                let Some(item) = item.as_object_mut() else {
                    continue;
                };
                for field in TAKEN {
                    match w.get(field) {
                        Some(v) => item.insert(field.to_string(), v.clone()),
                        None => item.remove(field),
                    };
                }
            }
        }
        new["spec"] = spec;
    }
    if new["spec"] != old["spec"] {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(0);
        new["metadata"]["generation"] = json!(generation + 1);
    }
}

/// What is wrong with `new`'s ephemeral containers over `old`'s, as kube's
/// `ValidatePodEphemeralContainersUpdate` words it: each is checked as kube's
/// `validateEphemeralContainers` checks them ([`validation::pod::ephemeral_containers`]), then
/// the existing ones may not be removed or changed.
fn ephemeral_container_causes(old: &Value, new: &Value) -> Causes {
    fn list(pod: &Value) -> &[Value] {
        pod["spec"]["ephemeralContainers"]
            .as_array()
            .map_or(&[], Vec::as_slice)
    }
    let mut causes = Causes::new();
    validation::pod::ephemeral_containers(&new["spec"], &mut causes);
    let path = "spec.ephemeralContainers";
    let after = list(new);
    for o in list(old) {
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
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ephemeral containers as the subresource's defaults leave them.
    fn defaulted(list: Value) -> Value {
        let mut list = list;
        for c in list.as_array_mut().unwrap() {
            c["terminationMessagePolicy"] = json!("File");
            c["imagePullPolicy"] = json!("IfNotPresent");
        }
        list
    }

    #[test]
    fn ephemeral_containers_are_added_never_changed_and_checked_as_kube_does() {
        let old = json!({"spec": {"containers": [{"name": "app"}],
                                  "volumes": [{"name": "v", "emptyDir": {}}],
                                  "ephemeralContainers": defaulted(json!([{"name": "dbg", "image": "busybox"}]))}});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = defaulted(json!([
            {"name": "dbg", "image": "busybox:2"},
            {"name": "app", "image": "x", "resources": {}, "ports": [{"containerPort": 80, "protocol": "TCP"}]},
            {"name": "t", "targetContainerName": "nope", "ports": [], "lifecycle": {},
             "resources": {"limits": null}},
            {"name": "sc", "image": "x", "securityContext": {"runAsUser": -1},
             "volumeMounts": [{"name": "v", "mountPath": "/v", "subPath": "a"},
                              {"name": "w", "mountPath": "/w"}]},
        ]));
        let causes: Vec<String> = ephemeral_container_causes(&old, &new)
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect();
        assert_eq!(
            causes,
            [
                "spec.ephemeralContainers[1].name: Duplicate value: \"app\"",
                "spec.ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[2].image: Required value",
                "spec.ephemeralContainers[2].targetContainerName: Not found: \"nope\"",
                "spec.ephemeralContainers[2].ports: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[2].lifecycle: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[3].volumeMounts[1].name: Not found: \"w\"",
                "spec.ephemeralContainers[3].securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
                "spec.ephemeralContainers[3].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container",
                "spec.ephemeralContainers[dbg]: Forbidden: existing ephemeral containers \"dbg\" may not be changed",
            ]
        );
        let mut added = old.clone();
        added["spec"]["ephemeralContainers"]
            .as_array_mut()
            .unwrap()
            .extend(
                defaulted(
                    json!([{"name": "dbg2", "image": "busybox", "targetContainerName": "app",
                                      "securityContext": {"runAsUser": 0, "privileged": true},
                                      "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]),
                )
                .as_array()
                .unwrap()
                .clone(),
            );
        assert!(ephemeral_container_causes(&old, &added).is_empty());
    }
}
