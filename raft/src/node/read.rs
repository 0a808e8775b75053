//! Reads: linearizable read barriers from any replica, waiting for the apply of a log index,
//! and async reads of the local MVCC store.
//!
//! A read barrier asks the leader for a read index (the leader names it under its lease, or
//! confirms its leadership with a quorum; concurrent reads share confirmations, and a
//! follower's concurrent reads share their calls to the leader) and waits until this replica
//! has applied that far; a local read after it is linearizable. The store reads block on
//! RocksDB, so they run on tokio's blocking pool; callers need no
//! [`Mvcc`](kuberaft_storage::Mvcc) handle of their own.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kuberaft_proto as pb;
use kuberaft_storage::{Change, Mvcc, StorageError};
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::ServerState;

use super::{fatal, Progress, RaftNode};
use crate::read_index::{ReadIndexBatcher, RoundError};
use crate::types::Member;
use crate::NodeError;

impl RaftNode {
    /// On the leader: confirms leadership with a quorum and returns the log index a linearizable
    /// read must wait for. `Ok(None)` means "not the leader". Concurrent reads (local ones and
    /// those followers send) share confirmations, each from a round that started after it
    /// arrived.
    pub async fn read_index_local(&self) -> Result<Option<u64>, NodeError> {
        if let Some(index) = self.lease_read_index() {
            metrics::counter!("kuberaft_raft_lease_reads_total").increment(1);
            return Ok(Some(index));
        }
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

    /// The read index under the leader's lease (see `crate::lease`), when this replica leads,
    /// is not handing leadership over, still has the vote it leads with saved, and a quorum of
    /// every voter set acknowledged that vote recently: the last entry of its own log, which
    /// holds every entry committed or applied anywhere (waiting for it to be applied also waits
    /// for this leader's first entry of its term, as Raft's read index requires). `None`: ask
    /// a quorum instead.
    fn lease_read_index(&self) -> Option<u64> {
        if self.transferring.load(Ordering::SeqCst) {
            return None;
        }
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let vote = m.vote;
        let leads = m.state == ServerState::Leader
            && m.current_leader == Some(self.id)
            && vote.is_committed()
            && vote.leader_id().voted_for() == Some(self.id);
        if !leads || self.log.saved_vote() != Some(vote) {
            return None;
        }
        let voter_sets = m.membership_config.membership().get_joint_config();
        self.lease.held_since(self.id, &vote, voter_sets)?;
        Some(self.log.appended_index())
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
                self.remote_read_index(leader, &member, deadline).await
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

    /// Asks the leader's `ReadIndex` RPC for a read index, in a call that started after this
    /// one: concurrent reads on this replica share calls (a follower's reads cost the leader
    /// one call per round, not one each). `Ok(None)` means the peer was not the leader.
    async fn remote_read_index(
        &self,
        leader_id: u64,
        leader: &Member,
        deadline: Instant,
    ) -> Result<Option<u64>, NodeError> {
        let key = (leader_id, leader.peer_addr.clone());
        let batcher = {
            let mut current = self.remote_reads.lock().unwrap_or_else(|p| p.into_inner());
            match current.as_ref() {
                Some((k, b)) if *k == key => b.clone(),
                _ => {
                    let b = ReadIndexBatcher::default();
                    *current = Some((key, b.clone()));
                    b
                }
            }
        };
        let peers = self.peers.clone();
        let addr = leader.peer_addr.clone();
        let timeout = self.config.request_timeout;
        let round = move || {
            let (peers, addr) = (peers.clone(), addr.clone());
            async move {
                let mut client = peers
                    .client(&addr)
                    .map_err(|e| RoundError::Unavailable(e.to_string()))?;
                match client
                    .read_index(peers.request(pb::ReadIndexRequest {}, timeout))
                    .await
                {
                    Ok(r) => Ok(Some(r.into_inner().index)),
                    Err(s) if s.code() == tonic::Code::FailedPrecondition => Ok(None),
                    Err(s) => {
                        peers.check_fatal(&s);
                        Err(RoundError::Unavailable(s.message().to_string()))
                    }
                }
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, batcher.read_index(round)).await {
            Ok(answer) => Ok(answer?),
            Err(_) => Err(NodeError::Unavailable(
                "no read index from the leader in time".into(),
            )),
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

    /// Reads a key or prefix from this replica's store, at `req.revision` (the current revision
    /// when it is 0), from one consistent point in time. The read is local (serializable):
    /// call [`RaftNode::read_barrier`] first for a linearizable one. A revision older than the
    /// compacted one fails with [`StorageError::Compacted`], a newer one than the store's with
    /// [`StorageError::FutureRevision`] (both inside [`NodeError::Storage`]).
    pub async fn range(&self, req: pb::RangeRequest) -> Result<pb::RangeResponse, NodeError> {
        self.blocking_read(move |mvcc| mvcc.range(&req)).await
    }

    /// The changes of every revision in `(after, upto]`, in revision order, from this replica's
    /// event history (for consumers that resume from a revision). Fails with
    /// [`StorageError::Compacted`] (inside [`NodeError::Storage`]) when `after` is older than
    /// the compacted revision.
    pub async fn changes(&self, after: i64, upto: i64) -> Result<Vec<(i64, Vec<Change>)>, NodeError> {
        self.blocking_read(move |mvcc| mvcc.changes(after, upto)).await
    }

    /// `(current revision, compacted revision)` of this replica's store, read from the store
    /// itself. ([`RaftNode::progress`] has the same numbers as of the last published apply,
    /// without touching the disk.)
    pub async fn revisions(&self) -> Result<(i64, i64), NodeError> {
        self.blocking_read(|mvcc| mvcc.revisions()).await
    }

    /// Runs a blocking store read on tokio's blocking pool.
    pub(super) async fn blocking_read<T, F>(&self, read: F) -> Result<T, NodeError>
    where
        T: Send + 'static,
        F: FnOnce(&Mvcc) -> Result<T, StorageError> + Send + 'static,
    {
        let mvcc = self.mvcc.clone();
        Ok(tokio::task::spawn_blocking(move || read(&mvcc)).await??)
    }
}
