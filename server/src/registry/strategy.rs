//! A type's behaviour in the generic store, kube-apiserver's `RESTCreateStrategy`,
//! `RESTUpdateStrategy` and `RESTDeleteStrategy` in one trait: what a new object starts with,
//! what an update keeps, the checks beyond metadata, how the object is written (a Service
//! claims its IP and ports in the same transaction), graceful deletion, the
//! garbage-collection default, and what the type's own subresources do (a pod's eviction).
//!
//! The layer that serves a type attaches its strategy to the type's [`Hooks`] — `kinds` for
//! built-in types, `apiextensions` for custom resources and their definitions — and the verbs
//! of this module read it back with [`of`]. Every method has the default of a plain type
//! (a ConfigMap), so a strategy states only how its type differs.
//!
//! [`Hooks`]: crate::scheme::Hooks

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::authentication::user::UserInfo;
use crate::machinery::errors::ApiResult;
use crate::registry::options::WriteOptions;
use crate::registry::reply::Reply;
use crate::registry::ResourceRequest;
use crate::scheme::ResourceType;
use crate::store::{Alongside, Cas, Store};

/// What a type does with dependents when a delete names no propagation policy (kube's
/// `DefaultGarbageCollectionPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcPolicy {
    /// The type takes no part in garbage collection: delete options add no finalizers.
    Unsupported,
    /// Dependents are orphaned unless the delete asks otherwise.
    Orphan,
    /// Dependents are deleted in the background.
    Delete,
}

/// Where a subresource served from elsewhere leads (kube's `Connect` of a `rest.Connecter`,
/// the location of a `LocationStreamer`): the URL of the stream it opens or reads on the
/// kubelet of the object's node, or of what a proxy subresource reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// `https://<kubelet>/<path>?<options>`; for a proxy, `<scheme>://<host>[:<port>]`, the
    /// endpoint adding the path.
    pub url: String,
    /// The client that reaches it.
    pub via: Via,
}

/// Which of this server's clients reaches a [`Location`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The kubelet client: this server's kubelet client certificate, kubelets verified with
    /// the kubelet CA when one is configured.
    Kubelet,
    /// kube's proxy transport, for pods, Service endpoints and a node's other ports: HTTP, or
    /// HTTPS without verifying the certificate (the addresses are IPs), no client identity.
    Proxy,
}

/// The behaviour of one type. `rt` is always the type the strategy is attached to (custom
/// resources share one strategy between their types).
pub trait Strategy: Send + Sync {
    /// Whether objects carry a `metadata.generation`, which starts at 1 and moves with every
    /// change of [`Strategy::spec_changed`].
    fn tracks_generation(&self, _rt: &ResourceType) -> bool {
        false
    }

    /// What counts as a change of the spec for the generation.
    fn spec_changed(&self, _rt: &ResourceType, old: &Value, new: &Value) -> bool {
        old.get("spec") != new.get("spec")
    }

    /// Prepares a new object after its metadata is set: defaults, the status it starts with,
    /// the fields the type derives on create.
    fn prepare_for_create(&self, _rt: &ResourceType, _obj: &mut Value) {}

    /// Records on a new object who creates it, for types that keep that (a
    /// CertificateSigningRequest's requester); not called for the server's own creates.
    fn prepare_for_create_by(&self, _obj: &mut Value, _user: &UserInfo) {}

    /// Prepares an update of the main resource after the stored status is carried over:
    /// defaults, and what the type keeps once set.
    fn prepare_for_update(&self, _rt: &ResourceType, _old: &Value, _new: &mut Value) -> ApiResult<()> {
        Ok(())
    }

    /// Prepares and checks a write through `subresource`, one that owns a part of the object
    /// (`new` is `old` with that part replaced): `422` for what the type does not allow.
    fn update_subresource(
        &self,
        _rt: &ResourceType,
        _subresource: &str,
        _old: &Value,
        _new: &mut Value,
    ) -> ApiResult<()> {
        Ok(())
    }

    /// A `create` of `subresource` of the object `req` names (an eviction, a binding), for a
    /// type that serves one: `None` when it does not.
    fn create_subresource<'a>(
        &'a self,
        _store: &'a Store,
        _req: &'a ResourceRequest,
        _opts: &'a WriteOptions,
        _body: Value,
    ) -> Option<BoxFuture<'a, ApiResult<Reply>>> {
        None
    }

    /// Where the subresource `req` names (`exec`, `attach`, `portforward`, `log`, `proxy`) leads for
    /// the object, with `options` (the options the request gave, e.g. a `PodExecOptions`),
    /// once they are checked: `Ok(None)` when there is nothing to read yet (a pod's log
    /// before it has a node). `None` for a type that serves no such subresource.
    fn stream_location<'a>(
        &'a self,
        _store: &'a Store,
        _req: &'a ResourceRequest,
        _options: &'a Value,
    ) -> Option<BoxFuture<'a, ApiResult<Option<Location>>>> {
        None
    }

    /// Checks a write of `obj` (over `old`, for an update) beyond its metadata: a `422`
    /// naming every problem.
    fn validate(&self, _rt: &ResourceType, _old: Option<&Value>, _obj: &Value) -> ApiResult<()> {
        Ok(())
    }

    /// Checks an update of `old` into `obj` through `subresource` (`None`: the main resource).
    /// A subresource with rules of its own (a pod's `resize`) checks them in place of an
    /// update's; any other is checked as an update.
    fn validate_update(
        &self,
        rt: &ResourceType,
        _subresource: Option<&str>,
        old: &Value,
        obj: &Value,
    ) -> ApiResult<()> {
        self.validate(rt, Some(old), obj)
    }

    /// Converts `objects` (whole objects of this type, none of them in `api_version`) to
    /// `api_version` when the type converts between its versions through a webhook; `None`
    /// when it does not (the scheme's own conversion applies). `list`: they are a list's items.
    fn webhook_conversion<'a>(
        &'a self,
        _store: &'a Store,
        _rt: &'a ResourceType,
        _objects: &'a [Value],
        _api_version: &'a str,
        _list: bool,
    ) -> Option<BoxFuture<'a, ApiResult<Vec<Value>>>> {
        None
    }

    /// Writes `obj` at `key`, in one transaction with what `alongside` plans (the quotas it is
    /// charged to): a create when `rev` is `None`, else a replace of the object whose mod
    /// revision is still `rev`.
    fn write<'a>(
        &'a self,
        store: &'a Store,
        rt: &'a ResourceType,
        key: &'a str,
        obj: &'a mut Value,
        rev: Option<i64>,
        alongside: &'a dyn Alongside,
    ) -> BoxFuture<'a, ApiResult<Cas>> {
        Box::pin(async move {
            let stored = crate::registry::versions::to_stored(store, rt, obj).await?;
            let obj = stored.as_ref().unwrap_or(obj);
            store.write_with(key, obj, rev, alongside).await
        })
    }

    /// For a dry-run create: fills in what the write would allocate, without writing.
    fn preview<'a>(
        &'a self,
        _store: &'a Store,
        _key: &'a str,
        _obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async { Ok(()) })
    }

    /// After `obj` is deleted: releases what it held (best effort).
    fn after_delete<'a>(&'a self, _store: &'a Store, _obj: &'a Value) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The graceful-deletion period of `obj` for a delete that asked for `requested` seconds
    /// (0: deleted at once).
    fn grace_period(&self, _obj: &Value, _requested: Option<i64>) -> i64 {
        0
    }

    /// Whether a delete always leaves the object for a controller to remove (a namespace is
    /// emptied first); [`Strategy::mark_deleting`] says so on the object.
    fn removed_by_controller(&self) -> bool {
        false
    }

    /// Marks an object whose deletion has begun, for types that show it (a namespace's phase).
    fn mark_deleting(&self, _obj: &mut Value) {}

    /// What happens to dependents when a delete names no policy.
    fn gc_policy(&self) -> GcPolicy {
        GcPolicy::Delete
    }

    /// Whether a delete that removes an object at once answers with the object rather than a
    /// success `Status` (kube's `ReturnDeletedObject`).
    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// Whether a PUT of an absent object creates it (kube's `AllowCreateOnUpdate`).
    fn allow_create_on_update(&self) -> bool {
        false
    }

    /// Whether a PUT may leave out the resourceVersion (kube's `AllowUnconditionalUpdate`).
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// The `Scale` subresource's `status.selector` for `parent`.
    fn scale_selector(&self, parent: &Value) -> String {
        crate::machinery::selector::selector_string(&parent["spec"]["selector"])
    }
}

/// The strategy of a type with no behaviour of its own.
struct Plain;

impl Strategy for Plain {}

/// The strategy attached to `rt`, or that of a plain type when none is.
pub fn of(rt: &ResourceType) -> &dyn Strategy {
    match rt.hooks.get::<Arc<dyn Strategy>>() {
        Some(s) => s.as_ref(),
        None => &Plain,
    }
}

/// Prepares a new object: the type's strategy, then a generation of 1 where it has one.
pub fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    let strategy = of(rt);
    strategy.prepare_for_create(rt, obj);
    if strategy.tracks_generation(rt) {
        set_generation(obj, 1);
    }
}

/// Prepares an update of the main resource after its metadata is checked (and its generation
/// carried over from `old`): the stored status kept, the type's strategy, and a new
/// generation when the spec changed.
pub fn prepare_for_update(rt: &ResourceType, old: &Value, new: &mut Value) -> ApiResult<()> {
    let strategy = of(rt);
    keep_status(rt, old, new);
    strategy.prepare_for_update(rt, old, new)?;
    if strategy.tracks_generation(rt) && strategy.spec_changed(rt, old, new) {
        let current = new
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        set_generation(new, current + 1);
    }
    Ok(())
}

fn set_generation(obj: &mut Value, generation: i64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(generation));
    }
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

/// For a write to a subresource that owns `path` (`status`): everything but that part comes
/// from the stored object (metadata changes through `/status` are ignored, as kube-apiserver
/// does).
pub fn take_part(old: &Value, new: &Value, path: &[&str]) -> Value {
    let mut out = old.clone();
    let Some((last, parents)) = path.split_last() else {
        return out;
    };
    let written = parents.iter().try_fold(new, |v, step| v.get(*step));
    let mut at = &mut out;
    for step in parents {
        if at.get(*step).is_none() {
            if written.is_none() {
                return out;
            }
            at[*step] = Value::Object(Default::default());
        }
        at = &mut at[*step];
    }
    match (written.and_then(|w| w.get(*last)), at.as_object_mut()) {
        (Some(v), Some(o)) => {
            o.insert((*last).to_string(), v.clone());
        }
        (None, Some(o)) => {
            o.remove(*last);
        }
        (_, None) => {}
    }
    out
}
