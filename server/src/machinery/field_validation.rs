//! Field validation (`fieldValidation=Ignore|Warn|Strict`, default `Warn`) against the kind's
//! schema, as kube-apiserver's strict decoder does it: unknown fields at any depth and
//! duplicate fields are dropped with a warning, or refused with `400` under `Strict`; a value
//! of the wrong type is always a `400`.
//!
//! Duplicates are only visible while parsing, so bodies are decoded through
//! [`decode_tracking_duplicates`], which records them (JSON path, kube's spelling) instead of
//! silently keeping the last value.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::qos::{canonical_quantity, format_quantity, parse_quantity};
use crate::machinery::query::Query;
use crate::machinery::schema::{schemas, Node, Scalar, Shape, QUANTITY_FORMAT_ERROR};
use crate::scheme::ResourceType;

/// What to do about unknown and duplicate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (the default).
    Warn,
    /// Refuse the request with `400`.
    Strict,
}

impl Directive {
    /// Reads `fieldValidation`; an unknown value is a `400`.
    pub fn from_query(q: &Query) -> ApiResult<Directive> {
        match q.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Warn") => Ok(Directive::Warn),
            Some("Ignore") => Ok(Directive::Ignore),
            Some("Strict") => Ok(Directive::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// A request body and the duplicate fields found while parsing it.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The body (for a duplicate, the last value wins, as in kube-apiserver).
    pub value: Value,
    /// Paths of duplicate fields (`spec.replicas`), in document order.
    pub duplicates: Vec<String>,
}

/// Parses a body through any serde deserializer, recording duplicate object keys.
pub fn decode_tracking_duplicates<'de, D: Deserializer<'de>>(de: D) -> Result<Decoded, D::Error> {
    let duplicates = RefCell::new(Vec::new());
    let value = Tracked {
        path: String::new(),
        duplicates: &duplicates,
    }
    .deserialize(de)?;
    Ok(Decoded {
        value,
        duplicates: duplicates.into_inner(),
    })
}

/// A value being parsed at `path`.
struct Tracked<'r> {
    path: String,
    duplicates: &'r RefCell<Vec<String>>,
}

impl<'r> Tracked<'r> {
    fn child(&self, segment: &str) -> Tracked<'r> {
        Tracked {
            path: join(&self.path, segment),
            duplicates: self.duplicates,
        }
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

impl<'de> DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Tracked<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        self.deserialize(de)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(Tracked {
            path: format!("{}[{}]", self.path, items.len()),
            duplicates: self.duplicates,
        })? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(self.child(&key))?;
            if out.insert(key.clone(), value).is_some() {
                self.duplicates.borrow_mut().push(join(&self.path, &key));
            }
        }
        Ok(Value::Object(out))
    }
}

/// What the schema check found.
#[derive(Debug, Default)]
struct Findings {
    unknown: Vec<String>,
    wrong_type: Option<String>,
    /// The same wrong type as apimachinery's unstructured converter words it, which is how
    /// kube-apiserver meets it after a strategic merge patch (`cannot restore map from
    /// string`); `None` for types it converts through JSON (IntOrString).
    conversion: Option<String>,
}

/// The kind of a decoded JSON value as Go's reflection names it (`int64`, `slice`, ...).
fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "invalid",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(n) if n.is_u64() => "uint64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `value` is of the kind of value `shape` describes (null fits every shape).
fn shape_fits(shape: Shape, value: &Value) -> bool {
    match shape {
        Shape::Any => true,
        Shape::Scalar(s) => s.accepts(value),
        Shape::List => value.is_array(),
        Shape::Map | Shape::Struct => value.is_object(),
    }
}

/// Walks `value` against `node`, dropping unknown fields and noting the first wrong type.
/// Under a custom resource's own schema (`lenient`) a wrong type is not a decoding error: the
/// schema validation reports it later (a 422, as kube-apiserver does), so the walk just stops.
fn walk(node: Node<'_>, value: &mut Value, path: &str, parent_type: &str, lenient: bool, f: &mut Findings) {
    if value.is_null() || f.wrong_type.is_some() {
        return;
    }
    let lenient = lenient && !node.is_builtin();
    if lenient && !shape_fits(node.shape(), value) {
        return;
    }
    let type_error = |expected: &str, v: &Value| {
        let into = if parent_type.is_empty() {
            format!("Go value of type {expected}")
        } else {
            format!("Go struct field {parent_type}.{path} of type {expected}")
        };
        format!("json: cannot unmarshal {} into {into}", json_type(v))
    };
    match node.shape() {
        Shape::Any => {}
        Shape::Scalar(Scalar::Quantity) => {
            if !Scalar::Quantity.accepts(value) {
                // Go's Quantity decodes itself: its own error, whatever the value was.
                f.wrong_type = Some(QUANTITY_FORMAT_ERROR.to_string());
                f.conversion = Some(QUANTITY_FORMAT_ERROR.to_string());
            } else if let Value::Number(n) = value {
                // Stored, and read back, as the string kube writes (`1`, `500m`, `1k`): typed
                // clients (k8s-openapi's `Quantity`) read only strings.
                if let Some(q) = parse_quantity(&n.to_string()) {
                    *value = Value::String(format_quantity(q, false));
                }
            } else if let Some(canonical) = value.as_str().and_then(canonical_quantity) {
                // As kube stores it: `1024Mi` is `1Gi`.
                *value = Value::String(canonical);
            }
        }
        Shape::Scalar(s) => {
            if !s.accepts(value) {
                f.wrong_type = Some(type_error(s.go_name(), value));
                // IntOrString converts through JSON; a number into a numeric field converts
                // (Go's reflection narrows it), so neither has a converter error of its own.
                let numeric = matches!(s, Scalar::Int32 | Scalar::Int64 | Scalar::Number);
                f.conversion = (s != Scalar::IntOrString && !(numeric && value.is_number()))
                    .then(|| format!("cannot convert {} to {}", go_kind(value), s.go_name()));
            }
        }
        Shape::List => match value {
            Value::Array(items) => {
                if let Some(elem) = node.element() {
                    for (i, item) in items.iter_mut().enumerate() {
                        walk(elem, item, &format!("{path}[{i}]"), parent_type, lenient, f);
                    }
                }
            }
            other => {
                f.wrong_type = Some(type_error("[]", other));
                f.conversion = Some(format!("cannot restore slice from {}", go_kind(other)));
            }
        },
        Shape::Map => match value {
            Value::Object(entries) => {
                if let Some(elem) = node.element() {
                    for (k, v) in entries.iter_mut() {
                        walk(elem, v, &join(path, k), parent_type, lenient, f);
                    }
                }
            }
            other => {
                f.wrong_type = Some(type_error("map", other));
                f.conversion = Some(format!("cannot restore map from {}", go_kind(other)));
            }
        },
        Shape::Struct => match value {
            Value::Object(fields) => {
                let type_name = node.type_name().unwrap_or(parent_type);
                let preserve = node.preserves_unknown();
                fields.retain(|k, v| match node.field(k) {
                    Some(child) => {
                        walk(child, v, &join(path, k), type_name, lenient, f);
                        true
                    }
                    None if preserve => true,
                    None => {
                        f.unknown.push(join(path, k));
                        false
                    }
                });
            }
            other => {
                f.wrong_type = Some(type_error(node.type_name().unwrap_or("struct"), other));
                f.conversion = Some(format!("cannot restore struct from: {}", go_kind(other)));
            }
        },
    }
}

/// What walking a whole object against its type's schema found: [`inspect`] walks it once,
/// then the caller asks what a strategic merge patch's converter would say
/// ([`Inspection::conversion_error`]) and what the request's field validation decides
/// ([`Inspection::verdict`]).
pub struct Inspection {
    findings: Findings,
    /// Whether the type has a schema to walk (without one there is nothing to judge).
    schema: bool,
}

/// Walks `obj` (a whole object of type `rt`) against its schema once: unknown fields are
/// removed from it and quantities written as kube stores them; what was wrong is kept.
pub fn inspect(rt: &ResourceType, obj: &mut Value) -> Inspection {
    let mut findings = Findings::default();
    let root = schemas().kind(rt);
    if let Some(root) = root {
        walk(root, obj, "", "", rt.custom.is_some(), &mut findings);
    }
    Inspection {
        findings,
        schema: root.is_some(),
    }
}

impl Inspection {
    /// Why apimachinery's unstructured converter could not turn the object (as a strategic
    /// merge patch left it) into its Go type, in its words; `None` when it can, or when the
    /// first wrong type is one it converts through JSON.
    pub fn conversion_error(&self) -> Option<&str> {
        self.findings.conversion.as_deref()
    }

    /// What the request's field validation (`directive`) decides, given the duplicates found
    /// while parsing the object: a wrong type, or any problem under `Strict`, refuses it; under
    /// `Warn` the problems are the warnings to send. A type without a schema passes.
    pub fn verdict(
        self,
        rt: &ResourceType,
        duplicates: &[String],
        directive: Directive,
    ) -> ApiResult<Vec<String>> {
        if !self.schema {
            return Ok(Vec::new());
        }
        let findings = self.findings;
        let cannot_handle = |detail: String| {
            ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}",
                kind = rt.kind,
                version = rt.version
            ))
        };
        if let Some(wrong) = findings.wrong_type {
            return Err(cannot_handle(wrong));
        }
        let mut problems: Vec<String> = duplicates
            .iter()
            .map(|d| format!("duplicate field \"{d}\""))
            .collect();
        problems.extend(findings.unknown.iter().map(|u| format!("unknown field \"{u}\"")));
        match directive {
            Directive::Strict if !problems.is_empty() => Err(cannot_handle(format!(
                "strict decoding error: {}",
                problems.join(", ")
            ))),
            Directive::Warn => Ok(problems),
            _ => Ok(Vec::new()),
        }
    }
}

/// Checks `obj` (a whole object of type `rt`) against its schema under `directive`, given the
/// duplicates found while parsing it ([`inspect`], then [`Inspection::verdict`]). Returns the
/// warnings to send (`Warn` only).
pub fn check(
    rt: &ResourceType,
    obj: &mut Value,
    duplicates: &[String],
    directive: Directive,
) -> ApiResult<Vec<String>> {
    inspect(rt, obj).verdict(rt, duplicates, directive)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::scheme::Registry;

    fn deployments() -> ResourceType {
        Registry::new()
            .lookup("apps", "v1", "deployments")
            .expect("served")
            .clone()
    }

    #[test]
    fn duplicates_are_recorded_with_their_paths() {
        let body = br#"{"metadata":{"name":"a","name":"b"},"spec":{"template":{"spec":{"containers":[{"name":"x","image":"i","image":"j"}]}}}}"#;
        let d = decode_tracking_duplicates(&mut serde_json::Deserializer::from_slice(body)).unwrap();
        assert_eq!(d.value["metadata"]["name"], "b");
        assert_eq!(
            d.duplicates,
            ["metadata.name", "spec.template.spec.containers[0].image"]
        );
        let yaml = yaml_serde::Deserializer::from_slice(b"a: 1\nb:\n  c: 2\n  c: 3\n");
        let d = decode_tracking_duplicates(yaml).unwrap_or_default();
        assert_eq!(d.duplicates, ["b.c"]);
    }

    #[test]
    fn unknown_fields_warn_by_default_and_are_dropped() {
        let rt = deployments();
        let mut obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"any": "x"}},
            "spec": {"replicas": 2, "foo": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i", "bogus": true}]}}},
            "extra": {}});
        let warnings = check(&rt, &mut obj, &["spec.replicas".into()], Directive::Warn).unwrap();
        assert_eq!(
            warnings,
            [
                "duplicate field \"spec.replicas\"",
                "unknown field \"extra\"",
                "unknown field \"spec.foo\"",
                "unknown field \"spec.template.spec.containers[0].bogus\""
            ]
        );
        assert!(obj.get("extra").is_none());
        assert!(obj["spec"].get("foo").is_none());
        assert_eq!(obj["metadata"]["labels"]["any"], "x");
    }

    #[test]
    fn strict_refuses_and_type_errors_always_refuse() {
        let rt = deployments();
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"foo": 1, "bar": 2}});
        let e = check(&rt, &mut obj, &[], Directive::Strict).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.bar\", unknown field \"spec.foo\""
        );
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"replicas": "two"}});
        let e = check(&rt, &mut obj, &[], Directive::Ignore).unwrap_err();
        assert_eq!(
            e.message,
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        let mut ok = json!({"metadata": {"name": "d"}, "spec": {"strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}});
        assert_eq!(
            check(&rt, &mut ok, &[], Directive::Strict).unwrap(),
            Vec::<String>::new()
        );
        let mut ignored = json!({"metadata": {"name": "d"}, "nope": 1});
        assert!(check(&rt, &mut ignored, &[], Directive::Ignore)
            .unwrap()
            .is_empty());
        assert!(ignored.get("nope").is_none());
    }

    #[test]
    fn the_directive_comes_from_the_query() {
        let q = |v: &str| Query::from([("fieldValidation".to_string(), v.to_string())]);
        assert_eq!(Directive::from_query(&Query::new()).unwrap(), Directive::Warn);
        assert_eq!(Directive::from_query(&q("Strict")).unwrap(), Directive::Strict);
        assert_eq!(Directive::from_query(&q("Ignore")).unwrap(), Directive::Ignore);
        assert_eq!(Directive::from_query(&q("strict")).unwrap_err().code, 400);
    }

    /// A quantity may be written as a number (`cpu: 1` in YAML), as Go's Quantity decodes it,
    /// and is kept as the string kube writes.
    #[test]
    fn quantities_decode_from_strings_and_numbers() {
        let rt = deployments();
        let mut obj = json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"cpu": 1, "memory": "1Gi", "ephemeral-storage": 1000}, "requests": {"cpu": 0.5}}}]}}}});
        assert_eq!(
            check(&rt, &mut obj, &[], Directive::Strict).unwrap(),
            Vec::<String>::new()
        );
        let resources = &obj["spec"]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(
            resources,
            &json!({"limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1k"}, "requests": {"cpu": "500m"}})
        );
        for bad in [json!("lots"), json!("1.5.5"), json!(true)] {
            let mut obj = json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [
                {"name": "c", "image": "i", "resources": {"limits": {"cpu": bad}}}]}}}});
            let e = check(&rt, &mut obj, &[], Directive::Ignore).unwrap_err();
            assert_eq!(
                e.message,
                format!(
                    "Deployment in version \"v1\" cannot be handled as a Deployment: {QUANTITY_FORMAT_ERROR}"
                )
            );
        }
    }
}
