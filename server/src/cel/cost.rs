//! The cost of a CEL expression, estimated before it runs, the way kube-apiserver bounds
//! `x-kubernetes-validations` and admission policies: every variable has a [`Shape`] (the most
//! items a list may hold, the longest a string may be, the fields of an object), and the
//! estimate multiplies what a comprehension does per element by the most elements its range
//! may have. A rule over an unbounded list is priced at the list's largest possible size
//! within a request (kube's estimate from the 3 MiB request limit), so nested loops over such
//! lists exceed the budget, as they do in kube. The same estimator priced on the actual
//! values' shapes bounds a rule at run time (the crate has no cost tracking of its own).

use std::collections::BTreeMap;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::objects::{Key, Value};

/// kube's `maxRequestSizeBytes`: the largest object a request may carry.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// The most elements of an unbounded list whose smallest element serializes in `min_size`
/// bytes (plus a comma), within one request.
pub fn unbounded_items(min_size: u64) -> u64 {
    (MAX_REQUEST_SIZE_BYTES - 2) / (min_size + 1)
}

/// The longest an unbounded string may be within one request.
pub const UNBOUNDED_STRING: u64 = MAX_REQUEST_SIZE_BYTES - 2;

/// What the estimator knows of a value: its kind and the largest it may be.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A number, a boolean or null: constant cost.
    Scalar,
    /// A string of at most `max` bytes.
    Str {
        /// Longest length.
        max: u64,
    },
    /// A list of at most `max` items.
    List {
        /// Most items.
        max: u64,
        /// Every item's shape.
        item: Box<Shape>,
    },
    /// An object: named `fields`, or any keys with `values`, at most `max` entries.
    Map {
        /// Most entries.
        max: u64,
        /// Declared fields.
        fields: BTreeMap<String, Shape>,
        /// The shape of entries not declared (`additionalProperties`).
        values: Option<Box<Shape>>,
    },
    /// Anything (int-or-string, preserved unknown fields, values of mixed kinds), no larger
    /// than `max` (items, entries or bytes).
    Any {
        /// Largest size.
        max: u64,
    },
}

impl Shape {
    /// An unknown value as large as a request allows.
    pub fn unbounded() -> Shape {
        Shape::Any {
            max: UNBOUNDED_STRING,
        }
    }

    /// How many elements iterating over the value visits, and each element's shape.
    fn iteration(&self) -> (u64, Shape, Shape) {
        match self {
            Shape::List { max, item } => (*max, (**item).clone(), Shape::Scalar),
            Shape::Map { max, fields, values } => {
                let longest_key = fields.keys().map(|k| k.len() as u64).max().unwrap_or(0);
                let key = Shape::Str {
                    max: if values.is_some() {
                        UNBOUNDED_STRING
                    } else {
                        longest_key
                    },
                };
                let value = fields
                    .values()
                    .chain(values.as_deref())
                    .cloned()
                    .reduce(Shape::union)
                    .unwrap_or(Shape::Scalar);
                (*max, key, value)
            }
            Shape::Any { max } => (*max, self.clone(), self.clone()),
            Shape::Scalar | Shape::Str { .. } => (0, Shape::Scalar, Shape::Scalar),
        }
    }

    /// The largest size: bytes of a string, items of a list, entries of a map.
    fn size(&self) -> u64 {
        match self {
            Shape::Scalar => 1,
            Shape::Str { max } | Shape::List { max, .. } | Shape::Map { max, .. } | Shape::Any { max } => {
                *max
            }
        }
    }

    /// What a field of the value may be.
    fn field(&self, name: &str) -> Shape {
        match self {
            Shape::Map { fields, values, .. } => fields
                .get(name)
                .cloned()
                .or_else(|| values.as_deref().cloned())
                .unwrap_or(Shape::Scalar),
            Shape::List { item, .. } => (**item).clone(),
            Shape::Any { .. } => self.clone(),
            Shape::Scalar | Shape::Str { .. } => Shape::Scalar,
        }
    }

    /// A shape covering both.
    pub fn union(self, other: Shape) -> Shape {
        match (self, other) {
            (Shape::Scalar, Shape::Scalar) => Shape::Scalar,
            (Shape::Str { max: a }, Shape::Str { max: b }) => Shape::Str { max: a.max(b) },
            (Shape::List { max: a, item: i }, Shape::List { max: b, item: j }) => Shape::List {
                max: a.max(b),
                item: Box::new(i.union(*j)),
            },
            (
                Shape::Map {
                    max: a,
                    fields: mut f,
                    values: v,
                },
                Shape::Map {
                    max: b,
                    fields: g,
                    values: w,
                },
            ) => {
                for (k, s) in g {
                    let merged = match f.remove(&k) {
                        Some(existing) => existing.union(s),
                        None => s,
                    };
                    f.insert(k, merged);
                }
                let values = match (v, w) {
                    (Some(v), Some(w)) => Some(Box::new(v.union(*w))),
                    (v, w) => v.or(w),
                };
                Shape::Map {
                    max: a.max(b),
                    fields: f,
                    values,
                }
            }
            (a, b) => Shape::Any {
                max: a.size().max(b.size()),
            },
        }
    }

    /// The shape of an actual value: its real sizes, for the run-time bound.
    pub fn of_value(v: &Value) -> Shape {
        match v {
            Value::String(s) => Shape::Str { max: s.len() as u64 },
            Value::Bytes(b) => Shape::Str { max: b.len() as u64 },
            Value::List(items) => Shape::List {
                max: items.len() as u64,
                item: Box::new(
                    items
                        .iter()
                        .map(Shape::of_value)
                        .reduce(Shape::union)
                        .unwrap_or(Shape::Scalar),
                ),
            },
            Value::Map(m) => {
                let mut fields = BTreeMap::new();
                let mut values: Option<Shape> = None;
                for (k, v) in m.map.iter() {
                    let s = Shape::of_value(v);
                    match k {
                        Key::String(name) => {
                            fields.insert(name.to_string(), s);
                        }
                        _ => values = Some(values.map_or(s.clone(), |w| w.union(s))),
                    }
                }
                Shape::Map {
                    max: m.map.len() as u64,
                    fields,
                    values: values.map(Box::new),
                }
            }
            _ => Shape::Scalar,
        }
    }
}

/// The functions whose cost grows with the length of the string they read (kube prices them
/// at a tenth of a unit per byte).
const STRING_TRAVERSING: [&str; 19] = [
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "find",
    "findAll",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "trim",
    "substring",
    "charAt",
    "reverse",
    "format",
    "strings.quote",
    "url",
    "semver",
    "isSemver",
];

/// The functions whose cost grows with the number of items of the list they read.
const LIST_TRAVERSING: [&str; 14] = [
    "@in",
    "isSorted",
    "sum",
    "min",
    "max",
    "indexOf",
    "lastIndexOf",
    "join",
    "flatten",
    "slice",
    "sort",
    "distinct",
    "sets.contains",
    "sets.intersects",
];

/// Names every expression may use besides its variables: CEL's type names and the
/// namespaces of library functions.
const BUILTIN_NAMES: [&str; 18] = [
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "google",
    "optional",
    "lists",
    "strings",
    "base64",
    "sets",
    "format",
];

/// kube's `MaxFormatSize`: the longest a format's name may be (what comparing formats costs).
const MAX_FORMAT_SIZE: u64 = 64;

/// kube's `MaxNameFormatRegexSize` times its `RegexStringLengthCostFactor` (a quarter): what
/// each tenth of a unit of the string `validate` checks is multiplied by.
const FORMAT_VALIDATE_FACTOR: u64 = 128 / 4;

/// Cost estimation of one expression.
pub struct Estimator {
    scopes: Vec<(String, Shape)>,
    undeclared: Option<(String, u64)>,
}

impl Estimator {
    /// An estimator for an expression that may use `variables`.
    pub fn new(variables: &[(&str, Shape)]) -> Estimator {
        Estimator {
            scopes: variables
                .iter()
                .map(|(n, s)| (n.to_string(), s.clone()))
                .collect(),
            undeclared: None,
        }
    }

    /// The first name the expression uses that is neither a variable nor a type name, and
    /// the id of the expression naming it.
    pub fn undeclared(&self) -> Option<(&str, u64)> {
        self.undeclared.as_ref().map(|(n, id)| (n.as_str(), *id))
    }

    /// The estimated cost of `e`.
    pub fn cost(&mut self, e: &IdedExpr) -> u64 {
        self.walk(e, 0).0
    }

    fn lookup(&mut self, name: &str, id: u64) -> Shape {
        if let Some((_, s)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return s.clone();
        }
        if !BUILTIN_NAMES.contains(&name) && self.undeclared.is_none() {
            self.undeclared = Some((name.to_string(), id));
        }
        Shape::unbounded()
    }

    /// The cost of `e` and the shape of its result.
    fn walk(&mut self, e: &IdedExpr, depth: usize) -> (u64, Shape) {
        // The parser bounds nesting; a guard keeps the estimator's recursion bounded too.
        if depth > 250 {
            return (u64::MAX, Shape::unbounded());
        }
        match &e.expr {
            Expr::Unspecified => (0, Shape::Scalar),
            Expr::Literal(LiteralValue::String(s)) => (
                0,
                Shape::Str {
                    max: s.inner().len() as u64,
                },
            ),
            Expr::Literal(LiteralValue::Bytes(b)) => (
                0,
                Shape::Str {
                    max: b.inner().len() as u64,
                },
            ),
            Expr::Literal(_) => (0, Shape::Scalar),
            Expr::Ident(name) => (1, self.lookup(name, e.id)),
            Expr::Select(sel) => {
                let (c, s) = self.walk(&sel.operand, depth + 1);
                let out = if sel.test {
                    Shape::Scalar
                } else {
                    s.field(&sel.field)
                };
                (c.saturating_add(1), out)
            }
            Expr::List(list) => {
                let mut cost = 10u64;
                let mut item: Option<Shape> = None;
                for el in &list.elements {
                    let (c, s) = self.walk(el, depth + 1);
                    cost = cost.saturating_add(c);
                    item = Some(item.map_or(s.clone(), |i| i.union(s)));
                }
                (
                    cost,
                    Shape::List {
                        max: list.elements.len() as u64,
                        item: Box::new(item.unwrap_or(Shape::Scalar)),
                    },
                )
            }
            Expr::Map(map) => {
                let mut cost = 30u64;
                let mut values: Option<Shape> = None;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(m) = &entry.expr {
                        let (ck, _) = self.walk(&m.key, depth + 1);
                        let (cv, s) = self.walk(&m.value, depth + 1);
                        cost = cost.saturating_add(ck).saturating_add(cv);
                        values = Some(values.map_or(s.clone(), |v| v.union(s)));
                    }
                }
                (
                    cost,
                    Shape::Map {
                        max: map.entries.len() as u64,
                        fields: BTreeMap::new(),
                        values: values.map(Box::new),
                    },
                )
            }
            Expr::Struct(st) => {
                let mut cost = 40u64;
                for entry in &st.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        cost = cost.saturating_add(self.walk(&f.value, depth + 1).0);
                    }
                }
                (cost, Shape::unbounded())
            }
            Expr::Call(call) => self.call(&call.func_name, call.target.as_deref(), &call.args, depth),
            Expr::Comprehension(comp) => {
                let (range_cost, range) = self.walk(&comp.iter_range, depth + 1);
                let (init_cost, init) = self.walk(&comp.accu_init, depth + 1);
                let (n, first, second) = range.iteration();
                let (var1, var2) = match &comp.iter_var2 {
                    // Two-variable comprehensions: index and item, or key and value.
                    Some(_) if matches!(range, Shape::List { .. }) => (Shape::Scalar, first),
                    Some(_) => (first, second),
                    None => (first, Shape::Scalar),
                };
                let base = self.scopes.len();
                self.scopes.push((comp.iter_var.clone(), var1));
                if let Some(v2) = &comp.iter_var2 {
                    self.scopes.push((v2.clone(), var2));
                }
                self.scopes.push((comp.accu_var.clone(), init.clone()));
                let (cond_cost, _) = self.walk(&comp.loop_cond, depth + 1);
                let (step_cost, step) = self.walk(&comp.loop_step, depth + 1);
                // An accumulator that grows by a list each step (`map`, `filter`) ends as long
                // as the range times the growth.
                let accu = match (&init, step) {
                    (Shape::List { max: m0, .. }, Shape::List { max: m1, item }) => Shape::List {
                        max: m0.saturating_add(n.saturating_mul(m1.saturating_sub(*m0))),
                        item,
                    },
                    (_, step) => init.clone().union(step),
                };
                self.scopes.truncate(base);
                self.scopes.push((comp.accu_var.clone(), accu));
                let (result_cost, result) = self.walk(&comp.result, depth + 1);
                self.scopes.truncate(base);
                let per_item = cond_cost.saturating_add(step_cost).max(1);
                let cost = range_cost
                    .saturating_add(init_cost)
                    .saturating_add(n.saturating_mul(per_item))
                    .saturating_add(result_cost);
                (cost, result)
            }
        }
    }

    fn call(
        &mut self,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
        depth: usize,
    ) -> (u64, Shape) {
        let mut cost = 1u64;
        let mut shapes = Vec::with_capacity(args.len() + 1);
        // A namespaced function (`sets.contains(a, b)`, `format.uri()`) parses as a call on
        // its namespace: it is priced by its qualified name.
        let namespace = match target.map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if BUILTIN_NAMES.contains(&ns.as_str()) => Some(ns),
            _ => None,
        };
        let qualified = namespace.map(|ns| format!("{ns}.{name}"));
        let name = qualified.as_deref().unwrap_or(name);
        if let Some(t) = target.filter(|_| namespace.is_none()) {
            let (c, s) = self.walk(t, depth + 1);
            cost = cost.saturating_add(c);
            shapes.push(s);
        }
        for a in args {
            let (c, s) = self.walk(a, depth + 1);
            cost = cost.saturating_add(c);
            shapes.push(s);
        }
        let first = shapes.first().cloned().unwrap_or(Shape::Scalar);
        let longest = shapes.iter().map(Shape::size).max().unwrap_or(0);
        let tenth = |n: u64| n.div_ceil(10);
        let extra = match name {
            "_==_" | "_!=_" | "_+_" | "_<_" | "_<=_" | "_>_" | "_>=_" => match &first {
                Shape::Str { max } | Shape::Any { max } => tenth(*max),
                Shape::List { max, .. } | Shape::Map { max, .. } => *max,
                Shape::Scalar => 0,
            },
            n if STRING_TRAVERSING.contains(&n) => {
                let pattern = if matches!(n, "matches" | "find" | "findAll") {
                    shapes.get(1).map_or(1, Shape::size).max(1)
                } else {
                    1
                };
                tenth(longest).saturating_mul(pattern)
            }
            "sort" | "distinct" => longest.saturating_mul(64 - longest.leading_zeros() as u64),
            "check" => super::authz::CHECK_COST,
            "validate" => tenth(shapes.get(1).map_or(0, Shape::size)).saturating_mul(FORMAT_VALIDATE_FACTOR),
            n if LIST_TRAVERSING.contains(&n) => match &first {
                Shape::List { max, item } => max.saturating_mul(tenth(item.size()).max(1)),
                other => other.size(),
            },
            _ => 0,
        };
        let result = match name {
            "_+_" => match (shapes.first(), shapes.get(1)) {
                (Some(Shape::Str { max: a }), Some(Shape::Str { max: b })) => Shape::Str {
                    max: a.saturating_add(*b),
                },
                (Some(Shape::List { max: a, item: i }), Some(Shape::List { max: b, item: j })) => {
                    Shape::List {
                        max: a.saturating_add(*b),
                        item: Box::new((**i).clone().union((**j).clone())),
                    }
                }
                (Some(a), Some(b)) if matches!(a, Shape::Any { .. }) || matches!(b, Shape::Any { .. }) => {
                    Shape::Any {
                        max: a.size().saturating_add(b.size()),
                    }
                }
                _ => Shape::Scalar,
            },
            "_[_]" => match (&first, args.get(1).or(args.first()).map(|a| &a.expr)) {
                (Shape::Map { .. }, Some(Expr::Literal(LiteralValue::String(k)))) => first.field(k.inner()),
                (s, _) => s.iteration().2.union(s.iteration().1),
            },
            "_?_:_" => match (shapes.get(1), shapes.get(2)) {
                (Some(a), Some(b)) => a.clone().union(b.clone()),
                _ => Shape::unbounded(),
            },
            "split" | "findAll" => Shape::List {
                max: longest,
                item: Box::new(Shape::Str { max: longest }),
            },
            "lowerAscii" | "upperAscii" | "trim" | "substring" | "reverse" | "strings.quote" | "find"
            | "charAt" => Shape::Str { max: first.size() },
            "replace" => Shape::Str {
                max: first
                    .size()
                    .saturating_mul(shapes.get(2).map_or(1, Shape::size).max(1)),
            },
            "join" | "format" => Shape::Str {
                max: match &first {
                    Shape::List { max, item } => max.saturating_mul(item.size().saturating_add(longest)),
                    other => other.size().saturating_mul(longest.max(1)),
                },
            },
            "string" => Shape::Str {
                max: first.size().max(20),
            },
            "slice" | "sort" | "distinct" | "flatten" | "sortBy" => first.clone(),
            "map" | "filter" | "all" | "exists" | "exists_one" => first.clone(),
            "dyn" => first.clone(),
            // A format compares as a string as long as its name may be.
            n if n.starts_with("format.") => Shape::Str { max: MAX_FORMAT_SIZE },
            _ => Shape::Scalar,
        };
        (cost.saturating_add(extra), result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate(source: &str, vars: &[(&str, Shape)]) -> u64 {
        let env = cel::Env::stdlib();
        let program = env.compile(source).expect("parses");
        Estimator::new(vars).cost(program.expression())
    }

    fn strings(max: u64) -> Shape {
        Shape::List {
            max,
            item: Box::new(Shape::Str { max: 63 }),
        }
    }

    #[test]
    fn a_comprehension_costs_its_range_times_its_body() {
        let one = estimate("self.all(x, x.size() < 10)", &[("self", strings(100))]);
        let ten = estimate("self.all(x, x.size() < 10)", &[("self", strings(1000))]);
        assert!(one > 100 && one < 1000, "{one}");
        assert!(ten > 9 * one, "{ten} vs {one}");
    }

    #[test]
    fn nested_loops_over_unbounded_lists_cost_their_square() {
        let unbounded = strings(unbounded_items(2));
        let nested = estimate("self.all(x, self.all(y, x == y))", &[("self", unbounded.clone())]);
        assert!(nested > 100 * 10_000_000, "{nested}");
        let bounded = estimate("self.all(x, self.all(y, x == y))", &[("self", strings(10))]);
        assert!(bounded < 5_000, "{bounded}");
        let single = estimate("self.all(x, x.size() < 10)", &[("self", unbounded)]);
        assert!(single < 10_000_000, "{single}");
    }

    #[test]
    fn map_macros_yield_lists_as_long_as_their_range() {
        let vars = [("self", strings(1000))];
        let mapped = estimate("self.map(x, x + 'a').all(y, y.size() > 0)", &vars);
        let direct = estimate("self.all(y, y.size() > 0)", &vars);
        assert!(mapped > direct + 1000, "{mapped} vs {direct}");
    }

    #[test]
    fn unknown_names_are_reported() {
        let env = cel::Env::stdlib();
        let program = env
            .compile("self.a == other && [1].all(x, x > 0) && int('1') == 1")
            .expect("parses");
        let mut e = Estimator::new(&[("self", Shape::unbounded())]);
        e.cost(program.expression());
        assert_eq!(e.undeclared().map(|(n, _)| n), Some("other"));
    }

    #[test]
    fn actual_values_have_their_real_sizes() {
        let v = super::super::value::from_json(&serde_json::json!({"a": ["x", "yy"], "b": 1}));
        let s = Shape::of_value(&v);
        let Shape::Map { max, fields, .. } = s else {
            panic!("a map");
        };
        assert_eq!(max, 2);
        assert_eq!(
            fields["a"],
            Shape::List {
                max: 2,
                item: Box::new(Shape::Str { max: 2 })
            }
        );
    }
}
