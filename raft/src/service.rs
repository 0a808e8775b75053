//! The gRPC services on a replica's peer listener.
//!
//! * `Peer`: Raft RPCs, forwarded writes and read-index requests from other replicas. Every
//!   call must carry this cluster's name; anything else is refused.
//! * `Kv`: the admin/KV API (Range, Txn, Compact, Status) for the CLI, benchmarks and tests.
//!   Range is linearizable unless the caller asks for a serializable (local) read.

use std::sync::Arc;

use kuberaft_proto as pb;
use kuberaft_proto::kv_server::{Kv, KvServer};
use kuberaft_proto::peer_server::{Peer, PeerServer};
use kuberaft_proto::CLUSTER_HEADER;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use crate::codec::{decode, encode};
use crate::network::{MAX_PEER_MESSAGE, WRONG_CLUSTER};
use crate::types::TypeConfig;
use crate::{NodeError, RaftNode};

/// Largest request the Kv service accepts (a value over the store's limit gets a clear
/// InvalidArgument from validation rather than a transport error).
const MAX_KV_MESSAGE: usize = 8 * 1024 * 1024;

/// Serves `Peer` and `Kv` for `node` on `listener` until `shutdown` resolves.
pub async fn serve(
    node: Arc<RaftNode>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let cluster = node.config().cluster_name.clone();
    let peer = InterceptedService::new(
        PeerServer::new(PeerService { node: node.clone() })
            .max_decoding_message_size(MAX_PEER_MESSAGE)
            .max_encoding_message_size(MAX_PEER_MESSAGE),
        move |req: Request<()>| check_cluster(&cluster, req),
    );
    let kv = KvServer::new(KvService { node })
        .max_decoding_message_size(MAX_KV_MESSAGE)
        .max_encoding_message_size(MAX_PEER_MESSAGE);
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(peer)
        .add_service(kv)
        // Nagle's algorithm with delayed ACKs stalls every small reply by ~40 ms; tonic only
        // applies TCP_NODELAY to listeners it binds itself, so set it on ours.
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
}

fn check_cluster(cluster: &str, req: Request<()>) -> Result<Request<()>, Status> {
    let theirs = req
        .metadata()
        .get(CLUSTER_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if theirs == cluster {
        Ok(req)
    } else {
        tracing::error!(theirs, ours = cluster, "refused a peer of another cluster");
        Err(Status::permission_denied(format!(
            "{WRONG_CLUSTER}: this replica is in cluster {cluster:?}, the caller in {theirs:?}"
        )))
    }
}

struct PeerService {
    node: Arc<RaftNode>,
}

fn bad_payload(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("undecodable raft message: {e}"))
}

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
        let rpc: AppendEntriesRequest<TypeConfig> =
            decode("append", &req.into_inner().data).map_err(bad_payload)?;
        reply(&self.node.raft.append_entries(rpc).await)
    }

    async fn vote(&self, req: Request<pb::RaftPayload>) -> Result<Response<pb::RaftPayload>, Status> {
        let rpc: VoteRequest<u64> = decode("vote", &req.into_inner().data).map_err(bad_payload)?;
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

    async fn forward(
        &self,
        req: Request<pb::ForwardRequest>,
    ) -> Result<Response<pb::ForwardResponse>, Status> {
        let cmd = req
            .into_inner()
            .command
            .ok_or_else(|| Status::invalid_argument("forward without a command"))?;
        match self.node.propose_local(cmd).await? {
            Some((result, index)) => Ok(Response::new(pb::ForwardResponse {
                result: Some(result),
                index,
            })),
            None => Err(Status::failed_precondition("not the leader")),
        }
    }
}

struct KvService {
    node: Arc<RaftNode>,
}

/// Turns a state-machine result into the Kv reply, or the client error it carries.
fn txn_result(result: pb::CommandResult) -> Result<pb::TxnResponse, Status> {
    match result.result {
        Some(pb::command_result::Result::Txn(t)) => Ok(t),
        Some(pb::command_result::Result::Rejected(msg)) => Err(Status::invalid_argument(msg)),
        other => Err(Status::internal(format!("unexpected result {other:?}"))),
    }
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(&self, req: Request<pb::RangeRequest>) -> Result<Response<pb::RangeResponse>, Status> {
        let req = req.into_inner();
        if !req.serializable {
            self.node.read_barrier().await?;
        }
        let mvcc = self.node.mvcc().clone();
        let resp = tokio::task::spawn_blocking(move || mvcc.range(&req))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(NodeError::from)?;
        Ok(Response::new(resp))
    }

    async fn txn(&self, req: Request<pb::TxnRequest>) -> Result<Response<pb::TxnResponse>, Status> {
        let cmd = pb::Command {
            command: Some(pb::command::Command::Txn(req.into_inner())),
        };
        Ok(Response::new(txn_result(self.node.write(cmd).await?)?))
    }

    async fn compact(
        &self,
        req: Request<pb::CompactRequest>,
    ) -> Result<Response<pb::CompactResponse>, Status> {
        let cmd = pb::Command {
            command: Some(pb::command::Command::Compact(req.into_inner())),
        };
        match self.node.write(cmd).await?.result {
            Some(pb::command_result::Result::Compact(c)) => Ok(Response::new(c)),
            Some(pb::command_result::Result::Rejected(msg)) => Err(Status::out_of_range(msg)),
            other => Err(Status::internal(format!("unexpected result {other:?}"))),
        }
    }

    async fn status(&self, req: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        Ok(Response::new(self.node.status(req.into_inner().with_hash).await?))
    }
}
