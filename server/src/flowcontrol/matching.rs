//! Whether a FlowSchema's rules match a request, as kube-apiserver's priority and fairness
//! decides it: a rule matches when one of its subjects is the requester and one of its
//! resource rules (for a request on a resource) or non-resource rules (for any other path)
//! covers what the request does.

use k8s_openapi::api::flowcontrol::v1::{
    NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};

/// Everything in a rule's list.
const ALL: &str = "*";
/// The prefix of a ServiceAccount's user name.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Who makes a request and what it asks for, as classification sees it.
#[derive(Debug, Clone, Copy)]
pub struct Descriptor<'a> {
    /// The user name.
    pub user: &'a str,
    /// The user's groups.
    pub groups: &'a [String],
    /// What the request is for.
    pub target: Target<'a>,
}

/// What a request is for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A resource: its verb as RBAC names it, API group, plural, subresource and namespace
    /// (`None` for a cluster-scoped resource and for lists over all namespaces).
    Resource {
        /// `get`, `list`, `create`, ...
        verb: &'a str,
        /// The API group (`""` for the core group).
        group: &'a str,
        /// The plural resource name.
        resource: &'a str,
        /// The subresource, if any.
        subresource: Option<&'a str>,
        /// The namespace in the path.
        namespace: Option<&'a str>,
    },
    /// Any other path, with the method's verb in lower case.
    NonResource {
        /// `get`, `post`, ...
        verb: &'a str,
        /// The request path.
        path: &'a str,
    },
}

impl Descriptor<'_> {
    /// The namespace a request is in (`""` for a cluster-scoped one and for other paths):
    /// what `ByNamespace` tells flows apart by.
    pub fn namespace(&self) -> &str {
        match self.target {
            Target::Resource { namespace, .. } => namespace.unwrap_or_default(),
            Target::NonResource { .. } => "",
        }
    }
}

/// Whether any of `rules` matches `d`.
pub fn any_rule_matches(rules: &[PolicyRulesWithSubjects], d: &Descriptor) -> bool {
    rules.iter().any(|rule| rule_matches(rule, d))
}

fn rule_matches(rule: &PolicyRulesWithSubjects, d: &Descriptor) -> bool {
    if !rule.subjects.iter().any(|s| subject_matches(s, d)) {
        return false;
    }
    match d.target {
        Target::Resource { .. } => rule
            .resource_rules
            .iter()
            .flatten()
            .any(|r| resource_rule_matches(r, &d.target)),
        Target::NonResource { verb, path } => rule
            .non_resource_rules
            .iter()
            .flatten()
            .any(|r| non_resource_rule_matches(r, verb, path)),
    }
}

fn subject_matches(subject: &Subject, d: &Descriptor) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == ALL || u.name == d.user),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == ALL || d.groups.contains(&g.name)),
        "ServiceAccount" => {
            let Some(sa) = &subject.service_account else {
                return false;
            };
            let Some((namespace, name)) = d
                .user
                .strip_prefix(SERVICE_ACCOUNT_PREFIX)
                .and_then(|rest| rest.split_once(':'))
            else {
                return false;
            };
            sa.namespace == namespace && (sa.name == ALL || sa.name == name)
        }
        _ => false,
    }
}

/// `list` is `["*"]` or holds `item` (a `*` among other entries is no wildcard).
fn covers(list: &[String], item: &str) -> bool {
    matches!(list, [only] if only == ALL) || list.iter().any(|x| x == item)
}

fn resource_rule_matches(rule: &ResourcePolicyRule, target: &Target) -> bool {
    let Target::Resource {
        verb,
        group,
        resource,
        subresource,
        namespace,
    } = *target
    else {
        return false;
    };
    let resource_matches = match subresource {
        Some(sub) => covers(&rule.resources, &format!("{resource}/{sub}")),
        None => covers(&rule.resources, resource),
    };
    let namespace_matches = match namespace {
        None | Some("") => rule.cluster_scope == Some(true),
        Some(ns) => covers(rule.namespaces.as_deref().unwrap_or_default(), ns),
    };
    covers(&rule.verbs, verb) && covers(&rule.api_groups, group) && resource_matches && namespace_matches
}

/// Every URL of a rule is a directory: `/healthz` covers `/healthz/etcd` too, `/apis/*` covers
/// what is under `/apis/` (but not `/apis` itself).
fn non_resource_rule_matches(rule: &NonResourcePolicyRule, verb: &str, path: &str) -> bool {
    covers(&rule.verbs, verb)
        && rule.non_resource_urls.iter().any(|url| {
            if url == ALL || url == path {
                return true;
            }
            let prefix = url.strip_suffix('*').unwrap_or(url);
            match prefix.ends_with('/') {
                true => path.starts_with(prefix),
                false => path
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with('/')),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: serde_json::Value) -> Vec<PolicyRulesWithSubjects> {
        serde_json::from_value(v).expect("rules")
    }

    fn resource<'a>(verb: &'a str, resource: &'a str, namespace: Option<&'a str>) -> Target<'a> {
        Target::Resource {
            verb,
            group: "",
            resource,
            subresource: None,
            namespace,
        }
    }

    #[test]
    fn subjects_users_groups_and_service_accounts() {
        let r = rules(json!([{
            "subjects": [
                {"kind": "User", "user": {"name": "alice"}},
                {"kind": "Group", "group": {"name": "ops"}},
                {"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true, "namespaces": ["*"]}]}]));
        let target = resource("get", "pods", Some("a"));
        let ops = ["ops".to_string()];
        let m = |user, groups: &[String]| any_rule_matches(&r, &Descriptor { user, groups, target });
        assert!(m("alice", &[]));
        assert!(!m("bob", &[]));
        assert!(m("bob", &ops));
        assert!(m("system:serviceaccount:kube-system:x", &[]));
        assert!(!m("system:serviceaccount:default:x", &[]));
    }

    #[test]
    fn resource_rules_verbs_groups_subresources_and_scope() {
        let r = rules(json!([{
            "subjects": [{"kind": "User", "user": {"name": "*"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""],
                "resources": ["pods", "nodes/status"], "namespaces": ["a"]},
                {"verbs": ["patch", "*"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["*"]}]}]));
        let m = |target| {
            any_rule_matches(
                &r,
                &Descriptor {
                    user: "u",
                    groups: &[],
                    target,
                },
            )
        };
        assert!(m(resource("get", "pods", Some("a"))));
        assert!(!m(resource("get", "pods", Some("b"))));
        assert!(!m(resource("delete", "pods", Some("a"))));
        // `*` is a wildcard only on its own.
        assert!(m(resource("patch", "pods", Some("b"))));
        assert!(!m(resource("update", "pods", Some("b"))));
        // Cluster-scoped requests need clusterScope.
        assert!(!m(resource("list", "pods", None)));
        let status = Target::Resource {
            verb: "get",
            group: "",
            resource: "nodes",
            subresource: Some("status"),
            namespace: Some("a"),
        };
        assert!(m(status));
        let pod_status = Target::Resource {
            verb: "get",
            group: "",
            resource: "pods",
            subresource: Some("status"),
            namespace: Some("a"),
        };
        assert!(!m(pod_status), "pods does not cover pods/status");
        // Resource rules say nothing of other paths.
        assert!(!m(Target::NonResource {
            verb: "get",
            path: "/healthz"
        }));
    }

    #[test]
    fn non_resource_urls_exact_and_prefix() {
        let r = rules(json!([{
            "subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz/*"]}]}]));
        let m = |path| {
            any_rule_matches(
                &r,
                &Descriptor {
                    user: "u",
                    groups: &[],
                    target: Target::NonResource { verb: "get", path },
                },
            )
        };
        assert!(m("/healthz"));
        assert!(m("/healthz/etcd"));
        assert!(!m("/healthzz"));
        assert!(m("/readyz/ping"));
        assert!(!m("/readyz"));
        assert!(!m("/readyzz"));
    }
}
