//! `kuberaft-bench cluster`: a large cluster's steady state, simulated with real Kubernetes
//! objects against a real secure three-replica cluster, to measure what issue 19 asks of it.
//!
//! Setup creates the Nodes, one Lease per Node in `kube-node-lease` and the Pods (about
//! 3-4 KiB of JSON each once their status is reported: containers with images, resources,
//! env, ports and probes; status with conditions and container statuses), spread over the
//! Nodes, with bounded concurrency, and reports how fast the cluster took them.
//!
//! The steady state then runs what a cluster's clients do, open loop at fixed rates: every
//! Node renews its Lease once per lease period (a PUT with the resourceVersion it last saw)
//! and patches its status' heartbeats once per node status period (strategic merge through
//! `nodes/status`); Pod statuses are patched (`pods/status`) and Pods are deleted and created
//! again (churn). One "kubelet" per Node watches the Pods bound to it
//! (`fieldSelector=spec.nodeName=<node>`), many watches multiplexed per HTTP/2 connection,
//! the connections spread over the replicas. A few informers list all Pods and all Nodes in
//! pages of 500 and then watch them, starting while the load runs. With `--list-clients`,
//! that many clients also list all Pods unpaginated, again and again (the overload case).
//!
//! The simulated clients authenticate as a user outside `system:masters` (bound to
//! `cluster-admin`), so the replicas' in-flight limits apply to them as to a real cluster's
//! kubelets and controllers; the setup runs as the admin.
//!
//! Each pod status patch carries its send time in a condition of its own
//! (`bench.kuberaft.io/sent`), so a kubelet's watch delivery latency is computed at receipt:
//! patch sent → event received. (kube-apiserver would also take it in an annotation through
//! `pods/status`; kuberaft ignores metadata there, so the marker lives in the status.)
//!
//! Afterwards one follower is stopped (SIGTERM), started again on its data while the load
//! goes on against the other two, and timed until `/readyz` answers 200 and its store has
//! the revision the leader had then.
//!
//! The report: per operation p50/p99 latency and failures by status code (429 apart); watch
//! delivery; per replica CPU and RSS; memory per object against its JSON size (the replicas
//! export no watch-cache size, so this is their RSS growth over the setup: an upper bound);
//! restart to ready; and the issue's targets next to the measured values.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context};
use futures::StreamExt;
use hdrhistogram::Histogram;
use reqwest::header::CONTENT_TYPE;
use serde_json::{json, Value};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::client::{self, Tls};
use crate::cluster::KuberaftCluster;
use crate::report::{fmt_ms, fmt_rate};
use crate::watchbench::for_each_line;
use crate::workload::{new_histogram, quantile_ms, XorShift};

/// Options of `kuberaft-bench cluster` (the defaults are issue 19's cluster).
#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub struct ClusterArgs {
    /// Nodes (each with a Lease and a kubelet watcher).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub nodes: u64,
    /// Pods, spread over the nodes.
    #[arg(long, default_value_t = 150_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub pods: u64,
    /// Namespaces the pods are spread over.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub namespaces: u64,
    /// Seconds between two renewals of a node's Lease.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_period_secs: u64,
    /// Seconds between two status patches of a Node.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub node_status_period_secs: u64,
    /// Pod status patches per second (over all pods).
    #[arg(long, default_value_t = 100.0)]
    pub pod_status_patches_per_sec: f64,
    /// Pods deleted per second, each followed by the create of a new one.
    #[arg(long, default_value_t = 20.0)]
    pub pod_churn_per_sec: f64,
    /// Informers (each lists and watches all Pods and all Nodes), started while the load runs.
    #[arg(long, default_value_t = 3)]
    pub informers: u64,
    /// Clients listing all Pods unpaginated, again and again, while the load runs (the
    /// overload case: 200).
    #[arg(long, default_value_t = 0)]
    pub list_clients: u64,
    /// Measured seconds of steady state.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub duration_secs: u64,
    /// Kubelet watches multiplexed over one HTTP/2 connection (kube-apiserver allows 100
    /// streams per connection).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100))]
    pub watches_per_connection: u64,
    /// Requests in flight during setup.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub setup_concurrency: u64,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    pub kuberaft_bin: Option<PathBuf>,
    /// First loopback port (the same layout as `kv`).
    #[arg(long, default_value_t = 23000)]
    pub base_port: u16,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Requests of one kind in flight at most; a cluster slower than the rate falls behind
/// instead of piling up.
const MAX_IN_FLIGHT: usize = 256;
/// How long one load request may take.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one unpaginated list of every pod may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the kubelets may take to receive the last patches after the load stopped.
const DRAIN: Duration = Duration::from_secs(10);
/// How long a restarted replica may take to be ready and caught up.
const RESTART_TIMEOUT: Duration = Duration::from_secs(600);
/// Attempts of one setup request that failed in a way worth retrying.
const SETUP_ATTEMPTS: u32 = 5;
/// Items per page of an informer's list.
const PAGE: usize = 500;
/// The user the simulated clients authenticate as, and its group (bound to `cluster-admin`).
const LOAD_USER: &str = "kuberaft-bench-load";
const LOAD_GROUP: &str = "kuberaft-bench";
/// The namespace of node Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The pod condition that carries a status patch's send time, and its message's prefix.
const SENT_CONDITION: &str = "bench.kuberaft.io/sent";
const SENT_PREFIX: &str = "sent-us:";
/// The content type of a strategic merge patch.
const STRATEGIC: &str = "application/strategic-merge-patch+json";
/// Issue 19's targets on this machine.
const LEASE_P99_TARGET_MS: f64 = 50.0;
const DELIVERY_P99_TARGET_MS: f64 = 100.0;
const CACHE_RATIO_TARGET: f64 = 1.5;
const RESTART_TARGET_SECS: f64 = 10.0;

/// The timed operations of the load, in the table's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    LeaseRenew,
    NodeStatus,
    PodStatus,
    PodCreate,
    PodDelete,
}

const OPS: [Op; 5] = [
    Op::LeaseRenew,
    Op::NodeStatus,
    Op::PodStatus,
    Op::PodCreate,
    Op::PodDelete,
];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::LeaseRenew => "lease renewals (PUT)",
            Op::NodeStatus => "node status patches",
            Op::PodStatus => "pod status patches",
            Op::PodCreate => "pod creates (churn)",
            Op::PodDelete => "pod deletes (churn)",
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// A 2xx, after this long.
    Ok(Duration),
    /// Another status code.
    Status(u16),
    /// No answer: `timeout` or `transport`.
    Failed(&'static str),
}

/// Latencies and failures of one kind of request.
#[derive(Debug)]
struct OpStats {
    hist: Histogram<u64>,
    too_many: u64,
    errors: BTreeMap<String, u64>,
}

impl OpStats {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            hist: new_histogram()?,
            too_many: 0,
            errors: BTreeMap::new(),
        })
    }

    fn record(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Ok(d) => self.hist.saturating_record(micros(d)),
            Outcome::Status(429) => self.too_many += 1,
            Outcome::Status(code) => *self.errors.entry(code.to_string()).or_default() += 1,
            Outcome::Failed(why) => *self.errors.entry(why.to_string()).or_default() += 1,
        }
    }

    /// The table row, `seconds` being the span the requests ran in.
    fn row(&self, name: &str, seconds: f64) -> Row {
        Row::new(name, &self.hist, seconds, self.too_many, self.errors.clone())
    }
}

/// A duration in whole microseconds, at least 1 (the histograms' lowest value).
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// Locks `m`, also after a panic elsewhere (the data are counters).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The outcomes of the load's operations over one phase.
struct Recorder {
    ops: Vec<Mutex<OpStats>>,
}

impl Recorder {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            ops: OPS
                .iter()
                .map(|_| OpStats::new().map(Mutex::new))
                .collect::<anyhow::Result<_>>()?,
        })
    }

    fn record(&self, op: Op, outcome: Outcome) {
        lock(&self.ops[op as usize]).record(outcome);
    }

    /// Successful operations of `op`.
    fn ok(&self, op: Op) -> u64 {
        lock(&self.ops[op as usize]).hist.len()
    }

    /// Failed operations of every kind, 429s included.
    fn failures(&self) -> BTreeMap<String, u64> {
        let mut all = BTreeMap::new();
        for stats in &self.ops {
            let stats = lock(stats);
            for (code, n) in &stats.errors {
                *all.entry(code.clone()).or_default() += n;
            }
            if stats.too_many > 0 {
                *all.entry("429".to_string()).or_default() += stats.too_many;
            }
        }
        all
    }
}

/// One row of the operations table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// What was measured.
    pub name: String,
    /// Successes (operations, events, lists).
    pub count: u64,
    /// Successes per second over the measured span.
    pub per_sec: Option<f64>,
    /// Latency percentiles, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Largest.
    pub max_ms: Option<f64>,
    /// Refusals with 429 TooManyRequests.
    pub too_many_requests: u64,
    /// Other failures by status code (or `timeout`, `transport`, `missing`, …).
    pub errors: BTreeMap<String, u64>,
}

impl Row {
    fn new(
        name: &str,
        hist: &Histogram<u64>,
        seconds: f64,
        too_many: u64,
        errors: BTreeMap<String, u64>,
    ) -> Self {
        Self {
            name: name.to_string(),
            count: hist.len(),
            per_sec: (seconds > 0.0).then(|| hist.len() as f64 / seconds),
            p50_ms: quantile_ms(hist, 0.5),
            p99_ms: quantile_ms(hist, 0.99),
            max_ms: (!hist.is_empty()).then(|| hist.max() as f64 / 1000.0),
            too_many_requests: too_many,
            errors,
        }
    }
}

/// The state of one pod slot: a pod that exists and is free, busy with a request, or none.
const IDLE: u8 = 0;
const BUSY: u8 = 1;
const EMPTY: u8 = 2;

/// A place for one pod; churn replaces its pod by one of the next generation.
struct Slot {
    state: AtomicU8,
    generation: AtomicU32,
}

/// A request under way to one replica (see [`World::enter`]).
struct Flight<'a> {
    count: &'a AtomicU64,
    /// `https://host:port` of the replica.
    base: &'a str,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What every simulated client shares: the cluster's addresses, the objects, which replicas
/// are up.
struct World {
    /// The simulated clients' HTTP/1.1 connections (the load user).
    http: reqwest::Client,
    /// `https://host:port` of every replica.
    bases: Vec<String>,
    /// Which replicas take load (a restarted one does not until it is ready).
    up: Vec<AtomicBool>,
    /// Requests under way to each replica.
    in_flight: Vec<AtomicU64>,
    nodes: Vec<String>,
    node_uids: Vec<String>,
    /// The resourceVersion each node's Lease had when last written.
    lease_versions: Vec<Mutex<String>>,
    namespaces: Vec<String>,
    slots: Vec<Slot>,
    /// Status patches' send times are microseconds since this.
    epoch: Instant,
}

impl World {
    /// Starts request `i` to its replica: `i` mod the replicas, the next up one if that one
    /// is down. The request counts as under way there until the returned guard is dropped.
    fn enter(&self, i: usize) -> Flight<'_> {
        let n = self.bases.len();
        let flight = |r: usize| {
            self.in_flight[r].fetch_add(1, Ordering::SeqCst);
            Flight {
                count: &self.in_flight[r],
                base: &self.bases[r],
            }
        };
        for r in (0..n).map(|k| (i + k) % n) {
            // Counted before `up` is read, as the restart clears `up` before it reads the
            // count: either it sees this request, or this request sees the replica down.
            let f = flight(r);
            if self.up[r].load(Ordering::SeqCst) {
                return f;
            }
        }
        flight(i % n)
    }

    /// The namespace, name and node of the pod in `slot` at `generation`.
    fn pod(&self, slot: usize, generation: u32) -> (&str, String, usize) {
        let node = (slot + generation as usize * 7919) % self.nodes.len();
        (
            &self.namespaces[slot % self.namespaces.len()],
            format!("pod-{slot:06}-{generation}"),
            node,
        )
    }

    /// Takes a random slot in one of the states `from` (at most a few tries); its previous
    /// state.
    fn claim(&self, rng: u64, from: &[u8]) -> Option<(usize, u8)> {
        let mut rng = XorShift::new(rng);
        for _ in 0..16 {
            let slot = rng.below(self.slots.len() as u64) as usize;
            for &state in from {
                if self.slots[slot]
                    .state
                    .compare_exchange(state, BUSY, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some((slot, state));
                }
            }
        }
        None
    }

    fn release(&self, slot: usize, state: u8) {
        self.slots[slot].state.store(state, Ordering::Release);
    }
}

/// The current time as `metav1.Time` (`micro`: `metav1.MicroTime`).
fn now_text(micro: bool) -> String {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since.as_secs()).unwrap_or(0);
    let nanos = i32::try_from(since.subsec_nanos()).unwrap_or(0);
    kuberaft::machinery::timestamp::format_rfc3339(seconds, nanos, micro).unwrap_or_default()
}

/// An IPv4 address in `10.<first>.0.0/16`'s neighbourhood for index `i`.
fn address(first: u64, i: u64) -> String {
    format!("10.{}.{}.{}", first + i / 65536, (i / 256) % 256, i % 256)
}

/// A 64-digit hex string derived from `seed` (image and container ids).
fn digest(seed: u64) -> String {
    let mut rng = XorShift::new(seed.wrapping_mul(2_654_435_761).wrapping_add(1));
    (0..4).map(|_| format!("{:016x}", rng.next_u64())).collect()
}

/// Node `i` as its kubelet registers it.
fn node_object(name: &str, i: u64) -> Value {
    let now = now_text(false);
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "lastHeartbeatTime": now,
               "lastTransitionTime": now, "reason": reason, "message": message})
    };
    let zone = ["a", "b", "c"][(i % 3) as usize];
    let images: Vec<Value> = (0..8u64)
        .map(|k| {
            json!({"names": [format!("registry.example.com/platform/image-{k}@sha256:{}", digest(k)),
                             format!("registry.example.com/platform/image-{k}:v1.{k}.0")],
                   "sizeBytes": 20_000_000 + k * 7_340_033})
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.2xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": format!("region-1{zone}"),
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "podCIDR": format!("{}/24", address(200, i * 256)),
            "podCIDRs": [format!("{}/24", address(200, i * 256))],
            "providerID": format!("aws:///region-1{zone}/i-{:017x}", i + 1),
        },
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "101430960Ki", "hugepages-2Mi": "0",
                         "memory": "32475916Ki", "pods": "110"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "93478772582", "hugepages-2Mi": "0",
                            "memory": "31458060Ki", "pods": "110"},
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [{"type": "InternalIP", "address": address(0, i + 1)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": &digest(i)[..32], "systemUUID": &digest(i + 1)[..32], "bootID": &digest(i + 2)[..32],
                "kernelVersion": "6.1.0-27-cloud-amd64", "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.22", "kubeletVersion": "v1.31.2",
                "kubeProxyVersion": "v1.31.2", "operatingSystem": "linux", "architecture": "amd64",
            },
            "images": images,
        },
    })
}

/// A kubelet's heartbeat: its conditions' `lastHeartbeatTime`, merged by type.
fn node_heartbeat() -> Vec<u8> {
    let now = now_text(false);
    let kinds = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];
    let conditions: Vec<Value> = kinds
        .iter()
        .map(|k| json!({"type": k, "lastHeartbeatTime": now}))
        .collect();
    json!({"status": {"conditions": conditions}})
        .to_string()
        .into_bytes()
}

/// The Lease of node `name` (owned by the Node, as the kubelet writes it); with
/// `resource_version`, the renewal.
fn lease_object(name: &str, uid: &str, resource_version: Option<&str>) -> Vec<u8> {
    let mut metadata = json!({
        "name": name,
        "namespace": LEASE_NAMESPACE,
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}],
    });
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_text(true)},
    })
    .to_string()
    .into_bytes()
}

/// The pod in `slot` as a Deployment's ReplicaSet would create it, bound to `node`.
fn pod_object(namespace: &str, name: &str, node: &str, slot: usize) -> Vec<u8> {
    let app = format!("svc-{}", slot % 97);
    let field = |path: &str| json!({"fieldRef": {"apiVersion": "v1", "fieldPath": path}});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": app, "pod-template-hash": "7d9f8b6c5d", "tier": "backend",
                       "version": "v1.4.2", "team": "payments"},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
                            "kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z"},
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": format!("registry.example.com/payments/{app}:v1.4.2"),
                    "command": ["/app/server"],
                    "args": ["--port=8080", "--metrics-port=9090", "--log-level=info"],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                              {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                    "env": [
                        {"name": "POD_NAME", "valueFrom": field("metadata.name")},
                        {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
                        {"name": "NODE_NAME", "valueFrom": field("spec.nodeName")},
                        {"name": "LOG_FORMAT", "value": "json"},
                        {"name": "DB_HOST", "value": "postgres.payments.svc.cluster.local"},
                        {"name": "CACHE_TTL_SECONDS", "value": "300"},
                    ],
                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                                  "limits": {"cpu": "1", "memory": "512Mi"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                                      "initialDelaySeconds": 10, "periodSeconds": 10},
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/app"},
                                     {"name": "tmp", "mountPath": "/tmp"}],
                },
                {
                    "name": "proxy",
                    "image": "registry.example.com/mesh/proxy:v1.29.1",
                    "args": ["proxy", "sidecar", "--concurrency=2"],
                    "ports": [{"name": "proxy-admin", "containerPort": 15000, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                  "limits": {"cpu": "500m", "memory": "256Mi"}},
                    "readinessProbe": {"tcpSocket": {"port": 15000}, "periodSeconds": 10},
                },
            ],
            "volumes": [{"name": "config", "configMap": {"name": format!("{app}-config")}},
                        {"name": "tmp", "emptyDir": {}}],
        },
    })
    .to_string()
    .into_bytes()
}

/// A kubelet's status patch of the pod in `slot` on node `node`: running, ready, its
/// containers' statuses; with `sent`, the send time for the watch delivery latency.
fn pod_status(slot: usize, node: usize, restarts: u32, sent: Option<u128>) -> Vec<u8> {
    let now = now_text(false);
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    let mut conditions: Vec<Value> = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    .iter()
    .map(|k| condition(k))
    .collect();
    if let Some(us) = sent {
        conditions
            .push(json!({"type": SENT_CONDITION, "status": "True", "message": format!("{SENT_PREFIX}{us}")}));
    }
    let container = |name: &str, image: String, seed: u64| {
        json!({
            "name": name, "state": {"running": {"startedAt": now}}, "lastState": {},
            "ready": true, "restartCount": restarts, "started": true, "image": image,
            "imageID": format!("{}@sha256:{}", image.split(':').next().unwrap_or_default(), digest(seed)),
            "containerID": format!("containerd://{}", digest(seed ^ (u64::from(restarts) << 32))),
        })
    };
    let app = format!("svc-{}", slot % 97);
    let host = address(0, node as u64 + 1);
    let ip = address(128, slot as u64);
    json!({"status": {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host, "hostIPs": [{"ip": host}],
        "podIP": ip, "podIPs": [{"ip": ip}],
        "startTime": now,
        "containerStatuses": [
            container("app", format!("registry.example.com/payments/{app}:v1.4.2"), slot as u64),
            container("proxy", "registry.example.com/mesh/proxy:v1.29.1".to_string(), 1 << 40),
        ],
    }})
    .to_string()
    .into_bytes()
}

/// Sends `req` and reads the whole answer: its status and body, or why there was none.
async fn exchange(req: reqwest::RequestBuilder) -> Result<(u16, bytes::Bytes), &'static str> {
    let failed = |e: reqwest::Error| if e.is_timeout() { "timeout" } else { "transport" };
    let resp = req.send().await.map_err(failed)?;
    let status = resp.status().as_u16();
    let body = resp.bytes().await.map_err(failed)?;
    Ok((status, body))
}

/// Sends `req`, timing it: the outcome, and the body of a success.
async fn timed(req: reqwest::RequestBuilder) -> (Outcome, Option<bytes::Bytes>) {
    let start = Instant::now();
    match exchange(req).await {
        Ok((status, body)) if (200..300).contains(&status) => (Outcome::Ok(start.elapsed()), Some(body)),
        Ok((status, _)) => (Outcome::Status(status), None),
        Err(why) => (Outcome::Failed(why), None),
    }
}

/// The `metadata` of a JSON object's bytes.
fn metadata_of(body: &[u8]) -> Option<serde_json::Map<String, Value>> {
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: serde_json::Map<String, Value>,
    }
    serde_json::from_slice::<Object>(body).ok().map(|o| o.metadata)
}

/// A string field of `metadata`.
fn meta_field(metadata: &serde_json::Map<String, Value>, field: &str) -> Option<String> {
    metadata.get(field).and_then(Value::as_str).map(str::to_string)
}

/// Sends the request `make` builds until it succeeds (retrying 429s, 5xx and lost answers a
/// few times): the body.
async fn setup_request(
    what: &str,
    make: impl Fn() -> reqwest::RequestBuilder,
) -> anyhow::Result<bytes::Bytes> {
    let mut last = String::new();
    for attempt in 0..SETUP_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
        }
        match exchange(make().timeout(OP_TIMEOUT)).await {
            Ok((status, body)) if (200..300).contains(&status) => return Ok(body),
            Ok((status, body)) if status == 429 || status >= 500 => {
                last = format!("{status}: {}", String::from_utf8_lossy(&body));
            }
            Ok((status, body)) => bail!("{what} answered {status}: {}", String::from_utf8_lossy(&body)),
            Err(why) => last = why.to_string(),
        }
    }
    bail!("{what} failed {SETUP_ATTEMPTS} times, last: {last}")
}

/// Creates the object `body` in the collection at `url` as a setup request: the created
/// object's metadata `field` and its size in bytes of JSON.
async fn create(
    admin: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    field: &str,
) -> anyhow::Result<(String, usize)> {
    let answer = setup_request(&format!("creating in {url}"), || {
        admin
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.clone())
    })
    .await?;
    let value = metadata_of(&answer)
        .and_then(|m| meta_field(&m, field))
        .with_context(|| format!("an object created in {url} without {field}"))?;
    Ok((value, answer.len()))
}

/// Runs `count` setup requests, `concurrency` at a time (`one(i)` makes request `i`'s future);
/// the results in order and the seconds taken.
async fn in_parallel<T, F, Fut>(
    what: &str,
    count: usize,
    concurrency: usize,
    one: F,
) -> anyhow::Result<(Vec<T>, f64)>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let start = Instant::now();
    let step = (count / 10).max(1);
    let mut results: Vec<Option<T>> = (0..count).map(|_| None).collect();
    let mut done = 0;
    let mut stream = futures::stream::iter(0..count)
        .map(|i| {
            let f = one(i);
            async move { (i, f.await) }
        })
        .buffer_unordered(concurrency);
    while let Some((i, r)) = stream.next().await {
        results[i] = Some(r?);
        done += 1;
        if done % step == 0 {
            eprintln!(
                "setup: {done}/{count} {what} in {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
    Ok((
        results.into_iter().flatten().collect(),
        start.elapsed().as_secs_f64(),
    ))
}

/// What the setup created and how fast.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Setup {
    /// Nodes created, and per second.
    pub nodes: usize,
    /// Nodes per second.
    pub nodes_per_sec: f64,
    /// Leases created.
    pub leases: usize,
    /// Leases per second.
    pub leases_per_sec: f64,
    /// Pods created, each with its first status patch.
    pub pods: usize,
    /// Pods per second (create + status patch each).
    pub pods_per_sec: f64,
    /// Bytes of JSON of one pod with its status, as the server answered it (mean): with the
    /// defaults, the token volume and `managedFields` the server added.
    pub pod_json_bytes: f64,
    /// Bytes of JSON the clients sent for one pod: the create and the first status (mean).
    pub pod_sent_bytes: f64,
    /// Bytes of JSON of one node (mean).
    pub node_json_bytes: f64,
    /// Bytes of JSON of all created objects.
    pub json_bytes: u64,
}

/// Creates the namespaces, nodes, leases and pods as the admin (`admin` is its client).
async fn setup(world: &mut World, admin: &reqwest::Client, args: &ClusterArgs) -> anyhow::Result<Setup> {
    let concurrency = args.setup_concurrency as usize;
    let base0 = world.bases[0].clone();
    for ns in &world.namespaces {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        setup_request(&format!("creating namespace {ns}"), || {
            admin.post(format!("{base0}/api/v1/namespaces")).json(&body)
        })
        .await?;
    }
    // Pods need their namespace's `default` ServiceAccount, which a controller creates.
    for ns in &world.namespaces {
        let url = format!("{base0}/api/v1/namespaces/{ns}/serviceaccounts/default");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !matches!(exchange(admin.get(&url)).await, Ok((200, _))) {
            if Instant::now() >= deadline {
                bail!("namespace {ns} has no default ServiceAccount after 60 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let bases = &world.bases;
    let nodes = &world.nodes;
    let (created, node_secs) = in_parallel("nodes", nodes.len(), concurrency, |i| async move {
        let body = serde_json::to_vec(&node_object(&nodes[i], i as u64))?;
        let url = format!("{}/api/v1/nodes", bases[i % bases.len()]);
        create(admin, &url, body, "uid").await
    })
    .await?;
    let node_bytes: usize = created.iter().map(|(_, n)| n).sum();
    world.node_uids = created.into_iter().map(|(uid, _)| uid).collect();
    let uids = &world.node_uids;
    let (versions, lease_secs) = in_parallel("leases", nodes.len(), concurrency, |i| async move {
        let body = lease_object(&nodes[i], &uids[i], None);
        let url = format!(
            "{}/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases",
            bases[i % bases.len()]
        );
        create(admin, &url, body, "resourceVersion").await
    })
    .await?;
    let lease_bytes: usize = versions.iter().map(|(_, n)| n).sum();
    world.lease_versions = versions.into_iter().map(|(rv, _)| Mutex::new(rv)).collect();
    let world_ref = &*world;
    let (pod_sizes, pod_secs) = in_parallel("pods", world.slots.len(), concurrency, |slot| async move {
        let (ns, name, node) = world_ref.pod(slot, 0);
        let flight = world_ref.enter(slot);
        let base = flight.base;
        let body = pod_object(ns, &name, &world_ref.nodes[node], slot);
        setup_request("creating a pod", || {
            admin
                .post(format!("{base}/api/v1/namespaces/{ns}/pods"))
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
        })
        .await?;
        let status = pod_status(slot, node, 0, None);
        let answer = setup_request("reporting a pod's status", || {
            admin
                .patch(format!("{base}/api/v1/namespaces/{ns}/pods/{name}/status"))
                .header(CONTENT_TYPE, STRATEGIC)
                .body(status.clone())
        })
        .await?;
        world_ref.release(slot, IDLE);
        Ok((answer.len(), body.len() + status.len()))
    })
    .await?;
    let pod_bytes: usize = pod_sizes.iter().map(|(stored, _)| stored).sum();
    let pod_sent: usize = pod_sizes.iter().map(|(_, sent)| sent).sum();
    let rate = |n: usize, s: f64| if s > 0.0 { n as f64 / s } else { 0.0 };
    eprintln!(
        "setup: {} nodes at {:.0}/s, {} leases at {:.0}/s, {} pods (create + status) at {:.0}/s",
        nodes.len(),
        rate(nodes.len(), node_secs),
        nodes.len(),
        rate(nodes.len(), lease_secs),
        pod_sizes.len(),
        rate(pod_sizes.len(), pod_secs),
    );
    Ok(Setup {
        nodes: nodes.len(),
        nodes_per_sec: rate(nodes.len(), node_secs),
        leases: nodes.len(),
        leases_per_sec: rate(nodes.len(), lease_secs),
        pods: pod_sizes.len(),
        pods_per_sec: rate(pod_sizes.len(), pod_secs),
        pod_json_bytes: pod_bytes as f64 / pod_sizes.len().max(1) as f64,
        pod_sent_bytes: pod_sent as f64 / pod_sizes.len().max(1) as f64,
        node_json_bytes: node_bytes as f64 / nodes.len().max(1) as f64,
        json_bytes: (node_bytes + lease_bytes + pod_bytes) as u64,
    })
}

/// Issues `issue(k)` for k = 0, 1, … at `rate` per second (open loop, at most
/// [`MAX_IN_FLIGHT`] at a time) until `stop`, then waits for those in flight.
async fn schedule<F, Fut>(rate: f64, mut stop: watch::Receiver<bool>, mut issue: F)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    if rate <= 0.0 || !rate.is_finite() {
        return;
    }
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    for k in 0u64.. {
        let at = start + Duration::from_secs_f64(k as f64 / rate);
        tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            _ = tokio::time::sleep_until(at.into()) => {}
        }
        let permit = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            p = slots.clone().acquire_owned() => p,
        };
        let Ok(permit) = permit else { break };
        let op = issue(k);
        tasks.spawn(async move {
            op.await;
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// Renews node `node`'s Lease with the resourceVersion it last saw.
async fn renew_lease(world: Arc<World>, rec: Arc<Recorder>, node: usize) {
    let rv = lock(&world.lease_versions[node]).clone();
    let name = &world.nodes[node];
    let body = lease_object(name, &world.node_uids[node], Some(&rv));
    let flight = world.enter(node);
    let url = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}",
        flight.base
    );
    let req = world.http.put(url).header(CONTENT_TYPE, "application/json");
    let (outcome, answer) = timed(req.body(body).timeout(OP_TIMEOUT)).await;
    if let Some(rv) = answer
        .and_then(|a| metadata_of(&a))
        .and_then(|m| meta_field(&m, "resourceVersion"))
    {
        *lock(&world.lease_versions[node]) = rv;
    }
    rec.record(Op::LeaseRenew, outcome);
}

/// Patches node `node`'s heartbeats.
async fn patch_node(world: Arc<World>, rec: Arc<Recorder>, node: usize) {
    let flight = world.enter(node);
    let url = format!("{}/api/v1/nodes/{}/status", flight.base, world.nodes[node]);
    let req = world.http.patch(url).header(CONTENT_TYPE, STRATEGIC);
    let (outcome, _) = timed(req.body(node_heartbeat()).timeout(OP_TIMEOUT)).await;
    rec.record(Op::NodeStatus, outcome);
}

/// Patches a random pod's status, with its send time.
async fn patch_pod(world: Arc<World>, rec: Arc<Recorder>, seed: u64) {
    let Some((slot, _)) = world.claim(seed, &[IDLE]) else {
        return;
    };
    let generation = world.slots[slot].generation.load(Ordering::Acquire);
    let (ns, name, node) = world.pod(slot, generation);
    let sent = world.epoch.elapsed().as_micros();
    let body = pod_status(slot, node, (seed % 5) as u32, Some(sent));
    let flight = world.enter(slot);
    let url = format!("{}/api/v1/namespaces/{ns}/pods/{name}/status", flight.base);
    let req = world.http.patch(url).header(CONTENT_TYPE, STRATEGIC);
    let (outcome, _) = timed(req.body(body).timeout(OP_TIMEOUT)).await;
    world.release(slot, IDLE);
    rec.record(Op::PodStatus, outcome);
}

/// Deletes a random pod (at once, as its kubelet confirms a pod's end) and creates its
/// successor on another node.
async fn churn_pod(world: Arc<World>, rec: Arc<Recorder>, seed: u64) {
    let Some((slot, state)) = world.claim(seed, &[IDLE, EMPTY]) else {
        return;
    };
    let generation = world.slots[slot].generation.load(Ordering::Acquire);
    let flight = world.enter(slot);
    let base = flight.base;
    if state == IDLE {
        let (ns, name, _) = world.pod(slot, generation);
        let url = format!("{base}/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0");
        let (outcome, _) = timed(world.http.delete(url).timeout(OP_TIMEOUT)).await;
        rec.record(Op::PodDelete, outcome);
        if !matches!(outcome, Outcome::Ok(_)) {
            world.release(slot, IDLE);
            return;
        }
    }
    let generation = generation + 1;
    world.slots[slot].generation.store(generation, Ordering::Release);
    let (ns, name, node) = world.pod(slot, generation);
    let body = pod_object(ns, &name, &world.nodes[node], slot);
    let req = world
        .http
        .post(format!("{base}/api/v1/namespaces/{ns}/pods"))
        .header(CONTENT_TYPE, "application/json");
    let (outcome, _) = timed(req.body(body).timeout(OP_TIMEOUT)).await;
    rec.record(Op::PodCreate, outcome);
    world.release(
        slot,
        if matches!(outcome, Outcome::Ok(_)) {
            IDLE
        } else {
            EMPTY
        },
    );
}

/// Runs the load at `args`' rates until `stop`; returns when every request has ended.
async fn run_load(world: Arc<World>, rec: Arc<Recorder>, args: &ClusterArgs, stop: watch::Receiver<bool>) {
    let nodes = world.nodes.len() as f64;
    let n = world.nodes.len() as u64;
    let (w, r) = (world.clone(), rec.clone());
    let leases = schedule(nodes / args.lease_period_secs as f64, stop.clone(), move |k| {
        renew_lease(w.clone(), r.clone(), (k % n) as usize)
    });
    let (w, r) = (world.clone(), rec.clone());
    let heartbeats = schedule(
        nodes / args.node_status_period_secs as f64,
        stop.clone(),
        move |k| patch_node(w.clone(), r.clone(), (k % n) as usize),
    );
    let (w, r) = (world.clone(), rec.clone());
    let patches = schedule(args.pod_status_patches_per_sec, stop.clone(), move |k| {
        patch_pod(w.clone(), r.clone(), k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x51)
    });
    let (w, r) = (world, rec);
    let churn = schedule(args.pod_churn_per_sec, stop, move |k| {
        churn_pod(w.clone(), r.clone(), k.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ 0x77)
    });
    tokio::join!(leases, heartbeats, patches, churn);
}

/// What the kubelet watchers received.
struct KubeletStats {
    established: AtomicU64,
    /// Watches refused, never answered, or broken before the end.
    broken: AtomicU64,
    /// Events other than bookmarks.
    events: AtomicU64,
    /// Events of pods bound to another node.
    misrouted: AtomicU64,
    /// Send → receipt of the status patches' events.
    delivery: Mutex<Histogram<u64>>,
}

/// The send time (microseconds since the epoch) a MODIFIED event's pod carries, if any.
fn sent_micros(line: &[u8]) -> Option<u64> {
    static MODIFIED: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"type\":\"MODIFIED\""));
    static SENT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(SENT_PREFIX.as_bytes()));
    MODIFIED.find(&line[..line.len().min(64)])?;
    let at = SENT.find(line)? + SENT_PREFIX.len();
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits]).ok()?.parse().ok()
}

/// One kubelet: watches the pods bound to `node` from `from` until `stop`.
async fn kubelet(
    http: reqwest::Client,
    base: String,
    node: String,
    from: String,
    epoch: Instant,
    stats: Arc<KubeletStats>,
    mut stop: watch::Receiver<bool>,
) {
    let url = format!(
        "{base}/api/v1/pods?watch=1&allowWatchBookmarks=true&fieldSelector=spec.nodeName%3D{node}&resourceVersion={from}"
    );
    let resp = tokio::select! {
        _ = stop.wait_for(|s| *s) => {
            stats.broken.fetch_add(1, Ordering::Relaxed);
            return;
        }
        r = http.get(&url).send() => r,
    };
    let mut resp = match resp {
        Ok(r) if r.status().is_success() => r,
        _ => {
            stats.broken.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    stats.established.fetch_add(1, Ordering::Relaxed);
    let needle = format!("\"nodeName\":\"{node}\"");
    let own = memchr::memmem::Finder::new(needle.as_bytes());
    let mut partial = Vec::new();
    loop {
        let chunk = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            c = resp.chunk() => c,
        };
        let Ok(Some(chunk)) = chunk else {
            stats.broken.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let now = epoch.elapsed();
        for_each_line(&mut partial, &chunk, |line| {
            if memchr::memmem::find(&line[..line.len().min(32)], b"BOOKMARK").is_some() {
                return;
            }
            stats.events.fetch_add(1, Ordering::Relaxed);
            if own.find(line).is_none() {
                stats.misrouted.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(sent) = sent_micros(line) {
                let latency = now.saturating_sub(Duration::from_micros(sent));
                lock(&stats.delivery).saturating_record(micros(latency));
            }
        });
    }
}

/// What the informers measured.
struct InformerStats {
    pod_lists: Mutex<OpStats>,
    node_lists: Mutex<OpStats>,
    events: AtomicU64,
    broken: AtomicU64,
}

/// Lists `path` in pages of [`PAGE`]: the items and the list's resourceVersion.
async fn list_paged(http: &reqwest::Client, url: &str) -> Result<(u64, String), Outcome> {
    #[derive(serde::Deserialize)]
    struct Page {
        metadata: serde_json::Map<String, Value>,
        #[serde(default)]
        items: Vec<serde::de::IgnoredAny>,
    }
    let mut items = 0;
    let mut next: Option<String> = None;
    loop {
        let mut req = http.get(url).query(&[("limit", PAGE.to_string())]);
        if let Some(token) = &next {
            req = req.query(&[("continue", token)]);
        }
        let (status, body) = exchange(req.timeout(LIST_TIMEOUT))
            .await
            .map_err(Outcome::Failed)?;
        if status != 200 {
            return Err(Outcome::Status(status));
        }
        let page: Page = serde_json::from_slice(&body).map_err(|_| Outcome::Failed("bad list"))?;
        items += page.items.len() as u64;
        next = meta_field(&page.metadata, "continue").filter(|t| !t.is_empty());
        if next.is_none() {
            let rv = meta_field(&page.metadata, "resourceVersion").ok_or(Outcome::Failed("bad list"))?;
            return Ok((items, rv));
        }
    }
}

/// One informer's half: lists `url` (all pods, or with `pods` false all nodes) in pages,
/// recording the time, then watches it from the list's resourceVersion.
async fn inform(
    http: reqwest::Client,
    url: String,
    pods: bool,
    stats: Arc<InformerStats>,
    mut stop: watch::Receiver<bool>,
) {
    let start = Instant::now();
    let listed = tokio::select! {
        _ = stop.wait_for(|s| *s) => return,
        l = list_paged(&http, &url) => l,
    };
    let which = if pods { &stats.pod_lists } else { &stats.node_lists };
    let rv = match listed {
        Ok((_, rv)) => {
            lock(which).record(Outcome::Ok(start.elapsed()));
            rv
        }
        Err(outcome) => {
            lock(which).record(outcome);
            return;
        }
    };
    let watch_url = format!("{url}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}");
    let mut resp = match http.get(&watch_url).send().await {
        Ok(r) if r.status().is_success() => r,
        _ => {
            stats.broken.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let mut partial = Vec::new();
    loop {
        let chunk = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            c = resp.chunk() => c,
        };
        let Ok(Some(chunk)) = chunk else {
            stats.broken.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut n = 0;
        for_each_line(&mut partial, &chunk, |_| n += 1);
        stats.events.fetch_add(n, Ordering::Relaxed);
    }
}

/// One client listing every pod unpaginated, again and again, until `stop` (a 429 is
/// retried after its `Retry-After`, as client-go does).
async fn list_all(
    http: reqwest::Client,
    url: String,
    stats: Arc<Mutex<OpStats>>,
    bytes: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let start = Instant::now();
        let once = async {
            let resp = http.get(&url).timeout(LIST_TIMEOUT).send().await;
            let mut resp = match resp {
                Ok(r) => r,
                Err(e) => {
                    return (
                        Outcome::Failed(if e.is_timeout() { "timeout" } else { "transport" }),
                        1,
                    )
                }
            };
            let status = resp.status().as_u16();
            let retry = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1);
            if status != 200 {
                return (Outcome::Status(status), retry);
            }
            // The body is counted and dropped as it arrives, so the client holds no list.
            let mut size = 0;
            loop {
                match resp.chunk().await {
                    Ok(Some(c)) => size += c.len() as u64,
                    Ok(None) => break,
                    Err(_) => return (Outcome::Failed("transport"), 1),
                }
            }
            bytes.fetch_add(size, Ordering::Relaxed);
            (Outcome::Ok(start.elapsed()), 0)
        };
        let (outcome, pause) = tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            r = once => r,
        };
        lock(&stats).record(outcome);
        if pause > 0 {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(Duration::from_secs(pause)) => {}
            }
        }
    }
}

/// One replica's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Replica {
    /// 1-based, as the nodes' names.
    pub replica: usize,
    /// Leader or follower when the steady state began.
    pub role: &'static str,
    /// CPU cores used during the steady state.
    pub cpu_cores: Option<f64>,
    /// Resident memory before the setup, MiB.
    pub rss_before_mib: Option<f64>,
    /// After the setup.
    pub rss_after_setup_mib: Option<f64>,
    /// Largest seen during the steady state.
    pub rss_peak_mib: Option<f64>,
}

/// Memory per object against its JSON size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Memory {
    /// Objects the setup created (nodes, leases, pods).
    pub objects: u64,
    /// Mean JSON bytes of one, as the server answered it.
    pub json_bytes_per_object: f64,
    /// The largest replica RSS growth over the setup, per object (no watch-cache size gauge
    /// is exported, so this upper bound stands in for it).
    pub rss_growth_per_object: Option<f64>,
    /// The growth over the JSON size.
    pub ratio: Option<f64>,
}

/// The restart of a follower.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Restart {
    /// 1-based.
    pub replica: usize,
    /// Seconds from SIGTERM until it had exited.
    pub stop_secs: f64,
    /// Seconds from its start until `/readyz` answered 200.
    pub ready_secs: f64,
    /// Seconds from its start until it was ready and had the leader's revision of then.
    pub caught_up_secs: f64,
    /// That revision.
    pub revision: i64,
    /// The load that ran meanwhile against the other replicas: successes, and failures by
    /// status code.
    pub load_ok: u64,
    /// Failures.
    pub load_failures: BTreeMap<String, u64>,
}

/// One of the issue's targets next to the measured value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    /// What.
    pub target: &'static str,
    /// The goal.
    pub goal: String,
    /// The measured value, if any.
    pub measured: Option<f64>,
    /// Whether it is met.
    pub met: bool,
}

/// Everything `kuberaft-bench cluster` measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    /// The options.
    pub config: ClusterArgs,
    /// CPUs of the host.
    pub host_cpus: usize,
    /// The setup.
    pub setup: Setup,
    /// Seconds the steady state ran.
    pub steady_secs: f64,
    /// Operations, watch delivery, lists.
    pub rows: Vec<Row>,
    /// Kubelet watches open.
    pub kubelet_watches: u64,
    /// Events the kubelets received (all kinds but bookmarks).
    pub kubelet_events: u64,
    /// Events the informers' watches received.
    pub informer_events: u64,
    /// Bytes of one unpaginated list of all pods (mean), when there were list clients.
    pub full_list_bytes: Option<f64>,
    /// Per replica.
    pub replicas: Vec<Replica>,
    /// CPU cores the load generator used during the steady state.
    pub generator_cpu_cores: f64,
    /// Memory per object.
    pub memory: Memory,
    /// The restart of a follower.
    pub restart: Restart,
    /// The issue's targets.
    pub targets: Vec<Target>,
}

/// The replicas' process ids (`None` for one not running).
fn replica_pids(cluster: &mut KuberaftCluster) -> Vec<Option<u32>> {
    (0..cluster.api_addrs.len())
        .map(|i| cluster.replica_pid(i))
        .collect()
}

fn rss_mib(pid: Option<u32>) -> Option<f64> {
    pid.and_then(crate::cpu::rss_bytes)
        .map(|b| b as f64 / 1_048_576.0)
}

/// Makes the load user (a client certificate from the cluster's CA, bound to
/// `cluster-admin` through its group) and waits until the cluster lets it in.
async fn load_identity(
    cluster: &KuberaftCluster,
    admin: &reqwest::Client,
    base: &str,
) -> anyhow::Result<Tls> {
    let admin_tls = cluster.tls.as_ref().context("the cluster is not secure")?;
    let pki = kuberaft::pki::layout::Layout::new(cluster.dir().join("pki"));
    pki.ensure_user(LOAD_USER, &[LOAD_GROUP.to_string()], false)
        .map_err(|e| anyhow::anyhow!("cannot make the load user's certificate: {e}"))?;
    let (cert, key) = pki.user(LOAD_USER);
    let tls = Tls {
        ca_pem: admin_tls.ca_pem.clone(),
        cert_pem: std::fs::read_to_string(&cert)
            .with_context(|| format!("cannot read {}", cert.display()))?,
        key_pem: std::fs::read_to_string(&key).with_context(|| format!("cannot read {}", key.display()))?,
    };
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": LOAD_USER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": LOAD_GROUP}],
    });
    setup_request("binding the load user", || {
        admin
            .post(format!(
                "{base}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
            ))
            .json(&binding)
    })
    .await?;
    let probe = tls.http_builder()?.build()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(
        exchange(probe.get(format!("{base}/api/v1/nodes?limit=1"))).await,
        Ok((200, _))
    ) {
        if Instant::now() >= deadline {
            bail!("the load user is not authorized after 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(tls)
}

/// The store revision of the replica whose peer address is `addr`.
async fn revision(addr: &str, tls: Option<&Tls>) -> anyhow::Result<i64> {
    let channel = client::connect(addr, tls).await?;
    let status = kuberaft_proto::kv_client::KvClient::new(channel)
        .status(kuberaft_proto::StatusRequest { with_hash: false })
        .await
        .context("Status failed")?
        .into_inner();
    Ok(status.revision)
}

/// Stops follower `follower`, starts it again and times it until it is ready and caught up,
/// the load going on against the others meanwhile.
async fn restart(
    cluster: &mut KuberaftCluster,
    world: &Arc<World>,
    admin: &reqwest::Client,
    follower: usize,
    leader: usize,
) -> anyhow::Result<(f64, f64, f64, i64)> {
    // No new requests go to it; those under way finish first.
    world.up[follower].store(false, Ordering::SeqCst);
    let drained = Instant::now() + OP_TIMEOUT + Duration::from_secs(1);
    while world.in_flight[follower].load(Ordering::SeqCst) > 0 && Instant::now() < drained {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let start = Instant::now();
    cluster.stop_replica(follower).await?;
    let stop_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    cluster.start_replica(follower)?;
    let readyz = format!("{}/readyz", world.bases[follower]);
    while !matches!(
        exchange(admin.get(&readyz).timeout(Duration::from_secs(2))).await,
        Ok((200, _))
    ) {
        if start.elapsed() >= RESTART_TIMEOUT {
            bail!(
                "replica {} not ready {RESTART_TIMEOUT:?} after its restart",
                follower + 1
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready_secs = start.elapsed().as_secs_f64();
    let tls = cluster.tls.as_ref();
    let target = revision(&cluster.addrs[leader], tls).await?;
    loop {
        if revision(&cluster.addrs[follower], tls).await.unwrap_or(0) >= target {
            break;
        }
        if start.elapsed() >= RESTART_TIMEOUT {
            bail!("replica {} did not catch up with revision {target}", follower + 1);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let caught_up_secs = start.elapsed().as_secs_f64();
    world.up[follower].store(true, Ordering::SeqCst);
    Ok((stop_secs, ready_secs, caught_up_secs, target))
}

/// The world of `args` before the setup: names, empty pod slots, every replica up.
fn new_world(http: reqwest::Client, bases: Vec<String>, args: &ClusterArgs) -> World {
    World {
        http,
        up: bases.iter().map(|_| AtomicBool::new(true)).collect(),
        in_flight: bases.iter().map(|_| AtomicU64::new(0)).collect(),
        bases,
        nodes: (0..args.nodes).map(|i| format!("node-{i:05}")).collect(),
        node_uids: Vec::new(),
        lease_versions: Vec::new(),
        namespaces: (0..args.namespaces).map(|i| format!("bench-pods-{i}")).collect(),
        slots: (0..args.pods)
            .map(|_| Slot {
                state: AtomicU8::new(EMPTY),
                generation: AtomicU32::new(0),
            })
            .collect(),
        epoch: Instant::now(),
    }
}

/// Opens a kubelet watch per node from revision `from` (into `tasks`, until `stop`), their
/// HTTP/2 connections spread over the replicas, and waits until they are open.
async fn open_kubelets(
    world: &World,
    tls: &Tls,
    from: &str,
    per_connection: usize,
    stop: &watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> anyhow::Result<Arc<KubeletStats>> {
    let stats = Arc::new(KubeletStats {
        established: AtomicU64::new(0),
        broken: AtomicU64::new(0),
        events: AtomicU64::new(0),
        misrouted: AtomicU64::new(0),
        delivery: Mutex::new(new_histogram()?),
    });
    let nodes = world.nodes.len();
    // At most `per_connection` watches per connection, and at least a connection per replica.
    let connections = nodes.div_ceil(per_connection).max(world.bases.len().min(nodes));
    let clients = (0..connections)
        .map(|_| {
            // Over TLS, reqwest offers only h2 when told to speak it with prior knowledge.
            Ok(tls
                .http_builder()?
                .tcp_nodelay(true)
                .http2_prior_knowledge()
                .build()?)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (n, node) in world.nodes.iter().enumerate() {
        let c = n % connections;
        tasks.spawn(kubelet(
            clients[c].clone(),
            world.bases[c % world.bases.len()].clone(),
            node.clone(),
            from.to_string(),
            world.epoch,
            stats.clone(),
            stop.clone(),
        ));
    }
    let deadline = Instant::now() + Duration::from_secs(30).max(Duration::from_millis(10 * nodes as u64));
    while stats.established.load(Ordering::Relaxed) + stats.broken.load(Ordering::Relaxed) < nodes as u64 {
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "{} of {nodes} kubelet watches open",
        stats.established.load(Ordering::Relaxed)
    );
    Ok(stats)
}

/// Records the largest RSS of each of `pids` every half second until `stop`.
fn sample_peaks(
    pids: Vec<Option<u32>>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Vec<u64>> {
    tokio::spawn(async move {
        let mut peaks = vec![0; pids.len()];
        loop {
            for (peak, pid) in peaks.iter_mut().zip(&pids) {
                *peak = (*peak).max(pid.and_then(crate::cpu::rss_bytes).unwrap_or(0));
            }
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return peaks,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    })
}

/// The kubelets' row: delivery latency, and as errors the patches whose event never came,
/// events of another node's pods, and watches that broke.
fn delivery_row(kubelets: &KubeletStats, patched: u64, seconds: f64) -> Row {
    let delivery = lock(&kubelets.delivery);
    let mut errors = BTreeMap::new();
    for (what, n) in [
        ("missing", patched.saturating_sub(delivery.len())),
        ("misrouted", kubelets.misrouted.load(Ordering::Relaxed)),
        ("broken", kubelets.broken.load(Ordering::Relaxed)),
    ] {
        if n > 0 {
            errors.insert(what.to_string(), n);
        }
    }
    Row::new(
        "kubelet watch delivery (patch sent → event)",
        &delivery,
        seconds,
        0,
        errors,
    )
}

/// Memory per object: the largest replica's RSS growth over the setup against the JSON.
fn memory(setup: &Setup, replicas: &[Replica]) -> Memory {
    let objects = (setup.nodes + setup.leases + setup.pods) as u64;
    let json_bytes_per_object = setup.json_bytes as f64 / objects.max(1) as f64;
    let growth = replicas
        .iter()
        .filter_map(|r| {
            Some((r.rss_after_setup_mib? - r.rss_before_mib?) * 1_048_576.0 / objects.max(1) as f64)
        })
        .reduce(f64::max);
    Memory {
        objects,
        json_bytes_per_object,
        rss_growth_per_object: growth,
        ratio: growth.map(|g| g / json_bytes_per_object),
    }
}

/// Issue 19's targets next to what was measured.
fn targets(
    lease_p99: Option<f64>,
    delivery_p99: Option<f64>,
    memory: &Memory,
    restart: &Restart,
) -> Vec<Target> {
    let versus = |target, goal: String, measured: Option<f64>, limit: f64| Target {
        target,
        goal,
        measured,
        met: measured.is_some_and(|m| m <= limit),
    };
    vec![
        versus(
            "lease renewal p99 (ms)",
            format!("≤ {LEASE_P99_TARGET_MS}"),
            lease_p99,
            LEASE_P99_TARGET_MS,
        ),
        versus(
            "kubelet watch delivery p99 (ms)",
            format!("≤ {DELIVERY_P99_TARGET_MS}"),
            delivery_p99,
            DELIVERY_P99_TARGET_MS,
        ),
        versus(
            "memory per object / JSON size (RSS growth; no watch-cache gauge)",
            format!("≤ {CACHE_RATIO_TARGET}x"),
            memory.ratio,
            CACHE_RATIO_TARGET,
        ),
        versus(
            "restart to ready and caught up (s)",
            format!("≤ {RESTART_TARGET_SECS}"),
            Some(restart.caught_up_secs),
            RESTART_TARGET_SECS,
        ),
    ]
}

/// Runs the benchmark against `cluster` (secure, freshly started) and returns its report.
pub async fn run(cluster: &mut KuberaftCluster, args: &ClusterArgs) -> anyhow::Result<Report> {
    for (flag, v) in [
        ("--pod-status-patches-per-sec", args.pod_status_patches_per_sec),
        ("--pod-churn-per-sec", args.pod_churn_per_sec),
    ] {
        if !(0.0..=100_000.0).contains(&v) {
            bail!("{flag} must be between 0 and 100000");
        }
    }
    let admin_tls = cluster.tls.clone().context("the cluster is not secure")?;
    let admin = admin_tls.http_builder()?.tcp_nodelay(true).build()?;
    let bases: Vec<String> = cluster.api_addrs.iter().map(|a| format!("https://{a}")).collect();
    let load_tls = load_identity(cluster, &admin, &bases[0]).await?;
    let http = load_tls
        .http_builder()?
        .tcp_nodelay(true)
        .http1_only()
        .pool_max_idle_per_host(MAX_IN_FLIGHT)
        .build()?;
    let mut world = new_world(http, bases, args);

    let rss_before: Vec<Option<f64>> = replica_pids(cluster).into_iter().map(rss_mib).collect();
    let setup = setup(&mut world, &admin, args).await?;
    // Let the replicas apply and settle before their memory is read.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after: Vec<Option<f64>> = replica_pids(cluster).into_iter().map(rss_mib).collect();
    let world = Arc::new(world);

    // The kubelets watch from the current revision.
    let (status, first) = exchange(admin.get(format!("{}/api/v1/pods?limit=1", world.bases[0])))
        .await
        .map_err(|e| anyhow::anyhow!("listing pods: {e}"))?;
    if status != 200 {
        bail!("listing pods answered {status}");
    }
    let from = metadata_of(&first)
        .and_then(|m| meta_field(&m, "resourceVersion"))
        .context("a pod list without resourceVersion")?;
    let (stop_watchers, watchers_stop) = watch::channel(false);
    let mut watchers = JoinSet::new();
    let per_connection = args.watches_per_connection as usize;
    let kubelets = open_kubelets(
        &world,
        &load_tls,
        &from,
        per_connection,
        &watchers_stop,
        &mut watchers,
    )
    .await?;

    // The steady state.
    let leader = cluster.leader().await.context("no leader found")?;
    let pids = replica_pids(cluster);
    let roots: Vec<Vec<u32>> = pids.iter().map(|p| p.iter().copied().collect()).collect();
    let cpu_before: Vec<f64> = roots.iter().map(|r| crate::cpu::tree_seconds(r)).collect();
    let own_before = crate::cpu::own_seconds();
    let steady = Arc::new(Recorder::new()?);
    let (stop_load, load_stop) = watch::channel(false);
    let started = Instant::now();
    let load = {
        let (world, steady, args) = (world.clone(), steady.clone(), args.clone());
        tokio::spawn(async move { run_load(world, steady, &args, load_stop).await })
    };
    let peaks = sample_peaks(pids.clone(), watchers_stop.clone());
    let list_stats = Arc::new(Mutex::new(OpStats::new()?));
    let list_bytes = Arc::new(AtomicU64::new(0));
    for c in 0..args.list_clients as usize {
        let http = load_tls.http_builder()?.tcp_nodelay(true).http1_only().build()?;
        let url = format!("{}/api/v1/pods", world.bases[c % world.bases.len()]);
        watchers.spawn(list_all(
            http,
            url,
            list_stats.clone(),
            list_bytes.clone(),
            watchers_stop.clone(),
        ));
    }
    let informers = Arc::new(InformerStats {
        pod_lists: Mutex::new(OpStats::new()?),
        node_lists: Mutex::new(OpStats::new()?),
        events: AtomicU64::new(0),
        broken: AtomicU64::new(0),
    });
    let duration = Duration::from_secs(args.duration_secs);
    tokio::time::sleep(duration / 4).await;
    for i in 0..args.informers as usize {
        let http = load_tls
            .http_builder()?
            .tcp_nodelay(true)
            .http2_prior_knowledge()
            .build()?;
        let base = &world.bases[i % world.bases.len()];
        for (pods, path) in [(true, "/api/v1/pods"), (false, "/api/v1/nodes")] {
            watchers.spawn(inform(
                http.clone(),
                format!("{base}{path}"),
                pods,
                informers.clone(),
                watchers_stop.clone(),
            ));
        }
    }
    tokio::time::sleep_until((started + duration).into()).await;
    let _ = stop_load.send(true);
    load.await.context("the load panicked")?;
    let steady_secs = started.elapsed().as_secs_f64();
    let cpu_after: Vec<f64> = roots.iter().map(|r| crate::cpu::tree_seconds(r)).collect();
    let generator_cpu_cores = (crate::cpu::own_seconds() - own_before) / steady_secs;

    // Every acknowledged patch is one event at one kubelet.
    let patched = steady.ok(Op::PodStatus);
    let drain = Instant::now() + DRAIN;
    while lock(&kubelets.delivery).len() < patched && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop_watchers.send(true);
    while let Some(joined) = watchers.join_next().await {
        joined.context("a watcher panicked")?;
    }
    let peaks = peaks.await.context("the sampler panicked")?;

    // The restart of a follower, with the load going on against the others.
    let follower = (leader + 1) % world.bases.len();
    let during = Arc::new(Recorder::new()?);
    let (stop_load, load_stop) = watch::channel(false);
    let load = {
        let (world, during, args) = (world.clone(), during.clone(), args.clone());
        tokio::spawn(async move { run_load(world, during, &args, load_stop).await })
    };
    let restarted = restart(cluster, &world, &admin, follower, leader).await;
    let _ = stop_load.send(true);
    load.await.context("the load panicked")?;
    let (stop_secs, ready_secs, caught_up_secs, revision) = restarted?;
    let restart = Restart {
        replica: follower + 1,
        stop_secs,
        ready_secs,
        caught_up_secs,
        revision,
        load_ok: OPS.iter().map(|op| during.ok(*op)).sum(),
        load_failures: during.failures(),
    };

    let mut rows: Vec<Row> = OPS
        .iter()
        .map(|op| lock(&steady.ops[*op as usize]).row(op.name(), steady_secs))
        .collect();
    let lease_p99 = rows[Op::LeaseRenew as usize].p99_ms;
    let delivery = delivery_row(&kubelets, patched, steady_secs);
    let delivery_p99 = delivery.p99_ms;
    rows.push(delivery);
    if args.informers > 0 {
        let mut pod_lists = lock(&informers.pod_lists).row("informer pod lists (pages of 500)", steady_secs);
        let broken = informers.broken.load(Ordering::Relaxed);
        if broken > 0 {
            pod_lists.errors.insert("broken watches".to_string(), broken);
        }
        rows.push(pod_lists);
        rows.push(lock(&informers.node_lists).row("informer node lists (pages of 500)", steady_secs));
    }
    let full_lists = lock(&list_stats).row(
        &format!("full pod lists ({} clients, unpaginated)", args.list_clients),
        steady_secs,
    );
    let full_list_bytes =
        (full_lists.count > 0).then(|| list_bytes.load(Ordering::Relaxed) as f64 / full_lists.count as f64);
    if args.list_clients > 0 {
        rows.push(full_lists);
    }
    let replicas: Vec<Replica> = (0..pids.len())
        .map(|i| Replica {
            replica: i + 1,
            role: if i == leader { "leader" } else { "follower" },
            cpu_cores: pids[i].map(|_| (cpu_after[i] - cpu_before[i]) / steady_secs),
            rss_before_mib: rss_before[i],
            rss_after_setup_mib: rss_after[i],
            rss_peak_mib: Some(peaks[i] as f64 / 1_048_576.0).filter(|m| *m > 0.0),
        })
        .collect();
    let memory = memory(&setup, &replicas);
    let targets = targets(lease_p99, delivery_p99, &memory, &restart);
    Ok(Report {
        config: args.clone(),
        host_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        setup,
        steady_secs,
        rows,
        kubelet_watches: kubelets.established.load(Ordering::Relaxed),
        kubelet_events: kubelets.events.load(Ordering::Relaxed),
        informer_events: informers.events.load(Ordering::Relaxed),
        full_list_bytes,
        replicas,
        generator_cpu_cores,
        memory,
        restart,
        targets,
    })
}

/// Failures by code as `409×2, timeout×1`, or `0`.
fn fmt_errors(errors: &BTreeMap<String, u64>) -> String {
    if errors.is_empty() {
        return "0".to_string();
    }
    errors
        .iter()
        .map(|(code, n)| format!("{code}×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// The report as markdown: the setup, the operations, the replicas, the restart and the
/// targets.
pub fn markdown(r: &Report) -> String {
    let c = &r.config;
    let s = &r.setup;
    let mut out = format!(
        "{} nodes (lease every {} s, status every {} s), {} pods in {} namespaces ({} status patches/s, {} deletes + creates/s), {} kubelet watches ({} per HTTP/2 connection), {} informers, {} full-list clients; 3 replicas on one host ({} CPUs, shared with the load generator); {:.0} s of steady state.\n\n",
        c.nodes, c.lease_period_secs, c.node_status_period_secs, c.pods, c.namespaces,
        c.pod_status_patches_per_sec, c.pod_churn_per_sec, r.kubelet_watches, c.watches_per_connection,
        c.informers, c.list_clients, r.host_cpus, r.steady_secs,
    );
    out.push_str(&format!(
        "Setup ({} in flight): {} nodes at {:.0}/s, {} leases at {:.0}/s, {} pods at {:.0}/s (a create and a status patch each); a pod is sent as {:.0} B of JSON and stored as {:.0} B (with defaults and managedFields), a node as {:.0} B.\n\n",
        c.setup_concurrency, s.nodes, s.nodes_per_sec, s.leases, s.leases_per_sec, s.pods, s.pods_per_sec,
        s.pod_sent_bytes, s.pod_json_bytes, s.node_json_bytes,
    ));
    out.push_str("| operation | count | per s | p50 ms | p99 ms | max ms | 429 | errors |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    for row in &r.rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.name,
            row.count,
            fmt_rate(row.per_sec),
            fmt_ms(row.p50_ms),
            fmt_ms(row.p99_ms),
            fmt_ms(row.max_ms),
            row.too_many_requests,
            fmt_errors(&row.errors),
        ));
    }
    out.push_str(&format!(
        "\nKubelets received {} events; informers' watches {} events",
        r.kubelet_events, r.informer_events
    ));
    if let Some(b) = r.full_list_bytes {
        out.push_str(&format!("; a full pod list is {:.1} MiB", b / 1_048_576.0));
    }
    out.push_str(&format!(
        ". The load generator used {:.2} CPU cores.\n\n",
        r.generator_cpu_cores
    ));
    out.push_str("| replica | role | CPU cores | RSS before setup MiB | RSS after setup MiB | RSS peak MiB |\n|---|---|---:|---:|---:|---:|\n");
    for p in &r.replicas {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            p.replica,
            p.role,
            fmt_opt(p.cpu_cores, 2),
            fmt_opt(p.rss_before_mib, 0),
            fmt_opt(p.rss_after_setup_mib, 0),
            fmt_opt(p.rss_peak_mib, 0),
        ));
    }
    let m = &r.memory;
    out.push_str(&format!(
        "\nMemory: {} objects of {:.0} B of JSON each; the largest replica RSS growth over the setup is {} B per object (the replicas export no watch-cache size on /metrics, so this upper bound stands in for it: it also holds RocksDB's memtables and caches and the allocator's slack).\n\n",
        m.objects,
        m.json_bytes_per_object,
        fmt_opt(m.rss_growth_per_object, 0),
    ));
    let t = &r.restart;
    out.push_str(&format!(
        "Restart of follower {}: stopped {:.2} s after SIGTERM; started again, /readyz 200 after {:.2} s, caught up with revision {} after {:.2} s; meanwhile the load against the other replicas had {} successes and failures {}.\n\n",
        t.replica, t.stop_secs, t.ready_secs, t.revision, t.caught_up_secs, t.load_ok, fmt_errors(&t.load_failures),
    ));
    out.push_str("| target (issue 19) | goal | measured | met |\n|---|---|---:|---|\n");
    for t in &r.targets {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            t.target,
            t.goal,
            fmt_opt(t.measured, 2),
            if t.met { "yes" } else { "no" },
        ));
    }
    out
}

/// Runs `run` and prints the report (and writes it as JSON with `--json`).
pub async fn print(cluster: &mut KuberaftCluster, args: &ClusterArgs) -> anyhow::Result<()> {
    let report = run(cluster, args).await?;
    let table = markdown(&report);
    print!("{table}");
    if let Some(path) = &args.json {
        #[derive(serde::Serialize)]
        struct Written<'a> {
            benchmark: &'static str,
            report: &'a Report,
            markdown: &'a str,
        }
        let written = Written {
            benchmark: "cluster",
            report: &report,
            markdown: &table,
        };
        let text = serde_json::to_string_pretty(&written)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modified_event_gives_its_send_time() {
        let line = br#"{"type":"MODIFIED","object":{"status":{"conditions":[{"type":"bench.kuberaft.io/sent","status":"True","message":"sent-us:12345"}]}}}"#;
        assert_eq!(sent_micros(line), Some(12345));
        let deleted =
            br#"{"type":"DELETED","object":{"status":{"conditions":[{"message":"sent-us:12345"}]}}}"#;
        assert_eq!(sent_micros(deleted), None, "a deletion carries an old time");
        assert_eq!(sent_micros(br#"{"type":"MODIFIED","object":{}}"#), None);
    }

    #[test]
    fn objects_are_the_sizes_of_a_real_clusters() {
        let pod = pod_object("ns", "pod-000001-0", "node-00001", 1);
        let status = pod_status(1, 1, 0, Some(1));
        let size = pod.len() + status.len();
        assert!((2500..4096).contains(&size), "a pod and its status are {size} B");
        let node = serde_json::to_vec(&node_object("node-00001", 1)).unwrap();
        assert!(node.len() > 3000, "a node is {} B", node.len());
        let lease: Value = serde_json::from_slice(&lease_object("n", "u", Some("7"))).unwrap();
        assert_eq!(lease["metadata"]["resourceVersion"], "7");
        assert!(now_text(true).ends_with('Z') && now_text(true).contains('.'));
    }

    #[test]
    fn errors_are_listed_by_code() {
        let mut stats = OpStats::new().unwrap();
        stats.record(Outcome::Ok(Duration::from_millis(3)));
        stats.record(Outcome::Status(429));
        stats.record(Outcome::Status(409));
        stats.record(Outcome::Status(409));
        stats.record(Outcome::Failed("timeout"));
        let row = stats.row("x", 1.0);
        assert_eq!((row.count, row.too_many_requests), (1, 1));
        assert_eq!(fmt_errors(&row.errors), "409×2, timeout×1");
        assert_eq!(fmt_errors(&BTreeMap::new()), "0");
    }
}
