//! The built-in kinds' strategies, and the one place that attaches them to the type table:
//! [`registry`] is the served table of built-in types, each with its strategy.
//!
//! Every built-in kind but Services is a [`Builtin`]: data — whether it tracks a generation,
//! the status a new object starts with, how a delete answers — plus the few functions a kind
//! with behaviour of its own plugs in from its module (`pod`, `namespace`, `job`,
//! `replication_controller`). Services claim their IP and ports in the same transaction as
//! their write, so `service` implements the strategy itself. Every built-in object gets its
//! scheme defaults ([`crate::kinds::defaults`]) on create and update.

use std::sync::Arc;

use futures::future::BoxFuture;

use serde_json::{json, Value};

use crate::apiextensions;
use crate::authentication::user::UserInfo;
use crate::config::ServiceRanges;
use crate::kinds::defaults;
use crate::kinds::{csr, job, namespace, pod, proxy, replication_controller, service, validation};
use crate::machinery::errors::ApiResult;
use crate::machinery::selector::selector_string;
use crate::registry::strategy::{GcPolicy, Location, Strategy};
use crate::registry::ResourceRequest;
use crate::scheme::{self, Hooks, Registry, ResourceType};
use crate::store::Store;

/// A built-in kind: what it differs by, as data, and the few functions a kind with behaviour
/// of its own plugs in (from its module: `pod`, `namespace`, `job`, `replication_controller`).
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    /// The kind's group.
    pub group: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// `metadata.generation` starts at 1 and moves with every change of `spec`.
    pub generation: bool,
    /// The status a new object starts with (clients cannot set it on create).
    pub initial_status: Option<fn() -> Value>,
    /// What the kind derives on create, after its defaults and initial status.
    pub on_create: Option<fn(&mut Value)>,
    /// What the kind records about the user who creates an object.
    pub on_create_by: Option<fn(&mut Value, &UserInfo)>,
    /// What an update of the object itself takes over from the stored one (`old`, `new`).
    pub on_update: Option<fn(&Value, &mut Value)>,
    /// What a write through `status` may not do to the stored object (`old`, `new`).
    pub on_status_update: Option<fn(&Value, &mut Value) -> ApiResult<()>>,
    /// The graceful-deletion period for a delete that asked for some seconds (deleted at
    /// once when `None`).
    pub grace_period: Option<fn(&Value, Option<i64>) -> i64>,
    /// A delete only marks the object, this way, and its controller removes it.
    pub terminating: Option<fn(&mut Value)>,
    /// The Scale subresource's selector, when it is not the parent's `LabelSelector`.
    pub scale_selector: Option<fn(&Value) -> String>,
    /// A delete that removes the object answers with it (kube's `ReturnDeletedObject`).
    pub returns_deleted_object: bool,
    /// A PUT of an absent object creates it.
    pub create_on_update: bool,
    /// A PUT must name the resourceVersion it replaces.
    pub conditional_update: bool,
    /// What happens to dependents when a delete names no policy.
    pub gc: GcPolicy,
    /// Where the kind's subresource served from elsewhere leads (a node's proxy).
    pub location: Option<LocationOf>,
}

/// Where a subresource served from elsewhere leads for the object a request names.
pub type LocationOf =
    for<'a> fn(&'a Store, &'a ResourceRequest) -> BoxFuture<'a, ApiResult<Option<Location>>>;

impl Builtin {
    /// A kind that differs in nothing but its defaults.
    pub const fn new(group: &'static str, kind: &'static str) -> Self {
        Builtin {
            group,
            kind,
            generation: false,
            initial_status: None,
            on_create: None,
            on_create_by: None,
            on_update: None,
            on_status_update: None,
            grace_period: None,
            terminating: None,
            scale_selector: None,
            returns_deleted_object: false,
            create_on_update: false,
            conditional_update: false,
            gc: GcPolicy::Delete,
            location: None,
        }
    }

    const fn generation(mut self) -> Self {
        self.generation = true;
        self
    }

    const fn status(mut self, initial: fn() -> Value) -> Self {
        self.initial_status = Some(initial);
        self
    }

    const fn returns_deleted(mut self) -> Self {
        self.returns_deleted_object = true;
        self
    }

    const fn created_on_update(mut self) -> Self {
        self.create_on_update = true;
        self
    }

    const fn conditional_update(mut self) -> Self {
        self.conditional_update = true;
        self
    }

    const fn outside_gc(mut self) -> Self {
        self.gc = GcPolicy::Unsupported;
        self
    }

    const fn located(mut self, location: LocationOf) -> Self {
        self.location = Some(location);
        self
    }
}

/// A built-in kind that differs in nothing but its defaults.
const PLAIN: Builtin = Builtin::new("", "");

/// The built-in kinds that differ from a plain type, as kube-apiserver 1.35 has them.
const BUILTINS: &[Builtin] = &[
    namespace::NAMESPACE,
    job::JOB,
    replication_controller::REPLICATION_CONTROLLER,
    Builtin::new("", "PersistentVolume").status(|| json!({"phase": "Pending"})),
    Builtin::new("", "PersistentVolumeClaim").status(|| json!({"phase": "Pending"})),
    Builtin::new("", "ResourceQuota").status(|| json!({})),
    Builtin::new("", "ServiceAccount").returns_deleted(),
    Builtin::new("", "Endpoints").created_on_update(),
    Builtin::new("", "Node").located(|store, req| Box::pin(proxy::node(store, req))),
    Builtin::new("", "Event").created_on_update().outside_gc(),
    Builtin::new("events.k8s.io", "Event").created_on_update().outside_gc(),
    Builtin::new("coordination.k8s.io", "Lease").created_on_update(),
    Builtin::new("storage.k8s.io", "StorageClass").returns_deleted(),
    Builtin::new("apps", "Deployment").generation().status(|| json!({})),
    Builtin::new("apps", "ReplicaSet").generation().status(|| json!({"replicas": 0})),
    Builtin::new("apps", "StatefulSet")
        .generation()
        .status(|| json!({"replicas": 0, "availableReplicas": 0})),
    Builtin::new("apps", "DaemonSet").generation().status(
        || json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0}),
    ),
    Builtin::new("batch", "CronJob").generation().status(|| json!({})),
    Builtin::new("autoscaling", "HorizontalPodAutoscaler").status(|| json!({"desiredReplicas": 0})),
    Builtin::new("policy", "PodDisruptionBudget")
        .generation()
        .conditional_update()
        .status(
            || json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}),
        ),
    Builtin::new("networking.k8s.io", "Ingress")
        .generation()
        .status(|| json!({"loadBalancer": {}})),
    Builtin::new("networking.k8s.io", "IngressClass").generation(),
    csr::CERTIFICATE_SIGNING_REQUEST,
    Builtin::new("storage.k8s.io", "VolumeAttachment").status(|| json!({"attached": false})),
    Builtin::new("networking.k8s.io", "ServiceCIDR").status(|| json!({})),
    Builtin::new("flowcontrol.apiserver.k8s.io", "FlowSchema").status(|| json!({})),
    Builtin::new("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration").status(|| json!({})),
    Builtin::new("resource.k8s.io", "ResourceClaim").status(|| json!({})),
    Builtin::new("networking.k8s.io", "NetworkPolicy").generation(),
    Builtin::new("discovery.k8s.io", "EndpointSlice").generation(),
    Builtin::new("apiregistration.k8s.io", "APIService").status(|| json!({})),
];

impl Strategy for Builtin {
    fn tracks_generation(&self, _rt: &ResourceType) -> bool {
        self.generation
    }

    /// Defaults, the initial status, what the kind derives — and defaults once more, as
    /// objects are defaulted again when read back from storage, so that fields derived from
    /// generated ones (a Job's labels) show from the start.
    fn prepare_for_create(&self, rt: &ResourceType, obj: &mut Value) {
        defaults::apply(rt, obj);
        if let (Some(status), Some(o)) = (self.initial_status, obj.as_object_mut()) {
            o.insert("status".into(), status());
        }
        if let Some(on_create) = self.on_create {
            on_create(obj);
        }
        defaults::apply(rt, obj);
    }

    fn prepare_for_update(&self, rt: &ResourceType, old: &Value, new: &mut Value) -> ApiResult<()> {
        if let Some(keep) = self.on_update {
            keep(old, new);
        }
        defaults::apply(rt, new);
        Ok(())
    }

    fn update_subresource(
        &self,
        _rt: &ResourceType,
        subresource: &str,
        old: &Value,
        new: &mut Value,
    ) -> ApiResult<()> {
        match self.on_status_update {
            Some(check) if subresource == "status" => check(old, new),
            _ => Ok(()),
        }
    }

    fn prepare_for_create_by(&self, obj: &mut Value, user: &UserInfo) {
        if let Some(record) = self.on_create_by {
            record(obj, user);
        }
    }

    fn validate(&self, rt: &ResourceType, old: Option<&Value>, obj: &Value) -> ApiResult<()> {
        validation::validate(rt, old, obj)
    }

    fn grace_period(&self, obj: &Value, requested: Option<i64>) -> i64 {
        self.grace_period.map_or(0, |period| period(obj, requested))
    }

    fn removed_by_controller(&self) -> bool {
        self.terminating.is_some()
    }

    fn mark_deleting(&self, obj: &mut Value) {
        if let Some(mark) = self.terminating {
            mark(obj);
        }
    }

    fn gc_policy(&self) -> GcPolicy {
        self.gc
    }

    fn stream_location<'a>(
        &'a self,
        store: &'a Store,
        req: &'a ResourceRequest,
        _options: &'a Value,
    ) -> Option<BoxFuture<'a, ApiResult<Option<Location>>>> {
        self.location.map(|location| location(store, req))
    }

    fn returns_deleted_object(&self) -> bool {
        self.returns_deleted_object
    }

    fn allow_create_on_update(&self) -> bool {
        self.create_on_update
    }

    fn allow_unconditional_update(&self) -> bool {
        !self.conditional_update
    }

    fn scale_selector(&self, parent: &Value) -> String {
        match self.scale_selector {
            Some(selector) => selector(parent),
            None => selector_string(&parent["spec"]["selector"]),
        }
    }
}

/// The strategy of the built-in type `rt`; Services allocate from `ranges`.
fn strategy_of(rt: &ResourceType, ranges: &ServiceRanges) -> Arc<dyn Strategy> {
    match (&*rt.group, &*rt.kind) {
        ("", "Service") => Arc::new(service::Service { ranges: *ranges }),
        ("", "Pod") => Arc::new(pod::Pod),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Arc::new(apiextensions::strategy::Definition),
        (group, kind) => match BUILTINS.iter().find(|b| b.group == group && b.kind == kind) {
            Some(b) => Arc::new(*b),
            None => Arc::new(PLAIN),
        },
    }
}

/// The built-in types as the server serves them: the scheme's table, each type with its
/// strategy attached; Services allocate from `ranges`.
pub fn registry(ranges: &ServiceRanges) -> Registry {
    Registry::of(
        scheme::builtin()
            .into_iter()
            .map(|mut rt| {
                rt.hooks = Hooks::new(strategy_of(&rt, ranges));
                rt
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machinery::meta::{meta_str, prepare_create, prepare_update};
    use crate::registry::strategy::{prepare_for_create, prepare_for_update};

    /// A new object as the generic store's create prepares it: metadata, then the type's
    /// strategy (admission, which needs the store, is tested with its plugins).
    fn created(group: &str, version: &str, plural: &str, mut obj: Value) -> Value {
        let r = registry(&ServiceRanges::default());
        let rt = r.lookup(group, version, plural).unwrap();
        prepare_create(rt, &mut obj, rt.namespaced.then_some("ns")).unwrap();
        prepare_for_create(rt, &mut obj);
        obj
    }

    fn updated(group: &str, version: &str, plural: &str, old: &Value, mut new: Value) -> Value {
        let r = registry(&ServiceRanges::default());
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
