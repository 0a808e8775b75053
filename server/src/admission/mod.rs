//! Admission: the ordered plugins every write passes after the object is prepared and before it
//! is stored — mutating plugins first, then validating ones, as kube-apiserver's admission
//! chain runs them. Today's plugins are the built-in ones a cluster without kubelets needs:
//! `Priority` and `DefaultTolerationSeconds` (mutating) and `NamespaceLifecycle` (validating).
//! Webhooks, policies and quota join the same lists.
//!
//! *Invariant:* a plugin sees the request's attributes and the object, never HTTP; it reads the
//! store only through [`Store`], and never writes.

mod default_toleration_seconds;
mod namespace_lifecycle;
mod priority;

use std::sync::OnceLock;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::machinery::errors::ApiResult;
use crate::store::Store;

/// What a write does, as admission names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object (POST, or a PUT that creates).
    Create,
    /// A change of an existing object.
    Update,
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
    /// The namespace of the request (`None` for cluster-scoped objects).
    pub namespace: Option<&'a str>,
    /// The object's name as the request gave it (empty for `generateName`).
    pub name: &'a str,
    /// The subresource written, if any.
    pub subresource: Option<&'a str>,
    /// A dry run: nothing will be stored.
    pub dry_run: bool,
}

/// A plugin that may change the object.
pub trait Mutating: Send + Sync {
    /// The plugin's name, as kube-apiserver's `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    /// Changes `obj` as the plugin requires, or refuses the write.
    fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()>;
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
                Box::new(priority::Priority),
                Box::new(default_toleration_seconds::DefaultTolerationSeconds),
            ],
            validating: vec![Box::new(namespace_lifecycle::NamespaceLifecycle)],
        }
    }

    /// The names of the plugins, mutating ones first.
    pub fn names(&self) -> Vec<&'static str> {
        let mutating = self.mutating.iter().map(|p| p.name());
        mutating.chain(self.validating.iter().map(|p| p.name())).collect()
    }

    /// Runs the mutating plugins in order; the first refusal stops the write.
    pub fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        self.mutating.iter().try_for_each(|p| p.admit(attrs, obj))
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

    #[test]
    fn the_builtin_chain_runs_mutating_plugins_before_validating_ones() {
        assert_eq!(
            chain().names(),
            ["Priority", "DefaultTolerationSeconds", "NamespaceLifecycle"]
        );
    }
}
