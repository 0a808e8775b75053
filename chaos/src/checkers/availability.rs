//! Availability: the longest stretch without a successful write, the time from each fault to
//! the first successful write invoked after it, and failures that count against the cluster:
//! a write answered with 5xx or not answered, while no fault was active (each fault window is
//! extended by [`GRACE`] for clients to notice the healed cluster).

use serde::Serialize;

use crate::checkers::Violation;
use crate::history::{Call, FaultWindow, Outcome};
use crate::report::median;

/// Slack after a fault's end during which failures still count as the fault's.
pub const GRACE: f64 = 3.0;

/// Availability figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Availability {
    /// Longest time between two successful write completions (seconds).
    pub longest_outage_s: f64,
    /// When it started.
    pub longest_outage_at: f64,
    /// Per fault (in order): seconds from its start to the first successful write invoked
    /// after it completed; `None` if none did.
    pub recovery_s: Vec<Option<f64>>,
    /// Median recovery after kills of the leader.
    pub leader_kill_median_s: Option<f64>,
    /// Successful writes.
    pub ok_writes: usize,
    /// Writes answered with 5xx or not at all (rejections such as 409 are answers).
    pub failed_writes: usize,
}

/// Whether `t` lies in a fault window (with grace).
fn in_fault(faults: &[FaultWindow], start: f64, end: f64) -> bool {
    faults.iter().any(|f| start <= f.end + GRACE && end >= f.start)
}

/// Computes the figures and the violations over the write calls (sorted by start).
pub fn check(writes: &[&Call], faults: &[FaultWindow], until: f64) -> (Availability, Vec<Violation>) {
    let mut ends: Vec<f64> = writes
        .iter()
        .filter(|c| c.outcome == Outcome::Ok)
        .map(|c| c.end)
        .collect();
    ends.sort_by(f64::total_cmp);
    let (mut longest, mut at) = (0.0, 0.0);
    let first = ends.first().copied().unwrap_or(0.0);
    for w in ends
        .windows(2)
        .map(|w| (w[0], w[1]))
        .chain(ends.last().map(|&l| (l, until.max(l))))
    {
        if w.1 - w.0 > longest {
            (longest, at) = (w.1 - w.0, w.0);
        }
    }
    let recovery_s: Vec<Option<f64>> = faults
        .iter()
        .map(|f| {
            writes
                .iter()
                .filter(|c| c.outcome == Outcome::Ok && c.start >= f.start)
                .map(|c| c.end - f.start)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))))
        })
        .collect();
    let leader_kills = faults
        .iter()
        .zip(&recovery_s)
        .filter(|(f, _)| f.kind == "kill" && f.hit_leader)
        .filter_map(|(_, r)| *r);
    let leader_kill_median_s = median(leader_kills);
    let violations: Vec<Violation> = writes
        .iter()
        .filter(|c| c.unavailable && c.start >= first && !in_fault(faults, c.start, c.end))
        .map(|c| Violation {
            checker: "availability",
            summary: format!(
                "write failed outside any fault window at {:.3}s on replica {}",
                c.start,
                c.replica + 1
            ),
            detail: vec![format!(
                "[{:.3}s – {:.3}s] {}",
                c.start,
                c.end,
                c.error.as_deref().unwrap_or("")
            )],
        })
        .collect();
    let availability = Availability {
        longest_outage_s: longest,
        longest_outage_at: at,
        recovery_s,
        leader_kill_median_s,
        ok_writes: ends.len(),
        failed_writes: writes.iter().filter(|c| c.unavailable).count(),
    };
    (availability, violations)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start: f64, end: f64, outcome: Outcome) -> Call {
        Call {
            replica: 0,
            start,
            end,
            outcome,
            error: None,
            unavailable: outcome != Outcome::Ok,
            write: true,
        }
    }

    #[test]
    fn outage_recovery_and_failures_outside_faults() {
        let calls = [
            call(0.0, 0.1, Outcome::Ok),
            call(1.0, 1.1, Outcome::Ok),
            call(1.2, 3.0, Outcome::Unknown),
            call(3.5, 3.6, Outcome::Ok),
            call(20.0, 25.0, Outcome::Unknown),
            call(26.0, 26.1, Outcome::Ok),
        ];
        let refs: Vec<&Call> = calls.iter().collect();
        let faults = [FaultWindow {
            kind: "kill".into(),
            detail: String::new(),
            start: 1.15,
            end: 4.0,
            start_utc: String::new(),
            hit_leader: true,
        }];
        let (a, v) = check(&refs, &faults, 30.0);
        assert!((a.longest_outage_s - 22.5).abs() < 1e-9);
        assert!((a.recovery_s[0].unwrap() - 2.45).abs() < 1e-9);
        assert_eq!(a.leader_kill_median_s, a.recovery_s[0]);
        assert_eq!(v.len(), 1, "only the timeout at 20s is outside the fault");
        assert_eq!((a.ok_writes, a.failed_writes), (4, 2));
    }
}
