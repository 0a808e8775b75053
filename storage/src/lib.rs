//! kuberaft's durable storage: one RocksDB database per replica holding the Raft log and the
//! MVCC key-value state machine.
//!
//! The crate knows nothing of Raft roles or Kubernetes. Raft metadata (vote, log ids,
//! membership) reaches it as opaque bytes that the `raft` crate encodes, so the invariants that
//! live here are purely about storage:
//! * every mutating transaction increments one store-wide revision by exactly one;
//! * one apply batch (its effects, history records and the applied marker) is one atomic
//!   RocksDB write;
//! * log appends are fsync'd before the caller is told they are durable.

pub mod backup;
pub mod db;
pub mod error;
mod hashing;
pub mod keys;
pub mod log;
pub mod merge;
pub mod mvcc;
pub mod snapshot;

pub use backup::{read_backup, BackupOrigin, BackupSummary, RestoreSummary, BACKUP_FORMAT_VERSION};
pub use db::{Db, Identity};
pub use error::StorageError;
pub use log::LogStore;
pub use merge::{Merger, Mergers};
pub use mvcc::{Applied, ApplyBatch, Change, Mvcc, MAX_KEY_BYTES, MAX_REQUEST_BYTES, MAX_VALUE_BYTES};
