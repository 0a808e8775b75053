//! Scheduled backups (the config's `backup` section), like k3s's etcd snapshots: every
//! interval the replica writes a backup of its store to the configured directory — the same
//! file `kuberaft snapshot save` makes, verified by `snapshot status` and restored by
//! `snapshot restore` — and removes all but the newest `keep` of its own files. Every replica
//! that has the section backs itself up; the scan runs on the blocking pool from one RocksDB
//! snapshot, so serving goes on.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kuberaft_raft::RaftNode;
use time::OffsetDateTime;

use crate::config::BackupConfig;
use crate::machinery::timestamp;
use crate::pki::layout::create_private;

/// Starts the schedule of `config` (its `dir` resolved) for `node`.
pub fn spawn(node: Arc<RaftNode>, config: BackupConfig) {
    let Some(dir) = config.dir.clone() else {
        return;
    };
    let every = Duration::from_secs(config.interval_seconds);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let prefix = format!("{}-node{}-", node.config().cluster_name, node.id);
            match take(&node, &dir, &prefix).await {
                Ok(path) => {
                    metrics::counter!("kuberaft_backups_total", "result" => "success").increment(1);
                    metrics::gauge!("kuberaft_backup_last_success_timestamp_seconds")
                        .set(OffsetDateTime::now_utc().unix_timestamp() as f64);
                    tracing::info!(file = %path.display(), "scheduled backup written");
                }
                Err(e) => {
                    metrics::counter!("kuberaft_backups_total", "result" => "failure").increment(1);
                    tracing::warn!(dir = %dir.display(), error = %e, "scheduled backup failed");
                }
            }
            if let Err(e) = prune(&dir, &prefix, config.keep) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove old backups");
            }
        }
    });
}

/// Writes one backup to `dir` as `PREFIX<UTC time>.snap` (through a `.part` file).
async fn take(node: &RaftNode, dir: &Path, prefix: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let stamp: String = timestamp::format_time(OffsetDateTime::now_utc())
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    let path = dir.join(format!("{prefix}{stamp}.snap"));
    let part = dir.join(format!("{prefix}{stamp}.snap.part"));
    let file = create_private(&part)?;
    let written = node.backup(std::io::BufWriter::new(file)).await;
    let synced = written.map_err(anyhow::Error::from).and_then(|(out, _)| {
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(())
    });
    if let Err(e) = synced {
        let _ = std::fs::remove_file(&part);
        return Err(e);
    }
    std::fs::rename(&part, &path)?;
    Ok(path)
}

/// Removes this replica's backups in `dir` beyond the newest `keep`, and `.part` files of
/// backups that never finished (called between backups, so none is being written).
fn prune(dir: &Path, prefix: &str, keep: usize) -> std::io::Result<()> {
    let mut done: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.starts_with(prefix) {
            continue;
        }
        if name.ends_with(".snap") {
            done.push(path);
        } else if name.ends_with(".snap.part") {
            std::fs::remove_file(&path)?;
        }
    }
    // The names end in a UTC time: sorted by name is sorted by age.
    done.sort();
    let extra = done.len().saturating_sub(keep);
    for old in &done[..extra] {
        std::fs::remove_file(old)?;
    }
    Ok(())
}
