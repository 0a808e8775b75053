//! `x-kubernetes-validations`: the CEL rules a CustomResourceDefinition's schema attaches to
//! its nodes, checked when the definition is written (they must compile and their estimated
//! cost must fit kube's budgets) and evaluated on every custom object written, with `self`
//! bound to the value at the rule's node and, for transition rules, `oldSelf` to the value it
//! had before the update. Failures are worded as kube-apiserver's
//! `apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go` words them.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::cel::cost::{unbounded_items, UNBOUNDED_STRING};
use crate::cel::{
    self, cost_message, value, CompileError, EvalError, Program, Shape, RUNTIME_BUDGET,
    STATIC_EXPRESSION_LIMIT, STATIC_SCHEMA_LIMIT,
};
use crate::scheme::custom::ObjectRules;

/// Deepest schema nesting walked (the definition is bounded by the request size anyway).
const MAX_DEPTH: usize = 64;

/// The reasons a rule may give its failures.
const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// The compiled rules of one version's schema, shaped like the schema (only the branches that
/// hold rules).
#[derive(Debug, Default)]
pub struct Validator {
    root: Option<Node>,
}

#[derive(Debug)]
struct Node {
    /// The schema's `type` (what kube prints as the value of a failed evaluation).
    type_name: String,
    rules: Vec<Rule>,
    properties: Vec<(String, Node)>,
    items: Option<Box<Node>>,
    values: Option<Box<Node>>,
    /// `x-kubernetes-list-map-keys` of a `map` list: how old items are found for new ones.
    map_keys: Vec<String>,
}

#[derive(Debug)]
struct Rule {
    source: String,
    program: Result<Program, CompileError>,
    message: String,
    message_expression: Option<Program>,
    reason: Option<String>,
    field_path: Option<String>,
    uses_old_self: bool,
    optional_old_self: bool,
}

impl Rule {
    /// kube's `ruleErrorString`: the message, or else the rule.
    fn error_string(&self) -> &str {
        if self.message.is_empty() {
            self.source.trim()
        } else {
            &self.message
        }
    }
}

/// What the estimator may assume of a value of `schema`.
fn shape(schema: &Value, depth: usize) -> Shape {
    if depth > MAX_DEPTH {
        return Shape::unbounded();
    }
    let max = |key: &str| schema[key].as_u64();
    if schema["x-kubernetes-int-or-string"] == true {
        return Shape::Any {
            max: max("maxLength").unwrap_or(UNBOUNDED_STRING),
        };
    }
    match schema["type"].as_str() {
        Some("string") => Shape::Str {
            max: max("maxLength").unwrap_or(UNBOUNDED_STRING),
        },
        Some("array") => {
            let item = shape(&schema["items"], depth + 1);
            Shape::List {
                max: max("maxItems").unwrap_or_else(|| unbounded_items(min_size(&schema["items"]))),
                item: Box::new(item),
            }
        }
        Some("object") => {
            let fields: BTreeMap<String, Shape> = schema["properties"]
                .as_object()
                .map(|p| p.iter().map(|(k, s)| (k.clone(), shape(s, depth + 1))).collect())
                .unwrap_or_default();
            let values = schema
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .map(|a| Box::new(shape(a, depth + 1)));
            let unknown = schema["x-kubernetes-preserve-unknown-fields"] == true;
            let open = values.is_some() || unknown;
            Shape::Map {
                max: max("maxProperties").unwrap_or(if open {
                    unbounded_items(min_size(&schema["additionalProperties"]) + 3)
                } else {
                    fields.len() as u64
                }),
                fields,
                values: values.or_else(|| unknown.then(|| Box::new(Shape::unbounded()))),
            }
        }
        Some(_) => Shape::Scalar,
        None => Shape::unbounded(),
    }
}

/// The fewest bytes a value of `schema` serializes to (kube's estimate of how many fit).
fn min_size(schema: &Value) -> u64 {
    match schema["type"].as_str() {
        Some("string") => 2,
        Some("boolean") => 4,
        Some("integer") | Some("number") => 1,
        Some("object") | Some("array") => 2,
        _ => 1,
    }
}

/// The shape of the object at the root: its schema plus `apiVersion`, `kind` and the
/// metadata fields a rule may read.
fn root_shape(schema: &Value) -> Shape {
    let mut s = shape(schema, 0);
    if let Shape::Map { fields, max, .. } = &mut s {
        for k in ["apiVersion", "kind"] {
            fields.insert(k.to_string(), Shape::Str { max: 253 });
        }
        let meta = ["name", "generateName"]
            .iter()
            .map(|k| (k.to_string(), Shape::Str { max: 253 }))
            .collect();
        fields.insert(
            "metadata".to_string(),
            Shape::Map {
                max: 2,
                fields: meta,
                values: None,
            },
        );
        *max = fields.len() as u64;
    }
    s
}

/// How many values of a list's items or a map's values there may be.
fn cardinality(schema: &Value, key: &str) -> u64 {
    let bound = if key == "items" {
        "maxItems"
    } else {
        "maxProperties"
    };
    schema[bound]
        .as_u64()
        .unwrap_or_else(|| unbounded_items(min_size(&schema[key])))
}

fn compile_rule(rule: &Value, node_shape: &Shape) -> Rule {
    let source = rule["rule"].as_str().unwrap_or_default().to_string();
    let vars = [("self", node_shape.clone()), ("oldSelf", node_shape.clone())];
    let program = cel::compile(&source, &vars);
    let uses_old_self = program.as_ref().is_ok_and(|p| p.uses("oldSelf"));
    let message_expression = rule["messageExpression"]
        .as_str()
        .filter(|m| !m.is_empty())
        .and_then(|m| cel::compile(m, &vars).ok());
    Rule {
        source,
        program,
        message: rule["message"].as_str().unwrap_or_default().trim().to_string(),
        message_expression,
        reason: rule["reason"].as_str().map(str::to_string),
        field_path: rule["fieldPath"]
            .as_str()
            .filter(|p| !p.is_empty())
            .and_then(|p| normalized_field_path(p).ok()),
        uses_old_self,
        optional_old_self: rule["optionalOldSelf"] == true,
    }
}

fn build(schema: &Value, node_shape: Shape, depth: usize) -> Option<Node> {
    if depth > MAX_DEPTH || !schema.is_object() {
        return None;
    }
    let rules: Vec<Rule> = schema["x-kubernetes-validations"]
        .as_array()
        .map(|rs| rs.iter().map(|r| compile_rule(r, &node_shape)).collect())
        .unwrap_or_default();
    let properties: Vec<(String, Node)> = schema["properties"]
        .as_object()
        .map(|p| {
            p.iter()
                .filter_map(|(k, s)| build(s, shape(s, depth + 1), depth + 1).map(|n| (k.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    let sub = |key: &str| {
        schema
            .get(key)
            .filter(|s| s.is_object())
            .and_then(|s| build(s, shape(s, depth + 1), depth + 1))
            .map(Box::new)
    };
    let items = sub("items");
    let values = sub("additionalProperties");
    if rules.is_empty() && properties.is_empty() && items.is_none() && values.is_none() {
        return None;
    }
    let map_keys = if schema["x-kubernetes-list-type"] == "map" {
        schema["x-kubernetes-list-map-keys"]
            .as_array()
            .map(|ks| ks.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Some(Node {
        type_name: schema["type"].as_str().unwrap_or_default().to_string(),
        rules,
        properties,
        items,
        values,
        map_keys,
    })
}

impl ObjectRules for Validator {
    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<(String, String)> {
        Validator::validate(self, obj, old)
    }
}

impl Validator {
    /// Compiles the rules of a version's declared schema (once, when the type is built).
    pub fn of(schema: &Value) -> Validator {
        Validator {
            root: build(schema, root_shape(schema), 0),
        }
    }

    /// The causes that make `obj` (an update of `old`, if given) fail its rules.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<(String, String)> {
        let Some(root) = &self.root else {
            return Vec::new();
        };
        let mut run = Run {
            causes: Vec::new(),
            budget: RUNTIME_BUDGET,
            stopped: false,
        };
        run.node(root, obj, old, None);
        run.causes
    }
}

/// One object's evaluation: the causes so far and what is left of the budget.
struct Run {
    causes: Vec<(String, String)>,
    budget: u64,
    stopped: bool,
}

/// A child field path (`<nil>` is kube's name for the root).
fn child(path: Option<&str>, step: &str) -> String {
    match path {
        None => step.to_string(),
        Some(p) => format!("{p}.{step}"),
    }
}

/// How a bad value is shown in a message (Go's `%v` of a scalar, `%q` of a string).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

impl Run {
    fn add(&mut self, path: Option<&str>, message: String) {
        self.causes.push((path.unwrap_or("<nil>").to_string(), message));
    }

    fn node(&mut self, node: &Node, v: &Value, old: Option<&Value>, path: Option<&str>) {
        if self.stopped || v.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        self.rules(node, v, old, path);
        match v {
            Value::Object(o) => {
                for (name, sub) in &node.properties {
                    if let Some(value) = o.get(name) {
                        self.node(
                            sub,
                            value,
                            old.and_then(|x| x.get(name)),
                            Some(&child(path, name)),
                        );
                    }
                }
                if let Some(values) = &node.values {
                    for (k, value) in o {
                        let at = format!("{}[{k}]", path.unwrap_or_default());
                        self.node(values, value, old.and_then(|x| x.get(k)), Some(&at));
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &node.items {
                    for (i, value) in items.iter().enumerate() {
                        let before = old.and_then(Value::as_array).and_then(|olds| {
                            (!node.map_keys.is_empty())
                                .then(|| {
                                    olds.iter()
                                        .find(|o| node.map_keys.iter().all(|k| o.get(k) == value.get(k)))
                                })
                                .flatten()
                        });
                        let at = format!("{}[{i}]", path.unwrap_or_default());
                        self.node(item, value, before, Some(&at));
                    }
                }
            }
            _ => {}
        }
    }

    fn rules(&mut self, node: &Node, v: &Value, old: Option<&Value>, path: Option<&str>) {
        if node.rules.is_empty() {
            return;
        }
        let this = value::from_json(v);
        let before = old.map(value::from_json);
        for rule in &node.rules {
            if self.stopped {
                return;
            }
            let program = match &rule.program {
                Ok(p) => p,
                Err(e) => {
                    let detail = format!("rule compile error: {e}");
                    self.add(path, format!("Invalid value: {:?}: {detail}", node.type_name));
                    continue;
                }
            };
            if rule.uses_old_self && before.is_none() && !rule.optional_old_self {
                continue;
            }
            let old_self = match (&before, rule.optional_old_self) {
                (Some(b), false) => b.clone(),
                (b, true) => optional(b.clone()),
                (None, false) => cel::Value::Null,
            };
            let vars = [("self", this.clone()), ("oldSelf", old_self)];
            let result = program.evaluate(&vars, &mut self.budget);
            match result {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => self.failed(node, rule, v, path, &vars),
                Ok(_) => self.add(
                    path,
                    format!(
                        "Invalid value: {:?}: rule did not evaluate to a bool evaluating rule: {}",
                        node.type_name,
                        rule.error_string()
                    ),
                ),
                Err(e) => self.eval_error(node, rule, path, e),
            }
        }
    }

    fn eval_error(&mut self, node: &Node, rule: &Rule, path: Option<&str>, e: EvalError) {
        let ty = &node.type_name;
        let rule_text = rule.error_string();
        let detail = match e {
            EvalError::BudgetExhausted => {
                self.stopped = true;
                "validation failed due to running out of cost budget, no further validation rules will be run".to_string()
            }
            EvalError::CallCostExceeded => {
                self.stopped = true;
                format!("'{e}': no further validation rules will be run due to call cost exceeds limit for rule: {rule_text}")
            }
            EvalError::NoSuchOverload => format!(
                "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}"
            ),
            EvalError::Failed(_) => format!("{e} evaluating rule: {rule_text}"),
        };
        self.add(path, format!("Invalid value: {ty:?}: {detail}"));
    }

    fn failed(
        &mut self,
        node: &Node,
        rule: &Rule,
        v: &Value,
        path: Option<&str>,
        vars: &[(&str, cel::Value)],
    ) {
        let at = match &rule.field_path {
            Some(p) => Some(child(path, p)),
            None => path.map(str::to_string),
        };
        let mut detail = None;
        if let Some(m) = &rule.message_expression {
            if let Ok(cel::Value::String(s)) = m.evaluate(vars, &mut self.budget) {
                detail = Some(s.trim().to_string()).filter(|s| !s.is_empty());
            }
        }
        let detail = detail.unwrap_or_else(|| {
            if rule.message.is_empty() {
                format!("failed rule: {}", rule.error_string())
            } else {
                rule.message.clone()
            }
        });
        let scalar = !matches!(v, Value::Object(_) | Value::Array(_))
            && !matches!(node.type_name.as_str(), "object" | "array");
        let invalid = || {
            if scalar {
                format!("Invalid value: {}: {detail}", shown(v))
            } else {
                format!("Invalid value: {detail}")
            }
        };
        let message = match rule.reason.as_deref() {
            Some("FieldValueForbidden") => format!("Forbidden: {detail}"),
            Some("FieldValueRequired") => format!("Required value: {detail}"),
            Some("FieldValueDuplicate") => format!(
                "Duplicate value: {}",
                if scalar { shown(v) } else { "object".into() }
            ),
            _ => invalid(),
        };
        self.add(at.as_deref(), message);
    }
}

/// `oldSelf` of a rule with `optionalOldSelf`: an optional, empty on create.
fn optional(v: Option<cel::Value>) -> cel::Value {
    let o = match v {
        Some(v) => ::cel::objects::OptionalValue::of(v),
        None => ::cel::objects::OptionalValue::none(),
    };
    cel::Value::Opaque(std::sync::Arc::new(o))
}

/// A rule's `fieldPath` (`.spec.x`, `.spec['a.b']`) as the field path it names below the
/// rule's node (`spec.x`, `spec[a.b]`).
fn normalized_field_path(p: &str) -> Result<String, &'static str> {
    let mut out = String::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err("unexpected end of JSON path");
            }
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&r[..end]);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']").ok_or("unexpected end of JSON path")?;
            out.push_str(&format!("[{}]", &r[..end]));
            rest = &r[end + 2..];
        } else {
            return Err("expected [ or . but got something else");
        }
    }
    Ok(out)
}

/// How kube prints a rule (`%#v` of its `ValidationRule`) as the value of a refused one.
fn go_rule(rule: &Value) -> String {
    let s = |k: &str| serde_json::to_string(rule[k].as_str().unwrap_or_default()).unwrap_or_default();
    let reason = match rule["reason"].as_str() {
        Some(r) => format!("(*apiextensions.FieldValueErrorReason)({r:?})"),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_string(),
    };
    let optional = match rule["optionalOldSelf"].as_bool() {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".to_string(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        s("fieldPath")
    )
}

/// The causes that make the rules of `schema` unusable, under `prefix` (the schema's field
/// path): rules that do not compile, reasons kube does not know, expressions over kube's cost
/// budget, and a schema whose rules together are over it.
pub fn check(schema: &Value, prefix: &str) -> Vec<(String, String)> {
    let mut c = Check {
        causes: Vec::new(),
        total: 0,
        contributors: Vec::new(),
    };
    c.schema(schema, root_shape(schema), prefix, 1, 0);
    if c.total > STATIC_SCHEMA_LIMIT {
        let what = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema";
        for field in std::mem::take(&mut c.contributors) {
            c.causes.push((
                field,
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
                    .to_string(),
            ));
        }
        c.causes.push((
            prefix.to_string(),
            format!("Forbidden: {}", cost_message(what, c.total, STATIC_SCHEMA_LIMIT)),
        ));
    }
    c.causes
}

struct Check {
    causes: Vec<(String, String)>,
    total: u64,
    contributors: Vec<String>,
}

impl Check {
    fn schema(&mut self, schema: &Value, node_shape: Shape, at: &str, card: u64, depth: usize) {
        if depth > MAX_DEPTH || !schema.is_object() {
            return;
        }
        for (i, rule) in schema["x-kubernetes-validations"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            self.rule(
                rule,
                &node_shape,
                &format!("{at}.x-kubernetes-validations[{i}]"),
                card,
            );
        }
        if let Some(p) = schema["properties"].as_object() {
            for (k, s) in p {
                self.schema(
                    s,
                    shape(s, depth + 1),
                    &format!("{at}.properties[{k}]"),
                    card,
                    depth + 1,
                );
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(s) = schema.get(key).filter(|s| s.is_object()) {
                let card = card.saturating_mul(cardinality(schema, key));
                self.schema(s, shape(s, depth + 1), &format!("{at}.{key}"), card, depth + 1);
            }
        }
    }

    fn rule(&mut self, rule: &Value, node_shape: &Shape, at: &str, card: u64) {
        let vars = [("self", node_shape.clone()), ("oldSelf", node_shape.clone())];
        let source = rule["rule"].as_str().unwrap_or_default();
        if source.trim().is_empty() {
            self.causes.push((
                format!("{at}.rule"),
                "Required value: rule is not specified".into(),
            ));
        } else {
            match cel::compile(source, &vars) {
                Err(e) => self.causes.push((
                    format!("{at}.rule"),
                    format!("Invalid value: {}: {e}", go_rule(rule)),
                )),
                Ok(p) => {
                    if p.cost() > STATIC_EXPRESSION_LIMIT {
                        self.causes.push((
                            format!("{at}.rule"),
                            format!(
                                "Forbidden: {}",
                                cost_message("estimated rule cost", p.cost(), STATIC_EXPRESSION_LIMIT)
                            ),
                        ));
                    }
                    let cost = p.cost().saturating_mul(card);
                    self.total = self.total.saturating_add(cost);
                    if cost > 0 {
                        self.contributors.push(format!("{at}.rule"));
                    }
                }
            }
        }
        if let Some(m) = rule["messageExpression"].as_str().filter(|m| !m.is_empty()) {
            match cel::compile(m, &vars) {
                Err(e) => self.causes.push((
                    format!("{at}.messageExpression"),
                    format!("Invalid value: {}: messageExpression {e}", go_rule(rule)),
                )),
                Ok(p) if p.cost() > STATIC_EXPRESSION_LIMIT => self.causes.push((
                    format!("{at}.messageExpression"),
                    format!(
                        "Forbidden: {}",
                        cost_message(
                            "estimated messageExpression cost",
                            p.cost(),
                            STATIC_EXPRESSION_LIMIT
                        )
                    ),
                )),
                Ok(_) => {}
            }
        }
        if let Some(r) = rule["reason"].as_str().filter(|r| !REASONS.contains(r)) {
            let supported: Vec<String> = REASONS.iter().map(|r| format!("{r:?}")).collect();
            self.causes.push((
                format!("{at}.reason"),
                format!(
                    "Unsupported value: {r:?}: supported values: {}",
                    supported.join(", ")
                ),
            ));
        }
        if let Some(p) = rule["fieldPath"].as_str().filter(|p| !p.is_empty()) {
            if let Err(why) = normalized_field_path(p).and_then(|n| field_exists(node_shape, &n)) {
                self.causes.push((
                    format!("{at}.fieldPath"),
                    format!("Invalid value: {p:?}: fieldPath must be a valid path: {why}"),
                ));
            }
        }
    }
}

/// Whether the normalized `path` names a field the shape declares.
fn field_exists(node_shape: &Shape, path: &str) -> Result<(), &'static str> {
    let mut s = node_shape.clone();
    for step in path.split(['.', '[']).filter(|x| !x.is_empty()) {
        let name = step.trim_end_matches(']');
        s = match s {
            Shape::Map { fields, values, .. } => match fields.get(name) {
                Some(f) => f.clone(),
                None => values.map(|v| *v).ok_or("does not refer to a valid field")?,
            },
            _ => return Err("does not refer to a valid field"),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.replicas <= self.maxReplicas", "message": "must be less than maxReplicas", "fieldPath": ".replicas"},
                    {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable", "reason": "FieldValueForbidden"},
                    {"rule": "self.replicas >= 0", "messageExpression": "'replicas ' + string(self.replicas) + ' is negative'"}
                ],
                "properties": {
                    "replicas": {"type": "integer"},
                    "maxReplicas": {"type": "integer"},
                    "mode": {"type": "string", "maxLength": 10},
                    "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]},
                    "tags": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 5}}}}}})
    }

    fn text(causes: &[(String, String)]) -> Vec<String> {
        causes.iter().map(|(f, m)| format!("{f}: {m}")).collect()
    }

    #[test]
    fn failed_rules_are_worded_as_kube_words_them() {
        let v = Validator::of(&schema());
        let ok = json!({"spec": {"replicas": 1, "maxReplicas": 3, "mode": "a", "name": "ab"}});
        assert!(v.validate(&ok, None).is_empty(), "{:?}", v.validate(&ok, None));
        let bad = json!({"spec": {"replicas": -5, "maxReplicas": -6, "mode": "b", "name": "x"}});
        assert_eq!(
            text(&v.validate(&bad, Some(&ok))),
            [
                "spec.replicas: Invalid value: must be less than maxReplicas",
                "spec: Forbidden: mode is immutable",
                "spec: Invalid value: replicas -5 is negative",
                "spec.name: Invalid value: \"x\": failed rule: self.startsWith('a')",
            ]
        );
        // Transition rules only run on updates.
        let created = json!({"spec": {"replicas": 1, "maxReplicas": 3, "mode": "b", "name": "a"}});
        assert!(v.validate(&created, None).is_empty());
    }

    #[test]
    fn evaluation_errors_name_the_rule() {
        let s = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.spec.x > 1"}],
            "properties": {"spec": {"type": "object", "properties": {"x": {"x-kubernetes-int-or-string": true}}}}});
        let v = Validator::of(&s);
        assert_eq!(
            text(&v.validate(&json!({"spec": {}}), None)),
            ["<nil>: Invalid value: \"object\": no such key: x evaluating rule: self.spec.x > 1"]
        );
        assert_eq!(
            text(&v.validate(&json!({"spec": {"x": "a"}}), None)),
            ["<nil>: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.spec.x > 1"]
        );
    }

    #[test]
    fn optional_old_self_is_an_optional() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "!oldSelf.hasValue() || self.a >= oldSelf.value().a", "optionalOldSelf": true, "message": "a may only grow"}],
            "properties": {"a": {"type": "integer"}}}}});
        let v = Validator::of(&s);
        assert!(v.validate(&json!({"spec": {"a": 1}}), None).is_empty());
        assert_eq!(
            text(&v.validate(&json!({"spec": {"a": 1}}), Some(&json!({"spec": {"a": 2}})))),
            ["spec: Invalid value: a may only grow"]
        );
    }

    #[test]
    fn expensive_and_broken_rules_are_refused_with_the_definition() {
        let at = "spec.validation.openAPIV3Schema";
        let nested = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "list": {"type": "array", "items": {"type": "string"},
                "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}]}}}}});
        let causes = text(&check(&nested, at));
        assert!(causes.contains(&format!(
            "{at}.properties[spec].properties[list].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        )), "{causes:?}");
        let mut bounded = nested.clone();
        bounded["properties"]["spec"]["properties"]["list"]["maxItems"] = json!(10);
        bounded["properties"]["spec"]["properties"]["list"]["items"]["maxLength"] = json!(10);
        assert!(check(&bounded, at).is_empty(), "{:?}", check(&bounded, at));
        let broken = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.x ==", "reason": "Nope"},
            {"rule": "self.a == 1", "fieldPath": ".nope"}]});
        let causes = text(&check(&broken, at));
        assert!(causes[0].starts_with(&format!("{at}.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.x ==\", Message:\"\"")), "{causes:?}");
        assert!(
            causes[0].contains("compilation failed: ERROR: <input>:1:"),
            "{causes:?}"
        );
        assert_eq!(causes[1], format!("{at}.x-kubernetes-validations[0].reason: Unsupported value: \"Nope\": supported values: \"FieldValueInvalid\", \"FieldValueForbidden\", \"FieldValueRequired\", \"FieldValueDuplicate\""));
        assert_eq!(causes[2], format!("{at}.x-kubernetes-validations[1].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path: does not refer to a valid field"));
    }
}
