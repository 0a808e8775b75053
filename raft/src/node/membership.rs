//! Membership changes: `kuberaft member list | add | promote | remove` and `serve --join`.
//!
//! Every request goes to the leader (a follower forwards it once, to the leader's admin
//! service). The leader changes membership with openraft's joint consensus, one change at a
//! time, and refuses what would hurt the cluster: promoting a learner that has not caught up,
//! and removing a voter when the voters left could not form a quorum among those that answer.
//!
//! A removed replica stops: when its own membership no longer has it, or when a peer whose
//! committed membership no longer has it refuses its vote request (see
//! [`RaftNode::refuses_candidate`] and the network's fatal channel).
//!
//! A new replica starts with an empty data dir and `serve --join ADDRESS`: it never initialises
//! a cluster of its own; it asks the replica at ADDRESS to add it as a learner and then catches
//! up from the leader (from the log, or by snapshot). A `JOINING` marker in its data dir keeps
//! a restart before the first replication from bootstrapping a one-replica cluster instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Weak;
use std::time::{Duration, Instant};

use kuberaft_proto as pb;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::ChangeMembers;
use pb::member_request::Op;

use super::{fatal, RaftNode};
use crate::network::REMOVED_MEMBER;
use crate::types::Member;
use crate::NodeError;

/// A learner further than this many log entries behind the leader is not promoted.
pub const PROMOTE_MAX_LAG: u64 = 100;

/// Metadata that marks a membership request one replica forwarded to the leader (it is not
/// forwarded again).
const FORWARDED_HEADER: &str = "x-kuberaft-forwarded";

/// The least time a forwarded request may take on the leader (a transfer waits out the
/// followers' lease and an election; a removal probes the voters).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(15);

/// How long the leader waits for a voter to answer before it counts it as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The marker file of a data dir that joins an existing cluster rather than starting one.
pub(super) fn joining_marker(data_dir: &Path) -> PathBuf {
    data_dir.join("JOINING")
}

fn change_err(e: RaftError<u64, ClientWriteError<u64, Member>>) -> NodeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => {
            NodeError::Unavailable("leadership changed during the membership change; retry".into())
        }
        // Another change still being committed passes; the caller retries.
        RaftError::APIError(ClientWriteError::ChangeMembershipError(ChangeMembershipError::InProgress(
            e,
        ))) => NodeError::Unavailable(format!("{e}; retry when it is done")),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => NodeError::Refused(e.to_string()),
        RaftError::Fatal(e) => fatal(e),
    }
}

impl RaftNode {
    /// Lists the members, or changes them and lists the result (on the leader; a follower
    /// forwards the request unless it was forwarded to it already).
    pub async fn members(
        &self,
        req: pb::MemberRequest,
        forwarded: bool,
    ) -> Result<pb::MembersResponse, NodeError> {
        let deadline = Instant::now() + self.config.request_timeout;
        let (leader, member) = self.wait_leader(deadline).await?;
        if leader != self.id {
            if forwarded {
                return Err(NodeError::Unavailable(format!(
                    "node {} is not the leader",
                    self.id
                )));
            }
            return self.forward_members(&member, req, deadline).await;
        }
        let op = Op::try_from(req.op)
            .map_err(|_| NodeError::Rejected(format!("unknown member operation {}", req.op)))?;
        if op != Op::List {
            let _one_at_a_time = self.membership_lock.lock().await;
            let in_change = self
                .raft
                .metrics()
                .borrow()
                .membership_config
                .membership()
                .get_joint_config()
                .len()
                > 1;
            if in_change {
                return Err(NodeError::Unavailable(
                    "a membership change is in progress; retry when it is done".into(),
                ));
            }
            match op {
                Op::List => {}
                Op::AddLearner => self.add_learner(&req).await?,
                Op::Promote => self.promote(req.id).await?,
                Op::Remove => self.remove(req.id).await?,
                Op::MoveLeader => {
                    self.transfer_leadership((req.id != 0).then_some(req.id)).await?;
                }
            }
        }
        Ok(self.member_list())
    }

    async fn forward_members(
        &self,
        leader: &Member,
        req: pb::MemberRequest,
        deadline: Instant,
    ) -> Result<pb::MembersResponse, NodeError> {
        let mut client = self
            .peers
            .kv_client(&leader.peer_addr)
            .map_err(|e| NodeError::Unavailable(e.to_string()))?;
        let mut request = self.peers.request(
            req,
            deadline
                .saturating_duration_since(Instant::now())
                .max(FORWARD_TIMEOUT),
        );
        request
            .metadata_mut()
            .insert(FORWARDED_HEADER, tonic::metadata::MetadataValue::from_static("1"));
        client
            .members(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(NodeError::Remote)
    }

    /// The members as this replica knows them, with the leader's replication progress.
    fn member_list(&self) -> pb::MembersResponse {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let last = m.last_log_index.unwrap_or(0);
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let matched = |id: u64| -> Option<u64> {
            if id == self.id {
                return Some(last);
            }
            m.replication.as_ref()?.get(&id)?.as_ref().map(|l| l.index)
        };
        pb::MembersResponse {
            leader_id: m.current_leader.unwrap_or(0),
            last_log_index: last,
            members: membership
                .nodes()
                .map(|(id, node)| {
                    let matched = matched(*id);
                    pb::MemberInfo {
                        id: *id,
                        peer_addr: node.peer_addr.clone(),
                        api_addr: node.api_addr.clone(),
                        voter: voters.contains(id),
                        matched_index: matched.unwrap_or(0),
                        has_matched: matched.is_some(),
                    }
                })
                .collect(),
        }
    }

    async fn add_learner(&self, req: &pb::MemberRequest) -> Result<(), NodeError> {
        if req.id == 0 {
            return Err(NodeError::Rejected("a member id must be greater than 0".into()));
        }
        if req.peer_addr.is_empty() || req.api_addr.is_empty() {
            return Err(NodeError::Rejected(
                "a new member needs its peer and API addresses".into(),
            ));
        }
        let new = Member {
            peer_addr: req.peer_addr.clone(),
            api_addr: req.api_addr.clone(),
        };
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        if let Some(existing) = membership.get_node(&req.id) {
            if membership.voter_ids().any(|v| v == req.id) {
                return Err(NodeError::Refused(format!("node {} is already a voter", req.id)));
            }
            if *existing == new {
                // A learner asking again (a joining replica that restarted): nothing to do.
                return Ok(());
            }
            return Err(NodeError::Refused(format!(
                "node {} is already a learner with other addresses ({existing})",
                req.id
            )));
        }
        if let Some((other, _)) = membership
            .nodes()
            .find(|(_, n)| n.peer_addr == new.peer_addr || n.api_addr == new.api_addr)
        {
            return Err(NodeError::Refused(format!(
                "node {other} already uses one of these addresses ({new})"
            )));
        }
        self.raft
            .add_learner(req.id, new, false)
            .await
            .map_err(change_err)?;
        tracing::info!(id = req.id, "added a learner");
        Ok(())
    }

    async fn promote(&self, id: u64) -> Result<(), NodeError> {
        let list = self.member_list();
        let Some(member) = list.members.iter().find(|m| m.id == id) else {
            return Err(NodeError::Refused(format!("node {id} is not a member")));
        };
        if member.voter {
            return Err(NodeError::Refused(format!("node {id} is already a voter")));
        }
        if !member.has_matched {
            return Err(NodeError::Refused(format!(
                "node {id} has not caught up: the leader has not heard from it yet (is it running, \
                 started with `kuberaft serve --join`?)"
            )));
        }
        let behind = list.last_log_index.saturating_sub(member.matched_index);
        if behind > PROMOTE_MAX_LAG {
            return Err(NodeError::Refused(format!(
                "node {id} has not caught up: it has the log up to index {} of {} ({behind} entries \
                 behind, at most {PROMOTE_MAX_LAG} allowed); promote it when `kuberaft member list` \
                 shows it caught up",
                member.matched_index, list.last_log_index
            )));
        }
        let _no_lease = self.lease.suspend();
        self.raft
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
            .await
            .map_err(change_err)?;
        tracing::info!(id, "promoted a learner to voter");
        Ok(())
    }

    async fn remove(&self, id: u64) -> Result<(), NodeError> {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        if membership.get_node(&id).is_none() {
            return Err(NodeError::Refused(format!("node {id} is not a member")));
        }
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        if voters.contains(&id) {
            let rest: BTreeMap<u64, Member> = voters
                .iter()
                .filter(|v| **v != id)
                .filter_map(|v| Some((*v, membership.get_node(v)?.clone())))
                .collect();
            if rest.is_empty() {
                return Err(NodeError::Refused(format!(
                    "node {id} is the last voter; it cannot be removed"
                )));
            }
            let mut down = Vec::new();
            for (v, node) in &rest {
                if *v != self.id && !self.answers(node).await {
                    down.push(v.to_string());
                }
            }
            let quorum = rest.len() / 2 + 1;
            let up = rest.len() - down.len();
            if up < quorum {
                return Err(NodeError::Refused(format!(
                    "removing node {id} would lose quorum: of the {} voters left, node(s) {} do not \
                     answer, and a quorum needs {quorum}; bring them back first",
                    rest.len(),
                    down.join(", ")
                )));
            }
            let _no_lease = self.lease.suspend();
            self.raft
                .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
                .await
                .map_err(change_err)?;
        } else {
            let _no_lease = self.lease.suspend();
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([id])), false)
                .await
                .map_err(change_err)?;
        }
        tracing::info!(id, "removed a member");
        Ok(())
    }

    /// Whether the replica at `node` answers its admin service within [`PROBE_TIMEOUT`].
    async fn answers(&self, node: &Member) -> bool {
        let Ok(mut client) = self.peers.kv_client(&node.peer_addr) else {
            return false;
        };
        let req = self
            .peers
            .request(pb::StatusRequest { with_hash: false }, PROBE_TIMEOUT);
        tokio::time::timeout(PROBE_TIMEOUT, client.status(req))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Whether this replica's membership (as its log has it, committed or not) names it.
    fn is_in_membership(&self) -> bool {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&self.id)
            .is_some()
    }

    /// Whether a vote request from `candidate` comes from a replica this replica's committed
    /// membership no longer has: then the candidate was removed (a committed membership is
    /// never undone), and it is told so rather than disturbing the cluster.
    pub fn refuses_candidate(&self, candidate: u64) -> Option<String> {
        let m = self.raft.metrics().borrow().clone();
        let stored = &m.membership_config;
        let committed = self.log.committed().map_or(0, |l| l.index);
        let known = stored.log_id().is_some_and(|l| l.index <= committed);
        if !known || stored.membership().get_node(&candidate).is_some() {
            return None;
        }
        Some(format!(
            "node {candidate} {REMOVED_MEMBER} {:?}; it stops serving. Add the host again as a new \
             member with a new id and an empty data dir",
            self.config.cluster_name
        ))
    }

    /// A refusal for any vote request while this replica, restarted on old data, stays out of
    /// elections: it may have acknowledged a leader that still reads under its lease.
    pub fn refuses_vote_while_quiet(&self) -> Option<openraft::raft::VoteResponse<u64>> {
        self.lease.refuses_votes().then(|| openraft::raft::VoteResponse {
            vote: self.raft.metrics().borrow().vote,
            vote_granted: false,
            last_log_id: None,
        })
    }
}

/// Watches this replica's membership and reports on `fatal` when the replica, once a member,
/// is no longer one. Ends when Raft stops.
pub(super) fn watch_removal(
    raft: &crate::types::Raft,
    id: u64,
    cluster: String,
    fatal: tokio::sync::mpsc::UnboundedSender<String>,
) {
    let mut metrics = raft.metrics();
    tokio::spawn(async move {
        let mut was_member = false;
        loop {
            let member = metrics
                .borrow_and_update()
                .membership_config
                .membership()
                .get_node(&id)
                .is_some();
            if member {
                was_member = true;
            } else if was_member {
                let _ = fatal.send(format!(
                    "node {id} {REMOVED_MEMBER} {cluster:?}; it stops serving. Add the host again as \
                     a new member with a new id and an empty data dir"
                ));
                return;
            }
            if metrics.changed().await.is_err() {
                return;
            }
        }
    });
}

/// Asks the replica at `seed` to add this replica as a learner, retrying until it is added or
/// refused (a refusal is fatal: it says why, e.g. the id is taken). Ends early when the node is
/// gone.
pub(super) fn join(node: Weak<RaftNode>, seed: String, fatal: tokio::sync::mpsc::UnboundedSender<String>) {
    tokio::spawn(async move {
        loop {
            let Some(n) = node.upgrade() else {
                return;
            };
            let me = n.config.me().cloned().unwrap_or_default();
            let req = pb::MemberRequest {
                op: Op::AddLearner as i32,
                id: n.id,
                peer_addr: me.peer_addr,
                api_addr: me.api_addr,
            };
            let answer = if n.is_in_membership() {
                // An earlier request was carried out though its answer was lost.
                Ok(())
            } else {
                match n.peers.kv_client(&seed) {
                    Ok(mut client) => client
                        .members(n.peers.request(req, n.config.request_timeout))
                        .await
                        .map(|_| ()),
                    Err(e) => Err(e),
                }
            };
            match join_step(answer, || n.is_in_membership()) {
                JoinStep::Joined => {
                    tracing::info!(seed, "joined the cluster as a learner; catching up");
                    return;
                }
                JoinStep::Refused(why) => {
                    let _ = fatal.send(format!("cannot join through {seed}: {why}"));
                    return;
                }
                JoinStep::Retry(why) => tracing::warn!(seed, error = %why, "cannot join yet; retrying"),
            }
            drop(n);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
}

/// What a joining replica does after asking to be added.
#[derive(Debug, PartialEq)]
enum JoinStep {
    /// It is a member: it catches up from the leader.
    Joined,
    /// Asks again after a while (no leader, a change in progress, the seed unreachable).
    Retry(String),
    /// Stops: the cluster will not have it (the id or an address is taken).
    Refused(String),
}

/// The step after `answer`; `member` says whether this replica's log has the change that
/// added it (then a refusal answers a repeated request whose first one was carried out, e.g.
/// "already a voter" once the operator promoted it).
fn join_step(answer: Result<(), tonic::Status>, member: impl FnOnce() -> bool) -> JoinStep {
    match answer {
        Ok(()) => JoinStep::Joined,
        Err(_) if member() => JoinStep::Joined,
        Err(s)
            if matches!(
                s.code(),
                tonic::Code::FailedPrecondition | tonic::Code::InvalidArgument
            ) =>
        {
            JoinStep::Refused(s.message().to_string())
        }
        Err(s) => JoinStep::Retry(s.message().to_string()),
    }
}

/// `FORWARDED_HEADER` as the admin service checks it.
pub fn is_forwarded(metadata: &tonic::metadata::MetadataMap) -> bool {
    metadata.contains_key(FORWARDED_HEADER)
}

#[cfg(test)]
mod tests {
    use super::{join_step, JoinStep};
    use tonic::{Code, Status};

    #[test]
    fn a_joining_replica_retries_what_passes_and_stops_at_a_refusal() {
        let unavailable = || {
            Err(Status::new(
                Code::Unavailable,
                "a membership change is in progress",
            ))
        };
        let taken = || Err(Status::new(Code::FailedPrecondition, "node 4 is already a voter"));
        assert_eq!(join_step(Ok(()), || false), JoinStep::Joined);
        assert_eq!(
            join_step(unavailable(), || false),
            JoinStep::Retry("a membership change is in progress".into())
        );
        assert_eq!(
            join_step(taken(), || false),
            JoinStep::Refused("node 4 is already a voter".into())
        );
        assert_eq!(
            join_step(Err(Status::new(Code::InvalidArgument, "bad address")), || false),
            JoinStep::Refused("bad address".into())
        );
        // The first request was carried out and its answer lost; the operator has promoted
        // the replica since: it has joined.
        assert_eq!(join_step(taken(), || true), JoinStep::Joined);
        assert_eq!(join_step(unavailable(), || true), JoinStep::Joined);
    }
}
