//! The aggregation layer (kube-aggregator): an APIService with a `service` hands its
//! group-version to another API server. This module finds the APIService a request's
//! group-version belongs to ([`backend_of`]), proxies the request to it with the caller's
//! identity in kube's front-proxy headers ([`proxy`]), checks whether it is available
//! ([`availability`]) and keeps what it serves for discovery ([`discovery`]).
//!
//! Everything is read from the replica's watch cache, so every replica proxies the same way
//! without asking the leader.

pub mod availability;
pub mod discovery;
pub mod priorities;
pub mod proxy;

use serde_json::Value;

use crate::store::cacher::WatchCache;
use crate::store::keys;

/// The group of APIServices.
pub const GROUP: &str = "apiregistration.k8s.io";
/// Their resource.
pub const PLURAL: &str = "apiservices";

/// An APIService that hands its group-version to a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backend {
    /// The APIService's name (`<version>.<group>`).
    pub name: String,
    /// Its resourceVersion (a client is kept per version of the APIService).
    pub resource_version: String,
    /// The group it serves.
    pub group: String,
    /// The version it serves.
    pub version: String,
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// The Service's port.
    pub port: i64,
    /// PEM CA bundle that verifies the backend's serving certificate.
    pub ca_bundle: Vec<u8>,
    /// Skip the verification (`insecureSkipTLSVerify`).
    pub insecure: bool,
    /// Its `Available` condition is `True`.
    pub available: bool,
    /// `groupPriorityMinimum`.
    pub group_priority: i64,
    /// `versionPriority`.
    pub version_priority: i64,
}

impl Backend {
    /// The backend an APIService object names, if it names a Service.
    pub fn of(obj: &Value) -> Option<Backend> {
        use base64::Engine;
        let spec = &obj["spec"];
        let service = spec["service"].as_object()?;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        Some(Backend {
            name: text(&obj["metadata"]["name"]),
            resource_version: text(&obj["metadata"]["resourceVersion"]),
            group: text(&spec["group"]),
            version: text(&spec["version"]),
            namespace: service.get("namespace").map(text).unwrap_or_default(),
            service: service.get("name").map(text).unwrap_or_default(),
            port: service.get("port").and_then(Value::as_i64).unwrap_or(443),
            ca_bundle: spec["caBundle"]
                .as_str()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .unwrap_or_default(),
            insecure: spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false),
            available: conditions(obj).any(|c| c["type"] == "Available" && c["status"] == "True"),
            group_priority: spec["groupPriorityMinimum"].as_i64().unwrap_or(0),
            version_priority: spec["versionPriority"].as_i64().unwrap_or(0),
        })
    }

    /// The host name the backend's certificate must name: `<service>.<namespace>.svc`.
    pub fn host(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }
}

fn conditions(obj: &Value) -> impl Iterator<Item = &Value> {
    obj["status"]["conditions"].as_array().into_iter().flatten()
}

/// The backend of `group`/`version`, if an APIService hands it to a Service.
pub fn backend_of(cache: &WatchCache, group: &str, version: &str) -> Option<Backend> {
    let key = keys::object(GROUP, PLURAL, None, &format!("{version}.{group}"));
    let obj = cache.get(&key).ok().flatten()?.value();
    Backend::of(&obj)
}

/// Every APIService with a Service, in the cache now.
pub fn backends(cache: &WatchCache) -> Vec<Backend> {
    cache
        .list(&keys::type_prefix(GROUP, PLURAL), None, None)
        .map(|s| s.objects)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(_, o)| Backend::of(&o.value()))
        .collect()
}

/// The group and version a path under `/apis/<group>/<version>` names (`None` for any other
/// path, and for `/apis/<group>` alone).
pub fn group_version_of(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/apis/")?;
    let mut parts = rest.splitn(3, '/');
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some((group, version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_path_names_its_group_version() {
        assert_eq!(
            group_version_of("/apis/metrics.example.com/v1beta1/widgets"),
            Some(("metrics.example.com", "v1beta1"))
        );
        assert_eq!(
            group_version_of("/apis/metrics.example.com/v1beta1"),
            Some(("metrics.example.com", "v1beta1"))
        );
        assert_eq!(group_version_of("/apis/metrics.example.com"), None);
        assert_eq!(group_version_of("/api/v1/pods"), None);
    }

    #[test]
    fn only_an_apiservice_with_a_service_has_a_backend() {
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps", "version": "v1"}});
        assert_eq!(Backend::of(&local), None);
        let remote = json!({"metadata": {"name": "v1.m.io"},
            "spec": {"group": "m.io", "version": "v1", "service": {"namespace": "ns", "name": "s"}, "caBundle": "YWJj"},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        let b = Backend::of(&remote).expect("a backend");
        assert_eq!(
            (b.port, b.ca_bundle.as_slice(), b.available),
            (443, &b"abc"[..], true)
        );
        assert_eq!(b.host(), "s.ns.svc");
    }
}
