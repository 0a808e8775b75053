//! `kuberaft serve`: runs one replica until SIGTERM/SIGINT or a fatal condition.

pub mod backups;
pub mod listener;
pub mod observability;
pub mod router;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use kuberaft_raft::RaftNode;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::aggregator::proxy::Aggregator;
use crate::audit::Auditor;
use crate::authentication::{Authenticator, Authenticators, ServiceAccountTokens, TokenFile};
use crate::authorization::Authorizer;
use crate::config::ServeConfig;
use crate::endpoints::{Api, ApiParts};
use crate::flowcontrol::PriorityAndFairness;
use crate::pki::credentials::Credentials;
use crate::pki::issue::PEER_GROUP;
use crate::proxy::kubelet::Kubelet;
use crate::scheme::LiveRegistry;
use crate::server::observability::{install_metrics, spawn_gauges};
use crate::server::router::{router, HttpState, Overload};
use crate::store::cacher::WatchCache;
use crate::store::encryption::Encryption;
use crate::store::Store;
use kuberaft_raft::service::{CallerCheck, PeerTls, Service};

/// How a replica secures its ports and names its clients.
#[derive(Debug, Clone)]
pub struct Security {
    /// The checked certificates (`None` with `--insecure`).
    pub credentials: Option<Credentials>,
    /// The static token file, if configured.
    pub tokens: Option<TokenFile>,
    /// The ServiceAccount token issuer, if a signing key is configured.
    pub service_accounts: Option<ServiceAccountTokens>,
    /// What is encrypted at rest, and with which keys.
    pub encryption: Arc<Encryption>,
}

impl Security {
    /// Plain HTTP and plaintext peers; every request a superuser (development only).
    pub fn insecure() -> Security {
        Security {
            credentials: None,
            tokens: None,
            service_accounts: None,
            encryption: Arc::new(Encryption::none()),
        }
    }

    /// Loads and checks what the config's `security` section names; without one, refuses
    /// to run unless `insecure`. The encryption config is honoured either way: data encrypted
    /// at rest stays readable by a replica started `--insecure`.
    pub fn load(config: &ServeConfig, path: &Path, insecure: bool) -> anyhow::Result<Security> {
        let encryption = match config
            .security
            .as_ref()
            .and_then(|s| s.encryption_config.as_deref())
        {
            Some(file) => Encryption::load(file)?,
            None => Encryption::none(),
        };
        let encryption = Arc::new(encryption);
        if config
            .security
            .as_ref()
            .is_some_and(|s| s.encryption_config_automatic_reload)
        {
            encryption.follow(&format!("{}-{}", config.cluster_name, config.id));
        }
        if insecure {
            tracing::warn!(
                "--insecure: the API is plain HTTP without authentication or authorization and peers \
                 talk plaintext; anyone who reaches a port owns the cluster. Development only."
            );
            return Ok(Security {
                encryption,
                ..Security::insecure()
            });
        }
        let Some(security) = &config.security else {
            anyhow::bail!(
                "config {} has no `security` section: kuberaft serves only over TLS. Make the \
                 certificates with `kuberaft certs` (or start with `kuberaft cluster up`), or pass \
                 --insecure for a development replica without TLS or authentication",
                path.display()
            );
        };
        let credentials = Credentials::load(security)?;
        let tokens = security.token_file.as_deref().map(TokenFile::load).transpose()?;
        let service_accounts = security
            .service_account_key
            .as_deref()
            .map(ServiceAccountTokens::load)
            .transpose()?;
        Ok(Security {
            credentials: Some(credentials),
            tokens,
            service_accounts,
            encryption,
        })
    }

    /// The authenticators these credentials make, reading ServiceAccounts from `cache`.
    pub fn authenticator(&self, cache: &WatchCache) -> Authenticator {
        match &self.credentials {
            None => Authenticator::Insecure,
            Some(c) => Authenticator::Secure(Box::new(Authenticators {
                tls: c.api.clone(),
                tokens: self.tokens.clone(),
                service_accounts: self.service_accounts.clone(),
                cache: cache.clone(),
            })),
        }
    }
}

/// Runs the replica described by the config file at `path`, with `feature_gates`
/// (`--feature-gates` text) applied over the file's; `insecure` serves plain HTTP without
/// authentication.
pub async fn run(
    path: &Path,
    feature_gates: Option<&str>,
    insecure: bool,
    join: Option<&str>,
) -> anyhow::Result<()> {
    // `--join https://host:port` and `--join host:port` name the same replica.
    let join = join.map(|j| {
        j.strip_prefix("https://")
            .or_else(|| j.strip_prefix("http://"))
            .unwrap_or(j)
            .trim_end_matches('/')
    });
    let mut config = ServeConfig::load(path)?;
    if let Some(g) = feature_gates {
        config
            .feature_gates
            .apply(g)
            .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?;
    }
    let security = Security::load(&config, path, insecure)?;
    let shutdown = shutdown_signal().context("cannot install signal handlers")?;
    let metrics = install_metrics()?;
    // Bind both listeners first: a port conflict is reported before the data dir is touched.
    let peer_listener = TcpListener::bind(config.peer_listen())
        .await
        .with_context(|| format!("cannot listen for peers on {}", config.peer_listen()))?;
    let api_listener = TcpListener::bind(config.api_listen())
        .await
        .with_context(|| format!("cannot listen for the API on {}", config.api_listen()))?;
    let Replica {
        node,
        router: app,
        mut fatal,
    } = Replica::start(&config, metrics, &security, join).await?;
    spawn_gauges(&node);
    if let Some(backup) = &config.backup {
        backups::spawn(node.clone(), backup.clone());
    }
    // The API stops first and Raft last, so that requests in flight (also those other
    // replicas forward here) finish while this replica still takes part in the cluster.
    let (stop_api, api_stopping) = watch::channel(false);
    let (stop_peer, peer_stopping) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let credentials = security.credentials.as_ref();
    let peer = tokio::spawn(kuberaft_raft::service::serve(
        node.clone(),
        peer_listener,
        stopped(peer_stopping),
        credentials.map(|c| PeerTls {
            config: c.peer_server.clone(),
            callers: peer_callers(),
        }),
    ));
    let api = tokio::spawn(listener::serve(
        api_listener,
        app,
        credentials.map(|c| c.api.server.clone()),
        stopped(api_stopping),
    ));
    tracing::info!(
        id = config.id,
        cluster = %config.cluster_name,
        api = config.api_listen(),
        peer = config.peer_listen(),
        tls = credentials.is_some(),
        "replica started"
    );
    let outcome = tokio::select! {
        _ = shutdown => Ok(()),
        Some(reason) = fatal.recv() => Err(anyhow::anyhow!("refusing to run: {reason}")),
    };
    if outcome.is_ok() && node.is_leader() {
        // A graceful stop of the leader hands leadership over first: no election timeout,
        // and writes meanwhile wait for the new leader instead of failing.
        match node.transfer_leadership(None).await {
            Ok(to) => tracing::info!(to, "handed leadership over before stopping"),
            Err(e) => tracing::info!(error = %e, "stopping without handing leadership over"),
        }
    }
    let _ = stop_api.send(true);
    // Open watches would hold the drain for their whole timeout: they are cut after the
    // grace period, and their clients resume on another replica.
    if tokio::time::timeout(API_DRAIN, api).await.is_err() {
        tracing::info!("API connections still open after {API_DRAIN:?}; closing them");
    }
    node.shutdown().await;
    let _ = stop_peer.send(true);
    let _ = tokio::time::timeout(API_DRAIN, peer).await;
    outcome
}

/// A started replica: its Raft node, the router that serves its API (health, metrics,
/// OpenAPI and the Kubernetes API behind the filter chain), and the channel on which the node
/// reports a condition it cannot run under. Nothing is bound to a port: [`run`] serves the
/// router on the API listener; tests drive it in process.
pub struct Replica {
    /// The replica's Raft node.
    pub node: Arc<RaftNode>,
    /// The HTTP router of the API port.
    pub router: Router,
    /// Why the node cannot go on, when it cannot.
    pub fatal: mpsc::UnboundedReceiver<String>,
}

impl Replica {
    /// Starts the Raft node, the store with its watch cache, the registry and the
    /// controllers of the replica `config` describes, and builds its router (with audit
    /// logging when the config has an `audit` section: an unreadable or invalid policy, or a
    /// log that cannot be opened, stops the start before the data dir is touched). The peer
    /// service is not started: a single-member cluster needs none, and [`run`] serves it for
    /// the rest. With `join` (a replica's peer address), the node joins that replica's cluster
    /// as a learner instead of initialising one from the config's members.
    pub async fn start(
        config: &ServeConfig,
        metrics: PrometheusHandle,
        security: &Security,
        join: Option<&str>,
    ) -> anyhow::Result<Replica> {
        let auditor = config.audit.as_ref().map(Auditor::load).transpose()?;
        if let Some(file) = &config.admission_config_file {
            crate::admission::configuration::install(file)?;
        }
        let mut node_config = config.node_config();
        node_config.join = join.map(str::to_string);
        node_config.mergers = crate::store::Mergers::default().with(
            crate::admission::resource_quota::charge::MERGER,
            Arc::new(crate::admission::resource_quota::charge::QuotaCharge),
        );
        node_config.peer_tls = security.credentials.as_ref().map(|c| c.peer_client.clone());
        if let Some(c) = &security.credentials {
            node_config.certificates = [("ca", &c.ca), ("api", &c.serving), ("peer", &c.peer)]
                .into_iter()
                .map(|(name, facts)| kuberaft_proto::CertificateExpiry {
                    name: name.into(),
                    not_after: facts.not_after.unix_timestamp(),
                })
                .collect();
        }
        let ranges = config.service_ranges().map_err(anyhow::Error::msg)?;
        let (node, fatal) = RaftNode::start(node_config)
            .await
            .with_context(|| format!("cannot start replica {}", config.id))?;
        let store = Store::new(
            node.clone(),
            config.watch_buffer.max(1),
            security.encryption.clone(),
        );
        let cache = store.cache().clone();
        let front_proxy = security.credentials.as_ref().and_then(|c| c.front_proxy.clone());
        let aggregator = Arc::new(Aggregator::new(
            cache.clone(),
            front_proxy
                .as_ref()
                .map(|f| format!("{}{}", f.cert_pem, f.key_pem)),
        ));
        let aggregated = crate::aggregator::discovery::Cache::default();
        crate::aggregator::discovery::spawn(aggregator.clone(), aggregated.clone());
        let kubelet = match &security.credentials {
            Some(c) => Kubelet::new(c.kubelet.identity_pem.as_deref(), c.kubelet.ca_pem.as_deref()),
            None => Kubelet::new(None, None),
        }?;
        let api = Api::new(ApiParts {
            kubelet,
            aggregator: aggregator.clone(),
            aggregated,
            registry: Arc::new(LiveRegistry::new(crate::kinds::strategy::registry(&ranges))),
            authorizer: Authorizer::start(store.cache().clone()),
            store,
            features: config.feature_gates.clone(),
            authenticator: Arc::new(security.authenticator(&cache)),
        });
        crate::controllers::namespace::spawn(api.store.clone(), api.registry.clone());
        crate::controllers::kubernetes_service::spawn(api.store.clone(), api.registry.clone(), ranges);
        crate::controllers::garbage_collector::spawn(api.store.clone(), api.registry.clone());
        crate::apiextensions::follow(api.store.cache().clone(), api.registry.clone());
        crate::controllers::crd_finalizer::spawn(api.store.clone());
        crate::controllers::resource_quota::spawn(api.store.clone());
        crate::controllers::local_apiservices::spawn(api.store.clone(), api.registry.clone());
        crate::controllers::apiservice_availability::spawn(
            api.store.clone(),
            api.registry.clone(),
            aggregator,
        );
        if let (Some(credentials), Some(front_proxy)) = (&security.credentials, &front_proxy) {
            crate::controllers::extension_auth::spawn(
                api.store.clone(),
                api.registry.clone(),
                credentials.ca_pem.clone(),
                front_proxy.ca_pem.clone(),
            );
        }
        crate::controllers::run_while_leader(
            api.store.clone(),
            "rbac-bootstrap",
            crate::authorization::bootstrap::run,
        );
        crate::controllers::clusterrole_aggregation::spawn(api.store.clone());
        crate::controllers::service_account::spawn(api.store.clone(), api.registry.clone());
        if let Some(issuer) = &security.service_accounts {
            crate::controllers::service_account_token::spawn(
                api.store.clone(),
                api.registry.clone(),
                issuer.clone(),
                security.credentials.as_ref().map(|c| c.ca_pem.clone()),
            );
        }
        // kube-controller-manager publishes the root CA only when it has one.
        if let Some(credentials) = &security.credentials {
            crate::controllers::root_ca_publisher::spawn(
                api.store.clone(),
                api.registry.clone(),
                credentials.ca_pem.clone(),
            );
        }
        let overload = if config.enable_priority_and_fairness {
            crate::filters::read_vs_write::set_limits(
                config.max_requests_inflight,
                config.max_mutating_requests_inflight,
            );
            let pf = PriorityAndFairness::new(
                config.max_requests_inflight + config.max_mutating_requests_inflight,
            );
            pf.follow(api.store.cache().clone());
            crate::controllers::flowcontrol_configuration::spawn(api.store.clone(), api.registry.clone());
            Overload::PriorityAndFairness(pf)
        } else {
            Overload::MaxInFlight(crate::filters::max_in_flight::Limits::new(
                config.max_requests_inflight,
                config.max_mutating_requests_inflight,
                config.max_mutating_requests_inflight,
            ))
        };
        let router = router(
            HttpState {
                node: node.clone(),
                cache: api.store.cache().clone(),
                metrics,
                authorizer: api.authorizer.clone(),
            },
            api,
            auditor,
            overload,
        );
        Ok(Replica { node, router, fatal })
    }
}

/// The names a peer port client's certificate carries, as [`peer_callers`] reads them.
struct Caller {
    common_name: String,
    organizations: Vec<String>,
}

/// How many certificates' names [`peer_callers`] keeps: the replicas' and a few operators'.
const KNOWN_CALLERS: usize = 64;

/// Who may use the peer port's services: Raft only replicas (the peer certificates'
/// organization), the admin/KV API replicas and `system:masters` too. The handshake has
/// already verified the certificate against the cluster CA. Every Raft message is a call, so
/// the names of the certificates seen are kept, not parsed again for each call.
fn peer_callers() -> CallerCheck {
    let known: Mutex<HashMap<Vec<u8>, Arc<Caller>>> = Mutex::default();
    Arc::new(move |leaf: &[u8], service: Service| {
        let caller = {
            let mut known = known.lock().unwrap_or_else(PoisonError::into_inner);
            match known.get(leaf) {
                Some(caller) => caller.clone(),
                None => {
                    let caller = Arc::new(caller_of(leaf)?);
                    if known.len() >= KNOWN_CALLERS {
                        known.clear();
                    }
                    known.insert(leaf.to_vec(), caller.clone());
                    caller
                }
            }
        };
        admit(&caller, service)
    })
}

fn caller_of(leaf: &[u8]) -> Result<Caller, String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) = X509Certificate::from_der(leaf).map_err(|e| format!("unreadable certificate: {e}"))?;
    let facts = crate::pki::check::facts_of(&cert);
    Ok(Caller {
        common_name: facts.common_name,
        organizations: facts.organizations,
    })
}

fn admit(caller: &Caller, service: Service) -> Result<(), String> {
    let is = |group: &str| caller.organizations.iter().any(|o| o == group);
    let allowed = match service {
        Service::Peer => is(PEER_GROUP),
        Service::Admin => is(PEER_GROUP) || is(crate::authentication::user::SYSTEM_MASTERS),
    };
    if allowed {
        Ok(())
    } else {
        Err(format!(
            "{:?} may not use the {service:?} service: it takes a replica's peer certificate{}",
            caller.common_name,
            if service == Service::Admin {
                " or one of system:masters"
            } else {
                ""
            }
        ))
    }
}

/// How long a stopping replica lets API requests in flight finish.
const API_DRAIN: Duration = Duration::from_secs(2);

/// Installs the SIGINT (Ctrl-C) and SIGTERM handlers now and returns a future that resolves
/// on the first of them. Installing eagerly matters: a signal that arrives between "ready" and
/// the first poll of a lazily installed handler would kill the process uncleanly.
pub fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}
