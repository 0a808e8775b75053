//! The `Table` columns of a custom resource: `Name`, then the version's
//! `additionalPrinterColumns` (or `Age` when it declares none), each cell read from the object
//! with the column's JSONPath, as kube-apiserver's custom-resource table converter does.

use jsonpath_rust::JsonPath;
use serde_json::{json, Value};

use crate::machinery::age::Ctx;
use crate::scheme::custom::Column;

impl Column {
    /// The column as a `TableColumnDefinition`.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name, "type": self.ty, "format": self.format,
            "description": self.description, "priority": self.priority,
        })
    }

    /// The cell of `obj`: the value the path selects (several joined by commas, as kubectl's
    /// JSONPath prints them), or null when it selects nothing; a date as the time since it.
    pub fn cell(&self, obj: &Value, ctx: &Ctx) -> Value {
        let path = if self.json_path.starts_with('$') {
            self.json_path.clone()
        } else {
            format!("${}", self.json_path)
        };
        let found = obj.query(&path).unwrap_or_default();
        match found.as_slice() {
            [] => Value::Null,
            [one] if self.ty == "date" && one.is_string() => json!(ctx.since(one)),
            [one] => self.typed(one),
            many => json!(many.iter().map(|v| text(v)).collect::<Vec<_>>().join(",")),
        }
    }

    fn typed(&self, v: &Value) -> Value {
        match (self.ty.as_str(), v) {
            ("integer", Value::Number(n)) if n.is_i64() || n.is_u64() => v.clone(),
            ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => v.clone(),
            ("string" | "date", Value::String(_)) => v.clone(),
            (_, Value::Null) => Value::Null,
            _ => json!(text(v)),
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The first column of every custom resource table.
fn name_column() -> Value {
    json!({"name": "Name", "type": "string", "format": "name",
           "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
           "priority": 0})
}

/// The declared columns of one version of a definition (`Age` when it declares none).
pub fn of_version(version: &Value) -> Vec<Column> {
    let declared: Vec<Column> = version["additionalPrinterColumns"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|c| {
            Some(Column {
                name: c["name"].as_str()?.to_string(),
                ty: c["type"].as_str().unwrap_or("string").to_string(),
                format: c["format"].as_str().unwrap_or_default().to_string(),
                description: c["description"].as_str().unwrap_or_default().to_string(),
                priority: c["priority"].as_i64().unwrap_or(0),
                json_path: c["jsonPath"].as_str()?.to_string(),
            })
        })
        .collect();
    if !declared.is_empty() {
        return declared;
    }
    vec![Column {
        name: "Age".into(),
        ty: "date".into(),
        format: String::new(),
        description:
            "CreationTimestamp is a timestamp representing the server time when this object was created."
                .into(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// The column definitions of a table of a custom resource.
pub fn definitions(columns: &[Column]) -> Vec<Value> {
    std::iter::once(name_column())
        .chain(columns.iter().map(Column::definition))
        .collect()
}

/// The cells of one object's row, at the time `ctx` says.
pub fn cells(columns: &[Column], obj: &Value, ctx: &Ctx) -> Vec<Value> {
    std::iter::once(obj["metadata"]["name"].clone())
        .chain(columns.iter().map(|c| c.cell(obj, ctx)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_follow_the_declared_json_paths() {
        let version = json!({"additionalPrinterColumns": [
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Images", "type": "string", "jsonPath": ".spec.containers[*].image", "priority": 1},
            {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"}]});
        let columns = of_version(&version);
        let obj = json!({"metadata": {"name": "a"}, "spec": {"replicas": 3, "containers": [{"image": "x"}, {"image": "y"}]},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let ctx = Ctx {
            now_ms: 1_767_225_600_000 + 90_000,
        };
        assert_eq!(
            cells(&columns, &obj, &ctx),
            [json!("a"), json!(3), json!("True"), json!("x,y"), Value::Null]
        );
        let defs = definitions(&columns);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[3]["priority"], 1);
        let age = of_version(&json!({}));
        assert_eq!(age[0].definition()["name"], "Age");
        assert_eq!(
            cells(
                &age,
                &json!({"metadata": {"name": "b", "creationTimestamp": "2026-01-01T00:00:00Z"}}),
                &ctx
            )[1],
            "90s"
        );
    }
}
