//! Objects between the version a request names and the version they are stored in, whatever
//! converts them: the scheme ([`conversion`]: a custom resource's `apiVersion`, a built-in
//! type's conversion pair) or the type's conversion webhook, reached through its strategy
//! ([`Strategy::webhook_conversion`](super::strategy::Strategy::webhook_conversion)). Writes
//! convert to the storage version before anything is stored; reads, lists and watch events
//! convert to the requested version before anything is sent. A list's objects go to the
//! webhook in one call; a failed call is the request's error.

use std::sync::Arc;

use serde_json::Value;

use super::reply::served_cached;
use super::strategy;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::scheme::{conversion, ResourceType};
use crate::store::cacher::CachedObject;
use crate::store::{Store, Stored};

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
