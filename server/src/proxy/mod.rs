//! Forwarding a request to another HTTP server and its answer back, as kube's upgrade-aware
//! proxy does it: for the aggregation layer (an APIService's backend) and for the kubelets'
//! streams (`exec`, `attach`, `port-forward`, [`kubelet`]). The request body streams to the
//! backend and the answer back as they come, of any size. A connection upgrade (websocket or
//! SPDY) goes to the backend over HTTP/1.1; once the backend switches protocols the two
//! connections are joined both ways until both close. Whoever calls decides where to send the
//! request, with which client and which identity; this module only carries it.
//!
//! *Invariant:* knows HTTP only: no store, no user, no resource.

pub mod html;
pub mod kubelet;

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};

/// Headers that belong to one connection, not to the request (RFC 9110), and those this
/// server sets itself or must not pass on (the caller's credentials are for this server only).
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "authorization",
];

/// A request body as reqwest sends it, streamed as the client sends it (kube's proxy copies
/// the body through; there is no size limit on what it proxies). reqwest wants a `Sync` body
/// and axum's is only `Send`: the mutex makes it `Sync` and is never contended, as polling
/// goes through `get_mut`.
struct SyncBody(std::sync::Mutex<Body>);

impl SyncBody {
    fn inner(self: Pin<&mut Self>) -> Pin<&mut Body> {
        Pin::new(match self.get_mut().0.get_mut() {
            Ok(body) => body,
            Err(poisoned) => poisoned.into_inner(),
        })
    }
}

impl HttpBody for SyncBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.inner().poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        match self.0.lock() {
            Ok(body) => body.size_hint(),
            Err(poisoned) => poisoned.into_inner().size_hint(),
        }
    }
}

/// Whether the request asks to upgrade its connection (a `Connection` header naming
/// `upgrade`), as kube's `httpstream.IsUpgradeRequest` decides.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
}

/// Joins the client's upgraded connection with the backend's once both have switched
/// protocols, copying both ways until both sides have closed; a side that fails ends the
/// tunnel, and the client's connection is then closed properly all the same.
async fn tunnel(client: hyper::upgrade::OnUpgrade, backend: reqwest::Response, label: String) {
    use tokio::io::AsyncWriteExt;
    let (client, backend) = tokio::join!(client, backend.upgrade());
    match (client, backend) {
        (Ok(client), Ok(mut backend)) => {
            let mut client = hyper_util::rt::TokioIo::new(client);
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut backend).await {
                tracing::debug!(backend = label, error = %e, "an upgraded connection failed");
                let _ = client.shutdown().await;
            }
        }
        (Err(e), _) => tracing::debug!(backend = label, error = %e, "the client did not upgrade"),
        (_, Err(e)) => tracing::info!(backend = label, error = %e, "the backend did not upgrade"),
    }
}

/// The innermost cause of an HTTP error, as Go's client states it last.
pub fn cause(e: &reqwest::Error) -> String {
    let mut last: &dyn std::error::Error = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// kube's `http.Error`: a plain-text body with the status.
pub fn plain_error(code: StatusCode, message: &str) -> Response {
    (
        code,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

/// Sends `request` to `url` (the backend's path and query; the caller's are not kept) through
/// `client` and answers what the backend answers. The caller's headers go along, but for
/// those of its connection and its credentials; `identify` then sets what the backend should
/// know of the caller. An upgrade is offered to the backend as the caller offered it (the
/// client must speak HTTP/1.1 for that); when the backend switches protocols the connections
/// are joined, `label` naming the backend in the logs. Fails only when the backend could not
/// be asked.
pub async fn forward(
    client: &reqwest::Client,
    url: &str,
    mut request: Request,
    identify: impl FnOnce(&mut HeaderMap),
    label: &str,
) -> Result<Response, reqwest::Error> {
    let upgrade = is_upgrade(request.headers());
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut request));
    let (parts, body) = request.into_parts();
    let mut headers = parts.headers;
    let protocols = headers.get(header::UPGRADE).cloned();
    for h in NOT_FORWARDED {
        headers.remove(*h);
    }
    if let (true, Some(protocols)) = (upgrade, protocols) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(header::UPGRADE, protocols);
    }
    identify(&mut headers);
    let answer = client
        .request(parts.method, url)
        .headers(headers)
        .body(reqwest::Body::wrap(SyncBody(std::sync::Mutex::new(body))))
        .send()
        .await?;
    if let (StatusCode::SWITCHING_PROTOCOLS, Some(client_upgrade)) = (answer.status(), client_upgrade) {
        let mut response = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
        if let Some(h) = response.headers_mut() {
            for (k, v) in answer.headers() {
                h.append(k.clone(), v.clone());
            }
        }
        tokio::spawn(tunnel(client_upgrade, answer, label.to_string()));
        return Ok(response
            .body(Body::empty())
            .unwrap_or_else(|e| plain_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())));
    }
    let mut response = Response::builder().status(answer.status());
    if let Some(h) = response.headers_mut() {
        for (k, v) in answer.headers() {
            if !NOT_FORWARDED.contains(&k.as_str()) {
                h.append(k.clone(), v.clone());
            }
        }
    }
    Ok(response
        .body(streamed(answer))
        .unwrap_or_else(|e| plain_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())))
}

/// The body of `answer` as a body of this server's, passed on as it arrives.
pub fn streamed(answer: reqwest::Response) -> Body {
    let chunks = futures::stream::unfold(Some(answer), |answer| async move {
        let mut answer = answer?;
        match answer.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(answer))),
            Ok(None) => None,
            Err(e) => Some((Err(std::io::Error::other(e)), None)),
        }
    });
    Body::from_stream(chunks)
}
