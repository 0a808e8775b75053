//! The built-in resource types: group, version, kind, plural and scope from k8s-openapi
//! (pinned to Kubernetes 1.35), plus what no package holds — short names, categories,
//! singular names and subresources — in one table.
//!
//! Every type is served by the same generic store; a type is data here, not a code path.

pub mod create;
pub mod delete;
pub mod read;
pub mod reply;
pub mod scale;
pub mod table;
pub mod update;

use crate::store::keys;
use std::sync::{Arc, RwLock};

use k8s_openapi::{ClusterResourceScope, ListableResource, NamespaceResourceScope, Resource};

use crate::apiextensions::CustomType;
use crate::authentication::UserInfo;
use crate::authorization::Authorizer;

/// Whether a k8s-openapi scope marker is namespaced.
pub trait ScopeInfo {
    /// `true` for namespaced resources.
    const NAMESPACED: bool;
}

impl ScopeInfo for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl ScopeInfo for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

/// Everything the API machinery needs to know about one resource type.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    /// API group ("" for core).
    pub group: Arc<str>,
    /// API version.
    pub version: Arc<str>,
    /// Kind, e.g. `ConfigMap`.
    pub kind: Arc<str>,
    /// Kind of the list, e.g. `ConfigMapList`.
    pub list_kind: Arc<str>,
    /// URL path segment, e.g. `configmaps`.
    pub plural: Arc<str>,
    /// Lower-case singular name, e.g. `configmap`.
    pub singular: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Short names kubectl accepts (e.g. `cm`).
    pub short_names: Arc<[String]>,
    /// Categories (e.g. `all`).
    pub categories: Arc<[String]>,
    /// Whether the type has a `status` subresource.
    pub has_status: bool,
    /// Whether the type has a `scale` subresource.
    pub has_scale: bool,
    /// For a custom resource: what its CustomResourceDefinition declares (schema, printer
    /// columns, scale paths); `None` for built-in types.
    pub custom: Option<Arc<CustomType>>,
    /// A review (TokenReview, SubjectAccessReview, ...): only `create`, answered from the
    /// request and never stored, so it has no collection, list kind or OpenAPI list paths.
    pub review: bool,
}

impl ResourceType {
    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key prefix of every object of this type (`/registry/<group>/<plural>/`).
    pub fn key_prefix(&self) -> String {
        keys::type_prefix(&self.group, &self.plural)
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => keys::object(&self.group, &self.plural, Some(ns), name),
            _ => keys::object(&self.group, &self.plural, None, name),
        }
    }

    /// The verbs served for this type.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.review {
            return &["create"];
        }
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    /// The subresources this type serves, each with its verbs (discovery lists them; a path to
    /// any other subresource is `404`, a verb a subresource lacks is `405`).
    pub fn subresources(&self) -> Vec<Subresource<'_>> {
        let mut out = Vec::new();
        if self.has_scale {
            out.push(Subresource {
                name: "scale",
                kind: ("autoscaling", "v1", "Scale"),
                verbs: SUBRESOURCE_VERBS,
            });
        }
        if self.has_status {
            out.push(Subresource {
                name: "status",
                kind: (&self.group, &self.version, &self.kind),
                verbs: SUBRESOURCE_VERBS,
            });
        }
        if (&*self.group, &*self.plural) == ("", "serviceaccounts") {
            out.push(Subresource {
                name: "token",
                kind: ("authentication.k8s.io", "v1", "TokenRequest"),
                verbs: &["create"],
            });
        }
        out
    }

    /// The subresource called `name`, if this type serves it.
    pub fn subresource(&self, name: &str) -> Option<Subresource<'_>> {
        self.subresources().into_iter().find(|s| s.name == name)
    }

    /// Whether names of this type must be DNS-1123 labels (rather than subdomains).
    pub fn name_is_label(&self) -> bool {
        matches!(
            (&*self.group, &*self.plural),
            ("", "namespaces") | ("", "services")
        )
    }
}

/// A subresource of a type (`pods/status`, `deployments/scale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource<'a> {
    /// The path segment after the object's name.
    pub name: &'static str,
    /// The group, version and kind of what it reads and writes.
    pub kind: (&'a str, &'a str, &'a str),
    /// The verbs it answers.
    pub verbs: &'static [&'static str],
}

/// What the status and scale subresources answer: reads and writes of one object, nothing else.
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// Extra facts about a type that k8s-openapi does not carry.
struct Extra {
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
}

const NONE: Extra = Extra {
    short_names: &[],
    categories: &[],
    status: false,
    scale: false,
};

fn entry<T>(extra: Extra) -> ResourceType
where
    T: Resource + ListableResource,
    T::Scope: ScopeInfo,
{
    ResourceType {
        group: T::GROUP.into(),
        version: T::VERSION.into(),
        kind: T::KIND.into(),
        list_kind: T::LIST_KIND.into(),
        plural: T::URL_PATH_SEGMENT.into(),
        singular: T::KIND.to_ascii_lowercase(),
        namespaced: <T::Scope as ScopeInfo>::NAMESPACED,
        short_names: names(extra.short_names),
        categories: names(extra.categories),
        has_status: extra.status,
        has_scale: extra.scale,
        custom: None,
        review: false,
    }
}

/// A review type: created, answered and forgotten.
fn review<T>() -> ResourceType
where
    T: Resource,
    T::Scope: ScopeInfo,
{
    ResourceType {
        group: T::GROUP.into(),
        version: T::VERSION.into(),
        kind: T::KIND.into(),
        list_kind: "".into(),
        plural: T::URL_PATH_SEGMENT.into(),
        singular: T::KIND.to_ascii_lowercase(),
        namespaced: <T::Scope as ScopeInfo>::NAMESPACED,
        short_names: names(&[]),
        categories: names(&[]),
        has_status: false,
        has_scale: false,
        custom: None,
        review: true,
    }
}

const ALL: &[&str] = &["all"];

/// A list of names (short names, categories) as a type shares it.
fn names(list: &[&str]) -> Arc<[String]> {
    list.iter().map(|n| n.to_string()).collect()
}

/// Every built-in type kuberaft serves.
pub fn builtin() -> Vec<ResourceType> {
    use k8s_openapi::api::{
        apps::v1 as apps, authentication::v1 as authentication, authorization::v1 as authorization,
        autoscaling::v2 as autoscaling, batch::v1 as batch, coordination::v1 as coordination,
        core::v1 as core, discovery::v1 as discovery, events::v1 as events, networking::v1 as networking,
        policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    let x = |short_names, categories, status, scale| Extra {
        short_names,
        categories,
        status,
        scale,
    };
    vec![
        entry::<core::Namespace>(x(&["ns"], &[], true, false)),
        entry::<core::ConfigMap>(x(&["cm"], &[], false, false)),
        entry::<core::Secret>(NONE),
        entry::<core::Pod>(x(&["po"], ALL, true, false)),
        entry::<core::Service>(x(&["svc"], ALL, true, false)),
        entry::<core::ServiceAccount>(x(&["sa"], &[], false, false)),
        entry::<core::Event>(x(&["ev"], &[], false, false)),
        entry::<core::Node>(x(&["no"], &[], true, false)),
        entry::<core::Endpoints>(x(&["ep"], &[], false, false)),
        entry::<core::PersistentVolume>(x(&["pv"], &[], true, false)),
        entry::<core::PersistentVolumeClaim>(x(&["pvc"], &[], true, false)),
        entry::<core::LimitRange>(x(&["limits"], &[], false, false)),
        entry::<core::ResourceQuota>(x(&["quota"], &[], true, false)),
        entry::<core::ReplicationController>(x(&["rc"], ALL, true, true)),
        entry::<apps::Deployment>(x(&["deploy"], ALL, true, true)),
        entry::<apps::ReplicaSet>(x(&["rs"], ALL, true, true)),
        entry::<apps::StatefulSet>(x(&["sts"], ALL, true, true)),
        entry::<apps::DaemonSet>(x(&["ds"], ALL, true, false)),
        entry::<apps::ControllerRevision>(NONE),
        entry::<batch::Job>(x(&[], ALL, true, false)),
        entry::<batch::CronJob>(x(&["cj"], ALL, true, false)),
        entry::<coordination::Lease>(NONE),
        entry::<events::Event>(x(&["ev"], &[], false, false)),
        entry::<rbac::Role>(NONE),
        entry::<rbac::RoleBinding>(NONE),
        entry::<rbac::ClusterRole>(NONE),
        entry::<rbac::ClusterRoleBinding>(NONE),
        entry::<apiextensions::CustomResourceDefinition>(x(
            &["crd", "crds"],
            &["api-extensions"],
            true,
            false,
        )),
        entry::<discovery::EndpointSlice>(NONE),
        entry::<policy::PodDisruptionBudget>(x(&["pdb"], &[], true, false)),
        entry::<networking::Ingress>(x(&["ing"], &[], true, false)),
        entry::<networking::NetworkPolicy>(x(&["netpol"], &[], false, false)),
        entry::<networking::IngressClass>(NONE),
        entry::<storage::StorageClass>(x(&["sc"], &[], false, false)),
        entry::<scheduling::PriorityClass>(x(&["pc"], &[], false, false)),
        entry::<autoscaling::HorizontalPodAutoscaler>(x(&["hpa"], ALL, true, false)),
        review::<authentication::TokenReview>(),
        review::<authentication::SelfSubjectReview>(),
        review::<authorization::SubjectAccessReview>(),
        review::<authorization::LocalSubjectAccessReview>(),
        review::<authorization::SelfSubjectAccessReview>(),
        review::<authorization::SelfSubjectRulesReview>(),
    ]
}

/// The set of types, looked up by group, version and plural.
#[derive(Debug, Clone)]
pub struct Registry {
    types: Vec<ResourceType>,
}

impl Registry {
    /// The built-in registry.
    pub fn new() -> Self {
        Registry { types: builtin() }
    }

    /// The type served at `group/version/plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types
            .iter()
            .find(|t| *t.group == *group && *t.version == *version && *t.plural == *plural)
    }

    /// Every type.
    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.iter()
    }

    /// One type per stored collection: every built-in type but the reviews, and a custom resource in its
    /// storage version (or its first served one), so a pass over all objects meets each once.
    pub fn collections(&self) -> impl Iterator<Item = &ResourceType> {
        self.types
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.review)
            .filter(|(i, t)| match &t.custom {
                None => true,
                Some(c) => {
                    *t.version == *c.storage_version
                        || !self.types.iter().any(|o| {
                            o.group == t.group && o.plural == t.plural && *o.version == *c.storage_version
                        }) && !self.types[..*i]
                            .iter()
                            .any(|o| o.group == t.group && o.plural == t.plural)
                }
            })
            .map(|(_, t)| t)
    }

    /// All types of one group version.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceType> {
        self.types
            .iter()
            .filter(move |t| *t.group == *group && *t.version == *version)
    }

    /// Named API groups (not core) with their versions, in a stable order.
    pub fn groups(&self) -> Vec<(&str, Vec<&str>)> {
        let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| **g == *t.group) {
                Some((_, versions)) if !versions.contains(&&*t.version) => versions.push(&t.version),
                Some(_) => {}
                None => out.push((&t.group, vec![&t.version])),
            }
        }
        out
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in types plus `custom` ones; a custom type that would shadow a built-in one
    /// (same group and plural) is left out.
    pub fn with_custom(custom: Vec<ResourceType>) -> Self {
        let mut types = builtin();
        for t in custom {
            if !types
                .iter()
                .any(|b| b.group == t.group && b.plural == t.plural && b.version == t.version)
            {
                types.push(t);
            }
        }
        Registry { types }
    }
}

/// The types served right now: the built-in ones and those the stored
/// CustomResourceDefinitions add, swapped as a whole when a definition changes so that every
/// request sees one consistent set. Each set is tagged with the store revision it was derived
/// at, and an older set never replaces a newer one.
#[derive(Debug)]
pub struct LiveRegistry {
    current: RwLock<(i64, Arc<Registry>)>,
}

impl LiveRegistry {
    /// Starts with the built-in types only.
    pub fn new() -> Self {
        LiveRegistry {
            current: RwLock::new((0, Arc::new(Registry::new()))),
        }
    }

    /// The set of types served now.
    pub fn current(&self) -> Arc<Registry> {
        match self.current.read() {
            Ok(r) => r.1.clone(),
            Err(poisoned) => poisoned.into_inner().1.clone(),
        }
    }

    /// Serves the built-in types plus `custom`, the custom types of the definitions stored at
    /// `revision` (unless a set from a later revision is already served).
    pub fn set_custom(&self, custom: Vec<ResourceType>, revision: i64) {
        let mut current = match self.current.write() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        };
        if revision >= current.0 {
            *current = (revision, Arc::new(Registry::with_custom(custom)));
        }
    }
}

impl Default for LiveRegistry {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_knows_scope_plural_and_keys() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        assert!(cm.namespaced);
        assert_eq!(&*cm.kind, "ConfigMap");
        assert_eq!(&*cm.list_kind, "ConfigMapList");
        assert_eq!(
            cm.key(Some("default"), "a"),
            "/registry/core/configmaps/default/a"
        );
        let ns = r.lookup("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        assert_eq!(ns.key(None, "default"), "/registry/core/namespaces/default");
        let deploy = r.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(deploy.group_version(), "apps/v1");
        assert!(deploy.has_scale && deploy.has_status);
        assert!(r.lookup("apps", "v1", "configmaps").is_none());
        assert_eq!(builtin().len(), 42);
        assert_eq!(builtin().iter().filter(|t| t.review).count(), 6);
        let ssar = r
            .lookup("authorization.k8s.io", "v1", "selfsubjectaccessreviews")
            .unwrap();
        assert_eq!(ssar.verbs(), ["create"]);
        assert!(r.collections().all(|t| !t.review));
        assert!(r
            .groups()
            .iter()
            .any(|(g, v)| *g == "rbac.authorization.k8s.io" && v == &vec!["v1"]));
    }
}

/// A request for a collection, an object or an object's subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRequest {
    /// The resource type.
    pub rt: ResourceType,
    /// The namespace in the path (`None` for cluster-scoped paths and all-namespace lists).
    pub namespace: Option<String>,
    /// The object name (`None` for a collection).
    pub name: Option<String>,
    /// `status`, `scale`, … (`None` for the main resource).
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix was used.
    pub watch_path: bool,
    /// Who asks (`None` for the server's own controllers, which may do anything).
    pub requester: Option<Requester>,
}

/// Who makes a request, with the authorizer that knows what they hold: the registry refuses
/// writes that would grant more than that (RBAC escalation prevention).
#[derive(Debug, Clone)]
pub struct Requester {
    /// The request's user.
    pub user: Arc<UserInfo>,
    /// The replica's authorizer.
    pub authorizer: Authorizer,
}

impl PartialEq for Requester {
    fn eq(&self, other: &Self) -> bool {
        self.user == other.user
    }
}
