//! `?watch=1` (and the legacy `/watch/` paths): a stream of ADDED / MODIFIED / DELETED /
//! BOOKMARK / ERROR events served from the replica's watch cache.
//!
//! * Start: unset → the state at a linearizable read as ADDED events, then changes; `0` → the
//!   cache's state, then changes; `N` → only the changes after N (an ERROR event with a 410
//!   `Expired` Status when N was compacted); streaming lists (`sendInitialEvents=true`) end
//!   the initial state with a BOOKMARK annotated `k8s.io/initial-events-end`.
//! * An object that stops matching the selectors is DELETED for the watcher, one that starts
//!   matching is ADDED.
//! * With `allowWatchBookmarks`, a BOOKMARK carries the cache revision once every event up to
//!   it was sent, so quiet collections advance too.
//! * Encodings: JSON (one document per line), YAML (one document per event), Table (for
//!   `kubectl get -w`), Kubernetes protobuf (length-delimited `WatchEvent`s) and CBOR (a CBOR
//!   sequence of `WatchEvent`s, `application/cbor-seq`).
//! * A watcher is its response body: the connection's task polls it, and it polls the cache's
//!   broadcast, or its own queue when its field selector pins its type's indexed field
//!   (`spec.nodeName=…`: only the batches that hold that node's pods wake it, see
//!   `store::dispatch`). Frames go out as soon as their batch of revisions is published, every
//!   batch already waiting in the same chunk. An object's encoding is computed once and shared by
//!   every watcher, and a batch's JSON or CBOR frames once per key prefix, sent as they are by every
//!   watcher of that prefix without selectors (no copy per watcher). A watcher that falls
//!   more than the buffer behind is closed cleanly and its client resumes from its last
//!   resourceVersion.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Value};
use tokio::sync::broadcast;

use crate::endpoints::negotiation::Format;
use crate::endpoints::table::{self, IncludeObject};
use crate::machinery::cbor;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::go_json;
use crate::machinery::meta::partial_object_metadata;
use crate::machinery::protobuf;
use crate::machinery::query::Query;
use crate::machinery::selector::{FieldSelector, LabelSelector};
use crate::registry::options::selectors;
use crate::registry::reply::served_cached;
use crate::registry::versions;
use crate::registry::ResourceRequest;
use crate::scheme::ResourceType;
use crate::store::cacher::{
    CacheEvent, CachedObject, Change, Published, SharedBatch, SharedEncodings, Unavailable,
};
use crate::store::delegator::{corrupt_objects, sync_most_recent, WAIT_FOR_REVISION};
use crate::store::dispatch::Live;
use crate::store::keys;
use crate::store::plans::{watch_plan, WatchPlan, WatchStartAt};
use crate::store::Store;

/// Watch duration when the client gives no `timeoutSeconds` (kube-apiserver's default range
/// is 30–60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// A watcher's frames are written in chunks of about this many bytes at most.
const CHUNK_BYTES: usize = 256 * 1024;
/// How often a watcher that asked for bookmarks gets one if its revision advanced.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// Which objects a watcher receives.
struct Filter {
    prefix: String,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &CachedObject) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// What (if anything) a change is for this watcher.
    fn event<'a>(&self, e: &'a CacheEvent, rt: &ResourceType) -> Option<Sent<'a>> {
        if !e.key.starts_with(&self.prefix) {
            return None;
        }
        let was = e.prev.as_ref().is_some_and(|p| self.matches(p));
        let obj = match &e.change {
            Change::Deleted(obj) => return was.then_some(Sent::Object("DELETED", obj)),
            Change::Put(obj) => obj,
            // Nobody can tell whether it matches: the watch ends with the storage error, and
            // the client's re-list reports the corrupt object until it is deleted.
            Change::Corrupt(why) => {
                let status = corrupt_objects(rt, [(e.key.clone(), why)]).body();
                return Some(Sent::Fatal(status));
            }
        };
        match (was, self.matches(obj)) {
            (true, true) => Some(Sent::Object("MODIFIED", obj)),
            (false, true) => Some(Sent::Object("ADDED", obj)),
            (true, false) => Some(Sent::Object("DELETED", obj)),
            (false, false) => None,
        }
    }
}

/// What a watcher is sent for one change.
enum Sent<'a> {
    /// An event of this type carrying the object.
    Object(&'static str, &'a Arc<CachedObject>),
    /// An ERROR event with this Status, after which the watch ends.
    Fatal(Value),
}

/// How a watcher's frames are encoded.
#[derive(Clone)]
enum Encoding {
    Json,
    Yaml,
    /// Length-delimited `WatchEvent` messages.
    Protobuf,
    /// A CBOR sequence of `WatchEvent`s.
    Cbor,
    /// `kubectl get -w`: each object as a one-row Table.
    Table {
        rt: Box<ResourceType>,
        version: &'static str,
        include: IncludeObject,
    },
    /// `as=PartialObjectMetadata`: each object's metadata only, in that `meta.k8s.io` version,
    /// framed in the plain encoding the client asked for (JSON, YAML, protobuf or CBOR).
    Metadata(&'static str, Box<Encoding>),
}

impl Encoding {
    fn content_type(&self) -> &'static str {
        match self {
            Encoding::Yaml => "application/yaml",
            Encoding::Protobuf => protobuf::WATCH_MEDIA_TYPE,
            Encoding::Cbor => cbor::SEQ_MEDIA_TYPE,
            Encoding::Metadata(_, framed) => framed.content_type(),
            Encoding::Json | Encoding::Table { .. } => "application/json",
        }
    }

    /// The audience a watcher of `prefix` in this encoding shares batches with (the JSON ones
    /// and the CBOR ones of one key prefix).
    fn audience(&self, prefix: &str) -> String {
        match self {
            Encoding::Cbor => format!("cbor {prefix}"),
            _ => prefix.to_string(),
        }
    }

    /// Appends one event frame to `out`; the object's JSON/YAML bytes are the shared, cached
    /// encoding.
    fn write_frame(&self, kind: &str, obj: &CachedObject, out: &mut BytesMut) {
        let frame = match self {
            Encoding::Json => {
                // Room for the whole frame in one step: the object plus a few dozen bytes.
                out.reserve(obj.item_json().len() + obj.type_fields().len() + 48);
                out.put_slice(b"{\"type\":\"");
                out.put_slice(kind.as_bytes());
                out.put_slice(b"\",\"object\":");
                obj.write_json(out);
                out.put_slice(b"}\n");
                return;
            }
            Encoding::Yaml => yaml_frame(kind, obj.yaml()),
            Encoding::Cbor => cbor::watch_event(kind, obj.cbor()).into(),
            Encoding::Protobuf => match obj.protobuf() {
                Some(raw) => protobuf::watch_frame(kind, raw).into(),
                None => self.value_frame("ERROR", &unencodable(&obj.value())),
            },
            Encoding::Table { rt, version, include } => {
                let t = table::table(
                    rt,
                    std::slice::from_ref(&obj.value()),
                    &obj.rv.to_string(),
                    version,
                    *include,
                );
                self.value_frame(kind, &t)
            }
            Encoding::Metadata(..) => self.value_frame(kind, &obj.value()),
        };
        out.extend_from_slice(&frame);
    }

    /// A frame for an object that is not cached (bookmarks and errors).
    fn value_frame(&self, kind: &str, obj: &Value) -> Bytes {
        match self {
            Encoding::Yaml => yaml_frame(kind, &Bytes::from(yaml_serde::to_string(obj).unwrap_or_default())),
            Encoding::Protobuf => match protobuf::encode_object(obj) {
                Ok(raw) => protobuf::watch_frame(kind, &raw).into(),
                Err(_) => Bytes::new(),
            },
            Encoding::Cbor => cbor::watch_event(kind, &cbor::encode(obj)).into(),
            Encoding::Metadata(version, framed) => {
                framed.value_frame(kind, &partial_object_metadata(obj.clone(), version))
            }
            Encoding::Json | Encoding::Table { .. } => json_frame(kind, obj),
        }
    }
}

/// `metav1.WatchEvent` as kube-apiserver writes it: `type` before `object` (whose own fields
/// are in kube's order), one JSON line per event.
#[derive(serde::Serialize)]
struct WatchEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: go_json::Ordered<'a>,
}

/// A JSON watch frame for an object that is not cached.
fn json_frame(kind: &str, obj: &Value) -> Bytes {
    let event = WatchEvent {
        kind,
        object: go_json::Ordered(obj, go_json::shape_of_object(obj)),
    };
    let mut b = go_json::encode(&event, false).unwrap_or_default();
    b.push(b'\n');
    b.into()
}

/// A YAML watch frame: one document per event.
fn yaml_frame(kind: &str, object_yaml: &Bytes) -> Bytes {
    let mut b = BytesMut::with_capacity(object_yaml.len() * 2 + 32);
    b.put_slice(b"---\ntype: ");
    b.put_slice(kind.as_bytes());
    b.put_slice(b"\nobject:\n");
    for line in object_yaml.split(|c| *c == b'\n').filter(|l| !l.is_empty()) {
        b.put_slice(b"  ");
        b.put_slice(line);
        b.put_u8(b'\n');
    }
    b.freeze()
}

/// The Status an ERROR event carries for a stored object that has no protobuf form.
fn unencodable(obj: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("object {:?} cannot be encoded as protobuf", obj["metadata"]["name"]),
        "reason": "InternalError", "code": 500,
    })
}

fn bookmark(rt: &ResourceType, rev: i64, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": rt.kind, "apiVersion": rt.group_version(), "metadata": meta})
}

fn expired_status(requested: i64, compacted: i64) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {requested} ({compacted})"),
        "reason": "Expired", "code": 410,
    })
}

/// What a watcher sends before its live events: objects (shared with the cache, encoded as
/// they are sent, so a large initial state costs no extra memory per watcher), then frames.
struct Start {
    objects: Vec<(&'static str, Arc<CachedObject>)>,
    trailer: Option<Bytes>,
    revision: i64,
    live: Option<Live>,
}

async fn start(
    store: &Store,
    plan: &WatchPlan,
    filter: &Filter,
    enc: &Encoding,
    rt: &ResourceType,
) -> ApiResult<Start> {
    let cache = store.cache();
    let reach = |rev: i64| async move {
        cache
            .wait_for(rev, WAIT_FOR_REVISION)
            .await
            .map_err(|_| ApiError::too_large_resource_version(rev, cache.revision()))
    };
    match plan.start {
        WatchStartAt::MostRecent => {
            sync_most_recent(cache).await?;
        }
        WatchStartAt::NotOlderThan(rev) => reach(rev).await?,
        WatchStartAt::After(rev) => reach(rev).await?,
        WatchStartAt::Any => {}
    }
    if plan.initial_events {
        let (snap, live) = cache.list_and_watch_selected(&filter.prefix, &filter.fields);
        if !snap.corrupt.is_empty() {
            return Err(corrupt_objects(rt, snap.corrupt));
        }
        let objects = snap
            .objects
            .into_iter()
            .filter(|(_, o)| filter.matches(o))
            .map(|(_, o)| ("ADDED", o))
            .collect();
        let trailer = plan
            .initial_events_end
            .then(|| enc.value_frame("BOOKMARK", &bookmark(rt, snap.revision, true)));
        return Ok(Start {
            objects,
            trailer,
            revision: snap.revision,
            live: Some(live),
        });
    }
    let from = match plan.start {
        WatchStartAt::After(rev) => rev,
        _ => cache.revision(),
    };
    match cache.watch_from(from, &filter.prefix, &filter.fields).await {
        Ok(w) => {
            let mut objects = Vec::new();
            for sent in w.backlog.iter().filter_map(|e| filter.event(e, rt)) {
                match sent {
                    Sent::Object(kind, o) => objects.push((kind, o.clone())),
                    Sent::Fatal(status) => {
                        return Ok(Start {
                            objects,
                            trailer: Some(enc.value_frame("ERROR", &status)),
                            revision: w.revision,
                            live: None,
                        })
                    }
                }
            }
            Ok(Start {
                objects,
                trailer: None,
                revision: w.revision,
                live: Some(w.live),
            })
        }
        Err(Unavailable::Compacted { compacted }) => Ok(Start {
            objects: Vec::new(),
            trailer: Some(enc.value_frame("ERROR", &expired_status(from, compacted))),
            revision: from,
            live: None,
        }),
        Err(Unavailable::TooLarge { current }) => Err(ApiError::too_large_resource_version(from, current)),
    }
}

/// Serves a watch on a collection.
/// The frames are in `format`, whose bytes are in `wire` (the plain encoding of a
/// PartialObjectMetadata view).
pub async fn serve(
    store: &Store,
    req: &ResourceRequest,
    q: &Query,
    format: Format,
    wire: Format,
) -> ApiResult<Response> {
    let plan = watch_plan(q)?;
    let (labels, fields) = selectors(&req.rt, q)?;
    let filter = Filter {
        prefix: match &req.namespace {
            Some(ns) => format!("{}{ns}/", keys::of_type(&req.rt)),
            None => keys::of_type(&req.rt),
        },
        labels,
        fields,
    };
    let enc = match format {
        Format::Yaml => Encoding::Yaml,
        Format::Table(version) => Encoding::Table {
            rt: Box::new(req.rt.clone()),
            version,
            include: IncludeObject::parse(q.get("includeObject").map(String::as_str))?,
        },
        // Types without a protobuf message answer JSON, as their non-watch reads do.
        Format::Protobuf if protobuf::message_for_kind(&req.rt.group_version(), &req.rt.kind).is_some() => {
            Encoding::Protobuf
        }
        Format::Metadata(version) => Encoding::Metadata(
            version,
            Box::new(match wire {
                Format::Yaml => Encoding::Yaml,
                Format::Protobuf => Encoding::Protobuf,
                Format::Cbor => Encoding::Cbor,
                _ => Encoding::Json,
            }),
        ),
        Format::Cbor => Encoding::Cbor,
        Format::Json | Format::Protobuf | Format::AggregatedDiscovery(_) => Encoding::Json,
    };
    let begin = start(store, &plan, &filter, &enc, &req.rt).await?;
    let ctype = enc.content_type();
    let watcher = Watcher::new(begin, filter, enc, &plan, req.rt.clone(), store);
    // The body is the watcher itself, polled by the connection's task: no task or queue of
    // its own between the cache's broadcast and the socket.
    let frames = futures::stream::unfold(watcher, |mut w| async move {
        let chunk = w.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), w))
    });
    Ok((
        [
            (header::CONTENT_TYPE, ctype),
            (header::CACHE_CONTROL, "no-cache, private"),
        ],
        Body::from_stream(frames),
    )
        .into_response())
}

/// Counts a watcher in `apiserver_registered_watchers` for as long as it lives.
struct Registered(metrics::Gauge);

impl Registered {
    fn new(rt: &ResourceType) -> Registered {
        let gauge = metrics::gauge!("apiserver_registered_watchers", &watch_labels(rt));
        gauge.increment(1.0);
        Registered(gauge)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// kube-apiserver's labels of `apiserver_registered_watchers`: `group`, `version`, `kind`.
fn watch_labels(rt: &ResourceType) -> [(&'static str, String); 3] {
    [
        ("group", rt.group.to_string()),
        ("version", rt.version.to_string()),
        ("kind", rt.kind.to_string()),
    ]
}

/// kube-apiserver's labels (since 1.34) of `apiserver_watch_events_total` and
/// `apiserver_watch_events_sizes`: `group`, `version`, `resource`.
fn event_labels(rt: &ResourceType) -> [(&'static str, String); 3] {
    [
        ("group", rt.group.to_string()),
        ("version", rt.version.to_string()),
        ("resource", rt.plural.to_string()),
    ]
}

/// A watcher's output waiting to be written, in order: frames it encoded itself (appended to
/// `open`) and encodings shared with other watchers (kept whole, never copied).
#[derive(Default)]
struct Output {
    ready: VecDeque<Bytes>,
    open: BytesMut,
    /// Bytes in `ready`.
    ready_len: usize,
}

impl Output {
    /// Where the watcher appends frames it encodes itself.
    fn open(&mut self) -> &mut BytesMut {
        &mut self.open
    }

    /// Queues a shared encoding after everything before it.
    fn push_shared(&mut self, bytes: Bytes) {
        self.seal();
        self.ready_len += bytes.len();
        self.ready.push_back(bytes);
    }

    fn seal(&mut self) {
        if !self.open.is_empty() {
            let sealed = self.open.split().freeze();
            self.ready_len += sealed.len();
            self.ready.push_back(sealed);
        }
    }

    /// The next piece of the body, if anything is waiting.
    fn pop(&mut self) -> Option<Bytes> {
        self.seal();
        let next = self.ready.pop_front()?;
        self.ready_len -= next.len();
        Some(next)
    }

    fn len(&self) -> usize {
        self.ready_len + self.open.len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One watcher's state: it produces the response body piece by piece until its timeout, a
/// reset, a fatal event, or its falling behind (all clean closes); its client leaving drops it.
struct Watcher {
    initial: std::vec::IntoIter<(&'static str, Arc<CachedObject>)>,
    trailer: Option<Bytes>,
    live: Option<Live>,
    filter: Filter,
    enc: Encoding,
    rt: ResourceType,
    /// The type fields a custom resource is served with, when they differ from its stored ones.
    served: Option<String>,
    /// The store, when the type's objects are converted by its conversion webhook (each event
    /// is converted before it is sent).
    converting: Option<Store>,
    /// Every watcher of this key prefix that shares this one's encoding sends the same bytes
    /// for a batch: JSON, no selectors, the stored type fields.
    shares_frames: bool,
    bookmarks: bool,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    ticker: tokio::time::Interval,
    /// Events at or below this revision were part of the start.
    start: i64,
    /// Every event up to here was sent (a bookmark may say so).
    seen: i64,
    /// The last revision a bookmark or event carried.
    told: i64,
    /// The watch ends once `out` is written.
    ending: bool,
    out: Output,
    sent_total: metrics::Counter,
    /// `apiserver_watch_events_sizes`: each event's frame, as it is encoded.
    event_sizes: metrics::Histogram,
    /// Events written since the counter was last bumped.
    unsent_count: u64,
    _registered: Registered,
}

impl Watcher {
    fn new(
        begin: Start,
        filter: Filter,
        enc: Encoding,
        plan: &WatchPlan,
        rt: ResourceType,
        store: &Store,
    ) -> Watcher {
        let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let served = crate::scheme::conversion::served_type_fields(&rt);
        let shares_frames = matches!(enc, Encoding::Json | Encoding::Cbor)
            && served.is_none()
            && filter.labels.is_empty()
            && filter.fields.is_empty();
        Watcher {
            initial: begin.objects.into_iter(),
            trailer: begin.trailer,
            live: begin.live,
            filter,
            enc,
            served,
            converting: versions::by_webhook(&rt).then(|| store.clone()),
            shares_frames,
            bookmarks: plan.bookmarks,
            deadline: Box::pin(tokio::time::sleep(plan.timeout.unwrap_or(DEFAULT_TIMEOUT))),
            ticker,
            start: begin.revision,
            seen: begin.revision,
            told: begin.revision,
            ending: false,
            out: Output::default(),
            sent_total: metrics::counter!("apiserver_watch_events_total", &event_labels(&rt)),
            event_sizes: metrics::histogram!("apiserver_watch_events_sizes", &event_labels(&rt)),
            unsent_count: 0,
            _registered: Registered::new(&rt),
            rt,
        }
    }

    /// Appends one object event's frame.
    fn write(&self, kind: &str, obj: &Arc<CachedObject>, out: &mut BytesMut) {
        let before = out.len();
        match self.served.as_deref() {
            Some(fields) => self
                .enc
                .write_frame(kind, &served_cached(Some(fields), &self.rt, obj), out),
            None => self.enc.write_frame(kind, obj, out),
        }
        self.event_sizes.record((out.len() - before) as f64);
    }

    /// The next piece of the body; `None` ends it. Frames go out in pieces of up to about
    /// [`CHUNK_BYTES`]: one write per batch of revisions (and per backlog of waiting batches)
    /// instead of one per event, which is what lets a replica feed many watchers; every frame
    /// is still sent as soon as its batch is.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.out.is_empty() && !self.ending {
            let mut out = std::mem::take(&mut self.out);
            self.fill(&mut out).await;
            self.out = out;
            // One increment per fill: a shared counter bumped per event and watcher is a cache
            // line every core fights over.
            self.sent_total.increment(std::mem::take(&mut self.unsent_count));
        }
        self.out.pop()
    }

    /// Appends the next frames to `out`: the start's, then live events and bookmarks. Leaves
    /// `out` empty only when the watch ends.
    async fn fill(&mut self, out: &mut Output) {
        // The start's objects, then its trailer.
        let mut initial = std::mem::take(&mut self.initial);
        for (kind, o) in initial.by_ref() {
            let o = match self.converted(&o).await {
                Ok(o) => o,
                Err(status) => {
                    self.fail(&status, out);
                    return;
                }
            };
            self.write(kind, &o, out.open());
            self.unsent_count += 1;
            if out.len() >= CHUNK_BYTES {
                self.initial = initial;
                return;
            }
        }
        if let Some(trailer) = self.trailer.take() {
            out.open().extend_from_slice(&trailer);
        }
        if self.live.is_none() {
            self.ending = true;
        }
        if !out.is_empty() {
            return;
        }
        let Some(mut live) = self.live.take() else {
            return;
        };
        self.next_live(&mut live, out).await;
        if !self.ending {
            self.live = Some(live);
        }
    }

    /// Waits for live events (or a bookmark) and appends their frames; returns with nothing
    /// appended only when the watch ends.
    async fn next_live(&mut self, live: &mut Live, out: &mut Output) {
        loop {
            tokio::select! {
                _ = &mut self.deadline => {
                    self.ending = true;
                    return;
                }
                _ = self.ticker.tick(), if self.bookmarks => {
                    // A watcher sent only its own events has seen everything up to the cache's
                    // revision once it has taken what waits for it.
                    if let Some(now) = live.progress() {
                        match live.try_recv() {
                            Err(broadcast::error::TryRecvError::Empty) => self.seen = self.seen.max(now),
                            waiting => {
                                self.take_waiting(waiting.map_err(recv_error), live, out).await;
                                if !out.is_empty() || self.ending {
                                    return;
                                }
                                continue;
                            }
                        }
                    }
                    if self.seen > self.told {
                        out.open().extend_from_slice(&self.enc.value_frame("BOOKMARK", &bookmark(&self.rt, self.seen, false)));
                        self.told = self.seen;
                        return;
                    }
                }
                msg = live.recv() => {
                    self.take_waiting(msg, live, out).await;
                    if !out.is_empty() || self.ending {
                        return;
                    }
                }
            }
        }
    }

    /// Appends the frames of `msg` and, up to about [`CHUNK_BYTES`], of every batch already
    /// waiting after it (one at a time when events are converted).
    async fn take_waiting(
        &mut self,
        msg: Result<Arc<Published>, broadcast::error::RecvError>,
        live: &mut Live,
        out: &mut Output,
    ) {
        if self.converting.is_some() {
            return self.take_converted(msg, out).await;
        }
        let mut next = Some(msg);
        while let Some(msg) = next.take() {
            self.take(msg, out);
            if self.ending || out.len() >= CHUNK_BYTES {
                break;
            }
            next = match live.try_recv() {
                Err(broadcast::error::TryRecvError::Empty) => None,
                waiting => Some(waiting.map_err(recv_error)),
            };
        }
    }

    /// `obj` as this watcher sends it: converted by the type's conversion webhook when it has
    /// one (else as it is: [`Watcher::write`] serves the rest); the Status of a failed
    /// conversion.
    async fn converted(&self, obj: &Arc<CachedObject>) -> Result<Arc<CachedObject>, Value> {
        let Some(store) = &self.converting else {
            return Ok(obj.clone());
        };
        let mut one = [obj.clone()];
        versions::cached_to_served(store, &self.rt, &mut one, false)
            .await
            .map_err(|e| e.body())?;
        let [converted] = one;
        Ok(converted)
    }

    /// Ends the watch with an ERROR event carrying `status`.
    fn fail(&mut self, status: &Value, out: &mut Output) {
        out.open()
            .extend_from_slice(&self.enc.value_frame("ERROR", status));
        self.ending = true;
    }

    /// Appends the frames of one published batch for a watcher whose events are converted by
    /// the conversion webhook, one event after the other; a failed conversion ends the watch
    /// with its error.
    async fn take_converted(
        &mut self,
        msg: Result<Arc<Published>, broadcast::error::RecvError>,
        out: &mut Output,
    ) {
        let published = match msg {
            Ok(p) => p,
            Err(e) => return self.take(Err(e), out),
        };
        let Published::Changes { events, revision, .. } = &*published else {
            self.ending = true;
            return;
        };
        for e in events.iter().filter(|e| e.rev > self.start) {
            match self.filter.event(e, &self.rt) {
                Some(Sent::Object(kind, obj)) => match self.converted(obj).await {
                    Ok(converted) => {
                        self.write(kind, &converted, out.open());
                        self.unsent_count += 1;
                        self.told = e.rev;
                    }
                    Err(status) => return self.fail(&status, out),
                },
                Some(Sent::Fatal(status)) => return self.fail(&status, out),
                None => {}
            }
        }
        self.seen = self.seen.max(*revision);
    }

    /// Appends the frames one published batch holds for this watcher.
    fn take(&mut self, msg: Result<Arc<Published>, broadcast::error::RecvError>, out: &mut Output) {
        match msg {
            Ok(p) => match &*p {
                Published::Changes {
                    events,
                    revision,
                    shared,
                } => {
                    if !self.take_shared(events, shared, out) {
                        self.take_own(events, out.open());
                    }
                    self.seen = self.seen.max(*revision);
                }
                Published::Reset => self.ending = true,
            },
            // Fell further behind than the buffer: close; the client resumes from the last
            // resourceVersion it received.
            Err(broadcast::error::RecvError::Lagged(_)) => {
                metrics::counter!(
                    "apiserver_terminated_watchers_total",
                    "group" => self.rt.group.to_string(),
                    "resource" => self.rt.plural.to_string()
                )
                .increment(1);
                self.ending = true;
            }
            Err(broadcast::error::RecvError::Closed) => self.ending = true,
        }
    }

    /// Queues the batch's encoding shared by every watcher of this prefix, when this watcher
    /// sends exactly those bytes; false when it must encode the batch itself.
    fn take_shared(
        &mut self,
        events: &[Arc<CacheEvent>],
        shared: &SharedEncodings,
        out: &mut Output,
    ) -> bool {
        let after_start = events.first().is_none_or(|e| e.rev > self.start);
        if !self.shares_frames || !after_start {
            return false;
        }
        let Some(batch) = shared.get_or_build(&self.enc.audience(&self.filter.prefix), || {
            self.encode_shared(events)
        }) else {
            return false;
        };
        if let Some(last) = batch.last_rev {
            out.push_shared(batch.bytes);
            self.unsent_count += batch.events;
            self.told = last;
        }
        true
    }

    /// The batch as every sharing watcher of this prefix sends it; `None` when an event ends
    /// the watch (each watcher then encodes the batch itself).
    fn encode_shared(&self, events: &[Arc<CacheEvent>]) -> Option<SharedBatch> {
        let mut bytes = BytesMut::new();
        let encoded = self.encode(events, &mut bytes);
        if encoded.fatal.is_some() {
            return None;
        }
        Some(SharedBatch {
            bytes: bytes.freeze(),
            events: encoded.events,
            last_rev: encoded.last_rev,
        })
    }

    /// Encodes the batch's frames for this watcher alone.
    fn take_own(&mut self, events: &[Arc<CacheEvent>], out: &mut BytesMut) {
        let encoded = self.encode(events, out);
        self.unsent_count += encoded.events;
        if let Some(last) = encoded.last_rev {
            self.told = last;
        }
        if let Some(status) = encoded.fatal {
            out.extend_from_slice(&self.enc.value_frame("ERROR", &status));
            self.ending = true;
        }
    }

    /// Appends the frames of the batch's events after the start that this watcher receives,
    /// stopping at an event that ends the watch.
    fn encode(&self, events: &[Arc<CacheEvent>], out: &mut BytesMut) -> Encoded {
        let mut encoded = Encoded::default();
        for e in events.iter().filter(|e| e.rev > self.start) {
            match self.filter.event(e, &self.rt) {
                Some(Sent::Object(kind, obj)) => {
                    self.write(kind, obj, out);
                    encoded.events += 1;
                    encoded.last_rev = Some(e.rev);
                }
                Some(Sent::Fatal(status)) => {
                    encoded.fatal = Some(status);
                    break;
                }
                None => {}
            }
        }
        encoded
    }
}

/// What a failed `try_recv` (other than an empty queue) means for a watcher.
fn recv_error(e: broadcast::error::TryRecvError) -> broadcast::error::RecvError {
    match e {
        broadcast::error::TryRecvError::Lagged(n) => broadcast::error::RecvError::Lagged(n),
        broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed => {
            broadcast::error::RecvError::Closed
        }
    }
}

/// What [`Watcher::encode`] appended.
#[derive(Default)]
struct Encoded {
    events: u64,
    last_rev: Option<i64>,
    /// The Status of the event that ends the watch, which was not encoded.
    fatal: Option<Value>,
}
