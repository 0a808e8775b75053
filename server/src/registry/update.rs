//! PUT and PATCH of the generic store (JSON, merge, strategic merge and server-side apply),
//! each a guaranteed update: read, transform, write if unchanged, retry on a lost race.

use super::reply::{check_grant, key, name_of, not_found, precondition, with_rv, Reply, MAX_CAS_RETRIES};
use crate::admission::resource_quota::Charge;
use crate::admission::{self, Operation};
use crate::machinery::decode::decode_body;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::{self, Decoded};
use crate::machinery::managed::{self, Part};
use crate::machinery::meta::{check_type, meta_str, prepare_create, prepare_update};
use crate::machinery::schema::{schemas, Node};
use crate::machinery::strategic_merge;
use crate::registry::options::{PatchOptions, WriteOptions};
use crate::registry::strategy::{self, take_part};
use crate::registry::versions::served;
use crate::registry::ResourceRequest;
use crate::scheme::{self, ResourceType};
use crate::store::{Alongside, Cas, Store, Stored};
use serde_json::{json, Value};

/// The object a write would store, computed from the current one.
pub(super) type Mutation<'a> = Box<dyn FnMut(Option<&Stored>) -> ApiResult<Value> + Send + 'a>;

/// Read-modify-write with compare-and-swap. `pinned` is the client's resourceVersion
/// precondition: with one, a lost race is a 409; without, it is retried on the fresh object.
pub(super) async fn guaranteed_update(
    store: &Store,
    req: &ResourceRequest,
    name: &str,
    pinned: Option<i64>,
    create_if_absent: bool,
    dry: bool,
    mut mutate: Mutation<'_>,
) -> ApiResult<Reply> {
    let rt = &req.rt;
    let key = key(req, name);
    let mut current = served(store, rt, store.get(&key, true).await?).await?;
    for _ in 0..MAX_CAS_RETRIES {
        match (&current, pinned) {
            (None, _) if !create_if_absent => return Err(not_found(rt, name)),
            (Some(cur), Some(rv)) if cur.rv != rv => return Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )),
            _ => {}
        }
        let mut next = mutate(current.as_ref())?;
        let outcome = match &current {
            Some(cur) => {
                let attrs = req.admission(Operation::Update, name, dry, Some(&cur.obj));
                admission::chain().admit(store, &attrs, &mut next).await?;
                // An object on its way out may only lose finalizers; anything else is checked.
                if meta_str(&next, "deletionTimestamp").is_none() {
                    strategy::of(rt).validate_update(rt, req.subresource.as_deref(), &cur.obj, &next)?;
                }
                admission::chain().validate(store, &attrs, &next).await?;
                check_grant(req, &next, Some(&cur.obj))?;
                let quota = Charge::new(&attrs);
                if dry {
                    quota.plan(store, &next).await?;
                    return Ok(Reply::object(200, with_rv(next, cur.rv)));
                }
                // An object being deleted goes once its last finalizer is removed (unless it
                // is still in a graceful-deletion period, which only its owner ends).
                let finalized = !strategy::of(rt).removed_by_controller()
                    && meta_str(&next, "deletionTimestamp").is_some()
                    && next["metadata"]["deletionGracePeriodSeconds"]
                        .as_i64()
                        .unwrap_or(0)
                        == 0
                    && next["metadata"]["finalizers"]
                        .as_array()
                        .is_none_or(|f| f.is_empty());
                if finalized {
                    match store.delete(&key, cur.rv).await? {
                        Cas::Done(_) => {
                            strategy::of(rt).after_delete(store, &next).await;
                            return Ok(Reply::object(200, with_rv(next, cur.rv)));
                        }
                        Cas::Failed(fresh) => {
                            current = served(store, rt, fresh).await?;
                            continue;
                        }
                    }
                }
                if !cur.stale && unchanged(&cur.obj, &next) {
                    // Nothing to store: no new revision, no watch event (kubectl says "no change").
                    return Ok(Reply::object(200, with_rv(cur.obj.clone(), cur.rv)));
                }
                strategy::of(rt)
                    .write(store, rt, &key, &mut next, Some(cur.rv), &quota)
                    .await?
            }
            None => {
                prepare_create(rt, &mut next, req.namespace.as_deref())?;
                let attrs = req.admission(
                    Operation::Create,
                    req.name.as_deref().unwrap_or_default(),
                    dry,
                    None,
                );
                strategy::prepare_for_create(rt, &mut next);
                admission::chain().admit(store, &attrs, &mut next).await?;
                strategy::of(rt).validate(rt, None, &next)?;
                admission::chain().validate(store, &attrs, &next).await?;
                check_grant(req, &next, None)?;
                let quota = Charge::new(&attrs);
                if dry {
                    quota.plan(store, &next).await?;
                    return Ok(Reply::object(201, next));
                }
                strategy::of(rt)
                    .write(store, rt, &key, &mut next, None, &quota)
                    .await?
            }
        };
        match outcome {
            Cas::Done(rev) => {
                let code = if current.is_some() { 200 } else { 201 };
                return Ok(Reply::object(code, with_rv(next, rev)));
            }
            Cas::Failed(fresh) => current = served(store, rt, fresh).await?,
        }
    }
    Err(ApiError::conflict(
        &rt.group,
        &rt.plural,
        name,
        "too many concurrent writes; try again",
    ))
}

/// Whether `next` would store the same object as `current`. kube-apiserver compares the
/// encoded objects and writes nothing when they are equal; the resourceVersion is not part of
/// either, and neither is when a manager last applied fields it already owned (kube stamps a
/// managedFields entry's time only when its operation changes the object).
fn unchanged(current: &Value, next: &Value) -> bool {
    members_equal(current, next, &[], |key, a, b| match key {
        "metadata" => members_equal(a, b, &["resourceVersion"], |key, a, b| match key {
            "managedFields" => same_managed_fields(a, b),
            _ => a == b,
        }),
        _ => a == b,
    })
}

/// Whether `a` and `b` have the same members but for those named in `aside`, each pair
/// compared by `compare(name, a's, b's)`; values that are not both objects compare as they
/// are. Nothing is cloned (this runs on every update of every object).
fn members_equal(
    a: &Value,
    b: &Value,
    aside: &[&str],
    compare: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let kept = |m: &'_ serde_json::Map<String, Value>| {
        m.iter().filter(|(k, _)| !aside.contains(&k.as_str())).count()
    };
    kept(a) == kept(b)
        && a.iter()
            .filter(|(k, _)| !aside.contains(&k.as_str()))
            .all(|(k, x)| b.get(k).is_some_and(|y| compare(k, x, y)))
}

/// Whether two `managedFields` lists hold the same entries in any order, each entry's `time`
/// aside.
fn same_managed_fields(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_array(), b.as_array()) else {
        return a == b;
    };
    let same_entry = |x: &Value, y: &Value| members_equal(x, y, &["time"], |_, x, y| x == y);
    if a.len() != b.len() {
        return false;
    }
    if a.iter().zip(b).all(|(x, y)| same_entry(x, y)) {
        return true;
    }
    let mut taken = vec![false; b.len()];
    a.iter().all(|x| {
        let found = (0..b.len()).find(|&i| !taken[i] && same_entry(x, &b[i]));
        if let Some(i) = found {
            taken[i] = true;
        }
        found.is_some()
    })
}

/// Which part of the object a PUT or PATCH through `req` writes: the main resource, or the
/// part its subresource owns (`404` for a subresource that owns none).
fn written_part(req: &ResourceRequest, name: &str) -> ApiResult<Part> {
    let Some(sub) = req.subresource.as_deref() else {
        return Ok(Part::Main);
    };
    match req.rt.subresource(sub) {
        Some(s) => s
            .part
            .map(|path| Part::Sub(s.name, path))
            .ok_or_else(ApiError::method_not_allowed),
        None => Err(ApiError::not_found(
            &req.rt.group,
            &format!("{}/{sub}", req.rt.plural),
            name,
        )),
    }
}

/// `next`, an update of `cur` through `part`, prepared as the type prepares it: the main
/// resource's metadata rules and strategy, or only the subresource's part taken over (and
/// checked by the strategy).
fn prepare_part(rt: &ResourceType, part: Part, cur: &Value, mut next: Value, name: &str) -> ApiResult<Value> {
    match part {
        Part::Main => {
            prepare_update(rt, cur, &mut next, name)?;
            strategy::prepare_for_update(rt, cur, &mut next)?;
            Ok(next)
        }
        Part::Sub(sub, path) => {
            let mut next = take_subresource(rt, sub, path, cur, next, name)?;
            strategy::of(rt).update_subresource(rt, sub, cur, &mut next)?;
            Ok(next)
        }
    }
}

/// `cur` with `next`'s `path`, the part the subresource `sub` owns. A `status` write of a type
/// that keeps such writes' metadata (`scheme::status_metadata_resets`) also takes `next`'s
/// metadata, under the rules of an update of the object, except the fields its status
/// strategy resets (a pod's owner references).
fn take_subresource(
    rt: &ResourceType,
    sub: &str,
    path: &[&str],
    cur: &Value,
    mut next: Value,
    name: &str,
) -> ApiResult<Value> {
    let mut taken = take_part(cur, &next, path);
    let Some(resets) = scheme::status_metadata_resets(rt).filter(|_| sub == "status") else {
        return Ok(taken);
    };
    prepare_update(rt, cur, &mut next, name)?;
    let mut meta = next["metadata"].take();
    if let Some(m) = meta.as_object_mut() {
        for field in resets {
            match cur["metadata"].get(*field) {
                Some(v) => m.insert((*field).to_string(), v.clone()),
                None => m.remove(*field),
            };
        }
    }
    taken["metadata"] = meta;
    Ok(taken)
}

/// PUT of an object (or of a subresource that owns a part of it).
pub async fn update(
    store: &Store,
    req: &ResourceRequest,
    opts: &WriteOptions,
    decoded: Decoded,
) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = opts.dry_run;
    let mut body = decoded.value;
    let pinned = precondition(&body)?;
    let rt = req.rt.clone();
    if req.subresource.as_deref() == Some("scale") && rt.has_scale {
        return crate::registry::scale::update(store, req, opts, body).await;
    }
    check_type(&rt, &mut body)?;
    let warnings = field_validation::check(&rt, &mut body, &decoded.duplicates, opts.field_validation)?;
    let manager = opts.field_manager.clone();
    let requested = body["metadata"].get("managedFields").cloned();
    let part = written_part(req, &name)?;
    let create = strategy::of(&rt).allow_create_on_update() && part == Part::Main;
    let unconditional_refused = pinned.is_none() && !strategy::of(&rt).allow_unconditional_update();
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let mut next = body.clone();
        match current {
            Some(_) if unconditional_refused => {
                // kube-apiserver's refusal names the resource where the kind would be.
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.plural,
                    &n,
                    &[(
                        "metadata.resourceVersion".to_string(),
                        "Invalid value: 0x0: must be specified for an update".to_string(),
                    )],
                ));
            }
            Some(cur) => {
                next = prepare_part(&rt, part, &cur.obj, next, &n)?;
                managed::record_update(&rt, part, Some(&cur.obj), &mut next, &manager, requested.as_ref());
            }
            None => {
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("name".into(), json!(n));
                }
                managed::record_update(&rt, Part::Main, None, &mut next, &manager, requested.as_ref());
            }
        }
        Ok(next)
    });
    guaranteed_update(store, req, &name, pinned, create, dry, mutate)
        .await
        .map(|r| r.with_warnings(warnings))
}

/// The patch formats the server understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 `application/json-patch+json`.
    Json,
    /// RFC 7386 `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json` (built-in types).
    Strategic,
    /// `application/apply-patch+yaml`: server-side apply.
    Apply,
}

/// The media type of a server-side apply request.
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

impl PatchType {
    /// The patch type of a request's Content-Type; anything else is a 415.
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        match ct {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            APPLY_PATCH => Ok(PatchType::Apply),
            _ => Err(ApiError::unsupported_media_type()),
        }
    }
}

/// Server-side apply (`application/apply-patch+yaml`): merges the configuration into the
/// object (creating it if absent) with field ownership; see [`managed`].
async fn apply(
    store: &Store,
    req: &ResourceRequest,
    opts: &PatchOptions,
    body: &[u8],
    part: Part,
) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = opts.dry_run;
    let force = opts.force;
    let manager = opts.field_manager.clone();
    let rt = req.rt.clone();
    let decoded = decode_body("application/yaml", body)?;
    let mut config = decoded.value;
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the body of an apply patch must be an object (a YAML or JSON mapping)",
        ));
    }
    check_type(&rt, &mut config)?;
    if config["metadata"]
        .get("managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    match config["metadata"]["name"].as_str() {
        Some(n) if n == name => {}
        None => config["metadata"]["name"] = json!(name),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({other}) does not match the name on the URL ({name})"
            )))
        }
    }
    let warnings = field_validation::check(&rt, &mut config, &decoded.duplicates, opts.field_validation)?;
    let pinned = precondition(&config)?;
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let live = current.map_or_else(|| json!({}), |c| c.obj.clone());
        let mut next = managed::apply(&rt, part, &live, &config, &manager, force)?;
        if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        if let Some(cur) = current {
            if let Part::Sub(sub, path) = part {
                let managed_fields = next["metadata"].get("managedFields").cloned();
                next = take_subresource(&rt, sub, path, &cur.obj, next, &n)?;
                strategy::of(&rt).update_subresource(&rt, sub, &cur.obj, &mut next)?;
                match managed_fields {
                    Some(m) => next["metadata"]["managedFields"] = m,
                    None => {
                        if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                            meta.remove("managedFields");
                        }
                    }
                }
            } else {
                prepare_update(&rt, &cur.obj, &mut next, &n)?;
                strategy::prepare_for_update(&rt, &cur.obj, &mut next)?;
            }
        }
        Ok(next)
    });
    let create = part == Part::Main;
    let reply = guaranteed_update(store, req, &name, pinned, create, dry, mutate).await?;
    Ok(reply.with_warnings(warnings))
}

/// A decoded patch body.
pub(super) enum Patch {
    /// RFC 6902 operations.
    Json(json_patch::Patch),
    /// An RFC 7386 merge document (always a JSON object).
    Merge(Value),
    /// A strategic merge document (always a JSON object).
    Strategic(Value),
}

impl Patch {
    /// Decodes a patch body of the given type; a malformed one is a 400.
    pub(super) fn decode(kind: PatchType, body: &[u8]) -> ApiResult<Patch> {
        let doc: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as a patch: {e}"
            ))
        })?;
        match kind {
            PatchType::Json => serde_json::from_value(doc)
                .map(Patch::Json)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}"))),
            PatchType::Merge if doc.is_object() => Ok(Patch::Merge(doc)),
            PatchType::Strategic if doc.is_object() => Ok(Patch::Strategic(doc)),
            PatchType::Merge | PatchType::Strategic => {
                Err(ApiError::bad_request("a merge patch must be a JSON object"))
            }
            PatchType::Apply => Err(ApiError::unsupported_media_type()),
        }
    }

    /// Applies the patch to `target`, whose schema (for strategic merge) is `node`; a patch
    /// that cannot apply (e.g. a failed `test`, a list item without its merge key) is a 422
    /// and leaves nothing half-applied for the caller to store.
    pub(super) fn apply(&self, target: &mut Value, node: Option<Node<'_>>) -> ApiResult<()> {
        let unprocessable = |e: String| ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("the server rejected our request due to an error in our request: {e}"),
            details: None,
            retry_after: None,
            continue_token: None,
        };
        match self {
            Patch::Json(p) => json_patch::patch(target, p).map_err(|e| unprocessable(e.to_string())),
            Patch::Merge(doc) => {
                json_patch::merge(target, doc);
                Ok(())
            }
            Patch::Strategic(doc) => {
                strategic_merge::apply(target, doc, node).map_err(|e| unprocessable(e.0))
            }
        }
    }

    /// The resourceVersion precondition a merge patch carries in `metadata.resourceVersion`.
    pub(super) fn merge_precondition(&self) -> ApiResult<Option<i64>> {
        match self {
            Patch::Merge(doc) | Patch::Strategic(doc) => precondition(doc),
            Patch::Json(_) => Ok(None),
        }
    }
}

/// PATCH of an object (or of a subresource that owns a part of it).
pub async fn patch(
    store: &Store,
    req: &ResourceRequest,
    opts: &PatchOptions,
    kind: PatchType,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = opts.dry_run;
    let rt = req.rt.clone();
    if req.subresource.as_deref() == Some("scale") && rt.has_scale {
        return crate::registry::scale::patch(store, req, opts, kind, body).await;
    }
    let part = written_part(req, &name)?;
    if kind == PatchType::Apply {
        return apply(store, req, opts, body, part).await;
    }
    if kind == PatchType::Strategic && rt.custom.is_some() {
        // Custom resources have no patch strategies to merge by, as in kube-apiserver.
        return Err(ApiError::unsupported_patch_type(false));
    }
    let patch = Patch::decode(kind, body)?;
    let directive = opts.field_validation;
    let manager = opts.field_manager.clone();
    let schema_type = rt.clone();
    let schema = schemas().kind(&schema_type);
    // A merge patch that sets metadata.resourceVersion is a precondition.
    let mut pinned = patch.merge_precondition()?;
    let current = served(store, &rt, store.get(&key(req, &name), true).await?).await?;
    if let (Some(cur), Patch::Json(_)) = (&current, &patch) {
        // A JSON patch that changes metadata.resourceVersion pins it too.
        let mut probe = cur.obj.clone();
        if patch.apply(&mut probe, schema).is_ok()
            && probe["metadata"]["resourceVersion"] != cur.obj["metadata"]["resourceVersion"]
        {
            pinned = precondition(&probe)?;
        }
    }
    let n = name.clone();
    let mut warnings = Vec::new();
    let found = &mut warnings;
    let mutate: Mutation<'_> = Box::new(move |current| {
        let cur = current.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &n))?;
        let mut next = cur.obj.clone();
        patch.apply(&mut next, schema)?;
        let inspection = field_validation::inspect(&rt, &mut next);
        if let (Patch::Strategic(doc), Some(why)) = (&patch, inspection.conversion_error()) {
            // kube-apiserver converts a strategic merge patch's result from a map to the Go
            // type, and answers that converter's refusals as an invalid patch.
            return Err(ApiError::invalid_patch(doc, why));
        }
        *found = inspection.verdict(&rt, &[], directive)?;
        if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let requested = next["metadata"].get("managedFields").cloned();
        next = prepare_part(&rt, part, &cur.obj, next, &n)?;
        managed::record_update(&rt, part, Some(&cur.obj), &mut next, &manager, requested.as_ref());
        Ok(next)
    });
    drop(current);
    let reply = guaranteed_update(store, req, &name, pinned, false, dry, mutate).await?;
    Ok(reply.with_warnings(warnings))
}

#[cfg(test)]
mod patch_tests {
    use super::*;

    #[test]
    fn an_update_is_unchanged_but_for_its_resource_version_and_managed_times() {
        let entry =
            |manager: &str, time: &str| json!({"manager": manager, "operation": "Update", "time": time});
        let obj = json!({"kind": "Pod", "metadata": {"name": "p", "resourceVersion": "5",
                          "labels": {"a": "1"},
                          "managedFields": [entry("x", "t1"), entry("y", "t1")]},
                          "spec": {"n": 1}});
        let mut same = obj.clone();
        same["metadata"]["resourceVersion"] = json!("6");
        same["metadata"]["managedFields"] = json!([entry("y", "t2"), entry("x", "t3")]);
        assert!(unchanged(&obj, &same));
        if let Some(m) = same["metadata"].as_object_mut() {
            m.remove("resourceVersion");
        }
        assert!(unchanged(&obj, &same));
        for (path, value) in [
            ("/spec/n", json!(2)),
            ("/metadata/labels/a", json!("2")),
            ("/metadata/managedFields/0/manager", json!("z")),
            (
                "/metadata/managedFields",
                json!([entry("x", "t1"), entry("x", "t1")]),
            ),
            ("/metadata/managedFields", json!([entry("x", "t1")])),
        ] {
            let mut changed = obj.clone();
            *changed.pointer_mut(path).unwrap() = value;
            assert!(!unchanged(&obj, &changed), "{path}");
        }
        let mut extra = obj.clone();
        extra["status"] = json!({});
        assert!(!unchanged(&obj, &extra) && !unchanged(&extra, &obj));
    }

    fn run(kind: PatchType, target: Value, patch: Value) -> ApiResult<Value> {
        let mut doc = target;
        Patch::decode(kind, patch.to_string().as_bytes())?.apply(&mut doc, None)?;
        Ok(doc)
    }

    /// RFC 7386 appendix A.
    #[test]
    fn merge_patch_rfc_7386_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ];
        for (target, patch, want) in cases {
            assert_eq!(
                run(PatchType::Merge, target, patch.clone()).unwrap(),
                want,
                "{patch}"
            );
        }
        // A merge patch must be an object (RFC 7386 allows others; Kubernetes does not).
        assert_eq!(
            run(PatchType::Merge, json!({}), json!(["a"])).unwrap_err().code,
            400
        );
    }

    /// RFC 6902 section 4 operations and appendix A's escaping and failure cases.
    #[test]
    fn json_patch_rfc_6902_examples() {
        let doc = json!({"foo": "bar", "baz": ["a", "c"], "a/b": 1, "m~n": 2});
        let ok = [
            (
                json!([{"op": "add", "path": "/baz/1", "value": "b"}]),
                json!({"foo": "bar", "baz": ["a", "b", "c"], "a/b": 1, "m~n": 2}),
            ),
            (
                json!([{"op": "remove", "path": "/baz/0"}]),
                json!({"foo": "bar", "baz": ["c"], "a/b": 1, "m~n": 2}),
            ),
            (
                json!([{"op": "replace", "path": "/foo", "value": 7}]),
                json!({"foo": 7, "baz": ["a", "c"], "a/b": 1, "m~n": 2}),
            ),
            (
                json!([{"op": "move", "from": "/foo", "path": "/qux"}]),
                json!({"qux": "bar", "baz": ["a", "c"], "a/b": 1, "m~n": 2}),
            ),
            (
                json!([{"op": "copy", "from": "/baz/0", "path": "/baz/-"}]),
                json!({"foo": "bar", "baz": ["a", "c", "a"], "a/b": 1, "m~n": 2}),
            ),
            (
                json!([{"op": "test", "path": "/a~1b", "value": 1}, {"op": "test", "path": "/m~0n", "value": 2}]),
                doc.clone(),
            ),
        ];
        for (patch, want) in ok {
            assert_eq!(
                run(PatchType::Json, doc.clone(), patch.clone()).unwrap(),
                want,
                "{patch}"
            );
        }
        for bad in [
            json!([{"op": "test", "path": "/foo", "value": "nope"}]),
            json!([{"op": "remove", "path": "/missing"}]),
            json!([{"op": "add", "path": "/baz/9", "value": 1}]),
            json!([{"op": "add", "path": "/x", "value": 1}, {"op": "test", "path": "/x", "value": 2}]),
        ] {
            assert_eq!(
                run(PatchType::Json, doc.clone(), bad.clone()).unwrap_err().code,
                422,
                "{bad}"
            );
        }
        assert_eq!(
            run(
                PatchType::Json,
                doc.clone(),
                json!([{"op": "explode", "path": "/"}])
            )
            .unwrap_err()
            .code,
            400
        );
        assert_eq!(
            run(PatchType::Json, doc, json!({"op": "add"})).unwrap_err().code,
            400
        );
    }

    #[test]
    fn the_apply_media_type() {
        assert_eq!(
            PatchType::from_content_type(APPLY_PATCH).unwrap(),
            PatchType::Apply
        );
        assert_eq!(PatchType::from_content_type("text/plain").unwrap_err().code, 415);
        assert_eq!(
            Patch::decode(PatchType::Apply, b"{}").err().map(|e| e.code),
            Some(415)
        );
    }
}
