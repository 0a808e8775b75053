//! Watch guarantees per stream: events in revision order, none duplicated, none missing and
//! none altered against the reference history, exact resumption across reconnects (the
//! concatenation of a watcher's connections is one gap-free stream), bookmarks never ahead of
//! later events, and no errors (a resourceVersion inside the history window must resume).

use std::collections::BTreeMap;

use crate::checkers::{Reference, Violation};
use crate::history::{WatchEvent, WatchRecord, WatchSegment};

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

/// Checks watches started without a resourceVersion: some prefix of their events must be
/// ADDED events that are exactly the store's state at a revision R, and the rest exactly the
/// history after R.
pub fn check_initial(segments: &[WatchSegment], reference: &Reference) -> Vec<Violation> {
    let mut out = Vec::new();
    for seg in segments {
        let violation = |summary: String, detail: Vec<String>| Violation {
            checker: "watch",
            summary: format!(
                "watch without resourceVersion on replica {} at {:.3}s: {summary}",
                seg.replica + 1,
                seg.start
            ),
            detail,
        };
        if let Some(err) = &seg.end_error {
            out.push(violation(err.clone(), vec![]));
            continue;
        }
        let events: Vec<&WatchEvent> = seg.events.iter().filter(|e| e.kind != "BOOKMARK").collect();
        let added = events.iter().take_while(|e| e.kind == "ADDED").count();
        let consistent = (0..=added).rev().any(|k| {
            let initial: BTreeMap<String, (u64, String)> = events[..k]
                .iter()
                .map(|e| (e.name.clone(), (e.rv, e.content.clone())))
                .collect();
            if initial.len() != k {
                return false;
            }
            match events.get(k) {
                // Changes followed: the snapshot was taken just before the first of them.
                Some(first) => {
                    let at = first.rv.saturating_sub(1);
                    let expected: Vec<&WatchEvent> = reference
                        .events
                        .iter()
                        .filter(|e| e.rv > at)
                        .take(events.len() - k)
                        .collect();
                    at >= reference.start_rv && initial == reference.state_at(at) && expected == events[k..]
                }
                // Only the snapshot (the stream ended before any change): it must be the state
                // at some revision.
                None => reference.is_some_state(&initial),
            }
        });
        if !consistent {
            let detail = events.iter().take(12).map(|e| show(e)).collect();
            out.push(violation(
                format!(
                    "{} events are not a snapshot at one revision followed by its history",
                    events.len()
                ),
                detail,
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: &str, name: &str, rv: u64) -> WatchEvent {
        WatchEvent {
            kind: kind.into(),
            name: name.into(),
            rv,
            content: format!("{name}@{rv}"),
        }
    }

    fn reference() -> Reference {
        Reference {
            start_rv: 10,
            initial: Default::default(),
            events: vec![
                ev("ADDED", "a", 11),
                ev("MODIFIED", "a", 12),
                ev("ADDED", "b", 14),
                ev("DELETED", "a", 15),
            ],
            final_revision: 16,
        }
    }

    fn stream(segments: Vec<(u64, Vec<WatchEvent>)>) -> WatchRecord {
        WatchRecord {
            watcher: "w".into(),
            segments: segments
                .into_iter()
                .map(|(from_rv, events)| WatchSegment {
                    replica: 0,
                    from_rv,
                    start: 0.0,
                    events,
                    end_error: None,
                })
                .collect(),
        }
    }

    #[test]
    fn an_exactly_resumed_stream_passes_and_a_bookmark_over_an_event_is_a_gap() {
        let s = stream(vec![
            (10, vec![ev("ADDED", "a", 11), ev("MODIFIED", "a", 12)]),
            (12, vec![ev("BOOKMARK", "", 13), ev("ADDED", "b", 14)]),
            (14, vec![ev("DELETED", "a", 15), ev("BOOKMARK", "", 16)]),
        ]);
        let mut skipped = s.clone();
        skipped.segments[0].events[1] = ev("BOOKMARK", "", 12);
        assert_eq!(check(&[s], &reference()), vec![]);
        assert_eq!(check(&[skipped], &reference()).len(), 1);
    }

    #[test]
    fn initial_events_must_be_a_snapshot_followed_by_its_history() {
        let seg = |events: Vec<WatchEvent>| WatchSegment {
            replica: 0,
            from_rv: 0,
            start: 0.0,
            events,
            end_error: None,
        };
        let r = reference();
        // State at 12 is {a@12}; then b@14 and the deletion of a.
        let good = seg(vec![
            ev("ADDED", "a", 12),
            ev("ADDED", "b", 14),
            ev("DELETED", "a", 15),
        ]);
        assert_eq!(check_initial(&[good], &r), vec![]);
        let at_end = seg(vec![ev("ADDED", "b", 14)]);
        assert_eq!(check_initial(&[at_end], &r), vec![]);
        let snapshot_only = seg(vec![ev("ADDED", "a", 12)]);
        assert_eq!(check_initial(&[snapshot_only], &r), vec![]);
        let never_a_state = seg(vec![ev("ADDED", "a", 11), ev("ADDED", "b", 14)]);
        assert_eq!(check_initial(&[never_a_state], &r).len(), 1);
        let stale = seg(vec![ev("ADDED", "a", 11), ev("ADDED", "b", 14)]);
        assert_eq!(check_initial(&[stale], &r).len(), 1);
        // A stream may end early (its timeout), but not deliver something else.
        let cut_short = seg(vec![ev("ADDED", "a", 12), ev("ADDED", "b", 14)]);
        assert_eq!(check_initial(&[cut_short], &r), vec![]);
        let wrong_event = seg(vec![
            ev("ADDED", "a", 12),
            ev("ADDED", "b", 14),
            ev("ADDED", "c", 15),
        ]);
        assert_eq!(check_initial(&[wrong_event], &r).len(), 1);
    }

    #[test]
    fn gaps_duplicates_reordering_and_bad_resumes_are_caught() {
        let gap = stream(vec![(10, vec![ev("ADDED", "a", 11), ev("ADDED", "b", 14)])]);
        assert_eq!(check(&[gap], &reference()).len(), 1);
        let dup = stream(vec![
            (10, vec![ev("ADDED", "a", 11)]),
            (10, vec![ev("ADDED", "a", 11)]),
        ]);
        assert!(!check(&[dup], &reference()).is_empty());
        let reordered = stream(vec![(10, vec![ev("MODIFIED", "a", 12), ev("ADDED", "a", 11)])]);
        assert!(!check(&[reordered], &reference()).is_empty());
        let altered = stream(vec![(
            10,
            vec![WatchEvent {
                content: "other".into(),
                ..ev("ADDED", "a", 11)
            }],
        )]);
        assert_eq!(check(&[altered], &reference()).len(), 1);
        let bookmark_ahead = stream(vec![(10, vec![ev("BOOKMARK", "", 99)])]);
        assert!(!check(&[bookmark_ahead], &reference()).is_empty());
        let mut gone = stream(vec![(10, vec![])]);
        gone.segments[0].end_error = Some("ERROR event: 410 too old".into());
        assert_eq!(check(&[gone], &reference()).len(), 1);
    }
}
