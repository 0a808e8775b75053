//! kube's rules for RBAC objects (`pkg/apis/rbac/validation`): a rule names its verbs, and
//! either resources with their API groups or (cluster-wide only) non-resource URLs; a binding
//! refers to a role of a kind it may bind, with subjects of a known kind, named, in the API
//! group of their kind — and never changes the role it refers to.

use serde_json::Value;

use super::{list_of, not_supported, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::Causes;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A Role: its rules, which may not name non-resource URLs.
pub fn role(obj: &Value, causes: &mut Causes) {
    rules(obj, true, causes);
}

/// A ClusterRole: its rules.
pub fn cluster_role(obj: &Value, causes: &mut Causes) {
    rules(obj, false, causes);
}

/// kube's `ValidatePolicyRule` for each rule.
fn rules(obj: &Value, namespaced: bool, causes: &mut Causes) {
    for (i, rule) in list_of(obj, "rules").iter().enumerate() {
        let at = format!("rules[{i}]");
        if list_of(rule, "verbs").is_empty() {
            causes.push((
                format!("{at}.verbs"),
                "Required value: verbs must contain at least one value".to_string(),
            ));
        }
        let urls = list_of(rule, "nonResourceURLs");
        if !urls.is_empty() {
            let shown = go_strings(urls);
            if namespaced {
                causes.push((
                    format!("{at}.nonResourceURLs"),
                    format!("Invalid value: {shown}: namespaced rules cannot apply to non-resource URLs"),
                ));
            }
            let resourceful = ["apiGroups", "resources", "resourceNames"]
                .iter()
                .any(|f| !list_of(rule, f).is_empty());
            if resourceful {
                causes.push((
                    format!("{at}.nonResourceURLs"),
                    format!("Invalid value: {shown}: rules cannot apply to both regular resources and non-resource URLs"),
                ));
            }
            continue;
        }
        if list_of(rule, "apiGroups").is_empty() {
            causes.push((
                format!("{at}.apiGroups"),
                "Required value: resource rules must supply at least one api group".to_string(),
            ));
        }
        if list_of(rule, "resources").is_empty() {
            causes.push((
                format!("{at}.resources"),
                "Required value: resource rules must supply at least one resource".to_string(),
            ));
        }
    }
}

/// A RoleBinding: a Role or ClusterRole, and its subjects.
pub fn role_binding(obj: &Value, causes: &mut Causes) {
    binding(obj, &["Role", "ClusterRole"], true, causes);
}

/// A ClusterRoleBinding: a ClusterRole, and its subjects.
pub fn cluster_role_binding(obj: &Value, causes: &mut Causes) {
    binding(obj, &["ClusterRole"], false, causes);
}

fn binding(obj: &Value, kinds: &[&str], namespaced: bool, causes: &mut Causes) {
    let role = &obj["roleRef"];
    if !role.is_null() {
        let group = str_of(role, "apiGroup");
        if group != RBAC_GROUP {
            causes.push((
                "roleRef.apiGroup".to_string(),
                not_supported(group, &[RBAC_GROUP]),
            ));
        }
        let kind = str_of(role, "kind");
        if !kinds.contains(&kind) {
            causes.push(("roleRef.kind".to_string(), not_supported(kind, kinds)));
        }
        if str_of(role, "name").is_empty() {
            causes.push(("roleRef.name".to_string(), "Required value".to_string()));
        }
    }
    for (i, s) in list_of(obj, "subjects").iter().enumerate() {
        let at = format!("subjects[{i}]");
        if str_of(s, "name").is_empty() {
            causes.push((format!("{at}.name"), "Required value".to_string()));
        }
        let group = str_of(s, "apiGroup");
        match str_of(s, "kind") {
            "ServiceAccount" => {
                if !group.is_empty() {
                    causes.push((format!("{at}.apiGroup"), not_supported(group, &[""])));
                }
                if !namespaced && str_of(s, "namespace").is_empty() {
                    causes.push((format!("{at}.namespace"), "Required value".to_string()));
                }
            }
            "User" | "Group" => {
                if group != RBAC_GROUP {
                    causes.push((format!("{at}.apiGroup"), not_supported(group, &[RBAC_GROUP])));
                }
            }
            other => causes.push((
                format!("{at}.kind"),
                not_supported(other, &["ServiceAccount", "User", "Group"]),
            )),
        }
    }
}

/// A binding's update: the role it refers to is fixed.
pub fn binding_update(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["roleRef"], &new["roleRef"]);
    if before != after {
        causes.push((
            "roleRef".to_string(),
            format!(
                "Invalid value: rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}: cannot change roleRef",
                go_quote(str_of(after, "apiGroup")),
                go_quote(str_of(after, "kind")),
                go_quote(str_of(after, "name"))
            ),
        ));
    }
}

/// Go's `%#v` of a `[]string`.
pub(super) fn go_strings(items: &[Value]) -> String {
    let shown: Vec<String> = items
        .iter()
        .map(|v| go_quote(v.as_str().unwrap_or_default()))
        .collect();
    format!("[]string{{{}}}", shown.join(", "))
}
