//! openraft's log storage over [`kuberaft_storage::LogStore`].

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};

use kuberaft_storage::log::HardState;
use kuberaft_storage::LogStore;
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{OptionalSend, StorageError, StorageIOError, Vote};

use crate::codec::{decode, encode};
use crate::types::{Entry, LogId, TypeConfig};

/// The vote and the last entry openraft last handed to the log, kept in memory for the leader's
/// lease: a vote is saved before any peer learns of it, and a leader's entry is appended to its
/// own log before it is sent to anyone, let alone applied anywhere.
#[derive(Debug, Default)]
struct Saved {
    vote: Option<Vote<u64>>,
    last_index: u64,
}

/// The Raft log of one replica, as openraft sees it.
#[derive(Clone)]
pub struct RaftLog {
    log: LogStore,
    saved: Arc<Mutex<Saved>>,
}

impl RaftLog {
    /// Wraps the storage crate's log.
    pub fn new(log: LogStore) -> Self {
        RaftLog {
            log,
            saved: Arc::default(),
        }
    }

    /// The vote stored on disk, read from it: a replica that has one has taken part in an
    /// election or followed a leader before.
    pub fn stored_vote(&self) -> Option<Vote<u64>> {
        self.read_hard(HardState::Vote).ok().flatten()
    }

    /// The vote openraft last saved (or read at start).
    pub fn saved_vote(&self) -> Option<Vote<u64>> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner()).vote
    }

    /// The index of the last entry handed to this log since it was opened (0 before any).
    pub fn appended_index(&self) -> u64 {
        self.saved.lock().unwrap_or_else(|p| p.into_inner()).last_index
    }

    fn remember(&self, update: impl FnOnce(&mut Saved)) {
        update(&mut self.saved.lock().unwrap_or_else(|p| p.into_inner()));
    }

    fn read_hard<T: serde::de::DeserializeOwned>(
        &self,
        what: HardState,
    ) -> Result<Option<T>, StorageIOError<u64>> {
        let bytes = self.log.read(what).map_err(|e| StorageIOError::read(&e))?;
        bytes
            .map(|b| decode("hard state", &b))
            .transpose()
            .map_err(|e| StorageIOError::read(&e))
    }

    /// Number of entries the log holds and the index of its last entry.
    pub fn stats(&self) -> (u64, u64) {
        let first = self.log.first().ok().flatten().map(|(i, _)| i);
        let last = self.log.last().ok().flatten().map(|(i, _)| i);
        match (first, last) {
            (Some(f), Some(l)) => (l - f + 1, l),
            _ => (0, 0),
        }
    }

    /// The last committed log id this replica has persisted.
    pub fn committed(&self) -> Option<LogId> {
        self.read_hard::<Option<LogId>>(HardState::Committed)
            .ok()
            .flatten()
            .flatten()
    }
}

impl RaftLogReader<TypeConfig> for RaftLog {
    /// The entries of `range` from exactly its start, up to the first missing index — so none
    /// when the start itself is missing (purged, or below the log's first entry). Replication
    /// sends what this returns behind `prev_log_id = start - 1`, so a batch must never begin
    /// later than asked; an empty one is retried as a heartbeat. (openraft's storage suite
    /// expects the entries after such a leading gap in six cases; see
    /// `tests/storage_suite.rs`.)
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<u64>> {
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(e) => e.saturating_add(1),
            Bound::Excluded(e) => *e,
            Bound::Unbounded => u64::MAX,
        };
        let raw = self
            .log
            .entries(start, end)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        raw.iter()
            .map(|(_, b)| decode::<Entry>("log entry", b).map_err(|e| StorageIOError::read_logs(&e).into()))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for RaftLog {
    type LogReader = RaftLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        let purged: Option<LogId> = self.read_hard(HardState::Purged)?;
        let last = match self.log.last().map_err(|e| StorageIOError::read_logs(&e))? {
            Some((_, bytes)) => Some(
                decode::<Entry>("log entry", &bytes)
                    .map_err(|e| StorageIOError::read_logs(&e))?
                    .log_id,
            ),
            None => purged,
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        self.remember(|s| s.vote = Some(*vote));
        let bytes = encode("vote", vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.log
            .save(HardState::Vote, &bytes)
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        let vote = self.read_hard(HardState::Vote)?;
        self.remember(|s| s.vote = vote);
        Ok(vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError<u64>> {
        let bytes = encode("committed", &committed).map_err(|e| StorageIOError::write(&e))?;
        self.log
            .save(HardState::Committed, &bytes)
            .map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError<u64>> {
        Ok(self.read_hard::<Option<LogId>>(HardState::Committed)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let encoded = entries
            .into_iter()
            .map(|e| Ok((e.log_id.index, encode("log entry", &e)?)))
            .collect::<Result<Vec<_>, crate::codec::CodecError>>()
            .map_err(|e| StorageIOError::write_logs(&e))?;
        if let Some((last, _)) = encoded.last() {
            self.remember(|s| s.last_index = s.last_index.max(*last));
        }
        let started = std::time::Instant::now();
        self.log
            .append(
                encoded,
                Box::new(move |r| {
                    metrics::histogram!("kuberaft_raft_log_durable_seconds")
                        .record(started.elapsed().as_secs_f64());
                    callback.log_io_completed(r.map_err(std::io::Error::other))
                }),
            )
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        self.remember(|s| s.last_index = s.last_index.min(log_id.index.saturating_sub(1)));
        self.log
            .truncate(log_id.index)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError<u64>> {
        let marker = encode("purged", &log_id).map_err(|e| StorageIOError::write_logs(&e))?;
        self.log
            .purge(log_id.index, &marker)
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
