//! The garbage collector: what kube-controller-manager's garbage collector does for
//! `ownerReferences`, run inside the server.
//!
//! A delete with `propagationPolicy` only marks the owner (the `orphan` or `foregroundDeletion`
//! finalizer) or removes it at once (Background); this controller does the rest:
//!
//! - an object none of whose owners exists any more is deleted (with the propagation its own
//!   finalizers ask for; in the foreground when an owner waits for it and it has dependents
//!   itself);
//! - an object with a live owner loses only its references to owners that are gone or that
//!   are waiting for their dependents;
//! - an owner being deleted in the foreground loses `foregroundDeletion` once no dependent
//!   with `blockOwnerDeletion` is left;
//! - an owner being deleted with `orphan` has its references removed from every dependent,
//!   then loses `orphan`.
//!
//! Owners are identified as kube's collector does: the reference's apiVersion and kind name a
//! served type, the object is looked up by name (in the dependent's namespace for namespaced
//! owners), and it is the owner only if its uid is the reference's uid. A reference that cannot
//! be resolved (unknown kind, or a namespaced owner of a cluster-scoped dependent) leaves the
//! dependent alone.
//!
//! The collector runs on every replica but acts only while that replica is the leader. It keeps
//! no state: each pass reads one consistent snapshot of every object and decides from it, and
//! every write is a compare-and-swap on what it read, so a new leader simply continues.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::meta_str;
use crate::registry::delete::{
    self, finalizers_of, DeleteOptions, Propagation, FINALIZER_FOREGROUND, FINALIZER_ORPHAN,
};
use crate::registry::ResourceRequest;
use crate::scheme::{LiveRegistry, Registry, ResourceType};
use crate::store::{keys, ApplyEvent, Cas, Change, KeyValue, Store};

/// At most this many writes per pass, so one pass over a large cascade stays short.
const MAX_WRITES_PER_PASS: usize = 256;
/// How many passes may follow each other at once while they still find work.
const MAX_PASSES_IN_A_ROW: usize = 32;
/// The shortest time between two passes started by changes in the store.
const MIN_PASS_INTERVAL: Duration = Duration::from_millis(100);
/// How long the collector waits for a relevant change before it looks again anyway (at least).
const RESYNC: Duration = Duration::from_secs(10);
/// The periodic pass waits at least this many times as long as the last pass took.
const RESYNC_COST_SHARE: u32 = 50;

/// One object of the snapshot.
struct Obj<'a> {
    rt: &'a ResourceType,
    key: String,
    namespace: Option<String>,
    name: String,
    uid: String,
    rv: i64,
    /// `{"metadata": …}` with the metadata fields the collector decides by ([`metadata_of`]),
    /// not the whole object.
    obj: Value,
}

impl Obj<'_> {
    fn deleting(&self) -> bool {
        meta_str(&self.obj, "deletionTimestamp").is_some()
    }

    fn has_finalizer(&self, f: &str) -> bool {
        self.obj["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|list| list.iter().any(|x| x == f))
    }

    /// Being deleted in the foreground: waits for its dependents.
    fn deleting_dependents(&self) -> bool {
        self.deleting() && self.has_finalizer(FINALIZER_FOREGROUND)
    }

    fn owner_refs(&self) -> &[Value] {
        self.obj["metadata"]["ownerReferences"]
            .as_array()
            .map_or(&[], Vec::as_slice)
    }

    fn request(&self) -> ResourceRequest {
        ResourceRequest {
            rt: self.rt.clone(),
            namespace: self.namespace.clone(),
            name: Some(self.name.clone()),
            subresource: None,
            watch_path: false,
            requester: None,
        }
    }
}

fn ref_uid(r: &Value) -> &str {
    r.get("uid").and_then(Value::as_str).unwrap_or("")
}

fn blocks_owner(r: &Value) -> bool {
    r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
}

/// What an owner reference points at, in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    /// The owner exists and is not waiting for its dependents.
    Solid,
    /// No object of that type, name and uid exists.
    Dangling,
    /// The owner is being deleted in the foreground.
    Waiting,
    /// The reference names no served type, or a namespaced owner of a cluster-scoped object.
    Unresolvable,
}

/// Every object in the store at one revision. Only the objects the collector may act on (those
/// with owner references or a deletionTimestamp) are decoded; the others are kept as stored
/// and decoded only when a reference names them.
struct Snapshot<'a> {
    objects: Vec<Obj<'a>>,
    by_key: HashMap<String, usize>,
    /// Objects that are neither dependents nor being deleted, by storage key.
    others: HashMap<String, Vec<u8>>,
    /// For each owner uid, the objects whose ownerReferences name it.
    dependents: HashMap<String, Vec<usize>>,
    registry: &'a Registry,
}

/// Whether a stored object may need the collector: it names owners or is being deleted.
fn is_candidate(value: &[u8]) -> bool {
    memchr::memmem::find(value, b"\"ownerReferences\"").is_some()
        || memchr::memmem::find(value, b"\"deletionTimestamp\"").is_some()
}

/// The metadata fields the collector reads.
const DECIDING_FIELDS: [&str; 6] = [
    "name",
    "namespace",
    "uid",
    "ownerReferences",
    "deletionTimestamp",
    "finalizers",
];

/// A stored object's [`DECIDING_FIELDS`] as `{"metadata": {…}}` (absent and null fields left
/// out), read without building the rest of the object (its spec, status and managedFields are
/// skipped); `None` when the value does not decode or has no object `metadata`.
fn metadata_of(value: &[u8]) -> Option<Value> {
    /// An object read for its metadata only: every other member is skipped unbuilt.
    #[derive(serde::Deserialize)]
    struct Stored {
        metadata: Deciding,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Deciding {
        #[serde(default)]
        name: Value,
        #[serde(default)]
        namespace: Value,
        #[serde(default)]
        uid: Value,
        #[serde(default)]
        owner_references: Value,
        #[serde(default)]
        deletion_timestamp: Value,
        #[serde(default)]
        finalizers: Value,
    }
    let fields = match serde_json::from_slice::<Stored>(value) {
        Ok(Stored { metadata: m }) => [
            m.name,
            m.namespace,
            m.uid,
            m.owner_references,
            m.deletion_timestamp,
            m.finalizers,
        ],
        // What the fields cannot read (a repeated member, say) is decoded whole, as JSON
        // decoding keeps the last of repeated members.
        Err(_) => {
            let mut obj: Value = serde_json::from_slice(value).ok()?;
            let meta = obj.get_mut("metadata").and_then(Value::as_object_mut)?;
            DECIDING_FIELDS.map(|f| meta.get_mut(f).map(Value::take).unwrap_or(Value::Null))
        }
    };
    let meta: serde_json::Map<String, Value> = DECIDING_FIELDS
        .iter()
        .zip(fields)
        .filter(|(_, v)| !v.is_null())
        .map(|(f, v)| (f.to_string(), v))
        .collect();
    Some(json!({ "metadata": meta }))
}

impl<'a> Snapshot<'a> {
    /// Reads every object at one revision (after a read barrier, so the leader's state is
    /// current): owners and dependents are seen together, whatever their types.
    async fn read(store: &Store, registry: &'a Registry) -> ApiResult<Snapshot<'a>> {
        let kvs = store.read_all(keys::ROOT).await?;
        Ok(Snapshot::build(registry, kvs))
    }

    /// Indexes stored key-values (keys outside the registry's types are ignored).
    fn build(registry: &'a Registry, kvs: Vec<KeyValue>) -> Snapshot<'a> {
        let types: Vec<(String, &ResourceType)> =
            registry.collections().map(|t| (keys::of_type(t), t)).collect();
        let mut snap = Snapshot {
            objects: Vec::new(),
            by_key: HashMap::new(),
            others: HashMap::new(),
            dependents: HashMap::new(),
            registry,
        };
        for kv in kvs {
            let Ok(key) = String::from_utf8(kv.key) else {
                continue;
            };
            let Some((_, rt)) = types.iter().find(|(prefix, _)| key.starts_with(prefix.as_str())) else {
                continue;
            };
            if !is_candidate(&kv.value) {
                snap.others.insert(key, kv.value);
                continue;
            }
            // An object that does not decode cannot be reasoned about: it is left alone.
            let Some(obj) = metadata_of(&kv.value) else {
                continue;
            };
            let (Some(name), Some(uid)) = (meta_str(&obj, "name"), meta_str(&obj, "uid")) else {
                continue;
            };
            let o = Obj {
                rt,
                namespace: meta_str(&obj, "namespace")
                    .filter(|_| rt.namespaced)
                    .map(str::to_string),
                name: name.to_string(),
                uid: uid.to_string(),
                rv: kv.mod_revision,
                key: key.clone(),
                obj,
            };
            let index = snap.objects.len();
            for r in o.owner_refs() {
                let uid = ref_uid(r);
                if !uid.is_empty() {
                    let list = snap.dependents.entry(uid.to_string()).or_default();
                    if list.last() != Some(&index) {
                        list.push(index);
                    }
                }
            }
            snap.by_key.insert(key, index);
            snap.objects.push(o);
        }
        snap
    }

    fn dependents_of(&self, owner: &Obj<'_>) -> impl Iterator<Item = &Obj<'a>> {
        self.dependents
            .get(&owner.uid)
            .into_iter()
            .flatten()
            .filter_map(|i| self.objects.get(*i))
    }

    /// The state of the owner that `dependent`'s reference `r` names.
    fn owner_state(&self, dependent: &Obj<'_>, r: &Value) -> OwnerState {
        let Some(key) = owner_key(self.registry, dependent.namespace.as_deref(), r) else {
            return OwnerState::Unresolvable;
        };
        if let Some(owner) = self.by_key.get(&key).and_then(|i| self.objects.get(*i)) {
            return match (owner.uid == ref_uid(r), owner.deleting_dependents()) {
                (false, _) => OwnerState::Dangling,
                (true, true) => OwnerState::Waiting,
                (true, false) => OwnerState::Solid,
            };
        }
        let uid = self
            .others
            .get(&key)
            .and_then(|raw| metadata_of(raw))
            .and_then(|o| meta_str(&o, "uid").map(str::to_string));
        if uid.as_deref() == Some(ref_uid(r)) {
            OwnerState::Solid
        } else {
            OwnerState::Dangling
        }
    }
}

/// The storage key of the owner that the reference `r` of a dependent in `namespace` (`None`:
/// cluster-scoped) names; `None` when it names no served type, or a namespaced owner of a
/// cluster-scoped dependent.
fn owner_key(registry: &Registry, namespace: Option<&str>, r: &Value) -> Option<String> {
    let api_version = r.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let rt = registry
        .all()
        .find(|t| &*t.group == group && &*t.version == version && &*t.kind == kind)?;
    match (rt.namespaced, namespace) {
        (false, _) => Some(keys::of_object(rt, None, name)),
        (true, Some(ns)) => Some(keys::of_object(rt, Some(ns), name)),
        (true, None) => None,
    }
}

/// A metadata change the collector makes to one object it read.
#[derive(Debug, PartialEq)]
enum Edit {
    /// Drop these owner references (by uid).
    DropOwners(Vec<String>),
    /// Set `blockOwnerDeletion` to false on every reference.
    Unblock,
    /// Remove a finalizer.
    DropFinalizer(&'static str),
}

impl Edit {
    /// Applies the edit; `false` when it changes nothing.
    fn apply(&self, obj: &mut Value) -> bool {
        let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
            return false;
        };
        match self {
            Edit::DropOwners(uids) => {
                let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) else {
                    return false;
                };
                let before = refs.len();
                refs.retain(|r| !uids.iter().any(|u| u == ref_uid(r)));
                if refs.len() == before {
                    return false;
                }
                if refs.is_empty() {
                    meta.remove("ownerReferences");
                }
                true
            }
            Edit::Unblock => {
                let Some(refs) = meta.get_mut("ownerReferences").and_then(Value::as_array_mut) else {
                    return false;
                };
                let mut changed = false;
                for r in refs.iter_mut().filter(|r| blocks_owner(r)) {
                    r["blockOwnerDeletion"] = json!(false);
                    changed = true;
                }
                changed
            }
            Edit::DropFinalizer(f) => {
                let Some(list) = meta.get_mut("finalizers").and_then(Value::as_array_mut) else {
                    return false;
                };
                let before = list.len();
                list.retain(|x| x != f);
                if list.len() == before {
                    return false;
                }
                if list.is_empty() {
                    meta.remove("finalizers");
                }
                true
            }
        }
    }
}

/// Applies `edit` to the object `o` names, re-reading it on a lost race; the object must still
/// have the uid the collector saw. An object left with no finalizers while being deleted (and
/// past any grace period) is removed, as the API does when a client removes the last one.
async fn edit(store: &Store, o: &Obj<'_>, edit: Edit) -> ApiResult<()> {
    let is_namespace = o.rt.group.is_empty() && &*o.rt.plural == "namespaces";
    let mut current = store.get(&o.key, true).await?;
    for _ in 0..8 {
        let Some(cur) = current.take() else {
            return Ok(());
        };
        if meta_str(&cur.obj, "uid") != Some(o.uid.as_str()) {
            return Ok(());
        }
        let mut next = cur.obj.clone();
        if !edit.apply(&mut next) {
            return Ok(());
        }
        let finalized = !is_namespace
            && meta_str(&next, "deletionTimestamp").is_some()
            && next["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0)
                == 0
            && finalizers_of(&next).is_empty();
        let outcome = if finalized {
            store.delete(&o.key, cur.rv).await?
        } else {
            store.update(&o.key, &next, cur.rv).await?
        };
        match outcome {
            Cas::Done(_) => {
                if finalized {
                    crate::registry::strategy::of(o.rt)
                        .after_delete(store, &next)
                        .await;
                    tracing::info!(key = %o.key, "garbage collector: finalized");
                }
                return Ok(());
            }
            Cas::Failed(fresh) => current = fresh,
        }
    }
    Err(ApiError::conflict(
        &o.rt.group,
        &o.rt.plural,
        &o.name,
        "too many concurrent writes; the garbage collector will try again",
    ))
}

/// Deletes `o` as the collector does: only the object it looked at (uid and resourceVersion
/// preconditions), with `propagation`.
async fn delete(store: &Store, o: &Obj<'_>, propagation: Propagation) -> ApiResult<()> {
    let opts = DeleteOptions::collector(&o.uid, o.rv, propagation);
    match delete::delete(store, &o.request(), &opts).await {
        Ok(_) => {
            tracing::info!(key = %o.key, ?propagation, "garbage collector: deleted");
            Ok(())
        }
        // Gone or changed since the snapshot: the next pass looks again.
        Err(e) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    /// Writes made (deletions, reference and finalizer removals).
    pub writes: usize,
    /// The uids some object names as its owner: deleting one of them gives the next pass work.
    pub owners: HashSet<String>,
}

/// The action the collector takes for one object of the snapshot, if any.
#[derive(Debug, PartialEq)]
enum Action {
    Delete(Propagation),
    Edit(Edit),
    /// Orphan the dependents (remove their references to this owner), then drop `orphan`.
    Orphan,
}

/// Decides what to do about `o` from the snapshot alone (kube's attemptToDeleteItem,
/// processDeletingDependentsItem and attemptToOrphan).
fn decide(snap: &Snapshot<'_>, o: &Obj<'_>) -> Option<Action> {
    if o.deleting() {
        if o.has_finalizer(FINALIZER_ORPHAN) {
            return Some(Action::Orphan);
        }
        if o.has_finalizer(FINALIZER_FOREGROUND) {
            let blocked = snap.dependents_of(o).any(|d| {
                d.owner_refs()
                    .iter()
                    .any(|r| ref_uid(r) == o.uid && blocks_owner(r))
            });
            return (!blocked).then_some(Action::Edit(Edit::DropFinalizer(FINALIZER_FOREGROUND)));
        }
        return None;
    }
    let refs = o.owner_refs();
    if refs.is_empty() {
        return None;
    }
    let mut solid = false;
    let mut stale = Vec::new();
    let mut waiting = false;
    for r in refs {
        match snap.owner_state(o, r) {
            OwnerState::Unresolvable => return None,
            OwnerState::Solid => solid = true,
            OwnerState::Dangling => stale.push(ref_uid(r).to_string()),
            OwnerState::Waiting => {
                waiting = true;
                stale.push(ref_uid(r).to_string());
            }
        }
    }
    if solid {
        return (!stale.is_empty()).then_some(Action::Edit(Edit::DropOwners(stale)));
    }
    let mut dependents = snap.dependents_of(o).peekable();
    if waiting && dependents.peek().is_some() {
        // A dependent of this object waits for its own dependents too: unblock this object's
        // owners first so the two cannot wait for each other.
        let cycle = dependents.any(|d| d.deleting_dependents());
        if cycle && refs.iter().any(blocks_owner) {
            return Some(Action::Edit(Edit::Unblock));
        }
        return Some(Action::Delete(Propagation::Foreground));
    }
    let propagation = if o.has_finalizer(FINALIZER_ORPHAN) {
        Propagation::Orphan
    } else if o.has_finalizer(FINALIZER_FOREGROUND) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    Some(Action::Delete(propagation))
}

/// One pass: reads a snapshot and acts on it, at most [`MAX_WRITES_PER_PASS`] writes.
pub async fn collect(store: &Store, registry: &Registry) -> ApiResult<Pass> {
    let snap = Snapshot::read(store, registry).await?;
    let mut pass = Pass {
        writes: 0,
        owners: snap.dependents.keys().cloned().collect(),
    };
    for o in &snap.objects {
        if pass.writes >= MAX_WRITES_PER_PASS {
            break;
        }
        let Some(action) = decide(&snap, o) else {
            continue;
        };
        let result = match action {
            Action::Delete(p) => delete(store, o, p).await,
            Action::Edit(e) => edit(store, o, e).await,
            Action::Orphan => orphan(store, &snap, o, &mut pass).await,
        };
        pass.writes += 1;
        if let Err(e) = result {
            tracing::warn!(key = %o.key, error = %e.message, "garbage collector");
        }
    }
    Ok(pass)
}

/// Removes `owner`'s references from its dependents, then its `orphan` finalizer.
async fn orphan(store: &Store, snap: &Snapshot<'_>, owner: &Obj<'_>, pass: &mut Pass) -> ApiResult<()> {
    for d in snap.dependents_of(owner) {
        edit(store, d, Edit::DropOwners(vec![owner.uid.clone()])).await?;
        pass.writes += 1;
    }
    edit(store, owner, Edit::DropFinalizer(FINALIZER_ORPHAN)).await
}

/// What the collector decides an object's fate by.
#[derive(PartialEq)]
struct Decisive {
    uid: Value,
    namespace: Value,
    refs: Value,
    deletion: Value,
    finalizers: Value,
}

impl Decisive {
    /// The facts of a stored value (`None` when it does not decode).
    fn of(value: &[u8]) -> Option<Decisive> {
        let mut obj = metadata_of(value)?;
        let meta = obj.get_mut("metadata")?;
        let mut take = |field: &str| meta.get_mut(field).map(Value::take).unwrap_or(Value::Null);
        Some(Decisive {
            uid: take("uid"),
            namespace: take("namespace"),
            refs: take("ownerReferences"),
            deletion: take("deletionTimestamp"),
            finalizers: take("finalizers"),
        })
    }

    /// Whether a reference of `before` names an owner this one no longer names.
    fn dropped_a_reference(&self, before: &Decisive) -> bool {
        let kept = |r: &Value| {
            self.refs
                .as_array()
                .is_some_and(|now| now.iter().any(|n| ref_uid(n) == ref_uid(r)))
        };
        before.refs.as_array().into_iter().flatten().any(|r| !kept(r))
    }
}

/// Whether every owner that `d`'s references name stands: stored with the reference's uid
/// and not waiting for its dependents. Those owners join `owners`, so that deleting one of
/// them later gives the collector work.
async fn owners_stand(
    store: &Store,
    registry: &Registry,
    d: &Decisive,
    owners: &mut HashSet<String>,
) -> bool {
    for r in d.refs.as_array().into_iter().flatten() {
        let Some(key) = owner_key(registry, d.namespace.as_str(), r) else {
            // The collector leaves an unresolvable reference alone.
            continue;
        };
        let Ok(Some(owner)) = store.get(&key, false).await else {
            return false;
        };
        let waiting = meta_str(&owner.obj, "deletionTimestamp").is_some()
            && finalizers_of(&owner.obj)
                .iter()
                .any(|f| f == FINALIZER_FOREGROUND);
        if meta_str(&owner.obj, "uid") != Some(ref_uid(r)) || waiting {
            return false;
        }
        owners.insert(ref_uid(r).to_string());
    }
    true
}

/// What one change means for the collector.
enum Verdict {
    /// It may have work.
    Work,
    /// It has none.
    None,
    /// It has work unless every owner this object names stands ([`owners_stand`]).
    UnlessOwnersStand(Decisive),
}

/// What one change means for the collector: work when an object some dependent names (as of
/// the last pass) was deleted, when what the collector decides by changed so that it must act
/// (the object is being deleted, a reference was dropped and its owner may be waiting for
/// it), and when a dependent was created, given other owners or deleted while an owner it
/// names may not stand. A write that leaves all that as it was (a lease renewal, a status
/// update) gives it none.
fn classify(change: &Change, owners: &HashSet<String>) -> Verdict {
    let prev = change.prev.as_ref().map(|p| p.value.as_slice());
    if change.is_delete() {
        let Some(gone) = prev.and_then(Decisive::of) else {
            return if prev.is_some_and(is_candidate) {
                Verdict::Work
            } else {
                Verdict::None
            };
        };
        if gone.uid.as_str().is_some_and(|u| owners.contains(u)) {
            return Verdict::Work;
        }
        return if prev.is_some_and(is_candidate) {
            Verdict::UnlessOwnersStand(gone)
        } else {
            Verdict::None
        };
    }
    let new = change.kv.value.as_slice();
    if !is_candidate(new) && !prev.is_some_and(is_candidate) {
        return Verdict::None;
    }
    let Some(now) = Decisive::of(new) else {
        return Verdict::Work;
    };
    if let Some(before) = prev.and_then(Decisive::of) {
        if before == now {
            return Verdict::None;
        }
        if now.dropped_a_reference(&before) {
            return Verdict::Work;
        }
    }
    if now.deletion.is_null() {
        Verdict::UnlessOwnersStand(now)
    } else {
        Verdict::Work
    }
}

/// Whether applied changes may give the collector work ([`classify`]); a missed or
/// unknown event always may.
async fn relevant(
    store: &Store,
    registry: &Registry,
    event: &ApplyEvent,
    owners: &mut HashSet<String>,
) -> bool {
    let ApplyEvent::Applied(applied) = event else {
        return true;
    };
    for change in applied.revisions.iter().flat_map(|(_, changes)| changes) {
        if !change.kv.key.starts_with(keys::ROOT.as_bytes()) {
            continue;
        }
        match classify(change, owners) {
            Verdict::Work => return true,
            Verdict::None => {}
            Verdict::UnlessOwnersStand(d) => {
                if !owners_stand(store, registry, &d, owners).await {
                    return true;
                }
            }
        }
    }
    false
}

/// Waits until the store changes in a way that may give the collector work, or `resync`
/// passes.
async fn wait_for_work(
    store: &Store,
    live: &LiveRegistry,
    applied: &mut broadcast::Receiver<Arc<ApplyEvent>>,
    owners: &mut HashSet<String>,
    resync: Duration,
) {
    let deadline = tokio::time::Instant::now() + resync;
    loop {
        match tokio::time::timeout_at(deadline, applied.recv()).await {
            Err(_) => return,
            Ok(Ok(event)) => {
                if relevant(store, &live.current(), &event, owners).await {
                    return;
                }
            }
            // Missed events may have mattered.
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => return,
            Ok(Err(broadcast::error::RecvError::Closed)) => {
                tokio::time::sleep_until(deadline).await;
                return;
            }
        }
    }
}

/// Runs the collector for as long as the node lives, while this replica leads: a pass when it
/// becomes the leader, after changes that may give it work (at most one per
/// [`MIN_PASS_INTERVAL`]), and every [`RESYNC`] in any case.
pub fn spawn(store: Store, live: Arc<LiveRegistry>) {
    super::run_while_leader(store, "garbage-collector", move |store| {
        let live = live.clone();
        async move { collect_while_leader(&store, &live).await }
    });
}

/// The collector's loop on the leader (cancelled by [`super::run_while_leader`] when this
/// replica stops leading).
async fn collect_while_leader(store: &Store, live: &LiveRegistry) {
    let mut applied = store.applied();
    let mut owners = HashSet::new();
    let mut resync = RESYNC;
    loop {
        for _ in 0..MAX_PASSES_IN_A_ROW {
            let started = Instant::now();
            let result = collect(store, &live.current()).await;
            // A pass reads the whole store: the periodic one costs at most a small share of
            // the replica however large the store grows.
            resync = RESYNC.max(started.elapsed() * RESYNC_COST_SHARE);
            match result {
                Ok(pass) => {
                    owners = pass.owners;
                    if pass.writes == 0 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e.message, "garbage collector pass failed");
                    break;
                }
            }
            tokio::time::sleep(MIN_PASS_INTERVAL.saturating_sub(started.elapsed())).await;
        }
        wait_for_work(store, live, &mut applied, &mut owners, resync).await;
        // Let a burst of changes settle into one pass.
        tokio::time::sleep(MIN_PASS_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D_UID: &str = "11111111-1111-1111-1111-111111111111";
    const RS_UID: &str = "22222222-2222-2222-2222-222222222222";
    const CM_UID: &str = "33333333-3333-3333-3333-333333333333";

    fn reference(api_version: &str, kind: &str, name: &str, uid: &str, block: bool) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": block})
    }

    fn d_ref(block: bool) -> Value {
        reference("apps/v1", "Deployment", "d", D_UID, block)
    }

    fn rs_ref(block: bool) -> Value {
        reference("apps/v1", "ReplicaSet", "rs", RS_UID, block)
    }

    fn kv(registry: &Registry, plural: &str, obj: Value) -> KeyValue {
        let rt = registry
            .all()
            .find(|t| &*t.plural == plural)
            .expect("a served type");
        let name = meta_str(&obj, "name").expect("a name");
        let ns = meta_str(&obj, "namespace");
        KeyValue {
            key: keys::of_object(rt, ns, name).into_bytes(),
            value: serde_json::to_vec(&obj).expect("JSON"),
            mod_revision: 7,
            ..Default::default()
        }
    }

    fn object(name: &str, uid: &str, ns: Option<&str>, meta: Value) -> Value {
        let mut m = json!({"name": name, "uid": uid});
        if let Some(ns) = ns {
            m["namespace"] = json!(ns);
        }
        if let (Some(m), Some(extra)) = (m.as_object_mut(), meta.as_object()) {
            m.extend(extra.clone());
        }
        json!({"metadata": m})
    }

    /// The action for the object `name` in a snapshot of `objects` (plural, object).
    fn action(objects: Vec<(&str, Value)>, name: &str) -> Option<Action> {
        let registry = Registry::new();
        let kvs = objects.into_iter().map(|(p, o)| kv(&registry, p, o)).collect();
        let snap = Snapshot::build(&registry, kvs);
        let o = snap
            .objects
            .iter()
            .find(|o| o.name == name)
            .expect("the object is a candidate");
        decide(&snap, o)
    }

    fn deployment(meta: Value) -> (&'static str, Value) {
        ("deployments", object("d", D_UID, Some("ns"), meta))
    }

    fn replicaset(meta: Value) -> (&'static str, Value) {
        ("replicasets", object("rs", RS_UID, Some("ns"), meta))
    }

    fn pod(name: &str, meta: Value) -> (&'static str, Value) {
        ("pods", object(name, &format!("pod-{name}"), Some("ns"), meta))
    }

    const FOREGROUND: &str =
        r#"{"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["foregroundDeletion"]}"#;

    fn foreground() -> Value {
        serde_json::from_str(FOREGROUND).expect("JSON")
    }

    #[test]
    fn dependents_go_only_when_no_owner_is_left() {
        let rs = replicaset(json!({"ownerReferences": [d_ref(true)]}));
        assert_eq!(
            action(vec![rs.clone()], "rs"),
            Some(Action::Delete(Propagation::Background))
        );
        assert_eq!(action(vec![deployment(json!({})), rs.clone()], "rs"), None);
        // A reference whose uid is not the live object's is dangling.
        let other = ("deployments", object("d", "someone-else", Some("ns"), json!({})));
        assert_eq!(
            action(vec![other, rs], "rs"),
            Some(Action::Delete(Propagation::Background))
        );
        // With a live owner, only the dangling reference goes.
        let cm = ("configmaps", object("cm", CM_UID, Some("ns"), json!({})));
        let shared = pod(
            "p",
            json!({"ownerReferences": [d_ref(true), reference("v1", "ConfigMap", "cm", CM_UID, false)]}),
        );
        assert_eq!(
            action(vec![cm, shared], "p"),
            Some(Action::Edit(Edit::DropOwners(vec![D_UID.to_string()])))
        );
        // Its own finalizers decide how an ownerless object is deleted.
        let orphaning = replicaset(json!({"ownerReferences": [d_ref(true)], "finalizers": ["orphan"]}));
        assert_eq!(
            action(vec![orphaning], "rs"),
            Some(Action::Delete(Propagation::Orphan))
        );
    }

    #[test]
    fn unresolvable_references_leave_the_dependent_alone() {
        let unknown = pod(
            "p",
            json!({"ownerReferences": [reference("example.com/v1", "Widget", "w", "x", true)]}),
        );
        assert_eq!(action(vec![unknown], "p"), None);
        // A cluster-scoped object cannot be owned by a namespaced one.
        let pv = (
            "persistentvolumes",
            object("pv", "pv-uid", None, json!({"ownerReferences": [d_ref(false)]})),
        );
        assert_eq!(action(vec![deployment(json!({})), pv], "pv"), None);
        // A namespaced owner is looked up in the dependent's namespace only.
        let elsewhere = ("deployments", object("d", D_UID, Some("other"), json!({})));
        let rs = replicaset(json!({"ownerReferences": [d_ref(true)]}));
        assert_eq!(
            action(vec![elsewhere, rs], "rs"),
            Some(Action::Delete(Propagation::Background))
        );
    }

    #[test]
    fn foreground_deletion_waits_for_blocking_dependents() {
        let rs = replicaset(json!({"ownerReferences": [d_ref(true)]}));
        let p = pod("p", json!({"ownerReferences": [rs_ref(true)]}));
        // The owner waits while a blocking dependent exists ...
        assert_eq!(action(vec![deployment(foreground()), rs.clone()], "d"), None);
        // ... and loses its finalizer once none is left (non-blocking ones do not count).
        let loose = replicaset(json!({"ownerReferences": [d_ref(false)]}));
        assert_eq!(
            action(vec![deployment(foreground()), loose], "d"),
            Some(Action::Edit(Edit::DropFinalizer(FINALIZER_FOREGROUND)))
        );
        // A dependent of a waiting owner goes in the foreground when it has dependents itself.
        assert_eq!(
            action(vec![deployment(foreground()), rs.clone(), p.clone()], "rs"),
            Some(Action::Delete(Propagation::Foreground))
        );
        assert_eq!(
            action(vec![deployment(foreground()), rs.clone()], "rs"),
            Some(Action::Delete(Propagation::Background))
        );
        // An object whose owner waits for it while one of its own dependents waits too: its
        // blocking references are lifted first (kube's cycle guard), then it goes in the
        // foreground.
        let mut waiting_pod = foreground();
        waiting_pod["ownerReferences"] = json!([rs_ref(true)]);
        assert_eq!(
            action(
                vec![deployment(foreground()), rs, pod("q", waiting_pod.clone())],
                "rs"
            ),
            Some(Action::Edit(Edit::Unblock))
        );
        let unblocked = replicaset(json!({"ownerReferences": [d_ref(false)]}));
        assert_eq!(
            action(
                vec![deployment(foreground()), unblocked, pod("q", waiting_pod)],
                "rs"
            ),
            Some(Action::Delete(Propagation::Foreground))
        );
    }

    #[test]
    fn orphaning_owners_release_their_dependents() {
        let mut orphaning = foreground();
        orphaning["finalizers"] = json!(["orphan"]);
        assert_eq!(action(vec![deployment(orphaning)], "d"), Some(Action::Orphan));
        // Being deleted without a garbage-collection finalizer: nothing to do.
        let deleting = json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["example.com/x"]});
        assert_eq!(action(vec![deployment(deleting)], "d"), None);
    }

    #[test]
    fn the_deciding_metadata_is_what_decoding_the_whole_object_gives() {
        let whole = |raw: &[u8]| {
            let obj: Value = serde_json::from_slice(raw).ok()?;
            let meta = obj.get("metadata")?.as_object()?;
            let kept: serde_json::Map<String, Value> = meta
                .iter()
                .filter(|(k, v)| DECIDING_FIELDS.contains(&k.as_str()) && !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Some(json!({ "metadata": kept }))
        };
        for raw in [
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","labels":{"a":"b"},
                "ownerReferences":[{"uid":"o","kind":"ReplicaSet"}],"finalizers":["x"],
                "managedFields":[{"manager":"m"}]},"spec":{"containers":[]}}"#,
            r#"{"metadata":{"name":"n","deletionTimestamp":"2026-11-27T00:00:00Z","uid":null}}"#,
            r#"{"metadata":{"name":"first","name":"second","uid":"u"}}"#,
            r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
            r#"{"metadata":{}}"#,
            r#"{"metadata":"not an object"}"#,
            r#"{"spec":{}}"#,
            r#"not json"#,
        ] {
            assert_eq!(metadata_of(raw.as_bytes()), whole(raw.as_bytes()), "{raw}");
        }
    }

    #[test]
    fn edits_change_only_what_they_name() {
        let mut obj = json!({"metadata": {"ownerReferences": [d_ref(true), rs_ref(true)], "finalizers": ["orphan", "x"]}});
        assert!(Edit::DropOwners(vec![D_UID.into()]).apply(&mut obj));
        assert_eq!(obj["metadata"]["ownerReferences"], json!([rs_ref(true)]));
        assert!(!Edit::DropOwners(vec![D_UID.into()]).apply(&mut obj));
        assert!(Edit::Unblock.apply(&mut obj));
        assert_eq!(obj["metadata"]["ownerReferences"], json!([rs_ref(false)]));
        assert!(!Edit::Unblock.apply(&mut obj));
        assert!(Edit::DropOwners(vec![RS_UID.into()]).apply(&mut obj));
        assert!(obj["metadata"].get("ownerReferences").is_none());
        assert!(Edit::DropFinalizer(FINALIZER_ORPHAN).apply(&mut obj));
        assert_eq!(obj["metadata"]["finalizers"], json!(["x"]));
        assert!(!Edit::DropFinalizer(FINALIZER_FOREGROUND).apply(&mut obj));
    }

    #[test]
    fn only_changes_that_can_matter_start_a_pass() {
        use crate::store::Change;
        let put = |value: Value, prev: Option<Value>| Change {
            kv: KeyValue {
                key: b"/registry/core/configmaps/ns/a".to_vec(),
                value: serde_json::to_vec(&value).expect("JSON"),
                version: 1,
                ..Default::default()
            },
            prev: prev.map(|p| KeyValue {
                value: serde_json::to_vec(&p).expect("JSON"),
                version: 1,
                ..Default::default()
            }),
        };
        let deleted = |prev: Value| {
            let mut c = put(json!(null), Some(prev));
            c.kv.version = 0;
            c.kv.value.clear();
            c
        };
        let verdict = |c: &Change| match classify(c, &[CM_UID.to_string()].into()) {
            Verdict::Work => "work",
            Verdict::None => "none",
            Verdict::UnlessOwnersStand(_) => "unless owners stand",
        };
        let plain = object("a", "a-uid", Some("ns"), json!({}));
        let dependent = |refs: Value, extra: Value| {
            let mut meta = json!({"ownerReferences": refs, "labels": {"v": "1"}});
            if let (Some(m), Some(e)) = (meta.as_object_mut(), extra.as_object()) {
                m.extend(e.clone());
            }
            object("a", "a-uid", Some("ns"), meta)
        };
        let renewed = dependent(json!([d_ref(true)]), json!({"labels": {"v": "2"}}));
        let owned = dependent(json!([d_ref(true)]), json!({}));
        assert_eq!(verdict(&put(plain.clone(), None)), "none");
        // A dependent created or given an owner: the owner is looked up.
        assert_eq!(verdict(&put(owned.clone(), None)), "unless owners stand");
        assert_eq!(
            verdict(&put(owned.clone(), Some(plain.clone()))),
            "unless owners stand"
        );
        // A write that changes nothing the collector decides by (a lease renewed).
        assert_eq!(verdict(&put(renewed.clone(), Some(owned.clone()))), "none");
        // A reference dropped, the object being deleted, a finalizer changed while deleting.
        assert_eq!(verdict(&put(plain.clone(), Some(owned.clone()))), "work");
        let deleting = dependent(
            json!([d_ref(true)]),
            json!({"deletionTimestamp": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(verdict(&put(deleting.clone(), Some(owned.clone()))), "work");
        let finalized = dependent(
            json!([d_ref(true)]),
            json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["orphan"]}),
        );
        assert_eq!(verdict(&put(finalized, Some(deleting))), "work");
        // Deletions: of a plain object, of a dependent (its owner may wait for it), of an owner.
        assert_eq!(verdict(&deleted(plain)), "none");
        assert_eq!(verdict(&deleted(owned)), "unless owners stand");
        assert_eq!(
            verdict(&deleted(object("a", CM_UID, Some("ns"), json!({})))),
            "work"
        );
    }
}
