//! State-machine snapshots as files.
//!
//! A snapshot is every record of the state-machine column families (current values, history,
//! events, metadata) read from one RocksDB snapshot, so it is consistent with the applied
//! marker it carries. Format: a magic line, then records `cf(1) klen(4) key vlen(4) value`, a
//! zero byte, and the SHA-256 of everything before it. A truncated or corrupt file is
//! detected before anything is installed.

use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use rocksdb::{IteratorMode, WriteBatch, WriteOptions};
use sha2::{Digest, Sha256};

use crate::db::{CF_EVENTS, CF_HISTORY, CF_KV, CF_SM};
use crate::hashing::HashingWriter;
use crate::mvcc::{META_APPLIED, META_MEMBERSHIP};
use crate::{Mvcc, StorageError};

const MAGIC: &[u8] = b"KUBERAFT-SNAPSHOT-1\n";
const FAMILIES: [(u8, &str); 4] = [(1, CF_KV), (2, CF_HISTORY), (3, CF_EVENTS), (4, CF_SM)];
/// No record in a valid snapshot is larger than this; a bigger length means corruption.
const MAX_RECORD: usize = 64 * 1024 * 1024;

/// What a snapshot file holds about the Raft state it was taken at.
#[derive(Debug, Clone, Default)]
pub struct SnapshotInfo {
    /// The Raft layer's applied marker at the snapshot.
    pub applied: Option<Vec<u8>>,
    /// The Raft layer's membership record at the snapshot.
    pub membership: Option<Vec<u8>>,
    /// Size of the file in bytes.
    pub size: u64,
}

impl Mvcc {
    /// Writes a snapshot of the state machine to `path` (via a temporary file and rename).
    pub fn write_snapshot(&self, path: &Path) -> Result<SnapshotInfo, StorageError> {
        let tmp = path.with_extension("tmp");
        let snap = self.db.db.snapshot();
        let file = std::fs::File::create(&tmp)?;
        let mut w = HashingWriter::new(BufWriter::new(file));
        w.write_all(MAGIC)?;
        let mut info = SnapshotInfo::default();
        for (tag, cf) in FAMILIES {
            for item in snap.iterator_cf(self.db.cf(cf), IteratorMode::Start) {
                let (k, v) = item?;
                if cf == CF_SM && &*k == META_APPLIED {
                    info.applied = Some(v.to_vec());
                }
                if cf == CF_SM && &*k == META_MEMBERSHIP {
                    info.membership = Some(v.to_vec());
                }
                w.write_all(&[tag])?;
                w.write_all(&(k.len() as u32).to_be_bytes())?;
                w.write_all(&k)?;
                w.write_all(&(v.len() as u32).to_be_bytes())?;
                w.write_all(&v)?;
            }
        }
        w.write_all(&[0])?;
        let digest = w.hash.clone().finalize();
        w.inner.write_all(&digest)?;
        info.size = w.written + digest.len() as u64;
        let file = w.inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(info)
    }

    /// Replaces the whole state machine with the snapshot read from `reader`, in one atomic
    /// write. The snapshot is verified completely before anything changes.
    pub fn install_snapshot(&self, reader: impl Read) -> Result<SnapshotInfo, StorageError> {
        let mut r = BufReader::new(reader);
        let mut hash = Sha256::new();
        let mut magic = vec![0u8; MAGIC.len()];
        r.read_exact(&mut magic)?;
        if magic != MAGIC {
            return Err(StorageError::corrupt("snapshot", "bad magic"));
        }
        hash.update(&magic);
        let mut batch = WriteBatch::default();
        for (_, cf) in FAMILIES {
            // Every key in these families sorts below 0xff..; clear them whole.
            let handle = self.db.cf(cf);
            if let Some(last) = self.db.db.iterator_cf(handle, IteratorMode::End).next() {
                let (last, _) = last?;
                batch.delete_range_cf(handle, Vec::<u8>::new(), crate::keys::successor(&last));
            }
        }
        let mut info = SnapshotInfo::default();
        loop {
            let mut tag = [0u8; 1];
            r.read_exact(&mut tag)?;
            hash.update(tag);
            if tag[0] == 0 {
                break;
            }
            let cf = FAMILIES
                .iter()
                .find(|(t, _)| *t == tag[0])
                .map(|(_, cf)| *cf)
                .ok_or_else(|| StorageError::corrupt("snapshot", format!("unknown record tag {}", tag[0])))?;
            let key = read_chunk(&mut r, &mut hash)?;
            let value = read_chunk(&mut r, &mut hash)?;
            if cf == CF_SM && key == META_APPLIED {
                info.applied = Some(value.clone());
            }
            if cf == CF_SM && key == META_MEMBERSHIP {
                info.membership = Some(value.clone());
            }
            info.size += (key.len() + value.len()) as u64;
            batch.put_cf(self.db.cf(cf), key, value);
        }
        let mut digest = [0u8; 32];
        r.read_exact(&mut digest)?;
        if hash.finalize().as_slice() != digest {
            return Err(StorageError::corrupt("snapshot", "checksum mismatch"));
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.db.write_opt(batch, &wo)?;
        Ok(info)
    }
}

fn read_chunk(r: &mut impl Read, hash: &mut Sha256) -> Result<Vec<u8>, StorageError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    hash.update(len);
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_RECORD {
        return Err(StorageError::corrupt(
            "snapshot",
            format!("record of {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    hash.update(&buf);
    Ok(buf)
}
