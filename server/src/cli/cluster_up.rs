//! `kuberaft cluster up`: a local cluster of `serve` processes on loopback.
//!
//! Makes the cluster's PKI in `DIR/pki` (the CA, each node's serving and peer certificates,
//! the service-account key and the admin's client certificate, `CN=kuberaft-admin`,
//! `O=system:masters`), writes `DIR/node-<i>.yaml` (both kept across runs, so a second
//! `cluster up` on the same dir restarts the same cluster with its data and identity), starts
//! one process per node with its output in `DIR/node-<i>.log`, waits until every replica is
//! ready, writes `DIR/kubeconfig` (mode 0600, with the CA and the admin's credentials) with one
//! context per node, and stops every node cleanly on Ctrl-C or SIGTERM.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::cli::certs;
use crate::cli::kubeconfig::{self, ClientCredentials};
use crate::config::ServiceRanges;
use crate::config::{CompactionConfig, FeatureGates, MemberConfig, RaftConfig, SecurityConfig, ServeConfig};
use crate::pki::check;
use crate::pki::layout::{write_private, Layout};

/// Options of `cluster up`.
#[derive(Debug, Clone, clap::Args)]
pub struct UpArgs {
    /// Number of replicas (1 = embedded single-node mode).
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// Directory for configs, data, logs and the kubeconfig.
    #[arg(long, default_value = "kuberaft-cluster")]
    pub dir: PathBuf,
    /// API port of node 1; node i listens on api-port + i - 1.
    #[arg(long, default_value_t = 6443)]
    pub api_port: u16,
    /// Peer port of node 1; node i listens on peer-port + i - 1.
    #[arg(long, default_value_t = 7443)]
    pub peer_port: u16,
    /// Seconds of history to keep before compaction.
    #[arg(long, default_value_t = DEFAULT_RETENTION_SECONDS)]
    pub retention_seconds: u64,
    /// How long to wait for every replica to become ready.
    #[arg(long, default_value_t = DEFAULT_READY_TIMEOUT_SECONDS)]
    pub ready_timeout_seconds: u64,
    /// Alpha features to turn on, as `Name=true,...` (e.g.
    /// `AllowUnsafeMalformedObjectDeletion=true`); passed to every replica.
    #[arg(long)]
    pub feature_gates: Option<String>,
    /// Start the replicas with `serve --insecure`: plain HTTP, no authentication (development
    /// only; the PKI is still made).
    #[arg(long)]
    pub insecure: bool,
}

/// Seconds of history a local cluster keeps before compaction, unless told otherwise.
pub const DEFAULT_RETENTION_SECONDS: u64 = 300;
/// Seconds `cluster up` waits for every replica to become ready, unless told otherwise.
pub const DEFAULT_READY_TIMEOUT_SECONDS: u64 = 60;

/// The admin user `cluster up` makes a client certificate for.
pub const ADMIN_USER: &str = "kuberaft-admin";
/// The admin's group: all-powerful.
pub const ADMIN_GROUP: &str = "system:masters";

/// Makes what is missing of the PKI in `dir/pki` for `nodes` loopback replicas.
fn ensure_pki(dir: &Path, nodes: u64) -> anyhow::Result<Layout> {
    let pki = Layout::new(dir.join("pki"));
    pki.ensure_ca("kuberaft-ca")?;
    pki.ensure_sa_key()?;
    pki.ensure_front_proxy()?;
    pki.ensure_kubelet_client()?;
    certs::ensure_encryption_config(&pki)?;
    for i in 1..=nodes {
        pki.ensure_replica(&format!("node-{i}"), &["127.0.0.1".to_string()], false)?;
    }
    pki.ensure_user(ADMIN_USER, &[ADMIN_GROUP.to_string()], false)?;
    Ok(pki)
}

/// The `security` section of node `id`'s config: paths relative to the config's directory.
fn security(id: u64) -> SecurityConfig {
    Layout {
        dir: PathBuf::from("pki"),
    }
    .security_config(&format!("node-{id}"))
}

fn random_suffix() -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    format!("{:08x}", h.finish() as u32)
}

/// Writes the node configs for a new cluster in `dir`, or loads the existing ones.
pub fn prepare(args: &UpArgs) -> anyhow::Result<Vec<(PathBuf, ServeConfig)>> {
    if args.nodes == 0 {
        bail!("--nodes must be at least 1");
    }
    std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
    let dir = std::fs::canonicalize(&args.dir)?;
    ensure_pki(&dir, args.nodes)?;
    let existing: Vec<PathBuf> = (1..=args.nodes)
        .map(|i| dir.join(format!("node-{i}.yaml")))
        .filter(|p| p.exists())
        .collect();
    if !existing.is_empty() {
        if existing.len() as u64 != args.nodes || dir.join(format!("node-{}.yaml", args.nodes + 1)).exists() {
            bail!(
                "{} already holds a cluster with a different number of nodes; use that number or another --dir",
                dir.display()
            );
        }
        // A cluster made before it had a PKI gets its `security` section now.
        return existing
            .into_iter()
            .map(|p| {
                let mut config = ServeConfig::load(&p)?;
                let current = security(config.id);
                let outdated = config
                    .security
                    .as_ref()
                    .is_none_or(|s| s.encryption_config.is_none());
                if outdated {
                    // An older cluster: certificates first, then encryption at rest (existing
                    // Secrets stay readable through the config's identity provider).
                    let mut updated = config.security.take().unwrap_or(current.clone());
                    updated.encryption_config = current.encryption_config;
                    config.security = Some(updated);
                    std::fs::write(&p, config.to_yaml()?)?;
                    config = ServeConfig::load(&p)?;
                }
                Ok((p, config))
            })
            .collect();
    }
    let port = |base: u16, i: u64| -> anyhow::Result<u16> {
        u16::try_from(u64::from(base) + i - 1).context("port out of range")
    };
    let members = (1..=args.nodes)
        .map(|i| {
            Ok(MemberConfig {
                id: i,
                peer_addr: format!("127.0.0.1:{}", port(args.peer_port, i)?),
                api_addr: format!("127.0.0.1:{}", port(args.api_port, i)?),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cluster_name = format!("kuberaft-{}", random_suffix());
    let mut out = Vec::new();
    for m in &members {
        let config = ServeConfig {
            id: m.id,
            cluster_name: cluster_name.clone(),
            data_dir: dir.join(format!("node-{}", m.id)),
            peer_listen: None,
            api_listen: None,
            members: members.clone(),
            raft: RaftConfig::default(),
            compaction: CompactionConfig {
                retention_seconds: args.retention_seconds,
                ..CompactionConfig::default()
            },
            request_timeout_seconds: ServeConfig::DEFAULT_REQUEST_TIMEOUT_SECONDS,
            quota_backend_bytes: ServeConfig::DEFAULT_QUOTA_BACKEND_BYTES,
            watch_buffer: ServeConfig::DEFAULT_WATCH_BUFFER,
            feature_gates: FeatureGates::default(),
            security: Some(security(m.id)),
            audit: None,
            admission_config_file: None,
            backup: None,
            service_cluster_ip_range: ServiceRanges::DEFAULT_CLUSTER_IP_RANGE.into(),
            service_node_port_range: ServiceRanges::DEFAULT_NODE_PORT_RANGE.into(),
            max_requests_inflight: ServeConfig::DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: ServeConfig::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            enable_priority_and_fairness: true,
        };
        let path = dir.join(format!("node-{}.yaml", m.id));
        std::fs::write(&path, config.to_yaml()?)?;
        out.push((path.clone(), ServeConfig::load(&path)?));
    }
    Ok(out)
}

fn start(
    exe: &Path,
    config_path: &Path,
    log_path: &Path,
    gates: Option<&str>,
    insecure: bool,
) -> anyhow::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve").arg("--config").arg(config_path);
    if let Some(g) = gates {
        cmd.arg("--feature-gates").arg(g);
    }
    if insecure {
        cmd.arg("--insecure");
    }
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

struct Node {
    id: u64,
    child: Child,
    log: PathBuf,
    api: String,
}

fn stop_all(nodes: &mut [Node]) {
    for n in nodes.iter() {
        // SAFETY: kill(2) on a child pid we own; no memory is involved.
        unsafe {
            libc::kill(n.child.id() as libc::pid_t, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for n in nodes.iter_mut() {
        loop {
            match n.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = n.child.kill();
                    let _ = n.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

async fn wait_ready(nodes: &mut [Node], timeout: Duration, ca_pem: Option<&str>) -> anyhow::Result<()> {
    let mut http = reqwest::Client::builder().timeout(Duration::from_secs(2));
    if let Some(ca) = ca_pem {
        http = http
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes())?);
    }
    let http = http.build()?;
    let scheme = if ca_pem.is_some() { "https" } else { "http" };
    let deadline = Instant::now() + timeout;
    for n in nodes.iter_mut() {
        loop {
            if let Some(status) = n.child.try_wait()? {
                bail!(
                    "node-{} exited ({status}) while starting:\n{}",
                    n.id,
                    tail(&n.log)
                );
            }
            let url = format!("{scheme}://{}/readyz", n.api);
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "node-{} was not ready after {timeout:?}; its log:\n{}",
                    n.id,
                    tail(&n.log)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Runs `cluster up` until Ctrl-C or SIGTERM.
pub async fn up(args: UpArgs) -> anyhow::Result<()> {
    let signal = crate::server::shutdown_signal()?;
    if let Some(g) = &args.feature_gates {
        FeatureGates::default()
            .apply(g)
            .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?;
    }
    let configs = prepare(&args)?;
    let dir = std::fs::canonicalize(&args.dir)?;
    let exe = std::env::current_exe()?;
    let mut nodes = Vec::new();
    for (path, config) in &configs {
        let log = dir.join(format!("node-{}.log", config.id));
        match start(&exe, path, &log, args.feature_gates.as_deref(), args.insecure) {
            Ok(child) => nodes.push(Node {
                id: config.id,
                child,
                log,
                api: config.me().api_addr.clone(),
            }),
            Err(e) => {
                stop_all(&mut nodes);
                return Err(e);
            }
        }
    }
    let kubeconfig_path = dir.join("kubeconfig");
    let pki = Layout::new(dir.join("pki"));
    let (cert, key) = pki.user(ADMIN_USER);
    let creds = ClientCredentials {
        ca_pem: check::read(&pki.ca_cert())?,
        user: ADMIN_USER.to_string(),
        cert_pem: check::read(&cert)?,
        key_pem: check::read(&key)?,
    };
    let creds = (!args.insecure).then_some(&creds);
    write_private(
        &kubeconfig_path,
        &kubeconfig::render(&configs.iter().map(|(_, c)| c.clone()).collect::<Vec<_>>(), creds)?,
    )?;
    let ready = wait_ready(
        &mut nodes,
        Duration::from_secs(args.ready_timeout_seconds),
        creds.map(|c| c.ca_pem.as_str()),
    );
    if let Err(e) = ready.await {
        stop_all(&mut nodes);
        return Err(e);
    }
    println!(
        "kuberaft cluster {:?} is up with {} node(s):",
        configs[0].1.cluster_name,
        nodes.len()
    );
    for (path, c) in &configs {
        println!(
            "  node-{}  api {}://{}  peer {}  config {}  data {}  log {}",
            c.id,
            if args.insecure { "http" } else { "https" },
            c.me().api_addr,
            c.me().peer_addr,
            path.display(),
            c.data_dir.display(),
            dir.join(format!("node-{}.log", c.id)).display()
        );
    }
    println!("kubeconfig: {}", kubeconfig_path.display());
    println!("  export KUBECONFIG={}", kubeconfig_path.display());
    println!("Press Ctrl-C to stop the cluster.");
    tokio::pin!(signal);
    let mut reported = std::collections::HashSet::new();
    loop {
        tokio::select! {
            _ = &mut signal => break,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                for n in nodes.iter_mut() {
                    if let Ok(Some(status)) = n.child.try_wait() {
                        if reported.insert(n.id) {
                            eprintln!("node-{} exited ({status}); see {}", n.id, n.log.display());
                        }
                    }
                }
            }
        }
    }
    println!("stopping the cluster...");
    stop_all(&mut nodes);
    println!("stopped.");
    Ok(())
}
