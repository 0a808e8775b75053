//! The RBAC authorizer: answers every request from memory, with no store round trip.
//!
//! The four RBAC resources are kept as an [`Index`]: roles and ClusterRoles by name, and the
//! bindings of each scope indexed by the users and groups they name (a ServiceAccount subject
//! is indexed as its user name), so finding the bindings of a user is a few hash lookups. An
//! index is immutable; a task follows the watch cache and swaps in a new one whenever a Role,
//! ClusterRole, RoleBinding or ClusterRoleBinding changes. Each index carries its own cache of
//! the rules resolved for a `(user, groups, namespace)`, so a change invalidates every cached
//! answer at once, simply by replacing the index.
//!
//! A request is then: the `system:masters` check, one lookup in that cache (a miss resolves
//! the rules once), and rule matching over the user's rules. Stored objects are decoded when
//! they change, never on the hot path.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};

use k8s_openapi::api::authorization::v1::{NonResourceRule, ResourceRule};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::authentication::user::{UserInfo, SYSTEM_MASTERS};
use crate::authorization::rbac::{self, SubjectKey, RBAC_GROUP};
use crate::authorization::{forbidden_error, quoted, Attributes, Decision};
use crate::machinery::errors::ApiResult;
use crate::store::cacher::{CacheEvent, CachedObject, Change, Published, WatchCache};
use crate::store::keys;

/// How many `(user, namespace)` rule sets an index caches before it starts afresh.
const CACHED_USERS: usize = 8192;

/// Where the four RBAC resources are stored (all of them share this prefix).
pub fn rbac_prefix() -> String {
    format!("{}{RBAC_GROUP}/", keys::ROOT)
}

/// One of the four RBAC objects, decoded.
#[derive(Debug, Clone)]
pub enum RbacObject {
    /// A Role.
    Role(Role),
    /// A ClusterRole.
    ClusterRole(ClusterRole),
    /// A RoleBinding.
    RoleBinding(RoleBinding),
    /// A ClusterRoleBinding.
    ClusterRoleBinding(ClusterRoleBinding),
}

impl RbacObject {
    /// Decodes an object of the resource `plural`; `None` for another resource or an object
    /// that does not decode as its type.
    pub fn decode(plural: &str, json: &[u8]) -> Option<RbacObject> {
        let decoded = match plural {
            "roles" => serde_json::from_slice(json).map(RbacObject::Role),
            "clusterroles" => serde_json::from_slice(json).map(RbacObject::ClusterRole),
            "rolebindings" => serde_json::from_slice(json).map(RbacObject::RoleBinding),
            "clusterrolebindings" => serde_json::from_slice(json).map(RbacObject::ClusterRoleBinding),
            _ => return None,
        };
        decoded
            .inspect_err(
                |e| tracing::warn!(resource = plural, error = %e, "RBAC object not decodable; ignored"),
            )
            .ok()
    }

    /// Decodes a whole object by its `kind`.
    pub fn from_value(obj: &Value) -> Option<RbacObject> {
        let plural = match obj.get("kind")?.as_str()? {
            "Role" => "roles",
            "ClusterRole" => "clusterroles",
            "RoleBinding" => "rolebindings",
            "ClusterRoleBinding" => "clusterrolebindings",
            _ => return None,
        };
        let json = serde_json::to_vec(obj).ok()?;
        RbacObject::decode(plural, &json)
    }

    /// Decodes a cached object stored under `key`.
    fn from_cached(key: &str, obj: &CachedObject) -> Option<RbacObject> {
        let plural = key.strip_prefix(&rbac_prefix())?.split('/').next()?;
        RbacObject::decode(plural, obj.item_json())
    }
}

/// A binding as the index keeps it.
#[derive(Debug)]
struct Binding {
    /// `ClusterRoleBinding "name"` or `RoleBinding "name/namespace"`.
    described: String,
    /// `""` for a ClusterRoleBinding.
    namespace: String,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

/// The bindings of one scope (the cluster, or one namespace), indexed by subject.
#[derive(Debug, Default)]
struct Bindings {
    all: Vec<Binding>,
    by_subject: HashMap<SubjectKey, Vec<usize>>,
}

impl Bindings {
    fn add(&mut self, binding: Binding) {
        let at = self.all.len();
        for subject in &binding.subjects {
            if let Some(key) = rbac::subject_key(subject, &binding.namespace) {
                let entry = self.by_subject.entry(key).or_default();
                if entry.last() != Some(&at) {
                    entry.push(at);
                }
            }
        }
        self.all.push(binding);
    }

    /// The bindings naming the user or one of its groups, in the scope's order.
    fn of(&self, user: &UserInfo) -> Vec<&Binding> {
        let mut found: Vec<usize> = Vec::new();
        let mut add = |key: SubjectKey| {
            if let Some(ids) = self.by_subject.get(&key) {
                found.extend(ids);
            }
        };
        add(SubjectKey::User(user.name.clone()));
        for g in &user.groups {
            add(SubjectKey::Group(g.clone()));
        }
        found.sort_unstable();
        found.dedup();
        found.into_iter().filter_map(|i| self.all.get(i)).collect()
    }
}

/// The rules that apply to one user in one namespace, resolved once and shared.
#[derive(Debug, Default)]
pub(crate) struct UserRules {
    /// Each applying binding's role rules, with the `RBAC: allowed by ...` reason it gives.
    grants: Vec<(Arc<[PolicyRule]>, Arc<str>)>,
    /// What could not be resolved (a binding to a missing role), kube's wording.
    errors: Vec<String>,
    /// The reason of a refusal: empty, or `RBAC: ` and the errors.
    refusal: Arc<str>,
}

impl UserRules {
    /// Every rule, in binding order.
    pub(crate) fn rules(&self) -> impl Iterator<Item = &PolicyRule> {
        self.grants.iter().flat_map(|(rules, _)| rules.iter())
    }

    /// The resolution errors, as kube aggregates them (one, or `[a, b]`).
    pub(crate) fn error_text(&self) -> Option<String> {
        aggregate(&self.errors)
    }
}

/// kube's `utilerrors.NewAggregate(...).Error()`: the distinct messages, bracketed when more
/// than one.
fn aggregate(errors: &[String]) -> Option<String> {
    let mut distinct: Vec<&str> = Vec::new();
    for e in errors {
        if !distinct.contains(&e.as_str()) {
            distinct.push(e);
        }
    }
    match distinct.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// An immutable view of the RBAC objects, with the rule cache that is valid for it.
#[derive(Debug, Default)]
pub struct Index {
    roles: HashMap<(String, String), Arc<[PolicyRule]>>,
    cluster_roles: HashMap<String, Arc<[PolicyRule]>>,
    cluster_bindings: Bindings,
    namespace_bindings: HashMap<String, Bindings>,
    cache: RwLock<HashMap<String, Arc<UserRules>>>,
    /// The empty reason, shared so that allowing `system:masters` allocates nothing.
    no_reason: Arc<str>,
}

fn rules_of(rules: Option<Vec<PolicyRule>>) -> Arc<[PolicyRule]> {
    rules.unwrap_or_default().into()
}

impl Index {
    /// The index of `objects`.
    pub fn build<'a>(objects: impl IntoIterator<Item = &'a RbacObject>) -> Index {
        let mut index = Index::default();
        for obj in objects {
            match obj.clone() {
                RbacObject::Role(r) => {
                    let ns = r.metadata.namespace.unwrap_or_default();
                    let name = r.metadata.name.unwrap_or_default();
                    index.roles.insert((ns, name), rules_of(r.rules));
                }
                RbacObject::ClusterRole(r) => {
                    index
                        .cluster_roles
                        .insert(r.metadata.name.unwrap_or_default(), rules_of(r.rules));
                }
                RbacObject::RoleBinding(b) => {
                    let ns = b.metadata.namespace.unwrap_or_default();
                    let name = b.metadata.name.unwrap_or_default();
                    index
                        .namespace_bindings
                        .entry(ns.clone())
                        .or_default()
                        .add(Binding {
                            described: format!("RoleBinding {}", quoted(&format!("{name}/{ns}"))),
                            namespace: ns,
                            role_ref: b.role_ref,
                            subjects: b.subjects.unwrap_or_default(),
                        });
                }
                RbacObject::ClusterRoleBinding(b) => {
                    let name = b.metadata.name.unwrap_or_default();
                    index.cluster_bindings.add(Binding {
                        described: format!("ClusterRoleBinding {}", quoted(&name)),
                        namespace: String::new(),
                        role_ref: b.role_ref,
                        subjects: b.subjects.unwrap_or_default(),
                    });
                }
            }
        }
        index
    }

    /// The rules a role reference of a binding in `namespace` (`""` for a ClusterRoleBinding)
    /// grants, or the error kube's authorizer reports when they cannot be found.
    pub(crate) fn role_ref_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Arc<[PolicyRule]>, String> {
        let missing = |kind: &str| format!("{kind}.{RBAC_GROUP} {} not found", quoted(&role_ref.name));
        match role_ref.kind.as_str() {
            "Role" => self
                .roles
                .get(&(namespace.to_string(), role_ref.name.clone()))
                .cloned()
                .ok_or_else(|| missing("role")),
            "ClusterRole" => self
                .cluster_roles
                .get(&role_ref.name)
                .cloned()
                .ok_or_else(|| missing("clusterrole")),
            other => Err(format!("unsupported role reference kind: {}", quoted(other))),
        }
    }

    fn resolve(&self, user: &UserInfo, namespace: &str) -> UserRules {
        let mut out = UserRules::default();
        let mut visit = |binding: &Binding| {
            let Some(subject) = binding
                .subjects
                .iter()
                .find(|s| rbac::applies_to(user, s, &binding.namespace))
            else {
                return;
            };
            match self.role_ref_rules(&binding.role_ref, &binding.namespace) {
                Ok(rules) => {
                    let reason = format!(
                        "RBAC: allowed by {} of {} {} to {}",
                        binding.described,
                        binding.role_ref.kind,
                        quoted(&binding.role_ref.name),
                        rbac::describe_subject(subject, &binding.namespace),
                    );
                    out.grants.push((rules, reason.into()));
                }
                Err(e) => out.errors.push(e),
            }
        };
        self.cluster_bindings.of(user).into_iter().for_each(&mut visit);
        if !namespace.is_empty() {
            if let Some(bindings) = self.namespace_bindings.get(namespace) {
                bindings.of(user).into_iter().for_each(&mut visit);
            }
        }
        out.refusal = match out.error_text() {
            Some(e) => format!("RBAC: {e}").into(),
            None => self.no_reason.clone(),
        };
        out
    }

    /// The rules that apply to `user` in `namespace` (`""`: cluster-wide grants only), from
    /// the cache when they were resolved before.
    pub(crate) fn user_rules(&self, user: &UserInfo, namespace: &str) -> Arc<UserRules> {
        let mut key = String::with_capacity(user.name.len() + namespace.len() + 32);
        key.push_str(&user.name);
        for g in &user.groups {
            key.push('\0');
            key.push_str(g);
        }
        key.push('\u{1}');
        key.push_str(namespace);
        if let Some(hit) = self.cache.read().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return hit.clone();
        }
        let resolved = Arc::new(self.resolve(user, namespace));
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHED_USERS {
            cache.clear();
        }
        cache.insert(key, resolved.clone());
        resolved
    }

    /// The decision for `attrs` (kube's RBAC authorizer behind the `system:masters`
    /// privileged-group authorizer).
    pub fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        if attrs.user.in_group(SYSTEM_MASTERS) {
            return Decision::Allow(self.no_reason.clone());
        }
        let rules = self.user_rules(attrs.user, attrs.namespace());
        for (grant, reason) in &rules.grants {
            if grant.iter().any(|r| rbac::rule_allows(attrs, r)) {
                return Decision::Allow(reason.clone());
            }
        }
        Decision::NoOpinion(rules.refusal.clone())
    }
}

/// What a user may do in a namespace, as a SelfSubjectRulesReview reports it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RulesReview {
    /// The rules over resources.
    pub resource_rules: Vec<ResourceRule>,
    /// The rules over non-resource paths.
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Whether some rules could not be resolved (a binding to a missing role): the lists may
    /// then be short of what the user is allowed.
    pub incomplete: bool,
    /// Why they are incomplete (`status.evaluationError`), empty when complete.
    pub evaluation_error: String,
}

impl RulesReview {
    fn add(&mut self, rule: &PolicyRule) {
        if rule.resources.as_ref().is_some_and(|r| !r.is_empty()) {
            self.resource_rules.push(ResourceRule {
                verbs: rule.verbs.clone(),
                api_groups: rule.api_groups.clone(),
                resources: rule.resources.clone(),
                resource_names: rule.resource_names.clone(),
            });
        }
        if rule.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()) {
            self.non_resource_rules.push(NonResourceRule {
                verbs: rule.verbs.clone(),
                non_resource_urls: rule.non_resource_urls.clone(),
            });
        }
    }
}

/// The state the authorizer's clones share.
struct Shared {
    index: RwLock<Arc<Index>>,
    synced: AtomicBool,
}

/// The RBAC authorizer of a replica (cheap to clone; clones share the index).
#[derive(Clone)]
pub struct Authorizer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("synced", &self.synced())
            .finish()
    }
}

impl Authorizer {
    fn with_index(index: Index, synced: bool) -> Authorizer {
        Authorizer {
            shared: Arc::new(Shared {
                index: RwLock::new(Arc::new(index)),
                synced: AtomicBool::new(synced),
            }),
        }
    }

    /// An authorizer that follows the RBAC objects of `cache`. It starts a task (on the
    /// current Tokio runtime) that ends when the last clone is dropped.
    pub fn start(cache: WatchCache) -> Authorizer {
        Authorizer::following(cache)
    }

    /// An authorizer that follows `source`.
    pub(crate) fn following(source: impl Source) -> Authorizer {
        let authorizer = Authorizer::with_index(Index::default(), false);
        tokio::spawn(follow(source, Arc::downgrade(&authorizer.shared)));
        authorizer
    }

    /// An authorizer over a fixed set of objects (`Role`, `ClusterRole`, `RoleBinding`,
    /// `ClusterRoleBinding` as JSON; others are ignored): for tests and tools.
    pub fn from_values<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Authorizer {
        let decoded: Vec<RbacObject> = objects.into_iter().filter_map(RbacObject::from_value).collect();
        Authorizer::with_index(Index::build(&decoded), true)
    }

    /// Whether the authorizer has loaded the synced watch cache's RBAC objects (until then it
    /// allows only `system:masters`).
    pub fn synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// The current index.
    pub fn index(&self) -> Arc<Index> {
        self.shared
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn replace(&self, index: Index, synced: bool) {
        *self.shared.index.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(index);
        self.shared.synced.store(synced, Ordering::Release);
    }

    /// Whether `attrs` is allowed, and why.
    pub fn authorize(&self, attrs: &Attributes<'_>) -> Decision {
        self.index().authorize(attrs)
    }

    /// `Ok` when `attrs` is allowed, else kube-apiserver's `403` for it (with the
    /// authorizer's reason).
    pub fn check(&self, attrs: &Attributes<'_>) -> ApiResult<()> {
        let decision = self.authorize(attrs);
        if decision.is_allowed() {
            Ok(())
        } else {
            Err(forbidden_error(attrs, decision.reason()))
        }
    }

    /// Everything `user` may do in `namespace` (`""` for what it may do cluster-wide), for a
    /// SelfSubjectRulesReview: the rules RBAC grants (as in kube, `system:masters` is listed
    /// with what its bindings grant, `cluster-admin` by default, not with a rule of its own).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesReview {
        let mut review = RulesReview::default();
        let rules = self.index().user_rules(user, namespace);
        rules.rules().for_each(|r| review.add(r));
        if let Some(e) = rules.error_text() {
            review.incomplete = true;
            review.evaluation_error = e;
        }
        review
    }
}

/// What a [`Source`] lists.
pub(crate) struct Listing {
    /// The objects under the prefix, by key.
    pub(crate) objects: Vec<(String, Arc<CachedObject>)>,
    /// Whether they are the synced store's (not an empty cache still loading).
    pub(crate) synced: bool,
    /// The batches published after them.
    pub(crate) live: broadcast::Receiver<Arc<Published>>,
}

/// Where the follower reads the RBAC objects: the watch cache, or a stand-in in tests.
pub(crate) trait Source: Send + 'static {
    /// The objects under `prefix` now, and the changes after them.
    fn list_and_watch(&self, prefix: &str) -> Listing;
    /// Whether the source has loaded the store (a listing before that is incomplete).
    fn synced(&self) -> bool;
}

impl Source for WatchCache {
    fn list_and_watch(&self, prefix: &str) -> Listing {
        let synced = self.synced();
        let (snapshot, live) = WatchCache::list_and_watch(self, prefix);
        Listing {
            objects: snapshot.objects,
            synced,
            live,
        }
    }

    fn synced(&self) -> bool {
        WatchCache::synced(self)
    }
}

/// How often a follower that listed an unsynced cache looks whether it has loaded since.
const SYNC_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Keeps the authorizer's index equal to the cache's RBAC objects: lists them, then applies
/// each batch of changes to them and swaps in a new index; lists again after a reset, when it
/// fell behind, and once a cache that was still loading when it listed has loaded (a replica
/// restarted on a quiet cluster sees no change that would tell it). Ends when the authorizer
/// is gone or the cache stops.
async fn follow(source: impl Source, shared: Weak<Shared>) {
    let prefix = rbac_prefix();
    'list: loop {
        let Listing {
            objects: listed,
            synced,
            mut live,
        } = source.list_and_watch(&prefix);
        let mut objects: BTreeMap<String, RbacObject> = listed
            .iter()
            .filter_map(|(k, o)| Some((k.clone(), RbacObject::from_cached(k, o)?)))
            .collect();
        let Some(shared_now) = shared.upgrade() else {
            return;
        };
        Authorizer { shared: shared_now }.replace(Index::build(objects.values()), synced);
        loop {
            // One index per burst: every batch already waiting is applied before rebuilding.
            let first = if synced {
                live.recv().await
            } else {
                match tokio::time::timeout(SYNC_POLL, live.recv()).await {
                    Ok(next) => next,
                    Err(_) if source.synced() => continue 'list,
                    Err(_) => continue,
                }
            };
            let mut received = Some(first);
            let mut changed = false;
            while let Some(next) = received.take() {
                match next {
                    Ok(batch) => match &*batch {
                        Published::Changes { events, .. } => {
                            for e in events.iter().filter(|e| e.key.starts_with(&prefix)) {
                                apply(&mut objects, e);
                                changed = true;
                            }
                        }
                        Published::Reset => continue 'list,
                    },
                    Err(RecvError::Lagged(_)) => continue 'list,
                    Err(RecvError::Closed) => return,
                }
                received = match live.try_recv() {
                    Ok(batch) => Some(Ok(batch)),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
                    Err(TryRecvError::Closed) => Some(Err(RecvError::Closed)),
                };
            }
            if changed {
                let Some(shared_now) = shared.upgrade() else {
                    return;
                };
                Authorizer { shared: shared_now }.replace(Index::build(objects.values()), synced);
            }
        }
    }
}

/// Applies one change to the followed objects.
fn apply(objects: &mut BTreeMap<String, RbacObject>, event: &CacheEvent) {
    match &event.change {
        Change::Put(obj) => match RbacObject::from_cached(&event.key, obj) {
            Some(decoded) => {
                objects.insert(event.key.clone(), decoded);
            }
            None => {
                objects.remove(&event.key);
            }
        },
        Change::Deleted(_) | Change::Corrupt(_) => {
            objects.remove(&event.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::authorization::ResourceAttributes;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    fn fixtures() -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1",
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "health"},
                "rules": [{"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}]}),
            json!({"kind": "Role", "metadata": {"name": "cm-editor", "namespace": "shop"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
                          {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["token"], "verbs": ["get"]}]}),
            // A namespaced grant of a ClusterRole.
            json!({"kind": "RoleBinding", "metadata": {"name": "read-pods", "namespace": "shop"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
                "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "edit-cm", "namespace": "shop"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-editor"},
                "subjects": [{"kind": "Group", "name": "shopkeepers"},
                             {"kind": "ServiceAccount", "name": "builder"}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "health"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "health"},
                "subjects": [{"kind": "Group", "name": "system:authenticated"}]}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "ops-pods"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "monitor", "namespace": "ops"}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "dangling", "namespace": "shop"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "gone"},
                "subjects": [{"kind": "User", "name": "carol"}]}),
        ]
    }

    fn authorizer() -> Authorizer {
        Authorizer::from_values(&fixtures())
    }

    fn can(
        a: &Authorizer,
        u: &UserInfo,
        verb: &str,
        resource: &str,
        sub: &str,
        ns: &str,
        name: &str,
    ) -> bool {
        a.authorize(&Attributes::resource(
            u,
            verb,
            ResourceAttributes {
                resource,
                subresource: sub,
                namespace: ns,
                name,
                ..ResourceAttributes::default()
            },
        ))
        .is_allowed()
    }

    #[test]
    fn a_role_binding_grants_a_cluster_role_only_in_its_namespace() {
        let a = authorizer();
        let alice = user("alice", &["system:authenticated"]);
        assert!(can(&a, &alice, "list", "pods", "", "shop", ""));
        assert!(can(&a, &alice, "get", "pods", "log", "shop", "p"));
        assert!(!can(&a, &alice, "list", "pods", "", "other", ""));
        assert!(!can(&a, &alice, "list", "pods", "", "", ""));
        assert!(!can(&a, &alice, "delete", "pods", "", "shop", "p"));
        assert!(!can(&a, &alice, "get", "pods", "status", "shop", "p"));
    }

    #[test]
    fn a_cluster_role_binding_grants_everywhere() {
        let a = authorizer();
        let monitor = user("system:serviceaccount:ops:monitor", &["system:serviceaccounts"]);
        assert!(can(&a, &monitor, "list", "pods", "", "", ""));
        assert!(can(&a, &monitor, "get", "pods", "", "anywhere", "p"));
        let other_sa = user("system:serviceaccount:shop:monitor", &["system:serviceaccounts"]);
        assert!(!can(&a, &other_sa, "list", "pods", "", "", ""));
    }

    #[test]
    fn groups_service_accounts_and_resource_names_are_honoured() {
        let a = authorizer();
        let keeper = user("dave", &["shopkeepers", "system:authenticated"]);
        assert!(can(&a, &keeper, "create", "configmaps", "", "shop", ""));
        assert!(can(&a, &keeper, "get", "secrets", "", "shop", "token"));
        assert!(!can(&a, &keeper, "get", "secrets", "", "shop", "other"));
        assert!(!can(&a, &keeper, "list", "secrets", "", "shop", ""));
        let builder = user("system:serviceaccount:shop:builder", &["system:serviceaccounts"]);
        assert!(can(&a, &builder, "update", "configmaps", "", "shop", "x"));
        let stranger = user("erin", &["system:authenticated"]);
        assert!(!can(&a, &stranger, "get", "configmaps", "", "shop", "x"));
    }

    #[test]
    fn non_resource_urls_and_system_masters() {
        let a = authorizer();
        let alice = user("alice", &["system:authenticated"]);
        assert!(a
            .authorize(&Attributes::non_resource(&alice, "get", "/healthz"))
            .is_allowed());
        assert!(a
            .authorize(&Attributes::non_resource(&alice, "get", "/apis/apps"))
            .is_allowed());
        assert!(!a
            .authorize(&Attributes::non_resource(&alice, "get", "/metrics"))
            .is_allowed());
        let anonymous = UserInfo::anonymous();
        assert!(!a
            .authorize(&Attributes::non_resource(&anonymous, "get", "/healthz"))
            .is_allowed());
        let root = user("root", &["system:masters"]);
        assert!(can(&a, &root, "delete", "nodes", "", "", "n1"));
        assert!(a
            .authorize(&Attributes::non_resource(&root, "post", "/anything"))
            .is_allowed());
        assert!(can(
            &Authorizer::from_values(&[]),
            &root,
            "get",
            "secrets",
            "",
            "x",
            "y"
        ));
    }

    #[test]
    fn reasons_name_the_binding_or_the_missing_role() {
        let a = authorizer();
        let alice = user("alice", &["system:authenticated"]);
        let d = a.authorize(&Attributes::resource(
            &alice,
            "get",
            ResourceAttributes {
                resource: "pods",
                namespace: "shop",
                ..ResourceAttributes::default()
            },
        ));
        assert_eq!(
            d.reason(),
            r#"RBAC: allowed by RoleBinding "read-pods/shop" of ClusterRole "pod-reader" to User "alice""#
        );
        let carol = user("carol", &["system:authenticated"]);
        let d = a.authorize(&Attributes::resource(
            &carol,
            "get",
            ResourceAttributes {
                resource: "pods",
                namespace: "shop",
                ..ResourceAttributes::default()
            },
        ));
        assert_eq!(
            d,
            Decision::NoOpinion(r#"RBAC: role.rbac.authorization.k8s.io "gone" not found"#.into())
        );
        assert_eq!(
            aggregate(&["a".into(), "b".into(), "a".into()]).as_deref(),
            Some("[a, b]")
        );
    }

    #[test]
    fn rules_for_lists_resource_and_url_rules_and_says_when_incomplete() {
        let a = authorizer();
        let alice = user("alice", &["system:authenticated"]);
        let review = a.rules_for(&alice, "shop");
        assert_eq!(review.resource_rules.len(), 1);
        assert_eq!(review.resource_rules[0].verbs, vec!["get", "list"]);
        assert_eq!(review.non_resource_rules.len(), 1);
        assert!(!review.incomplete);
        let cluster = a.rules_for(&alice, "");
        assert!(cluster.resource_rules.is_empty());
        let carol = a.rules_for(&user("carol", &[]), "shop");
        assert!(carol.incomplete);
        assert_eq!(
            carol.evaluation_error,
            r#"role.rbac.authorization.k8s.io "gone" not found"#
        );
        // system:masters is allowed everything, but lists only what RBAC grants it.
        let root = a.rules_for(&user("root", &["system:masters"]), "");
        assert_eq!(root, RulesReview::default());
    }

    #[test]
    fn a_new_index_drops_the_cached_rules() {
        let a = authorizer();
        let bob = user("bob", &[]);
        assert!(!can(&a, &bob, "list", "pods", "", "shop", ""));
        let mut objects = fixtures();
        objects.push(
            json!({"kind": "RoleBinding", "metadata": {"name": "bob", "namespace": "shop"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
            "subjects": [{"kind": "User", "name": "bob"}]}),
        );
        let decoded: Vec<RbacObject> = objects.iter().filter_map(RbacObject::from_value).collect();
        a.replace(Index::build(&decoded), true);
        assert!(can(&a, &bob, "list", "pods", "", "shop", ""));
    }

    #[test]
    fn objects_that_do_not_decode_are_ignored() {
        assert!(RbacObject::from_value(&json!({"kind": "Role", "metadata": {"name": 3}})).is_none());
        assert!(RbacObject::from_value(&json!({"kind": "Pod", "metadata": {"name": "p"}})).is_none());
        assert!(RbacObject::decode("roles", b"{\"rules\": 1}").is_none());
    }

    /// Stored objects by key.
    type Objects = Vec<(String, Arc<CachedObject>)>;

    /// A stand-in for the watch cache: a list the test sets and batches it publishes.
    struct FakeCache {
        objects: Arc<std::sync::Mutex<Objects>>,
        publish: broadcast::Sender<Arc<Published>>,
    }

    impl Source for FakeCache {
        fn list_and_watch(&self, _prefix: &str) -> Listing {
            Listing {
                objects: self.objects.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                synced: true,
                live: self.publish.subscribe(),
            }
        }

        fn synced(&self) -> bool {
            true
        }
    }

    fn stored(obj: Value) -> (String, Arc<CachedObject>) {
        let plural = match obj["kind"].as_str() {
            Some("ClusterRole") => "clusterroles",
            Some("ClusterRoleBinding") => "clusterrolebindings",
            Some("RoleBinding") => "rolebindings",
            _ => "roles",
        };
        let ns = obj["metadata"]["namespace"].as_str().map(str::to_string);
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = keys::object(RBAC_GROUP, plural, ns.as_deref(), &name);
        let cached = CachedObject::new(&key, obj, 1);
        (key, cached)
    }

    fn batch(rev: i64, key: &str, change: Change) -> Arc<Published> {
        Arc::new(Published::Changes {
            events: vec![Arc::new(CacheEvent {
                rev,
                key: key.to_string(),
                change,
                prev: None,
            })],
            revision: rev,
            shared: Default::default(),
        })
    }

    /// Waits (up to two seconds) until `cond` holds.
    async fn eventually(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..200 {
            if cond() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("never: {what}");
    }

    #[tokio::test]
    async fn the_authorizer_follows_changes_resets_and_stops_when_dropped() {
        let role = stored(json!({"kind": "ClusterRole", "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}));
        let binding = stored(
            json!({"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "shop"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "pod-reader"},
            "subjects": [{"kind": "User", "name": "bob"}]}),
        );
        let objects = Arc::new(std::sync::Mutex::new(vec![role]));
        let publish = broadcast::channel(16).0;
        let a = Authorizer::following(FakeCache {
            objects: objects.clone(),
            publish: publish.clone(),
        });
        let bob = user("bob", &[]);
        eventually("synced", || a.synced()).await;
        assert!(!can(&a, &bob, "list", "pods", "", "shop", ""));

        publish
            .send(batch(2, &binding.0, Change::Put(binding.1.clone())))
            .expect("the follower listens");
        eventually("bob's binding applies", || {
            can(&a, &bob, "list", "pods", "", "shop", "")
        })
        .await;

        publish
            .send(batch(3, &binding.0, Change::Deleted(binding.1.clone())))
            .expect("the follower listens");
        eventually("bob's binding is gone", || {
            !can(&a, &bob, "list", "pods", "", "shop", "")
        })
        .await;

        // After a reset the follower lists again.
        objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(binding.clone());
        publish
            .send(Arc::new(Published::Reset))
            .expect("the follower listens");
        eventually("the relisted binding applies", || {
            can(&a, &bob, "list", "pods", "", "shop", "")
        })
        .await;

        // Changes outside RBAC change nothing.
        let pod_key = keys::object("", "pods", Some("shop"), "p");
        let pod = CachedObject::new(&pod_key, json!({"metadata": {"name": "p"}}), 5);
        publish
            .send(batch(5, &pod_key, Change::Put(pod)))
            .expect("the follower listens");

        drop(a);
        publish
            .send(batch(6, &binding.0, Change::Deleted(binding.1.clone())))
            .expect("the follower listens");
        eventually("the follower stopped", || publish.receiver_count() == 0).await;
    }
}
