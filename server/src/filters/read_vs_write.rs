//! kube-apiserver's `apiserver_flowcontrol_read_vs_write_current_requests`: for each request
//! kind (`readOnly`, `mutating`) and phase (`executing`, `waiting`), how many requests there
//! were as a fraction of the kind's in-flight limit, observed at the end of every nanosecond.
//!
//! It is a timing ratio histogram, which the `metrics` facade cannot express: an observation
//! is not a sample but the value held over a span of time, weighted by that span in
//! nanoseconds. So a series' `_count` is the nanoseconds since it began, its buckets the
//! nanoseconds spent at or below each ratio, and its `_sum` the ratio integrated over time;
//! `rate(_sum) / rate(_count)` is the mean utilisation of the limit over a window. The series
//! are kept here and appended to `/metrics` as kube's Prometheus registry writes them. As with
//! kube's max-in-flight filter, requests never wait in a queue, so the `waiting` series stay
//! at 0; a kind without a limit is reported as a plain count (a denominator of 1).

use std::fmt::Write;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// The series' name.
const NAME: &str = "apiserver_flowcontrol_read_vs_write_current_requests";
/// kube's help text, with its stability level.
const HELP: &str = "[ALPHA] Observations, at the end of every nanosecond, of the number of requests (as a fraction of the relevant limit) waiting or in regular stage of execution";
/// kube's bucket bounds.
const BUCKETS: [f64; 15] = [
    0.0, 0.001, 0.01, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0,
];

/// A request kind, as the `request_kind` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `get`, `list` and the other reads.
    ReadOnly,
    /// Every other verb.
    Mutating,
}

/// One series: the value held since `since`, and what earlier values accrued.
#[derive(Debug)]
struct Series {
    numerator: f64,
    denominator: f64,
    since: Instant,
    /// Nanoseconds per bucket (not cumulative); the last is above every bound.
    weights: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Series {
    fn new(now: Instant) -> Series {
        Series {
            numerator: 0.0,
            denominator: 1.0,
            since: now,
            weights: [0; BUCKETS.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    /// Adds the span since the last change, at the value held over it.
    fn accrue(&mut self, now: Instant) {
        let nanos = u64::try_from(now.saturating_duration_since(self.since).as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return;
        }
        let ratio = self.numerator / self.denominator;
        let bucket = BUCKETS.iter().position(|b| ratio <= *b).unwrap_or(BUCKETS.len());
        self.weights[bucket] = self.weights[bucket].saturating_add(nanos);
        self.sum += ratio * nanos as f64;
        self.count = self.count.saturating_add(nanos);
        self.since = now;
    }

    fn render(&self, out: &mut String, labels: &str) {
        let mut cumulative = 0u64;
        for (bound, weight) in BUCKETS.iter().zip(self.weights) {
            cumulative = cumulative.saturating_add(weight);
            let _ = writeln!(out, "{NAME}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{NAME}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{NAME}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{NAME}_count{{{labels}}} {}", self.count);
    }
}

/// The four series, in the order kube's registry writes them (by label values).
struct Histogram {
    executing_mutating: Mutex<Series>,
    executing_read_only: Mutex<Series>,
    waiting_mutating: Mutex<Series>,
    waiting_read_only: Mutex<Series>,
}

fn histogram() -> &'static Histogram {
    static HISTOGRAM: std::sync::OnceLock<Histogram> = std::sync::OnceLock::new();
    HISTOGRAM.get_or_init(|| {
        let now = Instant::now();
        Histogram {
            executing_mutating: Mutex::new(Series::new(now)),
            executing_read_only: Mutex::new(Series::new(now)),
            waiting_mutating: Mutex::new(Series::new(now)),
            waiting_read_only: Mutex::new(Series::new(now)),
        }
    })
}

fn lock(series: &Mutex<Series>) -> MutexGuard<'_, Series> {
    series.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn executing(kind: Kind) -> &'static Mutex<Series> {
    let h = histogram();
    match kind {
        Kind::ReadOnly => &h.executing_read_only,
        Kind::Mutating => &h.executing_mutating,
    }
}

/// The in-flight limits the executing ratios are fractions of (0: no limit), as kube's
/// max-in-flight filter sets its denominators; also starts the series' clock.
pub fn set_limits(read_only: usize, mutating: usize) {
    let now = Instant::now();
    for (kind, limit) in [(Kind::ReadOnly, read_only), (Kind::Mutating, mutating)] {
        let mut series = lock(executing(kind));
        series.accrue(now);
        series.denominator = if limit == 0 { 1.0 } else { limit as f64 };
    }
}

/// The number of requests of `kind` executing changed: `requests` reads it, under the
/// series' lock, so that concurrent changes are recorded in the order they happened.
pub fn set_executing(kind: Kind, requests: impl FnOnce() -> i64) {
    let mut series = lock(executing(kind));
    series.accrue(Instant::now());
    series.numerator = requests().max(0) as f64;
}

/// Appends the histogram, accrued up to now, in Prometheus' text format.
pub fn render(out: &mut String) {
    let now = Instant::now();
    let h = histogram();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let _ = writeln!(out, "# HELP {NAME} {HELP}");
    let _ = writeln!(out, "# TYPE {NAME} histogram");
    for (series, phase, kind) in [
        (&h.executing_mutating, "executing", "mutating"),
        (&h.executing_read_only, "executing", "readOnly"),
        (&h.waiting_mutating, "waiting", "mutating"),
        (&h.waiting_read_only, "waiting", "readOnly"),
    ] {
        let mut series = lock(series);
        series.accrue(now);
        series.render(out, &format!("phase=\"{phase}\",request_kind=\"{kind}\""));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Values held over spans land in their buckets weighted by the span in nanoseconds.
    #[test]
    fn a_series_weighs_each_value_by_how_long_it_was_held() {
        let start = Instant::now();
        let mut s = Series::new(start);
        s.denominator = 4.0;
        s.accrue(start + Duration::from_secs(1));
        s.numerator = 1.0;
        s.accrue(start + Duration::from_secs(3));
        s.numerator = 4.0;
        s.accrue(start + Duration::from_secs(4));
        assert_eq!(s.count, 4_000_000_000);
        assert!((s.sum - 1.5e9).abs() < 1.0, "{}", s.sum);
        let mut text = String::new();
        s.render(&mut text, "phase=\"executing\",request_kind=\"mutating\"");
        let line = |le: &str| {
            let prefix =
                format!("{NAME}_bucket{{phase=\"executing\",request_kind=\"mutating\",le=\"{le}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .unwrap_or_else(|| panic!("{le}: {text}"))
                .to_string()
        };
        // 1 s at 0, 2 s at 0.25, 1 s at 1.
        assert_eq!(line("0"), "1000000000");
        assert_eq!(line("0.2"), "1000000000");
        assert_eq!(line("0.3"), "3000000000");
        assert_eq!(line("0.99"), "3000000000");
        assert_eq!(line("1"), "4000000000");
        assert_eq!(line("+Inf"), "4000000000");
        assert!(text.contains(&format!(
            "{NAME}_count{{phase=\"executing\",request_kind=\"mutating\"}} 4000000000"
        )));
    }

    #[test]
    fn every_series_is_rendered_with_kubes_labels() {
        set_executing(Kind::ReadOnly, || 1);
        set_executing(Kind::ReadOnly, || 0);
        let mut text = String::new();
        render(&mut text);
        assert!(text.starts_with(&format!("# HELP {NAME} [ALPHA] ")));
        assert!(text.contains(&format!("# TYPE {NAME} histogram\n")));
        for labels in [
            "phase=\"executing\",request_kind=\"mutating\"",
            "phase=\"executing\",request_kind=\"readOnly\"",
            "phase=\"waiting\",request_kind=\"mutating\"",
            "phase=\"waiting\",request_kind=\"readOnly\"",
        ] {
            assert!(
                text.contains(&format!("{NAME}_count{{{labels}}} ")),
                "{labels}: {text}"
            );
        }
    }
}
