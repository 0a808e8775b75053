//! The checks every built-in object gets from its published schema, so that no type is stored
//! with what its definition says it cannot have: required properties present, list-map items
//! carrying their keys and unique by them, and enumerated strings among their values — worded
//! as kube-apiserver's field errors (`Required value`, `Duplicate value: …`,
//! `Unsupported value: …`).
//!
//! The object's `status` is left out: it is written by controllers through its own
//! subresource, and kube validates it apart from the spec.

use serde_json::Value;

use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;
use crate::machinery::schema::{ListType, Node, Shape};

/// Nesting beyond which the walk stops (objects are bounded by the request size; this bounds
/// the recursion too).
const MAX_DEPTH: usize = 64;

/// Lists whose schema keys them but whose duplicates kube-apiserver accepts (it only warns),
/// by property and item type: a container's `env` and `ports`, a pod's `imagePullSecrets` and
/// `hostAliases`, a ServiceAccount's `secrets`.
const DUPLICATES_ACCEPTED: &[(&str, &str)] = &[
    ("env", "EnvVar"),
    ("ports", "ContainerPort"),
    ("imagePullSecrets", "LocalObjectReference"),
    ("hostAliases", "HostAlias"),
    ("secrets", "ObjectReference"),
];

/// What `obj` lacks or repeats by its schema `root`, in document order.
pub fn check(root: Node<'_>, obj: &Value) -> Causes {
    let mut causes = Causes::new();
    if let Some(o) = obj.as_object() {
        for (name, value) in o.iter().filter(|(k, _)| k.as_str() != "status") {
            if let Some(field) = root.field(name) {
                walk(field, value, name, 0, &mut causes);
            }
        }
        required(root, o, "", &mut causes);
    }
    causes
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn required(node: Node<'_>, o: &serde_json::Map<String, Value>, path: &str, causes: &mut Causes) {
    for name in node.required() {
        if o.get(name).is_none_or(Value::is_null) {
            causes.push((join(path, name), "Required value".to_string()));
        }
    }
}

fn walk(node: Node<'_>, value: &Value, path: &str, depth: usize, causes: &mut Causes) {
    if depth > MAX_DEPTH {
        return;
    }
    match (node.shape(), value) {
        (Shape::Struct, Value::Object(o)) => {
            for (name, v) in o {
                if let Some(field) = node.field(name) {
                    walk(field, v, &join(path, name), depth + 1, causes);
                }
            }
            required(node, o, path, causes);
        }
        (Shape::Map, Value::Object(o)) => {
            if let Some(element) = node.element() {
                for (k, v) in o {
                    walk(element, v, &format!("{path}[{k}]"), depth + 1, causes);
                }
            }
        }
        (Shape::List, Value::Array(items)) => {
            if let Some(element) = node.element() {
                for (i, item) in items.iter().enumerate() {
                    walk(element, item, &format!("{path}[{i}]"), depth + 1, causes);
                }
            }
            if let ListType::Map(keys) = node.list_type() {
                list_map(node, keys, items, path, causes);
            }
        }
        (Shape::Scalar(_), Value::String(s)) => {
            if let Some(allowed) = node.enum_values() {
                if !allowed.iter().any(|a| a.as_str() == Some(s)) {
                    let shown: Vec<String> = allowed.iter().filter_map(Value::as_str).map(go_quote).collect();
                    causes.push((
                        path.to_string(),
                        format!(
                            "Unsupported value: {}: supported values: {}",
                            go_quote(s),
                            shown.join(", ")
                        ),
                    ));
                }
            }
        }
        _ => {}
    }
}

/// A list-map's items: each has its keys, and no two have the same ones.
fn list_map(node: Node<'_>, keys: &[Value], items: &[Value], path: &str, causes: &mut Causes) {
    let keys: Vec<&str> = keys.iter().filter_map(Value::as_str).collect();
    let property = path.rsplit('.').next().unwrap_or(path);
    let item_type = node.element().and_then(|e| e.type_name());
    let accepted = DUPLICATES_ACCEPTED
        .iter()
        .any(|(p, t)| *p == property && item_type == Some(*t));
    let mut seen: Vec<Vec<&Value>> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let mut missing = false;
        for key in &keys {
            if item.get(*key).is_none_or(Value::is_null) {
                causes.push((join(&at, key), "Required value".to_string()));
                missing = true;
            }
        }
        if missing || accepted {
            continue;
        }
        let identity: Vec<&Value> = keys.iter().filter_map(|k| item.get(*k)).collect();
        if seen.contains(&identity) {
            match (keys.as_slice(), identity.as_slice()) {
                ([key], [value]) => {
                    causes.push((join(&at, key), format!("Duplicate value: {}", shown(value))))
                }
                _ => causes.push((at, format!("Duplicate value: {}", shown_keys(&keys, &identity)))),
            }
        } else {
            seen.push(identity);
        }
    }
}

/// A key value as kube's field errors print it: strings quoted, numbers and booleans bare.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

fn shown_keys(keys: &[&str], values: &[&Value]) -> String {
    let parts: Vec<String> = keys
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{}: {}", go_quote(k), shown(v)))
        .collect();
    format!("{{{}}}", parts.join(", "))
}
