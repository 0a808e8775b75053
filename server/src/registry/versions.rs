//! Objects between the version a request names and the version they are stored in, whatever
//! converts them: the scheme ([`conversion`]: a custom resource's `apiVersion`, a built-in
//! type's conversion pair) or the type's conversion webhook, reached through its strategy
//! ([`Strategy::webhook_conversion`](super::strategy::Strategy::webhook_conversion)). Writes
//! convert to the storage version before anything is stored; reads, lists and watch events
//! convert to the requested version before anything is sent. A list's objects go to the
//! webhook in one call; a failed call is the request's error. Admission webhooks and policies
//! registered for an equivalent resource (another version, or a built-in type with the same
//! storage kind: events.k8s.io and core Events) get the objects in its terms through the same
//! conversions ([`Versions`]).

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use futures::future::BoxFuture;

use super::reply::served_cached;
use super::strategy;
use crate::admission::{Equivalent, Versions};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::scheme::{conversion, Registry, ResourceType};
use crate::store::cacher::CachedObject;
use crate::store::{keys, Store, Stored};

/// Whether `rt`'s objects are converted by a webhook.
pub fn by_webhook(rt: &ResourceType) -> bool {
    rt.custom.as_ref().is_some_and(|c| c.conversion.is_some())
}

/// Whether `obj` is of `rt`'s kind and not in `api_version`.
fn needs(rt: &ResourceType, obj: &Value, api_version: &str) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some(&*rt.kind)
        && obj.get("apiVersion").and_then(Value::as_str) != Some(api_version)
}

/// `objects` converted by `rt`'s webhook to `api_version`, in one call.
async fn call(
    store: &Store,
    rt: &ResourceType,
    objects: &[Value],
    api_version: &str,
    list: bool,
) -> ApiResult<Vec<Value>> {
    match strategy::of(rt).webhook_conversion(store, rt, objects, api_version, list) {
        Some(converted) => converted.await,
        None => Err(ApiError::internal(format!(
            "no conversion webhook for {}/{}",
            rt.group, rt.kind
        ))),
    }
}

/// The object as it is stored, when that differs from how it was written (written through
/// another version than its storage version).
pub async fn to_stored(store: &Store, rt: &ResourceType, obj: &Value) -> ApiResult<Option<Value>> {
    if !by_webhook(rt) {
        return Ok(conversion::to_stored(rt, obj));
    }
    let Some(stored) = conversion::storage_api_version(rt) else {
        return Ok(None);
    };
    if !needs(rt, obj, &stored) {
        return Ok(None);
    }
    let converted = call(store, rt, std::slice::from_ref(obj), &stored, false).await?;
    Ok(converted.into_iter().next())
}

/// `objects` as read through `rt` (the list's items when `list`): those stored in another
/// version converted, with one webhook call for all of them.
pub async fn to_served(store: &Store, rt: &ResourceType, objects: &mut [Value], list: bool) -> ApiResult<()> {
    if !by_webhook(rt) {
        objects.iter_mut().for_each(|o| conversion::to_served(rt, o));
        return Ok(());
    }
    let target = rt.group_version();
    let at: Vec<usize> = (0..objects.len())
        .filter(|i| needs(rt, &objects[*i], &target))
        .collect();
    if at.is_empty() {
        return Ok(());
    }
    let sent: Vec<Value> = at.iter().map(|i| objects[*i].clone()).collect();
    let converted = call(store, rt, &sent, &target, list).await?;
    for (i, obj) in at.into_iter().zip(converted) {
        objects[i] = obj;
    }
    Ok(())
}

/// A stored object as the request's version shows it, so that every step of a write works
/// in the version it was sent in.
pub async fn served(store: &Store, rt: &ResourceType, stored: Option<Stored>) -> ApiResult<Option<Stored>> {
    let Some(mut s) = stored else {
        return Ok(None);
    };
    to_served(store, rt, std::slice::from_mut(&mut s.obj), false).await?;
    Ok(Some(s))
}

/// Cached objects as read through `rt`: their shared encodings where only `apiVersion`
/// differs, else converted (by the webhook, in one call for all of them).
pub async fn cached_to_served(
    store: &Store,
    rt: &ResourceType,
    objects: &mut [Arc<CachedObject>],
    list: bool,
) -> ApiResult<()> {
    let served = conversion::served_type_fields(rt);
    if !by_webhook(rt) {
        for obj in objects.iter_mut() {
            *obj = served_cached(served.as_deref(), rt, obj);
        }
        return Ok(());
    }
    let Some(fields) = served else {
        return Ok(());
    };
    let at: Vec<usize> = (0..objects.len())
        .filter(|i| objects[*i].type_fields() != fields)
        .collect();
    if at.is_empty() {
        return Ok(());
    }
    let mut values: Vec<Value> = at.iter().map(|i| objects[*i].value()).collect();
    to_served(store, rt, &mut values, list).await?;
    for (i, value) in at.into_iter().zip(values) {
        objects[i] = objects[i].converted(|v| *v = value);
    }
    Ok(())
}

/// The built-in types, read once: built-in equivalents are found among them.
fn builtin_types() -> &'static Registry {
    static TYPES: OnceLock<Registry> = OnceLock::new();
    TYPES.get_or_init(Registry::new)
}

fn equivalent(rt: &ResourceType) -> Equivalent {
    Equivalent {
        group: rt.group.to_string(),
        version: rt.version.to_string(),
        resource: rt.plural.to_string(),
        kind: rt.kind.to_string(),
    }
}

/// The type `rt` is equivalent to: a custom resource in another of its versions (the same
/// type as far as conversion goes: its storage version and conversion are the definition's),
/// a built-in type by its group, version and resource.
fn other(rt: &ResourceType, to: &Equivalent) -> ApiResult<ResourceType> {
    if rt.custom.is_some() {
        return Ok(ResourceType {
            version: to.version.as_str().into(),
            ..rt.clone()
        });
    }
    builtin_types()
        .lookup(&to.group, &to.version, &to.resource)
        .cloned()
        .ok_or_else(|| {
            ApiError::internal(format!(
                "no equivalent resource {}/{}, Resource={}",
                to.group, to.version, to.resource
            ))
        })
}

/// `obj`, read or written through `from`, as `to` shows it: to the storage version (or kind),
/// then to `to`'s.
async fn between(store: &Store, from: &ResourceType, to: &ResourceType, obj: &Value) -> ApiResult<Value> {
    if from.custom.is_none() {
        return Ok(conversion::between_builtin(from, to, obj));
    }
    let stored = to_stored(store, from, obj).await?.unwrap_or_else(|| obj.clone());
    let mut out = [stored];
    to_served(store, to, &mut out, false).await?;
    let [out] = out;
    Ok(out)
}

impl Versions for ResourceType {
    /// A custom resource's other served versions in its definition's order; for a built-in
    /// type, every other built-in type stored as the same kind (kube's equivalent resource
    /// registry: the storage kind's own type first).
    fn equivalents(&self, store: &Store) -> Vec<Equivalent> {
        let Some(custom) = &self.custom else {
            let Some(stored_as) = self.storage_kind() else {
                return Vec::new();
            };
            let mut out: Vec<&ResourceType> = builtin_types()
                .all()
                .filter(|t| t.storage_kind() == Some(stored_as))
                .filter(|t| (&t.group, &t.version, &t.plural) != (&self.group, &self.version, &self.plural))
                .collect();
            out.sort_by_key(|t| (&*t.group, &*t.version, &*t.kind) != stored_as);
            return out.into_iter().map(equivalent).collect();
        };
        let key = keys::object(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            None,
            &custom.definition,
        );
        let definition = store.cache().get(&key).ok().flatten().map(|d| d.value());
        let mut out: Vec<Equivalent> = Vec::new();
        for version in definition
            .as_ref()
            .and_then(|d| d["spec"]["versions"].as_array())
            .into_iter()
            .flatten()
            .filter(|v| v["served"].as_bool() == Some(true))
            .filter_map(|v| v["name"].as_str())
        {
            if version != &*self.version && !out.iter().any(|e| e.version == version) {
                out.push(Equivalent {
                    version: version.to_string(),
                    ..equivalent(self)
                });
            }
        }
        out
    }

    fn to_version<'a>(
        &'a self,
        store: &'a Store,
        obj: &'a Value,
        to: &'a Equivalent,
    ) -> BoxFuture<'a, ApiResult<Value>> {
        Box::pin(async move { between(store, self, &other(self, to)?, obj).await })
    }

    fn back_from_version<'a>(
        &'a self,
        store: &'a Store,
        obj: &'a Value,
        from: &'a Equivalent,
    ) -> BoxFuture<'a, ApiResult<Value>> {
        Box::pin(async move { between(store, &other(self, from)?, self, obj).await })
    }
}
