//! ValidatingAdmissionPolicies and their bindings as kube's
//! `pkg/apis/admissionregistration/validation` checks them: what a policy must have (match
//! constraints with resource rules, validations), its enumerations (`failurePolicy`, each
//! validation's `reason`, a binding's `validationActions` and `parameterNotFoundAction`), and
//! expressions that compile — refused when the policy is written rather than failing every
//! request it matches.

use serde_json::Value;

use crate::cel;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;

fn unsupported(field: String, value: &str, supported: &[&str], causes: &mut Causes) {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    causes.push((
        field,
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
    ));
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// An expression at `field`: present, and compiling.
fn expression(field: String, source: &Value, causes: &mut Causes) {
    let text = source.as_str().unwrap_or_default();
    if text.trim().is_empty() {
        causes.push((field, "Required value: expression is not specified".to_string()));
    } else if let Err(e) = cel::compile_policy_expression(text) {
        causes.push((field, format!("Invalid value: {}: {e}", go_quote(text))));
    }
}

/// A ValidatingAdmissionPolicy.
pub fn validating_admission_policy(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    if let Some(f) = spec["failurePolicy"]
        .as_str()
        .filter(|f| !["Fail", "Ignore"].contains(f))
    {
        unsupported("spec.failurePolicy".into(), f, &["Fail", "Ignore"], causes);
    }
    if !spec["matchConstraints"].is_object() {
        causes.push(("spec.matchConstraints".into(), "Required value".into()));
    } else if items(&spec["matchConstraints"]["resourceRules"]).is_empty() {
        causes.push((
            "spec.matchConstraints.resourceRules".into(),
            "Required value".into(),
        ));
    }
    if items(&spec["validations"]).is_empty() && items(&spec["auditAnnotations"]).is_empty() {
        causes.push((
            "spec.validations".into(),
            "Required value: validations or auditAnnotations must contain at least one item".into(),
        ));
    }
    for (i, v) in items(&spec["validations"]).iter().enumerate() {
        let at = format!("spec.validations[{i}]");
        expression(format!("{at}.expression"), &v["expression"], causes);
        if v.get("messageExpression").is_some() {
            expression(format!("{at}.messageExpression"), &v["messageExpression"], causes);
        }
        const REASONS: [&str; 4] = ["Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"];
        if let Some(r) = v["reason"].as_str().filter(|r| !REASONS.contains(r)) {
            unsupported(format!("{at}.reason"), r, &REASONS, causes);
        }
    }
    for key in ["matchConditions", "variables", "auditAnnotations"] {
        let field = if key == "auditAnnotations" {
            "valueExpression"
        } else {
            "expression"
        };
        for (i, c) in items(&spec[key]).iter().enumerate() {
            expression(format!("spec.{key}[{i}].{field}"), &c[field], causes);
        }
    }
}

/// A ValidatingAdmissionPolicyBinding.
pub fn validating_admission_policy_binding(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    if spec["policyName"].as_str().is_none_or(str::is_empty) {
        causes.push(("spec.policyName".into(), "Required value".into()));
    }
    const ACTIONS: [&str; 3] = ["Audit", "Deny", "Warn"];
    let actions = items(&spec["validationActions"]);
    if actions.is_empty() {
        causes.push((
            "spec.validationActions".into(),
            "Required value: at least one validation action is required".into(),
        ));
    }
    for (i, a) in actions.iter().enumerate() {
        let text = a.as_str().unwrap_or_default();
        if !ACTIONS.contains(&text) {
            unsupported(format!("spec.validationActions[{i}]"), text, &ACTIONS, causes);
        } else if actions[..i].contains(a) {
            causes.push((
                format!("spec.validationActions[{i}]"),
                format!("Duplicate value: {text:?}"),
            ));
        }
    }
    let param_ref = &spec["paramRef"];
    if param_ref.is_object() {
        match param_ref["parameterNotFoundAction"].as_str() {
            None => causes.push((
                "spec.paramRef.parameterNotFoundAction".into(),
                "Required value".into(),
            )),
            Some(a) if !["Allow", "Deny"].contains(&a) => unsupported(
                "spec.paramRef.parameterNotFoundAction".into(),
                a,
                &["Allow", "Deny"],
                causes,
            ),
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn policies_with_broken_expressions_are_refused() {
        let mut causes = Causes::new();
        validating_admission_policy(
            &json!({"spec": {"failurePolicy": "Maybe", "matchConstraints": {"resourceRules": [{}]},
                "validations": [{"expression": "object.x ==", "reason": "Teapot"}, {"expression": "other > 1"}]}}),
            &mut causes,
        );
        let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        assert_eq!(
            text[0],
            "spec.failurePolicy: Unsupported value: \"Maybe\": supported values: \"Fail\", \"Ignore\""
        );
        assert!(text[1].starts_with("spec.validations[0].expression: Invalid value: \"object.x ==\": compilation failed: ERROR: <input>:1:"), "{text:?}");
        assert_eq!(text[2], "spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Unauthorized\", \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"");
        assert_eq!(text[3], "spec.validations[1].expression: Invalid value: \"other > 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'other' (in container '')");
        assert_eq!(text.len(), 4);
        let mut causes = Causes::new();
        validating_admission_policy_binding(
            &json!({"spec": {"policyName": "p", "validationActions": ["Deny", "Deny"], "paramRef": {"name": "x"}}}),
            &mut causes,
        );
        assert_eq!(
            causes,
            [
                (
                    "spec.validationActions[1]".to_string(),
                    "Duplicate value: \"Deny\"".to_string()
                ),
                (
                    "spec.paramRef.parameterNotFoundAction".to_string(),
                    "Required value".to_string()
                ),
            ]
        );
    }
}
