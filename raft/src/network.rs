//! The client side of the peer transport: openraft's RPCs over tonic gRPC.
//!
//! openraft messages travel as postcard bytes inside `RaftPayload`; every call carries the
//! cluster name in the `x-kuberaft-cluster` header. A peer that answers "wrong cluster" (a
//! misconfiguration) or "removed" (this replica is no longer a member) is fatal: it is
//! reported on the `fatal` channel and the replica exits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kuberaft_proto::kv_client::KvClient;
use kuberaft_proto::peer_client::PeerClient;
use kuberaft_proto::{RaftPayload, CLUSTER_HEADER};
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{de::DeserializeOwned, Serialize};
use tokio::sync::mpsc;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::codec::{decode, encode};
use crate::types::{Member, TypeConfig};

/// Largest gRPC message a peer accepts or sends (a batch of entries or a snapshot chunk).
pub const MAX_PEER_MESSAGE: usize = 64 * 1024 * 1024;

/// Marker in the status message a replica returns to a peer of another cluster.
pub const WRONG_CLUSTER: &str = "peer belongs to another cluster";

/// Marker in the status message a replica returns to a candidate that its committed membership
/// no longer has: the candidate was removed and must stop.
pub const REMOVED_MEMBER: &str = "was removed from the cluster";

/// Lazily connected channels to peers, shared by Raft replication, forwarding and read index.
#[derive(Clone)]
pub struct Peers {
    cluster_name: Arc<str>,
    tls: Option<ClientTlsConfig>,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    fatal: mpsc::UnboundedSender<String>,
}

impl Peers {
    /// Peers of cluster `cluster_name`, reached over mutual TLS with `tls` (plaintext without);
    /// fatal transport findings go to `fatal`.
    pub fn new(
        cluster_name: &str,
        tls: Option<ClientTlsConfig>,
        fatal: mpsc::UnboundedSender<String>,
    ) -> Self {
        Peers {
            cluster_name: cluster_name.into(),
            tls,
            channels: Arc::default(),
            fatal,
        }
    }

    /// A gRPC client for the peer at `addr`.
    pub fn client(&self, addr: &str) -> Result<PeerClient<Channel>, tonic::Status> {
        Ok(PeerClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_PEER_MESSAGE)
            .max_encoding_message_size(MAX_PEER_MESSAGE))
    }

    /// A client of the admin service of the replica at `addr` (membership changes and probes
    /// between replicas), over the same connection.
    pub fn kv_client(&self, addr: &str) -> Result<KvClient<Channel>, tonic::Status> {
        Ok(KvClient::new(self.channel(addr)?))
    }

    /// The shared connection to the replica at `addr` (made on first use).
    fn channel(&self, addr: &str) -> Result<Channel, tonic::Status> {
        Ok({
            let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
            match channels.get(addr) {
                Some(c) => c.clone(),
                None => {
                    let bad = |e: tonic::transport::Error| {
                        tonic::Status::invalid_argument(format!("bad peer address {addr}: {e}"))
                    };
                    let scheme = if self.tls.is_some() { "https" } else { "http" };
                    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}")).map_err(bad)?;
                    if let Some(tls) = &self.tls {
                        endpoint = endpoint.tls_config(tls.clone()).map_err(bad)?;
                    }
                    let endpoint = endpoint
                        .connect_timeout(Duration::from_millis(500))
                        .tcp_nodelay(true)
                        .http2_keep_alive_interval(Duration::from_secs(5))
                        .keep_alive_timeout(Duration::from_secs(5));
                    let c = endpoint.connect_lazy();
                    channels.insert(addr.to_string(), c.clone());
                    c
                }
            }
        })
    }

    /// Wraps `msg` in a request that carries the cluster name and `timeout`.
    pub fn request<T>(&self, msg: T, timeout: Duration) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        req.set_timeout(timeout);
        if let Ok(v) = self.cluster_name.parse() {
            req.metadata_mut().insert(CLUSTER_HEADER, v);
        }
        req
    }

    /// Reports a status that says the peer belongs to another cluster, or that this replica
    /// was removed from the cluster.
    pub fn check_fatal(&self, status: &tonic::Status) {
        let fatal = [WRONG_CLUSTER, REMOVED_MEMBER]
            .iter()
            .any(|marker| status.message().contains(marker));
        if status.code() == tonic::Code::PermissionDenied && fatal {
            let _ = self.fatal.send(status.message().to_string());
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Peers {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: u64, node: &Member) -> Self::Network {
        PeerConnection {
            peers: self.clone(),
            target,
            addr: node.peer_addr.clone(),
        }
    }
}

/// openraft's connection to one peer.
pub struct PeerConnection {
    peers: Peers,
    target: u64,
    addr: String,
}

type RpcResult<T, E> = Result<T, RPCError<u64, Member, E>>;

impl PeerConnection {
    /// Sends `req`; `entries` is the number of log entries it carries, so that a message over
    /// [`MAX_PEER_MESSAGE`] is refused before it is sent with a hint of how many would fit
    /// (openraft then sends fewer at a time).
    async fn call<Req, Resp, E>(
        &self,
        kind: RpcKind,
        req: &Req,
        entries: usize,
        option: &RPCOption,
    ) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let data = encode("raft rpc", req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        if data.len() > MAX_PEER_MESSAGE && entries > 1 {
            let fit = (entries as u64).saturating_mul(MAX_PEER_MESSAGE as u64) / data.len() as u64;
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(
                fit.max(1),
            )));
        }
        let mut client = self
            .peers
            .client(&self.addr)
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let request = self.peers.request(RaftPayload { data }, option.hard_ttl());
        let started = std::time::Instant::now();
        let reply = match kind {
            RpcKind::Append if entries > 0 => {
                let reply = client.append_entries(request).await;
                metrics::histogram!("kuberaft_raft_append_rpc_seconds")
                    .record(started.elapsed().as_secs_f64());
                reply
            }
            RpcKind::Append => client.append_entries(request).await,
            RpcKind::Vote => client.vote(request).await,
            RpcKind::Snapshot => client.install_snapshot(request).await,
        };
        let reply = reply.map_err(|status| {
            self.peers.check_fatal(&status);
            match status.code() {
                tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
                    RPCError::Unreachable(Unreachable::new(&status))
                }
                _ => RPCError::Network(NetworkError::new(&status)),
            }
        })?;
        let result: Result<Resp, E> = decode("raft reply", &reply.into_inner().data)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

#[derive(Clone, Copy)]
enum RpcKind {
    Append,
    Vote,
    Snapshot,
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>, RaftError<u64>> {
        self.call(RpcKind::Append, &rpc, rpc.entries.len(), &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        self.call(RpcKind::Snapshot, &rpc, 0, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>, RaftError<u64>> {
        self.call(RpcKind::Vote, &rpc, 0, &option).await
    }
}
