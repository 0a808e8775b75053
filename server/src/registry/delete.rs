//! DELETE and DELETECOLLECTION of the generic store: options, preconditions, graceful
//! deletion, finalizers and propagation (Orphan, Background, Foreground), and the unsafe
//! delete of corrupt objects.

use super::read::select;
use super::reply::{key, name_of, not_found, strip_type, with_rv, Reply, MAX_CAS_RETRIES};
use super::versions::served;
use crate::admission::{self, Operation};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::machinery::query::{flag, Query};
use crate::machinery::selector::Selectable;
use crate::machinery::timestamp::{self, now_rfc3339};
use crate::registry::options::ListOptions;
use crate::registry::strategy::{self, GcPolicy};
use crate::registry::ResourceRequest;
use crate::scheme::ResourceType;
use crate::store::{Cas, Store};
use serde_json::{json, Value};

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
        let orphan_dependents = flag(q, "orphanDependents");
        let ignore_store_read_error = flag(q, IGNORE_STORE_READ_ERROR);
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

/// The object's `metadata.finalizers` as strings.
pub(crate) fn finalizers_of(obj: &Value) -> Vec<String> {
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
    let default = strategy::of(rt).gc_policy();
    if default == GcPolicy::Unsupported {
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
        (None, None) => existing.or((default == GcPolicy::Orphan).then_some(Propagation::Orphan)),
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
    let deadline = time::OffsetDateTime::now_utc() + std::time::Duration::from_secs(period.unsigned_abs());
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if !deleting {
            if let Some(g) = meta.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                meta.insert("generation".into(), json!(g + 1));
            }
        }
        meta.insert(
            "deletionTimestamp".into(),
            json!(timestamp::format_time(deadline)),
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
    let held = strategy::of(rt).removed_by_controller();
    // Admission sees the delete before the object is read, as kube-apiserver's handler runs it.
    let attrs = req.admission(Operation::Delete, &name, opts.dry_run, None);
    admission::chain().admit(store, &attrs, &mut Value::Null).await?;
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
                    &rt.group,
                    &rt.plural,
                    &name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if let Some(rv) = opts.resource_version {
            if rv != cur.rv {
                return Err(ApiError::conflict(
                    &rt.group,
                    &rt.plural,
                    &name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", cur.rv),
                ));
            }
        }
        // The validating plugins see the delete with the object as it is, as kube-apiserver's
        // store validates a delete once it has read the object.
        let old = served(store, rt, Some(cur.clone()))
            .await?
            .map(|s| s.obj)
            .unwrap_or_default();
        let attrs = req.admission(Operation::Delete, &name, opts.dry_run, Some(&old));
        admission::chain().validate(store, &attrs, &Value::Null).await?;
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
                Some(strategy::of(rt).grace_period(&cur.obj, opts.grace_period_seconds)).filter(|g| *g > 0)
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
        let pending_finalizers = !finalizers_of(&next).is_empty() || held;
        if period.is_some_and(|p| p > 0) || pending_finalizers {
            if period.is_none() {
                mark_as_deleting(&mut next);
            }
            strategy::of(rt).mark_deleting(&mut next);
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
                strategy::of(rt).after_delete(store, &cur.obj).await;
                return Ok(Reply::object(200, deleted_reply(rt, cur.obj)));
            }
            Cas::Failed(_) => continue,
        }
    }
    Err(ApiError::conflict(
        &rt.group,
        &rt.plural,
        &name,
        "too many concurrent writes; try again",
    ))
}

/// What a delete that removed `obj` answers: the object for the types that return it,
/// otherwise kube-apiserver's success `Status` naming it (`kind` is the resource, as there).
fn deleted_reply(rt: &ResourceType, obj: Value) -> Value {
    if strategy::of(rt).returns_deleted_object() {
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
        let corrupt = store.get_raw(&key, true).await?.filter(|kv| !store.decodable(kv));
        let Some(kv) = corrupt else {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.plural,
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
        &rt.group,
        &rt.plural,
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
    list: &ListOptions,
    opts: &DeleteOptions,
) -> ApiResult<Reply> {
    let page = select(store, req, list).await?;
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
