//! The `Kv` gRPC service: the admin/KV API on the peer listener (Range, Txn, Compact, Status)
//! for the CLI, benchmarks and tests. Writes go through the replica's [`RaftNode::write`], so
//! any replica accepts them; Range is linearizable unless the caller asks for a serializable
//! (local) read.

use std::sync::Arc;

use kuberaft_proto as pb;
use kuberaft_proto::kv_server::Kv;
use tonic::{Request, Response, Status};

use crate::RaftNode;

/// Serves the `Kv` RPCs for one replica.
pub(super) struct KvService {
    node: Arc<RaftNode>,
}

impl KvService {
    /// The `Kv` service of `node`.
    pub(super) fn new(node: Arc<RaftNode>) -> Self {
        KvService { node }
    }
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
        Ok(Response::new(self.node.range(req).await?))
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
