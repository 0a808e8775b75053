//! One running replica: Raft, its storage, and the operations the layers above use.
//!
//! This module holds the replica itself — how it starts and stops, whether it is ready, who
//! leads — and the accessors; the operations are split by job:
//!
//! * `write`: [`RaftNode::write`] proposes a command on the leader, or forwards it to the
//!   leader from a follower, then waits until this replica has applied it (read-your-writes per
//!   replica);
//! * `proposals`: transactions written through this replica while its earlier proposals are in
//!   flight are batched into one log entry;
//! * `read`: [`RaftNode::read_barrier`] gives linearizable reads on any replica (the leader
//!   names a log index, under its lease or after confirming its leadership with a quorum;
//!   this replica waits until it applied that far), and async reads of the MVCC store ([`RaftNode::range`],
//!   [`RaftNode::changes`], [`RaftNode::revisions`]) that run off the async workers;
//! * `compaction`: the leader proposes compaction on a schedule so that at least the
//!   configured history window is kept; compaction is a log command, so every replica compacts
//!   identically;
//! * `status`: one replica's row of `kuberaft endpoint status`;
//! * `backup`: a consistent backup of the store while the replica serves;
//! * `membership`: adding, promoting and removing members, joining a cluster, and stopping a
//!   replica that was removed;
//! * `transfer`: handing leadership to another voter (`move-leader`, a leader's graceful stop);
//! * `space`: the database size quota and its alarm.

pub mod backup;
mod compaction;
pub mod membership;
mod proposals;
mod read;
mod space;
mod status;
mod transfer;
mod write;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kuberaft_storage::log::LogStore;
use kuberaft_storage::{Db, Identity, Mvcc, StorageError};
use openraft::error::{Fatal, InitializeError, RaftError};
use openraft::{ServerState, SnapshotPolicy};
use tokio::sync::{broadcast, mpsc, watch};

use crate::lease::Lease;
use crate::log_store::RaftLog;
use crate::network::Peers;
use crate::read_index::ReadIndexBatcher;
use crate::state_machine::{ApplyEvent, StateMachine};
use crate::types::{Member, Raft};
use crate::NodeError;

/// A fatal openraft error as the node reports it: Raft stopped because the replica is
/// shutting down is a retryable unavailability (`503` for API clients, who go to another
/// replica or retry), anything else an internal error.
fn fatal(e: Fatal<u64>) -> NodeError {
    match e {
        Fatal::Stopped => NodeError::ShuttingDown,
        other => NodeError::Raft(other.to_string()),
    }
}

/// How far this replica's state machine has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Index of the last applied log entry.
    pub applied_index: u64,
    /// Store revision after the last applied entry.
    pub revision: i64,
    /// Compacted revision.
    pub compacted: i64,
}

/// Everything a replica needs to start.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This replica's node id (> 0, unique in the cluster).
    pub id: u64,
    /// Cluster name; peers of another cluster are refused.
    pub cluster_name: String,
    /// Where the database and snapshots live.
    pub data_dir: PathBuf,
    /// The initial members (used only to initialise a brand-new cluster).
    pub members: BTreeMap<u64, Member>,
    /// Raft heartbeat interval.
    pub heartbeat: Duration,
    /// Raft election timeout range.
    pub election_timeout: (Duration, Duration),
    /// Take a snapshot after this many log entries since the last one.
    pub snapshot_logs: u64,
    /// Log entries kept behind a snapshot (for followers that are only a little behind).
    pub logs_kept_after_snapshot: u64,
    /// Keep at least this much history before the leader compacts it.
    pub compaction_retention: Duration,
    /// How often the leader considers compacting.
    pub compaction_interval: Duration,
    /// How long a write or a read barrier may wait for a leader before it fails.
    pub request_timeout: Duration,
    /// Mutual TLS towards peers (the cluster CA and this replica's peer certificate); `None`
    /// speaks plaintext (development only).
    pub peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// The certificates the replica serves with and when they expire, for its status.
    pub certificates: Vec<kuberaft_proto::CertificateExpiry>,
    /// Join the cluster through the replica at this peer address (host:port) as a learner,
    /// instead of initialising a new cluster from `members`.
    pub join: Option<String>,
    /// Database size above which writes that add data are refused (0: no quota).
    pub quota_bytes: u64,
    /// The merge functions transactions may name (see `kuberaft_storage::merge`); every
    /// replica of a cluster must register the same ones.
    pub mergers: kuberaft_storage::Mergers,
}

impl NodeConfig {
    /// This replica's own member record.
    pub fn me(&self) -> Option<&Member> {
        self.members.get(&self.id)
    }
}

/// A running replica.
pub struct RaftNode {
    /// This replica's node id.
    pub id: u64,
    /// The openraft instance (private: callers use the node's own API).
    pub(crate) raft: Raft,
    config: NodeConfig,
    db: Db,
    mvcc: Mvcc,
    log: RaftLog,
    progress: watch::Receiver<Progress>,
    events: broadcast::Sender<Arc<ApplyEvent>>,
    peers: Peers,
    /// The current leader's id, as openraft's metrics report it (see [`RaftNode::leader_changes`]).
    leader: watch::Receiver<Option<u64>>,
    /// Set once this replica has applied everything it knew to be committed; from then on a
    /// lag of entries in flight does not make it unready.
    caught_up: AtomicBool,
    /// Shares leadership confirmations among concurrent linearizable reads.
    read_batch: ReadIndexBatcher,
    /// The leader's lease: read indexes without a confirmation round (see `lease`).
    lease: Arc<Lease>,
    /// On a follower: shares the leader's `ReadIndex` calls among concurrent reads, one
    /// batcher per leader (its id and peer address), so that a round never asks a former one.
    remote_reads: std::sync::Mutex<Option<((u64, String), ReadIndexBatcher)>>,
    /// Serialises membership changes made through this replica.
    membership_lock: tokio::sync::Mutex<()>,
    /// Set while this leader hands leadership over: it proposes nothing new meanwhile.
    transferring: AtomicBool,
    /// The database size last measured (see `space`).
    db_size: std::sync::atomic::AtomicU64,
    /// Transactions waiting to be proposed in a batch (see `proposals`).
    proposals: proposals::Proposals,
}

/// Once caught up, a replica stays ready while it is at most this many committed entries
/// behind (entries committed but still being applied are normal under writes; a replica
/// further behind, such as one catching up after a partition, is not ready).
const READY_MAX_LAG: u64 = 1_000;

/// Capacity of the apply stream; a subscriber that falls further behind is told it lagged.
const APPLY_STREAM_CAPACITY: usize = 16 * 1024;

impl RaftNode {
    /// Opens storage, starts Raft and, for a brand-new cluster, initialises it with the
    /// configured members. Returns the node and a channel that reports fatal conditions (such
    /// as a peer of another cluster), after which the process should exit.
    pub async fn start(
        config: NodeConfig,
    ) -> Result<(Arc<RaftNode>, mpsc::UnboundedReceiver<String>), NodeError> {
        if config.id == 0 {
            return Err(NodeError::Config("node id must be greater than 0".into()));
        }
        if config.me().is_none() {
            return Err(NodeError::Config(format!(
                "node id {} is not among the configured members",
                config.id
            )));
        }
        let identity = Identity {
            cluster_name: config.cluster_name.clone(),
            node_id: config.id,
        };
        let db = Db::open(&db_dir(&config.data_dir), &identity)?;
        let log = RaftLog::new(LogStore::new(db.clone())?);
        let lease = Arc::new(Lease::new(config.election_timeout.1, log.stored_vote().is_some()));
        let mvcc = Mvcc::new(db.clone()).with_mergers(config.mergers.clone());
        let (progress_tx, progress) = watch::channel(Progress::default());
        let events = broadcast::channel(APPLY_STREAM_CAPACITY).0;
        let sm = StateMachine::new(
            mvcc.clone(),
            config.data_dir.join("snapshots"),
            progress_tx,
            events.clone(),
        )?;
        let (fatal_tx, fatal_rx) = mpsc::unbounded_channel();
        let peers = Peers::new(
            &config.cluster_name,
            config.peer_tls.clone(),
            fatal_tx.clone(),
            lease.clone(),
        );
        let raft_config = openraft::Config {
            cluster_name: config.cluster_name.clone(),
            heartbeat_interval: config.heartbeat.as_millis() as u64,
            election_timeout_min: config.election_timeout.0.as_millis() as u64,
            election_timeout_max: config.election_timeout.1.as_millis() as u64,
            install_snapshot_timeout: 2_000,
            max_payload_entries: 512,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_logs),
            max_in_snapshot_log_to_keep: config.logs_kept_after_snapshot,
            snapshot_max_chunk_size: 4 * 1024 * 1024,
            // A replica restarted on old data stays out of elections for a while (see `lease`).
            enable_elect: !lease.refuses_votes(),
            ..Default::default()
        }
        .validate()
        .map_err(|e| NodeError::Config(e.to_string()))?;
        let raft = Raft::new(config.id, Arc::new(raft_config), peers.clone(), log.clone(), sm)
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let joining = membership::joining_marker(&config.data_dir);
        if initialized {
            if joining.exists() {
                std::fs::remove_file(&joining).map_err(StorageError::Io)?;
            }
        } else if config.join.is_some() {
            // From now on this data dir only ever joins: a restart before the leader reached it
            // must not initialise a cluster of its own.
            std::fs::write(&joining, b"").map_err(StorageError::Io)?;
        } else if joining.exists() {
            return Err(NodeError::Config(format!(
                "{} was started with --join and has not joined its cluster yet; start it with --join again",
                config.data_dir.display()
            )));
        } else {
            match raft.initialize(config.members.clone()).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(NodeError::Raft(e.to_string())),
            }
        }
        if lease.refuses_votes() {
            let (raft, quiet) = (raft.clone(), lease.quiet_period());
            tokio::spawn(async move {
                tokio::time::sleep(quiet).await;
                raft.runtime_config().elect(true);
            });
        }
        membership::watch_removal(&raft, config.id, config.cluster_name.clone(), fatal_tx.clone());
        let leader = watch_leader(&raft);
        let mut batching = None;
        let node = Arc::new_cyclic(|weak| {
            let (proposals, batch_loop) = proposals::Proposals::start(weak.clone());
            batching = Some(batch_loop);
            RaftNode {
                id: config.id,
                raft,
                config,
                db,
                mvcc,
                log,
                progress,
                events,
                peers,
                leader,
                caught_up: AtomicBool::new(false),
                read_batch: ReadIndexBatcher::default(),
                lease,
                remote_reads: std::sync::Mutex::new(None),
                membership_lock: tokio::sync::Mutex::new(()),
                transferring: AtomicBool::new(false),
                db_size: std::sync::atomic::AtomicU64::new(0),
                proposals,
            }
        });
        if let Some(batch_loop) = batching {
            tokio::spawn(batch_loop);
        }
        tokio::spawn(compaction::compaction_loop(Arc::downgrade(&node)));
        tokio::spawn(space::space_loop(Arc::downgrade(&node)));
        if let (false, Some(seed)) = (initialized, &node.config.join) {
            membership::join(Arc::downgrade(&node), seed.clone(), fatal_tx);
        }
        Ok((node, fatal_rx))
    }

    /// openraft's view of this replica (role, term, leader, log indexes, running state), as it
    /// changes: for health checks and gauges.
    pub fn metrics(&self) -> watch::Receiver<openraft::RaftMetrics<u64, Member>> {
        self.raft.metrics()
    }

    /// The shared peer channels (for the gRPC services).
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// The replica's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// A watch of this replica's applied progress.
    pub fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.clone()
    }

    /// Subscribes to the apply stream: every applied revision, in order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ApplyEvent>> {
        self.events.subscribe()
    }

    /// Whether this replica is the Raft leader right now (openraft's view of its own role).
    /// Leadership can end at any moment: use this to decide who runs leader-only background
    /// work, not as a guarantee for a read or write.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
    }

    /// A watch of the current leader's id (`None` while no leader is known). It changes only
    /// when the leader does; one background task per replica feeds it from openraft's metrics.
    pub fn leader_changes(&self) -> watch::Receiver<Option<u64>> {
        self.leader.clone()
    }

    /// The known leader and its member record.
    fn leader(&self) -> Option<(u64, Member)> {
        let m = self.raft.metrics().borrow().clone();
        let leader = m.current_leader?;
        let member = m.membership_config.membership().get_node(&leader)?.clone();
        Some((leader, member))
    }

    /// Waits until a leader is known (or the deadline passes).
    async fn wait_leader(&self, deadline: Instant) -> Result<(u64, Member), NodeError> {
        let mut metrics = self.raft.metrics();
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NodeError::NoLeader);
            }
            match tokio::time::timeout(left, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(NodeError::ShuttingDown),
                Err(_) => return Err(NodeError::NoLeader),
            }
        }
    }

    /// Whether this replica can serve: its database is under its quota, it knows a leader and
    /// has applied everything it knew to be committed (and, since then, stays within
    /// [`READY_MAX_LAG`] entries of it). The error says why not.
    pub fn ready(&self) -> Result<(), String> {
        let m = self.raft.metrics().borrow().clone();
        if m.running_state.is_err() {
            return Err("raft has stopped".into());
        }
        if m.current_leader.is_none() {
            return Err("no leader is known".into());
        }
        if let Some(why) = self.space_alarm() {
            return Err(why);
        }
        let committed = self.log.committed().map_or(0, |l| l.index);
        let applied = self.progress.borrow().applied_index;
        let allowed = if self.caught_up.load(Ordering::Relaxed) {
            READY_MAX_LAG
        } else {
            0
        };
        if applied.saturating_add(allowed) < committed {
            self.caught_up.store(false, Ordering::Relaxed);
            return Err(format!(
                "applied index {applied} is behind the commit index {committed} this replica knows"
            ));
        }
        self.caught_up.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Stops Raft.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}

/// Where a replica's database lives inside its data dir.
fn db_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("db")
}

/// Starts the task behind [`RaftNode::leader_changes`]: it waits on openraft's metrics watch and
/// publishes the leader id when it differs from the last one published. The task ends when Raft
/// stops (its metrics watch closes) or when nobody holds a receiver any more (the node is gone).
fn watch_leader(raft: &Raft) -> watch::Receiver<Option<u64>> {
    let mut metrics = raft.metrics();
    let (tx, rx) = watch::channel(metrics.borrow_and_update().current_leader);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = metrics.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = tx.closed() => return,
            }
            let leader = metrics.borrow_and_update().current_leader;
            tx.send_if_modified(|current| {
                let modified = *current != leader;
                *current = leader;
                modified
            });
        }
    });
    rx
}
