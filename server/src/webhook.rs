//! Reaching a webhook (kube's webhook `config` and service resolution), shared by admission
//! webhooks and CRD conversion webhooks: a `clientConfig` ([`ClientConfig`]) is a `url` or a
//! `service` reference with a `caBundle`; calls are HTTPS with rustls, HTTP/2 when the server
//! offers it, the server certificate verified against the `caBundle`, or against the system's
//! trust roots when there is none (read once, honouring `SSL_CERT_FILE` and `SSL_CERT_DIR` as Go's
//! `x509.SystemCertPool` does for kube-apiserver). One HTTP client per
//! webhook and version of its configuration (and resolved address), kept across requests so
//! connections are reused. A `service` reference is resolved by `store::services` (the
//! Service's port and its EndpointSlices or Endpoints in the replica's cache), and the server
//! is verified as `<service>.<namespace>.svc`, as kube-apiserver does. A `clientConfig`'s `url` and
//! `service` are checked on write with kube's messages ([`validate_url`], [`validate_service`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_subdomain_error, Causes};
use crate::store::{services, Store};

/// The most a webhook's answer may hold.
const MAX_RESPONSE: usize = 3 << 20;
/// Clients kept at most (one per webhook and configuration version).
const MAX_CLIENTS: usize = 256;

/// Why a webhook could not be called (worded as Go's HTTP client words its errors).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The request failed on the way.
    #[error("Post {url:?}: {why}")]
    Post { url: String, why: String },
    /// No address for the webhook.
    #[error("{0}")]
    Unresolved(String),
    /// The webhook answered an error or something that is not JSON.
    #[error("{0}")]
    Answer(String),
}

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service`.
    Service {
        namespace: String,
        name: String,
        path: String,
        port: i64,
    },
}

/// A webhook's `clientConfig`, with the timeout of its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Identifies the webhook and the version of its configuration (the HTTP client is kept
    /// per identity).
    pub id: String,
    /// Where it is reached.
    pub endpoint: Option<Endpoint>,
    /// `caBundle`, PEM.
    pub ca_bundle: Vec<u8>,
    /// How long a call may take.
    pub timeout: Duration,
}

impl ClientConfig {
    /// A `clientConfig` as written (`id` names the webhook and its configuration's version).
    pub fn parse(cc: &Value, id: &str, timeout: Duration) -> ClientConfig {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
        let endpoint = match (cc["url"].as_str(), cc["service"].as_object()) {
            (Some(url), _) => Some(Endpoint::Url(url.to_string())),
            (None, Some(svc)) => Some(Endpoint::Service {
                namespace: text(svc.get("namespace")),
                name: text(svc.get("name")),
                path: text(svc.get("path")),
                port: svc.get("port").and_then(Value::as_i64).unwrap_or(443),
            }),
            _ => None,
        };
        let ca_bundle = cc["caBundle"]
            .as_str()
            .and_then(|b| {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(b).ok()
            })
            .unwrap_or_default();
        ClientConfig {
            id: id.to_string(),
            endpoint,
            ca_bundle,
            timeout,
        }
    }
}

/// How kube ends its URL messages.
const FORM: &str = "; desired format: https://host[/path]";

/// kube's `ValidateWebhookURL` with `https` required.
pub fn validate_url(url: &str, at: &str, causes: &mut Causes) {
    let u = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => {
            causes.push((
                at.to_string(),
                format!("Required value: url must be a valid URL: {e}{FORM}"),
            ));
            return;
        }
    };
    if u.scheme() != "https" {
        causes.push((
            at.to_string(),
            format!(
                "Invalid value: {}: 'https' is the only allowed URL scheme{FORM}",
                go_quote(u.scheme())
            ),
        ));
    }
    if u.host_str().unwrap_or_default().is_empty() {
        causes.push((
            at.to_string(),
            format!("Invalid value: \"\": host must be specified{FORM}"),
        ));
    }
    if !u.username().is_empty() || u.password().is_some() {
        let user = match u.password() {
            Some(p) => format!("{}:{p}", u.username()),
            None => u.username().to_string(),
        };
        causes.push((
            at.to_string(),
            format!(
                "Invalid value: {}: user information is not permitted in the URL",
                go_quote(&user)
            ),
        ));
    }
    if let Some(f) = u.fragment().filter(|f| !f.is_empty()) {
        causes.push((
            at.to_string(),
            format!(
                "Invalid value: {}: fragments are not permitted in the URL",
                go_quote(f)
            ),
        ));
    }
    if let Some(q) = u.query().filter(|q| !q.is_empty()) {
        causes.push((
            at.to_string(),
            format!(
                "Invalid value: {}: query parameters are not permitted in the URL",
                go_quote(q)
            ),
        ));
    }
}

/// kube's `ValidateWebhookService`.
pub fn validate_service(svc: &Value, at: &str, causes: &mut Causes) {
    for field in ["name", "namespace"] {
        if svc
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            causes.push((format!("{at}.{field}"), "Required value".to_string()));
        }
    }
    let port = svc.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        causes.push((
            format!("{at}.port"),
            format!("Invalid value: {port}: port is not valid: must be between 1 and 65535, inclusive"),
        ));
    }
    let Some(path) = svc.get("path").and_then(Value::as_str) else {
        return;
    };
    if path.is_empty() || path == "/" {
        return;
    }
    let field = format!("{at}.path");
    let invalid = |why: String| (field.clone(), format!("Invalid value: {}: {why}", go_quote(path)));
    if path == "//" {
        causes.push(invalid("segment[0] may not be empty".into()));
        return;
    }
    if !path.starts_with('/') {
        causes.push(invalid("must start with a '/'".into()));
    }
    let inner = path.get(1..).unwrap_or_default();
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    for (i, step) in inner.split('/').enumerate() {
        if step.is_empty() {
            causes.push(invalid(format!("segment[{i}] may not be empty")));
        } else if let Some(e) = dns_subdomain_error(step) {
            let why = e
                .split_once(": ")
                .map(|(_, rest)| rest.split_once(": ").map_or(rest, |(_, w)| w));
            causes.push(invalid(format!("segment[{i}]: {}", why.unwrap_or_default())));
        }
    }
}

/// A webhook's URL and, for a service, the address its host name stands for.
struct Target {
    url: String,
    resolved: Option<(String, SocketAddr)>,
}

fn target(store: &Store, hook: &ClientConfig) -> Result<Target, CallError> {
    match &hook.endpoint {
        Some(Endpoint::Url(url)) => Ok(Target {
            url: url.clone(),
            resolved: None,
        }),
        Some(Endpoint::Service {
            namespace,
            name,
            path,
            port,
        }) => {
            let addr = services::resolve(store.cache(), namespace, name, *port)
                .map_err(|e| CallError::Unresolved(e.to_string()))?;
            let host = format!("{name}.{namespace}.svc");
            Ok(Target {
                url: format!("https://{host}:{}{path}", addr.port()),
                resolved: Some((host, addr)),
            })
        }
        None => Err(CallError::Unresolved(
            "no clientConfig.url or clientConfig.service".into(),
        )),
    }
}

type ClientKey = (String, Option<(String, SocketAddr)>);

fn clients() -> &'static Mutex<HashMap<ClientKey, reqwest::Client>> {
    static CLIENTS: OnceLock<Mutex<HashMap<ClientKey, reqwest::Client>>> = OnceLock::new();
    CLIENTS.get_or_init(Default::default)
}

/// The client for this webhook (built once per configuration version and address).
fn client_for(
    hook: &ClientConfig,
    resolved: &Option<(String, SocketAddr)>,
) -> Result<reqwest::Client, String> {
    let key = (hook.id.clone(), resolved.clone());
    let mut cache = clients()
        .lock()
        .map_err(|_| "the webhook client cache is poisoned".to_string())?;
    if let Some(c) = cache.get(&key) {
        return Ok(c.clone());
    }
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .https_only(true);
    let roots = if hook.ca_bundle.is_empty() {
        system_roots().to_vec()
    } else {
        reqwest::Certificate::from_pem_bundle(&hook.ca_bundle).map_err(|e| format!("caBundle: {e}"))?
    };
    for cert in roots {
        builder = builder.add_root_certificate(cert);
    }
    if let Some((host, addr)) = resolved {
        builder = builder.resolve(host, *addr);
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    // Clients of older versions of the configuration are dropped with the rest: the next
    // request of each webhook builds its own again.
    if cache.len() >= MAX_CLIENTS {
        cache.clear();
    }
    cache.insert(key, client.clone());
    Ok(client)
}

/// The system's trust roots, which verify a webhook without a `caBundle` (as Go's TLS does
/// for kube-apiserver): read on first use, once for the life of the process. A root that
/// cannot be read is logged and left out.
fn system_roots() -> &'static [reqwest::Certificate] {
    static ROOTS: OnceLock<Vec<reqwest::Certificate>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!(error = %e, "a system trust root could not be read");
        }
        let roots: Vec<reqwest::Certificate> = found
            .certs
            .iter()
            .filter_map(|c| reqwest::Certificate::from_der(c).ok())
            .collect();
        tracing::info!(
            roots = roots.len(),
            "read the system trust roots for webhooks without a caBundle"
        );
        roots
    })
}

/// The rustls error under `e`, through the I/O error the TLS stream wraps it in.
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    let io = e.downcast_ref::<std::io::Error>()?;
    io.get_ref().and_then(|inner| rustls_error(inner))
}

/// Go's words for a server certificate that does not verify: an issuer that is not trusted is
/// Go's unknown authority. Go names the certificate's details for the other failures (its
/// names, its validity period; for a trusted CA's name on another key, the candidate
/// authority), which rustls does not give, so those keep rustls's words.
fn certificate_error(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    match rustls_error(e)? {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
            Some("tls: failed to verify certificate: x509: certificate signed by unknown authority")
        }
        _ => None,
    }
}

/// The innermost cause of an HTTP error, as Go's client states it last.
fn cause(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "context deadline exceeded".into();
    }
    let mut last: &(dyn std::error::Error + 'static) = e;
    loop {
        if let Some(certificate) = certificate_error(last) {
            return certificate.to_string();
        }
        match last.source() {
            Some(next) => last = next,
            None => return last.to_string(),
        }
    }
}

/// Posts `review` to the webhook and returns its answer.
pub async fn post(store: &Store, hook: &ClientConfig, review: &Value) -> Result<Value, CallError> {
    let t = target(store, hook)?;
    let sep = if t.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}timeout={}s", t.url, hook.timeout.as_secs());
    let failed = |why: String| CallError::Post {
        url: url.clone(),
        why,
    };
    let client = client_for(hook, &t.resolved).map_err(failed)?;
    let sent = client
        .post(&url)
        .timeout(hook.timeout)
        .header("Accept", "application/json")
        .json(review)
        .send();
    let mut response = sent.await.map_err(|e| failed(cause(&e)))?;
    let status = response.status();
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() <= MAX_RESPONSE => body.extend_from_slice(&chunk),
            Ok(Some(_)) => {
                return Err(CallError::Answer(format!(
                    "the response exceeds {MAX_RESPONSE} bytes"
                )))
            }
            Ok(None) => break,
            Err(e) => return Err(failed(cause(&e))),
        }
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        return Err(CallError::Answer(format!(
            "an error on the server ({:?}) has prevented the request from succeeding",
            text.trim()
        )));
    }
    serde_json::from_slice(&body)
        .map_err(|e| CallError::Answer(format!("couldn't get version/kind; json parse error: {e}")))
}
