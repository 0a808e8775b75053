//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`
//! and `/version`, generated from the registry.

use serde_json::{json, Value};

use crate::scheme::Registry;

/// The Kubernetes version kuberaft's API and types follow.
pub const KUBE_VERSION: (&str, &str) = ("1", "35");

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": KUBE_VERSION.0,
        "minor": KUBE_VERSION.1,
        "gitVersion": format!("v{}.{}.0-kuberaft.{}", KUBE_VERSION.0, KUBE_VERSION.1, env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry.groups().iter().map(|(g, vs)| group_doc(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, if the group exists.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    registry
        .groups()
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, vs)| {
            let mut doc = group_doc(g, &vs);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

/// `/api/v1` or `/apis/{group}/{version}`: every resource and subresource of the version.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for t in registry.in_group_version(group, version) {
        let mut r = json!({
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": t.verbs(),
        });
        if !t.short_names.is_empty() {
            r["shortNames"] = json!(t.short_names);
        }
        if !t.categories.is_empty() {
            r["categories"] = json!(t.categories);
        }
        resources.push(r);
        for sub in t.subresources() {
            let mut r = json!({
                "name": format!("{}/{}", t.plural, sub.name),
                "singularName": "",
                "namespaced": t.namespaced,
            });
            let (group, version, kind) = sub.kind;
            if (group, version) != (&*t.group, &*t.version) {
                r["group"] = json!(group);
                r["version"] = json!(version);
            }
            r["kind"] = json!(kind);
            r["verbs"] = json!(sub.verbs);
            resources.push(r);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

/// The `Content-Type` of an aggregated discovery document of `version` (`v2` or `v2beta1`):
/// client-go tells the aggregated form from the legacy one by it.
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

fn response_kind(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// One version of a group in the aggregated form: its resources with their subresources.
fn aggregated_version(registry: &Registry, group: &str, version: &str) -> Value {
    let mut types: Vec<_> = registry.in_group_version(group, version).collect();
    types.sort_by(|a, b| a.plural.cmp(&b.plural));
    let resources: Vec<Value> = types
        .into_iter()
        .map(|t| {
            let subresources: Vec<Value> = t
                .subresources()
                .iter()
                .map(|sub| {
                    let (group, version, kind) = sub.kind;
                    json!({
                        "subresource": sub.name,
                        "responseKind": response_kind(group, version, kind),
                        "verbs": sub.verbs,
                    })
                })
                .collect();
            let mut r = json!({
                "resource": t.plural,
                "responseKind": response_kind(&t.group, &t.version, &t.kind),
                "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": t.singular,
                "verbs": t.verbs(),
            });
            if !t.short_names.is_empty() {
                r["shortNames"] = json!(t.short_names);
            }
            if !t.categories.is_empty() {
                r["categories"] = json!(t.categories);
            }
            if !subresources.is_empty() {
                r["subresources"] = json!(subresources);
            }
            r
        })
        .collect();
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList` of `version` (`v2` or `v2beta1`):
/// every group, version and resource in one document, which is what kubectl asks for first.
pub fn aggregated(registry: &Registry, core: bool, version: &str) -> Value {
    let groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        registry.groups()
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(group, versions)| {
            let mut metadata = json!({"creationTimestamp": null});
            if !group.is_empty() {
                metadata["name"] = json!(group);
            }
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|v| aggregated_version(registry, group, v))
                .collect();
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_lists_every_served_resource_once() {
        let r = Registry::new();
        let core = aggregated(&r, true, "v2");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        let core_items = core["items"].as_array().expect("items");
        assert_eq!(core_items.len(), 1);
        assert!(core_items[0]["metadata"].get("name").is_none());
        let v1 = &core_items[0]["versions"][0];
        let pods = v1["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["resource"] == "pods"))
            .expect("pods");
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["singularResource"], "pod");
        assert_eq!(pods["shortNames"], json!(["po"]));
        let subresources: Vec<&Value> = pods["subresources"]
            .as_array()
            .expect("subresources")
            .iter()
            .map(|s| &s["subresource"])
            .collect();
        assert_eq!(
            subresources,
            ["binding", "ephemeralcontainers", "eviction", "status"]
        );

        let groups = aggregated(&r, false, "v2beta1");
        let items = groups["items"].as_array().expect("items");
        assert_eq!(items.len(), r.groups().len());
        let apps = items
            .iter()
            .find(|g| g["metadata"]["name"] == "apps")
            .expect("apps");
        let deployments = apps["versions"][0]["resources"]
            .as_array()
            .and_then(|rs| rs.iter().find(|r| r["resource"] == "deployments"))
            .expect("deployments");
        assert_eq!(
            deployments["subresources"][0],
            json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]})
        );
        let served: usize = items
            .iter()
            .chain(core_items)
            .flat_map(|g| g["versions"].as_array().into_iter().flatten())
            .map(|v| v["resources"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(served, r.all().count());
    }
}
