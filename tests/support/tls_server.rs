//! A webhook server for tests: an axum router served over HTTPS (HTTP/2 offered) on a local
//! port, with a certificate for `127.0.0.1` and the given names signed by a CA of its own
//! (made with rcgen), on its own runtime so that tests blocking on kubectl do not stall it.

use std::sync::Arc;

use axum::Router;
use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// A running server: its port and its CA.
pub struct TlsServer {
    pub port: u16,
    pub ca_pem: String,
}

impl TlsServer {
    /// Serves `app` with a certificate for `127.0.0.1` and `names`.
    pub fn start(app: Router, names: &[&str]) -> TlsServer {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "webhook-test-ca");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_cert.pem(), ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut sans = vec!["127.0.0.1".to_string()];
        sans.extend(names.iter().map(|n| n.to_string()));
        let cert = rcgen::CertificateParams::new(sans)
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let certs = vec![CertificateDer::from_pem_slice(cert.pem().as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                kuberaft::server::listener::serve(listener, app, Some(Arc::new(tls)), std::future::pending())
                    .await;
            });
        });
        TlsServer {
            port,
            ca_pem: ca_cert.pem(),
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
