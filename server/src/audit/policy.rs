//! The audit policy: kube-apiserver's `audit.k8s.io/v1` `Policy` file, read and validated as
//! kube reads it, and the rule evaluation that gives each request its level, the stages not
//! to log and whether to drop `managedFields` (kube's `policyRuleEvaluator`): rules are tried
//! in order, the first that matches wins, and a request no rule matches is not logged.
//!
//! Unlike kube-apiserver, unknown fields are errors: a mistyped `userGroup` would otherwise
//! make its rule match every user.

use serde::Deserialize;

use crate::audit::request::Attributes;
use crate::machinery::meta::dns_subdomain_error;

/// Why a policy file is unusable.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The text is not a policy document (YAML syntax, a wrong type, an unknown field).
    #[error("{0}")]
    Decode(#[from] yaml_serde::Error),
    /// The document is a policy with invalid rules, worded as kube-apiserver words them.
    #[error("{0}")]
    Invalid(String),
}

/// How much of a request the audit log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what, when and the outcome; no bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata and both bodies.
    RequestResponse,
}

impl Level {
    const NAMES: [&'static str; 4] = ["None", "Metadata", "Request", "RequestResponse"];

    fn parse(name: &str) -> Option<Level> {
        match name {
            "None" => Some(Level::None),
            "Metadata" => Some(Level::Metadata),
            "Request" => Some(Level::Request),
            "RequestResponse" => Some(Level::RequestResponse),
            _ => None,
        }
    }
}

/// A point of a request's handling at which an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Stage {
    /// As soon as the request is received (here: once its user is known).
    RequestReceived,
    /// When the response headers are sent, for long-running requests (watches) only.
    ResponseStarted,
    /// When the response is complete.
    ResponseComplete,
    /// When serving the request panicked.
    Panic,
}

impl Stage {
    const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];

    fn name(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of stages (the ones a request omits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageSet(u8);

impl StageSet {
    /// Whether `stage` is in the set.
    pub fn contains(self, stage: Stage) -> bool {
        self.0 & stage.bit() != 0
    }

    fn with(self, stage: Stage) -> StageSet {
        StageSet(self.0 | stage.bit())
    }

    fn union(self, other: StageSet) -> StageSet {
        StageSet(self.0 | other.0)
    }
}

/// What the policy decided for one request (kube's `RequestAuditConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestConfig {
    /// The level it is logged at.
    pub level: Level,
    /// The stages at which nothing is written.
    pub omit_stages: StageSet,
    /// Whether request and response objects lose `metadata.managedFields`.
    pub omit_managed_fields: bool,
}

/// The resources of one API group a rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupResources {
    group: String,
    resources: Vec<String>,
    resource_names: Vec<String>,
}

/// One rule of a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    /// The rule's stages united with the policy's.
    omit_stages: StageSet,
    omit_managed_fields: Option<bool>,
}

/// A loaded, valid audit policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: StageSet,
    omit_managed_fields: bool,
}

/// The file as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyDocument {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    /// Allowed for the API machinery's sake, as in kube; ignored.
    #[serde(default, rename = "metadata")]
    _metadata: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    rules: Vec<RuleDocument>,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleDocument {
    #[serde(default)]
    level: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResourcesDocument>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<String>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResourcesDocument {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

/// Go's `%q` of a string list, as kube's field errors print one.
fn quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// The stages named in `names`, or kube's field error for each unknown one.
fn stages(names: &[String], field: &str, errors: &mut Vec<String>) -> StageSet {
    let mut set = StageSet::default();
    for (i, name) in names.iter().enumerate() {
        match Stage::ALL.iter().find(|s| s.name() == name) {
            Some(stage) => set = set.with(*stage),
            None => errors.push(format!(
                "{field}[{i}]: Invalid value: {name:?}: allowed stages are {}",
                Stage::ALL.map(Stage::name).join(",")
            )),
        }
    }
    set
}

impl RuleDocument {
    /// The rule, or kube's field errors for it (`rules[i]...`).
    fn validate(self, at: &str, policy_stages: StageSet, errors: &mut Vec<String>) -> Rule {
        let level = match Level::parse(&self.level) {
            Some(level) => level,
            None if self.level.is_empty() => {
                errors.push(format!("{at}.level: Required value"));
                Level::None
            }
            None => {
                let supported: Vec<String> = Level::NAMES.iter().map(|n| format!("{n:?}")).collect();
                errors.push(format!(
                    "{at}.level: Unsupported value: {:?}: supported values: {}",
                    self.level,
                    supported.join(", ")
                ));
                Level::None
            }
        };
        for (i, url) in self.non_resource_urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            if !url.starts_with('/') {
                errors.push(format!(
                    "{at}.nonResourceURLs[{i}]: Invalid value: {url:?}: non-resource URL rules must begin with a '/' character"
                ));
            }
            if url.char_indices().any(|(i, c)| c == '*' && i + 1 < url.len()) {
                errors.push(format!(
                    "{at}.nonResourceURLs[{i}]: Invalid value: {url:?}: non-resource URL wildcards '*' must be the final character of the rule"
                ));
            }
        }
        for gr in &self.resources {
            if let Some(why) = dns_subdomain_error(&gr.group).filter(|_| !gr.group.is_empty()) {
                errors.push(format!("{at}.resources.group: {why}"));
            }
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errors.push(format!(
                    "{at}.resources.resourceNames: Invalid value: {}: using resourceNames requires at least one resource",
                    quoted_list(&gr.resource_names)
                ));
            }
        }
        let omit_stages = stages(&self.omit_stages, &format!("{at}.omitStages"), errors);
        if !self.non_resource_urls.is_empty() && (!self.resources.is_empty() || !self.namespaces.is_empty()) {
            errors.push(format!(
                "{at}.nonResourceURLs: Invalid value: {}: rules cannot apply to both regular resources and non-resource URLs",
                quoted_list(&self.non_resource_urls)
            ));
        }
        Rule {
            level,
            users: self.users,
            user_groups: self.user_groups,
            verbs: self.verbs,
            resources: self
                .resources
                .into_iter()
                .map(|gr| GroupResources {
                    group: gr.group,
                    resources: gr.resources,
                    resource_names: gr.resource_names,
                })
                .collect(),
            namespaces: self.namespaces,
            non_resource_urls: self.non_resource_urls,
            omit_stages: omit_stages.union(policy_stages),
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|s| s == value)
}

/// Whether a non-resource URL rule's `spec` matches `path`: `*`, the path itself, or a prefix
/// ending in `*`.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*" || spec == path || (spec.ends_with('*') && path.starts_with(spec.trim_end_matches('*')))
}

impl Rule {
    /// Whether the rule applies to a request (kube's `ruleMatches`): every field the rule
    /// sets must match.
    fn matches(&self, attrs: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !attrs.user.is_some_and(|u| has(&self.users, &u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !attrs
                .user
                .is_some_and(|u| u.groups.iter().any(|g| has(&self.user_groups, g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, attrs.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(attrs);
        }
        if !self.non_resource_urls.is_empty() {
            return attrs.resource.is_none()
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(attrs.path, spec));
        }
        true
    }

    /// kube's `ruleMatchesResource`: the namespace, then a group's resources (`pods`,
    /// `pods/log`, `*`, `pods/*`, `*/scale`) and names.
    fn matches_resource(&self, attrs: &Attributes<'_>) -> bool {
        let Some(r) = &attrs.resource else {
            return false;
        };
        if !self.namespaces.is_empty() && !has(&self.namespaces, r.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if r.subresource.is_empty() {
            std::borrow::Cow::Borrowed(r.resource)
        } else {
            std::borrow::Cow::Owned(format!("{}/{}", r.resource, r.subresource))
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == r.api_group)
            .any(|gr| {
                if gr.resources.is_empty() {
                    return true;
                }
                if !gr.resource_names.is_empty() && !has(&gr.resource_names, r.name) {
                    return false;
                }
                gr.resources.iter().any(|res| {
                    res == combined.as_ref()
                        || res == "*"
                        || (!r.subresource.is_empty() && res.strip_prefix("*/") == Some(r.subresource))
                        || res.strip_suffix("/*") == Some(r.resource)
                })
            })
    }
}

impl Policy {
    /// Reads a policy document (YAML or JSON): `apiVersion: audit.k8s.io/v1`, `kind: Policy`,
    /// at least one rule, each valid as kube-apiserver validates them.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let doc: PolicyDocument = yaml_serde::from_str(text)?;
        if doc.api_version != "audit.k8s.io/v1" || doc.kind != "Policy" {
            return Err(PolicyError::Invalid(format!(
                "unknown group version field {:?}, kind {:?} in policy: want apiVersion audit.k8s.io/v1, kind Policy",
                doc.api_version, doc.kind
            )));
        }
        let mut errors = Vec::new();
        let omit_stages = stages(&doc.omit_stages, "omitStages", &mut errors);
        let rules: Vec<Rule> = doc
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| rule.validate(&format!("rules[{i}]"), omit_stages, &mut errors))
            .collect();
        match errors.as_slice() {
            [] => {}
            [one] => return Err(PolicyError::Invalid(one.clone())),
            many => return Err(PolicyError::Invalid(format!("[{}]", many.join(", ")))),
        }
        if rules.is_empty() {
            return Err(PolicyError::Invalid("loaded illegal policy with 0 rules".into()));
        }
        Ok(Policy {
            rules,
            omit_stages,
            omit_managed_fields: doc.omit_managed_fields,
        })
    }

    /// What the policy asks for a request: the first rule that matches, or no logging.
    pub fn evaluate(&self, attrs: &Attributes<'_>) -> RequestConfig {
        match self.rules.iter().find(|rule| rule.matches(attrs)) {
            Some(rule) => RequestConfig {
                level: rule.level,
                omit_stages: rule.omit_stages,
                omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
            },
            None => RequestConfig {
                level: Level::None,
                omit_stages: self.omit_stages,
                omit_managed_fields: self.omit_managed_fields,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::request::RequestInfo;
    use crate::authentication::UserInfo;
    use axum::http::Method;

    fn policy(rules: &str) -> Policy {
        Policy::parse(&format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n{rules}"
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> String {
        Policy::parse(text).unwrap_err().to_string()
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    /// The level of `method path?query` for `user` (None: failed authentication).
    fn level(p: &Policy, user: Option<&UserInfo>, method: Method, target: &str) -> Level {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        let info = RequestInfo::parse(&method, path, query);
        p.evaluate(&info.attributes(user)).level
    }

    #[test]
    fn the_first_matching_rule_wins_and_no_match_is_none() {
        let p = policy(
            "- level: RequestResponse\n  verbs: [create]\n- level: Metadata\n  verbs: [create, get]\n- level: Request\n",
        );
        let alice = user("alice", &[]);
        let u = Some(&alice);
        assert_eq!(
            level(&p, u, Method::POST, "/api/v1/namespaces/a/pods"),
            Level::RequestResponse
        );
        assert_eq!(
            level(&p, u, Method::GET, "/api/v1/namespaces/a/pods/x"),
            Level::Metadata
        );
        assert_eq!(level(&p, u, Method::GET, "/healthz"), Level::Metadata);
        assert_eq!(level(&p, u, Method::PUT, "/healthz"), Level::Request);
        let only = policy("- level: Metadata\n  verbs: [get]\n");
        assert_eq!(level(&only, u, Method::DELETE, "/api/v1/nodes/n"), Level::None);
    }

    #[test]
    fn users_and_groups_match_the_authenticated_user() {
        let p = policy("- level: Metadata\n  users: [alice]\n- level: Request\n  userGroups: [dev, ops]\n");
        let alice = user("alice", &[]);
        let bob = user("bob", &["ops"]);
        let carol = user("carol", &["qa"]);
        let path = "/api/v1/pods";
        assert_eq!(level(&p, Some(&alice), Method::GET, path), Level::Metadata);
        assert_eq!(level(&p, Some(&bob), Method::GET, path), Level::Request);
        assert_eq!(level(&p, Some(&carol), Method::GET, path), Level::None);
        // A request that failed authentication has no user: no user or group rule matches it.
        assert_eq!(level(&p, None, Method::GET, path), Level::None);
    }

    #[test]
    fn verbs_are_kubes_request_verbs() {
        let p = policy("- level: Metadata\n  verbs: [watch, deletecollection, post]\n");
        let u = user("u", &[]);
        let u = Some(&u);
        assert_eq!(
            level(&p, u, Method::GET, "/api/v1/pods?watch=true"),
            Level::Metadata
        );
        assert_eq!(level(&p, u, Method::GET, "/api/v1/pods"), Level::None);
        assert_eq!(
            level(&p, u, Method::DELETE, "/api/v1/namespaces/a/pods"),
            Level::Metadata
        );
        assert_eq!(
            level(&p, u, Method::DELETE, "/api/v1/namespaces/a/pods/p"),
            Level::None
        );
        assert_eq!(level(&p, u, Method::POST, "/apis"), Level::Metadata);
    }

    #[test]
    fn resources_match_groups_subresources_wildcards_and_names() {
        let p = policy(
            r#"- level: RequestResponse
  resources:
  - group: ""
    resources: ["pods/log"]
- level: Request
  resources:
  - group: ""
    resources: ["configmaps"]
    resourceNames: ["leader"]
- level: Metadata
  resources:
  - group: apps
    resources: ["deployments/*"]
  - group: ""
    resources: ["*/status"]
  - group: batch
- level: None
  resources:
  - group: ""
    resources: ["pods"]
- level: Request
  resources:
  - group: rbac.authorization.k8s.io
    resources: ["*"]
"#,
        );
        let u = user("u", &[]);
        let u = Some(&u);
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/a/pods/p/log",
                Level::RequestResponse,
            ),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps/leader",
                Level::Request,
            ),
            (Method::GET, "/api/v1/namespaces/a/configmaps/other", Level::None),
            // "deployments/*" is the deployments and every subresource of theirs.
            (
                Method::GET,
                "/apis/apps/v1/namespaces/a/deployments/d",
                Level::Metadata,
            ),
            (
                Method::PUT,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                Level::Metadata,
            ),
            (Method::GET, "/apis/apps/v1/namespaces/a/replicasets", Level::None),
            (Method::PUT, "/api/v1/namespaces/a/pods/p/status", Level::Metadata),
            (Method::GET, "/apis/batch/v1/namespaces/a/jobs", Level::Metadata),
            // "pods" is not its subresources.
            (Method::GET, "/api/v1/namespaces/a/pods/p/exec", Level::None),
            (
                Method::DELETE,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/x",
                Level::Request,
            ),
            (
                Method::GET,
                "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles/r",
                Level::Request,
            ),
            // Resource rules never match non-resource requests.
            (Method::GET, "/apis/apps/v1", Level::None),
        ];
        for (method, path, want) in cases {
            assert_eq!(level(&p, u, method, path), want, "{path}");
        }
    }

    #[test]
    fn namespaces_match_the_requests_namespace_and_empty_is_cluster_scope() {
        let p = policy(
            "- level: Request\n  namespaces: [kube-system]\n- level: Metadata\n  namespaces: [\"\"]\n",
        );
        let u = user("u", &[]);
        let u = Some(&u);
        assert_eq!(
            level(&p, u, Method::GET, "/api/v1/namespaces/kube-system/pods"),
            Level::Request
        );
        // A namespace is in itself, as kube's request info has it.
        assert_eq!(
            level(&p, u, Method::GET, "/api/v1/namespaces/kube-system"),
            Level::Request
        );
        assert_eq!(level(&p, u, Method::GET, "/api/v1/nodes"), Level::Metadata);
        assert_eq!(
            level(&p, u, Method::GET, "/api/v1/namespaces/a/pods"),
            Level::None
        );
        assert_eq!(level(&p, u, Method::GET, "/healthz"), Level::None);
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_a_trailing_wildcard() {
        let p = policy("- level: None\n  nonResourceURLs: [\"/healthz*\", /version]\n- level: Metadata\n  nonResourceURLs: [\"*\"]\n- level: Request\n");
        let u = user("u", &[]);
        let u = Some(&u);
        assert_eq!(level(&p, u, Method::GET, "/healthz"), Level::None);
        assert_eq!(level(&p, u, Method::GET, "/healthz/etcd"), Level::None);
        assert_eq!(level(&p, u, Method::GET, "/version"), Level::None);
        assert_eq!(level(&p, u, Method::GET, "/version/x"), Level::Metadata);
        assert_eq!(level(&p, u, Method::GET, "/api"), Level::Metadata);
        assert_eq!(level(&p, u, Method::GET, "/api/v1/pods"), Level::Request);
    }

    #[test]
    fn omit_stages_unite_policy_and_rule_and_managed_fields_override() {
        let p = Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nomitManagedFields: true\nrules:\n- level: Metadata\n  verbs: [get]\n  omitStages: [ResponseStarted]\n  omitManagedFields: false\n- level: Request\n  verbs: [list]\n",
        )
        .unwrap();
        let u = user("u", &[]);
        let info = RequestInfo::parse(&Method::GET, "/api/v1/namespaces/a/pods/p", None);
        let get = p.evaluate(&info.attributes(Some(&u)));
        assert!(get.omit_stages.contains(Stage::RequestReceived));
        assert!(get.omit_stages.contains(Stage::ResponseStarted));
        assert!(!get.omit_stages.contains(Stage::ResponseComplete));
        assert!(!get.omit_managed_fields);
        let info = RequestInfo::parse(&Method::GET, "/api/v1/pods", None);
        let list = p.evaluate(&info.attributes(Some(&u)));
        assert_eq!(list.level, Level::Request);
        assert!(list.omit_stages.contains(Stage::RequestReceived));
        assert!(!list.omit_stages.contains(Stage::ResponseStarted));
        assert!(list.omit_managed_fields);
        let info = RequestInfo::parse(&Method::POST, "/api/v1/pods", None);
        let none = p.evaluate(&info.attributes(Some(&u)));
        assert_eq!(none.level, Level::None);
        assert!(none.omit_stages.contains(Stage::RequestReceived));
    }

    #[test]
    fn invalid_policies_are_refused_with_kubes_messages() {
        let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
        assert_eq!(
            error(&format!("{head}rules: []\n")),
            "loaded illegal policy with 0 rules"
        );
        assert_eq!(
            error(&format!("{head}rules:\n- verbs: [get]\n")),
            "rules[0].level: Required value"
        );
        assert_eq!(
            error(&format!("{head}rules:\n- level: Everything\n")),
            r#"rules[0].level: Unsupported value: "Everything": supported values: "None", "Metadata", "Request", "RequestResponse""#
        );
        assert_eq!(
            error(&format!(
                "{head}rules:\n- level: None\n  nonResourceURLs: [healthz, \"/a*b\"]\n"
            )),
            r#"[rules[0].nonResourceURLs[0]: Invalid value: "healthz": non-resource URL rules must begin with a '/' character, rules[0].nonResourceURLs[1]: Invalid value: "/a*b": non-resource URL wildcards '*' must be the final character of the rule]"#
        );
        assert_eq!(
            error(&format!(
                "{head}rules:\n- level: None\n  namespaces: [a]\n  nonResourceURLs: [/x]\n"
            )),
            r#"rules[0].nonResourceURLs: Invalid value: []string{"/x"}: rules cannot apply to both regular resources and non-resource URLs"#
        );
        assert!(error(&format!(
            "{head}rules:\n- level: None\n  resources:\n  - group: rbac.authorization.k8s.io/v1\n"
        ))
        .starts_with(r#"rules[0].resources.group: Invalid value: "rbac.authorization.k8s.io/v1": a lowercase RFC 1123 subdomain"#));
        assert_eq!(
            error(&format!(
                "{head}rules:\n- level: None\n  resources:\n  - resourceNames: [x]\n"
            )),
            r#"rules[0].resources.resourceNames: Invalid value: []string{"x"}: using resourceNames requires at least one resource"#
        );
        assert_eq!(
            error(&format!("{head}omitStages: [Sent]\nrules:\n- level: None\n")),
            r#"omitStages[0]: Invalid value: "Sent": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic"#
        );
        assert!(error(&format!("{head}rules:\n- level: None\n  userGroup: [x]\n"))
            .contains("unknown field `userGroup`"));
        assert!(
            error("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n")
                .contains("unknown group version")
        );
        assert!(error("apiVersion: v1\nkind: ConfigMap\n").contains("unknown group version"));
        assert!(matches!(Policy::parse("rules: ["), Err(PolicyError::Decode(_))));
    }

    #[test]
    fn the_example_policy_in_deploy_is_valid() {
        let text = include_str!("../../../deploy/audit-policy.yaml");
        let p = Policy::parse(text).unwrap_or_else(|e| panic!("{e}"));
        let admin = user("kuberaft-admin", &["system:masters", "system:authenticated"]);
        let proxy = user("system:kube-proxy", &["system:authenticated"]);
        let a = Some(&admin);
        let cases = [
            (a, Method::GET, "/readyz", Level::None),
            (a, Method::GET, "/livez/ping", Level::None),
            (
                Some(&proxy),
                Method::GET,
                "/api/v1/services?watch=true",
                Level::None,
            ),
            (Some(&proxy), Method::GET, "/api/v1/services", Level::Metadata),
            (
                a,
                Method::POST,
                "/api/v1/namespaces/shop/secrets",
                Level::Metadata,
            ),
            (
                a,
                Method::GET,
                "/api/v1/namespaces/shop/configmaps",
                Level::Metadata,
            ),
            (
                a,
                Method::POST,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                Level::Metadata,
            ),
            (
                a,
                Method::POST,
                "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings",
                Level::RequestResponse,
            ),
            (
                a,
                Method::GET,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                Level::Metadata,
            ),
            (a, Method::POST, "/api/v1/namespaces", Level::Request),
            (
                a,
                Method::PATCH,
                "/apis/apps/v1/namespaces/shop/deployments/web",
                Level::Request,
            ),
            (
                a,
                Method::GET,
                "/apis/apps/v1/namespaces/shop/deployments",
                Level::Metadata,
            ),
            (None, Method::GET, "/api/v1/namespaces", Level::Metadata),
        ];
        for (user, method, path, want) in cases {
            assert_eq!(level(&p, user, method, path), want, "{path}");
        }
        let info = RequestInfo::parse(&Method::GET, "/api/v1/pods", None);
        assert!(p
            .evaluate(&info.attributes(Some(&admin)))
            .omit_stages
            .contains(Stage::RequestReceived));
    }
}
