//! Schema definitions for the OpenAPI documents, generated from k8s-openapi's `schemars`
//! implementations and fixed up to the shapes kube-apiserver publishes.
//!
//! The generator writes Swagger 2.0 form (`$ref: #/definitions/<name>` with sibling
//! `description`); [`to_v3`] turns a definition into OpenAPI 3.0 form.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use k8s_openapi::{ListableResource, Resource};
use serde_json::{json, Map, Value};

use crate::machinery::type_facts::{self, ListType, MapType, PatchStrategy, PropertyFacts};
use crate::scheme::{Registry, ResourceType};

/// Prefix of a Swagger 2.0 reference.
pub const V2_REF: &str = "#/definitions/";
/// Prefix of an OpenAPI 3.0 reference.
pub const V3_REF: &str = "#/components/schemas/";

/// Definition name of `Status`.
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// Definition name of `DeleteOptions`.
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// Definition name of `Patch`.
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
/// Definition name of `WatchEvent`.
pub const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";
/// Definition name of `autoscaling/v1` `Scale`, the body of every `scale` subresource.
pub const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";

const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
/// Definition name of `resource.Quantity`.
pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
/// Definitions kube-apiserver publishes with a description only (any JSON value).
const ANY_VALUE: &[&str] = &[
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];
/// The only built-in kind whose `metadata` is required upstream (k8s-openapi marks it
/// required on every kind because the Rust field is not optional).
const METADATA_REQUIRED: &[&str] = &["io.k8s.api.core.v1.Event"];

/// A built-in kind whose schema k8s-openapi can generate.
struct KindSchema {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    generate: fn(&mut SchemaGenerator) -> String,
}

fn generate<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    g.subschema_for::<T>();
    T::schema_name().into_owned()
}

fn kind<T: Resource + ListableResource + JsonSchema>() -> KindSchema {
    review_kind::<T>()
}

/// A kind without a list: the reviews.
fn review_kind<T: Resource + JsonSchema>() -> KindSchema {
    KindSchema {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        generate: generate::<T>,
    }
}

/// Every built-in kind the registry may serve, keyed by the type itself so group, version and
/// kind cannot drift from k8s-openapi.
fn kind_schemas() -> Vec<KindSchema> {
    use k8s_openapi::api::{
        admissionregistration::v1 as admissionregistration, apps::v1 as apps,
        authentication::v1 as authentication, authorization::v1 as authorization,
        autoscaling::v1 as autoscaling_v1, autoscaling::v2 as autoscaling, batch::v1 as batch,
        certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
        discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
        networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac,
        resource::v1 as resource, scheduling::v1 as scheduling, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
    vec![
        kind::<core::Namespace>(),
        kind::<core::ConfigMap>(),
        kind::<core::Secret>(),
        kind::<core::Pod>(),
        kind::<core::Service>(),
        kind::<core::ServiceAccount>(),
        kind::<core::Event>(),
        kind::<core::Node>(),
        kind::<core::Endpoints>(),
        kind::<core::PersistentVolume>(),
        kind::<core::PersistentVolumeClaim>(),
        kind::<core::LimitRange>(),
        kind::<core::ResourceQuota>(),
        kind::<core::ReplicationController>(),
        kind::<apiregistration::APIService>(),
        kind::<apps::Deployment>(),
        kind::<apps::ReplicaSet>(),
        kind::<apps::StatefulSet>(),
        kind::<apps::DaemonSet>(),
        kind::<apps::ControllerRevision>(),
        kind::<batch::Job>(),
        kind::<batch::CronJob>(),
        kind::<coordination::Lease>(),
        kind::<events::Event>(),
        kind::<rbac::Role>(),
        kind::<rbac::RoleBinding>(),
        kind::<rbac::ClusterRole>(),
        kind::<rbac::ClusterRoleBinding>(),
        kind::<apiextensions::CustomResourceDefinition>(),
        kind::<discovery::EndpointSlice>(),
        kind::<policy::PodDisruptionBudget>(),
        kind::<networking::Ingress>(),
        kind::<networking::NetworkPolicy>(),
        kind::<networking::IngressClass>(),
        kind::<storage::StorageClass>(),
        kind::<scheduling::PriorityClass>(),
        kind::<autoscaling::HorizontalPodAutoscaler>(),
        kind::<autoscaling_v1::HorizontalPodAutoscaler>(),
        kind::<core::PodTemplate>(),
        kind::<certificates::CertificateSigningRequest>(),
        kind::<node::RuntimeClass>(),
        kind::<storage::CSIDriver>(),
        kind::<storage::CSINode>(),
        kind::<storage::CSIStorageCapacity>(),
        kind::<storage::VolumeAttachment>(),
        kind::<storage::VolumeAttributesClass>(),
        kind::<networking::IPAddress>(),
        kind::<networking::ServiceCIDR>(),
        kind::<flowcontrol::FlowSchema>(),
        kind::<flowcontrol::PriorityLevelConfiguration>(),
        kind::<resource::DeviceClass>(),
        kind::<resource::ResourceClaim>(),
        kind::<resource::ResourceClaimTemplate>(),
        kind::<resource::ResourceSlice>(),
        kind::<admissionregistration::MutatingWebhookConfiguration>(),
        kind::<admissionregistration::ValidatingWebhookConfiguration>(),
        kind::<admissionregistration::ValidatingAdmissionPolicy>(),
        kind::<admissionregistration::ValidatingAdmissionPolicyBinding>(),
        review_kind::<authentication::TokenReview>(),
        review_kind::<authentication::SelfSubjectReview>(),
        review_kind::<authorization::SubjectAccessReview>(),
        review_kind::<authorization::LocalSubjectAccessReview>(),
        review_kind::<authorization::SelfSubjectAccessReview>(),
        review_kind::<authorization::SelfSubjectRulesReview>(),
    ]
}

/// A served kind and the names of its definitions.
#[derive(Debug, Clone)]
pub struct ServedKind {
    /// The registry entry.
    pub rt: ResourceType,
    /// Definition name of the kind, e.g. `io.k8s.api.apps.v1.Deployment`.
    pub name: String,
    /// Definition name of its list, e.g. `io.k8s.api.apps.v1.DeploymentList`.
    pub list_name: String,
}

/// All definitions (Swagger 2.0 form) plus the served kinds they describe.
#[derive(Debug)]
pub struct Definitions {
    /// Definition name → schema, including the synthesized `*List` definitions.
    pub schemas: Map<String, Value>,
    /// The kinds that have a schema, in registry order.
    pub kinds: Vec<ServedKind>,
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// Generates every definition the registry's kinds reach.
pub fn build(registry: &Registry) -> Definitions {
    let settings = SchemaSettings::draft07().with(|s| {
        s.meta_schema = None;
        s.transforms.clear();
    });
    let mut generator = settings.into_generator();
    let table = kind_schemas();
    let mut kinds = Vec::new();
    for rt in registry.all() {
        let Some(ks) = table
            .iter()
            .find(|k| k.group == &*rt.group && k.version == &*rt.version && k.kind == &*rt.kind)
        else {
            tracing::warn!(
                kind = &*rt.kind,
                group = &*rt.group,
                "no OpenAPI schema for served kind"
            );
            continue;
        };
        let name = (ks.generate)(&mut generator);
        let list_name = if rt.review {
            String::new()
        } else {
            list_name(&name, &rt.list_kind)
        };
        kinds.push(ServedKind {
            rt: rt.clone(),
            name,
            list_name,
        });
    }
    generate::<meta::Status>(&mut generator);
    generate::<meta::DeleteOptions>(&mut generator);
    generate::<meta::Patch>(&mut generator);
    generate::<meta::WatchEvent<RawExtension>>(&mut generator);
    if kinds.iter().any(|k| k.rt.has_scale) {
        generate::<k8s_openapi::api::autoscaling::v1::Scale>(&mut generator);
    }
    let mut schemas = generator.take_definitions(false);
    fix_special_types(&mut schemas);
    for k in &kinds {
        add_kind_extensions(&mut schemas, k);
    }
    add_shared_gvks(&mut schemas, &kinds);
    overlay_type_facts(&mut schemas);
    Definitions { schemas, kinds }
}

/// `io.k8s.api.apps.v1.Deployment` + `DeploymentList` → `io.k8s.api.apps.v1.DeploymentList`.
fn list_name(name: &str, list_kind: &str) -> String {
    match name.rsplit_once('.') {
        Some((package, _)) => format!("{package}.{list_kind}"),
        None => list_kind.to_string(),
    }
}

/// Replaces the shapes k8s-openapi gives the special types with the ones kube-apiserver
/// publishes in Swagger 2.0.
fn fix_special_types(schemas: &mut Map<String, Value>) {
    if let Some(s) = schemas.get_mut(INT_OR_STRING) {
        *s = with_description(s, json!({"type": "string", "format": "int-or-string"}));
    }
    if let Some(s) = schemas.get_mut(QUANTITY) {
        *s = with_description(s, json!({"type": "string"}));
    }
    for name in ANY_VALUE {
        if let Some(s) = schemas.get_mut(*name) {
            *s = with_description(s, json!({}));
        }
    }
}

fn with_description(old: &Value, mut new: Value) -> Value {
    if let (Some(d), Some(obj)) = (old.get("description"), new.as_object_mut()) {
        obj.insert("description".into(), d.clone());
    }
    new
}

/// Adds the kind's group-version-kind, drops the `metadata` requirement k8s-openapi invents,
/// and synthesizes the list definition.
fn add_kind_extensions(schemas: &mut Map<String, Value>, k: &ServedKind) {
    let rt = &k.rt;
    let Some(def) = schemas.get_mut(&k.name).and_then(Value::as_object_mut) else {
        return;
    };
    def.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([gvk(&rt.group, &rt.version, &rt.kind)]),
    );
    if !METADATA_REQUIRED.contains(&k.name.as_str()) {
        if let Some(required) = def.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|r| r != "metadata");
            if required.is_empty() {
                def.remove("required");
            }
        }
    }
    if rt.review {
        return;
    }
    let property = |p: &str| def.get("properties").and_then(|props| props.get(p)).cloned();
    let api_version = property("apiVersion").unwrap_or_else(|| json!({"type": "string"}));
    let kind = property("kind").unwrap_or_else(|| json!({"type": "string"}));
    let mut list = json!({
        "type": "object",
        "properties": {
            "apiVersion": api_version,
            "items": {
                "type": "array",
                "items": {"$ref": format!("{V2_REF}{}", k.name)},
            },
            "kind": kind,
            "metadata": {"$ref": format!("{V2_REF}{LIST_META}")},
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [gvk(&rt.group, &rt.version, &rt.list_kind)],
    });
    // Upstream's descriptions of the list (k8s-openapi has none: they come from the type
    // facts), where upstream has one.
    if let Some(facts) = type_facts::facts().lists.get(&k.list_name) {
        let describe = |at: &mut Value, text: &str| {
            if !text.is_empty() {
                at["description"] = json!(text);
            }
        };
        describe(&mut list, &facts.description);
        describe(&mut list["properties"]["items"], &facts.items);
        describe(&mut list["properties"]["metadata"], &facts.metadata);
    }
    schemas.insert(k.list_name.clone(), list);
}

/// `Status`, `Scale`, and the per-group-version `DeleteOptions` and `WatchEvent` kinds.
fn add_shared_gvks(schemas: &mut Map<String, Value>, kinds: &[ServedKind]) {
    let mut versions: BTreeSet<(&str, &str)> = kinds.iter().map(|k| (&*k.rt.group, &*k.rt.version)).collect();
    versions.insert(("", "v1"));
    let mut set = |name: &str, gvks: Value| {
        if let Some(def) = schemas.get_mut(name).and_then(Value::as_object_mut) {
            def.insert("x-kubernetes-group-version-kind".into(), gvks);
        }
    };
    set(STATUS, json!([gvk("", "v1", "Status")]));
    set(SCALE, json!([gvk("autoscaling", "v1", "Scale")]));
    for (name, kind) in [(DELETE_OPTIONS, "DeleteOptions"), (WATCH_EVENT, "WatchEvent")] {
        let gvks: Vec<Value> = versions.iter().map(|(g, v)| gvk(g, v, kind)).collect();
        set(name, Value::Array(gvks));
    }
}

fn map_type_name(t: MapType) -> &'static str {
    match t {
        MapType::Atomic => "atomic",
        MapType::Granular => "granular",
    }
}

/// The `x-kubernetes-*` extensions and the `default` of one property.
fn property_extensions(p: &PropertyFacts) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    if let Some(d) = &p.default {
        out.push(("default", d.clone()));
    }
    if let Some(t) = p.list_type {
        let name = match t {
            ListType::Atomic => "atomic",
            ListType::Set => "set",
            ListType::Map => "map",
        };
        out.push(("x-kubernetes-list-type", json!(name)));
    }
    if !p.list_map_keys.is_empty() {
        out.push(("x-kubernetes-list-map-keys", json!(p.list_map_keys)));
    }
    if let Some(t) = p.map_type {
        out.push(("x-kubernetes-map-type", json!(map_type_name(t))));
    }
    if let Some(s) = p.patch_strategy {
        let name = match s {
            PatchStrategy::Merge => "merge",
            PatchStrategy::RetainKeys => "retainKeys",
            PatchStrategy::MergeRetainKeys => "merge,retainKeys",
            PatchStrategy::Replace => "replace",
        };
        out.push(("x-kubernetes-patch-strategy", json!(name)));
    }
    if let Some(k) = &p.patch_merge_key {
        out.push(("x-kubernetes-patch-merge-key", json!(k)));
    }
    out
}

/// Adds the list, map and patch metadata and the defaults no crate carries, from the
/// project's type facts.
fn overlay_type_facts(schemas: &mut Map<String, Value>) {
    let facts = type_facts::facts();
    for (name, def) in schemas.iter_mut() {
        let (Some(f), Some(def)) = (facts.definition(name), def.as_object_mut()) else {
            continue;
        };
        if let Some(t) = f.struct_type {
            def.insert("x-kubernetes-map-type".into(), json!(map_type_name(t)));
        }
        let Some(props) = def.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, p) in &f.properties {
            if let Some(schema) = props.get_mut(field).and_then(Value::as_object_mut) {
                for (key, value) in property_extensions(p) {
                    schema.insert(key.into(), value);
                }
            }
        }
    }
}

/// Calls `f` on every schema object inside `schema` (itself included), following the
/// schema-valued keywords only, so a property named `$ref` is never mistaken for a reference.
pub fn walk_schemas(schema: &mut Value, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    f(obj);
    if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
        for s in props.values_mut() {
            walk_schemas(s, f);
        }
    }
    for key in ["items", "additionalProperties"] {
        match obj.get_mut(key) {
            Some(Value::Array(list)) => list.iter_mut().for_each(|s| walk_schemas(s, f)),
            Some(s @ Value::Object(_)) => walk_schemas(s, f),
            _ => {}
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(list) = obj.get_mut(key).and_then(Value::as_array_mut) {
            list.iter_mut().for_each(|s| walk_schemas(s, f));
        }
    }
}

/// The names of the definitions `schema` references directly.
fn references(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut copy = schema.clone();
    walk_schemas(&mut copy, &mut |obj| {
        if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
            if let Some(name) = r.strip_prefix(V2_REF) {
                out.push(name.to_string());
            }
        }
    });
    out
}

/// The definitions reachable from `roots`, each once.
pub fn closure<'a>(schemas: &'a Map<String, Value>, roots: &[&str]) -> BTreeMap<&'a str, &'a Value> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<String> = roots.iter().map(|r| r.to_string()).collect();
    while let Some(name) = todo.pop() {
        let Some((key, schema)) = schemas.get_key_value(name.as_str()) else {
            continue;
        };
        if out.insert(key.as_str(), schema).is_none() {
            todo.extend(references(schema));
        }
    }
    out
}

/// Turns one Swagger 2.0 definition into its OpenAPI 3.0 form: references move to
/// `#/components/schemas/`, a reference with siblings is wrapped in `allOf`, and IntOrString
/// and Quantity get their `oneOf` shapes.
pub fn to_v3(name: &str, schema: &Value) -> Value {
    match name {
        INT_OR_STRING => {
            return with_description(
                schema,
                json!({
                    "format": "int-or-string",
                    "oneOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": true,
                }),
            )
        }
        QUANTITY => {
            return with_description(schema, json!({"oneOf": [{"type": "string"}, {"type": "number"}]}));
        }
        _ => {}
    }
    let mut out = schema.clone();
    walk_schemas(&mut out, &mut |obj| {
        let Some(Value::String(r)) = obj.remove("$ref") else {
            return;
        };
        let r = match r.strip_prefix(V2_REF) {
            Some(n) => format!("{V3_REF}{n}"),
            None => r,
        };
        if obj.is_empty() {
            obj.insert("$ref".into(), Value::String(r));
        } else {
            obj.insert("allOf".into(), json!([{"$ref": r}]));
        }
    });
    out
}
