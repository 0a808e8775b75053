//! `DefaultTolerationSeconds`: a new pod tolerates `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` for 300 seconds unless it says otherwise.

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

use super::{Attributes, Mutating, Operation};
use crate::machinery::errors::ApiResult;
use crate::store::Store;

/// The plugin.
pub struct DefaultTolerationSeconds;

impl Mutating for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn admit<'a>(
        &'a self,
        _store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        if attrs.operation == Operation::Create && (attrs.group, attrs.resource) == ("", "pods") {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                default_tolerations(spec);
            }
        }
        Box::pin(std::future::ready(Ok(())))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_tolerate_unready_and_unreachable_nodes_for_five_minutes() {
        let mut spec = Map::new();
        default_tolerations(&mut spec);
        assert_eq!(
            Value::Object(spec),
            json!({"tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ]})
        );
        let mut everything = json!({"tolerations": [{"operator": "Exists"}]});
        if let Some(spec) = everything.as_object_mut() {
            default_tolerations(spec);
        }
        assert_eq!(everything["tolerations"].as_array().map(Vec::len), Some(1));
    }
}
