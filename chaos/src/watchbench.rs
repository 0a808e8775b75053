//! `kuberaft-bench watch`: watch delivery latency, from a write's acknowledgement to each
//! watcher receiving its event, with many watchers spread over the replicas — of kuberaft's
//! Kubernetes API, and of etcd's v3 Watch as the baseline.
//!
//! A writer creates objects at a fixed rate (open loop: a write is issued on schedule whether
//! or not earlier ones finished, at most [`MAX_IN_FLIGHT`] at a time), round robin over the
//! replicas, and records when each was acknowledged: ConfigMaps through kuberaft's HTTP API, or
//! etcd Puts of the same JSON bytes. Every watcher watches the cell's namespace (etcd: key
//! prefix) from the revision before the first write and records when each event arrived.
//! Latency is arrival minus acknowledgement (zero when the event came first), over every
//! (watcher, event) pair.
//!
//! Watchers either have a connection each (kuberaft: HTTP/1.1, as many separate clients) or
//! share connections [`WatchCell::per_connection`] at a time, as one client with many
//! informers does (kuberaft: HTTP/2 streams, kube-apiserver allows 100 per connection; etcd:
//! Watch streams over one gRPC channel).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::client::etcdpb;
use crate::client::{connect, prefix_end, Tls};
use crate::report::{fmt_ms, fmt_rate};
use crate::workload::new_histogram;

/// Writes in flight at most; a system slower than the rate falls behind instead of piling up.
pub const MAX_IN_FLIGHT: usize = 256;
/// How long watchers may take to receive the last events after the writes stopped.
const DRAIN: Duration = Duration::from_secs(10);
/// How long one write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// One cell: how many watchers, and writes per second.
#[derive(Debug, Clone, Copy)]
pub struct WatchCell {
    /// Concurrent watchers.
    pub watchers: usize,
    /// Target writes per second.
    pub rate: u32,
    /// How long the writer writes.
    pub duration: Duration,
    /// Bytes of data in each ConfigMap.
    pub value_size: usize,
    /// Watchers sharing one connection: 1 is a connection each (kuberaft: HTTP/1.1); more
    /// are multiplexed (kuberaft: HTTP/2 with prior knowledge; etcd: gRPC streams).
    pub per_connection: usize,
}

impl WatchCell {
    /// Connections the cell's watchers use.
    fn connections(&self) -> usize {
        self.watchers.div_ceil(self.per_connection)
    }
}

/// The system a cell drives, by the addresses of its replicas.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// kuberaft replicas' Kubernetes API (`host:port`), over HTTPS as the admin when the
    /// cluster is secure.
    Kuberaft(&'a [String], Option<&'a Tls>),
    /// etcd members' client URLs (`host:port`).
    Etcd(&'a [String]),
    /// The fan-out floor (`crate::floor`): the same HTTP requests as kuberaft's.
    Floor(&'a [String]),
}

impl Target<'_> {
    /// The system's name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            Target::Kuberaft(..) => "kuberaft",
            Target::Etcd(_) => "etcd",
            Target::Floor(_) => "floor",
        }
    }
}

/// What one cell measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WatchResult {
    /// `kuberaft` or `etcd`.
    pub system: &'static str,
    /// Concurrent watchers.
    pub watchers: usize,
    /// Watchers sharing one connection.
    pub per_connection: usize,
    /// Target writes per second.
    pub rate: u32,
    /// Acknowledged writes per second achieved.
    pub writes_per_sec: f64,
    /// Events received over all watchers.
    pub events: u64,
    /// Events that some watcher never received (acknowledged writes × watchers − received).
    pub missing: u64,
    /// Failed writes.
    pub write_errors: u64,
    /// Delivery latency percentiles, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Largest.
    pub max_ms: Option<f64>,
    /// CPU the servers used from the first write until the last event arrived (or the drain
    /// gave up), in milliseconds per acknowledged write.
    pub server_cpu_ms_per_write: Option<f64>,
    /// CPU the load generator (writer and watchers) used over the same span, likewise.
    pub client_cpu_ms_per_write: Option<f64>,
}

/// The name of write `seq`, and back.
fn object_name(seq: usize) -> String {
    format!("w-{seq}")
}

/// The write number after the first match of `needle` in `bytes`.
fn number_after(bytes: &[u8], needle: &memchr::memmem::Finder<'_>) -> Option<usize> {
    let at = needle.find(bytes)? + needle.needle().len();
    let digits = bytes[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&bytes[at..at + digits]).ok()?.parse().ok()
}

/// The write number of the first object named in a watch event line (`"name":"w-<seq>"` is the
/// first `name` key: the ConfigMap's data has none).
fn seq_of(line: &[u8]) -> Option<usize> {
    // Built once: a searcher's setup costs more than searching one event.
    static NAME: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"name\":\"w-"));
    number_after(line, &NAME)
}

/// Calls `line` with every line completed by `chunk`, with `partial` holding the incomplete
/// line the previous chunk ended in; keeps the new incomplete rest there. Linear in the bytes
/// received, and only a line split between chunks is copied: a load generator shares the host
/// with the servers, so its own cost per event is kept low.
pub fn for_each_line(partial: &mut Vec<u8>, chunk: &[u8], mut line: impl FnMut(&[u8])) {
    let mut from = 0;
    if !partial.is_empty() {
        let Some(end) = memchr::memchr(b'\n', chunk) else {
            partial.extend_from_slice(chunk);
            return;
        };
        partial.extend_from_slice(&chunk[..end]);
        line(partial);
        partial.clear();
        from = end + 1;
    }
    while let Some(end) = memchr::memchr(b'\n', &chunk[from..]) {
        line(&chunk[from..from + end]);
        from += end + 1;
    }
    partial.extend_from_slice(&chunk[from..]);
}

/// Records the write number of every event line completed by `chunk` (arrived at `now`), with
/// `partial` holding the incomplete line the previous chunk ended in (see [`for_each_line`]).
fn take_lines(
    partial: &mut Vec<u8>,
    chunk: &[u8],
    now: Instant,
    arrivals: &mut Vec<(usize, Instant)>,
) -> u64 {
    let mut taken = 0;
    for_each_line(partial, chunk, |line| {
        if let Some(seq) = seq_of(line) {
            arrivals.push((seq, now));
            taken += 1;
        }
    });
    taken
}

/// The write number of an etcd key (`<prefix>w-<seq>`).
fn seq_of_key(key: &[u8]) -> Option<usize> {
    let at = key.iter().rposition(|b| *b == b'/')? + 1;
    static NAME: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"w-"));
    number_after(&key[at..], &NAME)
}

/// One watcher: receives events until `stop`, recording (write number, arrival) and counting
/// them in `received`.
async fn watch(
    http: reqwest::Client,
    url: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
    received: Arc<AtomicU64>,
) -> anyhow::Result<Vec<(usize, Instant)>> {
    let mut resp = http.get(&url).send().await.context("cannot open a watch")?;
    if !resp.status().is_success() {
        bail!("watch answered {}", resp.status());
    }
    let mut arrivals = Vec::new();
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let chunk = tokio::select! {
            _ = stop.wait_for(|s| *s) => return Ok(arrivals),
            c = resp.chunk() => c.context("the watch broke")?,
        };
        let Some(chunk) = chunk else {
            return Ok(arrivals);
        };
        let taken = take_lines(&mut partial, &chunk, Instant::now(), &mut arrivals);
        received.fetch_add(taken, Ordering::Relaxed);
    }
}

/// One etcd watcher: a Watch stream over `prefix` from `start` on `channel`, recording (write
/// number, arrival) until `stop`.
async fn watch_etcd(
    channel: tonic::transport::Channel,
    prefix: Vec<u8>,
    start: i64,
    mut stop: tokio::sync::watch::Receiver<bool>,
    received: Arc<AtomicU64>,
) -> anyhow::Result<Vec<(usize, Instant)>> {
    let mut client = etcdpb::watch_client::WatchClient::new(channel);
    let create = etcdpb::WatchRequest {
        request_union: Some(etcdpb::watch_request::RequestUnion::CreateRequest(
            etcdpb::WatchCreateRequest {
                range_end: prefix_end(&prefix),
                key: prefix,
                start_revision: start,
            },
        )),
    };
    // The request stream stays open (etcd cancels a watch whose request stream ends).
    let (requests, rx) = tokio::sync::mpsc::channel(1);
    requests
        .send(create)
        .await
        .context("cannot send the watch request")?;
    let mut responses = client
        .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .context("cannot open a watch")?
        .into_inner();
    let mut arrivals = Vec::new();
    loop {
        let message = tokio::select! {
            _ = stop.wait_for(|s| *s) => return Ok(arrivals),
            m = responses.message() => m.context("the watch broke")?,
        };
        let Some(response) = message else {
            return Ok(arrivals);
        };
        if response.canceled {
            bail!("etcd canceled the watch: {}", response.cancel_reason);
        }
        let now = Instant::now();
        for event in &response.events {
            if let Some(seq) = event.kv.as_ref().and_then(|kv| seq_of_key(&kv.key)) {
                arrivals.push((seq, now));
                received.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// How a cell writes: HTTP creates of ConfigMaps, or etcd Puts.
enum Writer {
    Http {
        client: reqwest::Client,
        collections: Vec<String>,
    },
    Etcd {
        clients: Vec<etcdpb::kv_client::KvClient<tonic::transport::Channel>>,
        prefix: String,
    },
}

impl Writer {
    /// Prepares write `seq` (round robin over the replicas) with `body`.
    fn prepare(&self, seq: usize, body: Vec<u8>) -> PendingWrite {
        match self {
            Writer::Http { client, collections } => PendingWrite::Http(
                client
                    .post(&collections[seq % collections.len()])
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body)
                    .timeout(WRITE_TIMEOUT),
            ),
            Writer::Etcd { clients, prefix } => PendingWrite::Etcd(
                clients[seq % clients.len()].clone(),
                etcdpb::PutRequest {
                    key: format!("{prefix}{}", object_name(seq)).into_bytes(),
                    value: body,
                    lease: 0,
                },
            ),
        }
    }
}

/// One write, ready to be sent.
enum PendingWrite {
    Http(reqwest::RequestBuilder),
    Etcd(
        etcdpb::kv_client::KvClient<tonic::transport::Channel>,
        etcdpb::PutRequest,
    ),
}

impl PendingWrite {
    /// Sends the write; whether it succeeded.
    async fn send(self) -> bool {
        match self {
            PendingWrite::Http(req) => matches!(req.send().await, Ok(r) if r.status().is_success()),
            PendingWrite::Etcd(mut client, put) => {
                matches!(
                    tokio::time::timeout(WRITE_TIMEOUT, client.put(put)).await,
                    Ok(Ok(_))
                )
            }
        }
    }
}

/// Prepares a cell on `target`: the writer, the watchers (started), and the shared counters.
async fn open_cell(
    target: Target<'_>,
    cell: WatchCell,
    tag: &str,
    stopping: &tokio::sync::watch::Receiver<bool>,
    received: &Arc<AtomicU64>,
    watchers: &mut JoinSet<anyhow::Result<Vec<(usize, Instant)>>>,
) -> anyhow::Result<Writer> {
    match target {
        Target::Kuberaft(api_addrs, _) | Target::Floor(api_addrs) => {
            let tls = match target {
                Target::Kuberaft(_, tls) => tls,
                _ => None,
            };
            // The admin's certificate over HTTPS for a secure cluster, plain HTTP otherwise.
            let builder = || match tls {
                Some(t) => t.http_builder(),
                None => Ok(reqwest::Client::builder()),
            };
            let http = builder()?
                .tcp_nodelay(true)
                .build()
                .context("cannot build an HTTP client")?;
            let scheme = if tls.is_some() { "https" } else { "http" };
            let base = |i: usize| format!("{scheme}://{}", api_addrs[i % api_addrs.len()]);
            let namespace = format!("watch-{tag}");
            let ns =
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            let created = http
                .post(format!("{}/api/v1/namespaces", base(0)))
                .json(&ns)
                .send()
                .await?;
            if !created.status().is_success() {
                bail!("creating namespace {namespace} answered {}", created.status());
            }
            let collection = |i: usize| format!("{}/api/v1/namespaces/{namespace}/configmaps", base(i));
            let list: serde_json::Value = http.get(collection(0)).send().await?.json().await?;
            let from = list["metadata"]["resourceVersion"]
                .as_str()
                .context("a list without resourceVersion")?
                .to_string();
            // Watchers first, their connections spread over the replicas.
            // Over TLS, ALPN offers only h2 with prior knowledge; in plaintext, h2c.
            let connections = (0..cell.connections())
                .map(|_| {
                    let builder = builder()?.tcp_nodelay(true);
                    match cell.per_connection {
                        1 => builder.http1_only(),
                        _ => builder.http2_prior_knowledge(),
                    }
                    .build()
                    .context("cannot build an HTTP client")
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            for w in 0..cell.watchers {
                let c = w / cell.per_connection;
                let url = format!("{}?watch=1&resourceVersion={from}", collection(c));
                watchers.spawn(watch(
                    connections[c].clone(),
                    url,
                    stopping.clone(),
                    received.clone(),
                ));
            }
            Ok(Writer::Http {
                client: http,
                collections: (0..api_addrs.len()).map(collection).collect(),
            })
        }
        Target::Etcd(addrs) => {
            let prefix = format!("/bench/watch-{tag}/");
            let mut clients = Vec::new();
            for addr in addrs {
                clients.push(etcdpb::kv_client::KvClient::new(connect(addr, None).await?));
            }
            let range = etcdpb::RangeRequest {
                key: prefix.clone().into_bytes(),
                range_end: prefix_end(prefix.as_bytes()),
                limit: 1,
                revision: 0,
                serializable: false,
            };
            let revision = clients[0]
                .range(range)
                .await
                .context("cannot read etcd's revision")?
                .into_inner()
                .header
                .map_or(0, |h| h.revision);
            let mut connections = Vec::new();
            for c in 0..cell.connections() {
                connections.push(connect(&addrs[c % addrs.len()], None).await?);
            }
            for w in 0..cell.watchers {
                watchers.spawn(watch_etcd(
                    connections[w / cell.per_connection].clone(),
                    prefix.clone().into_bytes(),
                    revision + 1,
                    stopping.clone(),
                    received.clone(),
                ));
            }
            Ok(Writer::Etcd { clients, prefix })
        }
    }
}

/// Runs one cell against `target`, whose server processes (with their descendants) are
/// `servers`.
pub async fn run_cell(
    target: Target<'_>,
    servers: &[u32],
    cell: WatchCell,
    tag: &str,
) -> anyhow::Result<WatchResult> {
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let received = Arc::new(AtomicU64::new(0));
    let mut watchers = JoinSet::new();
    let writer = open_cell(target, cell, tag, &stopping, &received, &mut watchers).await?;
    // Give the watches time to be established before the first write.
    tokio::time::sleep(Duration::from_millis(500 + cell.watchers as u64)).await;

    let total = (f64::from(cell.rate) * cell.duration.as_secs_f64()).round() as usize;
    let acks: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; total]));
    let errors = Arc::new(AtomicU64::new(0));
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let value = "v".repeat(cell.value_size);
    let mut writes = JoinSet::new();
    let cpu_before = (crate::cpu::tree_seconds(servers), crate::cpu::own_seconds());
    let start = Instant::now();
    let period = Duration::from_secs_f64(1.0 / f64::from(cell.rate.max(1)));
    for seq in 0..total {
        tokio::time::sleep_until((start + period * seq as u32).into()).await;
        let permit = slots.clone().acquire_owned().await?;
        let body = serde_json::json!({"metadata": {"name": object_name(seq)}, "data": {"v": value}});
        let body = serde_json::to_vec(&body)?;
        let write = writer.prepare(seq, body);
        let (acks, errors) = (acks.clone(), errors.clone());
        writes.spawn(async move {
            if write.send().await {
                let now = Instant::now();
                if let Ok(mut a) = acks.lock() {
                    a[seq] = Some(now);
                }
            } else {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            drop(permit);
        });
    }
    while writes.join_next().await.is_some() {}
    let elapsed = start.elapsed();
    let acks = acks.lock().map(|a| a.clone()).unwrap_or_default();
    let acknowledged = acks.iter().filter(|a| a.is_some()).count() as u64;

    // Let the watchers catch up, then stop them.
    let expected = acknowledged * cell.watchers as u64;
    let deadline = Instant::now() + DRAIN;
    while received.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let per_write = |seconds: f64| (acknowledged > 0).then(|| seconds * 1000.0 / acknowledged as f64);
    let server_cpu_ms_per_write = per_write(crate::cpu::tree_seconds(servers) - cpu_before.0);
    let client_cpu_ms_per_write = per_write(crate::cpu::own_seconds() - cpu_before.1);
    let _ = stop.send(true);
    let mut hist: Histogram<u64> = new_histogram()?;
    let mut events = 0u64;
    while let Some(joined) = watchers.join_next().await {
        let arrivals = joined.context("a watcher panicked")??;
        for (seq, at) in arrivals {
            if let Some(Some(ack)) = acks.get(seq) {
                let us = at.saturating_duration_since(*ack).as_micros();
                hist.saturating_record(u64::try_from(us).unwrap_or(u64::MAX).max(1));
                events += 1;
            }
        }
    }
    let ms = |q: f64| (!hist.is_empty()).then(|| hist.value_at_quantile(q) as f64 / 1000.0);
    Ok(WatchResult {
        system: target.name(),
        watchers: cell.watchers,
        per_connection: cell.per_connection,
        rate: cell.rate,
        writes_per_sec: acknowledged as f64 / elapsed.as_secs_f64(),
        events,
        missing: expected.saturating_sub(events),
        write_errors: errors.load(Ordering::Relaxed),
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        max_ms: (!hist.is_empty()).then(|| hist.max() as f64 / 1000.0),
        server_cpu_ms_per_write,
        client_cpu_ms_per_write,
    })
}

/// The results as a markdown table.
pub fn markdown(results: &[WatchResult]) -> String {
    let mut out = String::from(
        "| system | watchers | per connection | target writes/s | achieved writes/s | events delivered | missing | p50 ms | p99 ms | max ms | server CPU ms/write | client CPU ms/write |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in results {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.system,
            r.watchers,
            r.per_connection,
            r.rate,
            fmt_rate(Some(r.writes_per_sec)),
            r.events,
            r.missing,
            fmt_ms(r.p50_ms),
            fmt_ms(r.p99_ms),
            fmt_ms(r.max_ms),
            fmt_ms(r.server_cpu_ms_per_write),
            fmt_ms(r.client_cpu_ms_per_write),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lines_name_their_write() {
        let line = br#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","data":{"v":"vv"},"metadata":{"name":"w-42","namespace":"watch-a"}}}"#;
        assert_eq!(seq_of(line), Some(42));
        assert_eq!(seq_of(br#"{"type":"BOOKMARK","object":{"metadata":{}}}"#), None);
        assert_eq!(seq_of(object_name(7).as_bytes()), None);
        assert_eq!(seq_of_key(b"/bench/watch-w1-r100-0/w-17"), Some(17));
        assert_eq!(seq_of_key(b"/bench/watch-w1-r100-0/other"), None);
    }

    #[test]
    fn chunks_split_anywhere_yield_each_event_once() {
        let stream: Vec<u8> = (0..50)
            .flat_map(|i| {
                format!("{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"w-{i}\"}}}}}}\n")
                    .into_bytes()
            })
            .collect();
        let now = Instant::now();
        for size in [1, 7, 64, stream.len()] {
            let (mut partial, mut arrivals, mut taken) = (Vec::new(), Vec::new(), 0);
            for piece in stream.chunks(size) {
                taken += take_lines(&mut partial, piece, now, &mut arrivals);
            }
            assert!(partial.is_empty());
            assert_eq!(taken, 50);
            let seqs: Vec<usize> = arrivals.iter().map(|(s, _)| *s).collect();
            assert_eq!(seqs, (0..50).collect::<Vec<_>>(), "chunks of {size} bytes");
        }
    }
}
