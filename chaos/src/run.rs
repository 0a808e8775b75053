//! One chaos run from start to verdict: start the cluster, create the workloads' objects, run
//! the clients and the fault schedule for the duration, heal, read the final state, check the
//! history and write the report.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::api::{self, ApiClient, ApiError};
use crate::checkers::{self, Reference, Violation};
use crate::faults::{self, FaultKind, Schedule};
use crate::harness::{ChaosCluster, ClusterSpec, HarnessError, RaftTiming};
use crate::history::{Call, Clock, Outcome, Recorder, RegisterOp, RegisterRecord};
use crate::verdict::{self, Counts, ReportError, Verdict};
use crate::workload::XorShift;
use crate::workloads::{self, register, watcher, Ctx};

/// How long one API request may take before its outcome counts as unknown.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the cluster may take to start, or to serve and converge after healing.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Clients per register.
const CLIENTS_PER_REGISTER: usize = 3;
/// Churn clients.
const CHURN_CLIENTS: usize = 2;
/// Lease candidates.
const CANDIDATES: usize = 3;
/// How long the clients keep going after the last fault was healed.
const TAIL: Duration = Duration::from_secs(3);

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Seeds the fault schedule and every client's choices.
    pub seed: u64,
    /// Length of the workload phase.
    pub duration: Duration,
    /// Replicas.
    pub nodes: usize,
    /// Fault kinds to draw from (empty: no faults).
    pub faults: Vec<FaultKind>,
    /// Report directory (also holds the cluster's configs, data and logs under `cluster/`).
    pub out: PathBuf,
    /// The `kuberaft` binary.
    pub bin: PathBuf,
    /// First loopback port of the cluster.
    pub base_port: u16,
    /// Number of CAS registers.
    pub registers: usize,
    /// Keep the replicas' data directories after the run.
    pub keep_data: bool,
    /// Raft timing for the replicas (`None`: kuberaft's defaults).
    pub raft_timing: Option<RaftTiming>,
    /// `raft.peerRttMillis` for the replicas.
    pub peer_rtt_ms: Option<u64>,
    /// A fixed delay (and no loss) for every `netem` fault instead of a random one.
    pub netem_delay_ms: Option<u64>,
}

/// Why a run could not produce a verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The cluster could not be started or driven.
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// The workloads' setup failed.
    #[error("setup: {0}")]
    Setup(#[from] ApiError),
    /// The final state could not be read.
    #[error("reading the final state: {0}")]
    Final(String),
    /// The report could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Retries `f` until it succeeds or `timeout` passes.
async fn retry<T, F, Fut>(timeout: Duration, mut f: F) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The whole chaos namespace's ConfigMaps (all pages) and the list's resourceVersion.
async fn full_list(client: &ApiClient) -> Result<(u64, BTreeMap<String, (u64, String)>), ApiError> {
    let mut state = BTreeMap::new();
    let mut token = String::new();
    loop {
        let page = client.list_configmaps(500, &token).await?;
        for o in &page.items {
            state.insert(api::name(o), (api::resource_version(o), watcher::content(o)));
        }
        if page.continue_token.is_empty() {
            return Ok((page.resource_version.parse().unwrap_or(0), state));
        }
        token = page.continue_token;
    }
}

/// Every ConfigMap event after `from`, from one uninterrupted watch that the server ends
/// after a few quiet seconds (the workloads have stopped, so nothing newer is missed; the
/// replay check against the final list proves it complete).
async fn reference_events(client: &ApiClient, from: u64) -> Result<Vec<crate::history::WatchEvent>, String> {
    let mut stream = client
        .watch_configmaps(Some(&from.to_string()), 3)
        .await
        .map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    while let Some(line) = stream.next_event().await.map_err(|e| e.to_string())? {
        let e = watcher::parse_event(&line)?;
        if e.kind != "BOOKMARK" {
            events.push(e);
        }
    }
    Ok(events)
}

/// Runs the whole experiment and returns the verdict (also written to `out`).
pub async fn run(cfg: RunConfig) -> Result<Verdict, RunError> {
    // Absolute, because the replicas' configs name their files from it and the replicas read
    // those names relative to the config file, not to this process's directory.
    let cluster_dir = std::path::absolute(cfg.out.join("cluster")).map_err(|source| HarnessError::Io {
        what: format!("cannot resolve {}", cfg.out.display()),
        source,
    })?;
    if cluster_dir.exists() {
        std::fs::remove_dir_all(&cluster_dir).map_err(|source| HarnessError::Io {
            what: format!("cannot clear {}", cluster_dir.display()),
            source,
        })?;
    }
    let spec = ClusterSpec {
        bin: cfg.bin.clone(),
        nodes: cfg.nodes,
        base_port: cfg.base_port,
        dir: cluster_dir.clone(),
        seed: cfg.seed,
        raft_timing: cfg.raft_timing,
        peer_rtt_ms: cfg.peer_rtt_ms,
    };
    let mut cluster = ChaosCluster::start(spec, SETTLE_TIMEOUT).await?;
    let result = drive(&cfg, &mut cluster).await;
    cluster.teardown();
    if !cfg.keep_data {
        for i in 1..=cfg.nodes {
            let _ = std::fs::remove_dir_all(cluster_dir.join(format!("data-{i}")));
        }
    }
    result
}

/// The part of a run that needs the cluster up.
async fn drive(cfg: &RunConfig, cluster: &mut ChaosCluster) -> Result<Verdict, RunError> {
    let clients: Vec<ApiClient> = (0..cluster.len())
        .map(|i| ApiClient::new(i, cluster.api_addr(i), REQUEST_TIMEOUT, cluster.tls()))
        .collect::<Result<_, _>>()?;
    let first = clients[0].clone();
    retry(SETTLE_TIMEOUT, || first.ensure_namespace()).await?;
    retry(SETTLE_TIMEOUT, || register::create(&first, cfg.registers)).await?;
    let (start_rv, initial) = retry(SETTLE_TIMEOUT, || full_list(&first)).await?;

    let clock = Clock::start();
    let recorder = Recorder::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let base = Ctx {
        clients: clients.clone(),
        clock,
        recorder: recorder.clone(),
        stop: stop_rx.clone(),
        rng: XorShift::new(cfg.seed),
    };
    let mut tasks = JoinSet::new();
    let mut salt = 0u64;
    let mut fork = || {
        salt += 1;
        base.fork(salt)
    };
    for k in 0..cfg.registers {
        for c in 0..CLIENTS_PER_REGISTER {
            tasks.spawn(register::run(
                fork(),
                format!("r{k}c{c}"),
                register::register_name(k),
            ));
        }
    }
    for c in 0..CHURN_CLIENTS {
        tasks.spawn(workloads::churn::run(fork(), format!("churn{c}")));
    }
    for c in 0..CANDIDATES {
        tasks.spawn(workloads::lease::run(fork(), format!("candidate-{c}"), c));
    }
    for i in 0..cluster.len() {
        tasks.spawn(watcher::run(fork(), format!("watcher-{}", i + 1), i, start_rv));
    }
    tasks.spawn(workloads::lister::run(fork(), "lister".into()));
    tasks.spawn(watcher::run_initial(fork()));

    // The fault schedule ends after the duration (a fault in progress is completed and healed);
    // the clients go on a little longer, so the recovery from the last fault is measured too.
    let (faults_stop_tx, faults_stop_rx) = watch::channel(false);
    let duration = cfg.duration;
    let timer = tokio::spawn(async move {
        tokio::time::sleep(duration).await;
        let _ = faults_stop_tx.send(true);
    });
    let mut schedule = Schedule::new(cfg.seed, cfg.faults.clone());
    if let Some(ms) = cfg.netem_delay_ms {
        schedule = schedule.with_netem_delay(ms);
    }
    let injected = faults::inject(cluster, schedule, clock, recorder.clone(), faults_stop_rx).await;
    let _ = timer.await;
    cluster.links.heal_all();
    tokio::time::sleep(TAIL).await;
    let _ = stop_tx.send(true);
    while tasks.join_next().await.is_some() {}
    injected?;
    let workload_end = clock.now();
    let mut violations: Vec<Violation> = Vec::new();
    for crash in cluster.exited() {
        violations.push(Violation {
            checker: "crash",
            summary: "a replica stopped without a fault stopping it".into(),
            detail: crash.lines().map(str::to_string).collect(),
        });
    }
    cluster.wait_serving(SETTLE_TIMEOUT).await?;

    let converged = match cluster.wait_converged(SETTLE_TIMEOUT).await {
        Ok(c) => Some(c),
        Err(e) => {
            violations.push(Violation {
                checker: "convergence",
                summary: "replicas did not converge on one revision and state hash after healing".into(),
                // Every replica's log tail: the one that failed is not always the first.
                detail: e.to_string().lines().map(str::to_string).collect(),
            });
            None
        }
    };
    final_reads(&first, cfg.registers, &clock, &recorder).await?;
    let (final_rv, final_state) = retry(SETTLE_TIMEOUT, || full_list(&first))
        .await
        .map_err(|e| RunError::Final(e.to_string()))?;
    let events = reference_events(&first, start_rv)
        .await
        .map_err(RunError::Final)?;
    let reference = Reference {
        start_rv,
        initial,
        events,
        final_revision: converged
            .as_ref()
            .map_or(final_rv, |(r, _)| (*r).max(0) as u64)
            .max(final_rv),
    };

    let history = recorder.snapshot();
    violations.extend(reference.check_final(&final_state));
    let (lin, inconclusive) = checkers::linearizable::check(&history.registers);
    violations.extend(lin);
    violations.extend(checkers::durability::check(&history.churn, &final_state));
    violations.extend(checkers::watch::check(&history.watches, &reference));
    violations.extend(checkers::watch::check_initial(
        &history.initial_watches,
        &reference,
    ));
    violations.extend(checkers::lists::check(&history.lists, &reference));
    violations.extend(checkers::lease::check(&history.leases));
    let (availability, unavailable) =
        checkers::availability::check(&history.write_calls(), &history.faults, workload_end);
    violations.extend(unavailable);

    let timeline = verdict::timeline(&history, workload_end);
    let verdict = Verdict {
        seed: cfg.seed,
        nodes: cfg.nodes,
        duration_s: cfg.duration.as_secs_f64(),
        fault_kinds: cfg.faults.iter().map(|k| k.name().to_string()).collect(),
        passed: violations.is_empty(),
        violations,
        inconclusive_registers: inconclusive,
        faults: history.faults.clone(),
        availability,
        converged,
        counts: Counts::of(&history),
        timeline,
    };
    verdict.write(&cfg.out, &history)?;
    crate::chart::draw(&cfg.out.join("chart.svg"), &verdict.timeline, &verdict.faults)?;
    Ok(verdict)
}

/// Reads every register once more after healing; the reads join the registers' histories, so
/// a lost acknowledged write shows as a linearizability violation.
async fn final_reads(
    client: &ApiClient,
    registers: usize,
    clock: &Clock,
    recorder: &Recorder,
) -> Result<(), RunError> {
    for k in 0..registers {
        let key = register::register_name(k);
        let start = clock.now();
        let obj = retry(SETTLE_TIMEOUT, || client.get_configmap(&key))
            .await
            .map_err(|e| RunError::Final(format!("{key}: {e}")))?;
        let value = obj
            .as_ref()
            .and_then(|o| o["data"]["value"].as_str())
            .map(str::to_string);
        let call = Call {
            replica: client.replica,
            start,
            end: clock.now(),
            outcome: Outcome::Ok,
            error: None,
            unavailable: false,
            write: false,
        };
        recorder.lock().registers.push(RegisterRecord {
            client: "final".into(),
            op: RegisterOp::Read { key, value },
            call,
        });
    }
    Ok(())
}
