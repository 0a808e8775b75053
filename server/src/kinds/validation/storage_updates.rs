//! What a PersistentVolume or a PersistentVolumeClaim may change once created, as kube's
//! `ValidatePersistentVolumeUpdate` and `ValidatePersistentVolumeClaimUpdate` decide it: a
//! volume keeps its source, its volume mode and its node affinity (but for beta node labels
//! replaced by their GA names); a claim keeps its spec but for its storage request when bound
//! (not below the capacity it has) and its volume attributes class, may be given a volume name
//! and a class name once, and keeps its beta storage-class annotation.
//!
//! Where kube prints a Go diff of the two specs after its message, kuberaft prints the changed
//! values as JSON, the old one after `- `, the new one after `+ `.

use serde_json::{Map, Value};

use super::pv_sources::source_fields;
use super::str_of;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;
use crate::machinery::qos::quantity_value;

/// The annotation that named a claim's class before `storageClassName`.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// The node labels kube let a volume's node affinity move from their beta names to.
const BETA_TO_GA: [(&str, &str); 5] = [
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
];

/// The fields of `spec` named in `fields`, as one object (absent ones left out).
fn picked<'a>(spec: &Value, fields: impl Iterator<Item = &'a str>) -> Value {
    let mut out = Map::new();
    for field in fields {
        if let Some(v) = spec.get(field).filter(|v| !v.is_null()) {
            out.insert(field.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// kube's message followed by the JSON of what changed, where kube prints a Go diff.
fn with_diff(message: &str, old: &Value, new: &Value) -> String {
    format!("Forbidden: {message}\n- {old}\n+ {new}")
}

/// kube's `ValidateImmutableField` of a volume mode (kube reports it at `volumeMode`, without
/// `spec`).
fn volume_mode(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["spec"]["volumeMode"], &new["spec"]["volumeMode"]);
    if before != after {
        let shown = after.as_str().map_or("\"null\"".to_string(), go_quote);
        causes.push((
            "volumeMode".to_string(),
            format!("Invalid value: {shown}: field is immutable"),
        ));
    }
}

/// The volume attributes class: once set, not unset nor emptied.
fn attributes_class(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (
        &old["spec"]["volumeAttributesClassName"],
        &new["spec"]["volumeAttributesClassName"],
    );
    if before.is_null() || before == after {
        return;
    }
    let why = match after.as_str() {
        None => "update from non-nil value to nil is forbidden",
        Some("") => "update from non-nil value to an empty string is forbidden",
        Some(_) => return,
    };
    causes.push((
        "spec.volumeAttributesClassName".to_string(),
        format!("Forbidden: {why}"),
    ));
}

/// A PersistentVolume's update.
pub fn persistent_volume_update(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, mut after) = (
        picked(&old["spec"], source_fields()),
        picked(&new["spec"], source_fields()),
    );
    // A CSI volume may be given the secret it is expanded with.
    if before["csi"].is_object() && before["csi"]["controllerExpandSecretRef"].is_null() {
        if let Some(csi) = after.get_mut("csi").and_then(Value::as_object_mut) {
            csi.remove("controllerExpandSecretRef");
        }
    }
    if before != after {
        causes.push((
            "spec.persistentvolumesource".to_string(),
            with_diff(
                "spec.persistentvolumesource is immutable after creation",
                &before,
                &after,
            ),
        ));
    }
    volume_mode(old, new, causes);
    let (was, is) = (&old["spec"]["nodeAffinity"], &new["spec"]["nodeAffinity"]);
    if !was.is_null() && was != is && !beta_labels_to_ga(was, is) {
        causes.push((
            "nodeAffinity".to_string(),
            format!(
                "Invalid value: {}: field is immutable, except for updating from beta label to GA",
                go_node_affinity(is)
            ),
        ));
    }
    attributes_class(old, new, causes);
}

/// Whether the node affinity `new` is `old` with some beta node labels renamed to their GA
/// names, which kube allows.
fn beta_labels_to_ga(old: &Value, new: &Value) -> bool {
    let terms = |v: &Value| {
        v["required"]["nodeSelectorTerms"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let (old_terms, new_terms) = (terms(old), terms(new));
    old_terms.len() == new_terms.len()
        && old_terms.iter().zip(&new_terms).all(|(o, n)| {
            let exprs = |t: &Value| t["matchExpressions"].as_array().cloned().unwrap_or_default();
            let (oe, ne) = (exprs(o), exprs(n));
            o["matchFields"] == n["matchFields"]
                && oe.len() == ne.len()
                && oe.iter().zip(&ne).all(|(o, n)| {
                    let (ok, nk) = (str_of(o, "key"), str_of(n, "key"));
                    let renamed = ok == nk || BETA_TO_GA.contains(&(ok, nk));
                    renamed && o["operator"] == n["operator"] && o["values"] == n["values"]
                })
        })
}

/// A volume node affinity as kube prints it: the JSON of its Go struct (Go's field names, and
/// `null` for what is unset).
fn go_node_affinity(affinity: &Value) -> String {
    let strings = |v: &Value| match v.as_array() {
        None => "null".to_string(),
        Some(list) => Value::Array(list.clone()).to_string(),
    };
    let requirements = |v: &Value| match v.as_array() {
        None => "null".to_string(),
        Some(list) => {
            let shown: Vec<String> = list
                .iter()
                .map(|r| {
                    format!(
                        "{{\"Key\":{},\"Operator\":{},\"Values\":{}}}",
                        Value::from(str_of(r, "key")),
                        Value::from(str_of(r, "operator")),
                        strings(&r["values"])
                    )
                })
                .collect();
            format!("[{}]", shown.join(","))
        }
    };
    let required = &affinity["required"];
    if required.is_null() {
        return "{\"Required\":null}".to_string();
    }
    let terms = match required["nodeSelectorTerms"].as_array() {
        None => "null".to_string(),
        Some(terms) => {
            let shown: Vec<String> = terms
                .iter()
                .map(|t| {
                    format!(
                        "{{\"MatchExpressions\":{},\"MatchFields\":{}}}",
                        requirements(&t["matchExpressions"]),
                        requirements(&t["matchFields"])
                    )
                })
                .collect();
            format!("[{}]", shown.join(","))
        }
    };
    format!("{{\"Required\":{{\"NodeSelectorTerms\":{terms}}}}}")
}

/// A claim's storage request, in billionths of a byte (0 when unset, as Go's zero quantity).
fn storage(v: &Value) -> i128 {
    quantity_value(v).map_or(0, |(q, _)| q)
}

/// A PersistentVolumeClaim's update.
pub fn persistent_volume_claim_update(old: &Value, new: &Value, causes: &mut Causes) {
    let mut before = old["spec"].clone();
    let mut after = new["spec"].clone();
    // A claim is bound to a volume once.
    if str_of(&before, "volumeName").is_empty() {
        set(&mut before, "volumeName", after.get("volumeName").cloned());
    }
    let annotation = |o: &Value| {
        o["metadata"]["annotations"][BETA_CLASS]
            .as_str()
            .map(str::to_string)
    };
    let (old_class_annotation, new_class_annotation) = (annotation(old), annotation(new));
    let upgraded = old_class_annotation.as_ref().is_some_and(|class| {
        before["storageClassName"].is_null()
            && after["storageClassName"].as_str() == Some(class)
            && new_class_annotation.as_ref().is_none_or(|n| n == class)
    });
    if upgraded {
        set(&mut after, "storageClassName", None);
    } else {
        let (was, is) = (
            old_class_annotation.unwrap_or_default(),
            new_class_annotation.unwrap_or_default(),
        );
        if was != is {
            causes.push((
                format!("metadata.annotations.{BETA_CLASS}"),
                format!("Invalid value: {}: field is immutable", go_quote(&is)),
            ));
        }
        // A claim without a class may be given one (a default class chosen later).
        let from_nil = old["metadata"]["annotations"][BETA_CLASS].is_null()
            && before["storageClassName"].is_null()
            && after["storageClassName"].as_str().is_some_and(|c| !c.is_empty());
        if from_nil {
            set(&mut after, "storageClassName", None);
        }
    }
    // A bound claim may ask for more storage.
    let bound = new["status"]["phase"].as_str() == Some("Bound");
    if bound && after["resources"]["requests"].is_object() {
        after["resources"]["requests"]["storage"] = old["spec"]["resources"]["requests"]["storage"].clone();
        if after["resources"]["requests"]["storage"].is_null() {
            if let Some(requests) = after["resources"]["requests"].as_object_mut() {
                requests.remove("storage");
            }
        }
    }
    set(
        &mut after,
        "volumeAttributesClassName",
        before.get("volumeAttributesClassName").cloned(),
    );
    if before != after {
        causes.push((
            "spec".to_string(),
            with_diff(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                &before,
                &after,
            ),
        ));
    }
    let requested = |o: &Value| storage(&o["spec"]["resources"]["requests"]["storage"]);
    let (old_size, new_size) = (requested(old), requested(new));
    if new_size < old_size && new_size <= storage(&old["status"]["capacity"]["storage"]) {
        causes.push((
            "spec.resources.requests.storage".to_string(),
            "Forbidden: field can not be less than status.capacity".to_string(),
        ));
    }
    volume_mode(old, new, causes);
    attributes_class(old, new, causes);
}

/// Sets (or, with `None`, removes) `field` of the object `v`.
fn set(v: &mut Value, field: &str, value: Option<Value>) {
    if let Some(o) = v.as_object_mut() {
        match value.filter(|v| !v.is_null()) {
            Some(value) => o.insert(field.to_string(), value),
            None => o.remove(field),
        };
    }
}
