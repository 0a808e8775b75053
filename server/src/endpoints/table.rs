//! `Table` output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), as `kubectl get`
//! asks for it. Built-in kinds get their own columns ([`crate::kinds::printers`]); other types get
//! kube-apiserver's default columns (Name, Created At); custom resources get the columns their
//! definition declares. Each row carries the object as
//! `PartialObjectMetadata` (or whole, or nothing, per `includeObject`).

use serde_json::{json, Value};

use crate::apiextensions::columns;
use crate::kinds::printers::{self, Printer, CREATED_AT, NAME};
use crate::machinery::age::Ctx;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::scheme::ResourceType;

/// What each row's `object` holds (`?includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses `includeObject`.
    pub fn parse(v: Option<&str>) -> ApiResult<Self> {
        match v {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(ApiError::bad_request(format!(
                "includeObject: unsupported value {other:?}: supported values are None, Metadata, Object"
            ))),
        }
    }
}

fn row(obj: &Value, cells: Vec<Value>, version: &str, include: IncludeObject) -> Value {
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        }),
        IncludeObject::Object => obj.clone(),
    };
    let mut r = json!({"cells": cells});
    if let Some(conditions) = printers::conditions(obj) {
        r["conditions"] = conditions;
    }
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

fn default_cells(obj: &Value) -> Vec<Value> {
    let meta = obj.get("metadata");
    vec![
        meta.and_then(|m| m.get("name")).cloned().unwrap_or(Value::Null),
        meta.and_then(|m| m.get("creationTimestamp"))
            .cloned()
            .unwrap_or(Value::Null),
    ]
}

/// The printer for what is printed: the objects' own kind (a `scale` read prints Scales), or
/// the resource's kind for an empty list.
fn printer_for(rt: &ResourceType, objects: &[Value]) -> Option<&'static Printer> {
    match objects.first() {
        Some(o) => {
            let api_version = o["apiVersion"].as_str().unwrap_or("");
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            printers::lookup(group, o["kind"].as_str().unwrap_or(""))
        }
        None => printers::lookup(&rt.group, &rt.kind),
    }
}

/// A table of `objects` of type `rt`, read at `resource_version`.
pub fn table(
    rt: &ResourceType,
    objects: &[Value],
    resource_version: &str,
    version: &str,
    include: IncludeObject,
) -> Value {
    let custom = rt
        .custom
        .as_ref()
        .filter(|_| objects.first().is_none_or(|o| o["kind"] == *rt.kind));
    if let Some(custom) = custom {
        let ctx = Ctx::now();
        let rows: Vec<Value> = objects
            .iter()
            .map(|o| row(o, columns::cells(&custom.columns, o, &ctx), version, include))
            .collect();
        return json!({
            "kind": "Table",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": columns::definitions(&custom.columns),
            "rows": rows,
        });
    }
    let printer = printer_for(rt, objects);
    let ctx = Ctx::now();
    let columns: Vec<Value> = match printer {
        Some(p) => p.columns.iter().map(|c| c.definition()).collect(),
        None => vec![NAME.definition(), CREATED_AT.definition()],
    };
    let mut ordered: Vec<&Value> = objects.iter().collect();
    if let Some(order) = printer.and_then(|p| p.order) {
        ordered.sort_by(|a, b| order(a, b));
    }
    let rows: Vec<Value> = ordered
        .into_iter()
        .map(|o| {
            // Built-in printers read the storage version, as kube's print the internal one.
            let stored = crate::scheme::conversion::to_stored(rt, o);
            let cells = match printer {
                Some(p) => (p.cells)(stored.as_ref().unwrap_or(o), &ctx),
                None => default_cells(o),
            };
            row(o, cells, version, include)
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Registry;

    #[test]
    fn built_in_kinds_get_their_columns_and_others_the_default() {
        let r = Registry::new();
        let deploy = r.lookup("apps", "v1", "deployments").unwrap();
        let empty = table(deploy, &[], "7", "v1", IncludeObject::Metadata);
        let names: Vec<&str> = empty["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            vec![
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(empty["columnDefinitions"][5]["priority"], 1);
        let role = r.lookup("rbac.authorization.k8s.io", "v1", "roles").unwrap();
        let obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "creationTimestamp": "2025-01-01T00:00:00Z"}});
        let t = table(role, &[obj], "7", "v1", IncludeObject::None);
        assert_eq!(t["columnDefinitions"][1]["name"], "Created At");
        assert_eq!(t["rows"][0]["cells"], json!(["r", "2025-01-01T00:00:00Z"]));
        assert!(t["rows"][0].get("object").is_none());
        let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
            "spec": {"replicas": 3}, "status": {"replicas": 1}});
        let t = table(deploy, &[scale], "7", "v1", IncludeObject::Metadata);
        assert_eq!(t["columnDefinitions"][1]["name"], "Desired");
        assert_eq!(t["rows"][0]["cells"][1], 3);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    /// FlowSchemas print by matching precedence, then name, as kube's list printer sorts them.
    #[test]
    fn flow_schemas_print_in_precedence_order() {
        let r = Registry::new();
        let rt = r
            .lookup("flowcontrol.apiserver.k8s.io", "v1", "flowschemas")
            .unwrap();
        let fs = |name: &str, precedence: i64| {
            json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                "metadata": {"name": name}, "spec": {"matchingPrecedence": precedence, "priorityLevelConfiguration": {"name": "p"}}})
        };
        let objects = [
            fs("catch-all", 10000),
            fs("b", 500),
            fs("exempt", 1),
            fs("a", 500),
        ];
        let t = table(rt, &objects, "7", "v1", IncludeObject::None);
        let names: Vec<&str> = t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["cells"][0].as_str().unwrap())
            .collect();
        assert_eq!(names, ["exempt", "a", "b", "catch-all"]);
    }
}
