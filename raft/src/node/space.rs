//! The database size quota (etcd's `--quota-backend-bytes`) and its space alarm.
//!
//! Twice a second the replica measures its database on disk. Above the quota the alarm is up:
//! the leader refuses every proposal that writes a value ([`RaftNode::space_alarm`] names the
//! sizes), while deletes and compaction go on; the replica reports it in `kuberaft_store_space_alarm`
//! and in its readiness. Space freed by deletes and history compaction returns to the disk only
//! when RocksDB compacts its files, so while the alarm is up the replica also flushes its
//! memtables and compacts the files itself (in the background, at most every
//! [`RECLAIM_EVERY`]) — the alarm clears by itself once the size is back under the quota, with
//! no defragmentation step and no pause.

use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::{Duration, Instant};

use kuberaft_proto as pb;

use super::RaftNode;

/// How often the database size is measured.
const MEASURE_EVERY: Duration = Duration::from_millis(500);
/// Least time between two reclaiming compactions while the alarm is up.
const RECLAIM_EVERY: Duration = Duration::from_secs(10);
/// How long a snapshot taken under the alarm may take before the log is left as it is.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

/// Measures the database of `node` until it is gone, reclaiming space while over the quota.
pub(super) async fn space_loop(node: Weak<RaftNode>) {
    let mut reclaimed: Option<Instant> = None;
    loop {
        tokio::time::sleep(MEASURE_EVERY).await;
        let Some(n) = node.upgrade() else {
            return;
        };
        let quota = n.config.quota_bytes;
        if quota == 0 {
            return;
        }
        let db = n.db.clone();
        let Ok(size) = tokio::task::spawn_blocking(move || db.size_on_disk()).await else {
            return;
        };
        n.db_size.store(size, Ordering::Relaxed);
        let over = size > quota;
        metrics::gauge!("kuberaft_store_quota_bytes").set(quota as f64);
        metrics::gauge!("kuberaft_store_space_alarm").set(f64::from(u8::from(over)));
        if over && reclaimed.is_none_or(|t| t.elapsed() >= RECLAIM_EVERY) {
            reclaimed = Some(Instant::now());
            n.snapshot_and_purge().await;
            let db = n.db.clone();
            drop(n);
            match tokio::task::spawn_blocking(move || db.reclaim()).await {
                Ok(Err(e)) => tracing::warn!(error = %e, "reclaiming space"),
                Err(e) => tracing::warn!(error = %e, "reclaiming space"),
                Ok(Ok(())) => {}
            }
        }
    }
}

/// Whether `txn` writes a value (deletes always go through).
pub(super) fn adds_data(txn: &pb::TxnRequest) -> bool {
    txn.success
        .iter()
        .chain(&txn.failure)
        .any(|op| matches!(op.op, Some(pb::op::Op::Put(_))))
}

/// Whether `cmd` writes a value (compaction frees space and always goes through).
fn command_adds_data(cmd: &pb::Command) -> bool {
    match &cmd.command {
        Some(pb::command::Command::Txn(t)) => adds_data(t),
        Some(pb::command::Command::Batch(b)) => b.txns.iter().any(adds_data),
        Some(pb::command::Command::Compact(_)) | None => false,
    }
}

impl RaftNode {
    /// Takes a Raft snapshot and purges the whole log up to it: under the space alarm the log
    /// (which holds every recent value once more) is the first thing to give back. A follower
    /// that far behind catches up by snapshot instead.
    async fn snapshot_and_purge(&self) {
        let applied = self.progress.borrow().applied_index;
        if self.raft.trigger().snapshot().await.is_err() {
            return;
        }
        let mut metrics = self.raft.metrics();
        let built = tokio::time::timeout(
            SNAPSHOT_WAIT,
            metrics.wait_for(|m| m.snapshot.is_some_and(|s| s.index >= applied)),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|m| m.snapshot);
        if let Some(snapshot) = built {
            if let Err(e) = self.raft.trigger().purge_log(snapshot.index).await {
                tracing::warn!(error = %e, "purging the log under the space alarm");
            }
        }
    }

    /// Why `cmd` may not be proposed now: the space alarm is up and it writes a value.
    pub(super) fn refuses_for_space(&self, cmd: &pb::Command) -> Option<String> {
        self.space_alarm().filter(|_| command_adds_data(cmd))
    }

    /// The space alarm, when it is up: the database size against the quota.
    pub fn space_alarm(&self) -> Option<String> {
        let quota = self.config.quota_bytes;
        let size = self.db_size.load(Ordering::Relaxed);
        (quota > 0 && size > quota).then(|| {
            format!(
                "database space exceeded: node {} stores {size} bytes, over its quota of {quota} bytes; \
                 writes that add data are refused until deletes and compaction bring it under the quota",
                self.id
            )
        })
    }
}
