//! One running replica: Raft, its storage, and the operations the layers above use.
//!
//! * [`RaftNode::write`] proposes a command on the leader, or forwards it to the leader from a
//!   follower, then waits until this replica has applied it (read-your-writes per replica).
//! * [`RaftNode::read_barrier`] gives linearizable reads on any replica: the leader confirms its
//!   leadership with a quorum and names a log index; this replica waits until it applied that far.
//! * The leader proposes compaction on a schedule so that at least the configured history
//!   window is kept; compaction is a log command, so every replica compacts identically.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kuberaft_proto as pb;
use kuberaft_storage::log::LogStore;
use kuberaft_storage::mvcc::validate_txn;
use kuberaft_storage::{Db, Identity, Mvcc};
use openraft::error::{CheckIsLeaderError, ClientWriteError, Fatal, InitializeError, RaftError};
use openraft::{ServerState, SnapshotPolicy};
use tokio::sync::{broadcast, mpsc, watch};

use crate::log_store::RaftLog;
use crate::network::Peers;
use crate::read_index::{ReadIndexBatcher, RoundError};
use crate::state_machine::{ApplyEvent, StateMachine};
use crate::types::{Command, Member, Raft};
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
    /// The openraft instance.
    pub raft: Raft,
    config: NodeConfig,
    db: Db,
    mvcc: Mvcc,
    log: RaftLog,
    progress: watch::Receiver<Progress>,
    events: broadcast::Sender<Arc<ApplyEvent>>,
    peers: Peers,
    /// Set once this replica has applied everything it knew to be committed; from then on a
    /// lag of entries in flight does not make it unready.
    caught_up: AtomicBool,
    /// Shares leadership confirmations among concurrent linearizable reads.
    read_batch: ReadIndexBatcher,
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
        let db = Db::open(&config.data_dir.join("db"), &identity)?;
        let log = RaftLog::new(LogStore::new(db.clone())?);
        let mvcc = Mvcc::new(db.clone());
        let (progress_tx, progress) = watch::channel(Progress::default());
        let events = broadcast::channel(APPLY_STREAM_CAPACITY).0;
        let sm = StateMachine::new(
            mvcc.clone(),
            config.data_dir.join("snapshots"),
            progress_tx,
            events.clone(),
        )?;
        let (fatal_tx, fatal_rx) = mpsc::unbounded_channel();
        let peers = Peers::new(&config.cluster_name, fatal_tx);
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
        if !initialized {
            match raft.initialize(config.members.clone()).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(NodeError::Raft(e.to_string())),
            }
        }
        let node = Arc::new(RaftNode {
            id: config.id,
            raft,
            config,
            db,
            mvcc,
            log,
            progress,
            events,
            peers,
            caught_up: AtomicBool::new(false),
            read_batch: ReadIndexBatcher::default(),
        });
        tokio::spawn(compaction_loop(Arc::downgrade(&node)));
        Ok((node, fatal_rx))
    }

    /// The MVCC store (for reads; writes go through [`RaftNode::write`]).
    pub fn mvcc(&self) -> &Mvcc {
        &self.mvcc
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

    /// Proposes `cmd` on this replica, which must be the leader. Returns the result and the log
    /// index it was applied at. `Ok(None)` means "not the leader; nothing was proposed".
    pub async fn propose_local(
        &self,
        cmd: pb::Command,
    ) -> Result<Option<(pb::CommandResult, u64)>, NodeError> {
        if let Some(pb::command::Command::Txn(t)) = &cmd.command {
            validate_txn(t)?;
        }
        metrics::counter!("kuberaft_raft_proposals_total").increment(1);
        match self.raft.client_write(Command(cmd)).await {
            Ok(resp) => Ok(Some((resp.data.0, resp.log_id.index))),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => Ok(None),
            Err(RaftError::APIError(e)) => Err(NodeError::Raft(e.to_string())),
            Err(RaftError::Fatal(e)) => Err(fatal(e)),
        }
    }

    /// Replicates `cmd` through the leader (forwarding from a follower) and waits until this
    /// replica has applied it. A command is retried only when it was certainly not proposed.
    pub async fn write(&self, cmd: pb::Command) -> Result<pb::CommandResult, NodeError> {
        if let Some(pb::command::Command::Txn(t)) = &cmd.command {
            validate_txn(t)?;
        }
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            let (leader, member) = self.wait_leader(deadline).await?;
            let outcome = if leader == self.id {
                self.propose_local(cmd.clone()).await?
            } else {
                self.forward(&member, cmd.clone(), deadline).await?
            };
            if let Some((result, index)) = outcome {
                self.wait_applied(index, deadline).await?;
                return Ok(result);
            }
            if Instant::now() >= deadline {
                return Err(NodeError::Timeout(
                    self.config.request_timeout,
                    "a leader to accept the write",
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn forward(
        &self,
        leader: &Member,
        cmd: pb::Command,
        deadline: Instant,
    ) -> Result<Option<(pb::CommandResult, u64)>, NodeError> {
        let mut client = self
            .peers
            .client(&leader.peer_addr)
            .map_err(|e| NodeError::Unavailable(e.to_string()))?;
        let timeout = deadline.saturating_duration_since(Instant::now());
        let req = self
            .peers
            .request(pb::ForwardRequest { command: Some(cmd) }, timeout);
        match client.forward(req).await {
            Ok(resp) => {
                let resp = resp.into_inner();
                Ok(Some((resp.result.unwrap_or_default(), resp.index)))
            }
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(None),
            Err(s) if s.code() == tonic::Code::InvalidArgument => {
                Err(NodeError::Rejected(s.message().to_string()))
            }
            Err(s) => {
                self.peers.check_fatal(&s);
                Err(NodeError::Unavailable(format!(
                    "forwarding to {}: {}",
                    leader.peer_addr,
                    s.message()
                )))
            }
        }
    }

    /// On the leader: confirms leadership with a quorum and returns the log index a linearizable
    /// read must wait for. `Ok(None)` means "not the leader". Concurrent reads (local ones and
    /// those followers send) share confirmations, each from a round that started after it
    /// arrived.
    pub async fn read_index_local(&self) -> Result<Option<u64>, NodeError> {
        let raft = self.raft.clone();
        let round = move || {
            let raft = raft.clone();
            async move {
                match raft.get_read_log_id().await {
                    Ok((read, _)) => Ok(Some(read.map_or(0, |l| l.index))),
                    Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))) => Ok(None),
                    Err(RaftError::APIError(e @ CheckIsLeaderError::QuorumNotEnough(_))) => {
                        Err(RoundError::Unavailable(e.to_string()))
                    }
                    Err(RaftError::Fatal(e)) => Err(match fatal(e) {
                        NodeError::ShuttingDown => RoundError::ShuttingDown,
                        other => RoundError::Raft(other.to_string()),
                    }),
                }
            }
        };
        Ok(self.read_batch.read_index(round).await?)
    }

    /// Waits until this replica has applied every write committed before the call: after it
    /// returns, a local read is linearizable. Returns the applied progress.
    pub async fn read_barrier(&self) -> Result<Progress, NodeError> {
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            let (leader, member) = self.wait_leader(deadline).await?;
            let index = if leader == self.id {
                self.read_index_local().await
            } else {
                self.remote_read_index(&member, deadline).await
            };
            match index {
                Ok(Some(index)) => return self.wait_applied(index, deadline).await,
                // Reads are idempotent: retry on any failure until the deadline.
                Ok(None) | Err(NodeError::Unavailable(_)) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None) => return Err(NodeError::NoLeader),
                Err(e) => return Err(e),
            }
        }
    }

    async fn remote_read_index(&self, leader: &Member, deadline: Instant) -> Result<Option<u64>, NodeError> {
        let mut client = self
            .peers
            .client(&leader.peer_addr)
            .map_err(|e| NodeError::Unavailable(e.to_string()))?;
        let timeout = deadline.saturating_duration_since(Instant::now());
        match client
            .read_index(self.peers.request(pb::ReadIndexRequest {}, timeout))
            .await
        {
            Ok(r) => Ok(Some(r.into_inner().index)),
            Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(None),
            Err(s) => {
                self.peers.check_fatal(&s);
                Err(NodeError::Unavailable(s.message().to_string()))
            }
        }
    }

    /// Waits until the state machine has applied log index `index`.
    pub async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<Progress, NodeError> {
        let mut rx = self.progress.clone();
        let left = deadline.saturating_duration_since(Instant::now());
        let waited = tokio::time::timeout(left, async {
            rx.wait_for(|p| p.applied_index >= index).await.map(|p| *p)
        })
        .await;
        match waited {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err(NodeError::ShuttingDown),
            Err(_) => Err(NodeError::Timeout(
                self.config.request_timeout,
                "the replica to apply the log",
            )),
        }
    }

    /// Whether this replica can serve: it knows a leader and has applied everything it knew to
    /// be committed (and, since then, stays within [`READY_MAX_LAG`] entries of it). The error
    /// says why not.
    pub fn ready(&self) -> Result<(), String> {
        let m = self.raft.metrics().borrow().clone();
        if m.running_state.is_err() {
            return Err("raft has stopped".into());
        }
        if m.current_leader.is_none() {
            return Err("no leader is known".into());
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

    /// This replica's status (one row of `kuberaft endpoint status`).
    pub async fn status(&self, with_hash: bool) -> Result<pb::StatusResponse, NodeError> {
        let m = self.raft.metrics().borrow().clone();
        let progress = *self.progress.borrow();
        let (log_entries, last_log_index) = self.log.stats();
        let me = self.config.me().cloned().unwrap_or_default();
        let role = match m.state {
            ServerState::Leader => "leader",
            ServerState::Follower => "follower",
            ServerState::Candidate => "candidate",
            ServerState::Learner => "learner",
            ServerState::Shutdown => "shutdown",
        };
        let membership = m.membership_config.membership();
        let members = membership
            .nodes()
            .map(|(id, node)| pb::Member {
                id: *id,
                peer_addr: node.peer_addr.clone(),
                api_addr: node.api_addr.clone(),
                voter: membership.voter_ids().any(|v| v == *id),
            })
            .collect();
        let mut status = pb::StatusResponse {
            id: self.id,
            cluster_name: self.config.cluster_name.clone(),
            peer_addr: me.peer_addr,
            api_addr: me.api_addr,
            role: role.into(),
            term: m.current_term,
            leader_id: m.current_leader.unwrap_or(0),
            has_leader: m.current_leader.is_some(),
            revision: progress.revision,
            compacted_revision: progress.compacted,
            commit_index: self.log.committed().map_or(0, |l| l.index),
            applied_index: progress.applied_index,
            log_entries,
            db_size_bytes: self.db.size_on_disk(),
            members,
            last_log_index,
            snapshot_index: m.snapshot.map_or(0, |l| l.index),
            ..Default::default()
        };
        if with_hash {
            let mvcc = self.mvcc.clone();
            let (rev, hash) = tokio::task::spawn_blocking(move || mvcc.state_hash())
                .await
                .map_err(|e| NodeError::Raft(e.to_string()))??;
            status.hash_revision = rev;
            status.state_hash = hash;
        }
        Ok(status)
    }

    /// Stops Raft.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}

/// Every replica samples `(time, revision)`; the leader proposes compaction to the newest
/// revision that is older than the retention window. A replica that just became leader only
/// knows the samples since it started, so it compacts later rather than too early.
async fn compaction_loop(node: std::sync::Weak<RaftNode>) {
    let mut samples: VecDeque<(Instant, i64)> = VecDeque::new();
    loop {
        let Some(n) = node.upgrade() else { return };
        let interval = n.config.compaction_interval;
        let retention = n.config.compaction_retention;
        let p = *n.progress.borrow();
        let now = Instant::now();
        samples.push_back((now, p.revision));
        let mut target = None;
        while let Some(&(t, rev)) = samples.front() {
            if now.duration_since(t) >= retention {
                target = Some((t, rev));
                samples.pop_front();
            } else {
                break;
            }
        }
        if let Some((t, rev)) = target {
            // Keep the sample: it is still the newest revision outside the window.
            samples.push_front((t, rev));
            let is_leader = n.raft.metrics().borrow().state == ServerState::Leader;
            if is_leader && rev > p.compacted {
                let cmd = pb::Command {
                    command: Some(pb::command::Command::Compact(pb::CompactRequest {
                        revision: rev,
                    })),
                };
                match n.propose_local(cmd).await {
                    Ok(_) => tracing::info!(revision = rev, "compacted history"),
                    Err(e) => tracing::warn!(error = %e, "compaction proposal failed"),
                }
            }
        }
        drop(n);
        tokio::time::sleep(interval).await;
    }
}
