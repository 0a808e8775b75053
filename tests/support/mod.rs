//! A test harness that runs real `kuberaft serve` processes on loopback.
//!
//! Each replica is its own OS process, so `kill -9`, restarts and data-dir faults are real.
//! Ports come from the OS (bind to port 0, then release) and each cluster lives in its own
//! temporary directory. Clusters are secure, as a user runs them: a PKI made with the server's
//! own `pki` module (CA, serving and peer certificates, the admin's client certificate),
//! HTTPS with the CA verified, and mutual TLS on the peer port.

#![allow(dead_code)]

pub mod kube;
pub mod python;
pub mod tls_server;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kuberaft::pki::layout::Layout;
use kuberaft::store::encryption;
use kuberaft_proto::kv_client::KvClient;
use kuberaft_proto::{op, Op, PutOp, RangeRequest, StatusRequest, StatusResponse, TxnRequest};
use tonic::transport::Channel;

/// The admin user of a test cluster (`O=system:masters`).
pub const ADMIN: &str = "kuberaft-admin";

/// Path of the `kuberaft` binary built for these tests.
pub fn kuberaft_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kuberaft"))
}

/// A free loopback port (the OS picks it; it is released before use), never one this process
/// was given before: a port released a moment ago can be picked again at once, and a cluster
/// whose config names one address twice does not start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// One replica process.
pub struct Replica {
    pub id: u64,
    pub config: PathBuf,
    pub peer_addr: String,
    pub api_addr: String,
    pub log: PathBuf,
    child: Option<Child>,
    paused: bool,
}

impl Replica {
    /// Whether the process is running (and not paused).
    pub fn is_running(&mut self) -> bool {
        !self.paused && matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

/// Knobs for the generated config files.
#[derive(Clone)]
pub struct Options {
    pub nodes: u64,
    pub snapshot_logs: u64,
    pub logs_kept_after_snapshot: u64,
    pub retention_seconds: u64,
    pub cluster_name: String,
    pub watch_buffer: usize,
    /// Feature gates turned on in every replica's config file.
    pub feature_gates: Vec<&'static str>,
    /// Start the replicas with `serve --insecure` (plain HTTP, no authentication).
    pub insecure: bool,
    /// The text of a static token file every replica reads (`token,user,uid,"groups"`).
    pub token_file: Option<String>,
    /// An audit policy file every replica logs by, each to its own [`audit_log_path`].
    pub audit_policy: Option<PathBuf>,
    /// With `audit_policy`: a kubeconfig naming the audit webhook every replica also sends its
    /// events to (in batches of at most a second's events).
    pub audit_webhook: Option<PathBuf>,
    /// Every replica's `admissionConfigFile` (an `AdmissionConfiguration`).
    pub admission_config: Option<PathBuf>,
    /// Every replica's database size quota.
    pub quota_backend_bytes: u64,
    /// Every replica's `serviceClusterIPRange` and `serviceNodePortRange`.
    pub service_ranges: (String, String),
    /// Every replica's `maxRequestsInflight` and `maxMutatingRequestsInflight`.
    pub inflight: (usize, usize),
    /// API Priority and Fairness (`false`: the in-flight limits alone).
    pub priority_and_fairness: bool,
    /// Every replica re-reads the encryption config when it changes.
    pub encryption_reload: bool,
    /// Environment variables every replica is started with (beyond the test's own).
    pub env: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            nodes: 3,
            snapshot_logs: 20_000,
            logs_kept_after_snapshot: 5_000,
            retention_seconds: 300,
            cluster_name: "test-cluster".into(),
            watch_buffer: 4096,
            feature_gates: Vec::new(),
            insecure: false,
            token_file: None,
            audit_policy: None,
            audit_webhook: None,
            admission_config: None,
            quota_backend_bytes: kuberaft::config::ServeConfig::DEFAULT_QUOTA_BACKEND_BYTES,
            service_ranges: (
                kuberaft::config::ServiceRanges::DEFAULT_CLUSTER_IP_RANGE.into(),
                kuberaft::config::ServiceRanges::DEFAULT_NODE_PORT_RANGE.into(),
            ),
            inflight: (
                kuberaft::config::ServeConfig::DEFAULT_MAX_REQUESTS_INFLIGHT,
                kuberaft::config::ServeConfig::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            ),
            priority_and_fairness: true,
            encryption_reload: false,
            env: Vec::new(),
        }
    }
}

/// A cluster of replica processes in a temporary directory.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub replicas: Vec<Replica>,
    pub options: Options,
    /// The cluster's keys and certificates.
    pub pki: Layout,
}

/// Makes the test cluster's PKI in `dir`: the CA, each replica's certificates and the admin's.
pub fn make_pki(dir: &Path, nodes: u64) -> Layout {
    let pki = Layout::new(dir);
    pki.ensure_ca("test-ca").expect("a CA");
    pki.ensure_sa_key().expect("a service-account key");
    pki.ensure_front_proxy()
        .expect("the front-proxy CA and client certificate");
    pki.ensure_kubelet_client()
        .expect("the kubelet client certificate");
    for id in 1..=nodes {
        pki.ensure_replica(&format!("node-{id}"), &["127.0.0.1".into()], false)
            .expect("replica certificates");
    }
    pki.ensure_user(ADMIN, &["system:masters".into()], false)
        .expect("the admin's certificate");
    if !pki.encryption_config().exists() {
        let secret = encryption::new_key_secret().expect("a random key");
        std::fs::write(pki.encryption_config(), encryption::config_yaml("key1", &secret))
            .expect("write the encryption config");
    }
    pki
}

/// Opens the watch at `url` and returns its first event, which must arrive within 10 seconds
/// (so a watch that is not streamed, but held until it ends, fails).
pub async fn first_watch_event(http: &reqwest::Client, url: &str) -> serde_json::Value {
    let mut watch = http.get(url).send().await.unwrap();
    assert_eq!(watch.status(), 200, "{url}");
    let first = tokio::time::timeout(Duration::from_secs(10), watch.chunk())
        .await
        .expect("an event within 10 s")
        .unwrap()
        .expect("a chunk");
    serde_json::from_slice(first.split(|b| *b == b'\n').next().unwrap()).unwrap()
}

/// A server certificate for a test's own HTTPS server (a webhook, an aggregated API server):
/// a fresh CA named `ca_name` and a certificate it signs for `hosts`, as (CA PEM, rustls
/// certificate chain, key).
pub fn test_server_cert(
    ca_name: &str,
    hosts: &[&str],
) -> (
    String,
    Vec<rustls_pki_types::CertificateDer<'static>>,
    rustls_pki_types::PrivateKeyDer<'static>,
) {
    use rustls_pki_types::pem::PemObject;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_cert.pem(), ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let certs = vec![rustls_pki_types::CertificateDer::from_pem_slice(cert.pem().as_bytes()).unwrap()];
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
    (ca_cert.pem(), certs, key)
}

/// A TLS server config with `certs` and `key` that lets in only clients with a certificate
/// `client_ca` (PEM) issued, offering `alpn`.
pub fn mutual_tls(
    client_ca: &str,
    certs: Vec<rustls_pki_types::CertificateDer<'static>>,
    key: rustls_pki_types::PrivateKeyDer<'static>,
    alpn: &[&[u8]],
) -> rustls::ServerConfig {
    use rustls_pki_types::pem::PemObject;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(client_ca.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    tls.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    tls
}

/// Serves `app` over HTTPS with `tls` on a free loopback port, on a runtime of its own (kubectl
/// blocks the test's threads): its port, and a sender whose drop stops the server, closing the
/// listener and every open connection.
pub fn spawn_https(app: axum::Router, tls: rustls::ServerConfig) -> (u16, tokio::sync::oneshot::Sender<()>) {
    spawn_server(app, Some(tls), "127.0.0.1")
}

/// Serves `app` (over HTTPS with `tls`, else plain HTTP) on a free port of `ip` (`0.0.0.0`:
/// every address of the host), as [`spawn_https`] does.
pub fn spawn_server(
    app: axum::Router,
    tls: Option<rustls::ServerConfig>,
    ip: &str,
) -> (u16, tokio::sync::oneshot::Sender<()>) {
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let serve = kuberaft::server::listener::serve(
                listener,
                app,
                tls.map(std::sync::Arc::new),
                std::future::pending(),
            );
            tokio::select! {
                () = serve => {}
                _ = stopped => {}
            }
        });
    });
    (port, stop)
}

/// Where replica `id` of a cluster in `dir` writes its audit log (with `Options::audit_policy`).
pub fn audit_log_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("audit-node-{id}")).join("audit.log")
}

/// Renders a replica config file from the server's own config types; `pki` gives its
/// `security` section.
pub fn config_yaml(
    id: u64,
    data_dir: &Path,
    members: &[(u64, String, String)],
    o: &Options,
    pki: &Layout,
) -> String {
    use kuberaft::config::{
        AuditConfig, CompactionConfig, FeatureGates, MemberConfig, RaftConfig, SecurityConfig, ServeConfig,
    };
    let name = format!("node-{id}");
    let mut feature_gates = FeatureGates::default();
    for gate in &o.feature_gates {
        feature_gates
            .apply(&format!("{gate}=true"))
            .expect("known feature gate");
    }
    let config = ServeConfig {
        id,
        cluster_name: o.cluster_name.clone(),
        data_dir: data_dir.to_path_buf(),
        peer_listen: None,
        api_listen: None,
        members: members
            .iter()
            .map(|(id, peer, api)| MemberConfig {
                id: *id,
                peer_addr: peer.clone(),
                api_addr: api.clone(),
            })
            .collect(),
        raft: RaftConfig {
            snapshot_logs: o.snapshot_logs,
            logs_kept_after_snapshot: o.logs_kept_after_snapshot,
            ..RaftConfig::default()
        },
        compaction: CompactionConfig {
            retention_seconds: o.retention_seconds,
            interval_seconds: 1,
        },
        request_timeout_seconds: ServeConfig::DEFAULT_REQUEST_TIMEOUT_SECONDS,
        quota_backend_bytes: o.quota_backend_bytes,
        watch_buffer: o.watch_buffer,
        feature_gates,
        security: Some(SecurityConfig {
            token_file: o.token_file.as_ref().map(|_| pki.dir.join("tokens.csv")),
            encryption_config_automatic_reload: o.encryption_reload,
            ..pki.security_config(&name)
        }),
        audit: o.audit_policy.as_ref().map(|policy| AuditConfig {
            policy_file: policy.clone(),
            log_path: Some(audit_log_path(data_dir.parent().unwrap_or(data_dir), id)),
            webhook_config_file: o.audit_webhook.clone(),
            webhook_batch_max_wait_seconds: 1,
            log_max_size_mb: AuditConfig::DEFAULT_LOG_MAX_SIZE_MB,
            log_max_backups: 0,
            log_max_age_days: 0,
        }),
        admission_config_file: o.admission_config.clone(),
        backup: None,
        service_cluster_ip_range: o.service_ranges.0.clone(),
        service_node_port_range: o.service_ranges.1.clone(),
        max_requests_inflight: o.inflight.0,
        max_mutating_requests_inflight: o.inflight.1,
        enable_priority_and_fairness: o.priority_and_fairness,
    };
    config.to_yaml().expect("a config renders as YAML")
}

impl Cluster {
    /// Writes configs and starts every replica.
    pub fn start(options: Options) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let members: Vec<(u64, String, String)> = (1..=options.nodes)
            .map(|i| {
                (
                    i,
                    format!("127.0.0.1:{}", free_port()),
                    format!("127.0.0.1:{}", free_port()),
                )
            })
            .collect();
        let pki = make_pki(&dir.path().join("pki"), options.nodes);
        if let Some(tokens) = &options.token_file {
            std::fs::write(pki.dir.join("tokens.csv"), tokens).expect("write the token file");
        }
        let mut replicas = Vec::new();
        for (id, peer, api) in &members {
            let config = dir.path().join(format!("node-{id}.yaml"));
            let data = dir.path().join(format!("node-{id}"));
            std::fs::write(&config, config_yaml(*id, &data, &members, &options, &pki)).expect("write config");
            replicas.push(Replica {
                id: *id,
                config,
                peer_addr: peer.clone(),
                api_addr: api.clone(),
                log: dir.path().join(format!("node-{id}.log")),
                child: None,
                paused: false,
            });
        }
        let mut c = Cluster {
            dir,
            replicas,
            options,
            pki,
        };
        for i in 0..c.replicas.len() {
            c.restart(i);
        }
        c
    }

    /// Starts (again) replica at position `i`.
    pub fn restart(&mut self, i: usize) {
        let r = &mut self.replicas[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&r.log)
            .expect("log file");
        let mut cmd = Command::new(kuberaft_bin());
        cmd.args(["serve", "--config"]).arg(&r.config);
        if self.options.insecure {
            cmd.arg("--insecure");
        }
        let child = cmd
            .envs(self.options.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn kuberaft serve");
        r.child = Some(child);
    }

    /// `kill -9` of replica `i`.
    pub fn kill(&mut self, i: usize) {
        self.replicas[i].paused = false;
        if let Some(mut c) = self.replicas[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP (`resume`: SIGCONT) to replica `i`: it keeps its connections and its state
    /// but does nothing, as a long pause of the process would. A paused replica does not
    /// count as running.
    pub fn pause(&mut self, i: usize) {
        self.signal(i, libc::SIGSTOP);
        self.replicas[i].paused = true;
    }

    /// SIGCONT to replica `i` (see [`Cluster::pause`]).
    pub fn resume(&mut self, i: usize) {
        self.signal(i, libc::SIGCONT);
        self.replicas[i].paused = false;
    }

    fn signal(&self, i: usize, signal: libc::c_int) {
        let c = self.replicas[i].child.as_ref().expect("replica is running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(c.id() as libc::pid_t, signal);
        }
    }

    /// SIGTERM to replica `i`, waiting for a clean exit.
    pub fn stop(&mut self, i: usize) -> std::process::ExitStatus {
        let mut c = self.replicas[i].child.take().expect("replica is running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
        }
        c.wait().expect("wait")
    }

    /// Replica `i`'s resident memory (`VmRSS` of its `/proc/PID/status`), in KiB.
    pub fn rss_kib(&self, i: usize) -> u64 {
        let child = self.replicas[i].child.as_ref().expect("replica is running");
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
            .expect("the replica's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// The audit log of replica `i` so far (empty without `Options::audit_policy`).
    pub fn audit_log(&self, i: usize) -> String {
        std::fs::read_to_string(audit_log_path(self.dir.path(), self.replicas[i].id)).unwrap_or_default()
    }

    /// The replica's log so far (for assertion messages).
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.replicas[i].log).unwrap_or_default()
    }

    /// The last `lines` lines of every replica's log, labelled (for failure messages).
    pub fn log_tails(&self, lines: usize) -> String {
        (0..self.replicas.len())
            .map(|i| {
                let log = self.log(i);
                let all: Vec<&str> = log.lines().collect();
                let tail = all[all.len().saturating_sub(lines)..].join("\n");
                format!(
                    "\n--- replica {} (id {}) log tail ---\n{tail}",
                    i, self.replicas[i].id
                )
            })
            .collect()
    }

    /// The URL scheme of the API port.
    pub fn scheme(&self) -> &'static str {
        if self.options.insecure {
            "http"
        } else {
            "https"
        }
    }

    /// The base URL of replica `i`'s API port.
    pub fn base_url(&self, i: usize) -> String {
        format!("{}://{}", self.scheme(), self.replicas[i].api_addr)
    }

    /// The CA's certificate, PEM.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.pki.ca_cert()).expect("the CA certificate")
    }

    /// The certificate and key of `user` (made on first use, in `groups`), PEM.
    pub fn user_pem(&self, user: &str, groups: &[&str]) -> (String, String) {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        self.pki
            .ensure_user(user, &groups, false)
            .expect("a user certificate");
        let (cert, key) = self.pki.user(user);
        (
            std::fs::read_to_string(cert).expect("cert"),
            std::fs::read_to_string(key).expect("key"),
        )
    }

    /// A reqwest builder that trusts the cluster CA and presents no credentials.
    pub fn http_builder(&self) -> reqwest::ClientBuilder {
        let ca = reqwest::Certificate::from_pem(self.ca_pem().as_bytes()).expect("CA PEM");
        reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
    }

    /// A reqwest builder that speaks as `user` in `groups` (a client certificate).
    pub fn http_builder_as(&self, user: &str, groups: &[&str]) -> reqwest::ClientBuilder {
        let (cert, key) = self.user_pem(user, groups);
        let identity = reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).expect("identity PEM");
        self.http_builder().identity(identity)
    }

    /// An HTTP/1.1 client that speaks as the cluster's admin: one connection per request in
    /// flight, so a watch the test does not read holds up nothing else (over HTTP/2 every
    /// stream shares one connection's flow-control window; tests/watch.rs covers that).
    pub fn http(&self) -> reqwest::Client {
        self.http_builder_as(ADMIN, &["system:masters"])
            .http1_only()
            .build()
            .expect("an HTTP client")
    }

    /// A raw TLS connection to replica `i`'s API port as the admin (for requests no HTTP
    /// client would send), HTTP/1.1 only.
    pub async fn tls_stream(&self, i: usize) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(self.ca_pem().as_bytes()).expect("CA PEM"))
            .expect("a root");
        let (cert, key) = self.user_pem(ADMIN, &["system:masters"]);
        let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert PEM")];
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key PEM");
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .expect("a client certificate");
        let tcp = tokio::net::TcpStream::connect(&self.replicas[i].api_addr)
            .await
            .expect("connect");
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(ServerName::try_from("127.0.0.1").expect("a name"), tcp)
            .await
            .expect("a TLS handshake")
    }

    /// A Kv client for replica `i` (mutual TLS with the admin's certificate).
    pub async fn kv(&self, i: usize) -> KvClient<Channel> {
        let mut endpoint =
            Channel::from_shared(format!("{}://{}", self.scheme(), self.replicas[i].peer_addr)).expect("uri");
        if !self.options.insecure {
            let (cert, key) = self.user_pem(ADMIN, &["system:masters"]);
            endpoint = endpoint
                .tls_config(kuberaft::pki::tls::peer_client(&self.ca_pem(), &cert, &key))
                .expect("peer TLS");
        }
        KvClient::new(endpoint.connect_lazy()).max_decoding_message_size(64 << 20)
    }

    /// Status of replica `i`, if it answers.
    pub async fn status(&self, i: usize, hash: bool) -> Option<StatusResponse> {
        let mut kv = self.kv(i).await;
        let mut req = tonic::Request::new(StatusRequest { with_hash: hash });
        req.set_timeout(Duration::from_secs(5));
        kv.status(req).await.ok().map(|r| r.into_inner())
    }

    /// Waits until every running replica agrees on one leader; returns the leader's position.
    pub async fn wait_leader(&mut self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let running: Vec<usize> = (0..self.replicas.len())
                .filter(|&i| self.replicas[i].is_running())
                .collect();
            let mut leaders = Vec::new();
            let mut all = true;
            for &i in &running {
                match self.status(i, false).await {
                    Some(s) if s.has_leader => leaders.push(s.leader_id),
                    _ => all = false,
                }
            }
            if all && !leaders.is_empty() && leaders.iter().all(|l| *l == leaders[0]) {
                let pos = self.replicas.iter().position(|r| r.id == leaders[0]);
                if let Some(pos) = pos {
                    if running.contains(&pos) {
                        return pos;
                    }
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "no agreed leader within {timeout:?} (leaders seen: {leaders:?}, all answered: {all}); {}",
                    self.log_tails(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the leader has created the system namespaces with their `default`
    /// ServiceAccounts and (with a CA) `kube-root-ca.crt` ConfigMaps, and the default RBAC
    /// policy (and aggregated its ClusterRoles), and the store has been quiet for a moment, so
    /// a test that counts revisions is the only writer afterwards.
    pub async fn wait_bootstrapped(&mut self, timeout: Duration) {
        let leader = self.wait_leader(timeout).await;
        let this = &*self;
        let mut expected = vec![
            ("/registry/core/namespaces/", 4),
            ("/registry/core/serviceaccounts/", 4),
            ("/registry/rbac.authorization.k8s.io/clusterrolebindings/", 1),
        ];
        if !self.options.insecure {
            expected.push(("/registry/core/configmaps/", 4));
        }
        let expected = &expected;
        eventually(timeout, || async move {
            let mut kv = this.kv(leader).await;
            for &(prefix, want) in expected {
                let r = kv
                    .range(RangeRequest {
                        key: prefix.as_bytes().to_vec(),
                        prefix: true,
                        count_only: true,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| e.to_string())?
                    .into_inner();
                if r.count < want {
                    return Err(format!("{} objects under {prefix}", r.count));
                }
            }
            Ok(())
        })
        .await;
        // Quiet: no new revision for a second (the policy's aggregation settles).
        let mut last = -1;
        let deadline = Instant::now() + timeout;
        loop {
            let rev = self.status(leader, false).await.map_or(-1, |s| s.revision);
            if rev == last && rev >= 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the store did not settle after bootstrap"
            );
            last = rev;
            tokio::time::sleep(Duration::from_millis(1000)).await;
        }
    }

    /// Waits until every running replica reports the same revision and state hash.
    pub async fn wait_converged(&mut self, timeout: Duration) -> (i64, String) {
        let deadline = Instant::now() + timeout;
        loop {
            let running: Vec<usize> = (0..self.replicas.len())
                .filter(|&i| self.replicas[i].is_running())
                .collect();
            let mut seen = Vec::new();
            for &i in &running {
                if let Some(s) = self.status(i, true).await {
                    seen.push((s.hash_revision, s.state_hash));
                }
            }
            if seen.len() == running.len() && seen.iter().all(|s| *s == seen[0]) {
                return seen.swap_remove(0);
            }
            assert!(Instant::now() < deadline, "replicas did not converge: {seen:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Position of any running replica that is not `leader`.
    pub fn follower_of(&mut self, leader: usize) -> usize {
        (0..self.replicas.len())
            .find(|&i| i != leader && self.replicas[i].is_running())
            .expect("a running follower")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.replicas.len() {
            self.kill(i);
        }
    }
}

/// A single-put transaction.
pub fn put_txn(key: &str, value: &[u8]) -> TxnRequest {
    TxnRequest {
        success: vec![Op {
            op: Some(op::Op::Put(PutOp {
                key: key.as_bytes().to_vec(),
                value: value.to_vec(),
            })),
        }],
        ..Default::default()
    }
}

/// Puts `key` through replica `i`'s Kv service; returns the new revision.
pub async fn put(kv: &mut KvClient<Channel>, key: &str, value: &[u8]) -> Result<i64, tonic::Status> {
    let mut req = tonic::Request::new(put_txn(key, value));
    req.set_timeout(Duration::from_secs(15));
    kv.txn(req).await.map(|r| r.into_inner().revision)
}

/// Reads one key (linearizable unless `serializable`) at `revision` (0 = current).
pub async fn get(
    kv: &mut KvClient<Channel>,
    key: &str,
    revision: i64,
    serializable: bool,
) -> Result<Option<Vec<u8>>, tonic::Status> {
    let r = kv
        .range(RangeRequest {
            key: key.as_bytes().to_vec(),
            revision,
            serializable,
            ..Default::default()
        })
        .await?
        .into_inner();
    Ok(r.kvs.into_iter().next().map(|kv| kv.value))
}

/// Retries `f` until it succeeds or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("gave up after {timeout:?}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// kube-apiserver's `403 Forbidden` Status body for the object `kind "name"`, saying `message`.
pub fn forbidden_status(kind: &str, name: &str, message: &str) -> serde_json::Value {
    serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Forbidden", "details": {"name": name, "kind": kind}, "code": 403})
}
