//! Typed storage errors. `Compacted` and `FutureRevision` are part of the read contract; the
//! others describe a broken disk, data dir or request.

use std::path::PathBuf;

/// Everything that can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// RocksDB reported an I/O or corruption error.
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    /// A file-system error outside RocksDB (snapshot files, data dir checks).
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The requested revision is older than the compacted revision.
    #[error("required revision {requested} has been compacted (compacted revision is {compacted})")]
    Compacted {
        /// The revision the caller asked for.
        requested: i64,
        /// The store's compacted revision.
        compacted: i64,
    },
    /// The requested revision has not happened yet.
    #[error("required revision {requested} is a future revision (current revision is {current})")]
    FutureRevision {
        /// The revision the caller asked for.
        requested: i64,
        /// The store's current revision.
        current: i64,
    },
    /// A key is empty, too long or contains a NUL byte.
    #[error("invalid key: {0}")]
    InvalidKey(String),
    /// A value or request is larger than the store accepts.
    #[error("{what} of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// What was too large ("value", "request").
        what: &'static str,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A request is structurally invalid (e.g. an operation with no body).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The data dir is not usable: not a kuberaft database, or another replica's.
    #[error("data dir {path}: {reason}")]
    DataDir {
        /// The data dir.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored record could not be decoded.
    #[error("corrupt record in {what}: {detail}")]
    Corrupt {
        /// Which record family.
        what: &'static str,
        /// Decoder message.
        detail: String,
    },
}

impl StorageError {
    pub(crate) fn corrupt(what: &'static str, detail: impl std::fmt::Display) -> Self {
        StorageError::Corrupt {
            what,
            detail: detail.to_string(),
        }
    }
}
