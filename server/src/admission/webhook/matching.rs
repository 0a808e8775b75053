//! Which webhooks a write is sent to (kube's webhook `predicates`): a webhook as read from its
//! configuration ([`Hook`]), its `rules` (operations, groups, versions, resources with their
//! subresources, scope, and `matchPolicy`), its `namespaceSelector` (the labels of the
//! request's namespace, or of the namespace itself when a namespace is written), its
//! `objectSelector` (the labels of the new or the old object) and its `matchConditions` (CEL
//! expressions over `object`, `oldObject` and `request`, compiled when the configuration is
//! read into a [`Hook`], evaluated in order: any `false` skips the webhook, an error fails the
//! write or skips the webhook as its `failurePolicy` says — kube's `matchconditions` matcher).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::super::policy::eval_message;
use super::super::{Attributes, Equivalent};
use crate::authorization::rbac::selector_matches;
use crate::cel::{self, value, EvalError, Program, MATCH_CONDITIONS_BUDGET, WEBHOOK_CONDITION_VARIABLES};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::store::{keys, Store};
use crate::webhook::ClientConfig;

/// kube's default `timeoutSeconds`.
const DEFAULT_TIMEOUT: u64 = 10;

/// One rule of a webhook.
#[derive(Debug, Clone, Default)]
struct Rule {
    operations: Vec<String>,
    groups: Vec<String>,
    versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

/// One of a webhook's `matchConditions`, compiled.
#[derive(Debug)]
pub struct Condition {
    /// Its expression, as written.
    pub expression: String,
    /// The program (validation refuses expressions that do not compile on write).
    pub program: Result<Program, cel::CompileError>,
}

/// One webhook of a configuration, as the dispatcher uses it.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Its name (unique in its configuration).
    pub name: String,
    /// A mutating webhook (it may answer a patch).
    pub mutating: bool,
    rules: Vec<Rule>,
    /// `matchPolicy: Equivalent` (the default): a rule naming an equivalent resource (another
    /// version, or another group's type stored as the same kind) matches too.
    equivalent: bool,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
    /// `failurePolicy: Fail` (the default): a webhook that cannot be called refuses the write.
    pub fail: bool,
    /// `sideEffects`.
    pub side_effects: String,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke: bool,
    /// `clientConfig` and `timeoutSeconds`.
    pub client: ClientConfig,
    /// `matchConditions`, compiled once with the configuration.
    pub conditions: Arc<Vec<Condition>>,
    /// The `AdmissionReview` version it is sent: the first of its `admissionReviewVersions`
    /// this server speaks (`None`: none is, and calling it fails).
    pub review_version: Option<ReviewVersion>,
}

/// The `admission.k8s.io` versions of `AdmissionReview` kube sends, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    /// Every known version, as `admissionReviewVersions` names them.
    pub const KNOWN: [(&'static str, ReviewVersion); 2] =
        [("v1", ReviewVersion::V1), ("v1beta1", ReviewVersion::V1beta1)];

    /// The names of the known versions, in kube's order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        Self::KNOWN.into_iter().map(|(name, _)| name)
    }

    /// kube's `CreateAdmissionObjects`: the first of `versions` it knows.
    fn first_known(versions: &[String]) -> Option<ReviewVersion> {
        versions.iter().find_map(|v| {
            Self::KNOWN
                .iter()
                .find(|(name, _)| name == v)
                .map(|(_, known)| *known)
        })
    }

    /// The review's `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// The strings of a JSON array (others are skipped).
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn selector(v: &Value) -> Option<LabelSelector> {
    if v.is_null() {
        return None;
    }
    // A selector that cannot be read selects nothing (validation refuses it on write).
    Some(
        serde_json::from_value(v.clone()).unwrap_or_else(|_| LabelSelector {
            match_expressions: Some(vec![Default::default()]),
            match_labels: None,
        }),
    )
}

impl Hook {
    /// A webhook as written in a configuration (`id` names it and the configuration's version).
    pub fn parse(w: &Value, id: &str, mutating: bool) -> Hook {
        let timeout = Duration::from_secs(
            w["timeoutSeconds"]
                .as_u64()
                .filter(|t| (1..=30).contains(t))
                .unwrap_or(DEFAULT_TIMEOUT),
        );
        Hook {
            name: w["name"].as_str().unwrap_or_default().to_string(),
            mutating,
            rules: w["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| Rule {
                    operations: strings(&r["operations"]),
                    groups: strings(&r["apiGroups"]),
                    versions: strings(&r["apiVersions"]),
                    resources: strings(&r["resources"]),
                    scope: r["scope"].as_str().unwrap_or("*").to_string(),
                })
                .collect(),
            equivalent: w["matchPolicy"].as_str() != Some("Exact"),
            namespace_selector: selector(&w["namespaceSelector"]),
            object_selector: selector(&w["objectSelector"]),
            fail: w["failurePolicy"].as_str() != Some("Ignore"),
            side_effects: w["sideEffects"].as_str().unwrap_or_default().to_string(),
            reinvoke: mutating && w["reinvocationPolicy"].as_str() == Some("IfNeeded"),
            client: ClientConfig::parse(&w["clientConfig"], id, timeout),
            conditions: Arc::new(
                w["matchConditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let expression = c["expression"].as_str().unwrap_or_default().trim().to_string();
                        Condition {
                            program: cel::compile_admission_expression(
                                &expression,
                                &WEBHOOK_CONDITION_VARIABLES,
                            ),
                            expression,
                        }
                    })
                    .collect(),
            ),
            review_version: ReviewVersion::first_known(&strings(&w["admissionReviewVersions"])),
        }
    }
}

fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|l| l == "*" || l == value)
}

fn is_namespace(attrs: &Attributes<'_>) -> bool {
    (attrs.group, attrs.resource) == ("", "namespaces")
}

impl Rule {
    /// Whether the rule names this write (its version included).
    fn matches(&self, attrs: &Attributes<'_>) -> bool {
        listed(&self.groups, attrs.group)
            && listed(&self.versions, attrs.version)
            && self.names_resource(attrs)
    }

    /// Whether the rule names this write's resource in some group and version (equivalent
    /// resources share their resource's name: a custom resource's versions, kube's built-in
    /// equivalents).
    fn names_resource(&self, attrs: &Attributes<'_>) -> bool {
        let resource = self.resources.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == attrs.resource) && (sub == "*" || sub == attrs.subresource.unwrap_or(""))
        });
        let namespaced = attrs.namespaced && !is_namespace(attrs);
        let scope = match self.scope.as_str() {
            "Namespaced" => namespaced,
            "Cluster" => !namespaced,
            _ => true,
        };
        listed(&self.operations, attrs.operation.as_str()) && resource && scope
    }
}

fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
        .collect()
}

fn empty(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(|l| l.is_empty())
        && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// kube's namespace matcher: a cluster-scoped object other than a namespace always matches; a
/// namespace is matched by its own labels, anything else by its namespace's.
fn namespace_matches(store: &Store, s: &LabelSelector, attrs: &Attributes<'_>, obj: Option<&Value>) -> bool {
    if empty(s) {
        return true;
    }
    if is_namespace(attrs) {
        let own = obj.or(attrs.old).map(labels).unwrap_or_default();
        return selector_matches(s, &own);
    }
    let Some(ns) = attrs.namespace.filter(|_| attrs.namespaced) else {
        return true;
    };
    let key = keys::object("", "namespaces", None, ns);
    let found = store.cache().get(&key).ok().flatten();
    selector_matches(s, &found.map(|n| labels(&n.value())).unwrap_or_default())
}

/// kube's object matcher: the new or the old object's labels match.
fn object_matches(s: &LabelSelector, attrs: &Attributes<'_>, obj: Option<&Value>) -> bool {
    empty(s)
        || [obj, attrs.old]
            .into_iter()
            .flatten()
            .any(|o| selector_matches(s, &labels(o)))
}

/// How a webhook is called for a write: as the request's own resource, or (under
/// `matchPolicy: Equivalent`) as an equivalent resource that a rule names, with the objects
/// converted to it, as kube's `ShouldCallHook` picks the resource and converts its versioned
/// attributes.
#[derive(Debug, Default)]
pub struct Invocation {
    /// The resource called as, when it is not the request's.
    equivalent: Option<Equivalent>,
    /// The object as that resource.
    object: Option<Value>,
    /// The stored object as that resource.
    old: Option<Value>,
}

impl Invocation {
    /// The write as the webhook sees it.
    pub fn attributes<'a>(&'a self, attrs: &Attributes<'a>) -> Attributes<'a> {
        match &self.equivalent {
            None => *attrs,
            Some(equivalent) => Attributes {
                old: self.old.as_ref(),
                ..equivalent.seen(attrs)
            },
        }
    }

    /// The object as the webhook sees it.
    pub fn object<'a>(&'a self, obj: Option<&'a Value>) -> Option<&'a Value> {
        match self.equivalent {
            None => obj,
            Some(_) => self.object.as_ref(),
        }
    }

    /// The resource a mutated object (as the webhook sees it) must be converted back from.
    pub fn converted_from(&self) -> Option<&Equivalent> {
        self.equivalent.as_ref()
    }
}

/// The resource `hook` is called as for this write, if a rule matches it: the request's own
/// (`Some(None)`), else under `Equivalent` the first of the resource's equivalents
/// (`equivalents`, asked only then) a rule names.
fn matched_version(
    hook: &Hook,
    attrs: &Attributes<'_>,
    equivalents: impl FnOnce() -> Vec<Equivalent>,
) -> Option<Option<Equivalent>> {
    if hook.rules.iter().any(|r| r.matches(attrs)) {
        return Some(None);
    }
    // The resource's equivalents are looked up only for a rule that names its resource (most
    // webhooks are for other resources entirely).
    if !hook.equivalent || !hook.rules.iter().any(|r| r.names_resource(attrs)) {
        return None;
    }
    equivalents()
        .into_iter()
        .find(|equivalent| {
            let other = equivalent.seen(attrs);
            hook.rules.iter().any(|r| r.matches(&other))
        })
        .map(Some)
}

/// Whether `hook` is called for this write, and how: its rules, then (on the objects as it
/// would see them) its selectors and match conditions.
pub async fn invocation(
    store: &Store,
    hook: &Hook,
    attrs: &Attributes<'_>,
    obj: Option<&Value>,
) -> ApiResult<Option<Invocation>> {
    let equivalents = || attrs.versions.map(|v| v.equivalents(store)).unwrap_or_default();
    let Some(version) = matched_version(hook, attrs, equivalents) else {
        return Ok(None);
    };
    let invocation = match (version, attrs.versions) {
        (Some(equivalent), Some(versions)) => {
            let object = match obj {
                Some(o) => Some(versions.to_version(store, o, &equivalent).await?),
                None => None,
            };
            let old = match attrs.old {
                Some(o) => Some(versions.to_version(store, o, &equivalent).await?),
                None => None,
            };
            Invocation {
                equivalent: Some(equivalent),
                object,
                old,
            }
        }
        _ => Invocation::default(),
    };
    let seen = invocation.attributes(attrs);
    let obj = invocation.object(obj);
    let ns = hook
        .namespace_selector
        .as_ref()
        .is_none_or(|s| namespace_matches(store, s, &seen, obj));
    let object = hook
        .object_selector
        .as_ref()
        .is_none_or(|s| object_matches(s, &seen, obj));
    let called = ns && object && (hook.conditions.is_empty() || conditions_hold(hook, &seen, attrs, obj)?);
    Ok(called.then_some(invocation))
}

/// kube's match condition matcher: the conditions in order; the first `false` skips the webhook
/// (even after errors); errors without a `false` fail the write with kube's Forbidden, or skip
/// the webhook under `failurePolicy: Ignore`.
fn conditions_hold(
    hook: &Hook,
    attrs: &Attributes<'_>,
    requested: &Attributes<'_>,
    obj: Option<&Value>,
) -> ApiResult<bool> {
    // kube builds the `request` variable as a `v1` AdmissionRequest, whatever the webhook speaks.
    let request = super::review::request(ReviewVersion::V1, attrs, requested, obj).1["request"].take();
    let [authorizer, request_resource] = crate::admission::authorizer::variables(attrs);
    let vars = [
        ("object", obj.map_or(cel::Value::Null, value::from_json)),
        ("oldObject", attrs.old.map_or(cel::Value::Null, value::from_json)),
        ("request", value::from_json(&request)),
        authorizer,
        request_resource,
    ];
    let mut budget = MATCH_CONDITIONS_BUDGET;
    let mut errors = Vec::new();
    for c in hook.conditions.iter() {
        let program = match &c.program {
            Ok(p) => p,
            Err(e) => {
                errors.push(format!("compilation error: {e}"));
                continue;
            }
        };
        match program.evaluate(&vars, &mut budget) {
            Ok(cel::Value::Bool(false)) => return Ok(false),
            Ok(_) => {}
            // kube stops at an exhausted budget: that is the one error.
            Err(e @ EvalError::BudgetExhausted) => {
                errors = vec![eval_message(&c.expression, &e)];
                break;
            }
            Err(e) => errors.push(eval_message(&c.expression, &e)),
        }
    }
    if errors.is_empty() {
        return Ok(true);
    }
    if !hook.fail {
        tracing::warn!(webhook = %hook.name, errors = ?errors, "match conditions failed, skipping the webhook");
        return Ok(false);
    }
    let why = if errors.len() == 1 {
        errors.remove(0)
    } else {
        format!("[{}]", errors.join(", "))
    };
    Err(ApiError::forbidden(attrs.group, attrs.resource, attrs.name, &why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use serde_json::json;

    fn attrs(
        resource: &'static str,
        sub: Option<&'static str>,
        version: &'static str,
    ) -> Attributes<'static> {
        Attributes {
            resource,
            subresource: sub,
            version,
            group: "apps",
            ..crate::admission::tests::pod_create()
        }
    }

    fn hook(rule: Value, policy: &str) -> Hook {
        Hook::parse(
            &json!({"name": "h.example.com", "rules": [rule], "matchPolicy": policy}),
            "x",
            false,
        )
    }

    /// kube's rule matcher: `*` is every resource without a subresource, `x/*` every
    /// subresource of x and x itself, `*/*` everything; scope splits namespaced from cluster.
    #[test]
    fn rules_match_resources_subresources_and_scope() {
        let rule = |res: &str, scope: &str| {
            let r = json!({"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": [res], "scope": scope});
            hook(r, "Exact").rules.remove(0)
        };
        let main = attrs("deployments", None, "v1");
        let scale = attrs("deployments", Some("scale"), "v1");
        assert!(rule("*", "*").matches(&main));
        assert!(!rule("*", "*").matches(&scale));
        assert!(rule("*/*", "*").matches(&scale));
        assert!(rule("deployments/scale", "*").matches(&scale));
        assert!(!rule("deployments/status", "*").matches(&scale));
        assert!(rule("deployments/*", "*").matches(&main));
        assert!(rule("*/scale", "*").matches(&scale));
        assert!(rule("*", "Namespaced").matches(&main));
        assert!(!rule("*", "Cluster").matches(&main));
        let update = Attributes {
            operation: Operation::Update,
            ..main
        };
        assert!(!rule("*", "*").matches(&update));
    }

    /// `matchPolicy: Equivalent` (the default) matches the same group and resource in another
    /// version, the first the resource has that a rule names; `Exact` does not; a rule naming
    /// the request's own version wins.
    #[test]
    fn match_policy_decides_whether_other_versions_match() {
        let rule = json!({"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["v1beta1"], "resources": ["deployments"]});
        let exact = hook(rule.clone(), "Exact");
        let equivalent = hook(rule, "Equivalent");
        let a = attrs("deployments", None, "v1");
        let in_version = |version: &str| Equivalent {
            group: "apps".into(),
            version: version.into(),
            resource: "deployments".into(),
            kind: "Deployment".into(),
        };
        let others = || vec![in_version("v1beta2"), in_version("v1beta1")];
        assert_eq!(matched_version(&exact, &a, others), None);
        assert_eq!(
            matched_version(&equivalent, &a, others),
            Some(Some(in_version("v1beta1")))
        );
        assert_eq!(matched_version(&equivalent, &a, Vec::new), None);
        let own = hook(
            json!({"operations": ["*"], "apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["deployments"]}),
            "Equivalent",
        );
        assert_eq!(matched_version(&own, &a, others), Some(None));
    }

    /// The object selector matches the new or the old object's labels; no object matches no
    /// selector that asks for something.
    #[test]
    fn object_selectors_read_the_new_and_the_old_labels() {
        let s: LabelSelector =
            serde_json::from_value(json!({"matchLabels": {"webhook": "on"}})).unwrap_or_default();
        let on = json!({"metadata": {"labels": {"webhook": "on"}}});
        let off = json!({"metadata": {}});
        let a = attrs("deployments", None, "v1");
        assert!(object_matches(&s, &a, Some(&on)));
        assert!(!object_matches(&s, &a, Some(&off)));
        assert!(!object_matches(&s, &a, None));
        let update = Attributes { old: Some(&on), ..a };
        assert!(object_matches(&s, &update, Some(&off)));
        assert!(object_matches(&LabelSelector::default(), &a, None));
    }
}
