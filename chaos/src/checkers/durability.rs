//! Durability of the churn objects: after healing, every acknowledged create whose object was
//! not (possibly) deleted is there with its id, every acknowledged delete is gone, and no object
//! exists that no create could have written. (Registers' durability is part of their
//! linearizability check: their final values are read after healing and must fit.)

use std::collections::{BTreeMap, HashMap};

use crate::checkers::Violation;
use crate::history::{ChurnRecord, Outcome};
use crate::workloads::churn::PREFIX;

/// Checks `final_state` (name → (rv, content = the object's id)) against the churn history.
pub fn check(churn: &[ChurnRecord], final_state: &BTreeMap<String, (u64, String)>) -> Vec<Violation> {
    let mut out = Vec::new();
    let creates: HashMap<&str, &ChurnRecord> = churn
        .iter()
        .filter(|c| c.action == "create")
        .map(|c| (c.id.as_str(), c))
        .collect();
    // Names whose delete may have happened (acknowledged or unknown).
    let mut deleted: HashMap<&str, Outcome> = HashMap::new();
    for d in churn
        .iter()
        .filter(|c| c.action == "delete" && c.call.outcome != Outcome::Fail)
    {
        if let Some(n) = &d.name {
            deleted.insert(n, d.call.outcome);
        }
    }
    for c in creates.values().filter(|c| c.call.outcome == Outcome::Ok) {
        let Some(name) = c.name.as_deref() else {
            continue;
        };
        let present = final_state.get(name);
        match (deleted.get(name), present) {
            (None, None) => out.push(Violation {
                checker: "durability",
                summary: format!("acknowledged create of {name} (id {}) is lost", c.id),
                detail: vec![format!(
                    "created at {:.3}–{:.3}s on replica {}",
                    c.call.start,
                    c.call.end,
                    c.call.replica + 1
                )],
            }),
            (None, Some((_, id))) if id != &c.id => out.push(Violation {
                checker: "durability",
                summary: format!(
                    "{name} holds id {id:?}, but its acknowledged create wrote {:?}",
                    c.id
                ),
                detail: vec![],
            }),
            (Some(Outcome::Ok), Some(_)) => out.push(Violation {
                checker: "durability",
                summary: format!("{name} was deleted (acknowledged) but exists after healing"),
                detail: vec![],
            }),
            _ => {}
        }
    }
    for (name, (_, id)) in final_state.iter().filter(|(n, _)| n.starts_with(PREFIX)) {
        match creates.get(id.as_str()) {
            None => out.push(Violation {
                checker: "durability",
                summary: format!("{name} (id {id:?}) exists but was never written"),
                detail: vec![],
            }),
            Some(c) if c.call.outcome == Outcome::Fail => out.push(Violation {
                checker: "durability",
                summary: format!("{name} (id {id:?}) exists although its create failed definitely"),
                detail: vec![format!("{:?}", c.call.error)],
            }),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Call;

    fn rec(id: &str, action: &'static str, name: Option<&str>, outcome: Outcome) -> ChurnRecord {
        ChurnRecord {
            id: id.into(),
            action,
            name: name.map(str::to_string),
            call: Call {
                replica: 0,
                start: 0.0,
                end: 1.0,
                outcome,
                error: None,
                unavailable: false,
                write: true,
            },
        }
    }

    fn state(entries: &[(&str, &str)]) -> BTreeMap<String, (u64, String)> {
        entries
            .iter()
            .map(|(n, id)| (n.to_string(), (1, id.to_string())))
            .collect()
    }

    #[test]
    fn acknowledged_creates_survive_and_deletes_stick() {
        let h = vec![
            rec("a", "create", Some("churn-a"), Outcome::Ok),
            rec("b", "create", Some("churn-b"), Outcome::Ok),
            rec("b", "delete", Some("churn-b"), Outcome::Ok),
            rec("c", "create", None, Outcome::Unknown),
        ];
        assert!(check(&h, &state(&[("churn-a", "a"), ("churn-x", "c")])).is_empty());
        assert!(
            check(&h, &state(&[("churn-a", "a")])).is_empty(),
            "an unknown create may be lost"
        );
        assert_eq!(check(&h, &state(&[])).len(), 1, "lost acknowledged create");
        assert_eq!(
            check(&h, &state(&[("churn-a", "a"), ("churn-b", "b")])).len(),
            1,
            "resurrected"
        );
        assert_eq!(
            check(&h, &state(&[("churn-a", "a"), ("churn-z", "zz")])).len(),
            1,
            "phantom"
        );
    }
}
