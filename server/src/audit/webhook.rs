//! The audit webhook backend, as kube-apiserver's `--audit-webhook-config-file` in its default
//! `batch` mode: events are buffered (up to [`BUFFER_EVENTS`]), sent as one `audit.k8s.io/v1`
//! `EventList` per batch (at most [`MAX_BATCH`] events, or what came within the batch's
//! maximum wait after its first event) with a POST to the server the kubeconfig file names,
//! with its credentials (a client certificate or a bearer token) and CA. A batch the webhook
//! refuses or does not answer is sent again after a backoff (10 s, growing by half each time)
//! and dropped after [`ATTEMPTS`]; an event that finds the buffer full is dropped. Drops are
//! counted in `apiserver_audit_error_total{plugin="webhook"}` — a slow webhook never holds up
//! requests, as in kube.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc;

/// Events waiting for the webhook before new ones are dropped (kube's default buffer size).
pub const BUFFER_EVENTS: usize = 10_000;
/// Events per `EventList` (kube's default batch size).
pub const MAX_BATCH: usize = 400;
/// Tries of one batch before it is dropped.
const ATTEMPTS: u32 = 5;
/// Wait before the first retry of a batch (kube's `--audit-webhook-initial-backoff`).
const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
/// How long one POST may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the webhook backend cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The kubeconfig file cannot be read.
    #[error("cannot read the audit webhook config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The kubeconfig file does not say where and how to send.
    #[error("audit webhook config {path}: {why}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The parts of a kubeconfig file a webhook backend uses.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<Named<Cluster>>,
    #[serde(default)]
    users: Vec<Named<User>>,
    #[serde(default)]
    contexts: Vec<Named<Context>>,
    #[serde(default)]
    current_context: String,
}

#[derive(Debug, Default, Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: T,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    #[serde(default)]
    certificate_authority: Option<PathBuf>,
    #[serde(default)]
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct User {
    #[serde(default)]
    client_certificate: Option<PathBuf>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key: Option<PathBuf>,
    #[serde(default)]
    client_key_data: Option<String>,
    #[serde(default)]
    token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Context {
    cluster: String,
    #[serde(default)]
    user: String,
}

/// Where and how batches are sent.
struct Target {
    url: String,
    client: reqwest::Client,
    token: Option<String>,
}

/// The webhook backend: a bounded queue of event lines and the task that sends them (cheap
/// to clone).
#[derive(Debug, Clone)]
pub struct Webhook {
    events: mpsc::Sender<Vec<u8>>,
}

impl Webhook {
    /// Reads the kubeconfig at `path` and starts the sender; a batch waits at most `max_wait`
    /// for more events after its first.
    pub fn start(path: &Path, max_wait: Duration) -> Result<Webhook, WebhookError> {
        let target = target(path)?;
        let (events, rx) = mpsc::channel(BUFFER_EVENTS);
        tokio::spawn(send_batches(target, rx, max_wait));
        Ok(Webhook { events })
    }

    /// Queues an event line (a JSON object and a newline); drops it when the queue is full.
    pub fn send(&self, line: &[u8]) {
        if self.events.try_send(line.to_vec()).is_err() {
            tracing::error!("the audit webhook's buffer is full; audit event dropped");
            dropped(1);
        }
    }
}

fn dropped(events: usize) {
    metrics::counter!("apiserver_audit_error_total", "plugin" => "webhook").increment(events as u64);
}

/// The server and credentials of the current context of the kubeconfig at `path` (paths in it
/// are relative to its directory).
fn target(path: &Path) -> Result<Target, WebhookError> {
    let invalid = |why: String| WebhookError::Invalid {
        path: path.to_path_buf(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|source| WebhookError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let config: Kubeconfig = yaml_serde::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let context = match config.contexts.iter().find(|c| c.name == config.current_context) {
        Some(c) => Some(&c.value),
        None if config.current_context.is_empty() => config.contexts.first().map(|c| &c.value),
        None => return Err(invalid(format!("no context {:?}", config.current_context))),
    };
    let cluster = match context {
        Some(c) => config.clusters.iter().find(|n| n.name == c.cluster),
        None => config.clusters.first(),
    }
    .map(|n| &n.value)
    .ok_or_else(|| invalid("no cluster".into()))?;
    let user = match context {
        Some(c) => config.users.iter().find(|n| n.name == c.user),
        None => config.users.first(),
    }
    .map(|n| &n.value);
    let base = path.parent().unwrap_or(Path::new("."));
    let read = |file: &Option<PathBuf>,
                data: &Option<String>,
                what: &str|
     -> Result<Option<Vec<u8>>, WebhookError> {
        use base64::Engine;
        if let Some(data) = data {
            return base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map(Some)
                .map_err(|e| invalid(format!("{what}-data: {e}")));
        }
        match file {
            Some(file) => std::fs::read(base.join(file))
                .map(Some)
                .map_err(|e| invalid(format!("{what} {}: {e}", file.display()))),
            None => Ok(None),
        }
    };
    if !cluster.server.starts_with("https://") && !cluster.server.starts_with("http://") {
        return Err(invalid(format!(
            "server {:?} is not an http(s) URL",
            cluster.server
        )));
    }
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .timeout(REQUEST_TIMEOUT);
    if cluster.insecure_skip_tls_verify {
        builder = builder.danger_accept_invalid_certs(true);
    } else if let Some(ca) = read(
        &cluster.certificate_authority,
        &cluster.certificate_authority_data,
        "certificate-authority",
    )? {
        builder = builder.tls_built_in_root_certs(false);
        for cert in reqwest::Certificate::from_pem_bundle(&ca)
            .map_err(|e| invalid(format!("certificate-authority: {e}")))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    let mut token = None;
    if let Some(user) = user {
        let cert = read(
            &user.client_certificate,
            &user.client_certificate_data,
            "client-certificate",
        )?;
        let key = read(&user.client_key, &user.client_key_data, "client-key")?;
        match (cert, key) {
            (Some(mut cert), Some(key)) => {
                cert.push(b'\n');
                cert.extend_from_slice(&key);
                let identity = reqwest::Identity::from_pem(&cert)
                    .map_err(|e| invalid(format!("client certificate: {e}")))?;
                builder = builder.identity(identity);
            }
            (None, None) => {}
            _ => {
                return Err(invalid(
                    "a client certificate needs its key, and a key its certificate".into(),
                ))
            }
        }
        token.clone_from(&user.token);
    }
    let client = builder.build().map_err(|e| invalid(e.to_string()))?;
    Ok(Target {
        url: cluster.server.clone(),
        client,
        token,
    })
}

/// Sends the queued events in batches until every sender is gone.
async fn send_batches(target: Target, mut rx: mpsc::Receiver<Vec<u8>>, max_wait: Duration) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + max_wait;
        while batch.len() < MAX_BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(line)) => batch.push(line),
                Ok(None) | Err(_) => break,
            }
        }
        deliver(&target, &event_list(&batch), batch.len()).await;
    }
}

/// The `EventList` of the event lines in `batch`.
fn event_list(batch: &[Vec<u8>]) -> Vec<u8> {
    let mut body = br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#.to_vec();
    for (i, line) in batch.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(line.trim_ascii_end());
    }
    body.extend_from_slice(b"]}");
    body
}

/// POSTs one batch, trying again after a growing backoff; counts it dropped after
/// [`ATTEMPTS`] failures.
async fn deliver(target: &Target, body: &[u8], events: usize) {
    let mut backoff = INITIAL_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let mut request = target
            .client
            .post(&target.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(token) = &target.token {
            request = request.bearer_auth(token);
        }
        let outcome = match request.send().await {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => format!("answered {}", r.status()),
            Err(e) => e.to_string(),
        };
        tracing::warn!(attempt, error = %outcome, url = %target.url, "the audit webhook did not take a batch");
        if attempt < ATTEMPTS {
            tokio::time::sleep(backoff).await;
            backoff += backoff / 2;
        }
    }
    tracing::error!(events, url = %target.url, "audit events dropped: the webhook did not take them");
    dropped(events);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_one_event_list_of_its_lines() {
        let body = event_list(&[b"{\"a\":1}\n".to_vec(), b"{\"b\":2}\n".to_vec()]);
        let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            list,
            serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {},
                "items": [{"a": 1}, {"b": 2}]})
        );
    }

    #[test]
    fn the_kubeconfig_names_the_server_and_its_problems_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("webhook.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster:\n    server: https://127.0.0.1:9/events\n    insecure-skip-tls-verify: true\nusers:\n- name: api\n  user:\n    token: secret\ncontexts:\n- name: main\n  context: {cluster: audit, user: api}\ncurrent-context: main\n",
        )
        .unwrap();
        let t = target(&path).unwrap();
        assert_eq!(
            (t.url.as_str(), t.token.as_deref()),
            ("https://127.0.0.1:9/events", Some("secret"))
        );

        std::fs::write(
            &path,
            "clusters:\n- name: a\n  cluster: {server: https://x, certificate-authority: ca.pem}\n",
        )
        .unwrap();
        let e = target(&path).err().unwrap().to_string();
        assert!(e.contains("certificate-authority ca.pem"), "{e}");
        std::fs::write(&path, "clusters: []\n").unwrap();
        let e = target(&path).err().unwrap().to_string();
        assert!(e.ends_with("no cluster"), "{e}");
        let e = target(&dir.path().join("missing.yaml"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("cannot read the audit webhook config"), "{e}");
    }
}
