//! A custom resource's structural schema at work on its objects: defaulting (`default`) and
//! the value validations of OpenAPI v3 (types, `required`, `enum`, bounds, lengths, `pattern`,
//! item counts, unique list-map keys), worded as kube-apiserver words them. Unknown fields
//! are pruned earlier, by field validation ([`crate::machinery::field_validation`]).

use std::collections::{HashMap, HashSet};

use regex::Regex;

use serde_json::Value;

use crate::scheme::custom::Patterns;

/// Deepest nesting walked (a definition's schema is bounded by the request size anyway).
const MAX_DEPTH: usize = 64;

fn props(schema: &Value) -> Option<&serde_json::Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// The schema of a list's items or of a map's values.
fn element(schema: &Value) -> Option<&Value> {
    schema
        .get("items")
        .filter(|i| i.is_object())
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Fills in the declared defaults of absent (or null, when not nullable) fields, at every
/// depth, under the top-level fields other than `apiVersion`, `kind` and `metadata`.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let Some(properties) = props(schema) else {
        return;
    };
    for (name, sub) in properties {
        if matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        default_field(sub, o, name, 1);
    }
}

fn default_field(schema: &Value, parent: &mut serde_json::Map<String, Value>, name: &str, depth: usize) {
    let nullable = schema["nullable"] == true;
    if let Some(d) = schema.get("default") {
        match parent.get(name) {
            None => {
                parent.insert(name.to_string(), d.clone());
            }
            Some(Value::Null) if !nullable => {
                parent.insert(name.to_string(), d.clone());
            }
            _ => {}
        }
    }
    if let Some(v) = parent.get_mut(name) {
        default_value(schema, v, depth);
    }
}

fn default_value(schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(o) => {
            if let Some(properties) = props(schema) {
                for (name, sub) in properties {
                    default_field(sub, o, name, depth + 1);
                }
            } else if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in o.values_mut() {
                    default_value(values, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items").filter(|i| i.is_object()) {
                for v in items {
                    default_value(item, v, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// The JSON type name of a value, as the OpenAPI validator reports it.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match (expected, v) {
        ("object", Value::Object(_)) | ("array", Value::Array(_)) | ("string", Value::String(_)) => true,
        ("boolean", Value::Bool(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// A value as kube-apiserver quotes it in a message (`"text"`, `3`).
fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => format!("{:?}", type_name(v)),
        other => other.to_string(),
    }
}

/// Calls `f` with every sub-schema of `schema` and where it is (`properties[spec].items`).
fn each_schema(schema: &Value, at: &str, depth: usize, f: &mut dyn FnMut(&Value, &str)) {
    if depth > MAX_DEPTH || !schema.is_object() {
        return;
    }
    f(schema, at);
    let join = |step: String| {
        if at.is_empty() {
            step
        } else {
            format!("{at}.{step}")
        }
    };
    if let Some(properties) = props(schema) {
        for (name, sub) in properties {
            each_schema(sub, &join(format!("properties[{name}]")), depth + 1, f);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = schema.get(key) {
            each_schema(sub, &join(key.to_string()), depth + 1, f);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in schema[key]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            each_schema(sub, &join(format!("{key}[{i}]")), depth + 1, f);
        }
    }
}

impl Patterns {
    /// Compiles every valid `pattern` of `schema` (an invalid one is refused with the
    /// definition, see [`invalid_patterns`]).
    pub fn of(schema: &Value) -> Patterns {
        let mut out = HashMap::new();
        each_schema(schema, "", 0, &mut |s, _| {
            if let Some(p) = s["pattern"].as_str() {
                if let (false, Ok(re)) = (out.contains_key(p), Regex::new(p)) {
                    out.insert(p.to_string(), re);
                }
            }
        });
        Patterns(out)
    }
}

/// The `pattern`s of `schema` that are not valid regular expressions, as causes under
/// `prefix` (the schema's own field path).
pub fn invalid_patterns(schema: &Value, prefix: &str) -> Vec<(String, String)> {
    let mut causes = Vec::new();
    each_schema(schema, "", 0, &mut |s, at| {
        if let Some(p) = s["pattern"].as_str() {
            if let Err(e) = Regex::new(p) {
                let field = if at.is_empty() {
                    format!("{prefix}.pattern")
                } else {
                    format!("{prefix}.{at}.pattern")
                };
                let why = e
                    .to_string()
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                causes.push((
                    field,
                    format!("Invalid value: {p:?}: must be a valid regular expression, but isn't: {why}"),
                ));
            }
        }
    });
    causes
}

struct Walk<'p> {
    causes: Vec<(String, String)>,
    patterns: &'p Patterns,
}

impl Walk<'_> {
    fn add(&mut self, path: &str, message: String) {
        self.causes.push((path.to_string(), message));
    }

    fn value(&mut self, schema: &Value, v: &Value, path: &str, depth: usize) {
        if depth > MAX_DEPTH || !schema.is_object() {
            return;
        }
        if v.is_null() {
            if schema["nullable"] != true && schema.get("type").is_some() {
                self.add(
                    path,
                    format!(
                        "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                        schema["type"].as_str().unwrap_or("object")
                    ),
                );
            }
            return;
        }
        let int_or_string = schema["x-kubernetes-int-or-string"] == true;
        if int_or_string {
            if !matches!(type_name(v), "integer" | "string") {
                self.add(
                    path,
                    format!(
                        "Invalid value: {:?}: {path} in body must be of type integer,string: {:?}",
                        type_name(v),
                        type_name(v)
                    ),
                );
                return;
            }
        } else if let Some(expected) = schema["type"].as_str() {
            if !type_matches(expected, v) {
                self.add(
                    path,
                    format!(
                        "Invalid value: {:?}: {path} in body must be of type {expected}: {:?}",
                        type_name(v),
                        type_name(v)
                    ),
                );
                return;
            }
        }
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.contains(v) {
                let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
                self.add(
                    path,
                    format!("Unsupported value: {}: supported values: {}", v, list.join(", ")),
                );
            }
        }
        match v {
            Value::Number(n) => self.number(schema, n.as_f64().unwrap_or(0.0), v, path),
            Value::String(s) => self.string(schema, s, path),
            Value::Array(items) => self.array(schema, items, path, depth),
            Value::Object(o) => self.object(schema, o, path, depth),
            Value::Bool(_) | Value::Null => {}
        }
    }

    fn number(&mut self, schema: &Value, n: f64, v: &Value, path: &str) {
        if let Some(min) = schema["minimum"].as_f64() {
            let exclusive = schema["exclusiveMinimum"] == true;
            if n < min || (exclusive && n == min) {
                let op = if exclusive {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.add(
                    path,
                    format!(
                        "Invalid value: {v}: {path} in body should be {op} {}",
                        schema["minimum"]
                    ),
                );
            }
        }
        if let Some(max) = schema["maximum"].as_f64() {
            let exclusive = schema["exclusiveMaximum"] == true;
            if n > max || (exclusive && n == max) {
                let op = if exclusive {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.add(
                    path,
                    format!(
                        "Invalid value: {v}: {path} in body should be {op} {}",
                        schema["maximum"]
                    ),
                );
            }
        }
        if let Some(m) = schema["multipleOf"].as_f64().filter(|m| *m > 0.0) {
            if (n / m).fract() != 0.0 {
                self.add(
                    path,
                    format!(
                        "Invalid value: {v}: {path} in body should be a multiple of {}",
                        schema["multipleOf"]
                    ),
                );
            }
        }
    }

    fn string(&mut self, schema: &Value, s: &str, path: &str) {
        let chars = s.chars().count() as u64;
        if let Some(max) = schema["maxLength"].as_u64().filter(|m| chars > *m) {
            self.add(path, format!("Too long: may not be more than {max} bytes"));
        }
        if let Some(min) = schema["minLength"].as_u64().filter(|m| chars < *m) {
            self.add(
                path,
                format!("Invalid value: {s:?}: {path} in body should be at least {min} chars long"),
            );
        }
        if let Some(pattern) = schema["pattern"].as_str() {
            // A pattern that does not compile was refused with its definition; nothing to test.
            if let Some(re) = self.patterns.0.get(pattern) {
                if !re.is_match(s) {
                    self.add(
                        path,
                        format!("Invalid value: {s:?}: {path} in body should match '{pattern}'"),
                    );
                }
            }
        }
    }

    fn array(&mut self, schema: &Value, items: &[Value], path: &str, depth: usize) {
        let n = items.len() as u64;
        if let Some(max) = schema["maxItems"].as_u64().filter(|m| n > *m) {
            self.add(path, format!("Too many: {n}: must have at most {max} items"));
        }
        if let Some(min) = schema["minItems"].as_u64().filter(|m| n < *m) {
            self.add(
                path,
                format!("Invalid value: {n}: {path} in body should have at least {min} items"),
            );
        }
        match schema["x-kubernetes-list-type"].as_str() {
            Some("set") => {
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    if !seen.insert(item.to_string()) {
                        self.add(
                            &format!("{path}[{i}]"),
                            format!("Duplicate value: {}", shown(item)),
                        );
                    }
                }
            }
            Some("map") => {
                let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let key: Vec<String> = keys.iter().map(|k| item[*k].to_string()).collect();
                    if !seen.insert(key) {
                        let shown: serde_json::Map<String, Value> = keys
                            .iter()
                            .map(|k| ((*k).to_string(), item[*k].clone()))
                            .collect();
                        self.add(
                            &format!("{path}[{i}]"),
                            format!("Duplicate value: {}", Value::Object(shown)),
                        );
                    }
                }
            }
            _ => {}
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.value(item_schema, item, &format!("{path}[{i}]"), depth + 1);
            }
        }
    }

    fn object(&mut self, schema: &Value, o: &serde_json::Map<String, Value>, path: &str, depth: usize) {
        let join = |k: &str| {
            if path.is_empty() {
                k.to_string()
            } else {
                format!("{path}.{k}")
            }
        };
        for required in schema["required"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            if let Some(r) = required.as_str().filter(|r| !o.contains_key(*r)) {
                self.add(&join(r), "Required value".into());
            }
        }
        let n = o.len() as u64;
        if let Some(max) = schema["maxProperties"].as_u64().filter(|m| n > *m) {
            self.add(path, format!("Too many: {n}: must have at most {max} items"));
        }
        if let Some(min) = schema["minProperties"].as_u64().filter(|m| n < *m) {
            self.add(
                path,
                format!("Invalid value: {n}: {path} in body should have at least {min} properties"),
            );
        }
        let properties = props(schema);
        for (k, v) in o {
            // The standard top-level fields are checked by the metadata machinery.
            if depth == 0 && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match properties.and_then(|p| p.get(k)) {
                Some(sub) => self.value(sub, v, &join(k), depth + 1),
                None => {
                    if let Some(values) = element(schema).filter(|_| properties.is_none()) {
                        self.value(values, v, &join(k), depth + 1);
                    }
                }
            }
        }
    }
}

/// The causes that make `obj` invalid under its version's declared schema, whose patterns are
/// `patterns` (empty when valid).
pub fn validate(schema: &Value, patterns: &Patterns, obj: &Value) -> Vec<(String, String)> {
    let mut walk = Walk {
        causes: Vec::new(),
        patterns,
    };
    if let Value::Object(o) = obj {
        walk.object(schema, o, "", 0);
    }
    walk.causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["image"], "properties": {
                "image": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "replicas": {"type": "integer", "minimum": 1, "maximum": 5, "default": 1},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "port": {"x-kubernetes-int-or-string": true},
                "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
                          "items": {"type": "object", "properties": {"port": {"type": "integer"}, "name": {"type": "string", "default": "p"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}})
    }

    #[test]
    fn defaults_fill_absent_fields_at_every_depth() {
        let mut obj = json!({"metadata": {"name": "x"}, "spec": {"image": "web", "mode": null, "ports": [{"port": 80}]}});
        apply_defaults(&schema(), &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["mode"], "fast");
        assert_eq!(obj["spec"]["ports"][0]["name"], "p");
        assert!(obj["metadata"].get("replicas").is_none());
        let mut none = json!({"metadata": {}});
        apply_defaults(&schema(), &mut none);
        assert!(none.get("spec").is_none(), "no default for spec itself");
    }

    #[test]
    fn value_validations_are_reported_with_kube_wording() {
        let s = schema();
        let good = json!({"spec": {"image": "web", "replicas": 3, "port": "http", "tags": ["a"], "labels": {"a": "b"}}});
        assert!(
            validate(&s, &Patterns::of(&s), &good).is_empty(),
            "{:?}",
            validate(&s, &Patterns::of(&s), &good)
        );
        let bad = json!({"apiVersion": "x/v1", "spec": {"image": "W", "replicas": "two", "mode": "medium", "port": true,
            "tags": ["a", "a", "b"], "ports": [{"port": 1}, {"port": 1}], "labels": {"a": 1}}});
        let causes = validate(&s, &Patterns::of(&s), &bad);
        let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        assert_eq!(
            text,
            [
                "spec.image: Invalid value: \"W\": spec.image in body should be at least 2 chars long",
                "spec.image: Invalid value: \"W\": spec.image in body should match '^[a-z]+$'",
                "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                "spec.mode: Unsupported value: \"medium\": supported values: \"fast\", \"slow\"",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.ports[1]: Duplicate value: {\"port\":1}",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
                "spec.tags: Too many: 3: must have at most 2 items",
                "spec.tags[1]: Duplicate value: \"a\"",
            ]
        );
        let missing = validate(&s, &Patterns::of(&s), &json!({"spec": {"replicas": 9}}));
        assert_eq!(
            missing,
            [
                ("spec.image".to_string(), "Required value".to_string()),
                (
                    "spec.replicas".to_string(),
                    "Invalid value: 9: spec.replicas in body should be less than or equal to 5".to_string()
                )
            ]
        );
        assert_eq!(validate(&s, &Patterns::of(&s), &json!({}))[0].0, "spec");
    }
}
