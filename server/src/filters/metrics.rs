//! The request metrics filter: records every request an endpoint serves in kube-apiserver's
//! request series, with kube's names, labels and label values, in one place instead of in
//! each handler — kube-apiserver's `InstrumentRouteFunc` and its in-flight watermark.
//!
//! - `apiserver_request_total{verb,dry_run,group,version,resource,subresource,scope,component,code}`
//!   and `apiserver_request_duration_seconds` (the same labels without `code`), when the
//!   response's body has been written (for a watch, when it ends, as kube records it when its
//!   handler returns);
//! - `apiserver_response_sizes` for `GET` and `LIST`, in bytes written;
//! - `apiserver_longrunning_requests` while a watch or a connect stream is open;
//! - `apiserver_request_aborts_total` for a response whose body was dropped unfinished (the
//!   client went away);
//! - `apiserver_current_inflight_requests{request_kind}`: the most requests (`readOnly` or
//!   `mutating`, long-running ones not counted) executing at once in the last second, and
//!   the same count over time as a fraction of the in-flight limit
//!   ([`read_vs_write`](crate::filters::read_vs_write)).
//!
//! Label values are computed as kube's `CleanVerb`, `CanonicalVerb`, the installer's scope and
//! `cleanDryRun` compute them. Only what an endpoint serves is recorded: a path that names no
//! registered resource (kube's not-found handler records nothing either) never creates a
//! series, so the labels are bounded by the registered types. Of the paths outside `/api` and
//! `/apis`, the health checks are recorded as kube's health handlers record them (the path as
//! `subresource`, empty component); the others are not, as in kube-apiserver.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, PoisonError, RwLock};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use metrics::{Counter, Histogram, Label};

use crate::audit::request::{RequestInfo as KubeRequestInfo, LONG_RUNNING_SUBRESOURCES};
use crate::endpoints::request_info::{RequestInfo, Verb};
use crate::filters::observed_body::{Observed, Observer};
use crate::filters::read_vs_write;
use crate::machinery::query::watch_requested;
use crate::registry::ResourceRequest;

/// The `component` label of what the API server itself serves.
const APISERVER: &str = "apiserver";
/// The health checks, recorded as kube-apiserver's health handlers record them.
const HEALTH_PATHS: [&str; 3] = ["/healthz", "/livez", "/readyz"];
/// The only `dryRun` value kube-apiserver accepts.
const DRY_RUN_ALL: &str = "All";
/// The patch type that makes a `PATCH` an `APPLY` in kube's metrics.
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// Requests executing now, and the most at once since the last report, per request kind.
struct InFlight {
    kind: read_vs_write::Kind,
    now: AtomicI64,
    most: AtomicI64,
}

static READ_ONLY: InFlight = InFlight {
    kind: read_vs_write::Kind::ReadOnly,
    now: AtomicI64::new(0),
    most: AtomicI64::new(0),
};
static MUTATING: InFlight = InFlight {
    kind: read_vs_write::Kind::Mutating,
    now: AtomicI64::new(0),
    most: AtomicI64::new(0),
};

/// Publishes `apiserver_current_inflight_requests` (the most requests of each kind executing
/// at once since the last call) and starts the next period; called once a second.
pub fn report_inflight() {
    for (kind, counts) in [("readOnly", &READ_ONLY), ("mutating", &MUTATING)] {
        let now = counts.now.load(Ordering::Relaxed);
        let most = counts.most.swap(now, Ordering::Relaxed);
        metrics::gauge!("apiserver_current_inflight_requests", "request_kind" => kind)
            .set(most.max(now) as f64);
    }
}

/// One executing request of a kind, counted until it is dropped.
struct Executing(&'static InFlight);

impl Executing {
    fn start(kind: &'static InFlight) -> Executing {
        let now = kind.now.fetch_add(1, Ordering::Relaxed) + 1;
        kind.most.fetch_max(now, Ordering::Relaxed);
        read_vs_write::set_executing(kind.kind, || kind.now.load(Ordering::Relaxed));
        Executing(kind)
    }
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::Relaxed);
        read_vs_write::set_executing(self.0.kind, || self.0.now.load(Ordering::Relaxed));
    }
}

/// An open long-running request in `apiserver_longrunning_requests`, until it is dropped.
struct LongRunning(metrics::Gauge);

impl Drop for LongRunning {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// What one request is recorded as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Labels {
    verb: &'static str,
    dry_run: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: &'static str,
    component: &'static str,
    long_running: bool,
    /// Whether kube records the response's size (what its `GET` and `LIST` routes answer).
    sized: bool,
}

impl Labels {
    /// The labels of a request, or `None` for what kube-apiserver does not record.
    fn of(info: &RequestInfo, method: &Method, query: Option<&str>, headers: &HeaderMap) -> Option<Labels> {
        match info {
            RequestInfo::Resource { request, verb } => {
                Some(Labels::resource(request, *verb, method, query, headers))
            }
            RequestInfo::NonResource { path, .. }
                if HEALTH_PATHS.contains(&path.as_str())
                    && (method == Method::GET || method == Method::HEAD) =>
            {
                Some(Labels {
                    verb: if watch_requested(query) == Some(true) {
                        "WATCH"
                    } else {
                        "GET"
                    },
                    dry_run: dry_run(query),
                    group: String::new(),
                    version: String::new(),
                    resource: String::new(),
                    subresource: path.clone(),
                    scope: "",
                    component: "",
                    long_running: false,
                    sized: true,
                })
            }
            _ => None,
        }
    }

    fn resource(
        req: &ResourceRequest,
        verb: Verb,
        method: &Method,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Labels {
        let subresource = req.subresource.as_deref().unwrap_or("");
        let connect = LONG_RUNNING_SUBRESOURCES.contains(&subresource);
        let scope = clean_scope(
            req.name.is_some(),
            verb == Verb::Create,
            req.namespace.is_some(),
            true,
        );
        let watch = verb == Verb::Watch || (*method == Method::GET && watch_requested(query) == Some(true));
        let reported = if connect {
            "CONNECT"
        } else {
            reported_verb(method, scope, watch, headers)
        };
        Labels {
            verb: reported,
            dry_run: dry_run(query),
            group: req.rt.group.to_string(),
            version: req.rt.version.to_string(),
            resource: req.rt.plural.to_string(),
            subresource: subresource.to_string(),
            scope,
            component: APISERVER,
            long_running: long_running(req, verb, method, query),
            // kube sizes what its `GET` and `LIST` routes answer, a `?watch=true` among them,
            // but not its `/watch/` routes nor connect streams.
            sized: *method == Method::GET && !req.watch_path && !connect,
        }
    }

    /// The labels kube's `RecordRequestTermination` gives a request it knows only by its path
    /// (a request the aggregator refuses to proxy): kube's request info of the path, the
    /// path itself as `subresource` when it names no resource.
    fn of_path(
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        component: &'static str,
    ) -> Labels {
        let info = KubeRequestInfo::parse(method, path, query);
        let r = info.resource.unwrap_or_default();
        let resource_request = info.resource.is_some();
        let scope = clean_scope(
            !r.name.is_empty(),
            info.verb == "create",
            !r.namespace.is_empty(),
            resource_request,
        );
        Labels {
            verb: reported_verb(method, scope, info.verb == "watch", headers),
            dry_run: dry_run(query),
            group: r.api_group.to_string(),
            version: r.api_version.to_string(),
            resource: r.resource.to_string(),
            subresource: if resource_request {
                r.subresource.to_string()
            } else {
                path.to_string()
            },
            scope,
            component,
            long_running: info.is_long_running(),
            sized: false,
        }
    }

    fn label(name: &'static str, value: &str) -> Label {
        Label::new(name, value.to_string())
    }

    /// `verb, group, version, resource, subresource, scope`.
    fn target(&self) -> Vec<Label> {
        vec![
            Self::label("verb", self.verb),
            Self::label("group", &self.group),
            Self::label("version", &self.version),
            Self::label("resource", &self.resource),
            Self::label("subresource", &self.subresource),
            Self::label("scope", self.scope),
        ]
    }

    /// `verb, group, version, resource, subresource, scope, component`.
    fn of_component(&self) -> Vec<Label> {
        let mut labels = self.target();
        labels.push(Self::label("component", self.component));
        labels
    }

    /// `verb, dry_run, group, version, resource, subresource, scope, component`.
    fn request(&self) -> Vec<Label> {
        let mut labels = self.of_component();
        labels.insert(1, Self::label("dry_run", &self.dry_run));
        labels
    }
}

/// The series one label set records in, each registered with the recorder when first used and
/// found again by the labels: building kube's nine labels and looking them up in the
/// recorder for every request cost more CPU than serving a GET from the cache. The handles
/// belong to the recorder installed when the replica starts, before it serves; the rare
/// refusals recorded outside the served path ([`record_refused`]) look theirs up each time.
struct Series {
    labels: Labels,
    duration: OnceLock<Histogram>,
    size: OnceLock<Histogram>,
    /// `apiserver_request_total` by response code.
    totals: RwLock<Vec<(u16, Counter)>>,
}

/// Every label set recorded so far (bounded as the labels are: by the registered types).
static SERIES: LazyLock<RwLock<HashMap<Labels, Arc<Series>>>> = LazyLock::new(RwLock::default);

impl Series {
    fn of(labels: &Labels) -> Arc<Series> {
        if let Some(series) = SERIES.read().unwrap_or_else(PoisonError::into_inner).get(labels) {
            return series.clone();
        }
        SERIES
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(labels.clone())
            .or_insert_with(|| {
                Arc::new(Series {
                    labels: labels.clone(),
                    duration: OnceLock::new(),
                    size: OnceLock::new(),
                    totals: RwLock::default(),
                })
            })
            .clone()
    }

    fn total(&self, code: u16) -> Counter {
        let known =
            |totals: &[(u16, Counter)]| totals.iter().find(|(c, _)| *c == code).map(|(_, t)| t.clone());
        if let Some(total) = known(&self.totals.read().unwrap_or_else(PoisonError::into_inner)) {
            return total;
        }
        let mut totals = self.totals.write().unwrap_or_else(PoisonError::into_inner);
        known(&totals).unwrap_or_else(|| {
            let mut with_code = self.labels.request();
            with_code.push(Labels::label("code", &code.to_string()));
            let total = metrics::counter!("apiserver_request_total", with_code);
            totals.push((code, total.clone()));
            total
        })
    }

    fn duration(&self) -> &Histogram {
        self.duration
            .get_or_init(|| metrics::histogram!("apiserver_request_duration_seconds", self.labels.request()))
    }

    fn size(&self) -> &Histogram {
        self.size
            .get_or_init(|| metrics::histogram!("apiserver_response_sizes", self.labels.of_component()))
    }
}

/// kube's `CleanScope`: an object (or a create) is `resource`, a collection in a namespace
/// `namespace`, any other resource request `cluster`, anything else empty.
fn clean_scope(named: bool, create: bool, namespaced: bool, resource_request: bool) -> &'static str {
    if named || create {
        "resource"
    } else if namespaced {
        "namespace"
    } else if resource_request {
        "cluster"
    } else {
        ""
    }
}

/// kube's `cleanVerb(CanonicalVerb(method, scope), ...)`: `GET` for one object and `LIST`
/// otherwise, `WATCH` for a watch, `APPLY` for a server-side apply.
fn reported_verb(method: &Method, scope: &str, watch: bool, headers: &HeaderMap) -> &'static str {
    let canonical = match *method {
        Method::GET | Method::HEAD if scope == "resource" => "GET",
        Method::GET | Method::HEAD => "LIST",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "other",
    };
    let apply = canonical == "PATCH"
        && headers
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes() == APPLY_PATCH.as_bytes());
    if apply {
        "APPLY"
    } else if watch {
        "WATCH"
    } else {
        canonical
    }
}

/// kube's `cleanDryRun`: empty without the option, `invalid` for a value other than `All`,
/// else the distinct values sorted and joined with commas (which can only be `All`).
fn dry_run(query: Option<&str>) -> String {
    let values: Vec<&str> = query
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| match pair.split_once('=') {
            Some(("dryRun", v)) => Some(v),
            None if pair == "dryRun" => Some(""),
            _ => None,
        })
        .collect();
    if values.iter().any(|v| *v != DRY_RUN_ALL) {
        "invalid".into()
    } else if values.is_empty() {
        String::new()
    } else {
        DRY_RUN_ALL.into()
    }
}

/// Whether a request is long-running (a watch or a connect stream), as kube's
/// `LongRunningRequestCheck` decides: what the in-flight limits do not count.
pub fn is_long_running(request: &Request) -> bool {
    match request.extensions().get::<RequestInfo>() {
        Some(RequestInfo::Resource { request: req, verb }) => {
            long_running(req, *verb, request.method(), request.uri().query())
        }
        _ => false,
    }
}

/// Whether a request for `req` is a watch or a connect stream.
fn long_running(req: &ResourceRequest, verb: Verb, method: &Method, query: Option<&str>) -> bool {
    let connect = LONG_RUNNING_SUBRESOURCES.contains(&req.subresource.as_deref().unwrap_or(""));
    connect || verb == Verb::Watch || (*method == Method::GET && watch_requested(query) == Some(true))
}

/// Records a request the server refused in self-defence before any endpoint saw it (the
/// in-flight limits' `429`), as kube's `RecordDroppedRequest` and `RecordRequestTermination`
/// do: in `apiserver_request_total` with its code, and in
/// `apiserver_request_terminations_total`. A request no endpoint of this replica serves (an
/// aggregated group's, proxied further in) is labelled by its path as kube's request info
/// parses it.
pub fn record_refused(request: &Request, code: axum::http::StatusCode) {
    let labels = request
        .extensions()
        .get::<RequestInfo>()
        .and_then(|info| Labels::of(info, request.method(), request.uri().query(), request.headers()))
        .unwrap_or_else(|| {
            Labels::of_path(
                request.method(),
                request.uri().path(),
                request.uri().query(),
                request.headers(),
                "apiserver",
            )
        });
    let code = code.as_u16().to_string();
    let mut with_code = labels.request();
    with_code.push(Labels::label("code", &code));
    metrics::counter!("apiserver_request_total", with_code).increment(1);
    let mut terminated = labels.of_component();
    terminated.push(Labels::label("code", &code));
    metrics::counter!("apiserver_request_terminations_total", terminated).increment(1);
}

/// A request refused before any handler served it, known by its path: recorded as kube's
/// `RecordRequestTermination` records it, in `apiserver_request_terminations_total` only
/// (the aggregator's own refusals to proxy, with component `aggregator`).
#[derive(Debug)]
pub struct Termination(Labels);

impl Termination {
    /// The labels of `request` for `component`.
    pub fn of(request: &Request, component: &'static str) -> Termination {
        Termination(Labels::of_path(
            request.method(),
            request.uri().path(),
            request.uri().query(),
            request.headers(),
            component,
        ))
    }

    /// Counts the request as terminated with `code`.
    pub fn record(&self, code: axum::http::StatusCode) {
        let mut labels = self.0.of_component();
        labels.push(Labels::label("code", &code.as_u16().to_string()));
        metrics::counter!("apiserver_request_terminations_total", labels).increment(1);
    }
}

/// The request metrics filter (after authorization, so that it sees what endpoints serve).
pub async fn filter(request: Request, next: Next) -> Response {
    let labels = request
        .extensions()
        .get::<RequestInfo>()
        .and_then(|info| Labels::of(info, request.method(), request.uri().query(), request.headers()));
    let read_only = matches!(*request.method(), Method::GET | Method::HEAD);
    let Some(labels) = labels else {
        let _executing = Executing::start(if read_only { &READ_ONLY } else { &MUTATING });
        return next.run(request).await;
    };
    let start = Instant::now();
    let executing =
        (!labels.long_running).then(|| Executing::start(if read_only { &READ_ONLY } else { &MUTATING }));
    let long_running = labels.long_running.then(|| {
        let gauge = metrics::gauge!("apiserver_longrunning_requests", labels.of_component());
        gauge.increment(1.0);
        LongRunning(gauge)
    });
    let series = Series::of(&labels);
    let mut response = next.run(request).await;
    let code = response.status().as_u16();
    if labels.sized {
        response.extensions_mut().insert(SizeSeries(series.clone()));
    }
    response.map(|inner| {
        Observed::body(
            inner,
            Record {
                series,
                code,
                start,
                _executing: executing,
                _long_running: long_running,
            },
        )
    })
}

/// A response body's observer that records the request when the body is dropped: after its
/// last frame, or when the client went away.
struct Record {
    series: Arc<Series>,
    code: u16,
    start: Instant,
    _executing: Option<Executing>,
    _long_running: Option<LongRunning>,
}

impl Observer for Record {
    fn dropped(&mut self, ended: bool) {
        let series = &self.series;
        series.total(self.code).increment(1);
        series.duration().record(self.start.elapsed().as_secs_f64());
        if !ended && !series.labels.long_running {
            metrics::counter!("apiserver_request_aborts_total", series.labels.target()).increment(1);
        }
    }
}

/// The series of a response whose size is recorded, left in its extensions by [`filter`] for
/// [`sizes`].
#[derive(Clone)]
struct SizeSeries(Arc<Series>);

/// `apiserver_response_sizes` as kube-apiserver counts it: the bytes the client is sent, after
/// gzip. It runs outside the compression layer, on the responses [`filter`] marked (kube's
/// `GET` and `LIST` routes).
pub async fn sizes(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let Some(SizeSeries(series)) = response.extensions_mut().remove::<SizeSeries>() else {
        return response;
    };
    response.map(|inner| Observed::body(inner, Size { series, written: 0 }))
}

/// Counts the bytes of a response body and records them when it is dropped.
struct Size {
    series: Arc<Series>,
    written: u64,
}

impl Observer for Size {
    fn data(&mut self, data: &Bytes) {
        self.written += data.len() as u64;
    }

    fn dropped(&mut self, _ended: bool) {
        self.series.size().record(self.written as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints::request_info::{parse_path, Target};
    use crate::scheme::Registry;

    /// `verb dry_run scope subresource long-running` of `METHOD path?query [content type]`
    /// (`-` for an empty value), or `""` when it is not recorded.
    fn labels(request: &str) -> String {
        let mut parts = request.split(' ');
        let method: Method = parts.next().unwrap().parse().unwrap();
        let path_and_query = parts.next().unwrap();
        let mut headers = HeaderMap::new();
        if let Some(ct) = parts.next() {
            headers.insert(header::CONTENT_TYPE, ct.parse().unwrap());
        }
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        let info = match parse_path(&Registry::new(), path) {
            Ok(Target::Resource(request)) => {
                let verb = request
                    .verb(&method, watch_requested(query).unwrap_or(false))
                    .unwrap();
                RequestInfo::Resource { request, verb }
            }
            Ok(other) => RequestInfo::Discovery(other),
            Err(_) if !path.starts_with("/api") => RequestInfo::NonResource {
                path: path.into(),
                verb: "get".into(),
            },
            Err(e) => RequestInfo::Unserved(e),
        };
        let Some(l) = Labels::of(&info, &method, query, &headers) else {
            return String::new();
        };
        let dash = |v: &str| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.to_string()
            }
        };
        let (dry_run, scope, sub) = (dash(&l.dry_run), dash(l.scope), dash(&l.subresource));
        format!("{} {dry_run} {scope} {sub} {}", l.verb, l.long_running)
    }

    #[test]
    fn verbs_and_scopes_are_kubes() {
        let cases = [
            ("GET /api/v1/namespaces/a/configmaps/x", "GET - resource - false"),
            ("GET /api/v1/namespaces/a/configmaps", "LIST - namespace - false"),
            ("GET /api/v1/configmaps", "LIST - cluster - false"),
            ("GET /api/v1/namespaces", "LIST - cluster - false"),
            ("GET /api/v1/namespaces/a", "GET - resource - false"),
            (
                "GET /api/v1/namespaces/a/configmaps?watch=true",
                "WATCH - namespace - true",
            ),
            (
                "GET /api/v1/namespaces/a/configmaps?watch=0",
                "LIST - namespace - false",
            ),
            (
                "GET /api/v1/watch/namespaces/a/configmaps",
                "WATCH - namespace - true",
            ),
            ("POST /api/v1/namespaces/a/configmaps", "POST - resource - false"),
            (
                "POST /api/v1/namespaces/a/configmaps?dryRun=All",
                "POST All resource - false",
            ),
            (
                "POST /api/v1/namespaces/a/configmaps?dryRun=All&dryRun=All",
                "POST All resource - false",
            ),
            (
                "POST /api/v1/namespaces/a/configmaps?dryRun=Some",
                "POST invalid resource - false",
            ),
            ("PUT /api/v1/namespaces/a/configmaps/x", "PUT - resource - false"),
            (
                "PATCH /api/v1/namespaces/a/configmaps/x application/merge-patch+json",
                "PATCH - resource - false",
            ),
            (
                "PATCH /api/v1/namespaces/a/configmaps/x application/apply-patch+yaml",
                "APPLY - resource - false",
            ),
            (
                "DELETE /api/v1/namespaces/a/configmaps/x",
                "DELETE - resource - false",
            ),
            (
                "DELETE /api/v1/namespaces/a/configmaps",
                "DELETE - namespace - false",
            ),
            (
                "GET /api/v1/namespaces/a/pods/p/status",
                "GET - resource status false",
            ),
            (
                "PUT /apis/apps/v1/namespaces/a/deployments/d/scale",
                "PUT - resource scale false",
            ),
            ("GET /healthz", "GET - - /healthz false"),
            // Not recorded: other non-resource paths, discovery, unregistered resources.
            ("GET /version", ""),
            ("GET /apis", ""),
            ("GET /api/v1/namespaces/a/widgets", ""),
            ("GET /apis/example.com/v1/widgets", ""),
        ];
        for (request, expected) in cases {
            assert_eq!(labels(request), expected, "{request}");
        }
    }

    /// An in-flight refusal of an aggregated group's request is counted, labelled by its path,
    /// as kube's max-in-flight filter counts it in front of the aggregator.
    #[test]
    fn an_aggregated_request_refused_for_the_in_flight_limit_is_counted() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let request = axum::http::Request::get("/apis/m.io/v1/namespaces/a/widgets")
            .body(axum::body::Body::empty())
            .unwrap();
        metrics::with_local_recorder(&recorder, || {
            record_refused(&request, axum::http::StatusCode::TOO_MANY_REQUESTS)
        });
        let text = handle.render();
        let labels = [
            r#"verb="LIST""#,
            r#"group="m.io""#,
            r#"version="v1""#,
            r#"resource="widgets""#,
            r#"subresource="""#,
            r#"scope="namespace""#,
            r#"component="apiserver""#,
            r#"code="429""#,
        ];
        for series in [
            "apiserver_request_total{",
            "apiserver_request_terminations_total{",
        ] {
            assert!(
                text.lines().any(|l| l.starts_with(series)
                    && labels.iter().all(|x| l.contains(x))
                    && l.ends_with(" 1")),
                "{series} in:\n{text}"
            );
        }
    }

    #[test]
    fn a_refused_proxy_request_is_labelled_by_its_path_as_kube_does() {
        let of = |method: Method, path_and_query: &str| {
            let (path, query) = match path_and_query.split_once('?') {
                Some((p, q)) => (p, Some(q)),
                None => (path_and_query, None),
            };
            let l = Labels::of_path(&method, path, query, &HeaderMap::new(), "aggregator");
            format!(
                "{} {} {} {} {} {} {}",
                l.verb, l.group, l.version, l.resource, l.subresource, l.scope, l.component
            )
        };
        let cases = [
            (
                of(Method::GET, "/apis/m.io/v1/namespaces/a/widgets"),
                "LIST m.io v1 widgets  namespace aggregator",
            ),
            (
                of(Method::GET, "/apis/m.io/v1/namespaces/a/widgets?watch=true"),
                "WATCH m.io v1 widgets  namespace aggregator",
            ),
            (
                of(Method::GET, "/apis/m.io/v1/namespaces/a/widgets/w/status"),
                "GET m.io v1 widgets status resource aggregator",
            ),
            (
                of(Method::POST, "/apis/m.io/v1/widgets"),
                "POST m.io v1 widgets  resource aggregator",
            ),
            (
                of(Method::GET, "/apis/m.io/v1/widgets"),
                "LIST m.io v1 widgets  cluster aggregator",
            ),
            // The group-version's own document is no resource request: its path is the
            // subresource and its scope empty.
            (
                of(Method::GET, "/apis/m.io/v1"),
                "LIST    /apis/m.io/v1  aggregator",
            ),
        ];
        for (got, expected) in cases {
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn inflight_reports_the_most_at_once_in_the_period() {
        let a = Executing::start(&MUTATING);
        let b = Executing::start(&MUTATING);
        drop(a);
        drop(b);
        assert!(MUTATING.most.load(Ordering::Relaxed) >= 2);
        report_inflight();
        assert_eq!(
            MUTATING.most.load(Ordering::Relaxed),
            MUTATING.now.load(Ordering::Relaxed)
        );
    }
}
