//! The generic object store: Kubernetes objects as JSON in the replicated MVCC store.
//!
//! Objects are stored without `metadata.resourceVersion`; on every read it is set to the key's
//! mod revision, so an object's resourceVersion is exactly the store revision that last changed
//! it, and a list's resourceVersion is the revision it was read at. Writes are compare-and-swap
//! transactions on the mod revision.

pub mod cacher;
pub mod delegator;
pub mod dispatch;
pub mod encryption;
pub mod keys;
pub mod plans;
pub mod services;
pub mod stored_json;

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use kuberaft_proto as pb;
use kuberaft_raft::{NodeError, RaftNode, StorageError};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::store::cacher::WatchCache;
use crate::store::encryption::Encryption;

/// An object read from the store, with its resourceVersion set.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The object.
    pub obj: Value,
    /// Its mod revision (= resourceVersion).
    pub rv: i64,
    /// It is stored in another form than a write would store it now (encrypted with a key
    /// that is no longer the first, or encrypted or not against the encryption config), so
    /// writing it back unchanged is not a no-op: that is how keys are rotated.
    pub stale: bool,
}

/// The outcome of a compare-and-swap write.
#[derive(Debug)]
pub enum Cas {
    /// The write happened at this revision.
    Done(i64),
    /// The compare failed; the key's current state (`None` when absent).
    Failed(Option<Stored>),
}

/// One more key a write stores in its transaction, only if the key's mod revision is still
/// the one it was read at: a ResourceQuota whose usage the written object is charged to.
#[derive(Debug, Clone)]
pub struct Guarded {
    /// The key.
    pub key: String,
    /// The mod revision it must still have.
    pub mod_revision: i64,
    /// What is stored there with the write.
    pub value: Value,
}

/// One more key a write changes in its transaction through a merge function of the state
/// machine (see `kuberaft_storage::merge`): a ResourceQuota charged what the written object
/// uses, computed from the quota as the log has it when the write is applied, so that
/// concurrent charges through any replicas never conflict.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The key.
    pub key: String,
    /// The name the merge function is registered under.
    pub merger: &'static str,
    /// What the function is given besides the key's current value.
    pub operand: Vec<u8>,
}

/// What a write stores alongside its object, and what keeps competing writes of this replica
/// from planning over the same keys until it is done.
#[derive(Default)]
pub struct Plan {
    /// The keys to store with the object, each only if it is unchanged since it was read.
    pub guarded: Vec<Guarded>,
    /// The keys the state machine changes with the object (a refusal fails the write).
    pub merged: Vec<Merged>,
    /// Held until the write carrying the plan is done: a lock that serializes this replica's
    /// plans over the same keys, so that they do not outdate one another. The write records
    /// in it the revision it stored, which the next holder's cache waits for before planning.
    pub hold: Option<tokio::sync::OwnedMutexGuard<i64>>,
}

/// What a write stores alongside its object, planned afresh for every attempt of the write:
/// when another write changed one of the guarded keys first, the plan is made again over the
/// fresh state, so that two concurrent writes can never both be charged against one state.
pub trait Alongside: Send + Sync {
    /// What to store with `obj`.
    fn plan<'a>(&'a self, store: &'a Store, obj: &'a Value) -> BoxFuture<'a, ApiResult<Plan>>;
}

/// Nothing is written alongside the object.
pub struct Alone;

impl Alongside for Alone {
    fn plan<'a>(&'a self, _store: &'a Store, _obj: &'a Value) -> BoxFuture<'a, ApiResult<Plan>> {
        Box::pin(async { Ok(Plan::default()) })
    }
}

/// How often a write whose alongside keys keep changing under it is planned again before the
/// client is told to retry.
const ALONGSIDE_ATTEMPTS: usize = 64;

/// Generic access to objects in the replicated store, and to this replica's watch cache
/// that serves the reads.
#[derive(Clone)]
pub struct Store {
    node: Arc<RaftNode>,
    cache: WatchCache,
    encryption: Arc<Encryption>,
}

/// Decodes the value stored under `key` into an object whose resourceVersion is `rv`,
/// decrypting it first if `encryption` covers the key. An error means the object is corrupt:
/// no provider decrypts it, or it is not a JSON object with `metadata` (kube-apiserver's
/// "object not decodable"); the message says why.
pub fn decode_value(encryption: &Encryption, key: &str, value: &[u8], rv: i64) -> Result<Value, String> {
    decode_plain(&open_value(encryption, key, value)?, rv)
}

/// The plain JSON stored under `key` (decrypted if it is encrypted).
pub fn open_value<'v>(encryption: &Encryption, key: &str, value: &'v [u8]) -> Result<Cow<'v, [u8]>, String> {
    encryption
        .open(key, value)
        .map_err(|e| format!("object not decodable: {e}"))
}

/// Decodes the plain stored JSON of an object, setting its resourceVersion to `rv`.
pub fn decode_plain(plain: &[u8], rv: i64) -> Result<Value, String> {
    let mut obj: Value = serde_json::from_slice(plain).map_err(|e| format!("object not decodable: {e}"))?;
    let meta = obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| "object not decodable: it is not an object with metadata".to_string())?;
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    Ok(obj)
}

/// An object as it is stored: its JSON without `metadata.resourceVersion` (written without
/// cloning the object to remove it).
struct AsStored<'a>(&'a Value);

impl Serialize for AsStored<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(top) = self.0 else {
            return self.0.serialize(s);
        };
        let mut map = s.serialize_map(Some(top.len()))?;
        for (k, v) in top {
            match (k.as_str(), v) {
                ("metadata", Value::Object(meta)) => map.serialize_entry(k, &WithoutResourceVersion(meta))?,
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

/// An object's metadata without its resourceVersion.
struct WithoutResourceVersion<'a>(&'a serde_json::Map<String, Value>);

impl Serialize for WithoutResourceVersion<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let members = self.0.iter().filter(|(k, _)| *k != "resourceVersion");
        let mut map = s.serialize_map(None)?;
        for (k, v) in members {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

fn put(key: &str, value: Vec<u8>) -> pb::Op {
    pb::Op {
        op: Some(pb::op::Op::Put(pb::PutOp {
            key: key.as_bytes().to_vec(),
            value,
        })),
    }
}

fn mod_rev_is(key: &str, rev: i64) -> pb::Compare {
    pb::Compare {
        key: key.as_bytes().to_vec(),
        target: Some(pb::compare::Target::ModRevision(rev)),
    }
}

/// A stored record as the replicated store returns it: key, value and revisions.
pub use kuberaft_proto::KeyValue;
/// What a replica applied: a batch of changes at consecutive revisions, or a snapshot install.
pub use kuberaft_raft::{Applied, ApplyEvent, Change};
/// A merge function the state machine applies (see [`Merged`]), and the registry of them.
pub use kuberaft_raft::{Merger, Mergers};

/// The outcome of [`Store::write_if`].
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// Every condition held; the writes are at this revision.
    Done(i64),
    /// A condition failed and nothing was written: the compared keys that exist, with their
    /// mod revisions.
    NotWritten(Vec<(String, i64)>),
}

/// Runs one store request and records it as kube-apiserver records its etcd requests
/// (`etcd_request_duration_seconds`, `etcd_requests_total`, `etcd_request_errors_total`), under
/// kuberaft's names, with kube's labels: the operation and the key's group and resource.
async fn recorded<T>(
    operation: &'static str,
    key: &str,
    request: impl Future<Output = ApiResult<T>>,
) -> ApiResult<T> {
    let start = Instant::now();
    let result = request.await;
    let (group, resource) = keys::type_of_key(key);
    let labels = [
        ("operation", operation.to_string()),
        ("group", group.to_string()),
        ("resource", resource.to_string()),
    ];
    metrics::histogram!("kuberaft_store_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    metrics::counter!("kuberaft_store_requests_total", &labels).increment(1);
    if result.is_err() {
        metrics::counter!("kuberaft_store_request_errors_total", &labels).increment(1);
    }
    result
}

impl Store {
    /// A store over `node`; starts the replica's watch cache, whose watchers may fall
    /// `watch_buffer` revision batches behind before they are closed.
    pub fn new(node: Arc<RaftNode>, watch_buffer: usize, encryption: Arc<Encryption>) -> Self {
        let cache = WatchCache::start(node.clone(), watch_buffer, encryption.clone());
        Store {
            node,
            cache,
            encryption,
        }
    }

    /// Decodes a record read from the store (decrypting it if the encryption covers it).
    fn decode(&self, kv: pb::KeyValue) -> ApiResult<Stored> {
        let key = String::from_utf8_lossy(&kv.key);
        let internal = key.starts_with(keys::INTERNAL_PREFIX);
        let obj = if internal {
            serde_json::from_slice(&kv.value).map_err(|e| format!("record not decodable: {e}"))
        } else {
            decode_value(&self.encryption, &key, &kv.value, kv.mod_revision)
        }
        .map_err(|e| ApiError::corrupt_object(&key, &e))?;
        Ok(Stored {
            obj,
            rv: kv.mod_revision,
            stale: !internal && self.encryption.stale(&key, &kv.value),
        })
    }

    /// Whether a record read as it is stored decodes into an object.
    pub fn decodable(&self, kv: &pb::KeyValue) -> bool {
        let key = String::from_utf8_lossy(&kv.key);
        decode_value(&self.encryption, &key, &kv.value, kv.mod_revision).is_ok()
    }

    /// The bytes stored for `obj` under `key`: its JSON without resourceVersion, encrypted
    /// if the encryption covers the key.
    fn encode(&self, key: &str, obj: &Value) -> ApiResult<Vec<u8>> {
        let plain = serde_json::to_vec(&AsStored(obj)).map_err(|e| ApiError::internal(e.to_string()))?;
        self.encryption
            .seal(key, plain)
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// Whether what is stored under `key` is encrypted (so the state machine cannot merge it).
    pub fn encrypts(&self, key: &str) -> bool {
        self.encryption.encrypts(key)
    }

    /// The replica's watch cache (get, list and watch are served from it).
    pub fn cache(&self) -> &WatchCache {
        &self.cache
    }

    /// The replica behind the store.
    pub fn node(&self) -> &Arc<RaftNode> {
        &self.node
    }

    async fn range(&self, req: pb::RangeRequest, consistent: bool) -> ApiResult<pb::RangeResponse> {
        if consistent {
            self.node.read_barrier().await?;
        }
        Ok(self.node.range(req).await?)
    }

    /// Reads one object (linearizable when `consistent`).
    pub async fn get(&self, key: &str, consistent: bool) -> ApiResult<Option<Stored>> {
        self.get_raw(key, consistent)
            .await?
            .map(|kv| self.decode(kv))
            .transpose()
    }

    /// Reads one key's stored value as it is, decodable or not (linearizable when
    /// `consistent`).
    pub async fn get_raw(&self, key: &str, consistent: bool) -> ApiResult<Option<pb::KeyValue>> {
        let request = pb::RangeRequest {
            key: key.as_bytes().to_vec(),
            ..Default::default()
        };
        let resp = recorded("get", key, self.range(request, consistent)).await?;
        Ok(resp.kvs.into_iter().next())
    }

    /// Reads every object under `prefix`; returns them with the revision they were read at.
    pub async fn list(&self, prefix: &str, consistent: bool) -> ApiResult<(Vec<Stored>, i64)> {
        let request = pb::RangeRequest {
            key: prefix.as_bytes().to_vec(),
            prefix: true,
            ..Default::default()
        };
        let resp = recorded("list", prefix, self.range(request, consistent)).await?;
        let items = resp
            .kvs
            .into_iter()
            .map(|kv| self.decode(kv))
            .collect::<ApiResult<Vec<_>>>()?;
        Ok((items, resp.revision))
    }

    async fn txn(&self, txn: pb::TxnRequest) -> ApiResult<pb::TxnResponse> {
        let result = self
            .node
            .write(pb::Command {
                command: Some(pb::command::Command::Txn(txn)),
            })
            .await?;
        match result.result {
            Some(pb::command_result::Result::Txn(t)) => Ok(t),
            Some(pb::command_result::Result::Rejected(m)) => Err(ApiError::bad_request(m)),
            other => Err(ApiError::internal(format!("unexpected result {other:?}"))),
        }
    }

    fn failed(&self, t: pb::TxnResponse) -> ApiResult<Cas> {
        Ok(Cas::Failed(
            t.compared
                .into_iter()
                .next()
                .map(|kv| self.decode(kv))
                .transpose()?,
        ))
    }

    /// Creates `obj` at `key` if the key is absent.
    pub async fn create(&self, key: &str, obj: &Value) -> ApiResult<Cas> {
        let txn = pb::TxnRequest {
            compares: vec![pb::Compare {
                key: key.as_bytes().to_vec(),
                target: Some(pb::compare::Target::Exists(false)),
            }],
            success: vec![put(key, self.encode(key, obj)?)],
            failure: vec![],
        };
        let t = recorded("create", key, self.txn(txn)).await?;
        if t.succeeded {
            Ok(Cas::Done(t.revision))
        } else {
            self.failed(t)
        }
    }

    /// Replaces the object at `key` if its mod revision is still `rev`.
    pub async fn update(&self, key: &str, obj: &Value, rev: i64) -> ApiResult<Cas> {
        let txn = pb::TxnRequest {
            compares: vec![mod_rev_is(key, rev)],
            success: vec![put(key, self.encode(key, obj)?)],
            failure: vec![],
        };
        let t = recorded("update", key, self.txn(txn)).await?;
        if t.succeeded {
            Ok(Cas::Done(t.revision))
        } else {
            self.failed(t)
        }
    }

    async fn delete_txn(&self, key: &str, rev: i64) -> ApiResult<pb::TxnResponse> {
        let txn = pb::TxnRequest {
            compares: vec![mod_rev_is(key, rev)],
            success: vec![pb::Op {
                op: Some(pb::op::Op::Delete(pb::DeleteOp {
                    key: key.as_bytes().to_vec(),
                })),
            }],
            failure: vec![],
        };
        recorded("delete", key, self.txn(txn)).await
    }

    /// Deletes whatever is stored at `key` if its mod revision is still `rev`, without
    /// decoding it (the removal of a corrupt object); whether it did.
    pub async fn delete_raw(&self, key: &str, rev: i64) -> ApiResult<bool> {
        Ok(self.delete_txn(key, rev).await?.succeeded)
    }

    /// Writes every `(key, value)` of `puts` in one transaction if every `(key, expected mod
    /// revision)` of `conditions` holds (`None`: the key is absent). Values are stored as given
    /// (an object's resourceVersion is dropped, as for every write).
    pub async fn write_if(
        &self,
        conditions: &[(&str, Option<i64>)],
        puts: &[(&str, &Value)],
    ) -> ApiResult<Written> {
        self.write_merging(conditions, puts, &[]).await
    }

    /// [`Store::write_if`], with `merged` keys changed by the state machine in the same
    /// transaction; a merge function's refusal is [`Written::NotWritten`] as a failed
    /// condition is.
    async fn write_merging(
        &self,
        conditions: &[(&str, Option<i64>)],
        puts: &[(&str, &Value)],
        merged: &[Merged],
    ) -> ApiResult<Written> {
        let compares = conditions
            .iter()
            .map(|(key, expect)| pb::Compare {
                key: key.as_bytes().to_vec(),
                target: Some(match expect {
                    None => pb::compare::Target::Exists(false),
                    Some(rev) => pb::compare::Target::ModRevision(*rev),
                }),
            })
            .collect();
        let mut success = puts
            .iter()
            .map(|(key, value)| Ok(put(key, self.encode(key, value)?)))
            .collect::<ApiResult<Vec<_>>>()?;
        success.extend(merged.iter().map(|m| pb::Op {
            op: Some(pb::op::Op::Merge(pb::MergeOp {
                key: m.key.as_bytes().to_vec(),
                merger: m.merger.to_string(),
                operand: m.operand.clone(),
            })),
        }));
        let t = self
            .txn(pb::TxnRequest {
                compares,
                success,
                failure: vec![],
            })
            .await?;
        if !t.refused.is_empty() {
            tracing::debug!(refused = %t.refused, "a merge of a conditional write refused");
        }
        Ok(if t.succeeded {
            Written::Done(t.revision)
        } else {
            Written::NotWritten(
                t.compared
                    .into_iter()
                    .map(|kv| (String::from_utf8_lossy(&kv.key).into_owned(), kv.mod_revision))
                    .collect(),
            )
        })
    }

    /// Writes `obj` at `key` (a create when `rev` is `None`, else a replace of the object whose
    /// mod revision is still `rev`) with what `alongside` plans, in one transaction. A plan a
    /// concurrent write outdated is made again once this replica's cache has caught up; a
    /// changed object is [`Cas::Failed`], as for [`Store::create`] and [`Store::update`].
    pub async fn write_with(
        &self,
        key: &str,
        obj: &Value,
        rev: Option<i64>,
        alongside: &dyn Alongside,
    ) -> ApiResult<Cas> {
        for attempt in 0..ALONGSIDE_ATTEMPTS {
            let mut plan = alongside.plan(self, obj).await?;
            if plan.guarded.is_empty() && plan.merged.is_empty() {
                return match rev {
                    None => self.create(key, obj).await,
                    Some(rev) => self.update(key, obj, rev).await,
                };
            }
            let mut conditions = vec![(key, rev)];
            let mut puts = vec![(key, obj)];
            for g in &plan.guarded {
                conditions.push((&g.key, Some(g.mod_revision)));
                puts.push((&g.key, &g.value));
            }
            match self.write_merging(&conditions, &puts, &plan.merged).await? {
                Written::Done(revision) => {
                    if let Some(hold) = plan.hold.as_mut() {
                        **hold = revision;
                    }
                    return Ok(Cas::Done(revision));
                }
                Written::NotWritten(compared) => {
                    if object_changed(&compared, key, rev) {
                        return Ok(Cas::Failed(self.get(key, true).await?));
                    }
                    drop(plan);
                    self.replan_after(attempt).await?;
                }
            }
        }
        Err(ApiError::conflict(
            keys::type_of_key(key).0,
            keys::type_of_key(key).1,
            key.rsplit('/').next().unwrap_or(key),
            "too many concurrent writes to what this write is charged to; try again",
        ))
    }

    /// Before an alongside plan is made again (its attempt `attempt` lost to another write):
    /// a random pause that grows with the attempts, so that replicas competing for the same
    /// keys stop colliding in lockstep, then a read barrier, so that the new plan sees the
    /// write that won.
    pub async fn replan_after(&self, attempt: usize) -> ApiResult<()> {
        let most = u64::try_from(attempt.min(8)).unwrap_or(8) + 1;
        tokio::time::sleep(std::time::Duration::from_micros(rand::random_range(
            0..most * 1000,
        )))
        .await;
        delegator::sync_most_recent(&self.cache).await.map(drop)
    }

    /// Every record under `prefix` at one revision, as stored, after a read barrier (so it is
    /// at least as fresh as anything acknowledged before the call).
    pub async fn read_all(&self, prefix: &str) -> ApiResult<Vec<KeyValue>> {
        let resp = self
            .range(
                pb::RangeRequest {
                    key: prefix.as_bytes().to_vec(),
                    prefix: true,
                    serializable: true,
                    ..Default::default()
                },
                true,
            )
            .await?;
        Ok(resp.kvs)
    }

    /// This replica's node id.
    pub fn replica_id(&self) -> u64 {
        self.node.config().id
    }

    /// The id of the current leader (`None` while there is none), updated as it changes.
    pub fn leader_changes(&self) -> watch::Receiver<Option<u64>> {
        self.node.leader_changes()
    }

    /// What this replica applies, batch by batch, as it applies it.
    pub fn applied(&self) -> broadcast::Receiver<Arc<ApplyEvent>> {
        self.node.subscribe()
    }

    /// Deletes the object at `key` if its mod revision is still `rev`.
    pub async fn delete(&self, key: &str, rev: i64) -> ApiResult<Cas> {
        let t = self.delete_txn(key, rev).await?;
        if t.succeeded {
            Ok(Cas::Done(t.revision))
        } else {
            self.failed(t)
        }
    }
}

/// Whether a failed conditional write failed because of the object at `key` (not there any
/// more, or there already, or changed since `rev`) rather than one of the keys beside it.
pub fn object_changed(compared: &[(String, i64)], key: &str, rev: Option<i64>) -> bool {
    let current = compared.iter().find(|(k, _)| k == key).map(|(_, r)| *r);
    match rev {
        None => current.is_some(),
        Some(r) => current != Some(r),
    }
}

/// A replica error as the API reports it: no leader or shutting down is `503`, a timeout `504`,
/// a request the store refuses `400`, anything else (the space alarm included) `500`.
impl From<NodeError> for ApiError {
    fn from(e: NodeError) -> Self {
        match e {
            NodeError::NoLeader | NodeError::Unavailable(_) | NodeError::ShuttingDown => {
                ApiError::unavailable(e.to_string())
            }
            NodeError::Timeout(..) => ApiError::timeout(e.to_string()),
            NodeError::Rejected(m) => ApiError::bad_request(m),
            // kube-apiserver answers etcd's "database space exceeded" with a 500 too.
            NodeError::NoSpace(m) => ApiError::internal(m),
            NodeError::Storage(s) => match s {
                StorageError::TooLarge { .. }
                | StorageError::InvalidKey(_)
                | StorageError::InvalidRequest(_) => ApiError::bad_request(s.to_string()),
                other => ApiError::internal(other.to_string()),
            },
            other => ApiError::internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_stored_as_its_json_without_its_resource_version() {
        for obj in [
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "resourceVersion": "7",
                "uid": "u", "labels": {"a": "b"}}, "spec": {"resourceVersion": "kept"}}),
            json!({"metadata": {"resourceVersion": "1"}}),
            json!({"metadata": {}, "data": {"a": "<&>"}}),
            json!({"metadata": "not an object"}),
            json!(["not", "an", "object"]),
        ] {
            let mut expected = obj.clone();
            if let Some(meta) = expected.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            assert_eq!(
                serde_json::to_vec(&AsStored(&obj)).unwrap(),
                serde_json::to_vec(&expected).unwrap(),
                "{obj}"
            );
        }
    }
}
