//! Leadership transfer: `kuberaft move-leader` and a leader's graceful stop.
//!
//! openraft 0.9 has no transfer call, so the leader does it in steps: it lets the target come
//! close to its log while writes go on, stops accepting proposals (writes wait and retry, then
//! go to the new leader), lets the target catch up to its last log entry, stops its heartbeats, waits until the followers' leader lease
//! (`electionTimeoutMax` since the last heartbeat) has run out — before that, openraft's
//! followers refuse any vote — and then asks the target to campaign at once, instead of
//! waiting for a follower's election timeout — again each lease while a follower that received
//! entries late still refuses. If no new leader shows up, it resumes leading.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kuberaft_proto as pb;

use super::RaftNode;
use crate::NodeError;

/// How long the target may take to come close to the leader's log (proposals still flow).
const APPROACH: Duration = Duration::from_secs(5);
/// Entries the target may be behind before proposals stop for the last stretch.
const CLOSE_ENOUGH: u64 = 16;
/// How long the target may take to catch up once proposals stopped.
const CATCH_UP: Duration = Duration::from_secs(1);
/// How long the new leader may take to be elected before the transfer is given up.
const ELECTION: Duration = Duration::from_secs(3);
/// Margin past the followers' leader lease before the target campaigns.
const LEASE_MARGIN: Duration = Duration::from_millis(20);

impl RaftNode {
    /// Hands leadership to voter `to` (`None`: the voter with the most of the log) and returns
    /// the new leader's id once this replica sees it. Only the leader transfers.
    pub async fn transfer_leadership(&self, to: Option<u64>) -> Result<u64, NodeError> {
        let m = self.raft.metrics().borrow().clone();
        if m.current_leader != Some(self.id) {
            return Err(NodeError::Refused(format!("node {} is not the leader", self.id)));
        }
        let membership = m.membership_config.membership();
        let voters: BTreeSet<u64> = membership.voter_ids().filter(|v| *v != self.id).collect();
        let matched =
            |id: u64| -> Option<u64> { m.replication.as_ref()?.get(&id)?.as_ref().map(|l| l.index) };
        let target = match to {
            Some(id) if id == self.id => return Err(NodeError::Refused(format!("node {id} already leads"))),
            Some(id) if voters.contains(&id) => id,
            Some(id) => return Err(NodeError::Refused(format!("node {id} is not a voter"))),
            None => voters
                .iter()
                .copied()
                .max_by_key(|v| matched(*v))
                .ok_or_else(|| NodeError::Refused("there is no other voter to lead".into()))?,
        };
        let member = membership
            .get_node(&target)
            .cloned()
            .ok_or_else(|| NodeError::Refused(format!("node {target} is not a member")))?;
        // Let the target come close while writes go on, so they stop only for the last entries.
        if !self.wait_matched(target, CLOSE_ENOUGH, APPROACH).await {
            return Err(NodeError::Refused(format!(
                "node {target} did not catch up within {APPROACH:?}; leadership stays"
            )));
        }
        let started = Instant::now();
        self.transferring.store(true, Ordering::SeqCst);
        let outcome = self.hand_over(target, &member).await;
        self.raft.runtime_config().heartbeat(true);
        self.transferring.store(false, Ordering::SeqCst);
        let new_leader = outcome?;
        tracing::info!(
            from = self.id,
            to = new_leader,
            millis = started.elapsed().as_millis() as u64,
            "leadership transferred"
        );
        Ok(new_leader)
    }

    /// Waits until `target` has the log up to `slack` entries behind the leader's last one.
    async fn wait_matched(&self, target: u64, slack: u64, within: Duration) -> bool {
        let mut metrics = self.raft.metrics();
        let caught_up = metrics.wait_for(|m| {
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&target).cloned().flatten())
                .map(|l| l.index);
            match (m.last_log_index, matched) {
                (Some(last), Some(matched)) => matched.saturating_add(slack) >= last,
                _ => false,
            }
        });
        let outcome = matches!(tokio::time::timeout(within, caught_up).await, Ok(Ok(_)));
        outcome
    }

    /// The steps between refusing proposals and seeing a new leader.
    async fn hand_over(&self, target: u64, member: &crate::types::Member) -> Result<u64, NodeError> {
        if !self.wait_matched(target, 0, CATCH_UP).await {
            return Err(NodeError::Refused(format!(
                "node {target} did not catch up within {CATCH_UP:?}; leadership stays"
            )));
        }
        self.raft.runtime_config().heartbeat(false);
        tokio::time::sleep(self.config.election_timeout.1 + LEASE_MARGIN).await;
        let mut client = self
            .peers
            .client(&member.peer_addr)
            .map_err(|e| NodeError::Unavailable(e.to_string()))?;
        // A follower still inside its lease (one that received entries late) refuses the
        // first vote: the target campaigns again each lease until someone else leads or the
        // time is up.
        let deadline = tokio::time::Instant::now() + ELECTION;
        let mut leaders = self.leader_changes();
        let mut elected = None;
        while elected.is_none() && tokio::time::Instant::now() < deadline {
            client
                .campaign(self.peers.request(pb::CampaignRequest {}, ELECTION))
                .await
                .map_err(|s| {
                    NodeError::Unavailable(format!("node {target} cannot campaign: {}", s.message()))
                })?;
            let round = (tokio::time::Instant::now() + self.config.election_timeout.1).min(deadline);
            elected =
                match tokio::time::timeout_at(round, leaders.wait_for(|l| l.is_some_and(|l| l != self.id)))
                    .await
                {
                    Ok(Ok(leader)) => *leader,
                    _ => None,
                };
        }
        match elected {
            Some(leader) => Ok(leader),
            None => Err(NodeError::Unavailable(format!(
                "no new leader within {ELECTION:?}; this replica leads on"
            ))),
        }
    }
}
