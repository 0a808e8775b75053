//! The type data, kube-apiserver's scheme and REST mapper in one: the built-in resource types
//! (group, version, kind, plural and scope from k8s-openapi, pinned to Kubernetes 1.35, plus
//! what no package holds — short names, categories, singular names and subresources — in one
//! table), what a CustomResourceDefinition declares about the types it adds ([`custom`]), and
//! the set of types served right now.
//!
//! This is the bottom of the server: every layer names types, so this module names no other.
//! A type's behaviour is not here: the layer that serves a type attaches it as [`Hooks`]
//! (the registry's strategy, set by `kinds` and `apiextensions`), which this module only
//! carries.

mod autoscaling;
pub mod conversion;
pub mod custom;
mod events;

use std::any::Any;
use std::fmt;
use std::sync::{Arc, RwLock};

use k8s_openapi::{ClusterResourceScope, ListableResource, NamespaceResourceScope, Resource};

pub use custom::CustomType;

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
    /// The type's behaviour, attached by the layer that serves it (none in the bare table).
    pub hooks: Hooks,
}

/// Behaviour that a layer above attaches to a type — the registry's strategy — carried here
/// without being known: the layers below only pass types around, and the registry reads back
/// what `kinds` or `apiextensions` attached (see `registry::strategy::of`).
#[derive(Clone, Default)]
pub struct Hooks(Option<Arc<dyn Any + Send + Sync>>);

impl Hooks {
    /// Attaches `hooks`.
    pub fn new<T: Any + Send + Sync>(hooks: T) -> Self {
        Hooks(Some(Arc::new(hooks)))
    }

    /// What was attached, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref()?.downcast_ref()
    }
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Hooks(attached)"
        } else {
            "Hooks(none)"
        })
    }
}

impl PartialEq for Hooks {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
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

    /// The subresources this type serves, each with its verbs, by name (discovery lists them;
    /// a path to any other subresource is `404`, a verb a subresource lacks is `405`).
    pub fn subresources(&self) -> Vec<Subresource<'_>> {
        let mut out = Vec::new();
        if self.has_scale {
            out.push(Subresource {
                name: "scale",
                kind: ("autoscaling", "v1", "Scale"),
                verbs: SUBRESOURCE_VERBS,
                part: None,
                options: None,
                connect: false,
                subpath: false,
            });
        }
        if self.has_status {
            out.push(Subresource {
                name: "status",
                kind: (&self.group, &self.version, &self.kind),
                verbs: SUBRESOURCE_VERBS,
                part: Some(&["status"]),
                options: None,
                connect: false,
                subpath: false,
            });
        }
        out.extend(
            OTHER_SUBRESOURCES
                .iter()
                .filter(|(group, plural, _)| (*group, *plural) == (&*self.group, &*self.plural))
                .map(|(_, _, sub)| *sub),
        );
        out.sort_by_key(|s| s.name);
        out
    }

    /// The subresource called `name`, if this type serves it.
    pub fn subresource(&self, name: &str) -> Option<Subresource<'_>> {
        self.subresources().into_iter().find(|s| s.name == name)
    }

    /// The group, version and kind objects of this type are stored as, where discovery names
    /// them: a custom resource's storage version; for a built-in type its own, but where
    /// kube-apiserver stores it as another (events.k8s.io Events are core Events, every
    /// autoscaling HorizontalPodAutoscaler is `autoscaling/v2`: [`conversion::BUILTIN`]).
    /// `None` for reviews, which are never stored. Types with one storage kind are kube's
    /// equivalent resources.
    pub fn storage_kind(&self) -> Option<(&str, &str, &str)> {
        if self.review {
            return None;
        }
        if let Some(custom) = &self.custom {
            return Some((&self.group, &custom.storage_version, &self.kind));
        }
        Some(match conversion::to_storage_kind(self) {
            Some(c) => (c.storage_group, c.storage_version, c.kind),
            None => (&self.group, &self.version, &self.kind),
        })
    }

    /// The group whose collection holds this type's objects: its own, but for a built-in type
    /// kube stores as another group's kind (events.k8s.io Events are core Events).
    pub fn storage_group(&self) -> &str {
        match conversion::to_storage_kind(self) {
            Some(c) => c.storage_group,
            None => &self.group,
        }
    }

    /// `storageVersionHash` of discovery, as kube-apiserver computes it
    /// (`discovery.StorageVersionHash`): the first 8 bytes of the SHA-256 of
    /// `group/version/kind` of the storage version, in standard base64. Clients (the storage
    /// version migrator) compare it to notice that the storage version changed.
    pub fn storage_version_hash(&self) -> Option<String> {
        use base64::Engine;
        use sha2::Digest;
        let (group, version, kind) = self.storage_kind()?;
        let digest = sha2::Sha256::digest(format!("{group}/{version}/{kind}"));
        Some(base64::engine::general_purpose::STANDARD.encode(&digest[..8]))
    }

    /// Whether names of this type need only fit in a URL path segment (rather than be
    /// DNS-1123 subdomains): APIServices, whose local entries are named `v1.` and
    /// `v1.apps`; their own validation then asks for `<version>.<group>`.
    pub fn name_is_path_segment(&self) -> bool {
        (&*self.group, &*self.plural) == ("apiregistration.k8s.io", "apiservices")
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
    /// For a subresource that reads and writes a part of its object (`status`,
    /// `ephemeralcontainers`): the path of that part. A write through it changes nothing
    /// else; a read answers the whole object, as kube-apiserver's do.
    pub part: Option<&'static [&'static str]>,
    /// For a subresource served from elsewhere (a pod's streams, from its kubelet): the kind
    /// of the options its query gives (`PodExecOptions`, `PodLogOptions`).
    pub options: Option<&'static str>,
    /// A connection to something the object stands for (a pod's `exec`, `attach` and
    /// `portforward` reach its kubelet): `kind` is then the kind of its options, and `get`
    /// and `create` open the connection (kube's `rest.Connecter`). Otherwise a subresource
    /// with `options` is a `get` whose answer streams from there (`log`).
    pub connect: bool,
    /// A connect subresource whose path goes on after its name (kube's proxies: the rest of
    /// the path is the options' `path`); its connection is upgraded only if the client asks.
    pub subpath: bool,
}

/// What the status and scale subresources answer: reads and writes of one object, nothing else.
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// What a connect subresource answers: both open the connection (kubectl's websocket streams
/// use `get`, its SPDY ones `create`).
const CONNECT_VERBS: &[&str] = &["create", "get"];

/// What a proxy subresource answers: every verb of an HTTP request passed on (kube maps
/// `GET` and `HEAD` to `get`, `POST` to `create`, and so on).
const PROXY_VERBS: &[&str] = &["create", "delete", "get", "patch", "update"];

/// A proxy subresource (`pods/proxy`, `services/proxy`, `nodes/proxy`) whose options are
/// `options`.
const fn proxy(options: &'static str) -> Subresource<'static> {
    Subresource {
        name: "proxy",
        kind: ("", "v1", options),
        verbs: PROXY_VERBS,
        part: None,
        options: Some(options),
        connect: true,
        subpath: true,
    }
}

/// The subresources of particular types (group, plural), beyond the `status` and `scale`
/// that the type table's flags give. What one does is up to the type's strategy: the
/// registry reads and writes a `part` generically and hands a `create` to the strategy.
const OTHER_SUBRESOURCES: &[(&str, &str, Subresource<'static>)] = &[
    (
        "",
        "pods",
        Subresource {
            name: "binding",
            kind: ("", "v1", "Binding"),
            verbs: &["create"],
            part: None,
            options: None,
            connect: false,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "ephemeralcontainers",
            kind: ("", "v1", "Pod"),
            verbs: SUBRESOURCE_VERBS,
            part: Some(&["spec", "ephemeralContainers"]),
            options: None,
            connect: false,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "eviction",
            kind: ("policy", "v1", "Eviction"),
            verbs: &["create"],
            part: None,
            options: None,
            connect: false,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "attach",
            kind: ("", "v1", "PodAttachOptions"),
            verbs: CONNECT_VERBS,
            part: None,
            options: Some("PodAttachOptions"),
            connect: true,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "exec",
            kind: ("", "v1", "PodExecOptions"),
            verbs: CONNECT_VERBS,
            part: None,
            options: Some("PodExecOptions"),
            connect: true,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "log",
            kind: ("", "v1", "Pod"),
            verbs: &["get"],
            part: None,
            options: Some("PodLogOptions"),
            connect: false,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "portforward",
            kind: ("", "v1", "PodPortForwardOptions"),
            verbs: CONNECT_VERBS,
            part: None,
            options: Some("PodPortForwardOptions"),
            connect: true,
            subpath: false,
        },
    ),
    (
        "",
        "pods",
        Subresource {
            name: "resize",
            kind: ("", "v1", "Pod"),
            verbs: SUBRESOURCE_VERBS,
            // The spec is taken whole; the pod's strategy keeps only its containers'
            // resources and resize policies from it.
            part: Some(&["spec"]),
            options: None,
            connect: false,
            subpath: false,
        },
    ),
    ("", "pods", proxy("PodProxyOptions")),
    ("", "services", proxy("ServiceProxyOptions")),
    ("", "nodes", proxy("NodeProxyOptions")),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        Subresource {
            name: "approval",
            kind: ("certificates.k8s.io", "v1", "CertificateSigningRequest"),
            verbs: SUBRESOURCE_VERBS,
            part: Some(&["status", "conditions"]),
            options: None,
            connect: false,
            subpath: false,
        },
    ),
    (
        "",
        "serviceaccounts",
        Subresource {
            name: "token",
            kind: ("authentication.k8s.io", "v1", "TokenRequest"),
            verbs: &["create"],
            part: None,
            options: None,
            connect: false,
            subpath: false,
        },
    ),
];

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
        hooks: Hooks::default(),
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
        hooks: Hooks::default(),
    }
}

const ALL: &[&str] = &["all"];
const EXTENSIONS: &[&str] = &["api-extensions"];

/// A list of names (short names, categories) as a type shares it.
fn names(list: &[&str]) -> Arc<[String]> {
    list.iter().map(|n| n.to_string()).collect()
}

/// Every built-in type kuberaft serves, as data (the server attaches each one's behaviour).
pub fn builtin() -> Vec<ResourceType> {
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
        // Before apps: kube-apiserver lists apiregistration.k8s.io first in `/apis`.
        entry::<apiregistration::APIService>(x(&[], EXTENSIONS, true, false)),
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
        entry::<apiextensions::CustomResourceDefinition>(x(&["crd", "crds"], EXTENSIONS, true, false)),
        entry::<discovery::EndpointSlice>(NONE),
        entry::<policy::PodDisruptionBudget>(x(&["pdb"], &[], true, false)),
        entry::<networking::Ingress>(x(&["ing"], &[], true, false)),
        entry::<networking::NetworkPolicy>(x(&["netpol"], &[], false, false)),
        entry::<networking::IngressClass>(NONE),
        entry::<storage::StorageClass>(x(&["sc"], &[], false, false)),
        entry::<scheduling::PriorityClass>(x(&["pc"], &[], false, false)),
        entry::<autoscaling::HorizontalPodAutoscaler>(x(&["hpa"], ALL, true, false)),
        // Also served in v1, converted to and from the storage version (`conversion`); after
        // v2, so that discovery prefers v2 as kube-apiserver does.
        entry::<autoscaling_v1::HorizontalPodAutoscaler>(x(&["hpa"], ALL, true, false)),
        entry::<core::PodTemplate>(NONE),
        entry::<certificates::CertificateSigningRequest>(x(&["csr"], &[], true, false)),
        entry::<node::RuntimeClass>(NONE),
        entry::<storage::CSIDriver>(NONE),
        entry::<storage::CSINode>(NONE),
        entry::<storage::CSIStorageCapacity>(NONE),
        entry::<storage::VolumeAttachment>(x(&[], &[], true, false)),
        entry::<storage::VolumeAttributesClass>(x(&["vac"], &[], false, false)),
        entry::<networking::IPAddress>(x(&["ip"], &[], false, false)),
        entry::<networking::ServiceCIDR>(x(&[], &[], true, false)),
        entry::<flowcontrol::FlowSchema>(x(&[], &[], true, false)),
        entry::<flowcontrol::PriorityLevelConfiguration>(x(&[], &[], true, false)),
        entry::<resource::DeviceClass>(NONE),
        entry::<resource::ResourceClaim>(x(&[], &[], true, false)),
        entry::<resource::ResourceClaimTemplate>(NONE),
        entry::<resource::ResourceSlice>(NONE),
        entry::<admissionregistration::MutatingWebhookConfiguration>(x(&[], EXTENSIONS, false, false)),
        entry::<admissionregistration::ValidatingWebhookConfiguration>(x(&[], EXTENSIONS, false, false)),
        entry::<admissionregistration::ValidatingAdmissionPolicy>(x(&[], EXTENSIONS, true, false)),
        entry::<admissionregistration::ValidatingAdmissionPolicyBinding>(x(&[], EXTENSIONS, false, false)),
        review::<authentication::TokenReview>(),
        review::<authentication::SelfSubjectReview>(),
        review::<authorization::SubjectAccessReview>(),
        review::<authorization::LocalSubjectAccessReview>(),
        review::<authorization::SelfSubjectAccessReview>(),
        review::<authorization::SelfSubjectRulesReview>(),
    ]
}

/// The fields a built-in type (by group and plural) can be selected by beyond `metadata.name`
/// and `metadata.namespace`, as kube-apiserver registers them per type: `(field, JSON path)`. A path ending in `?` is a
/// boolean that matches as `"true"`/`"false"`; a number matches as its decimal text.
pub fn field_selectors(group: &str, plural: &str) -> &'static [(&'static str, &'static str)] {
    match (group, plural) {
        ("", "pods") => &[
            ("spec.nodeName", "spec.nodeName"),
            ("spec.restartPolicy", "spec.restartPolicy"),
            ("spec.schedulerName", "spec.schedulerName"),
            ("spec.serviceAccountName", "spec.serviceAccountName"),
            ("spec.hostNetwork", "spec.hostNetwork?"),
            ("status.phase", "status.phase"),
            ("status.podIP", "status.podIP"),
            ("status.nominatedNodeName", "status.nominatedNodeName"),
        ],
        ("", "events") | ("events.k8s.io", "events") => &[
            ("involvedObject.kind", "involvedObject.kind"),
            ("involvedObject.namespace", "involvedObject.namespace"),
            ("involvedObject.name", "involvedObject.name"),
            ("involvedObject.uid", "involvedObject.uid"),
            ("involvedObject.apiVersion", "involvedObject.apiVersion"),
            ("involvedObject.resourceVersion", "involvedObject.resourceVersion"),
            ("involvedObject.fieldPath", "involvedObject.fieldPath"),
            ("reason", "reason"),
            ("reportingComponent", "reportingComponent"),
            ("source", "source.component"),
            ("type", "type"),
        ],
        ("", "secrets") => &[("type", "type")],
        ("", "namespaces") => &[("status.phase", "status.phase")],
        ("", "nodes") => &[("spec.unschedulable", "spec.unschedulable?")],
        ("", "replicationcontrollers") | ("apps", "replicasets") => &[("status.replicas", "status.replicas")],
        ("batch", "jobs") => &[("status.successful", "status.successful")],
        ("certificates.k8s.io", "certificatesigningrequests") => &[("spec.signerName", "spec.signerName")],
        _ => &[],
    }
}

/// The field the watch cache indexes each type's watchers by, as kube-apiserver's registry
/// declares a trigger function per type (pods: `spec.nodeName`, so that each kubelet's watch
/// is woken only by its own node's pods): `(group, plural, JSON path)`, the path one of the
/// type's [`field_selectors`].
const WATCH_INDEXES: &[(&str, &str, &str)] = &[("", "pods", "spec.nodeName")];

/// The JSON path the watchers of a built-in type (by group and plural) are indexed by, if any.
pub fn watch_index(group: &str, plural: &str) -> Option<&'static str> {
    WATCH_INDEXES
        .iter()
        .find(|(g, p, _)| *g == group && *p == plural)
        .map(|(_, _, path)| *path)
}

/// The built-in types whose `status` writes keep the metadata they carry (labels, annotations,
/// finalizers…), as their kube-apiserver status strategies reset only the spec and the
/// metadata fields listed here (kube's `GetResetFields`). Every other type — custom resources
/// and the newer built-ins, which call `ResetObjectMetaForStatus` — takes only the status.
const STATUS_KEEPS_METADATA: &[(&str, &str, &[&str])] = &[
    ("", "Pod", &["ownerReferences"]),
    ("", "Node", &[]),
    ("", "Service", &[]),
    ("", "Namespace", &[]),
    ("", "PersistentVolume", &[]),
    ("", "PersistentVolumeClaim", &[]),
    ("", "ReplicationController", &[]),
    ("", "ResourceQuota", &[]),
    ("apps", "Deployment", &["labels"]),
    ("apps", "ReplicaSet", &[]),
    ("apps", "StatefulSet", &[]),
    ("apps", "DaemonSet", &[]),
    ("batch", "Job", &[]),
    ("batch", "CronJob", &[]),
    ("autoscaling", "HorizontalPodAutoscaler", &[]),
    ("policy", "PodDisruptionBudget", &[]),
    ("networking.k8s.io", "Ingress", &[]),
];

/// For a type that keeps the metadata of its `status` writes: the metadata fields such a write
/// cannot change.
pub fn status_metadata_resets(rt: &ResourceType) -> Option<&'static [&'static str]> {
    if rt.custom.is_some() {
        return None;
    }
    STATUS_KEEPS_METADATA
        .iter()
        .find(|(group, kind, _)| *group == &*rt.group && *kind == &*rt.kind)
        .map(|(_, _, resets)| *resets)
}

/// The set of types, looked up by group, version and plural.
#[derive(Debug, Clone)]
pub struct Registry {
    types: Vec<ResourceType>,
}

impl Registry {
    /// The built-in types as bare data, with no behaviour attached (for what only reads the
    /// table: schemas, OpenAPI, request paths).
    pub fn new() -> Self {
        Registry { types: builtin() }
    }

    /// A registry of `types`.
    pub fn of(types: Vec<ResourceType>) -> Self {
        Registry { types }
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

    /// One type per stored collection: every built-in type but the reviews and the versions
    /// served by conversion, and a custom resource in its storage version (or its first served
    /// one), so a pass over all objects meets each once.
    pub fn collections(&self) -> impl Iterator<Item = &ResourceType> {
        self.types
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.review)
            .filter(|(i, t)| match &t.custom {
                None => conversion::builtin(t).is_none(),
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
    /// These types plus `custom` ones; a custom type that would shadow one of them (same
    /// group and plural) is left out.
    pub fn with_custom(&self, custom: Vec<ResourceType>) -> Self {
        let mut types = self.types.clone();
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
    builtin: Registry,
    current: RwLock<(i64, Arc<Registry>)>,
}

impl LiveRegistry {
    /// Starts with the built-in types only.
    pub fn new(builtin: Registry) -> Self {
        LiveRegistry {
            current: RwLock::new((0, Arc::new(builtin.clone()))),
            builtin,
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
            *current = (revision, Arc::new(self.builtin.with_custom(custom)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_version_hashes_are_kube_apiservers() {
        let r = Registry::new();
        let hash = |g: &str, v: &str, p: &str| r.lookup(g, v, p).and_then(ResourceType::storage_version_hash);
        // The values a real kube-apiserver publishes.
        assert_eq!(hash("", "v1", "configmaps").as_deref(), Some("qFsyl6wFWjQ="));
        assert_eq!(hash("apps", "v1", "deployments").as_deref(), Some("8aSe+NMegvE="));
        assert_eq!(hash("", "v1", "pods").as_deref(), Some("xPOwRZ+Yhw8="));
        // events.k8s.io Events are stored as core Events, so both publish the same hash.
        assert_eq!(
            hash("events.k8s.io", "v1", "events").as_deref(),
            Some("r2yiGXH7wu8=")
        );
        assert_eq!(hash("", "v1", "events").as_deref(), Some("r2yiGXH7wu8="));
        assert_eq!(hash("authentication.k8s.io", "v1", "tokenreviews"), None);
    }

    #[test]
    fn the_registry_knows_scope_plural_and_kinds() {
        let r = Registry::new();
        let cm = r.lookup("", "v1", "configmaps").unwrap();
        assert!(cm.namespaced);
        assert_eq!(&*cm.kind, "ConfigMap");
        assert_eq!(&*cm.list_kind, "ConfigMapList");
        let ns = r.lookup("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        let deploy = r.lookup("apps", "v1", "deployments").unwrap();
        assert_eq!(deploy.group_version(), "apps/v1");
        assert!(deploy.has_scale && deploy.has_status);
        assert!(r.lookup("apps", "v1", "configmaps").is_none());
        assert_eq!(builtin().len(), 64);
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
