//! `Priority`: a new pod's `priority` and `preemptionPolicy` from its `priorityClassName` (the
//! system classes every cluster has; no class is priority 0).

use serde_json::{json, Value};

use super::{Attributes, Mutating, Operation};
use crate::machinery::errors::ApiResult;

/// The plugin.
pub struct Priority;

/// The built-in PriorityClasses every cluster has, with their values.
const SYSTEM_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

impl Mutating for Priority {
    fn name(&self) -> &'static str {
        "Priority"
    }

    fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if attrs.operation != Operation::Create || (attrs.group, attrs.resource) != ("", "pods") {
            return Ok(());
        }
        let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let class = spec
            .get("priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or("");
        let priority = match class {
            "" => Some(0),
            named => SYSTEM_PRIORITY_CLASSES
                .iter()
                .find(|(n, _)| *n == named)
                .map(|(_, v)| *v),
        };
        if let Some(p) = priority {
            spec.entry("priority").or_insert(json!(p));
            spec.entry("preemptionPolicy")
                .or_insert(json!("PreemptLowerPriority"));
        }
        Ok(())
    }
}
