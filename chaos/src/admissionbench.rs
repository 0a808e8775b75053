//! `kuberaft-bench admission`: what admission costs a create. ConfigMap creates through the
//! HTTP API, side by side in one run, with nothing configured, with one validating admission
//! webhook (an HTTPS server in this process that allows everything, so the figure is the
//! cost of the call, not of the webhook's work), with one ValidatingAdmissionPolicy (a CEL
//! rule on every ConfigMap) and with a ResourceQuota in the namespace (charged in each
//! create's own transaction). Every run measures the setups in turn, each installed just
//! before its cell and removed after it, so that drift on the machine hits them alike.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};

use crate::client::{Client, Tls, WRITE_NAMESPACE};
use crate::report::{fmt_ms, fmt_rate, summarize, Summary};
use crate::workload::{self, CellSpec, Op, RunStats};

/// What is configured while creates are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Setup {
    /// No webhook, policy or quota.
    None,
    /// One ValidatingWebhookConfiguration whose webhook is called for every ConfigMap create.
    Webhook,
    /// One ValidatingAdmissionPolicy, bound, whose CEL rule checks every ConfigMap create.
    Policy,
    /// One ResourceQuota counting ConfigMaps in the namespace the creates go to.
    Quota,
}

impl Setup {
    /// The name used in flags and tables.
    pub fn name(self) -> &'static str {
        match self {
            Setup::None => "none",
            Setup::Webhook => "webhook",
            Setup::Policy => "policy",
            Setup::Quota => "quota",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct AdmissionBench {
    /// The setups, measured in this order in every run.
    pub setups: Vec<Setup>,
    /// Numbers of concurrent clients.
    pub concurrency: Vec<usize>,
    /// Unmeasured seconds at the start of each cell.
    pub warmup: Duration,
    /// Measured seconds of each cell.
    pub duration: Duration,
    /// Runs; medians are reported.
    pub runs: usize,
    /// Bytes of data in each ConfigMap.
    pub value_size: usize,
}

/// The medians of one setup at one concurrency.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Cell {
    /// The setup.
    pub setup: Setup,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Medians over the runs.
    pub median: Summary,
}

/// The webhook server: HTTPS on a loopback port, with a certificate of its own CA.
struct Webhook {
    url: String,
    ca_pem: String,
    /// The reviews it has answered.
    calls: Arc<AtomicU64>,
}

/// Answers every AdmissionReview with "allowed".
async fn allow(State(calls): State<Arc<AtomicU64>>, Json(review): Json<Value>) -> Json<Value> {
    calls.fetch_add(1, Ordering::Relaxed);
    let uid = review["request"]["uid"].clone();
    Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true},
    }))
}

/// Starts the webhook server on this runtime.
async fn start_webhook() -> anyhow::Result<Webhook> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kuberaft-bench-webhook-ca");
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca_cert.pem(), ca_key)?;
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])?.signed_by(&key, &issuer)?;
    let certs = vec![CertificateDer::from_pem_slice(cert.pem().as_bytes())?];
    let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let calls = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route("/validate", post(allow))
        .with_state(calls.clone());
    tokio::spawn(kuberaft::server::listener::serve(
        listener,
        app,
        Some(Arc::new(tls)),
        std::future::pending(),
    ));
    Ok(Webhook {
        url: format!("https://127.0.0.1:{port}/validate"),
        ca_pem: ca_cert.pem(),
        calls,
    })
}

/// The admin's HTTP client of the first replica, for installing and removing setups.
struct Admin {
    http: reqwest::Client,
    base: String,
}

impl Admin {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let mut req = self.http.request(method.clone(), format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.with_context(|| format!("{method} {path}"))?;
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        anyhow::ensure!(status.is_success(), "{method} {path} answered {status}: {body}");
        Ok(body)
    }
}

const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
const NAME: &str = "kuberaft-bench";

/// Configures `setup` and waits until it is in force.
async fn install(admin: &Admin, setup: Setup, webhook: &Webhook) -> anyhow::Result<()> {
    use base64::Engine;
    let configmap_creates = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]);
    match setup {
        Setup::None => {}
        Setup::Webhook => {
            let ca = base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem);
            let config = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": NAME},
                "webhooks": [{
                    "name": "allow.bench.kuberaft.io",
                    "clientConfig": {"url": webhook.url, "caBundle": ca},
                    "rules": configmap_creates,
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "failurePolicy": "Fail",
                }],
            });
            admin.send(reqwest::Method::POST, WEBHOOKS, Some(&config)).await?;
        }
        Setup::Policy => {
            let policy = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": NAME},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": configmap_creates},
                    "validations": [{"expression": "object.metadata.name.size() < 254 && !has(object.binaryData)"}],
                },
            });
            admin.send(reqwest::Method::POST, POLICIES, Some(&policy)).await?;
            let binding = json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": NAME},
                "spec": {"policyName": NAME, "validationActions": ["Deny"]},
            });
            admin
                .send(reqwest::Method::POST, BINDINGS, Some(&binding))
                .await?;
        }
        Setup::Quota => {
            let quota = json!({
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": NAME},
                "spec": {"hard": {"count/configmaps": "100000000", "configmaps": "100000000"}},
            });
            let path = format!("/api/v1/namespaces/{WRITE_NAMESPACE}/resourcequotas");
            admin.send(reqwest::Method::POST, &path, Some(&quota)).await?;
            // Until its controller has counted the namespace, a quota refuses every create.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            loop {
                let q = admin
                    .send(reqwest::Method::GET, &format!("{path}/{NAME}"), None)
                    .await?;
                if q["status"]["used"].is_object() {
                    break;
                }
                anyhow::ensure!(
                    std::time::Instant::now() < deadline,
                    "the quota's status was never counted"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(())
}

/// Checks that `setup` was in force while it was measured: the webhook was called for every
/// create, the policy refuses what its rule forbids, the quota counted the creates.
async fn check_in_force(
    admin: &Admin,
    setup: Setup,
    webhook: &Webhook,
    calls_before: u64,
    creates: u64,
) -> anyhow::Result<()> {
    match setup {
        Setup::None => {}
        Setup::Webhook => {
            let calls = webhook.calls.load(Ordering::Relaxed) - calls_before;
            anyhow::ensure!(
                calls >= creates,
                "the webhook answered {calls} reviews for {creates} creates"
            );
        }
        Setup::Policy => {
            let refused = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"generateName": "refused-"}, "binaryData": {"b": "AA=="}});
            let path = format!("/api/v1/namespaces/{WRITE_NAMESPACE}/configmaps");
            anyhow::ensure!(
                admin
                    .send(reqwest::Method::POST, &path, Some(&refused))
                    .await
                    .is_err(),
                "the policy let through a ConfigMap its rule refuses"
            );
        }
        Setup::Quota => {
            let path = format!("/api/v1/namespaces/{WRITE_NAMESPACE}/resourcequotas/{NAME}");
            let q = admin.send(reqwest::Method::GET, &path, None).await?;
            let used: u64 = q["status"]["used"]["count/configmaps"]
                .as_str()
                .and_then(|u| u.parse().ok())
                .unwrap_or(0);
            anyhow::ensure!(
                used >= creates,
                "the quota counted {used} ConfigMaps after {creates} creates"
            );
        }
    }
    Ok(())
}

/// Removes what [`install`] configured.
async fn remove(admin: &Admin, setup: Setup) -> anyhow::Result<()> {
    let paths: Vec<String> = match setup {
        Setup::None => Vec::new(),
        Setup::Webhook => vec![format!("{WEBHOOKS}/{NAME}")],
        Setup::Policy => vec![format!("{BINDINGS}/{NAME}"), format!("{POLICIES}/{NAME}")],
        Setup::Quota => vec![format!(
            "/api/v1/namespaces/{WRITE_NAMESPACE}/resourcequotas/{NAME}"
        )],
    };
    for path in paths {
        admin.send(reqwest::Method::DELETE, &path, None).await?;
    }
    Ok(())
}

/// Runs the benchmark against the cluster whose first replica's API is `api_addr`, driving
/// `clients` (one per replica); returns the medians, setup by setup.
pub async fn run(
    bench: &AdmissionBench,
    api_addr: &str,
    tls: Option<&Tls>,
    clients: &[Client],
) -> anyhow::Result<Vec<Cell>> {
    let webhook = start_webhook().await?;
    let (http, scheme) = match tls {
        Some(t) => (t.http_builder()?.build()?, "https"),
        None => (reqwest::Client::new(), "http"),
    };
    let admin = Admin {
        http,
        base: format!("{scheme}://{api_addr}"),
    };
    let mut runs: Vec<Vec<Vec<RunStats>>> =
        vec![vec![Vec::new(); bench.concurrency.len()]; bench.setups.len()];
    for run in 0..bench.runs {
        for (s, &setup) in bench.setups.iter().enumerate() {
            install(&admin, setup, &webhook).await?;
            let calls_before = webhook.calls.load(Ordering::Relaxed);
            let mut creates = 0;
            for (c, &concurrency) in bench.concurrency.iter().enumerate() {
                let spec = CellSpec {
                    op: Op::Put,
                    concurrency,
                    warmup: bench.warmup,
                    duration: bench.duration,
                    value_size: bench.value_size,
                    tag: format!("adm-{}-c{concurrency}-r{run}", setup.name()),
                    preload_keys: 0,
                };
                let stats = workload::run_cell(clients, &spec)
                    .await
                    .with_context(|| format!("{} with {concurrency} clients", setup.name()))?;
                eprintln!(
                    "{:<8} clients {:>4} run {}/{}: {:>8} creates/s  p50 {:>6} ms  p99 {:>6} ms  errors {}",
                    setup.name(),
                    concurrency,
                    run + 1,
                    bench.runs,
                    fmt_rate(Some(stats.ops_per_sec)),
                    fmt_ms(stats.p50_ms),
                    fmt_ms(stats.p99_ms),
                    stats.errors,
                );
                if let Some(e) = &stats.first_error {
                    eprintln!("  first error: {e}");
                }
                creates += stats.ops;
                runs[s][c].push(stats);
            }
            check_in_force(&admin, setup, &webhook, calls_before, creates).await?;
            remove(&admin, setup).await?;
        }
    }
    let mut cells = Vec::new();
    for (s, &setup) in bench.setups.iter().enumerate() {
        for (c, &concurrency) in bench.concurrency.iter().enumerate() {
            cells.push(Cell {
                setup,
                concurrency,
                median: summarize(&runs[s][c]),
            });
        }
    }
    Ok(cells)
}

/// The markdown table of the cells: creates/s, p50 and p99 per setup and concurrency, and the
/// rate as a ratio to the first setup's at the same concurrency.
pub fn markdown(cells: &[Cell]) -> String {
    let mut out = String::from("| setup | clients | creates/s | vs first | p50 ms | p99 ms | errors |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for cell in cells {
        let base = cells
            .iter()
            .find(|c| c.concurrency == cell.concurrency)
            .and_then(|c| c.median.ops_per_sec)
            .filter(|r| *r > 0.0);
        let ratio = match (cell.median.ops_per_sec, base) {
            (Some(r), Some(b)) => format!("{:.2}x", r / b),
            _ => "-".to_string(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {ratio} | {} | {} | {} |\n",
            cell.setup.name(),
            cell.concurrency,
            fmt_rate(cell.median.ops_per_sec),
            fmt_ms(cell.median.p50_ms),
            fmt_ms(cell.median.p99_ms),
            cell.median.errors,
        ));
    }
    out
}
