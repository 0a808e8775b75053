//! The chaos workloads' Kubernetes API client: HTTPS/JSON as the admin against one replica,
//! with every failure classified by whether the request may have taken effect, because the
//! checkers must treat "certainly not applied" and "unknown outcome" differently.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::client::Tls;

/// The namespace every chaos object lives in.
pub const NAMESPACE: &str = "chaos";
/// How long connecting to a replica may take before the request counts as not sent.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Why an API request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// No connection could be made, so the request was never sent.
    #[error("connect: {0}")]
    Connect(String),
    /// No answer in time: the request may or may not have been applied.
    #[error("timed out")]
    Timeout,
    /// The connection broke after the request was sent.
    #[error("transport: {0}")]
    Transport(String),
    /// The server answered with a non-success status.
    #[error("HTTP {code} {reason}: {message}")]
    Status {
        /// The HTTP status code.
        code: u16,
        /// The Kubernetes `Status.reason`, if the body had one.
        reason: String,
        /// The Kubernetes `Status.message` (or the start of the body).
        message: String,
    },
    /// A success answer whose body was not the expected JSON.
    #[error("bad response body: {0}")]
    Decode(String),
}

impl ApiError {
    /// Whether the request certainly had no effect: it was never sent, or the server rejected
    /// it with a 4xx (a precondition, not-found or validation failure is decided before any
    /// write). 5xx, timeouts and broken connections may hide an applied write.
    pub fn is_definite(&self) -> bool {
        match self {
            ApiError::Connect(_) => true,
            ApiError::Status { code, .. } => (400..500).contains(code) && *code != 408 && *code != 429,
            ApiError::Timeout | ApiError::Transport(_) | ApiError::Decode(_) => false,
        }
    }

    /// The HTTP status code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether this is a `409 Conflict` (a failed resourceVersion precondition or an existing name).
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    /// Whether the server reported an error (5xx) or did not answer in time: the failures that
    /// count against availability.
    pub fn is_unavailability(&self) -> bool {
        match self {
            ApiError::Status { code, .. } => *code >= 500,
            ApiError::Timeout | ApiError::Transport(_) => true,
            ApiError::Connect(_) | ApiError::Decode(_) => false,
        }
    }
}

/// Maps a reqwest failure to the classification above.
fn transport_error(e: reqwest::Error) -> ApiError {
    if e.is_timeout() {
        ApiError::Timeout
    } else if e.is_connect() {
        ApiError::Connect(e.to_string())
    } else {
        ApiError::Transport(e.to_string())
    }
}

/// A resource type the workloads use: where it lives and which field carries its content.
#[derive(Debug)]
struct Resource {
    path: &'static str,
    api_version: &'static str,
    kind: &'static str,
    plural: &'static str,
    field: &'static str,
}

/// ConfigMaps: content in `data`.
const CONFIGMAPS: Resource = Resource {
    path: "api/v1",
    api_version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    field: "data",
};

/// coordination.k8s.io/v1 Leases: content in `spec`.
const LEASES: Resource = Resource {
    path: "apis/coordination.k8s.io/v1",
    api_version: "coordination.k8s.io/v1",
    kind: "Lease",
    plural: "leases",
    field: "spec",
};

/// A client of one replica's Kubernetes API.
#[derive(Debug, Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    /// Index of the replica this client talks to.
    pub replica: usize,
}

/// One page of a list: its items, resourceVersion and continue token.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The objects of the page.
    pub items: Vec<Value>,
    /// The list's `metadata.resourceVersion`.
    pub resource_version: String,
    /// The `metadata.continue` token; empty on the last page.
    pub continue_token: String,
}

impl ApiClient {
    /// A client of replica `replica`, whose API listens at `addr` (HTTPS, as the holder of
    /// `tls`), with `timeout` per request.
    pub fn new(replica: usize, addr: &str, timeout: Duration, tls: &Tls) -> Result<Self, ApiError> {
        let http = tls
            .http_builder()
            .map_err(|e| ApiError::Connect(format!("{e:#}")))?
            .timeout(timeout)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| ApiError::Connect(e.to_string()))?;
        Ok(Self {
            http,
            base: format!("https://{addr}"),
            replica,
        })
    }

    /// The URL of a collection or object path under the chaos namespace.
    fn url(&self, group_path: &str, rest: &str) -> String {
        format!("{}/{group_path}/namespaces/{NAMESPACE}/{rest}", self.base)
    }

    /// Sends one request and returns the decoded JSON answer.
    async fn call(
        &self,
        method: Method,
        url: String,
        query: &[(&str, String)],
        body: Option<(&str, Value)>,
    ) -> Result<Value, ApiError> {
        let mut req = self.http.request(method, url).query(query);
        if let Some((content_type, body)) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body.to_string());
        }
        let resp = req.send().await.map_err(transport_error)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(transport_error)?;
        if !status.is_success() {
            return Err(status_error(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode(e.to_string()))
    }

    /// Creates the chaos namespace unless it exists.
    pub async fn ensure_namespace(&self) -> Result<(), ApiError> {
        let body =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
        let url = format!("{}/api/v1/namespaces", self.base);
        match self
            .call(Method::POST, url, &[], Some(("application/json", body)))
            .await
        {
            Err(e) if e.is_conflict() => Ok(()),
            other => other.map(drop),
        }
    }

    /// Reads an object with a Most Recent (linearizable) read; `None` if it does not exist.
    async fn get(&self, r: &Resource, name: &str) -> Result<Option<Value>, ApiError> {
        let url = self.url(r.path, &format!("{}/{name}", r.plural));
        match self.call(Method::GET, url, &[], None).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates an object with `metadata` and `content` as its data/spec field.
    async fn create(&self, r: &Resource, metadata: Value, content: Value) -> Result<Value, ApiError> {
        let mut body = serde_json::json!({"apiVersion": r.api_version, "kind": r.kind, "metadata": metadata});
        body[r.field] = content;
        let url = self.url(r.path, r.plural);
        self.call(Method::POST, url, &[], Some(("application/json", body)))
            .await
    }

    /// Replaces an object's data/spec, on the condition that it is still at `resource_version`.
    async fn update(
        &self,
        r: &Resource,
        name: &str,
        resource_version: &str,
        content: Value,
    ) -> Result<Value, ApiError> {
        let mut body = serde_json::json!({
            "apiVersion": r.api_version, "kind": r.kind,
            "metadata": {"name": name, "namespace": NAMESPACE, "resourceVersion": resource_version},
        });
        body[r.field] = content;
        let url = self.url(r.path, &format!("{}/{name}", r.plural));
        self.call(Method::PUT, url, &[], Some(("application/json", body)))
            .await
    }

    /// Reads a ConfigMap (Most Recent); `None` if it does not exist.
    pub async fn get_configmap(&self, name: &str) -> Result<Option<Value>, ApiError> {
        self.get(&CONFIGMAPS, name).await
    }

    /// Creates a ConfigMap (`metadata.name`) or one with a server-generated name
    /// (`metadata.generateName`).
    pub async fn create_configmap(&self, metadata: Value, data: Value) -> Result<Value, ApiError> {
        self.create(&CONFIGMAPS, metadata, data).await
    }

    /// Replaces a ConfigMap's data, on the condition that it is still at `resource_version`.
    pub async fn update_configmap(
        &self,
        name: &str,
        resource_version: &str,
        data: Value,
    ) -> Result<Value, ApiError> {
        self.update(&CONFIGMAPS, name, resource_version, data).await
    }

    /// Merge-patches a ConfigMap's data without a precondition (a blind write).
    pub async fn patch_configmap(&self, name: &str, data: Value) -> Result<Value, ApiError> {
        let body = serde_json::json!({"data": data});
        let url = self.url("api/v1", &format!("configmaps/{name}"));
        self.call(
            Method::PATCH,
            url,
            &[],
            Some(("application/merge-patch+json", body)),
        )
        .await
    }

    /// Deletes a ConfigMap.
    pub async fn delete_configmap(&self, name: &str) -> Result<(), ApiError> {
        let url = self.url("api/v1", &format!("configmaps/{name}"));
        self.call(Method::DELETE, url, &[], None).await.map(drop)
    }

    /// One page of the chaos namespace's ConfigMaps: the first (`continue_token` empty, a Most
    /// Recent read) or the next one of a paginated list.
    pub async fn list_configmaps(&self, limit: u32, continue_token: &str) -> Result<ListPage, ApiError> {
        let mut query = vec![("limit", limit.to_string())];
        if !continue_token.is_empty() {
            query.push(("continue", continue_token.to_string()));
        }
        let list = self
            .call(Method::GET, self.url("api/v1", "configmaps"), &query, None)
            .await?;
        let meta = &list["metadata"];
        Ok(ListPage {
            items: list["items"].as_array().cloned().unwrap_or_default(),
            resource_version: meta["resourceVersion"].as_str().unwrap_or_default().to_string(),
            continue_token: meta["continue"].as_str().unwrap_or_default().to_string(),
        })
    }

    /// Reads a Lease (Most Recent); `None` if it does not exist.
    pub async fn get_lease(&self, name: &str) -> Result<Option<Value>, ApiError> {
        self.get(&LEASES, name).await
    }

    /// Creates a Lease with `spec`.
    pub async fn create_lease(&self, name: &str, spec: Value) -> Result<Value, ApiError> {
        self.create(&LEASES, serde_json::json!({"name": name}), spec)
            .await
    }

    /// Replaces a Lease's spec, on the condition that it is still at `resource_version`.
    pub async fn update_lease(
        &self,
        name: &str,
        resource_version: &str,
        spec: Value,
    ) -> Result<Value, ApiError> {
        self.update(&LEASES, name, resource_version, spec).await
    }

    /// Opens a watch of the chaos namespace's ConfigMaps from `resource_version` (`None`: the
    /// current state as synthetic ADDED events, then changes), with bookmarks, ending
    /// server-side after `timeout_seconds`.
    pub async fn watch_configmaps(
        &self,
        resource_version: Option<&str>,
        timeout_seconds: u64,
    ) -> Result<WatchStream, ApiError> {
        let mut query = vec![
            ("watch", "1".to_string()),
            ("allowWatchBookmarks", "true".to_string()),
            ("timeoutSeconds", timeout_seconds.to_string()),
        ];
        if let Some(rv) = resource_version {
            query.push(("resourceVersion", rv.to_string()));
        }
        // The client-wide timeout would cut a healthy stream; a watch gets its own.
        let resp = self
            .http
            .get(self.url("api/v1", "configmaps"))
            .query(&query)
            .timeout(Duration::from_secs(timeout_seconds + 30))
            .send()
            .await
            .map_err(transport_error)?;
        let status = resp.status();
        if !status.is_success() {
            let bytes = resp.bytes().await.map_err(transport_error)?;
            return Err(status_error(status, &bytes));
        }
        Ok(WatchStream {
            resp,
            buf: Vec::new(),
        })
    }
}

/// A non-success answer as an [`ApiError::Status`], with the Kubernetes Status fields if any.
fn status_error(status: StatusCode, body: &[u8]) -> ApiError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let field = |f: &str| parsed.as_ref().and_then(|v| v[f].as_str()).map(str::to_string);
    ApiError::Status {
        code: status.as_u16(),
        reason: field("reason").unwrap_or_default(),
        message: field("message")
            .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect()),
    }
}

/// An open watch: a stream of JSON lines, one event each.
#[derive(Debug)]
pub struct WatchStream {
    resp: reqwest::Response,
    buf: Vec<u8>,
}

impl WatchStream {
    /// The next event, `Ok(None)` when the server ended the stream.
    pub async fn next_event(&mut self) -> Result<Option<Value>, ApiError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return serde_json::from_slice(&line)
                    .map(Some)
                    .map_err(|e| ApiError::Decode(e.to_string()));
            }
            match self.resp.chunk().await.map_err(transport_error)? {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None if self.buf.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None => return Err(ApiError::Transport("stream ended inside an event".into())),
            }
        }
    }
}

/// The `metadata.resourceVersion` of an object as a number (0 if missing or malformed).
pub fn resource_version(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The `metadata.name` of an object.
pub fn name(obj: &Value) -> String {
    obj["metadata"]["name"].as_str().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> ApiError {
        ApiError::Status {
            code,
            reason: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn only_rejections_and_unsent_requests_are_definite() {
        assert!(status(409).is_definite());
        assert!(status(404).is_definite());
        assert!(status(422).is_definite());
        assert!(!status(429).is_definite());
        assert!(!status(500).is_definite());
        assert!(!status(504).is_definite());
        assert!(!ApiError::Timeout.is_definite());
        assert!(!ApiError::Transport("reset".into()).is_definite());
        assert!(ApiError::Connect("refused".into()).is_definite());
    }

    #[test]
    fn status_errors_keep_the_kubernetes_reason() {
        let body = br#"{"kind":"Status","reason":"Conflict","message":"the object has been modified"}"#;
        let e = status_error(StatusCode::CONFLICT, body);
        assert!(e.is_conflict());
        assert_eq!(e.to_string(), "HTTP 409 Conflict: the object has been modified");
        let e = status_error(StatusCode::BAD_GATEWAY, b"not json");
        assert!(e.is_unavailability());
        assert!(e.to_string().contains("not json"));
    }
}
