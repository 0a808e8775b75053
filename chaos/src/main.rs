//! `kuberaft-bench`: benchmarks that drive kuberaft from outside, as a client.
//!
//! `kuberaft-bench kv` starts a local three-member etcd cluster and a local three-node kuberaft
//! cluster side by side, drives each with closed-loop clients, and prints a markdown table
//! comparing throughput and latency (see `kuberaft-bench kv --help`). `kuberaft-bench api` does
//! the same with kuberaft driven through its Kubernetes HTTP API (ConfigMaps), so the cost of
//! the API layer shows against the raw store.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;

use kuberaft_chaos::client::{self, Client, HttpVersion, System, Tls};
use kuberaft_chaos::cluster::{shutdown_signal, EtcdCluster, FloorServer, KuberaftCluster, Ports};
use kuberaft_chaos::report::{self, CellResult};
use kuberaft_chaos::watchbench;
use kuberaft_chaos::workload::{self, CellSpec, Op, RunStats};

/// Benchmarks that drive kuberaft from outside, as a client.
#[derive(Debug, Parser)]
#[command(name = "kuberaft-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Compare kuberaft's KV throughput and latency with etcd's on this machine.
    #[command(long_about = KV_ABOUT)]
    Kv(KvArgs),
    /// Compare ConfigMap writes, reads and lists through kuberaft's HTTP API with etcd's KV.
    #[command(long_about = API_ABOUT)]
    Api(KvArgs),
    /// Measure watch delivery latency (write acknowledged → event received) with many watchers.
    #[command(long_about = WATCH_ABOUT)]
    Watch(WatchArgs),
    /// Measure what online backups (`kuberaft snapshot save`) cost the replica that takes them:
    /// puts and reads without and with backups streamed back to back from replica 1.
    Backup(BackupArgs),
    /// Measure the API's wire encodings in process: bytes and encode/decode time of JSON,
    /// Kubernetes protobuf and CBOR for a list of Pods and for a watch frame of one Pod
    /// (medians of several runs; CPU only, no cluster).
    Codecs(CodecArgs),
    /// Measure ConfigMap creates through the API with nothing configured, with one validating
    /// webhook, with one ValidatingAdmissionPolicy and with a ResourceQuota, side by side.
    Admission(AdmissionArgs),
    /// Simulate a large cluster's steady state (nodes renewing leases, pod status patches and
    /// churn, a kubelet watch per node, informers, optionally full-list clients) and measure
    /// latencies, watch delivery, CPU, memory and a follower's restart.
    #[command(long_about = CLUSTER_ABOUT)]
    Cluster(kuberaft_chaos::clusterbench::ClusterArgs),
    /// The fan-out floor server that `watch --floor` starts (not for direct use).
    #[command(hide = true)]
    FloorServer {
        /// Address to listen on.
        #[arg(long)]
        listen: String,
    },
}

/// Long help of `kuberaft-bench watch`.
const WATCH_ABOUT: &str = "\
Measure watch delivery latency (write acknowledged → event received) with many watchers.

Starts a local 3-node kuberaft cluster and a 3-member etcd cluster (--systems picks). For
every cell (watchers × rate × watchers per connection), on each system in turn, it opens the
watchers (their connections spread over the replicas; kuberaft: an HTTP watch of one
namespace's ConfigMaps, over HTTP/1.1 with a connection each or multiplexed over HTTP/2;
etcd: a v3 Watch of one key prefix), all from the revision before the first write; then it
writes at the rate for the duration (ConfigMap creates; etcd: Puts of the same JSON; open
loop, round robin over the replicas, at most 256 in flight), and records when
each write was acknowledged and when each watcher received its event. Latency is arrival minus
acknowledgement (0 when the event came first) over every (watcher, event) pair. `missing`
counts events a watcher never received within 10 s after the last write.

Example:
  kuberaft-bench watch --watchers 1,100,1000 --rates 100,1000 --duration-secs 5 --runs 3
  kuberaft-bench watch --watchers 1000 --per-connection 1,100 --rates 1000 --runs 3";

/// Long help of `kuberaft-bench cluster`.
const CLUSTER_ABOUT: &str = "\
Simulate a large cluster's steady state against a local secure 3-replica kuberaft cluster.

Setup (as the admin, --setup-concurrency in flight): --nodes Nodes, a Lease per Node in
kube-node-lease, --pods Pods (3-4 KiB of JSON each with their status) spread over the nodes
and --namespaces namespaces; the rates are reported.

Steady state (--duration-secs, open loop, as a user outside system:masters so the in-flight
limits apply): every node renews its Lease each --lease-period-secs (PUT with the
resourceVersion it last saw) and patches its status each --node-status-period-secs; pod
status patches at --pod-status-patches-per-sec (each carrying its send time); pod deletes,
each followed by a create, at --pod-churn-per-sec; one kubelet watch per node
(fieldSelector=spec.nodeName=<node>, --watches-per-connection over HTTP/2, spread over the
replicas); --informers list all pods and nodes in pages of 500 and watch them, started a
quarter into the steady state; --list-clients list all pods unpaginated, again and again.

Then a follower is stopped (SIGTERM) and started again while the load goes on against the
others, and timed until /readyz is 200 and it has the leader's revision.

Prints per operation p50/p99 and failures by status code (429 apart), kubelet watch delivery
(patch sent -> event received), per replica CPU and RSS, memory per object against its JSON
size, the restart, and issue 19's targets next to the measured values.

Example (issue 19's cluster; the overload case adds --list-clients 200):
  kuberaft-bench cluster --duration-secs 120 --json cluster.json";

/// Options of `kuberaft-bench codecs`.
#[derive(Debug, Clone, clap::Args)]
struct CodecArgs {
    /// Pods in the list.
    #[arg(long, default_value_t = 150)]
    pods: usize,
    /// Timed runs per figure (the median is reported).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
}

/// Options of `kuberaft-bench admission`.
#[derive(Debug, Clone, clap::Args)]
struct AdmissionArgs {
    /// The setups, measured in this order in every run (the first is the ratios' base).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "none,webhook,policy,quota"
    )]
    setups: Vec<kuberaft_chaos::admissionbench::Setup>,
    /// Comma-separated numbers of concurrent clients (spread over the replicas).
    #[arg(long, default_value = "1,16,64")]
    concurrency: ConcurrencyList,
    /// Unmeasured seconds at the start of each cell.
    #[arg(long, default_value_t = 1)]
    warmup_secs: u64,
    /// Measured seconds of each cell.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    duration_secs: u64,
    /// Runs; medians are reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Bytes of data in each created ConfigMap.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// HTTP version of the clients.
    #[arg(long, value_enum, default_value = "http1")]
    http: HttpVersion,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    kuberaft_bin: Option<PathBuf>,
    /// First loopback port (the same layout as `kv`).
    #[arg(long, default_value_t = 23000)]
    base_port: u16,
}

/// Runs `kuberaft-bench admission` and prints its table.
async fn run_admission_bench(args: AdmissionArgs) -> anyhow::Result<()> {
    let setups = dedup_keep_order(&args.setups);
    if setups.is_empty() {
        bail!("--setups must not be empty");
    }
    let cluster = start_secure_cluster(args.kuberaft_bin.as_ref(), args.base_port, false).await?;
    let clients = connect_http(&cluster.api_addrs, cluster.tls.as_ref(), args.http).await?;
    let bench = kuberaft_chaos::admissionbench::AdmissionBench {
        setups,
        concurrency: args.concurrency.0.clone(),
        warmup: Duration::from_secs(args.warmup_secs),
        duration: Duration::from_secs(args.duration_secs),
        runs: args.runs as usize,
        value_size: args.value_size,
    };
    let cells =
        kuberaft_chaos::admissionbench::run(&bench, &cluster.api_addrs[0], cluster.tls.as_ref(), &clients)
            .await?;
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "3 replicas on one host ({cpus} CPUs, shared with the clients and the webhook); ConfigMap \
         creates through the HTTP API ({:?}, HTTPS as the admin); {} B values; {} s measured after \
         {} s warm-up; median of {} run(s).\n",
        args.http, args.value_size, args.duration_secs, args.warmup_secs, args.runs,
    );
    print!("{}", kuberaft_chaos::admissionbench::markdown(&cells));
    drop(clients);
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .context("stopping the cluster failed")?;
    Ok(())
}

/// Runs `kuberaft-bench cluster` and prints its report.
async fn run_cluster_bench(args: kuberaft_chaos::clusterbench::ClusterArgs) -> anyhow::Result<()> {
    let mut cluster = start_secure_cluster(args.kuberaft_bin.as_ref(), args.base_port, false).await?;
    let result = kuberaft_chaos::clusterbench::print(&mut cluster, &args).await;
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .context("stopping the cluster failed")?;
    result
}

/// Options of `kuberaft-bench watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Comma-separated numbers of concurrent watchers.
    #[arg(long, default_value = "1,100,1000")]
    pub watchers: ConcurrencyList,
    /// Comma-separated write rates (writes per second); every watcher count runs at each.
    #[arg(long, default_value = "1000")]
    pub rates: ConcurrencyList,
    /// Comma-separated numbers of watchers sharing one connection: 1 gives each watcher its
    /// own (kuberaft: HTTP/1.1); more multiplex them (kuberaft: HTTP/2, whose streams
    /// kube-apiserver limits to 100 per connection; etcd: gRPC streams on one channel).
    #[arg(long, default_value = "1")]
    pub per_connection: ConcurrencyList,
    /// Seconds of writing per cell.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub duration_secs: u64,
    /// Bytes of data in each written ConfigMap.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Runs of every cell; the run with the median p99 is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Systems to measure (comma-separated); each cell runs on them alternately.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "kuberaft,etcd")]
    pub systems: Vec<System>,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    pub kuberaft_bin: Option<PathBuf>,
    /// The etcd binary.
    #[arg(long, default_value = "/usr/bin/etcd")]
    pub etcd_bin: PathBuf,
    /// First of the 40 loopback ports the clusters use (etcd and kuberaft get distinct ones).
    #[arg(long, default_value_t = 23000)]
    pub base_port: u16,
    /// Also measure the fan-out floor: a server that only copies each write to every watcher
    /// over the same HTTP (no storage, no replication), the least any watch server pays here.
    #[arg(long)]
    pub floor: bool,
    /// How kuberaft runs: `secure` (the default: HTTPS, watchers and writers authenticated by
    /// the admin's client certificate, RBAC on every request) or `insecure` (plain HTTP, as
    /// the floor server speaks).
    #[arg(long, value_enum, default_value = "secure")]
    pub kuberaft_security: Security,
}

/// The kuberaft binary to start: the one given, else `kuberaft` next to this executable.
fn kuberaft_bin(given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    match given {
        Some(bin) => Ok(bin.clone()),
        None => Ok(std::env::current_exe()
            .context("cannot locate this executable")?
            .with_file_name("kuberaft")),
    }
}

/// Starts a secure kuberaft cluster of the binary given (else the one next to this
/// executable) on the ports from `base_port`, after checking both.
async fn start_secure_cluster(
    given: Option<&PathBuf>,
    base_port: u16,
    keep_dir: bool,
) -> anyhow::Result<KuberaftCluster> {
    let bin = kuberaft_bin(given)?;
    if !bin.is_file() {
        bail!(
            "kuberaft binary {} not found; build it or pass --kuberaft-bin",
            bin.display()
        );
    }
    let ports = Ports::new(base_port)?;
    ports.check_free(System::Kuberaft)?;
    KuberaftCluster::start(&bin, ports, keep_dir, true).await
}

/// Options of `kuberaft-bench backup`.
#[derive(Debug, clap::Args)]
struct BackupArgs {
    /// Operations to measure in both phases.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "put,get-serializable"
    )]
    ops: Vec<Op>,
    /// Closed-loop clients, spread over the replicas.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Measured seconds per phase and run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    duration_secs: u64,
    /// Runs; medians are reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Size in bytes of written and preloaded values.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Keys preloaded before the first run (what each backup holds).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    preload_keys: u64,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    kuberaft_bin: Option<PathBuf>,
    /// Keep the cluster's directory.
    #[arg(long)]
    keep_dir: bool,
    /// First loopback port (the same layout as `kv`).
    #[arg(long, default_value_t = 23000)]
    base_port: u16,
}

/// Runs `kuberaft-bench backup` and prints its table.
async fn run_backup_bench(args: BackupArgs) -> anyhow::Result<()> {
    let cluster = start_secure_cluster(args.kuberaft_bin.as_ref(), args.base_port, args.keep_dir).await?;
    let clients = connect_all(System::Kuberaft, &cluster.addrs, cluster.tls.as_ref()).await?;
    let bench = kuberaft_chaos::backupbench::BackupBench {
        ops: dedup_keep_order(&args.ops),
        concurrency: args.concurrency as usize,
        duration: Duration::from_secs(args.duration_secs),
        runs: args.runs as usize,
        value_size: args.value_size,
        preload_keys: args.preload_keys,
    };
    let rows =
        kuberaft_chaos::backupbench::run(&bench, &clients, &cluster.addrs[0], cluster.tls.as_ref()).await?;
    println!(
        "kuberaft-bench backup: {} keys of {} bytes, {} clients, {} s x {} runs (medians)\n",
        args.preload_keys, args.value_size, args.concurrency, args.duration_secs, args.runs
    );
    print!("{}", kuberaft_chaos::backupbench::table(&rows));
    tokio::task::spawn_blocking(move || drop(cluster))
        .await
        .context("stopping the cluster failed")?;
    Ok(())
}

/// Runs `kuberaft-bench watch`.
async fn run_watch_bench(args: WatchArgs) -> anyhow::Result<()> {
    let ports = Ports::new(args.base_port)?;
    let mut kuberaft = None;
    let mut etcd = None;
    for system in &args.systems {
        ports.check_free(*system)?;
        match system {
            System::Kuberaft => {
                let bin = kuberaft_bin(args.kuberaft_bin.as_ref())?;
                let secure = args.kuberaft_security == Security::Secure;
                kuberaft = Some(KuberaftCluster::start(&bin, ports, false, secure).await?);
            }
            System::Etcd => etcd = Some(EtcdCluster::start(&args.etcd_bin, ports, false).await?),
        }
    }
    let floor = match args.floor {
        true => Some(FloorServer::start(ports).await?),
        false => None,
    };
    let mut targets = Vec::new();
    if let Some(e) = &etcd {
        targets.push((watchbench::Target::Etcd(&e.addrs), e.pids()));
    }
    if let Some(k) = &kuberaft {
        targets.push((
            watchbench::Target::Kuberaft(&k.api_addrs, k.tls.as_ref()),
            vec![k.pid()],
        ));
    }
    if let Some(f) = &floor {
        targets.push((watchbench::Target::Floor(&f.addrs), vec![f.pid()]));
    }
    let mut results = Vec::new();
    let mut cells = Vec::new();
    for &rate in &args.rates.0 {
        for &per_connection in &args.per_connection.0 {
            for &watchers in &args.watchers.0 {
                cells.push(watchbench::WatchCell {
                    watchers,
                    rate: u32::try_from(rate).context("rate too large")?,
                    duration: Duration::from_secs(args.duration_secs),
                    value_size: args.value_size,
                    per_connection: per_connection.clamp(1, watchers.max(1)),
                });
            }
        }
    }
    for cell in cells {
        let (watchers, rate, per_connection) = (cell.watchers, cell.rate, cell.per_connection);
        let mut runs: Vec<Vec<watchbench::WatchResult>> = vec![Vec::new(); targets.len()];
        for run in 0..args.runs {
            // The systems take turns, run by run, so that a noisy neighbour hits both.
            for (t, (target, servers)) in targets.iter().enumerate() {
                let tag = format!("w{watchers}-c{per_connection}-r{rate}-{run}");
                let r = watchbench::run_cell(*target, servers, cell, &tag)
                    .await
                    .with_context(|| format!("{}: {watchers} watchers at {rate} writes/s", target.name()))?;
                eprintln!(
                    "{:>8}: {watchers:>5} watchers ({per_connection} per connection), {rate:>5} writes/s, run {}/{}: {} writes/s achieved, p50 {} ms, p99 {} ms, missing {}",
                    target.name(),
                    run + 1,
                    args.runs,
                    report::fmt_rate(Some(r.writes_per_sec)),
                    report::fmt_ms(r.p50_ms),
                    report::fmt_ms(r.p99_ms),
                    r.missing,
                );
                runs[t].push(r);
            }
        }
        for mut system_runs in runs {
            system_runs.sort_by(|a, b| {
                a.p99_ms
                    .partial_cmp(&b.p99_ms)
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            results.push(system_runs.swap_remove(system_runs.len() / 2));
        }
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "3 replicas of each system on one host ({cpus} CPUs, shared with the clients); objects of {} B data; {} s of writes per cell; run with the median p99 of {}.\n",
        args.value_size, args.duration_secs, args.runs
    );
    print!("{}", watchbench::markdown(&results));
    tokio::task::spawn_blocking(move || drop((kuberaft, etcd)))
        .await
        .context("stopping the clusters failed")?;
    Ok(())
}

/// Which interface of kuberaft a benchmark drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The `Kv` gRPC service (the raw replicated store).
    Kv,
    /// The Kubernetes HTTP API, with ConfigMaps standing for keys.
    Api,
}

impl Mode {
    /// The operations run when `--ops` is not given.
    fn default_ops(self) -> Vec<Op> {
        match self {
            Mode::Kv => vec![Op::Put, Op::GetLinearizable, Op::GetSerializable],
            Mode::Api => vec![
                Op::Put,
                Op::GetLinearizable,
                Op::GetSerializable,
                Op::ListLinearizable,
                Op::ListSerializable,
            ],
        }
    }
}

/// Long help of `kuberaft-bench api`.
const API_ABOUT: &str = "\
Compare ConfigMap writes, reads and lists through kuberaft's HTTP API with etcd's KV.

Like `kuberaft-bench kv` (same clusters, ports, alternation and report), but kuberaft is driven
through the Kubernetes HTTP API of its three replicas (HTTP/1.1 keep-alive, JSON), so the
table shows what the API layer costs on top of the raw store. etcd is driven exactly as in
`kv`: it is the bare-store baseline the API is held to.

Operations (kuberaft over HTTP / etcd):
  put                POST a ConfigMap with --value-size bytes of data / Put
  get-linearizable   GET one of the --preload-keys (1000) preloaded ConfigMaps, resourceVersion
                     unset (Most Recent)
                     / linearizable Range
  get-serializable   the same GET with resourceVersion=0 (Any) / serializable Range
  list-linearizable  list the preloaded ConfigMaps, resourceVersion unset
                     / linearizable Range of the preloaded keys
  list-serializable  the same list with resourceVersion=0 / serializable Range
  list-paged         the same list in pages of limit=500 with continue tokens
                     / Range with limit 500, later pages at the first one's revision

Example:
  kuberaft-bench api --concurrency 1,16,64 --duration-secs 10 --runs 3 --json api.json";

/// Long help of `kuberaft-bench kv`.
const KV_ABOUT: &str = "\
Compare kuberaft's KV throughput and latency with etcd's on this machine.

Starts a local 3-member etcd cluster (default settings, data in a temporary directory) and a
local 3-node kuberaft cluster (`kuberaft cluster up`), both on loopback, and keeps both running
for the whole benchmark. Ports are taken from --base-port on: etcd client ports base..base+2,
etcd peer ports base+10.., kuberaft API ports base+20.., kuberaft peer ports base+30...

Each cell (operation × concurrency) runs C closed-loop clients: every client issues one
operation, waits for the answer and issues the next. Clients are spread over the three
replicas (client i talks to replica i mod 3, one gRPC connection per replica). After a warm-up,
latencies of successful operations are recorded for the measured period; failed operations
(gRPC errors, timeouts, missing keys) are counted separately, and a cell where more than 1% of
operations failed is flagged.

Operations:
  put               a value of --value-size random bytes under a fresh key
                    (kuberaft: Txn with one Put; etcd: Put)
  get-linearizable  Range of one of the preloaded keys, serializable=false
  get-serializable  Range of one of the preloaded keys, serializable=true (local read)

To be fair on a noisy machine, the two systems are driven alternately: for every cell, etcd
runs, then kuberaft, --runs times; medians over the runs are reported. Only one system is under
load at any time.

Prints a markdown table (for docs/benchmarks.md) with ops/s, p50 and p99 latency per system and
the kuberaft/etcd ratios of throughput and p99 latency, then a table of the CPU milliseconds per
operation each system spent (all its processes, warm-up included); --json also writes every run.

Example:
  kuberaft-bench kv --concurrency 1,16,64,256 --duration-secs 10 --runs 3 --json kv.json";

/// Options of `kuberaft-bench kv`.
#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub struct KvArgs {
    /// Comma-separated numbers of concurrent clients; every operation runs once per number.
    #[arg(long, default_value = "1,16,64,256")]
    pub concurrency: ConcurrencyList,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub duration_secs: u64,
    /// Warm-up seconds per run (operations that complete then are not recorded).
    #[arg(long, default_value_t = 1)]
    pub warmup_secs: u64,
    /// Size in bytes of written values (puts and preloaded keys).
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// Keys (ConfigMaps in `api`) written before the reads; gets pick one, lists read them all.
    #[arg(long, default_value_t = workload::DEFAULT_PRELOAD_KEYS, value_parser = clap::value_parser!(u64).range(1..))]
    pub preload_keys: u64,
    /// Runs of every cell on every system; the median is reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Systems to benchmark (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "kuberaft,etcd")]
    pub systems: Vec<System>,
    /// Operations to benchmark (comma-separated), in this order [default: kv: put,
    /// get-linearizable, get-serializable; api: those and list-linearizable, list-serializable].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ops: Vec<Op>,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    pub kuberaft_bin: Option<PathBuf>,
    /// The etcd binary.
    #[arg(long, default_value = "/usr/bin/etcd")]
    pub etcd_bin: PathBuf,
    /// Keep the clusters' temporary directories (data and logs) instead of removing them.
    #[arg(long)]
    pub keep_dir: bool,
    /// Also write the results, with every run, as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// First of the 40 loopback ports the clusters use (etcd and kuberaft get distinct ones).
    #[arg(long, default_value_t = 23000)]
    pub base_port: u16,
    /// Which replicas the clients talk to: all three (client i to replica i mod 3), only the
    /// leader, or only one follower (as found when the benchmark starts).
    #[arg(long, value_enum, default_value = "all")]
    pub replicas: Replicas,
    /// How kuberaft runs: `secure` (the default: HTTPS and mutual TLS, clients authenticated
    /// by the admin's client certificate, RBAC on every request) or `insecure`
    /// (`cluster up --insecure`: plain HTTP and gRPC, no authentication or authorization).
    #[arg(long, value_enum, default_value = "secure")]
    pub kuberaft_security: Security,
    /// The HTTP version of the API benchmark's clients (`api` only).
    #[arg(long, value_enum, default_value = "http1")]
    pub http: HttpVersion,
}

/// How the benchmarked kuberaft cluster is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Security {
    /// TLS, authentication and RBAC (kuberaft's default).
    Secure,
    /// `--insecure`: plain HTTP and gRPC, no authentication or authorization.
    Insecure,
}

/// Which replicas a benchmark's clients talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replicas {
    /// Every replica.
    All,
    /// The leader only.
    Leader,
    /// One follower only.
    Follower,
}

/// Keeps the client of the replica `choice` names, given the leader's index.
fn choose(clients: Vec<Client>, choice: Replicas, leader: Option<usize>) -> anyhow::Result<Vec<Client>> {
    if choice == Replicas::All {
        return Ok(clients);
    }
    let leader = leader.context("no leader found to choose replicas by")?;
    let pick = match choice {
        Replicas::Follower => (leader + 1) % clients.len(),
        Replicas::Leader | Replicas::All => leader,
    };
    Ok(clients.into_iter().skip(pick).take(1).collect())
}

/// A list of client counts, parsed from `1,16,64`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct ConcurrencyList(pub Vec<usize>);

impl FromStr for ConcurrencyList {
    type Err = String;

    /// Parses comma-separated positive, distinct numbers (spaces around them are allowed).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut list = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let n: usize = part
                .parse()
                .map_err(|_| format!("{part:?} is not a number of clients"))?;
            if n == 0 {
                return Err("a number of clients must be at least 1".to_string());
            }
            if list.contains(&n) {
                return Err(format!("{n} is listed twice"));
            }
            list.push(n);
        }
        Ok(Self(list))
    }
}

/// Removes repeated entries, keeping the first occurrence.
fn dedup_keep_order<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out = Vec::new();
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The first line of `etcd --version`, if it runs.
fn etcd_version(bin: &Path) -> Option<String> {
    let out = std::process::Command::new(bin).arg("--version").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_string)
}

/// Connects one client to every replica.
async fn connect_all(system: System, addrs: &[String], tls: Option<&Tls>) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::new();
    for addr in addrs {
        clients.push(Client::connect(system, addr, tls).await?);
    }
    Ok(clients)
}

/// How long the API may take to accept the benchmark's namespaces after the cluster is up.
const API_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// One Kubernetes API client per replica, after creating the benchmark's namespaces.
async fn connect_http(
    addrs: &[String],
    tls: Option<&Tls>,
    version: HttpVersion,
) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::new();
    for addr in addrs {
        clients.push(Client::http(addr, tls, version)?);
    }
    let first = client::HttpClient::new(&addrs[0], tls, version)?;
    let deadline = std::time::Instant::now() + API_READY_TIMEOUT;
    loop {
        match first.ensure_namespaces().await {
            Ok(()) => return Ok(clients),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// A running system under test.
struct Target {
    system: System,
    clients: Vec<Client>,
    preloaded: bool,
    /// The processes whose CPU time (theirs and their children's) the system spends.
    processes: Vec<u32>,
}

/// Runs `kuberaft-bench kv` or `kuberaft-bench api`.
async fn run_bench(mode: Mode, mut args: KvArgs) -> anyhow::Result<()> {
    args.systems = dedup_keep_order(&args.systems);
    if args.ops.is_empty() {
        args.ops = mode.default_ops();
    }
    args.ops = dedup_keep_order(&args.ops);
    if args.systems.is_empty() || args.ops.is_empty() {
        bail!("--systems and --ops must not be empty");
    }
    let kuberaft_bin = kuberaft_bin(args.kuberaft_bin.as_ref())?;
    args.kuberaft_bin = Some(kuberaft_bin.clone());
    let wants = |s: System| args.systems.contains(&s);
    if wants(System::Kuberaft) && !kuberaft_bin.is_file() {
        bail!(
            "kuberaft binary {} not found; build it or pass --kuberaft-bin",
            kuberaft_bin.display()
        );
    }
    if wants(System::Etcd) && !args.etcd_bin.is_file() {
        bail!(
            "etcd binary {} not found; pass --etcd-bin",
            args.etcd_bin.display()
        );
    }
    let ports = Ports::new(args.base_port)?;
    for s in &args.systems {
        ports.check_free(*s)?;
    }

    // Both clusters stay up for the whole benchmark; dropping them (also on errors) stops
    // their processes and removes their directories.
    let etcd = match wants(System::Etcd) {
        true => Some(EtcdCluster::start(&args.etcd_bin, ports, args.keep_dir).await?),
        false => None,
    };
    let kuberaft = match wants(System::Kuberaft) {
        true => Some(
            KuberaftCluster::start(
                &kuberaft_bin,
                ports,
                args.keep_dir,
                args.kuberaft_security == Security::Secure,
            )
            .await?,
        ),
        false => None,
    };
    // Always etcd first, then kuberaft, whatever order --systems lists them in.
    let mut targets = Vec::new();
    if let Some(c) = &etcd {
        let clients = connect_all(System::Etcd, &c.addrs, None).await?;
        targets.push(Target {
            system: System::Etcd,
            clients: choose(clients, args.replicas, c.leader().await)?,
            preloaded: false,
            processes: c.pids(),
        });
    }
    if let Some(c) = &kuberaft {
        let clients = match mode {
            Mode::Kv => connect_all(System::Kuberaft, &c.addrs, c.tls.as_ref()).await?,
            Mode::Api => connect_http(&c.api_addrs, c.tls.as_ref(), args.http).await?,
        };
        targets.push(Target {
            system: System::Kuberaft,
            clients: choose(clients, args.replicas, c.leader().await)?,
            preloaded: false,
            processes: vec![c.pid()],
        });
    }

    let mut cells = Vec::new();
    for &op in &args.ops {
        for &concurrency in &args.concurrency.0 {
            let mut runs: Vec<Vec<RunStats>> = vec![Vec::new(); targets.len()];
            for run in 0..args.runs {
                for (t, target) in targets.iter_mut().enumerate() {
                    if op.is_read() && !target.preloaded {
                        eprintln!("{}: preloading {} keys", target.system, args.preload_keys);
                        workload::preload(&target.clients, args.value_size, args.preload_keys)
                            .await
                            .with_context(|| format!("{}: preload failed", target.system))?;
                        target.preloaded = true;
                    }
                    let spec = CellSpec {
                        op,
                        concurrency,
                        warmup: Duration::from_secs(args.warmup_secs),
                        duration: Duration::from_secs(args.duration_secs),
                        value_size: args.value_size,
                        tag: format!("{op}-c{concurrency}-r{run}"),
                        preload_keys: args.preload_keys,
                    };
                    let cpu_before = kuberaft_chaos::cpu::tree_seconds(&target.processes);
                    let mut stats = workload::run_cell(&target.clients, &spec)
                        .await
                        .with_context(|| format!("{} {op} with {concurrency} clients", target.system))?;
                    // The CPU of the whole cell (warm-up included) over the operations done in
                    // it, counted at the measured rate.
                    let cpu = kuberaft_chaos::cpu::tree_seconds(&target.processes) - cpu_before;
                    let done = stats.ops_per_sec * (spec.warmup + spec.duration).as_secs_f64();
                    stats.cpu_ms_per_op = (done > 0.0).then(|| cpu * 1000.0 / done);
                    eprintln!(
                        "{:<8} {:<16} clients {:>4} run {}/{}: {:>9} ops/s  p50 {:>6} ms  p99 {:>6} ms  errors {}",
                        target.system.name(),
                        op.name(),
                        concurrency,
                        run + 1,
                        args.runs,
                        report::fmt_rate(Some(stats.ops_per_sec)),
                        report::fmt_ms(stats.p50_ms),
                        report::fmt_ms(stats.p99_ms),
                        stats.errors,
                    );
                    runs[t].push(stats);
                }
            }
            for (target, runs) in targets.iter().zip(runs) {
                cells.push(CellResult::new(target.system, op, concurrency, runs));
            }
        }
    }

    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let etcd_version = etcd.as_ref().and_then(|_| etcd_version(&args.etcd_bin));
    let table = report::markdown(&cells, &args.ops, &args.concurrency.0);
    let interface = match mode {
        Mode::Kv => "kuberaft through its Kv gRPC service",
        Mode::Api => "kuberaft through its Kubernetes HTTP API (ConfigMaps, HTTP/1.1, JSON)",
    };
    println!(
        "3 replicas per system on one host ({cpus} CPUs, shared with the clients); {interface}; \
         {} B values; {} s measured after {} s warm-up; median of {} run(s); {}.\n",
        args.value_size,
        args.duration_secs,
        args.warmup_secs,
        args.runs,
        etcd_version.as_deref().unwrap_or("etcd not run"),
    );
    println!("Clients on: {:?} replicas.\n", args.replicas);
    print!("{table}");
    if let Some(path) = &args.json {
        let report = report::Report {
            benchmark: match mode {
                Mode::Kv => "kv",
                Mode::Api => "api",
            },
            config: &args,
            host_cpus: cpus,
            etcd_version,
            results: &cells,
            markdown: &table,
        };
        report::write_json(path, &report)?;
        eprintln!("wrote {}", path.display());
    }
    // Close the client connections first, then stop the clusters off the async runtime
    // (stopping waits for the processes).
    drop(targets);
    tokio::task::spawn_blocking(move || {
        drop(kuberaft);
        drop(etcd);
    })
    .await
    .context("stopping the clusters failed")?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let bench = async move {
        match cli.command {
            Command::Kv(args) => run_bench(Mode::Kv, args).await,
            Command::Api(args) => run_bench(Mode::Api, args).await,
            Command::Watch(args) => run_watch_bench(args).await,
            Command::Backup(args) => run_backup_bench(args).await,
            Command::Admission(args) => run_admission_bench(args).await,
            Command::Cluster(args) => run_cluster_bench(args).await,
            Command::Codecs(args) => {
                kuberaft_chaos::codecbench::run(args.pods, args.runs as usize).map(|table| print!("{table}"))
            }
            Command::FloorServer { listen } => kuberaft_chaos::floor::serve(&listen).await,
        }
    };
    // On a signal the benchmark future is dropped, and with it the clusters' guards, which
    // stop the servers and remove their data.
    tokio::select! {
        r = bench => r,
        r = shutdown_signal() => {
            r.context("cannot watch Ctrl-C or SIGTERM")?;
            bail!("interrupted; stopping the clusters")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<usize>, String> {
        s.parse::<ConcurrencyList>().map(|l| l.0)
    }

    #[test]
    fn concurrency_list_parsing() {
        assert_eq!(parse("1,16,64,256"), Ok(vec![1, 16, 64, 256]));
        assert_eq!(parse(" 8 , 2"), Ok(vec![8, 2]));
        assert_eq!(parse("4"), Ok(vec![4]));
        assert!(parse("").is_err());
        assert!(parse("1,,2").is_err());
        assert!(parse("0").is_err());
        assert!(parse("-1").is_err());
        assert!(parse("x").is_err());
        assert!(parse("2,2").is_err());
    }

    #[test]
    fn cli_defaults() {
        let cli = Cli::try_parse_from(["kuberaft-bench", "kv"]).unwrap();
        let Command::Kv(args) = cli.command else {
            panic!("not kv")
        };
        assert_eq!(args.concurrency.0, vec![1, 16, 64, 256]);
        assert_eq!(args.systems, vec![System::Kuberaft, System::Etcd]);
        assert!(args.ops.is_empty(), "the default comes from the mode");
        assert_eq!(
            Mode::Kv.default_ops(),
            vec![Op::Put, Op::GetLinearizable, Op::GetSerializable]
        );
        assert!(Mode::Api.default_ops().contains(&Op::ListLinearizable));
        let cli = Cli::try_parse_from(["kuberaft-bench", "api", "--ops", "list-serializable"]).unwrap();
        let Command::Api(args) = cli.command else {
            panic!("not api")
        };
        assert_eq!(args.ops, vec![Op::ListSerializable]);
        assert_eq!(args.duration_secs, 10);
        assert_eq!(args.warmup_secs, 1);
        assert_eq!(args.value_size, 1024);
        assert_eq!(args.runs, 1);
        assert_eq!(args.base_port, 23000);
        assert!(args.kuberaft_bin.is_none());
    }

    #[test]
    fn cli_lists_and_rejections() {
        let cli = Cli::try_parse_from([
            "kuberaft-bench",
            "kv",
            "--systems",
            "etcd",
            "--ops",
            "get-serializable,put",
            "--concurrency",
            "2,3",
        ])
        .unwrap();
        let Command::Kv(args) = cli.command else {
            panic!("not kv")
        };
        assert_eq!(args.systems, vec![System::Etcd]);
        assert_eq!(args.ops, vec![Op::GetSerializable, Op::Put]);
        assert_eq!(args.concurrency.0, vec![2, 3]);
        for bad in [
            ["--systems", "zookeeper"],
            ["--ops", "delete"],
            ["--concurrency", "0"],
            ["--runs", "0"],
            ["--duration-secs", "0"],
        ] {
            let argv = ["kuberaft-bench", "kv", bad[0], bad[1]];
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn dedup_keeps_first_occurrence() {
        assert_eq!(dedup_keep_order(&[3, 1, 3, 2, 1]), vec![3, 1, 2]);
    }
}
