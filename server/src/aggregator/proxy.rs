//! The aggregation proxy (kube-aggregator's proxy handler): a request for a group-version an
//! APIService hands to a Service goes, once authenticated and authorized here, to one ready
//! endpoint of that Service over TLS — the backend verified with the APIService's `caBundle`
//! as `<service>.<namespace>.svc` (or not at all with `insecureSkipTLSVerify`), this server
//! identified by the front-proxy client certificate, and the caller named in kube's
//! front-proxy headers (`X-Remote-User`, `X-Remote-Uid`, one `X-Remote-Group` per group,
//! `X-Remote-Extra-<key>` per value). [`crate::proxy`] carries the request and its answer,
//! streamed and with connection upgrades (the websocket and SPDY streams of an aggregated
//! API's `exec`-like subresources) joined through. A backend that is
//! unavailable, unresolvable or unreachable answers `503` for its group-version only, as
//! kube's does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;

use super::Backend;
use crate::authentication::UserInfo;
use crate::proxy::{self, cause, is_upgrade, plain_error};
use crate::store::cacher::WatchCache;
use crate::store::services;

/// The most a backend answer read whole here (discovery) may hold.
const MAX_DOCUMENT: usize = 8 << 20;
/// Clients kept at most (one per APIService version and address).
const MAX_CLIENTS: usize = 256;
/// How long connecting to a backend may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Why a backend could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The APIService is not available, or its Service has no address.
    #[error("service unavailable")]
    Unavailable,
    /// The HTTP client could not be built (a bad `caBundle`).
    #[error("{0}")]
    Client(String),
    /// The request failed on the way.
    #[error("{0}")]
    Transport(String),
    /// The backend's answer was not what was asked for.
    #[error("{0}")]
    Answer(String),
}

/// A request the proxy refuses itself, before asking the backend (kube's `proxyError`): the
/// backend is unavailable or unresolvable (`503`), or no client can be built for it (`500`).
/// kube counts these in `apiserver_request_terminations_total`; a backend that fails once
/// asked is not a refusal.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The status answered.
    pub code: StatusCode,
    /// The plain-text message answered.
    pub message: String,
}

impl Refusal {
    /// The answer: kube's `http.Error` of the message.
    pub fn response(&self) -> Response {
        plain_error(self.code, &self.message)
    }
}

/// The proxy: its identity towards backends and the HTTP clients it keeps.
pub struct Aggregator {
    cache: WatchCache,
    /// The front-proxy client certificate and key, PEM (none on an insecure replica).
    identity: Option<String>,
    clients: Mutex<HashMap<ClientKey, reqwest::Client>>,
}

/// A client per APIService version, backend address and protocol: upgrades need HTTP/1.1,
/// other requests negotiate HTTP/2 where the backend offers it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    apiservice: String,
    resource_version: String,
    addr: SocketAddr,
    http1_only: bool,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

/// A header name's key escaped as kube escapes `X-Remote-Extra-` keys (percent-encoding
/// what a header name may not hold, and `%` itself).
fn escape_extra_key(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        let token = b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
        if token {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Replaces any front-proxy headers the caller sent with the identity of `user`.
fn set_identity(headers: &mut HeaderMap, user: &UserInfo) {
    let stale: Vec<HeaderName> = headers
        .keys()
        .filter(|k| {
            let k = k.as_str();
            k.starts_with("x-remote-") || k.starts_with("impersonate-")
        })
        .cloned()
        .collect();
    for k in stale {
        headers.remove(k);
    }
    let mut add = |name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.append(n, v);
        }
    };
    add("X-Remote-User", &user.name);
    if !user.uid.is_empty() {
        add("X-Remote-Uid", &user.uid);
    }
    for g in &user.groups {
        add("X-Remote-Group", g);
    }
    for (key, values) in &user.extra {
        for v in values {
            add(&format!("X-Remote-Extra-{}", escape_extra_key(key)), v);
        }
    }
}

impl Aggregator {
    /// A proxy that reads APIServices and endpoints from `cache` and identifies itself with
    /// `identity` (the front-proxy client certificate and key, PEM, one after the other).
    pub fn new(cache: WatchCache, identity: Option<String>) -> Aggregator {
        Aggregator {
            cache,
            identity,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The watch cache the proxy reads.
    pub fn cache(&self) -> &WatchCache {
        &self.cache
    }

    /// The backend's address and the client that reaches it.
    fn client_for(&self, b: &Backend, http1_only: bool) -> Result<(reqwest::Client, SocketAddr), ProxyError> {
        let addr = services::resolve(&self.cache, &b.namespace, &b.service, b.port).map_err(|e| {
            tracing::debug!(apiservice = b.name, error = %e, "cannot resolve the backend");
            ProxyError::Unavailable
        })?;
        let key = ClientKey {
            apiservice: b.name.clone(),
            resource_version: b.resource_version.clone(),
            addr,
            http1_only,
        };
        let mut clients = self
            .clients
            .lock()
            .map_err(|_| ProxyError::Client("the proxy's client cache is poisoned".into()))?;
        if let Some(c) = clients.get(&key) {
            return Ok((c.clone(), addr));
        }
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .https_only(true)
            .connect_timeout(CONNECT_TIMEOUT)
            .resolve(&b.host(), addr);
        if http1_only {
            builder = builder.http1_only();
        }
        if b.insecure {
            builder = builder.danger_accept_invalid_certs(true);
        } else if !b.ca_bundle.is_empty() {
            let certs = reqwest::Certificate::from_pem_bundle(&b.ca_bundle)
                .map_err(|e| ProxyError::Client(format!("caBundle: {e}")))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(identity) = &self.identity {
            let id = reqwest::Identity::from_pem(identity.as_bytes())
                .map_err(|e| ProxyError::Client(format!("the front-proxy client certificate: {e}")))?;
            builder = builder.identity(id);
        }
        let client = builder.build().map_err(|e| ProxyError::Client(e.to_string()))?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok((client, addr))
    }

    /// Proxies `request` of `user` to `backend` and streams its answer back, or refuses it.
    pub async fn proxy(
        &self,
        backend: &Backend,
        user: &UserInfo,
        request: Request,
    ) -> Result<Response, Refusal> {
        let refuse = |code, message: String| Refusal { code, message };
        if !backend.available {
            return Err(refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable".into(),
            ));
        }
        let upgrade = is_upgrade(request.headers());
        let (client, addr) = match self.client_for(backend, upgrade) {
            Ok(c) => c,
            // kube's: a transport that cannot be built (a bad `caBundle`) is this server's
            // failure, an unresolvable Service the backend's.
            Err(e @ ProxyError::Client(_)) => {
                return Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
            }
            Err(e) => return Err(refuse(StatusCode::SERVICE_UNAVAILABLE, e.to_string())),
        };
        let path_and_query = request.uri().path_and_query().map_or("/", |p| p.as_str());
        let url = format!("https://{}:{}{path_and_query}", backend.host(), addr.port());
        match proxy::forward(&client, &url, request, |h| set_identity(h, user), &backend.name).await {
            Ok(answer) => Ok(answer),
            Err(e) => {
                tracing::info!(apiservice = backend.name, error = %e, "error while proxying request");
                Ok(plain_error(StatusCode::SERVICE_UNAVAILABLE, &cause(&e)))
            }
        }
    }

    /// GETs `path` from `backend` as kube-aggregator's own user (`system:kube-aggregator` in
    /// `system:masters`) and decodes its JSON answer: the availability check and discovery.
    pub async fn get_json(
        &self,
        backend: &Backend,
        path: &str,
        timeout: Duration,
    ) -> Result<serde_json::Value, ProxyError> {
        let (client, addr) = self.client_for(backend, false)?;
        let url = format!("https://{}:{}{path}", backend.host(), addr.port());
        let mut headers = HeaderMap::new();
        set_identity(
            &mut headers,
            &UserInfo {
                name: "system:kube-aggregator".into(),
                uid: String::new(),
                groups: vec!["system:masters".into()],
                extra: Default::default(),
            },
        );
        let mut answer = client
            .get(&url)
            .headers(headers)
            .header(header::ACCEPT, "application/json")
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| {
                ProxyError::Transport(format!(
                    "failing or missing response from {url}: Get {url:?}: {}",
                    cause(&e)
                ))
            })?;
        let status = answer.status();
        let mut body = Vec::new();
        while let Some(chunk) = answer
            .chunk()
            .await
            .map_err(|e| ProxyError::Transport(cause(&e)))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT {
                return Err(ProxyError::Answer(format!(
                    "the response from {url} exceeds {MAX_DOCUMENT} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(ProxyError::Answer(format!(
                "bad status from {url}: {}",
                status.as_u16()
            )));
        }
        serde_json::from_slice(&body).map_err(|e| ProxyError::Answer(format!("{url}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_identity_replaces_any_remote_headers_it_sent() {
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", HeaderValue::from_static("mallory"));
        h.insert("x-remote-group", HeaderValue::from_static("system:masters"));
        let user = UserInfo {
            name: "alice".into(),
            uid: "u1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: [("scopes/a b".to_string(), vec!["x".to_string()])]
                .into_iter()
                .collect(),
        };
        set_identity(&mut h, &user);
        assert_eq!(h["x-remote-user"], "alice");
        assert_eq!(h["x-remote-uid"], "u1");
        let groups: Vec<_> = h.get_all("x-remote-group").iter().collect();
        assert_eq!(groups, ["dev", "system:authenticated"]);
        assert_eq!(h["x-remote-extra-scopes%2Fa%20b"], "x");
    }
}
