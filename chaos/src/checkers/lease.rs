//! Lease safety: at most one holder per lease term (`spec.leaseTransitions`), and no two
//! candidates believing they lead at the same time. A candidate believes it leads from the
//! acknowledgement of each successful acquire or renew until that call's start plus the renew
//! deadline (client-go's rule); all times are on the harness's one clock.

use std::collections::BTreeMap;

use crate::checkers::Violation;
use crate::history::LeaseRecord;
use crate::workloads::lease::RENEW_DEADLINE;

/// Checks the acknowledged Lease writes.
pub fn check(leases: &[LeaseRecord]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut holders: BTreeMap<u64, Vec<&LeaseRecord>> = BTreeMap::new();
    for l in leases {
        holders.entry(l.term).or_default().push(l);
    }
    for (term, writes) in &holders {
        if writes.iter().any(|w| w.holder != writes[0].holder) {
            out.push(Violation {
                checker: "lease",
                summary: format!("term {term} has more than one holder"),
                detail: writes.iter().map(|w| show(w)).collect(),
            });
        }
    }
    let deadline = RENEW_DEADLINE.as_secs_f64();
    let mut beliefs: Vec<(f64, f64, &LeaseRecord)> = leases
        .iter()
        .map(|l| (l.call.end, l.call.start + deadline, l))
        .filter(|(from, to, _)| from < to)
        .collect();
    beliefs.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (i, a) in beliefs.iter().enumerate() {
        if let Some(b) = beliefs[i + 1..]
            .iter()
            .take_while(|b| b.0 < a.1)
            .find(|b| b.2.holder != a.2.holder)
        {
            out.push(Violation {
                checker: "lease",
                summary: format!("{} and {} both led at {:.3}s", a.2.holder, b.2.holder, b.0),
                detail: vec![show(a.2), show(b.2)],
            });
            break;
        }
    }
    out
}

fn show(l: &LeaseRecord) -> String {
    format!(
        "[{:8.3}s – {:8.3}s] {} {} term {} via replica {}",
        l.call.start,
        l.call.end,
        l.candidate,
        l.action,
        l.term,
        l.call.replica + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Call, Outcome};

    fn rec(holder: &str, term: u64, start: f64, end: f64) -> LeaseRecord {
        LeaseRecord {
            candidate: holder.into(),
            action: "renew",
            term,
            holder: holder.into(),
            call: Call {
                replica: 0,
                start,
                end,
                outcome: Outcome::Ok,
                error: None,
                unavailable: false,
                write: true,
            },
        }
    }

    #[test]
    fn handover_after_the_deadline_is_safe() {
        let h = vec![
            rec("a", 0, 0.0, 0.1),
            rec("a", 0, 1.0, 1.1),
            rec("b", 1, 4.5, 4.6),
        ];
        assert!(check(&h).is_empty());
    }

    #[test]
    fn two_holders_of_a_term_or_overlapping_beliefs_are_violations() {
        let h = vec![rec("a", 1, 0.0, 0.1), rec("b", 1, 5.0, 5.1)];
        assert_eq!(check(&h).len(), 1);
        let h = vec![rec("a", 0, 0.0, 0.1), rec("b", 1, 0.5, 0.6)];
        assert_eq!(check(&h).len(), 1);
    }
}
