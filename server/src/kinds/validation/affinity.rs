//! A pod's `affinity`, as kube's `validateAffinity` checks it: node affinity terms whose
//! match expressions use a known operator with the values it needs (`In`/`NotIn` some,
//! `Exists`/`DoesNotExist` none, `Gt`/`Lt` exactly one) and whose match fields name only
//! `metadata.name`; pod (anti-)affinity terms with valid selectors, namespaces, label keys and
//! a qualified `topologyKey`; and preferred terms weighted 1–100.

use serde_json::Value;

use super::label_selector::{key_and_values, label_keys, label_name, label_selector, Values};
use super::{list_of, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_reasons, dns_subdomain_reasons, Causes};

/// The required and preferred lists of an affinity, in the order kube checks them.
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";
const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// Checks `spec.affinity` of the pod spec `spec` at `path`.
pub fn affinity(spec: &Value, path: &str, causes: &mut Causes) {
    let affinity = &spec["affinity"];
    let at = format!("{path}.affinity");
    if affinity["nodeAffinity"].is_object() {
        node_affinity(&affinity["nodeAffinity"], &format!("{at}.nodeAffinity"), causes);
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        if affinity[kind].is_object() {
            pod_affinity(&affinity[kind], &format!("{at}.{kind}"), causes);
        }
    }
}

/// kube's `validateNodeAffinity`.
fn node_affinity(na: &Value, path: &str, causes: &mut Causes) {
    if na[REQUIRED].is_object() {
        node_selector(&na[REQUIRED], &format!("{path}.{REQUIRED}"), causes);
    }
    for (i, term) in list_of(na, PREFERRED).iter().enumerate() {
        let here = format!("{path}.{PREFERRED}[{i}]");
        weight(term, &here, causes);
        // kube accepts any value in a preferred term: it may still match a single node.
        node_selector_term(
            &term["preference"],
            Values::Unchecked,
            &format!("{here}.preference"),
            causes,
        );
    }
}

/// kube's `ValidateNodeSelector` of a required node selector at `path` (a pod's required node
/// affinity, a PersistentVolume's `nodeAffinity.required`): at least one term, each valid.
pub fn node_selector(selector: &Value, path: &str, causes: &mut Causes) {
    let terms_path = format!("{path}.nodeSelectorTerms");
    let terms = list_of(selector, "nodeSelectorTerms");
    if terms.is_empty() {
        causes.push((
            terms_path,
            "Required value: must have at least one node selector term".to_string(),
        ));
        return;
    }
    for (i, term) in terms.iter().enumerate() {
        node_selector_term(term, Values::Checked, &format!("{terms_path}[{i}]"), causes);
    }
}

/// A preferred term's weight, 1 to 100.
fn weight(term: &Value, path: &str, causes: &mut Causes) {
    let w = term.get("weight").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=100).contains(&w) {
        causes.push((
            format!("{path}.weight"),
            format!("Invalid value: {w}: must be in the range 1-100"),
        ));
    }
}

/// kube's `ValidateNodeSelectorTerm`: its match expressions, then its match fields.
fn node_selector_term(term: &Value, values: Values, path: &str, causes: &mut Causes) {
    for (j, req) in list_of(term, "matchExpressions").iter().enumerate() {
        node_selector_requirement(req, values, &format!("{path}.matchExpressions[{j}]"), causes);
    }
    for (j, req) in list_of(term, "matchFields").iter().enumerate() {
        node_field_requirement(req, &format!("{path}.matchFields[{j}]"), causes);
    }
}

/// A node selector operator: how many values it takes, and kube's words when they are wrong.
struct NodeOperator {
    name: &'static str,
    fits: fn(usize) -> bool,
    message: &'static str,
}

const SOME: &str = "Required value: must be specified when `operator` is 'In' or 'NotIn'";
const NONE: &str = "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'";
const ONE: &str = "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'";

const NODE_OPERATORS: [NodeOperator; 6] = [
    NodeOperator {
        name: "In",
        fits: |n| n > 0,
        message: SOME,
    },
    NodeOperator {
        name: "NotIn",
        fits: |n| n > 0,
        message: SOME,
    },
    NodeOperator {
        name: "Exists",
        fits: |n| n == 0,
        message: NONE,
    },
    NodeOperator {
        name: "DoesNotExist",
        fits: |n| n == 0,
        message: NONE,
    },
    NodeOperator {
        name: "Gt",
        fits: |n| n == 1,
        message: ONE,
    },
    NodeOperator {
        name: "Lt",
        fits: |n| n == 1,
        message: ONE,
    },
];

/// kube's `ValidateNodeSelectorRequirement`.
fn node_selector_requirement(req: &Value, values: Values, path: &str, causes: &mut Causes) {
    let given = list_of(req, "values");
    let operator = str_of(req, "operator");
    match NODE_OPERATORS.iter().find(|op| op.name == operator) {
        Some(op) => {
            if !(op.fits)(given.len()) {
                causes.push((format!("{path}.values"), op.message.to_string()));
            }
        }
        None => causes.push((
            format!("{path}.operator"),
            format!(
                "Invalid value: {}: not a valid selector operator",
                go_quote(operator)
            ),
        )),
    }
    key_and_values(req, given, values, path, causes);
}

/// kube's `ValidateNodeFieldSelectorRequirement`: `In` or `NotIn` one node name, by
/// `metadata.name`.
fn node_field_requirement(req: &Value, path: &str, causes: &mut Causes) {
    let given = list_of(req, "values");
    match str_of(req, "operator") {
        "In" | "NotIn" if given.len() != 1 => causes.push((
            format!("{path}.values"),
            "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
                .to_string(),
        )),
        "In" | "NotIn" => {}
        other => causes.push((
            format!("{path}.operator"),
            format!("Invalid value: {}: not a valid selector operator", go_quote(other)),
        )),
    }
    let key = str_of(req, "key");
    if key != "metadata.name" {
        causes.push((
            format!("{path}.key"),
            format!("Invalid value: {}: not a valid field selector key", go_quote(key)),
        ));
        return;
    }
    for (i, v) in given.iter().enumerate() {
        let name = v.as_str().unwrap_or_default();
        for why in dns_subdomain_reasons(name.as_bytes()) {
            causes.push((
                format!("{path}.values[{i}]"),
                format!("Invalid value: {}: {why}", go_quote(name)),
            ));
        }
    }
}

/// kube's `validatePodAffinity` and `validatePodAntiAffinity`: the required terms, then the
/// weighted preferred ones.
fn pod_affinity(pa: &Value, path: &str, causes: &mut Causes) {
    for (i, term) in list_of(pa, REQUIRED).iter().enumerate() {
        pod_affinity_term(term, &format!("{path}.{REQUIRED}[{i}]"), causes);
    }
    for (i, term) in list_of(pa, PREFERRED).iter().enumerate() {
        let here = format!("{path}.{PREFERRED}[{i}]");
        weight(term, &here, causes);
        pod_affinity_term(
            &term["podAffinityTerm"],
            &format!("{here}.podAffinityTerm"),
            causes,
        );
    }
}

/// kube's `validatePodAffinityTerm`.
fn pod_affinity_term(term: &Value, path: &str, causes: &mut Causes) {
    for selector in ["labelSelector", "namespaceSelector"] {
        label_selector(
            &term[selector],
            Values::Checked,
            &format!("{path}.{selector}"),
            causes,
        );
    }
    for name in list_of(term, "namespaces") {
        let name = name.as_str().unwrap_or_default();
        // kube names the list `namespace` here.
        for why in dns_label_reasons(name.as_bytes()) {
            causes.push((
                format!("{path}.namespace"),
                format!("Invalid value: {}: {why}", go_quote(name)),
            ));
        }
    }
    label_keys(term, path, causes);
    let key = str_of(term, "topologyKey");
    let at = format!("{path}.topologyKey");
    if key.is_empty() {
        causes.push((at.clone(), "Required value: can not be empty".to_string()));
    }
    label_name(key, &at, causes);
}
