//! kube's rules for the priority and fairness configuration (`pkg/apis/flowcontrol/validation`):
//! a FlowSchema's precedence, distinguisher, level reference and rules (subjects of a known
//! kind, known verbs, `*` alone, namespaces or cluster scope, non-resource URLs that are paths
//! with at most a trailing `/*`); a priority level's type agreeing with its name, its shares,
//! percentages and queuing (within kube's bounds and the 60 bits shuffle sharding can deal);
//! and the mandatory objects' fixed specs.

use serde_json::Value;

use super::{list_of, str_of};
use crate::flowcontrol::defaults;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_reasons, dns_subdomain_reasons, Causes};

const ALL: &str = "*";
/// The verbs a rule may name, as kube lists them (sorted).
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
];
const MAX_PRECEDENCE: i64 = 10_000;
const MAX_QUEUES: i64 = 10_000_000;
/// The most random bits shuffle sharding takes from a flow's hash.
const MAX_HASH_BITS: f64 = 60.0;

/// A JSON rendering of a value, as kube shows a list or a named string.
fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn int_of(v: &Value, field: &str) -> Option<i64> {
    v.get(field).and_then(Value::as_i64)
}

/// A FlowSchema.
pub fn flow_schema(obj: &Value, causes: &mut Causes) {
    let name = str_of(&obj["metadata"], "name");
    let spec = &obj["spec"];
    if let Some(p) = int_of(spec, "matchingPrecedence") {
        let at = "spec.matchingPrecedence".to_string();
        if p <= 0 {
            causes.push((
                at.clone(),
                format!("Invalid value: {p}: must be a positive value"),
            ));
        }
        if p > MAX_PRECEDENCE {
            causes.push((
                at.clone(),
                format!("Invalid value: {p}: must not be greater than {MAX_PRECEDENCE}"),
            ));
        }
        if p == 1 && name != defaults::EXEMPT {
            causes.push((
                at,
                "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1".into(),
            ));
        }
    }
    if let Some(method) = spec.get("distinguisherMethod").filter(|m| !m.is_null()) {
        let kind = str_of(method, "type");
        if !["ByNamespace", "ByUser"].contains(&kind) {
            let shown = json(&serde_json::json!({"Type": kind}));
            causes.push((
                "spec.distinguisherMethod.type".into(),
                format!("Unsupported value: {shown}: supported values: \"ByNamespace\", \"ByUser\""),
            ));
        }
    }
    let level = str_of(&spec["priorityLevelConfiguration"], "name");
    let at = "spec.priorityLevelConfiguration.name";
    if level.is_empty() {
        causes.push((
            at.into(),
            "Required value: must reference a priority level".into(),
        ));
    }
    for why in (!level.is_empty())
        .then(|| dns_subdomain_reasons(level.as_bytes()))
        .into_iter()
        .flatten()
    {
        causes.push((at.into(), format!("Invalid value: {}: {why}", go_quote(level))));
    }
    for (i, rule) in list_of(spec, "rules").iter().enumerate() {
        policy_rule(rule, &format!("spec.rules[{i}]"), causes);
    }
    mandatory(name, "FlowSchema", spec, causes);
}

fn policy_rule(rule: &Value, at: &str, causes: &mut Causes) {
    let subjects = list_of(rule, "subjects");
    if subjects.is_empty() {
        causes.push((
            format!("{at}.subjects"),
            "Required value: subjects must contain at least one value".into(),
        ));
    }
    for (j, subject) in subjects.iter().enumerate() {
        self::subject(subject, &format!("{at}.subjects[{j}]"), causes);
    }
    let (resources, others) = (list_of(rule, "resourceRules"), list_of(rule, "nonResourceRules"));
    if resources.is_empty() && others.is_empty() {
        causes.push((
            at.into(),
            "Required value: at least one of resourceRules and nonResourceRules has to be non-empty".into(),
        ));
    }
    for (k, r) in resources.iter().enumerate() {
        resource_rule(r, &format!("{at}.resourceRules[{k}]"), causes);
    }
    for (k, r) in others.iter().enumerate() {
        non_resource_rule(r, &format!("{at}.nonResourceRules[{k}]"), causes);
    }
}

fn subject(s: &Value, at: &str, causes: &mut Causes) {
    let present = |member: &str| s.get(member).is_some_and(|m| !m.is_null());
    let forbid = |member: &str, causes: &mut Causes| {
        let kind = match member {
            "user" => "User",
            "group" => "Group",
            _ => "ServiceAccount",
        };
        if present(member) {
            causes.push((
                format!("{at}.{member}"),
                format!("Forbidden: {member} is forbidden when subject kind is not '{kind}'"),
            ));
        }
    };
    let named = |member: &str, kind: &str, causes: &mut Causes| {
        if !present(member) {
            causes.push((
                format!("{at}.{member}"),
                format!("Required value: {member} is required when subject kind is '{kind}'"),
            ));
        } else if str_of(&s[member], "name").is_empty() {
            causes.push((format!("{at}.{member}.name"), "Required value".into()));
        }
    };
    match str_of(s, "kind") {
        "ServiceAccount" => {
            service_account(
                s.get("serviceAccount").filter(|v| !v.is_null()),
                &format!("{at}.serviceAccount"),
                causes,
            );
            forbid("user", causes);
            forbid("group", causes);
        }
        "User" => {
            named("user", "User", causes);
            forbid("serviceAccount", causes);
            forbid("group", causes);
        }
        "Group" => {
            named("group", "Group", causes);
            forbid("serviceAccount", causes);
            forbid("user", causes);
        }
        other => causes.push((
            format!("{at}.kind"),
            format!(
                "Unsupported value: {}: supported values: \"Group\", \"ServiceAccount\", \"User\"",
                json(&Value::String(other.into()))
            ),
        )),
    }
}

fn service_account(sa: Option<&Value>, at: &str, causes: &mut Causes) {
    let Some(sa) = sa else {
        causes.push((
            at.into(),
            "Required value: serviceAccount is required when subject kind is 'ServiceAccount'".into(),
        ));
        return;
    };
    let name = str_of(sa, "name");
    if name.is_empty() {
        causes.push((format!("{at}.name"), "Required value".into()));
    } else if name != ALL {
        for why in dns_subdomain_reasons(name.as_bytes()) {
            causes.push((
                format!("{at}.name"),
                format!("Invalid value: {}: {why}", go_quote(name)),
            ));
        }
    }
    let namespace = str_of(sa, "namespace");
    if namespace.is_empty() {
        causes.push((
            format!("{at}.namespace"),
            "Required value: must specify namespace for service account".into(),
        ));
    }
    for why in (!namespace.is_empty())
        .then(|| dns_label_reasons(namespace.as_bytes()))
        .into_iter()
        .flatten()
    {
        causes.push((
            format!("{at}.namespace"),
            format!("Invalid value: {}: {why}", go_quote(namespace)),
        ));
    }
}

/// The list at `field` of `rule`, as strings.
fn strings<'a>(rule: &'a Value, field: &str) -> Vec<&'a str> {
    list_of(rule, field).iter().filter_map(Value::as_str).collect()
}

/// A list that must not be empty, where `*` must stand alone: `required` is the message when
/// it is empty, `others` names what `*` must not stand beside.
fn wildcard_list(
    rule: &Value,
    field: &str,
    at: &str,
    required: &str,
    others: &str,
    causes: &mut Causes,
) -> bool {
    let list = strings(rule, field);
    let path = format!("{at}.{field}");
    if list.is_empty() {
        if !required.is_empty() {
            causes.push((path, format!("Required value: {required}")));
        }
        return false;
    }
    if list.len() > 1 && list.contains(&ALL) {
        causes.push((
            path,
            format!(
                "Invalid value: {}: if '*' is present, must not specify other {others}",
                json(&rule[field])
            ),
        ));
        return false;
    }
    true
}

fn verbs(rule: &Value, at: &str, causes: &mut Causes) {
    let ok = wildcard_list(
        rule,
        "verbs",
        at,
        "verbs must contain at least one value",
        "verbs",
        causes,
    );
    let list = strings(rule, "verbs");
    if ok && list != [ALL] && !list.iter().all(|v| VERBS.contains(v)) {
        let supported: Vec<String> = VERBS.iter().map(|v| go_quote(v)).collect();
        causes.push((
            format!("{at}.verbs"),
            format!(
                "Unsupported value: {}: supported values: {}",
                json(&rule["verbs"]),
                supported.join(", ")
            ),
        ));
    }
}

fn resource_rule(rule: &Value, at: &str, causes: &mut Causes) {
    verbs(rule, at, causes);
    wildcard_list(
        rule,
        "apiGroups",
        at,
        "resource rules must supply at least one api group",
        "api groups",
        causes,
    );
    wildcard_list(
        rule,
        "resources",
        at,
        "resource rules must supply at least one resource",
        "resources",
        causes,
    );
    let cluster_scope = rule["clusterScope"].as_bool().unwrap_or(false);
    let required = match cluster_scope {
        true => "",
        false => "resource rules that are not cluster scoped must supply at least one namespace",
    };
    if wildcard_list(rule, "namespaces", at, required, "namespaces", causes) {
        for (i, ns) in strings(rule, "namespaces").into_iter().enumerate() {
            if ns == ALL {
                continue;
            }
            for why in dns_label_reasons(ns.as_bytes()) {
                causes.push((
                    format!("{at}.namespaces[{i}]"),
                    format!(
                        "Invalid value: {}: each member of this list must be '*' or a DNS-1123 label; {why}",
                        go_quote(ns)
                    ),
                ));
            }
        }
    }
}

fn non_resource_rule(rule: &Value, at: &str, causes: &mut Causes) {
    verbs(rule, at, causes);
    let ok = wildcard_list(
        rule,
        "nonResourceURLs",
        at,
        "nonResourceURLs must contain at least one value",
        "non-resource URLs",
        causes,
    );
    if !ok {
        return;
    }
    for (m, url) in strings(rule, "nonResourceURLs").into_iter().enumerate() {
        if let Some(why) = (url != ALL).then(|| url_problem(url)).flatten() {
            causes.push((
                format!("{at}.nonResourceURLs[{m}]"),
                format!("Invalid value: {}: {why}", go_quote(url)),
            ));
        }
    }
}

/// kube's `ValidateNonResourceURLPath`: the first thing wrong with a URL.
fn url_problem(url: &str) -> Option<&'static str> {
    if url.is_empty() {
        return Some("must not be empty");
    }
    if url == "/" {
        return None;
    }
    if !url.starts_with('/') {
        return Some("must start with slash");
    }
    if url.contains(' ') {
        return Some("must not contain white-space");
    }
    if url.contains("//") {
        return Some("must not contain double slash");
    }
    let stars = url.matches('*').count();
    if stars > 1 || (stars == 1 && !url.ends_with("/*")) {
        return Some("wildcard can only do suffix matching");
    }
    None
}

/// A PriorityLevelConfiguration.
pub fn priority_level(obj: &Value, causes: &mut Causes) {
    let name = str_of(&obj["metadata"], "name");
    let spec = &obj["spec"];
    let kind = str_of(spec, "type");
    let shown_kind = json(&Value::String(kind.into()));
    if (name == defaults::EXEMPT) != (kind == "Exempt") {
        causes.push((
            "spec.type".into(),
            format!("Invalid value: {shown_kind}: must be 'Exempt' if and only if `name` is 'exempt'"),
        ));
    }
    let present = |field: &str| spec.get(field).is_some_and(|v| !v.is_null());
    match kind {
        "Exempt" => {
            if present("limited") {
                causes.push((
                    "spec.limited".into(),
                    "Forbidden: must be nil if the type is not Limited".into(),
                ));
            }
            let exempt = &spec["exempt"];
            if let Some(n) = int_of(exempt, "nominalConcurrencyShares").filter(|n| *n < 0) {
                causes.push((
                    "spec.exempt.nominalConcurrencyShares".into(),
                    format!("Invalid value: {n}: must be a non-negative integer"),
                ));
            }
            percent(exempt, "spec.exempt", causes);
        }
        "Limited" => {
            if present("exempt") {
                causes.push((
                    "spec.exempt".into(),
                    "Forbidden: must be nil if the type is Limited".into(),
                ));
            }
            if present("limited") {
                limited(&spec["limited"], causes);
            } else {
                causes.push((
                    "spec.limited".into(),
                    "Required value: must not be empty when type is Limited".into(),
                ));
            }
        }
        _ => causes.push((
            "spec.type".into(),
            format!("Unsupported value: {shown_kind}: supported values: \"Exempt\", \"Limited\""),
        )),
    }
    mandatory(name, "PriorityLevelConfiguration", spec, causes);
}

fn percent(v: &Value, at: &str, causes: &mut Causes) {
    if let Some(p) = int_of(v, "lendablePercent").filter(|p| !(0..=100).contains(p)) {
        causes.push((
            format!("{at}.lendablePercent"),
            format!("Invalid value: {p}: must be between 0 and 100, inclusive"),
        ));
    }
}

fn limited(l: &Value, causes: &mut Causes) {
    if let Some(n) = int_of(l, "nominalConcurrencyShares").filter(|n| *n < 0) {
        causes.push((
            "spec.limited.nominalConcurrencyShares".into(),
            format!("Invalid value: {n}: must be a non-negative integer"),
        ));
    }
    limit_response(&l["limitResponse"], causes);
    percent(l, "spec.limited", causes);
    if let Some(b) = int_of(l, "borrowingLimitPercent").filter(|b| *b < 0) {
        causes.push((
            "spec.limited.borrowingLimitPercent".into(),
            format!("Invalid value: {b}: if specified, must be a non-negative integer"),
        ));
    }
}

fn limit_response(r: &Value, causes: &mut Causes) {
    let at = "spec.limited.limitResponse";
    let queuing = r.get("queuing").filter(|q| !q.is_null());
    match str_of(r, "type") {
        "Reject" => {
            if queuing.is_some() {
                causes.push((
                    format!("{at}.queuing"),
                    "Forbidden: must be nil if limited.limitResponse.type is not Limited".into(),
                ));
            }
        }
        "Queue" => match queuing {
            Some(q) => self::queuing(q, causes),
            None => causes.push((
                format!("{at}.queuing"),
                "Required value: must not be empty if limited.limitResponse.type is Limited".into(),
            )),
        },
        other => causes.push((
            format!("{at}.type"),
            format!(
                "Unsupported value: {}: supported values: \"Queue\", \"Reject\"",
                json(&Value::String(other.into()))
            ),
        )),
    }
}

fn queuing(q: &Value, causes: &mut Causes) {
    let at = "spec.limited.limitResponse.queuing";
    let (length, queues, hand) = (
        int_of(q, "queueLengthLimit").unwrap_or(0),
        int_of(q, "queues").unwrap_or(0),
        int_of(q, "handSize").unwrap_or(0),
    );
    if length <= 0 {
        causes.push((
            format!("{at}.queueLengthLimit"),
            format!("Invalid value: {length}: must be positive"),
        ));
    }
    if queues <= 0 {
        causes.push((
            format!("{at}.queues"),
            format!("Invalid value: {queues}: must be positive"),
        ));
    } else if queues > MAX_QUEUES {
        causes.push((
            format!("{at}.queues"),
            format!("Invalid value: {queues}: must not be greater than {MAX_QUEUES}"),
        ));
    }
    if hand <= 0 {
        causes.push((
            format!("{at}.handSize"),
            format!("Invalid value: {hand}: must be positive"),
        ));
    } else if hand > queues {
        causes.push((
            format!("{at}.handSize"),
            format!("Invalid value: {hand}: should not be greater than queues ({queues})"),
        ));
    } else if ((queues as f64).log2() * hand as f64).ceil() > MAX_HASH_BITS {
        causes.push((
            format!("{at}.handSize"),
            format!(
                "Invalid value: {hand}: required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
            ),
        ));
    }
}

/// The mandatory objects' specs are fixed (the exempt level's own `spec.exempt` aside).
fn mandatory(name: &str, kind: &str, spec: &Value, causes: &mut Causes) {
    if !defaults::is_mandatory(name) {
        return;
    }
    let Some(fixed) = defaults::objects().ok().and_then(|all| {
        all.iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }) else {
        return;
    };
    let mut want = fixed["spec"].clone();
    let exempt_level = kind == "PriorityLevelConfiguration" && name == defaults::EXEMPT;
    if exempt_level {
        want["exempt"] = spec["exempt"].clone();
    }
    if without_nulls(&want) == without_nulls(spec) {
        return;
    }
    let message = match exempt_level {
        true => format!("spec of '{name}' except the 'spec.exempt' field must equal the fixed value"),
        false => format!("spec of '{name}' must equal the fixed value"),
    };
    causes.push(("spec".into(), format!("Invalid value: {}: {message}", json(spec))));
}

/// A value without its null members and `clusterScope: false` (which mean what their absence
/// means), for comparing specs as kube's semantic equality does.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| {
                    !(v.is_null() || (k.as_str() == "clusterScope" && **v == Value::Bool(false)))
                })
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(f: fn(&Value, &mut Causes), obj: Value) -> Causes {
        let mut causes = Causes::new();
        f(&obj, &mut causes);
        causes
    }

    #[test]
    fn flow_schemas_are_checked_as_kube_checks_them() {
        let causes = check(
            flow_schema,
            json!({"metadata": {"name": "fs"}, "spec": {"matchingPrecedence": 1,
                "distinguisherMethod": {"type": "ByFoo"}, "priorityLevelConfiguration": {"name": ""},
                "rules": [{"subjects": [{"kind": "User"}, {"kind": "Robot"},
                        {"kind": "ServiceAccount", "serviceAccount": {"name": "*", "namespace": ""}}],
                    "resourceRules": [{"verbs": ["*", "get"], "apiGroups": [], "resources": ["pods"],
                        "namespaces": ["Bad_NS"]}],
                    "nonResourceRules": [{"verbs": ["post"], "nonResourceURLs": ["/a/*/b", "healthz"]}]}]}}),
        );
        let got: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
        assert_eq!(
            got,
            [
                "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
                "spec.distinguisherMethod.type: Unsupported value: {\"Type\":\"ByFoo\"}: supported values: \"ByNamespace\", \"ByUser\"",
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
                "spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
                "spec.rules[0].subjects[1].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\"",
                "spec.rules[0].subjects[2].serviceAccount.namespace: Required value: must specify namespace for service account",
                "spec.rules[0].resourceRules[0].verbs: Invalid value: [\"*\",\"get\"]: if '*' is present, must not specify other verbs",
                "spec.rules[0].resourceRules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "spec.rules[0].resourceRules[0].namespaces[0]: Invalid value: \"Bad_NS\": each member of this list must be '*' or a DNS-1123 label; a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.rules[0].nonResourceRules[0].verbs: Unsupported value: [\"post\"]: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"/a/*/b\": wildcard can only do suffix matching",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"healthz\": must start with slash",
            ]
        );
        let defaults = defaults::objects().expect("defaults");
        for o in defaults.iter().filter(|o| o["kind"] == "FlowSchema") {
            assert_eq!(
                check(flow_schema, o.clone()),
                Causes::new(),
                "{}",
                o["metadata"]["name"]
            );
        }
        let mut changed = defaults
            .iter()
            .find(|o| o["kind"] == "FlowSchema" && o["metadata"]["name"] == "catch-all")
            .expect("catch-all")
            .clone();
        changed["spec"]["matchingPrecedence"] = json!(9999);
        let causes = check(flow_schema, changed);
        assert_eq!(causes.len(), 1);
        assert!(
            causes[0]
                .1
                .ends_with(": spec of 'catch-all' must equal the fixed value"),
            "{causes:?}"
        );
    }

    #[test]
    fn priority_levels_are_checked_as_kube_checks_them() {
        let got = |obj: Value| -> Vec<String> {
            check(priority_level, obj)
                .iter()
                .map(|(f, m)| format!("{f}: {m}"))
                .collect()
        };
        assert_eq!(
            got(json!({"metadata": {"name": "p"}, "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": -1, "lendablePercent": 101, "borrowingLimitPercent": -2,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 512, "handSize": 8, "queueLengthLimit": 0}}}}})),
            [
                "spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
                "spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: 0: must be positive",
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 8: required entropy bits of deckSize 512 and handSize 8 should not be greater than 60",
                "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
                "spec.limited.borrowingLimitPercent: Invalid value: -2: if specified, must be a non-negative integer",
            ]
        );
        let foo = got(json!({"metadata": {"name": "exempt"}, "spec": {"type": "Foo"}}));
        assert_eq!(
            foo[..2],
            [
                "spec.type: Invalid value: \"Foo\": must be 'Exempt' if and only if `name` is 'exempt'",
                "spec.type: Unsupported value: \"Foo\": supported values: \"Exempt\", \"Limited\"",
            ]
        );
        assert!(
            foo[2].starts_with("spec: Invalid value: {\"type\":\"Foo\"}: spec of 'exempt' except"),
            "{foo:?}"
        );
        assert_eq!(
            got(json!({"metadata": {"name": "r"}, "spec": {"type": "Limited", "limited": {
                "limitResponse": {"type": "Reject", "queuing": {"queues": 1}}}}})),
            ["spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited"]
        );
        // 64 queues and 10 per hand take exactly 60 bits.
        assert!(got(json!({"metadata": {"name": "q"}, "spec": {"type": "Limited", "limited": {
            "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 10, "queueLengthLimit": 5}}}}}))
        .is_empty());
        for o in defaults::objects()
            .expect("defaults")
            .iter()
            .filter(|o| o["kind"] == "PriorityLevelConfiguration")
        {
            assert!(got(o.clone()).is_empty(), "{}", o["metadata"]["name"]);
        }
        // The exempt level's own shares may change; nothing else of it.
        assert!(
            got(json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt",
            "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 0}}}))
            .is_empty()
        );
    }
}
