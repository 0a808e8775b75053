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
use crate::lease::Lease;
use crate::types::{Member, TypeConfig};

/// Largest gRPC message a peer accepts or sends (a batch of entries or a snapshot chunk).
pub const MAX_PEER_MESSAGE: usize = 64 * 1024 * 1024;

/// The most bytes an AppendEntries with more than one entry may carry. openraft 0.9 gives
/// every AppendEntries one heartbeat interval to complete; a round that times out is sent
/// again with every entry appended meanwhile, so without a bound a burst of large objects
/// makes each retry bigger and slower than the last and replication never catches up (no
/// commit, leaders deposed one after another). A megabyte crosses a peer link well inside a
/// heartbeat; a larger single entry still goes alone.
pub const MAX_APPEND_BYTES: usize = 1024 * 1024;

/// How many of `entries` entries fit in `budget` bytes when all of them encode to `len`
/// bytes (at least one), or `None` when they all fit or there is only one.
fn entries_that_fit(entries: usize, len: usize, budget: usize) -> Option<u64> {
    (len > budget && entries > 1).then(|| {
        let fit = (entries as u64).saturating_mul(budget as u64) / len.max(1) as u64;
        fit.max(1)
    })
}

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
    /// Where accepted AppendEntries are recorded for the leader's lease.
    lease: Arc<Lease>,
}

impl Peers {
    /// Peers of cluster `cluster_name`, reached over mutual TLS with `tls` (plaintext without);
    /// fatal transport findings go to `fatal`, and the AppendEntries peers accept to `lease`.
    pub fn new(
        cluster_name: &str,
        tls: Option<ClientTlsConfig>,
        fatal: mpsc::UnboundedSender<String>,
        lease: Arc<Lease>,
    ) -> Self {
        Peers {
            cluster_name: cluster_name.into(),
            tls,
            channels: Arc::default(),
            fatal,
            lease,
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
    /// Sends `req`; `entries` is the number of log entries it carries, so that entries over
    /// [`MAX_APPEND_BYTES`] are refused before they are sent with a hint of how many would fit
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
        if let Some(fit) = entries_that_fit(entries, data.len(), MAX_APPEND_BYTES) {
            metrics::counter!("kuberaft_raft_append_split_total").increment(1);
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(fit)));
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
        // The send time, taken before the request can reach the follower: the follower's lease
        // starts when it handles the request, never earlier.
        let sent = std::time::Instant::now();
        let reply = self.call(RpcKind::Append, &rpc, rpc.entries.len(), &option).await;
        if let Ok(r) = &reply {
            if !matches!(r, AppendEntriesResponse::HigherVote(_)) {
                self.peers.lease.acknowledged(self.target, rpc.vote, sent);
            }
        }
        reply
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_over_the_budget_ask_for_fewer_entries_but_never_none() {
        let mib = 1024 * 1024;
        assert_eq!(entries_that_fit(10, mib / 2, mib), None);
        assert_eq!(
            entries_that_fit(1, 8 * mib, mib),
            None,
            "a single entry goes alone"
        );
        assert_eq!(entries_that_fit(100, 25 * mib, mib), Some(4));
        assert_eq!(entries_that_fit(3, 30 * mib, mib), Some(1));
        const { assert!(MAX_APPEND_BYTES < MAX_PEER_MESSAGE) };
    }
}
