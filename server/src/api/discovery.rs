//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`
//! and `/version`, generated from the registry.

use serde_json::{json, Value};

use super::registry::Registry;

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
        if t.has_status {
            resources.push(json!({
                "name": format!("{}/status", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if t.has_scale {
            resources.push(json!({
                "name": format!("{}/scale", t.plural),
                "singularName": "",
                "namespaced": t.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}
