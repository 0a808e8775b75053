//! Watch guarantees per stream: events in revision order, none duplicated, none missing and
//! none altered against the reference history, exact resumption across reconnects (the
//! concatenation of a watcher's connections is one gap-free stream), bookmarks never ahead of
//! later events, and no errors (a resourceVersion inside the history window must resume).

use crate::checkers::{Reference, Violation};
use crate::history::{WatchEvent, WatchRecord};

/// Events quoted around a mismatch.
const CONTEXT: usize = 3;

/// Checks every watcher against the reference.
pub fn check(streams: &[WatchRecord], reference: &Reference) -> Vec<Violation> {
    streams.iter().flat_map(|s| check_stream(s, reference)).collect()
}

fn show(e: &WatchEvent) -> String {
    format!("{} {} rv={} {:?}", e.kind, e.name, e.rv, e.content)
}

fn check_stream(stream: &WatchRecord, reference: &Reference) -> Vec<Violation> {
    let mut out = Vec::new();
    let violation = |summary: String, detail: Vec<String>| Violation {
        checker: "watch",
        summary: format!("watcher {}: {summary}", stream.watcher),
        detail,
    };
    let Some(first) = stream.segments.first() else {
        return out;
    };
    let mut last = first.from_rv;
    let mut received: Vec<&WatchEvent> = Vec::new();
    for (k, seg) in stream.segments.iter().enumerate() {
        if seg.from_rv != last {
            out.push(violation(
                format!("connection {k} resumed from rv {} instead of {last}", seg.from_rv),
                vec![],
            ));
        }
        if let Some(err) = seg.end_error.as_deref().filter(|e| e.starts_with("ERROR event")) {
            out.push(violation(
                format!(
                    "connection {k} on replica {} from rv {} failed: {err}",
                    seg.replica + 1,
                    seg.from_rv
                ),
                vec![],
            ));
        }
        for e in &seg.events {
            let ok = if e.kind == "BOOKMARK" {
                e.rv >= last
            } else {
                e.rv > last
            };
            if !ok {
                out.push(violation(
                    format!("out of order on replica {} (connection {k})", seg.replica + 1),
                    vec![format!("after rv {last}: {}", show(e))],
                ));
            }
            last = last.max(e.rv);
            if e.kind != "BOOKMARK" {
                received.push(e);
            }
        }
    }
    if let Some(bookmark_ahead) = last_bookmark_ahead(stream, reference) {
        out.push(violation(bookmark_ahead, vec![]));
    }
    let expected: Vec<&WatchEvent> = reference
        .events
        .iter()
        .filter(|e| e.rv > first.from_rv && e.rv <= last)
        .collect();
    if let Some(i) = (0..expected.len().max(received.len())).find(|&i| expected.get(i) != received.get(i)) {
        let around = |v: &[&WatchEvent]| -> Vec<String> {
            v[i.saturating_sub(CONTEXT)..(i + CONTEXT).min(v.len())]
                .iter()
                .map(|e| show(e))
                .collect()
        };
        let mut detail = vec!["expected (reference history):".to_string()];
        detail.extend(around(&expected).into_iter().map(|l| format!("  {l}")));
        detail.push("received:".into());
        detail.extend(around(&received).into_iter().map(|l| format!("  {l}")));
        out.push(violation(
            format!(
                "stream differs from the store history at event {i} ({} expected, {} received up to rv {last})",
                expected.len(),
                received.len()
            ),
            detail,
        ));
    }
    out
}

/// A bookmark may run ahead of the last ConfigMap event (Leases and Namespaces advance the
/// revision too) but never beyond the revision the store ended at.
fn last_bookmark_ahead(stream: &WatchRecord, reference: &Reference) -> Option<String> {
    let max_bookmark = stream
        .segments
        .iter()
        .flat_map(|s| &s.events)
        .filter(|e| e.kind == "BOOKMARK")
        .map(|e| e.rv)
        .max()?;
    (max_bookmark > reference.final_revision).then(|| {
        format!(
            "bookmark at rv {max_bookmark} is beyond the store's final revision {}",
            reference.final_revision
        )
    })
}
