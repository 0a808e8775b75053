//! Reaching a webhook (kube's webhook `config` and service resolution): HTTPS with rustls,
//! HTTP/2 when the server offers it, the server certificate verified against the webhook's
//! `caBundle`. One HTTP client per webhook and version of its configuration (and resolved
//! address), kept across requests so connections are reused. A `service` reference is resolved
//! by `store::services` (the Service's port and its EndpointSlices or Endpoints in the
//! replica's cache), and the server is verified as `<service>.<namespace>.svc`, as
//! kube-apiserver does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use super::matching::{Endpoint, Hook};
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

/// A webhook's URL and, for a service, the address its host name stands for.
struct Target {
    url: String,
    resolved: Option<(String, SocketAddr)>,
}

fn target(store: &Store, hook: &Hook) -> Result<Target, CallError> {
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
fn client_for(hook: &Hook, resolved: &Option<(String, SocketAddr)>) -> Result<reqwest::Client, String> {
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
    if !hook.ca_bundle.is_empty() {
        let certs =
            reqwest::Certificate::from_pem_bundle(&hook.ca_bundle).map_err(|e| format!("caBundle: {e}"))?;
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
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

/// The innermost cause of an HTTP error, as Go's client states it last.
fn cause(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "context deadline exceeded".into();
    }
    let mut last: &dyn std::error::Error = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// Posts `review` to the webhook and returns its answer.
pub async fn post(store: &Store, hook: &Hook, review: &Value) -> Result<Value, CallError> {
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
