//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in types:
//! a JSON merge patch whose lists merge by the schema's `x-kubernetes-patch-merge-key` where
//! the field's `x-kubernetes-patch-strategy` says `merge`, with the directives kubectl sends:
//! `$patch: replace | delete | merge`, `$deleteFromPrimitiveList/<field>`,
//! `$setElementOrder/<field>` and `$retainKeys`.
//!
//! The merge metadata comes from [`crate::machinery::schema`], i.e. from the generated type facts, so
//! every built-in type is covered, not a hand-picked few.

use serde_json::{Map, Value};

use crate::machinery::schema::{Node, Shape};

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// A patch that cannot be applied; kube-apiserver answers these with `422`… or `400` for a
/// malformed directive, which is what this module reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

type Result<T> = std::result::Result<T, PatchError>;

/// Applies strategic merge patch `patch` to `original`, whose schema is `node`.
pub fn apply(original: &mut Value, patch: &Value, node: Option<Node<'_>>) -> Result<()> {
    let Value::Object(patch) = patch else {
        return Err(PatchError("a strategic merge patch must be a JSON object".into()));
    };
    match patch.get(PATCH).and_then(Value::as_str) {
        Some("replace") => {
            *original = strip(&Value::Object(patch.clone()));
            return Ok(());
        }
        Some("delete") => {
            *original = Value::Object(Map::new());
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(PatchError(format!("Unknown patch type: {other}"))),
    }
    if !original.is_object() {
        *original = Value::Object(Map::new());
    }
    let Value::Object(target) = original else {
        return Ok(());
    };
    merge_object(target, patch, node)
}

/// The child schema of a field of a struct or a value of a map.
fn child<'a>(node: Option<Node<'a>>, key: &str) -> Option<Node<'a>> {
    let node = node?;
    match node.shape() {
        Shape::Struct => node.field(key),
        Shape::Map => node.element(),
        _ => None,
    }
}

fn merge_object(
    target: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    node: Option<Node<'_>>,
) -> Result<()> {
    for (key, value) in patch {
        if key == PATCH || key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(doomed) = value else {
                return Err(PatchError(format!("{key} must be a list")));
            };
            if let Some(Value::Array(items)) = target.get_mut(field) {
                items.retain(|i| !doomed.contains(i));
            }
            continue;
        }
        let field_node = child(node, key);
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(p) if p.get(PATCH).and_then(Value::as_str) == Some("delete") => {
                target.remove(key);
            }
            Value::Object(p) => match target.get_mut(key) {
                Some(existing @ Value::Object(_)) if !replaces(field_node) => {
                    apply(existing, value, field_node)?;
                }
                _ if p.get(PATCH).and_then(Value::as_str) == Some("replace") || replaces(field_node) => {
                    target.insert(key.clone(), strip(value));
                }
                _ => {
                    let mut fresh = Value::Object(Map::new());
                    apply(&mut fresh, value, field_node)?;
                    target.insert(key.clone(), fresh);
                }
            },
            Value::Array(items) => {
                let merged = match (target.remove(key), field_node) {
                    (Some(Value::Array(existing)), Some(n)) if n.has_patch_strategy("merge") => {
                        merge_list(existing, items, n)?
                    }
                    _ => replace_list(items)?,
                };
                target.insert(key.clone(), Value::Array(merged));
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (key, order) in patch {
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            let Value::Array(order) = order else {
                return Err(PatchError(format!("{key} must be a list")));
            };
            if let Some(Value::Array(items)) = target.get_mut(field) {
                let merge_key = child(node, field).and_then(|n| n.merge_key());
                reorder(items, order, merge_key);
            }
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keep) = retain else {
            return Err(PatchError("$retainKeys must be a list".into()));
        };
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

/// Whether the field's strategy replaces it whole.
fn replaces(node: Option<Node<'_>>) -> bool {
    node.is_some_and(|n| n.has_patch_strategy("replace"))
}

/// A list patch without merge semantics: the patch's items (without directives) replace it.
fn replace_list(items: &[Value]) -> Result<Vec<Value>> {
    Ok(items
        .iter()
        .filter(|i| i.get(PATCH).is_none())
        .map(strip)
        .collect())
}

/// The merge key value of a list item, if it has one.
fn key_of<'v>(item: &'v Value, merge_key: &str) -> Option<&'v Value> {
    item.get(merge_key)
}

fn merge_list(mut existing: Vec<Value>, patch: &[Value], node: Node<'_>) -> Result<Vec<Value>> {
    if patch
        .iter()
        .any(|i| i.get(PATCH).and_then(Value::as_str) == Some("replace"))
    {
        return replace_list(patch);
    }
    let element = node.element();
    let Some(merge_key) = node.merge_key() else {
        // A set of primitives: union, keeping the existing order.
        for item in patch {
            if !existing.contains(item) {
                existing.push(item.clone());
            }
        }
        return Ok(existing);
    };
    for item in patch {
        if !item.is_object() {
            if !existing.contains(item) {
                existing.push(item.clone());
            }
            continue;
        }
        let Some(key) = key_of(item, merge_key) else {
            return Err(PatchError(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            )));
        };
        let position = existing.iter().position(|e| key_of(e, merge_key) == Some(key));
        match (item.get(PATCH).and_then(Value::as_str), position) {
            (Some("delete"), Some(i)) => {
                existing.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => apply(&mut existing[i], item, element)?,
            (_, None) => {
                let mut fresh = Value::Object(Map::new());
                apply(&mut fresh, item, element)?;
                existing.push(fresh);
            }
        }
    }
    Ok(existing)
}

/// Orders `items` as `order` lists them (by merge key for objects); items it does not name keep
/// their relative order after the named ones.
fn reorder(items: &mut [Value], order: &[Value], merge_key: Option<&str>) {
    let rank = |item: &Value| {
        let id = match merge_key {
            Some(k) => item.get(k),
            None => Some(item),
        };
        order
            .iter()
            .position(|o| match merge_key {
                Some(k) => o.get(k) == id,
                None => Some(o) == id,
            })
            .unwrap_or(usize::MAX)
    };
    items.sort_by_key(rank);
}

/// A patch value with every directive removed, for where it is stored as is.
fn strip(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    k.as_str() != PATCH
                        && k.as_str() != RETAIN_KEYS
                        && !k.starts_with(SET_ELEMENT_ORDER)
                        && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
                })
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machinery::schema::schemas;
    use crate::scheme::Registry;

    fn patched(plural: &str, group: &str, original: Value, patch: Value) -> Value {
        let registry = Registry::new();
        let rt = registry.lookup(group, "v1", plural).expect("served");
        let mut doc = original;
        apply(&mut doc, &patch, schemas().kind(rt)).expect("applies");
        doc
    }

    fn pod(containers: Value) -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}, "spec": {"containers": containers}})
    }

    #[test]
    fn containers_merge_by_name_and_scalars_replace() {
        let out = patched(
            "pods",
            "",
            pod(
                json!([{"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}, {"name": "side", "image": "busybox"}]),
            ),
            json!({"metadata": {"labels": {"b": null, "c": "3"}},
                   "spec": {"containers": [{"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "2"}]}, {"name": "new", "image": "redis"}]}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        let c = &out["spec"]["containers"];
        assert_eq!(c.as_array().map(Vec::len), Some(3));
        assert_eq!(c[0]["image"], "nginx:2");
        assert_eq!(
            c[0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(c[1]["name"], "side");
        assert_eq!(c[2], json!({"name": "new", "image": "redis"}));
    }

    #[test]
    fn directives_delete_replace_and_order() {
        let original = pod(
            json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}, {"name": "c", "image": "3"}]),
        );
        let out = patched(
            "pods",
            "",
            original.clone(),
            json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}),
        );
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "c"]);
        let out = patched(
            "pods",
            "",
            original.clone(),
            json!({"spec": {"containers": [{"name": "z", "image": "9"}, {"$patch": "replace"}]}}),
        );
        assert_eq!(out["spec"]["containers"], json!([{"name": "z", "image": "9"}]));
        let out = patched(
            "pods",
            "",
            original.clone(),
            json!({"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}, {"name": "b"}], "containers": [{"name": "a", "image": "1b"}]}}),
        );
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["c", "a", "b"]);
        assert_eq!(out["spec"]["containers"][1]["image"], "1b");
        let out = patched(
            "pods",
            "",
            original,
            json!({"metadata": {"labels": {"$patch": "replace", "only": "x"}}}),
        );
        assert_eq!(out["metadata"]["labels"], json!({"only": "x"}));
    }

    #[test]
    fn primitive_lists_retain_keys_and_atomic_lists() {
        let original = json!({"metadata": {"name": "p", "finalizers": ["a", "b"]},
            "spec": {"containers": [{"name": "c", "image": "i", "args": ["x", "y"]}],
                     "tolerations": [{"key": "k1"}],
                     "volumes": [{"name": "v", "emptyDir": {}}]}});
        let out = patched(
            "pods",
            "",
            original,
            json!({"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
                   "spec": {"containers": [{"name": "c", "args": ["z"]}],
                            "tolerations": [{"key": "k2"}],
                            "volumes": [{"name": "v", "$retainKeys": ["name", "configMap"], "configMap": {"name": "cm"}}]}}),
        );
        // finalizers merge (union), then the deletion directive removes "a".
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
        // args have no merge strategy: replaced.
        assert_eq!(out["spec"]["containers"][0]["args"], json!(["z"]));
        // tolerations are atomic: replaced.
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "k2"}]));
        // retainKeys clears the volume source the patch did not keep.
        assert_eq!(
            out["spec"]["volumes"],
            json!([{"name": "v", "configMap": {"name": "cm"}}])
        );
    }

    #[test]
    fn deployment_template_and_bad_patches() {
        let original = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "a", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]}}}});
        let out = patched(
            "deployments",
            "apps",
            original.clone(),
            json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "w", "ports": [{"containerPort": 443}]}]}}}}),
        );
        assert_eq!(out["spec"]["replicas"], 3);
        assert_eq!(
            out["spec"]["template"]["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}])
        );
        let registry = Registry::new();
        let rt = registry.lookup("apps", "v1", "deployments").unwrap();
        let mut doc = original;
        let bad = json!({"spec": {"template": {"spec": {"containers": [{"image": "no-name"}]}}}});
        assert!(apply(&mut doc, &bad, schemas().kind(rt)).is_err());
        assert!(apply(&mut doc, &json!([1]), schemas().kind(rt)).is_err());
        assert!(apply(&mut doc, &json!({"$patch": "explode"}), schemas().kind(rt)).is_err());
    }
}
