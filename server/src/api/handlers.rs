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
use super::managed::{self, Part};
use super::meta::{check_type, meta_str, now_rfc3339, prepare_create, prepare_update};
use super::options;
use super::read;
use super::registry::ResourceType;
use super::request::decode_body;
use super::request::ResourceRequest;
use super::schema::{schemas, Node};
use super::selector::{FieldSelector, LabelSelector, Selectable};
use super::smp;
use super::status::{ApiError, ApiResult};
use super::store::{decode_value, Cas, Store, Stored};
use super::strategy::{self, allow_create_on_update, take_status_only};
use super::validation::{self, Decoded, Directive};

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
    /// Texts of `Warning: 299` headers (e.g. unknown fields that were dropped).
    pub warnings: Vec<String>,
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
            warnings: Vec::new(),
            items: None,
            cached: None,
        }
    }

    /// The same reply carrying `warnings` as well.
    pub(super) fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings.extend(warnings);
        self
    }
}

fn name_of(req: &ResourceRequest) -> ApiResult<&str> {
    req.name
        .as_deref()
        .ok_or_else(ApiError::method_not_allowed)
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
    // The body is the cached encoding; it is decoded only for representations that need it.
    Ok(Reply {
        code: 200,
        body: Value::Null,
        table_rows: None,
        warnings: Vec::new(),
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
    let text = q.get("fieldSelector").map_or("", String::as_str);
    let fields = match &req.rt.custom {
        Some(custom) => FieldSelector::parse_custom(text, &custom.selectable)?,
        None => FieldSelector::parse(text, req.rt.group, req.rt.plural)?,
    };
    Ok((labels, fields))
}

/// A page of the collection per the request's resourceVersion, paging and selectors.
async fn select(store: &Store, req: &ResourceRequest, q: &Query) -> ApiResult<read::Page> {
    let plan = options::list_plan(q)?;
    let (labels, fields) = selectors(req, q)?;
    let selective = !labels.is_empty() || !fields.is_empty();
    let keep = |o: &CachedObject| labels.matches(o) && fields.matches(o);
    read::list(store.cache(), &req.rt, &prefix(req), &plan, selective, &keep).await
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
        warnings: Vec::new(),
        items: Some(page.items),
        cached: None,
    })
}

/// Refuses content in a namespace that does not exist or is terminating. An active namespace
/// in the replica's watch cache is taken as it is (as kube-apiserver's namespace admission
/// trusts its informer); anything else — a namespace created a moment ago through another
/// replica, or one terminating — is checked with a linearizable read. (In neither system is
/// the check atomic with the write.)
///
/// `name` is the object's name as the request gave it (empty for `generateName`), which is what
/// kube-apiserver's refusal names.
async fn check_namespace(store: &Store, req: &ResourceRequest, name: &str) -> ApiResult<()> {
    let Some(ns) = req.namespace.as_deref().filter(|_| req.rt.namespaced) else {
        return Ok(());
    };
    let key = format!("/registry/core/namespaces/{ns}");
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
            req.rt.group,
            req.rt.plural,
            name,
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
pub async fn create(store: &Store, req: &ResourceRequest, q: &Query, body: Decoded) -> ApiResult<Reply> {
    if req.name.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let dry = dry_run(q)?;
    let mut obj = body.value;
    check_type(&req.rt, &mut obj)?;
    let warnings = validation::check(&req.rt, &mut obj, &body.duplicates, Directive::from_query(q)?)?;
    let manager = manager(q)?;
    let requested = obj["metadata"].get("managedFields").cloned();
    let given_name = meta_str(&obj, "name").unwrap_or_default().to_string();
    let name = prepare_create(&req.rt, &mut obj, req.namespace.as_deref())?;
    if req.rt.namespaced && req.namespace.is_none() {
        return Err(ApiError::bad_request(
            "a namespaced object must be created in a namespace",
        ));
    }
    strategy::prepare_for_create(&req.rt, &mut obj);
    strategy::validate(&req.rt, None, &obj)?;
    managed::record_update(&req.rt, Part::Main, None, &mut obj, &manager, requested.as_ref());
    check_namespace(store, req, &given_name).await?;
    let key = key(req, &name);
    if dry {
        return match store.get(&key, true).await? {
            Some(_) => Err(ApiError::already_exists(req.rt.group, req.rt.plural, &name)),
            None => {
                strategy::preview(store, &req.rt, &key, &mut obj).await?;
                Ok(Reply::object(201, obj).with_warnings(warnings))
            }
        };
    }
    match strategy::create(store, &req.rt, &key, &mut obj).await? {
        Cas::Done(rev) => Ok(Reply::object(201, with_rv(obj, rev)).with_warnings(warnings)),
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
    let mut current = served(rt, store.get(&key, true).await?);
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
                // An object on its way out may only lose finalizers; anything else is checked.
                if meta_str(&next, "deletionTimestamp").is_none() {
                    strategy::validate(rt, Some(&cur.obj), &next)?;
                }
                if dry {
                    return Ok(Reply::object(200, with_rv(next, cur.rv)));
                }
                // An object being deleted goes once its last finalizer is removed (unless it
                // is still in a graceful-deletion period, which only its owner ends).
                let finalized = !(rt.group.is_empty() && rt.plural == "namespaces")
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
                            strategy::after_delete(store, rt, &next).await;
                            return Ok(Reply::object(200, with_rv(next, cur.rv)));
                        }
                        Cas::Failed(fresh) => {
                            current = served(rt, fresh);
                            continue;
                        }
                    }
                }
                strategy::update(store, rt, &key, &mut next, cur.rv).await?
            }
            None => {
                prepare_create(rt, &mut next, req.namespace.as_deref())?;
                strategy::prepare_for_create(rt, &mut next);
                strategy::validate(rt, None, &next)?;
                check_namespace(store, req, req.name.as_deref().unwrap_or_default()).await?;
                if dry {
                    return Ok(Reply::object(201, next));
                }
                strategy::create(store, rt, &key, &mut next).await?
            }
        };
        match outcome {
            Cas::Done(rev) => {
                let code = if current.is_some() { 200 } else { 201 };
                return Ok(Reply::object(code, with_rv(next, rev)));
            }
            Cas::Failed(fresh) => current = served(rt, fresh),
        }
    }
    Err(ApiError::conflict(
        rt.group,
        rt.plural,
        name,
        "too many concurrent writes; try again",
    ))
}

/// A stored object as the request's version shows it (a custom resource stored in another
/// version is converted), so that every step of a write works in the version it was sent in.
fn served(rt: &ResourceType, stored: Option<Stored>) -> Option<Stored> {
    stored.map(|mut s| {
        super::custom::convert_value(rt, &mut s.obj);
        s
    })
}

/// PUT of an object (or of its status subresource).
pub async fn update(store: &Store, req: &ResourceRequest, q: &Query, decoded: Decoded) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = dry_run(q)?;
    let mut body = decoded.value;
    let pinned = precondition(&body)?;
    let rt = req.rt.clone();
    if req.subresource.as_deref() == Some("scale") && rt.has_scale {
        return super::scale::update(store, req, q, body).await;
    }
    check_type(&rt, &mut body)?;
    let warnings = validation::check(&rt, &mut body, &decoded.duplicates, Directive::from_query(q)?)?;
    let manager = manager(q)?;
    let requested = body["metadata"].get("managedFields").cloned();
    let status_only = match req.subresource.as_deref() {
        None => false,
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
                    next = take_status_only(&cur.obj, &next);
                } else {
                    prepare_update(&rt, &cur.obj, &mut next, &n)?;
                    strategy::prepare_for_update(&rt, &cur.obj, &mut next)?;
                }
                let part = if status_only { Part::Status } else { Part::Main };
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
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// The manager a write is recorded under: `fieldManager`, else the server itself (internal
/// writes by the namespace controller and the garbage collector).
fn manager(q: &Query) -> ApiResult<String> {
    match q.get("fieldManager") {
        Some(m) => {
            managed::check_manager(m)?;
            Ok(m.clone())
        }
        None => Ok("kuberaft".to_string()),
    }
}

/// `force`, which only an apply may set.
fn force(q: &Query, applying: bool) -> ApiResult<bool> {
    match q.get("force").map(String::as_str) {
        None | Some("") | Some("false") => Ok(false),
        Some("true") if applying => Ok(true),
        Some("true") => Err(ApiError::bad_request(
            "force: Forbidden: may not be specified for non-apply patch",
        )),
        Some(other) => Err(ApiError::bad_request(format!("invalid force {other:?}"))),
    }
}

/// Server-side apply (`application/apply-patch+yaml`): merges the configuration into the
/// object (creating it if absent) with field ownership; see [`managed`].
async fn apply(store: &Store, req: &ResourceRequest, q: &Query, body: &[u8], part: Part) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let dry = dry_run(q)?;
    let force = force(q, true)?;
    let manager = match q.get("fieldManager") {
        Some(m) if !m.is_empty() => {
            managed::check_manager(m)?;
            m.clone()
        }
        _ => {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ))
        }
    };
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
    let warnings = validation::check(&rt, &mut config, &decoded.duplicates, Directive::from_query(q)?)?;
    let pinned = precondition(&config)?;
    let n = name.clone();
    let mutate: Mutation<'_> = Box::new(move |current| {
        let live = current.map_or_else(|| json!({}), |c| c.obj.clone());
        let mut next = managed::apply(&rt, part, &live, &config, &manager, force)?;
        if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        if let Some(cur) = current {
            if part == Part::Status {
                let managed_fields = next["metadata"].get("managedFields").cloned();
                next = take_status_only(&cur.obj, &next);
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
            PatchType::Apply => Err(ApiError::unsupported_media_type(APPLY_PATCH)),
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
            Patch::Strategic(doc) => smp::apply(target, doc, node).map_err(|e| unprocessable(e.0)),
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
    let part = if status_only { Part::Status } else { Part::Main };
    if kind == PatchType::Apply {
        return apply(store, req, q, body, part).await;
    }
    force(q, false)?;
    if kind == PatchType::Strategic && rt.custom.is_some() {
        // Custom resources have no patch strategies to merge by, as in kube-apiserver.
        return Err(ApiError::unsupported_patch_type());
    }
    let patch = Patch::decode(kind, body)?;
    let directive = Directive::from_query(q)?;
    let manager = manager(q)?;
    let schema_type = rt.clone();
    let schema = schemas().kind(&schema_type);
    // A merge patch that sets metadata.resourceVersion is a precondition.
    let mut pinned = patch.merge_precondition()?;
    let current = served(&rt, store.get(&key(req, &name), true).await?);
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
        let cur = current.ok_or_else(|| ApiError::not_found(rt.group, rt.plural, &n))?;
        let mut next = cur.obj.clone();
        patch.apply(&mut next, schema)?;
        *found = validation::check(&rt, &mut next, &[], directive)?;
        if let Some(meta) = next.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let requested = next["metadata"].get("managedFields").cloned();
        if status_only {
            next = take_status_only(&cur.obj, &next);
        } else {
            prepare_update(&rt, &cur.obj, &mut next, &n)?;
            strategy::prepare_for_update(&rt, &cur.obj, &mut next)?;
        }
        managed::record_update(&rt, part, Some(&cur.obj), &mut next, &manager, requested.as_ref());
        Ok(next)
    });
    drop(current);
    let reply = guaranteed_update(store, req, &name, pinned, false, dry, mutate).await?;
    Ok(reply.with_warnings(warnings))
}

/// How a deletion treats the object's dependents (`DeleteOptions.propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// The owner keeps the `orphan` finalizer until the garbage collector has removed the
    /// owner's references from its dependents, which stay.
    Orphan,
    /// The owner goes at once; the garbage collector deletes dependents left without owners.
    Background,
    /// The owner keeps the `foregroundDeletion` finalizer until the garbage collector has
    /// deleted its dependents that block owner deletion.
    Foreground,
}

impl Propagation {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "Orphan" => Some(Propagation::Orphan),
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            _ => None,
        }
    }
}

/// The finalizer that keeps an owner until the garbage collector has orphaned its dependents.
pub const FINALIZER_ORPHAN: &str = "orphan";
/// The finalizer that keeps an owner until its blocking dependents are gone.
pub const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// The `DeleteOptions` of a DELETE, read as kube-apiserver reads them: from the body when it
/// is not empty, otherwise from the query (never a mix of both), then validated.
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    /// `preconditions.uid`: the delete is a 409 unless the object has this uid.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`: the delete is a 409 unless the object is at it.
    pub resource_version: Option<i64>,
    /// `gracePeriodSeconds` as the client sent it.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun=All`: everything is decided, nothing is written.
    pub dry_run: bool,
    /// `propagationPolicy`, when given.
    pub propagation: Option<Propagation>,
    /// The deprecated `orphanDependents` (true is Orphan, false is Background).
    pub orphan_dependents: Option<bool>,
    /// `ignoreStoreReadErrorWithClusterBreakingPotential`: remove an object that cannot be
    /// decoded, skipping preconditions and finalizers (only with the
    /// `AllowUnsafeMalformedObjectDeletion` feature gate; ignored otherwise).
    pub ignore_store_read_error: bool,
}

/// The raw fields of `DeleteOptions`, before validation.
#[derive(Default)]
struct RawDeleteOptions {
    uid: Option<String>,
    resource_version: Option<i64>,
    grace_period_seconds: Option<i64>,
    dry_run: Vec<String>,
    propagation: Option<String>,
    orphan_dependents: Option<bool>,
    ignore_store_read_error: Option<bool>,
}

/// The option that asks for the unsafe deletion of a corrupt object.
const IGNORE_STORE_READ_ERROR: &str = "ignoreStoreReadErrorWithClusterBreakingPotential";

/// A boolean query parameter as kube-apiserver's query decoding reads it.
fn query_bool(q: &Query, name: &str) -> ApiResult<Option<bool>> {
    match q.get(name).map(String::as_str) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(o) => Err(ApiError::bad_request(format!(
            "invalid {name} {o:?}: must be true or false"
        ))),
    }
}

fn bad_field(field: &str, want: &str) -> ApiError {
    ApiError::bad_request(format!(
        "the body of the request could not be decoded as DeleteOptions: {field} must be {want}"
    ))
}

fn optional<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|x| !x.is_null())
}

impl RawDeleteOptions {
    fn from_query(q: &Query) -> ApiResult<Self> {
        let grace_period_seconds = match q.get("gracePeriodSeconds") {
            None => None,
            Some(g) => Some(
                g.parse()
                    .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
            ),
        };
        let orphan_dependents = query_bool(q, "orphanDependents")?;
        let ignore_store_read_error = query_bool(q, IGNORE_STORE_READ_ERROR)?;
        Ok(RawDeleteOptions {
            grace_period_seconds,
            dry_run: q
                .get("dryRun")
                .filter(|d| !d.is_empty())
                .cloned()
                .into_iter()
                .collect(),
            propagation: q.get("propagationPolicy").cloned(),
            orphan_dependents,
            ignore_store_read_error,
            ..Default::default()
        })
    }

    fn from_body(body: &[u8]) -> ApiResult<Self> {
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as DeleteOptions: {e}"
            ))
        })?;
        if !v.is_object() {
            return Err(bad_field("the body", "an object"));
        }
        let mut raw = RawDeleteOptions::default();
        if let Some(p) = optional(&v, "preconditions") {
            if let Some(uid) = optional(p, "uid") {
                raw.uid = Some(
                    uid.as_str()
                        .ok_or_else(|| bad_field("preconditions.uid", "a string"))?
                        .to_string(),
                );
            }
            if let Some(rv) = optional(p, "resourceVersion") {
                let rv = rv
                    .as_str()
                    .ok_or_else(|| bad_field("preconditions.resourceVersion", "a string"))?;
                raw.resource_version = Some(
                    rv.parse()
                        .map_err(|_| ApiError::bad_request("invalid preconditions.resourceVersion"))?,
                );
            }
        }
        if let Some(g) = optional(&v, "gracePeriodSeconds") {
            raw.grace_period_seconds = Some(
                g.as_i64()
                    .ok_or_else(|| ApiError::bad_request("gracePeriodSeconds must be an integer"))?,
            );
        }
        if let Some(p) = optional(&v, "propagationPolicy") {
            raw.propagation = Some(
                p.as_str()
                    .ok_or_else(|| bad_field("propagationPolicy", "a string"))?
                    .to_string(),
            );
        }
        if let Some(o) = optional(&v, "orphanDependents") {
            raw.orphan_dependents = Some(
                o.as_bool()
                    .ok_or_else(|| bad_field("orphanDependents", "a boolean"))?,
            );
        }
        if let Some(i) = optional(&v, IGNORE_STORE_READ_ERROR) {
            raw.ignore_store_read_error = Some(
                i.as_bool()
                    .ok_or_else(|| bad_field(IGNORE_STORE_READ_ERROR, "a boolean"))?,
            );
        }
        if let Some(d) = optional(&v, "dryRun") {
            let list = d
                .as_array()
                .ok_or_else(|| bad_field("dryRun", "a list of strings"))?;
            for x in list {
                raw.dry_run.push(
                    x.as_str()
                        .ok_or_else(|| bad_field("dryRun", "a list of strings"))?
                        .to_string(),
                );
            }
        }
        Ok(raw)
    }

    /// kube-apiserver's ValidateDeleteOptions: every problem, as one 422 for the
    /// `DeleteOptions.meta.k8s.io` kind.
    fn validate(self) -> ApiResult<DeleteOptions> {
        let mut causes: Vec<(String, String, &'static str)> = Vec::new();
        if let (Some(_), Some(p)) = (self.orphan_dependents, &self.propagation) {
            causes.push((
                "propagationPolicy".into(),
                format!("Invalid value: {p:?}: orphanDependents and deletionPropagation cannot be both set"),
                "FieldValueInvalid",
            ));
        }
        let propagation = match &self.propagation {
            None => None,
            Some(p) => match Propagation::parse(p) {
                Some(policy) => Some(policy),
                None => {
                    causes.push((
                        "propagationPolicy".into(),
                        format!(
                            "Unsupported value: {p:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                        ),
                        "FieldValueNotSupported",
                    ));
                    None
                }
            },
        };
        if self.dry_run.iter().any(|d| d != "All") {
            let shown: Vec<String> = self.dry_run.iter().map(|d| format!("{d:?}")).collect();
            causes.push((
                "dryRun".into(),
                format!(
                    "Unsupported value: []string{{{}}}: supported values: \"All\"",
                    shown.join(", ")
                ),
                "FieldValueNotSupported",
            ));
        }
        // kube-apiserver's ValidateIgnoreStoreReadError: the unsafe deletion takes no other
        // option.
        let ignore_store_read_error = self.ignore_store_read_error == Some(true);
        if ignore_store_read_error {
            let others = [
                ("dryRun", !self.dry_run.is_empty()),
                ("propagationPolicy", self.propagation.is_some()),
                ("orphanDependents", self.orphan_dependents.is_some()),
                ("gracePeriodSeconds", self.grace_period_seconds.is_some()),
                (
                    "preconditions",
                    self.uid.is_some() || self.resource_version.is_some(),
                ),
            ];
            for (field, _) in others.iter().filter(|(_, set)| *set) {
                causes.push((
                    IGNORE_STORE_READ_ERROR.into(),
                    format!("Invalid value: true: cannot be set together with .{field}"),
                    "FieldValueInvalid",
                ));
            }
        }
        if !causes.is_empty() {
            let pairs: Vec<(String, String)> =
                causes.iter().map(|(f, m, _)| (f.clone(), m.clone())).collect();
            let mut e = ApiError::invalid("meta.k8s.io", "DeleteOptions", "", &pairs);
            let summary: Vec<String> = pairs.iter().map(|(f, m)| format!("{f}: {m}")).collect();
            let shown = match summary.as_slice() {
                [one] => one.clone(),
                many => format!("[{}]", many.join(", ")),
            };
            e.message = format!("DeleteOptions.meta.k8s.io \"\" is invalid: {shown}");
            if let Some(list) = e
                .details
                .as_mut()
                .and_then(|d| d.get_mut("causes"))
                .and_then(Value::as_array_mut)
            {
                for (cause, (_, _, reason)) in list.iter_mut().zip(&causes) {
                    cause["reason"] = json!(reason);
                }
            }
            return Err(e);
        }
        Ok(DeleteOptions {
            uid: self.uid,
            resource_version: self.resource_version,
            grace_period_seconds: self.grace_period_seconds,
            dry_run: !self.dry_run.is_empty(),
            propagation,
            orphan_dependents: self.orphan_dependents,
            ignore_store_read_error,
        })
    }
}

impl DeleteOptions {
    /// Reads `DeleteOptions` from the body or, when the body is empty, from the query; a
    /// malformed field is a 400, an unsupported value a 422 as kube-apiserver answers.
    pub fn parse(body: &[u8], q: &Query) -> ApiResult<Self> {
        let raw = if body.iter().all(u8::is_ascii_whitespace) {
            RawDeleteOptions::from_query(q)?
        } else {
            RawDeleteOptions::from_body(body)?
        };
        raw.validate()
    }

    /// The options the garbage collector deletes a dependent with: only the object it
    /// looked at (uid and resourceVersion preconditions), with the given propagation.
    pub fn collector(uid: &str, resource_version: i64, propagation: Propagation) -> Self {
        DeleteOptions {
            uid: Some(uid.to_string()),
            resource_version: Some(resource_version),
            propagation: Some(propagation),
            ..Default::default()
        }
    }
}

/// What a type does with dependents when a delete names no policy (kube-apiserver's
/// DefaultGarbageCollectionPolicy for the served group version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DefaultPolicy {
    /// The type takes no part in garbage collection: delete options add no finalizers.
    Unsupported,
    /// Dependents are orphaned unless the delete asks otherwise.
    Orphan,
    /// Dependents are deleted in the background.
    Delete,
}

fn default_policy(rt: &ResourceType) -> DefaultPolicy {
    match (rt.group, rt.version, rt.kind) {
        ("", _, "Event") | ("events.k8s.io", _, "Event") => DefaultPolicy::Unsupported,
        // Kept for backward compatibility in these group versions by kube-apiserver 1.35.
        ("", "v1", "ReplicationController") | ("batch", "v1", "Job") => DefaultPolicy::Orphan,
        _ => DefaultPolicy::Delete,
    }
}

/// The object's `metadata.finalizers` as strings.
pub(super) fn finalizers_of(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The finalizers a delete leaves on the object (kube-apiserver's
/// deletionFinalizersForGarbageCollection): `Some` only when they change. The explicit
/// options win, then a garbage-collection finalizer the object already has, then the type's
/// default.
fn gc_finalizers(rt: &ResourceType, obj: &Value, opts: &DeleteOptions) -> Option<Vec<String>> {
    let default = default_policy(rt);
    if default == DefaultPolicy::Unsupported {
        return None;
    }
    let current = finalizers_of(obj);
    let existing = current.iter().find_map(|f| match f.as_str() {
        FINALIZER_ORPHAN => Some(Propagation::Orphan),
        FINALIZER_FOREGROUND => Some(Propagation::Foreground),
        _ => None,
    });
    let policy = match (opts.orphan_dependents, opts.propagation) {
        (Some(true), _) => Some(Propagation::Orphan),
        (Some(false), _) => Some(Propagation::Background),
        (None, Some(p)) => Some(p),
        (None, None) => existing.or((default == DefaultPolicy::Orphan).then_some(Propagation::Orphan)),
    };
    let mut next: Vec<String> = current
        .iter()
        .filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND)
        .cloned()
        .collect();
    match policy {
        Some(Propagation::Orphan) => next.push(FINALIZER_ORPHAN.into()),
        Some(Propagation::Foreground) => next.push(FINALIZER_FOREGROUND.into()),
        Some(Propagation::Background) | None => {}
    }
    let same = next.len() == current.len() && next.iter().all(|f| current.contains(f));
    (!same).then_some(next)
}

/// Marks an object that stays for its finalizers as being deleted now (kube-apiserver's
/// markAsDeleting): the generation moves once, an earlier deletionTimestamp is kept, and the
/// grace period is zero.
fn mark_as_deleting(obj: &mut Value) {
    let deleting = meta_str(obj, "deletionTimestamp").is_some();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if !deleting {
            if let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                meta.insert("generation".into(), json!(g + 1));
            }
        }
        let now = now_rfc3339();
        let later = meta
            .get("deletionTimestamp")
            .and_then(Value::as_str)
            .is_some_and(|t| t > now.as_str());
        if !deleting || later {
            meta.insert("deletionTimestamp".into(), json!(now));
        }
        meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    }
}

/// Starts or shortens a graceful deletion of `period` seconds.
fn set_grace_deadline(obj: &mut Value, period: i64) {
    let deleting = meta_str(obj, "deletionTimestamp").is_some();
    let deadline = std::time::SystemTime::now() + std::time::Duration::from_secs(period.unsigned_abs());
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if !deleting {
            if let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                meta.insert("generation".into(), json!(g + 1));
            }
        }
        meta.insert(
            "deletionTimestamp".into(),
            json!(humantime::format_rfc3339_seconds(deadline).to_string()),
        );
        meta.insert("deletionGracePeriodSeconds".into(), json!(period));
    }
}

/// DELETE of one object, as kube-apiserver's generic store does it: preconditions, graceful
/// deletion (pods), the garbage-collection finalizers the propagation policy asks for, and
/// then either an update that marks the object as being deleted (it stays while it has
/// finalizers or a grace period) or its removal. Answers with the object's last state.
pub async fn delete(store: &Store, req: &ResourceRequest, opts: &DeleteOptions) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let rt = &req.rt;
    let key = key(req, &name);
    let is_namespace = rt.group.is_empty() && rt.plural == "namespaces";
    // A delete that asked for orphanDependents=false and did not remove the object at once is
    // answered 202 Accepted, as kube-apiserver does.
    let kept_code = if opts.orphan_dependents == Some(false) {
        202
    } else {
        200
    };
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
        let deleting = meta_str(&cur.obj, "deletionTimestamp").is_some();
        let pending = cur.obj["metadata"]["deletionGracePeriodSeconds"]
            .as_i64()
            .filter(|p| *p > 0 && deleting);
        // Graceful deletion: the object stays, marked, until its owner (the kubelet) deletes
        // it with grace 0; a later delete may only shorten the period, and changes nothing
        // else while the period runs.
        let period = match pending {
            Some(p) => match opts.grace_period_seconds.map(|g| if g < 0 { 1 } else { g }) {
                Some(shorter) if shorter < p => Some(shorter),
                _ => return Ok(Reply::object(200, cur.obj)),
            },
            None if !deleting => {
                Some(strategy::grace_period(rt, &cur.obj, opts.grace_period_seconds)).filter(|g| *g > 0)
            }
            None => None,
        };
        let mut next = cur.obj.clone();
        if let Some(p) = period {
            set_grace_deadline(&mut next, p);
        }
        if let Some(f) = gc_finalizers(rt, &next, opts) {
            next["metadata"]["finalizers"] = json!(f);
        }
        let pending_finalizers = !finalizers_of(&next).is_empty() || is_namespace;
        if period.is_some_and(|p| p > 0) || pending_finalizers {
            if period.is_none() {
                mark_as_deleting(&mut next);
            }
            if is_namespace {
                next["status"]["phase"] = json!("Terminating");
            }
            if next == cur.obj || opts.dry_run {
                return Ok(Reply::object(kept_code, next));
            }
            match store.update(&key, &next, cur.rv).await? {
                Cas::Done(rev) => return Ok(Reply::object(kept_code, with_rv(next, rev))),
                Cas::Failed(_) => continue,
            }
        }
        if opts.dry_run {
            return Ok(Reply::object(200, deleted_reply(rt, cur.obj)));
        }
        match store.delete(&key, cur.rv).await? {
            Cas::Done(_) => {
                strategy::after_delete(store, rt, &cur.obj).await;
                return Ok(Reply::object(200, deleted_reply(rt, cur.obj)));
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

/// What a delete that removed `obj` answers: the object for the types that return it,
/// otherwise kube-apiserver's success `Status` naming it (`kind` is the resource, as there).
fn deleted_reply(rt: &ResourceType, obj: Value) -> Value {
    if strategy::returns_deleted_object(rt) {
        return obj;
    }
    let mut details = json!({
        "name": meta_str(&obj, "name").unwrap_or(""),
        "kind": rt.plural,
        "uid": meta_str(&obj, "uid").unwrap_or(""),
    });
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// DELETE with `ignoreStoreReadErrorWithClusterBreakingPotential` (feature gate
/// `AllowUnsafeMalformedObjectDeletion`): removes an object whose stored value cannot be
/// decoded, skipping preconditions, finalizers, graceful deletion and after-delete hooks,
/// as kube-apiserver's corrupt object deleter does. A readable (or absent) object is a 422:
/// the option exists only for corrupt ones.
pub async fn delete_corrupt(store: &Store, req: &ResourceRequest) -> ApiResult<Reply> {
    let name = name_of(req)?.to_string();
    let rt = &req.rt;
    let key = key(req, &name);
    for _ in 0..MAX_CAS_RETRIES {
        let corrupt = store
            .get_raw(&key, true)
            .await?
            .filter(|kv| decode_value(&kv.value, kv.mod_revision).is_err());
        let Some(kv) = corrupt else {
            return Err(ApiError::invalid(
                rt.group,
                rt.plural,
                &name,
                &[(
                    IGNORE_STORE_READ_ERROR.into(),
                    "Invalid value: true: is exclusively used to delete corrupt object(s), try again by removing this option".into(),
                )],
            ));
        };
        if store.delete_raw(&key, kv.mod_revision).await? {
            tracing::warn!(%key, "unsafe deletion of a corrupt object");
            return Ok(Reply::object(
                200,
                json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "code": 200, "details": {"name": name, "kind": rt.kind},
                }),
            ));
        }
    }
    Err(ApiError::conflict(
        rt.group,
        rt.plural,
        &name,
        "too many concurrent writes; try again",
    ))
}

/// DELETE of a collection (with label and field selectors): deletes each matching object as
/// [`delete`] does, with the same options; objects gone meanwhile are skipped. Answers with
/// the objects as they were listed, as kube-apiserver does.
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
        let name = item.field("metadata.name");
        if name.is_empty() {
            continue;
        }
        let mut one = req.clone();
        one.name = Some(name);
        if req.rt.namespaced {
            one.namespace = Some(item.field("metadata.namespace")).filter(|n| !n.is_empty());
        }
        match delete(store, &one, opts).await {
            Ok(_) => deleted.push(strip_type(item.value())),
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

#[cfg(test)]
mod patch_tests {
    use super::*;

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
    fn force_and_the_apply_media_type() {
        let q = |v: &str| Query::from([("force".to_string(), v.to_string())]);
        assert!(force(&q("true"), true).unwrap());
        assert_eq!(force(&q("true"), false).unwrap_err().code, 400);
        assert_eq!(force(&q("maybe"), true).unwrap_err().code, 400);
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
