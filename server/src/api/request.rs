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
                [name, sub] => (Some(*name), Some(*sub)),
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
