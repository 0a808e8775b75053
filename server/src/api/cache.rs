//! The watch cache of one replica: every object of every resource type, in memory, ordered by
//! key, plus a window of recent events, fed in revision order by the local apply stream.
//!
//! One keyed store serves every type: a type's collection is a key prefix, so paging is a
//! range scan and a watch is a prefix filter over one event stream. Objects are shared
//! (`Arc`) between the current state, the event window and every reader; each object is
//! serialised at most once per encoding however many watchers receive it.
//!
//! The feeder subscribes to the apply stream *before* it loads the state, so nothing is lost
//! between the two; it applies each revision once, in order, and then publishes it to the
//! watchers under the same lock, so a watcher that subscribes while holding the lock sees
//! exactly the revisions after the state it copied.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use bytes::Bytes;
use kuberaft_proto as pb;
use kuberaft_raft::{ApplyEvent, RaftNode};
use kuberaft_storage::mvcc::Change as StoredChange;
use kuberaft_storage::StorageError;
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};

use super::store::{decode_value, INTERNAL_PREFIX};

/// Events kept in memory for resuming watches; older ones are read back from the store's MVCC
/// history, so this bounds memory, not correctness.
const WINDOW_EVENTS: usize = 100_000;
/// Everything the cache holds lives under this key prefix.
const ROOT: &str = "/registry/";

/// One object as the cache holds it: the JSON with `metadata.resourceVersion` set, and its
/// encodings, computed on first use and shared by every reader.
#[derive(Debug)]
pub struct CachedObject {
    /// The object.
    pub obj: Value,
    /// Its mod revision (= resourceVersion).
    pub rv: i64,
    json: OnceLock<Bytes>,
    yaml: OnceLock<Bytes>,
    item_json: OnceLock<Bytes>,
    proto: OnceLock<Option<Bytes>>,
}

impl CachedObject {
    /// Wraps a decoded object (whose resourceVersion is already `rv`).
    pub fn new(obj: Value, rv: i64) -> Arc<Self> {
        Arc::new(CachedObject {
            obj,
            rv,
            json: OnceLock::new(),
            yaml: OnceLock::new(),
            item_json: OnceLock::new(),
            proto: OnceLock::new(),
        })
    }

    /// Decodes a stored value, setting its resourceVersion to `rv`; an error (why it cannot
    /// be decoded) when the stored object is corrupt.
    pub fn from_kv(value: &[u8], rv: i64) -> Result<Arc<Self>, Arc<str>> {
        decode_value(value, rv)
            .map(|obj| Self::new(obj, rv))
            .map_err(Arc::from)
    }

    /// The object as JSON, serialised once.
    pub fn json(&self) -> &Bytes {
        self.json
            .get_or_init(|| serde_json::to_vec(&self.obj).unwrap_or_default().into())
    }

    /// The object as a JSON list item (without `kind` and `apiVersion`), serialised once.
    pub fn item_json(&self) -> &Bytes {
        self.item_json.get_or_init(|| {
            let mut obj = self.obj.clone();
            if let Some(o) = obj.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            serde_json::to_vec(&obj).unwrap_or_default().into()
        })
    }

    /// The object as Kubernetes protobuf (envelope included), encoded once; `None` when its
    /// type has no protobuf form.
    pub fn protobuf(&self) -> Option<&Bytes> {
        self.proto
            .get_or_init(|| super::protobuf::encode_object(&self.obj).ok().map(Bytes::from))
            .as_ref()
    }

    /// The object as YAML, serialised once.
    pub fn yaml(&self) -> &Bytes {
        self.yaml
            .get_or_init(|| serde_yaml::to_string(&self.obj).unwrap_or_default().into())
    }
}

/// What a change did to its key.
#[derive(Debug)]
pub enum Change {
    /// Created or updated: the new state.
    Put(Arc<CachedObject>),
    /// Deleted: the last state, with the deletion's resourceVersion.
    Deleted(Arc<CachedObject>),
    /// Written with a value that cannot be decoded (why): the object is corrupt, and reads of
    /// it fail until it is deleted.
    Corrupt(Arc<str>),
}

/// One key's change at one revision.
#[derive(Debug)]
pub struct CacheEvent {
    /// The revision of the change.
    pub rev: i64,
    /// The key changed.
    pub key: String,
    /// What happened to it.
    pub change: Change,
    /// The state before the change (`None` for a creation, or when it was corrupt).
    pub prev: Option<Arc<CachedObject>>,
}

/// What the feeder publishes to watchers for each applied batch.
#[derive(Debug)]
pub enum Published {
    /// The changes of one or more revisions, and the cache revision after them.
    Changes {
        /// The events, in revision order.
        events: Vec<Arc<CacheEvent>>,
        /// The cache revision after this batch (a bookmark may carry it once every event
        /// before it was sent).
        revision: i64,
    },
    /// The state was reloaded wholesale (a snapshot was installed): watchers must end and
    /// their clients resume or re-list.
    Reset,
}

struct State {
    objects: BTreeMap<String, Arc<CachedObject>>,
    /// Keys whose stored value cannot be decoded, and why.
    corrupt: BTreeMap<String, Arc<str>>,
    /// Recent events in revision order; every event with `rev > window_start` is here.
    window: VecDeque<Arc<CacheEvent>>,
    window_start: i64,
    revision: i64,
    compacted: i64,
}

/// Why the cache cannot answer a read at a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// The revision is older than the compacted revision.
    Compacted {
        /// The compacted revision.
        compacted: i64,
    },
    /// The cache did not reach the revision in time.
    TooLarge {
        /// The cache's revision when it gave up.
        current: i64,
    },
}

/// The start of a watch: the events after the requested revision, and the subscription that
/// continues exactly after them.
pub struct WatchStart {
    /// Events after the start revision, oldest first.
    pub backlog: Vec<Arc<CacheEvent>>,
    /// The cache revision the backlog reaches.
    pub revision: i64,
    /// Live batches after `revision`.
    pub live: broadcast::Receiver<Arc<Published>>,
}

/// A consistent view of a key range at one revision.
pub struct Snapshot {
    /// The objects, ordered by key.
    pub objects: Vec<(String, Arc<CachedObject>)>,
    /// The keys in the range whose stored value cannot be decoded, and why.
    pub corrupt: Vec<(String, Arc<str>)>,
    /// The revision the view is at.
    pub revision: i64,
}

/// The per-replica watch cache (cheap to clone; clones share the cache).
#[derive(Clone)]
pub struct WatchCache {
    state: Arc<RwLock<State>>,
    node: Arc<RaftNode>,
    revision: watch::Receiver<Option<i64>>,
    publish: broadcast::Sender<Arc<Published>>,
}

/// The cache event for one stored change; `None` for a key outside UTF-8 or under
/// [`INTERNAL_PREFIX`], and for the deletion of a key that held no readable object.
fn change_event(
    rev: i64,
    change: &StoredChange,
    objects: &BTreeMap<String, Arc<CachedObject>>,
) -> Option<CacheEvent> {
    let key = String::from_utf8(change.kv.key.clone())
        .ok()
        .filter(|k| !k.starts_with(INTERNAL_PREFIX))?;
    let prev = objects.get(&key).cloned().or_else(|| {
        change
            .prev
            .as_ref()
            .and_then(|p| CachedObject::from_kv(&p.value, p.mod_revision).ok())
    });
    let change = if change.is_delete() {
        let last = prev.as_ref()?;
        let mut obj = last.obj.clone();
        obj["metadata"]["resourceVersion"] = json!(rev.to_string());
        Change::Deleted(CachedObject::new(obj, rev))
    } else {
        match CachedObject::from_kv(&change.kv.value, rev) {
            Ok(obj) => Change::Put(obj),
            Err(why) => Change::Corrupt(why),
        }
    };
    Some(CacheEvent {
        rev,
        key,
        change,
        prev,
    })
}

/// Turns MVCC history into cache events, keeping each key's last state as it goes so that a
/// deletion carries the object it deleted.
pub fn history_events(revisions: &[(i64, Vec<StoredChange>)]) -> Vec<Arc<CacheEvent>> {
    let mut last: BTreeMap<String, Arc<CachedObject>> = BTreeMap::new();
    let mut out = Vec::new();
    for (rev, changes) in revisions {
        for c in changes {
            if let Some(e) = change_event(*rev, c, &last) {
                match &e.change {
                    Change::Put(obj) => {
                        last.insert(e.key.clone(), obj.clone());
                    }
                    Change::Deleted(_) | Change::Corrupt(_) => {
                        last.remove(&e.key);
                    }
                }
                out.push(Arc::new(e));
            }
        }
    }
    out
}

impl State {
    fn apply(&mut self, rev: i64, changes: &[StoredChange]) -> Vec<Arc<CacheEvent>> {
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            let Some(e) = change_event(rev, c, &self.objects) else {
                // The deletion of a corrupt key: nobody could read it, so no watcher is told.
                if let Ok(key) = std::str::from_utf8(&c.kv.key) {
                    self.corrupt.remove(key);
                }
                continue;
            };
            match &e.change {
                Change::Put(obj) => {
                    self.corrupt.remove(&e.key);
                    self.objects.insert(e.key.clone(), obj.clone());
                }
                Change::Deleted(_) => {
                    self.corrupt.remove(&e.key);
                    self.objects.remove(&e.key);
                }
                Change::Corrupt(why) => {
                    self.objects.remove(&e.key);
                    self.corrupt.insert(e.key.clone(), why.clone());
                }
            }
            let e = Arc::new(e);
            self.window.push_back(e.clone());
            out.push(e);
        }
        self.revision = rev;
        self.trim();
        out
    }

    fn trim(&mut self) {
        while let Some(front) = self.window.front() {
            if self.window.len() > WINDOW_EVENTS || front.rev <= self.compacted {
                self.window_start = front.rev;
                self.window.pop_front();
            } else {
                break;
            }
        }
        // Events at or below the compacted revision can no longer be asked for.
        self.window_start = self.window_start.max(self.compacted.min(self.revision));
    }
}

impl WatchCache {
    /// Starts the cache's feeder on `node`; the cache is synced once [`WatchCache::synced`].
    /// A watcher that falls more than `watcher_buffer` revision batches behind is closed
    /// cleanly and resumes from its last resourceVersion.
    pub fn start(node: Arc<RaftNode>, watcher_buffer: usize) -> WatchCache {
        let (rev_tx, revision) = watch::channel(None);
        let cache = WatchCache {
            state: Arc::new(RwLock::new(State {
                objects: BTreeMap::new(),
                corrupt: BTreeMap::new(),
                window: VecDeque::new(),
                window_start: 0,
                revision: 0,
                compacted: 0,
            })),
            node,
            revision,
            publish: broadcast::channel(watcher_buffer).0,
        };
        tokio::spawn(feed(cache.clone(), rev_tx));
        cache
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The replica the cache mirrors.
    pub fn node(&self) -> &Arc<RaftNode> {
        &self.node
    }

    /// Whether the cache has loaded the store (readiness waits for it).
    pub fn synced(&self) -> bool {
        self.revision.borrow().is_some()
    }

    /// The revision the cache has applied (0 before it synced).
    pub fn revision(&self) -> i64 {
        self.revision.borrow().unwrap_or(0)
    }

    /// Waits until the cache has applied `rev`, for at most `wait`.
    pub async fn wait_for(&self, rev: i64, wait: Duration) -> Result<(), Unavailable> {
        let mut rx = self.revision.clone();
        let reached = tokio::time::timeout(wait, rx.wait_for(|r| r.is_some_and(|r| r >= rev))).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(Unavailable::TooLarge {
                current: self.revision(),
            }),
        }
    }

    /// The object at `key` now (an error saying why when it is corrupt).
    pub fn get(&self, key: &str) -> Result<Option<Arc<CachedObject>>, Arc<str>> {
        let s = self.read();
        match s.corrupt.get(key) {
            Some(why) => Err(why.clone()),
            None => Ok(s.objects.get(key).cloned()),
        }
    }

    /// The objects under `prefix` with keys after `after`, if the cache is at `at` (any
    /// revision when `at` is `None`).
    pub fn list(&self, prefix: &str, after: Option<&str>, at: Option<i64>) -> Option<Snapshot> {
        let s = self.read();
        if at.is_some_and(|a| a != s.revision) {
            return None;
        }
        let start = match after {
            Some(k) if k >= prefix => Bound::Excluded(k.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let objects = s
            .objects
            .range((start.clone(), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Some(Snapshot {
            objects,
            corrupt: corrupt_in(&s.corrupt, prefix, start),
            revision: s.revision,
        })
    }

    /// The compacted revision: the replica's (compaction alone publishes no apply event)
    /// or the one the cache saw, whichever is newer.
    pub fn compacted(&self) -> i64 {
        let applied = self.node.progress().borrow().compacted;
        applied.max(self.read().compacted)
    }

    /// Starts a watch after revision `from`: the events since then (from the window, or the
    /// store's history when they are older) and a subscription to everything after them.
    pub async fn watch_from(&self, from: i64) -> Result<WatchStart, Unavailable> {
        let mut backlog: Vec<Arc<CacheEvent>> = Vec::new();
        let mut after = from;
        loop {
            let compacted = self.compacted();
            let upto = {
                let s = self.read();
                if after < compacted {
                    return Err(Unavailable::Compacted { compacted });
                }
                if after >= s.window_start {
                    backlog.extend(s.window.iter().filter(|e| e.rev > after).cloned());
                    return Ok(WatchStart {
                        backlog,
                        revision: s.revision.max(after),
                        live: self.publish.subscribe(),
                    });
                }
                s.window_start
            };
            let mvcc = self.node.mvcc().clone();
            let read = tokio::task::spawn_blocking(move || mvcc.changes(after, upto)).await;
            match read {
                Ok(Ok(revisions)) => backlog.extend(history_events(&revisions)),
                Ok(Err(StorageError::Compacted { compacted, .. })) => {
                    return Err(Unavailable::Compacted { compacted })
                }
                _ => {
                    return Err(Unavailable::TooLarge {
                        current: self.revision(),
                    })
                }
            }
            after = upto;
        }
    }

    /// Copies the objects under `prefix` and subscribes to the changes after them, atomically.
    pub fn list_and_watch(&self, prefix: &str) -> (Snapshot, broadcast::Receiver<Arc<Published>>) {
        let s = self.read();
        let objects = s
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let live = self.publish.subscribe();
        (
            Snapshot {
                objects,
                corrupt: corrupt_in(&s.corrupt, prefix, Bound::Included(prefix.to_string())),
                revision: s.revision,
            },
            live,
        )
    }
}

/// The corrupt keys under `prefix` from `start` on.
fn corrupt_in(
    corrupt: &BTreeMap<String, Arc<str>>,
    prefix: &str,
    start: Bound<String>,
) -> Vec<(String, Arc<str>)> {
    corrupt
        .range((start, Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Loads the whole store into a fresh state.
async fn load(node: &RaftNode) -> Result<State, String> {
    let mvcc = node.mvcc().clone();
    let resp = tokio::task::spawn_blocking(move || {
        let (_, compacted) = mvcc.revisions()?;
        let r = mvcc.range(&pb::RangeRequest {
            key: ROOT.as_bytes().to_vec(),
            prefix: true,
            ..Default::default()
        })?;
        Ok::<_, StorageError>((r, compacted))
    })
    .await
    .map_err(|e| e.to_string())?;
    let (resp, compacted) = resp.map_err(|e| e.to_string())?;
    let mut objects = BTreeMap::new();
    let mut corrupt = BTreeMap::new();
    for kv in resp.kvs {
        let Ok(key) = String::from_utf8(kv.key) else {
            continue;
        };
        if key.starts_with(INTERNAL_PREFIX) {
            continue;
        }
        match CachedObject::from_kv(&kv.value, kv.mod_revision) {
            Ok(obj) => objects.insert(key, obj).map(|_| ()),
            Err(why) => corrupt.insert(key, why).map(|_| ()),
        };
    }
    metrics::gauge!("kuberaft_watch_cache_objects").set(objects.len() as f64);
    Ok(State {
        objects,
        corrupt,
        window: VecDeque::new(),
        window_start: resp.revision,
        revision: resp.revision,
        compacted,
    })
}

/// Applies revisions newer than the cache's and publishes them.
fn apply(
    cache: &WatchCache,
    revisions: &[(i64, Vec<StoredChange>)],
    compacted: i64,
    rev_tx: &watch::Sender<Option<i64>>,
) {
    let mut s = cache.write();
    let before = s.revision;
    s.compacted = s.compacted.max(compacted);
    let mut events = Vec::new();
    for (rev, changes) in revisions.iter().filter(|(r, _)| *r > before) {
        events.extend(s.apply(*rev, changes));
    }
    s.trim();
    let revision = s.revision;
    if revision > before {
        metrics::counter!("apiserver_watch_cache_events_received_total").increment(events.len() as u64);
        let _ = cache
            .publish
            .send(Arc::new(Published::Changes { events, revision }));
    }
    metrics::gauge!("kuberaft_watch_cache_objects").set(s.objects.len() as f64);
    metrics::gauge!("kuberaft_watch_cache_revision").set(revision as f64);
    drop(s);
    rev_tx.send_replace(Some(revision));
}

/// Replaces the whole state (first load, or after a snapshot install).
async fn reload(cache: &WatchCache, rev_tx: &watch::Sender<Option<i64>>) {
    loop {
        match load(&cache.node).await {
            Ok(fresh) => {
                let revision = fresh.revision;
                *cache.write() = fresh;
                let _ = cache.publish.send(Arc::new(Published::Reset));
                rev_tx.send_replace(Some(revision));
                tracing::info!(revision, "watch cache loaded");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "watch cache load failed; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// Reads the revisions the feeder missed after lagging behind the apply stream.
async fn catch_up(cache: &WatchCache, rev_tx: &watch::Sender<Option<i64>>) {
    let from = cache.read().revision;
    let mvcc = cache.node.mvcc().clone();
    let read = tokio::task::spawn_blocking(move || {
        let (current, compacted) = mvcc.revisions()?;
        Ok::<_, StorageError>((mvcc.changes(from, current)?, compacted))
    })
    .await;
    match read {
        Ok(Ok((revisions, compacted))) => apply(cache, &revisions, compacted, rev_tx),
        _ => reload(cache, rev_tx).await,
    }
}

async fn feed(cache: WatchCache, rev_tx: watch::Sender<Option<i64>>) {
    let mut rx = cache.node.subscribe();
    reload(&cache, &rev_tx).await;
    loop {
        match rx.recv().await {
            Ok(ev) => match &*ev {
                ApplyEvent::Applied(a) => apply(&cache, &a.revisions, a.compacted, &rev_tx),
                ApplyEvent::SnapshotInstalled { .. } => reload(&cache, &rev_tx).await,
            },
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(
                    missed = n,
                    "watch cache lagged behind the apply stream; catching up"
                );
                catch_up(&cache, &rev_tx).await;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
