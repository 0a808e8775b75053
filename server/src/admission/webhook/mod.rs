//! Admission webhooks (kube's `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook`
//! plugins): every write is sent, as an `AdmissionReview`, to the webhooks of the stored
//! MutatingWebhookConfigurations and ValidatingWebhookConfigurations whose rules and selectors
//! match it. The mutating webhooks run last among the mutating plugins, one after the other,
//! their JSONPatches applied in order (those asking `reinvocationPolicy: IfNeeded` are called
//! once more when a later webhook changed the object); the validating ones run last among the
//! validating plugins, all at once. Both are plugins of the one [`Chain`](super::Chain).
//!
//! The configurations are read from the replica's watch cache after the chain's read barrier, so a
//! configuration whose write was acknowledged through any replica applies to the next write on
//! every replica. The webhook configurations themselves (the whole `admissionregistration.k8s.io`
//! group) are never sent to webhooks, so a broken webhook can always be removed.

mod matching;
mod review;

pub use matching::ReviewVersion;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::{join_all, BoxFuture};
use serde_json::Value;

use super::{Attributes, Mutating, Operation, Validating};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::store::cacher::CachedObject;
use crate::store::{keys, Store};
use matching::{Hook, Invocation};
use review::Outcome;

/// The group whose objects no webhook sees (kube's exempt admission configuration resources).
const EXEMPT_GROUP: &str = "admissionregistration.k8s.io";

/// The webhooks read from each configuration (with their compiled match conditions), by the
/// configuration's key, with the cached object they were read from: read again only when the
/// cache holds another version of the configuration.
type Parsed = HashMap<String, (Arc<CachedObject>, Vec<Arc<Hook>>)>;

fn parsed() -> &'static Mutex<Parsed> {
    static PARSED: OnceLock<Mutex<Parsed>> = OnceLock::new();
    PARSED.get_or_init(Default::default)
}

/// The webhooks of one kind of configuration, in the order kube calls them: configurations by
/// name, webhooks in their order (from the cache, which the chain brought up to date).
async fn configured(store: &Store, plural: &str, mutating: bool) -> ApiResult<Vec<Arc<Hook>>> {
    let prefix = keys::type_prefix(EXEMPT_GROUP, plural);
    let Some(snapshot) = store.cache().list(&prefix, None, None) else {
        return Ok(Vec::new());
    };
    let mut known = parsed().lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut hooks = Vec::new();
    for (key, obj) in &snapshot.objects {
        let fresh = known
            .get(key)
            .filter(|(read, _)| Arc::ptr_eq(read, obj))
            .map(|(_, h)| h.clone());
        let of_config = fresh.unwrap_or_else(|| {
            let h: Vec<Arc<Hook>> = hooks_of(obj, mutating).into_iter().map(Arc::new).collect();
            known.insert(key.clone(), (obj.clone(), h.clone()));
            h
        });
        hooks.extend(of_config);
    }
    known.retain(|key, _| !key.starts_with(&prefix) || snapshot.objects.iter().any(|(k, _)| k == key));
    Ok(hooks)
}

fn hooks_of(obj: &Arc<CachedObject>, mutating: bool) -> Vec<Hook> {
    let config = obj.value();
    let id = format!(
        "{}/{}",
        meta_str(&config, "uid").unwrap_or_default(),
        meta_str(&config, "resourceVersion").unwrap_or_default()
    );
    config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, w)| Hook::parse(w, &format!("{id}/{i}"), mutating))
        .collect()
}

/// Whether webhooks see writes of this resource at all.
fn exempt(attrs: &Attributes<'_>) -> bool {
    attrs.group == EXEMPT_GROUP
}

/// The mutating webhooks, as the last mutating plugin.
pub struct MutatingWebhooks;

impl Mutating for MutatingWebhooks {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn admit<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(mutate(store, attrs, obj))
    }
}

async fn mutate(store: &Store, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
    if exempt(attrs) {
        return Ok(());
    }
    let hooks = configured(store, "mutatingwebhookconfigurations", true).await?;
    if attrs.operation == Operation::Delete {
        return admit_delete(store, &hooks, attrs).await;
    }
    // Each webhook called, and whether it changed the object.
    let mut calls: Vec<(usize, bool)> = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let Some(invocation) = matching::invocation(store, hook, attrs, Some(obj)).await? else {
            continue;
        };
        let before = obj.clone();
        call_mutating(store, hook, attrs, &invocation, obj).await?;
        calls.push((i, *obj != before));
    }
    // kube's `reinvocationPolicy: IfNeeded`: a webhook is called once more when a webhook
    // after it changed the object.
    let again: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(pos, (i, _))| hooks[*i].reinvoke && calls[pos + 1..].iter().any(|(_, changed)| *changed))
        .map(|(_, (i, _))| *i)
        .collect();
    for i in again {
        if let Some(invocation) = matching::invocation(store, &hooks[i], attrs, Some(obj)).await? {
            call_mutating(store, &hooks[i], attrs, &invocation, obj).await?;
        }
    }
    Ok(())
}

/// A delete is admitted before its object is read, as kube-apiserver's handler admits it: the
/// mutating webhooks that match it are called with neither object, and may refuse it or have
/// side effects, but a patch has nothing to apply to and fails the delete as kube fails it.
async fn admit_delete(store: &Store, hooks: &[Arc<Hook>], attrs: &Attributes<'_>) -> ApiResult<()> {
    for hook in hooks {
        let Some(invocation) = matching::invocation(store, hook, attrs, None).await? else {
            continue;
        };
        match review::call(store, hook, &invocation.attributes(attrs), attrs, None).await {
            Outcome::Allowed { patch, warnings } => {
                warnings.into_iter().for_each(super::warnings::warn);
                if patch
                    .as_ref()
                    .and_then(Value::as_array)
                    .is_some_and(|ops| !ops.is_empty())
                {
                    return Err(review::internal(format!(
                        "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                        hook.name
                    )));
                }
            }
            Outcome::Refused(e) => return Err(e),
            Outcome::Failed(e) => hook.on_failure(e)?,
        }
    }
    Ok(())
}

/// Calls a mutating webhook and applies its patch: to the object as the resource the webhook
/// was called as, converted back to the request's resource afterwards.
async fn call_mutating(
    store: &Store,
    hook: &Hook,
    attrs: &Attributes<'_>,
    invocation: &Invocation,
    obj: &mut Value,
) -> ApiResult<()> {
    let outcome = review::call(
        store,
        hook,
        &invocation.attributes(attrs),
        attrs,
        invocation.object(Some(obj)),
    )
    .await;
    match outcome {
        Outcome::Allowed { patch, warnings } => {
            warnings.into_iter().for_each(super::warnings::warn);
            let Some(patch) = patch else {
                return Ok(());
            };
            match (
                invocation.converted_from(),
                attrs.versions,
                invocation.object(None),
            ) {
                (Some(equivalent), Some(versions), Some(seen)) => {
                    let mut seen = seen.clone();
                    review::apply_patch(hook, &mut seen, patch)?;
                    *obj = versions.back_from_version(store, &seen, equivalent).await?;
                }
                _ => review::apply_patch(hook, obj, patch)?,
            }
            Ok(())
        }
        Outcome::Refused(e) => Err(e),
        Outcome::Failed(e) => hook.on_failure(e),
    }
}

/// The validating webhooks, as the last validating plugin.
pub struct ValidatingWebhooks;

impl Validating for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn validate<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(validate(store, attrs, obj))
    }
}

async fn validate(store: &Store, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
    if exempt(attrs) {
        return Ok(());
    }
    let object = Some(obj).filter(|o| !o.is_null());
    let hooks = configured(store, "validatingwebhookconfigurations", false).await?;
    let mut matched = Vec::new();
    for hook in &hooks {
        if let Some(invocation) = matching::invocation(store, hook, attrs, object).await? {
            matched.push((hook, invocation));
        }
    }
    let results = join_all(matched.iter().map(|(hook, invocation)| async move {
        let seen = invocation.attributes(attrs);
        match review::call(store, hook, &seen, attrs, invocation.object(object)).await {
            Outcome::Allowed { warnings, .. } => {
                warnings.into_iter().for_each(super::warnings::warn);
                Ok(())
            }
            Outcome::Refused(e) => Err(e),
            Outcome::Failed(e) => hook.on_failure(e),
        }
    }))
    .await;
    results
        .into_iter()
        .collect::<Result<Vec<()>, ApiError>>()
        .map(|_| ())
}
