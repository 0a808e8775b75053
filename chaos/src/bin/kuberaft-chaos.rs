//! `kuberaft-chaos`: runs a kuberaft cluster under a seeded schedule of faults with real API
//! clients, checks what they saw, and exits non-zero on any violation, printing the seed and
//! the history that shows it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use kuberaft_chaos::client::System;
use kuberaft_chaos::cluster::{shutdown_signal, EtcdCluster, Ports};
use kuberaft_chaos::failover::{self, Subject};
use kuberaft_chaos::faults::FaultKind;
use kuberaft_chaos::harness::{ChaosCluster, ClusterSpec, RaftTiming};
use kuberaft_chaos::report::median;
use kuberaft_chaos::run::{self, RunConfig};

/// Fault injection that proves kuberaft's guarantees.
#[derive(Debug, Parser)]
#[command(name = "kuberaft-chaos", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Run one seeded experiment and check it.
    Run(RunArgs),
    /// Measure leader failover (kill -9 of the leader until the first successful write) on
    /// kuberaft or etcd, driven identically through their KV gRPC services.
    Failover(FailoverArgs),
}

/// Options of `kuberaft-chaos failover`.
#[derive(Debug, clap::Args)]
struct FailoverArgs {
    /// The system to measure.
    #[arg(long, value_enum, default_value = "kuberaft")]
    system: System,
    /// Rounds: how many times the leader is taken down.
    #[arg(long, default_value_t = 10)]
    kills: usize,
    /// How the leader is taken down: `kill` (SIGKILL, a crash) or `term` (SIGTERM, a graceful
    /// stop that hands leadership over).
    #[arg(long, value_enum, default_value = "kill")]
    stop: failover::Stop,
    /// First loopback port the cluster uses.
    #[arg(long, default_value_t = 24100)]
    base_port: u16,
    /// Raft timing `HEARTBEAT,MIN,MAX` for kuberaft (as for `run`).
    #[arg(long)]
    raft_timing: Option<RaftTiming>,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    kuberaft_bin: Option<PathBuf>,
    /// The etcd binary.
    #[arg(long, default_value = "/usr/bin/etcd")]
    etcd_bin: PathBuf,
    /// Keep kuberaft's configs, data and logs in this directory (default: a temporary one,
    /// removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
}

/// Options of `kuberaft-chaos run`.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Seed of the fault schedule and the clients' choices; a failure replays with it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Length of the workload phase (e.g. `60s`, `2m`, `90`).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// Replicas (3 or 5 are the interesting sizes).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Fault kinds to draw from, comma-separated: kill, pause, partition, netem, restart,
    /// transfer, replace (`none` for a fault-free baseline).
    #[arg(long, default_value = "kill,pause,partition,netem,restart,transfer,replace", value_parser = parse_faults)]
    faults: FaultList,
    /// Directory for the report (result.json, summary.md, chart.svg, history.json) and the
    /// cluster's configs and logs.
    #[arg(long, default_value = "chaos-out")]
    out: PathBuf,
    /// CAS registers (three clients each).
    #[arg(long, default_value_t = 4)]
    registers: usize,
    /// First of 30 loopback ports the cluster uses.
    #[arg(long, default_value_t = 24000)]
    base_port: u16,
    /// The kuberaft binary [default: `kuberaft` next to this executable].
    #[arg(long)]
    kuberaft_bin: Option<PathBuf>,
    /// Keep the replicas' data directories.
    #[arg(long)]
    keep_data: bool,
    /// Raft timing `HEARTBEAT,MIN,MAX` in milliseconds (heartbeat, election timeout range)
    /// instead of kuberaft's defaults (100,400,600), to compare failover times.
    #[arg(long)]
    raft_timing: Option<RaftTiming>,
    /// `raft.peerRttMillis` for every replica: the worst peer round trip (as across zones).
    #[arg(long)]
    peer_rtt_ms: Option<u64>,
    /// Make every `netem` fault this one-way delay on every peer link, without loss (instead of
    /// a random 20–200 ms with 0/1/5 % loss).
    #[arg(long)]
    netem_delay_ms: Option<u64>,
}

/// A parsed `--faults` list.
#[derive(Debug, Clone)]
struct FaultList(Vec<FaultKind>);

fn parse_faults(s: &str) -> Result<FaultList, String> {
    if s.trim() == "none" {
        return Ok(FaultList(Vec::new()));
    }
    let mut kinds = Vec::new();
    for part in s.split(',') {
        let k: FaultKind = part.parse()?;
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    Ok(FaultList(kinds))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("bad duration unit in {s:?} (use s, m or h)")),
    };
    if secs == 0 {
        return Err("the duration must be positive".into());
    }
    Ok(Duration::from_secs(secs))
}

/// The kuberaft binary: `given`, or `kuberaft` next to this executable.
fn kuberaft_bin(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let bin = match given {
        Some(b) => b,
        None => std::env::current_exe()
            .context("cannot locate this executable")?
            .with_file_name("kuberaft"),
    };
    if !bin.is_file() {
        bail!(
            "kuberaft binary {} not found; build it or pass --kuberaft-bin",
            bin.display()
        );
    }
    Ok(bin)
}

/// `kuberaft-chaos failover`: prints each outage and their median.
async fn failover(args: FailoverArgs) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir().context("cannot create a scratch directory")?;
    let mut subject = match args.system {
        System::Etcd => {
            Subject::Etcd(EtcdCluster::start(&args.etcd_bin, Ports::new(args.base_port)?, false).await?)
        }
        System::Kuberaft => {
            let spec = ClusterSpec {
                bin: kuberaft_bin(args.kuberaft_bin)?,
                nodes: 3,
                base_port: args.base_port,
                dir: args.dir.clone().unwrap_or_else(|| scratch.path().to_path_buf()),
                seed: 0,
                raft_timing: args.raft_timing,
                peer_rtt_ms: None,
            };
            Subject::Kuberaft(ChaosCluster::start(spec, Duration::from_secs(90)).await?)
        }
    };
    let rounds = failover::measure(&mut subject, args.kills, args.stop).await?;
    let outages: Vec<f64> = rounds.iter().map(|r| r.outage).collect();
    let failed: u64 = rounds.iter().map(|r| r.failed).sum();
    let mut sorted = outages.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "{}: {} leader {}, write outage median {:.2} s, min {:.2} s, max {:.2} s ({}), {failed} failed puts",
        args.system,
        outages.len(),
        match args.stop {
            failover::Stop::Kill => "kills",
            failover::Stop::Term => "graceful stops",
        },
        median(outages.iter().copied()).unwrap_or(f64::NAN),
        sorted.first().copied().unwrap_or(f64::NAN),
        sorted.last().copied().unwrap_or(f64::NAN),
        outages
            .iter()
            .map(|o| format!("{o:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Stopping waits for the processes: off the async runtime.
    tokio::task::spawn_blocking(move || drop(subject)).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = match Cli::parse().command {
        Command::Run(args) => args,
        Command::Failover(args) => {
            return tokio::select! {
                r = failover(args) => r,
                r = shutdown_signal() => {
                    r.context("cannot watch Ctrl-C or SIGTERM")?;
                    bail!("interrupted; the cluster was stopped");
                }
            };
        }
    };
    let bin = kuberaft_bin(args.kuberaft_bin)?;
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let cfg = RunConfig {
        seed: args.seed,
        duration: args.duration,
        nodes: args.nodes,
        faults: args.faults.0,
        out: args.out.clone(),
        bin,
        base_port: args.base_port,
        registers: args.registers,
        keep_data: args.keep_data,
        raft_timing: args.raft_timing,
        peer_rtt_ms: args.peer_rtt_ms,
        netem_delay_ms: args.netem_delay_ms,
    };
    eprintln!(
        "kuberaft-chaos: seed {}, {} replicas, {:?}, report in {}",
        cfg.seed,
        cfg.nodes,
        cfg.duration,
        args.out.display()
    );
    // On a signal the run future is dropped, and with it the cluster, whose guard kills every
    // replica and stops the proxies.
    let verdict = tokio::select! {
        r = run::run(cfg) => r.context("the chaos run failed")?,
        r = shutdown_signal() => {
            r.context("cannot watch Ctrl-C or SIGTERM")?;
            bail!("interrupted; the cluster was stopped");
        }
    };
    print!("{}", verdict.markdown());
    if !verdict.passed {
        bail!(
            "{} violation(s) with seed {}; replay with `kuberaft-chaos run --seed {}` (history in {})",
            verdict.violations.len(),
            verdict.seed,
            verdict.seed,
            args.out.join("history.json").display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_fault_lists_parse() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5x").is_err());
        assert_eq!(
            parse_faults("kill,pause,kill").unwrap().0,
            vec![FaultKind::Kill, FaultKind::Pause]
        );
        assert!(parse_faults("none").unwrap().0.is_empty());
        assert!(parse_faults("kill,flood").is_err());
    }
}
