//! Logging and Prometheus metrics for a replica.
//!
//! Request-path code records counters and histograms through the `metrics` facade; this module
//! installs the Prometheus recorder and keeps the Raft and storage gauges current.

use std::sync::Arc;
use std::time::Duration;

use kuberaft_raft::RaftNode;
use kuberaft_raft::ServerState;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets (seconds) for every `*_seconds` histogram.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Installs the global Prometheus recorder and returns the handle `/metrics` renders.
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    Ok(PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)?
        .install_recorder()?)
}

/// Sets up `tracing` output on stderr, filtered by `RUST_LOG` (default `info`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Keeps the Raft and storage gauges current until the node is dropped: a change of leader,
/// role or term is published as it happens (the chaos tools find the leader by
/// `kuberaft_raft_is_leader`), the rest once a second. (Refreshing everything on every metrics
/// change — every log append and apply — walked the data directory thousands of times a second
/// and cost a replica a sixth of its CPU under writes.)
pub fn spawn_gauges(node: &Arc<RaftNode>) {
    let weak = Arc::downgrade(node);
    let mut raft_metrics = node.metrics();
    tokio::spawn(async move {
        let mut last = None;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            let ticked = tokio::select! {
                changed = raft_metrics.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    false
                }
                _ = tick.tick() => true,
            };
            let (term, leader, state, last_log_index) = {
                let m = raft_metrics.borrow_and_update();
                (m.current_term, m.current_leader, m.state, m.last_log_index)
            };
            if last != Some((term, leader, state)) {
                if leader.is_some() && last.is_none_or(|(_, was, _)| was != leader) {
                    metrics::counter!("kuberaft_raft_leader_changes_total").increment(1);
                }
                last = Some((term, leader, state));
                metrics::gauge!("kuberaft_raft_term").set(term as f64);
                metrics::gauge!("kuberaft_raft_is_leader")
                    .set(f64::from(u8::from(state == ServerState::Leader)));
                metrics::gauge!("kuberaft_raft_has_leader").set(f64::from(u8::from(leader.is_some())));
            }
            if !ticked {
                continue;
            }
            let Some(node) = weak.upgrade() else { return };
            let progress = *node.progress().borrow();
            metrics::gauge!("kuberaft_raft_last_log_index").set(last_log_index.unwrap_or(0) as f64);
            metrics::gauge!("kuberaft_raft_applied_index").set(progress.applied_index as f64);
            metrics::gauge!("kuberaft_store_revision").set(progress.revision as f64);
            metrics::gauge!("kuberaft_store_compacted_revision").set(progress.compacted as f64);
            if let Ok(status) = node.status(false).await {
                metrics::gauge!("kuberaft_raft_commit_index").set(status.commit_index as f64);
                metrics::gauge!("kuberaft_raft_log_entries").set(status.log_entries as f64);
                metrics::gauge!("kuberaft_store_db_size_bytes").set(status.db_size_bytes as f64);
            }
        }
    });
}
