//! Discovery documents: `/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`,
//! their aggregated form and `/version`, generated from the registry.
//!
//! Each document is a typed struct whose fields are declared in the order of kube-apiserver's
//! Go structs (`metav1.APIResourceList`, `apidiscovery/v2.APIGroupDiscoveryList`,
//! `version.Info`, ...), with the same omitted-when-empty fields, so that its JSON has kube's
//! bytes; a `serde_json::Value` would sort the keys.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::aggregator::discovery::Served;
use crate::aggregator::priorities;
use crate::aggregator::Backend;
use crate::machinery::version::version_priority;
use crate::scheme::{Registry, ResourceType};

/// The Kubernetes version kuberaft's API and types follow.
pub const KUBE_VERSION: (&str, &str) = ("1", "35");

/// `/version` (`version.Info`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    major: &'static str,
    minor: &'static str,
    emulation_major: &'static str,
    emulation_minor: &'static str,
    min_compatibility_major: &'static str,
    min_compatibility_minor: String,
    git_version: String,
    git_commit: &'static str,
    git_tree_state: &'static str,
    build_date: &'static str,
    go_version: &'static str,
    compiler: &'static str,
    platform: String,
}

/// `/version`: kuberaft emulates the Kubernetes version it follows and, as kube-apiserver
/// does by default, stays compatible with the minor version before it.
pub fn version() -> VersionInfo {
    let (major, minor) = KUBE_VERSION;
    let previous = minor
        .parse::<u32>()
        .map_or_else(|_| minor.to_string(), |m| m.saturating_sub(1).to_string());
    let arch = if std::env::consts::ARCH == "x86_64" {
        "amd64"
    } else {
        std::env::consts::ARCH
    };
    VersionInfo {
        major,
        minor,
        emulation_major: major,
        emulation_minor: minor,
        min_compatibility_major: major,
        min_compatibility_minor: previous,
        git_version: format!("v{major}.{minor}.0-kuberaft.{}", env!("CARGO_PKG_VERSION")),
        git_commit: "",
        git_tree_state: "clean",
        build_date: "",
        go_version: "",
        compiler: "rustc",
        platform: format!("{}/{arch}", std::env::consts::OS),
    }
}

/// A discovery document, whichever one was asked for (serialized as the document itself).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Document {
    /// `/api`.
    Versions(ApiVersions),
    /// `/apis`.
    Groups(ApiGroupList),
    /// `/apis/{group}`.
    Group(ApiGroup),
    /// `/api/v1`, `/apis/{group}/{version}`.
    Resources(ApiResourceList),
    /// `/api` or `/apis` in the aggregated form.
    Aggregated(GroupDiscoveryList),
}

/// `metav1.APIVersions`. kube-apiserver strips `apiVersion` from the documents of the core
/// group (`/api`, `/api/v1`), as release 1.1 answered them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiVersions {
    kind: &'static str,
    versions: Vec<&'static str>,
    #[serde(rename = "serverAddressByClientCIDRs")]
    server_address_by_client_cidrs: Vec<ServerAddress>,
}

/// `metav1.ServerAddressByClientCIDR`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ServerAddress {
    #[serde(rename = "clientCIDR")]
    client_cidr: &'static str,
    server_address: String,
}

/// `metav1.APIGroupList`.
#[derive(Debug, Serialize)]
pub struct ApiGroupList {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    groups: Vec<ApiGroup>,
}

/// `metav1.APIGroup`; inside a list it has no type fields.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiGroup {
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_version: Option<&'static str>,
    name: String,
    versions: Vec<GroupVersion>,
    preferred_version: GroupVersion,
}

/// `metav1.GroupVersionForDiscovery`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupVersion {
    group_version: String,
    version: String,
}

/// `metav1.APIResourceList`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceList {
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_version: Option<&'static str>,
    group_version: String,
    resources: Vec<ApiResource>,
}

/// `metav1.APIResource`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ApiResource {
    name: String,
    singular_name: String,
    namespaced: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    version: String,
    kind: String,
    verbs: Vec<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    short_names: Vec<String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    categories: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    storage_version_hash: Option<String>,
}

/// `/api`.
pub fn core_versions(server_address: &str) -> ApiVersions {
    ApiVersions {
        kind: "APIVersions",
        versions: vec!["v1"],
        server_address_by_client_cidrs: vec![ServerAddress {
            client_cidr: "0.0.0.0/0",
            server_address: server_address.to_string(),
        }],
    }
}

fn group_doc(group: &str, versions: &[&str], typed: bool) -> ApiGroup {
    let vs: Vec<GroupVersion> = versions
        .iter()
        .map(|v| GroupVersion {
            group_version: format!("{group}/{v}"),
            version: v.to_string(),
        })
        .collect();
    ApiGroup {
        kind: typed.then_some("APIGroup"),
        api_version: typed.then_some("v1"),
        name: group.to_string(),
        preferred_version: vs.first().cloned().unwrap_or(GroupVersion {
            group_version: String::new(),
            version: String::new(),
        }),
        versions: vs,
    }
}

/// How kube orders the groups of a discovery document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupOrder {
    /// The legacy `APIGroupList` (kube-aggregator's `SortedByGroupAndVersion`): APIServices by
    /// `groupPriorityMinimum`, highest first, then by APIService name; a group where its first
    /// APIService falls.
    ByApiService,
    /// The aggregated document (the discovery manager): groups by their highest
    /// `groupPriorityMinimum`, then by group name.
    ByGroup,
}

/// A group-version listed under `/apis`, with the priorities of its APIService.
struct Listed<'a> {
    group: &'a str,
    version: &'a str,
    group_priority: i64,
    version_priority: i64,
}

/// The named groups with their versions in kube's order: the served group-versions (with
/// kube-apiserver's priorities, `aggregator::priorities`) and the aggregated ones no served
/// group-version shadows (with their APIService's), so a group can have versions served here
/// and versions served by a backend, as kube-aggregator has an APIService per group-version;
/// within a group, versions by `versionPriority`, highest first, then in Kubernetes' version
/// order.
fn all_groups<'a>(
    registry: &'a Registry,
    remote: &[&'a Backend],
    order: GroupOrder,
) -> Vec<(&'a str, Vec<&'a str>)> {
    let local = registry.groups();
    let mut listed: Vec<Listed<'a>> = Vec::new();
    for (group, versions) in &local {
        for version in versions {
            let (group_priority, version_priority) =
                priorities::builtin(group, version).unwrap_or(priorities::CUSTOM);
            listed.push(Listed {
                group,
                version,
                group_priority,
                version_priority,
            });
        }
    }
    for b in remote {
        if local
            .iter()
            .any(|(g, vs)| *g == b.group && vs.contains(&b.version.as_str()))
        {
            continue;
        }
        listed.push(Listed {
            group: &b.group,
            version: &b.version,
            group_priority: b.group_priority,
            version_priority: b.version_priority,
        });
    }
    match order {
        GroupOrder::ByApiService => listed.sort_by(|a, b| {
            b.group_priority
                .cmp(&a.group_priority)
                .then_with(|| format!("{}.{}", a.version, a.group).cmp(&format!("{}.{}", b.version, b.group)))
        }),
        GroupOrder::ByGroup => {
            let mut highest: BTreeMap<&str, i64> = BTreeMap::new();
            for l in &listed {
                let h = highest.entry(l.group).or_insert(l.group_priority);
                *h = (*h).max(l.group_priority);
            }
            let of = |group: &str| highest.get(group).copied().unwrap_or_default();
            listed.sort_by(|a, b| of(b.group).cmp(&of(a.group)).then_with(|| a.group.cmp(b.group)));
        }
    }
    let mut out: Vec<(&'a str, Vec<Listed<'a>>)> = Vec::new();
    for l in listed {
        match out.iter_mut().find(|(g, _)| *g == l.group) {
            Some((_, versions)) => versions.push(l),
            None => out.push((l.group, vec![l])),
        }
    }
    out.into_iter()
        .map(|(group, mut versions)| {
            versions.sort_by(|a, b| {
                b.version_priority
                    .cmp(&a.version_priority)
                    .then_with(|| version_priority(a.version).cmp(&version_priority(b.version)))
            });
            (group, versions.into_iter().map(|l| l.version).collect())
        })
        .collect()
}

/// `/apis`: the served groups and every aggregated one (`remote`: all APIServices with a
/// Service, available or not, as kube-aggregator's legacy group list names them).
pub fn groups(registry: &Registry, remote: &[Backend]) -> ApiGroupList {
    let remote: Vec<&Backend> = remote.iter().collect();
    ApiGroupList {
        kind: "APIGroupList",
        api_version: "v1",
        groups: all_groups(registry, &remote, GroupOrder::ByApiService)
            .iter()
            .map(|(g, vs)| group_doc(g, vs, false))
            .collect(),
    }
}

/// `/apis/{group}` of a group served here, if it is: its versions and the available aggregated
/// versions of the group (`remote`), in priority order, the first preferred.
pub fn group(registry: &Registry, remote: &[Served], name: &str) -> Option<ApiGroup> {
    if !registry.groups().iter().any(|(g, _)| *g == name) {
        return None;
    }
    let backends: Vec<&Backend> = remote.iter().map(|s| &s.backend).collect();
    all_groups(registry, &backends, GroupOrder::ByGroup)
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, vs)| group_doc(g, &vs, true))
}

/// `/apis/{group}` of an aggregated group: its available versions in priority order (the
/// first preferred), as kube-aggregator's group handler answers it; `None` when no available
/// APIService serves the group.
pub fn remote_group(remote: &[Served], name: &str) -> Option<ApiGroup> {
    let versions: Vec<&str> = remote
        .iter()
        .filter(|s| s.backend.group == name)
        .map(|s| s.backend.version.as_str())
        .collect();
    (!versions.is_empty()).then(|| group_doc(name, &versions, true))
}

/// One type's entry: the resource itself, with its storage version's hash.
fn api_resource(t: &ResourceType) -> ApiResource {
    ApiResource {
        name: t.plural.to_string(),
        singular_name: t.singular.clone(),
        namespaced: t.namespaced,
        group: String::new(),
        version: String::new(),
        kind: t.kind.to_string(),
        verbs: t.verbs().to_vec(),
        short_names: t.short_names.to_vec(),
        categories: t.categories.to_vec(),
        storage_version_hash: t.storage_version_hash(),
    }
}

/// `/api/v1` or `/apis/{group}/{version}`: every resource and subresource of the version.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> ApiResourceList {
    let mut resources = Vec::new();
    for t in registry.in_group_version(group, version) {
        resources.push(api_resource(t));
        for sub in t.subresources() {
            let (sub_group, sub_version, kind) = sub.kind;
            let foreign = (sub_group, sub_version) != (&*t.group, &*t.version);
            resources.push(ApiResource {
                name: format!("{}/{}", t.plural, sub.name),
                singular_name: String::new(),
                namespaced: t.namespaced,
                group: if foreign {
                    sub_group.to_string()
                } else {
                    String::new()
                },
                version: if foreign {
                    sub_version.to_string()
                } else {
                    String::new()
                },
                kind: kind.to_string(),
                verbs: sub.verbs.to_vec(),
                short_names: Vec::new(),
                categories: Vec::new(),
                storage_version_hash: None,
            });
        }
    }
    ApiResourceList {
        kind: "APIResourceList",
        api_version: (!group.is_empty()).then_some("v1"),
        group_version: if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        },
        resources,
    }
}

/// The `Content-Type` of an aggregated discovery document of `version` (`v2` or `v2beta1`) in
/// `media_type` (JSON or protobuf):
/// client-go tells the aggregated form from the legacy one by it.
pub fn aggregated_content_type(media_type: &str, version: &str) -> String {
    format!("{media_type};g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

/// `apidiscovery.APIGroupDiscoveryList`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupDiscoveryList {
    kind: &'static str,
    api_version: String,
    metadata: Empty,
    items: Vec<GroupDiscovery>,
}

/// An empty `ListMeta`.
#[derive(Debug, Serialize)]
struct Empty {}

/// `apidiscovery.APIGroupDiscovery`.
#[derive(Debug, Serialize)]
struct GroupDiscovery {
    metadata: GroupMeta,
    versions: Vec<VersionDiscovery>,
}

/// The `ObjectMeta` of a group's discovery: only its name (none for the core group), and
/// the creation timestamp Go's encoder never omits.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupMeta {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: String,
    creation_timestamp: Option<()>,
}

/// `apidiscovery.APIVersionDiscovery`.
#[derive(Debug, Serialize)]
struct VersionDiscovery {
    version: String,
    resources: Vec<ResourceDiscovery>,
    freshness: &'static str,
}

/// `apidiscovery.APIResourceDiscovery`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceDiscovery {
    resource: String,
    response_kind: Gvk,
    scope: &'static str,
    singular_resource: String,
    verbs: Vec<String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    short_names: Vec<String>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    categories: Vec<String>,
    #[serde(skip_serializing_if = "<[SubresourceDiscovery]>::is_empty")]
    subresources: Vec<SubresourceDiscovery>,
}

/// `apidiscovery.APISubresourceDiscovery`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SubresourceDiscovery {
    subresource: String,
    response_kind: Gvk,
    verbs: Vec<String>,
}

/// `metav1.GroupVersionKind`.
#[derive(Debug, Serialize)]
struct Gvk {
    group: String,
    version: String,
    kind: String,
}

fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
    }
}

/// One version of a group in the aggregated form: its resources with their subresources.
fn aggregated_version(registry: &Registry, group: &str, version: &str) -> VersionDiscovery {
    let mut types: Vec<_> = registry.in_group_version(group, version).collect();
    types.sort_by(|a, b| a.plural.cmp(&b.plural));
    let resources = types
        .into_iter()
        .map(|t| ResourceDiscovery {
            resource: t.plural.to_string(),
            response_kind: gvk(&t.group, &t.version, &t.kind),
            scope: if t.namespaced { "Namespaced" } else { "Cluster" },
            singular_resource: t.singular.clone(),
            verbs: t.verbs().iter().map(|v| v.to_string()).collect(),
            short_names: t.short_names.to_vec(),
            categories: t.categories.to_vec(),
            subresources: t
                .subresources()
                .iter()
                .map(|sub| {
                    let (group, version, kind) = sub.kind;
                    SubresourceDiscovery {
                        subresource: sub.name.to_string(),
                        response_kind: gvk(group, version, kind),
                        verbs: sub.verbs.iter().map(|v| v.to_string()).collect(),
                    }
                })
                .collect(),
        })
        .collect();
    VersionDiscovery {
        version: version.to_string(),
        resources,
        freshness: "Current",
    }
}

/// Strings of a JSON list (none when it is not one).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// An aggregated group-version's `APIResourceList` in the aggregated form, as kube's
/// discovery manager converts a backend's legacy document.
fn remote_version(served: &Served) -> VersionDiscovery {
    let (group, version) = (&served.backend.group, &served.backend.version);
    let list: &[Value] = served.resources["resources"]
        .as_array()
        .map_or(&[], Vec::as_slice);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let kind_of = |r: &Value| {
        let or = |field: &str, default: &str| match r[field].as_str() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => default.to_string(),
        };
        gvk(&or("group", group), &or("version", version), &text(&r["kind"]))
    };
    let mut resources: Vec<ResourceDiscovery> = list
        .iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| !n.contains('/')))
        .map(|r| {
            let name = text(&r["name"]);
            let prefix = format!("{name}/");
            ResourceDiscovery {
                response_kind: kind_of(r),
                scope: if r["namespaced"].as_bool().unwrap_or(false) {
                    "Namespaced"
                } else {
                    "Cluster"
                },
                singular_resource: text(&r["singularName"]),
                verbs: strings(&r["verbs"]),
                short_names: strings(&r["shortNames"]),
                categories: strings(&r["categories"]),
                subresources: list
                    .iter()
                    .filter_map(|sub| {
                        let sub_name = sub["name"].as_str()?.strip_prefix(&prefix)?;
                        Some(SubresourceDiscovery {
                            subresource: sub_name.to_string(),
                            response_kind: kind_of(sub),
                            verbs: strings(&sub["verbs"]),
                        })
                    })
                    .collect(),
                resource: name,
            }
        })
        .collect();
    resources.sort_by(|a, b| a.resource.cmp(&b.resource));
    VersionDiscovery {
        version: version.clone(),
        resources,
        freshness: "Current",
    }
}

/// `/api` (`core`) or `/apis` as an `APIGroupDiscoveryList` of `version` (`v2` or `v2beta1`):
/// every group, version and resource in one document, which is what kubectl asks for first;
/// under `/apis` also the available aggregated group-versions (`remote`).
pub fn aggregated(registry: &Registry, remote: &[Served], core: bool, version: &str) -> GroupDiscoveryList {
    let backends: Vec<&Backend> = remote.iter().map(|s| &s.backend).collect();
    let groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        all_groups(registry, &backends, GroupOrder::ByGroup)
    };
    let items = groups
        .into_iter()
        .map(|(group, versions)| GroupDiscovery {
            metadata: GroupMeta {
                name: group.to_string(),
                creation_timestamp: None,
            },
            versions: versions
                .into_iter()
                .map(|v| {
                    match remote
                        .iter()
                        .find(|s| (s.backend.group.as_str(), s.backend.version.as_str()) == (group, v))
                        .filter(|_| registry.in_group_version(group, v).next().is_none())
                    {
                        Some(served) => remote_version(served),
                        None => aggregated_version(registry, group, v),
                    }
                })
                .collect(),
        })
        .collect();
    GroupDiscoveryList {
        kind: "APIGroupDiscoveryList",
        api_version: format!("apidiscovery.k8s.io/{version}"),
        metadata: Empty {},
        items,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn groups_and_versions_are_ordered_by_priority_as_kube_orders_them() {
        let remote = |group: &str, version: &str, group_priority, version_priority| Served {
            backend: crate::aggregator::Backend {
                name: format!("{version}.{group}"),
                resource_version: "1".into(),
                group: group.into(),
                version: version.into(),
                namespace: "ns".into(),
                service: "s".into(),
                port: 443,
                ca_bundle: Vec::new(),
                insecure: false,
                available: true,
                group_priority,
                version_priority,
            },
            resources: json!({"resources": []}),
            openapi_v3: None,
            openapi_v2: None,
        };
        let served = [
            remote("low.example.com", "v1", 100, 100),
            remote("top.example.com", "v1", 20000, 5),
            remote("top.example.com", "v2", 20000, 10),
            remote("top.example.com", "v1beta1", 20000, 10),
        ];
        let r = Registry::new();
        let backends: Vec<crate::aggregator::Backend> = served.iter().map(|s| s.backend.clone()).collect();
        let legacy = serde_json::to_value(groups(&r, &backends)).unwrap();
        let aggregated = serde_json::to_value(aggregated(&r, &served, false, "v2")).unwrap();
        for (doc, name, versions) in [
            (&legacy["groups"], "/name", "/versions"),
            (&aggregated["items"], "/metadata/name", "/versions"),
        ] {
            let names: Vec<&str> = doc
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g.pointer(name).and_then(Value::as_str).unwrap())
                .collect();
            assert_eq!(
                names[..4],
                [
                    "top.example.com",
                    "apiregistration.k8s.io",
                    "apps",
                    "events.k8s.io"
                ]
            );
            assert_eq!(names.last(), Some(&"low.example.com"));
            let at = |g: &str| names.iter().position(|n| *n == g).unwrap();
            assert!(at("admissionregistration.k8s.io") < at("apiextensions.k8s.io"));
            assert!(at("storage.k8s.io") < at("admissionregistration.k8s.io"));
            let top: Vec<&str> = doc[0]
                .pointer(versions)
                .and_then(Value::as_array)
                .unwrap()
                .iter()
                .map(|v| v["version"].as_str().unwrap())
                .collect();
            // versionPriority first, then Kubernetes' version order.
            assert_eq!(top, ["v2", "v1beta1", "v1"]);
        }
    }

    #[test]
    fn resource_lists_have_kube_apiservers_field_order() {
        let r = Registry::new();
        let core = serde_json::to_string(&resource_list(&r, "", "v1")).unwrap();
        assert!(
            core.starts_with(r#"{"kind":"APIResourceList","groupVersion":"v1","resources":["#),
            "{core}"
        );
        assert!(core.contains(r#"{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["cm"],"storageVersionHash":"qFsyl6wFWjQ="}"#), "{core}");
        let apps = serde_json::to_string(&resource_list(&r, "apps", "v1")).unwrap();
        assert!(apps.contains(r#"{"name":"deployments/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]}"#), "{apps}");
    }

    #[test]
    fn aggregated_discovery_lists_every_served_resource_once() {
        let r = Registry::new();
        let core = serde_json::to_value(aggregated(&r, &[], true, "v2")).unwrap();
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
        let subresources: Vec<&serde_json::Value> = pods["subresources"]
            .as_array()
            .expect("subresources")
            .iter()
            .map(|s| &s["subresource"])
            .collect();
        assert_eq!(
            subresources,
            [
                "attach",
                "binding",
                "ephemeralcontainers",
                "eviction",
                "exec",
                "log",
                "portforward",
                "proxy",
                "resize",
                "status"
            ]
        );
        let proxy = pods["subresources"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["subresource"] == "proxy"))
            .expect("pods/proxy");
        assert_eq!(
            (&proxy["responseKind"], &proxy["verbs"]),
            (
                &json!({"group": "", "version": "v1", "kind": "PodProxyOptions"}),
                &json!(["create", "delete", "get", "patch", "update"])
            )
        );
        let exec = pods["subresources"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["subresource"] == "exec"))
            .expect("pods/exec");
        assert_eq!(
            (&exec["responseKind"], &exec["verbs"]),
            (
                &json!({"group": "", "version": "v1", "kind": "PodExecOptions"}),
                &json!(["create", "get"])
            )
        );

        let groups = serde_json::to_value(aggregated(&r, &[], false, "v2beta1")).unwrap();
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
