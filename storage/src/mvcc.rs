//! The MVCC key-value state machine.
//!
//! Layout (column families, see [`crate::db`]):
//! * `kv`: key → current [`KeyValue`] (stored without its key);
//! * `history`: key ++ 0 ++ revision → the version written at that revision (version 0 = a
//!   deletion), for reads at older revisions;
//! * `events`: revision → the keys it changed, for replaying changes in revision order;
//! * `sm`: the current revision, the compacted revision and the Raft layer's opaque applied
//!   marker and membership.
//!
//! Writes happen only through an [`ApplyBatch`], which the Raft layer drives from its apply
//! loop: the batch is deterministic (no clocks, no randomness) and lands in one RocksDB write.

use std::collections::{BTreeSet, HashMap};

use kuberaft_proto::{
    compare, op, ChangedKeys, Compare, KeyValue, Op, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use prost::Message;
use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch, WriteOptions};
use sha2::{Digest, Sha256};

use crate::db::{CF_EVENTS, CF_HISTORY, CF_KV, CF_SM};
use crate::keys::{be, from_be, history_key, prefix_end, split_history_key, successor};
use crate::merge::Mergers;
use crate::{Db, StorageError};

/// Largest value a put may carry (etcd's default request limit).
pub const MAX_VALUE_BYTES: usize = 3 * 512 * 1024;
/// Largest key.
pub const MAX_KEY_BYTES: usize = 4096;
/// Largest encoded transaction.
pub const MAX_REQUEST_BYTES: usize = 2 * 1024 * 1024;

/// Key of the current revision in the `sm` family.
pub(crate) const META_REVISION: &[u8] = b"revision";
/// Key of the compacted revision in the `sm` family.
pub(crate) const META_COMPACTED: &[u8] = b"compacted";
/// Key of the Raft layer's applied marker in the `sm` family.
pub(crate) const META_APPLIED: &[u8] = b"applied";
/// Key of the Raft layer's membership record in the `sm` family.
pub(crate) const META_MEMBERSHIP: &[u8] = b"membership";

/// One key's change, as the apply stream publishes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The key's state after the change; a deletion has `version == 0` and an empty value.
    pub kv: KeyValue,
    /// The key's state before the change (`None` when it was created).
    pub prev: Option<KeyValue>,
}

impl Change {
    /// Whether this change deleted the key.
    pub fn is_delete(&self) -> bool {
        self.kv.version == 0
    }
}

/// What one committed [`ApplyBatch`] did, in revision order.
#[derive(Debug, Default, Clone)]
pub struct Applied {
    /// Every revision the batch created, with the changes it made.
    pub revisions: Vec<(i64, Vec<Change>)>,
    /// The store revision after the batch.
    pub revision: i64,
    /// The compacted revision after the batch.
    pub compacted: i64,
}

/// The MVCC state machine over a replica's database.
#[derive(Clone)]
pub struct Mvcc {
    pub(crate) db: Db,
    mergers: Mergers,
}

/// Checks a transaction against the store's limits before it is proposed (and again when it is
/// applied, so the check is deterministic on every replica).
pub fn validate_txn(req: &TxnRequest) -> Result<(), StorageError> {
    let size = req.encoded_len();
    if size > MAX_REQUEST_BYTES {
        return Err(StorageError::TooLarge {
            what: "request",
            size,
            limit: MAX_REQUEST_BYTES,
        });
    }
    for c in &req.compares {
        validate_key(&c.key)?;
        if c.target.is_none() {
            return Err(StorageError::InvalidRequest("compare without a target".into()));
        }
    }
    validate_ops(&req.success)?;
    if req.failure.iter().any(|o| matches!(o.op, Some(op::Op::Merge(_)))) {
        return Err(StorageError::InvalidRequest(
            "a merge is allowed only among the success operations".into(),
        ));
    }
    validate_ops(&req.failure)
}

fn validate_ops(ops: &[Op]) -> Result<(), StorageError> {
    let mut keys = BTreeSet::new();
    let mut prefixes = Vec::new();
    for o in ops {
        match &o.op {
            Some(op::Op::Put(p)) => {
                validate_key(&p.key)?;
                if p.value.len() > MAX_VALUE_BYTES {
                    return Err(StorageError::TooLarge {
                        what: "value",
                        size: p.value.len(),
                        limit: MAX_VALUE_BYTES,
                    });
                }
                if !keys.insert(p.key.as_slice()) {
                    return Err(duplicate(&p.key));
                }
            }
            Some(op::Op::Delete(d)) => {
                validate_key(&d.key)?;
                if !keys.insert(d.key.as_slice()) {
                    return Err(duplicate(&d.key));
                }
            }
            Some(op::Op::Merge(m)) => {
                validate_key(&m.key)?;
                if m.operand.len() > MAX_VALUE_BYTES {
                    return Err(StorageError::TooLarge {
                        what: "merge operand",
                        size: m.operand.len(),
                        limit: MAX_VALUE_BYTES,
                    });
                }
                if !keys.insert(m.key.as_slice()) {
                    return Err(duplicate(&m.key));
                }
            }
            Some(op::Op::DeletePrefix(d)) => {
                if d.prefix.contains(&0) {
                    return Err(StorageError::InvalidKey("prefix contains a NUL byte".into()));
                }
                prefixes.push(d.prefix.as_slice());
            }
            None => return Err(StorageError::InvalidRequest("operation without a body".into())),
        }
    }
    if let Some(k) = keys.iter().find(|k| prefixes.iter().any(|p| k.starts_with(p))) {
        return Err(duplicate(k));
    }
    Ok(())
}

fn duplicate(key: &[u8]) -> StorageError {
    StorageError::InvalidRequest(format!(
        "key {:?} is changed more than once in one transaction",
        String::from_utf8_lossy(key)
    ))
}

fn validate_key(key: &[u8]) -> Result<(), StorageError> {
    if key.is_empty() {
        return Err(StorageError::InvalidKey("empty key".into()));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(StorageError::InvalidKey(format!(
            "key of {} bytes exceeds {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    if key.contains(&0) {
        return Err(StorageError::InvalidKey("key contains a NUL byte".into()));
    }
    Ok(())
}

fn decode_kv(key: &[u8], bytes: &[u8]) -> Result<KeyValue, StorageError> {
    let mut kv = KeyValue::decode(bytes).map_err(|e| StorageError::corrupt("kv", e))?;
    kv.key = key.to_vec();
    Ok(kv)
}

fn encode_without_key(kv: &KeyValue) -> Vec<u8> {
    KeyValue {
        key: Vec::new(),
        value: kv.value.clone(),
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
    }
    .encode_to_vec()
}

pub(crate) fn decode_i64(bytes: Option<Vec<u8>>) -> Result<i64, StorageError> {
    match bytes {
        None => Ok(0),
        Some(b) => from_be(&b)
            .map(|v| v as i64)
            .ok_or_else(|| StorageError::corrupt("sm", "bad counter")),
    }
}

impl Mvcc {
    /// The state machine over `db`.
    pub fn new(db: Db) -> Self {
        Mvcc {
            db,
            mergers: Mergers::default(),
        }
    }

    /// The same state machine, applying merge operations with `mergers`.
    pub fn with_mergers(self, mergers: Mergers) -> Self {
        Mvcc { mergers, ..self }
    }

    /// `(current revision, compacted revision)`.
    pub fn revisions(&self) -> Result<(i64, i64), StorageError> {
        let cf = self.db.cf(CF_SM);
        Ok((
            decode_i64(self.db.db.get_cf(cf, META_REVISION)?)?,
            decode_i64(self.db.db.get_cf(cf, META_COMPACTED)?)?,
        ))
    }

    /// The Raft layer's applied marker and membership record, as last applied.
    pub fn raft_meta(&self) -> Result<RaftMeta, StorageError> {
        let cf = self.db.cf(CF_SM);
        Ok(RaftMeta {
            applied: self.db.db.get_cf(cf, META_APPLIED)?,
            membership: self.db.db.get_cf(cf, META_MEMBERSHIP)?,
        })
    }

    /// Starts a batch of applies; nothing is visible until [`ApplyBatch::commit`].
    pub fn begin(&self) -> Result<ApplyBatch<'_>, StorageError> {
        let (revision, compacted) = self.revisions()?;
        Ok(ApplyBatch {
            mvcc: self,
            batch: WriteBatch::default(),
            revision,
            compacted,
            overlay: HashMap::new(),
            applied: Applied::default(),
        })
    }

    /// Reads a key or prefix at the current or an older revision, from one consistent
    /// point in time.
    pub fn range(&self, req: &RangeRequest) -> Result<RangeResponse, StorageError> {
        let snap = self.db.db.snapshot();
        let sm = self.db.cf(CF_SM);
        let current = decode_i64(snap.get_cf(sm, META_REVISION)?)?;
        let compacted = decode_i64(snap.get_cf(sm, META_COMPACTED)?)?;
        let at = if req.revision <= 0 { current } else { req.revision };
        if at > current {
            return Err(StorageError::FutureRevision {
                requested: at,
                current,
            });
        }
        if at < compacted {
            return Err(StorageError::Compacted {
                requested: at,
                compacted,
            });
        }
        let (mut start, end) = if req.prefix {
            (req.key.clone(), prefix_end(&req.key))
        } else {
            if req.key.is_empty() {
                return Err(StorageError::InvalidKey("empty key".into()));
            }
            (req.key.clone(), Some(successor(&req.key)))
        };
        if !req.start_after.is_empty() {
            start = start.max(successor(&req.start_after));
        }
        let limit = if req.limit > 0 {
            req.limit as usize
        } else {
            usize::MAX
        };
        let mut out = RangeResponse {
            revision: at,
            ..Default::default()
        };
        let mut visit = |kv: KeyValue| {
            out.count += 1;
            if !req.count_only && out.kvs.len() < limit {
                out.kvs.push(kv);
            }
        };
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snap);
        if at == current {
            if let Some(end) = &end {
                ro.set_iterate_upper_bound(end.clone());
            }
            let it = self.db.db.iterator_cf_opt(
                self.db.cf(CF_KV),
                ro,
                IteratorMode::From(&start, Direction::Forward),
            );
            for item in it {
                let (k, v) = item?;
                visit(decode_kv(&k, &v)?);
            }
        } else {
            if let Some(end) = &end {
                ro.set_iterate_upper_bound(history_key(end, 0));
            }
            let it = self.db.db.iterator_cf_opt(
                self.db.cf(CF_HISTORY),
                ro,
                IteratorMode::From(&history_key(&start, 0), Direction::Forward),
            );
            // Versions of one key arrive oldest first; keep the newest at or below `at`.
            let mut pending: Option<KeyValue> = None;
            for item in it {
                let (hk, v) = item?;
                let (key, rev) = split_history_key(&hk)?;
                if pending.as_ref().is_some_and(|p| p.key != key) {
                    if let Some(kv) = pending.take().filter(|kv| kv.version > 0) {
                        visit(kv);
                    }
                }
                if rev <= at {
                    pending = Some(decode_kv(key, &v)?);
                }
            }
            if let Some(kv) = pending.filter(|kv| kv.version > 0) {
                visit(kv);
            }
        }
        out.more = (out.kvs.len() as i64) < out.count && !req.count_only;
        Ok(out)
    }

    /// The changes of every revision in `(after, upto]`, in order: the store's event history,
    /// for consumers that resume from a revision.
    pub fn changes(&self, after: i64, upto: i64) -> Result<Vec<(i64, Vec<Change>)>, StorageError> {
        let (_, compacted) = self.revisions()?;
        if after < compacted {
            return Err(StorageError::Compacted {
                requested: after,
                compacted,
            });
        }
        let mut out = Vec::new();
        let start = be((after + 1) as u64);
        let it = self.db.db.iterator_cf(
            self.db.cf(CF_EVENTS),
            IteratorMode::From(&start, Direction::Forward),
        );
        for item in it {
            let (k, v) = item?;
            let rev = from_be(&k).ok_or_else(|| StorageError::corrupt("events", "bad key"))? as i64;
            if rev > upto {
                break;
            }
            let keys = ChangedKeys::decode(&*v).map_err(|e| StorageError::corrupt("events", e))?;
            let mut changes = Vec::with_capacity(keys.keys.len());
            for key in keys.keys {
                let kv = self
                    .version_at(&key, rev)?
                    .ok_or_else(|| StorageError::corrupt("history", "event without a version"))?;
                let prev = self.version_at(&key, rev - 1)?.filter(|p| p.version > 0);
                changes.push(Change { kv, prev });
            }
            out.push((rev, changes));
        }
        Ok(out)
    }

    /// The newest history record of `key` at or below `rev` (including tombstones).
    fn version_at(&self, key: &[u8], rev: i64) -> Result<Option<KeyValue>, StorageError> {
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(history_key(key, 0));
        let mut it = self.db.db.iterator_cf_opt(
            self.db.cf(CF_HISTORY),
            ro,
            IteratorMode::From(&history_key(key, rev), Direction::Reverse),
        );
        match it.next() {
            Some(item) => {
                let (hk, v) = item?;
                let (k, _) = split_history_key(&hk)?;
                Ok((k == key).then(|| decode_kv(key, &v)).transpose()?)
            }
            None => Ok(None),
        }
    }

    /// A SHA-256 over the revision counters and every current key-value, taken at one point in
    /// time; replicas that applied the same log have the same hash. Returns `(revision, hex)`.
    pub fn state_hash(&self) -> Result<(i64, String), StorageError> {
        let snap = self.db.db.snapshot();
        let sm = self.db.cf(CF_SM);
        let revision = decode_i64(snap.get_cf(sm, META_REVISION)?)?;
        let compacted = decode_i64(snap.get_cf(sm, META_COMPACTED)?)?;
        let mut h = Sha256::new();
        h.update(revision.to_be_bytes());
        h.update(compacted.to_be_bytes());
        for item in snap.iterator_cf(self.db.cf(CF_KV), IteratorMode::Start) {
            let (k, v) = item?;
            h.update((k.len() as u64).to_be_bytes());
            h.update(&k);
            h.update((v.len() as u64).to_be_bytes());
            h.update(&v);
        }
        Ok((revision, hex::encode(h.finalize())))
    }
}

/// A group of applies that lands in one RocksDB write. Keys changed earlier in the batch are
/// seen by later transactions through an overlay.
pub struct ApplyBatch<'a> {
    mvcc: &'a Mvcc,
    batch: WriteBatch,
    revision: i64,
    compacted: i64,
    overlay: HashMap<Vec<u8>, Option<KeyValue>>,
    applied: Applied,
}

impl ApplyBatch<'_> {
    fn current(&self, key: &[u8]) -> Result<Option<KeyValue>, StorageError> {
        if let Some(v) = self.overlay.get(key) {
            return Ok(v.clone());
        }
        let db = &self.mvcc.db;
        match db.db.get_cf(db.cf(CF_KV), key)? {
            Some(v) => Ok(Some(decode_kv(key, &v)?)),
            None => Ok(None),
        }
    }

    fn holds(&self, c: &Compare) -> Result<bool, StorageError> {
        let cur = self.current(&c.key)?;
        Ok(match c.target {
            Some(compare::Target::Exists(want)) => cur.is_some() == want,
            Some(compare::Target::ModRevision(r)) => cur.map_or(0, |kv| kv.mod_revision) == r,
            Some(compare::Target::Version(v)) => cur.map_or(0, |kv| kv.version) == v,
            None => false,
        })
    }

    fn keys_with_prefix(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, StorageError> {
        let db = &self.mvcc.db;
        let mut ro = ReadOptions::default();
        if let Some(end) = prefix_end(prefix) {
            ro.set_iterate_upper_bound(end);
        }
        let mut keys = BTreeSet::new();
        for item in db
            .db
            .iterator_cf_opt(db.cf(CF_KV), ro, IteratorMode::From(prefix, Direction::Forward))
        {
            let (k, _) = item?;
            keys.insert(k.to_vec());
        }
        for (k, v) in &self.overlay {
            if k.starts_with(prefix) {
                if v.is_some() {
                    keys.insert(k.clone());
                } else {
                    keys.remove(k);
                }
            }
        }
        Ok(keys.into_iter().collect())
    }

    /// Applies one transaction. A request that breaks the store's rules (see [`validate_txn`])
    /// is an error and changes nothing; the same request fails the same way on every replica.
    pub fn txn(&mut self, req: &TxnRequest) -> Result<TxnResponse, StorageError> {
        validate_txn(req)?;
        let mut succeeded = true;
        for c in &req.compares {
            if !self.holds(c)? {
                succeeded = false;
                break;
            }
        }
        let mut resp = TxnResponse {
            succeeded,
            ..Default::default()
        };
        let mut merged = Vec::new();
        if succeeded {
            match self.merge_all(&req.success)? {
                Ok(values) => merged = values,
                Err(why) => {
                    resp.succeeded = false;
                    resp.refused = why;
                }
            }
        }
        let succeeded = resp.succeeded;
        if !succeeded {
            // A refused merge reports its key's state too, as a failed compare does.
            let mut keys: Vec<&[u8]> = req.compares.iter().map(|c| c.key.as_slice()).collect();
            if !resp.refused.is_empty() {
                keys.extend(req.success.iter().filter_map(|o| match &o.op {
                    Some(op::Op::Merge(m)) => Some(m.key.as_slice()),
                    _ => None,
                }));
            }
            for key in keys {
                if let Some(kv) = self.current(key)? {
                    if !resp.compared.iter().any(|k| k.key == kv.key) {
                        resp.compared.push(kv);
                    }
                }
            }
        }
        let mut merged = merged.into_iter();
        let ops = if succeeded { &req.success } else { &req.failure };
        let rev = self.revision + 1;
        let mut changes = Vec::new();
        for o in ops {
            match &o.op {
                Some(op::Op::Put(p)) => {
                    let prev = self.current(&p.key)?;
                    let kv = KeyValue {
                        key: p.key.clone(),
                        value: p.value.clone(),
                        create_revision: prev.as_ref().map_or(rev, |kv| kv.create_revision),
                        mod_revision: rev,
                        version: prev.as_ref().map_or(1, |kv| kv.version + 1),
                    };
                    changes.push(Change { kv, prev });
                }
                Some(op::Op::Merge(m)) => {
                    let prev = self.current(&m.key)?;
                    let kv = KeyValue {
                        key: m.key.clone(),
                        value: merged.next().unwrap_or_default(),
                        create_revision: prev.as_ref().map_or(rev, |kv| kv.create_revision),
                        mod_revision: rev,
                        version: prev.as_ref().map_or(1, |kv| kv.version + 1),
                    };
                    changes.push(Change { kv, prev });
                }
                Some(op::Op::Delete(d)) => {
                    if let Some(prev) = self.current(&d.key)? {
                        changes.push(tombstone(prev, rev));
                    }
                }
                Some(op::Op::DeletePrefix(d)) => {
                    for key in self.keys_with_prefix(&d.prefix)? {
                        if let Some(prev) = self.current(&key)? {
                            changes.push(tombstone(prev, rev));
                        }
                    }
                }
                None => {}
            }
        }
        resp.deleted = changes.iter().filter(|c| c.is_delete()).count() as i64;
        resp.prev_kvs = changes.iter().filter_map(|c| c.prev.clone()).collect();
        if !changes.is_empty() {
            self.record(rev, &changes);
            self.revision = rev;
            self.applied.revisions.push((rev, changes));
        }
        resp.revision = self.revision;
        Ok(resp)
    }

    /// The values of `ops`' merges, in their order, each computed from its key's current
    /// value; the inner error is the first refusal (a value too large is one).
    fn merge_all(&self, ops: &[Op]) -> Result<Result<Vec<Vec<u8>>, String>, StorageError> {
        let mut values = Vec::new();
        for o in ops {
            let Some(op::Op::Merge(m)) = &o.op else {
                continue;
            };
            let current = self.current(&m.key)?;
            let value = match self.mvcc.mergers.apply(
                &m.merger,
                current.as_ref().map(|kv| kv.value.as_slice()),
                &m.operand,
            ) {
                Ok(v) if v.len() > MAX_VALUE_BYTES => Err(format!(
                    "the merged value of {} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes",
                    v.len()
                )),
                other => other,
            };
            match value {
                Ok(v) => values.push(v),
                Err(why) => return Ok(Err(why)),
            }
        }
        Ok(Ok(values))
    }

    fn record(&mut self, rev: i64, changes: &[Change]) {
        let db = &self.mvcc.db;
        let mut keys = ChangedKeys::default();
        for c in changes {
            let key = &c.kv.key;
            if c.is_delete() {
                self.batch.delete_cf(db.cf(CF_KV), key);
                self.overlay.insert(key.clone(), None);
            } else {
                self.batch.put_cf(db.cf(CF_KV), key, encode_without_key(&c.kv));
                self.overlay.insert(key.clone(), Some(c.kv.clone()));
            }
            self.batch.put_cf(
                db.cf(CF_HISTORY),
                history_key(key, rev),
                encode_without_key(&c.kv),
            );
            keys.keys.push(key.clone());
        }
        self.batch
            .put_cf(db.cf(CF_EVENTS), be(rev as u64), keys.encode_to_vec());
        self.batch.put_cf(db.cf(CF_SM), META_REVISION, be(rev as u64));
    }

    /// Drops history older than `revision` (keeping, per key, the version a read at `revision`
    /// needs). Returns the compacted revision afterwards; compacting to a revision at or below
    /// the current compacted revision changes nothing, and a future revision is an error.
    pub fn compact(&mut self, revision: i64) -> Result<i64, StorageError> {
        if revision > self.revision {
            return Err(StorageError::FutureRevision {
                requested: revision,
                current: self.revision,
            });
        }
        if revision <= self.compacted {
            return Ok(self.compacted);
        }
        // Compaction reads history from the database: land what this batch holds first.
        self.flush()?;
        let db = self.mvcc.db.clone();
        let mut keys = BTreeSet::new();
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(be(revision as u64).to_vec());
        for item in db.db.iterator_cf_opt(
            db.cf(CF_EVENTS),
            ro,
            IteratorMode::From(&be(self.compacted.max(0) as u64), Direction::Forward),
        ) {
            let (k, v) = item?;
            let changed = ChangedKeys::decode(&*v).map_err(|e| StorageError::corrupt("events", e))?;
            keys.extend(changed.keys);
            self.batch.delete_cf(db.cf(CF_EVENTS), k);
        }
        for key in keys {
            let mut ro = ReadOptions::default();
            ro.set_iterate_upper_bound(history_key(&key, revision));
            let older: Vec<(Vec<u8>, bool)> = db
                .db
                .iterator_cf_opt(
                    db.cf(CF_HISTORY),
                    ro,
                    IteratorMode::From(&history_key(&key, 0), Direction::Forward),
                )
                .map(|item| {
                    let (hk, v) = item?;
                    let kv = KeyValue::decode(&*v).map_err(|e| StorageError::corrupt("history", e))?;
                    Ok((hk.to_vec(), kv.version == 0))
                })
                .collect::<Result<_, StorageError>>()?;
            // The newest version below `revision` still answers reads at `revision`, unless
            // it is a deletion.
            let keep_last = older.last().is_some_and(|(_, deleted)| !deleted);
            let drop = older.len() - usize::from(keep_last);
            for (hk, _) in &older[..drop] {
                self.batch.delete_cf(db.cf(CF_HISTORY), hk);
            }
        }
        self.compacted = revision;
        self.batch
            .put_cf(db.cf(CF_SM), META_COMPACTED, be(revision as u64));
        self.applied.compacted = revision;
        Ok(revision)
    }

    /// Records the Raft layer's applied marker (and membership, when it changed) in this batch.
    pub fn set_raft_meta(&mut self, applied: &[u8], membership: Option<&[u8]>) {
        let db = &self.mvcc.db;
        self.batch.put_cf(db.cf(CF_SM), META_APPLIED, applied);
        if let Some(m) = membership {
            self.batch.put_cf(db.cf(CF_SM), META_MEMBERSHIP, m);
        }
    }

    /// The revision after everything applied so far in this batch.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    fn flush(&mut self) -> Result<(), StorageError> {
        let batch = std::mem::take(&mut self.batch);
        if !batch.is_empty() {
            self.mvcc.db.db.write_opt(batch, &WriteOptions::default())?;
        }
        self.overlay.clear();
        Ok(())
    }

    /// Writes the batch. The write is not fsync'd: the Raft log in the same database is, and
    /// every later synced log append makes it durable too; after a crash the Raft layer
    /// re-applies the log from the last applied marker that survived.
    pub fn commit(mut self) -> Result<Applied, StorageError> {
        self.flush()?;
        let mut applied = std::mem::take(&mut self.applied);
        applied.revision = self.revision;
        applied.compacted = self.compacted;
        Ok(applied)
    }
}

fn tombstone(prev: KeyValue, rev: i64) -> Change {
    Change {
        kv: KeyValue {
            key: prev.key.clone(),
            value: Vec::new(),
            create_revision: 0,
            mod_revision: rev,
            version: 0,
        },
        prev: Some(prev),
    }
}

/// The Raft layer's bookkeeping kept beside the state (opaque bytes to this crate), so the
/// applied point and the membership move atomically with the data they describe.
#[derive(Debug, Clone, Default)]
pub struct RaftMeta {
    /// The encoded last-applied log id, if anything was applied.
    pub applied: Option<Vec<u8>>,
    /// The encoded membership record, if one was applied.
    pub membership: Option<Vec<u8>>,
}
