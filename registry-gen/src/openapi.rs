//! JSON property names of every OpenAPI definition, from k8s-openapi's schemars schemas.
//!
//! Rust has no reflection, so the schemas are reached from a fixed list of root types whose
//! schemas reference every other definition. [`check_complete`] scans k8s-openapi's source
//! for every `schema_name()` so a root missing after an upgrade fails loudly instead of
//! silently dropping definitions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Context, Result};
use k8s_openapi::schemars::SchemaGenerator;

/// The Kubernetes version feature of k8s-openapi the table is generated for.
pub const FEATURE: &str = "v1_35";

/// Every definition name with its JSON property names (empty for schema-only types such as
/// `Time` or `IntOrString`).
pub type Definitions = BTreeMap<String, BTreeSet<String>>;

/// Adds the schemas of the listed types (relative to `k8s_openapi::`) to the generator.
macro_rules! roots {
    ($gen:ident; $($($seg:ident)::+),* $(,)?) => {
        $( $gen.subschema_for::<k8s_openapi::$($seg)::+>(); )*
    };
}

/// Collects all definitions reachable from the root types.
pub fn definitions() -> Result<Definitions> {
    let mut generator = SchemaGenerator::default();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::WatchEvent<()>>();
    roots!(generator;
        api::admissionregistration::v1::MutatingWebhookConfiguration,
        api::admissionregistration::v1::ValidatingAdmissionPolicy,
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        api::admissionregistration::v1::ValidatingWebhookConfiguration,
        api::admissionregistration::v1alpha1::MutatingAdmissionPolicy,
        api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
        api::admissionregistration::v1beta1::MutatingAdmissionPolicy,
        api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding,
        api::apiserverinternal::v1alpha1::StorageVersion,
        api::apps::v1::ControllerRevision,
        api::apps::v1::DaemonSet,
        api::apps::v1::Deployment,
        api::apps::v1::ReplicaSet,
        api::apps::v1::StatefulSet,
        api::authentication::v1::SelfSubjectReview,
        api::authentication::v1::TokenRequest,
        api::authentication::v1::TokenReview,
        api::authorization::v1::LocalSubjectAccessReview,
        api::authorization::v1::SelfSubjectAccessReview,
        api::authorization::v1::SelfSubjectRulesReview,
        api::authorization::v1::SubjectAccessReview,
        api::autoscaling::v1::HorizontalPodAutoscaler,
        api::autoscaling::v1::Scale,
        api::autoscaling::v2::HorizontalPodAutoscaler,
        api::batch::v1::CronJob,
        api::batch::v1::Job,
        api::certificates::v1::CertificateSigningRequest,
        api::certificates::v1alpha1::ClusterTrustBundle,
        api::certificates::v1beta1::ClusterTrustBundle,
        api::certificates::v1beta1::PodCertificateRequest,
        api::coordination::v1::Lease,
        api::coordination::v1alpha2::LeaseCandidate,
        api::coordination::v1beta1::LeaseCandidate,
        api::core::v1::Binding,
        api::core::v1::ComponentStatus,
        api::core::v1::ConfigMap,
        api::core::v1::Endpoints,
        api::core::v1::Event,
        api::core::v1::LimitRange,
        api::core::v1::Namespace,
        api::core::v1::Node,
        api::core::v1::PersistentVolume,
        api::core::v1::Pod,
        api::core::v1::PodTemplate,
        api::core::v1::ReplicationController,
        api::core::v1::ResourceQuota,
        api::core::v1::Secret,
        api::core::v1::Service,
        api::core::v1::ServiceAccount,
        api::discovery::v1::EndpointSlice,
        api::events::v1::Event,
        api::flowcontrol::v1::FlowSchema,
        api::flowcontrol::v1::PriorityLevelConfiguration,
        api::networking::v1::IPAddress,
        api::networking::v1::Ingress,
        api::networking::v1::IngressClass,
        api::networking::v1::NetworkPolicy,
        api::networking::v1::ServiceCIDR,
        api::networking::v1beta1::IPAddress,
        api::networking::v1beta1::ServiceCIDR,
        api::node::v1::RuntimeClass,
        api::policy::v1::Eviction,
        api::policy::v1::PodDisruptionBudget,
        api::rbac::v1::ClusterRole,
        api::rbac::v1::ClusterRoleBinding,
        api::rbac::v1::Role,
        api::rbac::v1::RoleBinding,
        api::resource::v1::DeviceClass,
        api::resource::v1::ResourceClaim,
        api::resource::v1::ResourceClaimTemplate,
        api::resource::v1::ResourceSlice,
        api::resource::v1alpha3::DeviceTaintRule,
        api::resource::v1beta1::DeviceClass,
        api::resource::v1beta1::ResourceClaim,
        api::resource::v1beta1::ResourceClaimTemplate,
        api::resource::v1beta1::ResourceSlice,
        api::resource::v1beta2::DeviceClass,
        api::resource::v1beta2::ResourceClaim,
        api::resource::v1beta2::ResourceClaimTemplate,
        api::resource::v1beta2::ResourceSlice,
        api::scheduling::v1::PriorityClass,
        api::scheduling::v1alpha1::Workload,
        api::storage::v1::CSIDriver,
        api::storage::v1::CSINode,
        api::storage::v1::CSIStorageCapacity,
        api::storage::v1::StorageClass,
        api::storage::v1::VolumeAttachment,
        api::storage::v1::VolumeAttributesClass,
        api::storage::v1beta1::VolumeAttributesClass,
        api::storagemigration::v1beta1::StorageVersionMigration,
        apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        apimachinery::pkg::apis::meta::v1::APIGroupList,
        apimachinery::pkg::apis::meta::v1::APIResourceList,
        apimachinery::pkg::apis::meta::v1::APIVersions,
        apimachinery::pkg::apis::meta::v1::Patch,
        apimachinery::pkg::apis::meta::v1::Status,
        apimachinery::pkg::version::Info,
        kube_aggregator::pkg::apis::apiregistration::v1::APIService,
    );
    let mut out = Definitions::new();
    for (name, schema) in generator.definitions() {
        let props = schema
            .get("properties")
            .and_then(|p| p.as_object())
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        out.insert(name.clone(), props);
    }
    Ok(out)
}

/// Fails unless `defs` holds every definition k8s-openapi declares for [`FEATURE`].
pub fn check_complete(k8s_openapi_root: &Path, defs: &Definitions) -> Result<()> {
    let mut declared = BTreeSet::new();
    scan(&k8s_openapi_root.join("src").join(FEATURE), &mut declared)?;
    if declared.is_empty() {
        bail!("found no schema_name() in k8s-openapi {FEATURE}");
    }
    let missing: Vec<_> = declared.iter().filter(|d| !defs.contains_key(*d)).collect();
    if !missing.is_empty() {
        bail!(
            "schemars roots miss {} definitions (add root types): {missing:?}",
            missing.len()
        );
    }
    Ok(())
}

/// Collects the string each `fn schema_name()` returns in the `.rs` files under `dir`.
fn scan(dir: &Path, out: &mut BTreeSet<String>) -> Result<()> {
    const NEEDLE: &str = "fn schema_name()";
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            scan(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            for (at, _) in text.match_indices(NEEDLE) {
                let body = &text[at + NEEDLE.len()..];
                let name = body
                    .split_once('{')
                    .map(|(_, rest)| rest.trim_start())
                    .and_then(|rest| rest.strip_prefix('"'))
                    .and_then(|rest| rest.split_once('"'))
                    .map(|(name, _)| name.to_string());
                match name {
                    Some(n) => out.insert(n),
                    None => bail!("{}: schema_name() does not return a literal", path.display()),
                };
            }
        }
    }
    Ok(())
}
