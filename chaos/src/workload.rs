//! The closed-loop KV workload: `concurrency` tasks, each issuing one operation at a time
//! against one replica, for a warm-up and then a measured period.
//!
//! Task `i` uses replica `i % replicas`, so load is spread over all replicas like real clients.
//! An operation counts when it completes inside the measured period; successes go to a latency
//! histogram (microseconds), failures (including timeouts and missing keys on reads) are
//! counted separately.

use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use tokio::task::JoinSet;

use crate::client::{Client, PRELOAD_PREFIX};

/// Number of keys written before the read workloads; each read picks one at random.
pub const DEFAULT_PRELOAD_KEYS: u64 = 1000;
/// An operation taking longer than this counts as an error.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// Highest latency the histograms track (longer ones are clamped to it).
const MAX_LATENCY_US: u64 = 20_000_000;
/// Concurrent writers during the preload.
const PRELOAD_TASKS: u64 = 16;

/// A benchmarked operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Write a value under a fresh key (kuberaft: a `Txn` with one put; etcd: `Put`).
    Put,
    /// Linearizable read of a random preloaded key (`serializable: false`).
    GetLinearizable,
    /// Serializable read of a random preloaded key from the replica's local state.
    GetSerializable,
    /// Linearizable read of all preloaded keys.
    ListLinearizable,
    /// Serializable read of all preloaded keys from the replica's local state.
    ListSerializable,
    /// Linearizable read of all preloaded keys in pages of [`PAGE_SIZE`], every page at the
    /// first one's revision (over HTTP: `limit` and `continue`).
    ListPaged,
}

/// Keys per page of [`Op::ListPaged`] (what client-go's informers ask for).
pub const PAGE_SIZE: i64 = 500;

impl Op {
    /// The name used in flags, tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::GetLinearizable => "get-linearizable",
            Op::GetSerializable => "get-serializable",
            Op::ListLinearizable => "list-linearizable",
            Op::ListSerializable => "list-serializable",
            Op::ListPaged => "list-paged",
        }
    }

    /// Whether the operation reads the preloaded keys.
    pub fn is_read(self) -> bool {
        !matches!(self, Op::Put)
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Printable bytes for written values: ConfigMap data must be text, and the KV systems get the
/// same bytes so both store the same amount.
const VALUE_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A small xorshift64 generator: enough to pick keys and fill values, no extra crate.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator seeded from `seed` (any value, including 0).
    pub fn new(seed: u64) -> Self {
        // Spread nearby seeds apart; the state must never be zero.
        Self(seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next pseudo-random value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A pseudo-random value in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Fills `buf` with pseudo-random printable bytes (letters and digits).
    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf.iter_mut() {
            *b = VALUE_ALPHABET[self.below(VALUE_ALPHABET.len() as u64) as usize];
        }
    }
}

/// The key of preloaded entry `i`.
pub fn preload_key(i: u64) -> Vec<u8> {
    format!("{PRELOAD_PREFIX}{i:04}").into_bytes()
}

/// An empty latency histogram (microseconds, 3 significant digits).
pub fn new_histogram() -> anyhow::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).context("cannot create a histogram")
}

/// The latency at `quantile` (0..=1) in milliseconds, or `None` if nothing was recorded.
pub fn quantile_ms(hist: &Histogram<u64>, quantile: f64) -> Option<f64> {
    (!hist.is_empty()).then(|| hist.value_at_quantile(quantile) as f64 / 1000.0)
}

/// What one cell (one system, operation and concurrency) runs.
#[derive(Debug, Clone)]
pub struct CellSpec {
    /// The operation every task issues.
    pub op: Op,
    /// Number of concurrent tasks.
    pub concurrency: usize,
    /// Period before measuring starts.
    pub warmup: Duration,
    /// Measured period.
    pub duration: Duration,
    /// Size of written values in bytes.
    pub value_size: usize,
    /// Distinguishes this run's keys from every other run's (`/bench/{tag}/{task}/{seq}`).
    pub tag: String,
    /// How many preloaded keys the reads and lists cover.
    pub preload_keys: u64,
}

/// The outcome of one run of one cell.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunStats {
    /// Successful operations completed in the measured period.
    pub ops: u64,
    /// Failed operations completed in the measured period.
    pub errors: u64,
    /// Length of the measured period in seconds.
    pub seconds: f64,
    /// Successful operations per second.
    pub ops_per_sec: f64,
    /// Median latency of successful operations in milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th-percentile latency of successful operations in milliseconds.
    pub p99_ms: Option<f64>,
    /// Highest latency of successful operations in milliseconds.
    pub max_ms: Option<f64>,
    /// The first error seen in the measured period, if any.
    pub first_error: Option<String>,
    /// CPU milliseconds the system's processes (every replica) spent per successful operation
    /// over the run, when measured.
    pub cpu_ms_per_op: Option<f64>,
}

impl RunStats {
    /// Builds the statistics of a run from its merged histogram and counters.
    pub fn new(hist: &Histogram<u64>, errors: u64, seconds: f64, first_error: Option<String>) -> Self {
        let ops = hist.len();
        Self {
            ops,
            errors,
            seconds,
            ops_per_sec: if seconds > 0.0 { ops as f64 / seconds } else { 0.0 },
            p50_ms: quantile_ms(hist, 0.5),
            p99_ms: quantile_ms(hist, 0.99),
            max_ms: (!hist.is_empty()).then(|| hist.max() as f64 / 1000.0),
            first_error,
            cpu_ms_per_op: None,
        }
    }
}

/// What one task measured.
struct TaskOutcome {
    hist: Histogram<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// Runs one cell: `spec.concurrency` closed-loop tasks spread over `clients` (one per replica).
pub async fn run_cell(clients: &[Client], spec: &CellSpec) -> anyhow::Result<RunStats> {
    anyhow::ensure!(!clients.is_empty(), "no replicas to drive");
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let mut tasks = JoinSet::new();
    for task in 0..spec.concurrency {
        let client = clients[task % clients.len()].clone();
        let spec = spec.clone();
        let hist = new_histogram()?;
        tasks.spawn(drive(client, spec, task, hist, measure_from, end));
    }
    let mut hist = new_histogram()?;
    let mut errors = 0;
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.context("a workload task panicked")?;
        hist.add(&outcome.hist).context("cannot merge histograms")?;
        errors += outcome.errors;
        first_error = first_error.or(outcome.first_error);
    }
    Ok(RunStats::new(
        &hist,
        errors,
        spec.duration.as_secs_f64(),
        first_error,
    ))
}

/// One closed-loop task: issues operations until `end`, recording those that complete in
/// `measure_from..end`.
async fn drive(
    mut client: Client,
    spec: CellSpec,
    task: usize,
    mut hist: Histogram<u64>,
    measure_from: Instant,
    end: Instant,
) -> TaskOutcome {
    let mut rng = XorShift::new(task as u64);
    let mut value = vec![0u8; spec.value_size];
    rng.fill(&mut value);
    let mut errors = 0;
    let mut first_error = None;
    for seq in 0u64.. {
        let started = Instant::now();
        if started >= end {
            break;
        }
        let result = match spec.op {
            Op::Put => {
                // Make every value differ from the previous one without refilling it all.
                let n = value.len().min(8);
                rng.fill(&mut value[..n]);
                let key = format!("/bench/{}/{task}/{seq}", spec.tag).into_bytes();
                with_timeout(client.put(key, value.clone())).await
            }
            Op::GetLinearizable | Op::GetSerializable => {
                let key = preload_key(rng.below(spec.preload_keys));
                let serializable = spec.op == Op::GetSerializable;
                match with_timeout(client.get(key, serializable)).await {
                    Ok(true) => Ok(()),
                    Ok(false) => Err("a preloaded key is missing".to_string()),
                    Err(e) => Err(e),
                }
            }
            Op::ListLinearizable | Op::ListSerializable | Op::ListPaged => {
                let prefix = PRELOAD_PREFIX.as_bytes().to_vec();
                let listed = match spec.op {
                    Op::ListPaged => with_timeout(client.list_paged(prefix, PAGE_SIZE)).await,
                    op => with_timeout(client.list(prefix, op == Op::ListSerializable)).await,
                };
                match listed {
                    Ok(n) if n as u64 == spec.preload_keys => Ok(()),
                    Ok(n) => Err(format!(
                        "listed {n} preloaded keys, expected {}",
                        spec.preload_keys
                    )),
                    Err(e) => Err(e),
                }
            }
        };
        let done = Instant::now();
        if done < measure_from || done >= end {
            continue;
        }
        match result {
            Ok(()) => {
                let us = u64::try_from(done.duration_since(started).as_micros()).unwrap_or(u64::MAX);
                hist.saturating_record(us.max(1));
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    TaskOutcome {
        hist,
        errors,
        first_error,
    }
}

/// Awaits `fut` for at most `OP_TIMEOUT`, turning gRPC errors and timeouts into messages.
async fn with_timeout<T>(
    fut: impl std::future::Future<Output = Result<T, tonic::Status>>,
) -> Result<T, String> {
    match tokio::time::timeout(OP_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
        Err(_) => Err(format!("timed out after {OP_TIMEOUT:?}")),
    }
}

/// Writes the `keys` keys the reads use, then makes sure every replica has them: a
/// linearizable read through each replica waits until it has applied every earlier write.
pub async fn preload(clients: &[Client], value_size: usize, keys: u64) -> anyhow::Result<()> {
    anyhow::ensure!(keys > 0, "nothing to preload");
    anyhow::ensure!(!clients.is_empty(), "no replicas to preload");
    let mut tasks = JoinSet::new();
    for task in 0..PRELOAD_TASKS {
        let mut client = clients[task as usize % clients.len()].clone();
        tasks.spawn(async move {
            let mut rng = XorShift::new(u64::MAX - task);
            let mut value = vec![0u8; value_size];
            for i in (task..keys).step_by(PRELOAD_TASKS as usize) {
                rng.fill(&mut value);
                with_timeout(client.put(preload_key(i), value.clone()))
                    .await
                    .map_err(|e| anyhow::anyhow!("preload put of key {i} failed: {e}"))?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.context("a preload task panicked")??;
    }
    for (i, client) in clients.iter().enumerate() {
        let mut client = client.clone();
        for key in [0, keys - 1] {
            let found = with_timeout(client.get(preload_key(key), false))
                .await
                .map_err(|e| anyhow::anyhow!("preload check on replica {i} failed: {e}"))?;
            anyhow::ensure!(found, "replica {i} lacks preloaded key {key}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_deterministic_and_varied() {
        let a: Vec<u64> = {
            let mut r = XorShift::new(0);
            (0..100).map(|_| r.next_u64()).collect()
        };
        let mut r = XorShift::new(0);
        assert!(a.iter().all(|&v| v == r.next_u64()));
        let mut distinct = a.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), a.len());
        assert_ne!(XorShift::new(1).next_u64(), XorShift::new(2).next_u64());
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = XorShift::new(7);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn fill_writes_varied_printable_bytes() {
        let mut buf = vec![0u8; 64];
        XorShift::new(3).fill(&mut buf);
        assert!(buf.iter().all(|b| b.is_ascii_alphanumeric()));
        let mut distinct = buf.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 10, "{buf:?}");
    }

    #[test]
    fn quantiles_in_milliseconds() {
        let mut h = new_histogram().unwrap();
        assert_eq!(quantile_ms(&h, 0.5), None);
        for us in 1..=1000 {
            h.record(us).unwrap();
        }
        let p50 = quantile_ms(&h, 0.5).unwrap();
        let p99 = quantile_ms(&h, 0.99).unwrap();
        assert!((p50 - 0.5).abs() < 0.002, "p50 = {p50}");
        assert!((p99 - 0.99).abs() < 0.002, "p99 = {p99}");
    }

    #[test]
    fn run_stats_rate_and_percentiles() {
        let mut h = new_histogram().unwrap();
        for _ in 0..200 {
            h.record(2000).unwrap();
        }
        let s = RunStats::new(&h, 3, 4.0, Some("boom".into()));
        assert_eq!(s.ops, 200);
        assert_eq!(s.errors, 3);
        assert!((s.ops_per_sec - 50.0).abs() < 1e-9);
        assert!((s.p99_ms.unwrap() - 2.0).abs() < 0.01);
    }

    mod fake {
        //! An in-process fake of kuberaft's `Kv` service: a map, no replication.
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex};

        use kuberaft_proto::kv_server::{Kv, KvServer};
        use kuberaft_proto::{self as pb, op::Op as PbOp};
        use tonic::{Request, Response, Status};

        /// The fake's contents, shared with the test.
        pub type Store = Arc<Mutex<HashMap<Vec<u8>, Vec<u8>>>>;

        struct FakeKv {
            store: Store,
            txns: Arc<Mutex<u64>>,
        }

        #[tonic::async_trait]
        impl Kv for FakeKv {
            type SnapshotStream = futures::stream::Empty<Result<pb::SnapshotChunk, Status>>;

            async fn snapshot(
                &self,
                _: Request<pb::SnapshotRequest>,
            ) -> Result<Response<Self::SnapshotStream>, Status> {
                Err(Status::unimplemented("snapshot"))
            }

            async fn members(
                &self,
                _: Request<pb::MemberRequest>,
            ) -> Result<Response<pb::MembersResponse>, Status> {
                Err(Status::unimplemented("members"))
            }

            async fn range(
                &self,
                req: Request<pb::RangeRequest>,
            ) -> Result<Response<pb::RangeResponse>, Status> {
                let key = req.into_inner().key;
                let store = self.store.lock().unwrap();
                let kvs = store
                    .get(&key)
                    .map(|value| pb::KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        ..Default::default()
                    })
                    .into_iter()
                    .collect();
                Ok(Response::new(pb::RangeResponse {
                    kvs,
                    ..Default::default()
                }))
            }

            async fn txn(&self, req: Request<pb::TxnRequest>) -> Result<Response<pb::TxnResponse>, Status> {
                *self.txns.lock().unwrap() += 1;
                for op in req.into_inner().success {
                    match op.op {
                        Some(PbOp::Put(put)) => {
                            self.store.lock().unwrap().insert(put.key, put.value);
                        }
                        _ => return Err(Status::unimplemented("only puts")),
                    }
                }
                Ok(Response::new(pb::TxnResponse {
                    succeeded: true,
                    ..Default::default()
                }))
            }

            async fn compact(
                &self,
                _: Request<pb::CompactRequest>,
            ) -> Result<Response<pb::CompactResponse>, Status> {
                Err(Status::unimplemented("compact"))
            }

            async fn status(
                &self,
                _: Request<pb::StatusRequest>,
            ) -> Result<Response<pb::StatusResponse>, Status> {
                Err(Status::unimplemented("status"))
            }
        }

        /// Serves a fake on a free loopback port; returns its address, store and Txn count.
        pub async fn start() -> (String, Store, Arc<Mutex<u64>>) {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap().to_string();
            let store = Store::default();
            let txns = Arc::new(Mutex::new(0));
            let svc = KvServer::new(FakeKv {
                store: store.clone(),
                txns: txns.clone(),
            });
            let incoming = futures::stream::unfold(listener, |l| async move {
                let conn = l.accept().await.map(|(stream, _)| stream);
                Some((conn, l))
            });
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(svc)
                    .serve_with_incoming(Box::pin(incoming)),
            );
            (addr, store, txns)
        }
    }

    fn spec(op: Op, concurrency: usize) -> CellSpec {
        CellSpec {
            op,
            concurrency,
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(400),
            value_size: 100,
            tag: format!("{op}-test"),
            preload_keys: DEFAULT_PRELOAD_KEYS,
        }
    }

    async fn fake_clients(n: usize) -> (Vec<Client>, fake::Store, std::sync::Arc<std::sync::Mutex<u64>>) {
        let (addr, store, txns) = fake::start().await;
        let mut clients = Vec::new();
        for _ in 0..n {
            clients.push(
                Client::connect(crate::client::System::Kuberaft, &addr, None)
                    .await
                    .unwrap(),
            );
        }
        (clients, store, txns)
    }

    #[tokio::test]
    async fn puts_write_distinct_keys_of_the_value_size() {
        let (clients, store, txns) = fake_clients(3).await;
        let stats = run_cell(&clients, &spec(Op::Put, 5)).await.unwrap();
        assert!(stats.ops > 0);
        assert_eq!(stats.errors, 0);
        assert!(stats.p50_ms.is_some() && stats.p99_ms >= stats.p50_ms);
        let store = store.lock().unwrap();
        // Every Txn (warm-up and tail included) wrote a key no other Txn wrote.
        assert_eq!(store.len() as u64, *txns.lock().unwrap());
        assert!(store.len() as u64 >= stats.ops);
        assert!(store.keys().all(|k| k.starts_with(b"/bench/put-test/")));
        assert!(store.values().all(|v| v.len() == 100));
    }

    #[tokio::test]
    async fn reads_of_preloaded_keys_succeed() {
        let (clients, store, _) = fake_clients(3).await;
        preload(&clients, 64, DEFAULT_PRELOAD_KEYS).await.unwrap();
        assert_eq!(store.lock().unwrap().len() as u64, DEFAULT_PRELOAD_KEYS);
        for op in [Op::GetLinearizable, Op::GetSerializable] {
            let stats = run_cell(&clients, &spec(op, 4)).await.unwrap();
            assert!(stats.ops > 0, "{op}");
            assert_eq!(stats.errors, 0, "{op}: {:?}", stats.first_error);
        }
    }

    #[tokio::test]
    async fn missing_keys_and_dead_replicas_count_as_errors() {
        let (clients, _, _) = fake_clients(1).await;
        let stats = run_cell(&clients, &spec(Op::GetSerializable, 2)).await.unwrap();
        assert_eq!(stats.ops, 0);
        assert!(stats.errors > 0);
        assert_eq!(stats.first_error.as_deref(), Some("a preloaded key is missing"));
        assert_eq!(stats.p99_ms, None);

        // A replica that is gone: every put fails.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect_lazy();
        drop(listener);
        let dead = Client::Kuberaft(kuberaft_proto::kv_client::KvClient::new(channel));
        let stats = run_cell(&[dead], &spec(Op::Put, 2)).await.unwrap();
        assert_eq!(stats.ops, 0);
        assert!(stats.errors > 0);
    }

    #[test]
    fn preload_keys_are_distinct_and_sorted() {
        assert!(preload_key(9) < preload_key(10));
        assert_ne!(preload_key(0), preload_key(DEFAULT_PRELOAD_KEYS - 1));
    }
}
