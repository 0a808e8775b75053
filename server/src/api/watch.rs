//! `?watch=1`: a stream of ADDED / MODIFIED / DELETED events, fed by the replica's apply stream.
//!
//! The subscription starts before the initial state is read, and every event at or below the
//! starting revision is skipped, so nothing is lost or duplicated between the two. A watch from
//! resourceVersion N replays the store's event history after N; below the compacted revision
//! the stream carries one ERROR event with a 410 `Expired` Status, as kube-apiserver sends.
//! The watch cache issue replaces this with per-replica caching, bookmarks and streaming lists.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use kuberaft_raft::ApplyEvent;
use kuberaft_storage::mvcc::Change;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::handlers::Query;
use super::request::{Format, ResourceRequest};
use super::selector::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::store::Store;

/// Events buffered per watcher before a slow client slows the sender down.
const WATCH_BUFFER: usize = 1024;
/// Default watch duration when the client gives no `timeoutSeconds`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Filter {
    prefix: String,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

fn object(kv: &kuberaft_proto::KeyValue, rv: i64) -> Option<Value> {
    let mut obj: Value = serde_json::from_slice(&kv.value).ok()?;
    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
    Some(obj)
}

/// The watch event (if any) one store change produces for this watcher.
fn event_for(filter: &Filter, change: &Change) -> Option<Value> {
    if !change.kv.key.starts_with(filter.prefix.as_bytes()) {
        return None;
    }
    let rev = change.kv.mod_revision;
    let old = change
        .prev
        .as_ref()
        .and_then(|p| object(p, rev))
        .filter(|o| filter.matches(o));
    if change.is_delete() {
        return old.map(|o| json!({"type": "DELETED", "object": o}));
    }
    let new = object(&change.kv, rev)?;
    match (old.is_some(), filter.matches(&new)) {
        (true, true) => Some(json!({"type": "MODIFIED", "object": new})),
        (false, true) => Some(json!({"type": "ADDED", "object": new})),
        (true, false) => Some(json!({"type": "DELETED", "object": new})),
        (false, false) => None,
    }
}

fn line(v: &Value) -> bytes::Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b.into()
}

fn expired(requested: i64, compacted: i64) -> Value {
    json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {requested} ({compacted})"),
        "reason": "Expired", "code": 410,
    }})
}

/// Serves a watch on a collection.
pub async fn serve(store: &Store, req: &ResourceRequest, q: &Query, _format: Format) -> ApiResult<Response> {
    let filter = Filter {
        prefix: match &req.namespace {
            Some(ns) => format!("{}{ns}/", req.rt.key_prefix()),
            None => req.rt.key_prefix(),
        },
        labels: LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(q.get("fieldSelector").map_or("", String::as_str), req.rt.kind)?,
    };
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        None => DEFAULT_TIMEOUT,
    };
    let mut rx = store.node().subscribe();
    let mut initial = Vec::new();
    let start = match q.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => {
            let (items, rev) = store
                .list(&filter.prefix, q.get("resourceVersion").is_none_or(|r| r != "0"))
                .await?;
            for s in items.into_iter().filter(|s| filter.matches(&s.obj)) {
                initial.push(json!({"type": "ADDED", "object": s.obj}));
            }
            rev
        }
        Some(rv) => {
            let from: i64 = rv
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?;
            let node = store.node().clone();
            let current = node.progress().borrow().revision;
            let mvcc = node.mvcc().clone();
            match tokio::task::spawn_blocking(move || mvcc.changes(from, current))
                .await
                .map_err(|e| ApiError::internal(e.to_string()))?
            {
                Ok(revisions) => {
                    for (_, changes) in &revisions {
                        initial.extend(changes.iter().filter_map(|c| event_for(&filter, c)));
                    }
                    current.max(from)
                }
                Err(kuberaft_storage::StorageError::Compacted { requested, compacted }) => {
                    initial.push(expired(requested, compacted));
                    i64::MAX
                }
                Err(e) => return Err(ApiError::internal(e.to_string())),
            }
        }
    };
    let (tx, out) = mpsc::channel::<Result<bytes::Bytes, Infallible>>(WATCH_BUFFER);
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        for e in &initial {
            if tx.send(Ok(line(e))).await.is_err() {
                return;
            }
        }
        if start == i64::MAX {
            return;
        }
        loop {
            let event = tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                e = rx.recv() => e,
            };
            match event {
                Ok(ev) => match &*ev {
                    ApplyEvent::Applied(applied) => {
                        for (rev, changes) in &applied.revisions {
                            if *rev <= start {
                                continue;
                            }
                            for e in changes.iter().filter_map(|c| event_for(&filter, c)) {
                                if tx.send(Ok(line(&e))).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    // The state was replaced wholesale: the client must re-list.
                    ApplyEvent::SnapshotInstalled { .. } => return,
                },
                // Fell behind the apply stream: end cleanly; the client resumes from its
                // last resourceVersion.
                Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => {
                    return
                }
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(out));
    Ok((
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response())
}
