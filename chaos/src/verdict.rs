//! The result of a chaos run: what was checked, what broke, the measured availability, and the
//! files it is written to (`result.json`, `summary.md`, `history.json`).

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::checkers::availability::Availability;
use crate::checkers::Violation;
use crate::history::{FaultWindow, History, Outcome};

/// Why the report could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {message}")]
pub struct ReportError {
    /// The file.
    pub path: String,
    /// The cause.
    pub message: String,
}

/// Counts of what the workloads did, to show the run exercised something.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Register operations (reads, CAS, blind writes).
    pub register_ops: usize,
    /// Acknowledged register writes (CAS and blind).
    pub register_writes_ok: usize,
    /// Register writes with unknown outcome.
    pub register_writes_unknown: usize,
    /// Churn creates and deletes.
    pub churn_ops: usize,
    /// Acknowledged Lease writes.
    pub lease_writes: usize,
    /// Distinct lease terms.
    pub lease_terms: usize,
    /// Watch streams.
    pub watchers: usize,
    /// Watch connections (streams resume over many).
    pub watch_connections: usize,
    /// Watch events received (bookmarks included).
    pub watch_events: usize,
    /// Watches started without a resourceVersion (initial-events checks).
    pub initial_watches: usize,
    /// Complete paginated lists.
    pub lists: usize,
}

impl Counts {
    /// Counts the history.
    pub fn of(h: &History) -> Self {
        let writes = h.registers.iter().filter(|r| r.call.write);
        let mut terms: Vec<u64> = h.leases.iter().map(|l| l.term).collect();
        terms.sort_unstable();
        terms.dedup();
        Self {
            register_ops: h.registers.len(),
            register_writes_ok: writes.clone().filter(|r| r.call.outcome == Outcome::Ok).count(),
            register_writes_unknown: writes.filter(|r| r.call.outcome == Outcome::Unknown).count(),
            churn_ops: h.churn.len(),
            lease_writes: h.leases.len(),
            lease_terms: terms.len(),
            watchers: h.watches.len(),
            watch_connections: h.watches.iter().map(|w| w.segments.len()).sum(),
            watch_events: h
                .watches
                .iter()
                .flat_map(|w| &w.segments)
                .map(|s| s.events.len())
                .sum(),
            initial_watches: h.initial_watches.len(),
            lists: h.lists.len(),
        }
    }
}

/// One second of the run, for the chart.
#[derive(Debug, Clone, Serialize)]
pub struct Second {
    /// Start of the second.
    pub t: f64,
    /// Acknowledged writes completed in it.
    pub ok_writes: usize,
    /// Writes answered with 5xx or not at all, completed in it.
    pub failed_writes: usize,
    /// Median latency of its acknowledged writes (ms).
    pub p50_ms: Option<f64>,
    /// 99th percentile latency of its acknowledged writes (ms).
    pub p99_ms: Option<f64>,
}

/// Per-second write throughput and latency.
pub fn timeline(h: &History, until: f64) -> Vec<Second> {
    let seconds = until.ceil().max(1.0) as usize;
    let mut buckets: Vec<(Vec<f64>, usize)> = vec![(Vec::new(), 0); seconds];
    for c in h.write_calls() {
        let Some(b) = buckets.get_mut(c.end.max(0.0) as usize) else {
            continue;
        };
        if c.outcome == Outcome::Ok {
            b.0.push((c.end - c.start) * 1000.0);
        } else if c.unavailable {
            b.1 += 1;
        }
    }
    buckets
        .into_iter()
        .enumerate()
        .map(|(t, (mut lat, failed))| {
            lat.sort_by(f64::total_cmp);
            let q = |q: f64| (!lat.is_empty()).then(|| lat[((lat.len() - 1) as f64 * q).round() as usize]);
            Second {
                t: t as f64,
                ok_writes: lat.len(),
                failed_writes: failed,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
            }
        })
        .collect()
}

/// Everything a run concluded.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The seed (replays the same fault schedule and client choices).
    pub seed: u64,
    /// Replicas.
    pub nodes: usize,
    /// Length of the workload phase (seconds).
    pub duration_s: f64,
    /// Enabled fault kinds.
    pub fault_kinds: Vec<String>,
    /// Whether no checker found anything.
    pub passed: bool,
    /// What broke.
    pub violations: Vec<Violation>,
    /// Registers whose linearizability search ran out of budget.
    pub inconclusive_registers: usize,
    /// The faults injected.
    pub faults: Vec<FaultWindow>,
    /// Availability figures.
    pub availability: Availability,
    /// The revision and state hash all replicas converged on, if they did.
    pub converged: Option<(i64, String)>,
    /// What the workloads did.
    pub counts: Counts,
    /// Per-second throughput and latency.
    pub timeline: Vec<Second>,
}

/// Seconds as text, `-` when missing.
fn secs(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2} s"))
}

impl Verdict {
    /// The markdown summary.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# kuberaft chaos run, seed {}\n", self.seed);
        let _ = writeln!(
            s,
            "**{}** — {} replicas, {:.0} s of workload, faults: {}, {} violation(s), {} inconclusive register(s).\n",
            if self.passed { "PASSED" } else { "FAILED" },
            self.nodes,
            self.duration_s,
            self.fault_kinds.join(","),
            self.violations.len(),
            self.inconclusive_registers,
        );
        let a = &self.availability;
        let _ = writeln!(s, "| measure | value |\n| --- | --- |");
        let _ = writeln!(
            s,
            "| acknowledged writes / 5xx or unanswered | {} / {} |",
            a.ok_writes, a.failed_writes
        );
        let _ = writeln!(
            s,
            "| longest write outage | {:.2} s (from {:.1} s) |",
            a.longest_outage_s, a.longest_outage_at
        );
        let _ = writeln!(
            s,
            "| median write outage after a leader kill | {} |",
            secs(a.leader_kill_median_s)
        );
        let _ = writeln!(
            s,
            "| converged | {} |",
            self.converged.as_ref().map_or("NO".into(), |(r, h)| format!(
                "revision {r}, hash {}",
                h.chars().take(16).collect::<String>()
            ))
        );
        let c = &self.counts;
        let _ = writeln!(
            s,
            "| register ops (writes ok / unknown) | {} ({} / {}) |\n| churn ops | {} |\n| lease writes (terms) | {} ({}) |\n| watch streams / connections / events | {} / {} / {} |\n| watches without resourceVersion | {} |\n| paginated lists | {} |\n",
            c.register_ops, c.register_writes_ok, c.register_writes_unknown, c.churn_ops, c.lease_writes, c.lease_terms,
            c.watchers, c.watch_connections, c.watch_events, c.initial_watches, c.lists
        );
        let _ = writeln!(
            s,
            "## Faults\n\n| start | end | start (UTC) | kind | what | first write after |\n| --- | --- | --- | --- | --- | --- |"
        );
        for (f, r) in self.faults.iter().zip(&a.recovery_s) {
            let _ = writeln!(
                s,
                "| {:.2} s | {:.2} s | {} | {} | {} | {} |",
                f.start,
                f.end,
                f.start_utc,
                f.kind,
                f.detail,
                secs(*r)
            );
        }
        if !self.violations.is_empty() {
            let _ = writeln!(s, "\n## Violations\n");
            for v in &self.violations {
                let _ = writeln!(s, "- **{}**: {}", v.checker, v.summary);
                for d in &v.detail {
                    let _ = writeln!(s, "      {d}");
                }
            }
        }
        s
    }

    /// Writes `result.json`, `summary.md` and `history.json` into `dir`.
    pub fn write(&self, dir: &Path, history: &History) -> Result<(), ReportError> {
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| ReportError {
                path: path.display().to_string(),
                message: e.to_string(),
            })
        };
        write("result.json", to_json(self))?;
        write("summary.md", self.markdown())?;
        write("history.json", to_json(history))?;
        Ok(())
    }
}

/// Pretty JSON of a value (serializing the history and verdict cannot fail: plain data).
fn to_json<T: Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
