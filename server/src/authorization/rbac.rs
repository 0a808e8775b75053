//! RBAC's semantics as pure functions over the `rbac.authorization.k8s.io/v1` types: whether a
//! rule allows a request (verbs, API groups, resources with subresources and `*/sub`, resource
//! names, non-resource URLs with a trailing `*`), whether a binding subject is a user, whether
//! one set of rules covers another (escalation prevention and reconciliation), the compact
//! wording of missing rules, label selectors, and the rules of an aggregated ClusterRole.
//!
//! Everything here is kube's behaviour (the rbac v1 evaluation helpers, `appliesToUser`,
//! `Covers`, `CompactRules`, the aggregation controller's union) re-expressed; the authorizer,
//! the escalation checks, the bootstrap reconciliation and the aggregation controller share it.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::authentication::user::{UserInfo, SERVICE_ACCOUNT_PREFIX};
use crate::authorization::{quoted_list, Attributes, Target};

/// Every verb, API group, resource or URL.
pub const ALL: &str = "*";
/// The API group of RBAC's own types.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

/// Whether the rule names `verb` (or `*`).
pub fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

/// Whether the rule names the API group (or `*`).
pub fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups).iter().any(|g| g == ALL || g == group)
}

/// Whether the rule names the resource: `*`, the exact `resource` or `resource/subresource`,
/// or `*/subresource` for a request of that subresource.
pub fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|r| {
        if r == ALL {
            return true;
        }
        if subresource.is_empty() {
            return r == resource;
        }
        match r.split_once('/') {
            Some((res, sub)) => sub == subresource && (res == resource || res == ALL),
            None => false,
        }
    })
}

/// Whether the rule allows the object name (a rule without names allows every name).
pub fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || has(names, name)
}

/// Whether one non-resource URL pattern of a rule covers `path`: exactly, `*`, or as a prefix
/// when the pattern ends in `*`.
pub fn url_covers(pattern: &str, path: &str) -> bool {
    pattern == path
        || pattern
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix.trim_end_matches('*')))
}

/// Whether the rule names the non-resource path.
pub fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls).iter().any(|u| url_covers(u, path))
}

/// Whether the rule allows the request (kube's `RuleAllows`).
pub fn rule_allows(attrs: &Attributes<'_>, rule: &PolicyRule) -> bool {
    if !verb_matches(rule, attrs.verb) {
        return false;
    }
    match attrs.target {
        Target::Resource(r) => {
            api_group_matches(rule, r.api_group)
                && resource_matches(rule, r.resource, r.subresource)
                && resource_name_matches(rule, r.name)
        }
        Target::NonResource { path } => non_resource_url_matches(rule, path),
    }
}

/// The user name of the ServiceAccount `namespace/name`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

/// Who a binding subject is, as the authorizer indexes it: a user name or a group name. A
/// ServiceAccount is its user name, its namespace defaulting to the binding's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SubjectKey {
    /// A user name (also a ServiceAccount's `system:serviceaccount:NS:NAME`).
    User(String),
    /// A group name.
    Group(String),
}

/// The identity `subject` of a binding in `binding_namespace` (`""` for a ClusterRoleBinding)
/// stands for; `None` when it can stand for nobody (an unknown kind, a ServiceAccount without
/// a namespace).
pub fn subject_key(subject: &Subject, binding_namespace: &str) -> Option<SubjectKey> {
    match subject.kind.as_str() {
        "User" => Some(SubjectKey::User(subject.name.clone())),
        "Group" => Some(SubjectKey::Group(subject.name.clone())),
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            (!ns.is_empty()).then(|| SubjectKey::User(service_account_user(ns, &subject.name)))
        }
        _ => None,
    }
}

/// Whether `subject` of a binding in `binding_namespace` is `user` (kube's `appliesToUser`).
pub fn applies_to(user: &UserInfo, subject: &Subject, binding_namespace: &str) -> bool {
    match subject_key(subject, binding_namespace) {
        Some(SubjectKey::User(name)) => user.name == name,
        Some(SubjectKey::Group(group)) => user.in_group(&group),
        None => false,
    }
}

/// How a binding's subject is described in an "allowed by" reason: `User "alice"`,
/// `ServiceAccount "name/namespace"`.
pub fn describe_subject(subject: &Subject, binding_namespace: &str) -> String {
    match subject.kind.as_str() {
        "ServiceAccount" => {
            let ns = subject
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace);
            format!(
                "ServiceAccount {}",
                super::quoted(&format!("{}/{ns}", subject.name))
            )
        }
        kind => format!("{kind} {}", super::quoted(&subject.name)),
    }
}

/// A rule with a single verb, group, resource and name (or a single URL and verb): what
/// [`covers`] compares, and what it reports as missing.
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| Some(vec![s.clone()]);
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let sub = PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    ..PolicyRule::default()
                };
                if list(&rule.resource_names).is_empty() {
                    out.push(sub);
                } else {
                    for name in list(&rule.resource_names) {
                        out.push(PolicyRule {
                            resource_names: one(name),
                            ..sub.clone()
                        });
                    }
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                non_resource_urls: one(url),
                verbs: vec![verb.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, ALL) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

/// Coverage of URL patterns compares them as text, as matching does: `/a*` covers `/a/*`.
fn urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted
        .iter()
        .all(|path| owner.iter().any(|o| url_covers(o, path)))
}

/// Whether `owner` (any rule) covers `sub` (a broken-down rule).
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = has(list(&owner.api_groups), ALL) || has_all(list(&owner.api_groups), list(&sub.api_groups));
    let resources = resources_cover(list(&owner.resources), list(&sub.resources));
    let urls = urls_cover(list(&owner.non_resource_urls), list(&sub.non_resource_urls));
    let owner_names = list(&owner.resource_names);
    let names = owner_names.is_empty()
        || (!list(&sub.resource_names).is_empty() && has_all(owner_names, list(&sub.resource_names)));
    verbs && groups && resources && urls && names
}

/// The parts of `wanted` that `owner` does not allow, broken down to one verb, group,
/// resource and name (or URL and verb) each; empty when `owner` covers all of `wanted`
/// (kube's `Covers`).
pub fn uncovered(owner: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect()
}

/// Whether `owner` allows everything `wanted` does.
pub fn covers(owner: &[PolicyRule], wanted: &[PolicyRule]) -> bool {
    uncovered(owner, wanted).is_empty()
}

/// Merges broken-down rules that differ only in their verbs (one group, one resource, at most
/// one name, nothing else), keeping the others as they are (kube's `CompactRules`).
pub fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut simple: BTreeMap<(String, String, Option<String>), PolicyRule> = BTreeMap::new();
    let mut out = Vec::new();
    for rule in rules {
        let groups = list(&rule.api_groups);
        let resources = list(&rule.resources);
        let names = list(&rule.resource_names);
        let is_simple = groups.len() == 1
            && resources.len() == 1
            && names.len() <= 1
            && list(&rule.non_resource_urls).is_empty();
        if !is_simple {
            out.push(rule);
            continue;
        }
        let key = (groups[0].clone(), resources[0].clone(), names.first().cloned());
        match simple.get_mut(&key) {
            Some(existing) => {
                for verb in rule.verbs {
                    if !has(&existing.verbs, &verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => {
                simple.insert(key, rule);
            }
        }
    }
    out.extend(simple.into_values());
    out
}

/// A rule as kube's escalation messages print it:
/// `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts = Vec::new();
    for (label, values) in [
        ("APIGroups", list(&rule.api_groups)),
        ("Resources", list(&rule.resources)),
        ("NonResourceURLs", list(&rule.non_resource_urls)),
        ("ResourceNames", list(&rule.resource_names)),
        ("Verbs", rule.verbs.as_slice()),
    ] {
        if !values.is_empty() {
            parts.push(format!("{label}:{}", quoted_list(values)));
        }
    }
    format!("{{{}}}", parts.join(", "))
}

/// Whether the labels satisfy a `metav1.LabelSelector` (every `matchLabels` pair and every
/// `matchExpressions` requirement). An empty selector matches everything; one with an unknown
/// operator matches nothing, as kube cannot convert it to a selector.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector.match_labels.iter().flatten();
    if !pairs.into_iter().all(|(k, v)| labels.get(k) == Some(v)) {
        return false;
    }
    selector.match_expressions.iter().flatten().all(|req| {
        let values = list(&req.values);
        let value = labels.get(&req.key);
        match req.operator.as_str() {
            "In" => value.is_some_and(|v| has(values, v)),
            "NotIn" => value.is_none_or(|v| !has(values, v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    })
}

/// Whether a ClusterRole is aggregated (has at least one cluster role selector).
pub fn is_aggregated(role: &ClusterRole) -> bool {
    role.aggregation_rule
        .as_ref()
        .and_then(|a| a.cluster_role_selectors.as_ref())
        .is_some_and(|s| !s.is_empty())
}

/// The rules an aggregated ClusterRole must hold: for each of its selectors in turn, the rules
/// of the other ClusterRoles it selects, by name, each rule once (the aggregation controller's
/// union). `None` when `role` is not aggregated.
pub fn aggregated_rules(role: &ClusterRole, all: &[ClusterRole]) -> Option<Vec<PolicyRule>> {
    if !is_aggregated(role) {
        return None;
    }
    let me = role.metadata.name.as_deref().unwrap_or_default();
    let mut sorted: Vec<&ClusterRole> = all.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let empty = BTreeMap::new();
    let mut rules: Vec<PolicyRule> = Vec::new();
    let selectors = role
        .aggregation_rule
        .iter()
        .flat_map(|a| a.cluster_role_selectors.iter().flatten());
    for selector in selectors {
        for other in &sorted {
            if other.metadata.name.as_deref().unwrap_or_default() == me {
                continue;
            }
            if !selector_matches(selector, other.metadata.labels.as_ref().unwrap_or(&empty)) {
                continue;
            }
            for rule in other.rules.iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    Some(rules)
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::rbac::v1::AggregationRule;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, ObjectMeta};

    use super::*;
    use crate::authorization::ResourceAttributes;

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    /// A resource rule: verbs, groups, resources (names none).
    pub(crate) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            api_groups: strings(groups),
            resources: strings(resources),
            ..PolicyRule::default()
        }
    }

    /// A non-resource rule.
    pub(crate) fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
        PolicyRule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            non_resource_urls: strings(urls),
            ..PolicyRule::default()
        }
    }

    fn named(mut r: PolicyRule, names: &[&str]) -> PolicyRule {
        r.resource_names = strings(names);
        r
    }

    fn allows(r: &PolicyRule, verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> bool {
        let u = UserInfo::default();
        let attrs = Attributes::resource(
            &u,
            verb,
            ResourceAttributes {
                api_group: group,
                resource,
                subresource: sub,
                name,
                namespace: "ns",
                ..ResourceAttributes::default()
            },
        );
        rule_allows(&attrs, r)
    }

    /// A request as the table writes it: verb, group, resource, subresource, name.
    type Request<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);

    #[test]
    fn rule_matching_table() {
        let cases: Vec<(PolicyRule, Request<'_>, bool)> = vec![
            (
                rule(&["get"], &[""], &["pods"]),
                ("get", "", "pods", "", "p"),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods"]),
                ("list", "", "pods", "", ""),
                false,
            ),
            (
                rule(&["*"], &[""], &["pods"]),
                ("delete", "", "pods", "", "p"),
                true,
            ),
            (
                rule(&["get"], &["*"], &["pods"]),
                ("get", "apps", "pods", "", ""),
                true,
            ),
            (
                rule(&["get"], &["apps"], &["pods"]),
                ("get", "", "pods", "", ""),
                false,
            ),
            (
                rule(&["get"], &[""], &["*"]),
                ("get", "", "secrets", "", ""),
                true,
            ),
            (
                rule(&["get"], &[""], &["*"]),
                ("get", "", "pods", "log", ""),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods"]),
                ("get", "", "pods", "status", ""),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods/status"]),
                ("get", "", "pods", "status", ""),
                true,
            ),
            (
                rule(&["get"], &[""], &["pods/status"]),
                ("get", "", "pods", "", ""),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods/status"]),
                ("get", "", "pods", "log", ""),
                false,
            ),
            (
                rule(&["get"], &["apps"], &["*/scale"]),
                ("get", "apps", "deployments", "scale", ""),
                true,
            ),
            (
                rule(&["get"], &["apps"], &["*/scale"]),
                ("get", "apps", "deployments", "", ""),
                false,
            ),
            (
                rule(&["get"], &["apps"], &["*/scale"]),
                ("get", "apps", "deployments", "status", ""),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods/*"]),
                ("get", "", "pods", "log", ""),
                false,
            ),
            (
                rule(&["get"], &[""], &["pods/*"]),
                ("get", "", "pods", "*", ""),
                true,
            ),
            (
                named(rule(&["get"], &[""], &["configmaps"]), &["a"]),
                ("get", "", "configmaps", "", "a"),
                true,
            ),
            (
                named(rule(&["get"], &[""], &["configmaps"]), &["a"]),
                ("get", "", "configmaps", "", "b"),
                false,
            ),
            (
                named(rule(&["list"], &[""], &["configmaps"]), &["a"]),
                ("list", "", "configmaps", "", ""),
                false,
            ),
            (rule(&["get"], &[], &["pods"]), ("get", "", "pods", "", ""), false),
            (url_rule(&["get"], &["*"]), ("get", "", "pods", "", ""), false),
        ];
        for (i, (r, (verb, group, resource, sub, name), want)) in cases.iter().enumerate() {
            assert_eq!(
                allows(r, verb, group, resource, sub, name),
                *want,
                "case {i}: {r:?}"
            );
        }
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_trailing_star() {
        let u = UserInfo::default();
        let at = |path| Attributes::non_resource(&u, "get", path);
        let r = url_rule(&["get"], &["/healthz", "/apis/*"]);
        assert!(rule_allows(&at("/healthz"), &r));
        assert!(!rule_allows(&at("/healthz/etcd"), &r));
        assert!(rule_allows(&at("/apis/apps"), &r));
        assert!(rule_allows(&at("/apis/"), &r));
        assert!(!rule_allows(&at("/apis"), &r));
        assert!(rule_allows(&at("/anything"), &url_rule(&["*"], &["*"])));
        assert!(!rule_allows(
            &Attributes::non_resource(&u, "post", "/healthz"),
            &r
        ));
        assert!(!rule_allows(&at("/healthz"), &rule(&["*"], &["*"], &["*"])));
    }

    fn subject(kind: &str, name: &str, namespace: Option<&str>) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(str::to_string),
            api_group: None,
        }
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let alice = UserInfo {
            name: "alice".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            ..UserInfo::default()
        };
        let sa = UserInfo {
            name: "system:serviceaccount:shop:builder".into(),
            groups: vec!["system:serviceaccounts".into()],
            ..UserInfo::default()
        };
        assert!(applies_to(&alice, &subject("User", "alice", None), ""));
        assert!(!applies_to(&alice, &subject("User", "bob", None), ""));
        assert!(applies_to(&alice, &subject("Group", "dev", None), ""));
        assert!(!applies_to(&alice, &subject("Group", "ops", None), ""));
        assert!(!applies_to(&alice, &subject("Robot", "alice", None), ""));
        // A ServiceAccount's namespace defaults to the binding's.
        assert!(applies_to(
            &sa,
            &subject("ServiceAccount", "builder", None),
            "shop"
        ));
        assert!(!applies_to(
            &sa,
            &subject("ServiceAccount", "builder", None),
            "other"
        ));
        assert!(applies_to(
            &sa,
            &subject("ServiceAccount", "builder", Some("shop")),
            "other"
        ));
        // In a ClusterRoleBinding it must name its namespace.
        assert!(!applies_to(&sa, &subject("ServiceAccount", "builder", None), ""));
        assert!(applies_to(
            &sa,
            &subject("Group", "system:serviceaccounts", None),
            ""
        ));
        assert_eq!(
            describe_subject(&subject("ServiceAccount", "builder", None), "shop"),
            r#"ServiceAccount "builder/shop""#
        );
        assert_eq!(
            describe_subject(&subject("Group", "dev", None), ""),
            r#"Group "dev""#
        );
    }

    #[test]
    fn coverage_breaks_rules_down_and_honours_stars_and_names() {
        let owner = vec![
            rule(&["get", "list"], &[""], &["pods", "configmaps"]),
            rule(&["*"], &["apps"], &["*/scale"]),
            named(rule(&["get"], &[""], &["secrets"]), &["a", "b"]),
            url_rule(&["get"], &["/healthz", "/apis/*"]),
        ];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"])]));
        assert!(covers(
            &owner,
            &[rule(&["update"], &["apps"], &["deployments/scale"])]
        ));
        assert!(covers(
            &owner,
            &[named(rule(&["get"], &[""], &["secrets"]), &["a"])]
        ));
        assert!(covers(&owner, &[url_rule(&["get"], &["/apis/apps"])]));
        assert!(!covers(&owner, &[rule(&["get"], &[""], &["secrets"])]));
        assert!(!covers(
            &owner,
            &[named(rule(&["get"], &[""], &["secrets"]), &["c"])]
        ));
        assert!(!covers(&owner, &[url_rule(&["get"], &["/metrics"])]));
        assert_eq!(
            uncovered(&owner, &[rule(&["get", "delete"], &[""], &["pods", "services"])]),
            vec![
                rule(&["delete"], &[""], &["pods"]),
                rule(&["get"], &[""], &["services"]),
                rule(&["delete"], &[""], &["services"]),
            ]
        );
        assert!(covers(
            &[rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
            &owner
        ));
    }

    #[test]
    fn missing_rules_compact_by_resource_and_print_as_kube_does() {
        let missing = uncovered(&[], &[rule(&["get", "list"], &[""], &["pods", "configmaps"])]);
        let compacted = compact(missing);
        let printed: Vec<String> = compacted.iter().map(compact_string).collect();
        assert_eq!(
            printed,
            vec![
                r#"{APIGroups:[""], Resources:["configmaps"], Verbs:["get" "list"]}"#,
                r#"{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}"#,
            ]
        );
        assert_eq!(
            compact_string(&named(rule(&["get"], &["apps"], &["deployments"]), &["web"])),
            r#"{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get"]}"#
        );
        assert_eq!(
            compact_string(&url_rule(&["get"], &["/healthz"])),
            r#"{NonResourceURLs:["/healthz"], Verbs:["get"]}"#
        );
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_match_labels_and_expressions() {
        let by_label = LabelSelector {
            match_labels: Some(labels(&[("a", "1")])),
            match_expressions: None,
        };
        assert!(selector_matches(&by_label, &labels(&[("a", "1"), ("b", "2")])));
        assert!(!selector_matches(&by_label, &labels(&[("a", "2")])));
        assert!(selector_matches(&LabelSelector::default(), &labels(&[])));
        let expr = |op: &str, values: &[&str]| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: op.into(),
                values: strings(values),
            }]),
        };
        assert!(selector_matches(
            &expr("In", &["web", "db"]),
            &labels(&[("tier", "db")])
        ));
        assert!(!selector_matches(&expr("In", &["web"]), &labels(&[])));
        assert!(selector_matches(&expr("NotIn", &["web"]), &labels(&[])));
        assert!(!selector_matches(
            &expr("NotIn", &["web"]),
            &labels(&[("tier", "web")])
        ));
        assert!(selector_matches(&expr("Exists", &[]), &labels(&[("tier", "x")])));
        assert!(selector_matches(&expr("DoesNotExist", &[]), &labels(&[])));
        assert!(!selector_matches(&expr("Near", &[]), &labels(&[("tier", "x")])));
    }

    fn cluster_role(name: &str, l: &[(&str, &str)], rules: Vec<PolicyRule>) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels(l)),
                ..ObjectMeta::default()
            },
            rules: Some(rules),
            aggregation_rule: None,
        }
    }

    #[test]
    fn aggregation_unions_the_selected_roles_by_name_once_each() {
        let mut agg = cluster_role("agg", &[("x", "1")], vec![]);
        agg.aggregation_rule = Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some(labels(&[("x", "1")])),
                match_expressions: None,
            }]),
        });
        let all = vec![
            agg.clone(),
            cluster_role("b", &[("x", "1")], vec![rule(&["get"], &[""], &["pods"])]),
            cluster_role(
                "a",
                &[("x", "1")],
                vec![
                    rule(&["list"], &[""], &["pods"]),
                    rule(&["get"], &[""], &["pods"]),
                ],
            ),
            cluster_role("c", &[("x", "2")], vec![rule(&["*"], &["*"], &["*"])]),
        ];
        assert_eq!(
            aggregated_rules(&agg, &all),
            Some(vec![
                rule(&["list"], &[""], &["pods"]),
                rule(&["get"], &[""], &["pods"])
            ])
        );
        assert_eq!(aggregated_rules(&all[1], &all), None);
    }
}
