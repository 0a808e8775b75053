//! A replica's credentials, loaded and checked from its config's `security` section before
//! anything is bound: the CA, the serving and peer pairs (each present, readable, current,
//! matching its key, issued by the CA), and the TLS configurations built from them.

use std::path::Path;

use crate::config::SecurityConfig;

use super::check::{self, Facts};
use super::tls::{self, ApiTls};
use super::PkiError;

/// What a secure replica serves with.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The cluster CA, PEM.
    pub ca_pem: String,
    /// The API port's TLS.
    pub api: ApiTls,
    /// The peer port's server side.
    pub peer_server: tonic::transport::ServerTlsConfig,
    /// The peer port's client side (Raft, forwarding, read index).
    pub peer_client: tonic::transport::ClientTlsConfig,
    /// The CA certificate's facts (its expiry).
    pub ca: Facts,
    /// When the serving certificate expires.
    pub serving: Facts,
    /// When the peer certificate expires.
    pub peer: Facts,
    /// The front proxy's CA and client certificate, when the config names them.
    pub front_proxy: Option<FrontProxy>,
    /// What this server shows kubelets and trusts of them.
    pub kubelet: KubeletClient,
}

/// What this server identifies itself with to kubelets, and verifies them with.
#[derive(Debug, Clone, Default)]
pub struct KubeletClient {
    /// The client certificate and its key, PEM, one after the other (none configured: no
    /// client certificate is shown).
    pub identity_pem: Option<String>,
    /// The CA of kubelets' serving certificates, PEM (none: they are not verified).
    pub ca_pem: Option<String>,
}

/// What the aggregation proxy identifies itself with to aggregated API servers.
#[derive(Debug, Clone)]
pub struct FrontProxy {
    /// The front-proxy CA, PEM (published for the backends to verify the proxy).
    pub ca_pem: String,
    /// The proxy's client certificate, PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
}

fn name(p: &Path) -> String {
    p.display().to_string()
}

impl Credentials {
    /// Loads and checks the files `security` names.
    pub fn load(security: &SecurityConfig) -> Result<Credentials, PkiError> {
        let ca_file = name(&security.certificate_authority);
        let ca_pem = check::read(&security.certificate_authority)?;
        let ca = check::parse_pem_cert(&ca_pem, &ca_file)?;
        let ca_facts = check::facts(&ca_pem, &ca_file)?;
        check::current(&ca_facts, &ca_file)?;
        let pair = |cert: &Path, key: &Path| -> Result<(String, String, Facts), PkiError> {
            let cert_pem = check::read(cert)?;
            let key_pem = check::read(key)?;
            let facts = check::pair(&cert_pem, &key_pem, &ca, &name(cert), &name(key))?;
            Ok((cert_pem, key_pem, facts))
        };
        let (api_cert, api_key, serving) = pair(&security.serving_certificate, &security.serving_key)?;
        let (peer_cert, peer_key, peer) = pair(&security.peer_certificate, &security.peer_key)?;
        let front_proxy = match (
            &security.front_proxy_ca,
            &security.proxy_client_certificate,
            &security.proxy_client_key,
        ) {
            (Some(ca), Some(cert), Some(key)) => {
                let ca_pem = check::read(ca)?;
                let ca_der = check::parse_pem_cert(&ca_pem, &name(ca))?;
                let (cert_pem, key_pem) = (check::read(cert)?, check::read(key)?);
                check::pair(&cert_pem, &key_pem, &ca_der, &name(cert), &name(key))?;
                Some(FrontProxy {
                    ca_pem,
                    cert_pem,
                    key_pem,
                })
            }
            _ => None,
        };
        let kubelet = KubeletClient {
            // Whoever issued it: kubelets trust the CA they are given for clients.
            identity_pem: match (&security.kubelet_client_certificate, &security.kubelet_client_key) {
                (Some(cert), Some(key)) => {
                    let (cert_pem, key_pem) = (check::read(cert)?, check::read(key)?);
                    check::own_pair(&cert_pem, &key_pem, &name(cert), &name(key))?;
                    Some(format!("{cert_pem}{key_pem}"))
                }
                _ => None,
            },
            ca_pem: match &security.kubelet_certificate_authority {
                Some(ca) => {
                    let pem = check::read(ca)?;
                    check::parse_pem_cert(&pem, &name(ca))?;
                    Some(pem)
                }
                None => None,
            },
        };
        Ok(Credentials {
            kubelet,
            api: ApiTls::new(&ca_pem, &api_cert, &api_key)?,
            peer_server: tls::peer_server(&ca_pem, &peer_cert, &peer_key),
            peer_client: tls::peer_client(&ca_pem, &peer_cert, &peer_key),
            ca_pem,
            ca: ca_facts,
            serving,
            peer,
            front_proxy,
        })
    }
}
