//! Response compression: gzip for responses of a known size of 128 KiB or more (whole bodies,
//! and lists streamed with their length known up front, compressed as they are produced), as
//! kube-apiserver compresses them; watch streams are never compressed.

use axum::body::HttpBody;
use tower_http::compression::{CompressionLayer, Predicate};

/// The compression layer of the API port.
pub fn layer() -> CompressionLayer<LargeComplete> {
    CompressionLayer::new()
        .no_br()
        .no_deflate()
        .no_zstd()
        .compress_when(LargeComplete)
}

/// Responses at least this large are gzipped for clients that accept it, as kube-apiserver does.
const GZIP_THRESHOLD_BYTES: u64 = 128 * 1024;

/// Compress responses of a known size of [`GZIP_THRESHOLD_BYTES`] or more. Streams of unknown
/// size (watches) are never compressed: an encoder would hold events back instead of flushing
/// each one.
#[derive(Debug, Clone, Copy)]
pub struct LargeComplete;

impl Predicate for LargeComplete {
    fn should_compress<B: HttpBody>(&self, response: &axum::http::Response<B>) -> bool {
        response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|n| n >= GZIP_THRESHOLD_BYTES)
    }
}
