//! Authorization: whether a user may do a verb on a resource or a non-resource path, decided
//! by RBAC as kube-apiserver's `--authorization-mode=RBAC` decides it, plus what guards RBAC
//! itself (escalation prevention), the policy every cluster starts with, and the exact 403
//! wording clients see.
//!
//! - [`Attributes`] is what a request asks (kube's `authorizer.Attributes`), [`Decision`] the
//!   answer, [`forbidden_message`] and [`forbidden_error`] the `403` kube-apiserver writes.
//! - [`rbac`] holds the pure rule and subject matching, coverage and aggregation over the
//!   `rbac.authorization.k8s.io/v1` types.
//! - [`Authorizer`] (in [`authorizer`]) answers from an in-memory index of the four RBAC
//!   resources that follows the watch cache, with a per-user rule cache.
//! - [`escalation`] refuses Role and binding writes that would grant what the writer lacks.
//! - [`bootstrap`] is the default policy (`cluster-admin`, `admin`, `edit`, `view`, the
//!   `system:` roles and their bindings) and its reconciliation into the store.

pub mod authorizer;
pub mod bootstrap;
pub mod escalation;
pub mod rbac;

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::json;

use crate::authentication::UserInfo;
use crate::machinery::errors::ApiError;

pub use authorizer::{Authorizer, RulesReview};
pub use escalation::{RoleKind, RoleWrite};

/// What a request asks to do, as an authorizer sees it (kube's `authorizer.Attributes`).
/// Empty strings stand for absent parts, as in kube: a `namespace` of `""` is the cluster
/// scope, a `name` of `""` a collection.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// Who asks.
    pub user: &'a UserInfo,
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or a special one (`bind`, `escalate`, `impersonate`, ...).
    pub verb: &'a str,
    /// What the verb is done to.
    pub target: Target<'a>,
}

/// The object of a request: a resource, or a path that is not one.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A request under `/api` or `/apis` for a resource.
    Resource(ResourceAttributes<'a>),
    /// Any other path (`/healthz`, `/version`, `/api`, `/apis/apps` ...).
    NonResource {
        /// The request path.
        path: &'a str,
    },
}

/// The resource a request is for.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResourceAttributes<'a> {
    /// The API group (`""` for core).
    pub api_group: &'a str,
    /// The API version.
    pub api_version: &'a str,
    /// The resource (plural), e.g. `pods`.
    pub resource: &'a str,
    /// The subresource (`status`, `scale`, `log`), `""` when none.
    pub subresource: &'a str,
    /// The namespace, `""` at the cluster scope.
    pub namespace: &'a str,
    /// The object's name, `""` for a collection (and for a create).
    pub name: &'a str,
}

impl<'a> Attributes<'a> {
    /// A resource request.
    pub fn resource(user: &'a UserInfo, verb: &'a str, resource: ResourceAttributes<'a>) -> Self {
        Attributes {
            user,
            verb,
            target: Target::Resource(resource),
        }
    }

    /// A non-resource request.
    pub fn non_resource(user: &'a UserInfo, verb: &'a str, path: &'a str) -> Self {
        Attributes {
            user,
            verb,
            target: Target::NonResource { path },
        }
    }

    /// The namespace the request is in (`""` for the cluster scope and for paths).
    pub fn namespace(&self) -> &'a str {
        match self.target {
            Target::Resource(r) => r.namespace,
            Target::NonResource { .. } => "",
        }
    }
}

/// An authorizer's answer. RBAC only ever allows or has no opinion (it denies nothing
/// explicitly); `Deny` is for authorizers that do, so that a chain of them has one type.
/// The reason is shared, so that a decision costs no allocation on the hot path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, and by what (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole ...`).
    Allow(Arc<str>),
    /// Explicitly refused, and why.
    Deny(Arc<str>),
    /// Not allowed by this authorizer; the reason is empty unless rules could not be resolved
    /// (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
    NoOpinion(Arc<str>),
}

impl Decision {
    /// Whether the request may go on.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// The reason given with the decision (possibly empty).
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}

/// Writes `s` as Go's `%q` does (`strconv.Quote`): double quotes, with backslash escapes for
/// quotes, backslashes and non-printable characters. kube-apiserver's messages quote names this
/// way, so ours must too.
pub(crate) fn go_quote(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `s` quoted as Go's `%q` quotes it.
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    go_quote(&mut out, s);
    out
}

/// A list of strings as Go's `%q` prints a `[]string`: `["a" "b"]`.
pub(crate) fn quoted_list<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        go_quote(&mut out, s.as_ref());
    }
    out.push(']');
    out
}

/// kube-apiserver's guard against messages that look like HTML (quotes are fine).
fn sanitize(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The part of a 403 that names who could not do what (`forbiddenMessage` in
/// apiserver's `responsewriters/errors.go`), sanitized as kube-apiserver sanitizes it.
fn denial(attrs: &Attributes<'_>) -> String {
    let mut m = String::from("User ");
    go_quote(&mut m, &attrs.user.name);
    m.push_str(" cannot ");
    m.push_str(attrs.verb);
    match attrs.target {
        Target::NonResource { path } => {
            m.push_str(" path ");
            go_quote(&mut m, path);
        }
        Target::Resource(r) => {
            m.push_str(" resource ");
            if r.subresource.is_empty() {
                go_quote(&mut m, r.resource);
            } else {
                go_quote(&mut m, &format!("{}/{}", r.resource, r.subresource));
            }
            m.push_str(" in API group ");
            go_quote(&mut m, r.api_group);
            if r.namespace.is_empty() {
                m.push_str(" at the cluster scope");
            } else {
                m.push_str(" in the namespace ");
                go_quote(&mut m, r.namespace);
            }
        }
    }
    sanitize(&m)
}

/// `resource[.group]` as kube's `GroupResource.String()` prints it.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// The message of the `403` kube-apiserver answers a request it does not authorize, e.g.
/// `configmaps "x" is forbidden: User "alice" cannot get resource "configmaps" in API group ""
/// in the namespace "shop"` (apiserver's `responsewriters.Forbidden` over `NewForbidden`).
pub fn forbidden_message(attrs: &Attributes<'_>) -> String {
    forbidden_message_with_reason(attrs, "")
}

/// [`forbidden_message`] followed by the authorizer's reason when it gave one
/// (`...: RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
pub fn forbidden_message_with_reason(attrs: &Attributes<'_>, reason: &str) -> String {
    let mut why = denial(attrs);
    if !reason.is_empty() {
        why.push_str(": ");
        why.push_str(reason);
    }
    match attrs.target {
        Target::NonResource { .. } => format!("forbidden: {why}"),
        Target::Resource(r) if r.api_group.is_empty() && r.resource.is_empty() => {
            format!("forbidden: {why}")
        }
        Target::Resource(r) => {
            let what = qualified(r.api_group, r.resource);
            if r.name.is_empty() {
                format!("{what} is forbidden: {why}")
            } else {
                format!("{what} {} is forbidden: {why}", quoted(r.name))
            }
        }
    }
}

/// The whole `403 Forbidden` Status for a request the authorizer did not allow: the message of
/// [`forbidden_message_with_reason`] and kube's details (group, the resource as `kind`, name).
pub fn forbidden_error(attrs: &Attributes<'_>, reason: &str) -> ApiError {
    let details = match attrs.target {
        Target::NonResource { .. } => json!({}),
        Target::Resource(r) => {
            let mut d = serde_json::Map::new();
            if !r.name.is_empty() {
                d.insert("name".into(), json!(r.name));
            }
            if !r.api_group.is_empty() {
                d.insert("group".into(), json!(r.api_group));
            }
            if !r.resource.is_empty() {
                d.insert("kind".into(), json!(r.resource));
            }
            serde_json::Value::Object(d)
        }
    };
    ApiError {
        code: 403,
        reason: "Forbidden",
        message: forbidden_message_with_reason(attrs, reason),
        details: Some(details),
        retry_after: None,
        continue_token: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        }
    }

    fn res<'a>(
        group: &'a str,
        resource: &'a str,
        sub: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> ResourceAttributes<'a> {
        ResourceAttributes {
            api_group: group,
            api_version: "v1",
            resource,
            subresource: sub,
            namespace: ns,
            name,
        }
    }

    #[test]
    fn forbidden_messages_are_kube_apiservers() {
        let alice = user("alice");
        let bob = user("bob");
        let list = Attributes::resource(&alice, "list", res("", "configmaps", "", "shop", ""));
        assert_eq!(
            forbidden_message(&list),
            r#"configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "shop""#
        );
        let get = Attributes::resource(&alice, "get", res("", "configmaps", "", "shop", "x"));
        assert_eq!(
            forbidden_message(&get),
            r#"configmaps "x" is forbidden: User "alice" cannot get resource "configmaps" in API group "" in the namespace "shop""#
        );
        let nodes = Attributes::resource(&alice, "list", res("", "nodes", "", "", ""));
        assert_eq!(
            forbidden_message(&nodes),
            r#"nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope"#
        );
        let log = Attributes::resource(&bob, "get", res("", "pods", "log", "shop", "p"));
        assert_eq!(
            forbidden_message(&log),
            r#"pods "p" is forbidden: User "bob" cannot get resource "pods/log" in API group "" in the namespace "shop""#
        );
        let deploy = Attributes::resource(&bob, "create", res("apps", "deployments", "", "shop", ""));
        assert_eq!(
            forbidden_message(&deploy),
            r#"deployments.apps is forbidden: User "bob" cannot create resource "deployments" in API group "apps" in the namespace "shop""#
        );
        let anonymous = UserInfo::anonymous();
        let api = Attributes::non_resource(&anonymous, "get", "/api");
        assert_eq!(
            forbidden_message(&api),
            r#"forbidden: User "system:anonymous" cannot get path "/api""#
        );
    }

    #[test]
    fn a_reason_follows_the_message_and_names_are_quoted_and_sanitized() {
        let odd = user("a\"<b>");
        let get = Attributes::resource(&odd, "get", res("", "secrets", "", "ns", "s"));
        assert_eq!(
            forbidden_message_with_reason(&get, r#"RBAC: role.rbac.authorization.k8s.io "r" not found"#),
            r#"secrets "s" is forbidden: User "a\"&lt;b&gt;" cannot get resource "secrets" in API group "" in the namespace "ns": RBAC: role.rbac.authorization.k8s.io "r" not found"#
        );
        let e = forbidden_error(&get, "");
        assert_eq!(e.code, 403);
        assert_eq!(e.reason, "Forbidden");
        assert_eq!(e.details, Some(json!({"name": "s", "kind": "secrets"})));
    }

    #[test]
    fn go_quoting_escapes_like_strconv_quote() {
        assert_eq!(quoted("plain"), r#""plain""#);
        assert_eq!(quoted("tab\there\n"), r#""tab\there\n""#);
        assert_eq!(quoted("\u{1}"), r#""\x01""#);
        assert_eq!(quoted("été"), "\"été\"");
        assert_eq!(quoted_list(&["a", "b c"]), r#"["a" "b c"]"#);
        assert_eq!(quoted_list::<&str>(&[]), "[]");
    }

    #[test]
    fn decisions_say_whether_allowed_and_why() {
        assert!(Decision::Allow("x".into()).is_allowed());
        assert!(!Decision::NoOpinion("".into()).is_allowed());
        assert!(!Decision::Deny("no".into()).is_allowed());
        assert_eq!(Decision::Deny("no".into()).reason(), "no");
    }
}
