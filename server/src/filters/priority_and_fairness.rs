//! The priority and fairness filter (kube-apiserver's `WithPriorityAndFairness`): classifies
//! each request by the FlowSchemas in force, tells the client which FlowSchema and priority
//! level took it (`X-Kubernetes-PF-FlowSchema-UID`, `X-Kubernetes-PF-PriorityLevel-UID`), and
//! runs it once its level gives it a seat — at once, after a wait in a fair queue, or never:
//! kube's `429` with the level's `Retry-After`.
//!
//! As in kube-apiserver, long-running requests other than watches (exec, attach,
//! port-forward, proxy, logs) pass without classification; a watch holds its seat only until
//! its response starts; any other request holds it until its response body is sent (or
//! dropped), so slow readers of large lists count against their level.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::authentication::UserInfo;
use crate::endpoints::request_info::{RequestInfo, Verb};
use crate::filters::metrics;
use crate::filters::observed_body::{Observed, Observer};
use crate::flowcontrol::{Admitted, Classification, Descriptor, PriorityAndFairness, Seat, Target};
use crate::machinery::query::watch_requested;

/// The response headers that name the FlowSchema and priority level by uid.
const FLOW_SCHEMA_UID: HeaderName = HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
const PRIORITY_LEVEL_UID: HeaderName = HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");
/// kube-apiserver's answer to a refused request.
const TOO_MANY: &str = "Too many requests, please try again later.\n";

/// The descriptor of a request: its user and what it asks for, as kube's request info says.
fn descriptor<'a>(
    info: Option<&'a RequestInfo>,
    user: &'a UserInfo,
    method: &Method,
    path: &'a str,
    watch: bool,
) -> Descriptor<'a> {
    let http_verb = || match *method {
        Method::GET => "get",
        Method::HEAD => "head",
        Method::POST => "post",
        Method::PUT => "put",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        Method::OPTIONS => "options",
        _ => "",
    };
    let target = match info {
        Some(RequestInfo::Resource { request, verb }) => Target::Resource {
            verb: if watch {
                Verb::Watch.as_str()
            } else {
                verb.as_str()
            },
            group: &request.rt.group,
            resource: &request.rt.plural,
            subresource: request.subresource.as_deref(),
            namespace: request.namespace.as_deref(),
        },
        Some(RequestInfo::NonResource { path, verb }) => Target::NonResource { verb, path },
        _ => Target::NonResource {
            verb: http_verb(),
            path,
        },
    };
    Descriptor {
        user: &user.name,
        groups: &user.groups,
        target,
    }
}

/// Whether the request is a watch.
fn is_watch(info: Option<&RequestInfo>, method: &Method, query: Option<&str>) -> bool {
    match info {
        Some(RequestInfo::Resource { verb, .. }) => {
            *verb == Verb::Watch || (*method == Method::GET && watch_requested(query) == Some(true))
        }
        _ => false,
    }
}

/// The filter.
pub async fn filter(State(pf): State<Arc<PriorityAndFairness>>, request: Request, next: Next) -> Response {
    let info = request.extensions().get::<RequestInfo>();
    let watch = is_watch(info, request.method(), request.uri().query());
    if metrics::is_long_running(&request) && !watch {
        return next.run(request).await;
    }
    let Some(user) = request.extensions().get::<Arc<UserInfo>>().cloned() else {
        return next.run(request).await;
    };
    let class = pf.classify(&descriptor(
        info,
        &user,
        request.method(),
        request.uri().path(),
        watch,
    ));
    let seat = match pf.admit(&class).await {
        Admitted::Exempt => None,
        Admitted::Seated { seat, waited } => {
            class.series.waited.record(waited.as_secs_f64());
            Some(seat)
        }
        Admitted::Refused {
            refusal,
            retry_after,
            waited,
        } => {
            let labels = [
                ("priority_level", class.level.name.clone()),
                ("flow_schema", class.flow_schema.to_string()),
            ];
            match waited {
                Some(waited) => class.series.waited.record(waited.as_secs_f64()),
                None => {
                    let mut not_executed = labels.to_vec();
                    not_executed.push(("execute", "false".to_string()));
                    ::metrics::histogram!(
                        "apiserver_flowcontrol_request_wait_duration_seconds",
                        &not_executed
                    )
                    .record(0.0);
                }
            }
            let mut with_reason = labels.to_vec();
            with_reason.push(("reason", refusal.reason().to_string()));
            ::metrics::counter!("apiserver_flowcontrol_rejected_requests_total", &with_reason).increment(1);
            metrics::record_refused(&request, StatusCode::TOO_MANY_REQUESTS);
            return refused(&class, retry_after);
        }
    };
    class.series.dispatched.increment(1);
    let executing = Executing::start(class.series.executing.clone());
    let mut response = next.run(request).await;
    with_headers(&mut response, &class);
    if watch {
        // A watch's seat and execution end once it is under way.
        drop((seat, executing));
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Observed::body(
            body,
            Held {
                _seat: seat,
                _executing: executing,
            },
        ),
    )
}

/// kube's refusal: `429`, plain text, `Retry-After`, and the classification's headers.
fn refused(class: &Classification, retry_after: u64) -> Response {
    let mut response = (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        TOO_MANY,
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    headers.insert("X-Content-Type-Options", HeaderValue::from_static("nosniff"));
    with_headers(&mut response, class);
    response
}

fn with_headers(response: &mut Response, class: &Classification) {
    let headers = response.headers_mut();
    for (name, uid) in [
        (FLOW_SCHEMA_UID, &*class.flow_schema_uid),
        (PRIORITY_LEVEL_UID, class.level.uid.as_str()),
    ] {
        if let Ok(v) = HeaderValue::from_str(uid) {
            headers.insert(name, v);
        }
    }
}

/// `apiserver_flowcontrol_current_executing_requests` for one request, lowered when dropped.
struct Executing {
    gauge: ::metrics::Gauge,
}

impl Executing {
    fn start(gauge: ::metrics::Gauge) -> Executing {
        gauge.increment(1.0);
        Executing { gauge }
    }
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.gauge.decrement(1.0);
    }
}

/// The seat and the execution a response body holds until it is sent or dropped.
struct Held {
    _seat: Option<Seat>,
    _executing: Executing,
}

impl Observer for Held {
    fn dropped(&mut self, _ended: bool) {}
}
