//! kuberaft's protobuf messages and gRPC services (generated from `proto/kuberaft.proto`).
//!
//! The `Kv` service is the admin/KV API of one replica; the `Peer` service carries Raft RPCs,
//! leader forwarding and read-index requests between replicas. The same messages describe the
//! MVCC store's on-disk records, so storage and wire share one schema.

#![allow(missing_docs, clippy::large_enum_variant, clippy::doc_lazy_continuation)]

/// Generated code for the `kuberaft.v1` protobuf package.
pub mod v1 {
    tonic::include_proto!("kuberaft.v1");
}

pub use v1::*;

/// gRPC metadata key that carries the cluster name on every peer RPC, so a replica refuses
/// traffic from another cluster.
pub const CLUSTER_HEADER: &str = "x-kuberaft-cluster";
