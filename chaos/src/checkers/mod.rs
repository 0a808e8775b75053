//! The checkers: each reads the recorded history (and the final state read after healing)
//! and reports violations of one guarantee, with the minimal part of the history that shows it.

pub mod availability;
pub mod durability;
pub mod lease;
pub mod linearizable;
pub mod lists;
pub mod watch;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::history::WatchEvent;

/// A broken guarantee.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// Which checker found it.
    pub checker: &'static str,
    /// One line saying what is wrong.
    pub summary: String,
    /// The operations or events that show it.
    pub detail: Vec<String>,
}

/// The store's history of the chaos namespace's ConfigMaps as one replica serves it after the
/// faults healed: the state at the run's start revision and every event after it. The watch
/// and list checkers compare what clients saw against it; it is itself checked against the
/// final state (see [`Reference::check_final`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Reference {
    /// The revision the workloads started at.
    pub start_rv: u64,
    /// name → (resourceVersion, content) at `start_rv`.
    pub initial: BTreeMap<String, (u64, String)>,
    /// Every event after `start_rv`, in order (no bookmarks).
    pub events: Vec<WatchEvent>,
    /// The store's revision after healing (all replicas converged on it).
    pub final_revision: u64,
}

impl Reference {
    /// name → (resourceVersion, content) at revision `rv` (≥ `start_rv`).
    pub fn state_at(&self, rv: u64) -> BTreeMap<String, (u64, String)> {
        let mut state = self.initial.clone();
        for e in self.events.iter().take_while(|e| e.rv <= rv) {
            apply(&mut state, e);
        }
        state
    }

    /// Whether `state` is the store's state at some revision from `start_rv` on.
    pub fn is_some_state(&self, state: &BTreeMap<String, (u64, String)>) -> bool {
        let mut current = self.initial.clone();
        &current == state
            || self.events.iter().any(|e| {
                apply(&mut current, e);
                &current == state
            })
    }

    /// The reference must be a gap-free history: replaying it must give the final state read
    /// by a list, and revisions must increase.
    pub fn check_final(&self, final_state: &BTreeMap<String, (u64, String)>) -> Vec<Violation> {
        let mut out = Vec::new();
        if let Some(w) = self.events.windows(2).find(|w| w[1].rv <= w[0].rv) {
            out.push(Violation {
                checker: "watch",
                summary: "the reference watch is not in revision order".into(),
                detail: vec![format!("{:?}", w[0]), format!("{:?}", w[1])],
            });
        }
        let replayed = self.state_at(u64::MAX);
        if &replayed != final_state {
            let detail = diff(&replayed, final_state);
            out.push(Violation {
                checker: "watch",
                summary: "replaying the full watch history does not give the final list".into(),
                detail,
            });
        }
        out
    }
}

/// Applies one event to a state.
fn apply(state: &mut BTreeMap<String, (u64, String)>, e: &WatchEvent) {
    if e.kind == "DELETED" {
        state.remove(&e.name);
    } else {
        state.insert(e.name.clone(), (e.rv, e.content.clone()));
    }
}

/// The entries where two states differ, as lines (`left` is the expected one).
pub fn diff(
    expected: &BTreeMap<String, (u64, String)>,
    actual: &BTreeMap<String, (u64, String)>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (k, v) in expected {
        match actual.get(k) {
            None => lines.push(format!("missing {k} (expected at rv {} = {:?})", v.0, v.1)),
            Some(a) if a != v => lines.push(format!(
                "{k}: expected rv {} {:?}, got rv {} {:?}",
                v.0, v.1, a.0, a.1
            )),
            _ => {}
        }
    }
    for (k, a) in actual {
        if !expected.contains_key(k) {
            lines.push(format!("unexpected {k} at rv {} = {:?}", a.0, a.1));
        }
    }
    lines.truncate(20);
    lines
}
