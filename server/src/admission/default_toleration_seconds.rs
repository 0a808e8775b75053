//! `DefaultTolerationSeconds`: a new pod tolerates `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` for 300 seconds unless it says otherwise.

use serde_json::{json, Map, Value};

use super::{Attributes, Mutating, Operation};
use crate::machinery::errors::ApiResult;

/// The plugin.
pub struct DefaultTolerationSeconds;

impl Mutating for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn admit(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        if attrs.operation != Operation::Create || (attrs.group, attrs.resource) != ("", "pods") {
            return Ok(());
        }
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            default_tolerations(spec);
        }
        Ok(())
    }
}

fn default_tolerations(spec: &mut Map<String, Value>) {
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if tolerations.is_null() {
        *tolerations = json!([]);
    }
    let Some(list) = tolerations.as_array_mut() else {
        return;
    };
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        let tolerated = list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if !tolerated {
            list.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
            );
        }
    }
}
