//! Subresources served from elsewhere: a pod's streams, from its kubelet, and the proxies. The options come
//! from the query (a `PodExecOptions` from `command`, `container`, `stdin`…; a
//! `PodLogOptions` from `follow`, `tailLines`…) and the type's strategy says where the stream
//! is. Nothing is stored.
//!
//! - **Connect subresources** (kube's `ConnectResource` handler: `exec`, `attach`,
//!   `portforward`): the options pass admission as a `CONNECT` of the options object
//!   (webhooks and policies can refuse a user's `exec`); the request, which must ask to
//!   upgrade its connection, then goes to the kubelet through [`crate::proxy`] with this
//!   server's kubelet client, the two connections joined once it switches protocols.
//! - **A streamed read** (kube's `LocationStreamer`: `log`): the kubelet's answer streams back
//!   as `text/plain` as it comes (`follow` keeps it open); a refusal of the kubelet is kube's
//!   error for it.
//! - **Proxies** (`pods/NAME/proxy/PATH`, `services/...`, `nodes/...`: kube's upgrade-aware
//!   proxy handler): admitted as a `CONNECT` of the proxy options, then any request (an
//!   upgrade only if the client asks) passes on to where the strategy says the object is —
//!   a pod, a Service's endpoint, a node's kubelet — at `PATH`, and the answer comes back.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::Api;
use crate::admission::{self, Operation};
use crate::authentication::UserInfo;
use crate::machinery::errors::{go_quote, ApiError, ApiResult};
use crate::proxy;
use crate::registry::strategy::{self, Via};
use crate::registry::ResourceRequest;
use crate::scheme::Subresource;

/// How an option is written in the query and in the options object.
#[derive(Debug, Clone, Copy)]
enum Field {
    /// `true` unless the first value is `0`, `f` or `false` (any case); left out when false.
    Bool,
    /// The first value; left out when empty.
    Text,
    /// Every value, in order; `null` when none.
    Words,
    /// Every value, each a comma-separated list of ports; left out when none.
    Ports,
    /// The first value, a whole number; left out when absent.
    Int,
    /// The first value, an RFC 3339 time; left out when absent.
    Time,
}

/// The fields of each options kind, in the order kube's types declare them.
const OPTIONS: &[(&str, &[(&str, Field)])] = &[
    (
        "PodExecOptions",
        &[
            ("stdin", Field::Bool),
            ("stdout", Field::Bool),
            ("stderr", Field::Bool),
            ("tty", Field::Bool),
            ("container", Field::Text),
            ("command", Field::Words),
        ],
    ),
    (
        "PodAttachOptions",
        &[
            ("stdin", Field::Bool),
            ("stdout", Field::Bool),
            ("stderr", Field::Bool),
            ("tty", Field::Bool),
            ("container", Field::Text),
        ],
    ),
    ("PodPortForwardOptions", &[("ports", Field::Ports)]),
    ("PodProxyOptions", &[("path", Field::Text)]),
    ("ServiceProxyOptions", &[("path", Field::Text)]),
    ("NodeProxyOptions", &[("path", Field::Text)]),
    (
        "PodLogOptions",
        &[
            ("container", Field::Text),
            ("follow", Field::Bool),
            ("previous", Field::Bool),
            ("sinceSeconds", Field::Int),
            ("sinceTime", Field::Time),
            ("timestamps", Field::Bool),
            ("tailLines", Field::Int),
            ("limitBytes", Field::Int),
            ("insecureSkipTLSVerifyBackend", Field::Bool),
        ],
    ),
];

/// The most of a kubelet's refusal read into the error (kube's `maxReadLength`).
const MAX_REFUSAL: usize = 50_000;

/// One option's value from its query values, as kube's parameter codec converts it (`None`:
/// left out of the options object).
fn option_value(field: Field, values: &[&str]) -> ApiResult<Option<Value>> {
    let first = values.first().copied();
    Ok(match field {
        Field::Bool => first
            .filter(|v| !(*v == "0" || v.eq_ignore_ascii_case("f") || v.eq_ignore_ascii_case("false")))
            .map(|_| json!(true)),
        Field::Text => first.filter(|v| !v.is_empty()).map(|v| json!(v)),
        Field::Words => Some(if values.is_empty() {
            Value::Null
        } else {
            json!(values)
        }),
        Field::Ports => {
            let mut ports = Vec::new();
            for port in values.iter().flat_map(|v| v.split(',')) {
                let parsed: u16 = port.parse().map_err(|_| {
                    let why = if !port.is_empty() && port.chars().all(|c| c.is_ascii_digit()) {
                        "value out of range"
                    } else {
                        "invalid syntax"
                    };
                    ApiError::bad_request(format!(
                        "cannot convert to []int32: strconv.ParseUint: parsing {}: {why}",
                        go_quote(port)
                    ))
                })?;
                ports.push(parsed);
            }
            (!ports.is_empty()).then(|| json!(ports))
        }
        Field::Int => match first {
            Some(v) => Some(json!(v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "strconv.ParseInt: parsing {}: invalid syntax",
                    go_quote(v)
                ))
            })?)),
            None => None,
        },
        Field::Time => match first {
            Some(v) => {
                time::OffsetDateTime::parse(v, &time::format_description::well_known::Rfc3339).map_err(
                    |_| {
                        ApiError::bad_request(format!(
                            "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                            go_quote(v),
                            go_quote(v)
                        ))
                    },
                )?;
                Some(json!(v))
            }
            None => None,
        },
    })
}

/// The options object of `kind` (`group`/`version`) from the query's pairs, as kube's
/// parameter codec decodes it; a value it cannot convert is the `400` kube answers.
fn options(group: &str, version: &str, kind: &str, query: &[(String, String)]) -> ApiResult<Value> {
    let fields = OPTIONS
        .iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, fields)| *fields)
        .ok_or_else(|| ApiError::internal(format!("no options of kind {kind}")))?;
    let api_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut out = Map::new();
    out.insert("kind".into(), json!(kind));
    out.insert("apiVersion".into(), json!(api_version));
    for (name, field) in fields {
        let values: Vec<&str> = query
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect();
        if let Some(v) = option_value(*field, &values)? {
            out.insert((*name).into(), v);
        }
    }
    Ok(Value::Object(out))
}

/// Why `url` could not be reached, as Go's dialer says it where the cause is one Go names the
/// same way.
fn go_cause(url: &str, e: &reqwest::Error) -> String {
    let host = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?']).next())
        .unwrap_or(url);
    let cause = proxy::cause(e);
    if cause.contains("Connection refused") {
        format!("dial tcp {host}: connect: connection refused")
    } else if e.is_timeout() {
        format!("dial tcp {host}: i/o timeout")
    } else {
        cause
    }
}

/// Serves the subresource `sub` of `req` (one with options) for `request`: opens its stream
/// or reads it.
pub async fn serve(
    api: &Api,
    req: &ResourceRequest,
    sub: &Subresource<'_>,
    request: Request,
) -> ApiResult<Response> {
    let mut query: Vec<(String, String)> = serde_urlencoded::from_str(request.uri().query().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    // A proxy's options take their `path` from the request's path, whatever the query says.
    let split = sub.subpath.then(|| split_proxy_path(request.uri().path(), req));
    if let Some((_, subpath)) = &split {
        query.retain(|(k, _)| k != "path");
        query.push(("path".into(), subpath.clone()));
    }
    let (group, version, _) = sub.kind;
    let kind = sub.options.unwrap_or(sub.kind.2);
    if !sub.connect {
        let opts = options(group, version, kind, &query)?;
        return read(api, req, &opts).await;
    }
    if query.iter().any(|(k, _)| k == "dryRun") {
        return Err(ApiError::bad_request("dryRun is not supported"));
    }
    let mut opts = options(group, version, kind, &query)?;
    let user = request.extensions().get::<Arc<UserInfo>>().cloned();
    let attrs = admission::Attributes {
        operation: Operation::Connect,
        group,
        version,
        kind,
        resource: &req.rt.plural,
        namespaced: req.rt.namespaced,
        namespace: req.namespace.as_deref(),
        name: req.name.as_deref().unwrap_or_default(),
        subresource: Some(sub.name),
        dry_run: false,
        user: user.as_deref(),
        authorizer: user.as_ref().map(|_| &api.authorizer),
        versions: None,
        old: None,
    };
    let chain = admission::chain();
    chain.admit(&api.store, &attrs, &mut opts).await?;
    chain.validate(&api.store, &attrs, &opts).await?;
    let location = strategy::of(&req.rt)
        .stream_location(&api.store, req, &opts)
        .ok_or_else(ApiError::no_route)?
        .await?
        .ok_or_else(|| ApiError::internal("the stream has nowhere to go"))?;
    if let Some((prefix, subpath)) = split {
        return pass_on(api, &location, &prefix, &subpath, request).await;
    }
    if !proxy::is_upgrade(request.headers()) {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    proxy::forward(api.kubelet.streams(), &location.url, request, |_| {}, "kubelet")
        .await
        .map_err(|e| {
            tracing::info!(url = location.url, error = %e, "cannot reach the kubelet");
            ApiError::unknown(format!("error dialing backend: {}", go_cause(&location.url, &e)))
        })
}

/// A proxy request's path split where the subresource ends
/// (`/api/v1/namespaces/NS/pods/NAME/proxy`) and what follows it, without its leading slash
/// (kube's request info parts after the subresource, joined).
fn split_proxy_path(path: &str, req: &ResourceRequest) -> (String, String) {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let prefix =
        if req.rt.group.is_empty() { 2 } else { 3 } + if req.namespace.is_some() { 2 } else { 0 } + 3;
    let at = prefix.min(segments.len());
    (format!("/{}", segments[..at].join("/")), segments[at..].join("/"))
}

/// The CORS headers of a backend's answer, which kube's proxy drops (the API server's own
/// policy applies).
const CORS_HEADERS: [&str; 4] = [
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-allow-origin",
];

/// A backend's redirect as kube's proxy transport rewrites it (`rewriteURL`): a `Location` on
/// the backend itself (`backend`, its `host:port`) or on no host, with an absolute path, goes
/// through the proxy path `prefix`; one on the host the client asked (`asked`) keeps that
/// host; any other is passed on as it is.
fn rewrite_location(location: &str, backend: &str, asked: &str, prefix: &str) -> String {
    let (origin, rest) = match location.split_once("://") {
        Some((scheme, after)) if !scheme.contains(['/', '?', '#']) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (Some((scheme, &after[..end])), &after[end..])
        }
        _ => (None, location),
    };
    let host = origin.map_or("", |(_, host)| host);
    let path_end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (path, tail) = rest.split_at(path_end);
    if (!host.is_empty() && host != backend && host != asked) || !path.starts_with('/') {
        return location.to_string();
    }
    let origin = match origin {
        Some((scheme, host)) if host == asked => format!("{scheme}://{host}"),
        _ => String::new(),
    };
    if path.starts_with(&format!("{prefix}/")) {
        return format!("{origin}{path}{tail}");
    }
    format!("{origin}{prefix}{path}{tail}")
}

/// Passes `request` on to `location` as kube's upgrade-aware proxy handler does for a proxy
/// subresource: to the path after the subresource (`subpath`, a trailing slash kept) with the
/// request's query, headers (but for its credentials and connection) and body, the client's
/// `Host` kept and `X-Forwarded-For` and `X-Forwarded-Uri` added; the answer comes back as it
/// is but for its CORS headers, and a redirect or the links of an HTML page rewritten to go
/// through the proxy (`prefix`). A request for the subresource itself without a trailing slash is redirected
/// to the same with one; a backend that cannot be reached is kube's `503`.
async fn pass_on(
    api: &Api,
    location: &strategy::Location,
    prefix: &str,
    subpath: &str,
    request: Request,
) -> ApiResult<Response> {
    let path = request.uri().path().to_string();
    let query = request.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
    let trailing = path.ends_with('/');
    if subpath.is_empty() && !trailing && !proxy::is_upgrade(request.headers()) {
        return Response::builder()
            .status(StatusCode::MOVED_PERMANENTLY)
            .header(header::LOCATION, format!("{path}/{query}"))
            .body(Body::empty())
            .map_err(|e| ApiError::internal(e.to_string()));
    }
    let mut target = format!("/{subpath}");
    if trailing && !target.ends_with('/') {
        target.push('/');
    }
    let url = format!("{}{target}{query}", location.url);
    let mut forwarded_uri = if subpath.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}/{subpath}")
    };
    if trailing {
        forwarded_uri.push('/');
    }
    // The host the client asked for: its `Host` header, or an HTTP/2 request's authority.
    let asked = request.headers().get(header::HOST).cloned().or_else(|| {
        request
            .uri()
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    });
    let client_ip = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip().to_string());
    let prior_for: Vec<String> = request
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let client = match location.via {
        Via::Kubelet => api.kubelet.streams(),
        Via::Proxy => api.kubelet.proxy(),
    };
    let identify = |headers: &mut HeaderMap| {
        if let Some(host) = &asked {
            headers.insert(header::HOST, host.clone());
        }
        if let Some(ip) = &client_ip {
            let mut chain = prior_for.clone();
            chain.push(ip.clone());
            if let Ok(v) = HeaderValue::from_str(&chain.join(", ")) {
                headers.insert("x-forwarded-for", v);
            }
        }
        if let Ok(v) = HeaderValue::from_str(&forwarded_uri) {
            headers.insert("x-forwarded-uri", v);
        }
    };
    let mut response = proxy::forward(client, &url, request, identify, "proxy")
        .await
        .map_err(|e| {
            tracing::info!(url, error = %e, "cannot reach a proxied backend");
            ApiError::service_unavailable(format!("error trying to reach service: {}", go_cause(&url, &e)))
        })?;
    let headers = response.headers_mut();
    for h in CORS_HEADERS {
        headers.remove(h);
    }
    let backend = location.url.split_once("://").map_or("", |(_, host)| host);
    let asked = asked.as_ref().and_then(|h| h.to_str().ok()).unwrap_or("");
    if let Some(redirect) = headers.get(header::LOCATION).and_then(|v| v.to_str().ok()) {
        let rewritten = rewrite_location(redirect, backend, asked, prefix);
        if let Ok(v) = HeaderValue::from_str(&rewritten) {
            headers.insert(header::LOCATION, v);
        }
        return Ok(response);
    }
    let (backend, asked, prefix) = (backend.to_string(), asked.to_string(), prefix.to_string());
    let links = Arc::new(move |link: &str| rewrite_location(link, &backend, &asked, &prefix));
    Ok(proxy::html::rewrite_links(response, links))
}

/// A `200` of `text/plain`, as kube streams a location.
fn text(body: Body) -> ApiResult<Response> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Reads the stream `req` names (a pod's log) with `opts` and streams it back as kube's
/// `LocationStreamer` does: nothing when there is nowhere to read it yet.
async fn read(api: &Api, req: &ResourceRequest, opts: &Value) -> ApiResult<Response> {
    let location = strategy::of(&req.rt)
        .stream_location(&api.store, req, opts)
        .ok_or_else(ApiError::no_route)?
        .await?;
    let Some(location) = location else {
        return text(Body::empty());
    };
    let client = if opts["insecureSkipTLSVerifyBackend"] == json!(true) {
        api.kubelet.unverified()
    } else {
        api.kubelet.streams()
    };
    let mut answer = client.get(&location.url).send().await.map_err(|e| {
        ApiError::unknown(format!(
            "Get {}: {}",
            go_quote(&location.url),
            go_cause(&location.url, &e)
        ))
    })?;
    let code = answer.status().as_u16();
    if !(200..=206).contains(&code) {
        let mut said = Vec::new();
        while let Ok(Some(chunk)) = answer.chunk().await {
            said.extend_from_slice(&chunk);
            if said.len() >= MAX_REFUSAL {
                said.truncate(MAX_REFUSAL);
                break;
            }
        }
        let resource = format!(
            "{}/{}",
            req.rt.plural,
            req.subresource.as_deref().unwrap_or_default()
        );
        return Err(ApiError::generic_server_response(
            code,
            &req.rt.group,
            &resource,
            req.name.as_deref().unwrap_or_default(),
            &String::from_utf8_lossy(&said),
        ));
    }
    text(proxy::streamed(answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &str) -> Vec<(String, String)> {
        serde_urlencoded::from_str(q).unwrap()
    }

    #[test]
    fn options_decode_from_the_query_as_kubes_parameter_codec_does() {
        let exec = options(
            "",
            "v1",
            "PodExecOptions",
            &pairs(
                "command=sh&command=-c&command=echo+hi&stdout=true&stderr=1&stdin=false&tty=F&container=app",
            ),
        )
        .unwrap();
        assert_eq!(
            exec,
            json!({"kind": "PodExecOptions", "apiVersion": "v1", "stdout": true, "stderr": true,
                   "container": "app", "command": ["sh", "-c", "echo hi"]})
        );
        let bare = options("", "v1", "PodExecOptions", &[]).unwrap();
        assert_eq!(
            bare,
            json!({"kind": "PodExecOptions", "apiVersion": "v1", "command": null})
        );
        let ports = options(
            "",
            "v1",
            "PodPortForwardOptions",
            &pairs("ports=80,8080&ports=9090"),
        )
        .unwrap();
        assert_eq!(ports["ports"], json!([80, 8080, 9090]));
        let logs = options(
            "",
            "v1",
            "PodLogOptions",
            &pairs("follow=true&tailLines=10&sinceTime=2026-11-26T10:00:00Z&container=app"),
        )
        .unwrap();
        assert_eq!(
            logs,
            json!({"kind": "PodLogOptions", "apiVersion": "v1", "container": "app", "follow": true,
                   "tailLines": 10, "sinceTime": "2026-11-26T10:00:00Z"})
        );
    }

    /// A backend's redirect as kube's proxy transport rewrites it: on the backend or on no
    /// host it goes through the proxy; on the host the client asked it keeps that host; a
    /// path already under the proxy, a relative path and another host are left alone.
    #[test]
    fn redirects_are_rewritten_to_go_through_the_proxy() {
        let prefix = "/api/v1/namespaces/ns/pods/web/proxy";
        let backend = "10.0.0.5:8080";
        let asked = "kuberaft:6443";
        let cases = [
            (
                "/login?next=%2F",
                "/api/v1/namespaces/ns/pods/web/proxy/login?next=%2F",
            ),
            (
                "http://10.0.0.5:8080/a/b/#top",
                "/api/v1/namespaces/ns/pods/web/proxy/a/b/#top",
            ),
            (
                "https://kuberaft:6443/x",
                "https://kuberaft:6443/api/v1/namespaces/ns/pods/web/proxy/x",
            ),
            (
                "/api/v1/namespaces/ns/pods/web/proxy/y",
                "/api/v1/namespaces/ns/pods/web/proxy/y",
            ),
            ("login", "login"),
            ("https://example.com/z", "https://example.com/z"),
        ];
        for (location, want) in cases {
            assert_eq!(
                rewrite_location(location, backend, asked, prefix),
                want,
                "{location}"
            );
        }
    }

    #[test]
    fn a_value_kube_cannot_convert_is_its_bad_request() {
        let e = options("", "v1", "PodPortForwardOptions", &pairs("ports=http")).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            r#"cannot convert to []int32: strconv.ParseUint: parsing "http": invalid syntax"#
        );
        let e = options("", "v1", "PodPortForwardOptions", &pairs("ports=70000")).unwrap_err();
        assert!(e.message.ends_with("value out of range"), "{}", e.message);
        let e = options("", "v1", "PodLogOptions", &pairs("tailLines=ten")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, r#"strconv.ParseInt: parsing "ten": invalid syntax"#)
        );
    }
}
