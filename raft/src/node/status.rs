//! One replica's status: role, term, leader, log and apply positions, store revisions, size
//! and members — a row of `kuberaft endpoint status`, also the source of the storage gauges.

use kuberaft_proto as pb;
use openraft::ServerState;

use super::RaftNode;
use crate::NodeError;

impl RaftNode {
    /// Every member's (voters' and learners') Kubernetes API address, by id.
    pub fn api_addresses(&self) -> Vec<(u64, String)> {
        let m = self.raft.metrics().borrow().membership_config.clone();
        m.membership()
            .nodes()
            .map(|(id, node)| (*id, node.api_addr.clone()))
            .collect()
    }

    /// This replica's status (one row of `kuberaft endpoint status`). With `with_hash`, it also
    /// hashes the whole store (on the blocking pool) so replicas can be compared.
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
            certificates: self.config.certificates.clone(),
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
}
