//! One client type for both benchmarked systems, so the workload driver does not care which
//! one it talks to.
//!
//! kuberaft is driven through its `Kv` gRPC service on each replica's peer address (a put is a
//! `Txn` with one `Put` in `success`); etcd through its v3 `KV` gRPC service on each member's
//! client URL. A `Range` with `serializable: false` is linearizable on both.

use std::time::Duration;

use anyhow::Context;
use tonic::transport::{Channel, Endpoint};

/// The subset of etcd's v3 gRPC API the benchmark uses (generated from `proto/etcd_kv.proto`).
#[allow(missing_docs, clippy::doc_lazy_continuation)]
pub mod etcdpb {
    tonic::include_proto!("etcdserverpb");
}

/// How long connecting to a replica may take before it counts as a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A benchmarked system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// A three-member etcd cluster (the baseline).
    Etcd,
    /// A three-node kuberaft cluster started with `kuberaft cluster up`.
    Kuberaft,
}

impl System {
    /// The name used in flags, tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            System::Etcd => "etcd",
            System::Kuberaft => "kuberaft",
        }
    }
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Opens one gRPC channel (one HTTP/2 connection) to `addr` (`host:port`).
pub async fn connect(addr: &str) -> anyhow::Result<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}"))
        .with_context(|| format!("bad address {addr:?}"))?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true);
    endpoint
        .connect()
        .await
        .with_context(|| format!("cannot connect to {addr}"))
}

/// A KV client of one replica of either system. Cloning is cheap and shares the connection.
#[derive(Debug, Clone)]
pub enum Client {
    /// kuberaft's `Kv` service.
    Kuberaft(kuberaft_proto::kv_client::KvClient<Channel>),
    /// etcd's v3 `KV` service.
    Etcd(etcdpb::kv_client::KvClient<Channel>),
}

impl Client {
    /// Connects to the replica of `system` at `addr` (`host:port`).
    pub async fn connect(system: System, addr: &str) -> anyhow::Result<Self> {
        let channel = connect(addr).await?;
        Ok(match system {
            System::Kuberaft => Client::Kuberaft(kuberaft_proto::kv_client::KvClient::new(channel)),
            System::Etcd => Client::Etcd(etcdpb::kv_client::KvClient::new(channel)),
        })
    }

    /// Writes `value` at `key`.
    pub async fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), tonic::Status> {
        match self {
            Client::Kuberaft(c) => {
                let put = kuberaft_proto::PutOp { key, value };
                let req = kuberaft_proto::TxnRequest {
                    compares: Vec::new(),
                    success: vec![kuberaft_proto::Op {
                        op: Some(kuberaft_proto::op::Op::Put(put)),
                    }],
                    failure: Vec::new(),
                };
                c.txn(req).await?;
            }
            Client::Etcd(c) => {
                let req = etcdpb::PutRequest { key, value, lease: 0 };
                c.put(req).await?;
            }
        }
        Ok(())
    }

    /// Reads `key`; `serializable` reads the replica's local state, otherwise the read is
    /// linearizable. Returns whether the key exists.
    pub async fn get(&mut self, key: Vec<u8>, serializable: bool) -> Result<bool, tonic::Status> {
        match self {
            Client::Kuberaft(c) => {
                let req = kuberaft_proto::RangeRequest {
                    key,
                    serializable,
                    ..Default::default()
                };
                Ok(!c.range(req).await?.into_inner().kvs.is_empty())
            }
            Client::Etcd(c) => {
                let req = etcdpb::RangeRequest {
                    key,
                    serializable,
                    ..Default::default()
                };
                Ok(!c.range(req).await?.into_inner().kvs.is_empty())
            }
        }
    }
}
