//! The local clusters the benchmark drives: three etcd members, and a three-node kuberaft
//! cluster run by `kuberaft cluster up`.
//!
//! Every server process runs in its own process group with its output in a log file inside a
//! scratch directory. Dropping a cluster stops its processes (SIGTERM, then SIGKILL to the
//! whole group after a grace period) and removes the scratch directory unless it is kept, so
//! clusters are cleaned up on errors too.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::client::{self, Client, System, Tls};

/// Number of replicas of each cluster.
pub const REPLICAS: u16 = 3;
/// How long etcd members may take to stop after SIGTERM before they are killed.
const ETCD_GRACE: Duration = Duration::from_secs(5);
/// How long `kuberaft cluster up` may take to stop its nodes after SIGTERM.
const KUBERAFT_GRACE: Duration = Duration::from_secs(15);
/// How long a cluster may take to accept writes on every replica.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Timeout of one readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Lines of a log file quoted in error messages.
const LOG_TAIL_LINES: usize = 30;

/// The loopback ports of both clusters, all derived from `--base-port`.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    base: u16,
}

impl Ports {
    /// Number of ports reserved from the base port on.
    pub const SPAN: u16 = 40;

    /// Ports from `base` to `base + SPAN - 1`; fails if they do not fit in a `u16`.
    pub fn new(base: u16) -> anyhow::Result<Self> {
        if base.checked_add(Self::SPAN - 1).is_none() || base == 0 {
            bail!(
                "--base-port must be between 1 and {}",
                u16::MAX - (Self::SPAN - 1)
            );
        }
        Ok(Self { base })
    }

    /// Client port of etcd member `i` (0-based).
    pub fn etcd_client(self, i: u16) -> u16 {
        self.base + i
    }

    /// Peer port of etcd member `i` (0-based).
    pub fn etcd_peer(self, i: u16) -> u16 {
        self.base + 10 + i
    }

    /// API port of kuberaft node 1 (node i uses this + i - 1).
    pub fn kuberaft_api(self) -> u16 {
        self.base + 20
    }

    /// Peer port of kuberaft node 1 (node i uses this + i - 1).
    pub fn kuberaft_peer(self) -> u16 {
        self.base + 30
    }

    /// Port of the fan-out floor server (`kuberaft-bench watch --floor`).
    pub fn floor(self) -> u16 {
        self.base + Self::SPAN - 1
    }

    /// Every port `system` listens on.
    pub fn of(self, system: System) -> Vec<u16> {
        match system {
            System::Etcd => (0..REPLICAS)
                .flat_map(|i| [self.etcd_client(i), self.etcd_peer(i)])
                .collect(),
            System::Kuberaft => (0..REPLICAS)
                .flat_map(|i| [self.kuberaft_api() + i, self.kuberaft_peer() + i])
                .collect(),
        }
    }

    /// Fails if one of `system`'s ports is already taken on loopback.
    pub fn check_free(self, system: System) -> anyhow::Result<()> {
        for port in self.of(system) {
            std::net::TcpListener::bind(("127.0.0.1", port)).with_context(|| {
                format!("port {port} (for {system}) is not free; choose another --base-port")
            })?;
        }
        Ok(())
    }
}

/// A scratch directory, removed on drop unless it is kept.
#[derive(Debug)]
struct ScratchDir {
    dir: tempfile::TempDir,
    keep: bool,
}

impl ScratchDir {
    fn new(prefix: &str, keep: bool) -> anyhow::Result<Self> {
        let mut dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .context("cannot create a scratch directory")?;
        dir.disable_cleanup(keep);
        Ok(Self { dir, keep })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("kept {}", self.dir.path().display());
        }
    }
}

/// A server process the benchmark or the chaos harness started, in its own process group, so
/// it and anything it leaves behind can be signalled and stopped together.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    stopped: bool,
}

impl Process {
    /// Starts `cmd` with stdout and stderr appended to `log` (created if missing, so a
    /// restarted process continues the same log).
    pub fn spawn(name: String, mut cmd: Command, log: PathBuf) -> anyhow::Result<Self> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {name} ({:?})", cmd.get_program()))?;
        Ok(Self {
            name,
            child,
            log,
            stopped: false,
        })
    }

    /// Fails, quoting the log, if the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); last lines of {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log)
            );
        }
        Ok(())
    }

    /// The operating-system process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has not exited yet.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILLs the process group at once (also when it is SIGSTOPped) and reaps the process:
    /// a crash as the chaos harness injects it, and its fast teardown.
    pub fn kill_now(&mut self) {
        self.signal(libc::SIGKILL, true);
        let _ = self.child.wait();
        self.stopped = true;
    }

    /// Stops the process like an operator would: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        stop_all(std::slice::from_mut(self), grace);
    }

    /// Sends `signal` to the process (`group`: to its whole process group).
    pub fn signal(&self, signal: libc::c_int, group: bool) {
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        let target = if group { -pid } else { pid };
        // SAFETY: kill(2) has no memory-safety preconditions. `pid` is our own child's id; once
        // the child is reaped the kernel does not reuse it while its process group still
        // exists, so at worst the call fails with ESRCH.
        unsafe {
            libc::kill(target, signal);
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        stop_all(std::slice::from_mut(self), Duration::from_secs(5));
    }
}

/// Stops `procs`: SIGTERM to each, then waits up to `grace` and kills the process groups of
/// those still running.
fn stop_all(procs: &mut [Process], grace: Duration) {
    for p in procs.iter_mut().filter(|p| !p.stopped) {
        if let Ok(None) = p.child.try_wait() {
            p.signal(libc::SIGTERM, false);
        }
    }
    let deadline = Instant::now() + grace;
    for p in procs.iter_mut().filter(|p| !p.stopped) {
        loop {
            match p.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    eprintln!("{} did not stop within {grace:?}; killing it", p.name);
                    p.signal(libc::SIGKILL, true);
                    let _ = p.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        // Also end anything the process left behind in its group (e.g. orphaned children).
        p.signal(libc::SIGKILL, true);
        p.stopped = true;
    }
}

/// Resolves on Ctrl-C or SIGTERM, so both binaries stop their clusters (by dropping them)
/// when interrupted.
pub async fn shutdown_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

/// The last lines of a log file, for error messages.
pub fn tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
        }
        Err(e) => format!("(cannot read: {e})"),
    }
}

/// Polls `probe` until it succeeds, `check` fails, or `READY_TIMEOUT` passes.
async fn wait_until<P, F, C>(what: &str, mut check: C, mut probe: P) -> anyhow::Result<()>
where
    C: FnMut() -> anyhow::Result<()>,
    P: FnMut() -> F,
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        check()?;
        let err = match tokio::time::timeout(PROBE_TIMEOUT, probe()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => e,
            Err(_) => anyhow::anyhow!("probe timed out after {PROBE_TIMEOUT:?}"),
        };
        if Instant::now() >= deadline {
            return Err(err.context(format!("{what} not ready after {READY_TIMEOUT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The fan-out floor server (`kuberaft-bench floor-server`, see `crate::floor`), run as a
/// process of its own like the systems it is compared with.
#[derive(Debug)]
pub struct FloorServer {
    // Declared before `dir`: the process stops before its log is removed.
    process: Process,
    _dir: ScratchDir,
    /// Its address (`host:port`).
    pub addrs: Vec<String>,
}

impl FloorServer {
    /// Starts this executable's `floor-server` on the floor port and waits until it accepts
    /// connections.
    pub async fn start(ports: Ports) -> anyhow::Result<Self> {
        let port = ports.floor();
        let addr = format!("127.0.0.1:{port}");
        std::net::TcpListener::bind(&addr).with_context(|| {
            format!("port {port} (for the floor) is not free; choose another --base-port")
        })?;
        let dir = ScratchDir::new("kuberaft-bench-floor-", false)?;
        let mut cmd = Command::new(std::env::current_exe().context("cannot locate this executable")?);
        cmd.args(["floor-server", "--listen", &addr]);
        let mut process = Process::spawn("floor server".to_string(), cmd, dir.path().join("floor.log"))?;
        let mut check = || process.check_running();
        wait_until("the floor server", &mut check, || {
            let addr = addr.clone();
            async move {
                tokio::net::TcpStream::connect(&addr).await?;
                Ok(())
            }
        })
        .await?;
        Ok(Self {
            process,
            _dir: dir,
            addrs: vec![addr],
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }
}

/// A local three-member etcd cluster with default settings.
#[derive(Debug)]
pub struct EtcdCluster {
    // Declared before `dir`: fields drop in order, so processes stop before data is removed.
    members: Vec<Process>,
    dir: ScratchDir,
    bin: PathBuf,
    ports: Ports,
    /// Client addresses (`host:port`), one per member.
    pub addrs: Vec<String>,
}

impl EtcdCluster {
    /// Starts the members and waits until a Put succeeds through each of them.
    pub async fn start(bin: &Path, ports: Ports, keep_dir: bool) -> anyhow::Result<Self> {
        let dir = ScratchDir::new("kuberaft-bench-etcd-", keep_dir)?;
        eprintln!("starting etcd in {}", dir.path().display());
        let mut cluster = Self {
            members: Vec::new(),
            addrs: (0..REPLICAS)
                .map(|i| format!("127.0.0.1:{}", ports.etcd_client(i)))
                .collect(),
            dir,
            bin: bin.to_path_buf(),
            ports,
        };
        for i in 0..usize::from(REPLICAS) {
            let member = cluster.spawn(i)?;
            cluster.members.push(member);
        }
        for i in 0..cluster.addrs.len() {
            let addr = cluster.addrs[i].clone();
            let members = &mut cluster.members;
            wait_until(
                &format!("etcd member e{}", i + 1),
                || members.iter_mut().try_for_each(Process::check_running),
                || probe_put(System::Etcd, addr.clone(), None),
            )
            .await?;
        }
        Ok(cluster)
    }

    /// Starts member `i` (0-based) with default settings; with existing data it rejoins.
    fn spawn(&self, i: usize) -> anyhow::Result<Process> {
        let peer_url = |i: u16| format!("http://127.0.0.1:{}", self.ports.etcd_peer(i));
        let initial_cluster = (0..REPLICAS)
            .map(|i| format!("e{}={}", i + 1, peer_url(i)))
            .collect::<Vec<_>>()
            .join(",");
        let name = format!("e{}", i + 1);
        let client_url = format!("http://{}", self.addrs[i]);
        let mut cmd = Command::new(&self.bin);
        // Default settings: ignore any ETCD_* configuration in the environment.
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("ETCD_") {
                cmd.env_remove(var);
            }
        }
        let own_peer = peer_url(u16::try_from(i)?);
        cmd.arg("--name")
            .arg(&name)
            .arg("--data-dir")
            .arg(self.dir.path().join(&name))
            .arg("--listen-client-urls")
            .arg(&client_url)
            .arg("--advertise-client-urls")
            .arg(&client_url)
            .arg("--listen-peer-urls")
            .arg(&own_peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&own_peer)
            .arg("--initial-cluster")
            .arg(&initial_cluster)
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--initial-cluster-token")
            .arg("bench");
        let log = self.dir.path().join(format!("{name}.log"));
        Process::spawn(format!("etcd {name}"), cmd, log)
    }

    /// The members' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().map(Process::pid).collect()
    }

    /// kill -9 of member `i`.
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill_now();
    }

    /// Sends SIGTERM to member `i` and returns at once.
    pub fn terminate(&self, i: usize) {
        self.members[i].signal(libc::SIGTERM, true);
    }

    /// Stops member `i` gracefully: SIGTERM, then SIGKILL after a grace period.
    pub fn stop(&mut self, i: usize) {
        self.members[i].stop(ETCD_GRACE);
    }

    /// Starts member `i` again on its data (after [`EtcdCluster::kill`] or [`EtcdCluster::stop`]).
    pub fn restart(&mut self, i: usize) -> anyhow::Result<()> {
        self.members[i] = self.spawn(i)?;
        Ok(())
    }

    /// The member that reports itself leader (`etcd_server_is_leader 1` on `/metrics`).
    pub async fn leader(&self) -> Option<usize> {
        leader_by_metrics(&self.addrs, "etcd_server_is_leader 1", None).await
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        // One member at a time: an etcd 3.4 leader stopped together with its followers tries
        // to hand over leadership to a stopping member and hangs until it is killed.
        for member in &mut self.members {
            stop_all(std::slice::from_mut(member), ETCD_GRACE);
        }
    }
}

/// Writes a key through the replica of `system` at `addr`.
async fn probe_put(system: System, addr: String, tls: Option<Tls>) -> anyhow::Result<()> {
    let mut c = Client::connect(system, &addr, tls.as_ref()).await?;
    c.put(b"/bench/ready".to_vec(), addr.into_bytes())
        .await
        .context("probe put failed")?;
    Ok(())
}

/// Asks kuberaft's replica at `addr` whether it knows a leader.
async fn probe_leader(addr: String, tls: Option<Tls>) -> anyhow::Result<()> {
    let channel = client::connect(&addr, tls.as_ref()).await?;
    let status = kuberaft_proto::kv_client::KvClient::new(channel)
        .status(kuberaft_proto::StatusRequest { with_hash: false })
        .await
        .context("Status failed")?
        .into_inner();
    if !status.has_leader {
        bail!("{addr} has no leader yet (role {})", status.role);
    }
    Ok(())
}

/// The index of the member whose Prometheus `/metrics` at `addrs[i]` has the line `marker`.
async fn leader_by_metrics(addrs: &[String], marker: &str, tls: Option<&Tls>) -> Option<usize> {
    let http = match tls {
        Some(t) => t.http_builder().ok()?.build().ok()?,
        None => reqwest::Client::new(),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    for (i, addr) in addrs.iter().enumerate() {
        let metrics = async {
            http.get(format!("{scheme}://{addr}/metrics"))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()
        };
        let text = tokio::time::timeout(PROBE_TIMEOUT, metrics).await.ok().flatten();
        if text.is_some_and(|t| t.lines().any(|l| l.trim() == marker)) {
            return Some(i);
        }
    }
    None
}

/// A local three-node kuberaft cluster run by `kuberaft cluster up`.
#[derive(Debug)]
pub struct KuberaftCluster {
    // Declared before `dir`: fields drop in order, so the cluster stops before data is removed.
    process: Process,
    /// Replicas started again by [`KuberaftCluster::start_replica`] (by index), outside
    /// `cluster up`, which only starts them once.
    restarted: Vec<Option<Process>>,
    dir: ScratchDir,
    /// The `kuberaft` binary.
    bin: PathBuf,
    /// Peer addresses (`host:port`, where the `Kv` service runs), one per node.
    pub addrs: Vec<String>,
    /// Kubernetes API addresses (`host:port`), one per node.
    pub api_addrs: Vec<String>,
    /// Whether the cluster runs with TLS, authentication and RBAC (not `--insecure`).
    secure: bool,
    /// The admin's credentials of a secure cluster (read once `cluster up` has made them).
    pub tls: Option<Tls>,
}

impl KuberaftCluster {
    /// The index of the current leader, from the nodes' `/metrics`.
    pub async fn leader(&self) -> Option<usize> {
        leader_by_metrics(&self.api_addrs, "kuberaft_raft_is_leader 1", self.tls.as_ref()).await
    }

    /// The process id of `kuberaft cluster up`, whose children are the replicas.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The directory of `cluster up` (node configs and logs, `pki/`).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().join("cluster")
    }

    /// The process id of replica `i` (0-based), if it runs.
    pub fn replica_pid(&mut self, i: usize) -> Option<u32> {
        if let Some(p) = self.restarted.get_mut(i).and_then(Option::as_mut) {
            return p.is_running().then(|| p.pid());
        }
        crate::cpu::child_with_arg(self.process.pid(), &format!("/node-{}.yaml", i + 1))
    }

    /// Stops replica `i` (0-based) as an operator would (SIGTERM, SIGKILL after a grace period)
    /// and waits until it has exited.
    pub async fn stop_replica(&mut self, i: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + KUBERAFT_GRACE;
        if let Some(p) = self.restarted.get_mut(i).and_then(Option::as_mut) {
            p.signal(libc::SIGTERM, false);
            while p.is_running() {
                if Instant::now() >= deadline {
                    p.kill_now();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return Ok(());
        }
        let pid = self
            .replica_pid(i)
            .with_context(|| format!("replica {} is not running", i + 1))?;
        let target = libc::pid_t::try_from(pid).context("a process id out of range")?;
        // SAFETY: kill(2) has no memory-safety preconditions; `target` is a child of our own
        // `cluster up`, which reaps it only after it exited.
        unsafe { libc::kill(target, libc::SIGTERM) };
        let mut killed = false;
        while crate::cpu::is_alive(pid) {
            if !killed && Instant::now() >= deadline {
                // SAFETY: as above.
                unsafe { libc::kill(target, libc::SIGKILL) };
                killed = true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// Starts replica `i` (0-based) again on its data and config, after
    /// [`KuberaftCluster::stop_replica`]; its output goes on in its log.
    pub fn start_replica(&mut self, i: usize) -> anyhow::Result<()> {
        let dir = self.dir();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("serve")
            .arg("--config")
            .arg(dir.join(format!("node-{}.yaml", i + 1)));
        if !self.secure {
            cmd.arg("--insecure");
        }
        let log = dir.join(format!("node-{}.log", i + 1));
        let process = Process::spawn(format!("kuberaft replica {}", i + 1), cmd, log)?;
        let slot = self
            .restarted
            .get_mut(i)
            .with_context(|| format!("there is no replica {}", i + 1))?;
        *slot = Some(process);
        Ok(())
    }

    /// Runs `kuberaft cluster up` (with `--insecure` unless `secure`) and waits until every
    /// node knows a leader and a `Txn` put succeeds through each of them.
    pub async fn start(bin: &Path, ports: Ports, keep_dir: bool, secure: bool) -> anyhow::Result<Self> {
        let dir = ScratchDir::new("kuberaft-bench-kuberaft-", keep_dir)?;
        eprintln!("starting kuberaft in {}", dir.path().display());
        let mut cmd = Command::new(bin);
        cmd.args(["cluster", "up", "--nodes", &REPLICAS.to_string(), "--dir"])
            .arg(dir.path().join("cluster"))
            .arg("--api-port")
            .arg(ports.kuberaft_api().to_string())
            .arg("--peer-port")
            .arg(ports.kuberaft_peer().to_string());
        if !secure {
            cmd.arg("--insecure");
        }
        let log = dir.path().join("cluster-up.log");
        let process = Process::spawn("kuberaft cluster up".to_string(), cmd, log)?;
        let mut cluster = Self {
            secure,
            tls: None,
            process,
            restarted: (0..REPLICAS).map(|_| None).collect(),
            bin: bin.to_path_buf(),
            addrs: (0..REPLICAS)
                .map(|i| format!("127.0.0.1:{}", ports.kuberaft_peer() + i))
                .collect(),
            api_addrs: (0..REPLICAS)
                .map(|i| format!("127.0.0.1:{}", ports.kuberaft_api() + i))
                .collect(),
            dir,
        };
        if let Err(e) = cluster.wait_ready().await {
            let cluster_dir = cluster.dir.path().join("cluster");
            let logs: Vec<String> = (1..=REPLICAS)
                .map(|i| cluster_dir.join(format!("node-{i}.log")))
                .filter(|p| p.exists())
                .map(|p| format!("last lines of {}:\n{}", p.display(), tail(&p)))
                .collect();
            return Err(e.context(format!(
                "kuberaft cluster did not become ready\nlast lines of {}:\n{}\n{}",
                cluster.process.log.display(),
                tail(&cluster.process.log),
                logs.join("\n")
            )));
        }
        Ok(cluster)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        if self.secure {
            let pki = self.dir.path().join("cluster").join("pki");
            let process = &mut self.process;
            let mut check = || process.check_running();
            let ready = wait_until("kuberaft's PKI", &mut check, || {
                let pki = pki.clone();
                async move {
                    // cluster up writes the admin's certificate last.
                    Tls::from_pki(&pki).map(|_| ())
                }
            })
            .await;
            ready?;
            self.tls = Some(Tls::from_pki(&pki)?);
        }
        let process = &mut self.process;
        let mut check = || process.check_running();
        for addr in &self.addrs {
            wait_until(&format!("kuberaft node {addr}"), &mut check, || {
                probe_leader(addr.clone(), self.tls.clone())
            })
            .await?;
        }
        for addr in &self.addrs {
            wait_until(&format!("kuberaft node {addr}"), &mut check, || {
                probe_put(System::Kuberaft, addr.clone(), self.tls.clone())
            })
            .await?;
        }
        Ok(())
    }
}

impl Drop for KuberaftCluster {
    fn drop(&mut self) {
        // Replicas started again stop alongside `cluster up`'s, with the same grace.
        for p in self.restarted.iter().flatten() {
            p.signal(libc::SIGTERM, false);
        }
        stop_all(std::slice::from_mut(&mut self.process), KUBERAFT_GRACE);
        for p in self.restarted.iter_mut().flatten() {
            stop_all(std::slice::from_mut(p), KUBERAFT_GRACE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_across_systems() {
        let ports = Ports::new(23000).unwrap();
        let mut all = ports.of(System::Etcd);
        all.extend(ports.of(System::Kuberaft));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(all.iter().all(|&p| (23000..23000 + Ports::SPAN).contains(&p)));
    }

    fn sh(dir: &Path, script: &str) -> Process {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script).current_dir(dir);
        Process::spawn("test sh".into(), cmd, dir.join("sh.log")).unwrap()
    }

    /// Whether `pid` names a live (not zombie) process.
    fn alive(pid: &str) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    }

    #[test]
    fn stop_kills_a_process_ignoring_sigterm_and_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sh(
            dir.path(),
            "trap '' TERM; sleep 30 & echo $! > grandchild; echo started; wait",
        );
        let pidfile = dir.path().join("grandchild");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !std::fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n')) {
            assert!(Instant::now() < deadline, "the script did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let grandchild = std::fs::read_to_string(&pidfile).unwrap().trim().to_string();
        assert!(alive(&grandchild));
        p.check_running().unwrap();

        let started = Instant::now();
        stop_all(std::slice::from_mut(&mut p), Duration::from_millis(300));
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(p.stopped);
        assert!(p.child.try_wait().unwrap().is_some());
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(&grandchild) {
            assert!(Instant::now() < deadline, "the grandchild survived");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn exited_process_is_reported_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = sh(dir.path(), "echo 'bad flag --frobnicate'; exit 2");
        let deadline = Instant::now() + Duration::from_secs(5);
        let err = loop {
            if let Err(e) = p.check_running() {
                break e.to_string();
            }
            assert!(Instant::now() < deadline, "the script did not exit");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(err.contains("exit status: 2"), "{err}");
        assert!(err.contains("bad flag --frobnicate"), "{err}");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let t = tail(&path);
        assert_eq!(t.lines().count(), LOG_TAIL_LINES);
        assert!(t.ends_with("line 99"));
        assert!(tail(&dir.path().join("missing")).starts_with("(cannot read"));
    }

    #[test]
    fn base_port_must_leave_room() {
        assert!(Ports::new(0).is_err());
        assert!(Ports::new(u16::MAX - 10).is_err());
        assert!(Ports::new(u16::MAX - (Ports::SPAN - 1)).is_ok());
    }
}
