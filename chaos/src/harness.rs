//! The cluster under test: `kuberaft serve` processes on loopback whose peer links run through
//! the fault-injecting proxy, with the operations the fault injector needs (kill, restart,
//! pause, resume, find the leader, wait for convergence).
//!
//! Replica `i` (0-based) listens for its API on `base + i`, for peers on `base + 10 + i`, and
//! advertises the proxy at `base + 20 + i` as its peer address, so every replica reaches every
//! other one only through the proxy. The harness itself talks to the real peer port (the `Kv`
//! `Status` RPC), so its probes are never cut.
//!
//! The cluster is secure, as a user's is: `DIR/pki` holds a CA, each replica's serving and peer
//! certificates, the service-account key, the encryption config and the admin's certificate,
//! with which the harness and the workloads speak HTTPS and mutual-TLS gRPC.

use kuberaft::cli::certs::ensure_encryption_config;
use kuberaft::cli::cluster_up::{ADMIN_GROUP, ADMIN_USER};
use kuberaft::config::ServiceRanges;
use kuberaft::config::{CompactionConfig, FeatureGates, MemberConfig, RaftConfig, ServeConfig};
use kuberaft::pki::layout::Layout;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kuberaft_proto::kv_client::KvClient;
use kuberaft_proto::{member_request, MemberRequest, MembersResponse, StatusRequest, StatusResponse};

use crate::client::{self, Tls};
use crate::cluster::{tail, Process};
use crate::proxy::{self, Links};

/// Highest number of replicas (the port layout leaves room for ten).
pub const MAX_NODES: usize = 9;
/// How long a status probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one membership request may take (a removal probes the voters, a transfer waits
/// out the leader lease).
const MEMBER_CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a graceful stop may take before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Why the harness failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A file of the cluster could not be written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A replica process could not be started.
    #[error("cannot start replica {replica}: {message}")]
    Spawn {
        /// The replica.
        replica: usize,
        /// The cause.
        message: String,
    },
    /// The proxy could not start.
    #[error(transparent)]
    Proxy(#[from] proxy::ProxyError),
    /// The cluster did not reach the wanted state in time.
    #[error("{what} not reached within {timeout:?}: {detail}")]
    Timeout {
        /// The state waited for.
        what: String,
        /// How long it waited.
        timeout: Duration,
        /// What was seen last, with log tails.
        detail: String,
    },
    /// Bad parameters.
    #[error("{0}")]
    Config(String),
}

/// Makes (or keeps) the cluster's PKI in `DIR/pki`, as `cluster up` does for loopback
/// replicas, and reads the admin's credentials from it.
fn make_pki(spec: &ClusterSpec) -> Result<(Layout, Tls), HarnessError> {
    let pki = Layout::new(spec.dir.join("pki"));
    let fail = |e: String| HarnessError::Config(format!("cannot make the PKI in {}: {e}", pki.dir.display()));
    pki.ensure_ca("kuberaft-chaos-ca")
        .map_err(|e| fail(e.to_string()))?;
    pki.ensure_sa_key().map_err(|e| fail(e.to_string()))?;
    pki.ensure_front_proxy().map_err(|e| fail(e.to_string()))?;
    pki.ensure_kubelet_client().map_err(|e| fail(e.to_string()))?;
    ensure_encryption_config(&pki).map_err(|e| fail(format!("{e:#}")))?;
    for i in 1..=spec.nodes {
        pki.ensure_replica(&format!("node-{i}"), &["127.0.0.1".to_string()], false)
            .map_err(|e| fail(e.to_string()))?;
    }
    pki.ensure_user(ADMIN_USER, &[ADMIN_GROUP.to_string()], false)
        .map_err(|e| fail(e.to_string()))?;
    let tls = Tls::from_pki(&pki.dir).map_err(|e| fail(format!("{e:#}")))?;
    Ok((pki, tls))
}

/// Where the cluster runs and how it is configured.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// The `kuberaft` binary.
    pub bin: PathBuf,
    /// Number of replicas.
    pub nodes: usize,
    /// First loopback port (see the module docs for the layout).
    pub base_port: u16,
    /// Directory for configs, data and logs.
    pub dir: PathBuf,
    /// Seed for the proxies' loss emulation.
    pub seed: u64,
    /// Raft timing (heartbeat, election timeout min, max) in milliseconds; `None` keeps
    /// kuberaft's defaults.
    pub raft_timing: Option<RaftTiming>,
    /// `raft.peerRttMillis` for every replica (the worst peer round trip it must tolerate).
    pub peer_rtt_ms: Option<u64>,
}

/// Raft timing written into every replica's config, to compare failover under other settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTiming {
    /// `raft.heartbeatMillis`.
    pub heartbeat_ms: u64,
    /// `raft.electionTimeoutMinMillis`.
    pub election_min_ms: u64,
    /// `raft.electionTimeoutMaxMillis`.
    pub election_max_ms: u64,
}

impl std::str::FromStr for RaftTiming {
    type Err = String;

    /// Parses `HEARTBEAT,MIN,MAX` (milliseconds).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<u64> = s
            .split(',')
            .map(|p| {
                p.trim()
                    .parse()
                    .map_err(|_| format!("{p:?} is not a number of milliseconds"))
            })
            .collect::<Result<_, _>>()?;
        match parts[..] {
            [heartbeat_ms, election_min_ms, election_max_ms]
                if 0 < heartbeat_ms
                    && heartbeat_ms < election_min_ms
                    && election_min_ms < election_max_ms =>
            {
                Ok(Self {
                    heartbeat_ms,
                    election_min_ms,
                    election_max_ms,
                })
            }
            _ => Err("expected HEARTBEAT,MIN,MAX milliseconds with heartbeat < min < max".into()),
        }
    }
}

/// One replica: its addresses and its process while it runs.
#[derive(Debug)]
struct Replica {
    /// Its Raft node id (a replaced replica gets a new one).
    id: u64,
    /// The peer address it joined through, for a replica that replaced another (`--join`).
    join: Option<String>,
    config: PathBuf,
    log: PathBuf,
    api: String,
    peer: String,
    process: Option<Process>,
    paused: bool,
}

/// A running cluster. Dropping it kills every replica and stops the proxies.
#[derive(Debug)]
pub struct ChaosCluster {
    spec: ClusterSpec,
    replicas: Vec<Replica>,
    /// The peer links, for the fault injector.
    pub links: Arc<Links>,
    proxies: Vec<tokio::task::JoinHandle<()>>,
    tls: Tls,
}

impl ChaosCluster {
    /// Writes the configs, starts the proxies and every replica, and waits until all of them
    /// know a leader.
    pub async fn start(spec: ClusterSpec, ready_timeout: Duration) -> Result<Self, HarnessError> {
        if !(1..=MAX_NODES).contains(&spec.nodes) {
            return Err(HarnessError::Config(format!(
                "--nodes must be between 1 and {MAX_NODES}"
            )));
        }
        if spec.base_port.checked_add(30).is_none() {
            return Err(HarnessError::Config("--base-port too high".into()));
        }
        let io = |what: String| move |source| HarnessError::Io { what, source };
        std::fs::create_dir_all(&spec.dir).map_err(io(format!("cannot create {}", spec.dir.display())))?;
        let port = |offset: u16, i: usize| format!("127.0.0.1:{}", spec.base_port + offset + i as u16);
        let members: Vec<MemberConfig> = (0..spec.nodes)
            .map(|i| MemberConfig {
                id: i as u64 + 1,
                peer_addr: port(20, i),
                api_addr: port(0, i),
            })
            .collect();
        let cluster_name = format!("chaos-{:x}", spec.seed);
        let mut raft = spec.raft_timing.map_or_else(RaftConfig::default, |t| RaftConfig {
            heartbeat_millis: t.heartbeat_ms,
            election_timeout_min_millis: t.election_min_ms,
            election_timeout_max_millis: t.election_max_ms,
            ..RaftConfig::default()
        });
        raft.peer_rtt_millis = spec.peer_rtt_ms.unwrap_or(0);
        let (pki, tls) = make_pki(&spec)?;
        let links = Links::new(spec.nodes);
        let mut replicas = Vec::new();
        let mut proxies = Vec::new();
        for i in 0..spec.nodes {
            let config = spec.dir.join(format!("node-{}.yaml", i + 1));
            let text = ServeConfig {
                id: i as u64 + 1,
                cluster_name: cluster_name.clone(),
                data_dir: spec.dir.join(format!("data-{}", i + 1)),
                peer_listen: Some(port(10, i)),
                api_listen: None,
                members: members.clone(),
                raft: raft.clone(),
                compaction: CompactionConfig {
                    retention_seconds: 3600,
                    ..CompactionConfig::default()
                },
                request_timeout_seconds: 3,
                quota_backend_bytes: ServeConfig::DEFAULT_QUOTA_BACKEND_BYTES,
                watch_buffer: ServeConfig::DEFAULT_WATCH_BUFFER,
                feature_gates: FeatureGates::default(),
                security: Some(pki.security_config(&format!("node-{}", i + 1))),
                audit: None,
                admission_config_file: None,
                backup: None,
                service_cluster_ip_range: ServiceRanges::DEFAULT_CLUSTER_IP_RANGE.into(),
                service_node_port_range: ServiceRanges::DEFAULT_NODE_PORT_RANGE.into(),
                max_requests_inflight: ServeConfig::DEFAULT_MAX_REQUESTS_INFLIGHT,
                max_mutating_requests_inflight: ServeConfig::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
                enable_priority_and_fairness: true,
            }
            .to_yaml()
            .map_err(|e| HarnessError::Config(e.to_string()))?;
            std::fs::write(&config, text).map_err(io(format!("cannot write {}", config.display())))?;
            proxies.push(proxy::start(links.clone(), i, &port(20, i), port(10, i), spec.seed).await?);
            replicas.push(Replica {
                id: i as u64 + 1,
                join: None,
                config,
                log: spec.dir.join(format!("node-{}.log", i + 1)),
                api: port(0, i),
                peer: port(10, i),
                process: None,
                paused: false,
            });
        }
        let mut cluster = Self {
            spec,
            replicas,
            links,
            proxies,
            tls,
        };
        for i in 0..cluster.replicas.len() {
            cluster.spawn(i)?;
        }
        cluster.wait_serving(ready_timeout).await?;
        Ok(cluster)
    }

    /// The admin's credentials (the cluster CA and client certificate).
    pub fn tls(&self) -> &Tls {
        &self.tls
    }

    /// Number of replicas.
    pub fn len(&self) -> usize {
        self.replicas.len()
    }

    /// Whether the cluster has no replicas (never true for a started cluster).
    pub fn is_empty(&self) -> bool {
        self.replicas.is_empty()
    }

    /// The API address (`host:port`) of replica `i`.
    pub fn api_addr(&self, i: usize) -> &str {
        &self.replicas[i].api
    }

    /// The real peer address (`host:port`, where the `Kv` service runs) of replica `i`.
    pub fn peer_addr(&self, i: usize) -> &str {
        &self.replicas[i].peer
    }

    fn spawn(&mut self, i: usize) -> Result<(), HarnessError> {
        let r = &mut self.replicas[i];
        let mut cmd = Command::new(&self.spec.bin);
        cmd.arg("serve").arg("--config").arg(&r.config);
        if let Some(seed) = &r.join {
            cmd.arg("--join").arg(format!("https://{seed}"));
        }
        let p = Process::spawn(format!("replica {}", i + 1), cmd, r.log.clone()).map_err(|e| {
            HarnessError::Spawn {
                replica: i + 1,
                message: format!("{e:#}"),
            }
        })?;
        self.links.set_pid(i, Some(p.pid()));
        r.process = Some(p);
        r.paused = false;
        Ok(())
    }

    /// Sends a membership request to replica `via`'s admin service (which hands it to the
    /// leader).
    pub async fn members(&self, via: usize, req: MemberRequest) -> Result<MembersResponse, String> {
        let call = async {
            let channel = client::connect(&self.replicas[via].peer, Some(&self.tls))
                .await
                .map_err(|e| format!("{e:#}"))?;
            KvClient::new(channel)
                .members(req)
                .await
                .map(|r| r.into_inner())
                .map_err(|s| s.message().to_string())
        };
        tokio::time::timeout(MEMBER_CALL_TIMEOUT, call)
            .await
            .map_err(|_| format!("no answer within {MEMBER_CALL_TIMEOUT:?}"))?
    }

    /// Replaces replica `i` as an operator replaces a dead member: removes its id from the
    /// cluster, kills it and wipes its data dir, starts it with a new id and an empty data dir
    /// joining through another replica, and promotes it once it has caught up. Returns the old
    /// and the new id.
    pub async fn replace(&mut self, i: usize, timeout: Duration) -> Result<(u64, u64), HarnessError> {
        let n = self.replicas.len();
        let via = (i + 1) % n;
        let old = self.replicas[i].id;
        let fail = |what: &str, detail: String| HarnessError::Timeout {
            what: what.to_string(),
            timeout,
            detail,
        };
        let deadline = Instant::now() + timeout;
        let remove = MemberRequest {
            op: member_request::Op::Remove as i32,
            id: old,
            ..Default::default()
        };
        let gone = |r: &MembersResponse| r.members.iter().all(|m| m.id != old);
        self.members_until(via, remove, gone, deadline)
            .await
            .map_err(|e| fail(&format!("removing node {old}"), e))?;
        self.kill(i);
        let data = self.spec.dir.join(format!("data-{}", i + 1));
        std::fs::remove_dir_all(&data).map_err(|source| HarnessError::Io {
            what: format!("cannot wipe {}", data.display()),
            source,
        })?;
        let new = self.replicas.iter().map(|r| r.id).max().unwrap_or(0) + 1;
        let path = self.replicas[i].config.clone();
        let mut config = ServeConfig::load(&path).map_err(|e| HarnessError::Config(e.to_string()))?;
        let me = config
            .members
            .iter()
            .find(|m| m.id == old)
            .cloned()
            .ok_or_else(|| HarnessError::Config(format!("node {old} is not in {}", path.display())))?;
        config.id = new;
        config.members = vec![MemberConfig { id: new, ..me }];
        let text = config
            .to_yaml()
            .map_err(|e| HarnessError::Config(e.to_string()))?;
        std::fs::write(&path, text).map_err(|source| HarnessError::Io {
            what: format!("cannot write {}", path.display()),
            source,
        })?;
        self.replicas[i].id = new;
        // Through the proxy, like the replicas' own traffic.
        self.replicas[i].join = Some(format!("127.0.0.1:{}", self.spec.base_port + 20 + via as u16));
        self.spawn(i)?;
        let promote = MemberRequest {
            op: member_request::Op::Promote as i32,
            id: new,
            ..Default::default()
        };
        let voter = |r: &MembersResponse| r.members.iter().any(|m| m.id == new && m.voter);
        self.members_until(via, promote, voter, deadline)
            .await
            .map_err(|e| fail(&format!("promoting node {new}"), e))?;
        Ok((old, new))
    }

    /// Sends `req` through replica `via` until it is accepted or `deadline` passes: a change
    /// can be refused while the cluster settles from the previous fault, and a promotion until
    /// the learner caught up. The error is the last refusal.
    ///
    /// A request whose answer was lost may have been carried out (a removal of the leader
    /// loses its answer with the leadership): after a refusal the member list is read, and
    /// the change counts as made once `done` says the list shows it, as an operator checks
    /// `kuberaft member list` before trying again.
    async fn members_until(
        &self,
        via: usize,
        req: MemberRequest,
        done: impl Fn(&MembersResponse) -> bool,
        deadline: Instant,
    ) -> Result<MembersResponse, String> {
        let list = MemberRequest {
            op: member_request::Op::List as i32,
            ..Default::default()
        };
        loop {
            let e = match self.members(via, req.clone()).await {
                Ok(r) => return Ok(r),
                Err(e) => e,
            };
            if let Ok(members) = self.members(via, list.clone()).await {
                if done(&members) {
                    return Ok(members);
                }
            }
            if Instant::now() >= deadline {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Whether replica `i`'s process is running (possibly paused).
    pub fn is_up(&mut self, i: usize) -> bool {
        self.replicas[i].process.as_mut().is_some_and(Process::is_running)
    }

    /// The replicas whose process ended on its own (a fault's kill takes the process away, so
    /// it is not counted), each with its exit status and the end of its log.
    pub fn exited(&mut self) -> Vec<String> {
        self.replicas
            .iter_mut()
            .filter_map(|r| r.process.as_mut()?.check_running().err())
            .map(|e| format!("{e:#}"))
            .collect()
    }

    /// kill -9 of replica `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.replicas[i].process.take() {
            p.kill_now();
        }
        self.links.set_pid(i, None);
        self.replicas[i].paused = false;
    }

    /// Sends SIGTERM to replica `i` and returns at once ([`ChaosCluster::stop`] then waits for
    /// it).
    pub fn terminate(&self, i: usize) {
        if let Some(p) = &self.replicas[i].process {
            p.signal(libc::SIGTERM, true);
        }
    }

    /// Stops replica `i` gracefully (SIGTERM), as a rolling restart does.
    pub fn stop(&mut self, i: usize) {
        if let Some(mut p) = self.replicas[i].process.take() {
            if self.replicas[i].paused {
                p.signal(libc::SIGCONT, true);
            }
            p.stop(STOP_GRACE);
        }
        self.links.set_pid(i, None);
        self.replicas[i].paused = false;
    }

    /// Starts replica `i` again with its config and data (no-op if it runs).
    pub fn restart(&mut self, i: usize) -> Result<(), HarnessError> {
        if self.is_up(i) {
            return Ok(());
        }
        self.spawn(i)
    }

    /// SIGSTOPs (`true`) or SIGCONTs (`false`) replica `i`.
    pub fn pause(&mut self, i: usize, pause: bool) {
        if let Some(p) = &self.replicas[i].process {
            p.signal(if pause { libc::SIGSTOP } else { libc::SIGCONT }, true);
            self.replicas[i].paused = pause;
        }
    }

    /// Replica `i`'s status through the `Kv` service on its real peer port.
    pub async fn status(&self, i: usize, hash: bool) -> Option<StatusResponse> {
        let probe = async {
            let channel = client::connect(&self.replicas[i].peer, Some(&self.tls))
                .await
                .ok()?;
            let mut c = KvClient::new(channel);
            c.status(StatusRequest { with_hash: hash })
                .await
                .ok()
                .map(|r| r.into_inner())
        };
        tokio::time::timeout(PROBE_TIMEOUT, probe).await.ok().flatten()
    }

    /// The replica that currently says it is leader with the highest term, if any.
    pub async fn leader(&self) -> Option<usize> {
        let mut best: Option<(u64, usize)> = None;
        for i in 0..self.replicas.len() {
            if self.replicas[i].paused {
                continue;
            }
            if let Some(s) = self.status(i, false).await {
                if s.role == "leader" && best.is_none_or(|(t, _)| s.term > t) {
                    best = Some((s.term, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// Waits until every running, unpaused replica answers and knows a leader.
    pub async fn wait_serving(&mut self, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut missing = Vec::new();
            for i in 0..self.replicas.len() {
                if !self.is_up(i) || self.replicas[i].paused {
                    continue;
                }
                if !self.status(i, false).await.is_some_and(|s| s.has_leader) {
                    missing.push(i + 1);
                }
            }
            if missing.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(self.timeout_error(
                    "every replica serving",
                    timeout,
                    format!("replicas {missing:?} not ready"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until every replica reports the same revision and state hash; returns them.
    pub async fn wait_converged(&mut self, timeout: Duration) -> Result<(i64, String), HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut seen = Vec::new();
            for i in 0..self.replicas.len() {
                seen.push(
                    self.status(i, true)
                        .await
                        .map(|s| (s.hash_revision, s.state_hash)),
                );
            }
            if let Some(Some(first)) = seen.first() {
                if seen.iter().all(|s| s.as_ref() == Some(first)) {
                    return Ok(first.clone());
                }
            }
            if Instant::now() >= deadline {
                return Err(self.timeout_error(
                    "convergence",
                    timeout,
                    format!("(revision, hash) per replica: {seen:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    fn timeout_error(&mut self, what: &str, timeout: Duration, detail: String) -> HarnessError {
        let states: Vec<String> = (0..self.replicas.len())
            .map(|i| {
                let state = match (self.is_up(i), self.replicas[i].paused) {
                    (true, true) => "paused",
                    (true, false) => "running",
                    (false, _) => "not running",
                };
                format!("replica {} (node {}) {state}", i + 1, self.replicas[i].id)
            })
            .collect();
        let logs: String = self
            .replicas
            .iter()
            .map(|r| format!("\n--- {} ---\n{}", r.log.display(), tail(&r.log)))
            .collect();
        let detail = format!("{detail}\n{}", states.join(", "));
        HarnessError::Timeout {
            what: what.to_string(),
            timeout,
            detail: format!("{detail}{logs}"),
        }
    }

    /// Kills every replica and stops the proxies at once.
    pub fn teardown(&mut self) {
        for i in 0..self.replicas.len() {
            self.kill(i);
        }
        for p in &self.proxies {
            p.abort();
        }
    }
}

impl Drop for ChaosCluster {
    fn drop(&mut self) {
        self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raft_timing_parses_and_must_be_ordered() {
        let t: RaftTiming = "50,250,500".parse().unwrap();
        assert_eq!(
            (t.heartbeat_ms, t.election_min_ms, t.election_max_ms),
            (50, 250, 500)
        );
        assert!("50,500,250".parse::<RaftTiming>().is_err());
        assert!("0,250,500".parse::<RaftTiming>().is_err());
        assert!("50,250".parse::<RaftTiming>().is_err());
        assert!("a,b,c".parse::<RaftTiming>().is_err());
    }
}
