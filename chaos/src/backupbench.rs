//! `kuberaft-bench backup`: what an online backup costs the replica that takes it.
//!
//! One local three-replica kuberaft cluster, preloaded with keys; for each operation, closed-loop
//! clients over all replicas run twice per run, side by side: once as a baseline, once while
//! replica 1 streams backups back to back through its admin service (`Kv.Snapshot`, what
//! `kuberaft snapshot save` calls), each read to the end and discarded. The table compares
//! throughput and latency of the two phases (medians over the runs) and reports how long a
//! backup took and how big it was.

use std::time::{Duration, Instant};

use kuberaft_proto::kv_client::KvClient;
use kuberaft_proto::SnapshotRequest;
use tokio::sync::watch;

use crate::client::{self, Client, Tls};
use crate::report::median;
use crate::workload::{self, CellSpec, Op, RunStats};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BackupBench {
    /// Operations to run in each phase.
    pub ops: Vec<Op>,
    /// Closed-loop clients.
    pub concurrency: usize,
    /// Measured seconds per phase.
    pub duration: Duration,
    /// Runs; medians are reported.
    pub runs: usize,
    /// Size of written and preloaded values.
    pub value_size: usize,
    /// Keys preloaded before the first run (the backup's size).
    pub preload_keys: u64,
}

/// The backups taken during one phase.
#[derive(Debug, Clone, Default)]
struct Backups {
    count: u64,
    bytes: u64,
    seconds: Vec<f64>,
}

/// Streams backups from `peer_addr` until `stop`, returning what they took.
async fn back_up(
    peer_addr: String,
    tls: Option<Tls>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<Backups> {
    let channel = client::connect(&peer_addr, tls.as_ref()).await?;
    let mut kv = KvClient::new(channel);
    let mut done = Backups::default();
    while !*stop.borrow() {
        let started = Instant::now();
        let mut stream = kv.snapshot(SnapshotRequest {}).await?.into_inner();
        let mut bytes = 0u64;
        loop {
            tokio::select! {
                chunk = stream.message() => match chunk? {
                    Some(c) => bytes += c.data.len() as u64,
                    None => break,
                },
                _ = stop.wait_for(|s| *s) => return Ok(done),
            }
        }
        done.count += 1;
        done.bytes = bytes;
        done.seconds.push(started.elapsed().as_secs_f64());
    }
    Ok(done)
}

/// One row of the result: an operation in one phase, medians over the runs.
#[derive(Debug, Clone)]
pub struct Row {
    /// The operation.
    pub op: Op,
    /// Whether backups ran meanwhile.
    pub with_backups: bool,
    /// Median throughput.
    pub ops_per_sec: f64,
    /// Median p50, p99 and max latency in milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// See `p50_ms`.
    pub max_ms: f64,
    /// Failed operations, summed over the runs.
    pub errors: u64,
    /// Backups completed, summed over the runs.
    pub backups: u64,
    /// Median time of one backup in seconds.
    pub backup_seconds: Option<f64>,
    /// Size of the last backup in bytes.
    pub backup_bytes: u64,
}

/// Preloads the cluster behind `clients`, then runs every operation without and with backups
/// streamed from the admin service at `backup_from`; returns one row per operation and phase.
pub async fn run(
    bench: &BackupBench,
    clients: &[Client],
    backup_from: &str,
    tls: Option<&Tls>,
) -> anyhow::Result<Vec<Row>> {
    eprintln!(
        "preloading {} keys of {} bytes",
        bench.preload_keys, bench.value_size
    );
    workload::preload(clients, bench.value_size, bench.preload_keys).await?;
    let mut rows = Vec::new();
    for &op in &bench.ops {
        for with_backups in [false, true] {
            let mut stats: Vec<RunStats> = Vec::new();
            let mut backups = Backups::default();
            for run in 0..bench.runs {
                let spec = CellSpec {
                    op,
                    concurrency: bench.concurrency,
                    warmup: Duration::from_secs(1),
                    duration: bench.duration,
                    value_size: bench.value_size,
                    tag: format!("backup-{}-{with_backups}-{run}", op.name()),
                    preload_keys: bench.preload_keys,
                };
                let (stop_tx, stop_rx) = watch::channel(false);
                let taker = with_backups
                    .then(|| tokio::spawn(back_up(backup_from.to_string(), tls.cloned(), stop_rx)));
                let s = workload::run_cell(clients, &spec).await?;
                let _ = stop_tx.send(true);
                if let Some(t) = taker {
                    let b = t.await??;
                    backups.count += b.count;
                    backups.bytes = b.bytes.max(backups.bytes);
                    backups.seconds.extend(b.seconds);
                }
                eprintln!(
                    "{} {}: {:.0} ops/s, p99 {:.2} ms, max {:.2} ms",
                    op.name(),
                    if with_backups { "with backups" } else { "baseline" },
                    s.ops_per_sec,
                    s.p99_ms.unwrap_or(f64::NAN),
                    s.max_ms.unwrap_or(f64::NAN)
                );
                stats.push(s);
            }
            let med =
                |f: fn(&RunStats) -> Option<f64>| median(stats.iter().filter_map(f)).unwrap_or(f64::NAN);
            rows.push(Row {
                op,
                with_backups,
                ops_per_sec: med(|s| Some(s.ops_per_sec)),
                p50_ms: med(|s| s.p50_ms),
                p99_ms: med(|s| s.p99_ms),
                max_ms: med(|s| s.max_ms),
                errors: stats.iter().map(|s| s.errors).sum(),
                backups: backups.count,
                backup_seconds: median(backups.seconds.iter().copied()),
                backup_bytes: backups.bytes,
            });
        }
    }
    Ok(rows)
}

/// The rows as a markdown table, each phase with backups next to its baseline as ratios.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| operation | phase | ops/s | p50 ms | p99 ms | max ms | errors | backups (median time, size) | ops/s ratio | p99 ratio |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in rows {
        let base = rows.iter().find(|b| b.op == r.op && !b.with_backups);
        let ratio = |f: fn(&Row) -> f64| base.map_or(String::new(), |b| format!("{:.2}", f(r) / f(b)));
        let backups = match r.backup_seconds {
            Some(s) => format!("{} ({s:.2} s, {:.1} MB)", r.backups, r.backup_bytes as f64 / 1e6),
            None => "-".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {backups} | {} | {} |\n",
            r.op.name(),
            if r.with_backups {
                "with backups"
            } else {
                "baseline"
            },
            r.ops_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.errors,
            ratio(|x| x.ops_per_sec),
            ratio(|x| x.p99_ms),
        ));
    }
    out
}
