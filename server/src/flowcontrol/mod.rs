//! API Priority and Fairness, kube-apiserver's overload protection: every request is
//! classified by the first FlowSchema (by `matchingPrecedence`, then name) whose rules match
//! it into a priority level and a flow; a limited level has a share of the replica's seats
//! (`maxRequestsInflight + maxMutatingRequestsInflight`) and queues its overflow fairly among
//! flows (`queueset`), or refuses it; the exempt level (`system:masters`, health probes) is
//! never held back. The configuration is the FlowSchemas and PriorityLevelConfigurations in
//! the store, followed through the watch cache on every replica ([`PriorityAndFairness::follow`]);
//! the mandatory `exempt` and `catch-all` objects are imagined while they are missing.
//!
//! Seats are lent and borrowed between levels as each request starts (`queueset`): a level
//! always has its nominal seats, and borrows the lendable seats others leave idle, up to its
//! borrowing limit. kube instead recomputes every level's limit from its demand every ten
//! seconds; and kube's work estimator gives a large list up to ten seats, where every request
//! here takes one.

pub mod defaults;
pub mod matching;
pub mod queueset;
mod retry_after;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PolicyRulesWithSubjects, PriorityLevelConfiguration};
use sha2::{Digest as _, Sha256};
use tokio::sync::broadcast::error::RecvError;

use crate::store::cacher::{Published, WatchCache};
use crate::store::keys;

pub use matching::{Descriptor, Target};
pub use queueset::{Refusal, Seat};

use queueset::{Limits, Overflow, QueueSet, Seats};
use retry_after::RetryAfter;

/// The API group of the configuration objects.
pub const GROUP: &str = "flowcontrol.apiserver.k8s.io";
/// How long a request waits in a queue at most: a quarter of kube's default request timeout.
pub const QUEUE_WAIT: Duration = Duration::from_secs(15);
/// kube's defaults for what a configuration object leaves out.
const DEFAULT_PRECEDENCE: i32 = 1000;
const DEFAULT_SHARES: i32 = 30;
const DEFAULT_QUEUES: i32 = 64;
const DEFAULT_HAND_SIZE: i32 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;

/// A limited level's seats and queues, kept across reconfigurations while the level exists.
#[derive(Debug)]
struct Limited {
    set: QueueSet,
    retry_after: Mutex<RetryAfter>,
    /// Whether requests are told apart by flow (a queueing level with more than one queue).
    by_flow: AtomicBool,
}

/// A priority level as requests see it.
#[derive(Debug)]
pub struct Level {
    /// The PriorityLevelConfiguration's name.
    pub name: String,
    /// Its uid (empty for an imagined mandatory level).
    pub uid: String,
    /// Its seats, `None` for the exempt level.
    limited: Option<Arc<Limited>>,
}

#[derive(Debug, Clone, Copy)]
enum Distinguisher {
    ByUser,
    ByNamespace,
}

#[derive(Debug)]
struct Schema {
    name: Arc<str>,
    uid: Arc<str>,
    distinguisher: Option<Distinguisher>,
    rules: Vec<PolicyRulesWithSubjects>,
    level: Arc<Level>,
    series: Arc<Series>,
}

/// The series of one FlowSchema and its level, registered once per configuration so that a
/// request only counts (kube's `priority_level` and `flow_schema` labels).
#[derive(Debug)]
pub struct Series {
    /// `apiserver_flowcontrol_dispatched_requests_total`.
    pub dispatched: metrics::Counter,
    /// `apiserver_flowcontrol_current_executing_requests`.
    pub executing: metrics::Gauge,
    /// `apiserver_flowcontrol_current_inqueue_requests`.
    in_queue: metrics::Gauge,
    /// `apiserver_flowcontrol_request_wait_duration_seconds` of requests that executed.
    pub waited: metrics::Histogram,
}

impl Series {
    fn new(level: &str, schema: &str) -> Series {
        let labels = [
            ("priority_level", level.to_string()),
            ("flow_schema", schema.to_string()),
        ];
        let mut executed = labels.to_vec();
        executed.push(("execute", "true".to_string()));
        Series {
            dispatched: metrics::counter!("apiserver_flowcontrol_dispatched_requests_total", &labels),
            executing: metrics::gauge!("apiserver_flowcontrol_current_executing_requests", &labels),
            in_queue: metrics::gauge!("apiserver_flowcontrol_current_inqueue_requests", &labels),
            waited: metrics::histogram!("apiserver_flowcontrol_request_wait_duration_seconds", &executed),
        }
    }
}

/// The configuration in force: the FlowSchemas in matching order, each with its level.
#[derive(Debug, Default)]
struct Config {
    schemas: Vec<Schema>,
    levels: Vec<Arc<Level>>,
}

/// Where a request belongs.
#[derive(Debug, Clone)]
pub struct Classification {
    /// The FlowSchema's name.
    pub flow_schema: Arc<str>,
    /// Its uid (empty for an imagined mandatory FlowSchema).
    pub flow_schema_uid: Arc<str>,
    /// The priority level.
    pub level: Arc<Level>,
    /// The series the request counts in.
    pub series: Arc<Series>,
    /// The flow's hash, which deals its queues.
    flow: u64,
}

/// What a request got from its level.
#[derive(Debug)]
pub enum Admitted {
    /// The exempt level: no seat needed.
    Exempt,
    /// A seat, held until dropped, after waiting `waited` (in a queue when `queued`).
    Seated {
        /// The seat.
        seat: Seat,
        /// How long the request waited for it.
        waited: Duration,
    },
    /// No seat: `429`, with the seconds a client should wait before it tries again.
    Refused {
        /// Why.
        refusal: Refusal,
        /// `Retry-After`.
        retry_after: u64,
        /// Whether the request waited in a queue first (and how long).
        waited: Option<Duration>,
    },
}

/// One level's state, for `/debug/api_priority_and_fairness/dump_priority_levels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelLoad {
    /// The level's name.
    pub name: String,
    /// Its seats (`None`: exempt).
    pub limit: Option<usize>,
    /// Requests executing.
    pub executing: usize,
    /// Requests waiting.
    pub waiting: usize,
}

/// A replica's priority and fairness.
#[derive(Debug)]
pub struct PriorityAndFairness {
    server_limit: usize,
    config: RwLock<Arc<Config>>,
    /// Requests the exempt level ran.
    exempt_dispatched: std::sync::atomic::AtomicU64,
    seats: Arc<Seats>,
    limited: Mutex<HashMap<String, Arc<Limited>>>,
}

impl PriorityAndFairness {
    /// Priority and fairness over `server_limit` seats, configured by the mandatory objects
    /// alone until [`follow`](Self::follow) has read the store's.
    pub fn new(server_limit: usize) -> Arc<Self> {
        let pf = Arc::new(PriorityAndFairness {
            server_limit,
            config: RwLock::default(),
            exempt_dispatched: Default::default(),
            seats: Seats::new(),
            limited: Mutex::default(),
        });
        pf.reconfigure(Vec::new(), Vec::new());
        pf
    }

    fn current(&self) -> Arc<Config> {
        self.config.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the configuration with `schemas` and `levels` as stored. A FlowSchema whose
    /// level is missing or unusable is left out of matching; a limited level keeps its queued
    /// and executing requests across the change.
    pub fn reconfigure(&self, schemas: Vec<FlowSchema>, mut levels: Vec<PriorityLevelConfiguration>) {
        for name in defaults::MANDATORY {
            if !levels.iter().any(|l| l.metadata.name.as_deref() == Some(name)) {
                levels.extend(defaults::priority_level(name));
            }
        }
        levels.retain(usable);
        let share_sum: i64 = levels.iter().map(|l| i64::from(shares(l))).sum();
        let mut limited = self.limited.lock().unwrap_or_else(|p| p.into_inner());
        let mut kept = HashMap::new();
        let mut by_name: HashMap<String, Arc<Level>> = HashMap::new();
        for plc in &levels {
            let name = plc.metadata.name.clone().unwrap_or_default();
            let uid = plc.metadata.uid.clone().unwrap_or_default();
            let state = plc.spec.as_ref().and_then(|s| s.limited.as_ref()).map(|l| {
                let nominal = nominal_limit(self.server_limit, shares(plc), share_sum);
                metrics::gauge!("apiserver_flowcontrol_nominal_limit_seats", "priority_level" => name.clone())
                    .set(nominal as f64);
                // kube's lendable and borrowing limits: percentages of the nominal seats,
                // rounded half away from zero; no borrowing limit is the server's seats.
                let percent_of =
                    |p: i32| (nominal as f64 * f64::from(p.clamp(0, i32::MAX)) / 100.0).round() as usize;
                let limits = Limits {
                    nominal,
                    lendable: percent_of(l.lendable_percent.unwrap_or(0).min(100)),
                    borrowing: l.borrowing_limit_percent.map_or(self.server_limit, percent_of),
                };
                let overflow = overflow(l.limit_response.as_ref());
                let by_flow = matches!(overflow, Overflow::Queue { queues, .. } if queues > 1);
                let state = match limited.remove(&name) {
                    Some(old) => {
                        old.set.reconfigure(limits, overflow);
                        old.by_flow.store(by_flow, Ordering::Relaxed);
                        old
                    }
                    None => Arc::new(Limited {
                        set: self.seats.level(limits, overflow),
                        retry_after: Mutex::default(),
                        by_flow: AtomicBool::new(by_flow),
                    }),
                };
                kept.insert(name.clone(), state.clone());
                state
            });
            if plc.spec.as_ref().is_some_and(|s| s.type_ == "Exempt") {
                metrics::gauge!("apiserver_flowcontrol_nominal_limit_seats", "priority_level" => name.clone())
                    .set(0.0);
            }
            by_name.insert(
                name.clone(),
                Arc::new(Level {
                    name,
                    uid,
                    limited: state,
                }),
            );
        }
        // A level no longer configured keeps no seats: what it runs finishes, what it
        // queues times out.
        let no_seats = Limits {
            nominal: 0,
            lendable: 0,
            borrowing: 0,
        };
        for gone in limited.values() {
            gone.set.reconfigure(no_seats, Overflow::Reject);
        }
        *limited = kept;
        drop(limited);

        let mut schemas: Vec<FlowSchema> = schemas;
        for (name, first) in [(defaults::EXEMPT, true), (defaults::CATCH_ALL, false)] {
            if !schemas.iter().any(|s| s.metadata.name.as_deref() == Some(name)) {
                let imagined = defaults::flow_schema(name).into_iter();
                match first {
                    true => schemas.splice(0..0, imagined).for_each(drop),
                    false => schemas.extend(imagined),
                }
            }
        }
        let mut digested: Vec<(i32, Schema)> = schemas
            .into_iter()
            .filter_map(|fs| {
                let spec = fs.spec?;
                let level = by_name.get(&spec.priority_level_configuration.name)?.clone();
                let distinguisher = match spec.distinguisher_method.as_ref().map(|m| m.type_.as_str()) {
                    Some("ByUser") => Some(Distinguisher::ByUser),
                    Some("ByNamespace") => Some(Distinguisher::ByNamespace),
                    _ => None,
                };
                let name = fs.metadata.name.unwrap_or_default();
                let schema = Schema {
                    series: Arc::new(Series::new(&level.name, &name)),
                    name: name.into(),
                    uid: fs.metadata.uid.unwrap_or_default().into(),
                    distinguisher,
                    rules: spec.rules.unwrap_or_default(),
                    level,
                };
                Some((spec.matching_precedence.unwrap_or(DEFAULT_PRECEDENCE), schema))
            })
            .collect();
        digested.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.name.cmp(&y.name)));
        let mut levels: Vec<Arc<Level>> = by_name.into_values().collect();
        levels.sort_by(|a, b| a.name.cmp(&b.name));
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(Config {
            schemas: digested.into_iter().map(|(_, s)| s).collect(),
            levels,
        });
    }

    /// The FlowSchema, level and flow of a request: the first FlowSchema that matches it, or
    /// `catch-all` (which matches everyone) when none does.
    pub fn classify(&self, d: &Descriptor) -> Classification {
        let config = self.current();
        let schema = config
            .schemas
            .iter()
            .find(|s| matching::any_rule_matches(&s.rules, d))
            .or_else(|| config.schemas.iter().find(|s| &*s.name == defaults::CATCH_ALL));
        let Some(schema) = schema else {
            // Unreachable while the imagined catch-all is digested; exempt rather than refuse.
            return Classification {
                flow_schema: defaults::CATCH_ALL.into(),
                flow_schema_uid: "".into(),
                level: Arc::new(Level {
                    name: defaults::EXEMPT.into(),
                    uid: String::new(),
                    limited: None,
                }),
                series: Arc::new(Series::new(defaults::EXEMPT, defaults::CATCH_ALL)),
                flow: 0,
            };
        };
        let by_flow = schema
            .level
            .limited
            .as_ref()
            .is_some_and(|l| l.by_flow.load(Ordering::Relaxed));
        let distinguisher = match (by_flow, schema.distinguisher) {
            (true, Some(Distinguisher::ByUser)) => d.user,
            (true, Some(Distinguisher::ByNamespace)) => d.namespace(),
            _ => "",
        };
        Classification {
            flow_schema: schema.name.clone(),
            flow_schema_uid: schema.uid.clone(),
            level: schema.level.clone(),
            series: schema.series.clone(),
            // Only a limited level deals queues by flow.
            flow: match schema.level.limited {
                Some(_) => flow_hash(&schema.name, distinguisher),
                None => 0,
            },
        }
    }

    /// A seat for a classified request, after a wait in its level's queue if need be.
    pub async fn admit(&self, c: &Classification) -> Admitted {
        let Some(limited) = &c.level.limited else {
            self.exempt_dispatched.fetch_add(1, Ordering::Relaxed);
            return Admitted::Exempt;
        };
        let started = std::time::Instant::now();
        let in_queue = || {
            let gauge = c.series.in_queue.clone();
            gauge.increment(1.0);
            InQueue(gauge)
        };
        let admission = limited.set.admit(c.flow, QUEUE_WAIT, in_queue).await;
        let waited = started.elapsed();
        match admission.outcome {
            Ok(seat) => Admitted::Seated { seat, waited },
            Err(refusal) => {
                let retry_after = limited
                    .retry_after
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .dropped(retry_after::now_seconds());
                Admitted::Refused {
                    refusal,
                    retry_after,
                    waited: admission.queued.then_some(waited),
                }
            }
        }
    }

    /// Every level's seats and load, by name.
    pub fn loads(&self) -> Vec<LevelLoad> {
        self.current()
            .levels
            .iter()
            .map(|l| {
                let (executing, waiting) = l.limited.as_ref().map_or((0, 0), |s| s.set.load());
                LevelLoad {
                    name: l.name.clone(),
                    limit: l.limited.as_ref().map(|s| s.set.limit()),
                    executing,
                    waiting,
                }
            })
            .collect()
    }

    /// kube's `/debug/api_priority_and_fairness/dump_priority_levels`: a row per level, by
    /// name, its cells joined by `,` and aligned as Go's `tabwriter` aligns them.
    pub fn dump_priority_levels(&self) -> String {
        let mut rows = vec![[
            "PriorityLevelName",
            "ActiveQueues",
            "IsIdle",
            "IsQuiescing",
            "WaitingRequests",
            "ExecutingRequests",
            "DispatchedRequests",
            "RejectedRequests",
            "TimedoutRequests",
            "CancelledRequests",
        ]
        .map(str::to_string)
        .to_vec()];
        for level in &self.current().levels {
            let dump = match &level.limited {
                Some(l) => l.set.dump(),
                None => queueset::Dump {
                    active_queues: 0,
                    waiting: 0,
                    executing: 0,
                    counts: queueset::Counts {
                        dispatched: self.exempt_dispatched.load(Ordering::Relaxed),
                        ..Default::default()
                    },
                },
            };
            let idle = dump.executing == 0 && dump.waiting == 0;
            rows.push(vec![
                level.name.clone(),
                dump.active_queues.to_string(),
                idle.to_string(),
                false.to_string(),
                dump.waiting.to_string(),
                dump.executing.to_string(),
                dump.counts.dispatched.to_string(),
                dump.counts.rejected.to_string(),
                dump.counts.timed_out.to_string(),
                dump.counts.cancelled.to_string(),
            ]);
        }
        tabulated(&rows)
    }

    /// Keeps the configuration equal to the FlowSchemas and priority levels in `cache`: read
    /// at once and again after every change to either (or after the cache was reloaded).
    pub fn follow(self: &Arc<Self>, cache: WatchCache) {
        let pf = self.clone();
        tokio::spawn(async move {
            let schemas = keys::type_prefix(GROUP, "flowschemas");
            let levels = keys::type_prefix(GROUP, "prioritylevelconfigurations");
            let mut changes = cache.list_and_watch("\u{0}").1;
            loop {
                pf.reconfigure(decoded(&cache, &schemas), decoded(&cache, &levels));
                loop {
                    match changes.recv().await {
                        Ok(batch) => match &*batch {
                            Published::Changes { events, .. }
                                if !events
                                    .iter()
                                    .any(|e| e.key.starts_with(&schemas) || e.key.starts_with(&levels)) => {}
                            _ => break,
                        },
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => return,
                    }
                }
            }
        });
    }
}

/// Rows of cells joined by `,\t` as kube writes them through Go's `tabwriter` (minimum width
/// 8, padding 1, spaces): every cell but a line's last padded to its column's widest plus one.
fn tabulated(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .map(|cell| cell.chars().count() + 2)
            .max()
            .unwrap_or(0)
            .max(8)
    };
    let widths: Vec<usize> = (0..columns.saturating_sub(1)).map(width).collect();
    let mut out = String::new();
    for row in rows {
        for (c, cell) in row.iter().enumerate() {
            match widths.get(c).filter(|_| c + 1 < row.len()) {
                Some(w) => out.push_str(&format!("{:<w$}", format!("{cell},"), w = *w)),
                None => out.push_str(cell),
            }
        }
        out.push('\n');
    }
    out
}

/// A request counted in `apiserver_flowcontrol_current_inqueue_requests` while it waits.
struct InQueue(metrics::Gauge);

impl Drop for InQueue {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// The objects of one type in the cache that decode.
fn decoded<T: serde::de::DeserializeOwned>(cache: &WatchCache, prefix: &str) -> Vec<T> {
    cache
        .list(prefix, None, None)
        .map(|snapshot| {
            snapshot
                .objects
                .iter()
                .filter_map(|(key, o)| {
                    serde_json::from_slice(o.item_json())
                        .inspect_err(|e| tracing::warn!(key, error = %e, "not decodable; ignored by priority and fairness"))
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a level's type agrees with its name and its spec (kube ignores a level that does
/// not: `exempt` is the only exempt level, a limited one needs its `limited` part).
fn usable(plc: &PriorityLevelConfiguration) -> bool {
    let exempt_name = plc.metadata.name.as_deref() == Some(defaults::EXEMPT);
    match plc.spec.as_ref() {
        Some(s) if s.type_ == "Exempt" => exempt_name,
        Some(s) if s.type_ == "Limited" => !exempt_name && s.limited.is_some(),
        _ => false,
    }
}

/// A level's nominal concurrency shares (kube's defaults: 30 limited, 0 exempt).
fn shares(plc: &PriorityLevelConfiguration) -> i32 {
    let spec = plc.spec.as_ref();
    match spec.and_then(|s| s.limited.as_ref()) {
        Some(l) => l.nominal_concurrency_shares.unwrap_or(DEFAULT_SHARES),
        None => spec
            .and_then(|s| s.exempt.as_ref())
            .and_then(|e| e.nominal_concurrency_shares)
            .unwrap_or(0),
    }
    .max(0)
}

/// kube's nominal concurrency limit: the level's part of the server's seats, rounded up.
fn nominal_limit(server_limit: usize, shares: i32, share_sum: i64) -> usize {
    if share_sum <= 0 {
        return 0;
    }
    let numerator = server_limit as u128 * shares.max(0) as u128;
    numerator.div_ceil(share_sum as u128) as usize
}

fn overflow(response: Option<&k8s_openapi::api::flowcontrol::v1::LimitResponse>) -> Overflow {
    match response {
        Some(r) if r.type_ == "Queue" => {
            let q = r.queuing.clone().unwrap_or_default();
            let positive = |v: Option<i32>, default: i32| v.unwrap_or(default).max(1) as usize;
            Overflow::Queue {
                queues: positive(q.queues, DEFAULT_QUEUES),
                hand_size: positive(q.hand_size, DEFAULT_HAND_SIZE),
                queue_length_limit: positive(q.queue_length_limit, DEFAULT_QUEUE_LENGTH_LIMIT),
            }
        }
        _ => Overflow::Reject,
    }
}

/// A flow's hash: the FlowSchema's name and the distinguisher, as kube hashes them.
fn flow_hash(schema: &str, distinguisher: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(schema.as_bytes());
    h.update([0u8]);
    h.update(distinguisher.as_bytes());
    let sum = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user<'a>(name: &'a str, groups: &'a [String], target: Target<'a>) -> Descriptor<'a> {
        Descriptor {
            user: name,
            groups,
            target,
        }
    }

    fn defaults_as_stored() -> (Vec<FlowSchema>, Vec<PriorityLevelConfiguration>) {
        let objects = defaults::objects().expect("defaults");
        let with_uid = |o: &serde_json::Value| {
            let mut o = o.clone();
            o["metadata"]["uid"] = json!(format!(
                "uid-{}",
                o["metadata"]["name"].as_str().unwrap_or_default()
            ));
            o
        };
        (
            objects
                .iter()
                .filter(|o| o["kind"] == "FlowSchema")
                .map(|o| serde_json::from_value(with_uid(o)).expect("a FlowSchema"))
                .collect(),
            objects
                .iter()
                .filter(|o| o["kind"] == "PriorityLevelConfiguration")
                .map(|o| serde_json::from_value(with_uid(o)).expect("a level"))
                .collect(),
        )
    }

    #[test]
    fn kubes_defaults_classify_masters_nodes_probes_and_everyone_else() {
        let pf = PriorityAndFairness::new(600);
        let (schemas, levels) = defaults_as_stored();
        pf.reconfigure(schemas, levels);
        let masters = ["system:masters".to_string(), "system:authenticated".to_string()];
        let nodes = ["system:nodes".to_string(), "system:authenticated".to_string()];
        let users = ["system:authenticated".to_string()];
        let anonymous = ["system:unauthenticated".to_string()];
        let get_pods = Target::Resource {
            verb: "get",
            group: "",
            resource: "pods",
            subresource: None,
            namespace: Some("a"),
        };
        let class = |d: Descriptor| {
            let c = pf.classify(&d);
            (
                c.flow_schema.to_string(),
                c.level.name.clone(),
                c.flow_schema_uid.to_string(),
            )
        };
        assert_eq!(
            class(user("admin", &masters, get_pods)),
            ("exempt".into(), "exempt".into(), "uid-exempt".into())
        );
        assert_eq!(class(user("system:node:n1", &nodes, get_pods)).0, "system-nodes");
        assert_eq!(
            class(user("alice", &users, get_pods)),
            (
                "global-default".into(),
                "global-default".into(),
                "uid-global-default".into()
            )
        );
        assert_eq!(
            class(user(
                "system:anonymous",
                &anonymous,
                Target::NonResource {
                    verb: "get",
                    path: "/readyz"
                }
            ))
            .0,
            "probes"
        );
        assert_eq!(
            class(user("system:anonymous", &anonymous, get_pods)).0,
            "global-default"
        );
        // Nothing matches a user in neither of the two groups every user is in: catch-all.
        assert_eq!(
            class(user("nobody", &[], get_pods)),
            ("catch-all".into(), "catch-all".into(), "uid-catch-all".into())
        );
        let loads = pf.loads();
        let limit = |name: &str| loads.iter().find(|l| l.name == name).and_then(|l| l.limit);
        // kube's table for 600 seats: ceil(600 × shares / 245).
        assert_eq!(limit("catch-all"), Some(13));
        assert_eq!(limit("global-default"), Some(49));
        assert_eq!(limit("workload-low"), Some(245));
        assert_eq!(limit("exempt"), None);
    }

    #[test]
    fn dumps_are_aligned_as_gos_tabwriter_aligns_them() {
        let rows = vec![
            vec![
                "PriorityLevelName".to_string(),
                "ActiveQueues".into(),
                "IsIdle".into(),
            ],
            vec!["exempt".to_string(), "0".into(), "true".into()],
        ];
        assert_eq!(
            tabulated(&rows),
            "PriorityLevelName, ActiveQueues, IsIdle\nexempt,            0,            true\n"
        );
        let pf = PriorityAndFairness::new(10);
        let dump = pf.dump_priority_levels();
        let lines: Vec<&str> = dump.lines().collect();
        assert_eq!(lines.len(), 3, "{dump}");
        assert!(
            lines[1].starts_with("catch-all,") && lines[2].starts_with("exempt,"),
            "{dump}"
        );
    }

    #[test]
    fn missing_mandatory_objects_are_imagined_and_dangling_schemas_ignored() {
        let pf = PriorityAndFairness::new(10);
        let dangling: FlowSchema = serde_json::from_value(json!({
            "metadata": {"name": "mine", "uid": "u1"},
            "spec": {"priorityLevelConfiguration": {"name": "nowhere"}, "matchingPrecedence": 2,
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                        "clusterScope": true, "namespaces": ["*"]}]}]}}))
        .expect("a FlowSchema");
        pf.reconfigure(vec![dangling], Vec::new());
        let groups = ["system:authenticated".to_string()];
        let c = pf.classify(&user(
            "alice",
            &groups,
            Target::Resource {
                verb: "list",
                group: "",
                resource: "pods",
                subresource: None,
                namespace: None,
            },
        ));
        assert_eq!((&*c.flow_schema, &*c.flow_schema_uid), ("catch-all", ""));
        // All ten seats go to catch-all: exempt has no shares.
        assert_eq!(c.level.limited.as_ref().map(|l| l.set.limit()), Some(10));
    }
}
