//! Binary encoding of openraft's messages and records (postcard), with typed errors.

use serde::{de::DeserializeOwned, Serialize};

/// A value could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct CodecError {
    what: &'static str,
    #[source]
    source: postcard::Error,
}

/// Encodes `v`; `what` names it in errors.
pub fn encode<T: Serialize>(what: &'static str, v: &T) -> Result<Vec<u8>, CodecError> {
    postcard::to_stdvec(v).map_err(|source| CodecError { what, source })
}

/// Decodes bytes produced by [`encode`]; `what` names it in errors.
pub fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, CodecError> {
    postcard::from_bytes(bytes).map_err(|source| CodecError { what, source })
}
