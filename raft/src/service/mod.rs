//! The gRPC services on a replica's peer listener, and the server that runs them.
//!
//! * `peer`: the `Peer` service — Raft RPCs, forwarded writes and read-index requests from
//!   other replicas. Every call must carry this cluster's name; anything else is refused.
//! * `kv`: the `Kv` service — the admin/KV API (Range, Txn, Compact, Status) for the CLI,
//!   benchmarks and tests. Range is linearizable unless the caller asks for a serializable
//!   (local) read.

mod kv;
mod peer;

use std::sync::Arc;

use kuberaft_proto::kv_server::KvServer;
use kuberaft_proto::peer_server::PeerServer;
use kuberaft_proto::CLUSTER_HEADER;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Status};

use crate::network::{MAX_PEER_MESSAGE, WRONG_CLUSTER};
use crate::RaftNode;
use kv::KvService;
use peer::PeerService;

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
        PeerServer::new(PeerService::new(node.clone()))
            .max_decoding_message_size(MAX_PEER_MESSAGE)
            .max_encoding_message_size(MAX_PEER_MESSAGE),
        move |req: Request<()>| check_cluster(&cluster, req),
    );
    let kv = KvServer::new(KvService::new(node))
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

/// The `Peer` interceptor: refuses a call that does not carry this replica's cluster name.
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
