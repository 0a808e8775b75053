//! Writes: a command is proposed on the leader — directly when this replica leads, otherwise
//! forwarded to the leader over the peer transport — and the caller waits until this replica
//! has applied it, so a replica reads its own writes. Transactions go through the replica's
//! proposal batching (`proposals`) first.

use std::time::{Duration, Instant};

use kuberaft_proto as pb;
use kuberaft_storage::mvcc::validate_txn;
use openraft::error::{ClientWriteError, RaftError};

use super::{fatal, RaftNode};
use crate::types::{Command, Member};
use crate::NodeError;

impl RaftNode {
    /// Proposes `cmd` on this replica, which must be the leader. Returns the result and the log
    /// index it was applied at. `Ok(None)` means "not the leader; nothing was proposed".
    pub async fn propose_local(
        &self,
        cmd: pb::Command,
    ) -> Result<Option<(pb::CommandResult, u64)>, NodeError> {
        match &cmd.command {
            Some(pb::command::Command::Txn(t)) => validate_txn(t)?,
            Some(pb::command::Command::Batch(b)) => b.txns.iter().try_for_each(validate_txn)?,
            Some(pb::command::Command::Compact(_)) | None => {}
        }
        if self.transferring.load(std::sync::atomic::Ordering::SeqCst) {
            // Handing leadership over: the caller waits for the new leader.
            return Ok(None);
        }
        if let Some(why) = self.refuses_for_space(&cmd) {
            return Err(NodeError::NoSpace(why));
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
    /// replica has applied it. A transaction is validated here and then proposed in a batch
    /// with the others waiting on this replica; other commands are proposed on their own.
    pub async fn write(&self, cmd: pb::Command) -> Result<pb::CommandResult, NodeError> {
        match cmd.command {
            Some(pb::command::Command::Txn(t)) => {
                validate_txn(&t)?;
                self.proposals.submit(t).await
            }
            command => Ok(self.write_command(pb::Command { command }).await?.0),
        }
    }

    /// Proposes a command a follower forwarded: its transactions join this leader's batching,
    /// next to each other; other commands are proposed as they are. Returns the result and the
    /// log index it was applied at; `Ok(None)` means "not the leader; nothing was proposed".
    pub async fn propose_forwarded(
        &self,
        cmd: pb::Command,
    ) -> Result<Option<(pb::CommandResult, u64)>, NodeError> {
        let (txns, lone) = match cmd.command {
            Some(pb::command::Command::Txn(t)) => (vec![t], true),
            Some(pb::command::Command::Batch(b)) => (b.txns, false),
            command => return self.propose_local(pb::Command { command }).await,
        };
        txns.iter().try_for_each(validate_txn)?;
        if !self.is_leader() || self.transferring.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        let (mut results, index) = self.proposals.submit_group(txns).await?;
        let result = match (lone, results.pop()) {
            (true, Some(result)) if results.is_empty() => result,
            (true, _) => {
                return Err(NodeError::Raft(
                    "a forwarded transaction got no single result".into(),
                ))
            }
            (false, last) => {
                results.extend(last);
                pb::CommandResult {
                    result: Some(pb::command_result::Result::Batch(pb::BatchResults { results })),
                }
            }
        };
        Ok(Some((result, index)))
    }

    /// Proposes `cmd` through the leader and waits until this replica has applied it; returns
    /// the result and the log index it was applied at. A command is retried only when it was
    /// certainly not proposed.
    pub(super) async fn write_command(
        &self,
        cmd: pb::Command,
    ) -> Result<(pb::CommandResult, u64), NodeError> {
        let deadline = Instant::now() + self.config.request_timeout;
        loop {
            let (leader, member) = self.wait_leader(deadline).await?;
            let started = Instant::now();
            let (outcome, path) = if leader == self.id {
                (self.propose_local(cmd.clone()).await?, "local")
            } else {
                (self.forward(&member, cmd.clone(), deadline).await?, "forwarded")
            };
            if let Some((result, index)) = outcome {
                let committed = Instant::now();
                metrics::histogram!("kuberaft_raft_proposal_seconds", "path" => path)
                    .record((committed - started).as_secs_f64());
                self.wait_applied(index, deadline).await?;
                metrics::histogram!("kuberaft_raft_apply_wait_seconds", "path" => path)
                    .record(committed.elapsed().as_secs_f64());
                return Ok((result, index));
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

    /// Sends `cmd` to the leader's `Forward` RPC. `Ok(None)` means the peer was not the leader
    /// (nothing was proposed); a transport failure leaves the outcome unknown, so it is not
    /// retried.
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
            Err(s) if s.code() == tonic::Code::ResourceExhausted => {
                Err(NodeError::NoSpace(s.message().to_string()))
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
}
