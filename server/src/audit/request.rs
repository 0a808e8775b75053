//! What the audit log knows of a request before anything has served it: kube-apiserver's
//! `RequestInfo`, parsed from the method, path and query alone (kube's `RequestInfoFactory`),
//! whether the request is long-running, where it came from (`sourceIPs`) and its user agent.
//!
//! The audit record does not use the request info filter's `RequestInfo`, which is resolved
//! against the registry after authentication: kube's audit describes a request from its path
//! before authentication, so that a `401`, a refused impersonation or a path that serves
//! nothing is logged with the verb and object reference kube-apiserver would log.

use std::borrow::Cow;
use std::net::IpAddr;

use axum::http::{HeaderMap, Method};

use crate::authentication::UserInfo;

/// The resource a request is for, as kube's `RequestInfo` names it. Empty strings stand for
/// absent parts (`namespace` is `""` at the cluster scope, `name` for a collection).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceAttributes<'a> {
    /// The API group (`""` for core).
    pub api_group: &'a str,
    /// The API version.
    pub api_version: &'a str,
    /// The namespace (for a namespace itself, its name, as in kube).
    pub namespace: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The subresource.
    pub subresource: &'a str,
    /// The object's name.
    pub name: &'a str,
}

/// A request as kube's `RequestInfoFactory` parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo<'a> {
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection` for resources, the lower-cased method for other paths.
    pub verb: Cow<'static, str>,
    /// The request path.
    pub path: &'a str,
    /// The resource, for a resource request.
    pub resource: Option<ResourceAttributes<'a>>,
}

/// What a policy rule is matched against (kube's `authorizer.Attributes` as the audit policy
/// reads them).
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// The authenticated user (before impersonation); `None` when authentication failed.
    pub user: Option<&'a UserInfo>,
    /// The request's verb.
    pub verb: &'a str,
    /// The request path.
    pub path: &'a str,
    /// The resource, for a resource request.
    pub resource: Option<ResourceAttributes<'a>>,
}

/// The path prefixes of resources; `api` is the one without a group.
const API_PREFIXES: [&str; 2] = ["api", "apis"];
/// The subresources of a namespace (`namespaces/NAME/status`), not namespaced resources.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];
/// Subresources whose requests are long-running (streams), as kube-apiserver's check lists them.
pub const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];

/// The method in lower case, without allocating for the usual ones.
fn lower_method(method: &Method) -> Cow<'static, str> {
    match *method {
        Method::GET => "get".into(),
        Method::POST => "post".into(),
        Method::PUT => "put".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => "delete".into(),
        Method::HEAD => "head".into(),
        Method::OPTIONS => "options".into(),
        _ => method.as_str().to_ascii_lowercase().into(),
    }
}

impl<'a> RequestInfo<'a> {
    /// Parses a request as kube-apiserver's request info factory does.
    pub fn parse(method: &Method, path: &'a str, query: Option<&str>) -> RequestInfo<'a> {
        let non_resource = RequestInfo {
            verb: lower_method(method),
            path,
            resource: None,
        };
        let trimmed = path.trim_matches('/');
        if trimmed.is_empty() {
            return non_resource;
        }
        let parts: Vec<&'a str> = trimmed.split('/').collect();
        if parts.len() < 3 || !API_PREFIXES.contains(&parts[0]) {
            return non_resource;
        }
        let mut rest = &parts[1..];
        let mut attrs = ResourceAttributes::default();
        if parts[0] != "api" {
            if rest.len() < 3 {
                return non_resource;
            }
            attrs.api_group = rest[0];
            rest = &rest[1..];
        }
        attrs.api_version = rest[0];
        rest = &rest[1..];
        let verb: &'static str = match rest[0] {
            "watch" | "proxy" if rest.len() < 2 => {
                // kube answers such a path with an error; the audit record keeps what it knows.
                return RequestInfo {
                    resource: Some(attrs),
                    ..non_resource
                };
            }
            "watch" => {
                rest = &rest[1..];
                "watch"
            }
            "proxy" => {
                rest = &rest[1..];
                "proxy"
            }
            _ => match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            },
        };
        if rest[0] == "namespaces" && rest.len() > 1 {
            attrs.namespace = rest[1];
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest = &rest[2..];
            }
        }
        if rest.len() >= 3 && verb != "proxy" {
            attrs.subresource = rest[2];
        }
        if rest.len() >= 2 {
            attrs.name = rest[1];
        }
        attrs.resource = rest[0];
        let verb = match verb {
            "get" if attrs.name.is_empty() => match crate::machinery::query::watch_requested(query) {
                Some(true) => "watch",
                _ => "list",
            },
            "delete" if attrs.name.is_empty() => "deletecollection",
            other => other,
        };
        RequestInfo {
            verb: verb.into(),
            path,
            resource: Some(attrs),
        }
    }

    /// The attributes a policy rule matches, for `user`.
    pub fn attributes<'s>(&'s self, user: Option<&'s UserInfo>) -> Attributes<'s> {
        Attributes {
            user,
            verb: &self.verb,
            path: self.path,
            resource: self.resource,
        }
    }

    /// Whether kube-apiserver treats the request as long-running (a watch, a proxy, a stream
    /// of a pod's log, exec, attach or port-forward): its audit events then include
    /// `ResponseStarted`.
    pub fn is_long_running(&self) -> bool {
        self.verb == "watch"
            || self.verb == "proxy"
            || match &self.resource {
                Some(r) => LONG_RUNNING_SUBRESOURCES.contains(&r.subresource),
                None => self.path.starts_with("/debug/pprof/"),
            }
    }
}

/// kube's `sourceIPs`: the `X-Forwarded-For` addresses, then `X-Real-Ip` unless already listed,
/// then the connection's address unless it is the last one listed.
pub fn source_ips(headers: &HeaderMap, remote: Option<IpAddr>) -> Vec<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut ips: Vec<IpAddr> = header("x-forwarded-for")
        .map(|all| {
            all.split(',')
                .filter_map(|part| part.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if let Some(real) = header("x-real-ip").and_then(|v| v.trim().parse::<IpAddr>().ok()) {
        if !ips.contains(&real) {
            ips.push(real);
        }
    }
    if let Some(remote) = remote.map(|ip| ip.to_canonical()) {
        if ips.last() != Some(&remote) {
            ips.push(remote);
        }
    }
    ips.iter().map(IpAddr::to_string).collect()
}

/// Longest `User-Agent` kept whole; a longer one is cut and marked, as kube-apiserver does.
const MAX_USER_AGENT: usize = 1024;

/// The request's `User-Agent`, cut to 1024 bytes with `...TRUNCATED` after it.
pub fn user_agent(headers: &HeaderMap) -> String {
    let Some(value) = headers.get(axum::http::header::USER_AGENT) else {
        return String::new();
    };
    let agent = String::from_utf8_lossy(value.as_bytes());
    if agent.len() <= MAX_USER_AGENT {
        return agent.into_owned();
    }
    let mut cut = MAX_USER_AGENT;
    while !agent.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...TRUNCATED", &agent[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse<'a>(method: Method, path: &'a str, query: Option<&str>) -> RequestInfo<'a> {
        RequestInfo::parse(&method, path, query)
    }

    fn res(
        api_group: &'static str,
        namespace: &'static str,
        resource: &'static str,
        name: &'static str,
        subresource: &'static str,
    ) -> ResourceAttributes<'static> {
        let api_version = "v1";
        ResourceAttributes {
            api_group,
            api_version,
            namespace,
            resource,
            subresource,
            name,
        }
    }

    #[test]
    fn paths_parse_as_kubes_request_info_factory_parses_them() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/shop/pods",
                None,
                "list",
                res("", "shop", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/shop/pods",
                Some("watch=true"),
                "watch",
                res("", "shop", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/shop/pods",
                Some("watch=0"),
                "list",
                res("", "shop", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/shop/pods",
                Some("a=b&watch"),
                "watch",
                res("", "shop", "pods", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/shop/pods/web/log",
                None,
                "get",
                res("", "shop", "pods", "web", "log"),
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/shop/pods",
                None,
                "watch",
                res("", "shop", "pods", "", ""),
            ),
            (
                Method::POST,
                "/api/v1/namespaces",
                None,
                "create",
                res("", "", "namespaces", "", ""),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/shop",
                None,
                "get",
                res("", "shop", "namespaces", "shop", ""),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/shop/finalize",
                None,
                "update",
                res("", "shop", "namespaces", "shop", "finalize"),
            ),
            (
                Method::DELETE,
                "/apis/apps/v1/namespaces/shop/deployments",
                None,
                "deletecollection",
                res("apps", "shop", "deployments", "", ""),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/shop/deployments/web/scale",
                None,
                "patch",
                res("apps", "shop", "deployments", "web", "scale"),
            ),
            (
                Method::DELETE,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
                None,
                "delete",
                res("rbac.authorization.k8s.io", "", "clusterroles", "view", ""),
            ),
        ];
        for (method, path, query, verb, want) in cases {
            let info = parse(method, path, query);
            assert_eq!(info.verb, verb, "{path}");
            assert_eq!(info.resource, Some(want), "{path}");
        }
        for (method, path, verb) in [
            (Method::GET, "/healthz", "get"),
            (Method::GET, "/api", "get"),
            (Method::GET, "/api/v1", "get"),
            (Method::GET, "/apis/apps/v1", "get"),
            (Method::POST, "/apis/apps", "post"),
            (Method::GET, "/", "get"),
            (Method::GET, "/version/a/b", "get"),
        ] {
            let info = parse(method, path, None);
            assert_eq!((info.verb.as_ref(), info.resource), (verb, None), "{path}");
        }
    }

    #[test]
    fn watches_and_streams_are_long_running() {
        assert!(parse(Method::GET, "/api/v1/pods", Some("watch=true")).is_long_running());
        assert!(parse(Method::GET, "/api/v1/namespaces/a/pods/p/log", None).is_long_running());
        assert!(!parse(Method::GET, "/api/v1/pods", None).is_long_running());
        assert!(!parse(Method::GET, "/healthz", None).is_long_running());
    }

    #[test]
    fn source_ips_list_proxies_then_the_connection() {
        let mut h = HeaderMap::new();
        let remote: Option<IpAddr> = "10.0.0.9".parse().ok();
        assert_eq!(source_ips(&h, remote), vec!["10.0.0.9"]);
        h.insert("x-forwarded-for", "1.2.3.4, junk, 10.0.0.9".parse().unwrap());
        h.insert("x-real-ip", "1.2.3.4".parse().unwrap());
        assert_eq!(source_ips(&h, remote), vec!["1.2.3.4", "10.0.0.9"]);
        h.insert("x-real-ip", "5.6.7.8".parse().unwrap());
        assert_eq!(
            source_ips(&h, remote),
            vec!["1.2.3.4", "10.0.0.9", "5.6.7.8", "10.0.0.9"]
        );
        let mapped: Option<IpAddr> = "::ffff:127.0.0.1".parse().ok();
        assert_eq!(source_ips(&HeaderMap::new(), mapped), vec!["127.0.0.1"]);
    }

    #[test]
    fn long_user_agents_are_cut() {
        let mut h = HeaderMap::new();
        assert_eq!(user_agent(&h), "");
        h.insert("user-agent", "kubectl/v1.35.0".parse().unwrap());
        assert_eq!(user_agent(&h), "kubectl/v1.35.0");
        h.insert("user-agent", "x".repeat(2000).parse().unwrap());
        let ua = user_agent(&h);
        assert_eq!(ua.len(), 1024 + "...TRUNCATED".len());
        assert!(ua.ends_with("x...TRUNCATED"));
    }
}
