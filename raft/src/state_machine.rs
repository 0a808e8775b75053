//! openraft's state machine over the MVCC store, plus the apply stream.
//!
//! Every call to `apply` becomes one [`kuberaft_storage::ApplyBatch`]: each entry's effects
//! are followed by its applied marker, so the batch (and every part of it that is flushed
//! early) is consistent with the log. After the write, the batch's changes are published in
//! revision order on the apply stream and the applied progress is advanced.

use std::io::SeekFrom;
use std::path::PathBuf;
use std::sync::Arc;

use kuberaft_proto as pb;
use kuberaft_storage::mvcc::Applied;
use kuberaft_storage::{Mvcc, StorageError as StoreError};
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{EntryPayload, OptionalSend, StorageError, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncSeekExt;
use tokio::sync::{broadcast, watch};

use crate::codec::{decode, encode};
use crate::node::Progress;
use crate::types::{CommandResult, Entry, LogId, Member, StoredMembership, TypeConfig};

/// What the apply stream publishes, in log order.
#[derive(Debug)]
pub enum ApplyEvent {
    /// A batch of applied revisions (each with its changes).
    Applied(Applied),
    /// The state machine was replaced by a snapshot at this revision; consumers must reload.
    SnapshotInstalled {
        /// The store revision after the install.
        revision: i64,
    },
}

/// The snapshot currently kept on disk, described for openraft.
#[derive(Serialize, Deserialize)]
struct StoredSnapshotMeta {
    last_log_id: Option<LogId>,
    last_membership: StoredMembership,
    snapshot_id: String,
    /// File name of the snapshot data inside the snapshot dir.
    file: String,
}

/// The state machine of one replica.
pub struct StateMachine {
    mvcc: Mvcc,
    snapshot_dir: PathBuf,
    progress: watch::Sender<Progress>,
    events: broadcast::Sender<Arc<ApplyEvent>>,
}

fn io_err<E: std::error::Error + 'static>(e: &E) -> StorageError<u64> {
    StorageIOError::write_state_machine(e).into()
}

impl StateMachine {
    /// A state machine over `mvcc` that keeps snapshots in `snapshot_dir`.
    pub fn new(
        mvcc: Mvcc,
        snapshot_dir: PathBuf,
        progress: watch::Sender<Progress>,
        events: broadcast::Sender<Arc<ApplyEvent>>,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(&snapshot_dir)?;
        let sm = StateMachine {
            mvcc,
            snapshot_dir,
            progress,
            events,
        };
        sm.publish_progress()?;
        Ok(sm)
    }

    fn applied_marker(&self) -> Result<(Option<LogId>, StoredMembership), StorageError<u64>> {
        let meta = self
            .mvcc
            .raft_meta()
            .map_err(|e| StorageIOError::read_state_machine(&e))?;
        let applied = meta
            .applied
            .map(|b| decode::<Option<LogId>>("applied", &b))
            .transpose()
            .map_err(|e| StorageIOError::read_state_machine(&e))?
            .flatten();
        let membership = meta
            .membership
            .map(|b| decode::<StoredMembership>("membership", &b))
            .transpose()
            .map_err(|e| StorageIOError::read_state_machine(&e))?
            .unwrap_or_default();
        Ok((applied, membership))
    }

    fn publish_progress(&self) -> Result<(), StoreError> {
        let (revision, compacted) = self.mvcc.revisions()?;
        let applied_index = self
            .applied_marker()
            .ok()
            .and_then(|(a, _)| a)
            .map_or(0, |l| l.index);
        self.progress.send_replace(Progress {
            applied_index,
            revision,
            compacted,
        });
        Ok(())
    }
}

/// Makes `stored` the current snapshot: its data file must already be in `dir`. The meta file
/// is replaced atomically, then data files of older snapshots are removed.
fn set_current(dir: &std::path::Path, stored: &StoredSnapshotMeta) -> Result<(), StorageIOError<u64>> {
    let bytes = encode("snapshot meta", stored).map_err(|e| werr(&e))?;
    let tmp = dir.join("current.meta.tmp");
    std::fs::write(&tmp, bytes).map_err(|e| werr(&e))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| werr(&e))?;
    std::fs::rename(&tmp, dir.join("current.meta")).map_err(|e| werr(&e))?;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("snap-") && name != stored.file {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Errors that can occur while writing or reading snapshot files.
trait SnapErr: std::fmt::Display {}
impl<T: std::error::Error> SnapErr for T {}

fn snap_err(sig: Option<openraft::storage::SnapshotSignature<u64>>, e: &dyn SnapErr) -> StorageIOError<u64> {
    StorageIOError::write_snapshot(sig, &std::io::Error::other(e.to_string()))
}

fn werr(e: &dyn SnapErr) -> StorageIOError<u64> {
    snap_err(None, e)
}

fn snapshot_file_name(id: &str) -> String {
    format!("snap-{id}.bin")
}

/// Applies one command inside a batch. Client errors become a deterministic `rejected`
/// result; storage failures abort the whole apply. The transactions of a [`pb::TxnBatch`] are
/// applied one after the other, each with its own result, as if each had its own entry.
fn apply_command(
    batch: &mut kuberaft_storage::ApplyBatch<'_>,
    cmd: &pb::Command,
) -> Result<pb::CommandResult, StoreError> {
    use pb::command_result::Result as R;
    let result = match &cmd.command {
        Some(pb::command::Command::Txn(t)) => batch.txn(t).map(R::Txn),
        Some(pb::command::Command::Compact(c)) => batch.compact(c.revision).map(|compacted| {
            R::Compact(pb::CompactResponse {
                compacted_revision: compacted,
                revision: batch.revision(),
            })
        }),
        Some(pb::command::Command::Batch(b)) => {
            let results = b
                .txns
                .iter()
                .map(|t| rejected_or(batch.txn(t).map(R::Txn)))
                .map(|r| r.map(|result| pb::CommandResult { result: Some(result) }))
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(R::Batch(pb::BatchResults { results }))
        }
        None => Err(StoreError::InvalidRequest("empty command".into())),
    };
    Ok(pb::CommandResult {
        result: Some(rejected_or(result)?),
    })
}

/// A command's result, with the errors that are the command's fault (the same on every
/// replica) turned into a `rejected` result; any other error fails the apply.
fn rejected_or(
    result: Result<pb::command_result::Result, StoreError>,
) -> Result<pb::command_result::Result, StoreError> {
    match result {
        Ok(r) => Ok(r),
        Err(
            e @ (StoreError::InvalidKey(_)
            | StoreError::InvalidRequest(_)
            | StoreError::TooLarge { .. }
            | StoreError::FutureRevision { .. }),
        ) => Ok(pb::command_result::Result::Rejected(e.to_string())),
        Err(e) => Err(e),
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError<u64>> {
        self.applied_marker()
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResult>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let started = std::time::Instant::now();
        let mut batch = self.mvcc.begin().map_err(|e| io_err(&e))?;
        let mut results = Vec::new();
        let mut last_index = None;
        for entry in entries {
            let mut membership = None;
            let result = match &entry.payload {
                EntryPayload::Blank => pb::CommandResult::default(),
                EntryPayload::Normal(cmd) => {
                    apply_command(&mut batch, &cmd.0).map_err(|e| StorageIOError::apply(entry.log_id, &e))?
                }
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(entry.log_id), m.clone()));
                    pb::CommandResult::default()
                }
            };
            let marker = encode("applied", &Some(entry.log_id)).map_err(|e| io_err(&e))?;
            let membership = membership
                .map(|m| encode("membership", &m))
                .transpose()
                .map_err(|e| io_err(&e))?;
            batch.set_raft_meta(&marker, membership.as_deref());
            results.push(CommandResult(result));
            last_index = Some(entry.log_id.index);
        }
        let applied = batch.commit().map_err(|e| io_err(&e))?;
        metrics::histogram!("kuberaft_raft_apply_seconds").record(started.elapsed().as_secs_f64());
        let (revision, compacted) = (applied.revision, applied.compacted);
        if !applied.revisions.is_empty() {
            metrics::counter!("kuberaft_applied_revisions_total").increment(applied.revisions.len() as u64);
            // Nobody listening is fine: the stream is for whoever subscribes.
            let _ = self.events.send(Arc::new(ApplyEvent::Applied(applied)));
        }
        if let Some(index) = last_index {
            self.progress.send_modify(|p| {
                p.applied_index = index;
                p.revision = revision;
                p.compacted = p.compacted.max(compacted);
            });
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            mvcc: self.mvcc.clone(),
            snapshot_dir: self.snapshot_dir.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError<u64>> {
        let path = self.snapshot_dir.join("incoming.snap");
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, Member>,
        mut snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError<u64>> {
        let sig = Some(meta.signature());
        let werr = |e: &dyn SnapErr| snap_err(sig.clone(), e);
        snapshot.seek(SeekFrom::Start(0)).await.map_err(|e| werr(&e))?;
        let file = snapshot.into_std().await;
        let mvcc = self.mvcc.clone();
        let reader = file.try_clone().map_err(|e| werr(&e))?;
        tokio::task::spawn_blocking(move || mvcc.install_snapshot(reader))
            .await
            .map_err(|e| werr(&e))?
            .map_err(|e| werr(&e))?;
        // Keep the installed snapshot as the current one, so this replica can send it on.
        let stored = StoredSnapshotMeta {
            last_log_id: meta.last_log_id,
            last_membership: meta.last_membership.clone(),
            snapshot_id: meta.snapshot_id.clone(),
            file: snapshot_file_name(&meta.snapshot_id),
        };
        std::fs::rename(
            self.snapshot_dir.join("incoming.snap"),
            self.snapshot_dir.join(&stored.file),
        )
        .map_err(|e| werr(&e))?;
        set_current(&self.snapshot_dir, &stored)?;
        self.publish_progress().map_err(|e| werr(&e))?;
        let revision = self.progress.borrow().revision;
        let _ = self
            .events
            .send(Arc::new(ApplyEvent::SnapshotInstalled { revision }));
        tracing::info!(snapshot = %meta.snapshot_id, revision, "installed snapshot from leader");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let Ok(bytes) = std::fs::read(self.snapshot_dir.join("current.meta")) else {
            return Ok(None);
        };
        let stored: StoredSnapshotMeta =
            decode("snapshot meta", &bytes).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        let file = tokio::fs::File::open(self.snapshot_dir.join(&stored.file))
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(Some(Snapshot {
            meta: SnapshotMeta {
                last_log_id: stored.last_log_id,
                last_membership: stored.last_membership,
                snapshot_id: stored.snapshot_id,
            },
            snapshot: Box::new(file),
        }))
    }
}

/// Builds a snapshot file from a consistent view of the state machine.
pub struct SnapshotBuilder {
    mvcc: Mvcc,
    snapshot_dir: PathBuf,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let building = self.snapshot_dir.join("building.snap");
        let mvcc = self.mvcc.clone();
        let path = building.clone();
        let info = tokio::task::spawn_blocking(move || mvcc.write_snapshot(&path))
            .await
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        let last_log_id = info
            .applied
            .map(|b| decode::<Option<LogId>>("applied", &b))
            .transpose()
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?
            .flatten();
        let last_membership = info
            .membership
            .map(|b| decode::<StoredMembership>("membership", &b))
            .transpose()
            .map_err(|e| StorageIOError::write_snapshot(None, &e))?
            .unwrap_or_default();
        let snapshot_id = match last_log_id {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, info.size),
            None => format!("empty-{}", info.size),
        };
        let stored = StoredSnapshotMeta {
            last_log_id,
            last_membership: last_membership.clone(),
            snapshot_id: snapshot_id.clone(),
            file: snapshot_file_name(&snapshot_id),
        };
        let snap_path = self.snapshot_dir.join(&stored.file);
        std::fs::rename(&building, &snap_path).map_err(|e| werr(&e))?;
        set_current(&self.snapshot_dir, &stored)?;
        let file = tokio::fs::File::open(&snap_path).await.map_err(|e| werr(&e))?;
        tracing::info!(snapshot = %snapshot_id, bytes = info.size, "built snapshot");
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id,
                last_membership,
                snapshot_id,
            },
            snapshot: Box::new(file),
        })
    }
}
