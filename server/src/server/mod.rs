//! `kuberaft serve`: runs one replica until SIGTERM/SIGINT or a fatal condition.

pub mod observability;
pub mod router;

use std::future::IntoFuture;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;
use axum::Router;
use kuberaft_raft::RaftNode;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::config::ServeConfig;
use crate::endpoints::Api;
use crate::registry::LiveRegistry;
use crate::server::observability::{install_metrics, spawn_gauges};
use crate::server::router::{router, HttpState};
use crate::store::Store;

/// Runs the replica described by the config file at `path`, with `feature_gates`
/// (`--feature-gates` text) applied over the file's.
pub async fn run(path: &Path, feature_gates: Option<&str>) -> anyhow::Result<()> {
    let mut config = ServeConfig::load(path)?;
    if let Some(g) = feature_gates {
        config
            .feature_gates
            .apply(g)
            .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?;
    }
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
    } = Replica::start(&config, metrics).await?;
    spawn_gauges(&node);
    // The API stops first and Raft last, so that requests in flight (also those other
    // replicas forward here) finish while this replica still takes part in the cluster.
    let (stop_api, api_stopping) = watch::channel(false);
    let (stop_peer, peer_stopping) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let peer = tokio::spawn(kuberaft_raft::service::serve(
        node.clone(),
        peer_listener,
        stopped(peer_stopping),
    ));
    // Small API responses must not wait on Nagle's algorithm.
    let api_listener = api_listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let api = tokio::spawn(
        axum::serve(api_listener, app)
            .with_graceful_shutdown(stopped(api_stopping))
            .into_future(),
    );
    tracing::info!(
        id = config.id,
        cluster = %config.cluster_name,
        api = config.api_listen(),
        peer = config.peer_listen(),
        "replica started"
    );
    let outcome = tokio::select! {
        _ = shutdown => Ok(()),
        Some(reason) = fatal.recv() => Err(anyhow::anyhow!("refusing to run: {reason}")),
    };
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
    /// controllers of the replica `config` describes, and builds its router. The peer service
    /// is not started: a single-member cluster needs none, and [`run`] serves it for the rest.
    pub async fn start(config: &ServeConfig, metrics: PrometheusHandle) -> anyhow::Result<Replica> {
        let (node, fatal) = RaftNode::start(config.node_config())
            .await
            .with_context(|| format!("cannot start replica {}", config.id))?;
        let api = Api {
            registry: Arc::new(LiveRegistry::new()),
            store: Store::new(node.clone(), config.watch_buffer.max(1)),
            features: config.feature_gates.clone(),
        };
        crate::controllers::namespace::spawn(api.store.clone(), api.registry.clone());
        crate::controllers::garbage_collector::spawn(api.store.clone(), api.registry.clone());
        crate::apiextensions::follow(api.store.cache().clone(), api.registry.clone());
        crate::controllers::crd_finalizer::spawn(api.store.clone());
        let router = router(
            HttpState {
                node: node.clone(),
                cache: api.store.cache().clone(),
                metrics,
            },
            api,
        );
        Ok(Replica { node, router, fatal })
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
