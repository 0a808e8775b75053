//! Linearizability of each register's history: a Wing–Gong/Lowe search (as Knossos and
//! Porcupine do) for an order of the operations that respects real time and a sequential
//! register with read, write and compare-and-set.
//!
//! Unknown outcomes: a write or CAS that timed out may have taken effect at any time after it
//! was invoked, or never; it gets an infinite completion time and need not be placed. One whose
//! value nobody ever observed can be dropped outright (placing it never helps), which keeps the
//! search small. Definitely failed operations and reads without an answer have no effect and
//! are dropped. Memoising (placed set, register value) makes the search polynomial in
//! practice; a budget turns a pathological history into "inconclusive" instead of a hang.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::checkers::Violation;
use crate::history::{Outcome, RegisterOp, RegisterRecord};
use crate::workloads::register::INITIAL;

/// Search states explored per register before giving up as inconclusive.
const BUDGET: usize = 3_000_000;
/// Operations quoted on each side of the point where the search got stuck.
const WITNESS_CONTEXT: usize = 8;

/// One operation prepared for the search.
#[derive(Debug, Clone, Copy)]
struct LinOp {
    start: f64,
    /// `f64::INFINITY` for unknown outcomes.
    end: f64,
    kind: Kind,
    /// Index into the records, for witnesses.
    record: usize,
}

/// The register operations over interned values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read(u32),
    Write(u32),
    Cas(u32, u32),
}

/// What the search found for one register.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// A linearization exists.
    Linearizable,
    /// None exists: the deepest linearized prefix and the operations that could not follow it
    /// (as record indices).
    Violation {
        /// The longest prefix found, in linearization order.
        prefix: Vec<usize>,
        /// The operations that were candidates next and all failed.
        stuck: Vec<usize>,
    },
    /// The budget ran out.
    Inconclusive,
}

/// Applies `kind` to the register value `state`: whether it is legal and the new value.
fn step(state: u32, kind: Kind) -> Option<u32> {
    match kind {
        Kind::Read(v) => (v == state).then_some(state),
        Kind::Write(v) => Some(v),
        Kind::Cas(expected, v) => (expected == state).then_some(v),
    }
}

/// Searches for a linearization of `ops` starting from value `init`.
fn search(ops: &[LinOp], init: u32) -> Finding {
    let n = ops.len();
    let required = ops.iter().filter(|o| o.end.is_finite()).count();
    if required == 0 {
        return Finding::Linearizable;
    }
    let words = n.div_ceil(64);
    let mut placed = vec![0u64; words];
    let is_placed = |p: &[u64], i: usize| p[i / 64] & (1 << (i % 64)) != 0;
    let candidates = |p: &[u64]| -> Vec<usize> {
        let horizon = (0..n)
            .filter(|&i| !is_placed(p, i))
            .map(|i| ops[i].end)
            .fold(f64::INFINITY, f64::min);
        (0..n)
            .filter(|&i| !is_placed(p, i) && ops[i].start < horizon)
            .collect()
    };
    struct Frame {
        cands: Vec<usize>,
        pos: usize,
        state: u32,
    }
    let mut frames = vec![Frame {
        cands: candidates(&placed),
        pos: 0,
        state: init,
    }];
    let mut path: Vec<usize> = Vec::new();
    let mut deepest: (Vec<usize>, Vec<usize>) = (Vec::new(), frames[0].cands.clone());
    let mut done = 0usize;
    let mut memo: HashSet<(Vec<u64>, u32)> = HashSet::new();
    let mut explored = 0usize;
    while let Some(frame) = frames.last_mut() {
        if frame.pos >= frame.cands.len() {
            frames.pop();
            if let Some(op) = path.pop() {
                placed[op / 64] &= !(1 << (op % 64));
                done -= usize::from(ops[op].end.is_finite());
            }
            continue;
        }
        let op = frame.cands[frame.pos];
        frame.pos += 1;
        let Some(state) = step(frame.state, ops[op].kind) else {
            continue;
        };
        placed[op / 64] |= 1 << (op % 64);
        let counted = usize::from(ops[op].end.is_finite());
        if done + counted == required {
            return Finding::Linearizable;
        }
        if !memo.insert((placed.clone(), state)) {
            placed[op / 64] &= !(1 << (op % 64));
            continue;
        }
        explored += 1;
        if explored > BUDGET {
            return Finding::Inconclusive;
        }
        done += counted;
        path.push(op);
        let cands = candidates(&placed);
        if path.len() > deepest.0.len() {
            deepest = (path.clone(), cands.clone());
        }
        frames.push(Frame { cands, pos: 0, state });
    }
    let to_records = |v: &[usize]| v.iter().map(|&i| ops[i].record).collect();
    Finding::Violation {
        prefix: to_records(&deepest.0),
        stuck: to_records(&deepest.1),
    }
}

/// Interns register values as small numbers.
#[derive(Debug, Default)]
struct Values(HashMap<Option<String>, u32>);

impl Values {
    fn id(&mut self, v: Option<&str>) -> u32 {
        let next = self.0.len() as u32;
        *self.0.entry(v.map(str::to_string)).or_insert(next)
    }
}

/// Prepares one register's records (indices into `records`) for the search.
fn prepare(records: &[RegisterRecord], indices: &[usize]) -> (Vec<LinOp>, u32) {
    let mut values = Values::default();
    let init = values.id(Some(INITIAL));
    let mut observed: HashSet<&str> = HashSet::new();
    for &i in indices {
        let r = &records[i];
        if r.call.outcome != Outcome::Ok {
            continue;
        }
        match &r.op {
            RegisterOp::Read { value: Some(v), .. } => {
                observed.insert(v);
            }
            RegisterOp::Cas { expected, .. } => {
                observed.insert(expected);
            }
            _ => {}
        }
    }
    let mut ops = Vec::new();
    for &i in indices {
        let r = &records[i];
        let end = match r.call.outcome {
            Outcome::Ok => r.call.end,
            Outcome::Fail => continue,
            Outcome::Unknown => f64::INFINITY,
        };
        let kind = match &r.op {
            RegisterOp::Read { .. } if end.is_infinite() => continue,
            RegisterOp::Read { value, .. } => Kind::Read(values.id(value.as_deref())),
            RegisterOp::Write { value, .. } | RegisterOp::Cas { value, .. }
                if end.is_infinite() && !observed.contains(value.as_str()) =>
            {
                continue
            }
            RegisterOp::Write { value, .. } => Kind::Write(values.id(Some(value))),
            RegisterOp::Cas { expected, value, .. } => {
                Kind::Cas(values.id(Some(expected)), values.id(Some(value)))
            }
        };
        ops.push(LinOp {
            start: r.call.start,
            end,
            kind,
            record: i,
        });
    }
    ops.sort_by(|a, b| a.start.total_cmp(&b.start));
    (ops, init)
}

/// One line describing a record, for witnesses.
pub fn describe(r: &RegisterRecord) -> String {
    let op = match &r.op {
        RegisterOp::Read { value, .. } => format!("read -> {}", value.as_deref().unwrap_or("(not found)")),
        RegisterOp::Write { value, .. } => format!("write {value}"),
        RegisterOp::Cas { expected, value, .. } => format!("cas {expected} -> {value}"),
    };
    format!(
        "[{:8.3}s – {:8.3}s] {:<12} replica {} {op} => {:?}{}",
        r.call.start,
        r.call.end,
        r.client,
        r.call.replica + 1,
        r.call.outcome,
        r.call
            .error
            .as_deref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default()
    )
}

/// Checks every register; returns the violations and the number of inconclusive registers.
pub fn check(records: &[RegisterRecord]) -> (Vec<Violation>, usize) {
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        by_key.entry(r.op.key()).or_default().push(i);
    }
    let mut violations = Vec::new();
    let mut inconclusive = 0;
    for (key, indices) in by_key {
        let (ops, init) = prepare(records, &indices);
        match search(&ops, init) {
            Finding::Linearizable => {}
            Finding::Inconclusive => inconclusive += 1,
            Finding::Violation { prefix, stuck } => {
                let mut detail = vec![format!(
                    "longest linearizable prefix: {} operations; its last ones:",
                    prefix.len()
                )];
                let tail = &prefix[prefix.len().saturating_sub(WITNESS_CONTEXT)..];
                detail.extend(tail.iter().map(|&i| format!("  {}", describe(&records[i]))));
                detail.push("none of these can come next:".into());
                detail.extend(
                    stuck
                        .iter()
                        .take(WITNESS_CONTEXT * 2)
                        .map(|&i| format!("  {}", describe(&records[i]))),
                );
                violations.push(Violation {
                    checker: "linearizability",
                    summary: format!("register {key} has no linearization"),
                    detail,
                });
            }
        }
    }
    (violations, inconclusive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Call;

    fn rec(op: RegisterOp, start: f64, end: f64, outcome: Outcome) -> RegisterRecord {
        RegisterRecord {
            client: "c".into(),
            op,
            call: Call {
                replica: 0,
                start,
                end,
                outcome,
                error: None,
                unavailable: false,
                write: true,
            },
        }
    }
    fn read(v: &str, s: f64, e: f64) -> RegisterRecord {
        rec(
            RegisterOp::Read {
                key: "r".into(),
                value: Some(v.into()),
            },
            s,
            e,
            Outcome::Ok,
        )
    }
    fn write(v: &str, s: f64, e: f64, o: Outcome) -> RegisterRecord {
        rec(
            RegisterOp::Write {
                key: "r".into(),
                value: v.into(),
            },
            s,
            e,
            o,
        )
    }
    fn cas(x: &str, v: &str, s: f64, e: f64, o: Outcome) -> RegisterRecord {
        rec(
            RegisterOp::Cas {
                key: "r".into(),
                expected: x.into(),
                value: v.into(),
            },
            s,
            e,
            o,
        )
    }

    #[test]
    fn sequential_and_concurrent_histories_pass() {
        let h = vec![
            read("init", 0.0, 1.0),
            write("a", 1.5, 2.0, Outcome::Ok),
            cas("a", "b", 2.5, 4.0, Outcome::Ok),
            read("a", 3.0, 3.5),
            read("b", 4.5, 5.0),
        ];
        assert_eq!(check(&h), (vec![], 0));
    }

    #[test]
    fn a_stale_read_is_a_violation_with_a_witness() {
        let h = vec![write("a", 0.0, 1.0, Outcome::Ok), read("init", 2.0, 3.0)];
        let (v, _) = check(&h);
        assert_eq!(v.len(), 1);
        assert!(
            v[0].detail.iter().any(|l| l.contains("read -> init")),
            "{:?}",
            v[0].detail
        );
    }

    #[test]
    fn a_lost_acknowledged_write_is_a_violation() {
        let h = vec![
            cas("init", "a", 0.0, 1.0, Outcome::Ok),
            read("a", 1.1, 1.2),
            write("b", 2.0, 3.0, Outcome::Ok),
            read("a", 4.0, 5.0),
        ];
        assert_eq!(check(&h).0.len(), 1);
    }

    #[test]
    fn unknown_writes_may_apply_late_or_never() {
        // The timed-out write of "a" shows up long after it was invoked.
        let h = vec![
            write("a", 0.0, 0.5, Outcome::Unknown),
            read("init", 1.0, 2.0),
            read("a", 5.0, 6.0),
        ];
        assert_eq!(check(&h), (vec![], 0));
        // ... or never: an unobserved unknown write is irrelevant.
        let h = vec![
            write("x", 0.0, 0.5, Outcome::Unknown),
            read("init", 1.0, 2.0),
            read("init", 3.0, 4.0),
        ];
        assert_eq!(check(&h), (vec![], 0));
        // But it cannot apply before it was invoked.
        let h = vec![read("a", 0.0, 1.0), write("a", 2.0, 2.5, Outcome::Unknown)];
        assert_eq!(check(&h).0.len(), 1);
    }

    #[test]
    fn failed_operations_have_no_effect() {
        let h = vec![cas("init", "a", 0.0, 1.0, Outcome::Fail), read("a", 2.0, 3.0)];
        assert_eq!(check(&h).0.len(), 1);
        let h = vec![cas("zzz", "a", 0.0, 1.0, Outcome::Fail), read("init", 2.0, 3.0)];
        assert_eq!(check(&h), (vec![], 0));
    }

    #[test]
    fn two_cas_from_the_same_value_cannot_both_succeed() {
        let h = vec![
            cas("init", "a", 0.0, 1.0, Outcome::Ok),
            cas("init", "b", 0.0, 1.0, Outcome::Ok),
        ];
        assert_eq!(check(&h).0.len(), 1);
    }
}
