//! ReplicationControllers: a generation, a zero status, dependents orphaned by default (kept
//! in `v1` for backward compatibility), and a Scale selector printed from the plain label map
//! they select by, not from a `LabelSelector`.

use serde_json::{json, Value};

use crate::kinds::printers::format_labels;
use crate::kinds::strategy::Builtin;
use crate::registry::strategy::GcPolicy;

/// The ReplicationController strategy.
pub const REPLICATION_CONTROLLER: Builtin = Builtin {
    generation: true,
    initial_status: Some(|| json!({"replicas": 0})),
    scale_selector: Some(scale_selector),
    gc: GcPolicy::Orphan,
    ..Builtin::new("", "ReplicationController")
};

fn scale_selector(rc: &Value) -> String {
    match format_labels(&rc["spec"]["selector"]) {
        s if s == "<none>" => String::new(),
        s => s,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::ServiceRanges;
    use crate::kinds::strategy::registry;
    use crate::registry::scale::to_scale;

    #[test]
    fn the_scale_selector_is_the_label_map() {
        let r = registry(&ServiceRanges::default());
        let rc = r.lookup("", "v1", "replicationcontrollers").unwrap();
        let zero = to_scale(
            rc,
            &json!({"metadata": {"name": "r"}, "spec": {"replicas": 0, "selector": {"b": "2", "a": "1"}}}),
        );
        assert_eq!(zero["spec"], json!({}));
        assert_eq!(zero["status"], json!({"replicas": 0, "selector": "a=1,b=2"}));
    }
}
