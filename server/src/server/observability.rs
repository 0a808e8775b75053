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

/// kube-apiserver's buckets (seconds) for `apiserver_request_duration_seconds` and
/// `etcd_request_duration_seconds`, whose place `kuberaft_store_request_duration_seconds` takes.
const REQUEST_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0,
    20.0, 30.0, 45.0, 60.0,
];

/// Buckets for how many things one operation carried (transactions per proposal, appends per
/// fsync): powers of two up to 4096.
const COUNT_BUCKETS: [f64; 13] = [
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
];

/// kube-apiserver's buckets (bytes) for `apiserver_response_sizes`: 1 KB to 1 GB by tens.
const RESPONSE_SIZE_BUCKETS: [f64; 7] = [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];

/// kube-apiserver's buckets (bytes) for `apiserver_watch_events_sizes`: 1 KiB to 128 KiB by twos.
const WATCH_EVENT_SIZE_BUCKETS: [f64; 8] = [
    1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0, 131072.0,
];

/// The help text of the series with kube-apiserver's names (kube's wording), and of the store
/// series that stand in for etcd's.
const HELP: [(&str, &str); 27] = [
    ("apiserver_request_total", "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code."),
    ("apiserver_request_duration_seconds", "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component."),
    ("apiserver_response_sizes", "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component."),
    ("apiserver_longrunning_requests", "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way."),
    ("apiserver_request_aborts_total", "Number of requests which apiserver aborted possibly due to a timeout, for each group, version, verb, resource, subresource and scope"),
    ("apiserver_current_inflight_requests", "Maximal number of currently used inflight request limit of this apiserver per request kind in last second."),
    ("apiserver_watch_events_total", "Number of events sent in watch clients"),
    ("apiserver_watch_events_sizes", "Watch event size distribution in bytes"),
    ("apiserver_registered_watchers", "Number of currently registered watchers for a given resources"),
    ("apiserver_terminated_watchers_total", "Counter of watchers closed due to unresponsiveness broken by resource type."),
    ("apiserver_storage_objects", "Number of stored objects at the time of last check split by kind."),
    ("apiserver_resource_objects", "Number of stored objects at the time of last check split by kind."),
    ("apiserver_storage_size_bytes", "Size of the storage database file physically allocated in bytes."),
    ("apiserver_watch_cache_events_received_total", "Counter of events received in watch cache broken by resource type."),
    ("apiserver_watch_cache_events_dispatched_total", "Counter of events dispatched in watch cache broken by resource type."),
    ("apiserver_watch_cache_resource_version", "Current resource version of watch cache broken by resource type."),
    ("apiserver_watch_cache_initializations_total", "Counter of watch cache initializations broken by resource type."),
    ("apiserver_init_events_total", "Counter of init events processed in watch cache broken by resource type."),
    ("apiserver_cache_list_total", "Number of LIST requests served from watch cache"),
    ("apiserver_cache_list_fetched_objects_total", "Number of objects read from watch cache in the course of serving a LIST request"),
    ("apiserver_cache_list_returned_objects_total", "Number of objects returned for a LIST request from watch cache"),
    ("apiserver_encryption_config_controller_automatic_reloads_total", "Total number of reload successes and failures of encryption configuration split by apiserver identity."),
    ("apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds", "Timestamp of the last successful or failed automatic reload of encryption configuration split by apiserver identity."),
    ("kuberaft_store_request_duration_seconds", "Store request latency in seconds for each operation and object type (in the place of etcd_request_duration_seconds)."),
    ("kuberaft_store_requests_total", "Store request counts for each operation and object type (in the place of etcd_requests_total)."),
    ("kuberaft_store_request_errors_total", "Store failed request counts for each operation and object type (in the place of etcd_request_errors_total)."),
    ("kuberaft_watch_cache_revision", "The store revision this replica's watch cache has applied."),
];

/// Installs the global Prometheus recorder and returns the handle `/metrics` renders.
pub fn install_metrics() -> anyhow::Result<PrometheusHandle> {
    let overrides: [(&str, &[f64]); 6] = [
        ("apiserver_request_duration_seconds", &REQUEST_BUCKETS),
        ("kuberaft_store_request_duration_seconds", &REQUEST_BUCKETS),
        ("apiserver_response_sizes", &RESPONSE_SIZE_BUCKETS),
        ("apiserver_watch_events_sizes", &WATCH_EVENT_SIZE_BUCKETS),
        ("kuberaft_raft_proposal_batch_size", &COUNT_BUCKETS),
        ("kuberaft_storage_fsync_appends", &COUNT_BUCKETS),
    ];
    let mut builder =
        PrometheusBuilder::new().set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS)?;
    for (name, buckets) in overrides {
        builder = builder.set_buckets_for_metric(Matcher::Full(name.into()), buckets)?;
    }
    let handle = builder.install_recorder()?;
    // The exporter keeps a description by name, whatever the series' type.
    for (name, help) in HELP {
        metrics::describe_counter!(name, help);
    }
    Ok(handle)
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
                // kube-apiserver names its first (only) storage cluster `etcd-0`.
                metrics::gauge!("apiserver_storage_size_bytes", "storage_cluster_id" => "etcd-0")
                    .set(status.db_size_bytes as f64);
            }
            crate::filters::metrics::report_inflight();
        }
    });
}
