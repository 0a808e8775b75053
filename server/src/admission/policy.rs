//! The `ValidatingAdmissionPolicy` plugin: ValidatingAdmissionPolicies, put in force by their
//! bindings, refuse (`Deny`), warn about (`Warn`) or record in the audit log (`Audit`) writes
//! whose CEL validations fail, and annotate the audit event with their `auditAnnotations`.
//!
//! On every write, on every replica, the plugin reads the policies from the local watch cache,
//! which the chain brought up to date with a read barrier (so a policy or binding whose write
//! was acknowledged anywhere is in force at once), matches each binding's policy
//! (`matchConstraints`), then the binding (`matchResources`), evaluates `matchConditions`, resolves the binding's params
//! (`paramKind`/`paramRef`), computes `variables` and evaluates `validations`, as
//! kube-apiserver's `validatingadmissionpolicy` dispatcher does, with its messages. A
//! policy's expressions are compiled once per change of the policy (cached by
//! resourceVersion), never per request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::admission::audit_annotations::annotate;
use crate::admission::warnings::warn;
use crate::admission::{Attributes, Equivalent, Validating};
use crate::cel::{self, value, EvalError, Program, RUNTIME_BUDGET};
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::go_json;
use crate::machinery::selector::{selector_string, LabelSelector};
use crate::store::cacher::WatchCache;
use crate::store::{keys, Store};

const GROUP: &str = "admissionregistration.k8s.io";

/// The resources no policy applies to (kube's `IsExemptAdmissionConfigurationResource`), so
/// that a policy cannot lock out its own repair.
const EXEMPT: [&str; 6] = [
    "validatingwebhookconfigurations",
    "mutatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
];

/// kube's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// The plugin.
pub struct ValidatingAdmissionPolicy;

impl Validating for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn validate<'a>(
        &'a self,
        store: &'a Store,
        attrs: &'a Attributes<'a>,
        obj: &'a Value,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if attrs.group == GROUP && EXEMPT.contains(&attrs.resource) {
                return Ok(());
            }
            admit(store, attrs, obj).await
        })
    }
}

/// An expression as compiled (or why it does not compile).
type Compiled = Result<Program, cel::CompileError>;

fn compile(expression: &str) -> Compiled {
    cel::compile_policy_expression(expression)
}

/// One of a policy's `validations`.
struct Validation {
    expression: String,
    program: Compiled,
    message: String,
    message_expression: Option<Compiled>,
    reason: Option<String>,
}

/// A policy, compiled.
struct Policy {
    rv: i64,
    spec: Value,
    match_conditions: Vec<(String, Compiled)>,
    variables: Vec<(String, Compiled)>,
    validations: Vec<Validation>,
    /// `auditAnnotations`: each key with its compiled `valueExpression`.
    audit_annotations: Vec<(String, Compiled)>,
}

impl Policy {
    fn of(rv: i64, obj: &Value) -> Policy {
        let spec = obj["spec"].clone();
        let list = |key: &str| spec[key].as_array().cloned().unwrap_or_default();
        let named = |key: &str, field: &str| {
            list(key)
                .iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap_or_default().to_string();
                    (name, compile(c[field].as_str().unwrap_or_default()))
                })
                .collect()
        };
        Policy {
            rv,
            match_conditions: named("matchConditions", "expression"),
            variables: named("variables", "expression"),
            audit_annotations: list("auditAnnotations")
                .iter()
                .map(|a| {
                    let key = a["key"].as_str().unwrap_or_default().to_string();
                    (key, compile(a["valueExpression"].as_str().unwrap_or_default()))
                })
                .collect(),
            validations: list("validations")
                .iter()
                .map(|v| {
                    let expression = v["expression"].as_str().unwrap_or_default().to_string();
                    Validation {
                        program: compile(&expression),
                        expression,
                        message: v["message"].as_str().unwrap_or_default().trim().to_string(),
                        message_expression: v["messageExpression"]
                            .as_str()
                            .filter(|m| !m.is_empty())
                            .map(compile),
                        reason: v["reason"].as_str().map(str::to_string),
                    }
                })
                .collect(),
            spec,
        }
    }
}

/// The compiled policies, by name: recompiled only when a policy's resourceVersion changes.
fn compiled(cache: &WatchCache) -> Vec<(String, Arc<Policy>)> {
    static COMPILED: OnceLock<Mutex<HashMap<String, Arc<Policy>>>> = OnceLock::new();
    let prefix = keys::type_prefix(GROUP, "validatingadmissionpolicies");
    let objects = cache
        .list(&prefix, None, None)
        .map(|s| s.objects)
        .unwrap_or_default();
    let mut known = COMPILED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut out = Vec::with_capacity(objects.len());
    for (_, cached) in &objects {
        let obj = cached.value();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let policy = match known.get(&name) {
            Some(p) if p.rv == cached.rv => p.clone(),
            _ => {
                let p = Arc::new(Policy::of(cached.rv, &obj));
                known.insert(name.clone(), p.clone());
                p
            }
        };
        out.push((name, policy));
    }
    known.retain(|name, _| out.iter().any(|(n, _)| n == name));
    out
}

/// A refusal: the policy, the binding, why, and kube's reason.
struct Denial {
    policy: String,
    binding: String,
    message: String,
    reason: Option<String>,
}

/// The write's objects as an equivalent resource (for policies matching only that resource,
/// `matchPolicy: Equivalent`), converted once per resource.
#[derive(Default)]
struct Converted(HashMap<Equivalent, (Value, Option<Value>)>);

impl Converted {
    async fn get(
        &mut self,
        store: &Store,
        attrs: &Attributes<'_>,
        obj: &Value,
        to: &Equivalent,
    ) -> ApiResult<&(Value, Option<Value>)> {
        if !self.0.contains_key(to) {
            let versions = attrs
                .versions
                .ok_or_else(|| ApiError::internal("no conversion for an equivalent version"))?;
            let converted = versions.to_version(store, obj, to).await?;
            let old = match attrs.old {
                Some(old) => Some(versions.to_version(store, old, to).await?),
                None => None,
            };
            self.0.insert(to.clone(), (converted, old));
        }
        self.0
            .get(to)
            .ok_or_else(|| ApiError::internal("a converted object went missing"))
    }
}

async fn admit(store: &Store, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
    let cache = store.cache();
    let policies = compiled(cache);
    if policies.is_empty() {
        return Ok(());
    }
    let prefix = keys::type_prefix(GROUP, "validatingadmissionpolicybindings");
    let bindings = cache
        .list(&prefix, None, None)
        .map(|s| s.objects)
        .unwrap_or_default();
    let namespace_object = attrs
        .namespace
        .and_then(|ns| {
            cache
                .get(&keys::object("", "namespaces", None, ns))
                .ok()
                .flatten()
        })
        .map(|c| c.value());
    let subject = Subject {
        attrs,
        requested: attrs,
        obj,
        namespace: namespace_object.as_ref(),
    };
    let mut converted = Converted::default();
    let equivalents = std::cell::OnceCell::new();
    let mut denials = Vec::new();
    let mut published_annotations: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (_, cached) in &bindings {
        let binding = cached.value();
        let spec = &binding["spec"];
        let Some((policy_name, policy)) = policies
            .iter()
            .find(|(n, _)| Some(n.as_str()) == spec["policyName"].as_str())
        else {
            continue;
        };
        let others = || {
            equivalents
                .get_or_init(|| attrs.versions.map(|v| v.equivalents(store)).unwrap_or_default())
                .clone()
        };
        let Some(version) = subject.matched_version(&policy.spec["matchConstraints"], others) else {
            continue;
        };
        let (versioned_attrs, versioned_obj) = match &version {
            None => (*attrs, obj),
            Some(equivalent) => {
                let (o, old) = converted.get(store, attrs, obj, equivalent).await?;
                (
                    Attributes {
                        old: old.as_ref(),
                        ..equivalent.seen(attrs)
                    },
                    o,
                )
            }
        };
        let subject = Subject {
            attrs: &versioned_attrs,
            obj: versioned_obj,
            ..subject
        };
        if spec.get("matchResources").is_some_and(|m| !subject.matches(m)) {
            continue;
        }
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let actions: Vec<&str> = spec["validationActions"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fail_closed = policy.spec["failurePolicy"].as_str() != Some("Ignore");
        let evaluation = evaluate(cache, &subject, policy, spec, fail_closed);
        for failure in evaluation.failures {
            if actions.contains(&"Warn") {
                warn(format!(
                    "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {}",
                    failure.message
                ));
            }
            if actions.contains(&"Audit") {
                annotate(
                    VALIDATION_FAILURE,
                    validation_failure(&failure, policy_name, binding_name, &actions),
                );
            }
            if actions.contains(&"Deny") {
                denials.push(Denial {
                    policy: policy_name.clone(),
                    binding: binding_name.to_string(),
                    message: failure.message,
                    reason: failure.reason,
                });
            }
        }
        let published = published_annotations.entry(policy_name.clone()).or_default();
        for (key, value) in evaluation.annotations {
            let values: &mut Vec<String> = published.entry(key).or_default();
            if !values.contains(&value) {
                values.push(value);
            }
        }
    }
    // A policy's annotations are published under its name, several bindings' distinct values
    // joined, as kube-apiserver publishes them.
    for (policy, keys) in published_annotations {
        for (key, values) in keys {
            annotate(format!("{policy}/{key}"), values.join(", "));
        }
    }
    match denials.into_iter().next() {
        None => Ok(()),
        Some(d) => Err(denied(attrs, d)),
    }
}

/// kube's answer to a denied request: `admission.NewForbidden` with the validation's reason
/// and its code.
fn denied(attrs: &Attributes<'_>, d: Denial) -> ApiError {
    let message = format!(
        "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
        d.policy, d.binding, d.message
    );
    let mut e = ApiError::forbidden(attrs.group, attrs.resource, attrs.name, &message);
    let (code, reason) = match d.reason.as_deref() {
        Some("Unauthorized") => (401, "Unauthorized"),
        Some("Forbidden") => (403, "Forbidden"),
        Some("RequestEntityTooLarge") => (413, "RequestEntityTooLarge"),
        _ => (422, "Invalid"),
    };
    e.code = code;
    e.reason = reason;
    if let Some(details) = e.details.as_mut() {
        details["causes"] = json!([{"message": message}]);
    }
    e
}

/// What the policies are matched against: the write as a policy sees it (`attrs`, `obj`, in
/// the version it matched), and as the request made it (`requested`).
#[derive(Clone, Copy)]
struct Subject<'a> {
    attrs: &'a Attributes<'a>,
    requested: &'a Attributes<'a>,
    obj: &'a Value,
    namespace: Option<&'a Value>,
}

fn contains_or_star(list: &Value, item: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|x| x == "*" || x.as_str() == Some(item)))
}

impl Subject<'_> {
    /// The resource a policy whose `matchConstraints` are `m` sees the write as, if they select
    /// it: its own (`Some(None)`), else under `matchPolicy: Equivalent` (the default) the first
    /// of the resource's equivalents (`equivalents`, asked only then) they select.
    fn matched_version(
        &self,
        m: &Value,
        equivalents: impl FnOnce() -> Vec<Equivalent>,
    ) -> Option<Option<Equivalent>> {
        if self.matches(m) {
            return Some(None);
        }
        if m["matchPolicy"].as_str() == Some("Exact") {
            return None;
        }
        equivalents()
            .into_iter()
            .find(|equivalent| {
                let attrs = equivalent.seen(self.attrs);
                let other = Subject {
                    attrs: &attrs,
                    ..*self
                };
                other.matches(m)
            })
            .map(Some)
    }

    /// Whether `m` (a `matchConstraints` or `matchResources`) selects the request.
    fn matches(&self, m: &Value) -> bool {
        let rules = |key: &str| m[key].as_array().cloned().unwrap_or_default();
        let included = rules("resourceRules").iter().any(|r| self.rule_matches(r));
        let excluded = rules("excludeResourceRules").iter().any(|r| self.rule_matches(r));
        let has_rules = m.get("resourceRules").is_some();
        (included || !has_rules)
            && !excluded
            && self.namespace_matches(&m["namespaceSelector"])
            && self.object_matches(&m["objectSelector"])
    }

    fn rule_matches(&self, r: &Value) -> bool {
        let a = self.attrs;
        let resource = match a.subresource {
            Some(sub) => format!("{}/{sub}", a.resource),
            None => a.resource.to_string(),
        };
        let resource_ok = r["resources"].as_array().is_some_and(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .any(|pattern| match pattern.split_once('/') {
                    None => a.subresource.is_none() && (pattern == "*" || pattern == a.resource),
                    Some((res, sub)) => {
                        a.subresource.is_some_and(|s| sub == "*" || sub == s)
                            && (res == "*" || res == a.resource)
                            || pattern == resource
                    }
                })
        });
        let scope_ok = match r["scope"].as_str() {
            Some("Cluster") => !a.namespaced,
            Some("Namespaced") => a.namespaced,
            _ => true,
        };
        let names_ok = r["resourceNames"]
            .as_array()
            .is_none_or(|names| names.is_empty() || names.iter().any(|n| n.as_str() == Some(a.name)));
        contains_or_star(&r["operations"], a.operation.as_str())
            && contains_or_star(&r["apiGroups"], a.group)
            && contains_or_star(&r["apiVersions"], a.version)
            && resource_ok
            && scope_ok
            && names_ok
    }

    fn selector_matches(selector: &Value, labels_of: &Value) -> bool {
        if !selector.is_object() {
            return true;
        }
        LabelSelector::parse(&selector_string(selector)).is_ok_and(|s| s.matches(labels_of))
    }

    fn namespace_matches(&self, selector: &Value) -> bool {
        if self.attrs.group.is_empty() && self.attrs.resource == "namespaces" {
            return Self::selector_matches(selector, self.obj);
        }
        match (self.attrs.namespaced, self.namespace) {
            (false, _) => true,
            (true, Some(ns)) => Self::selector_matches(selector, ns),
            (true, None) => Self::selector_matches(selector, &json!({})),
        }
    }

    fn object_matches(&self, selector: &Value) -> bool {
        Self::selector_matches(selector, self.obj)
            || self
                .attrs
                .old
                .is_some_and(|old| Self::selector_matches(selector, old))
    }

    /// kube's `AdmissionRequest` as CEL's `request`.
    fn request(&self) -> cel::Value {
        let (a, requested) = (self.attrs, self.requested);
        let gvk = |a: &Attributes<'_>| json!({"group": a.group, "version": a.version, "kind": a.kind});
        let gvr =
            |a: &Attributes<'_>| json!({"group": a.group, "version": a.version, "resource": a.resource});
        let user = a.user.map_or(
            json!({}),
            |u| json!({"username": u.name, "uid": u.uid, "groups": u.groups, "extra": u.extra}),
        );
        let mut r = json!({
            "uid": uuid::Uuid::new_v4().to_string(),
            "kind": gvk(a), "resource": gvr(a), "requestKind": gvk(requested), "requestResource": gvr(requested),
            "name": a.name, "namespace": a.namespace.unwrap_or_default(),
            "operation": a.operation.as_str(), "userInfo": user, "dryRun": a.dry_run,
        });
        if let Some(sub) = a.subresource {
            r["subResource"] = json!(sub);
            r["requestSubResource"] = json!(sub);
        }
        value::from_json(&r)
    }
}

/// The failures (message, reason) of one policy under one binding.
fn evaluate(
    cache: &WatchCache,
    subject: &Subject<'_>,
    policy: &Policy,
    binding: &Value,
    fail_closed: bool,
) -> Evaluation {
    let error = |message: String, index: usize| {
        if fail_closed {
            vec![Failure {
                message,
                reason: None,
                index,
            }]
        } else {
            Vec::new()
        }
    };
    let params = match params(cache, subject, &policy.spec["paramKind"], &binding["paramRef"]) {
        Ok(p) => p,
        Err(message) => {
            return Evaluation {
                failures: error(format!("failed to configure binding: {message}"), 0),
                annotations: Vec::new(),
            }
        }
    };
    let mut failures = Vec::new();
    let mut annotations = Vec::new();
    for param in params {
        let mut budget = RUNTIME_BUDGET;
        let mut vars: Vec<(&str, cel::Value)> = vec![
            ("object", value::from_json(subject.obj)),
            (
                "oldObject",
                subject.attrs.old.map_or(cel::Value::Null, value::from_json),
            ),
            ("request", subject.request()),
            (
                "params",
                param.as_ref().map_or(cel::Value::Null, value::from_json),
            ),
            (
                "namespaceObject",
                subject.namespace.map_or(cel::Value::Null, value::from_json),
            ),
        ];
        vars.extend(crate::admission::authorizer::variables(subject.attrs));
        // Each variable sees the ones before it; one that fails is absent (an expression
        // reading it fails in turn).
        let mut computed: Vec<(String, cel::Value)> = Vec::new();
        for (name, program) in &policy.variables {
            let mut with = vars.clone();
            with.push((
                "variables",
                value::map(computed.iter().map(|(n, v)| (n.as_str(), v.clone()))),
            ));
            if let Ok(Ok(v)) = program.as_ref().map(|p| p.evaluate(&with, &mut budget)) {
                computed.push((name.clone(), v));
            }
        }
        vars.push((
            "variables",
            value::map(computed.iter().map(|(n, v)| (n.as_str(), v.clone()))),
        ));
        let mut run = |program: &Compiled, expression: &str| -> Result<cel::Value, String> {
            let program = program.as_ref().map_err(|e| format!("compilation error: {e}"))?;
            program
                .evaluate(&vars, &mut budget)
                .map_err(|e| eval_message(expression, &e))
        };
        let mut matched = true;
        for ((name, program), condition) in policy
            .match_conditions
            .iter()
            .zip(policy.spec["matchConditions"].as_array().into_iter().flatten())
        {
            let expression = condition["expression"].as_str().unwrap_or_default();
            match run(program, expression) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(_) => matched = false,
                Err(e) => {
                    return Evaluation {
                        failures: error(format!("failed to evaluate matchCondition '{name}': {e}"), 0),
                        annotations,
                    };
                }
            }
        }
        if !matched {
            continue;
        }
        for (index, v) in policy.validations.iter().enumerate() {
            match run(&v.program, &v.expression) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => {
                    let from_expression = v
                        .message_expression
                        .as_ref()
                        .and_then(|m| run(m, "").ok())
                        .and_then(|m| match m {
                            cel::Value::String(s) => Some(s.trim().to_string()),
                            _ => None,
                        })
                        .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
                    let message = from_expression
                        .or_else(|| (!v.message.is_empty()).then(|| v.message.clone()))
                        .unwrap_or_else(|| format!("failed expression: {}", v.expression.trim()));
                    failures.push(Failure {
                        message,
                        reason: v.reason.clone(),
                        index,
                    });
                }
                Ok(_) => failures.extend(error(
                    format!(
                        "expression '{}' resulted in error: validation expression must evaluate to a bool",
                        v.expression
                    ),
                    index,
                )),
                Err(e) => failures.extend(error(e, index)),
            }
        }
        for ((key, program), spec) in policy
            .audit_annotations
            .iter()
            .zip(policy.spec["auditAnnotations"].as_array().into_iter().flatten())
        {
            let expression = spec["valueExpression"].as_str().unwrap_or_default();
            match run(program, expression) {
                Ok(cel::Value::String(value)) => {
                    let mut value = value.to_string();
                    if value.len() > MAX_AUDIT_ANNOTATION_BYTES {
                        let mut end = MAX_AUDIT_ANNOTATION_BYTES;
                        while !value.is_char_boundary(end) {
                            end -= 1;
                        }
                        value.truncate(end);
                    }
                    if !annotations.contains(&(key.clone(), value.clone())) {
                        annotations.push((key.clone(), value));
                    }
                }
                Ok(cel::Value::Null) => {}
                Ok(_) => failures.extend(error(
                    format!("valueExpression '{expression}' resulted in error: value expression must evaluate to a string or null"),
                    0,
                )),
                Err(e) => failures.extend(error(e, 0)),
            }
        }
    }
    Evaluation {
        failures,
        annotations,
    }
}

/// What a binding's evaluation found: failed validations, and the audit annotations it made.
struct Evaluation {
    failures: Vec<Failure>,
    annotations: Vec<(String, String)>,
}

/// A validation that failed (or could not be evaluated under `failurePolicy: Fail`).
struct Failure {
    message: String,
    reason: Option<String>,
    /// The index of the validation in the policy's list.
    index: usize,
}

/// The value of the [`VALIDATION_FAILURE`] annotation: a JSON list of one failure, with the
/// fields of kube's `ValidationFailureValue` in its order, encoded as Go encodes it.
fn validation_failure(failure: &Failure, policy: &str, binding: &str, actions: &[&str]) -> String {
    fn go<T: serde::Serialize + ?Sized>(v: &T) -> String {
        go_json::encode(v, false)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
    format!(
        "[{{\"message\":{},\"policy\":{},\"binding\":{},\"expressionIndex\":{},\"validationActions\":{}}}]",
        go(&failure.message),
        go(policy),
        go(binding),
        failure.index,
        go(actions),
    )
}

/// kube's `maxAuditAnnotationValueLength`.
const MAX_AUDIT_ANNOTATION_BYTES: usize = 10 * 1024;
/// The audit annotation of a failed validation whose binding's actions include `Audit`.
const VALIDATION_FAILURE: &str = "validation.policy.admission.k8s.io/validation_failure";

/// kube's message for an expression whose evaluation failed.
pub(crate) fn eval_message(expression: &str, e: &EvalError) -> String {
    match e {
        EvalError::BudgetExhausted => {
            "validation failed due to running out of cost budget, no further validation rules will be run"
                .to_string()
        }
        other => format!("expression '{expression}' resulted in error: {other}"),
    }
}

/// Where objects of a param kind are stored: the group, the plural and whether they are
/// namespaced (built-in kinds, else custom kinds from their definitions).
fn param_type(cache: &WatchCache, api_version: &str, kind: &str) -> Option<(String, String, bool)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    static BUILTIN: OnceLock<Vec<crate::scheme::ResourceType>> = OnceLock::new();
    if let Some(rt) = BUILTIN
        .get_or_init(crate::scheme::builtin)
        .iter()
        .find(|rt| &*rt.group == group && &*rt.version == version && &*rt.kind == kind)
    {
        return Some((group.to_string(), rt.plural.to_string(), rt.namespaced));
    }
    let crds = cache.list(
        &keys::type_prefix("apiextensions.k8s.io", "customresourcedefinitions"),
        None,
        None,
    )?;
    crds.objects.iter().find_map(|(_, c)| {
        let crd = c.value();
        let spec = &crd["spec"];
        (spec["group"] == group && spec["names"]["kind"] == kind).then(|| {
            (
                group.to_string(),
                spec["names"]["plural"].as_str().unwrap_or_default().to_string(),
                spec["scope"] == "Namespaced",
            )
        })
    })
}

/// The params a binding gives its policy: one `None` when the policy takes none.
fn params(
    cache: &WatchCache,
    subject: &Subject<'_>,
    kind: &Value,
    param_ref: &Value,
) -> Result<Vec<Option<Value>>, String> {
    if !kind.is_object() {
        return Ok(vec![None]);
    }
    if !param_ref.is_object() {
        return Err("param kind is set but the binding has no paramRef".to_string());
    }
    let api_version = kind["apiVersion"].as_str().unwrap_or_default();
    let kind_name = kind["kind"].as_str().unwrap_or_default();
    let (group, plural, namespaced) = param_type(cache, api_version, kind_name).ok_or_else(|| {
        format!("failed to find resource referenced by paramKind: '{api_version}, Kind={kind_name}'")
    })?;
    let namespace =
        match (
            namespaced,
            param_ref["namespace"].as_str().filter(|n| !n.is_empty()),
        ) {
            (false, _) => None,
            (true, Some(ns)) => Some(ns.to_string()),
            (true, None) => match subject.attrs.namespace {
                Some(ns) => Some(ns.to_string()),
                None => return Err(
                    "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                        .to_string(),
                ),
            },
        };
    let found: Vec<Option<Value>> = match param_ref["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => cache
            .get(&keys::object(&group, &plural, namespace.as_deref(), name))
            .ok()
            .flatten()
            .map(|c| vec![Some(c.value())])
            .unwrap_or_default(),
        None => {
            let prefix = match &namespace {
                Some(ns) => format!("{}{ns}/", keys::type_prefix(&group, &plural)),
                None => keys::type_prefix(&group, &plural),
            };
            let selector = &param_ref["selector"];
            cache
                .list(&prefix, None, None)
                .map(|s| s.objects)
                .unwrap_or_default()
                .iter()
                .map(|(_, c)| c.value())
                .filter(|o| Subject::selector_matches(selector, o))
                .map(Some)
                .collect()
        }
    };
    if found.is_empty() {
        return match param_ref["parameterNotFoundAction"].as_str() {
            Some("Allow") => Ok(Vec::new()),
            _ => Err("no params found for policy binding with `Deny` parameterNotFoundAction".to_string()),
        };
    }
    Ok(found)
}
