//! Reading a request: which resource a path names, which representation the client accepts,
//! and the body decoded from JSON or YAML.

use axum::http::HeaderMap;

use super::registry::{Registry, ResourceType};
use super::status::{ApiError, ApiResult};
use super::validation::{decode_tracking_duplicates, Decoded};

/// Largest request body accepted (kube-apiserver's limit).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

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
    Resource(ResourceRequest),
}

/// A request for a collection, an object or an object's subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRequest {
    /// The resource type.
    pub rt: ResourceType,
    /// The namespace in the path (`None` for cluster-scoped paths and all-namespace lists).
    pub namespace: Option<String>,
    /// The object name (`None` for a collection).
    pub name: Option<String>,
    /// `status`, `scale`, … (`None` for the main resource).
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix was used.
    pub watch_path: bool,
}

fn segments(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

/// `sub` if `rt` serves it, else `404` as for any path that serves nothing.
fn served_subresource<'a>(rt: &ResourceType, sub: &'a str) -> ApiResult<&'a str> {
    rt.subresource(sub).map(|_| sub).ok_or_else(ApiError::no_route)
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
        }
    }
}

impl ResourceRequest {
    /// The verb that `method` performs on this path, or `405` when the path does not serve it
    /// (`DELETE pods/NAME/status`, `POST configmaps/NAME`, `PUT configmaps`). `watch` is the
    /// request's `watch` option; a subresource is never watched.
    pub fn verb(&self, method: &axum::http::Method, watch: bool) -> ApiResult<Verb> {
        use axum::http::Method;
        let watch = (watch || self.watch_path) && self.subresource.is_none();
        let verb = match (method, self.name.is_some()) {
            (&Method::GET, _) if watch => Verb::Watch,
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, false) => Verb::Create,
            (&Method::PUT, true) => Verb::Update,
            (&Method::PATCH, true) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => return Err(ApiError::method_not_allowed()),
        };
        let served = match &self.subresource {
            Some(sub) => self.rt.subresource(sub).map(|s| s.verbs).unwrap_or_default(),
            None => RESOURCE_VERBS,
        };
        if served.contains(&verb.as_str()) {
            Ok(verb)
        } else {
            Err(ApiError::method_not_allowed())
        }
    }
}

/// The verbs of a type's main resource.
const RESOURCE_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

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
                _ => return Err(ApiError::no_route()),
            };
            return Ok(Target::Resource(ResourceRequest {
                rt: rt.clone(),
                namespace: Some((*ns).to_string()),
                name: name.map(str::to_string),
                subresource: sub.map(str::to_string),
                watch_path,
            }));
        }
    }
    let (rt, name, sub) = match rest {
        [plural] => (lookup(plural)?, None, None),
        [plural, name] => (lookup(plural)?, Some(*name), None),
        [plural, name, sub] => (lookup(plural)?, Some(*name), Some(*sub)),
        _ => return Err(ApiError::no_route()),
    };
    if rt.namespaced && name.is_some() {
        return Err(ApiError::no_route());
    }
    let sub = sub.map(|s| served_subresource(&rt, s)).transpose()?;
    Ok(Target::Resource(ResourceRequest {
        rt,
        namespace: None,
        name: name.map(str::to_string),
        subresource: sub.map(str::to_string),
        watch_path,
    }))
}

/// The representation a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`
    Json,
    /// `application/yaml`
    Yaml,
    /// `application/vnd.kubernetes.protobuf`
    Protobuf,
    /// `application/json;as=Table;g=meta.k8s.io;v=v1|v1beta1`, carrying the version.
    Table(&'static str),
    /// `application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1|v1beta1`: only the
    /// objects' metadata, carrying the version.
    Metadata(&'static str),
    /// `application/json;as=APIGroupDiscoveryList;g=apidiscovery.k8s.io;v=v2|v2beta1`: all
    /// groups, versions and resources in one document, carrying the version.
    AggregatedDiscovery(&'static str),
}

/// Which representations an endpoint has, beyond JSON and YAML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Objects and lists: also protobuf, Table and PartialObjectMetadata.
    Resource,
    /// `/api` and `/apis`: also aggregated discovery.
    GroupList,
    /// The other discovery documents: JSON and YAML only.
    Discovery,
}

/// One entry of an `Accept` header.
struct MediaRange {
    media: String,
    as_kind: Option<String>,
    group: Option<String>,
    version: Option<String>,
    refused: bool,
}

impl MediaRange {
    fn parse(range: &str) -> MediaRange {
        let mut parts = range.split(';').map(str::trim);
        let mut r = MediaRange {
            media: parts.next().unwrap_or("").to_ascii_lowercase(),
            as_kind: None,
            group: None,
            version: None,
            refused: false,
        };
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                let v = v.trim().to_string();
                match k.trim() {
                    "as" => r.as_kind = Some(v),
                    "g" => r.group = Some(v),
                    "v" => r.version = Some(v),
                    "q" => r.refused = v.parse::<f32>().is_ok_and(|q| q == 0.0),
                    _ => {}
                }
            }
        }
        r
    }

    /// The version of an `as=<kind>;g=<group>` view, if this range asks for that view in one of
    /// `versions`.
    fn view(&self, kinds: &[&str], group: &str, versions: &[&'static str]) -> Option<&'static str> {
        let json_like = matches!(self.media.as_str(), "application/json" | "application/*" | "*/*");
        let kind = self.as_kind.as_deref()?;
        if !json_like || !kinds.contains(&kind) || self.group.as_deref() != Some(group) {
            return None;
        }
        versions
            .iter()
            .copied()
            .find(|v| self.version.as_deref() == Some(*v))
    }

    /// The format this range selects at an endpoint with `offer`, if any.
    fn select(&self, offer: Offer) -> Option<Format> {
        if self.refused {
            return None;
        }
        if self.as_kind.is_some() {
            return match offer {
                Offer::Resource => self
                    .view(&["Table"], "meta.k8s.io", &["v1", "v1beta1"])
                    .map(Format::Table)
                    .or_else(|| {
                        self.view(
                            &["PartialObjectMetadata", "PartialObjectMetadataList"],
                            "meta.k8s.io",
                            &["v1", "v1beta1"],
                        )
                        .map(Format::Metadata)
                    }),
                Offer::GroupList => self
                    .view(
                        &["APIGroupDiscoveryList"],
                        "apidiscovery.k8s.io",
                        &["v2", "v2beta1"],
                    )
                    .map(Format::AggregatedDiscovery),
                Offer::Discovery => None,
            };
        }
        match self.media.as_str() {
            "application/json" | "application/*" | "*/*" => Some(Format::Json),
            "application/yaml" => Some(Format::Yaml),
            super::protobuf::MEDIA_TYPE if offer == Offer::Resource => Some(Format::Protobuf),
            _ => None,
        }
    }
}

/// Chooses the response format from the `Accept` header (first acceptable entry wins).
pub fn negotiate(headers: &HeaderMap, offer: Offer) -> ApiResult<Format> {
    let Some(accept) = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(Format::Json);
    };
    if accept.trim().is_empty() {
        return Ok(Format::Json);
    }
    accept
        .split(',')
        .find_map(|range| MediaRange::parse(range).select(offer))
        .ok_or_else(|| ApiError::not_acceptable(accept))
}

/// The media type of a request body.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Decodes a JSON, YAML or Kubernetes protobuf body into a JSON value, noting duplicate fields
/// for field validation (YAML through serde_yaml, whose alias expansion and nesting are
/// bounded; JSON nesting is bounded by serde_json).
pub fn decode_body(content_type: &str, body: &[u8]) -> ApiResult<Decoded> {
    match content_type {
        "" | "application/json" => {
            let mut de = serde_json::Deserializer::from_slice(body);
            decode_tracking_duplicates(&mut de)
                .and_then(|decoded| de.end().map(|()| decoded))
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "the body of the request could not be decoded as JSON: {e}"
                    ))
                })
        }
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            decode_tracking_duplicates(serde_yaml::Deserializer::from_slice(body)).map_err(|e| {
                ApiError::bad_request(format!(
                    "the body of the request could not be decoded as YAML: {e}"
                ))
            })
        }
        super::protobuf::MEDIA_TYPE => Ok(Decoded {
            value: super::protobuf::decode_request(body)?,
            duplicates: Vec::new(),
        }),
        other => Err(ApiError::unsupported_media_type(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> ApiResult<Target> {
        parse_path(&Registry::new(), p)
    }

    fn resource(p: &str) -> ResourceRequest {
        match parse(p).unwrap() {
            Target::Resource(r) => r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn paths_resolve_to_collections_objects_and_subresources() {
        let r = resource("/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            (r.rt.plural, r.namespace.as_deref(), r.name.as_deref()),
            ("configmaps", Some("default"), Some("x"))
        );
        let r = resource("/api/v1/namespaces/default");
        assert_eq!((r.rt.plural, r.name.as_deref()), ("namespaces", Some("default")));
        let r = resource("/api/v1/namespaces/default/status");
        assert_eq!(
            (r.rt.plural, r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = resource("/apis/apps/v1/namespaces/a/deployments/d/scale");
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        let r = resource("/api/v1/configmaps");
        assert_eq!((r.rt.plural, r.namespace), ("configmaps", None));
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
            (M::GET, "/api/v1/namespaces/a/pods/p/log".into(), false, Err(404)),
            (M::GET, "/api/v1/namespaces/a/pods/p/status".into(), false, Ok(Verb::Get)),
            (M::GET, "/api/v1/namespaces/a/pods/p/status".into(), true, Ok(Verb::Get)),
            (M::DELETE, "/api/v1/namespaces/a/pods/p/status".into(), false, Err(405)),
            (M::POST, "/api/v1/namespaces/a/pods/p/status".into(), false, Err(405)),
            (M::GET, "/api/v1/namespaces/a/pods/p/scale".into(), false, Err(404)),
            (M::PUT, format!("{deploy}/d/scale"), false, Ok(Verb::Update)),
            (M::PATCH, format!("{deploy}/d/scale"), false, Ok(Verb::Patch)),
            (M::DELETE, format!("{deploy}/d/scale"), false, Err(405)),
            (M::PATCH, format!("{deploy}/d/status"), false, Ok(Verb::Patch)),
            (M::GET, "/api/v1/namespaces/a/nosuchresource".into(), false, Err(404)),
            (M::DELETE, "/api/v1/namespaces/a/status".into(), false, Err(405)),
            (M::PUT, "/api/v1/namespaces/a/status".into(), false, Ok(Verb::Update)),
            (M::GET, "/api/v1/watch/namespaces/a/configmaps/x".into(), false, Ok(Verb::Watch)),
        ];
        for (method, path, watch, want) in cases {
            let got = parse(&path).and_then(|t| match t {
                Target::Resource(r) => r.verb(&method, watch),
                other => panic!("{path}: {other:?}"),
            });
            assert_eq!(got.map_err(|e| e.code), want, "{method} {path} watch={watch}");
        }
    }

    #[test]
    fn accept_headers_pick_the_first_supported_format() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(axum::http::header::ACCEPT, v.parse().unwrap());
            m
        };
        let negotiate_resource = |h: &HeaderMap| negotiate(h, Offer::Resource);
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate_resource(&h(kubectl_get)).unwrap(), Format::Table("v1"));
        assert_eq!(negotiate_resource(&h("application/yaml")).unwrap(), Format::Yaml);
        assert_eq!(
            negotiate_resource(&h(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
            ))
            .unwrap(),
            Format::Json
        );
        assert_eq!(negotiate_resource(&h("text/html")).unwrap_err().code, 406);
        assert_eq!(
            negotiate_resource(&h("application/yaml;q=0, application/json")).unwrap(),
            Format::Json
        );
        assert_eq!(negotiate_resource(&HeaderMap::new()).unwrap(), Format::Json);
        let metadata = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate_resource(&h(metadata)).unwrap(), Format::Metadata("v1"));
        assert_eq!(
            negotiate_resource(&h("application/vnd.kubernetes.protobuf")).unwrap(),
            Format::Protobuf
        );

        // What kubectl sends for /api and /apis.
        let discovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate(&h(discovery), Offer::GroupList).unwrap(),
            Format::AggregatedDiscovery("v2")
        );
        assert_eq!(negotiate(&h(discovery), Offer::Discovery).unwrap(), Format::Json);
        assert_eq!(
            negotiate(&h(kubectl_get), Offer::GroupList).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiate(&h("application/vnd.kubernetes.protobuf"), Offer::Discovery)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn bodies_decode_or_fail_with_the_right_status() {
        assert_eq!(decode_body("application/yaml", b"a: 1").unwrap().value["a"], 1);
        assert_eq!(decode_body("application/json", b"{").unwrap_err().code, 400);
        assert_eq!(decode_body("application/json", b"{} {}").unwrap_err().code, 400);
        assert_eq!(decode_body("text/plain", b"x").unwrap_err().code, 415);
        let deep = "[".repeat(10_000);
        assert_eq!(
            decode_body("application/json", deep.as_bytes()).unwrap_err().code,
            400
        );
        let bomb = "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
        assert_eq!(
            decode_body("application/yaml", bomb.as_bytes()).unwrap_err().code,
            400
        );
    }
}
