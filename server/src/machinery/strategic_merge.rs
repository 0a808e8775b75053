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
    // The lists a `$setElementOrder` orders, as they were before the patch: their order
    // places the items the directive does not name.
    let before: Vec<(&str, Vec<Value>)> = patch
        .keys()
        .filter_map(|k| k.strip_prefix(SET_ELEMENT_ORDER))
        .map(|field| match target.get(field) {
            Some(Value::Array(items)) => (field, items.clone()),
            _ => (field, Vec::new()),
        })
        .collect();
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
    for (field, server_order) in before {
        let key = format!("{SET_ELEMENT_ORDER}{field}");
        let Some(Value::Array(order)) = patch.get(&key) else {
            return Err(PatchError(format!("{key} must be a list")));
        };
        if let Some(Value::Array(items)) = target.get_mut(field) {
            let merge_key = child(node, field).and_then(|n| n.merge_key());
            *items = normalize_order(std::mem::take(items), order, &server_order, merge_key);
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
        // A set of primitives: union.
        let server_order = existing.clone();
        for item in patch {
            if !existing.contains(item) {
                existing.push(item.clone());
            }
        }
        return Ok(normalize_order(existing, patch, &server_order, None));
    };
    // Deletions first, as kube does: what is left is the order the other items keep.
    for item in patch {
        if item.get(PATCH).and_then(Value::as_str) != Some("delete") {
            continue;
        }
        let Some(key) = key_of(item, merge_key) else {
            return Err(PatchError(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            )));
        };
        existing.retain(|e| key_of(e, merge_key) != Some(key));
    }
    let server_order = existing.clone();
    let mut patch_order = Vec::with_capacity(patch.len());
    for item in patch {
        match item.get(PATCH).and_then(Value::as_str) {
            Some("delete") => continue,
            Some("merge") => {
                return Err(PatchError(
                    "merging lists cannot yet be specified in the patch".into(),
                ))
            }
            Some(other) => return Err(PatchError(format!("Unknown patch type: {other}"))),
            None => {}
        }
        patch_order.push(item.clone());
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
        match existing.iter().position(|e| key_of(e, merge_key) == Some(key)) {
            Some(i) => apply(&mut existing[i], item, element)?,
            None => {
                let mut fresh = Value::Object(Map::new());
                apply(&mut fresh, item, element)?;
                existing.push(fresh);
            }
        }
    }
    Ok(normalize_order(
        existing,
        &patch_order,
        &server_order,
        Some(merge_key),
    ))
}

/// The position of `item` in `list`, by merge key for objects.
fn index_in(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    match merge_key {
        Some(k) if item.is_object() => {
            let id = item.get(k)?;
            list.iter().position(|o| o.get(k) == Some(id))
        }
        _ => list.iter().position(|o| o == item),
    }
}

/// kube's order for a merged list: the items the patch names (`patch_order`) in the patch's
/// order, and the others in the order the list had (`server_order`), interleaved by that
/// order where both are in it; otherwise a patch item comes first.
fn normalize_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let (mut named, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| index_in(patch_order, item, merge_key).is_some());
    named.sort_by_key(|item| index_in(patch_order, item, merge_key));
    server_only.sort_by_key(|item| index_in(server_order, item, merge_key));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let mut named = named.into_iter().peekable();
    let mut server_only = server_only.into_iter().peekable();
    loop {
        let take_server = match (server_only.peek(), named.peek()) {
            (Some(s), Some(n)) => matches!(
                (index_in(server_order, s, merge_key), index_in(server_order, n, merge_key)),
                (Some(si), Some(ni)) if si < ni
            ),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        let next = if take_server {
            server_only.next()
        } else {
            named.next()
        };
        out.extend(next);
    }
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
        // kube's order: the patch's items in its order, the others placed by the old order
        // where both are in it, else after the patch's.
        let c = &out["spec"]["containers"];
        assert_eq!(c.as_array().map(Vec::len), Some(3));
        assert_eq!(c[0]["image"], "nginx:2");
        assert_eq!(
            c[0]["env"],
            json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}])
        );
        assert_eq!(c[1], json!({"name": "new", "image": "redis"}));
        assert_eq!(c[2]["name"], "side");
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
    fn merged_lists_take_kube_apiserver_order() {
        let names = |out: &Value| -> Vec<String> {
            out["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect()
        };
        let original = pod(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
        let cases = [
            // The old items before the patched one stay before it; a new one follows the patch's.
            (
                json!([{"name": "c", "image": "x"}, {"name": "d"}]),
                ["a", "b", "c", "d"].as_slice(),
            ),
            // A new item named right after an old one comes before the old items after it.
            (
                json!([{"name": "a", "image": "x"}, {"name": "d"}]),
                &["a", "d", "b", "c"],
            ),
            // The patch's own order wins over the old one for the items it names.
            (
                json!([{"name": "c", "image": "x"}, {"name": "a", "image": "y"}]),
                &["b", "c", "a"],
            ),
        ];
        for (containers, expected) in cases {
            let patch = json!({"spec": {"containers": containers}});
            let out = patched("pods", "", original.clone(), patch.clone());
            assert_eq!(names(&out), expected, "{patch}");
        }
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
        // finalizers merge (union, the patch's first), the deletion directive removes "a".
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "b"]));
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
            json!([{"containerPort": 443}, {"containerPort": 80, "protocol": "TCP"}])
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
