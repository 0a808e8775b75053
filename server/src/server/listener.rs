//! The API port's accept loop: TLS (HTTP/2 and HTTP/1.1 by ALPN) or, with `--insecure`, plain
//! TCP; the client's certificate chain and address attached to every request of its connection
//! (the x509 authenticator verifies the chain, the audit log records the address); hyper
//! serving the router, HTTP/1.1 connection upgrades included (the aggregation proxy tunnels
//! them to its backends); a graceful drain on shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::authentication::ClientConnection;

/// A client that has not finished its TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` (over TLS with `tls`) until `shutdown` resolves, then waits for
/// the connections in flight to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = tls.map(TlsAcceptor::from);
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "cannot accept an API connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Small API responses must not wait on Nagle's algorithm.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let app = app.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => {
                    let Some((stream, conn)) = handshake(&acceptor, tcp).await else {
                        return;
                    };
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service(app, conn, remote));
                    let _ = watcher.watch(conn).await;
                }
                None => {
                    let conn = builder.serve_connection_with_upgrades(
                        TokioIo::new(tcp),
                        service(app, ClientConnection::default(), remote),
                    );
                    let _ = watcher.watch(conn).await;
                }
            }
        });
    }
    graceful.shutdown().await;
}

async fn handshake(
    acceptor: &TlsAcceptor,
    tcp: TcpStream,
) -> Option<(tokio_rustls::server::TlsStream<TcpStream>, ClientConnection)> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => {
            let chain = stream
                .get_ref()
                .1
                .peer_certificates()
                .map(|c| c.iter().map(|c| c.clone().into_owned()).collect())
                .unwrap_or_default();
            Some((stream, ClientConnection::new(chain)))
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => None,
    }
}

/// The router as a hyper service that tags each request with its connection and the client's
/// address.
fn service(
    app: Router,
    conn: ClientConnection,
    remote: SocketAddr,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(conn.clone());
        req.extensions_mut().insert(ConnectInfo(remote));
        tower::ServiceExt::oneshot(app.clone(), req)
    })
}
