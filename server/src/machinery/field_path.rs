//! Simple field paths (`.spec.replicas`), as a CustomResourceDefinition's scale subresource
//! names its numbers: parsed into field names, and the value at one read or written.

use serde_json::{json, Value};

/// A simple JSON path (`.spec.replicas`) as field names; `None` unless it is one.
pub fn field_path(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('.')?;
    let fields: Vec<String> = rest.split('.').map(str::to_string).collect();
    fields
        .iter()
        .all(|f| {
            !f.is_empty()
                && f.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
        .then_some(fields)
}

/// The value at `path` in `obj`.
pub fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |v, f| v.get(f))
}

/// Sets the value at `path` in `obj`, creating the objects on the way.
pub fn set_at(obj: &mut Value, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = obj;
    for f in parents {
        if !at.get(f).is_some_and(Value::is_object) {
            at[f.as_str()] = json!({});
        }
        at = &mut at[f.as_str()];
    }
    at[last.as_str()] = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_paths_read_and_write_nested_fields() {
        assert_eq!(field_path(".spec.replicas").unwrap(), ["spec", "replicas"]);
        assert!(field_path("spec.replicas").is_none());
        assert!(field_path(".spec[0]").is_none());
        let mut obj = json!({"spec": {}});
        set_at(&mut obj, &field_path(".status.scale.n").unwrap(), json!(3));
        assert_eq!(obj["status"]["scale"]["n"], 3);
        assert_eq!(
            value_at(&obj, &["status".into(), "scale".into(), "n".into()]),
            Some(&json!(3))
        );
    }
}
