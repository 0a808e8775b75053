//! `Table` output (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), as `kubectl get`
//! asks for it. Every type gets kube-apiserver's default columns (Name, Created At); each row
//! carries the object as `PartialObjectMetadata` (or whole, or nothing, per `includeObject`).

use serde_json::{json, Value};

use super::status::{ApiError, ApiResult};

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

fn row(obj: &Value, version: &str, include: IncludeObject) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let name = meta.get("name").cloned().unwrap_or(Value::Null);
    let created = meta.get("creationTimestamp").cloned().unwrap_or(Value::Null);
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": format!("meta.k8s.io/{version}"),
            "metadata": meta,
        }),
        IncludeObject::Object => obj.clone(),
    };
    let mut r = json!({"cells": [name, created]});
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

/// A table of `objects` read at `resource_version`.
pub fn table(objects: &[Value], resource_version: &str, version: &str, include: IncludeObject) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.", "priority": 0},
            {"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": objects.iter().map(|o| row(o, version, include)).collect::<Vec<_>>(),
    })
}
