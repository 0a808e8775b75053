//! `Priority`: a new pod's `priority` and `preemptionPolicy` from its `priorityClassName` (the
//! system classes every cluster has; no class is priority 0).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::{Attributes, Mutating, Operation};
use crate::machinery::errors::ApiResult;
use crate::store::Store;

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

    fn admit<'a>(
        &'a self,
        _store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        prioritize(attrs, obj);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Sets the priority of a pod being created.
fn prioritize(attrs: &Attributes<'_>, obj: &mut Value) {
    if attrs.operation != Operation::Create || (attrs.group, attrs.resource) != ("", "pods") {
        return;
    }
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::tests::pod_create;

    #[test]
    fn pods_get_the_priority_of_their_class() {
        let mut plain = json!({"spec": {"containers": []}});
        prioritize(&pod_create(), &mut plain);
        assert_eq!(plain["spec"]["priority"], 0);
        assert_eq!(plain["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        let mut critical = json!({"spec": {"priorityClassName": "system-node-critical"}});
        prioritize(&pod_create(), &mut critical);
        assert_eq!(critical["spec"]["priority"], 2_000_001_000);
        let mut unknown = json!({"spec": {"priorityClassName": "batch"}});
        prioritize(&pod_create(), &mut unknown);
        assert!(unknown["spec"].get("priority").is_none());
    }
}
