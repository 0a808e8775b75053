//! The verbs of the generic store: get, list, create, update, patch, delete, deletecollection,
//! and the status subresource. One implementation serves every type in the registry.
//!
//! Updates and patches are read-modify-write loops with compare-and-swap on the mod revision
//! (kube-apiserver's GuaranteedUpdate): a lost race is retried on the fresh object unless the
//! client supplied a resourceVersion precondition, which then answers 409 Conflict.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::cache::CachedObject;
use super::meta::{meta_str, now_rfc3339, prepare_create, prepare_update};
use super::options;
use super::read;
use super::registry::ResourceType;
use super::request::ResourceRequest;
use super::selector::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::store::{Cas, Store, Stored};
use super::strategy::{self, allow_create_on_update, take_status_only};

/// Query parameters of a request.
pub type Query = HashMap<String, String>;

/// How many times a write retries a lost compare-and-swap before giving up.
const MAX_CAS_RETRIES: usize = 64;

/// An API result body and its HTTP code.
pub struct Reply {
    /// HTTP status code.
    pub code: u16,
    /// The object, list or Status.
    pub body: Value,
    /// Objects to render when the client asked for a Table (get only; a list's rows are its
    /// `items`).
    pub table_rows: Option<(Vec<Value>, String)>,
    /// A list's items, kept apart from `body` so that they are encoded from the cached
    /// objects' shared encodings instead of being copied into one big value.
    pub items: Option<Vec<Arc<CachedObject>>>,
    /// The cached object `body` is (a get), whose shared JSON encoding can be sent as is.
    pub cached: Option<Arc<CachedObject>>,
}

impl Reply {
    fn object(code: u16, body: Value) -> Self {
        Reply {
            code,
            body,
            table_rows: None,
            items: None,
            cached: None,
        }
    }
}

fn name_of(req: &ResourceRequest) -> ApiResult<&str> {
    req.name
        .as_deref()
        .ok_or_else(|| ApiError::method_not_allowed("this verb needs an object name"))
}

fn key(req: &ResourceRequest, name: &str) -> String {
    req.rt.key(req.namespace.as_deref(), name)
}

fn not_found(rt: &ResourceType, name: &str) -> ApiError {
    ApiError::not_found(rt.group, rt.plural, name)
}

/// The client's resourceVersion precondition in a body, if any.
pub(super) fn precondition(obj: &Value) -> ApiResult<Option<i64>> {
    match meta_str(obj, "resourceVersion") {
        None | Some("") => Ok(None),
        Some(rv) => rv.parse::<i64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "invalid resourceVersion {rv:?}: must be a decimal revision"
            ))
        }),
    }
}

/// GET of one object (or of its scale subresource), at the revision its resourceVersion asks
/// for, from the watch cache.
pub async fn get(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<Reply> {
    if req.subresource.as_deref() == Some("scale") {
        return super::scale::get(store, req, q).await;
    }
    let name = name_of(req)?;
    let at = options::get_plan(q)?;
    let obj = read::get(store.cache(), &key(req, name), at)
        .await?
        .ok_or_else(|| not_found(&req.rt, name))?;
    let rv = obj.rv.to_string();
    Ok(Reply {
        code: 200,
        body: obj.obj.clone(),
        table_rows: Some((vec![obj.obj.clone()], rv)),
        items: None,
        cached: Some(obj),
    })
}

/// An object as a list item: kube-apiserver leaves out `kind` and `apiVersion`.
pub(super) fn strip_type(mut obj: Value) -> Value {
    if let Some(o) = obj.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    obj
}

/// The key prefix of a collection request.
fn prefix(req: &ResourceRequest) -> String {
    match &req.namespace {
        Some(ns) => format!("{}{ns}/", req.rt.key_prefix()),
        None => req.rt.key_prefix(),
    }
}

/// The selectors of a collection request.
pub(super) fn selectors(req: &ResourceRequest, q: &Query) -> ApiResult<(LabelSelector, FieldSelector)> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map_or("", String::as_str),
        req.rt.group,
        req.rt.plural,
    )?;
    Ok((labels, fields))
}

/// A page of the collection per the request's resourceVersion, paging and selectors.
async fn select(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<read::Page> {
    let plan = options::list_plan(q)?;
    let (labels, fields) = selectors(req, q)?;
    let selective = !labels.is_empty() || !fields.is_empty();
    let keep = |o: &CachedObject| labels.matches(&o.obj) && fields.matches(&o.obj);
    read::list(store.cache(), &prefix(req), &plan, selective, &keep).await
}

/// LIST of a collection: the list's metadata in `body`, its objects in `items`.
pub async fn list(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<Reply> {
    let page = select(store, req, q).await?;
    let mut meta = json!({"resourceVersion": page.revision.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(n) = page.remaining {
        meta["remainingItemCount"] = json!(n);
    }
    Ok(Reply {
        code: 200,
        body: json!({
            "kind": req.rt.list_kind,
            "apiVersion": req.rt.group_version(),
            "metadata": meta,
        }),
        table_rows: None,
        items: Some(page.items),
        cached: None,
    })
}

async fn check_namespace(store: &Store, req: &ResourceRequest) -> ApiResult<()> {
    let Some(ns) = req.namespace.as_deref().filter(|_| req.rt.namespaced) else {
        return Ok(());
    };
    let key = format!("/registry/core/namespaces/{ns}");
    let Some(nsobj) = store.get(&key, true).await? else {
        return Err(ApiError::not_found("", "namespaces", ns));
    };
    if meta_str(&nsobj.obj, "deletionTimestamp").is_some() {
        return Err(ApiError::forbidden(
            req.rt.group,
            req.rt.plural,
            "",
            &format!("unable to create new content in namespace {ns} because it is being terminated"),
        ));
    }
    Ok(())
}

fn with_rv(mut obj: Value, rev: i64) -> Value {
    obj["metadata"]["resourceVersion"] = json!(rev.to_string());
    obj
}

/// Whether `dryRun` asks for a dry run (`All`); any other value is a 400.
pub(super) fn dry_run(q: &Query) -> ApiResult<bool> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "dryRun: Unsupported value: {other:?}: supported values: \"All\""
        ))),
    }
}

/// POST to a collection.
pub async fn create(store: &Store, req: &ResourceRequest, q: &Query, mut obj: Value) -> ApiResult<Reply> {
    if req.name.is_some() {
        return Err(ApiError::method_not_allowed(
            "POST is only allowed on a collection",
        ));
    }
    let dry = dry_run(q)?;
    let name = prepare_create(&req.rt, &mut obj, req.namespace.as_deref())?;
    if req.rt.namespaced && req.namespace.is_none() {
        return Err(ApiError::bad_request(
            "a namespaced object must be created in a namespace",
        ));
    }
    strategy::prepare_for_create(&req.rt, &mut obj);
    check_namespace(store, req).await?;
    let key = key(req, &name);
    if dry {
        return match store.get(&key, true).await? {
            Some(_) => Err(ApiError::already_exists(req.rt.group, req.rt.plural, &name)),
            None => {
                strategy::preview(store, &req.rt, &key, &mut obj).await?;
                Ok(Reply::object(201, obj))
            }
        };
    }
    match strategy::create(store, &req.rt, &key, &mut obj).await? {
        Cas::Done(rev) => Ok(Reply::object(201, with_rv(obj, rev))),
        Cas::Failed(_) => Err(ApiError::already_exists(req.rt.group, req.rt.plural, &name)),
    }
}

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
    let mut current = store.get(&key, true).await?;
    for _ in 0..MAX_CAS_RETRIES {
        match (&current, pinned) {
            (None, _) if !create_if_absent => return Err(not_found(rt, name)),
            (Some(cur), Some(rv)) if cur.rv != rv => return Err(ApiError::conflict(
                rt.group,
                rt.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )),
            _ => {}
        }
        let mut next = mutate(current.as_ref())?;
        let outcome = match &current {
            Some(cur) => {
                if dry {
                    return Ok(Reply::object(200, with_rv(next, cur.rv)));
                }
                // An object being deleted goes once its last finalizer is removed.
                let finalized = !(rt.group.is_empty() && rt.plural == "namespaces")
                    && meta_str(&next, "deletionTimestamp").is_some()
                    && next["metadata"]["finalizers"]
                        .as_array()
                        .is_none_or(|f| f.is_empty());
                if finalized {
                    match store.delete(&key, cur.rv).await? {
                        Cas::Done(_) => {
                            strategy::after_delete(store, rt, &next).await;
                            return Ok(Reply::object(200, with_rv(next, cur.rv)));
                        }
                        Cas::Failed(fresh) => {
                            current = fresh;
                            continue;
                        }
                    }
                }
                strategy::update(store, rt, &key, &mut next, cur.rv).await?
            }
            None => {
                prepare_create(rt, &mut next, req.namespace.as_deref())?;
                strategy::prepare_for_create(rt, &mut next);
                check_namespace(store, req).await?;
                if dry {
                    return Ok(Reply::object(201, next));
                }
                store.create(&key, &next).await?
            }
        };
        match outcome {
            Cas::Done(rev) => {
                let code = if current.is_some() { 200 } else { 201 };
                return Ok(Reply::object(code, with_rv(next, rev)));
            }
            Cas::Failed(fresh) => current = fresh,
        }
    }
    Err(ApiError::conflict(
        rt.group,
        rt.plural,
        name,
        "too many concurrent writes; try again",
    ))
}

/// PUT of an object (or of its status subresource).
pub async fn update(store: &Store, req: &ResourceRequest, q: &Query, body: Value) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = dry_run(q)?;
    let pinned = precondition(&body)?;
    let rt = req.rt.clone();
    let status_only = match req.subresource.as_deref() {
        None => false,
        Some("scale") if rt.has_scale => return super::scale::update(store, req, q, body).await,
        Some("status") if rt.has_status => true,
        Some(other) => {
            return Err(ApiError::not_found(
                rt.group,
                &format!("{}/{other}", rt.plural),
                &name,
            ))
        }
    };
    let create = allow_create_on_update(&rt) && !status_only;
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let mut next = body.clone();
        match current {
            Some(cur) => {
                if status_only {
                    super::meta::check_type(&rt, &mut next)?;
                    next = take_status_only(&cur.obj, &next);
                } else {
                    prepare_update(&rt, &cur.obj, &mut next, &n)?;
                    strategy::prepare_for_update(&rt, &cur.obj, &mut next)?;
                }
            }
            None => {
                if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("name".into(), json!(n));
                }
            }
        }
        Ok(next)
    });
    guaranteed_update(store, req, &name, pinned, create, dry, mutate).await
}

/// The patch formats the server understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 `application/json-patch+json`.
    Json,
    /// RFC 7386 `application/merge-patch+json`.
    Merge,
}

impl PatchType {
    /// The patch type of a request's Content-Type; anything else is a 415.
    pub fn from_content_type(ct: &str) -> ApiResult<Self> {
        match ct {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// A decoded patch body.
pub(super) enum Patch {
    /// RFC 6902 operations.
    Json(json_patch::Patch),
    /// An RFC 7386 merge document (always a JSON object).
    Merge(Value),
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
            PatchType::Merge => Err(ApiError::bad_request("a merge patch must be a JSON object")),
        }
    }

    /// Applies the patch to `target`; a JSON patch that cannot apply (e.g. a failed `test`)
    /// is a 422 and leaves nothing half-applied for the caller to store.
    pub(super) fn apply(&self, target: &mut Value) -> ApiResult<()> {
        match self {
            Patch::Json(p) => json_patch::patch(target, p).map_err(|e| ApiError {
                code: 422,
                reason: "Invalid",
                message: format!("the server rejected our request due to an error in our request: {e}"),
                details: None,
                retry_after: None,
                continue_token: None,
            }),
            Patch::Merge(doc) => {
                json_patch::merge(target, doc);
                Ok(())
            }
        }
    }

    /// The resourceVersion precondition a merge patch carries in `metadata.resourceVersion`.
    pub(super) fn merge_precondition(&self) -> ApiResult<Option<i64>> {
        match self {
            Patch::Merge(doc) => precondition(doc),
            Patch::Json(_) => Ok(None),
        }
    }
}

/// PATCH of an object (or of its status subresource).
pub async fn patch(
    store: &Store,
    req: &ResourceRequest,
    q: &Query,
    kind: PatchType,
    body: &[u8],
) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = dry_run(q)?;
    let rt = req.rt.clone();
    let status_only = match req.subresource.as_deref() {
        None => false,
        Some("scale") if rt.has_scale => return super::scale::patch(store, req, q, kind, body).await,
        Some("status") if rt.has_status => true,
        Some(other) => {
            return Err(ApiError::not_found(
                rt.group,
                &format!("{}/{other}", rt.plural),
                &name,
            ))
        }
    };
    let patch = Patch::decode(kind, body)?;
    // A merge patch that sets metadata.resourceVersion is a precondition.
    let mut pinned = patch.merge_precondition()?;
    let current = store.get(&key(req, &name), true).await?;
    if let (Some(cur), Patch::Json(_)) = (&current, &patch) {
        // A JSON patch that changes metadata.resourceVersion pins it too.
        let mut probe = cur.obj.clone();
        if patch.apply(&mut probe).is_ok()
            && probe["metadata"]["resourceVersion"] != cur.obj["metadata"]["resourceVersion"]
        {
            pinned = precondition(&probe)?;
        }
    }
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let cur = current.ok_or_else(|| ApiError::not_found(rt.group, rt.plural, &n))?;
        let mut next = cur.obj.clone();
        patch.apply(&mut next)?;
        if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        if status_only {
            next = take_status_only(&cur.obj, &next);
        } else {
            prepare_update(&rt, &cur.obj, &mut next, &n)?;
            strategy::prepare_for_update(&rt, &cur.obj, &mut next)?;
        }
        Ok(next)
    });
    drop(current);
    guaranteed_update(store, req, &name, pinned, false, dry, mutate).await
}

/// The parts of `DeleteOptions` (body or query) the server acts on.
#[derive(Debug, Default)]
pub struct DeleteOptions {
    uid: Option<String>,
    resource_version: Option<i64>,
    dry_run: bool,
}

impl DeleteOptions {
    /// Reads `DeleteOptions` from the body (may be empty) and the query.
    pub fn parse(body: &[u8], q: &Query) -> ApiResult<Self> {
        let mut opts = DeleteOptions {
            dry_run: dry_run(q)?,
            ..Default::default()
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(opts);
        }
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as DeleteOptions: {e}"
            ))
        })?;
        if let Some(p) = v.get("preconditions") {
            opts.uid = p.get("uid").and_then(Value::as_str).map(str::to_string);
            if let Some(rv) = p.get("resourceVersion").and_then(Value::as_str) {
                opts.resource_version = Some(
                    rv.parse()
                        .map_err(|_| ApiError::bad_request("invalid preconditions.resourceVersion"))?,
                );
            }
        }
        if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
            match d.as_slice() {
                [] => {}
                [x] if x == "All" => opts.dry_run = true,
                _ => {
                    return Err(ApiError::bad_request(
                        "dryRun: Unsupported value: supported values: \"All\"",
                    ))
                }
            }
        }
        Ok(opts)
    }
}

/// DELETE of one object: objects with finalizers get a deletionTimestamp and stay until the
/// finalizers are gone; others are removed at once. Answers with the object's last state.
pub async fn delete(store: &Store, req: &ResourceRequest, opts: &DeleteOptions) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let rt = &req.rt;
    let key = key(req, &name);
    for _ in 0..MAX_CAS_RETRIES {
        let cur = store.get(&key, true).await?.ok_or_else(|| not_found(rt, &name))?;
        if let Some(uid) = &opts.uid {
            let actual = meta_str(&cur.obj, "uid").unwrap_or("");
            if actual != uid {
                return Err(ApiError::conflict(
                    rt.group,
                    rt.plural,
                    &name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if let Some(rv) = opts.resource_version {
            if rv != cur.rv {
                return Err(ApiError::conflict(
                    rt.group,
                    rt.plural,
                    &name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", cur.rv),
                ));
            }
        }
        let has_finalizers = cur.obj["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
            || (rt.group.is_empty() && rt.plural == "namespaces");
        if has_finalizers {
            if meta_str(&cur.obj, "deletionTimestamp").is_some() {
                return Ok(Reply::object(200, cur.obj));
            }
            let mut next = cur.obj.clone();
            next["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
            next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if rt.group.is_empty() && rt.plural == "namespaces" {
                next["status"]["phase"] = json!("Terminating");
            }
            if opts.dry_run {
                return Ok(Reply::object(200, next));
            }
            match store.update(&key, &next, cur.rv).await? {
                Cas::Done(rev) => return Ok(Reply::object(200, with_rv(next, rev))),
                Cas::Failed(_) => continue,
            }
        }
        if opts.dry_run {
            return Ok(Reply::object(200, cur.obj));
        }
        match store.delete(&key, cur.rv).await? {
            Cas::Done(_) => {
                strategy::after_delete(store, rt, &cur.obj).await;
                return Ok(Reply::object(200, cur.obj));
            }
            Cas::Failed(_) => continue,
        }
    }
    Err(ApiError::conflict(
        rt.group,
        rt.plural,
        &name,
        "too many concurrent writes; try again",
    ))
}

/// DELETE of a collection (with selectors): deletes each matching object as [`delete`] does.
pub async fn delete_collection(
    store: &Store,
    req: &ResourceRequest,
    q: &Query,
    opts: &DeleteOptions,
) -> ApiResult<Reply> {
    let page = select(store, req, q).await?;
    let rev = page.revision;
    let mut deleted = Vec::new();
    for item in page.items {
        let Some(name) = meta_str(&item.obj, "name").map(str::to_string) else {
            continue;
        };
        let mut one = req.clone();
        one.name = Some(name);
        if req.rt.namespaced {
            one.namespace = meta_str(&item.obj, "namespace").map(str::to_string);
        }
        match delete(store, &one, opts).await {
            Ok(r) => deleted.push(strip_type(r.body)),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Reply::object(
        200,
        json!({
            "kind": req.rt.list_kind,
            "apiVersion": req.rt.group_version(),
            "metadata": {"resourceVersion": rev.to_string()},
            "items": deleted,
        }),
    ))
}
