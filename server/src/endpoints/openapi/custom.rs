//! The OpenAPI 3.0 document of a custom resource group-version, built from the definitions'
//! schemas when it is asked for (definitions change at run time; the built-in documents do
//! not), so that `kubectl explain` describes custom resources as it does built-in ones.

use serde_json::{json, Map, Value};

use super::{info, paths};
use crate::machinery::definitions::{self, ServedKind, V3_REF};
use crate::scheme::ResourceType;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// kube-apiserver's definition name of a custom kind: the group reversed, the version, the kind
/// (`stable.example.com/v1` `CronTab` → `com.example.stable.v1.CronTab`).
pub fn definition_name(rt: &ResourceType, kind: &str) -> String {
    let group: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{}.{kind}", group.join("."), rt.version)
}

fn gvk(rt: &ResourceType, kind: &str) -> Value {
    json!([{"group": rt.group, "version": rt.version, "kind": kind}])
}

/// The document of one group-version's custom types (all of `types` share it).
pub fn document(types: &[&ResourceType], builtin: &Map<String, Value>) -> Value {
    let mut schemas = Map::new();
    let mut kinds = Vec::new();
    for rt in types {
        let Some(custom) = &rt.custom else {
            continue;
        };
        let name = definition_name(rt, &rt.kind);
        let list_name = definition_name(rt, &rt.list_kind);
        let mut schema = definitions::to_v3(&name, &custom.schema);
        schema["x-kubernetes-group-version-kind"] = gvk(rt, &rt.kind);
        schemas.insert(name.clone(), schema);
        schemas.insert(
            list_name.clone(),
            json!({
                "description": format!("{} is a list of {}", rt.list_kind, rt.kind),
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "items": {"type": "array", "items": {"$ref": format!("{V3_REF}{name}")}},
                    "kind": {"type": "string"},
                    "metadata": {"$ref": format!("{V3_REF}{LIST_META}")},
                },
                "x-kubernetes-group-version-kind": gvk(rt, &rt.list_kind),
            }),
        );
        kinds.push(ServedKind {
            rt: (*rt).clone(),
            name,
            list_name,
        });
    }
    let mut roots = vec![
        definitions::STATUS,
        definitions::DELETE_OPTIONS,
        definitions::PATCH,
        definitions::WATCH_EVENT,
        OBJECT_META,
        LIST_META,
    ];
    if kinds.iter().any(|k| k.rt.has_scale) {
        roots.push(definitions::SCALE);
    }
    for (name, schema) in definitions::closure(builtin, &roots) {
        schemas.insert(name.to_string(), definitions::to_v3(name, schema));
    }
    let served: Vec<&ServedKind> = kinds.iter().collect();
    json!({
        "openapi": "3.0.0",
        "info": info(),
        "paths": paths::v3(&served),
        "components": {"schemas": schemas},
    })
}
