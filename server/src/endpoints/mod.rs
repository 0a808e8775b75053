//! Endpoints: HTTP requests to verbs of the generic store and back. One handler serves every
//! path under `/api` and `/apis`: the request info (parsed by the filters) names the resource and
//! the verb; this module negotiates the representation, decodes the body, calls the registry's
//! verb and renders its reply ([`connect`] opens the streams of connect subresources instead).
//! It knows axum and the registry, never Raft or the stored bytes.

pub mod body;
pub mod connect;
pub mod discovery;
pub mod list_body;
pub mod negotiation;
pub mod openapi;
pub mod request_info;
pub mod response;
pub mod reviews;
pub mod table;
pub mod token_request;
pub mod watch;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::response::Response;

use crate::admission;
use crate::aggregator;
use crate::aggregator::discovery as aggregated;
use crate::aggregator::proxy::Aggregator;
use crate::apiextensions;
use crate::authentication::{Authenticator, UserInfo};
use crate::authorization::{Attributes, Authorizer, ResourceAttributes};
use crate::config::FeatureGates;
use crate::machinery::decode::decode_object;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::query::{parse_bool, Query};
use crate::proxy::kubelet::Kubelet;
use crate::registry::delete::{self, DeleteOptions};
use crate::registry::options::{GetOptions, ListOptions, PatchOptions, WriteOptions};
use crate::registry::reply::Reply;
use crate::registry::update::{self, PatchType};
use crate::registry::versions;
use crate::registry::{create, read, Requester, ResourceRequest};
use crate::scheme::{LiveRegistry, ResourceType};
use crate::store::Store;
use body::{content_type, json_body, patch_body, read_body};
use discovery::Document;
use negotiation::{negotiate_encoded, Format, Offer};
use request_info::{RequestInfo, Target, Verb};
use response::{error_format, error_response, render_document, respond, warning_header};

/// What the API handlers share. Every request clones it (each filter and the handler take it
/// as their state), so it is one reference count, not one per part.
#[derive(Clone)]
pub struct Api(Arc<ApiParts>);

impl Api {
    /// The handlers' state made of `parts`.
    pub fn new(parts: ApiParts) -> Api {
        Api(Arc::new(parts))
    }
}

impl std::ops::Deref for Api {
    type Target = ApiParts;

    fn deref(&self) -> &ApiParts {
        &self.0
    }
}

/// The parts of [`Api`].
pub struct ApiParts {
    /// The resource types served (built-in and custom).
    pub registry: Arc<LiveRegistry>,
    /// The generic store over this replica.
    pub store: Store,
    /// The alpha behaviours the operator turned on.
    pub features: FeatureGates,
    /// Who a request is from (TokenReview asks it).
    pub authenticator: Arc<Authenticator>,
    /// What a user may do (the access reviews ask it).
    pub authorizer: Authorizer,
    /// The aggregation proxy (APIServices with a Service).
    pub aggregator: Arc<Aggregator>,
    /// What the aggregated APIs serve, for discovery.
    pub aggregated: aggregated::Cache,
    /// How this replica reaches kubelets (a pod's `exec`, `attach`, `portforward`).
    pub kubelet: Kubelet,
}

fn is_pretty(q: &Query) -> bool {
    q.get("pretty").and_then(|v| parse_bool(v)).unwrap_or(false)
}

fn parse_query(raw: Option<&str>) -> ApiResult<Query> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(raw.unwrap_or(""))
        .map(|pairs| pairs.into_iter().collect())
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))
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
    let errors_as = error_format(request.headers());
    // Admission's warnings reach the client whether the write passes or is refused.
    let (served, warnings) = admission::warnings::collect(serve(&api, request)).await;
    let mut response = match served {
        Ok(r) => r,
        Err(e) => error_response(e, errors_as),
    };
    add_warnings(&mut response, &warnings);
    response
}

async fn serve(api: &Api, request: Request) -> ApiResult<Response> {
    let (mut parts, body) = request.into_parts();
    let mut q = parse_query(parts.uri.query())?;
    // Writes without a fieldManager are recorded under the client's user-agent name, as
    // kube-apiserver does; an apply must name its manager itself.
    let applying = parts.method == Method::PATCH && content_type(&parts.headers) == update::APPLY_PATCH;
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
    let Some(info) = parts.extensions.remove::<RequestInfo>() else {
        return Err(ApiError::internal("the request info filter did not run"));
    };
    let (target, verb) = match info {
        RequestInfo::Resource { request, verb } => (Target::Resource(request), Some(verb)),
        RequestInfo::Discovery(target) => (target, None),
        RequestInfo::NonResource { .. } => return Err(ApiError::no_route()),
        RequestInfo::Unserved(e) => return Err(e),
    };
    if let Target::Resource(r) = &target {
        let sub = r.subresource.as_deref().and_then(|s| r.rt.subresource(s));
        if let Some(sub) = sub.filter(|s| s.options.is_some()) {
            return connect::serve(api, r, &sub, Request::from_parts(parts, body)).await;
        }
    }
    let offer = match &target {
        Target::Resource(_) => Offer::Resource,
        Target::CoreVersions | Target::Groups => Offer::GroupList,
        Target::Group(_) | Target::ResourceList { .. } => Offer::Discovery,
    };
    // The representation (an object, a list, a Table, metadata only, a discovery document)
    // and the encoding its bytes go out in.
    let (format, wire) = negotiate_encoded(&parts.headers, offer)?;
    let mut req = match target {
        Target::Resource(r) => r,
        discovery_target => {
            if parts.method != Method::GET {
                return Err(ApiError::method_not_allowed_because(
                    "discovery documents are read-only",
                ));
            }
            // Discovery lists the custom types of every definition stored before the request
            // (one read-index round trip; clients cache discovery). Without a quorum it still
            // answers, with the types this replica knows, as kube-apiserver answers discovery
            // without etcd.
            if let Err(e) = apiextensions::refresh(api.store.cache(), &api.registry).await {
                tracing::debug!(error = %e.message, "discovery from the types known locally");
            }
            let registry = api.registry.current();
            let remote = api.aggregated.served();
            let doc = match (discovery_target, format) {
                (Target::CoreVersions, Format::AggregatedDiscovery(v)) => {
                    Document::Aggregated(discovery::aggregated(&registry, &remote, true, v))
                }
                (Target::Groups, Format::AggregatedDiscovery(v)) => {
                    Document::Aggregated(discovery::aggregated(&registry, &remote, false, v))
                }
                (Target::CoreVersions, _) => {
                    Document::Versions(discovery::core_versions(&host_of(&parts.headers)))
                }
                (Target::Groups, _) => Document::Groups(discovery::groups(
                    &registry,
                    &aggregator::backends(api.store.cache()),
                )),
                (Target::Group(g), _) => {
                    Document::Group(discovery::group(&registry, &remote, &g).ok_or_else(ApiError::no_route)?)
                }
                (Target::ResourceList { group, version }, _) => {
                    Document::Resources(discovery::resource_list(&registry, &group, &version))
                }
                (Target::Resource(_), _) => return Err(ApiError::no_route()),
            };
            return Ok(render_document(200, &doc, format, wire, pretty));
        }
    };
    req.requester = parts.extensions.get::<Arc<UserInfo>>().map(|user| Requester {
        user: user.clone(),
        authorizer: api.authorizer.clone(),
    });
    let store = &api.store;
    let Some(verb) = verb else {
        return Err(ApiError::internal("a resource request without a verb"));
    };
    let mut reply: Reply = match verb {
        Verb::Watch if req.name.is_none() => return watch::serve(store, &req, &q, format, wire).await,
        Verb::Watch => {
            let mut one = req.clone();
            let name = one.name.take().unwrap_or_default();
            let mut q = q.clone();
            q.insert("fieldSelector".into(), format!("metadata.name={name}"));
            return watch::serve(store, &one, &q, format, wire).await;
        }
        Verb::List => read::list(store, &req, &ListOptions::parse(&req.rt, &q)?).await?,
        Verb::Get => read::get(store, &req, &GetOptions::parse(&q)?).await?,
        Verb::Create if req.rt.review => {
            let bytes = read_body(&parts.headers, body).await?;
            let obj = decode_object(&req.rt.kind, &content_type(&parts.headers), &bytes)?;
            let user = parts
                .extensions
                .get::<Arc<UserInfo>>()
                .ok_or_else(|| ApiError::internal("no user: the authentication filter did not run"))?;
            reviews::create(&api.authenticator, &api.authorizer, &req, user, obj.value)?
        }
        Verb::Create if req.subresource.as_deref() == Some("token") => {
            let opts = WriteOptions::parse(&q)?;
            let bytes = read_body(&parts.headers, body).await?;
            let obj = decode_object("TokenRequest", &content_type(&parts.headers), &bytes)?;
            token_request::create(&api.authenticator, store, &req, &opts, obj.value).await?
        }
        Verb::Create => {
            let opts = WriteOptions::parse(&q)?;
            let bytes = read_body(&parts.headers, body).await?;
            let obj = decode_object(&req.rt.kind, &content_type(&parts.headers), &bytes)?;
            create::create(store, &req, &opts, obj).await?
        }
        Verb::Update => {
            let opts = WriteOptions::parse(&q)?;
            let bytes = read_body(&parts.headers, body).await?;
            let obj = decode_object(&req.rt.kind, &content_type(&parts.headers), &bytes)?;
            update::update(store, &req, &opts, obj).await?
        }
        Verb::Patch => {
            let media_type = content_type(&parts.headers);
            // The body is read before anything is refused: an HTTP/1.1 connection whose request
            // body was left unread is closed, and a client that reuses it loses its next request.
            let read = read_body(&parts.headers, body).await;
            let kind = body::patch_type(&media_type, req.rt.custom.is_none())?;
            let opts = PatchOptions::parse(&q, kind == PatchType::Apply)?;
            let bytes = patch_body(&media_type, read?)?;
            update::patch(store, &req, &opts, kind, &bytes).await?
        }
        Verb::Delete => {
            let bytes = read_body(&parts.headers, body).await?;
            let bytes = json_body(&content_type(&parts.headers), bytes)?;
            let opts = DeleteOptions::parse(&bytes, &q)?;
            // Without the feature gate the option changes nothing, as in kube-apiserver.
            if opts.ignore_store_read_error && api.features.allow_unsafe_malformed_object_deletion {
                authorize_unsafe_delete(&req)?;
                delete::delete_corrupt(store, &req).await?
            } else {
                delete::delete(store, &req, &opts).await?
            }
        }
        // Only a proxy passes a method kube has no verb for, and proxies were served above.
        Verb::Unnamed => return Err(ApiError::method_not_allowed()),
        Verb::DeleteCollection => {
            let bytes = read_body(&parts.headers, body).await?;
            let bytes = json_body(&content_type(&parts.headers), bytes)?;
            delete::delete_collection(
                store,
                &req,
                &ListOptions::parse(&req.rt, &q)?,
                &DeleteOptions::parse(&bytes, &q)?,
            )
            .await?
        }
    };
    serve_version(store, &req.rt, &mut reply).await?;
    if let Some(custom) = &req.rt.custom {
        reply.warnings.extend(custom.deprecation.clone());
    }
    let warnings = std::mem::take(&mut reply.warnings);
    let mut response = respond(&req, &q, reply, format, wire, pretty)?;
    add_warnings(&mut response, &warnings);
    Ok(response)
}

fn add_warnings(response: &mut Response, warnings: &[String]) {
    for warning in warnings {
        if let Ok(v) = header::HeaderValue::from_str(&warning_header(warning)) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
}

/// The unsafe delete of a corrupt object also takes the `unsafe-delete-ignore-read-errors`
/// verb on the resource, as in kube-apiserver (the server's own requests have no requester).
fn authorize_unsafe_delete(req: &ResourceRequest) -> ApiResult<()> {
    let Some(r) = &req.requester else {
        return Ok(());
    };
    let attrs = Attributes::resource(
        &r.user,
        "unsafe-delete-ignore-read-errors",
        ResourceAttributes {
            api_group: &req.rt.group,
            api_version: &req.rt.version,
            resource: &req.rt.plural,
            subresource: "",
            namespace: req.namespace.as_deref().unwrap_or_default(),
            name: req.name.as_deref().unwrap_or_default(),
        },
    );
    r.authorizer.check(&attrs)
}

/// A reply as read through the requested version: objects stored in another version are
/// converted (a custom resource's `apiVersion`, a built-in type's fields, or by the type's
/// conversion webhook — one call for a list's items).
async fn serve_version(store: &Store, rt: &ResourceType, reply: &mut Reply) -> ApiResult<()> {
    match reply.cached.as_mut() {
        // A get: the body is the cached object.
        Some(obj) if versions::by_webhook(rt) => {
            versions::cached_to_served(store, rt, std::slice::from_mut(obj), false).await?;
            reply.body = obj.value();
        }
        cached => {
            if let Some(obj) = cached {
                versions::cached_to_served(store, rt, std::slice::from_mut(obj), false).await?;
            }
            versions::to_served(store, rt, std::slice::from_mut(&mut reply.body), false).await?;
        }
    }
    if let Some(items) = &mut reply.items {
        versions::cached_to_served(store, rt, items, true).await?;
    }
    if let Some((objects, _)) = &mut reply.table_rows {
        versions::to_served(store, rt, objects, true).await?;
    }
    Ok(())
}
