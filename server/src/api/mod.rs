//! The Kubernetes REST API on a replica: routing, representations and the generic store.
//!
//! One handler serves every path under `/api` and `/apis`: it resolves the path against the
//! registry, negotiates the representation, decodes the body and runs the verb on the generic
//! store. Per-type differences live in data ([`registry`]) and small hooks ([`strategy`]).

pub mod allocation;
pub mod cache;
pub mod custom;
pub mod defaults;
pub mod discovery;
pub mod fieldset;
pub mod gc;
pub mod handlers;
pub mod managed;
pub mod meta;
pub mod namespaces;
pub mod openapi;
pub mod options;
pub mod printers;
pub mod protobuf;
pub mod qos;
pub mod read;
pub mod registry;
pub mod request;
pub mod scale;
pub mod schema;
pub mod selector;
pub mod smp;
pub mod status;
pub mod store;
pub mod strategy;
pub mod table;
pub mod type_facts;
pub mod validation;
pub mod watch;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::config::FeatureGates;
use handlers::{DeleteOptions, PatchType, Query, Reply};
use registry::LiveRegistry;
use request::{content_type, decode_body, negotiate, parse_path, Format, Offer, Target, Verb, MAX_BODY_BYTES};
use status::{ApiError, ApiResult};
use store::Store;

/// What the API handlers share.
#[derive(Clone)]
pub struct Api {
    /// The resource types served (built-in and custom).
    pub registry: Arc<LiveRegistry>,
    /// The generic store over this replica.
    pub store: Store,
    /// The alpha behaviours the operator turned on.
    pub features: FeatureGates,
}

fn is_pretty(q: &Query) -> bool {
    q.get("pretty").is_some_and(|v| v == "true" || v == "1")
}

/// Renders a value in the negotiated representation.
pub fn render(code: u16, body: &Value, format: Format, pretty: bool) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let (ctype, bytes) = match format {
        Format::Protobuf => match protobuf::response(code, body) {
            Some(r) => return r,
            None => return render(code.as_u16(), body, Format::Json, pretty),
        },
        Format::Yaml => match serde_yaml::to_string(body) {
            Ok(s) => ("application/yaml", s.into_bytes()),
            Err(e) => return ApiError::internal(e.to_string()).into_response(),
        },
        Format::AggregatedDiscovery(version) => {
            return match serde_json::to_vec(body) {
                Ok(b) => (
                    code,
                    [
                        (header::CONTENT_TYPE, discovery::aggregated_content_type(version)),
                        (header::VARY, "Accept".to_string()),
                    ],
                    b,
                )
                    .into_response(),
                Err(e) => ApiError::internal(e.to_string()).into_response(),
            }
        }
        Format::Json | Format::Table(_) | Format::Metadata(_) => {
            let bytes = if pretty {
                serde_json::to_vec_pretty(body)
            } else {
                serde_json::to_vec(body)
            };
            match bytes {
                Ok(b) => ("application/json", b),
                Err(e) => return ApiError::internal(e.to_string()).into_response(),
            }
        }
    };
    (code, [(header::CONTENT_TYPE, ctype)], bytes).into_response()
}

fn parse_query(raw: Option<&str>) -> ApiResult<Query> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw.unwrap_or(""))
        .map(|pairs| pairs.into_iter().collect())
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))
}

async fn read_body(headers: &HeaderMap, body: Body) -> ApiResult<bytes::Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(ApiError::too_large(MAX_BODY_BYTES));
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::too_large(MAX_BODY_BYTES))
}

fn host_of(headers: &HeaderMap) -> String {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string()
}

/// Serves every request under `/api` and `/apis`.
pub async fn dispatch(State(api): State<Api>, request: Request) -> Response {
    let protobuf_errors = negotiate(request.headers(), Offer::Resource) == Ok(Format::Protobuf);
    match serve(&api, request).await {
        Ok(r) => r,
        Err(e) if protobuf_errors => protobuf::error_response(e),
        Err(e) => e.into_response(),
    }
}

async fn serve(api: &Api, request: Request) -> ApiResult<Response> {
    let (parts, body) = request.into_parts();
    let mut q = parse_query(parts.uri.query())?;
    // Writes without a fieldManager are recorded under the client's user-agent name, as
    // kube-apiserver does; an apply must name its manager itself.
    let applying = parts.method == Method::PATCH && content_type(&parts.headers) == handlers::APPLY_PATCH;
    if !q.contains_key("fieldManager") && !applying {
        if let Some(agent) = parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
        {
            let name: String = agent
                .split('/')
                .next()
                .unwrap_or_default()
                .chars()
                .take(128)
                .collect();
            if !name.is_empty() {
                q.insert("fieldManager".into(), name);
            }
        }
    }
    let pretty = is_pretty(&q);
    let mut registry = api.registry.current();
    let target = match parse_path(&registry, parts.uri.path()) {
        // A type defined an instant ago (perhaps through another replica) is served as soon
        // as its definition's creation is acknowledged: look again at a linearizable point.
        Err(e) if e.code == 404 => {
            custom::refresh(api.store.cache(), &api.registry).await?;
            registry = api.registry.current();
            parse_path(&registry, parts.uri.path())?
        }
        other => other?,
    };
    let offer = match &target {
        Target::Resource(_) => Offer::Resource,
        Target::CoreVersions | Target::Groups => Offer::GroupList,
        Target::Group(_) | Target::ResourceList { .. } => Offer::Discovery,
    };
    let format = negotiate(&parts.headers, offer)?;
    let plain = if format == Format::Yaml {
        Format::Yaml
    } else {
        Format::Json
    };
    // Objects, lists and Status answer in protobuf when asked; discovery, watch and tables
    // stay JSON.
    let wire = if format == Format::Protobuf { format } else { plain };
    let req = match target {
        Target::Resource(r) => r,
        discovery_target => {
            if parts.method != Method::GET {
                return Err(ApiError::method_not_allowed_because("discovery documents are read-only"));
            }
            // Discovery lists the custom types of every definition stored before the request
            // (one read-index round trip; clients cache discovery). Without a quorum it still
            // answers, with the types this replica knows, as kube-apiserver answers discovery
            // without etcd.
            if let Err(e) = custom::refresh(api.store.cache(), &api.registry).await {
                tracing::debug!(error = %e.message, "discovery from the types known locally");
            }
            let registry = api.registry.current();
            let doc = match (discovery_target, format) {
                (Target::CoreVersions, Format::AggregatedDiscovery(v)) => {
                    discovery::aggregated(&registry, true, v)
                }
                (Target::Groups, Format::AggregatedDiscovery(v)) => {
                    discovery::aggregated(&registry, false, v)
                }
                (Target::CoreVersions, _) => discovery::core_versions(&host_of(&parts.headers)),
                (Target::Groups, _) => discovery::groups(&registry),
                (Target::Group(g), _) => discovery::group(&registry, &g).ok_or_else(ApiError::no_route)?,
                (Target::ResourceList { group, version }, _) => {
                    discovery::resource_list(&registry, &group, &version)
                }
                (Target::Resource(_), _) => return Err(ApiError::no_route()),
            };
            let format = match format {
                Format::AggregatedDiscovery(_) => format,
                _ => plain,
            };
            return Ok(render(200, &doc, format, pretty));
        }
    };
    let store = &api.store;
    let watch_option = q.get("watch").is_some_and(|w| w == "true" || w == "1");
    // The path and the method decide the verb before any handler runs: a verb the path does
    // not serve never reaches the store.
    let verb = req.verb(&parts.method, watch_option)?;
    let mut reply: Reply = match verb {
        Verb::Watch if req.name.is_none() => return watch::serve(store, &req, &q, format).await,
        Verb::Watch => {
            let mut one = req.clone();
            let name = one.name.take().unwrap_or_default();
            let mut q = q.clone();
            q.insert("fieldSelector".into(), format!("metadata.name={name}"));
            return watch::serve(store, &one, &q, format).await;
        }
        Verb::List => handlers::list(store, &req, &q).await?,
        Verb::Get => handlers::get(store, &req, &q).await?,
        Verb::Create => {
            let bytes = read_body(&parts.headers, body).await?;
            let obj = decode_body(&content_type(&parts.headers), &bytes)?;
            handlers::create(store, &req, &q, obj).await?
        }
        Verb::Update => {
            let bytes = read_body(&parts.headers, body).await?;
            let obj = decode_body(&content_type(&parts.headers), &bytes)?;
            handlers::update(store, &req, &q, obj).await?
        }
        Verb::Patch => {
            let kind = PatchType::from_content_type(&content_type(&parts.headers))?;
            let bytes = read_body(&parts.headers, body).await?;
            handlers::patch(store, &req, &q, kind, &bytes).await?
        }
        Verb::Delete => {
            let bytes = read_body(&parts.headers, body).await?;
            let bytes = protobuf::json_body(&content_type(&parts.headers), bytes)?;
            let opts = DeleteOptions::parse(&bytes, &q)?;
            // Without the feature gate the option changes nothing, as in kube-apiserver.
            if opts.ignore_store_read_error && api.features.allow_unsafe_malformed_object_deletion {
                handlers::delete_corrupt(store, &req).await?
            } else {
                handlers::delete(store, &req, &opts).await?
            }
        }
        Verb::DeleteCollection => {
            let bytes = read_body(&parts.headers, body).await?;
            let bytes = protobuf::json_body(&content_type(&parts.headers), bytes)?;
            handlers::delete_collection(store, &req, &q, &DeleteOptions::parse(&bytes, &q)?).await?
        }
    };
    if let Some(custom) = &req.rt.custom {
        serve_version(&req.rt, &mut reply);
        reply.warnings.extend(custom.deprecation.clone());
    }
    let warnings = std::mem::take(&mut reply.warnings);
    let mut response = respond(&req, &q, reply, format, wire, pretty)?;
    for warning in &warnings {
        if let Ok(v) = header::HeaderValue::from_str(&warning_header(warning)) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    Ok(response)
}

/// A custom resource's reply as read through the requested version: objects stored in another
/// version have their `apiVersion` converted.
fn serve_version(rt: &registry::ResourceType, reply: &mut Reply) {
    let served = custom::served_type_fields(rt);
    custom::convert_value(rt, &mut reply.body);
    if let Some(obj) = &reply.cached {
        reply.cached = Some(custom::as_served(served.as_deref(), rt, obj));
    }
    if let Some(items) = &mut reply.items {
        for item in items.iter_mut() {
            *item = custom::as_served(served.as_deref(), rt, item);
        }
    }
    if let Some((objects, _)) = &mut reply.table_rows {
        for obj in objects.iter_mut() {
            custom::convert_value(rt, obj);
        }
    }
}

/// A `Warning` header value as kube-apiserver writes it: code 299, no agent, quoted text.
fn warning_header(text: &str) -> String {
    format!("299 - \"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Renders a reply in the negotiated representation.
fn respond(
    req: &request::ResourceRequest,
    q: &Query,
    reply: Reply,
    format: Format,
    wire: Format,
    pretty: bool,
) -> ApiResult<Response> {
    if let Format::Table(version) = format {
        let rows = match (&reply.table_rows, &reply.items, &reply.cached) {
            (Some((objects, rv)), _, _) => Some((objects.clone(), rv.clone())),
            (None, Some(items), _) => Some((
                items.iter().map(|o| o.value()).collect(),
                reply.body["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )),
            (None, None, Some(obj)) => Some((vec![obj.value()], obj.rv.to_string())),
            (None, None, None) => None,
        };
        if let Some((objects, rv)) = rows {
            return table_response(req, q, &reply, &objects, &rv, version, pretty);
        }
    }
    if let Format::Metadata(version) = format {
        let mut body = match &reply.cached {
            Some(obj) => obj.value(),
            None => reply.body,
        };
        if let Some(items) = &reply.items {
            body["items"] = items.iter().map(|o| handlers::strip_type(o.value())).collect();
        }
        return Ok(render(
            reply.code,
            &meta::partial_object_metadata(body, version),
            format,
            pretty,
        ));
    }
    match (reply.items, reply.cached) {
        (Some(items), _) => Ok(render_list(
            reply.code,
            reply.body,
            &items,
            wire,
            pretty,
            req.rt.custom.is_some(),
        )),
        // A cached object in compact JSON: its shared encoding, not copied.
        (None, Some(obj)) if wire == Format::Json && !pretty => {
            let status = StatusCode::from_u16(reply.code).unwrap_or(StatusCode::OK);
            Ok((status, [(header::CONTENT_TYPE, "application/json")], obj.json()).into_response())
        }
        (None, Some(obj)) => Ok(render(reply.code, &obj.value(), wire, pretty)),
        (None, None) => Ok(render(reply.code, &reply.body, wire, pretty)),
    }
}

/// Renders a get or list as a Table.
fn table_response(
    req: &request::ResourceRequest,
    q: &Query,
    reply: &Reply,
    objects: &[Value],
    rv: &str,
    version: &'static str,
    pretty: bool,
) -> ApiResult<Response> {
    let include = table::IncludeObject::parse(q.get("includeObject").map(String::as_str))?;
    let mut t = table::table(&req.rt, objects, rv, version, include);
    // A paged list's Table pages on like the list itself.
    for field in ["continue", "remainingItemCount"] {
        if let Some(v) = reply.body["metadata"].get(field) {
            t["metadata"][field] = v.clone();
        }
    }
    Ok(render(reply.code, &t, Format::Table(version), pretty))
}

/// Renders a list whose items are cached objects. Compact JSON is spliced together from each
/// object's shared list-item encoding; other representations build the whole value. Items of
/// custom resources keep their `kind` and `apiVersion` (`typed`), as kube-apiserver lists them.
fn render_list(
    code: u16,
    mut body: Value,
    items: &[Arc<cache::CachedObject>],
    format: Format,
    pretty: bool,
    typed: bool,
) -> Response {
    if format != Format::Json || pretty {
        body["items"] = items
            .iter()
            .map(|o| {
                if typed {
                    o.value()
                } else {
                    handlers::strip_type(o.value())
                }
            })
            .collect();
        return render(code, &body, format, pretty);
    }
    let head = json!({"kind": body["kind"], "apiVersion": body["apiVersion"], "metadata": body["metadata"]});
    let Ok(head) = serde_json::to_vec(&head) else {
        return ApiError::internal("cannot encode a list").into_response();
    };
    let size = head.len()
        + items
            .iter()
            .map(|o| o.item_json().len() + o.type_fields().len() + 2)
            .sum::<usize>()
        + 16;
    let mut out = Vec::with_capacity(size);
    // `{...,"metadata":{...}}` → `{...,"metadata":{...},"items":[...]}`
    out.extend_from_slice(&head[..head.len() - 1]);
    out.extend_from_slice(b",\"items\":[");
    let mut whole = bytes::BytesMut::new();
    for (i, o) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if typed {
            o.write_json(&mut whole);
            out.extend_from_slice(&whole.split());
        } else {
            out.extend_from_slice(o.item_json());
        }
    }
    out.extend_from_slice(b"]}");
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    (status, [(header::CONTENT_TYPE, "application/json")], out).into_response()
}
