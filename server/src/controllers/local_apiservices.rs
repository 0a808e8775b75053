//! The local APIServices: kube-apiserver registers one APIService per group-version it serves
//! itself (`v1.` for the core group, `v1.apps`, one per custom resource group-version), with no
//! `service` and the `Available` condition `True` (reason `Local`), as kube-aggregator's
//! autoregister and CRD registration controllers keep them. They follow the served types: a
//! definition's group-version appears when it is served and goes when it no longer is; one
//! deleted by hand comes back. APIServices with a `service` (aggregated APIs) are not
//! touched here: their condition is the availability check's.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::aggregator::priorities;
use crate::machinery::errors::ApiResult;
use crate::machinery::field_validation::Decoded;
use crate::machinery::timestamp::now_rfc3339;
use crate::registry::delete::{self, DeleteOptions};
use crate::registry::options::WriteOptions;
use crate::registry::{create, update, ResourceRequest};
use crate::scheme::{LiveRegistry, Registry};
use crate::store::{keys, Store};

/// The group of APIServices.
pub const GROUP: &str = "apiregistration.k8s.io";
/// Their resource.
pub const PLURAL: &str = "apiservices";
/// The label kube-aggregator marks the APIServices it manages with: `onstart` for the
/// built-in group-versions, `true` for those of custom resources.
const AUTOMANAGED: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Whose writes these are.
const FIELD_MANAGER: &str = "kube-apiserver";

/// The name of the APIService of `group`/`version`: `<version>.<group>`.
pub fn name_of(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The local APIServices the served types call for, by name.
fn desired(registry: &Registry) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for t in registry.all() {
        let name = name_of(&t.group, &t.version);
        if out.contains_key(&name) {
            continue;
        }
        let ((group_priority, version_priority), managed) = match priorities::builtin(&t.group, &t.version) {
            Some(p) if t.custom.is_none() => (p, "onstart"),
            _ => (priorities::CUSTOM, "true"),
        };
        out.insert(
            name.clone(),
            json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": name, "labels": {AUTOMANAGED: managed}},
                "spec": {"group": &*t.group, "version": &*t.version,
                         "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
            }),
        );
    }
    out
}

/// The status of a local APIService: always available.
fn local_status() -> Value {
    json!({"conditions": [{
        "type": "Available",
        "status": "True",
        "lastTransitionTime": now_rfc3339(),
        "reason": "Local",
        "message": "Local APIServices are always available",
    }]})
}

/// Whether the APIService's `Available` condition already says `Local`.
fn says_local(obj: &Value) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Available" && c["status"] == "True" && c["reason"] == "Local")
    })
}

fn request(registry: &Registry, name: Option<&str>, subresource: Option<&str>) -> ApiResult<ResourceRequest> {
    let mut req = super::request(registry, (GROUP, PLURAL), None, name)?;
    req.subresource = subresource.map(str::to_string);
    Ok(req)
}

/// One pass: creates the missing local APIServices, marks them available, deletes those of
/// group-versions no longer served.
async fn reconcile(store: &Store, registry: &Registry) -> ApiResult<()> {
    let opts = WriteOptions::by(FIELD_MANAGER);
    let current: BTreeMap<String, Value> = super::stored_by_name(store, GROUP, PLURAL)?;
    let desired = desired(registry);
    for (name, object) in &desired {
        let mut existing = current.get(name).cloned();
        if existing.is_none() {
            let body = Decoded {
                value: object.clone(),
                duplicates: Vec::new(),
            };
            let created = create::create(store, &request(registry, None, None)?, &opts, body).await;
            match created {
                Ok(reply) => existing = Some(reply.body),
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
        let Some(mut existing) = existing else { continue };
        if existing["spec"]["service"].is_object() || says_local(&existing) {
            continue;
        }
        existing["status"] = local_status();
        let body = Decoded {
            value: existing,
            duplicates: Vec::new(),
        };
        let req = request(registry, Some(name), Some("status"))?;
        super::settled(update::update(store, &req, &opts, body).await.map(drop))?;
    }
    for (name, object) in &current {
        let automanaged = object["metadata"]["labels"][AUTOMANAGED].as_str().is_some();
        let local = !object["spec"]["service"].is_object();
        if automanaged && local && !desired.contains_key(name) {
            let req = request(registry, Some(name), None)?;
            super::settled(
                delete::delete(store, &req, &DeleteOptions::default())
                    .await
                    .map(drop),
            )?;
        }
    }
    Ok(())
}

/// Whether a cache key is an APIService or a definition (whose versions are served types).
fn relevant(key: &str) -> bool {
    key.starts_with(&keys::type_prefix(GROUP, PLURAL))
        || key.starts_with(&keys::type_prefix(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ))
}

/// Runs the controller while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>) {
    super::run_while_leader(store, "local-apiservices", move |store| {
        let live = live.clone();
        async move {
            super::run_passes(&store, "local-apiservices", relevant, || {
                let (store, live) = (&store, &live);
                async move { reconcile(store, &live.current()).await }
            })
            .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_group_version_has_a_local_apiservice_with_kubes_priorities() {
        let d = desired(&Registry::new());
        assert_eq!(d["v1."]["spec"]["groupPriorityMinimum"], 18000);
        assert_eq!(d["v1."]["spec"]["group"], "");
        assert_eq!(d["v2.autoscaling"]["spec"]["versionPriority"], 30);
        assert_eq!(d["v1.apps"]["metadata"]["labels"][AUTOMANAGED], "onstart");
        assert!(d.contains_key("v1.authentication.k8s.io"));
        assert!(d.contains_key("v1.apiregistration.k8s.io"));
        let groups: std::collections::BTreeSet<_> = Registry::new()
            .all()
            .map(|t| name_of(&t.group, &t.version))
            .collect();
        assert_eq!(
            d.keys().cloned().collect::<std::collections::BTreeSet<_>>(),
            groups
        );
        for (_, v) in d {
            let (g, ver) = (v["spec"]["group"].as_str(), v["spec"]["version"].as_str());
            assert!(priorities::builtin(g.unwrap_or_default(), ver.unwrap_or_default()).is_some());
        }
    }
}
