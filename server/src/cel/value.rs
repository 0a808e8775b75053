//! Objects (JSON) as CEL values: what `self`, `object`, `params` and the rest are bound to.
//! Integers are CEL `int`s, as kube's unstructured objects hold them (`int64`), not `uint`s.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map, Value};

/// `v` as a CEL value.
pub fn from_json(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            (None, None) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        serde_json::Value::Object(o) => map(o.iter().map(|(k, v)| (k.as_str(), from_json(v)))),
    }
}

/// A CEL map with string keys.
pub fn map<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    let entries: HashMap<Key, Value> = entries
        .into_iter()
        .map(|(k, v)| (Key::String(Arc::new(k.to_string())), v))
        .collect();
    Value::Map(Map {
        map: Arc::new(entries),
    })
}

/// A CEL string.
pub fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

/// `v` as JSON (what an audit annotation or a message carries); `None` for values JSON
/// cannot hold (functions, opaque values).
pub fn to_json(v: &Value) -> Option<serde_json::Value> {
    Some(match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::UInt(u) => serde_json::Value::from(*u),
        Value::Float(f) => serde_json::Value::from(*f),
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::List(items) => serde_json::Value::Array(items.iter().map(to_json).collect::<Option<_>>()?),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            serde_json::Value::Object(out)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_round_trips_with_integers_as_ints() {
        let j = json!({"a": [1, -2, 2.5, "s", null, true], "b": {"c": {}}});
        let v = from_json(&j);
        assert_eq!(to_json(&v), Some(j));
        let Value::Map(m) = v else { panic!("a map") };
        let Some(Value::List(items)) = m.map.get(&Key::String(Arc::new("a".into()))) else {
            panic!("a list")
        };
        assert_eq!(items[0], Value::Int(1));
    }
}
