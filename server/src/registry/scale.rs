//! The `scale` subresource of Deployments, ReplicaSets, StatefulSets,
//! ReplicationControllers and custom resources that declare one: an `autoscaling/v1` Scale view of the parent (`spec.replicas`,
//! `status.replicas`, the selector as a string). Writes change the parent's `spec.replicas`
//! through the same compare-and-swap loop as any update, with the Scale's resourceVersion as
//! the precondition; `kubectl scale` sends a merge patch.

use serde_json::{json, Map, Value};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_path::{set_at, value_at};
use crate::machinery::meta::meta_str;
use crate::registry::options::{GetOptions, PatchOptions, WriteOptions};
use crate::registry::reply::{precondition, Reply};
use crate::registry::strategy;
use crate::registry::update::{guaranteed_update, Mutation, Patch, PatchType};
use crate::registry::ResourceRequest;
use crate::scheme::custom::ScalePaths;
use crate::scheme::ResourceType;
use crate::store::keys;

/// The Scale of a parent object.
pub fn to_scale(rt: &ResourceType, parent: &Value) -> Value {
    let mut meta = Map::new();
    for field in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = parent["metadata"].get(field) {
            meta.insert(field.into(), v.clone());
        }
    }
    if let Some(paths) = rt.custom.as_ref().and_then(|c| c.scale.as_ref()) {
        return custom_scale(paths, meta, parent);
    }
    let selector = strategy::of(rt).scale_selector(parent);
    let mut status = json!({"replicas": parent["status"]["replicas"].as_i64().unwrap_or(0)});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    // `spec.replicas` is omitted when zero, as the Go type serializes it.
    let spec = match parent["spec"]["replicas"].as_i64().unwrap_or(0) {
        0 => json!({}),
        n => json!({"replicas": n}),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": spec,
        "status": status,
    })
}

/// The Scale of a custom resource, read at its definition's paths.
fn custom_scale(paths: &ScalePaths, meta: Map<String, Value>, parent: &Value) -> Value {
    let number = |path: &[String]| value_at(parent, path).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": number(&paths.status_replicas)});
    if let Some(selector) = paths
        .label_selector
        .as_ref()
        .and_then(|p| value_at(parent, p))
        .and_then(Value::as_str)
    {
        status["selector"] = json!(selector);
    }
    let spec = match number(&paths.spec_replicas) {
        0 => json!({}),
        n => json!({"replicas": n}),
    };
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta, "spec": spec, "status": status})
}

fn scale_reply(rt: &ResourceType, reply: Reply) -> Reply {
    Reply {
        code: reply.code,
        body: to_scale(rt, &reply.body),
        table_rows: None,
        warnings: reply.warnings,
        items: None,
        cached: None,
    }
}

fn name_of(req: &ResourceRequest) -> ApiResult<String> {
    if !req.rt.has_scale {
        return Err(ApiError::no_route());
    }
    req.name.clone().ok_or_else(ApiError::method_not_allowed)
}

/// The desired replicas of a Scale body: a non-negative integer (absent means 0).
fn replicas_of(scale: &Value, name: &str) -> ApiResult<i64> {
    let replicas = match &scale["spec"]["replicas"] {
        Value::Null => 0,
        v => v
            .as_i64()
            .ok_or_else(|| ApiError::bad_request(format!("spec.replicas must be an integer, got {v}")))?,
    };
    if !(0..=i64::from(i32::MAX)).contains(&replicas) {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            &[(
                "spec.replicas".into(),
                format!("Invalid value: {replicas}: must be greater than or equal to 0"),
            )],
        ));
    }
    Ok(replicas)
}

fn check_scale_type(scale: &Value) -> ApiResult<()> {
    match scale["kind"].as_str() {
        None | Some("") | Some("Scale") => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind (Scale)"
            )))
        }
    }
    match scale["apiVersion"].as_str() {
        None | Some("") | Some("autoscaling/v1") => Ok(()),
        Some(v) => Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version (autoscaling/v1)"
        ))),
    }
}

/// The parent with `spec.replicas` set, prepared as an update of `current`.
fn rescaled(rt: &ResourceType, current: &Value, replicas: i64) -> ApiResult<Value> {
    let mut next = current.clone();
    if let Some(paths) = rt.custom.as_ref().and_then(|c| c.scale.as_ref()) {
        set_at(&mut next, &paths.spec_replicas, json!(replicas));
        strategy::prepare_for_update(rt, current, &mut next)?;
        return Ok(next);
    }
    match next.get_mut("spec").and_then(Value::as_object_mut) {
        Some(spec) => {
            spec.insert("replicas".into(), json!(replicas));
        }
        None => return Err(ApiError::internal(format!("stored {} has no spec", rt.kind))),
    }
    strategy::prepare_for_update(rt, current, &mut next)?;
    Ok(next)
}

/// GET of the Scale, from the watch cache at the revision the request's resourceVersion asks
/// for (as a GET of the parent).
pub async fn get(store: &crate::store::Store, req: &ResourceRequest, opts: &GetOptions) -> ApiResult<Reply> {
    let name = name_of(req)?;
    let at = opts.at;
    let parent = crate::store::delegator::get(
        store.cache(),
        &keys::of_object(&req.rt, req.namespace.as_deref(), &name),
        at,
    )
    .await?
    .ok_or_else(|| ApiError::not_found(&req.rt.group, &req.rt.plural, &name))?;
    let scale = to_scale(&req.rt, &parent.value());
    Ok(Reply {
        code: 200,
        body: scale.clone(),
        table_rows: Some((vec![scale], parent.rv.to_string())),
        warnings: Vec::new(),
        items: None,
        cached: None,
    })
}

/// PUT of the Scale: sets the parent's replicas, with the Scale's resourceVersion (if any) as a
/// precondition.
pub async fn update(
    store: &crate::store::Store,
    req: &ResourceRequest,
    opts: &WriteOptions,
    body: Value,
) -> ApiResult<Reply> {
    let name = name_of(req)?;
    check_scale_type(&body)?;
    match meta_str(&body, "name") {
        None | Some("") => {}
        Some(n) if n == name => {}
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )))
        }
    }
    let replicas = replicas_of(&body, &name)?;
    let pinned = precondition(&body)?;
    let dry = opts.dry_run;
    let rt = req.rt.clone();
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let cur = current.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &n))?;
        rescaled(&rt, &cur.obj, replicas)
    });
    let reply = guaranteed_update(store, req, &name, pinned, false, dry, mutate).await?;
    Ok(scale_reply(&req.rt, reply))
}

/// PATCH of the Scale (JSON patch or merge patch; a strategic merge patch of a Scale is a
/// merge patch, as it has no lists).
pub async fn patch(
    store: &crate::store::Store,
    req: &ResourceRequest,
    opts: &PatchOptions,
    kind: PatchType,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = name_of(req)?;
    let dry = opts.dry_run;
    let patch = Patch::decode(kind, body)?;
    let pinned = patch.merge_precondition()?;
    let rt = req.rt.clone();
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let cur = current.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &n))?;
        let mut scale = to_scale(&rt, &cur.obj);
        patch.apply(&mut scale, None)?;
        check_scale_type(&scale)?;
        rescaled(&rt, &cur.obj, replicas_of(&scale, &n)?)
    });
    let reply = guaranteed_update(store, req, &name, pinned, false, dry, mutate).await?;
    Ok(scale_reply(&req.rt, reply))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::strategy::Strategy;
    use crate::scheme::{Hooks, Registry};
    use std::sync::Arc;

    /// A scalable kind whose objects track a generation (as `kinds` makes Deployments).
    struct Generational;

    impl Strategy for Generational {
        fn tracks_generation(&self, _rt: &ResourceType) -> bool {
            true
        }
    }

    fn deployments() -> ResourceType {
        let mut rt = Registry::new()
            .lookup("apps", "v1", "deployments")
            .unwrap()
            .clone();
        rt.hooks = Hooks::new(Arc::new(Generational) as Arc<dyn Strategy>);
        rt
    }

    #[test]
    fn scales_show_replicas_and_selector() {
        let d = &deployments();
        let parent = json!({"metadata": {"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "9", "labels": {"x": "y"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 2}});
        let s = to_scale(d, &parent);
        assert_eq!(s["kind"], "Scale");
        assert_eq!(s["apiVersion"], "autoscaling/v1");
        assert_eq!(
            s["metadata"],
            json!({"name": "web", "namespace": "ns", "uid": "u", "resourceVersion": "9"})
        );
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=web"}));
    }

    #[test]
    fn replicas_must_be_a_non_negative_integer() {
        assert_eq!(replicas_of(&json!({"spec": {"replicas": 4}}), "x").unwrap(), 4);
        assert_eq!(replicas_of(&json!({"spec": {}}), "x").unwrap(), 0);
        assert_eq!(
            replicas_of(&json!({"spec": {"replicas": -1}}), "x")
                .unwrap_err()
                .code,
            422
        );
        assert_eq!(
            replicas_of(&json!({"spec": {"replicas": "3"}}), "x")
                .unwrap_err()
                .code,
            400
        );
        let d = &deployments();
        let current = json!({"metadata": {"name": "web", "generation": 1}, "spec": {"replicas": 1}});
        let next = rescaled(d, &current, 5).unwrap();
        assert_eq!(next["spec"]["replicas"], 5);
        assert_eq!(next["metadata"]["generation"], 2);
        assert!(check_scale_type(&json!({"kind": "Deployment"})).is_err());
    }
}
