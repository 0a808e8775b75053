//! The faults: a seeded schedule of what to break and for how long, and the injector that
//! applies it to a [`ChaosCluster`], heals it, waits until the cluster serves again, and records
//! each fault's window.
//!
//! The same seed gives the same sequence of choices (kinds, targets by role, durations); which
//! replica is leader at a given moment depends on the run, so targets are chosen by role.

use std::str::FromStr;
use std::time::Duration;

use kuberaft_proto::{member_request, MemberRequest};

use crate::harness::{ChaosCluster, HarnessError};
use crate::history::{Clock, FaultWindow, Recorder};
use crate::proxy::LinkState;
use crate::workload::XorShift;
use crate::workloads::sleep_or_cancel;

/// How long the cluster may take to serve again after a fault is healed.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// A kind of fault the schedule can pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultKind {
    /// kill -9 of the leader, a follower or a random replica, then restart.
    Kill,
    /// SIGSTOP of the leader or a random replica, then SIGCONT.
    Pause,
    /// Partitions: isolate the leader, a minority/majority split, or a one-way cut.
    Partition,
    /// Delay and loss on every peer link.
    Netem,
    /// Rolling restart of every replica (graceful stop, start, wait).
    Restart,
    /// Leadership moved to another voter (`kuberaft move-leader`).
    Transfer,
    /// A member replaced as after a dead disk: removed, wiped, joined again with a new id as a
    /// learner, promoted once caught up.
    Replace,
}

impl FaultKind {
    /// Every kind, in flag order.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::Partition,
        FaultKind::Netem,
        FaultKind::Restart,
        FaultKind::Transfer,
        FaultKind::Replace,
    ];

    /// The name used in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Netem => "netem",
            FaultKind::Restart => "restart",
            FaultKind::Transfer => "transfer",
            FaultKind::Replace => "replace",
        }
    }
}

impl FromStr for FaultKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown fault {s:?} (known: kill, pause, partition, netem, restart, transfer, replace)"
                )
            })
    }
}

/// Which replica a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Leader,
    Follower,
    Random(u64),
}

/// One planned fault.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    Kill(Target),
    Pause(Target),
    IsolateLeader,
    Split(u64),
    OneWayFromLeader,
    Netem { delay_ms: u64, loss: f64 },
    RollingRestart,
    MoveLeader,
    Replace(Target),
}

impl Plan {
    fn kind(self) -> FaultKind {
        match self {
            Plan::Kill(_) => FaultKind::Kill,
            Plan::Pause(_) => FaultKind::Pause,
            Plan::IsolateLeader | Plan::Split(_) | Plan::OneWayFromLeader => FaultKind::Partition,
            Plan::Netem { .. } => FaultKind::Netem,
            Plan::RollingRestart => FaultKind::Restart,
            Plan::MoveLeader => FaultKind::Transfer,
            Plan::Replace(_) => FaultKind::Replace,
        }
    }
}

/// The seeded source of plans.
#[derive(Debug)]
pub struct Schedule {
    rng: XorShift,
    kinds: Vec<FaultKind>,
    count: u64,
    netem_delay_ms: Option<u64>,
}

impl Schedule {
    /// A schedule over `kinds` seeded with `seed`.
    pub fn new(seed: u64, kinds: Vec<FaultKind>) -> Self {
        Self {
            rng: XorShift::new(seed ^ 0xFA17),
            kinds,
            count: 0,
            netem_delay_ms: None,
        }
    }

    /// The same schedule with every `netem` fault a fixed one-way `delay_ms` without loss.
    pub fn with_netem_delay(mut self, delay_ms: u64) -> Self {
        self.netem_delay_ms = Some(delay_ms);
        self
    }

    /// The quiet time before the next fault and the fault's duration.
    fn timing(&mut self) -> (Duration, Duration) {
        let quiet = Duration::from_millis(2_000 + self.rng.below(3_000));
        let hold = Duration::from_millis(2_000 + self.rng.below(4_000));
        (quiet, hold)
    }

    /// The next plan. The first faults cycle through the kinds in order, so even a short run
    /// exercises each enabled kind once; later ones are random.
    fn next_plan(&mut self) -> Option<Plan> {
        if self.kinds.is_empty() {
            return None;
        }
        let kind = match self.count < self.kinds.len() as u64 {
            true => self.kinds[self.count as usize],
            false => self.kinds[self.rng.below(self.kinds.len() as u64) as usize],
        };
        self.count += 1;
        let target = |rng: &mut XorShift| match rng.below(3) {
            0 => Target::Leader,
            1 => Target::Follower,
            _ => Target::Random(rng.next_u64()),
        };
        Some(match kind {
            // The first kill always takes the leader: failover is what the outage target measures.
            FaultKind::Kill if self.count <= self.kinds.len() as u64 => Plan::Kill(Target::Leader),
            FaultKind::Kill => Plan::Kill(target(&mut self.rng)),
            FaultKind::Pause => Plan::Pause(if self.rng.below(2) == 0 {
                Target::Leader
            } else {
                Target::Random(self.rng.next_u64())
            }),
            FaultKind::Partition => match self.rng.below(3) {
                0 => Plan::IsolateLeader,
                1 => Plan::Split(self.rng.next_u64()),
                _ => Plan::OneWayFromLeader,
            },
            FaultKind::Netem => {
                let (delay_ms, loss) = (
                    20 + self.rng.below(180),
                    [0.0, 0.01, 0.05][self.rng.below(3) as usize],
                );
                match self.netem_delay_ms {
                    Some(fixed) => Plan::Netem {
                        delay_ms: fixed,
                        loss: 0.0,
                    },
                    None => Plan::Netem { delay_ms, loss },
                }
            }
            FaultKind::Restart => Plan::RollingRestart,
            FaultKind::Transfer => Plan::MoveLeader,
            FaultKind::Replace => Plan::Replace(target(&mut self.rng)),
        })
    }
}

/// Runs the schedule against `cluster` until `stop` fires, recording each fault; leaves the
/// cluster healed, every replica running.
pub async fn inject(
    cluster: &mut ChaosCluster,
    mut schedule: Schedule,
    clock: Clock,
    recorder: Recorder,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), HarnessError> {
    loop {
        let (quiet, hold) = schedule.timing();
        if sleep_or_cancel(quiet, &mut stop).await {
            return Ok(());
        }
        let Some(plan) = schedule.next_plan() else {
            let _ = stop.changed().await;
            return Ok(());
        };
        let leader = cluster.leader().await;
        let start = clock.now();
        let (detail, hit_leader) = apply(cluster, plan, leader, hold, &mut schedule.rng).await?;
        cluster.links.heal_all();
        cluster.wait_serving(RECOVERY_TIMEOUT).await?;
        let end = clock.now();
        let start_utc = clock.utc(start);
        eprintln!(
            "[{start:7.2}s–{end:7.2}s, from {start_utc} UTC] {}: {detail}",
            plan.kind().name()
        );
        recorder.lock().faults.push(FaultWindow {
            kind: plan.kind().name().to_string(),
            detail,
            start,
            end,
            start_utc,
            hit_leader,
        });
    }
}

/// The replica a target names right now.
fn pick(cluster: &ChaosCluster, target: Target, leader: Option<usize>) -> usize {
    let n = cluster.len();
    match (target, leader) {
        (Target::Leader, Some(l)) => l,
        (Target::Follower, Some(l)) => (l + 1) % n,
        (Target::Random(r), _) => (r % n as u64) as usize,
        (_, None) => 0,
    }
}

/// Applies `plan` for `hold` (a rolling restart takes as long as it takes) and undoes it
/// except for the link healing; returns a description and whether it hit the leader.
async fn apply(
    cluster: &mut ChaosCluster,
    plan: Plan,
    leader: Option<usize>,
    hold: Duration,
    rng: &mut XorShift,
) -> Result<(String, bool), HarnessError> {
    let n = cluster.len();
    let name = |i: usize| {
        format!(
            "replica {}{}",
            i + 1,
            if Some(i) == leader { " (leader)" } else { "" }
        )
    };
    Ok(match plan {
        Plan::Kill(t) => {
            let i = pick(cluster, t, leader);
            cluster.kill(i);
            tokio::time::sleep(hold).await;
            cluster.restart(i)?;
            (
                format!("kill -9 {} for {hold:?}, restart", name(i)),
                Some(i) == leader,
            )
        }
        Plan::Pause(t) => {
            let i = pick(cluster, t, leader);
            cluster.pause(i, true);
            tokio::time::sleep(hold).await;
            cluster.pause(i, false);
            (format!("SIGSTOP {} for {hold:?}", name(i)), Some(i) == leader)
        }
        Plan::IsolateLeader => {
            let l = leader.unwrap_or(0);
            for j in (0..n).filter(|&j| j != l) {
                block(cluster, l, j, true);
            }
            tokio::time::sleep(hold).await;
            (format!("isolate {} for {hold:?}", name(l)), true)
        }
        Plan::Split(r) => {
            // A random minority (at least one replica) against the rest.
            let mut order: Vec<usize> = (0..n).collect();
            let mut local = XorShift::new(r);
            for k in (1..n).rev() {
                order.swap(k, local.below(k as u64 + 1) as usize);
            }
            let mut minority = order[..((n - 1) / 2).max(1)].to_vec();
            minority.sort_unstable();
            for &a in &minority {
                for b in (0..n).filter(|b| !minority.contains(b)) {
                    block(cluster, a, b, true);
                }
            }
            tokio::time::sleep(hold).await;
            let shown: Vec<usize> = minority.iter().map(|i| i + 1).collect();
            (
                format!("partition minority {shown:?} from the rest for {hold:?}"),
                leader.is_some_and(|l| minority.contains(&l)),
            )
        }
        Plan::OneWayFromLeader => {
            let l = leader.unwrap_or(0);
            for j in (0..n).filter(|&j| j != l) {
                block(cluster, l, j, false);
            }
            tokio::time::sleep(hold).await;
            (
                format!("one-way cut: {} cannot send to anyone for {hold:?}", name(l)),
                true,
            )
        }
        Plan::Netem { delay_ms, loss } => {
            let link = LinkState {
                blocked: false,
                delay: Duration::from_millis(delay_ms),
                loss,
            };
            for a in 0..n {
                for b in (0..n).filter(|&b| b != a) {
                    cluster.links.set(a, b, link);
                }
            }
            tokio::time::sleep(hold).await;
            (
                format!(
                    "delay {delay_ms} ms, loss {:.0}% on every peer link for {hold:?}",
                    loss * 100.0
                ),
                false,
            )
        }
        Plan::RollingRestart => {
            let mut order: Vec<usize> = (0..n).collect();
            order.rotate_left(rng.below(n as u64) as usize);
            for &i in &order {
                cluster.stop(i);
                cluster.restart(i)?;
                cluster.wait_serving(RECOVERY_TIMEOUT).await?;
            }
            let shown: Vec<usize> = order.iter().map(|i| i + 1).collect();
            (format!("rolling restart in order {shown:?}"), true)
        }
        Plan::MoveLeader => {
            let via = rng.below(n as u64) as usize;
            let req = MemberRequest {
                op: member_request::Op::MoveLeader as i32,
                ..Default::default()
            };
            let outcome = match cluster.members(via, req).await {
                Ok(r) => format!("now led by node {}", r.leader_id),
                // A transfer can be refused (e.g. the target did not catch up in time); the
                // leader then leads on, which is a valid outcome too.
                Err(e) => format!("refused: {e}"),
            };
            (
                format!("move-leader through replica {}: {outcome}", via + 1),
                true,
            )
        }
        Plan::Replace(t) => {
            let i = pick(cluster, t, leader);
            let (old, new) = cluster.replace(i, RECOVERY_TIMEOUT).await?;
            (
                format!(
                    "replace {}: node {old} removed and wiped, node {new} joined and promoted",
                    name(i)
                ),
                Some(i) == leader,
            )
        }
    })
}

/// Blocks `a → b` and, if `both`, `b → a`.
fn block(cluster: &ChaosCluster, a: usize, b: usize, both: bool) {
    let cut = LinkState {
        blocked: true,
        ..Default::default()
    };
    cluster.links.set(a, b, cut);
    if both {
        cluster.links.set(b, a, cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_each_kind_comes_first() {
        let plans = |seed| {
            let mut s = Schedule::new(seed, FaultKind::ALL.to_vec());
            (0..20).map(|_| (s.timing(), s.next_plan())).collect::<Vec<_>>()
        };
        assert_eq!(plans(7), plans(7));
        assert_ne!(plans(7), plans(8));
        let first: Vec<FaultKind> = plans(7)[..FaultKind::ALL.len()]
            .iter()
            .filter_map(|(_, p)| p.map(Plan::kind))
            .collect();
        assert_eq!(first, FaultKind::ALL.to_vec());
        assert_eq!(plans(7)[0].1, Some(Plan::Kill(Target::Leader)));
    }

    #[test]
    fn fault_names_parse() {
        assert_eq!("pause".parse::<FaultKind>(), Ok(FaultKind::Pause));
        assert!("flood".parse::<FaultKind>().is_err());
    }
}
