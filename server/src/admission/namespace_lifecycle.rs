//! `NamespaceLifecycle`: no new content in a namespace that does not exist or is being deleted.
//! It only refuses, but runs among the mutating plugins, first, as in kube-apiserver: a write
//! into a missing namespace is a `404` before any other plugin looks at it.
//!
//! An active namespace in the replica's watch cache is taken as it is (as kube-apiserver's
//! plugin trusts its informer); anything else — a namespace created a moment ago through
//! another replica, or one terminating — is checked with a linearizable read. (In neither
//! system is the check atomic with the write.)

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Attributes, Mutating, Operation};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::store::{keys, Store};

/// The plugin.
pub struct NamespaceLifecycle;

impl Mutating for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn admit<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        _obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(check(store, attrs))
    }
}

/// The namespaces no one may delete, as kube-apiserver's plugin keeps them.
const IMMORTAL: [&str; 3] = ["default", "kube-system", "kube-public"];

async fn check(store: &Store, attrs: &Attributes<'_>) -> ApiResult<()> {
    let deletes_namespace =
        attrs.operation == Operation::Delete && (attrs.group, attrs.resource) == ("", "namespaces");
    if deletes_namespace && IMMORTAL.contains(&attrs.name) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            attrs.name,
            "this namespace may not be deleted",
        ));
    }
    if attrs.operation != Operation::Create {
        return Ok(());
    }
    let Some(ns) = attrs.namespace.filter(|_| attrs.namespaced) else {
        return Ok(());
    };
    let key = keys::object("", "namespaces", None, ns);
    if let Ok(Some(cached)) = store.cache().get(&key) {
        if meta_str(&cached.value(), "deletionTimestamp").is_none() {
            return Ok(());
        }
    }
    let Some(nsobj) = store.get(&key, true).await? else {
        return Err(ApiError::not_found("", "namespaces", ns));
    };
    if meta_str(&nsobj.obj, "deletionTimestamp").is_some() {
        return Err(ApiError::forbidden(
            attrs.group,
            attrs.resource,
            attrs.name,
            &format!("unable to create new content in namespace {ns} because it is being terminated"),
        ));
    }
    Ok(())
}
