//! A webhook server for tests: an axum router served over HTTPS (HTTP/2 offered) on a local
//! port, with a certificate for `127.0.0.1` and the given names signed by a CA of its own
//! (made with rcgen), on its own runtime so that tests blocking on kubectl do not stall it.

use std::sync::Arc;

use axum::Router;
use base64::Engine;

/// A running server: its port and its CA.
pub struct TlsServer {
    pub port: u16,
    pub ca_pem: String,
    /// Stops the server when it is dropped.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TlsServer {
    /// Serves `app` with a certificate for `127.0.0.1` and `names`, until the server is dropped.
    pub fn start(app: Router, names: &[&str]) -> TlsServer {
        TlsServer::start_with_ca(app, names, "webhook-test-ca")
    }

    /// Like [`TlsServer::start`], its CA named `ca`.
    pub fn start_with_ca(app: Router, names: &[&str], ca: &str) -> TlsServer {
        let mut sans = vec!["127.0.0.1"];
        sans.extend_from_slice(names);
        let (ca_pem, certs, key) = super::test_server_cert(ca, &sans);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let (port, stop) = super::spawn_https(app, tls);
        TlsServer {
            port,
            ca_pem,
            _stop: stop,
        }
    }

    /// The CA as a `caBundle` (base64 of the PEM).
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// `https://127.0.0.1:<port>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.port)
    }
}
