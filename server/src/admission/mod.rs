//! Admission: the ordered plugins every write passes after the object is prepared and before it
//! is stored — mutating plugins first, then validating ones, as kube-apiserver's admission
//! chain runs them. Today's plugins are the built-in ones a cluster without kubelets needs, in
//! kube-apiserver's order (its `AllOrderedPlugins`): `NamespaceLifecycle`, `LimitRanger`,
//! `ServiceAccount`, `Priority`, `DefaultTolerationSeconds` and `DefaultStorageClass` mutate
//! (`NamespaceLifecycle` only refuses, but kube-apiserver runs it in the mutating phase too, so
//! a pod in a missing namespace is a `404` before its ServiceAccount is looked up), and
//! `LimitRanger`, `ServiceAccount`, `PodSecurity` and `ValidatingAdmissionPolicy` (the
//! ValidatingAdmissionPolicies their bindings put in force) validate. Plugins warn the client
//! through [`warnings`] and annotate its audit event through [`audit_annotations`].
//! A delete passes the mutating plugins too, before the object is read, with no object
//! (`NamespaceLifecycle` keeps `default`, `kube-system` and `kube-public`), and the validating
//! plugins once the object is read, with it as the old object. The admission webhooks
//! ([`webhook`]) are the last plugin of each phase. `ResourceQuota`, kube's last validating
//! plugin, is part of the write itself ([`resource_quota`]): the usage it charges is stored in
//! the object's own transaction.
//!
//! *Invariant:* a plugin sees the request's attributes and the object, never HTTP; it reads the
//! store only through [`Store`], and never writes.

pub mod audit_annotations;
mod authorizer;
pub mod configuration;
mod default_storage_class;
mod default_toleration_seconds;
mod limit_ranger;
mod namespace_lifecycle;
pub mod pod_security;
mod policy;
mod priority;
pub mod resource_quota;
mod service_account;
pub mod warnings;
pub mod webhook;

use std::sync::OnceLock;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::authentication::UserInfo;
use crate::authorization::Authorizer;
use crate::machinery::errors::ApiResult;
use crate::store::delegator::sync_most_recent;
use crate::store::Store;

/// What a write does, as admission names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object (POST, or a PUT that creates).
    Create,
    /// A change of an existing object.
    Update,
    /// The deletion of an object (the object is not given to the plugins).
    Delete,
    /// A connection through a connect subresource (`pods/exec`): the object is its options
    /// (a `PodExecOptions`), and nothing is stored.
    Connect,
}

impl Operation {
    /// The operation as admission reviews, webhook rules and policies spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// What a plugin knows of the request besides the object.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// What the write does.
    pub operation: Operation,
    /// The object's API group ("" for core).
    pub group: &'a str,
    /// The resource (plural), e.g. `pods`.
    pub resource: &'a str,
    /// Whether objects of the resource live in a namespace.
    pub namespaced: bool,
    /// The API version of the request's path.
    pub version: &'a str,
    /// The kind of the object written.
    pub kind: &'a str,
    /// The namespace of the request (`None` for cluster-scoped objects).
    pub namespace: Option<&'a str>,
    /// The object's name as the request gave it (empty for `generateName`).
    pub name: &'a str,
    /// The subresource written, if any.
    pub subresource: Option<&'a str>,
    /// A dry run: nothing will be stored.
    pub dry_run: bool,
    /// Who asks (`None` for the server's own controllers).
    pub user: Option<&'a UserInfo>,
    /// What decides what they may do (`None` for the server's own controllers), for the CEL
    /// `authorizer` variable ([`authorizer`]).
    pub authorizer: Option<&'a Authorizer>,
    /// The resource's other versions and the conversion between them, for webhooks registered
    /// for another version (`matchPolicy: Equivalent`); `None` where there are none to know.
    pub versions: Option<&'a dyn Versions>,
    /// The object as stored before the write (updates; `None` for creates, and for deletes,
    /// which are admitted before the object is read).
    pub old: Option<&'a Value>,
}

/// The resources a written resource is equivalent to, and its objects in each: kube's
/// equivalent resources (the same objects served as another version, or another group, as
/// events.k8s.io Events are core Events) and the conversion between them, which a webhook or
/// policy registered for another of them is called in. The registry, which owns conversion,
/// provides it.
pub trait Versions: Send + Sync + std::fmt::Debug {
    /// The resource's equivalents, in the order kube tries them.
    fn equivalents(&self, store: &Store) -> Vec<Equivalent>;
    /// `obj`, of the request's resource, as `to` shows it.
    fn to_version<'a>(
        &'a self,
        store: &'a Store,
        obj: &'a Value,
        to: &'a Equivalent,
    ) -> BoxFuture<'a, ApiResult<Value>>;
    /// `obj`, of `from`, back in the request's resource.
    fn back_from_version<'a>(
        &'a self,
        store: &'a Store,
        obj: &'a Value,
        from: &'a Equivalent,
    ) -> BoxFuture<'a, ApiResult<Value>>;
}

/// A resource equivalent to the one written: its group, version, resource and kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Equivalent {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub kind: String,
}

impl Equivalent {
    /// The write as made through this resource (its objects are the caller's to convert).
    pub fn seen<'a>(&'a self, attrs: &Attributes<'a>) -> Attributes<'a> {
        Attributes {
            group: &self.group,
            version: &self.version,
            resource: &self.resource,
            kind: &self.kind,
            ..*attrs
        }
    }
}

/// A plugin that may change the object.
pub trait Mutating: Send + Sync {
    /// The plugin's name, as kube-apiserver's `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    /// Changes `obj` as the plugin requires, or refuses the write.
    fn admit<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>>;
}

/// A plugin that accepts or refuses the object as it is.
pub trait Validating: Send + Sync {
    /// The plugin's name, as kube-apiserver's `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    /// Refuses the write, or lets it through.
    fn validate<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>>;
}

/// The plugins, in the order they run.
pub struct Chain {
    mutating: Vec<Box<dyn Mutating>>,
    validating: Vec<Box<dyn Validating>>,
}

impl Chain {
    /// The built-in plugins, in kube-apiserver's order.
    pub fn builtin() -> Chain {
        Chain {
            mutating: vec![
                Box::new(namespace_lifecycle::NamespaceLifecycle),
                Box::new(limit_ranger::LimitRanger),
                Box::new(service_account::ServiceAccount),
                Box::new(priority::Priority),
                Box::new(default_toleration_seconds::DefaultTolerationSeconds),
                Box::new(default_storage_class::DefaultStorageClass),
                Box::new(webhook::MutatingWebhooks),
            ],
            validating: vec![
                Box::new(limit_ranger::LimitRanger),
                Box::new(service_account::ServiceAccount),
                Box::new(pod_security::PodSecurity),
                Box::new(policy::ValidatingAdmissionPolicy),
                Box::new(webhook::ValidatingWebhooks),
            ],
        }
    }

    /// The names of the mutating plugins, in the order they run.
    pub fn mutating_names(&self) -> Vec<&'static str> {
        self.mutating.iter().map(|p| p.name()).collect()
    }

    /// The names of the validating plugins, in the order they run.
    pub fn validating_names(&self) -> Vec<&'static str> {
        self.validating.iter().map(|p| p.name()).collect()
    }

    /// Runs the mutating plugins in order; the first refusal stops the write.
    /// First the replica's cache catches up with a read barrier, once per write, so that the
    /// configurations plugins read from it (webhooks, policies) acknowledged through any replica
    /// before the write apply to it, in this phase and the validating one.
    pub async fn admit(&self, store: &Store, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        // Without a barrier (no leader reachable in time) the write itself is about to fail or
        // wait; the configurations known locally are the best there are.
        if let Err(e) = sync_most_recent(store.cache()).await {
            tracing::warn!(error = %e.message, "admission configurations read without a read barrier");
        }
        for plugin in &self.mutating {
            plugin.admit(store, attrs, obj).await?;
        }
        Ok(())
    }

    /// Runs the validating plugins in order; the first refusal stops the write.
    pub async fn validate(&self, store: &Store, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
        for plugin in &self.validating {
            plugin.validate(store, attrs, obj).await?;
        }
        Ok(())
    }
}

/// The chain every write of this replica passes.
pub fn chain() -> &'static Chain {
    static CHAIN: OnceLock<Chain> = OnceLock::new();
    CHAIN.get_or_init(Chain::builtin)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the plugins see of a pod `p` created in namespace `ns`.
    pub(super) fn pod_create() -> Attributes<'static> {
        Attributes {
            operation: Operation::Create,
            group: "",
            version: "v1",
            kind: "Pod",
            resource: "pods",
            namespaced: true,
            namespace: Some("ns"),
            name: "p",
            subresource: None,
            dry_run: false,
            user: None,
            authorizer: None,
            versions: None,
            old: None,
        }
    }

    /// kube-apiserver's `AllOrderedPlugins`, restricted to the plugins kuberaft has: each
    /// phase runs its plugins in this order.
    #[test]
    fn the_builtin_chain_runs_the_plugins_in_kube_apiservers_order() {
        assert_eq!(
            chain().mutating_names(),
            [
                "NamespaceLifecycle",
                "LimitRanger",
                "ServiceAccount",
                "Priority",
                "DefaultTolerationSeconds",
                "DefaultStorageClass",
                "MutatingAdmissionWebhook"
            ]
        );
        assert_eq!(
            chain().validating_names(),
            [
                "LimitRanger",
                "ServiceAccount",
                "PodSecurity",
                "ValidatingAdmissionPolicy",
                "ValidatingAdmissionWebhook"
            ]
        );
    }
}
