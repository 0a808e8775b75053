//! kube's rules for admission webhook configurations (`pkg/apis/admissionregistration/validation`
//! and `apiserver/pkg/util/webhook`): each webhook has a fully qualified name unique in its
//! configuration, rules with known operations and well-formed resources, a known failure, match
//! and reinvocation policy, `sideEffects` of `None` or `NoneOnDryRun`, a timeout of 1 to 30
//! seconds, `admissionReviewVersions` naming `v1` or `v1beta1`, exactly one of an `https`
//! URL or a Service reference, and at most 64 `matchConditions` with unique qualified names and
//! expressions that compile and may give a bool.

use std::collections::BTreeSet;

use serde_json::Value;

use super::rbac::go_strings;
use super::{list_of, not_supported, str_of};
use crate::admission::webhook::ReviewVersion;
use crate::cel::{self, WEBHOOK_CONDITION_VARIABLES};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_error, dns_subdomain_error, qualified_name_error, Causes};
use crate::webhook::{validate_service, validate_url};

const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: [&str; 3] = ["*", "Cluster", "Namespaced"];
const FAILURE_POLICIES: [&str; 2] = ["Fail", "Ignore"];
const MATCH_POLICIES: [&str; 2] = ["Equivalent", "Exact"];
const SIDE_EFFECTS: [&str; 2] = ["None", "NoneOnDryRun"];
const REINVOCATION_POLICIES: [&str; 2] = ["IfNeeded", "Never"];
/// kube's most `matchConditions` of a webhook.
const MAX_MATCH_CONDITIONS: usize = 64;

/// A MutatingWebhookConfiguration.
pub fn mutating(obj: &Value, causes: &mut Causes) {
    configuration(obj, true, causes);
}

/// A ValidatingWebhookConfiguration.
pub fn validating(obj: &Value, causes: &mut Causes) {
    configuration(obj, false, causes);
}

fn configuration(obj: &Value, mutating: bool, causes: &mut Causes) {
    let mut names = BTreeSet::new();
    for (i, hook) in list_of(obj, "webhooks").iter().enumerate() {
        let at = format!("webhooks[{i}]");
        webhook(hook, &at, mutating, causes);
        review_versions(list_of(hook, "admissionReviewVersions"), &at, causes);
        let name = str_of(hook, "name");
        if !name.is_empty() && !names.insert(name) {
            causes.push((
                format!("{at}.name"),
                format!("Duplicate value: {}", go_quote(name)),
            ));
        }
    }
}

/// An optional field that must hold one of `supported`.
fn optional_one_of(hook: &Value, field: &str, supported: &[&str], at: &str, causes: &mut Causes) {
    if let Some(v) = hook.get(field).and_then(Value::as_str) {
        if !supported.contains(&v) {
            causes.push((format!("{at}.{field}"), not_supported(v, supported)));
        }
    }
}

fn webhook(hook: &Value, at: &str, mutating: bool, causes: &mut Causes) {
    fully_qualified(str_of(hook, "name"), format!("{at}.name"), causes);
    for (i, rule) in list_of(hook, "rules").iter().enumerate() {
        rule_with_operations(rule, &format!("{at}.rules[{i}]"), causes);
    }
    optional_one_of(hook, "failurePolicy", &FAILURE_POLICIES, at, causes);
    optional_one_of(hook, "matchPolicy", &MATCH_POLICIES, at, causes);
    match hook.get("sideEffects").and_then(Value::as_str) {
        None => causes.push((
            format!("{at}.sideEffects"),
            format!("Required value: must specify one of {}", SIDE_EFFECTS.join(", ")),
        )),
        Some(_) => optional_one_of(hook, "sideEffects", &SIDE_EFFECTS, at, causes),
    }
    if let Some(t) = hook.get("timeoutSeconds").and_then(Value::as_i64) {
        if !(1..=30).contains(&t) {
            causes.push((
                format!("{at}.timeoutSeconds"),
                format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
            ));
        }
    }
    if mutating {
        optional_one_of(hook, "reinvocationPolicy", &REINVOCATION_POLICIES, at, causes);
    }
    let cc = &hook["clientConfig"];
    match (
        cc.get("url").and_then(Value::as_str),
        cc.get("service").filter(|s| s.is_object()),
    ) {
        (Some(url), None) => validate_url(url, &format!("{at}.clientConfig.url"), causes),
        (None, Some(svc)) => validate_service(svc, &format!("{at}.clientConfig.service"), causes),
        _ => causes.push((
            format!("{at}.clientConfig"),
            "Required value: exactly one of url or service is required".to_string(),
        )),
    }
    match_conditions(
        list_of(hook, "matchConditions"),
        &format!("{at}.matchConditions"),
        causes,
    );
}

/// kube's `validateMatchConditions`.
fn match_conditions(conditions: &[Value], at: &str, causes: &mut Causes) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        causes.push((
            at.to_string(),
            format!(
                "Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items",
                conditions.len()
            ),
        ));
    }
    // Unique names are the schema's check (`matchConditions` is a list map keyed by name).
    for (i, c) in conditions.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let expression = str_of(c, "expression").trim();
        if expression.is_empty() {
            causes.push((format!("{at}.expression"), "Required value".to_string()));
        } else {
            let why = match cel::compile_admission_expression(expression, &WEBHOOK_CONDITION_VARIABLES) {
                Err(e) => Some(e.to_string()),
                Ok(p) if p.never_bool() => Some("must evaluate to bool".to_string()),
                Ok(_) => None,
            };
            if let Some(why) = why {
                causes.push((
                    format!("{at}.expression"),
                    format!("Invalid value: {}: {why}", go_quote(expression)),
                ));
            }
        }
        let name = str_of(c, "name");
        if name.is_empty() {
            causes.push((format!("{at}.name"), "Required value".to_string()));
        } else if let Some(e) = qualified_name_error(name) {
            causes.push((format!("{at}.name"), e));
        }
    }
}

/// kube's `IsFullyQualifiedName`: a DNS subdomain of at least three segments.
fn fully_qualified(name: &str, field: String, causes: &mut Causes) {
    if name.is_empty() {
        causes.push((field, "Required value".to_string()));
    } else if let Some(e) = dns_subdomain_error(name) {
        causes.push((field, e));
    } else if name.split('.').count() < 3 {
        causes.push((
            field,
            format!(
                "Invalid value: {}: should be a domain with at least three segments separated by dots",
                go_quote(name)
            ),
        ));
    }
}

fn has_wildcard(items: &[Value]) -> bool {
    items.iter().any(|v| v.as_str() == Some("*"))
}

/// kube's `validateRuleWithOperations` (subresources allowed).
fn rule_with_operations(rule: &Value, at: &str, causes: &mut Causes) {
    let operations = list_of(rule, "operations");
    if operations.is_empty() {
        causes.push((format!("{at}.operations"), "Required value".to_string()));
    }
    if operations.len() > 1 && has_wildcard(operations) {
        causes.push((
            format!("{at}.operations"),
            format!(
                "Invalid value: {}: if '*' is present, must not specify other operations",
                go_strings(operations)
            ),
        ));
    }
    for (i, op) in operations.iter().enumerate() {
        let op = op.as_str().unwrap_or_default();
        if !OPERATIONS.contains(&op) {
            causes.push((format!("{at}.operations[{i}]"), not_supported(op, &OPERATIONS)));
        }
    }
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let items = list_of(rule, field);
        if items.is_empty() {
            causes.push((format!("{at}.{field}"), "Required value".to_string()));
        }
        if items.len() > 1 && has_wildcard(items) {
            causes.push((
                format!("{at}.{field}"),
                format!(
                    "Invalid value: {}: if '*' is present, must not specify other {what}",
                    go_strings(items)
                ),
            ));
        }
    }
    for (i, v) in list_of(rule, "apiVersions").iter().enumerate() {
        if v.as_str().unwrap_or_default().is_empty() {
            causes.push((format!("{at}.apiVersions[{i}]"), "Required value".to_string()));
        }
    }
    resources(list_of(rule, "resources"), &format!("{at}.resources"), causes);
    optional_one_of(rule, "scope", &SCOPES, at, causes);
}

/// kube's `validateResources`: `x/*` and `*/x` exclude what they cover, `*/*` and `*` stand
/// alone.
fn resources(items: &[Value], at: &str, causes: &mut Causes) {
    if items.is_empty() {
        causes.push((at.to_string(), "Required value".to_string()));
    }
    let mut wildcard_subs = BTreeSet::new();
    let mut wildcard_resources = BTreeSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, item) in items.iter().enumerate() {
        let r = item.as_str().unwrap_or_default();
        if r.is_empty() {
            causes.push((format!("{at}[{i}]"), "Required value".to_string()));
            continue;
        }
        double |= r == "*/*";
        single |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            plain = r != "*";
            continue;
        };
        if wildcard_subs.contains(res) {
            causes.push((
                format!("{at}[{i}]"),
                format!(
                    "Invalid value: {}: if '{res}/*' is present, must not specify {r}",
                    go_quote(r)
                ),
            ));
        }
        if wildcard_resources.contains(sub) {
            causes.push((
                format!("{at}[{i}]"),
                format!(
                    "Invalid value: {}: if '*/{sub}' is present, must not specify {r}",
                    go_quote(r)
                ),
            ));
        }
        if sub == "*" {
            wildcard_subs.insert(res);
        }
        if res == "*" {
            wildcard_resources.insert(sub);
        }
    }
    if items.len() > 1 && double {
        causes.push((
            at.to_string(),
            format!(
                "Invalid value: {}: if '*/*' is present, must not specify other resources",
                go_strings(items)
            ),
        ));
    }
    if single && plain {
        causes.push((
            at.to_string(),
            format!(
                "Invalid value: {}: if '*' is present, must not specify other resources without subresources",
                go_strings(items)
            ),
        ));
    }
}

fn review_versions(versions: &[Value], at: &str, causes: &mut Causes) {
    let field = format!("{at}.admissionReviewVersions");
    if versions.is_empty() {
        causes.push((
            field,
            format!(
                "Required value: must specify one of {}",
                ReviewVersion::names().collect::<Vec<_>>().join(", ")
            ),
        ));
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, v) in versions.iter().enumerate() {
        let v = v.as_str().unwrap_or_default();
        if !seen.insert(v) {
            causes.push((
                format!("{field}[{i}]"),
                format!("Invalid value: {}: duplicate version", go_quote(v)),
            ));
            continue;
        }
        if let Some(e) = dns_label_error(v) {
            causes.push((format!("{field}[{i}]"), e));
        }
    }
    if !seen
        .iter()
        .any(|v| ReviewVersion::names().any(|known| known == *v))
    {
        causes.push((
            field,
            format!(
                "Invalid value: {}: must include at least one of {}",
                go_strings(versions),
                ReviewVersion::names().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes_of(hook: Value) -> Causes {
        let mut causes = Causes::new();
        validating(&json!({"webhooks": [hook]}), &mut causes);
        causes
    }

    fn valid() -> Value {
        json!({
            "name": "deny.example.com",
            "clientConfig": {"url": "https://127.0.0.1:8443/deny"},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps", "pods/status"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    #[test]
    fn a_complete_webhook_is_valid() {
        assert_eq!(causes_of(valid()), Causes::new());
    }

    /// kube's messages for the main rules.
    #[test]
    fn the_main_rules_are_kubes() {
        let mut w = valid();
        w["name"] = json!("deny");
        w["sideEffects"] = json!("Unknown");
        w["timeoutSeconds"] = json!(31);
        w["admissionReviewVersions"] = json!(["v2"]);
        w["clientConfig"] = json!({"url": "http://127.0.0.1/deny"});
        let causes = causes_of(w);
        let expected = [
            ("webhooks[0].name", "Invalid value: \"deny\": should be a domain with at least three segments separated by dots"),
            ("webhooks[0].sideEffects", "Unsupported value: \"Unknown\": supported values: \"None\", \"NoneOnDryRun\""),
            ("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be between 1 and 30 seconds"),
            ("webhooks[0].clientConfig.url", "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"),
            ("webhooks[0].admissionReviewVersions", "Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1"),
        ];
        let expected: Causes = expected
            .iter()
            .map(|(f, m)| (f.to_string(), m.to_string()))
            .collect();
        assert_eq!(causes, expected);
        let mut w = valid();
        w.as_object_mut().map(|o| o.remove("sideEffects"));
        w["clientConfig"] =
            json!({"url": "https://a.example.com", "service": {"name": "s", "namespace": "n"}});
        let causes = causes_of(w);
        assert_eq!(
            causes,
            vec![
                (
                    "webhooks[0].sideEffects".to_string(),
                    "Required value: must specify one of None, NoneOnDryRun".to_string()
                ),
                (
                    "webhooks[0].clientConfig".to_string(),
                    "Required value: exactly one of url or service is required".to_string()
                ),
            ]
        );
        let mut twice = Causes::new();
        validating(&json!({"webhooks": [valid(), valid()]}), &mut twice);
        assert_eq!(
            twice,
            vec![(
                "webhooks[1].name".to_string(),
                "Duplicate value: \"deny.example.com\"".to_string()
            )]
        );
    }
}
