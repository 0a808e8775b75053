//! The `Kv` gRPC service: the admin/KV API on the peer listener (Range, Txn, Compact, Status,
//! Snapshot, Members) for the CLI, benchmarks, tests and joining replicas. Writes go through the replica's [`RaftNode::write`], so
//! any replica accepts them; Range is linearizable unless the caller asks for a serializable
//! (local) read.

use std::io::Write;
use std::sync::Arc;

use kuberaft_proto as pb;
use kuberaft_proto::kv_server::Kv;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
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

/// Size of the pieces a backup is streamed in.
const CHUNK_BYTES: usize = 1024 * 1024;

/// Streams what a backup writes as [`pb::SnapshotChunk`]s; a write fails once the client is
/// gone, which stops the backup.
struct ChunkSender {
    tx: mpsc::Sender<Result<pb::SnapshotChunk, Status>>,
    buf: Vec<u8>,
}

impl ChunkSender {
    fn send(&mut self) -> std::io::Result<()> {
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES));
        self.tx
            .blocking_send(Ok(pb::SnapshotChunk { data }))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(CHUNK_BYTES - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK_BYTES {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.send()
    }
}

#[tonic::async_trait]
impl Kv for KvService {
    type SnapshotStream = ReceiverStream<Result<pb::SnapshotChunk, Status>>;

    async fn snapshot(
        &self,
        _: Request<pb::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        let (tx, rx) = mpsc::channel(4);
        let out = ChunkSender {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK_BYTES),
        };
        let node = self.node.clone();
        tokio::spawn(async move {
            if let Err(e) = node.backup(out).await {
                tracing::warn!(error = %e, "backup failed");
                let _ = tx.send(Err(e.into())).await;
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

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

    async fn members(
        &self,
        req: Request<pb::MemberRequest>,
    ) -> Result<Response<pb::MembersResponse>, Status> {
        let forwarded = crate::node::membership::is_forwarded(req.metadata());
        Ok(Response::new(
            self.node.members(req.into_inner(), forwarded).await?,
        ))
    }

    async fn status(&self, req: Request<pb::StatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        Ok(Response::new(self.node.status(req.into_inner().with_hash).await?))
    }
}
