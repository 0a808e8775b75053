//! The default RBAC policy and its reconciliation: the ClusterRoles and ClusterRoleBindings a
//! cluster needs before anyone can grant anything (`cluster-admin` for `system:masters`,
//! discovery, health and self-review for everyone, the aggregated `admin`/`edit`/`view`).
//!
//! The policy is data (`bootstrap_policy.yaml`), read by one generic loader that marks every
//! object as kube marks its defaults (label `kubernetes.io/bootstrapping: rbac-defaults`,
//! annotation `rbac.authorization.kubernetes.io/autoupdate: "true"`). [`reconcile`] runs on the
//! leader at every start and does what kube-apiserver's RBAC post-start hook does: it creates
//! what is missing and, unless an object's autoupdate annotation is `"false"`, adds the rules,
//! selectors, subjects, labels and annotations it lacks, never removing what users added.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{AggregationRule, ClusterRole, ClusterRoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::Metadata;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::authorization::rbac::{self, RBAC_GROUP};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::new_uid;
use crate::machinery::timestamp::now_rfc3339;
use crate::store::{keys, Cas, Store};

/// The policy, as data.
const POLICY: &str = include_str!("bootstrap_policy.yaml");

/// The label every default object carries.
pub const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";
/// Its value.
pub const BOOTSTRAPPING_VALUE: &str = "rbac-defaults";
/// The annotation that says whether reconciliation may change an object (`"false"`: never).
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// How many times one object's reconciliation is retried when it changed meanwhile.
const ATTEMPTS: usize = 3;

/// Why the bootstrap policy cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// The embedded policy does not parse (a defect of the build, reported, not panicked on).
    #[error("the bootstrap RBAC policy does not parse: {0}")]
    Policy(#[from] yaml_serde::Error),
}

/// The default ClusterRoles and ClusterRoleBindings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// The ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// The ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

/// Adds the bootstrapping label and the autoupdate annotation.
fn mark(meta: &mut ObjectMeta) {
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(BOOTSTRAPPING_LABEL.into(), BOOTSTRAPPING_VALUE.into());
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(AUTOUPDATE_ANNOTATION.into(), "true".into());
}

/// The default policy, every object marked as a default.
pub fn policy() -> Result<Policy, BootstrapError> {
    let mut p: Policy = yaml_serde::from_str(POLICY)?;
    p.cluster_roles.iter_mut().for_each(|r| mark(&mut r.metadata));
    p.cluster_role_bindings
        .iter_mut()
        .for_each(|b| mark(&mut b.metadata));
    Ok(p)
}

/// What reconciling one object takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconcile<T> {
    /// Nothing: it is as it should be.
    None,
    /// Nothing, because its autoupdate annotation is `"false"`.
    Protected,
    /// It does not exist: create this.
    Create(T),
    /// Update it to this.
    Update(T),
    /// Delete it and create this (a binding whose role reference, which is immutable, changed).
    Recreate(T),
}

/// kube's `merge(expected, existing)`: every key of both, the existing value winning.
fn merge(
    expected: &Option<BTreeMap<String, String>>,
    existing: &Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    if expected.is_none() && existing.is_none() {
        return None;
    }
    let mut out = expected.clone().unwrap_or_default();
    out.extend(existing.clone().unwrap_or_default());
    Some(out)
}

fn protected(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(AUTOUPDATE_ANNOTATION))
        .is_some_and(|v| v == "false")
}

fn merge_meta(into: &mut ObjectMeta, expected: &ObjectMeta) {
    into.annotations = merge(&expected.annotations, &into.annotations);
    into.labels = merge(&expected.labels, &into.labels);
}

/// What every reconciliation starts with: `Err` with the outcome when nothing exists (create
/// `expected`) or the object is protected; otherwise the existing object and a copy with
/// `expected`'s labels and annotations merged in, for the caller to complete.
fn reconcile_start<'a, T>(existing: Option<&'a T>, expected: &T) -> Result<(&'a T, T), Reconcile<T>>
where
    T: Clone + Metadata<Ty = ObjectMeta>,
{
    let Some(existing) = existing else {
        return Err(Reconcile::Create(expected.clone()));
    };
    if protected(existing.metadata()) {
        return Err(Reconcile::Protected);
    }
    let mut result = existing.clone();
    merge_meta(result.metadata_mut(), expected.metadata());
    Ok((existing, result))
}

/// An update to `result`, or nothing when it is what exists.
fn settled<T: PartialEq>(result: T, existing: &T) -> Reconcile<T> {
    if &result == existing {
        Reconcile::None
    } else {
        Reconcile::Update(result)
    }
}

/// How the ClusterRole `existing` must change to grant at least `expected`'s rules (kube's
/// union reconciliation: missing rules, selectors, labels and annotations are added; nothing
/// is removed, except an aggregation rule on a role that should have none).
pub fn reconcile_cluster_role(
    existing: Option<&ClusterRole>,
    expected: &ClusterRole,
) -> Reconcile<ClusterRole> {
    let (existing, mut result) = match reconcile_start(existing, expected) {
        Ok(started) => started,
        Err(done) => return done,
    };
    match (&expected.aggregation_rule, &existing.aggregation_rule) {
        (None, Some(_)) => result.aggregation_rule = None,
        (Some(want), have) => {
            let have_selectors = have
                .as_ref()
                .and_then(|a| a.cluster_role_selectors.clone())
                .unwrap_or_default();
            let missing: Vec<_> = want
                .cluster_role_selectors
                .iter()
                .flatten()
                .filter(|s| !have_selectors.contains(s))
                .cloned()
                .collect();
            if !missing.is_empty() {
                let mut selectors = have_selectors;
                selectors.extend(missing);
                result.aggregation_rule = Some(AggregationRule {
                    cluster_role_selectors: Some(selectors),
                });
            }
        }
        (None, None) => {}
    }
    let missing = rbac::uncovered(
        existing.rules.as_deref().unwrap_or_default(),
        expected.rules.as_deref().unwrap_or_default(),
    );
    if !missing.is_empty() {
        result.rules.get_or_insert_with(Vec::new).extend(missing);
    }
    settled(result, existing)
}

/// How the ClusterRoleBinding `existing` must change to bind at least `expected`'s subjects to
/// its role (kube's union reconciliation; a different role reference means recreating it).
pub fn reconcile_cluster_role_binding(
    existing: Option<&ClusterRoleBinding>,
    expected: &ClusterRoleBinding,
) -> Reconcile<ClusterRoleBinding> {
    let (existing, mut result) = match reconcile_start(existing, expected) {
        Ok(started) => started,
        Err(done) => return done,
    };
    let have = existing.subjects.clone().unwrap_or_default();
    let missing: Vec<_> = expected
        .subjects
        .iter()
        .flatten()
        .filter(|s| !have.contains(s))
        .cloned()
        .collect();
    if !missing.is_empty() {
        result.subjects.get_or_insert_with(Vec::new).extend(missing);
    }
    if result.role_ref != expected.role_ref {
        result.role_ref = expected.role_ref.clone();
        return Reconcile::Recreate(result);
    }
    settled(result, existing)
}

fn to_value<T: Serialize>(obj: &T) -> ApiResult<Value> {
    serde_json::to_value(obj).map_err(|e| ApiError::internal(e.to_string()))
}

/// A new object as the registry would store it: with a uid and a creation time.
fn new_object<T: Serialize>(obj: &T) -> ApiResult<Value> {
    let mut v = to_value(obj)?;
    v["metadata"]["uid"] = json!(new_uid());
    v["metadata"]["creationTimestamp"] = json!(now_rfc3339());
    Ok(v)
}

/// The stored object with the reconciled fields written over it (everything else, e.g. its
/// uid and owner references, kept as stored).
fn updated<T: Serialize>(stored: &Value, reconciled: &T, fields: &[&str]) -> ApiResult<Value> {
    let reconciled = to_value(reconciled)?;
    let mut next = stored.clone();
    for meta in ["labels", "annotations"] {
        next["metadata"][meta] = reconciled["metadata"][meta].clone();
    }
    for field in fields {
        match reconciled.get(*field) {
            Some(v) => next[*field] = v.clone(),
            None => {
                if let Some(o) = next.as_object_mut() {
                    o.remove(*field);
                }
            }
        }
    }
    Ok(next)
}

/// One kind of default object: where it is stored, how it reconciles, which fields carry it.
trait DefaultObject: Serialize + DeserializeOwned + Clone {
    const PLURAL: &'static str;
    const FIELDS: &'static [&'static str];
    fn name(&self) -> &str;
    fn reconcile(existing: Option<&Self>, expected: &Self) -> Reconcile<Self>;
}

impl DefaultObject for ClusterRole {
    const PLURAL: &'static str = "clusterroles";
    const FIELDS: &'static [&'static str] = &["rules", "aggregationRule"];
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
    fn reconcile(existing: Option<&Self>, expected: &Self) -> Reconcile<Self> {
        reconcile_cluster_role(existing, expected)
    }
}

impl DefaultObject for ClusterRoleBinding {
    const PLURAL: &'static str = "clusterrolebindings";
    const FIELDS: &'static [&'static str] = &["roleRef", "subjects"];
    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
    fn reconcile(existing: Option<&Self>, expected: &Self) -> Reconcile<Self> {
        reconcile_cluster_role_binding(existing, expected)
    }
}

/// Reconciles one default object with the store; whether it wrote anything.
async fn reconcile_one<T: DefaultObject>(store: &Store, expected: &T) -> ApiResult<bool> {
    let key = keys::object(RBAC_GROUP, T::PLURAL, None, expected.name());
    for _ in 0..ATTEMPTS {
        let stored = store.get(&key, true).await?;
        let existing: Option<T> = match &stored {
            Some(s) => match T::deserialize(&s.obj) {
                Ok(t) => Some(t),
                Err(e) => {
                    tracing::warn!(name = expected.name(), resource = T::PLURAL, error = %e,
                        "a default RBAC object is not decodable; left as it is");
                    return Ok(false);
                }
            },
            None => None,
        };
        let outcome = match (T::reconcile(existing.as_ref(), expected), stored) {
            (Reconcile::None | Reconcile::Protected, _) => return Ok(false),
            (Reconcile::Create(obj), _) => store.create(&key, &new_object(&obj)?).await?,
            (Reconcile::Update(obj), Some(s)) => {
                store
                    .update(&key, &updated(&s.obj, &obj, T::FIELDS)?, s.rv)
                    .await?
            }
            (Reconcile::Recreate(obj), Some(s)) => match store.delete(&key, s.rv).await? {
                Cas::Done(_) => store.create(&key, &new_object(&obj)?).await?,
                failed => failed,
            },
            (Reconcile::Update(_) | Reconcile::Recreate(_), None) => continue,
        };
        if let Cas::Done(_) = outcome {
            tracing::info!(
                name = expected.name(),
                resource = T::PLURAL,
                "reconciled default RBAC object"
            );
            return Ok(true);
        }
    }
    Err(ApiError::conflict(
        RBAC_GROUP,
        T::PLURAL,
        expected.name(),
        "it kept changing while the default policy was reconciled",
    ))
}

/// Brings the store's default ClusterRoles and ClusterRoleBindings up to the policy; returns
/// how many objects it wrote. Meant for the leader: the writes go through Raft.
pub async fn reconcile(store: &Store) -> ApiResult<usize> {
    let policy = policy().map_err(|e| ApiError::internal(e.to_string()))?;
    let mut written = 0;
    for role in &policy.cluster_roles {
        written += usize::from(reconcile_one(store, role).await?);
    }
    for binding in &policy.cluster_role_bindings {
        written += usize::from(reconcile_one(store, binding).await?);
    }
    Ok(written)
}

/// The leader's bootstrap: reconciles until it succeeds once, then returns (for
/// `controllers::run_while_leader`, which runs it again at the next term it leads).
pub async fn run(store: Store) {
    loop {
        match reconcile(&store).await {
            Ok(written) => {
                tracing::info!(written, "default RBAC policy reconciled");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e.message, "reconciling the default RBAC policy; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};

    use super::*;
    use crate::authentication::UserInfo;
    use crate::authorization::rbac::tests::rule;
    use crate::authorization::{Attributes, Authorizer, ResourceAttributes};

    fn role<'a>(p: &'a Policy, name: &str) -> &'a ClusterRole {
        p.cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no ClusterRole {name}"))
    }

    fn binding<'a>(p: &'a Policy, name: &str) -> &'a ClusterRoleBinding {
        p.cluster_role_bindings
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no ClusterRoleBinding {name}"))
    }

    /// The policy's ClusterRoles after the aggregation controller has run to its fixpoint.
    fn aggregated(p: &Policy) -> Vec<ClusterRole> {
        let mut roles = p.cluster_roles.clone();
        loop {
            let mut changed = false;
            for i in 0..roles.len() {
                if let Some(rules) = rbac::aggregated_rules(&roles[i], &roles) {
                    if roles[i].rules.as_ref() != Some(&rules) {
                        roles[i].rules = Some(rules);
                        changed = true;
                    }
                }
            }
            if !changed {
                return roles;
            }
        }
    }

    #[test]
    fn the_policy_parses_and_marks_every_object() {
        let p = policy().expect("the policy parses");
        for name in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:aggregate-to-admin",
            "system:aggregate-to-edit",
            "system:aggregate-to-view",
            "system:discovery",
            "system:basic-user",
            "system:public-info-viewer",
            "system:monitoring",
            "system:service-account-issuer-discovery",
        ] {
            role(&p, name);
        }
        let metas = p
            .cluster_roles
            .iter()
            .map(|r| &r.metadata)
            .chain(p.cluster_role_bindings.iter().map(|b| &b.metadata));
        for meta in metas {
            assert_eq!(
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(BOOTSTRAPPING_LABEL))
                    .map(String::as_str),
                Some(BOOTSTRAPPING_VALUE),
                "{:?}",
                meta.name
            );
            assert_eq!(
                meta.annotations
                    .as_ref()
                    .and_then(|a| a.get(AUTOUPDATE_ANNOTATION))
                    .map(String::as_str),
                Some("true")
            );
        }
        for b in &p.cluster_role_bindings {
            assert_eq!(b.role_ref.kind, "ClusterRole");
            role(&p, &b.role_ref.name);
        }
        let groups = |name: &str| -> Vec<String> {
            binding(&p, name)
                .subjects
                .iter()
                .flatten()
                .map(|s| format!("{}:{}", s.kind, s.name))
                .collect()
        };
        assert_eq!(groups("cluster-admin"), vec!["Group:system:masters"]);
        assert_eq!(groups("system:discovery"), vec!["Group:system:authenticated"]);
        assert_eq!(groups("system:basic-user"), vec!["Group:system:authenticated"]);
        assert_eq!(
            groups("system:public-info-viewer"),
            vec!["Group:system:authenticated", "Group:system:unauthenticated"]
        );
        assert_eq!(
            groups("system:service-account-issuer-discovery"),
            vec!["Group:system:serviceaccounts"]
        );
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    /// An authorizer over the aggregated policy where `viewer`, `editor` and `boss` hold
    /// `view`, `edit` and `admin` in namespace `shop`.
    fn bootstrapped() -> Authorizer {
        let p = policy().expect("the policy parses");
        let mut objects: Vec<Value> = aggregated(&p)
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).expect("serializable");
                v["kind"] = json!("ClusterRole");
                v
            })
            .collect();
        for b in &p.cluster_role_bindings {
            let mut v = serde_json::to_value(b).expect("serializable");
            v["kind"] = json!("ClusterRoleBinding");
            objects.push(v);
        }
        for (who, role) in [("viewer", "view"), ("editor", "edit"), ("boss", "admin")] {
            objects.push(
                json!({"kind": "RoleBinding", "metadata": {"name": who, "namespace": "shop"},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "name": who}]}),
            );
        }
        Authorizer::from_values(&objects)
    }

    fn can(a: &Authorizer, who: &str, verb: &str, group: &str, resource: &str) -> bool {
        let u = user(who, &["system:authenticated"]);
        a.authorize(&Attributes::resource(
            &u,
            verb,
            ResourceAttributes {
                api_group: group,
                resource,
                namespace: "shop",
                ..ResourceAttributes::default()
            },
        ))
        .is_allowed()
    }

    #[test]
    fn aggregated_roles_nest_view_in_edit_in_admin() {
        let a = bootstrapped();
        assert!(can(&a, "viewer", "list", "", "pods"));
        assert!(can(&a, "viewer", "get", "apps", "deployments"));
        assert!(!can(&a, "viewer", "get", "", "secrets"));
        assert!(!can(&a, "viewer", "create", "", "configmaps"));
        assert!(can(&a, "editor", "create", "", "configmaps"));
        assert!(can(&a, "editor", "get", "", "secrets"));
        assert!(can(&a, "editor", "list", "", "pods"));
        assert!(!can(&a, "editor", "create", RBAC_GROUP, "roles"));
        assert!(can(&a, "boss", "create", RBAC_GROUP, "rolebindings"));
        assert!(can(&a, "boss", "delete", "batch", "jobs"));
        assert!(!can(&a, "boss", "create", "", "namespaces"));
        assert!(!can(&a, "stranger", "list", "", "pods"));
        let agg = aggregated(&policy().expect("parses"));
        let view = agg
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some("view"))
            .expect("view");
        assert!(!view
            .rules
            .iter()
            .flatten()
            .any(|r| r.resources.iter().flatten().any(|x| x == "secrets")));
    }

    #[test]
    fn everyone_gets_health_discovery_and_self_review() {
        let a = bootstrapped();
        let anonymous = UserInfo::anonymous();
        let get = |u: &UserInfo, path: &str| {
            a.authorize(&Attributes::non_resource(u, "get", path))
                .is_allowed()
        };
        assert!(get(&anonymous, "/healthz"));
        assert!(get(&anonymous, "/version"));
        assert!(!get(&anonymous, "/api"));
        assert!(!get(&anonymous, "/metrics"));
        let alice = user("alice", &["system:authenticated"]);
        assert!(get(&alice, "/apis/apps/v1"));
        assert!(get(&alice, "/openapi/v3"));
        assert!(!get(&alice, "/metrics"));
        assert!(get(&user("prom", &["system:monitoring"]), "/metrics"));
        let sa = user(
            "system:serviceaccount:a:b",
            &["system:serviceaccounts", "system:authenticated"],
        );
        assert!(get(&sa, "/openid/v1/jwks"));
        let review = Attributes::resource(
            &alice,
            "create",
            ResourceAttributes {
                api_group: "authorization.k8s.io",
                resource: "selfsubjectrulesreviews",
                ..ResourceAttributes::default()
            },
        );
        assert!(a.authorize(&review).is_allowed());
        // system:masters lists cluster-admin's rules, through its default binding.
        let rules = a.rules_for(&user("root", &["system:masters"]), "");
        assert_eq!(rules.resource_rules[0].verbs, vec!["*"]);
        assert_eq!(
            rules.non_resource_rules[0].non_resource_urls,
            Some(vec!["*".to_string()])
        );
    }

    fn cluster_role(
        rules: Vec<PolicyRule>,
        annotations: &[(&str, &str)],
        labels: &[(&str, &str)],
    ) -> ClusterRole {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        ClusterRole {
            metadata: ObjectMeta {
                name: Some("r".into()),
                annotations: map(annotations),
                labels: map(labels),
                ..ObjectMeta::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    #[test]
    fn reconciling_a_role_adds_what_is_missing_and_keeps_what_users_added() {
        let expected = cluster_role(
            vec![rule(&["get", "list"], &[""], &["pods"])],
            &[(AUTOUPDATE_ANNOTATION, "true")],
            &[(BOOTSTRAPPING_LABEL, BOOTSTRAPPING_VALUE), ("tier", "default")],
        );
        assert_eq!(
            reconcile_cluster_role(None, &expected),
            Reconcile::Create(expected.clone())
        );
        assert_eq!(
            reconcile_cluster_role(Some(&expected), &expected),
            Reconcile::None
        );
        let existing = cluster_role(
            vec![
                rule(&["get"], &[""], &["pods"]),
                rule(&["get"], &[""], &["secrets"]),
            ],
            &[],
            &[("tier", "mine")],
        );
        let Reconcile::Update(updated) = reconcile_cluster_role(Some(&existing), &expected) else {
            panic!("an update was due");
        };
        assert_eq!(
            updated.rules,
            Some(vec![
                rule(&["get"], &[""], &["pods"]),
                rule(&["get"], &[""], &["secrets"]),
                rule(&["list"], &[""], &["pods"]),
            ])
        );
        let labels = updated.metadata.labels.expect("labels");
        assert_eq!(labels.get("tier").map(String::as_str), Some("mine"));
        assert_eq!(
            labels.get(BOOTSTRAPPING_LABEL).map(String::as_str),
            Some(BOOTSTRAPPING_VALUE)
        );
        assert_eq!(
            updated
                .metadata
                .annotations
                .and_then(|a| a.get(AUTOUPDATE_ANNOTATION).cloned())
                .as_deref(),
            Some("true")
        );
        // A role that covers more than expected needs nothing.
        let wider = cluster_role(
            vec![rule(&["*"], &["*"], &["*"])],
            &[(AUTOUPDATE_ANNOTATION, "true")],
            &[],
        );
        let expected_unlabelled = cluster_role(expected.rules.clone().unwrap_or_default(), &[], &[]);
        assert_eq!(
            reconcile_cluster_role(Some(&wider), &expected_unlabelled),
            Reconcile::None
        );
        let protected = cluster_role(vec![], &[(AUTOUPDATE_ANNOTATION, "false")], &[]);
        assert_eq!(
            reconcile_cluster_role(Some(&protected), &expected),
            Reconcile::Protected
        );
    }

    #[test]
    fn reconciling_aggregation_adds_selectors_and_drops_unexpected_ones() {
        let p = policy().expect("parses");
        let admin = role(&p, "admin");
        let mut existing = admin.clone();
        existing.aggregation_rule = None;
        existing.rules = Some(vec![rule(&["get"], &[""], &["pods"])]);
        let Reconcile::Update(updated) = reconcile_cluster_role(Some(&existing), admin) else {
            panic!("an update was due");
        };
        assert_eq!(updated.aggregation_rule, admin.aggregation_rule);
        assert_eq!(updated.rules, existing.rules);
        let cluster_admin = role(&p, "cluster-admin");
        let mut aggregating = cluster_admin.clone();
        aggregating.aggregation_rule = admin.aggregation_rule.clone();
        let Reconcile::Update(updated) = reconcile_cluster_role(Some(&aggregating), cluster_admin) else {
            panic!("an update was due");
        };
        assert_eq!(updated.aggregation_rule, None);
    }

    fn subject(kind: &str, name: &str) -> Subject {
        Subject {
            api_group: Some(RBAC_GROUP.into()),
            kind: kind.into(),
            name: name.into(),
            namespace: None,
        }
    }

    #[test]
    fn reconciling_a_binding_unions_subjects_and_recreates_on_a_new_role() {
        let p = policy().expect("parses");
        let expected = binding(&p, "system:public-info-viewer");
        assert_eq!(
            reconcile_cluster_role_binding(Some(expected), expected),
            Reconcile::None
        );
        let mut existing = expected.clone();
        existing.subjects = Some(vec![
            subject("User", "kim"),
            subject("Group", "system:authenticated"),
        ]);
        let Reconcile::Update(updated) = reconcile_cluster_role_binding(Some(&existing), expected) else {
            panic!("an update was due");
        };
        assert_eq!(
            updated.subjects,
            Some(vec![
                subject("User", "kim"),
                subject("Group", "system:authenticated"),
                subject("Group", "system:unauthenticated"),
            ])
        );
        let mut moved = expected.clone();
        moved.role_ref.name = "other".into();
        let Reconcile::Recreate(recreated) = reconcile_cluster_role_binding(Some(&moved), expected) else {
            panic!("a recreate was due");
        };
        assert_eq!(recreated.role_ref, expected.role_ref);
        let mut protected = moved.clone();
        protected
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(AUTOUPDATE_ANNOTATION.into(), "false".into());
        assert_eq!(
            reconcile_cluster_role_binding(Some(&protected), expected),
            Reconcile::Protected
        );
    }

    #[test]
    fn an_update_keeps_the_stored_fields_it_does_not_reconcile() {
        let stored = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r", "uid": "u1", "labels": {"a": "1"}},
            "rules": [], "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}});
        let reconciled = cluster_role(
            vec![rule(&["get"], &[""], &["pods"])],
            &[("k", "v")],
            &[("a", "1")],
        );
        let next = updated(&stored, &reconciled, ClusterRole::FIELDS).expect("serializable");
        assert_eq!(next["metadata"]["uid"], "u1");
        assert_eq!(next["metadata"]["annotations"], json!({"k": "v"}));
        assert_eq!(next["rules"][0]["resources"], json!(["pods"]));
        assert!(next.get("aggregationRule").is_none());
        let created = new_object(&reconciled).expect("serializable");
        assert!(created["metadata"]["uid"].is_string());
        assert_eq!(created["kind"], "ClusterRole");
    }
}
