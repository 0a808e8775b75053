//! Backup files: a consistent point-in-time copy of the key-value state, and the restore that
//! makes a new cluster's database from one.
//!
//! A backup is not a Raft snapshot (see [`crate::snapshot`]): it carries no Raft state, only the
//! current value of every key, read from one RocksDB snapshot, under a header that says where
//! and at which revision it was taken. Format:
//!
//! ```text
//! "KUBERAFT-BACKUP\n"                     magic
//! len(4, big-endian) BackupHeader         protobuf header (format version, cluster, revision…)
//! 1 klen(4) key vlen(4) value ...         one record per live key (value: the stored KeyValue)
//! 0 count(8)                              end marker and the number of records
//! sha256(32)                              of everything before it
//! ```
//!
//! Reading verifies the whole file (limits, key order, every value decodes, the count and the
//! checksum) before the caller trusts any of it. Restoring writes a fresh database whose
//! revision starts `bump` above the backup's and is compacted up to there, so a Kubernetes
//! client holding a resourceVersion of the old cluster is told `410 Gone` and re-lists instead
//! of silently missing what changed after the backup.

use std::io::{BufReader, Read, Write};

use kuberaft_proto::{BackupHeader, KeyValue};
use prost::Message;
use rocksdb::{IteratorMode, WriteBatch, WriteOptions};
use sha2::{Digest, Sha256};

use crate::db::{CF_HISTORY, CF_KV, CF_SM};
use crate::hashing::HashingWriter;
use crate::keys::{be, history_key};
use crate::mvcc::{META_COMPACTED, META_REVISION};
use crate::{Mvcc, StorageError, MAX_KEY_BYTES};

const MAGIC: &[u8] = b"KUBERAFT-BACKUP\n";
/// The format this build writes, and the newest it reads.
pub const BACKUP_FORMAT_VERSION: u32 = 1;
/// No valid header is larger than this.
const MAX_HEADER: usize = 64 * 1024;
/// No stored value is larger than this (the largest value a put may carry, encoded).
const MAX_VALUE_RECORD: usize = crate::MAX_VALUE_BYTES + 1024;
/// Restores write in batches of about this many bytes.
const RESTORE_BATCH_BYTES: usize = 8 * 1024 * 1024;
const RECORD: u8 = 1;
const END: u8 = 0;

/// Who takes a backup, for its header.
#[derive(Debug, Clone)]
pub struct BackupOrigin {
    /// The cluster's name.
    pub cluster_name: String,
    /// The replica's node id.
    pub node_id: u64,
    /// When the backup is taken, seconds since the Unix epoch.
    pub created_unix: i64,
}

/// What a complete, verified backup holds.
#[derive(Debug, Clone, PartialEq)]
pub struct BackupSummary {
    /// Its header.
    pub header: BackupHeader,
    /// Number of keys.
    pub keys: u64,
    /// Size of the file in bytes.
    pub bytes: u64,
    /// Hex SHA-256 checksum the file ends with.
    pub sha256: String,
}

/// What a restore wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct RestoreSummary {
    /// The backup it came from.
    pub backup: BackupSummary,
    /// The restored store's revision (also its compacted revision).
    pub revision: i64,
}

impl Mvcc {
    /// Writes a backup of the current state to `out`: every live key as of one RocksDB
    /// snapshot, which costs the serving replica no more than taking that snapshot (the scan
    /// runs on the caller's thread). `out` is not flushed or synced.
    pub fn write_backup(
        &self,
        out: impl Write,
        origin: &BackupOrigin,
    ) -> Result<BackupSummary, StorageError> {
        let snap = self.db.db.snapshot();
        let sm = self.db.cf(CF_SM);
        let header = BackupHeader {
            format_version: BACKUP_FORMAT_VERSION,
            cluster_name: origin.cluster_name.clone(),
            node_id: origin.node_id,
            revision: crate::mvcc::decode_i64(snap.get_cf(sm, META_REVISION)?)?,
            compacted_revision: crate::mvcc::decode_i64(snap.get_cf(sm, META_COMPACTED)?)?,
            created_unix: origin.created_unix,
        };
        let mut w = HashingWriter::new(out);
        w.write_all(MAGIC)?;
        let encoded = header.encode_to_vec();
        w.write_all(&(encoded.len() as u32).to_be_bytes())?;
        w.write_all(&encoded)?;
        let mut keys = 0u64;
        for item in snap.iterator_cf(self.db.cf(CF_KV), IteratorMode::Start) {
            let (k, v) = item?;
            w.write_all(&[RECORD])?;
            w.write_all(&(k.len() as u32).to_be_bytes())?;
            w.write_all(&k)?;
            w.write_all(&(v.len() as u32).to_be_bytes())?;
            w.write_all(&v)?;
            keys += 1;
        }
        w.write_all(&[END])?;
        w.write_all(&keys.to_be_bytes())?;
        let digest = w.hash.clone().finalize();
        w.inner.write_all(&digest)?;
        Ok(BackupSummary {
            header,
            keys,
            bytes: w.written + digest.len() as u64,
            sha256: hex::encode(digest),
        })
    }

    /// Makes this (fresh, empty) store the state of the backup read from `open()`: the file is
    /// read twice, first verified completely, then written; its revision becomes the
    /// backup's plus `bump`, compacted up to there. Nothing is written when the first pass
    /// fails. The store is synced before this returns.
    pub fn restore_backup<R: Read>(
        &self,
        mut open: impl FnMut() -> std::io::Result<R>,
        bump: i64,
    ) -> Result<RestoreSummary, StorageError> {
        if bump < 0 {
            return Err(StorageError::InvalidRequest(format!(
                "the revision bump must not be negative, not {bump}"
            )));
        }
        let (revision, _) = self.revisions()?;
        let holds_keys = self
            .db
            .db
            .iterator_cf(self.db.cf(CF_KV), IteratorMode::Start)
            .next()
            .is_some();
        if revision != 0 || holds_keys {
            return Err(StorageError::InvalidRequest(
                "a backup is restored only into an empty store".into(),
            ));
        }
        let verified = read_backup(open()?, |_, _| Ok(()))?;
        let new_revision = verified
            .header
            .revision
            .checked_add(bump)
            .ok_or_else(|| StorageError::InvalidRequest(format!("revision bump {bump} overflows")))?;
        let mut batch = WriteBatch::default();
        let written = read_backup(open()?, |key, kv| {
            let stored = KeyValue {
                key: Vec::new(),
                ..kv.clone()
            }
            .encode_to_vec();
            batch.put_cf(self.db.cf(CF_HISTORY), history_key(key, kv.mod_revision), &stored);
            batch.put_cf(self.db.cf(CF_KV), key, stored);
            if batch.size_in_bytes() >= RESTORE_BATCH_BYTES {
                self.db.db.write(std::mem::take(&mut batch))?;
            }
            Ok(())
        })?;
        if written != verified {
            return Err(StorageError::corrupt(
                "backup",
                "the file changed while it was restored",
            ));
        }
        batch.put_cf(self.db.cf(CF_SM), META_REVISION, be(new_revision as u64));
        batch.put_cf(self.db.cf(CF_SM), META_COMPACTED, be(new_revision as u64));
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.db.write_opt(batch, &wo)?;
        self.db.db.flush()?;
        Ok(RestoreSummary {
            backup: verified,
            revision: new_revision,
        })
    }
}

/// Reads and verifies a whole backup, handing each key and its value to `visit` in key order
/// as it goes (so a caller that must not act on an unverified file collects, and acts only
/// after this returns `Ok`).
pub fn read_backup(
    reader: impl Read,
    mut visit: impl FnMut(&[u8], &KeyValue) -> Result<(), StorageError>,
) -> Result<BackupSummary, StorageError> {
    let mut r = Verifying {
        inner: BufReader::new(reader),
        hash: Sha256::new(),
        read: 0,
    };
    let mut magic = [0u8; MAGIC.len()];
    r.exact(&mut magic, "the header")?;
    if magic != MAGIC {
        return Err(StorageError::corrupt(
            "backup",
            "not a kuberaft backup file (bad magic)",
        ));
    }
    let header_bytes = r.chunk(MAX_HEADER, "the header")?;
    let header = BackupHeader::decode(&*header_bytes)
        .map_err(|e| StorageError::corrupt("backup", format!("header: {e}")))?;
    if header.format_version > BACKUP_FORMAT_VERSION {
        return Err(StorageError::corrupt(
            "backup",
            format!(
                "written in format {} by a newer kuberaft; this one reads formats up to {BACKUP_FORMAT_VERSION}",
                header.format_version
            ),
        ));
    }
    if header.format_version == 0 || header.revision < 0 || header.compacted_revision > header.revision {
        return Err(StorageError::corrupt("backup", "the header is invalid"));
    }
    let mut keys = 0u64;
    let mut last: Option<Vec<u8>> = None;
    loop {
        let mut tag = [0u8; 1];
        r.exact(&mut tag, "a record")?;
        match tag[0] {
            END => break,
            RECORD => {}
            other => {
                return Err(StorageError::corrupt(
                    "backup",
                    format!("unknown record tag {other}"),
                ))
            }
        }
        let key = r.chunk(MAX_KEY_BYTES, "a key")?;
        let value = r.chunk(MAX_VALUE_RECORD, "a value")?;
        if key.is_empty() || last.as_ref().is_some_and(|l| *l >= key) {
            return Err(StorageError::corrupt("backup", "keys are not in ascending order"));
        }
        let mut kv =
            KeyValue::decode(&*value).map_err(|e| StorageError::corrupt("backup", format!("value: {e}")))?;
        if kv.mod_revision <= 0 || kv.mod_revision > header.revision || kv.version <= 0 {
            return Err(StorageError::corrupt(
                "backup",
                format!("a value's revision {} is outside the backup", kv.mod_revision),
            ));
        }
        kv.key = key;
        visit(&kv.key, &kv)?;
        keys += 1;
        last = Some(std::mem::take(&mut kv.key));
    }
    let mut count = [0u8; 8];
    r.exact(&mut count, "the record count")?;
    if u64::from_be_bytes(count) != keys {
        return Err(StorageError::corrupt("backup", "the record count does not match"));
    }
    let digest = r.hash.clone().finalize();
    let mut stored = [0u8; 32];
    r.inner
        .read_exact(&mut stored)
        .map_err(|_| StorageError::corrupt("backup", "truncated (no checksum)"))?;
    if digest.as_slice() != stored {
        return Err(StorageError::corrupt("backup", "checksum mismatch"));
    }
    let mut trailing = [0u8; 1];
    if r.inner.read(&mut trailing)? != 0 {
        return Err(StorageError::corrupt("backup", "data after the checksum"));
    }
    Ok(BackupSummary {
        header,
        keys,
        bytes: r.read + 32,
        sha256: hex::encode(stored),
    })
}

/// A reader that hashes what it reads and reports a short read as truncation.
struct Verifying<R> {
    inner: R,
    hash: Sha256,
    read: u64,
}

impl<R: Read> Verifying<R> {
    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), StorageError> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                StorageError::corrupt("backup", format!("truncated in {what}"))
            }
            _ => StorageError::Io(e),
        })?;
        self.hash.update(&*buf);
        self.read += buf.len() as u64;
        Ok(())
    }

    fn chunk(&mut self, limit: usize, what: &str) -> Result<Vec<u8>, StorageError> {
        let mut len = [0u8; 4];
        self.exact(&mut len, what)?;
        let len = u32::from_be_bytes(len) as usize;
        if len > limit {
            return Err(StorageError::corrupt(
                "backup",
                format!("{what} of {len} bytes exceeds the limit of {limit}"),
            ));
        }
        let mut buf = vec![0u8; len];
        self.exact(&mut buf, what)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Identity};
    use kuberaft_proto::{op, Op, PutOp, RangeRequest, TxnRequest};

    fn open(dir: &std::path::Path, cluster: &str) -> Mvcc {
        let db = Db::open(
            dir,
            &Identity {
                cluster_name: cluster.into(),
                node_id: 1,
            },
        )
        .expect("open");
        Mvcc::new(db)
    }

    fn put(m: &Mvcc, key: &str, value: &str) {
        let mut b = m.begin().expect("begin");
        b.txn(&TxnRequest {
            success: vec![Op {
                op: Some(op::Op::Put(PutOp {
                    key: key.into(),
                    value: value.into(),
                })),
            }],
            ..Default::default()
        })
        .expect("put");
        b.commit().expect("commit");
    }

    fn origin() -> BackupOrigin {
        BackupOrigin {
            cluster_name: "old".into(),
            node_id: 2,
            created_unix: 1_700_000_000,
        }
    }

    fn backup_of(m: &Mvcc) -> (Vec<u8>, BackupSummary) {
        let mut out = Vec::new();
        let summary = m.write_backup(&mut out, &origin()).expect("backup");
        (out, summary)
    }

    #[test]
    fn a_restore_holds_the_backed_up_keys_above_a_bumped_compacted_revision() {
        let dir = tempfile::tempdir().expect("tmp");
        let m = open(&dir.path().join("a"), "old");
        put(&m, "/a", "1");
        put(&m, "/b", "2");
        put(&m, "/a", "3");
        let (bytes, summary) = backup_of(&m);
        assert_eq!((summary.header.revision, summary.keys), (3, 2));
        assert_eq!(summary.bytes, bytes.len() as u64);
        put(&m, "/c", "after the backup");

        let restored = open(&dir.path().join("b"), "new");
        let done = restored.restore_backup(|| Ok(&bytes[..]), 1000).expect("restore");
        assert_eq!(done.revision, 1003);
        assert_eq!(restored.revisions().expect("revs"), (1003, 1003));
        let all = restored
            .range(&RangeRequest {
                key: b"/".to_vec(),
                prefix: true,
                ..Default::default()
            })
            .expect("range");
        let got: Vec<_> = all
            .kvs
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone(), kv.mod_revision))
            .collect();
        assert_eq!(
            got,
            vec![
                (b"/a".to_vec(), b"3".to_vec(), 3),
                (b"/b".to_vec(), b"2".to_vec(), 2)
            ]
        );
        let old = restored.range(&RangeRequest {
            key: b"/a".to_vec(),
            revision: 1002,
            ..Default::default()
        });
        assert!(matches!(old, Err(StorageError::Compacted { .. })), "{old:?}");
        // Writes continue above the bump, and reads at the restored revision still work.
        put(&restored, "/a", "4");
        let at = restored
            .range(&RangeRequest {
                key: b"/a".to_vec(),
                revision: 1003,
                ..Default::default()
            })
            .expect("range at the restored revision");
        assert_eq!(at.kvs[0].value, b"3");
        assert_eq!(restored.revisions().expect("revs").0, 1004);
    }

    #[test]
    fn a_damaged_backup_is_refused_and_nothing_is_restored() {
        let dir = tempfile::tempdir().expect("tmp");
        let m = open(&dir.path().join("a"), "old");
        put(&m, "/a", "1");
        let (bytes, _) = backup_of(&m);
        let mut flipped = bytes.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x40;
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated", bytes[..bytes.len() - 10].to_vec()),
            ("cut in a record", bytes[..40].to_vec()),
            ("flipped", flipped),
            ("not a backup", b"hello world".to_vec()),
            ("trailing", [bytes.clone(), b"x".to_vec()].concat()),
        ];
        for (what, bad) in cases {
            let err = read_backup(&bad[..], |_, _| Ok(())).expect_err(what);
            assert!(matches!(err, StorageError::Corrupt { .. }), "{what}: {err}");
            let target = open(&dir.path().join(what), "new");
            assert!(target.restore_backup(|| Ok(&bad[..]), 10).is_err(), "{what}");
            assert_eq!(target.revisions().expect("revs"), (0, 0), "{what}");
        }
    }

    #[test]
    fn a_backup_of_a_newer_format_is_refused() {
        let header = BackupHeader {
            format_version: BACKUP_FORMAT_VERSION + 1,
            revision: 1,
            ..Default::default()
        }
        .encode_to_vec();
        let mut bytes = MAGIC.to_vec();
        bytes.extend((header.len() as u32).to_be_bytes());
        bytes.extend(header);
        let err = read_backup(&bytes[..], |_, _| Ok(())).expect_err("newer");
        assert!(err.to_string().contains("newer kuberaft"), "{err}");
    }

    #[test]
    fn a_restore_into_a_store_with_data_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let m = open(&dir.path().join("a"), "old");
        put(&m, "/a", "1");
        let (bytes, _) = backup_of(&m);
        let err = m.restore_backup(|| Ok(&bytes[..]), 10).expect_err("not empty");
        assert!(err.to_string().contains("empty store"), "{err}");
    }
}
