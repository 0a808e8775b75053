//! Leader failover measured the same way on kuberaft and on etcd: writers put continuously
//! through every member's KV gRPC service; the leader is killed with SIGKILL (or stopped with
//! SIGTERM, when both systems hand leadership over first); the outage is the time from the
//! signal to the completion of the first successful put invoked after it, and every put that
//! fails or times out meanwhile is counted. The member is restarted and the cluster settles
//! before the next round.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::client::{Client, System, Tls};
use crate::cluster::EtcdCluster;
use crate::harness::ChaosCluster;

/// How long one put may take before it counts as failed.
const PUT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long to wait for the first successful write after a kill.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// Quiet time before each kill and after each restart.
const SETTLE: Duration = Duration::from_secs(3);

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    /// No leader was found before a kill.
    #[error("no leader found")]
    NoLeader,
    /// No write succeeded within [`RECOVERY_TIMEOUT`] after a kill.
    #[error("no write succeeded within {RECOVERY_TIMEOUT:?} after kill {0}")]
    NoRecovery(usize),
    /// The cluster could not be driven.
    #[error("{0}")]
    Cluster(String),
}

/// How the leader is taken down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Stop {
    /// SIGKILL: a crash; the others elect a leader after their election timeout.
    Kill,
    /// SIGTERM: a graceful stop, as in a rolling restart (both systems transfer leadership).
    Term,
}

/// What one round measured.
#[derive(Debug, Clone, Copy)]
pub struct Round {
    /// Seconds from the signal to the first successful put invoked after it.
    pub outage: f64,
    /// Puts that failed or timed out from the signal until writes were back.
    pub failed: u64,
}

/// The cluster being measured.
#[derive(Debug)]
pub enum Subject {
    /// A local three-member etcd cluster.
    Etcd(EtcdCluster),
    /// A kuberaft cluster from the chaos harness.
    Kuberaft(ChaosCluster),
}

impl Subject {
    fn system(&self) -> System {
        match self {
            Subject::Etcd(_) => System::Etcd,
            Subject::Kuberaft(_) => System::Kuberaft,
        }
    }

    /// The credentials its KV service wants (kuberaft's admin; etcd runs without TLS).
    fn tls(&self) -> Option<Tls> {
        match self {
            Subject::Etcd(_) => None,
            Subject::Kuberaft(c) => Some(c.tls().clone()),
        }
    }

    fn kv_addrs(&self) -> Vec<String> {
        match self {
            Subject::Etcd(c) => c.addrs.clone(),
            Subject::Kuberaft(c) => (0..c.len()).map(|i| c.peer_addr(i).to_string()).collect(),
        }
    }

    async fn leader(&self) -> Option<usize> {
        match self {
            Subject::Etcd(c) => c.leader().await,
            Subject::Kuberaft(c) => c.leader().await,
        }
    }

    fn kill(&mut self, i: usize) {
        match self {
            Subject::Etcd(c) => c.kill(i),
            Subject::Kuberaft(c) => c.kill(i),
        }
    }

    /// Sends SIGTERM to member `i` without waiting for it to exit.
    fn terminate(&self, i: usize) {
        match self {
            Subject::Etcd(c) => c.terminate(i),
            Subject::Kuberaft(c) => c.terminate(i),
        }
    }

    /// Waits for a terminated member `i` to exit (SIGKILL after a grace period).
    fn reap(&mut self, i: usize) {
        match self {
            Subject::Etcd(c) => c.stop(i),
            Subject::Kuberaft(c) => c.stop(i),
        }
    }

    fn restart(&mut self, i: usize) -> Result<(), FailoverError> {
        match self {
            Subject::Etcd(c) => c.restart(i).map_err(|e| FailoverError::Cluster(format!("{e:#}"))),
            Subject::Kuberaft(c) => c.restart(i).map_err(|e| FailoverError::Cluster(e.to_string())),
        }
    }
}

/// Start times and completion times of successful puts, on one clock.
type Successes = Arc<Mutex<Vec<(Instant, Instant)>>>;
/// When puts failed, on the same clock.
type Failures = Arc<Mutex<Vec<Instant>>>;

/// Puts through `addr` until `stop`, recording every success and the time of every failure.
async fn writer(
    system: System,
    addr: String,
    tls: Option<Tls>,
    ok: Successes,
    failed: Failures,
    mut stop: watch::Receiver<bool>,
) {
    let mut n = 0u64;
    while !*stop.borrow() {
        let Ok(Ok(mut client)) =
            tokio::time::timeout(PUT_TIMEOUT, Client::connect(system, &addr, tls.as_ref())).await
        else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        loop {
            n += 1;
            let start = Instant::now();
            let put = client.put(format!("/failover/{addr}").into_bytes(), n.to_be_bytes().to_vec());
            let done = tokio::select! {
                r = tokio::time::timeout(PUT_TIMEOUT, put) => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            match done {
                Ok(Ok(())) => ok
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((start, Instant::now())),
                // Reconnect after an error: the member may have been restarted.
                _ => {
                    failed
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(Instant::now());
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Takes the leader of `subject` down `kills` times as `how` says and returns each round.
pub async fn measure(subject: &mut Subject, kills: usize, how: Stop) -> Result<Vec<Round>, FailoverError> {
    let ok: Successes = Arc::default();
    let failed: Failures = Arc::default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut writers = JoinSet::new();
    for addr in subject.kv_addrs() {
        writers.spawn(writer(
            subject.system(),
            addr,
            subject.tls(),
            ok.clone(),
            failed.clone(),
            stop_rx.clone(),
        ));
    }
    let mut outages = Vec::new();
    for k in 0..kills {
        tokio::time::sleep(SETTLE).await;
        let leader = subject.leader().await.ok_or(FailoverError::NoLeader)?;
        let t0 = Instant::now();
        match how {
            Stop::Kill => subject.kill(leader),
            Stop::Term => subject.terminate(leader),
        }
        let recovered = loop {
            let first = ok
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(start, _)| *start >= t0)
                .map(|(_, end)| *end)
                .min();
            if let Some(end) = first {
                break end;
            }
            if t0.elapsed() > RECOVERY_TIMEOUT {
                return Err(FailoverError::NoRecovery(k + 1));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let outage = (recovered - t0).as_secs_f64();
        let failures = failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|at| **at >= t0 && **at <= recovered)
            .count() as u64;
        eprintln!(
            "{} round {}: leader {} {}, writes back after {outage:.3} s, {failures} failed puts",
            subject.system(),
            k + 1,
            leader + 1,
            match how {
                Stop::Kill => "killed",
                Stop::Term => "stopped",
            }
        );
        outages.push(Round {
            outage,
            failed: failures,
        });
        if how == Stop::Term {
            subject.reap(leader);
        }
        subject.restart(leader)?;
    }
    let _ = stop_tx.send(true);
    while writers.join_next().await.is_some() {}
    Ok(outages)
}
