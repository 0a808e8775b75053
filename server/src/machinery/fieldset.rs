//! Sets of field paths, the unit of ownership in server-side apply, and their `FieldsV1`
//! encoding in `metadata.managedFields`.
//!
//! A path step is a struct field or map key (`f:name`), a list-map item by its key fields
//! (`k:{"name":"web"}`), a set item by value (`v:"a"`), or an atomic list's item by position
//! (`i:0`). Which step a value gets comes from the schema: atomic maps, structs and lists are
//! owned as one leaf, granular ones field by field.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::machinery::schema::{ListType, Node, Shape};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// A struct field or map key.
    Field(String),
    /// A list-map item, by its key fields (a JSON object, serialized canonically).
    Key(String),
    /// A set item, by its JSON value.
    Value(String),
    /// A list item by position (only in `FieldsV1` read from clients; never produced here).
    Index(usize),
}

impl Step {
    fn encode(&self) -> String {
        match self {
            Step::Field(f) => format!("f:{f}"),
            Step::Key(k) => format!("k:{k}"),
            Step::Value(v) => format!("v:{v}"),
            Step::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<Step> {
        let (kind, rest) = s.split_once(':')?;
        match kind {
            "f" => Some(Step::Field(rest.to_string())),
            "k" => Some(Step::Key(rest.to_string())),
            "v" => Some(Step::Value(rest.to_string())),
            "i" => rest.parse().ok().map(Step::Index),
            _ => None,
        }
    }

    /// How kube-apiserver prints the step in a conflict (`.spec.containers[name="web"]`).
    fn display(&self, out: &mut String) {
        match self {
            Step::Field(f) => {
                out.push('.');
                out.push_str(f);
            }
            Step::Key(k) => {
                let pairs: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                out.push('[');
                out.push_str(&pairs.join(","));
                out.push(']');
            }
            Step::Value(v) => {
                out.push_str("[=");
                out.push_str(v);
                out.push(']');
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
}

/// A set of field paths, as a trie: `member` marks the path to this node itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<Step, FieldSet>,
}

impl FieldSet {
    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn child(&mut self, step: Step) -> &mut FieldSet {
        self.children.entry(step).or_default()
    }

    /// Every path in the set, each as its steps.
    pub fn paths(&self) -> Vec<Vec<Step>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (step, child) in &self.children {
            prefix.push(step.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Adds `path`.
    pub fn insert(&mut self, path: &[Step]) {
        match path.split_first() {
            None => self.member = true,
            Some((step, rest)) => self.child(step.clone()).insert(rest),
        }
    }

    /// Removes every path of `other` from this set.
    pub fn subtract(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (step, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(step) {
                mine.subtract(theirs);
                if mine.is_empty() {
                    self.children.remove(step);
                }
            }
        }
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (step, mine) in &self.children {
            if let Some(theirs) = other.children.get(step) {
                let both = mine.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(step.clone(), both);
                }
            }
        }
        out
    }

    /// Adds every path of `other`.
    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (step, theirs) in &other.children {
            self.child(step.clone()).union(theirs);
        }
    }

    /// The `FieldsV1` JSON form: a leaf is `{}`; a path that is itself in the set and also
    /// has children carries `"."`.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (step, child) in &self.children {
            m.insert(step.encode(), child.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Reads a `FieldsV1` value; `None` if it is malformed.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let fields = v.as_object()?;
        let mut out = FieldSet {
            member: fields.is_empty(),
            children: BTreeMap::new(),
        };
        for (k, child) in fields {
            if k == "." {
                out.member = true;
            } else {
                out.children
                    .insert(Step::decode(k)?, FieldSet::from_fields_v1(child)?);
            }
        }
        Some(out)
    }
}

/// A path the way conflicts print it (`.spec.replicas`).
pub fn display(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        step.display(&mut out);
    }
    out
}

/// The key step of a list-map item: its key fields as canonical JSON, sorted by name
/// (`{"containerPort":80,"protocol":"TCP"}`). A key field the item omits takes the default the
/// item's schema `element` declares for it, as structured-merge-diff does, so `{containerPort:
/// 80}` and the defaulted `{containerPort: 80, protocol: TCP}` are the same item. `None` if a
/// key field is missing and has no default.
pub fn item_key(item: &Value, keys: &[Value], element: Option<Node<'_>>) -> Option<Step> {
    let mut fields: Vec<(&str, &Value)> = Vec::with_capacity(keys.len());
    for key in keys {
        let key = key.as_str()?;
        let value = match item.get(key) {
            Some(v) => v,
            None => element
                .and_then(|e| e.field(key))
                .and_then(|f| f.default_value())?,
        };
        fields.push((key, value));
    }
    fields.sort_by_key(|(k, _)| *k);
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert(k.to_string(), v.clone());
    }
    serde_json::to_string(&m).ok().map(Step::Key)
}

/// The set-item step of a value.
pub fn value_step(v: &Value) -> Step {
    Step::Value(v.to_string())
}

/// Every leaf field `value` sets, by its schema: what a manager owns after writing `value`.
pub fn fields_of(value: &Value, node: Option<Node<'_>>) -> FieldSet {
    let mut out = FieldSet::default();
    walk(value, node, &mut out);
    out
}

fn walk(value: &Value, node: Option<Node<'_>>, out: &mut FieldSet) {
    let shape = node.map_or(Shape::Any, |n| n.shape());
    let atomic = node.is_some_and(|n| n.is_atomic());
    match (value, shape) {
        (Value::Object(fields), Shape::Struct | Shape::Map | Shape::Any) if !atomic && !fields.is_empty() => {
            for (k, v) in fields {
                let child = node.and_then(|n| match shape {
                    Shape::Struct => n.field(k),
                    Shape::Map => n.element(),
                    _ => None,
                });
                // A field a struct does not declare is owned only where unknown fields are
                // kept (a custom resource's `x-kubernetes-preserve-unknown-fields`).
                if shape == Shape::Struct && child.is_none() && !node.is_some_and(|n| n.preserves_unknown()) {
                    continue;
                }
                walk(v, child, out.child(Step::Field(k.clone())));
            }
            if out.children.is_empty() {
                out.member = true;
            }
        }
        (Value::Array(items), Shape::List) => match node.map(|n| n.list_type()) {
            Some(ListType::Map(keys)) => {
                let element = node.and_then(|n| n.element());
                for item in items {
                    match item_key(item, keys, element) {
                        Some(step) => {
                            let entry = out.child(step);
                            entry.member = true;
                            walk(item, element, entry);
                        }
                        None => out.member = true,
                    }
                }
                if items.is_empty() {
                    out.member = true;
                }
            }
            Some(ListType::Set) => {
                for item in items {
                    out.child(value_step(item)).member = true;
                }
                if items.is_empty() {
                    out.member = true;
                }
            }
            _ => out.member = true,
        },
        _ => out.member = true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machinery::schema::schemas;

    fn deployment_schema() -> Node<'static> {
        schemas().builtin("apps", "v1", "Deployment").expect("schema")
    }

    #[test]
    fn fields_follow_the_schema_and_round_trip_through_fields_v1() {
        let d = json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx", "args": ["a", "b"]}],
                                           "nodeSelector": {"disk": "ssd"}}}}});
        let set = fields_of(&d, Some(deployment_schema()));
        let v1 = set.to_fields_v1();
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:labels": {"f:app": {}}},
                   "f:spec": {"f:replicas": {}, "f:selector": {},
                              "f:template": {"f:spec": {
                                  "f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}},
                                  "f:nodeSelector": {}}}}})
        );
        assert_eq!(FieldSet::from_fields_v1(&v1), Some(set.clone()));
        let paths: Vec<String> = set.paths().iter().map(|p| display(p)).collect();
        assert!(paths.contains(&".spec.replicas".to_string()), "{paths:?}");
        assert!(
            paths.contains(&".spec.template.spec.containers[name=\"nginx\"].image".to_string()),
            "{paths:?}"
        );
        assert!(FieldSet::from_fields_v1(&json!({"x:bad": {}})).is_none());
    }

    #[test]
    fn set_algebra() {
        let a = FieldSet::from_fields_v1(&json!({"f:a": {}, "f:b": {"f:c": {}}})).unwrap();
        let b = FieldSet::from_fields_v1(&json!({"f:b": {"f:c": {}, "f:d": {}}})).unwrap();
        assert_eq!(a.intersection(&b).to_fields_v1(), json!({"f:b": {"f:c": {}}}));
        let mut c = a.clone();
        c.subtract(&b);
        assert_eq!(c.to_fields_v1(), json!({"f:a": {}}));
        c.union(&b);
        assert_eq!(
            c.to_fields_v1(),
            json!({"f:a": {}, "f:b": {"f:c": {}, "f:d": {}}})
        );
        assert!(c
            .paths()
            .contains(&vec![Step::Field("b".into()), Step::Field("d".into())]));
    }
}
