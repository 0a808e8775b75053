//! The `Peer` gRPC service: what other replicas of the cluster call. openraft's RPCs
//! (AppendEntries, Vote, InstallSnapshot) arrive as postcard bytes in `RaftPayload` and go to
//! the local Raft; `Forward` proposes a follower's writes on this replica if it leads (they join
//! its proposal batching) and `ReadIndex` confirms leadership for a follower's linearizable
//! read; `Campaign` starts an election when the leader hands leadership to this replica. The
//! cluster-name check
//! happens before, in the interceptor `serve` installs; a vote from a replica this one's
//! committed membership no longer has is refused with the reason, which stops that replica,
//! and a replica restarted on old data refuses every vote for one lease (`crate::lease`).

use std::sync::Arc;

use kuberaft_proto as pb;
use kuberaft_proto::peer_server::Peer;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use tonic::{Request, Response, Status};

use crate::codec::{decode, encode};
use crate::types::TypeConfig;
use crate::RaftNode;

/// Serves the `Peer` RPCs for one replica.
pub(super) struct PeerService {
    node: Arc<RaftNode>,
}

impl PeerService {
    /// The `Peer` service of `node`.
    pub(super) fn new(node: Arc<RaftNode>) -> Self {
        PeerService { node }
    }
}

/// A peer sent bytes that are not the expected openraft message: the caller's fault.
fn bad_payload(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("undecodable raft message: {e}"))
}

/// Encodes openraft's answer (its `Result`, error included) for the calling peer.
fn reply<T: serde::Serialize>(v: &T) -> Result<Response<pb::RaftPayload>, Status> {
    let data = encode("raft reply", v).map_err(|e| Status::internal(e.to_string()))?;
    Ok(Response::new(pb::RaftPayload { data }))
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn append_entries(
        &self,
        req: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let started = std::time::Instant::now();
        let rpc: AppendEntriesRequest<TypeConfig> =
            decode("append", &req.into_inner().data).map_err(bad_payload)?;
        let entries = rpc.entries.len();
        let answer = reply(&self.node.raft.append_entries(rpc).await);
        if entries > 0 {
            metrics::histogram!("kuberaft_raft_follower_append_seconds")
                .record(started.elapsed().as_secs_f64());
        }
        answer
    }

    async fn vote(&self, req: Request<pb::RaftPayload>) -> Result<Response<pb::RaftPayload>, Status> {
        let rpc: VoteRequest<u64> = decode("vote", &req.into_inner().data).map_err(bad_payload)?;
        if let Some(why) = rpc
            .vote
            .leader_id()
            .voted_for()
            .and_then(|candidate| self.node.refuses_candidate(candidate))
        {
            return Err(Status::permission_denied(why));
        }
        if let Some(refusal) = self.node.refuses_vote_while_quiet() {
            return reply(&Ok::<_, openraft::error::RaftError<u64>>(refusal));
        }
        reply(&self.node.raft.vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        req: Request<pb::RaftPayload>,
    ) -> Result<Response<pb::RaftPayload>, Status> {
        let rpc: InstallSnapshotRequest<TypeConfig> =
            decode("snapshot", &req.into_inner().data).map_err(bad_payload)?;
        reply(&self.node.raft.install_snapshot(rpc).await)
    }

    async fn read_index(
        &self,
        _req: Request<pb::ReadIndexRequest>,
    ) -> Result<Response<pb::ReadIndexResponse>, Status> {
        match self.node.read_index_local().await? {
            Some(index) => Ok(Response::new(pb::ReadIndexResponse { index })),
            None => Err(Status::failed_precondition("not the leader")),
        }
    }

    async fn campaign(
        &self,
        _req: Request<pb::CampaignRequest>,
    ) -> Result<Response<pb::CampaignResponse>, Status> {
        tracing::info!("the leader hands leadership over: campaigning");
        self.node
            .raft
            .trigger()
            .elect()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(pb::CampaignResponse {}))
    }

    async fn forward(
        &self,
        req: Request<pb::ForwardRequest>,
    ) -> Result<Response<pb::ForwardResponse>, Status> {
        let cmd = req
            .into_inner()
            .command
            .ok_or_else(|| Status::invalid_argument("forward without a command"))?;
        match self.node.propose_forwarded(cmd).await? {
            Some((result, index)) => Ok(Response::new(pb::ForwardResponse {
                result: Some(result),
                index,
            })),
            None => Err(Status::failed_precondition("not the leader")),
        }
    }
}
