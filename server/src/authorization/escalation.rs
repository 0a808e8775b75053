//! Escalation prevention: RBAC must not be a way around RBAC. A user may write a Role or
//! ClusterRole only with rules they already hold where it applies, unless they may `escalate`
//! it; and may bind a role only if they hold all its rules there, unless they may `bind` it
//! (resourceNames honoured). Members of `system:masters` may do either. The checks and their
//! messages are kube-apiserver's (the rbac registry's policy-based storage over
//! `ConfirmNoEscalation`, `BindingAuthorized` and `RoleEscalationAuthorized`).
//!
//! The registry's write path calls [`Authorizer::check_write`] for the four RBAC resources
//! (it lets every other write through), after the object is decoded and before it is stored.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef};
use serde_json::{json, Value};

use crate::authentication::user::{UserInfo, SYSTEM_MASTERS};
use crate::authorization::authorizer::Index;
use crate::authorization::rbac::{self, ALL, RBAC_GROUP};
use crate::authorization::{quoted, quoted_list, Attributes, Authorizer, ResourceAttributes};
use crate::machinery::errors::{ApiError, ApiResult};

/// Which of the two role types a write is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleKind {
    /// A namespaced Role.
    Role,
    /// A ClusterRole.
    ClusterRole,
}

impl RoleKind {
    /// The resource (plural).
    pub fn resource(self) -> &'static str {
        match self {
            RoleKind::Role => "roles",
            RoleKind::ClusterRole => "clusterroles",
        }
    }
}

/// A Role or ClusterRole about to be created or updated.
#[derive(Debug, Clone, Copy)]
pub struct RoleWrite<'a> {
    /// Role or ClusterRole.
    pub kind: RoleKind,
    /// The object's name.
    pub name: &'a str,
    /// The name in the request path: `""` for a create (POST), the name for an update. The
    /// `escalate` permission is checked against it, as kube checks it.
    pub request_name: &'a str,
    /// The rules the object will hold.
    pub rules: &'a [PolicyRule],
    /// Whether the new object, or the one it replaces, has an `aggregationRule` with
    /// selectors (which takes cluster-admin rights to set or change).
    pub aggregation_rule: bool,
}

/// A write of one of the four RBAC resources, as the registry sees it.
#[derive(Debug, Clone, Copy)]
pub struct RbacWrite<'a> {
    /// The API group of the resource written.
    pub group: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The namespace of the request (`""` for cluster-scoped resources).
    pub namespace: &'a str,
    /// The object as it is about to be stored.
    pub new: &'a Value,
    /// The stored object an update replaces (`None` for a create).
    pub old: Option<&'a Value>,
}

/// Everything, on everything: what it takes to set an aggregation rule.
fn full_authority() -> Vec<PolicyRule> {
    let all = || Some(vec![ALL.to_string()]);
    vec![
        PolicyRule {
            verbs: vec![ALL.into()],
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: vec![ALL.into()],
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// kube's `NewForbidden` for an RBAC object: `roles.rbac.authorization.k8s.io "x" is
/// forbidden: ...` (without the name when it is empty).
fn forbidden(resource: &str, name: &str, why: &str) -> ApiError {
    let what = format!("{resource}.{RBAC_GROUP}");
    let message = if name.is_empty() {
        format!("{what} is forbidden: {why}")
    } else {
        format!("{what} {} is forbidden: {why}", quoted(name))
    };
    let mut details = json!({"group": RBAC_GROUP, "kind": resource});
    if !name.is_empty() {
        details["name"] = json!(name);
    }
    ApiError {
        code: 403,
        reason: "Forbidden",
        message,
        details: Some(details),
        retry_after: None,
        continue_token: None,
    }
}

/// Why `rules` cannot be granted by `user` in `namespace`, worded as kube's
/// `ConfirmNoEscalation` words it; `None` when the user holds them all.
fn escalation(index: &Index, user: &UserInfo, namespace: &str, rules: &[PolicyRule]) -> Option<String> {
    let held = index.user_rules(user, namespace);
    let owner: Vec<PolicyRule> = held.rules().cloned().collect();
    let missing = rbac::uncovered(&owner, rules);
    if missing.is_empty() {
        return None;
    }
    let described: BTreeSet<String> = rbac::compact(missing).iter().map(rbac::compact_string).collect();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quoted(&user.name),
        quoted_list(&user.groups),
        described.into_iter().collect::<Vec<_>>().join("\n"),
    );
    if let Some(errors) = held.error_text() {
        msg.push_str(&format!("; resolution errors: [{errors}]"));
    }
    Some(msg)
}

/// Whether only what the garbage collector changes (owner references, finalizers) differs
/// between an update and the stored object: such updates are never escalations.
fn only_gc_fields_change(new: &Value, old: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in [
                "ownerReferences",
                "finalizers",
                "selfLink",
                "resourceVersion",
                "managedFields",
            ] {
                meta.remove(field);
            }
        }
        v
    };
    strip(new) == strip(old)
}

fn decode<T: serde::de::DeserializeOwned>(obj: &Value) -> ApiResult<T> {
    T::deserialize(obj).map_err(|e| ApiError::bad_request(format!("the object cannot be decoded: {e}")))
}

impl Authorizer {
    /// Checks a create or update of a Role (in `namespace`) or a ClusterRole (`namespace` is
    /// `""`): allowed to `system:masters`, to a user who may `escalate` it, and to a user who
    /// holds every rule it will hold; an aggregation rule takes cluster-admin rights.
    /// The error is kube's `403` (`roles.rbac.authorization.k8s.io "x" is forbidden: user
    /// "alice" (groups=[...]) is attempting to grant RBAC permissions not currently held: ...`).
    pub fn check_role_write(&self, user: &UserInfo, namespace: &str, role: &RoleWrite<'_>) -> ApiResult<()> {
        if user.in_group(SYSTEM_MASTERS) {
            return Ok(());
        }
        let index = self.index();
        let escalate = Attributes::resource(
            user,
            "escalate",
            ResourceAttributes {
                api_group: RBAC_GROUP,
                api_version: "*",
                resource: role.kind.resource(),
                namespace,
                name: role.request_name,
                ..ResourceAttributes::default()
            },
        );
        if index.authorize(&escalate).is_allowed() {
            return Ok(());
        }
        if let Some(why) = escalation(&index, user, namespace, role.rules) {
            return Err(forbidden(role.kind.resource(), role.name, &why));
        }
        if role.kind == RoleKind::ClusterRole
            && role.aggregation_rule
            && escalation(&index, user, namespace, &full_authority()).is_some()
        {
            return Err(forbidden(
                role.kind.resource(),
                role.name,
                "must have cluster-admin privileges to use the aggregationRule",
            ));
        }
        Ok(())
    }

    /// Checks a create or update of a RoleBinding named `binding_name` in `namespace`, or of a
    /// ClusterRoleBinding (`namespace` is `""`), that refers to `role_ref`: allowed to
    /// `system:masters`, to a user who may `bind` the role (its name honoured as a
    /// resourceName), and to a user who holds all the role's rules there. A role that does not
    /// exist is `404` (`clusterroles.rbac.authorization.k8s.io "x" not found`), an escalation
    /// kube's `403`.
    pub fn check_binding_write(
        &self,
        user: &UserInfo,
        namespace: &str,
        binding_name: &str,
        role_ref: &RoleRef,
    ) -> ApiResult<()> {
        if user.in_group(SYSTEM_MASTERS) {
            return Ok(());
        }
        let role_resource = match role_ref.kind.as_str() {
            "Role" => RoleKind::Role.resource(),
            "ClusterRole" => RoleKind::ClusterRole.resource(),
            other => {
                return Err(ApiError::internal(format!(
                    "unsupported role reference kind: {}",
                    quoted(other)
                )))
            }
        };
        let index = self.index();
        let bind = Attributes::resource(
            user,
            "bind",
            ResourceAttributes {
                api_group: &role_ref.api_group,
                resource: role_resource,
                namespace,
                name: &role_ref.name,
                ..ResourceAttributes::default()
            },
        );
        if index.authorize(&bind).is_allowed() {
            return Ok(());
        }
        let rules = index
            .role_ref_rules(role_ref, namespace)
            .map_err(|_| ApiError::not_found(RBAC_GROUP, role_resource, &role_ref.name))?;
        let binding_resource = if namespace.is_empty() {
            "clusterrolebindings"
        } else {
            "rolebindings"
        };
        match escalation(&index, user, namespace, &rules) {
            Some(why) => Err(forbidden(binding_resource, binding_name, &why)),
            None => Ok(()),
        }
    }

    /// The escalation check of any write, for the registry: decodes a Role, ClusterRole,
    /// RoleBinding or ClusterRoleBinding and runs [`Authorizer::check_role_write`] or
    /// [`Authorizer::check_binding_write`]; every other resource, and an update that changes
    /// only owner references or finalizers, passes.
    pub fn check_write(&self, user: &UserInfo, write: &RbacWrite<'_>) -> ApiResult<()> {
        if write.group != RBAC_GROUP || user.in_group(SYSTEM_MASTERS) {
            return Ok(());
        }
        if write.old.is_some_and(|old| only_gc_fields_change(write.new, old)) {
            return Ok(());
        }
        let name_of = |v: &Value| v["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let name = name_of(write.new);
        let request_name = if write.old.is_some() { name.as_str() } else { "" };
        match write.resource {
            "roles" => {
                let role: Role = decode(write.new)?;
                let rules = role.rules.unwrap_or_default();
                let w = RoleWrite {
                    kind: RoleKind::Role,
                    name: &name,
                    request_name,
                    rules: &rules,
                    aggregation_rule: false,
                };
                self.check_role_write(user, write.namespace, &w)
            }
            "clusterroles" => {
                let role: ClusterRole = decode(write.new)?;
                let old: Option<ClusterRole> = write.old.map(decode).transpose()?;
                let aggregation_rule =
                    rbac::is_aggregated(&role) || old.as_ref().is_some_and(rbac::is_aggregated);
                let rules = role.rules.unwrap_or_default();
                let w = RoleWrite {
                    kind: RoleKind::ClusterRole,
                    name: &name,
                    request_name,
                    rules: &rules,
                    aggregation_rule,
                };
                self.check_role_write(user, "", &w)
            }
            "rolebindings" => {
                let binding: RoleBinding = decode(write.new)?;
                self.check_binding_write(user, write.namespace, &name, &binding.role_ref)
            }
            "clusterrolebindings" => {
                let binding: ClusterRoleBinding = decode(write.new)?;
                self.check_binding_write(user, "", &name, &binding.role_ref)
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::authorization::rbac::tests::rule;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        }
    }

    fn crb(name: &str, role: &str, user: &str) -> Value {
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": user}]})
    }

    fn rb(ns: &str, name: &str, role: &str, user: &str) -> Value {
        json!({"kind": "RoleBinding", "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": user}]})
    }

    /// alice reads and writes pods and configmaps in `shop`; bob may bind `pod-reader` there by
    /// name; carol may escalate roles in `shop`; root is cluster-admin by binding.
    fn authorizer() -> Authorizer {
        Authorizer::from_values(&[
            json!({"kind": "ClusterRole", "metadata": {"name": "shop-rw"},
                "rules": [{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["*"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "secret-reader"},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "binder"},
                "rules": [{"apiGroups": [RBAC_GROUP], "resources": ["clusterroles"], "verbs": ["bind"],
                           "resourceNames": ["secret-reader"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "escalator"},
                "rules": [{"apiGroups": [RBAC_GROUP], "resources": ["roles"], "verbs": ["escalate"]}]}),
            json!({"kind": "ClusterRole", "metadata": {"name": "cluster-admin"},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                          {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
            rb("shop", "alice-rw", "shop-rw", "alice"),
            rb("shop", "bob-binds", "binder", "bob"),
            rb("shop", "carol-escalates", "escalator", "carol"),
            crb("root", "cluster-admin", "root"),
        ])
    }

    fn role_write<'a>(rules: &'a [PolicyRule], request_name: &'a str) -> RoleWrite<'a> {
        RoleWrite {
            kind: RoleKind::Role,
            name: "r",
            request_name,
            rules,
            aggregation_rule: false,
        }
    }

    #[test]
    fn a_role_with_rules_the_writer_holds_is_allowed() {
        let a = authorizer();
        let rules = [rule(&["get", "update"], &[""], &["pods"])];
        assert_eq!(
            a.check_role_write(&user("alice"), "shop", &role_write(&rules, "")),
            Ok(())
        );
    }

    #[test]
    fn a_role_with_rules_the_writer_lacks_is_forbidden_with_kubes_message() {
        let a = authorizer();
        let rules = [rule(&["get", "list"], &[""], &["pods", "secrets"])];
        let e = a
            .check_role_write(&user("alice"), "shop", &role_write(&rules, ""))
            .expect_err("alice holds no secrets");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) \
             is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
        );
        // The same rules are not held in another namespace.
        let held = [rule(&["get"], &[""], &["pods"])];
        assert!(a
            .check_role_write(&user("alice"), "other", &role_write(&held, ""))
            .is_err());
    }

    #[test]
    fn escalate_and_system_masters_skip_the_rule_check() {
        let a = authorizer();
        let rules = [rule(&["*"], &["*"], &["*"])];
        assert_eq!(
            a.check_role_write(&user("carol"), "shop", &role_write(&rules, "")),
            Ok(())
        );
        assert!(a
            .check_role_write(&user("carol"), "other", &role_write(&rules, ""))
            .is_err());
        let master = UserInfo {
            name: "m".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        };
        assert_eq!(
            a.check_role_write(&master, "any", &role_write(&rules, "")),
            Ok(())
        );
    }

    #[test]
    fn an_aggregation_rule_takes_cluster_admin() {
        let a = authorizer();
        let w = RoleWrite {
            kind: RoleKind::ClusterRole,
            name: "agg",
            request_name: "",
            rules: &[],
            aggregation_rule: true,
        };
        let e = a
            .check_role_write(&user("alice"), "", &w)
            .expect_err("alice is no admin");
        assert_eq!(
            e.message,
            "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: \
             must have cluster-admin privileges to use the aggregationRule"
        );
        assert_eq!(a.check_role_write(&user("root"), "", &w), Ok(()));
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    #[test]
    fn binding_a_role_the_writer_holds_or_may_bind() {
        let a = authorizer();
        let alice = user("alice");
        assert_eq!(
            a.check_binding_write(&alice, "shop", "b", &role_ref("ClusterRole", "pod-reader")),
            Ok(())
        );
        let e = a
            .check_binding_write(&alice, "shop", "b", &role_ref("ClusterRole", "secret-reader"))
            .expect_err("alice cannot read secrets");
        assert_eq!(e.code, 403);
        assert!(
            e.message.starts_with(
                "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) \
                 is attempting to grant RBAC permissions not currently held:\n"
            ),
            "{}",
            e.message
        );
        // bob may bind secret-reader (by name) in shop, and nothing else.
        let bob = user("bob");
        assert_eq!(
            a.check_binding_write(&bob, "shop", "b", &role_ref("ClusterRole", "secret-reader")),
            Ok(())
        );
        assert!(a
            .check_binding_write(&bob, "shop", "b", &role_ref("ClusterRole", "pod-reader"))
            .is_err());
        assert!(a
            .check_binding_write(&bob, "other", "b", &role_ref("ClusterRole", "secret-reader"))
            .is_err());
        // A ClusterRoleBinding needs the rules cluster-wide.
        let e = a
            .check_binding_write(&alice, "", "c", &role_ref("ClusterRole", "pod-reader"))
            .expect_err("alice holds pods only in shop");
        assert!(e
            .message
            .starts_with("clusterrolebindings.rbac.authorization.k8s.io \"c\" is forbidden"));
    }

    #[test]
    fn binding_a_missing_role_is_not_found() {
        let a = authorizer();
        let e = a
            .check_binding_write(&user("alice"), "shop", "b", &role_ref("ClusterRole", "nope"))
            .expect_err("no such role");
        assert_eq!(e.code, 404);
        assert_eq!(
            e.message,
            "clusterroles.rbac.authorization.k8s.io \"nope\" not found"
        );
        let e = a
            .check_binding_write(&user("alice"), "shop", "b", &role_ref("Robot", "x"))
            .expect_err("no such kind");
        assert_eq!(e.code, 500);
    }

    fn write<'a>(resource: &'a str, new: &'a Value, old: Option<&'a Value>) -> RbacWrite<'a> {
        RbacWrite {
            group: RBAC_GROUP,
            resource,
            namespace: "shop",
            new,
            old,
        }
    }

    #[test]
    fn check_write_dispatches_on_the_resource_and_lets_gc_updates_through() {
        let a = authorizer();
        let alice = user("alice");
        let secrets_role = json!({"kind": "Role", "metadata": {"name": "s", "namespace": "shop"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]});
        assert!(a
            .check_write(&alice, &write("roles", &secrets_role, None))
            .is_err());
        let mut finalized = secrets_role.clone();
        finalized["metadata"]["finalizers"] = json!(["x"]);
        assert_eq!(
            a.check_write(&alice, &write("roles", &finalized, Some(&secrets_role))),
            Ok(())
        );
        let mut relabeled = secrets_role.clone();
        relabeled["metadata"]["labels"] = json!({"a": "b"});
        assert!(a
            .check_write(&alice, &write("roles", &relabeled, Some(&secrets_role)))
            .is_err());
        let other_group = RbacWrite {
            group: "example.com",
            ..write("roles", &secrets_role, None)
        };
        assert_eq!(a.check_write(&alice, &other_group), Ok(()));
        let binding = rb("shop", "b", "secret-reader", "dave");
        assert_eq!(
            a.check_write(&alice, &write("rolebindings", &binding, None))
                .map_err(|e| e.code),
            Err(403)
        );
        let pods = rb("shop", "b", "pod-reader", "dave");
        assert_eq!(a.check_write(&alice, &write("rolebindings", &pods, None)), Ok(()));
        let bad = json!({"kind": "Role", "metadata": {"name": "s"}, "rules": "no"});
        assert_eq!(
            a.check_write(&alice, &write("roles", &bad, None))
                .map_err(|e| e.code),
            Err(400)
        );
    }
}
