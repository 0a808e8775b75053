//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Every write records which manager set which fields: creates, updates and patches as
//! `Update` operations (the fields they changed move to their manager), applies as `Apply`
//! operations (the manager's whole applied configuration). An apply merges its configuration
//! into the live object by the schema's list and map types, removes fields the manager applied
//! before and no longer applies (when nobody else owns them), and refuses with `409` to change a
//! field another manager owns unless forced. Values that agree are owned jointly. List-map
//! items are matched by their keys with the keys' schema defaults filled in. kubectl's
//! server-side applies take over the fields its client-side apply recorded in the
//! last-applied annotation, and keep that annotation current.

use serde_json::{json, Map, Value};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::fieldset::{display, fields_of, item_key, value_step, FieldSet, Step};
use crate::machinery::meta::MAX_ANNOTATIONS_BYTES;
use crate::machinery::schema::{schemas, ListType, Node, Shape};
use crate::machinery::timestamp::now_rfc3339;
use crate::scheme::{self, ResourceType};

/// The longest manager name kube-apiserver accepts.
const MAX_MANAGER_LEN: usize = 128;

/// The manager of `kubectl apply --server-side`: only its applies take over from, and keep
/// current, kubectl's client-side apply annotation (other managers opt out, as in kube).
const KUBECTL_MANAGER: &str = "kubectl";

/// kubectl's client-side apply annotation: the configuration it last applied, as JSON.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Metadata the server owns: never part of anyone's field set.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Which part of an object a write is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource (its `status` belongs to the status subresource when there is one).
    Main,
    /// A subresource that owns one part of the object: its name and that part's path
    /// (`status`; a pod's `ephemeralcontainers`, `spec.ephemeralContainers`).
    Sub(&'static str, &'static [&'static str]),
}

impl Part {
    /// The `status` subresource.
    pub const STATUS: Part = Part::Sub("status", &["status"]);

    /// The subresource's name, as `managedFields` entries record it.
    fn subresource(self) -> Option<&'static str> {
        match self {
            Part::Main => None,
            Part::Sub(name, _) => Some(name),
        }
    }
}

/// Only the value at `path` in `obj`, nested as it is there (`{}` when `obj` has none).
pub fn only_part(obj: &Value, path: &[&str]) -> Value {
    let mut at = obj;
    for step in path {
        match at.get(*step) {
            Some(v) => at = v,
            None => return json!({}),
        }
    }
    path.iter()
        .rev()
        .fold(at.clone(), |inner, step| json!({ *step: inner }))
}

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn is_apply_by(&self, manager: &str, part: Part) -> bool {
        self.operation == "Apply" && self.manager == manager && self.is_for(part)
    }

    fn is_for(&self, part: Part) -> bool {
        self.subresource.as_deref() == part.subresource()
    }

    fn to_json(&self) -> Value {
        let mut v = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if let Some(s) = &self.subresource {
            v["subresource"] = json!(s);
        }
        v
    }
}

/// Checks a `fieldManager` value.
pub fn check_manager(manager: &str) -> ApiResult<()> {
    if manager.chars().count() > MAX_MANAGER_LEN {
        return Err(ApiError::bad_request(format!(
            "fieldManager: Too long: may not be more than {MAX_MANAGER_LEN} bytes"
        )));
    }
    if manager.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "fieldManager: Invalid value: must only contain printable characters",
        ));
    }
    Ok(())
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    let Some(items) = obj["metadata"]["managedFields"].as_array() else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|m| {
            Some(Entry {
                manager: m["manager"].as_str().unwrap_or_default().to_string(),
                operation: m["operation"].as_str()?.to_string(),
                api_version: m["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: m["time"].as_str().unwrap_or_default().to_string(),
                subresource: m["subresource"].as_str().map(str::to_string),
                fields: FieldSet::from_fields_v1(&m["fieldsV1"])?,
            })
        })
        .collect()
}

fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}

/// The part of `obj` a write to `part` of type `rt` can own: no server metadata, no status on
/// the main resource (when status is a subresource), only its part on a subresource.
fn ownable(rt: &ResourceType, obj: &Value, part: Part) -> Value {
    let mut v = match part {
        Part::Main => obj.clone(),
        Part::Sub(sub, path) => {
            let mut v = only_part(obj, path);
            // A status write that keeps its metadata owns the metadata it changes too, but
            // for what the status strategy resets.
            if let Some(resets) = scheme::status_metadata_resets(rt).filter(|_| sub == "status") {
                let mut meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
                if let Some(m) = meta.as_object_mut() {
                    for field in resets {
                        m.remove(*field);
                    }
                }
                v["metadata"] = meta;
            }
            v
        }
    };
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match part {
            Part::Main if rt.has_status => {
                m.remove("status");
            }
            Part::Main | Part::Sub(..) => {}
        }
        if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in SERVER_METADATA {
                meta.remove(*f);
            }
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    v
}

/// The value at `path` in `obj`, if present, with its schema.
fn value_at<'v, 's>(
    obj: &'v Value,
    path: &[Step],
    node: Option<Node<'s>>,
) -> Option<(&'v Value, Option<Node<'s>>)> {
    let Some((step, rest)) = path.split_first() else {
        return Some((obj, node));
    };
    let element = node.and_then(|n| n.element());
    match step {
        Step::Field(f) => {
            let child = node.and_then(|n| match n.shape() {
                Shape::Struct => n.field(f),
                Shape::Map => n.element(),
                _ => None,
            });
            value_at(obj.get(f)?, rest, child)
        }
        Step::Key(_) => {
            let keys = match node.map(|n| n.list_type()) {
                Some(ListType::Map(keys)) => keys,
                _ => return None,
            };
            let item = obj
                .as_array()?
                .iter()
                .find(|i| item_key(i, keys, element).as_ref() == Some(step))?;
            value_at(item, rest, element)
        }
        Step::Value(_) => obj
            .as_array()?
            .iter()
            .find(|i| value_step(i) == *step)
            .map(|i| (i, element)),
        Step::Index(i) => value_at(obj.as_array()?.get(*i)?, rest, element),
    }
}

/// Whether `value` is owned field by field (a struct, a map, a list-map or a set that is not
/// atomic) rather than as one leaf.
fn granular(value: &Value, node: Option<Node<'_>>) -> bool {
    let shape = node.map_or(Shape::Any, |n| n.shape());
    match value {
        Value::Object(_) => {
            matches!(shape, Shape::Struct | Shape::Map | Shape::Any) && !node.is_some_and(|n| n.is_atomic())
        }
        Value::Array(_) => matches!(
            node.map(|n| n.list_type()),
            Some(ListType::Map(_) | ListType::Set)
        ),
        _ => false,
    }
}

/// Paths of `set` whose values differ between `a` and `b`, as structured-merge-diff compares:
/// a leaf by its value, a granular value (a struct, a list-map item) only by whether it is
/// there at all; what changed inside it is its own paths' business.
fn differing(set: &FieldSet, a: &Value, b: &Value, node: Option<Node<'_>>) -> FieldSet {
    let mut out = FieldSet::default();
    for path in set.paths() {
        let changed = match (value_at(a, &path, node), value_at(b, &path, node)) {
            (Some((x, schema)), Some((y, _))) => x != y && !(granular(x, schema) && granular(y, schema)),
            (x, y) => x.is_some() != y.is_some(),
        };
        if changed {
            out.insert(&path);
        }
    }
    out
}

/// Records an `Update` by `manager` that turned `old` into `new` (the object about to be
/// stored): the fields it changed become `manager`'s, and nobody else's. A request that sets
/// `managedFields` to `[{}]` clears them; one that sets other entries replaces them.
pub fn record_update(
    rt: &ResourceType,
    part: Part,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    requested: Option<&Value>,
) {
    let node = schemas().kind(rt);
    let mut entries = match requested {
        Some(Value::Array(items)) if items.len() == 1 && items[0] == json!({}) => {
            write_entries(new, Vec::new());
            return;
        }
        Some(given @ Value::Array(_)) if old.is_none_or(|o| o["metadata"]["managedFields"] != *given) => {
            read_entries(&json!({"metadata": {"managedFields": given}}))
        }
        _ => old.map(read_entries).unwrap_or_default(),
    };
    let after = ownable(rt, new, part);
    let before = old.map(|o| ownable(rt, o, part)).unwrap_or_else(|| json!({}));
    let now_set = fields_of(&after, node);
    let changed = differing(&now_set, &before, &after, node);
    let was_set = fields_of(&before, node);
    let mut gone = was_set;
    gone.subtract(&now_set);
    for e in entries.iter_mut().filter(|e| e.is_for(part)) {
        e.fields.subtract(&changed);
        e.fields.subtract(&gone);
    }
    if !changed.is_empty() {
        let subresource = part.subresource().map(str::to_string);
        match entries
            .iter_mut()
            .find(|e| e.manager == manager && e.operation == "Update" && e.is_for(part))
        {
            Some(e) => {
                e.fields.union(&changed);
                e.time = now_rfc3339();
                e.api_version = rt.group_version();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: rt.group_version(),
                time: now_rfc3339(),
                subresource,
                fields: changed,
            }),
        }
    }
    write_entries(new, entries);
}

/// Merges an applied configuration into `live` by the schema: struct fields and map keys
/// merge, list-maps merge by key, sets union, everything atomic is replaced. Objects without a
/// schema (kept unknown fields of a custom resource) merge key by key, lists in them are
/// atomic, as kube-apiserver's deduced types do.
fn merge(live: &mut Value, config: &Value, node: Option<Node<'_>>) {
    let shape = node.map_or(Shape::Any, |n| n.shape());
    let atomic = node.is_some_and(|n| n.is_atomic());
    match (config, shape) {
        (Value::Object(fields), Shape::Struct | Shape::Map | Shape::Any) if !atomic && live.is_object() => {
            for (k, v) in fields {
                let child = node.and_then(|n| match shape {
                    Shape::Struct => n.field(k),
                    _ => n.element(),
                });
                match (v, live.get_mut(k)) {
                    (Value::Null, _) => {}
                    (_, Some(existing)) => merge(existing, v, child),
                    (_, None) => {
                        if let Some(m) = live.as_object_mut() {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
        (Value::Array(items), Shape::List) if live.is_array() => match node.map(|n| n.list_type()) {
            Some(ListType::Map(keys)) => {
                let element = node.and_then(|n| n.element());
                let Some(existing) = live.as_array_mut() else {
                    return;
                };
                for item in items {
                    let key = item_key(item, keys, element);
                    match existing
                        .iter_mut()
                        .find(|e| key.is_some() && item_key(e, keys, element) == key)
                    {
                        Some(e) => merge(e, item, element),
                        None => existing.push(item.clone()),
                    }
                }
            }
            Some(ListType::Set) => {
                if let Some(existing) = live.as_array_mut() {
                    for item in items {
                        if !existing.contains(item) {
                            existing.push(item.clone());
                        }
                    }
                }
            }
            _ => *live = config.clone(),
        },
        _ => *live = config.clone(),
    }
}

/// Removes the value at every path of `set` from `obj`.
fn remove_paths(obj: &mut Value, set: &FieldSet, node: Option<Node<'_>>) {
    for path in set.paths() {
        remove_path(obj, &path, node);
    }
}

fn remove_path(obj: &mut Value, path: &[Step], node: Option<Node<'_>>) {
    let Some((step, rest)) = path.split_first() else {
        return;
    };
    match step {
        Step::Field(f) => {
            let child = node.and_then(|n| match n.shape() {
                Shape::Struct => n.field(f),
                Shape::Map => n.element(),
                _ => None,
            });
            let Some(m) = obj.as_object_mut() else {
                return;
            };
            if rest.is_empty() {
                m.remove(f);
            } else if let Some(v) = m.get_mut(f) {
                remove_path(v, rest, child);
            }
        }
        Step::Key(_) => {
            let Some(ListType::Map(keys)) = node.map(|n| n.list_type()) else {
                return;
            };
            let Some(items) = obj.as_array_mut() else {
                return;
            };
            let element = node.and_then(|n| n.element());
            let position = items
                .iter()
                .position(|i| item_key(i, keys, element).as_ref() == Some(step));
            match (position, rest.is_empty()) {
                (Some(i), true) => {
                    items.remove(i);
                }
                (Some(i), false) => remove_path(&mut items[i], rest, element),
                (None, _) => {}
            }
        }
        Step::Value(_) => {
            if let Some(items) = obj.as_array_mut() {
                items.retain(|i| value_step(i) != *step);
            }
        }
        Step::Index(_) => {}
    }
}

/// Fields of one other manager an apply would change.
struct Conflict {
    manager: String,
    operation: String,
    api_version: String,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Conflict {
    /// The manager as kube's messages name it: `"name"`, `with subresource "status"` for a
    /// subresource's manager, and `using apps/v1` for an updater (appliers are one manager
    /// whatever version they apply).
    fn describe(&self) -> String {
        let mut text = format!("{:?}", self.manager);
        if let Some(subresource) = &self.subresource {
            text.push_str(&format!(" with subresource {subresource:?}"));
        }
        if self.operation == "Update" {
            text.push_str(&format!(" using {}", self.api_version));
        }
        text
    }

    /// kube's manager identifier (the entry as JSON without time and fields, and without the
    /// version for an applier), which orders the managers of a conflict message.
    fn identifier(&self) -> String {
        let quote = |s: &str| Value::String(s.to_string()).to_string();
        let mut id = format!(
            "{{\"manager\":{},\"operation\":{}",
            quote(&self.manager),
            quote(&self.operation)
        );
        if self.operation != "Apply" {
            id.push_str(&format!(",\"apiVersion\":{}", quote(&self.api_version)));
        }
        if let Some(subresource) = &self.subresource {
            id.push_str(&format!(",\"subresource\":{}", quote(subresource)));
        }
        id.push('}');
        id
    }
}

/// kube-apiserver's `409` for an apply that would change fields other managers own: one
/// conflict on one line, several grouped by manager (ordered by manager identifier), and a
/// `FieldManagerConflict` cause per field.
fn conflict_error(rt: &ResourceType, name: &str, conflicts: &[Conflict]) -> ApiError {
    let mut conflicts: Vec<(String, String, Vec<String>)> = conflicts
        .iter()
        .map(|c| {
            let paths = c.fields.paths().iter().map(|p| display(p)).collect();
            (c.identifier(), c.describe(), paths)
        })
        .collect();
    conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    let total: usize = conflicts.iter().map(|(_, _, p)| p.len()).sum();
    let message = match conflicts.as_slice() {
        [(_, manager, paths)] if paths.len() == 1 => {
            format!(
                "Apply failed with 1 conflict: conflict with {manager}: {}",
                paths[0]
            )
        }
        _ => {
            let groups: Vec<String> = conflicts
                .iter()
                .map(|(_, manager, paths)| format!("conflicts with {manager}:\n- {}", paths.join("\n- ")))
                .collect();
            format!("Apply failed with {total} conflicts: {}", groups.join("\n"))
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .flat_map(|(_, manager, paths)| {
            paths.iter().map(move |p| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with {manager}"),
                    "field": p,
                })
            })
        })
        .collect();
    let mut details = json!({"name": name, "kind": rt.plural, "causes": causes});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(details),
        retry_after: None,
        continue_token: None,
    }
}

/// Applies `config` for `manager` to `live` (`{}` for an object that does not exist yet) and
/// returns the object to store, with its managedFields updated. `force` takes conflicting
/// fields from their owners instead of refusing.
pub fn apply(
    rt: &ResourceType,
    part: Part,
    live: &Value,
    config: &Value,
    manager: &str,
    force: bool,
) -> ApiResult<Value> {
    let node = schemas().kind(rt);
    let name = config["metadata"]["name"].as_str().unwrap_or_default();
    let mut entries = read_entries(live);
    let applied_config = ownable(rt, config, part);
    let applied = fields_of(&applied_config, node);

    let mut merged = live.clone();
    if !merged.is_object() {
        merged = json!({});
    }
    let live_part = ownable(rt, live, part);
    let mut candidate = live_part.clone();
    if !candidate.is_object() {
        candidate = json!({});
    }
    merge(&mut candidate, &applied_config, node);

    // Conflicts: fields another manager owns whose value this apply would change.
    let mut conflicts = Vec::new();
    let mut taken = FieldSet::default();
    for e in entries
        .iter()
        .filter(|e| e.is_for(part) && !e.is_apply_by(manager, part))
    {
        if e.manager == manager {
            continue;
        }
        let overlap = e.fields.intersection(&applied);
        let changed = differing(&overlap, &live_part, &candidate, node);
        if !changed.is_empty() {
            taken.union(&changed);
            conflicts.push(Conflict {
                manager: e.manager.clone(),
                operation: e.operation.clone(),
                api_version: e.api_version.clone(),
                subresource: e.subresource.clone(),
                fields: changed,
            });
        }
    }
    if !conflicts.is_empty() && !force {
        // kubectl moving from client-side to server-side apply takes over, as if forced, the
        // fields its last-applied configuration recorded (and still holds); only conflicts
        // beyond those refuse the apply.
        if manager == KUBECTL_MANAGER {
            if let Some(recorded) = last_applied_fields(rt, part, live, node) {
                for c in &mut conflicts {
                    c.fields.subtract(&recorded);
                }
                conflicts.retain(|c| !c.fields.is_empty());
            }
        }
        if !conflicts.is_empty() {
            return Err(conflict_error(rt, name, &conflicts));
        }
    }

    // Fields this manager applied before and no longer applies go, unless someone else owns
    // them.
    let previous = entries
        .iter()
        .find(|e| e.is_apply_by(manager, part))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut dropped = previous;
    dropped.subtract(&applied);
    for e in entries
        .iter()
        .filter(|e| e.is_for(part) && !e.is_apply_by(manager, part))
    {
        dropped.subtract(&e.fields);
    }

    merge(&mut merged, &applied_config, node);
    remove_paths(&mut merged, &dropped, node);
    for e in entries.iter_mut().filter(|e| e.is_for(part)) {
        e.fields.subtract(&taken);
    }
    entries.retain(|e| !e.is_apply_by(manager, part));
    entries.push(Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: rt.group_version(),
        time: now_rfc3339(),
        subresource: part.subresource().map(str::to_string),
        fields: applied,
    });
    if let (Some(m), Some(c)) = (merged.as_object_mut(), config.as_object()) {
        for k in ["apiVersion", "kind"] {
            if let Some(v) = c.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
    }
    let meta = merged
        .as_object_mut()
        .map(|m| m.entry("metadata").or_insert_with(|| Value::Object(Map::new())));
    if let Some(Value::Object(meta)) = meta {
        for k in ["name", "namespace"] {
            if let Some(v) = config["metadata"].get(k) {
                meta.entry(k).or_insert_with(|| v.clone());
            }
        }
    }
    if manager == KUBECTL_MANAGER {
        keep_last_applied_current(&mut merged, config);
    }
    write_entries(&mut merged, entries);
    Ok(merged)
}

/// The fields `live`'s last-applied configuration (kubectl's client-side apply annotation)
/// records with the values they still have: what kubectl's server-side apply may take over
/// from their owners, as kube-apiserver's lastAppliedManager allows. `None` without an
/// annotation for this type's version that parses.
fn last_applied_fields(
    rt: &ResourceType,
    part: Part,
    live: &Value,
    node: Option<Node<'_>>,
) -> Option<FieldSet> {
    let text = live["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .filter(|t| !t.is_empty())?;
    let recorded: Value = serde_json::from_str(text).ok()?;
    if recorded["apiVersion"].as_str() != Some(rt.group_version().as_str()) {
        return None;
    }
    let recorded = ownable(rt, &recorded, part);
    let mut fields = fields_of(&recorded, node);
    let since_changed = differing(&fields, &recorded, &ownable(rt, live, part), node);
    fields.subtract(&since_changed);
    Some(fields)
}

/// Keeps kubectl's client-side apply annotation current on kubectl's server-side applies, as
/// kube-apiserver's lastAppliedUpdater does: where the object to store has one, it becomes the
/// applied configuration (without the annotation itself) in Go's JSON encoding, or goes if
/// that would make the annotations too large.
fn keep_last_applied_current(merged: &mut Value, config: &Value) {
    let Some(annotations) = merged
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if annotations
        .get(LAST_APPLIED)
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let mut recorded = config.clone();
    if let Some(own) = recorded
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        own.remove(LAST_APPLIED);
    }
    let Some(text) = go_json(&recorded) else {
        return;
    };
    annotations.insert(LAST_APPLIED.into(), Value::String(text));
    let total: usize = annotations
        .iter()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if total > MAX_ANNOTATIONS_BYTES {
        annotations.remove(LAST_APPLIED);
    }
}

/// `value` as Go's `encoding/json` encoder writes it (how kube-apiserver and kubectl write the
/// last-applied configuration): keys sorted, Go's string escapes, and a final newline.
fn go_json(value: &Value) -> Option<String> {
    let mut out = crate::machinery::go_json::encode(value, false).ok()?;
    out.push(b'\n');
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Registry;

    fn deployments() -> ResourceType {
        Registry::new()
            .lookup("apps", "v1", "deployments")
            .expect("served")
            .clone()
    }

    fn config(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": image}]}}}})
    }

    /// The managedFields entry of `manager`.
    fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
        obj["metadata"]["managedFields"]
            .as_array()
            .and_then(|entries| entries.iter().find(|e| e["manager"] == manager))
            .unwrap_or_else(|| panic!("{manager} has an entry: {obj}"))
    }

    fn managers(obj: &Value) -> Vec<(String, String)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap_or_default().to_string(),
                            e["operation"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn two_managers_conflict_force_and_share() {
        let rt = deployments();
        let created = apply(&rt, Part::Main, &json!({}), &config(1, "nginx:1"), "alice", false).unwrap();
        assert_eq!(created["spec"]["replicas"], 1);
        assert_eq!(managers(&created), [("alice".to_string(), "Apply".to_string())]);
        let fields = &created["metadata"]["managedFields"][0]["fieldsV1"];
        assert!(fields["f:spec"]["f:replicas"].is_object(), "{fields}");
        assert!(
            fields["f:metadata"].get("f:name").is_none(),
            "server metadata is nobody's"
        );

        // Same values: shared ownership, no conflict.
        let shared = apply(&rt, Part::Main, &created, &config(1, "nginx:1"), "bob", false).unwrap();
        assert_eq!(managers(&shared).len(), 2);

        // Bob changes a field Alice owns: conflict, with kube's message and causes.
        let e = apply(&rt, Part::Main, &shared, &config(3, "nginx:1"), "bob", false).unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"alice\": .spec.replicas"
        );
        let causes = &e.details.as_ref().unwrap()["causes"];
        assert_eq!(causes[0]["field"], ".spec.replicas");
        assert_eq!(causes[0]["reason"], "FieldManagerConflict");

        // Forced: Bob takes the field, Alice loses it.
        let forced = apply(&rt, Part::Main, &shared, &config(3, "nginx:1"), "bob", true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        let alice = entry(&forced, "alice");
        assert!(alice["fieldsV1"]["f:spec"].get("f:replicas").is_none(), "{alice}");
        // Alice re-applying her old value now conflicts with Bob.
        let e = apply(&rt, Part::Main, &forced, &config(1, "nginx:1"), "alice", false).unwrap_err();
        assert!(e.message.contains("conflict with \"bob\""), "{}", e.message);
    }

    #[test]
    fn conflicts_with_several_managers_are_grouped_by_manager_as_kube_does() {
        let rt = deployments();
        let live = apply(&rt, Part::Main, &json!({}), &config(1, "nginx:1"), "zed", false).unwrap();
        let mut edited = live.clone();
        edited["spec"]["replicas"] = json!(5);
        record_update(&rt, Part::Main, Some(&live), &mut edited, "editor", None);
        let e = apply(&rt, Part::Main, &edited, &config(2, "nginx:2"), "carol", false).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"editor\" using apps/v1:\n- .spec.replicas\n\
             conflicts with \"zed\":\n- .spec.template.spec.containers[name=\"nginx\"].image"
        );
        let causes = &e.details.as_ref().unwrap()["causes"];
        assert_eq!(
            causes,
            &json!([
                {"reason": "FieldManagerConflict", "message": "conflict with \"editor\" using apps/v1", "field": ".spec.replicas"},
                {"reason": "FieldManagerConflict", "message": "conflict with \"zed\"", "field": ".spec.template.spec.containers[name=\"nginx\"].image"}
            ])
        );
    }

    #[test]
    fn fields_dropped_from_a_configuration_are_removed_unless_owned_by_others() {
        let rt = deployments();
        let mut first = config(1, "nginx:1");
        first["metadata"]["labels"]["tier"] = json!("front");
        first["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sidecar", "image": "busybox"}));
        let live = apply(&rt, Part::Main, &json!({}), &first, "alice", false).unwrap();
        let second = apply(&rt, Part::Main, &live, &config(1, "nginx:1"), "alice", false).unwrap();
        assert!(second["metadata"]["labels"].get("tier").is_none(), "{second}");
        let names: Vec<&str> = second["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["nginx"]);

        // A label another manager also set survives Alice dropping it.
        let mut both = apply(&rt, Part::Main, &json!({}), &first, "alice", false).unwrap();
        let mut bob = config(1, "nginx:1");
        bob["metadata"]["labels"]["tier"] = json!("front");
        both = apply(&rt, Part::Main, &both, &bob, "bob", false).unwrap();
        let after = apply(&rt, Part::Main, &both, &config(1, "nginx:1"), "alice", false).unwrap();
        assert_eq!(after["metadata"]["labels"]["tier"], "front");
    }

    #[test]
    fn updates_move_changed_fields_and_can_reset() {
        let rt = deployments();
        let live = apply(&rt, Part::Main, &json!({}), &config(1, "nginx:1"), "alice", false).unwrap();
        let mut edited = live.clone();
        edited["spec"]["replicas"] = json!(5);
        record_update(&rt, Part::Main, Some(&live), &mut edited, "kubectl-edit", None);
        let alice = entry(&edited, "alice");
        let editor = entry(&edited, "kubectl-edit");
        assert_eq!(editor["operation"], "Update");
        assert_eq!(editor["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        assert!(alice["fieldsV1"]["f:spec"].get("f:replicas").is_none());
        // Alice applying replicas again now conflicts with the editor.
        assert_eq!(
            apply(&rt, Part::Main, &edited, &config(1, "nginx:1"), "alice", false)
                .unwrap_err()
                .code,
            409
        );
        let mut reset = edited.clone();
        record_update(
            &rt,
            Part::Main,
            Some(&edited),
            &mut reset,
            "x",
            Some(&json!([{}])),
        );
        assert!(reset["metadata"].get("managedFields").is_none());
        assert!(check_manager(&"m".repeat(129)).is_err());
        assert!(check_manager("kubectl").is_ok());
    }

    fn container(obj: &Value) -> &Value {
        &obj["spec"]["template"]["spec"]["containers"][0]
    }

    fn containers_mut(obj: &mut Value) -> &mut Value {
        &mut obj["spec"]["template"]["spec"]["containers"]
    }

    /// What the store's defaulting does to an applied object's ports (`protocol: TCP`).
    fn default_protocols(obj: &mut Value) {
        for c in containers_mut(obj).as_array_mut().into_iter().flatten() {
            for p in c["ports"].as_array_mut().into_iter().flatten() {
                if p.get("protocol").is_none() {
                    p["protocol"] = json!("TCP");
                }
            }
        }
    }

    #[test]
    fn list_map_items_match_by_their_keys_with_defaults_filled() {
        let rt = deployments();
        let mut with_port = config(1, "nginx:1");
        containers_mut(&mut with_port)[0]["ports"] = json!([{"containerPort": 80}]);
        let mut live = apply(&rt, Part::Main, &json!({}), &with_port, "alice", false).unwrap();
        default_protocols(&mut live);
        let port_key = r#"k:{"containerPort":80,"protocol":"TCP"}"#;
        let fields = &live["metadata"]["managedFields"][0]["fieldsV1"];
        let owned =
            &fields["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"nginx"}"#]["f:ports"];
        assert_eq!(
            owned[port_key],
            json!({".": {}, "f:containerPort": {}}),
            "{fields}"
        );

        // Re-applying matches the defaulted item: nothing is appended.
        let again = apply(&rt, Part::Main, &live, &with_port, "alice", false).unwrap();
        assert_eq!(
            container(&again)["ports"],
            json!([{"containerPort": 80, "protocol": "TCP"}])
        );
        // Another manager applying the same values shares them.
        let shared = apply(&rt, Part::Main, &again, &with_port, "bob", false).unwrap();
        assert_eq!(managers(&shared).len(), 2);
        assert_eq!(container(&shared)["ports"].as_array().map(Vec::len), Some(1));
        // Dropping the port from Alice's configuration keeps it for Bob; dropping it from
        // both removes the defaulted item.
        let alice_only = apply(&rt, Part::Main, &shared, &config(1, "nginx:1"), "alice", false).unwrap();
        assert_eq!(container(&alice_only)["ports"].as_array().map(Vec::len), Some(1));
        let none = apply(&rt, Part::Main, &alice_only, &config(1, "nginx:1"), "bob", false).unwrap();
        assert!(
            container(&none)["ports"].as_array().is_none_or(Vec::is_empty),
            "{none}"
        );
    }

    #[test]
    fn conflicts_name_the_changed_leaves_not_the_items_around_them() {
        let rt = deployments();
        let live = apply(&rt, Part::Main, &json!({}), &config(1, "nginx:1"), "alice", false).unwrap();
        let e = apply(&rt, Part::Main, &live, &config(1, "nginx:2"), "bob", false).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"alice\": .spec.template.spec.containers[name=\"nginx\"].image"
        );
    }

    /// An object as `kubectl apply` (client-side) creates it: its configuration in the
    /// last-applied annotation, its fields owned by an `Update` of kubectl-client-side-apply.
    fn client_side_applied(rt: &ResourceType, configuration: &Value) -> Value {
        let mut obj = configuration.clone();
        obj["metadata"]["annotations"] = json!({LAST_APPLIED: go_json(configuration).unwrap()});
        record_update(rt, Part::Main, None, &mut obj, "kubectl-client-side-apply", None);
        obj
    }

    #[test]
    fn kubectl_takes_over_what_its_client_side_apply_recorded() {
        let rt = deployments();
        let live = client_side_applied(&rt, &config(1, "nginx:1"));

        // Another manager conflicts with the client-side owner.
        let e = apply(&rt, Part::Main, &live, &config(1, "nginx:2"), "other", false).unwrap_err();
        assert!(
            e.message.contains("conflict with \"kubectl-client-side-apply\""),
            "{}",
            e.message
        );

        // kubectl takes the recorded fields over; the annotation follows its configuration.
        let upgraded = apply(&rt, Part::Main, &live, &config(1, "nginx:2"), "kubectl", false).unwrap();
        assert_eq!(container(&upgraded)["image"], "nginx:2");
        let annotation = upgraded["metadata"]["annotations"][LAST_APPLIED]
            .as_str()
            .unwrap();
        assert_eq!(Some(annotation.to_string()), go_json(&config(1, "nginx:2")));
        let csa = entry(&upgraded, "kubectl-client-side-apply");
        let container =
            &csa["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"][r#"k:{"name":"nginx"}"#];
        assert!(container.get("f:image").is_none(), "{csa}");

        // A field changed since the client-side apply is no longer recorded: it conflicts.
        let mut edited = live.clone();
        edited["spec"]["replicas"] = json!(5);
        record_update(&rt, Part::Main, Some(&live), &mut edited, "kubectl-edit", None);
        let e = apply(&rt, Part::Main, &edited, &config(2, "nginx:2"), "kubectl", false).unwrap_err();
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using apps/v1: .spec.replicas"
        );

        // Without the annotation (or for another version) nothing is taken over.
        let mut unrecorded = live.clone();
        unrecorded["metadata"]["annotations"][LAST_APPLIED] = json!(r#"{"apiVersion":"apps/v1beta1"}"#);
        assert_eq!(
            apply(
                &rt,
                Part::Main,
                &unrecorded,
                &config(1, "nginx:2"),
                "kubectl",
                false
            )
            .unwrap_err()
            .code,
            409
        );
    }

    #[test]
    fn server_side_applies_add_no_last_applied_configuration() {
        let rt = deployments();
        let live = apply(
            &rt,
            Part::Main,
            &json!({}),
            &config(1, "nginx:1"),
            "kubectl",
            false,
        )
        .unwrap();
        let again = apply(&rt, Part::Main, &live, &config(2, "nginx:1"), "kubectl", false).unwrap();
        assert!(again["metadata"].get("annotations").is_none(), "{again}");
    }

    #[test]
    fn last_applied_configuration_is_encoded_as_go_does() {
        let v = json!({"b": "<a&b>\u{2028}", "a": ["\u{8}\u{c}\n\t\u{1}\"\\"]});
        assert_eq!(
            go_json(&v).unwrap(),
            "{\"a\":[\"\\u0008\\u000c\\n\\t\\u0001\\\"\\\\\"],\"b\":\"\\u003ca\\u0026b\\u003e\\u2028\"}\n"
        );
    }
}
