//! openraft's own storage conformance suite ([`openraft::testing::Suite`], openraft 0.9.25)
//! run against this crate's log store ([`RaftLog`]) and state machine ([`StateMachine`]), each
//! case on a fresh database in its own temp dir and on its own tokio runtime (as
//! `Suite::test_all` does).
//!
//! The suite drives the storage traits the way openraft's engine relies on them (append and
//! its flush callback, truncate, purge, vote, log state, applied state and membership, snapshot
//! build and install), so a storage change that breaks one of openraft's assumptions fails here
//! rather than as a confusing replication bug in a cluster test.
//!
//! Every case of `Suite::test_store` runs as its own test, so a failure names its case. 29 of
//! the 35 run against `RaftLog` as it is. Six read a range that starts *below the first entry
//! the log holds* and expect the entries after that leading gap; they run against
//! [`FromFirstEntry`], a reader that moves such a read's start up to the first entry and
//! otherwise passes every call to `RaftLog` — see its docs for why `RaftLog` does not do that
//! itself, and [`reads_start_where_asked_or_return_nothing`] for the behaviour it has instead.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use kuberaft_raft::log_store::RaftLog;
use kuberaft_raft::state_machine::StateMachine;
use kuberaft_raft::{Progress, TypeConfig};
use kuberaft_storage::{Db, Identity, LogStore, Mvcc};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{Entry, LogId, OptionalSend, StorageError, StorageIOError, Vote};
use tempfile::TempDir;
use tokio::sync::{broadcast, watch};

/// A log store and state machine over one fresh database in a new temp dir (the guard).
async fn open() -> Result<(TempDir, RaftLog, StateMachine), StorageError<u64>> {
    let dir = tempfile::tempdir().map_err(|e| StorageIOError::write(&e))?;
    let identity = Identity {
        cluster_name: "suite".into(),
        node_id: 1,
    };
    let db = Db::open(&dir.path().join("db"), &identity).map_err(|e| StorageIOError::write(&e))?;
    let log = RaftLog::new(LogStore::new(db.clone()).map_err(|e| StorageIOError::write(&e))?);
    // Nobody watches progress or the apply stream here; both accept sends without a receiver.
    let progress = watch::channel(Progress::default()).0;
    let events = broadcast::channel(16).0;
    let sm = StateMachine::new(Mvcc::new(db), dir.path().join("snapshots"), progress, events)
        .map_err(|e| StorageIOError::write(&e))?;
    Ok((dir, log, sm))
}

/// Builds the crate's storage as the replica uses it.
struct Ours;

impl StoreBuilder<TypeConfig, RaftLog, StateMachine, TempDir> for Ours {
    async fn build(&self) -> Result<(TempDir, RaftLog, StateMachine), StorageError<u64>> {
        open().await
    }
}

/// Builds the crate's storage with its log behind [`FromFirstEntry`].
struct OursFromFirstEntry;

impl StoreBuilder<TypeConfig, FromFirstEntry, StateMachine, TempDir> for OursFromFirstEntry {
    async fn build(&self) -> Result<(TempDir, FromFirstEntry, StateMachine), StorageError<u64>> {
        let (dir, log, sm) = open().await?;
        Ok((dir, FromFirstEntry(log), sm))
    }
}

type OursSuite = Suite<TypeConfig, RaftLog, StateMachine, Ours, TempDir>;
type FromFirstEntrySuite = Suite<TypeConfig, FromFirstEntry, StateMachine, OursFromFirstEntry, TempDir>;

/// `RaftLog` with one difference: a read whose range starts below the first entry the log holds
/// starts at that entry instead.
///
/// `RaftLog` (through `LogStore::entries`) answers a read of `[start, end)` with the entries
/// from `start` on up to the first missing index — so with nothing when `start` itself is
/// missing. openraft's contract allows that ("entry that is not found is allowed"), and its
/// engine never reads below `last_purged + 1`, nor does our log ever lack an entry there: the
/// log begins at index 0 (openraft's `initialize`), or right after the purge marker (purge,
/// also after a snapshot install), and truncation only cuts its tail. It is also the safe answer
/// for replication, which sends what the reader returns behind `prev_log_id = start - 1`: a
/// batch that did not begin at `start` would leave a hole in the follower's log, while an empty
/// one is treated as a heartbeat and retried (openraft postpones purges that replication is
/// using, so this is a second line of defence). The suite's six cases below instead append a
/// log that begins at index 1, or purge and then read from 0, and expect the entries after the
/// gap; that is the only thing this reader changes.
struct FromFirstEntry(RaftLog);

impl RaftLogReader<TypeConfig> for FromFirstEntry {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s + 1,
            Bound::Unbounded => 0,
        };
        let (held, last) = self.0.stats();
        let first = if held == 0 { start } else { last + 1 - held };
        self.0
            .try_get_log_entries((Bound::Included(start.max(first)), range.end_bound().cloned()))
            .await
    }
}

impl RaftLogStorage<TypeConfig> for FromFirstEntry {
    type LogReader = FromFirstEntry;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<u64>> {
        self.0.get_log_state().await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        FromFirstEntry(self.0.get_log_reader().await)
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError<u64>> {
        self.0.save_vote(vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError<u64>> {
        self.0.read_vote().await
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), StorageError<u64>> {
        self.0.save_committed(committed).await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError<u64>> {
        self.0.read_committed().await
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.0.append(entries, callback).await
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        self.0.truncate(log_id).await
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError<u64>> {
        self.0.purge(log_id).await
    }
}

/// Runs a case on a fresh multi-threaded runtime, as the suite's own `run_fut` does.
fn run(case: impl std::future::Future<Output = Result<(), StorageError<u64>>>) {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    rt.block_on(case).expect("storage error");
}

/// One test per suite case: `$suite::$case(log, sm)` on storage from `$builder`.
macro_rules! cases {
    ($suite:ty, $builder:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                run(async {
                    let (_dir, log, sm) = $builder.build().await?;
                    <$suite>::$case(log, sm).await
                });
            }
        )*
    };
}

// The cases of `Suite::test_store` in openraft 0.9.25, in its order (keep in step when openraft
// is upgraded); `transfer_snapshot` takes the builder and is below.
cases!(OursSuite, Ours;
    last_membership_in_log_initial,
    get_membership_initial,
    get_membership_from_empty_log_and_sm,
    get_membership_from_log_le_sm_last_applied,
    get_membership_from_log_gt_sm_last_applied_1,
    get_membership_from_log_gt_sm_last_applied_2,
    get_initial_state_without_init,
    get_initial_state_membership_from_log_and_sm,
    get_initial_state_with_state,
    get_initial_state_last_log_gt_sm,
    get_initial_state_last_log_lt_sm,
    get_initial_state_log_ids,
    get_initial_state_re_apply_committed,
    save_vote,
    get_log_entries,
    limited_get_log_entries,
    try_get_log_entry,
    initial_logs,
    get_log_state,
    get_log_id,
    last_id_in_log,
    last_applied_state,
    purge_logs_upto_20,
    delete_logs_since_11,
    delete_logs_since_0,
    snapshot_meta,
    apply_single,
    apply_multiple,
);

// The six cases that read from below the log's first entry (see `FromFirstEntry`): the log
// begins at index 1 (`last_membership_in_log`, `last_membership_in_log_multi_step`,
// `get_membership_from_log_and_empty_sm`, whose membership lookups scan back to index 0), or
// is purged and then read from 0 (`purge_logs_upto_0`, `purge_logs_upto_5`, `append_to_log`).
cases!(FromFirstEntrySuite, OursFromFirstEntry;
    last_membership_in_log,
    last_membership_in_log_multi_step,
    get_membership_from_log_and_empty_sm,
    purge_logs_upto_0,
    purge_logs_upto_5,
    append_to_log,
);

#[test]
fn transfer_snapshot() {
    run(OursSuite::transfer_snapshot(&Ours));
}

/// What `RaftLog` answers instead of the entries after a leading gap: a read returns entries
/// from exactly its start, contiguous, or nothing.
#[test]
fn reads_start_where_asked_or_return_nothing() {
    run(async {
        let dir = tempfile::tempdir().expect("temp dir");
        let identity = Identity {
            cluster_name: "suite".into(),
            node_id: 1,
        };
        let db = Db::open(&dir.path().join("db"), &identity).expect("open db");
        let store = LogStore::new(db).expect("log store");
        let mut log = RaftLog::new(store.clone());
        // Entries 1..=10 (no entry 0), appended below openraft's `append` (whose flush callback
        // only openraft can make), encoded as `RaftLog` encodes them.
        let encoded = (1..=10)
            .map(|i| {
                let entry = openraft::testing::blank_ent::<TypeConfig>(1, 0, i);
                (
                    i,
                    kuberaft_raft::codec::encode("log entry", &entry).expect("encode"),
                )
            })
            .collect::<Vec<_>>();
        let (tx, rx) = std::sync::mpsc::channel();
        store
            .append(
                encoded,
                Box::new(move |r| tx.send(r.is_ok()).expect("flush result")),
            )
            .expect("append");
        assert!(rx.recv().expect("flush callback"), "flushed");

        // Index 0 was never written: a read from it is empty, a read from 1 has everything.
        assert!(log.try_get_log_entries(0..100).await?.is_empty());
        assert_eq!(log.try_get_log_entries(1..100).await?.len(), 10);

        // After a purge, reads from the purged part are empty, reads after it are whole.
        log.purge(openraft::testing::log_id(1, 0, 5)).await?;
        assert!(log.try_get_log_entries(0..100).await?.is_empty());
        assert!(log.try_get_log_entries(5..100).await?.is_empty());
        let indexes =
            |entries: Vec<Entry<TypeConfig>>| entries.iter().map(|e| e.log_id.index).collect::<Vec<_>>();
        assert_eq!(
            indexes(log.try_get_log_entries(6..100).await?),
            (6..=10).collect::<Vec<_>>()
        );
        Ok(())
    })
}
