//! One request's audit record (kube's `AuditContext`): made by the audit filter when the
//! request arrives and kept in its extensions; the filters it passes fill it in — the
//! authenticated user, which decides the level; the impersonated user; the authorization
//! decision — as do its bodies, and at each stage it becomes an event line for the sink.
//!
//! The policy is evaluated once, when authentication has named the user (or failed): kube's
//! audit filter sits right after authentication, so `RequestReceived` is written then and
//! holds no impersonated user and no decision yet. A request the policy does not log costs
//! the evaluation and nothing more: no event is built and every later call returns at once.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use axum::http::{HeaderMap, Method, Uri};
use bytes::Bytes;

use crate::audit::event::{Event, EventStatus, EventUser, ObjectReference};
use crate::audit::object::{self, ObjectError};
use crate::audit::policy::{Level, Policy, RequestConfig, Stage};
use crate::audit::request::{source_ips, user_agent, RequestInfo};
use crate::audit::sink::Sink;
use crate::authentication::UserInfo;
use crate::machinery::errors::ResponseStatus;

/// The header that carries a request's audit id.
const AUDIT_ID: &str = "audit-id";

/// What the audit record needs of a request when its user is known.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI as the client sent it.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The address of the client's connection.
    pub remote: Option<IpAddr>,
}

/// What the policy decided, once authentication has run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Begun {
    /// Whether the request body is wanted (the request object, or the name a create gives
    /// its object).
    pub capture_body: bool,
    /// The `RequestReceived` event to send, unless the policy omits it.
    pub line: Option<Vec<u8>>,
}

/// What the audit filter does with the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Nothing: the request is not logged.
    Skip,
    /// Record it, with its body when `body` (collected only for a complete response), and
    /// when `streaming` write `ResponseComplete` once the body has ended.
    Record {
        /// Whether the response body is wanted (`RequestResponse`, an API object).
        body: bool,
        /// Whether the response is a long-running stream.
        streaming: bool,
    },
}

/// A request body as read by the endpoint.
struct RequestBody {
    media_type: String,
    chunks: Vec<Bytes>,
}

/// The event being built and what decides how it is written.
struct Draft {
    event: Event,
    config: RequestConfig,
    long_running: bool,
    /// Responses under `/api` and `/apis` are API objects (discovery included).
    api_path: bool,
    /// A patch's request object is the patch: it names no object and keeps its fields.
    patch: bool,
    /// Authentication failed: kube writes one `ResponseStarted` event only.
    failed_authentication: bool,
    request_body: Option<RequestBody>,
}

enum State {
    /// The user is not known yet.
    Pending,
    /// Not logged.
    Off,
    /// Logged.
    On(Box<Draft>),
}

struct Shared {
    policy: Arc<Policy>,
    sink: Sink,
    received: SystemTime,
    state: Mutex<State>,
}

/// One request's audit record (cheap to clone; clones share it).
#[derive(Clone)]
pub struct AuditContext {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for AuditContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditContext")
            .field("received", &self.shared.received)
            .finish()
    }
}

/// The event line for `stage` at `at`, unless the request omits the stage.
fn stage_line(draft: &mut Draft, stage: Stage, at: SystemTime) -> Option<Vec<u8>> {
    if draft.config.omit_stages.contains(stage) {
        return None;
    }
    draft.event.stage = stage;
    draft.event.stage_timestamp.0 = at;
    draft
        .event
        .line()
        .inspect_err(|e| tracing::error!(error = %e, "cannot encode an audit event"))
        .ok()
}

/// `object` without managed fields when the policy says so.
fn trimmed(draft: &Draft, object: Box<serde_json::value::RawValue>) -> Box<serde_json::value::RawValue> {
    if draft.config.omit_managed_fields {
        object::omit_managed_fields(object)
    } else {
        object
    }
}

/// Puts the request body the endpoint read into the event: the names it gives the object
/// reference, and the body itself from level `Request` on.
fn absorb_request_body(draft: &mut Draft) {
    let Some(body) = draft.request_body.take() else {
        return;
    };
    let bytes: Vec<u8> = body.chunks.concat();
    if bytes.is_empty() {
        return;
    }
    let parsed = match object::to_json(&body.media_type, &bytes) {
        Ok(parsed) => parsed,
        Err(ObjectError::NotAnObject(_)) => return,
        Err(e) => {
            tracing::debug!(error = %e, "request body not recorded in the audit log");
            return;
        }
    };
    if draft.patch {
        if draft.config.level >= Level::Request {
            draft.event.request_object = Some(parsed);
        }
        return;
    }
    if let (Some(r), Some(meta)) = (draft.event.object_ref.as_mut(), object::metadata(&parsed)) {
        for (field, value) in [
            (&mut r.namespace, meta.namespace),
            (&mut r.name, meta.name),
            (&mut r.uid, meta.uid),
            (&mut r.resource_version, meta.resource_version),
        ] {
            if field.is_empty() {
                *field = value;
            }
        }
    }
    if draft.config.level >= Level::Request {
        draft.event.request_object = Some(trimmed(draft, parsed));
    }
}

impl AuditContext {
    /// A record for a request that arrives now, judged by `policy` and written to `sink`.
    pub fn new(policy: Arc<Policy>, sink: Sink) -> AuditContext {
        AuditContext {
            shared: Arc::new(Shared {
                policy,
                sink,
                received: SystemTime::now(),
                state: Mutex::new(State::Pending),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the event being built, if the request is logged.
    fn with_draft<T>(&self, f: impl FnOnce(&mut Draft) -> T) -> Option<T> {
        match &mut *self.state() {
            State::On(draft) => Some(f(draft)),
            State::Pending | State::Off => None,
        }
    }

    /// Authentication has named the request's `user` (`None`: it failed). Evaluates the
    /// policy and starts the event.
    pub fn begin(&self, request: &Received<'_>, user: Option<&UserInfo>) -> Begun {
        let mut state = self.state();
        if !matches!(*state, State::Pending) {
            return Begun::default();
        }
        let path = request.uri.path();
        let info = RequestInfo::parse(request.method, path, request.uri.query());
        let config = self.shared.policy.evaluate(&info.attributes(user));
        if config.level == Level::None {
            *state = State::Off;
            return Begun::default();
        }
        let mut event = Event::new(config.level, self.shared.received);
        event.audit_id = request
            .headers
            .get(AUDIT_ID)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        event.request_uri = request
            .uri
            .path_and_query()
            .map_or(path, |pq| pq.as_str())
            .to_string();
        event.verb = info.verb.to_string();
        event.user = user.map(EventUser::from).unwrap_or_default();
        event.source_ips = source_ips(request.headers, request.remote);
        event.user_agent = user_agent(request.headers);
        event.object_ref = info.resource.map(|r| ObjectReference {
            resource: r.resource.into(),
            namespace: r.namespace.into(),
            name: r.name.into(),
            api_group: r.api_group.into(),
            api_version: r.api_version.into(),
            subresource: r.subresource.into(),
            ..ObjectReference::default()
        });
        // A request that failed authentication is answered before its body is read.
        let capture_body = user.is_some()
            && info.resource.is_some()
            && match *request.method {
                Method::POST | Method::PUT => true,
                Method::PATCH | Method::DELETE => config.level >= Level::Request,
                _ => false,
            };
        let mut draft = Box::new(Draft {
            event,
            config,
            long_running: info.is_long_running(),
            api_path: path == "/api"
                || path == "/apis"
                || path.starts_with("/api/")
                || path.starts_with("/apis/"),
            patch: *request.method == Method::PATCH,
            failed_authentication: user.is_none(),
            request_body: None,
        });
        let line = match user {
            Some(_) => stage_line(&mut draft, Stage::RequestReceived, self.shared.received),
            None => None,
        };
        *state = State::On(draft);
        Begun { capture_body, line }
    }

    /// Sends an event line, waiting while the sink's buffer is full.
    pub async fn send(&self, line: Option<Vec<u8>>) {
        if let Some(line) = line {
            self.shared.sink.send(line).await;
        }
    }

    /// The request is made as `user` (impersonation).
    pub fn impersonated(&self, user: &UserInfo) {
        self.with_draft(|d| d.event.impersonated_user = Some(EventUser::from(user)));
    }

    /// Notes an annotation; the first value given for a key stays, as in kube.
    pub fn annotate(&self, key: &str, value: &str) {
        self.with_draft(|d| {
            d.event
                .annotations
                .entry(key.to_string())
                .or_insert_with(|| value.to_string());
        });
    }

    /// The request body of `media_type`, as the endpoint read it.
    pub fn request_body(&self, media_type: String, chunks: Vec<Bytes>) {
        self.with_draft(|d| d.request_body = Some(RequestBody { media_type, chunks }));
    }

    /// What to do with the response; `is_status` when it is a `Status` (an error).
    pub fn plan(&self, is_status: bool) -> Plan {
        self.with_draft(|d| Plan::Record {
            body: d.config.level == Level::RequestResponse && !d.long_running && (d.api_path || is_status),
            streaming: d.long_running && !d.failed_authentication,
        })
        .unwrap_or(Plan::Skip)
    }

    /// The response is ready: `code`, the Status it is (if any) and its body (when the plan
    /// asked for it, with its media type). Writes `ResponseStarted` for a long-running request
    /// or one that failed authentication, else `ResponseComplete`.
    pub async fn respond(&self, code: u16, status: Option<&ResponseStatus>, body: Option<(&str, &[u8])>) {
        let line = self.with_draft(|d| {
            absorb_request_body(d);
            d.event.response_status = Some(EventStatus::new(code, status));
            if let Some((media_type, bytes)) = body {
                match object::to_json(media_type, bytes) {
                    Ok(parsed) => d.event.response_object = Some(trimmed(d, parsed)),
                    Err(e) => tracing::debug!(error = %e, "response body not recorded in the audit log"),
                }
            }
            let stage = if d.long_running || d.failed_authentication {
                Stage::ResponseStarted
            } else {
                Stage::ResponseComplete
            };
            stage_line(d, stage, SystemTime::now())
        });
        self.send(line.flatten()).await;
    }

    /// A long-running response has ended (or its client went away): `ResponseComplete`.
    pub fn stream_ended(&self) {
        let line = self.with_draft(|d| stage_line(d, Stage::ResponseComplete, SystemTime::now()));
        if let Some(line) = line.flatten() {
            self.shared.sink.send_now(line);
        }
    }

    /// Serving the request panicked with `message`: the `Panic` event, with kube's `500`.
    pub async fn panicked(&self, message: &str) {
        let line = self.with_draft(|d| {
            absorb_request_body(d);
            let status = ResponseStatus {
                status: "Failure".into(),
                message: format!("APIServer panic'd: {message}"),
                reason: "InternalError".into(),
                details: None,
            };
            d.event.response_status = Some(EventStatus::new(500, Some(&status)));
            stage_line(d, Stage::Panic, SystemTime::now())
        });
        self.send(line.flatten()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::log::{Limits, Log, RotatingFile};
    use serde_json::Value;
    use std::time::{Duration, Instant};

    struct Harness {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        policy: Arc<Policy>,
        sink: Sink,
    }

    impl Harness {
        fn new(policy: &str) -> Harness {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("audit.log");
            let log = Log::File(RotatingFile::open(&path, Limits::from_config(1, 0, 0)).unwrap());
            Harness {
                policy: Arc::new(
                    Policy::parse(&format!("apiVersion: audit.k8s.io/v1\nkind: Policy\n{policy}")).unwrap(),
                ),
                sink: Sink::start(log).unwrap(),
                path,
                _dir: dir,
            }
        }

        fn context(&self) -> AuditContext {
            AuditContext::new(self.policy.clone(), self.sink.clone())
        }

        /// The events written so far, once there are `n`.
        fn events(&self, n: usize) -> Vec<Value> {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let text = std::fs::read_to_string(&self.path).unwrap_or_default();
                let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
                if events.len() >= n {
                    assert_eq!(events.len(), n, "{text}");
                    return events;
                }
                assert!(
                    Instant::now() < deadline,
                    "{} events, want {n}: {text}",
                    events.len()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn admin() -> UserInfo {
        UserInfo {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..UserInfo::default()
        }
    }

    fn received<'a>(method: &'a Method, uri: &'a Uri, headers: &'a HeaderMap) -> Received<'a> {
        Received {
            method,
            uri,
            headers,
            remote: "127.0.0.1".parse().ok(),
        }
    }

    #[tokio::test]
    async fn a_create_is_logged_with_the_name_its_body_gives_and_the_body_by_level() {
        let h = Harness::new(
            "rules:\n- level: Metadata\n  resources: [{group: '', resources: [secrets]}]\n- level: Request\n",
        );
        let mut headers = HeaderMap::new();
        headers.insert("audit-id", "id-1".parse().unwrap());
        headers.insert("user-agent", "kubectl/v1.35.0".parse().unwrap());
        for (resource, body) in [
            (
                "secrets",
                r#"{"kind":"Secret","metadata":{"name":"s1"},"data":{"k":"c2VjcmV0"}}"#,
            ),
            (
                "configmaps",
                r#"{"kind":"ConfigMap","metadata":{"name":"c1","managedFields":[]}}"#,
            ),
        ] {
            let uri: Uri = format!("/api/v1/namespaces/shop/{resource}?fieldManager=kubectl")
                .parse()
                .unwrap();
            let ctx = h.context();
            let begun = ctx.begin(&received(&Method::POST, &uri, &headers), Some(&admin()));
            assert!(begun.capture_body);
            ctx.send(begun.line).await;
            ctx.annotate("authorization.k8s.io/decision", "allow");
            ctx.annotate("authorization.k8s.io/decision", "forbid");
            ctx.request_body(
                "application/json".into(),
                vec![Bytes::from(body.as_bytes().to_vec())],
            );
            assert_eq!(
                ctx.plan(false),
                Plan::Record {
                    body: false,
                    streaming: false
                }
            );
            ctx.respond(201, None, None).await;
        }
        let events = h.events(4);
        let secret = &events[1];
        assert_eq!(events[0]["stage"], "RequestReceived");
        assert_eq!(events[0]["objectRef"]["name"], Value::Null);
        assert_eq!(secret["stage"], "ResponseComplete");
        assert_eq!(secret["level"], "Metadata");
        assert_eq!(secret["auditID"], "id-1");
        assert_eq!(secret["verb"], "create");
        assert_eq!(secret["userAgent"], "kubectl/v1.35.0");
        assert_eq!(secret["sourceIPs"], serde_json::json!(["127.0.0.1"]));
        assert_eq!(
            secret["requestURI"],
            "/api/v1/namespaces/shop/secrets?fieldManager=kubectl"
        );
        assert_eq!(
            secret["objectRef"],
            serde_json::json!({"resource": "secrets", "namespace": "shop", "name": "s1", "apiVersion": "v1"})
        );
        assert_eq!(secret.get("requestObject"), None);
        assert_eq!(
            secret["responseStatus"],
            serde_json::json!({"metadata": {}, "code": 201})
        );
        assert_eq!(secret["annotations"]["authorization.k8s.io/decision"], "allow");
        assert_eq!(
            events[0]["requestReceivedTimestamp"],
            secret["requestReceivedTimestamp"]
        );
        assert_eq!(events[0]["stageTimestamp"], events[0]["requestReceivedTimestamp"]);
        let cm = &events[3];
        assert_eq!(cm["level"], "Request");
        assert_eq!(
            cm["requestObject"]["metadata"]["managedFields"],
            serde_json::json!([])
        );
        assert_eq!(cm.get("responseObject"), None);
    }

    #[tokio::test]
    async fn failed_authentication_writes_one_response_started_event() {
        let h = Harness::new("omitStages: [ResponseComplete]\nrules:\n- level: None\n  users: [nobody]\n- level: RequestResponse\n");
        let uri: Uri = "/api/v1/namespaces".parse().unwrap();
        let headers = HeaderMap::new();
        let ctx = h.context();
        let begun = ctx.begin(&received(&Method::GET, &uri, &headers), None);
        assert_eq!(begun, Begun::default());
        assert_eq!(
            ctx.plan(true),
            Plan::Record {
                body: true,
                streaming: false
            }
        );
        let status = ResponseStatus {
            status: "Failure".into(),
            message: "Unauthorized".into(),
            reason: "Unauthorized".into(),
            details: None,
        };
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
        ctx.respond(401, Some(&status), Some(("application/json", body)))
            .await;
        let events = h.events(1);
        let e = &events[0];
        assert_eq!(e["stage"], "ResponseStarted");
        assert_eq!(e["user"], serde_json::json!({}));
        assert_eq!(e["verb"], "list");
        assert_eq!(
            e["responseStatus"],
            serde_json::json!({"metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        );
        assert_eq!(e["responseObject"]["code"], 401);
        assert_eq!(e.get("annotations"), None);
    }

    #[tokio::test]
    async fn a_watch_writes_started_then_complete_and_none_writes_nothing() {
        let h = Harness::new(
            "rules:\n- level: None\n  verbs: [watch]\n  users: [proxy]\n- level: RequestResponse\n  omitStages: [RequestReceived]\n",
        );
        let headers = HeaderMap::new();
        let proxy = UserInfo {
            name: "proxy".into(),
            ..UserInfo::default()
        };
        let watch: Uri = "/api/v1/services?watch=true".parse().unwrap();
        let ignored = h.context();
        assert_eq!(
            ignored.begin(&received(&Method::GET, &watch, &headers), Some(&proxy)),
            Begun::default()
        );
        assert_eq!(ignored.plan(false), Plan::Skip);
        ignored.impersonated(&admin());
        ignored.respond(200, None, None).await;
        ignored.stream_ended();

        let ctx = h.context();
        let begun = ctx.begin(&received(&Method::GET, &watch, &headers), Some(&admin()));
        assert_eq!(begun, Begun::default());
        ctx.impersonated(&proxy);
        assert_eq!(
            ctx.plan(false),
            Plan::Record {
                body: false,
                streaming: true
            }
        );
        ctx.respond(200, None, None).await;
        ctx.stream_ended();
        let events = h.events(2);
        assert_eq!(events[0]["stage"], "ResponseStarted");
        assert_eq!(events[1]["stage"], "ResponseComplete");
        assert_eq!(events[1]["verb"], "watch");
        assert_eq!(
            events[1]["impersonatedUser"],
            serde_json::json!({"username": "proxy"})
        );
        assert_eq!(
            events[1]["responseStatus"],
            serde_json::json!({"metadata": {}, "code": 200})
        );
    }

    #[tokio::test]
    async fn a_panic_is_logged_as_kube_logs_it() {
        let h = Harness::new("rules:\n- level: Metadata\n");
        let uri: Uri = "/api/v1/namespaces/a/pods/p".parse().unwrap();
        let headers = HeaderMap::new();
        let ctx = h.context();
        let begun = ctx.begin(&received(&Method::GET, &uri, &headers), Some(&admin()));
        ctx.send(begun.line).await;
        ctx.panicked("boom").await;
        let events = h.events(2);
        assert_eq!(events[1]["stage"], "Panic");
        assert_eq!(
            events[1]["responseStatus"],
            serde_json::json!({"metadata": {}, "status": "Failure", "message": "APIServer panic'd: boom", "reason": "InternalError", "code": 500})
        );
    }
}
