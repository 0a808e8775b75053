//! `DefaultStorageClass`: a new PersistentVolumeClaim that names no class (no
//! `storageClassName`, not even `""`, and no beta class annotation) gets the default
//! StorageClass — the one annotated `storageclass.kubernetes.io/is-default-class: "true"` (or
//! its beta spelling); with several, the newest, then the first by name, as kube-apiserver 1.35
//! picks it. Without a default the claim is left as it is.
//!
//! The classes are read linearizably, so a default made through any replica applies to the
//! next claim on every replica.

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::{Attributes, Mutating, Operation};
use crate::machinery::errors::ApiResult;
use crate::machinery::meta::meta_str;
use crate::store::{keys, Store};

/// The plugin.
pub struct DefaultStorageClass;

/// The annotations that make a class the default (GA and beta).
const DEFAULT_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];

/// The beta annotation that names a claim's class.
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

impl Mutating for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn admit<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a mut Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let claim = (attrs.group, attrs.resource) == ("", "persistentvolumeclaims");
            if !claim || attrs.operation != Operation::Create || attrs.subresource.is_some() {
                return Ok(());
            }
            if has_class(obj) {
                return Ok(());
            }
            let (classes, _) = store
                .list(&keys::type_prefix("storage.k8s.io", "storageclasses"), true)
                .await?;
            let classes: Vec<Value> = classes.into_iter().map(|s| s.obj).collect();
            if let (Some(name), Some(spec)) = (default_class(&classes), obj.get_mut("spec")) {
                spec["storageClassName"] = json!(name);
            }
            Ok(())
        })
    }
}

/// Whether the claim names a class already (`""` included: no class at all).
fn has_class(claim: &Value) -> bool {
    claim
        .pointer("/spec/storageClassName")
        .is_some_and(|c| !c.is_null())
        || claim
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(BETA_CLASS_ANNOTATION))
            .is_some()
}

/// The default class's name: the newest of the classes marked default, then the first by name.
fn default_class(classes: &[Value]) -> Option<&str> {
    classes
        .iter()
        .filter(|c| {
            let annotations = c.pointer("/metadata/annotations");
            DEFAULT_ANNOTATIONS
                .iter()
                .any(|k| annotations.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"))
        })
        .filter_map(|c| {
            let created = meta_str(c, "creationTimestamp").unwrap_or_default();
            Some((created, meta_str(c, "name")?))
        })
        // RFC 3339 timestamps of one form order as text.
        .max_by(|(ta, na), (tb, nb)| ta.cmp(tb).then(nb.cmp(na)))
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: Option<(&str, &str)>) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}});
        if let Some((k, v)) = default {
            c["metadata"]["annotations"] = json!({k: v});
        }
        c
    }

    #[test]
    fn the_newest_default_class_wins_then_the_first_by_name() {
        let ga = Some((DEFAULT_ANNOTATIONS[0], "true"));
        let classes = [
            class("old", "2026-01-01T00:00:00Z", ga),
            class("plain", "2026-03-01T00:00:00Z", None),
            class(
                "off",
                "2026-03-01T00:00:00Z",
                Some((DEFAULT_ANNOTATIONS[0], "false")),
            ),
            class("zeta", "2026-02-01T00:00:00Z", ga),
            class(
                "beta",
                "2026-02-01T00:00:00Z",
                Some((DEFAULT_ANNOTATIONS[1], "true")),
            ),
        ];
        assert_eq!(default_class(&classes), Some("beta"));
        assert_eq!(default_class(&classes[..2]), Some("old"));
        assert_eq!(default_class(&classes[1..3]), None);
    }

    #[test]
    fn a_claim_that_names_a_class_keeps_it() {
        assert!(has_class(&json!({"spec": {"storageClassName": ""}})));
        assert!(has_class(
            &json!({"metadata": {"annotations": {BETA_CLASS_ANNOTATION: "x"}}, "spec": {}})
        ));
        assert!(!has_class(&json!({"spec": {"storageClassName": null}})));
    }
}
