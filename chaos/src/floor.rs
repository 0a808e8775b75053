//! The fan-out floor for `kuberaft-bench watch --floor`: a watch server that does nothing but
//! copy each write to every watcher — no storage, no replication, no Kubernetes semantics.
//!
//! It answers the same requests as kuberaft's API does for the benchmark (namespace create,
//! list, ConfigMap create, `?watch=1`) over the same HTTP/1.1 and HTTP/2 framing, so the same
//! clients drive it. A create is acknowledged once its frame (`{"type":"ADDED","object":<the
//! body>}`) is handed to every watcher; a watcher sends every frame waiting for it in one piece,
//! as kuberaft's watchers do. What it costs on this host is what any watch server would pay at
//! least for the same delivery, and the latency it reaches is a bound no server can beat here.

use std::convert::Infallible;

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::BytesMut;
use tokio::sync::broadcast;

/// Frames a watcher may fall behind by before it is closed.
const BACKLOG: usize = 1 << 16;

/// Serves the floor on `listen` until the process is stopped.
pub async fn serve(listen: &str) -> anyhow::Result<()> {
    let (frames, _) = broadcast::channel::<Bytes>(BACKLOG);
    let app = Router::new().fallback(handle).with_state(frames);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    axum::serve(listener, app)
        .await
        .context("the floor server failed")
}

async fn handle(
    State(frames): State<broadcast::Sender<Bytes>>,
    method: Method,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=1" || p == "watch=true"));
    match method {
        Method::POST => {
            let mut frame = BytesMut::with_capacity(body.len() + 32);
            frame.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
            frame.extend_from_slice(&body);
            frame.extend_from_slice(b"}\n");
            // No watcher yet is not an error: the write is simply seen by nobody.
            let _ = frames.send(frame.freeze());
            (StatusCode::CREATED, body).into_response()
        }
        Method::GET if watch => {
            Body::from_stream(futures::stream::unfold(frames.subscribe(), |mut rx| async move {
                let chunk = next_chunk(&mut rx).await?;
                Some((Ok::<_, Infallible>(chunk), rx))
            }))
            .into_response()
        }
        Method::GET => r#"{"kind":"List","metadata":{"resourceVersion":"1"},"items":[]}"#.into_response(),
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

/// Every frame waiting for this watcher, in one piece; `None` ends the stream (it fell more
/// than [`BACKLOG`] frames behind, or the server is stopping).
async fn next_chunk(rx: &mut broadcast::Receiver<Bytes>) -> Option<Bytes> {
    let first = rx.recv().await.ok()?;
    // A single frame goes out as it is; only several are copied into one chunk.
    let mut chunk: Option<BytesMut> = None;
    loop {
        match rx.try_recv() {
            Ok(frame) => chunk
                .get_or_insert_with(|| BytesMut::from(&first[..]))
                .extend_from_slice(&frame),
            Err(broadcast::error::TryRecvError::Empty) => break,
            Err(_) => return None,
        }
    }
    Some(chunk.map_or(first, BytesMut::freeze))
}
