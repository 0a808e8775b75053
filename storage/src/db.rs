//! Opening a replica's RocksDB database and guarding its identity.
//!
//! A data dir belongs to one replica of one cluster. Opening it checks that it is a kuberaft
//! database written by the same node id and cluster name, so a misconfigured replica fails
//! loudly instead of reinitialising over existing data.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rocksdb::{ColumnFamilyDescriptor, Options, DB};

use crate::StorageError;

/// Raft log entries, keyed by big-endian index.
pub(crate) const CF_LOG: &str = "log";
/// Raft hard state (vote, committed, last purged) and the replica identity.
pub(crate) const CF_RAFT: &str = "raft";
/// Current value of every live key.
pub(crate) const CF_KV: &str = "kv";
/// Every version of every key inside the history window.
pub(crate) const CF_HISTORY: &str = "history";
/// Per revision, the keys it changed.
pub(crate) const CF_EVENTS: &str = "events";
/// State machine metadata: revision, compacted revision, applied marker, membership.
pub(crate) const CF_SM: &str = "sm";

const ALL_CFS: [&str; 6] = [CF_LOG, CF_RAFT, CF_KV, CF_HISTORY, CF_EVENTS, CF_SM];

const IDENTITY_NODE: &[u8] = b"identity/node_id";
const IDENTITY_CLUSTER: &[u8] = b"identity/cluster";
const IDENTITY_FORMAT: &[u8] = b"identity/format";

/// The on-disk data format this build writes, and the newest it opens. Raise it with any
/// change a previous release could not read; data dirs written before the record existed are
/// format 1.
pub const DATA_FORMAT: u32 = 1;

/// Who a data dir belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The cluster's name; peers from another cluster are refused.
    pub cluster_name: String,
    /// This replica's Raft node id.
    pub node_id: u64,
}

/// A replica's open database, shared by the log store and the state machine.
#[derive(Clone)]
pub struct Db {
    pub(crate) db: Arc<DB>,
    path: PathBuf,
}

impl Db {
    /// Opens (or, for an absent or empty dir, creates) the database in `path` and checks that it
    /// belongs to `identity`.
    pub fn open(path: &Path, identity: &Identity) -> Result<Db, StorageError> {
        let fresh = is_fresh(path)?;
        if !fresh && !path.join("CURRENT").exists() {
            return Err(StorageError::DataDir {
                path: path.to_owned(),
                reason: "the directory is not empty and holds no kuberaft database (no CURRENT file); \
                         refusing to initialise over it"
                    .into(),
            });
        }
        let mut opts = Options::default();
        opts.create_if_missing(fresh);
        opts.create_missing_column_families(fresh);
        opts.set_max_background_jobs(2);
        opts.set_bytes_per_sync(1 << 20);
        let cfs = ALL_CFS.iter().map(|name| {
            let mut o = Options::default();
            o.set_compression_type(rocksdb::DBCompressionType::Lz4);
            ColumnFamilyDescriptor::new(*name, o)
        });
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(|e| StorageError::DataDir {
            path: path.to_owned(),
            reason: format!("cannot open the database: {e}"),
        })?;
        let db = Db {
            db: Arc::new(db),
            path: path.to_owned(),
        };
        db.check_identity(identity, fresh)?;
        Ok(db)
    }

    fn check_identity(&self, identity: &Identity, fresh: bool) -> Result<(), StorageError> {
        let cf = self.cf(CF_RAFT);
        let node = self.db.get_cf(cf, IDENTITY_NODE)?;
        let cluster = self.db.get_cf(cf, IDENTITY_CLUSTER)?;
        match (node, cluster) {
            (None, None) if fresh => {
                let mut wo = rocksdb::WriteOptions::default();
                wo.set_sync(true);
                let mut b = rocksdb::WriteBatch::default();
                b.put_cf(cf, IDENTITY_NODE, identity.node_id.to_string());
                b.put_cf(cf, IDENTITY_CLUSTER, &identity.cluster_name);
                b.put_cf(cf, IDENTITY_FORMAT, DATA_FORMAT.to_string());
                self.db.write_opt(b, &wo)?;
                Ok(())
            }
            (Some(node), Some(cluster)) => {
                let node = String::from_utf8_lossy(&node).into_owned();
                let cluster = String::from_utf8_lossy(&cluster).into_owned();
                if node != identity.node_id.to_string() {
                    return Err(self.dir_error(format!(
                        "belongs to node {node}, but this replica is configured as node {}",
                        identity.node_id
                    )));
                }
                if cluster != identity.cluster_name {
                    return Err(self.dir_error(format!(
                        "belongs to cluster {cluster:?}, but this replica is configured for cluster {:?}",
                        identity.cluster_name
                    )));
                }
                self.check_format()
            }
            _ => Err(self.dir_error(
                "the database has no kuberaft identity record; it is corrupt or not a kuberaft data dir"
                    .into(),
            )),
        }
    }

    /// Refuses data written in a newer format than this build reads (a rollback after an
    /// upgrade that changed the format), and records the format of older data dirs.
    fn check_format(&self) -> Result<(), StorageError> {
        let cf = self.cf(CF_RAFT);
        match self.db.get_cf(cf, IDENTITY_FORMAT)? {
            None => Ok(self.db.put_cf(cf, IDENTITY_FORMAT, DATA_FORMAT.to_string())?),
            Some(v) => {
                let text = String::from_utf8_lossy(&v);
                match text.parse::<u32>() {
                    Ok(f) if f <= DATA_FORMAT => Ok(()),
                    Ok(f) => Err(self.dir_error(format!(
                        "holds data format {f}, written by a newer kuberaft; this one reads formats up to \
                         {DATA_FORMAT}: run the newer release (or restore a backup with this one)"
                    ))),
                    Err(_) => Err(self.dir_error(format!("has an unreadable data format record {text:?}"))),
                }
            }
        }
    }

    fn dir_error(&self, reason: String) -> StorageError {
        StorageError::DataDir {
            path: self.path.clone(),
            reason,
        }
    }

    pub(crate) fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        // Every column family in ALL_CFS is created or opened by `open`, so this cannot fail.
        self.db
            .cf_handle(name)
            .unwrap_or_else(|| unreachable!("column family {name} is opened with the database"))
    }

    /// The data dir this database lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes the database occupies on disk (SST files plus live WAL).
    pub fn size_on_disk(&self) -> u64 {
        dir_size(&self.path)
    }

    /// Returns to the disk what deletes, history compaction and log purges freed: flushes the
    /// memtables (so old WAL files go) and compacts every column family's files. Runs alongside
    /// reads and writes; it takes as long as rewriting the live data.
    pub fn reclaim(&self) -> Result<(), StorageError> {
        for name in ALL_CFS {
            self.db.flush_cf(self.cf(name))?;
        }
        for name in ALL_CFS {
            self.db
                .compact_range_cf(self.cf(name), None::<&[u8]>, None::<&[u8]>);
        }
        Ok(())
    }
}

fn is_fresh(path: &Path) -> Result<bool, StorageError> {
    match std::fs::read_dir(path) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path)?;
            Ok(true)
        }
        Err(e) => Err(StorageError::DataDir {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
    }
}

fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(node: u64, cluster: &str) -> Identity {
        Identity {
            cluster_name: cluster.into(),
            node_id: node,
        }
    }

    #[test]
    fn reopens_with_same_identity_and_refuses_another() {
        let dir = tempfile::tempdir().unwrap();
        drop(Db::open(dir.path(), &id(1, "a")).unwrap());
        drop(Db::open(dir.path(), &id(1, "a")).unwrap());
        let err = Db::open(dir.path(), &id(2, "a")).err().unwrap().to_string();
        assert!(err.contains("belongs to node 1"), "{err}");
        let err = Db::open(dir.path(), &id(1, "b")).err().unwrap().to_string();
        assert!(err.contains("belongs to cluster \"a\""), "{err}");
    }

    #[test]
    fn refuses_data_of_a_newer_format() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), &id(1, "a")).unwrap();
        let format = db.db.get_cf(db.cf(CF_RAFT), IDENTITY_FORMAT).unwrap();
        assert_eq!(format.as_deref(), Some(DATA_FORMAT.to_string().as_bytes()));
        db.db
            .put_cf(db.cf(CF_RAFT), IDENTITY_FORMAT, (DATA_FORMAT + 1).to_string())
            .unwrap();
        drop(db);
        let err = Db::open(dir.path(), &id(1, "a")).err().unwrap().to_string();
        assert!(err.contains("written by a newer kuberaft"), "{err}");
    }

    #[test]
    fn refuses_a_non_empty_dir_without_a_database() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
        let err = Db::open(dir.path(), &id(1, "a")).err().unwrap().to_string();
        assert!(err.contains("no kuberaft database"), "{err}");
    }

    #[test]
    fn refuses_a_corrupt_database() {
        let dir = tempfile::tempdir().unwrap();
        drop(Db::open(dir.path(), &id(1, "a")).unwrap());
        std::fs::write(dir.path().join("CURRENT"), "garbage\n").unwrap();
        let err = Db::open(dir.path(), &id(1, "a")).err().unwrap().to_string();
        assert!(err.contains("cannot open the database"), "{err}");
    }
}
