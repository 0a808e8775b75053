//! events.k8s.io/v1 Events and core v1 Events are one kind of object under two names (kube
//! stores both as core Events): kube's `pkg/apis/events/v1` conversion renames the fields
//! that differ and keeps the rest (`action`, `reason`, `related`, `series`, `type`,
//! `eventTime`, `reportingInstance`). The renames are data ([`RENAMED`]), read both ways.

use serde_json::Value;

/// `(events.k8s.io/v1 field, core v1 field)`.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(fields) = obj.as_object_mut() else {
        return;
    };
    let moved: Vec<(&str, Option<Value>)> = pairs.map(|(from, to)| (to, fields.remove(from))).collect();
    for (to, value) in moved {
        match value {
            Some(v) => {
                fields.insert(to.to_string(), v);
            }
            None => {
                fields.remove(to);
            }
        }
    }
}

/// An events.k8s.io/v1 Event's fields as a core v1 Event's (`apiVersion` is the caller's).
pub fn to_core(obj: &mut Value) {
    rename(obj, RENAMED.into_iter());
}

/// A core v1 Event's fields as an events.k8s.io/v1 Event's (`apiVersion` is the caller's).
pub fn from_core(obj: &mut Value) {
    rename(obj, RENAMED.into_iter().map(|(events, core)| (core, events)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The renamed fields go both ways; the shared ones stay; nothing is lost.
    #[test]
    fn core_and_events_fields_are_renamed_both_ways() {
        let core = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "web"},
            "message": "hello", "reason": "Started", "count": 2, "reportingComponent": "kubelet",
            "source": {"component": "kubelet"}, "type": "Normal"});
        let mut events = core.clone();
        from_core(&mut events);
        assert_eq!(
            events,
            json!({"metadata": {"name": "e"}, "regarding": {"kind": "Pod", "name": "web"},
                "note": "hello", "reason": "Started", "deprecatedCount": 2,
                "reportingController": "kubelet", "deprecatedSource": {"component": "kubelet"},
                "type": "Normal"})
        );
        to_core(&mut events);
        assert_eq!(events, core);
    }
}
