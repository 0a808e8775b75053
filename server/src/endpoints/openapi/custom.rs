//! The OpenAPI 3.0 document of a custom resource group-version, and the custom resources' part
//! of the Swagger 2.0 document, built from the definitions' schemas when they are asked for
//! (definitions change at run time; the built-in documents do not), so that `kubectl explain`
//! and clients that read `/openapi/v2` describe custom resources as they do built-in ones.

use serde_json::{json, Map, Value};

use super::{info, paths};
use crate::machinery::definitions::{self, ServedKind, V2_REF, V3_REF};
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

/// The custom kinds among `types` and their definitions (each kind's and its list's), in the
/// form `schema_of` gives a definition (named by the first argument), referring to others with
/// `reference`.
fn kinds_and_definitions(
    types: &[&ResourceType],
    reference: &str,
    schema_of: impl Fn(&str, &Value) -> Value,
) -> (Vec<ServedKind>, Map<String, Value>) {
    let mut schemas = Map::new();
    let mut kinds = Vec::new();
    for rt in types {
        let Some(custom) = &rt.custom else {
            continue;
        };
        let name = definition_name(rt, &rt.kind);
        let list_name = definition_name(rt, &rt.list_kind);
        let mut schema = schema_of(&name, &custom.schema);
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
                    "items": {"type": "array", "items": {"$ref": format!("{reference}{name}")}},
                    "kind": {"type": "string"},
                    "metadata": {"$ref": format!("{reference}{LIST_META}")},
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
    (kinds, schemas)
}

/// The Swagger 2.0 paths and definitions of the custom types among `types`, which
/// `/openapi/v2` adds to the built-in ones.
pub fn v2_parts(types: &[&ResourceType]) -> (Map<String, Value>, Map<String, Value>) {
    let (kinds, definitions) = kinds_and_definitions(types, V2_REF, |_, schema| to_v2(schema));
    (paths::v2(&kinds), definitions)
}

/// A definition's structural schema as Swagger 2.0 can say it, as kube-apiserver publishes a
/// custom resource in `/openapi/v2`: no `allOf`, `oneOf`, `anyOf` or `not`; a nullable value
/// loses its type and what is inside it (and is no longer required); an array without an
/// item schema loses its type. Keys Swagger 2.0 has no place for are left out.
fn to_v2(schema: &Value) -> Value {
    let Value::Object(obj) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in obj {
        let kept = match key.as_str() {
            "properties" => match value {
                Value::Object(props) => {
                    Value::Object(props.iter().map(|(k, v)| (k.clone(), to_v2(v))).collect())
                }
                other => other.clone(),
            },
            "items" | "additionalProperties" => to_v2(value),
            k if V2_SCHEMA_KEYS.contains(&k) || k.starts_with("x-") => value.clone(),
            _ => continue,
        };
        out.insert(key.clone(), kept);
    }
    if obj.get("nullable") == Some(&Value::Bool(true)) {
        for key in ["type", "items", "properties"] {
            out.remove(key);
        }
    }
    if out.get("type").and_then(Value::as_str) == Some("array") && !out.contains_key("items") {
        out.remove("type");
    }
    let nullable = |s: &Value| s.get("nullable") == Some(&Value::Bool(true));
    if obj.get("additionalProperties").is_some_and(nullable) {
        out.remove("required");
    } else if let (Some(Value::Array(required)), Some(Value::Object(props))) =
        (out.get_mut("required"), obj.get("properties"))
    {
        required.retain(|r| !r.as_str().and_then(|r| props.get(r)).is_some_and(nullable));
        if required.is_empty() {
            out.remove("required");
        }
    }
    Value::Object(out)
}

/// The schema keys of Swagger 2.0 a structural schema may carry (besides `x-` extensions,
/// and the combinators and `nullable`, which [`to_v2`] drops).
const V2_SCHEMA_KEYS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "type",
    "example",
];

/// The document of one group-version's custom types (all of `types` share it).
pub fn document(types: &[&ResourceType], builtin: &Map<String, Value>) -> Value {
    let (kinds, mut schemas) = kinds_and_definitions(types, V3_REF, definitions::to_v3);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swagger_2_gets_what_it_can_say_of_a_structural_schema() {
        let schema = json!({
            "type": "object",
            "required": ["spec", "note"],
            "properties": {
                "metadata": {"$ref": format!("{V2_REF}{OBJECT_META}")},
                "spec": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                    "properties": {
                        "port": {"x-kubernetes-int-or-string": true,
                            "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "tags": {"type": "array"},
                        "sizes": {"type": "array", "items": {"type": "integer", "nullable": true}},
                    },
                },
                "note": {"type": "object", "nullable": true, "properties": {"text": {"type": "string"}}},
            },
        });
        assert_eq!(
            to_v2(&schema),
            json!({
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "metadata": {"$ref": format!("{V2_REF}{OBJECT_META}")},
                    "spec": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {
                            "port": {"x-kubernetes-int-or-string": true},
                            "tags": {},
                            "sizes": {"type": "array", "items": {}},
                        },
                    },
                    "note": {},
                },
            })
        );
        let map = json!({"type": "object", "required": ["x"],
            "additionalProperties": {"type": "string", "nullable": true}});
        assert_eq!(to_v2(&map), json!({"type": "object", "additionalProperties": {}}));
    }
}
