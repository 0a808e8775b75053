//! How this server reaches kubelets, as kube-apiserver does with its `--kubelet-*` flags:
//! HTTPS to the address and port a Node publishes, this server identified by the kubelet
//! client certificate when one is configured, the kubelet's serving certificate verified with
//! the configured CA — or, as kube-apiserver does without `--kubelet-certificate-authority`,
//! not verified. A pod's streams (`exec`, `attach`, `port-forward`) upgrade their connection,
//! which needs HTTP/1.1; a log read may ask not to verify the kubelet
//! (`insecureSkipTLSVerifyBackend`), as kube allows. The proxy subresources reach pods,
//! Service endpoints and nodes' other ports with a client of their own, kube's proxy
//! transport. Neither follows redirects: a backend's redirect is the client's to follow.

use std::time::Duration;

/// How long connecting to a kubelet may take (kube's `--kubelet-timeout` default).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the kubelet client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The client certificate, its key or the CA could not be used.
    #[error("the kubelet client: {0}")]
    Client(String),
}

/// The HTTP clients for kubelets, and for what the proxy subresources reach (cheap to clone).
#[derive(Debug, Clone)]
pub struct Kubelet {
    streams: reqwest::Client,
    /// Only when `streams` verifies kubelets (a CA is configured); otherwise `streams` is it.
    unverified: Option<reqwest::Client>,
    /// kube's proxy transport, for pods, Service endpoints and a node's other ports.
    proxy: reqwest::Client,
}

impl Kubelet {
    /// A client that shows `identity` (a certificate and its key, PEM) to kubelets, if given,
    /// and trusts kubelets whose certificates `ca` (PEM) issued — or any kubelet without it.
    pub fn new(identity: Option<&str>, ca: Option<&str>) -> Result<Kubelet, KubeletError> {
        Ok(Kubelet {
            streams: client(identity, ca)?,
            unverified: ca.map(|_| client(identity, None)).transpose()?,
            proxy: proxy_client()?,
        })
    }

    /// The client of the proxy subresources to pods, Service endpoints and a node's ports
    /// other than its kubelet's, as kube's proxy transport: HTTP, or HTTPS trusting any
    /// certificate (the addresses are IPs, which pods' certificates do not name), no client
    /// identity, HTTP/1.1 so that a connection can be upgraded.
    pub fn proxy(&self) -> &reqwest::Client {
        &self.proxy
    }

    /// The client for streams: HTTP/1.1, so that a connection can be upgraded.
    pub fn streams(&self) -> &reqwest::Client {
        &self.streams
    }

    /// The same, but trusting any kubelet.
    pub fn unverified(&self) -> &reqwest::Client {
        self.unverified.as_ref().unwrap_or(&self.streams)
    }
}

/// An HTTP/1.1 client showing `identity`, trusting kubelets `ca` issued (any without it).
fn client(identity: Option<&str>, ca: Option<&str>) -> Result<reqwest::Client, KubeletError> {
    let bad = |e: reqwest::Error| KubeletError::Client(e.to_string());
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .https_only(true)
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT);
    match ca {
        Some(ca) => {
            for cert in reqwest::Certificate::from_pem_bundle(ca.as_bytes()).map_err(bad)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        None => builder = builder.danger_accept_invalid_certs(true),
    }
    if let Some(identity) = identity {
        builder = builder.identity(reqwest::Identity::from_pem(identity.as_bytes()).map_err(bad)?);
    }
    builder.build().map_err(bad)
}

/// kube's proxy transport (see [`Kubelet::proxy`]); a redirect is answered to the client,
/// not followed.
fn proxy_client() -> Result<reqwest::Client, KubeletError> {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .danger_accept_invalid_certs(true)
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| KubeletError::Client(e.to_string()))
}
