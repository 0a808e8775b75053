//! Request info: which group, version, resource, namespace, name and subresource a path under
//! `/api` or `/apis` names, and which verb the method performs on it — kube-apiserver's
//! `RequestInfo`. The request info filter (`filters::request_info`) parses it once per request
//! and keeps it in the request's extensions for every later filter and the endpoint.

use crate::machinery::errors::{ApiError, ApiResult};
use crate::registry::ResourceRequest;
use crate::scheme::{Registry, ResourceType};

/// What a path under `/api` or `/apis` addresses.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    ResourceList {
        /// API group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// A collection or an object of one resource type.
    Resource(Box<ResourceRequest>),
}

fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// What a request addresses, parsed once by the request info filter and kept in the request's extensions
/// for every later filter (authorization, audit) and the endpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestInfo {
    /// A collection, an object or an object's subresource, and what the request does to it.
    Resource {
        /// The resource type, namespace, name and subresource.
        request: Box<ResourceRequest>,
        /// The verb, as RBAC names it.
        verb: Verb,
    },
    /// A discovery document under `/api` or `/apis`.
    Discovery(Target),
    /// Any other path (health, metrics, OpenAPI, version), with the method's verb in lower case.
    NonResource {
        /// The request path.
        path: String,
        /// `get`, `post`, ...
        verb: String,
    },
    /// A path under `/api` or `/apis` that serves nothing (`404`) or not this verb (`405`):
    /// the endpoint answers the error, after authorization has had its say on the path as
    /// kube-apiserver's request info names it (so an unauthorized user learns nothing).
    Unserved(ApiError),
}

/// `sub` if `rt` serves it, else `404` as for any path that serves nothing.
fn served_subresource<'a>(rt: &ResourceType, sub: &'a str) -> ApiResult<&'a str> {
    rt.subresource(sub).map(|_| sub).ok_or_else(ApiError::no_route)
}

/// `sub` if `rt` serves it with a path after it (a proxy: `pods/NAME/proxy/any/path`), else
/// `404`.
fn served_subpath<'a>(rt: &ResourceType, sub: &'a str) -> ApiResult<&'a str> {
    rt.subresource(sub)
        .filter(|s| s.subpath)
        .map(|_| sub)
        .ok_or_else(ApiError::no_route)
}

/// What a request does to its resource, named as kube-apiserver's authorizer names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object (or of its subresource).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection (or of one object by the legacy path) as a stream of changes.
    Watch,
    /// POST to a collection.
    Create,
    /// PUT of one object (or of its subresource).
    Update,
    /// PATCH of one object (or of its subresource).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// A method kube has no verb for (an `OPTIONS` passed on through a proxy): authorized as
    /// the empty verb, which only a rule for every verb (`*`) grants.
    Unnamed,
}

impl Verb {
    /// The verb's name in discovery and RBAC.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Unnamed => "",
        }
    }
}

impl ResourceRequest {
    /// Whether the request goes through a proxy subresource (`pods/NAME/proxy/...`).
    pub fn proxied(&self) -> bool {
        self.subresource
            .as_deref()
            .and_then(|s| self.rt.subresource(s))
            .is_some_and(|s| s.subpath)
    }

    /// The verb that `method` performs on this path, or `405` when the path does not serve it
    /// (`DELETE pods/NAME/status`, `POST configmaps/NAME`, `PUT configmaps`). `watch` is the
    /// request's `watch` option; a subresource is never watched.
    pub fn verb(&self, method: &axum::http::Method, watch: bool) -> ApiResult<Verb> {
        use axum::http::Method;
        let watch = (watch || self.watch_path) && self.subresource.is_none();
        let verb = match (method, self.name.is_some()) {
            (&Method::GET, _) if watch => Verb::Watch,
            (&Method::GET, true) => Verb::Get,
            // A proxy passes a HEAD on, as a `get`, and an OPTIONS, as no verb at all.
            (&Method::HEAD, true) if self.proxied() => Verb::Get,
            (&Method::OPTIONS, true) if self.proxied() => return Ok(Verb::Unnamed),
            (&Method::GET, false) => Verb::List,
            (&Method::POST, false) => Verb::Create,
            // A subresource that is created (a ServiceAccount's token).
            (&Method::POST, true) if self.subresource.is_some() => Verb::Create,
            (&Method::PUT, true) => Verb::Update,
            (&Method::PATCH, true) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => return Err(ApiError::method_not_allowed()),
        };
        let served = match &self.subresource {
            Some(sub) => self.rt.subresource(sub).map(|s| s.verbs).unwrap_or_default(),
            None => self.rt.verbs(),
        };
        if served.contains(&verb.as_str()) {
            Ok(verb)
        } else {
            Err(ApiError::method_not_allowed())
        }
    }
}

/// Resolves a request path against the registry.
pub fn parse_path(registry: &Registry, path: &str) -> ApiResult<Target> {
    let segs = segments(path);
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return Ok(Target::CoreVersions),
        ["apis"] => return Ok(Target::Groups),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g] => return Ok(Target::Group((*g).to_string())),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::no_route()),
    };
    if rest.is_empty() {
        if registry.in_group_version(group, version).next().is_none() {
            return Err(ApiError::no_route());
        }
        return Ok(Target::ResourceList {
            group: group.to_string(),
            version: version.to_string(),
        });
    }
    let (watch_path, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let lookup = |plural: &str| {
        registry
            .lookup(group, version, plural)
            .cloned()
            .ok_or_else(ApiError::no_route)
    };
    // namespaces/{ns}/{plural}... addresses a namespaced type; anything else is cluster-scoped
    // (including the namespace object itself and its subresources).
    if let ["namespaces", ns, plural, tail @ ..] = rest {
        if let Some(rt) = registry.lookup(group, version, plural).filter(|t| t.namespaced) {
            let (name, sub) = match tail {
                [] => (None, None),
                [name] => (Some(*name), None),
                [name, sub] => (Some(*name), Some(served_subresource(rt, sub)?)),
                [name, sub, ..] => (Some(*name), Some(served_subpath(rt, sub)?)),
            };
            return Ok(Target::Resource(Box::new(ResourceRequest {
                rt: rt.clone(),
                namespace: Some((*ns).to_string()),
                name: name.map(str::to_string),
                subresource: sub.map(str::to_string),
                watch_path,
                requester: None,
            })));
        }
    }
    let (rt, name, sub) = match rest {
        [plural] => (lookup(plural)?, None, None),
        [plural, name] => (lookup(plural)?, Some(*name), None),
        [plural, name, sub] => (lookup(plural)?, Some(*name), Some(*sub)),
        [plural, name, sub, ..] => {
            let rt = lookup(plural)?;
            served_subpath(&rt, sub)?;
            (rt, Some(*name), Some(*sub))
        }
        _ => return Err(ApiError::no_route()),
    };
    if rt.namespaced && name.is_some() {
        return Err(ApiError::no_route());
    }
    let sub = sub.map(|s| served_subresource(&rt, s)).transpose()?;
    Ok(Target::Resource(Box::new(ResourceRequest {
        rt,
        namespace: None,
        name: name.map(str::to_string),
        subresource: sub.map(str::to_string),
        watch_path,
        requester: None,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> ApiResult<Target> {
        parse_path(&Registry::new(), p)
    }

    fn resource(p: &str) -> ResourceRequest {
        match parse(p).unwrap() {
            Target::Resource(r) => *r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn paths_resolve_to_collections_objects_and_subresources() {
        let r = resource("/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            (&*r.rt.plural, r.namespace.as_deref(), r.name.as_deref()),
            ("configmaps", Some("default"), Some("x"))
        );
        let r = resource("/api/v1/namespaces/default");
        assert_eq!(
            (&*r.rt.plural, r.name.as_deref()),
            ("namespaces", Some("default"))
        );
        let r = resource("/api/v1/namespaces/default/status");
        assert_eq!(
            (&*r.rt.plural, r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = resource("/apis/apps/v1/namespaces/a/deployments/d/scale");
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        let r = resource("/api/v1/configmaps");
        assert_eq!((&*r.rt.plural, r.namespace), ("configmaps", None));
        let r = resource("/api/v1/watch/namespaces/a/pods");
        assert!(r.watch_path);
        assert_eq!(parse("/apis").unwrap(), Target::Groups);
        assert!(matches!(
            parse("/apis/apps/v1").unwrap(),
            Target::ResourceList { .. }
        ));
        assert_eq!(parse("/api/v1/configmaps/x").unwrap_err().code, 404);
        assert_eq!(parse("/api/v2/pods").unwrap_err().code, 404);
        assert_eq!(parse("/apis/apps/v1/widgets").unwrap_err().code, 404);
    }

    #[test]
    fn each_path_serves_its_verbs_and_no_others() {
        use axum::http::Method as M;
        let cm = "/api/v1/namespaces/a/configmaps";
        let deploy = "/apis/apps/v1/namespaces/a/deployments";
        // (method, path, watch option, verb or error code)
        let cases: Vec<(M, String, bool, Result<Verb, u16>)> = vec![
            (M::GET, cm.into(), false, Ok(Verb::List)),
            (M::GET, cm.into(), true, Ok(Verb::Watch)),
            (M::POST, cm.into(), false, Ok(Verb::Create)),
            (M::DELETE, cm.into(), false, Ok(Verb::DeleteCollection)),
            (M::PUT, cm.into(), false, Err(405)),
            (M::PATCH, cm.into(), false, Err(405)),
            (M::GET, format!("{cm}/x"), false, Ok(Verb::Get)),
            (M::GET, format!("{cm}/x"), true, Ok(Verb::Watch)),
            (M::PUT, format!("{cm}/x"), false, Ok(Verb::Update)),
            (M::PATCH, format!("{cm}/x"), false, Ok(Verb::Patch)),
            (M::DELETE, format!("{cm}/x"), false, Ok(Verb::Delete)),
            (M::POST, format!("{cm}/x"), false, Err(405)),
            (M::HEAD, format!("{cm}/x"), false, Err(405)),
            (M::DELETE, format!("{cm}/x/bogus"), false, Err(404)),
            (M::GET, format!("{cm}/x/status"), false, Err(404)),
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/log".into(),
                false,
                Ok(Verb::Get),
            ),
            (M::POST, "/api/v1/namespaces/a/pods/p/log".into(), false, Err(405)),
            (
                M::POST,
                "/api/v1/namespaces/a/pods/p/exec".into(),
                false,
                Ok(Verb::Create),
            ),
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/exec".into(),
                false,
                Ok(Verb::Get),
            ),
            (
                M::PUT,
                "/api/v1/namespaces/a/pods/p/attach".into(),
                false,
                Err(405),
            ),
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/proxy".into(),
                false,
                Ok(Verb::Get),
            ),
            (
                M::HEAD,
                "/api/v1/namespaces/a/pods/p:80/proxy/a/b/".into(),
                false,
                Ok(Verb::Get),
            ),
            (
                M::POST,
                "/api/v1/namespaces/a/services/https:s:443/proxy/x".into(),
                false,
                Ok(Verb::Create),
            ),
            (
                M::OPTIONS,
                "/api/v1/nodes/n/proxy/metrics".into(),
                false,
                Ok(Verb::Unnamed),
            ),
            (M::OPTIONS, format!("{cm}/x"), false, Err(405)),
            (
                M::DELETE,
                "/api/v1/nodes/n/proxy/metrics".into(),
                false,
                Ok(Verb::Delete),
            ),
            // Only a proxy takes a path after its name.
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/exec/more".into(),
                false,
                Err(404),
            ),
            (
                M::GET,
                "/api/v1/namespaces/a/configmaps/c/proxy".into(),
                false,
                Err(404),
            ),
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/status".into(),
                false,
                Ok(Verb::Get),
            ),
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/status".into(),
                true,
                Ok(Verb::Get),
            ),
            (
                M::DELETE,
                "/api/v1/namespaces/a/pods/p/status".into(),
                false,
                Err(405),
            ),
            (
                M::POST,
                "/api/v1/namespaces/a/pods/p/status".into(),
                false,
                Err(405),
            ),
            (
                M::GET,
                "/api/v1/namespaces/a/pods/p/scale".into(),
                false,
                Err(404),
            ),
            (M::PUT, format!("{deploy}/d/scale"), false, Ok(Verb::Update)),
            (M::PATCH, format!("{deploy}/d/scale"), false, Ok(Verb::Patch)),
            (M::DELETE, format!("{deploy}/d/scale"), false, Err(405)),
            (M::PATCH, format!("{deploy}/d/status"), false, Ok(Verb::Patch)),
            (
                M::GET,
                "/api/v1/namespaces/a/nosuchresource".into(),
                false,
                Err(404),
            ),
            (M::DELETE, "/api/v1/namespaces/a/status".into(), false, Err(405)),
            (
                M::PUT,
                "/api/v1/namespaces/a/status".into(),
                false,
                Ok(Verb::Update),
            ),
            (
                M::GET,
                "/api/v1/watch/namespaces/a/configmaps/x".into(),
                false,
                Ok(Verb::Watch),
            ),
        ];
        for (method, path, watch, want) in cases {
            let got = parse(&path).and_then(|t| match t {
                Target::Resource(r) => r.verb(&method, watch),
                other => panic!("{path}: {other:?}"),
            });
            assert_eq!(got.map_err(|e| e.code), want, "{method} {path} watch={watch}");
        }
    }
}
