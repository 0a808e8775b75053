//! Errors of a running replica, and how they appear to gRPC clients.

use std::time::Duration;

use kuberaft_storage::StorageError;

use crate::codec::CodecError;

/// Why a replica could not serve a request or start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The storage layer failed or refused the request.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The state machine rejected the command (the same way on every replica).
    #[error("rejected: {0}")]
    Rejected(String),
    /// No leader is known: an election is running or the quorum is lost.
    #[error("no leader is known (an election may be in progress or a quorum is unavailable)")]
    NoLeader,
    /// The leader could not be reached; the request's outcome is unknown.
    #[error("leader unreachable: {0}")]
    Unavailable(String),
    /// Waiting for replication or apply took too long.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
    /// openraft reported an error.
    #[error("raft: {0}")]
    Raft(String),
    /// The replica is shutting down.
    #[error("the replica is shutting down")]
    ShuttingDown,
    /// A message could not be encoded or decoded.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The replica's configuration is unusable.
    #[error("config: {0}")]
    Config(String),
    /// The request is refused in the cluster's current state (e.g. promoting a learner that
    /// has not caught up); the message says why and what to do.
    #[error("{0}")]
    Refused(String),
    /// The space alarm is up: the database is over its quota and the command writes a value.
    #[error("{0}")]
    NoSpace(String),
    /// The leader answered a forwarded request with this status.
    #[error("{}", .0.message())]
    Remote(tonic::Status),
    /// A store read on the blocking pool did not finish (it panicked or the runtime is
    /// shutting down).
    #[error("store read did not complete: {0}")]
    BlockingRead(#[from] tokio::task::JoinError),
}

impl NodeError {
    /// The same error for another caller (the waiters of one batch share its failure). Errors
    /// that carry a source that cannot be copied keep their message and become internal.
    pub fn duplicate(&self) -> NodeError {
        match self {
            NodeError::Rejected(m) => NodeError::Rejected(m.clone()),
            NodeError::NoLeader => NodeError::NoLeader,
            NodeError::Unavailable(m) => NodeError::Unavailable(m.clone()),
            NodeError::Timeout(d, what) => NodeError::Timeout(*d, what),
            NodeError::ShuttingDown => NodeError::ShuttingDown,
            NodeError::Refused(m) => NodeError::Refused(m.clone()),
            NodeError::NoSpace(m) => NodeError::NoSpace(m.clone()),
            NodeError::Remote(status) => NodeError::Remote(status.clone()),
            other => NodeError::Raft(other.to_string()),
        }
    }
}

impl From<NodeError> for tonic::Status {
    fn from(e: NodeError) -> Self {
        use tonic::Code;
        let code = match &e {
            NodeError::Storage(StorageError::Compacted { .. })
            | NodeError::Storage(StorageError::FutureRevision { .. }) => Code::OutOfRange,
            NodeError::Storage(
                StorageError::InvalidKey(_) | StorageError::InvalidRequest(_) | StorageError::TooLarge { .. },
            )
            | NodeError::Rejected(_) => Code::InvalidArgument,
            NodeError::NoLeader | NodeError::Unavailable(_) | NodeError::ShuttingDown => Code::Unavailable,
            NodeError::Timeout(..) => Code::DeadlineExceeded,
            NodeError::Refused(_) => Code::FailedPrecondition,
            NodeError::NoSpace(_) => Code::ResourceExhausted,
            NodeError::Remote(status) => return status.clone(),
            _ => Code::Internal,
        };
        tonic::Status::new(code, e.to_string())
    }
}
