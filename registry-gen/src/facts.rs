//! Joins k8s-pb messages to k8s-openapi definitions and builds the facts table.
//!
//! The join key is a name lower-cased with punctuation removed: prost re-cases identifiers
//! (`AWSElasticBlockStoreVolumeSource` becomes `AwsElasticBlockStoreVolumeSource`, `volumeID`
//! becomes `volume_id`), so only case- and punctuation-insensitive comparison is reliable.
//! A proto field whose name matches no JSON property but whose message's fields all do is a
//! Go-embedded (inline) field: its contents appear flattened in the parent's JSON.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use serde_json::{json, Map, Value};

use crate::openapi::Definitions;
use crate::proto::{Field, Kind, Markers, Message, MessageId};

/// How deep embedded messages may nest inside each other (upstream uses at most two levels).
const MAX_EMBED_DEPTH: usize = 4;

/// The versions the table was generated from.
pub struct Source {
    /// k8s-openapi's version.
    pub k8s_openapi: String,
    /// k8s-openapi's Kubernetes version feature.
    pub feature: String,
    /// k8s-pb's version.
    pub k8s_pb: String,
}

/// Figures about the join, printed by the binary so a regeneration can be sanity-checked.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages in the table.
    pub messages: usize,
    /// Messages with an OpenAPI definition.
    pub with_definition: usize,
    /// Fields joined to a JSON property of their own definition.
    pub joined_fields: usize,
    /// Inline (Go-embedded) fields of messages with a definition, as `Message.field`.
    pub inline_fields: Vec<String>,
    /// Fields of messages whose definition has properties that matched none (`Message.field`).
    pub unmatched_fields: Vec<String>,
    /// Definition properties no proto field provides (besides apiVersion and kind).
    pub uncovered_properties: Vec<String>,
    /// Definitions without a proto message.
    pub definitions_without_message: Vec<String>,
}

/// Lower-case, alphanumerics only: the join key between proto and JSON names.
fn key(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// `volume_source` → `volumeSource`: the proto field name as k8s writes it.
fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    for (i, part) in snake.split('_').enumerate() {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            if i == 0 {
                out.push(first);
            } else {
                out.push(first.to_ascii_uppercase());
            }
            out.extend(chars);
        }
    }
    out
}

/// The OpenAPI package prefix of a k8s-pb module (`apiextensions_apiserver` → `io.k8s.apiextensions-apiserver`).
fn openapi_package(module: &[String]) -> String {
    let mut parts = vec!["io".to_string(), "k8s".to_string()];
    for (i, seg) in module.iter().enumerate() {
        parts.push(if i == 0 {
            seg.replace('_', "-")
        } else {
            seg.clone()
        });
    }
    parts.join(".")
}

fn last_segment(def: &str) -> &str {
    def.rsplit('.').next().unwrap_or(def)
}

/// A definition's JSON property names indexed by join key.
type Props = BTreeMap<String, String>;

fn props_of(defs: &Definitions, def: &str) -> Result<Props> {
    let mut out = Props::new();
    for p in defs.get(def).into_iter().flatten() {
        if let Some(prev) = out.insert(key(p), p.clone()) {
            bail!("{def}: properties {prev} and {p} share a join key");
        }
    }
    Ok(out)
}

struct Joiner<'a> {
    msgs: &'a BTreeMap<MessageId, Message>,
    defs: &'a Definitions,
    /// Each message's own definition, if any.
    own_def: BTreeMap<MessageId, String>,
    /// Each message's Go type name.
    go_name: BTreeMap<MessageId, String>,
}

impl<'a> Joiner<'a> {
    fn new(msgs: &'a BTreeMap<MessageId, Message>, defs: &'a Definitions) -> Result<Self> {
        let mut by_package: BTreeMap<(String, String), &String> = BTreeMap::new();
        let mut by_name: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for d in defs.keys() {
            let (pkg, name) = d.rsplit_once('.').unwrap_or(("", d));
            if let Some(prev) = by_package.insert((pkg.to_string(), key(name)), d) {
                bail!("definitions {prev} and {d} share a join key");
            }
            by_name.entry(key(name)).or_default().insert(name);
        }
        let known = |lower: &str| -> Option<String> {
            match by_name.get(lower) {
                Some(names) if names.len() == 1 => names.iter().next().map(|n| n.to_string()),
                _ => None,
            }
        };
        let mut own_def = BTreeMap::new();
        let mut go_name = BTreeMap::new();
        for (id, msg) in msgs {
            let (module, rust) = id;
            let own = by_package
                .get(&(openapi_package(module), key(rust)))
                .map(|d| d.to_string());
            let doc_name = |m: &Message, rust: &str| {
                m.doc_first_word.clone().filter(|w| {
                    w.eq_ignore_ascii_case(rust) && w.starts_with(|c: char| c.is_ascii_uppercase())
                })
            };
            let name = own
                .as_deref()
                .map(|d| last_segment(d).to_string())
                .or_else(|| known(&key(rust)))
                .or_else(|| doc_name(msg, rust))
                .or_else(|| {
                    let base = rust.strip_suffix("List")?;
                    let base_msg = msgs.get(&(module.clone(), base.to_string()));
                    known(&key(base))
                        .or_else(|| base_msg.and_then(|m| doc_name(m, base)))
                        .map(|b| format!("{b}List"))
                })
                .unwrap_or_else(|| rust.clone());
            if let Some(d) = own {
                own_def.insert(id.clone(), d);
            }
            go_name.insert(id.clone(), name);
        }
        Ok(Joiner {
            msgs,
            defs,
            own_def,
            go_name,
        })
    }

    fn proto_name(&self, id: &MessageId) -> String {
        let go = self.go_name.get(id).cloned().unwrap_or_else(|| id.1.clone());
        format!("k8s.io.{}.{go}", id.0.join("."))
    }

    /// Whether every field of `id` (looking through nested embedded messages) is a property.
    fn fits(&self, id: &MessageId, props: &Props, depth: usize) -> bool {
        let Some(msg) = self.msgs.get(id) else {
            return false;
        };
        depth < MAX_EMBED_DEPTH
            && !msg.fields.is_empty()
            && msg.fields.iter().all(|f| {
                props.contains_key(&key(&f.rust_name))
                    || self
                        .embedded_target(f)
                        .is_some_and(|t| self.fits(t, props, depth + 1))
            })
    }

    /// The message a field could embed: a single (non-repeated) message.
    fn embedded_target<'f>(&self, f: &'f Field) -> Option<&'f MessageId> {
        (f.kind == Kind::Message && !f.repeated)
            .then_some(f.message.as_ref())
            .flatten()
    }

    /// The JSON name of `f` under `props`, or `None` when `f` is inline.
    fn resolve(&self, f: &Field, props: &Props) -> Option<String> {
        if let Some(p) = props.get(&key(&f.rust_name)) {
            return Some(p.clone());
        }
        match self.embedded_target(f) {
            Some(t) if !props.is_empty() && self.fits(t, props, 1) => None,
            _ => Some(lower_camel(&f.rust_name)),
        }
    }

    /// Records, for every message embedded (transitively) under `props`, those props.
    fn record_embedded(&self, id: &MessageId, props: &Props, out: &mut BTreeMap<MessageId, Props>) {
        let Some(msg) = self.msgs.get(id) else { return };
        for f in &msg.fields {
            if self.resolve(f, props).is_none() {
                if let Some(t) = self.embedded_target(f) {
                    if !self.own_def.contains_key(t) && !out.contains_key(t) {
                        out.insert(t.clone(), props.clone());
                        self.record_embedded(t, props, out);
                    }
                }
            }
        }
    }

    /// The property names each message's fields are resolved against.
    fn message_props(&self) -> Result<BTreeMap<MessageId, Props>> {
        let mut out = BTreeMap::new();
        for (id, def) in &self.own_def {
            out.insert(id.clone(), props_of(self.defs, def)?);
        }
        let mut embedded = BTreeMap::new();
        for (id, props) in &out {
            self.record_embedded(id, props, &mut embedded);
        }
        for (id, props) in embedded {
            out.entry(id).or_insert(props);
        }
        // Messages with no definition of their own (older API versions, lists) borrow the
        // property names of the same Go type in another package, when one exists.
        let mut by_go_name: BTreeMap<&str, &String> = BTreeMap::new();
        for def in self.defs.keys() {
            by_go_name.entry(last_segment(def)).or_insert(def);
        }
        for id in self.msgs.keys() {
            if out.contains_key(id) {
                continue;
            }
            let borrowed = match self.go_name.get(id).and_then(|g| by_go_name.get(g.as_str())) {
                Some(def) => props_of(self.defs, def)?,
                None => Props::new(),
            };
            out.insert(id.clone(), borrowed);
        }
        Ok(out)
    }

    /// Markers of `id`'s fields keyed by JSON name, descending into inline fields.
    fn collect_markers(
        &self,
        id: &MessageId,
        props: &Props,
        depth: usize,
        out: &mut BTreeMap<String, Markers>,
    ) -> Result<()> {
        let Some(msg) = self.msgs.get(id) else {
            return Ok(());
        };
        for f in &msg.fields {
            match (self.resolve(f, props), self.embedded_target(f)) {
                (None, Some(t)) if depth < MAX_EMBED_DEPTH => {
                    self.collect_markers(t, props, depth + 1, out)?
                }
                (Some(name), _) if f.markers.has_field_markers() => match out.entry(name) {
                    Entry::Occupied(e) => {
                        bail!("{}: property {} gets markers twice", self.proto_name(id), e.key())
                    }
                    Entry::Vacant(v) => {
                        v.insert(f.markers.clone());
                    }
                },
                _ => {}
            }
        }
        Ok(())
    }
}

fn marker_json(m: &Markers) -> Value {
    let mut o = Map::new();
    if let Some(v) = &m.list_type {
        o.insert("listType".into(), json!(v));
    }
    if !m.list_map_keys.is_empty() {
        o.insert("listMapKeys".into(), json!(m.list_map_keys));
    }
    if let Some(v) = &m.patch_strategy {
        o.insert("patchStrategy".into(), json!(v));
    }
    if let Some(v) = &m.patch_merge_key {
        o.insert("patchMergeKey".into(), json!(v));
    }
    if let Some(v) = &m.map_type {
        o.insert("mapType".into(), json!(v));
    }
    if let Some(v) = &m.default {
        o.insert("default".into(), v.clone());
    }
    Value::Object(o)
}

/// Builds the facts table as a JSON value, with figures about the join.
pub fn build(
    msgs: &BTreeMap<MessageId, Message>,
    defs: &Definitions,
    source: &Source,
) -> Result<(Value, Stats)> {
    let j = Joiner::new(msgs, defs)?;
    let props = j.message_props()?;
    let mut stats = Stats {
        messages: msgs.len(),
        with_definition: j.own_def.len(),
        ..Stats::default()
    };
    let mut messages = Map::new();
    for (id, msg) in msgs {
        let name = j.proto_name(id);
        let own = j.own_def.get(id);
        let mprops = props.get(id).cloned().unwrap_or_default();
        let mut fields: Vec<&Field> = msg.fields.iter().collect();
        fields.sort_by_key(|f| f.tag);
        let mut out_fields = Vec::new();
        let mut covered = BTreeSet::new();
        for f in fields {
            let mut o = Map::new();
            let resolved = j.resolve(f, &mprops);
            let label = format!("{}.{}", j.go_name[id], f.rust_name);
            match &resolved {
                Some(n) if own.is_some() && mprops.contains_key(&key(&f.rust_name)) => {
                    stats.joined_fields += 1;
                    covered.insert(n.clone());
                }
                Some(_) if own.is_some() && !mprops.is_empty() => stats.unmatched_fields.push(label),
                None if own.is_some() => stats.inline_fields.push(label),
                _ => {}
            }
            o.insert(
                "name".into(),
                json!(resolved.clone().unwrap_or_else(|| lower_camel(&f.rust_name))),
            );
            o.insert("tag".into(), json!(f.tag));
            o.insert("kind".into(), json!(f.kind.as_str()));
            if f.repeated {
                o.insert("repeated".into(), json!(true));
            }
            if let Some(t) = &f.message {
                o.insert("message".into(), json!(j.proto_name(t)));
            }
            if let Some(v) = f.map_value {
                o.insert("value".into(), json!(v.as_str()));
            }
            if resolved.is_none() {
                o.insert("inline".into(), json!(true));
            }
            out_fields.push(Value::Object(o));
        }
        if let Some(def) = own {
            let mut inline_props = BTreeSet::new();
            for f in &msg.fields {
                if let (None, Some(t)) = (j.resolve(f, &mprops), j.embedded_target(f)) {
                    j.collect_names(t, &mprops, 1, &mut inline_props);
                }
            }
            covered.extend(inline_props);
            for p in defs.get(def).into_iter().flatten() {
                if !covered.contains(p) && p != "apiVersion" && p != "kind" {
                    stats.uncovered_properties.push(format!("{def}.{p}"));
                }
            }
        }
        if messages
            .insert(name.clone(), json!({"definition": own, "fields": out_fields}))
            .is_some()
        {
            bail!("two k8s-pb messages map to proto name {name}");
        }
    }
    let with_message: BTreeSet<&String> = j.own_def.values().collect();
    stats.definitions_without_message = defs
        .keys()
        .filter(|d| !with_message.contains(d))
        .cloned()
        .collect();

    let mut definitions = Map::new();
    for (id, def) in &j.own_def {
        let mut markers = BTreeMap::new();
        let mprops = props.get(id).cloned().unwrap_or_default();
        j.collect_markers(id, &mprops, 0, &mut markers)?;
        // Schema-only types (IntOrString, JSONSchemaPropsOrArray, ...) have no properties to
        // carry markers; elsewhere a marker must land on a real property.
        let def_props = defs.get(def).cloned().unwrap_or_default();
        if def_props.is_empty() {
            markers.clear();
        }
        if let Some(stray) = markers.keys().find(|p| !def_props.contains(*p)) {
            bail!("{def}: markers on {stray}, which is not a property");
        }
        let mut entry = Map::new();
        if let Some(st) = &j.msgs[id].markers.struct_type {
            entry.insert("structType".into(), json!(st));
        }
        if !markers.is_empty() {
            let p: Map<String, Value> = markers.iter().map(|(k, m)| (k.clone(), marker_json(m))).collect();
            entry.insert("properties".into(), Value::Object(p));
        }
        if !entry.is_empty() {
            definitions.insert(def.clone(), Value::Object(entry));
        }
    }
    let table = json!({
        "source": {"k8s-openapi": source.k8s_openapi, "feature": source.feature, "k8s-pb": source.k8s_pb},
        "messages": messages,
        "definitions": definitions,
        "lists": list_descriptions(&j),
    });
    Ok((table, stats))
}

/// The descriptions of the `*List` definitions, which k8s-openapi does not have (it has one
/// generic `List<T>`) and the server synthesizes: for each list message without a
/// definition, by definition name, the list's description and those of its `items` and
/// `metadata`.
fn list_descriptions(j: &Joiner<'_>) -> Map<String, Value> {
    let mut lists = Map::new();
    for (id, msg) in j.msgs {
        let go_name = &j.go_name[id];
        let field = |name: &str| msg.fields.iter().find(|f| f.rust_name == name);
        let (Some(items), Some(metadata)) = (field("items"), field("metadata")) else {
            continue;
        };
        // Only lists of the types k8s-openapi defines (the ones the server can serve).
        let of_defined = items.message.as_ref().is_some_and(|t| j.own_def.contains_key(t));
        if !go_name.ends_with("List") || j.own_def.contains_key(id) || !items.repeated || !of_defined {
            continue;
        }
        lists.insert(
            format!("{}.{go_name}", openapi_package(&id.0)),
            json!({
                "description": msg.description,
                "items": items.description,
                "metadata": metadata.description,
            }),
        );
    }
    lists
}

impl Joiner<'_> {
    /// JSON names of `id`'s fields under `props`, descending into inline fields.
    fn collect_names(&self, id: &MessageId, props: &Props, depth: usize, out: &mut BTreeSet<String>) {
        let Some(msg) = self.msgs.get(id) else { return };
        for f in &msg.fields {
            match (self.resolve(f, props), self.embedded_target(f)) {
                (None, Some(t)) if depth < MAX_EMBED_DEPTH => self.collect_names(t, props, depth + 1, out),
                (Some(n), _) => {
                    out.insert(n);
                }
                _ => {}
            }
        }
    }
}

/// Renders the table: sorted keys, two-space indent, and each object whose values are all
/// scalars or arrays of scalars (a field, a property's markers) on one line, so a change to
/// one field is a one-line diff.
pub fn render(v: &Value) -> String {
    let mut out = String::new();
    write_value(v, 0, &mut out);
    out.push('\n');
    out
}

fn is_leaf(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.values().all(|x| match x {
            Value::Array(a) => a.iter().all(|e| !e.is_object() && !e.is_array()),
            Value::Object(_) => false,
            _ => true,
        }),
        Value::Array(_) => false,
        _ => true,
    }
}

fn write_compact(v: &Value, out: &mut String) {
    match v {
        Value::Object(o) => {
            let keys: BTreeSet<&String> = o.keys().collect();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_compact(&o[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_compact(e, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_value(v: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize| "  ".repeat(n);
    match v {
        Value::Object(o) if !o.is_empty() && !is_leaf(v) => {
            out.push_str("{\n");
            let keys: BTreeSet<&String> = o.keys().collect();
            let n = keys.len();
            for (i, k) in keys.into_iter().enumerate() {
                out.push_str(&pad(indent + 1));
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_value(&o[k], indent + 1, out);
                out.push_str(if i + 1 < n { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push('}');
        }
        Value::Array(a) if !a.is_empty() => {
            out.push_str("[\n");
            for (i, e) in a.iter().enumerate() {
                out.push_str(&pad(indent + 1));
                write_value(e, indent + 1, out);
                out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
            }
            out.push_str(&pad(indent));
            out.push(']');
        }
        other => write_compact(other, out),
    }
}
