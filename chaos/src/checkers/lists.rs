//! Paginated lists: every page of one list is served at the same resourceVersion, items come
//! in key order without repeats, and the whole list equals the store's state at that revision
//! (from the reference history) — a consistent snapshot even while writes go on.

use crate::checkers::{diff, Reference, Violation};
use crate::history::ListRecord;

/// Checks every complete list.
pub fn check(lists: &[ListRecord], reference: &Reference) -> Vec<Violation> {
    let mut out = Vec::new();
    for l in lists {
        let violation = |summary: String, detail: Vec<String>| Violation {
            checker: "list",
            summary: format!("{} list at {:.3}s: {summary}", l.client, l.start),
            detail,
        };
        let Some(&rv) = l.page_rvs.first() else {
            continue;
        };
        if l.page_rvs.iter().any(|&p| p != rv) {
            out.push(violation(
                format!("pages at different resourceVersions {:?}", l.page_rvs),
                vec![],
            ));
            continue;
        }
        if let Some(w) = l.items.windows(2).find(|w| w[0].0 >= w[1].0) {
            out.push(violation(
                "items not in strictly increasing name order".into(),
                vec![format!("{} then {}", w[0].0, w[1].0)],
            ));
        }
        if rv < reference.start_rv {
            continue;
        }
        let expected: std::collections::BTreeMap<String, (u64, String)> = reference
            .state_at(rv)
            .into_iter()
            .map(|(k, (r, _))| (k, (r, String::new())))
            .collect();
        let got = l
            .items
            .iter()
            .map(|(k, r)| (k.clone(), (*r, String::new())))
            .collect();
        let d = diff(&expected, &got);
        if !d.is_empty() {
            out.push(violation(format!("not the store's state at rv {rv}"), d));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::WatchEvent;

    fn reference() -> Reference {
        let ev = |kind: &str, name: &str, rv| WatchEvent {
            kind: kind.into(),
            name: name.into(),
            rv,
            content: String::new(),
        };
        Reference {
            start_rv: 10,
            initial: [("a".to_string(), (5, String::new()))].into(),
            events: vec![ev("ADDED", "b", 11), ev("DELETED", "a", 12)],
            final_revision: 12,
        }
    }

    fn list(page_rvs: Vec<u64>, items: &[(&str, u64)]) -> ListRecord {
        ListRecord {
            client: "l".into(),
            page_rvs,
            items: items.iter().map(|(n, r)| (n.to_string(), *r)).collect(),
            start: 0.0,
        }
    }

    #[test]
    fn lists_must_be_snapshots_at_one_revision() {
        let r = reference();
        assert!(check(&[list(vec![11, 11], &[("a", 5), ("b", 11)])], &r).is_empty());
        assert!(check(&[list(vec![12], &[("b", 11)])], &r).is_empty());
        assert_eq!(check(&[list(vec![11, 12], &[("a", 5), ("b", 11)])], &r).len(), 1);
        assert_eq!(check(&[list(vec![12], &[("a", 5), ("b", 11)])], &r).len(), 1);
        assert_eq!(check(&[list(vec![11], &[("b", 11), ("a", 5)])], &r).len(), 1);
    }
}
