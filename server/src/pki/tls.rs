//! The TLS configurations built from checked certificates: the API port's rustls server (HTTP/2
//! and HTTP/1.1 by ALPN; a client certificate is asked for but verified by the authenticator,
//! as kube-apiserver does, so a bad one is a `401`, not a failed handshake) and the peer
//! port's mutual TLS for tonic (a peer without a certificate of the cluster CA fails the
//! handshake).

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use super::PkiError;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(e: impl std::fmt::Display) -> PkiError {
    PkiError::Tls(e.to_string())
}

/// The API port's TLS: the rustls server configuration and the verifier the x509
/// authenticator checks client certificate chains with.
#[derive(Clone)]
pub struct ApiTls {
    /// For the listener.
    pub server: Arc<rustls::ServerConfig>,
    /// Verifies a client's chain against the cluster CA (validity, signature, client usage).
    pub clients: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for ApiTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiTls")
    }
}

impl ApiTls {
    /// Builds the API port's TLS from PEM texts (already checked by `check::pair`).
    pub fn new(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<ApiTls, PkiError> {
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(ca.map_err(tls_err)?).map_err(tls_err)?;
        }
        let clients = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(tls_err)?;
        let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(tls_err)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(tls_err)?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_client_cert_verifier(Arc::new(Deferred(clients.clone())))
            .with_single_cert(chain, key)
            .map_err(tls_err)?;
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(ApiTls {
            server: Arc::new(server),
            clients,
        })
    }

    /// Checks a client's certificate chain (leaf first) against the cluster CA now.
    pub fn verify_client(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no certificate")?;
        self.clients
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// Asks for a client certificate and checks that the client holds its key, but leaves the
/// chain to the authenticator.
#[derive(Debug)]
struct Deferred(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for Deferred {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The peer port's server side: this replica's peer certificate, and a client certificate
/// of the cluster CA required.
pub fn peer_server(ca_pem: &str, cert_pem: &str, key_pem: &str) -> tonic::transport::ServerTlsConfig {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    ServerTlsConfig::new()
        .identity(Identity::from_pem(cert_pem, key_pem))
        .client_ca_root(Certificate::from_pem(ca_pem))
}

/// The peer port's client side: the cluster CA trusted, this replica's (or an operator's)
/// certificate presented.
pub fn peer_client(ca_pem: &str, cert_pem: &str, key_pem: &str) -> tonic::transport::ClientTlsConfig {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .identity(Identity::from_pem(cert_pem, key_pem))
}
