//! How the CLI reaches replicas' admin service (the `Kv` gRPC service on the peer port):
//! mutual TLS with the kubeconfig's CA and client certificate, and the replicas' peer
//! addresses from the kubeconfig's `kuberaft` cluster extensions or `--endpoints`. Every
//! command that talks to a running cluster's admin service (`endpoint status`, `snapshot
//! save`) takes these options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use kuberaft_proto::kv_client::KvClient;
use tonic::transport::{Channel, ClientTlsConfig};

use crate::cli::kubeconfig;

/// Where the cluster is and who the CLI speaks as.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AdminArgs {
    /// kubeconfig written by `cluster up` or `certs kubeconfig` (default: $KUBECONFIG, then
    /// ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Peer addresses (host:port, comma separated) to ask instead of the kubeconfig's.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// Talk plaintext to replicas started with `serve --insecure`.
    #[arg(long)]
    pub insecure: bool,
}

/// A replica to ask: its node id when the kubeconfig names it (0 when not known) and its peer
/// address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Raft node id, 0 when not known yet.
    pub node_id: u64,
    /// The peer (admin) address, host:port.
    pub peer_addr: String,
}

/// The resolved options: the replicas to ask and the TLS to ask them with.
#[derive(Debug, Clone)]
pub struct Admin {
    /// Mutual TLS as the kubeconfig's user; `None` for `--insecure`.
    pub tls: Option<ClientTlsConfig>,
    /// The replicas, in the kubeconfig's (or `--endpoints`') order.
    pub targets: Vec<Target>,
}

fn default_kubeconfig() -> Option<PathBuf> {
    if let Ok(k) = std::env::var("KUBECONFIG") {
        if let Some(first) = k.split(':').find(|s| !s.is_empty()) {
            return Some(PathBuf::from(first));
        }
    }
    std::env::var("HOME")
        .ok()
        .map(|h| PathBuf::from(h).join(".kube/config"))
}

impl AdminArgs {
    /// Reads the kubeconfig (unless `--endpoints` and `--insecure` make it unnecessary) and
    /// says which replicas to ask, and how.
    pub fn resolve(&self) -> anyhow::Result<Admin> {
        let path = self
            .kubeconfig
            .clone()
            .or_else(default_kubeconfig)
            .context("no kubeconfig given and no $KUBECONFIG or $HOME")?;
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()));
        // The peer port takes the kubeconfig's client certificate (of the cluster CA);
        // --insecure replicas are asked in plaintext.
        let tls = match &text {
            Ok(t) if !self.insecure => kubeconfig::credentials(t, path.parent().unwrap_or(Path::new(".")))
                .with_context(|| format!("cannot parse {}", path.display()))?
                .map(|c| crate::pki::tls::peer_client(&c.ca_pem, &c.cert_pem, &c.key_pem)),
            _ => None,
        };
        if tls.is_none() && !self.insecure {
            anyhow::bail!(
                "{} has no client certificate and CA for the current context; pass --insecure for replicas started with --insecure",
                path.display()
            );
        }
        let targets = if self.endpoints.is_empty() {
            let text = text?;
            let found =
                kubeconfig::replicas(&text).with_context(|| format!("cannot parse {}", path.display()))?;
            if found.is_empty() {
                anyhow::bail!(
                    "{} names no kuberaft replicas (no `kuberaft` cluster extensions); pass --endpoints",
                    path.display()
                );
            }
            found
                .into_iter()
                .map(|r| Target {
                    node_id: r.node_id,
                    peer_addr: r.peer_addr,
                })
                .collect()
        } else {
            self.endpoints
                .iter()
                .map(|e| Target {
                    node_id: 0,
                    peer_addr: e.clone(),
                })
                .collect()
        };
        Ok(Admin { tls, targets })
    }
}

impl Admin {
    /// A client of the admin service at `addr`; `timeout` bounds each call.
    pub async fn connect(&self, addr: &str, timeout: Option<Duration>) -> Result<KvClient<Channel>, String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let mut endpoint = tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}"))
            .map_err(|e| e.to_string())?;
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|e| e.to_string())?;
        }
        let mut endpoint = endpoint.connect_timeout(Duration::from_secs(1));
        if let Some(t) = timeout {
            endpoint = endpoint.timeout(t);
        }
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| format!("unreachable: {e}"))?;
        Ok(KvClient::new(channel).max_decoding_message_size(16 * 1024 * 1024))
    }
}
