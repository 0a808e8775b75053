//! One client type for both benchmarked systems, so the workload driver does not care which
//! one it talks to.
//!
//! kuberaft is driven either through its `Kv` gRPC service on each replica's peer address (a put
//! is a `Txn` with one `Put` in `success`) or, for the API benchmark, through the Kubernetes
//! HTTP API as ConfigMaps; etcd through its v3 `KV` gRPC service on each member's client URL. A
//! `Range` with `serializable: false` is linearizable on both; over HTTP, an unset
//! resourceVersion is the linearizable ("Most Recent") read and `resourceVersion=0` the local one.

use std::time::Duration;

use anyhow::Context;
use tonic::transport::{Channel, Endpoint};

/// The subset of etcd's v3 gRPC API the benchmark uses (generated from `proto/etcd_kv.proto`).
#[allow(missing_docs, clippy::doc_lazy_continuation)]
pub mod etcdpb {
    tonic::include_proto!("etcdserverpb");
}

/// How long connecting to a replica may take before it counts as a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A benchmarked system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    /// A three-member etcd cluster (the baseline).
    Etcd,
    /// A three-node kuberaft cluster started with `kuberaft cluster up`.
    Kuberaft,
}

impl System {
    /// The name used in flags, tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            System::Etcd => "etcd",
            System::Kuberaft => "kuberaft",
        }
    }
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A secure kuberaft cluster's credentials as its admin: the cluster CA and the admin's client
/// certificate, as `kuberaft cluster up` makes them (`DIR/pki`).
#[derive(Debug, Clone)]
pub struct Tls {
    /// The cluster CA, PEM.
    pub ca_pem: String,
    /// The admin's certificate, PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
}

impl Tls {
    /// The credentials in a `cluster up` PKI directory.
    pub fn from_pki(dir: &std::path::Path) -> anyhow::Result<Tls> {
        let read = |p: &str| {
            std::fs::read_to_string(dir.join(p))
                .with_context(|| format!("cannot read {}", dir.join(p).display()))
        };
        Ok(Tls {
            ca_pem: read("ca.crt")?,
            cert_pem: read("users/kuberaft-admin.crt")?,
            key_pem: read("users/kuberaft-admin.key")?,
        })
    }

    /// A reqwest builder that trusts the CA and presents the admin's certificate.
    pub fn http_builder(&self) -> anyhow::Result<reqwest::ClientBuilder> {
        let identity = reqwest::Identity::from_pem(format!("{}{}", self.cert_pem, self.key_pem).as_bytes())?;
        Ok(reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca_pem.as_bytes())?)
            .identity(identity))
    }
}

/// Opens one gRPC channel (one HTTP/2 connection) to `addr` (`host:port`), over mutual TLS
/// with `tls`.
pub async fn connect(addr: &str, tls: Option<&Tls>) -> anyhow::Result<Channel> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .with_context(|| format!("bad address {addr:?}"))?;
    if let Some(t) = tls {
        endpoint = endpoint.tls_config(
            tonic::transport::ClientTlsConfig::new()
                .ca_certificate(tonic::transport::Certificate::from_pem(&t.ca_pem))
                .identity(tonic::transport::Identity::from_pem(&t.cert_pem, &t.key_pem)),
        )?;
    }
    let endpoint = endpoint.connect_timeout(CONNECT_TIMEOUT).tcp_nodelay(true);
    endpoint
        .connect()
        .await
        .with_context(|| format!("cannot connect to {addr}"))
}

/// A client of one replica of either system. Cloning is cheap and shares the connection(s).
#[derive(Debug, Clone)]
pub enum Client {
    /// kuberaft's `Kv` service.
    Kuberaft(kuberaft_proto::kv_client::KvClient<Channel>),
    /// etcd's v3 `KV` service.
    Etcd(etcdpb::kv_client::KvClient<Channel>),
    /// kuberaft's Kubernetes HTTP API: keys are ConfigMaps.
    Http(HttpClient),
}

/// How long one HTTP request may take before it counts as failed.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// The namespace of the API benchmark's preloaded ConfigMaps (the ones reads and lists see).
pub const PRELOAD_NAMESPACE: &str = "bench";
/// The namespace the API benchmark's creates write to, so lists keep seeing only the preload.
pub const WRITE_NAMESPACE: &str = "bench-writes";
/// Keys under this prefix are preloaded entries (see `workload::preload_key`).
pub const PRELOAD_PREFIX: &str = "/bench/preload/";

/// The HTTP version the API benchmark's clients speak: client-go's default is HTTP/2 (one
/// connection, multiplexed), kubectl's watch and older clients' HTTP/1.1 (a pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpVersion {
    /// HTTP/1.1 with a keep-alive pool.
    Http1,
    /// HTTP/2: every request of a client over one connection.
    Http2,
}

/// A Kubernetes API client of one replica: a keep-alive connection pool and the base URL.
#[derive(Debug, Clone)]
pub struct HttpClient {
    http: reqwest::Client,
    base: String,
}

/// Why an HTTP operation failed, as one line.
fn http_error(e: reqwest::Error) -> tonic::Status {
    tonic::Status::unavailable(format!("HTTP: {e}"))
}

/// A non-success HTTP answer as an error carrying the status code and the start of the body.
async fn http_check(resp: reqwest::Response) -> Result<reqwest::Response, tonic::Status> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let code = resp.status();
    let body = resp.text().await.unwrap_or_default();
    let head: String = body.chars().take(200).collect();
    Err(tonic::Status::unknown(format!("HTTP {code}: {head}")))
}

/// What the benchmark reads of a list: each item's name (the rest is skipped over, not
/// decoded, so the client's cost stays small next to the server's) and the continue token.
#[derive(serde::Deserialize)]
struct ListCount {
    items: Vec<ListItem>,
    #[serde(default)]
    metadata: ListCountMeta,
}

/// A listed object, as far as counting the benchmark's own needs it: every namespace also
/// holds objects the server keeps there (the `kube-root-ca.crt` ConfigMap).
#[derive(serde::Deserialize)]
struct ListItem {
    metadata: ListItemMeta,
}

/// A listed object's name.
#[derive(serde::Deserialize)]
struct ListItemMeta {
    #[serde(default)]
    name: String,
}

impl ListCount {
    /// How many of the listed objects stand for keys under `prefix`.
    fn under(&self, prefix: &[u8]) -> usize {
        let names = configmap_name(prefix);
        self.items
            .iter()
            .filter(|i| i.metadata.name.starts_with(&names))
            .count()
    }
}

/// A list's metadata, as far as paging needs it.
#[derive(Default, serde::Deserialize)]
struct ListCountMeta {
    #[serde(rename = "continue")]
    continue_token: Option<String>,
}

/// The ConfigMap name standing for a benchmark key (names must be DNS subdomains).
pub fn configmap_name(key: &[u8]) -> String {
    let dashed: String = String::from_utf8_lossy(key)
        .to_ascii_lowercase()
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c,
            false => '-',
        })
        .collect();
    dashed.trim_matches('-').to_string()
}

impl HttpClient {
    /// A client of the replica whose API listens at `addr` (`host:port`), over HTTPS as the
    /// admin with `tls`, speaking `version`.
    pub fn new(addr: &str, tls: Option<&Tls>, version: HttpVersion) -> anyhow::Result<Self> {
        let builder = match tls {
            Some(t) => t.http_builder()?,
            None => reqwest::Client::builder(),
        };
        let builder = match version {
            HttpVersion::Http1 => builder.http1_only(),
            // Over TLS, ALPN offers only h2; in plaintext, HTTP/2 with prior knowledge.
            HttpVersion::Http2 => builder.http2_prior_knowledge(),
        };
        let http = builder
            .timeout(HTTP_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .build()
            .context("cannot build an HTTP client")?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        Ok(Self {
            http,
            base: format!("{scheme}://{addr}"),
        })
    }

    /// The ConfigMap collection holding `key`: preloaded keys in one namespace, fresh writes in
    /// another.
    fn collection(&self, key: &[u8]) -> String {
        let namespace = if key.starts_with(PRELOAD_PREFIX.as_bytes()) {
            PRELOAD_NAMESPACE
        } else {
            WRITE_NAMESPACE
        };
        format!("{}/api/v1/namespaces/{namespace}/configmaps", self.base)
    }

    /// Creates the benchmark namespaces unless they exist.
    pub async fn ensure_namespaces(&self) -> anyhow::Result<()> {
        for name in [PRELOAD_NAMESPACE, WRITE_NAMESPACE] {
            let body = serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
            });
            let resp = self
                .http
                .post(format!("{}/api/v1/namespaces", self.base))
                .json(&body)
                .send()
                .await
                .with_context(|| format!("cannot create namespace {name}"))?;
            anyhow::ensure!(
                resp.status().is_success() || resp.status() == reqwest::StatusCode::CONFLICT,
                "creating namespace {name} answered {}",
                resp.status()
            );
        }
        Ok(())
    }

    async fn create(&self, key: &[u8], value: &[u8]) -> Result<(), tonic::Status> {
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": configmap_name(key)},
            "data": {"value": String::from_utf8_lossy(value)},
        });
        let resp = self
            .http
            .post(self.collection(key))
            .json(&body)
            .send()
            .await
            .map_err(http_error)?;
        http_check(resp).await?;
        Ok(())
    }

    async fn get(&self, key: &[u8], serializable: bool) -> Result<bool, tonic::Status> {
        let mut req = self
            .http
            .get(format!("{}/{}", self.collection(key), configmap_name(key)));
        if serializable {
            req = req.query(&[("resourceVersion", "0")]);
        }
        let resp = req.send().await.map_err(http_error)?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(false);
        }
        http_check(resp).await?.bytes().await.map_err(http_error)?;
        Ok(true)
    }

    async fn list(&self, prefix: &[u8], serializable: bool) -> Result<usize, tonic::Status> {
        let mut req = self.http.get(self.collection(prefix));
        if serializable {
            req = req.query(&[("resourceVersion", "0")]);
        }
        let resp = http_check(req.send().await.map_err(http_error)?).await?;
        let list: ListCount = resp.json().await.map_err(http_error)?;
        Ok(list.under(prefix))
    }

    async fn list_paged(&self, prefix: &[u8], limit: i64) -> Result<usize, tonic::Status> {
        let mut token = String::new();
        let mut count = 0;
        loop {
            let mut req = self
                .http
                .get(self.collection(prefix))
                .query(&[("limit", limit.to_string())]);
            if !token.is_empty() {
                req = req.query(&[("continue", token.as_str())]);
            }
            let resp = http_check(req.send().await.map_err(http_error)?).await?;
            let page: ListCount = resp.json().await.map_err(http_error)?;
            count += page.under(prefix);
            match page.metadata.continue_token {
                Some(next) if !next.is_empty() => token = next,
                _ => return Ok(count),
            }
        }
    }
}

impl Client {
    /// Connects to the replica of `system` at `addr` (`host:port`), over mutual TLS with `tls`.
    pub async fn connect(system: System, addr: &str, tls: Option<&Tls>) -> anyhow::Result<Self> {
        let channel = connect(addr, tls).await?;
        Ok(match system {
            // Whole-range reads of the preload are larger than tonic's 4 MiB default.
            System::Kuberaft => Client::Kuberaft(
                kuberaft_proto::kv_client::KvClient::new(channel).max_decoding_message_size(usize::MAX),
            ),
            System::Etcd => {
                Client::Etcd(etcdpb::kv_client::KvClient::new(channel).max_decoding_message_size(usize::MAX))
            }
        })
    }

    /// A Kubernetes API client of the kuberaft replica whose API listens at `addr`.
    pub fn http(addr: &str, tls: Option<&Tls>, version: HttpVersion) -> anyhow::Result<Self> {
        Ok(Client::Http(HttpClient::new(addr, tls, version)?))
    }

    /// Writes `value` at `key`.
    pub async fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), tonic::Status> {
        match self {
            Client::Kuberaft(c) => {
                let put = kuberaft_proto::PutOp { key, value };
                let req = kuberaft_proto::TxnRequest {
                    compares: Vec::new(),
                    success: vec![kuberaft_proto::Op {
                        op: Some(kuberaft_proto::op::Op::Put(put)),
                    }],
                    failure: Vec::new(),
                };
                c.txn(req).await?;
            }
            Client::Etcd(c) => {
                let req = etcdpb::PutRequest { key, value, lease: 0 };
                c.put(req).await?;
            }
            Client::Http(c) => c.create(&key, &value).await?,
        }
        Ok(())
    }

    /// Reads `key`; `serializable` reads the replica's local state, otherwise the read is
    /// linearizable. Returns whether the key exists.
    pub async fn get(&mut self, key: Vec<u8>, serializable: bool) -> Result<bool, tonic::Status> {
        match self {
            Client::Kuberaft(c) => {
                let req = kuberaft_proto::RangeRequest {
                    key,
                    serializable,
                    ..Default::default()
                };
                Ok(!c.range(req).await?.into_inner().kvs.is_empty())
            }
            Client::Etcd(c) => {
                let req = etcdpb::RangeRequest {
                    key,
                    serializable,
                    ..Default::default()
                };
                Ok(!c.range(req).await?.into_inner().kvs.is_empty())
            }
            Client::Http(c) => c.get(&key, serializable).await,
        }
    }

    /// Lists every key under `prefix` (over HTTP: every ConfigMap of the namespace holding it);
    /// `serializable` as for [`Client::get`]. Returns how many there are.
    pub async fn list(&mut self, prefix: Vec<u8>, serializable: bool) -> Result<usize, tonic::Status> {
        match self {
            Client::Kuberaft(c) => {
                let req = kuberaft_proto::RangeRequest {
                    key: prefix,
                    prefix: true,
                    serializable,
                    ..Default::default()
                };
                Ok(c.range(req).await?.into_inner().kvs.len())
            }
            Client::Etcd(c) => {
                let req = etcdpb::RangeRequest {
                    range_end: prefix_end(&prefix),
                    key: prefix,
                    serializable,
                    ..Default::default()
                };
                Ok(c.range(req).await?.into_inner().kvs.len())
            }
            Client::Http(c) => c.list(&prefix, serializable).await,
        }
    }

    /// Lists every key under `prefix` in pages of `limit`, the first page linearizable and
    /// every later one at its revision (over HTTP: `limit` and `continue`). Returns how many
    /// keys there are.
    pub async fn list_paged(&mut self, prefix: Vec<u8>, limit: i64) -> Result<usize, tonic::Status> {
        let (mut count, mut revision) = (0, 0);
        match self {
            Client::Kuberaft(c) => {
                let mut after = Vec::new();
                loop {
                    let req = kuberaft_proto::RangeRequest {
                        key: prefix.clone(),
                        prefix: true,
                        limit,
                        revision,
                        start_after: after.clone(),
                        ..Default::default()
                    };
                    let resp = c.range(req).await?.into_inner();
                    count += resp.kvs.len();
                    revision = resp.revision;
                    match resp.kvs.last() {
                        Some(last) if resp.more => after = last.key.clone(),
                        _ => return Ok(count),
                    }
                }
            }
            Client::Etcd(c) => {
                let end = prefix_end(&prefix);
                let mut from = prefix;
                loop {
                    let req = etcdpb::RangeRequest {
                        key: from.clone(),
                        range_end: end.clone(),
                        limit,
                        revision,
                        ..Default::default()
                    };
                    let resp = c.range(req).await?.into_inner();
                    count += resp.kvs.len();
                    revision = resp.header.map_or(0, |h| h.revision);
                    match resp.kvs.last() {
                        Some(last) if resp.more => {
                            from = last.key.clone();
                            from.push(0);
                        }
                        _ => return Ok(count),
                    }
                }
            }
            Client::Http(c) => c.list_paged(&prefix, limit).await,
        }
    }
}

/// The end of the key range holding every key that starts with `prefix` (etcd's convention:
/// the prefix with its last byte incremented).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end(b"/bench/preload/"), b"/bench/preload0".to_vec());
        assert_eq!(prefix_end(&[b'a', 0xff]), b"b".to_vec());
        assert_eq!(prefix_end(&[0xff]), vec![0]);
    }

    #[test]
    fn configmap_names_are_dns_subdomains() {
        assert_eq!(configmap_name(b"/bench/preload/0042"), "bench-preload-0042");
        assert_eq!(configmap_name(b"/bench/put-c16-r0/3/7"), "bench-put-c16-r0-3-7");
    }
}
