//! The Raft log and hard state in RocksDB.
//!
//! Entries are opaque bytes keyed by index. An append is written at once (so it can be read
//! back and replicated immediately) and reported durable only after a WAL fsync. A single
//! flusher thread does the fsyncs and coalesces every append that is waiting into one, so
//! the number of fsyncs per second stays bounded under load (group commit).

use std::sync::{mpsc, Arc};
use std::time::Instant;

use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch, WriteOptions};

use crate::db::{CF_LOG, CF_RAFT};
use crate::keys::{be, from_be};
use crate::{Db, StorageError};

/// Called once the appended entries are on disk (or the fsync failed).
pub type DurableCallback = Box<dyn FnOnce(Result<(), StorageError>) + Send>;

/// Which piece of Raft hard state a record holds.
#[derive(Debug, Clone, Copy)]
pub enum HardState {
    /// The current vote (term, candidate, committed flag).
    Vote,
    /// The last committed log id this replica has seen.
    Committed,
    /// The last log id removed from the front of the log.
    Purged,
}

impl HardState {
    fn key(self) -> &'static [u8] {
        match self {
            HardState::Vote => b"vote",
            HardState::Committed => b"committed",
            HardState::Purged => b"purged",
        }
    }
}

/// A replica's Raft log.
#[derive(Clone)]
pub struct LogStore {
    db: Db,
    flusher: Arc<Flusher>,
}

/// The fsync thread; the last `LogStore` clone to go stops and joins it, so the database is
/// closed when the log store is gone (a reopen in the same process then succeeds).
struct Flusher {
    tx: Option<mpsc::Sender<DurableCallback>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl LogStore {
    /// The log in `db`; starts the flusher thread, which ends when the last clone is dropped.
    pub fn new(db: Db) -> Result<Self, StorageError> {
        let (tx, rx) = mpsc::channel::<DurableCallback>();
        let flush_db = db.clone();
        let thread = std::thread::Builder::new()
            .name("kuberaft-log-fsync".into())
            .spawn(move || flush_loop(flush_db, rx))?;
        Ok(LogStore {
            db,
            flusher: Arc::new(Flusher {
                tx: Some(tx),
                thread: Some(thread),
            }),
        })
    }

    /// Writes entries `(index, bytes)` and calls `on_durable` once they are fsync'd.
    pub fn append(
        &self,
        entries: impl IntoIterator<Item = (u64, Vec<u8>)>,
        on_durable: DurableCallback,
    ) -> Result<(), StorageError> {
        let cf = self.db.cf(CF_LOG);
        let mut batch = WriteBatch::default();
        for (index, bytes) in entries {
            batch.put_cf(cf, be(index), bytes);
        }
        self.db.db.write_opt(batch, &WriteOptions::default())?;
        match &self.flusher.tx {
            Some(tx) => {
                if let Err(mpsc::SendError(cb)) = tx.send(on_durable) {
                    cb(Err(StorageError::Io(std::io::Error::other(
                        "log flusher stopped",
                    ))));
                }
            }
            None => on_durable(Err(StorageError::Io(std::io::Error::other(
                "log flusher stopped",
            )))),
        }
        Ok(())
    }

    /// Removes every entry at or after `from` (conflicting entries a new leader overwrites).
    pub fn truncate(&self, from: u64) -> Result<(), StorageError> {
        self.delete_range(from, u64::MAX)
    }

    /// Removes every entry at or before `upto` and records `marker` (the purged log id).
    pub fn purge(&self, upto: u64, marker: &[u8]) -> Result<(), StorageError> {
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db
            .db
            .put_cf_opt(self.db.cf(CF_RAFT), HardState::Purged.key(), marker, &wo)?;
        self.delete_range(0, upto.saturating_add(1))
    }

    fn delete_range(&self, from: u64, to: u64) -> Result<(), StorageError> {
        let cf = self.db.cf(CF_LOG);
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, be(from), be(to));
        if to == u64::MAX {
            batch.delete_cf(cf, be(u64::MAX));
        }
        self.db.db.write_opt(batch, &wo)?;
        Ok(())
    }

    /// Entries with index in `[start, end)`, in order, stopping at the first gap.
    pub fn entries(&self, start: u64, end: u64) -> Result<Vec<(u64, Vec<u8>)>, StorageError> {
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(be(end).to_vec());
        let it = self.db.db.iterator_cf_opt(
            self.db.cf(CF_LOG),
            ro,
            IteratorMode::From(&be(start), Direction::Forward),
        );
        let mut out = Vec::new();
        for (expect, item) in (start..).zip(it) {
            let (k, v) = item?;
            let index = from_be(&k).ok_or_else(|| StorageError::corrupt("log", "bad index key"))?;
            if index != expect {
                break;
            }
            out.push((index, v.to_vec()));
        }
        Ok(out)
    }

    /// The last entry, if the log holds any.
    pub fn last(&self) -> Result<Option<(u64, Vec<u8>)>, StorageError> {
        self.edge(IteratorMode::End)
    }

    /// The first entry, if the log holds any.
    pub fn first(&self) -> Result<Option<(u64, Vec<u8>)>, StorageError> {
        self.edge(IteratorMode::Start)
    }

    fn edge(&self, mode: IteratorMode) -> Result<Option<(u64, Vec<u8>)>, StorageError> {
        match self.db.db.iterator_cf(self.db.cf(CF_LOG), mode).next() {
            Some(item) => {
                let (k, v) = item?;
                let index = from_be(&k).ok_or_else(|| StorageError::corrupt("log", "bad index key"))?;
                Ok(Some((index, v.to_vec())))
            }
            None => Ok(None),
        }
    }

    /// Stores a piece of hard state; the vote is fsync'd before this returns.
    pub fn save(&self, what: HardState, bytes: &[u8]) -> Result<(), StorageError> {
        let mut wo = WriteOptions::default();
        wo.set_sync(matches!(what, HardState::Vote));
        self.db
            .db
            .put_cf_opt(self.db.cf(CF_RAFT), what.key(), bytes, &wo)?;
        Ok(())
    }

    /// Reads a piece of hard state.
    pub fn read(&self, what: HardState) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.db.db.get_cf(self.db.cf(CF_RAFT), what.key())?)
    }
}

fn flush_loop(db: Db, rx: mpsc::Receiver<DurableCallback>) {
    let fsync_seconds = metrics::histogram!("kuberaft_storage_fsync_duration_seconds");
    let batched = metrics::histogram!("kuberaft_storage_fsync_appends");
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        let started = Instant::now();
        let result = db.db.flush_wal(true);
        fsync_seconds.record(started.elapsed().as_secs_f64());
        batched.record(waiting.len() as f64);
        for cb in waiting {
            cb(result.clone().map_err(StorageError::from));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Identity;

    fn open(dir: &std::path::Path) -> LogStore {
        let db = Db::open(
            dir,
            &Identity {
                cluster_name: "t".into(),
                node_id: 1,
            },
        )
        .unwrap();
        LogStore::new(db).unwrap()
    }

    fn append_sync(log: &LogStore, entries: Vec<(u64, Vec<u8>)>) {
        let (tx, rx) = mpsc::channel();
        log.append(entries, Box::new(move |r| tx.send(r.is_ok()).unwrap()))
            .unwrap();
        assert!(rx.recv().unwrap());
    }

    #[test]
    fn append_truncate_purge_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let log = open(dir.path());
            append_sync(&log, (1..=10).map(|i| (i, vec![i as u8])).collect());
            assert_eq!(log.entries(3, 6).unwrap().len(), 3);
            log.truncate(8).unwrap();
            assert_eq!(log.last().unwrap().unwrap().0, 7);
            log.purge(2, b"p2").unwrap();
            assert_eq!(log.first().unwrap().unwrap().0, 3);
            log.save(HardState::Vote, b"v").unwrap();
        }
        let log = open(dir.path());
        assert_eq!(log.first().unwrap().unwrap().0, 3);
        assert_eq!(log.last().unwrap().unwrap(), (7, vec![7]));
        assert_eq!(log.read(HardState::Vote).unwrap().unwrap(), b"v");
        assert_eq!(log.read(HardState::Purged).unwrap().unwrap(), b"p2");
        // A gap stops the scan.
        assert_eq!(log.entries(1, 100).unwrap().len(), 0);
        assert_eq!(log.entries(3, 100).unwrap().len(), 5);
    }
}
