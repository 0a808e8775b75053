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
//!
//! Watchers whose field selector pins their type's indexed field (pods: `spec.nodeName`) are
//! not woken by every batch: the feeder queues each event only for the watchers registered
//! under the field's old and new values (`store::dispatch`). Every other watcher, and every
//! other reader, takes each batch from one broadcast.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kuberaft_proto as pb;
use kuberaft_raft::{ApplyEvent, RaftNode};
use kuberaft_raft::{Change as StoredChange, NodeError, StorageError};
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};

use crate::machinery::go_json;
use crate::machinery::selector::{field_text, selectable_paths, FieldSelector, Selectable};
use crate::scheme::field_selectors;
use crate::store::dispatch::{Live, WatcherIndex};
use crate::store::encryption::Encryption;
use crate::store::keys::{type_of_key, INTERNAL_PREFIX, ROOT};
use crate::store::{decode_plain, open_value, stored_json};

/// Events kept in memory for resuming watches; older ones are read back from the store's MVCC
/// history, so this bounds memory, not correctness.
const WINDOW_EVENTS: usize = 100_000;

/// What selectors read of one object, extracted once when it enters the cache so that the
/// object itself can stay encoded: its labels and the texts of the fields its type can be
/// selected by (`metadata.name`, `metadata.namespace` and the type's own).
#[derive(Debug, Clone)]
struct Extract {
    labels: Box<[(Box<str>, Box<str>)]>,
    fields: Box<[(&'static str, Box<str>)]>,
}

impl Extract {
    /// The extract of `obj`, stored under `key` (whose prefix names the type).
    fn of(key: &str, obj: &Value) -> Extract {
        let labels = obj["metadata"]["labels"]
            .as_object()
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
                    .collect()
            })
            .unwrap_or_default();
        let (group, plural) = type_of_key(key);
        let fields = selectable_paths(field_selectors(group, plural))
            .map(|path| (path, field_text(obj, path).into()))
            .collect();
        Extract { labels, fields }
    }
}

/// One object as the cache holds it: encoded, as the JSON of a list item (without `kind` and
/// `apiVersion`, with `metadata.resourceVersion` set), plus what selectors read of it. Every
/// reader shares these bytes; a whole object is the item with its type fields in front, and
/// other encodings are computed on first use and shared too. The decoded form is built only
/// for the reads that need it (tables, metadata views, protobuf), and not kept.
#[derive(Debug)]
pub struct CachedObject {
    /// Its mod revision (= resourceVersion).
    pub rv: i64,
    item: Bytes,
    /// `"kind":"…","apiVersion":"…"` as they open the whole object's JSON (empty if absent).
    type_fields: Box<str>,
    extract: Extract,
    yaml: OnceLock<Box<Bytes>>,
    proto: OnceLock<Option<Box<Bytes>>>,
    /// The whole object as CBOR (self-described tag included).
    cbor: OnceLock<Box<Bytes>>,
    /// The object as a CBOR list item (without `kind` and `apiVersion`, nor the tag).
    cbor_item: OnceLock<Box<Bytes>>,
}

impl Selectable for CachedObject {
    fn label(&self, key: &str) -> Option<&str> {
        self.extract
            .labels
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }

    /// A field extracted when the object entered the cache, else (a custom resource's
    /// selectable field) read from the decoded object.
    fn field(&self, path: &str) -> String {
        self.extract
            .fields
            .iter()
            .find(|(p, _)| *p == path)
            .map_or_else(|| field_text(&self.value(), path), |(_, text)| text.to_string())
    }
}

impl CachedObject {
    /// Encodes a decoded object (whose resourceVersion is already `rv`) stored under `key`.
    pub fn new(key: &str, mut obj: Value, rv: i64) -> Arc<Self> {
        let extract = Extract::of(key, &obj);
        let mut type_fields = String::new();
        if let Some(o) = obj.as_object_mut() {
            for field in ["kind", "apiVersion"] {
                if let Some(v) = o.remove(field) {
                    if !type_fields.is_empty() {
                        type_fields.push(',');
                    }
                    type_fields.push_str(&format!("{}:{}", json!(field), v));
                }
            }
        }
        // Escaped as kube-apiserver's encoder escapes strings: these bytes are what readers get.
        let mut item = go_json::encode(&obj, false).unwrap_or_else(|_| b"{}".to_vec());
        // The encoder grows its buffer by doubling; the cache keeps exactly the bytes.
        item.shrink_to_fit();
        Self::assemble(rv, Bytes::from(item), type_fields.into_boxed_str(), extract)
    }

    /// An entry of these parts, its other encodings not computed yet.
    fn assemble(rv: i64, item: Bytes, type_fields: Box<str>, extract: Extract) -> Arc<Self> {
        Arc::new(CachedObject {
            rv,
            item,
            type_fields,
            extract,
            yaml: OnceLock::new(),
            proto: OnceLock::new(),
            cbor: OnceLock::new(),
            cbor_item: OnceLock::new(),
        })
    }

    /// Decodes a stored value under `key`, setting its resourceVersion to `rv`; an error (why
    /// it cannot be decoded) when the stored object is corrupt.
    /// The entry is spliced from the stored JSON when that gives exactly what decoding and
    /// encoding again would (`store::stored_json`), and decoded otherwise.
    pub fn from_kv(encryption: &Encryption, key: &str, value: &[u8], rv: i64) -> Result<Arc<Self>, Arc<str>> {
        let plain = open_value(encryption, key, value)?;
        let (group, plural) = type_of_key(key);
        let paths = selectable_paths(field_selectors(group, plural));
        match stored_json::splice(&plain, rv, paths) {
            Some(s) => Ok(Self::assemble(
                rv,
                Bytes::from(s.item),
                s.type_fields.into_boxed_str(),
                Extract {
                    labels: s.labels.into_boxed_slice(),
                    fields: s.fields.into_boxed_slice(),
                },
            )),
            None => decode_plain(&plain, rv)
                .map(|obj| Self::new(key, obj, rv))
                .map_err(Arc::from),
        }
    }

    /// The same object with other type fields (a custom resource read through a version other
    /// than the one it is stored in): the item's bytes are shared, not copied.
    pub fn with_type(&self, kind: &str, api_version: &str) -> Arc<Self> {
        Self::assemble(
            self.rv,
            self.item.clone(),
            format!("\"kind\":{},\"apiVersion\":{}", json!(kind), json!(api_version)).into_boxed_str(),
            self.extract.clone(),
        )
    }

    /// The same object as `convert` turns it (a built-in type read through a version other
    /// than its storage one): re-encoded, with what the cache extracted for selectors kept.
    pub fn converted(&self, convert: impl FnOnce(&mut Value)) -> Arc<Self> {
        let mut obj = self.value();
        convert(&mut obj);
        let mut converted = Self::new("", obj, self.rv);
        if let Some(c) = Arc::get_mut(&mut converted) {
            c.extract = self.extract.clone();
        }
        converted
    }

    /// The same object at another resourceVersion (what a deletion event carries).
    fn at(&self, key: &str, rv: i64) -> Arc<Self> {
        let mut obj = self.value();
        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
        Self::new(key, obj, rv)
    }

    /// `"kind":…,"apiVersion":…` as they open the whole object's JSON.
    pub fn type_fields(&self) -> &str {
        &self.type_fields
    }

    /// The object as a JSON list item (without `kind` and `apiVersion`).
    pub fn item_json(&self) -> &Bytes {
        &self.item
    }

    /// Writes the whole object's JSON: the type fields, then the item's.
    pub fn write_json(&self, out: &mut BytesMut) {
        let fields = self.item.strip_prefix(b"{").unwrap_or(&self.item);
        out.put_u8(b'{');
        out.put_slice(self.type_fields.as_bytes());
        if !self.type_fields.is_empty() && fields != b"}" {
            out.put_u8(b',');
        }
        out.put_slice(fields);
    }

    /// How many bytes [`CachedObject::write_json`] writes.
    pub fn json_len(&self) -> usize {
        let fields = self.item.strip_prefix(b"{").unwrap_or(&self.item);
        let comma = !self.type_fields.is_empty() && fields != b"}";
        1 + self.type_fields.len() + usize::from(comma) + fields.len()
    }

    /// The whole object as JSON.
    pub fn json(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.item.len() + self.type_fields.len() + 2);
        self.write_json(&mut out);
        out.freeze()
    }

    /// The whole object, decoded (built for each call; the cache keeps only the encoding).
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json()).unwrap_or(Value::Null)
    }

    /// The object as Kubernetes protobuf (envelope included), encoded once; `None` when its
    /// type has no protobuf form.
    pub fn protobuf(&self) -> Option<&Bytes> {
        self.proto
            .get_or_init(|| {
                crate::machinery::protobuf::encode_object(&self.value())
                    .ok()
                    .map(|b| Box::new(Bytes::from(b)))
            })
            .as_deref()
    }

    /// The whole object as CBOR (self-described tag included), encoded once.
    pub fn cbor(&self) -> &Bytes {
        self.cbor
            .get_or_init(|| Box::new(crate::machinery::cbor::encode(&self.value()).into()))
    }

    /// The object as a CBOR list item (without `kind` and `apiVersion`), encoded once.
    pub fn cbor_item(&self) -> &Bytes {
        self.cbor_item.get_or_init(|| {
            use crate::machinery::cbor;
            let shape = cbor::Shape::of(&self.value());
            let item = serde_json::from_slice(&self.item).unwrap_or(Value::Null);
            Box::new(cbor::encode_item(&item, shape).into())
        })
    }

    /// The object as YAML, serialised once.
    pub fn yaml(&self) -> &Bytes {
        self.yaml
            .get_or_init(|| Box::new(yaml_serde::to_string(&self.value()).unwrap_or_default().into()))
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
        /// The batch as encoded for watchers that all send the same bytes, built by the first
        /// of them: fanning a batch out to many such watchers costs one encoding, not one copy
        /// per watcher.
        shared: SharedEncodings,
    },
    /// The state was reloaded wholesale (a snapshot was installed): watchers must end and
    /// their clients resume or re-list.
    Reset,
}

/// A batch's encodings, each built once for one audience (e.g. "JSON watchers of key prefix
/// P without selectors") and reused by every watcher of that audience.
/// Only the last [`SHARED_BATCHES`] batches keep theirs (see [`SharedEncodings::close`]).
#[derive(Debug)]
pub struct SharedEncodings(Mutex<Option<Vec<Built>>>);

/// One audience's encoding of a batch (`None`: the audience cannot share one).
type Built = (String, Option<SharedBatch>);

/// How many of the latest batches keep their shared encodings. Watchers that keep up read a
/// batch while it is among them; one further behind encodes the batch itself, so the watcher
/// buffer (thousands of batches) never holds a second copy of its objects.
const SHARED_BATCHES: usize = 64;

impl Default for SharedEncodings {
    fn default() -> Self {
        SharedEncodings(Mutex::new(Some(Vec::new())))
    }
}

/// What a batch is, encoded for one audience.
#[derive(Debug, Clone)]
pub struct SharedBatch {
    /// The frames of the batch's events for the audience, in revision order.
    pub bytes: Bytes,
    /// How many events they are.
    pub events: u64,
    /// The revision of the last of them (`None` when none concerned the audience).
    pub last_rev: Option<i64>,
}

impl SharedEncodings {
    /// The batch encoded for `audience`; the first caller builds it with `build`, whose `None`
    /// (the audience cannot share an encoding of this batch) is remembered too. `None` as well
    /// once the batch is no longer among the latest.
    pub fn get_or_build(
        &self,
        audience: &str,
        build: impl FnOnce() -> Option<SharedBatch>,
    ) -> Option<SharedBatch> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let built = open.as_mut()?;
        if let Some((_, b)) = built.iter().find(|(a, _)| a == audience) {
            return b.clone();
        }
        let b = build();
        built.push((audience.to_string(), b.clone()));
        b
    }

    /// Drops the encodings and builds no more: the batch has left the latest few.
    fn close(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Arc<CachedObject>>,
    /// Keys whose stored value cannot be decoded, and why.
    corrupt: BTreeMap<String, Arc<str>>,
    /// Recent events in revision order; every event with `rev > window_start` is here.
    window: VecDeque<Arc<CacheEvent>>,
    window_start: i64,
    revision: i64,
    compacted: i64,
    /// Objects per type (`<group|core>/<plural>`), for `apiserver_storage_objects`.
    counts: BTreeMap<String, i64>,
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
    pub live: Live,
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

/// Two iterators of distinct keys, each in key order, merged in key order.
struct InKeyOrder<'k, V, A: Iterator<Item = (&'k str, V)>, B: Iterator<Item = (&'k str, V)>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<'k, V, A, B> Iterator for InKeyOrder<'k, V, A, B>
where
    A: Iterator<Item = (&'k str, V)>,
    B: Iterator<Item = (&'k str, V)>,
{
    type Item = (&'k str, V);

    fn next(&mut self) -> Option<Self::Item> {
        match (self.a.peek(), self.b.peek()) {
            (Some((a, _)), Some((b, _))) if b < a => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

/// One page of a list, cut from the objects in key order while the cache's state is held:
/// only the page's objects are copied, however many objects the collection holds.
#[derive(Debug)]
pub struct Cut {
    /// The objects of the page.
    pub items: Vec<Arc<CachedObject>>,
    /// When more objects follow the page: the key of its last item (`None` for an empty page)
    /// and how many objects follow, kept or not.
    pub more: Option<(Option<String>, usize)>,
    /// How many objects were read.
    pub fetched: usize,
}

/// Cuts a page of at most `limit` objects that `keep` accepts from `objects`.
fn cut<'k, 'o>(
    objects: &mut dyn Iterator<Item = (&'k str, &'o Arc<CachedObject>)>,
    limit: usize,
    keep: &(dyn Fn(&CachedObject) -> bool + Sync),
) -> Cut {
    let mut items = Vec::new();
    let mut last = None;
    let mut fetched = 0;
    while let Some((key, obj)) = objects.next() {
        fetched += 1;
        if !keep(obj) {
            continue;
        }
        if items.len() == limit {
            let following = 1 + objects.count();
            return Cut {
                items,
                more: Some((last.map(str::to_string), following)),
                fetched,
            };
        }
        items.push(obj.clone());
        last = Some(key);
    }
    Cut {
        items,
        more: None,
        fetched,
    }
}

/// A page of a list as the cache read it.
#[derive(Debug)]
pub struct Listed {
    /// The page.
    pub cut: Cut,
    /// The keys in the range whose stored value cannot be decoded, and why (then the page is
    /// empty: the list fails).
    pub corrupt: Vec<(String, Arc<str>)>,
    /// The revision the page is at.
    pub revision: i64,
}

/// The per-replica watch cache (cheap to clone; clones share the cache).
#[derive(Clone)]
pub struct WatchCache {
    state: Arc<RwLock<State>>,
    node: Arc<RaftNode>,
    revision: watch::Receiver<Option<i64>>,
    publish: broadcast::Sender<Arc<Published>>,
    /// The watchers that are sent only the events of their indexed field's value.
    index: WatcherIndex,
    /// How many batches a watcher may fall behind before it is closed.
    watcher_buffer: usize,
    /// The latest published batches, whose shared encodings are kept.
    latest: Arc<Mutex<VecDeque<Arc<Published>>>>,
    /// How stored values are decrypted.
    encryption: Arc<Encryption>,
}

/// The cache event for one stored change; `None` for a key outside UTF-8 or under
/// [`INTERNAL_PREFIX`], and for the deletion of a key that held no readable object.
fn change_event(
    encryption: &Encryption,
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
            .and_then(|p| CachedObject::from_kv(encryption, &key, &p.value, p.mod_revision).ok())
    });
    let change = if change.is_delete() {
        Change::Deleted(prev.as_ref()?.at(&key, rev))
    } else {
        match CachedObject::from_kv(encryption, &key, &change.kv.value, rev) {
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
pub fn history_events(
    encryption: &Encryption,
    revisions: &[(i64, Vec<StoredChange>)],
) -> Vec<Arc<CacheEvent>> {
    let mut last: BTreeMap<String, Arc<CachedObject>> = BTreeMap::new();
    let mut out = Vec::new();
    for (rev, changes) in revisions {
        for c in changes {
            if let Some(e) = change_event(encryption, *rev, c, &last) {
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
    fn apply(&mut self, encryption: &Encryption, rev: i64, changes: &[StoredChange]) -> Vec<Arc<CacheEvent>> {
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            let Some(e) = change_event(encryption, rev, c, &self.objects) else {
                // The deletion of a corrupt key: nobody could read it, so no watcher is told.
                if let Ok(key) = std::str::from_utf8(&c.kv.key) {
                    self.corrupt.remove(key);
                }
                continue;
            };
            let counted = match &e.change {
                Change::Put(obj) => {
                    self.corrupt.remove(&e.key);
                    i64::from(self.objects.insert(e.key.clone(), obj.clone()).is_none())
                }
                Change::Deleted(_) => {
                    self.corrupt.remove(&e.key);
                    -i64::from(self.objects.remove(&e.key).is_some())
                }
                Change::Corrupt(why) => {
                    self.corrupt.insert(e.key.clone(), why.clone());
                    -i64::from(self.objects.remove(&e.key).is_some())
                }
            };
            count(&mut self.counts, &e.key, counted);
            let e = Arc::new(e);
            self.window.push_back(e.clone());
            out.push(e);
        }
        self.revision = rev;
        self.trim();
        out
    }

    /// Publishes the object count of the type `part` (`<group|core>/<plural>`).
    fn publish_count(&self, part: &str) {
        let (group, resource) = part_labels(part);
        let n = self.counts.get(part).copied().unwrap_or(0) as f64;
        // kube's `GroupResource.String()`: `resource` for the core group, else `resource.group`.
        let group_resource = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        metrics::gauge!("apiserver_storage_objects", "resource" => group_resource).set(n);
        metrics::gauge!("apiserver_resource_objects", "group" => group.to_string(), "resource" => resource.to_string())
            .set(n);
    }

    /// The objects under `prefix` from `start` on, now.
    fn range<'a>(
        &'a self,
        prefix: &'a str,
        start: Bound<String>,
    ) -> impl Iterator<Item = (&'a String, &'a Arc<CachedObject>)> + 'a {
        self.objects
            .range((start, Bound::Unbounded))
            .take_while(move |(k, _)| k.starts_with(prefix))
    }

    /// The objects under `prefix` from `start` on as they were at the older revision `at`,
    /// rebuilt from the objects now and the window: a key changed since `at` is as its first
    /// change after `at` found it (absent if that change created it). `None` when the window
    /// does not reach back to `at`, or when an object in the range is or was made corrupt
    /// since (the store's history then says what was there).
    /// `read` is given them in key order, while the state is held.
    fn list_at<R>(
        &self,
        prefix: &str,
        start: Bound<String>,
        at: i64,
        read: impl FnOnce(&mut dyn Iterator<Item = (&str, &Arc<CachedObject>)>) -> R,
    ) -> Option<R> {
        if at < self.window_start || at > self.revision {
            return None;
        }
        let in_range = |key: &str| {
            key.starts_with(prefix)
                && match &start {
                    Bound::Included(s) => key >= s.as_str(),
                    Bound::Excluded(s) => key > s.as_str(),
                    Bound::Unbounded => true,
                }
        };
        if !corrupt_in(&self.corrupt, prefix, start.clone()).is_empty() {
            return None;
        }
        let first = self.window.partition_point(|e| e.rev <= at);
        let mut then: BTreeMap<&str, Option<&Arc<CachedObject>>> = BTreeMap::new();
        for e in self.window.range(first..).filter(|e| in_range(&e.key)) {
            if matches!(e.change, Change::Corrupt(_)) {
                return None;
            }
            then.entry(e.key.as_str()).or_insert(e.prev.as_ref());
        }
        let now = self
            .range(prefix, start)
            .filter(|(k, _)| !then.contains_key(k.as_str()))
            .map(|(k, v)| (k.as_str(), v));
        let then = then.iter().filter_map(|(k, v)| v.map(|obj| (*k, obj)));
        Some(read(&mut InKeyOrder {
            a: now.peekable(),
            b: then.peekable(),
        }))
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
    pub fn start(node: Arc<RaftNode>, watcher_buffer: usize, encryption: Arc<Encryption>) -> WatchCache {
        let (rev_tx, revision) = watch::channel(None);
        let cache = WatchCache {
            state: Arc::new(RwLock::new(State::default())),
            node,
            revision,
            publish: broadcast::channel(watcher_buffer).0,
            index: WatcherIndex::default(),
            watcher_buffer,
            latest: Arc::default(),
            encryption,
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

    /// Decodes a value read from the store under `key` at revision `rv` (why it cannot be
    /// decoded when it is corrupt).
    pub fn decode(&self, key: &str, value: &[u8], rv: i64) -> Result<Arc<CachedObject>, Arc<str>> {
        CachedObject::from_kv(&self.encryption, key, value, rv)
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

    /// The objects under `prefix` with keys after `after`, as they were at revision `at` (now
    /// when `at` is `None`): `None` when the cache cannot say, because `at` is older than its
    /// window of events ([`State::list_at`]).
    pub fn list(&self, prefix: &str, after: Option<&str>, at: Option<i64>) -> Option<Snapshot> {
        let s = self.read();
        let start = match after {
            Some(k) if k >= prefix => Bound::Excluded(k.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let copy = |objects: &mut dyn Iterator<Item = (&str, &Arc<CachedObject>)>| {
            objects.map(|(k, v)| (k.to_string(), v.clone())).collect()
        };
        match at {
            Some(at) if at != s.revision => s.list_at(prefix, start, at, copy).map(|objects| Snapshot {
                objects,
                corrupt: Vec::new(),
                revision: at,
            }),
            _ => Some(Snapshot {
                objects: copy(&mut s.range(prefix, start.clone()).map(|(k, v)| (k.as_str(), v))),
                corrupt: corrupt_in(&s.corrupt, prefix, start),
                revision: s.revision,
            }),
        }
    }

    /// A page of at most `limit` objects that `keep` accepts, from the objects under `prefix`
    /// with keys after `after` as they were at revision `at` (now when `at` is `None`), read
    /// without copying the rest of the collection: `None` when the cache cannot say, because
    /// `at` is older than its window of events ([`State::list_at`]).
    pub fn list_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        at: Option<i64>,
        limit: usize,
        keep: &(dyn Fn(&CachedObject) -> bool + Sync),
    ) -> Option<Listed> {
        let s = self.read();
        let start = match after {
            Some(k) if k >= prefix => Bound::Excluded(k.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        match at {
            Some(at) if at != s.revision => s
                .list_at(prefix, start, at, |objects| cut(objects, limit, keep))
                .map(|cut| Listed {
                    cut,
                    corrupt: Vec::new(),
                    revision: at,
                }),
            _ => {
                let corrupt = corrupt_in(&s.corrupt, prefix, start.clone());
                let cut = if corrupt.is_empty() {
                    cut(
                        &mut s.range(prefix, start).map(|(k, v)| (k.as_str(), v)),
                        limit,
                        keep,
                    )
                } else {
                    cut(&mut std::iter::empty(), limit, keep)
                };
                Some(Listed {
                    cut,
                    corrupt,
                    revision: s.revision,
                })
            }
        }
    }

    /// The compacted revision: the replica's (compaction alone publishes no apply event)
    /// or the one the cache saw, whichever is newer.
    pub fn compacted(&self) -> i64 {
        let applied = self.node.progress().borrow().compacted;
        applied.max(self.read().compacted)
    }

    /// The subscription of a watcher of `prefix` with the field selector `fields`: to the
    /// events of its value when the selector pins its type's indexed field, else to every
    /// batch. Taken while the state is held, so it continues exactly after what was read.
    fn subscribe(&self, prefix: &str, fields: &FieldSelector) -> Live {
        self.index
            .register(prefix, fields, self.watcher_buffer, &self.revision)
            .map_or_else(|| Live::All(self.publish.subscribe()), Live::Indexed)
    }

    /// Starts a watch of `prefix` (whose field selector is `fields`) after revision `from`:
    /// the events since then (from the window, or the store's history when they are older)
    /// and a subscription to everything after them.
    pub async fn watch_from(
        &self,
        from: i64,
        prefix: &str,
        fields: &FieldSelector,
    ) -> Result<WatchStart, Unavailable> {
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
                        live: self.subscribe(prefix, fields),
                    });
                }
                s.window_start
            };
            match self.node.changes(after, upto).await {
                Ok(revisions) => backlog.extend(history_events(&self.encryption, &revisions)),
                Err(NodeError::Storage(StorageError::Compacted { compacted, .. })) => {
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

    /// Copies the objects under `prefix` and subscribes to every batch after them, atomically.
    pub fn list_and_watch(&self, prefix: &str) -> (Snapshot, broadcast::Receiver<Arc<Published>>) {
        self.list_then(prefix, || self.publish.subscribe())
    }

    /// Copies the objects under `prefix` and subscribes a watcher with the field selector
    /// `fields` to the changes after them, atomically.
    pub fn list_and_watch_selected(&self, prefix: &str, fields: &FieldSelector) -> (Snapshot, Live) {
        self.list_then(prefix, || self.subscribe(prefix, fields))
    }

    /// Copies the objects under `prefix` and, while they cannot change, `subscribe`s.
    fn list_then<L>(&self, prefix: &str, subscribe: impl FnOnce() -> L) -> (Snapshot, L) {
        let s = self.read();
        let objects = s
            .objects
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let live = subscribe();
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
async fn load(node: &RaftNode, encryption: &Encryption) -> Result<State, String> {
    let (_, compacted) = node.revisions().await.map_err(|e| e.to_string())?;
    let resp = node
        .range(pb::RangeRequest {
            key: ROOT.as_bytes().to_vec(),
            prefix: true,
            ..Default::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut objects = BTreeMap::new();
    let mut corrupt = BTreeMap::new();
    for kv in resp.kvs {
        let Ok(key) = String::from_utf8(kv.key) else {
            continue;
        };
        if key.starts_with(INTERNAL_PREFIX) {
            continue;
        }
        match CachedObject::from_kv(encryption, &key, &kv.value, kv.mod_revision) {
            Ok(obj) => objects.insert(key, obj).map(|_| ()),
            Err(why) => corrupt.insert(key, why).map(|_| ()),
        };
    }
    metrics::gauge!("kuberaft_watch_cache_objects").set(objects.len() as f64);
    let mut counts = BTreeMap::new();
    for key in objects.keys() {
        count(&mut counts, key, 1);
    }
    for (part, n) in &counts {
        let (group, resource) = part_labels(part);
        let labels = [("group", group.to_string()), ("resource", resource.to_string())];
        metrics::counter!("apiserver_watch_cache_initializations_total", &labels).increment(1);
        metrics::counter!("apiserver_init_events_total", &labels).increment(*n as u64);
    }
    Ok(State {
        objects,
        corrupt,
        window: VecDeque::new(),
        window_start: resp.revision,
        revision: resp.revision,
        compacted,
        counts,
    })
}

/// The `<group|core>/<plural>` part of a storage key, which names its type.
fn type_part(key: &str) -> &str {
    let rest = key.strip_prefix(ROOT).unwrap_or("");
    let end = rest.match_indices('/').nth(1).map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

/// The `group` and `resource` labels of a type part (`core` is the empty group).
fn part_labels(part: &str) -> (&str, &str) {
    let (group, resource) = part.split_once('/').unwrap_or((part, ""));
    (if group == "core" { "" } else { group }, resource)
}

/// Adds `delta` to the count of `key`'s type.
fn count(counts: &mut BTreeMap<String, i64>, key: &str, delta: i64) {
    let part = type_part(key);
    match counts.get_mut(part) {
        Some(n) => *n += delta,
        None => {
            counts.insert(part.to_string(), delta);
        }
    }
}

/// Records what one applied batch brought, per type: kube's watch cache event counters, the
/// cache's resource version and the types' object counts.
fn record_batch(s: &State, events: &[Arc<CacheEvent>], revision: i64) {
    let mut per_type: BTreeMap<&str, u64> = BTreeMap::new();
    for e in events {
        *per_type.entry(type_part(&e.key)).or_default() += 1;
    }
    for (part, n) in per_type {
        let (group, resource) = part_labels(part);
        let labels = [("group", group.to_string()), ("resource", resource.to_string())];
        metrics::counter!("apiserver_watch_cache_events_received_total", &labels).increment(n);
        // Every event is published to the type's watchers as it is received.
        metrics::counter!("apiserver_watch_cache_events_dispatched_total", &labels).increment(n);
        metrics::gauge!("apiserver_watch_cache_resource_version", &labels).set(revision as f64);
        s.publish_count(part);
    }
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
        events.extend(s.apply(&cache.encryption, *rev, changes));
    }
    s.trim();
    let revision = s.revision;
    if revision > before {
        record_batch(&s, &events, revision);
        cache.index.dispatch(&events, revision);
        let batch = Arc::new(Published::Changes {
            events,
            revision,
            shared: SharedEncodings::default(),
        });
        let mut latest = cache.latest.lock().unwrap_or_else(|p| p.into_inner());
        latest.push_back(batch.clone());
        if latest.len() > SHARED_BATCHES {
            if let Some(Published::Changes { shared, .. }) = latest.pop_front().as_deref() {
                shared.close();
            }
        }
        drop(latest);
        let _ = cache.publish.send(batch);
    }
    metrics::gauge!("kuberaft_watch_cache_objects").set(s.objects.len() as f64);
    metrics::gauge!("kuberaft_watch_cache_revision").set(revision as f64);
    drop(s);
    rev_tx.send_replace(Some(revision));
}

/// Replaces the whole state (first load, or after a snapshot install).
async fn reload(cache: &WatchCache, rev_tx: &watch::Sender<Option<i64>>) {
    loop {
        match load(&cache.node, &cache.encryption).await {
            Ok(mut fresh) => {
                let revision = fresh.revision;
                let mut s = cache.write();
                // A type the new state no longer has is counted as empty, not left as it was.
                for part in s.counts.keys() {
                    fresh.counts.entry(part.clone()).or_insert(0);
                }
                for part in fresh.counts.keys() {
                    fresh.publish_count(part);
                }
                *s = fresh;
                cache.index.reset();
                drop(s);
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
    let read = async {
        let (current, compacted) = cache.node.revisions().await?;
        Ok::<_, NodeError>((cache.node.changes(from, current).await?, compacted))
    };
    match read.await {
        Ok((revisions, compacted)) => apply(cache, &revisions, compacted, rev_tx),
        Err(_) => reload(cache, rev_tx).await,
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

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use super::*;
    use crate::machinery::selector::{FieldSelector, LabelSelector};

    /// Counts the bytes this thread holds, so a test can weigh what it builds while other
    /// tests run on other threads.
    struct Counting;

    thread_local! {
        static HELD: Cell<isize> = const { Cell::new(0) };
    }

    fn track(delta: isize) {
        let _ = HELD.try_with(|h| h.set(h.get() + delta));
    }

    // SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
    // const-initialised thread-local that never allocates.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            track(layout.size() as isize);
            // SAFETY: same contract as ours.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            track(-(layout.size() as isize));
            // SAFETY: same contract as ours.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            track(new_size as isize - layout.size() as isize);
            // SAFETY: same contract as ours.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    fn held() -> isize {
        HELD.with(Cell::get)
    }

    /// A ConfigMap as a client would create it, about 1 KiB of JSON with its managedFields.
    fn config_map(i: usize) -> Vec<u8> {
        let data: serde_json::Map<String, Value> = (0..8)
            .map(|k| (format!("key-{k}"), json!(format!("{i:08}-{}", "v".repeat(60)))))
            .collect();
        let obj = json!({
            "kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {
                "name": format!("cm-{i:06}"), "namespace": "default",
                "uid": format!("8c4a5f1e-0000-4000-8000-{i:012}"),
                "creationTimestamp": "2026-11-23T10:00:00Z",
                "labels": {"app": "bench", "shard": format!("s{}", i % 10)},
                "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                    "time": "2026-11-23T10:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {}, "f:metadata": {"f:labels": {"f:app": {}, "f:shard": {}}}}}],
            },
            "data": data,
        });
        serde_json::to_vec(&obj).unwrap()
    }

    #[test]
    fn a_cached_object_reads_back_and_selects_like_the_object() {
        let pod = json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "web-1", "namespace": "prod", "resourceVersion": "7",
                         "labels": {"app": "web", "tier": "front"}},
            "spec": {"nodeName": "n1", "hostNetwork": true, "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        });
        let key = "/registry/core/pods/prod/web-1";
        let cached = CachedObject::new(key, pod.clone(), 7);
        assert_eq!(cached.value(), pod);
        assert!(cached.json().starts_with(br#"{"kind":"Pod","apiVersion":"v1","#));
        let item: Value = serde_json::from_slice(cached.item_json()).unwrap();
        assert!(item.get("kind").is_none() && item.get("apiVersion").is_none());
        assert_eq!(item["metadata"], pod["metadata"]);
        let deleted = cached.at(key, 9);
        assert_eq!(deleted.rv, 9);
        assert_eq!(deleted.value()["metadata"]["resourceVersion"], "9");
        for (labels, fields) in [
            ("app=web", ""),
            ("app=web,tier!=back", "spec.nodeName=n1"),
            (
                "tier in (front,back)",
                "status.phase=Running,metadata.namespace=prod",
            ),
            ("!missing", "spec.hostNetwork=true"),
            ("app", "metadata.name!=web-1"),
            ("app=db", ""),
            ("", "spec.nodeName="),
            ("", "status.podIP="),
        ] {
            let l = LabelSelector::parse(labels).unwrap();
            let f = FieldSelector::parse(fields, field_selectors("", "pods")).unwrap();
            assert_eq!(
                (l.matches(&*cached), f.matches(&*cached)),
                (l.matches(&pod), f.matches(&pod)),
                "{labels} / {fields}"
            );
        }
        // An object without type fields keeps a valid encoding.
        let bare = CachedObject::new("/registry/core/configmaps/a/b", json!({"metadata": {}}), 1);
        assert_eq!(bare.value(), json!({"metadata": {}}));
    }

    /// What the cache holds per object, against the object's JSON size: the target is at most
    /// 1.5x. Counted exactly (bytes allocated by this thread), for objects held as the cache
    /// holds them: key, encoding and selector extract.
    #[test]
    fn a_cached_object_costs_at_most_one_and_a_half_times_its_json() {
        const N: usize = 2_000;
        let values: Vec<Vec<u8>> = (0..N).map(config_map).collect();
        let json_bytes: usize = values.iter().map(Vec::len).sum();
        let before = held();
        let mut objects: BTreeMap<String, Arc<CachedObject>> = BTreeMap::new();
        for (i, v) in values.iter().enumerate() {
            let key = format!("/registry/core/configmaps/default/cm-{i:06}");
            let obj = CachedObject::from_kv(&Encryption::none(), &key, v, i as i64 + 1).unwrap();
            objects.insert(key, obj);
        }
        let cost = (held() - before) as f64;
        let ratio = cost / json_bytes as f64;
        println!(
            "{N} objects of {} JSON bytes on average: {:.0} bytes each in the cache, {ratio:.2}x",
            json_bytes / N,
            cost / N as f64
        );
        assert!(ratio <= 1.5, "the cache holds {ratio:.2}x the JSON size");
        drop(objects);
    }

    /// A page takes the first `limit` objects `keep` accepts and says what follows it: the
    /// last item's key and how many objects come after the page, kept or not.
    #[test]
    fn a_page_is_the_first_kept_objects_and_says_how_many_follow() {
        let objects: Vec<(String, Arc<CachedObject>)> = (0..10)
            .map(|i| {
                let key = format!("/registry/core/configmaps/default/cm-{i}");
                let obj =
                    CachedObject::from_kv(&Encryption::none(), &key, &config_map(i), i as i64 + 1).unwrap();
                (key, obj)
            })
            .collect();
        let even_index = |o: &CachedObject| o.rv % 2 == 1;
        let all = |_: &CachedObject| true;
        let keeps: [&(dyn Fn(&CachedObject) -> bool + Sync); 2] = [&all, &even_index];
        for keep in keeps {
            for limit in [0, 1, 3, 5, 9, 10, 11, usize::MAX] {
                let page = cut(&mut objects.iter().map(|(k, o)| (k.as_str(), o)), limit, keep);
                // The reference: where the first kept object past the page stands.
                let kept: Vec<usize> = (0..objects.len()).filter(|i| keep(&objects[*i].1)).collect();
                let rvs: Vec<i64> = page.items.iter().map(|o| o.rv).collect();
                let want: Vec<i64> = kept.iter().take(limit).map(|i| *i as i64 + 1).collect();
                assert_eq!(rvs, want, "limit {limit}");
                match kept.get(limit) {
                    Some(&next) => {
                        let last = limit.checked_sub(1).map(|l| objects[kept[l]].0.clone());
                        assert_eq!(page.more, Some((last, objects.len() - next)), "limit {limit}");
                        assert_eq!(page.fetched, next + 1);
                    }
                    None => {
                        assert_eq!(page.more, None, "limit {limit}");
                        assert_eq!(page.fetched, objects.len());
                    }
                }
            }
        }
    }

    /// A page of a list at an older revision (a continue token's) is rebuilt from the objects
    /// now and the window of events: at every revision it holds exactly what the store held
    /// then, from any key on; before the window it cannot say.
    #[test]
    fn a_list_at_an_older_revision_is_what_the_store_held_then() {
        let key = |n: usize| format!("/registry/core/configmaps/default/cm-{n:06}");
        let kv = |n: usize, rev: i64, value: Vec<u8>| crate::store::KeyValue {
            key: key(n).into_bytes(),
            value,
            mod_revision: rev,
            version: i64::from(rev > 0),
            ..Default::default()
        };
        // (revision, object, deleted?)
        let steps = [
            (1, 1, false),
            (2, 2, false),
            (3, 3, false),
            (4, 2, false),
            (5, 1, true),
            (6, 4, false),
            (7, 3, false),
        ];
        let mut s = State::default();
        let mut truth: Vec<BTreeMap<String, i64>> = vec![BTreeMap::new()];
        let mut last: BTreeMap<usize, i64> = BTreeMap::new();
        for (rev, n, deleted) in steps {
            let prev = last.get(&n).map(|r| kv(n, *r, config_map(n)));
            let change = if deleted {
                last.remove(&n);
                StoredChange {
                    kv: kv(n, 0, Vec::new()),
                    prev,
                }
            } else {
                last.insert(n, rev);
                StoredChange {
                    kv: kv(n, rev, config_map(n)),
                    prev,
                }
            };
            s.apply(&Encryption::none(), rev, &[change]);
            truth.push(last.iter().map(|(n, r)| (key(*n), *r)).collect());
        }
        let prefix = "/registry/core/configmaps/";
        for at in 0..=7 {
            for start in [
                Bound::Included(prefix.to_string()),
                Bound::Excluded(key(1)),
                Bound::Excluded(key(2)),
            ] {
                let listed: Vec<(String, i64)> = s
                    .list_at(prefix, start.clone(), at, |objects| {
                        objects.map(|(k, o)| (k.to_string(), o.rv)).collect()
                    })
                    .expect("within the window");
                assert!(listed.windows(2).all(|w| w[0].0 < w[1].0), "ordered by key");
                let got: BTreeMap<String, i64> = listed.into_iter().collect();
                let want: BTreeMap<String, i64> = truth[at as usize]
                    .iter()
                    .filter(|(k, _)| match &start {
                        Bound::Excluded(s) => k.as_str() > s.as_str(),
                        _ => true,
                    })
                    .map(|(k, r)| (k.clone(), *r))
                    .collect();
                assert_eq!(got, want, "at {at} from {start:?}");
            }
        }
        s.window_start = 3;
        let whole = Bound::Included(prefix.to_string());
        assert!(s.list_at(prefix, whole.clone(), 2, |_| ()).is_none());
        assert!(s.list_at(prefix, whole, 3, |_| ()).is_some());
    }
}
