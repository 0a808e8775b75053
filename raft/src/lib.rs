//! openraft glue for kuberaft.
//!
//! * [`types`]: the Raft type configuration and the command/result types carried in the log;
//! * [`log_store`] and [`state_machine`]: openraft's storage traits over `kuberaft-storage`;
//! * [`network`]: the peer transport (tonic gRPC client side);
//! * [`service`]: the gRPC services a replica serves on its peer listener (`Peer` in
//!   `service/peer.rs`, `Kv` in `service/kv.rs`);
//! * [`node`]: one running replica — start, readiness, leadership and the apply stream
//!   (`node/mod.rs`), writes with forwarding to the leader (`node/write.rs`), linearizable read
//!   barriers and async store reads (`node/read.rs`), the compaction schedule
//!   (`node/compaction.rs`) and status (`node/status.rs`);
//! * [`read_index`]: concurrent linearizable reads sharing the leader's leadership confirmations;
//! * [`lease`]: the leader's lease, which spares those confirmations while a quorum has
//!   recently acknowledged the leader.

// openraft's storage traits fix the error types (`StorageError<u64>`, 224 bytes); the helpers
// that feed those traits return them as they are rather than boxing and unboxing at each call.
#![allow(clippy::result_large_err)]

pub mod codec;
pub mod error;
pub mod lease;
pub mod log_store;
pub mod network;
pub mod node;
pub mod read_index;
pub mod service;
pub mod state_machine;
pub mod types;

pub use error::NodeError;
pub use kuberaft_storage::mvcc::{Applied, Change};
pub use kuberaft_storage::{
    read_backup, BackupSummary, Identity, Merger, Mergers, RestoreSummary, StorageError,
};
pub use node::{NodeConfig, Progress, RaftNode};
pub use openraft::ServerState;
pub use state_machine::ApplyEvent;
pub use types::{Member, TypeConfig};
