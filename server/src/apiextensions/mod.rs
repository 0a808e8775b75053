//! Custom resources: the types that stored CustomResourceDefinitions add, served by the same
//! generic store as the built-in ones. A definition becomes one [`ResourceType`] per served
//! version, carrying what the definition declares (its structural schema, printer columns,
//! scale paths) in a [`CustomType`].
//!
//! Every replica applies the same log, so every replica derives the same types from its own
//! watch cache: [`follow`] swaps the served set whenever a definition changes, and a request
//! for a path no type serves first makes the cache as fresh as a linearizable read and looks
//! again ([`refresh`]), so a resource is served on every replica as soon as its definition's
//! creation is acknowledged.

pub mod columns;
pub mod conversion;
pub mod definition;
pub mod rules;
pub mod strategy;
pub mod structural;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::machinery::definitions::V2_REF;
use crate::machinery::errors::ApiResult;
use crate::machinery::field_path::field_path;
use crate::machinery::version::version_priority;
use crate::registry::strategy::Strategy;
use crate::scheme::custom::{ConversionWebhook, CustomType, Patterns, Rules, ScalePaths};
use crate::scheme::{Hooks, LiveRegistry, ResourceType};
use crate::store::cacher::{Published, WatchCache};
use crate::store::delegator::sync_most_recent;
use crate::store::keys;

/// The storage prefix of every CustomResourceDefinition.
pub fn crd_prefix() -> String {
    keys::type_prefix("apiextensions.k8s.io", "customresourcedefinitions")
}

/// The definition every custom resource's `metadata` has.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The whole-object schema of a version: the declared schema with the standard top-level
/// fields added.
fn object_schema(declared: &Value) -> Value {
    let mut root = declared.clone();
    if !root.is_object() {
        root = json!({});
    }
    root["type"] = json!("object");
    if !root.get("properties").is_some_and(Value::is_object) {
        root["properties"] = json!({});
    }
    root["properties"]["apiVersion"] = json!({"type": "string"});
    root["properties"]["kind"] = json!({"type": "string"});
    root["properties"]["metadata"] = json!({"$ref": format!("{V2_REF}{OBJECT_META}")});
    root
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The types one definition serves: one per served version. A definition that does not
/// validate serves nothing (it cannot have been stored, but a raw write could put one there).
pub fn types_of(crd: &Value) -> Vec<ResourceType> {
    if !definition::validate(crd).is_empty() {
        return Vec::new();
    }
    let spec = &crd["spec"];
    let names = &spec["names"];
    let (Some(group), Some(kind), Some(plural)) = (
        spec["group"].as_str(),
        names["kind"].as_str(),
        names["plural"].as_str(),
    ) else {
        return Vec::new();
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let Some(storage) = versions
        .iter()
        .find(|v| v["storage"] == true)
        .and_then(|v| v["name"].as_str())
    else {
        return Vec::new();
    };
    let list_kind = names["listKind"]
        .as_str()
        .map_or_else(|| format!("{kind}List"), str::to_string);
    let singular = names["singular"]
        .as_str()
        .map_or_else(|| kind.to_ascii_lowercase(), str::to_string);
    let terminating = crd["metadata"]["deletionTimestamp"].is_string();
    let definition = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut served: Vec<&Value> = versions.iter().filter(|v| v["served"] == true).collect();
    served.sort_by(|a, b| {
        version_priority(a["name"].as_str().unwrap_or_default())
            .cmp(&version_priority(b["name"].as_str().unwrap_or_default()))
    });
    served
        .into_iter()
        .filter_map(|v| {
            let version = v["name"].as_str()?;
            let declared = v["schema"]["openAPIV3Schema"].clone();
            let scale = v["subresources"].get("scale").map(|s| ScalePaths {
                spec_replicas: s["specReplicasPath"]
                    .as_str()
                    .and_then(field_path)
                    .unwrap_or_default(),
                status_replicas: s["statusReplicasPath"]
                    .as_str()
                    .and_then(field_path)
                    .unwrap_or_default(),
                label_selector: s["labelSelectorPath"].as_str().and_then(field_path),
            });
            let deprecation = (v["deprecated"] == true).then(|| {
                v["deprecationWarning"].as_str().map_or_else(
                    || format!("{group}/{version} {kind} is deprecated"),
                    str::to_string,
                )
            });
            Some(ResourceType {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                list_kind: list_kind.as_str().into(),
                plural: plural.into(),
                singular: singular.clone(),
                namespaced: spec["scope"] == "Namespaced",
                short_names: strings(&names["shortNames"]).into(),
                categories: strings(&names["categories"]).into(),
                has_status: v["subresources"].get("status").is_some(),
                has_scale: scale.is_some(),
                review: false,
                hooks: Hooks::new(Arc::new(strategy::CustomResource) as Arc<dyn Strategy>),
                custom: Some(Arc::new(CustomType {
                    definition: definition.clone(),
                    storage_version: storage.to_string(),
                    schema: object_schema(&declared),
                    patterns: Patterns::of(&declared),
                    rules: Rules(Box::new(rules::Validator::of(&declared))),
                    declared,
                    columns: columns::of_version(v),
                    scale,
                    deprecation,
                    terminating,
                    conversion: conversion_webhook(spec),
                    selectable: v["selectableFields"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|f| f["jsonPath"].as_str().and_then(|p| p.strip_prefix('.')))
                        .map(str::to_string)
                        .collect(),
                })),
            })
        })
        .collect()
}

/// The definition's conversion webhook, when its strategy is `Webhook`.
fn conversion_webhook(spec: &Value) -> Option<ConversionWebhook> {
    let conversion = &spec["conversion"];
    (conversion["strategy"] == "Webhook").then(|| ConversionWebhook {
        client_config: conversion["webhook"]["clientConfig"].clone(),
        review_versions: strings(&conversion["webhook"]["conversionReviewVersions"]),
    })
}

/// The custom types of every definition in the cache now, and the cache revision they are at.
fn custom_types(cache: &WatchCache) -> (Vec<ResourceType>, i64) {
    cache
        .list(&crd_prefix(), None, None)
        .map_or((Vec::new(), 0), |snap| {
            let types = snap
                .objects
                .iter()
                .flat_map(|(_, o)| types_of(&o.value()))
                .collect();
            (types, snap.revision)
        })
}

/// Serves the custom types of the definitions in the cache now.
fn install(cache: &WatchCache, live: &LiveRegistry) {
    let (types, revision) = custom_types(cache);
    live.set_custom(types, revision);
}

/// Serves the definitions a linearizable read would see now (for a request whose path no
/// served type matches: the definition may have been created an instant ago elsewhere).
pub async fn refresh(cache: &WatchCache, live: &LiveRegistry) -> ApiResult<()> {
    sync_most_recent(cache).await?;
    install(cache, live);
    Ok(())
}

/// Keeps `live` serving the definitions in the cache, for as long as the replica runs.
pub fn follow(cache: WatchCache, live: Arc<LiveRegistry>) {
    tokio::spawn(async move {
        while !cache.synced() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let prefix = crd_prefix();
        loop {
            let (_, mut changes) = cache.list_and_watch(&prefix);
            install(&cache, &live);
            loop {
                match changes.recv().await {
                    Ok(batch) => {
                        let touched = match &*batch {
                            Published::Changes { events, .. } => {
                                events.iter().any(|e| e.key.starts_with(prefix.as_str()))
                            }
                            Published::Reset => true,
                        };
                        if touched {
                            install(&cache, &live);
                        }
                    }
                    // Fell behind or the cache restarted: read the whole set again.
                    Err(RecvError::Lagged(_)) => break,
                    Err(RecvError::Closed) => return,
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn crontab_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {
                "group": "stable.example.com",
                "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {
                            "cronSpec": {"type": "string"}, "image": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 0, "default": 1}}},
                        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "selector": {"type": "string"}}}}}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                     "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}],
                     "selectableFields": [{"jsonPath": ".spec.image"}]},
                    {"name": "v1beta1", "served": true, "storage": false, "deprecated": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v0", "served": false, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}}
                ]
            }
        })
    }

    #[test]
    fn a_definition_serves_one_type_per_served_version() {
        let types = types_of(&crontab_crd());
        assert_eq!(types.len(), 2);
        let v1 = &types[0];
        assert_eq!(
            (&*v1.group, &*v1.version, &*v1.kind, &*v1.list_kind, &*v1.plural),
            ("stable.example.com", "v1", "CronTab", "CronTabList", "crontabs")
        );
        assert!(v1.namespaced && v1.has_status && v1.has_scale);
        assert_eq!(*v1.short_names, ["ct"]);
        let custom = v1.custom.as_ref().unwrap();
        assert_eq!(custom.storage_version, "v1");
        assert_eq!(custom.columns.len(), 1);
        assert_eq!(custom.selectable, ["spec.image"]);
        assert_eq!(custom.scale.as_ref().unwrap().spec_replicas, ["spec", "replicas"]);
        assert_eq!(
            custom.schema["properties"]["metadata"]["$ref"],
            format!("{V2_REF}{OBJECT_META}")
        );
        let beta = types[1].custom.as_ref().unwrap();
        assert_eq!(beta.storage_version, "v1");
        assert_eq!(
            beta.deprecation.as_deref(),
            Some("stable.example.com/v1beta1 CronTab is deprecated")
        );
        assert!(!types[1].has_status);
        let mut broken = crontab_crd();
        broken["metadata"]["name"] = json!("other.stable.example.com");
        assert!(types_of(&broken).is_empty());
    }

    #[test]
    fn an_older_set_of_definitions_never_replaces_a_newer_one() {
        let live = LiveRegistry::new(crate::scheme::Registry::new());
        let served = |live: &LiveRegistry| {
            live.current()
                .lookup("stable.example.com", "v1", "crontabs")
                .is_some()
        };
        assert!(!served(&live));
        live.set_custom(types_of(&crontab_crd()), 7);
        assert!(served(&live));
        live.set_custom(Vec::new(), 5);
        assert!(served(&live), "a late install of revision 5 is ignored");
        live.set_custom(Vec::new(), 9);
        assert!(!served(&live));
    }

    /// Server-side apply of a custom resource matches list-map items by their keys with the
    /// defaults the definition's schema declares for them, as for the built-in types.
    #[test]
    fn applies_match_list_map_items_by_their_schema_defaulted_keys() {
        use crate::machinery::managed::{apply, Part};
        let mut crd = crontab_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["ports"] = json!({
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {"type": "object", "properties": {
                "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}});
        let rt = types_of(&crd).remove(0);
        let config = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "n"},
                            "spec": {"ports": [{"port": 80}]}});
        let mut live = apply(&rt, Part::Main, &json!({}), &config, "alice", false).expect("created");
        live["spec"]["ports"][0]["protocol"] = json!("TCP");
        let again = apply(&rt, Part::Main, &live, &config, "bob", false).expect("shared, no conflict");
        assert_eq!(again["spec"]["ports"], json!([{"port": 80, "protocol": "TCP"}]));
        let fields = &again["metadata"]["managedFields"][1]["fieldsV1"];
        assert!(
            fields["f:spec"]["f:ports"][r#"k:{"port":80,"protocol":"TCP"}"#].is_object(),
            "{fields}"
        );
    }
}
