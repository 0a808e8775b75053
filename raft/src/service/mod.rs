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

/// Which service a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// Raft, forwarding and read index: other replicas only.
    Peer,
    /// The admin/KV API: replicas and operators.
    Admin,
}

/// Decides from a caller's client certificate (DER, already verified against the cluster CA
/// by the TLS handshake) whether it may use a service; `Err` says why not.
pub type CallerCheck = Arc<dyn Fn(&[u8], Service) -> Result<(), String> + Send + Sync>;

/// Mutual TLS on the peer port: the server configuration and who may call which service.
#[derive(Clone)]
pub struct PeerTls {
    /// The TLS server configuration (a client certificate of the cluster CA required).
    pub config: tonic::transport::ServerTlsConfig,
    /// Who may call which service.
    pub callers: CallerCheck,
}

/// Refuses a call whose client certificate `callers` does not admit to `service` (no TLS: all
/// are admitted).
fn check_caller(callers: Option<&CallerCheck>, service: Service, req: &Request<()>) -> Result<(), Status> {
    let Some(callers) = callers else {
        return Ok(());
    };
    let certs = req.peer_certs().unwrap_or_default();
    let Some(leaf) = certs.first() else {
        return Err(Status::unauthenticated("a client certificate is required"));
    };
    callers(leaf, service).map_err(|why| {
        tracing::warn!(?service, why, "refused a caller");
        Status::permission_denied(why)
    })
}

/// Serves `Peer` and `Kv` for `node` on `listener` until `shutdown` resolves, over mutual TLS
/// when `tls` is given (a client without a certificate of the cluster CA fails the handshake,
/// and `tls.callers` decides which service a certificate may use).
pub async fn serve(
    node: Arc<RaftNode>,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    tls: Option<PeerTls>,
) -> Result<(), tonic::transport::Error> {
    let cluster = node.config().cluster_name.clone();
    let callers = tls.as_ref().map(|t| t.callers.clone());
    let peer_callers = callers.clone();
    let peer = InterceptedService::new(
        PeerServer::new(PeerService::new(node.clone()))
            .max_decoding_message_size(MAX_PEER_MESSAGE)
            .max_encoding_message_size(MAX_PEER_MESSAGE),
        move |req: Request<()>| {
            check_caller(peer_callers.as_ref(), Service::Peer, &req)?;
            check_cluster(&cluster, req)
        },
    );
    let kv = InterceptedService::new(
        KvServer::new(KvService::new(node))
            .max_decoding_message_size(MAX_KV_MESSAGE)
            .max_encoding_message_size(MAX_PEER_MESSAGE),
        move |req: Request<()>| {
            check_caller(callers.as_ref(), Service::Admin, &req)?;
            Ok(req)
        },
    );
    let mut server = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        server = server.tls_config(tls.config)?;
    }
    server
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
