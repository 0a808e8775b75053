//! Backups of a running replica (`kuberaft snapshot save` and the backup schedule).
//!
//! A backup first passes a read barrier, so it holds every write acknowledged before it was
//! asked for on any replica, then scans one RocksDB snapshot on the blocking pool: the replica
//! keeps serving while the file is written. [`restore`] makes a data dir of a new cluster from
//! a backup file.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use kuberaft_storage::{BackupOrigin, BackupSummary, Db, Identity, Mvcc, RestoreSummary, StorageError};

use super::{db_dir, RaftNode};
use crate::NodeError;

impl RaftNode {
    /// Writes a backup of this replica's store to `out` and returns `out` with what it holds.
    pub async fn backup<W: Write + Send + 'static>(&self, out: W) -> Result<(W, BackupSummary), NodeError> {
        self.read_barrier().await?;
        let origin = BackupOrigin {
            cluster_name: self.config.cluster_name.clone(),
            node_id: self.id,
            created_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
        };
        self.blocking_read(move |mvcc| {
            let mut out = out;
            let summary = mvcc.write_backup(&mut out, &origin)?;
            out.flush()?;
            Ok((out, summary))
        })
        .await
    }
}

/// Makes `data_dir` (absent or empty) the data dir of replica `identity` of a new cluster whose
/// state is the backup in `file`, its revision `bump` above the backup's and compacted up to
/// there. The file is verified before anything is written; on any failure the data dir is
/// removed again. The replica initialises its Raft state when it first starts.
pub fn restore(
    data_dir: &Path,
    identity: &Identity,
    file: &Path,
    bump: i64,
) -> Result<RestoreSummary, NodeError> {
    let empty = match std::fs::read_dir(data_dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(StorageError::Io(e).into()),
    };
    if !empty {
        return Err(NodeError::Config(format!(
            "{} is not empty; a backup is restored only into a new data dir",
            data_dir.display()
        )));
    }
    let restored = (|| {
        std::fs::create_dir_all(data_dir)?;
        let db = Db::open(&db_dir(data_dir), identity)?;
        Mvcc::new(db).restore_backup(|| std::fs::File::open(file), bump)
    })();
    if restored.is_err() {
        let _ = std::fs::remove_dir_all(data_dir);
    }
    Ok(restored?)
}
