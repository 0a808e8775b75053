//! Summaries of the runs: medians per cell, the markdown table for `docs/benchmarks.md`, and
//! the JSON report.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::client::System;
use crate::workload::{Op, RunStats};

/// A cell whose failed operations exceed this share of all its operations is flagged.
pub const ERROR_FLAG_RATE: f64 = 0.01;

/// The median of `values`, ignoring NaNs; `None` when there is none.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// `num / den`, or `None` if either is missing or `den` is not positive.
pub fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() && d.is_finite() => Some(n / d),
        _ => None,
    }
}

/// The share of failed operations among all, 0 when there were none.
pub fn error_rate(ops: u64, errors: u64) -> f64 {
    let total = ops + errors;
    if total == 0 {
        0.0
    } else {
        errors as f64 / total as f64
    }
}

/// Placeholder for a missing number in the table.
const MISSING: &str = "–";

/// Operations per second for the table: whole numbers, one decimal below 100.
pub fn fmt_rate(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
        None => MISSING.to_string(),
    }
}

/// Milliseconds for the table: about three significant digits.
pub fn fmt_ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v < 10.0 => format!("{v:.2}"),
        Some(v) if v < 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
        None => MISSING.to_string(),
    }
}

/// A ratio for the table, e.g. `0.85x`.
pub fn fmt_ratio(v: Option<f64>) -> String {
    match v {
        Some(v) => format!("{v:.2}x"),
        None => MISSING.to_string(),
    }
}

/// The medians over the runs of one cell.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// Median throughput (successful operations per second).
    pub ops_per_sec: Option<f64>,
    /// Median of the runs' median latencies, in milliseconds.
    pub p50_ms: Option<f64>,
    /// Median of the runs' 99th-percentile latencies, in milliseconds.
    pub p99_ms: Option<f64>,
    /// Median of the runs' CPU milliseconds per successful operation (all replicas).
    pub cpu_ms_per_op: Option<f64>,
    /// Successful operations over all runs.
    pub ops: u64,
    /// Failed operations over all runs.
    pub errors: u64,
    /// `errors / (ops + errors)`.
    pub error_rate: f64,
    /// Whether `error_rate` exceeds `ERROR_FLAG_RATE`.
    pub flagged: bool,
}

/// Summarizes the runs of one cell.
pub fn summarize(runs: &[RunStats]) -> Summary {
    let ops = runs.iter().map(|r| r.ops).sum();
    let errors = runs.iter().map(|r| r.errors).sum();
    let rate = error_rate(ops, errors);
    Summary {
        ops_per_sec: median(runs.iter().map(|r| r.ops_per_sec)),
        p50_ms: median(runs.iter().filter_map(|r| r.p50_ms)),
        p99_ms: median(runs.iter().filter_map(|r| r.p99_ms)),
        cpu_ms_per_op: median(runs.iter().filter_map(|r| r.cpu_ms_per_op)),
        ops,
        errors,
        error_rate: rate,
        flagged: rate > ERROR_FLAG_RATE,
    }
}

/// All runs of one system, operation and concurrency.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CellResult {
    /// The system driven.
    pub system: System,
    /// The operation issued.
    pub op: Op,
    /// Number of concurrent clients.
    pub concurrency: usize,
    /// Medians over `runs`.
    pub median: Summary,
    /// Every run, in execution order.
    pub runs: Vec<RunStats>,
}

impl CellResult {
    /// Builds a cell's result from its runs.
    pub fn new(system: System, op: Op, concurrency: usize, runs: Vec<RunStats>) -> Self {
        Self {
            system,
            op,
            concurrency,
            median: summarize(&runs),
            runs,
        }
    }
}

fn find(cells: &[CellResult], system: System, op: Op, concurrency: usize) -> Option<&CellResult> {
    cells
        .iter()
        .find(|c| c.system == system && c.op == op && c.concurrency == concurrency)
}

/// The markdown table of `cells`: one row per operation and concurrency, etcd's and
/// kuberaft's medians side by side, and kuberaft/etcd ratios of throughput and p99 latency.
/// Flagged cells are marked, and every cell with errors is listed under the table.
pub fn markdown(cells: &[CellResult], ops: &[Op], concurrency: &[usize]) -> String {
    let systems = [System::Etcd, System::Kuberaft];
    let mut out = String::new();
    out.push_str("| op | clients |");
    for s in systems {
        let _ = write!(out, " {s} ops/s | {s} p50 ms | {s} p99 ms |");
    }
    out.push_str(" ops/s kuberaft/etcd | p99 kuberaft/etcd |\n");
    out.push_str("|---|---:|");
    for _ in systems {
        out.push_str("---:|---:|---:|");
    }
    out.push_str("---:|---:|\n");
    let mut any_flagged = false;
    for &op in ops {
        for &c in concurrency {
            let _ = write!(out, "| {op} | {c} |");
            for s in systems {
                match find(cells, s, op, c) {
                    Some(cell) => {
                        let m = &cell.median;
                        let mark = if m.flagged { " †" } else { "" };
                        any_flagged |= m.flagged;
                        let _ = write!(
                            out,
                            " {}{mark} | {} | {} |",
                            fmt_rate(m.ops_per_sec),
                            fmt_ms(m.p50_ms),
                            fmt_ms(m.p99_ms)
                        );
                    }
                    None => {
                        let _ = write!(out, " {MISSING} | {MISSING} | {MISSING} |");
                    }
                }
            }
            let k = find(cells, System::Kuberaft, op, c).map(|c| &c.median);
            let e = find(cells, System::Etcd, op, c).map(|c| &c.median);
            let _ = writeln!(
                out,
                " {} | {} |",
                fmt_ratio(ratio(
                    k.and_then(|m| m.ops_per_sec),
                    e.and_then(|m| m.ops_per_sec)
                )),
                fmt_ratio(ratio(k.and_then(|m| m.p99_ms), e.and_then(|m| m.p99_ms))),
            );
        }
    }
    cpu_table(&mut out, cells, ops, concurrency);
    if any_flagged {
        let _ = writeln!(
            out,
            "\n† more than {:.0}% of the operations failed.",
            ERROR_FLAG_RATE * 100.0
        );
    }
    let with_errors: Vec<&CellResult> = cells.iter().filter(|c| c.median.errors > 0).collect();
    if !with_errors.is_empty() {
        out.push_str("\nErrors:\n\n");
        for cell in with_errors {
            let m = &cell.median;
            let first = cell
                .runs
                .iter()
                .find_map(|r| r.first_error.as_deref())
                .unwrap_or("?");
            let _ = writeln!(
                out,
                "- {} {} with {} clients: {} of {} operations failed ({:.2}%){}; first: {first}",
                cell.system,
                cell.op,
                cell.concurrency,
                m.errors,
                m.ops + m.errors,
                m.error_rate * 100.0,
                if m.flagged { " — FLAGGED" } else { "" },
            );
        }
    }
    out
}

/// The cost table under the main one, when the runs measured CPU: CPU milliseconds per
/// operation summed over every process of each system, and their ratio.
fn cpu_table(out: &mut String, cells: &[CellResult], ops: &[Op], concurrency: &[usize]) {
    if cells.iter().all(|c| c.median.cpu_ms_per_op.is_none()) {
        return;
    }
    out.push_str("\n| op | clients | etcd CPU ms/op | kuberaft CPU ms/op | CPU kuberaft/etcd |\n");
    out.push_str("|---|---:|---:|---:|---:|\n");
    for &op in ops {
        for &c in concurrency {
            let cpu = |s| find(cells, s, op, c).and_then(|cell| cell.median.cpu_ms_per_op);
            let (e, k) = (cpu(System::Etcd), cpu(System::Kuberaft));
            let _ = writeln!(
                out,
                "| {op} | {c} | {} | {} | {} |",
                fmt_cpu(e),
                fmt_cpu(k),
                fmt_ratio(ratio(k, e))
            );
        }
    }
}

/// CPU milliseconds per operation for the table: three decimals.
fn fmt_cpu(v: Option<f64>) -> String {
    v.map_or_else(|| MISSING.to_string(), |v| format!("{v:.3}"))
}

/// The JSON report `--json` writes.
#[derive(Debug, serde::Serialize)]
pub struct Report<'a, C: serde::Serialize> {
    /// Which benchmark produced the report.
    pub benchmark: &'static str,
    /// The benchmark's settings.
    pub config: &'a C,
    /// Logical CPUs of the host (both clusters and the clients share them).
    pub host_cpus: usize,
    /// `etcd --version`'s first line, when etcd was benchmarked.
    pub etcd_version: Option<String>,
    /// One entry per system, operation and concurrency.
    pub results: &'a [CellResult],
    /// The markdown table printed to stdout.
    pub markdown: &'a str,
}

/// Writes `report` as pretty-printed JSON to `path`.
pub fn write_json<C: serde::Serialize>(path: &Path, report: &Report<'_, C>) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report).context("cannot serialize the report")?;
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ops_per_sec: f64, p50: f64, p99: f64, errors: u64) -> RunStats {
        RunStats {
            ops: (ops_per_sec * 10.0) as u64,
            errors,
            seconds: 10.0,
            ops_per_sec,
            p50_ms: Some(p50),
            p99_ms: Some(p99),
            max_ms: Some(p99 * 2.0),
            first_error: (errors > 0).then(|| "Unavailable: no leader".to_string()),
            cpu_ms_per_op: Some(1000.0 / ops_per_sec),
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median([5.0]), Some(5.0));
        assert_eq!(median(Vec::<f64>::new()), None);
        assert_eq!(median([f64::NAN, 1.0, 9.0, 2.0]), Some(2.0));
    }

    #[test]
    fn ratio_needs_both_sides_and_a_positive_denominator() {
        assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
        assert_eq!(ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(2.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_ratio(Some(0.8512)), "0.85x");
        assert_eq!(fmt_ratio(None), "–");
        assert_eq!(fmt_ms(Some(0.1234)), "0.12");
        assert_eq!(fmt_ms(Some(12.345)), "12.3");
        assert_eq!(fmt_ms(Some(123.45)), "123");
        assert_eq!(fmt_rate(Some(12345.6)), "12346");
        assert_eq!(fmt_rate(Some(42.25)), "42.2");
        assert_eq!(fmt_rate(None), "–");
    }

    #[test]
    fn error_rate_and_flag() {
        assert_eq!(error_rate(0, 0), 0.0);
        assert!((error_rate(99, 1) - 0.01).abs() < 1e-12);
        let ok = summarize(&[run(100.0, 1.0, 2.0, 10)]); // 10 of 1010: just under 1%
        assert!(!ok.flagged);
        let bad = summarize(&[run(100.0, 1.0, 2.0, 11)]);
        assert!(bad.flagged);
    }

    #[test]
    fn summary_takes_medians_and_sums() {
        let s = summarize(&[
            run(100.0, 1.0, 9.0, 0),
            run(300.0, 3.0, 5.0, 1),
            run(200.0, 2.0, 7.0, 0),
        ]);
        assert_eq!(s.ops_per_sec, Some(200.0));
        assert_eq!(s.p50_ms, Some(2.0));
        assert_eq!(s.p99_ms, Some(7.0));
        assert_eq!(s.ops, 6000);
        assert_eq!(s.errors, 1);
    }

    #[test]
    fn table_has_ratios_and_marks_missing_and_flagged_cells() {
        let cells = vec![
            CellResult::new(System::Etcd, Op::Put, 16, vec![run(1000.0, 1.0, 4.0, 0)]),
            CellResult::new(System::Kuberaft, Op::Put, 16, vec![run(500.0, 2.0, 6.0, 100)]),
            CellResult::new(System::Etcd, Op::GetSerializable, 1, vec![run(50.0, 0.1, 0.2, 0)]),
        ];
        let md = markdown(&cells, &[Op::Put, Op::GetSerializable], &[16, 1]);
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines[0].starts_with("| op | clients | etcd ops/s"));
        assert_eq!(
            lines[2],
            "| put | 16 | 1000 | 1.00 | 4.00 | 500 † | 2.00 | 6.00 | 0.50x | 1.50x |"
        );
        assert!(md.contains("| get-serializable | 1 | 50.0 | 0.10 | 0.20 | – | – | – | – | – |"));
        // put/1 and get-serializable/16 were not run.
        assert!(md.contains("| put | 1 | – | – | – | – | – | – | – | – |"));
        assert!(md.contains("† more than 1%"));
        assert!(md.contains("kuberaft put with 16 clients: 100 of 5100 operations failed"));
        assert!(md.contains("FLAGGED"));
    }
}
