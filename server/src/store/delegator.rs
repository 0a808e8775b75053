//! Serving get and list from the watch cache at the revision the request's options allow:
//! Most Recent (read index, then the cache once it caught up), Any (the cache now), Not older
//! than N (the cache once it reached N, or `504`), Exact N (the cache if it is at N, else the
//! store's MVCC history; `410` below the compacted revision), and paging of one snapshot.

use std::sync::Arc;
use std::time::Duration;

use kuberaft_proto as pb;
use kuberaft_raft::{NodeError, StorageError};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::scheme::ResourceType;
use crate::store::cacher::{CachedObject, Cut, Listed, WatchCache};
use crate::store::plans::{encode_continue, ListPlan, ReadAt};

/// How long a read waits for this replica to reach a requested resourceVersion.
pub const WAIT_FOR_REVISION: Duration = Duration::from_secs(3);
/// Keys read per MVCC round trip when a page is served from history.
const HISTORY_CHUNK: i64 = 500;
/// Corrupt objects a failed list names at most (kube-apiserver's limit).
const CORRUPT_CAUSES: usize = 100;

/// kube-apiserver's message for a list at a compacted revision.
pub const EXPIRED: &str = "The resourceVersion for the provided list is too old.";
/// kube-apiserver's message for a continue token whose revision was compacted.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// A page of a list.
pub struct Page {
    /// The matching objects, in key order.
    pub items: Vec<Arc<CachedObject>>,
    /// The revision the page was read at.
    pub revision: i64,
    /// The token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// How many objects follow the page (only without selectors).
    pub remaining: Option<i64>,
}

/// Waits until the cache has reached `rev` (bounded), or answers kube-apiserver's 504.
async fn reach(cache: &WatchCache, rev: i64) -> ApiResult<()> {
    cache
        .wait_for(rev, WAIT_FOR_REVISION)
        .await
        .map_err(|_| ApiError::too_large_resource_version(rev, cache.revision()))
}

/// Makes the cache at least as fresh as a linearizable read started now.
pub async fn sync_most_recent(cache: &WatchCache) -> ApiResult<i64> {
    let progress = cache.node().read_barrier().await?;
    reach(cache, progress.revision).await?;
    Ok(cache.revision())
}

/// Brings the cache to the freshness `at` asks for (Exact is handled by the caller).
pub async fn sync(cache: &WatchCache, at: ReadAt) -> ApiResult<()> {
    match at {
        ReadAt::MostRecent => sync_most_recent(cache).await.map(|_| ()),
        ReadAt::Any => Ok(()),
        ReadAt::NotOlderThan(rev) | ReadAt::Exact(rev) => reach(cache, rev).await,
    }
}

/// Reads one object per the get semantics; `None` when it does not exist, a 500 when it is
/// corrupt.
pub async fn get(cache: &WatchCache, key: &str, at: ReadAt) -> ApiResult<Option<Arc<CachedObject>>> {
    sync(cache, at).await?;
    cache.get(key).map_err(|why| ApiError::corrupt_object(key, &why))
}

/// kube-apiserver's answer to a read that met corrupt objects: a 500 `StorageReadError`
/// naming them (at most [`CORRUPT_CAUSES`]).
pub fn corrupt_objects<W: ToString>(
    rt: &ResourceType,
    corrupt: impl IntoIterator<Item = (String, W)>,
) -> ApiError {
    let named: Vec<(String, String)> = corrupt
        .into_iter()
        .take(CORRUPT_CAUSES)
        .map(|(key, why)| (key, why.to_string()))
        .collect();
    ApiError::store_read_error(&rt.group, &rt.plural, &named)
}

/// The page, unless its range holds corrupt objects.
fn readable(rt: &ResourceType, listed: Listed) -> ApiResult<Listed> {
    if listed.corrupt.is_empty() {
        return Ok(listed);
    }
    Err(corrupt_objects(rt, listed.corrupt))
}

/// Reads a page of the collection under `prefix`, keeping the objects `keep` accepts.
/// `selective` says whether `keep` can reject objects (then no remainingItemCount).
pub async fn list(
    cache: &WatchCache,
    rt: &ResourceType,
    prefix: &str,
    plan: &ListPlan,
    selective: bool,
    keep: &(dyn Fn(&CachedObject) -> bool + Sync),
) -> ApiResult<Page> {
    let after = plan.after.as_ref().map(|a| format!("{prefix}{a}"));
    if let ReadAt::Exact(rev) = plan.at {
        if rev < cache.compacted() {
            return Err(expired(plan, after.as_deref(), prefix));
        }
        reach(cache, rev).await?;
        let limit = plan.limit.unwrap_or(usize::MAX);
        if let Some(listed) = cache.list_page(prefix, after.as_deref(), Some(rev), limit, keep) {
            let listed = readable(rt, listed)?;
            return Ok(paginate(rt, listed.cut, rev, prefix, selective));
        }
        return from_history(cache, rt, prefix, after, rev, plan, selective, keep).await;
    }
    sync(cache, plan.at).await?;
    let limit = plan.limit.unwrap_or(usize::MAX);
    let listed = cache
        .list_page(prefix, after.as_deref(), None, limit, keep)
        .ok_or_else(|| ApiError::internal("the watch cache moved during a list"))?;
    let listed = readable(rt, listed)?;
    Ok(paginate(rt, listed.cut, listed.revision, prefix, selective))
}

fn expired(plan: &ListPlan, after: Option<&str>, prefix: &str) -> ApiError {
    if !plan.continuing {
        return ApiError::expired(EXPIRED);
    }
    let mut e = ApiError::expired(CONTINUE_EXPIRED);
    let rel = after.and_then(|a| a.strip_prefix(prefix)).unwrap_or("");
    e.continue_token = Some(encode_continue(-1, rel));
    e
}

/// The page the cache cut, with its continue token, counting the objects read and returned in
/// kube-apiserver's `apiserver_cache_list_*` series (no index: a list reads its key prefix).
fn paginate(rt: &ResourceType, cut: Cut, revision: i64, prefix: &str, selective: bool) -> Page {
    record_cache_list(rt, cut.fetched, cut.items.len());
    match cut.more {
        Some((last_key, remaining)) => Page {
            items: cut.items,
            revision,
            continue_token: last_key
                .as_deref()
                .map(|k: &str| encode_continue(revision, k.strip_prefix(prefix).unwrap_or(k))),
            remaining: (!selective).then_some(remaining as i64),
        },
        None => Page {
            items: cut.items,
            revision,
            continue_token: None,
            remaining: None,
        },
    }
}

/// kube-apiserver's series for a LIST served from the watch cache, by group and resource:
/// requests, objects read, objects returned.
fn record_cache_list(rt: &ResourceType, fetched: usize, returned: usize) {
    let group = rt.group.to_string();
    let resource = rt.plural.to_string();
    let indexed = [
        ("group", group.clone()),
        ("index", String::new()),
        ("resource", resource.clone()),
    ];
    metrics::counter!("apiserver_cache_list_total", &indexed).increment(1);
    metrics::counter!("apiserver_cache_list_fetched_objects_total", &indexed).increment(fetched as u64);
    metrics::counter!(
        "apiserver_cache_list_returned_objects_total",
        &[("group", group), ("resource", resource)]
    )
    .increment(returned as u64);
}

/// Serves a page at an older revision from the store's MVCC history.
#[allow(clippy::too_many_arguments)]
async fn from_history(
    cache: &WatchCache,
    rt: &ResourceType,
    prefix: &str,
    after: Option<String>,
    rev: i64,
    plan: &ListPlan,
    selective: bool,
    keep: &(dyn Fn(&CachedObject) -> bool + Sync),
) -> ApiResult<Page> {
    let limit = plan.limit.unwrap_or(usize::MAX);
    let mut items: Vec<Arc<CachedObject>> = Vec::new();
    let mut last_key: Option<String> = None;
    let mut cursor = after.clone().map(String::into_bytes);
    let mut corrupt: Vec<(String, String)> = Vec::new();
    loop {
        let req = pb::RangeRequest {
            key: prefix.as_bytes().to_vec(),
            prefix: true,
            revision: rev,
            limit: HISTORY_CHUNK,
            start_after: cursor.clone().unwrap_or_default(),
            ..Default::default()
        };
        let resp = match cache.node().range(req).await {
            Ok(r) => r,
            Err(NodeError::Storage(StorageError::Compacted { .. })) => {
                return Err(expired(plan, after.as_deref(), prefix))
            }
            Err(e) => return Err(ApiError::internal(e.to_string())),
        };
        let fetched = resp.kvs.len() as i64;
        for (i, kv) in resp.kvs.into_iter().enumerate() {
            let key = String::from_utf8_lossy(&kv.key).into_owned();
            let obj = match cache.decode(&key, &kv.value, kv.mod_revision) {
                Ok(obj) if keep(&obj) => obj,
                Ok(_) => {
                    cursor = Some(kv.key);
                    continue;
                }
                Err(why) => {
                    corrupt.push((key, why.to_string()));
                    cursor = Some(kv.key);
                    continue;
                }
            };
            if !corrupt.is_empty() {
                cursor = Some(kv.key);
                continue;
            }
            if items.len() == limit {
                // Everything from this key on in the range follows the page.
                let remaining = resp.count - i as i64;
                let rel = last_key.as_deref().unwrap_or("");
                return Ok(Page {
                    items,
                    revision: rev,
                    continue_token: Some(encode_continue(rev, rel.strip_prefix(prefix).unwrap_or(rel))),
                    remaining: (!selective).then_some(remaining),
                });
            }
            items.push(obj);
            last_key = Some(key);
            cursor = Some(kv.key);
        }
        if !resp.more || fetched == 0 {
            if !corrupt.is_empty() {
                return Err(corrupt_objects(rt, corrupt));
            }
            return Ok(Page {
                items,
                revision: rev,
                continue_token: None,
                remaining: None,
            });
        }
    }
}
