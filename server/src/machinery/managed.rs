//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Every write records which manager set which fields: creates, updates and patches as
//! `Update` operations (the fields they changed move to their manager), applies as `Apply`
//! operations (the manager's whole applied configuration). An apply merges its configuration
//! into the live object by the schema's list and map types, removes fields the manager applied
//! before and no longer applies (when nobody else owns them), and refuses with `409` to change a
//! field another manager owns unless forced. Values that agree are owned jointly. List-map
//! items are matched by their keys with the keys' schema defaults filled in.

use serde_json::{json, Map, Value};

use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::fieldset::{display, fields_of, item_key, value_step, FieldSet, Step};
use crate::machinery::schema::{schemas, ListType, Node, Shape};
use crate::machinery::timestamp::now_rfc3339;
use crate::scheme::ResourceType;

/// The longest manager name kube-apiserver accepts.
const MAX_MANAGER_LEN: usize = 128;

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
    /// The `status` subresource.
    Status,
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
        self.operation == "Apply" && self.manager == manager && self.part() == part
    }

    fn part(&self) -> Part {
        match self.subresource.as_deref() {
            Some("status") => Part::Status,
            _ => Part::Main,
        }
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
/// the main resource (when status is a subresource), only status on the status subresource.
fn ownable(rt: &ResourceType, obj: &Value, part: Part) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        match part {
            Part::Main if rt.has_status => {
                m.remove("status");
            }
            Part::Main => {}
            Part::Status => m.retain(|k, _| k == "status"),
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

/// The value at `path` in `obj`, if present.
fn value_at<'v>(obj: &'v Value, path: &[Step], node: Option<Node<'_>>) -> Option<&'v Value> {
    let Some((step, rest)) = path.split_first() else {
        return Some(obj);
    };
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
            let element = node.and_then(|n| n.element());
            let item = obj
                .as_array()?
                .iter()
                .find(|i| item_key(i, keys, element).as_ref() == Some(step))?;
            value_at(item, rest, element)
        }
        Step::Value(_) => obj.as_array()?.iter().find(|i| value_step(i) == *step),
        Step::Index(i) => value_at(obj.as_array()?.get(*i)?, rest, node.and_then(|n| n.element())),
    }
}

/// Paths of `set` whose values differ between `a` and `b`.
fn differing(set: &FieldSet, a: &Value, b: &Value, node: Option<Node<'_>>) -> FieldSet {
    let mut out = FieldSet::default();
    for path in set.paths() {
        if value_at(a, &path, node) != value_at(b, &path, node) {
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
    for e in entries.iter_mut().filter(|e| e.part() == part) {
        e.fields.subtract(&changed);
        e.fields.subtract(&gone);
    }
    if !changed.is_empty() {
        let subresource = (part == Part::Status).then(|| "status".to_string());
        match entries
            .iter_mut()
            .find(|e| e.manager == manager && e.operation == "Update" && e.part() == part)
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

fn conflict_error(rt: &ResourceType, name: &str, conflicts: &[(String, String, Vec<String>)]) -> ApiError {
    let total: usize = conflicts.iter().map(|(_, _, p)| p.len()).sum();
    let groups: Vec<String> = conflicts
        .iter()
        .map(|(manager, api_version, paths)| match paths.as_slice() {
            [one] => format!("conflict with \"{manager}\" using {api_version}: {one}"),
            many => format!(
                "conflicts with \"{manager}\" using {api_version}:\n- {}",
                many.join("\n- ")
            ),
        })
        .collect();
    let causes: Vec<Value> = conflicts
        .iter()
        .flat_map(|(manager, api_version, paths)| {
            paths.iter().map(move |p| {
                json!({
                    "reason": "FieldManagerConflict",
                    "message": format!("conflict with \"{manager}\" using {api_version}"),
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
        message: format!(
            "Apply failed with {total} conflict{}: {}",
            if total == 1 { "" } else { "s" },
            groups.join("\n")
        ),
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
        .filter(|e| e.part() == part && !e.is_apply_by(manager, part))
    {
        if e.manager == manager {
            continue;
        }
        let overlap = e.fields.intersection(&applied);
        let changed = differing(&overlap, &live_part, &candidate, node);
        if !changed.is_empty() {
            conflicts.push((
                e.manager.clone(),
                e.api_version.clone(),
                changed.paths().iter().map(|p| display(p)).collect::<Vec<_>>(),
            ));
            taken.union(&changed);
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(rt, name, &conflicts));
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
        .filter(|e| e.part() == part && !e.is_apply_by(manager, part))
    {
        dropped.subtract(&e.fields);
    }

    merge(&mut merged, &applied_config, node);
    remove_paths(&mut merged, &dropped, node);
    for e in entries.iter_mut().filter(|e| e.part() == part) {
        e.fields.subtract(&taken);
    }
    entries.retain(|e| !e.is_apply_by(manager, part));
    entries.push(Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: rt.group_version(),
        time: now_rfc3339(),
        subresource: (part == Part::Status).then(|| "status".to_string()),
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
    write_entries(&mut merged, entries);
    Ok(merged)
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
            "Apply failed with 1 conflict: conflict with \"alice\" using apps/v1: .spec.replicas"
        );
        let causes = &e.details.as_ref().unwrap()["causes"];
        assert_eq!(causes[0]["field"], ".spec.replicas");
        assert_eq!(causes[0]["reason"], "FieldManagerConflict");

        // Forced: Bob takes the field, Alice loses it.
        let forced = apply(&rt, Part::Main, &shared, &config(3, "nginx:1"), "bob", true).unwrap();
        assert_eq!(forced["spec"]["replicas"], 3);
        let alice = forced["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == "alice")
            .unwrap();
        assert!(alice["fieldsV1"]["f:spec"].get("f:replicas").is_none(), "{alice}");
        // Alice re-applying her old value now conflicts with Bob.
        let e = apply(&rt, Part::Main, &forced, &config(1, "nginx:1"), "alice", false).unwrap_err();
        assert!(e.message.contains("conflict with \"bob\""), "{}", e.message);
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
        let entries = edited["metadata"]["managedFields"].as_array().unwrap();
        let alice = entries.iter().find(|e| e["manager"] == "alice").unwrap();
        let editor = entries.iter().find(|e| e["manager"] == "kubectl-edit").unwrap();
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
}
