//! The structural schema of every served kind, for the machinery that must know what a field
//! is: field validation (unknown fields, wrong types) and strategic merge patch (list merge
//! keys, patch strategies, atomic maps). It is built once from the same definitions as
//! `/openapi/v2`, so what the server enforces is exactly what it publishes.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::machinery::definitions::{self, ServedKind, V2_REF};
use crate::machinery::qos::parse_quantity;
use crate::scheme::{Registry, ResourceType};

/// References are followed at most this many times in a row (a cycle is a broken table).
const MAX_REF_HOPS: usize = 16;

/// Every definition, and the definition of each served kind.
pub struct Schemas {
    defs: Map<String, Value>,
    kinds: Vec<ServedKind>,
}

static SCHEMAS: LazyLock<Schemas> = LazyLock::new(|| {
    let defs = definitions::build(&Registry::new());
    Schemas {
        defs: defs.schemas,
        kinds: defs.kinds,
    }
});

/// The schemas of the built-in types.
pub fn schemas() -> &'static Schemas {
    &SCHEMAS
}

impl Schemas {
    /// The root schema of a served kind, if it has one: a built-in kind's definition, or a
    /// custom resource's schema from its definition.
    pub fn kind<'a>(&'a self, rt: &'a ResourceType) -> Option<Node<'a>> {
        if let Some(custom) = &rt.custom {
            return Some(Node::at(self, &custom.schema));
        }
        self.builtin(&rt.group, &rt.version, &rt.kind)
    }

    /// The root schema of a built-in kind.
    pub fn builtin(&self, group: &str, version: &str, kind: &str) -> Option<Node<'_>> {
        let served = self
            .kinds
            .iter()
            .find(|k| *k.rt.group == *group && *k.rt.version == *version && *k.rt.kind == *kind)?;
        self.definition(&served.name)
    }

    /// Every definition, by name (Swagger 2.0 form).
    pub fn definitions(&self) -> &Map<String, Value> {
        &self.defs
    }

    /// The schema of one named definition.
    pub fn definition(&self, name: &str) -> Option<Node<'_>> {
        let (name, schema) = self.defs.get_key_value(name)?;
        Some(Node {
            schemas: self,
            declared: schema,
            resolved: schema,
            definition: Some(name.as_str()),
        })
    }

    fn resolve<'a>(&'a self, mut schema: &'a Value) -> (&'a Value, Option<&'a str>) {
        let mut name = None;
        for _ in 0..MAX_REF_HOPS {
            let Some(target) = schema
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(V2_REF))
            else {
                return (schema, name);
            };
            match self.defs.get_key_value(target) {
                Some((k, s)) => {
                    name = Some(k.as_str());
                    schema = s;
                }
                None => return (&Value::Null, None),
            }
        }
        (&Value::Null, None)
    }
}

/// What a value of a schema is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An object with known properties.
    Struct,
    /// An object whose keys are data (labels, `data`, resource lists).
    Map,
    /// An array.
    List,
    /// A string, number, integer or boolean.
    Scalar(Scalar),
    /// Any JSON value (RawExtension, FieldsV1, embedded JSON).
    Any,
}

/// The scalar types of the built-in schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// A string (also times, quantities and bytes, which travel as strings).
    String,
    /// A 32-bit integer.
    Int32,
    /// A 64-bit integer.
    Int64,
    /// A floating-point number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// `IntOrString`: an integer or a string.
    IntOrString,
    /// `resource.Quantity`: a string or a number that parses as a quantity (`1`, `500m`,
    /// `1Gi`), as Go's `Quantity.UnmarshalJSON` takes it.
    Quantity,
}

/// Go's `resource.ErrFormatWrong`: what decoding a quantity that does not parse fails with.
pub const QUANTITY_FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

impl Scalar {
    /// Whether `v` has this type (or is null, which every optional field accepts).
    pub fn accepts(self, v: &Value) -> bool {
        match (self, v) {
            (_, Value::Null) => true,
            (Scalar::String, Value::String(_)) => true,
            (Scalar::Int32, Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            (Scalar::Int64, Value::Number(n)) => n.is_i64(),
            (Scalar::Number, Value::Number(_)) => true,
            (Scalar::Boolean, Value::Bool(_)) => true,
            (Scalar::IntOrString, Value::String(_)) => true,
            (Scalar::IntOrString, Value::Number(n)) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
            (Scalar::Quantity, Value::String(s)) => parse_quantity(s).is_some(),
            (Scalar::Quantity, Value::Number(n)) => parse_quantity(&n.to_string()).is_some(),
            _ => false,
        }
    }

    /// The Go type name kube-apiserver's decoder names in its type errors.
    pub fn go_name(self) -> &'static str {
        match self {
            Scalar::String => "string",
            Scalar::Int32 => "int32",
            Scalar::Int64 => "int64",
            Scalar::Number => "float64",
            Scalar::Boolean => "bool",
            Scalar::IntOrString => "IntOrString",
            Scalar::Quantity => "Quantity",
        }
    }
}

/// How a list merges under server-side apply (`x-kubernetes-list-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListType<'a> {
    /// Replaced as a whole (also lists without a marker).
    Atomic,
    /// A set of scalars, owned item by item.
    Set,
    /// Items keyed by these fields, owned item by item.
    Map(&'a [Value]),
}

/// One schema, as declared where it is used (which carries the merge markers) and as resolved
/// through its reference (which carries the structure).
#[derive(Clone, Copy)]
pub struct Node<'a> {
    schemas: &'a Schemas,
    declared: &'a Value,
    resolved: &'a Value,
    definition: Option<&'a str>,
}

impl<'a> Node<'a> {
    fn at(schemas: &'a Schemas, declared: &'a Value) -> Node<'a> {
        let (resolved, definition) = schemas.resolve(declared);
        Node {
            schemas,
            declared,
            resolved,
            definition,
        }
    }

    /// A marker from the use site, else from the definition.
    fn marker(&self, name: &str) -> Option<&'a Value> {
        self.declared.get(name).or_else(|| self.resolved.get(name))
    }

    /// The short name of the definition this schema resolves to (`DeploymentSpec`), if any.
    pub fn type_name(&self) -> Option<&'a str> {
        self.definition.map(|d| d.rsplit('.').next().unwrap_or(d))
    }

    /// What values of this schema are.
    pub fn shape(&self) -> Shape {
        let s = self.resolved;
        let format = s.get("format").and_then(Value::as_str);
        let int_or_string = s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        match s.get("type").and_then(Value::as_str) {
            _ if self.definition == Some(definitions::QUANTITY) => Shape::Scalar(Scalar::Quantity),
            _ if format == Some("int-or-string") || int_or_string => Shape::Scalar(Scalar::IntOrString),
            Some("object") if s.get("properties").is_some() => Shape::Struct,
            Some("object") if s.get("additionalProperties").is_some() => Shape::Map,
            Some("array") => Shape::List,
            Some("string") => Shape::Scalar(Scalar::String),
            Some("integer") if format == Some("int32") => Shape::Scalar(Scalar::Int32),
            Some("integer") => Shape::Scalar(Scalar::Int64),
            Some("number") => Shape::Scalar(Scalar::Number),
            Some("boolean") => Shape::Scalar(Scalar::Boolean),
            None if s.get("properties").is_some() => Shape::Struct,
            _ => Shape::Any,
        }
    }

    /// Whether fields the schema does not declare are kept (a custom resource's
    /// `x-kubernetes-preserve-unknown-fields: true`).
    pub fn preserves_unknown(&self) -> bool {
        self.marker("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
    }

    /// Whether the schema is one of the built-in definitions (rather than a custom resource's
    /// own schema).
    pub fn is_builtin(&self) -> bool {
        self.definition.is_some()
    }

    /// The schema of property `name` of a struct.
    pub fn field(&self, name: &str) -> Option<Node<'a>> {
        let declared = self.resolved.get("properties")?.get(name)?;
        Some(Node::at(self.schemas, declared))
    }

    /// The schema of a list's items or a map's values.
    pub fn element(&self) -> Option<Node<'a>> {
        let declared = self
            .resolved
            .get("items")
            .or_else(|| self.resolved.get("additionalProperties"))
            .filter(|v| v.is_object())?;
        Some(Node::at(self.schemas, declared))
    }

    /// `x-kubernetes-patch-strategy`, split on commas (`merge`, `retainKeys`, `replace`).
    pub fn patch_strategies(&self) -> impl Iterator<Item = &'a str> {
        self.marker("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    /// Whether the patch strategy includes `strategy`.
    pub fn has_patch_strategy(&self, strategy: &str) -> bool {
        self.patch_strategies().any(|s| s == strategy)
    }

    /// `x-kubernetes-list-type` with its keys (lists without a marker are atomic).
    pub fn list_type(&self) -> ListType<'a> {
        match self.marker("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                self.marker("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map_or(&[], Vec::as_slice),
            ),
            _ => ListType::Atomic,
        }
    }

    /// Whether a map or struct is owned and replaced as a whole under server-side apply
    /// (`x-kubernetes-map-type: atomic`).
    pub fn is_atomic(&self) -> bool {
        self.marker("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
    }

    /// The schema's `default`: the value the field takes when it is omitted.
    pub fn default_value(&self) -> Option<&'a Value> {
        self.marker("default")
    }

    /// The properties a struct must have (`required`).
    pub fn required(&self) -> impl Iterator<Item = &'a str> {
        self.resolved
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    /// The values a scalar may take (`enum`), when the schema lists them.
    pub fn enum_values(&self) -> Option<&'a [Value]> {
        self.marker("enum").and_then(Value::as_array).map(Vec::as_slice)
    }

    /// `x-kubernetes-patch-merge-key`.
    pub fn merge_key(&self) -> Option<&'a str> {
        self.marker("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, version: &str, plural: &str) -> Node<'static> {
        let registry = Registry::new();
        let rt = registry.lookup(group, version, plural).expect("served");
        schemas()
            .builtin(&rt.group, &rt.version, &rt.kind)
            .expect("has a schema")
    }

    #[test]
    fn pod_spec_fields_carry_their_shapes_and_markers() {
        let pod = kind("", "v1", "pods");
        assert_eq!(pod.shape(), Shape::Struct);
        let spec = pod.field("spec").expect("spec");
        assert_eq!(spec.type_name(), Some("PodSpec"));
        let containers = spec.field("containers").expect("containers");
        assert_eq!(containers.shape(), Shape::List);
        assert_eq!(containers.merge_key(), Some("name"));
        assert!(containers.has_patch_strategy("merge"));
        let container = containers.element().expect("items");
        assert_eq!(container.type_name(), Some("Container"));
        let ports = container.field("ports").expect("ports");
        assert_eq!(ports.merge_key(), Some("containerPort"));
        let port = ports
            .element()
            .and_then(|p| p.field("containerPort"))
            .expect("containerPort");
        assert_eq!(port.shape(), Shape::Scalar(Scalar::Int32));
        assert!(port.default_value().is_none());
        let protocol = ports
            .element()
            .and_then(|p| p.field("protocol"))
            .expect("protocol");
        assert_eq!(protocol.default_value(), Some(&Value::from("TCP")));
        let volumes = spec.field("volumes").expect("volumes");
        assert!(volumes.has_patch_strategy("retainKeys") && volumes.has_patch_strategy("merge"));
        let node_selector = spec.field("nodeSelector").expect("nodeSelector");
        assert_eq!(node_selector.shape(), Shape::Map);
        assert!(node_selector.is_atomic());
        let tolerations = spec.field("tolerations").expect("tolerations");
        assert!(tolerations.merge_key().is_none() && !tolerations.has_patch_strategy("merge"));
        assert_eq!(tolerations.list_type(), ListType::Atomic);
        assert!(matches!(containers.list_type(), ListType::Map(keys) if keys == [Value::from("name")]));
        assert!(spec.field("noSuchField").is_none());
        let labels = pod
            .field("metadata")
            .and_then(|m| m.field("labels"))
            .expect("labels");
        assert_eq!(labels.shape(), Shape::Map);
        assert_eq!(
            labels.element().map(|e| e.shape()),
            Some(Shape::Scalar(Scalar::String))
        );
    }

    #[test]
    fn special_types_are_scalars_or_any() {
        let deploy = kind("apps", "v1", "deployments");
        let surge = deploy
            .field("spec")
            .and_then(|s| s.field("strategy"))
            .and_then(|s| s.field("rollingUpdate"))
            .and_then(|r| r.field("maxSurge"))
            .expect("maxSurge");
        assert_eq!(surge.shape(), Shape::Scalar(Scalar::IntOrString));
        assert!(Scalar::IntOrString.accepts(&Value::from(3)));
        assert!(Scalar::IntOrString.accepts(&Value::from("25%")));
        assert!(!Scalar::IntOrString.accepts(&Value::from(true)));
        let created = deploy
            .field("metadata")
            .and_then(|m| m.field("creationTimestamp"))
            .expect("creationTimestamp");
        assert_eq!(created.shape(), Shape::Scalar(Scalar::String));
        let managed = deploy
            .field("metadata")
            .and_then(|m| m.field("managedFields"))
            .and_then(|m| m.element())
            .and_then(|e| e.field("fieldsV1"))
            .expect("fieldsV1");
        assert_eq!(managed.shape(), Shape::Any);
        assert!(!Scalar::Int32.accepts(&Value::from(1u64 << 40)));
        assert!(Scalar::Int64.accepts(&Value::from(1u64 << 40)));
    }
}
