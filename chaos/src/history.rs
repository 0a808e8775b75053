//! What the clients and the fault injector saw, with times on one clock: the input of every
//! checker and of the report. Nothing here interprets the history; it only records it.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::api::ApiError;

/// Seconds since the start of the run, shared by every recorder so times compare.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    t0: Instant,
    wall_t0: SystemTime,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        Self {
            t0: Instant::now(),
            wall_t0: SystemTime::now(),
        }
    }

    /// The UTC time of day (`HH:MM:SS.mmm`) of run time `t`, to find it in the replicas' logs.
    pub fn utc(&self, t: f64) -> String {
        let ms = (self.wall_t0 + std::time::Duration::from_secs_f64(t.max(0.0)))
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let s = ms / 1000;
        format!(
            "{:02}:{:02}:{:02}.{:03}",
            (s / 3600) % 24,
            (s / 60) % 60,
            s % 60,
            ms % 1000
        )
    }

    /// Seconds since the start.
    pub fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Acknowledged.
    Ok,
    /// Certainly not applied.
    Fail,
    /// May or may not have been applied (timeout, 5xx, broken connection).
    Unknown,
}

/// When and where an operation ran and how it ended.
#[derive(Debug, Clone, Serialize)]
pub struct Call {
    /// The replica the request went to.
    pub replica: usize,
    /// Invocation time (seconds since the start).
    pub start: f64,
    /// Completion time (seconds since the start).
    pub end: f64,
    /// How it ended.
    pub outcome: Outcome,
    /// The error, if it failed.
    pub error: Option<String>,
    /// Whether the failure counts against availability (5xx or no answer).
    pub unavailable: bool,
    /// Whether it was a write (the availability measures look at writes).
    pub write: bool,
}

impl Call {
    /// A finished call that started at `start`, classified from its result.
    pub fn finish<T>(
        clock: &Clock,
        replica: usize,
        start: f64,
        write: bool,
        result: &Result<T, ApiError>,
    ) -> Self {
        let (outcome, error, unavailable) = match result {
            Ok(_) => (Outcome::Ok, None, false),
            Err(e) => (
                if e.is_definite() {
                    Outcome::Fail
                } else {
                    Outcome::Unknown
                },
                Some(e.to_string()),
                e.is_unavailability(),
            ),
        };
        Self {
            replica,
            start,
            end: clock.now(),
            outcome,
            error,
            unavailable,
            write,
        }
    }
}

/// An operation on one register (a ConfigMap's `data.value`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum RegisterOp {
    /// A Most Recent GET; `value` is what it returned (`None`: not found).
    Read {
        /// The register's name.
        key: String,
        /// The value read (meaningful when the call is ok).
        value: Option<String>,
    },
    /// A blind merge patch of the value.
    Write {
        /// The register's name.
        key: String,
        /// The value written (unique in the run).
        value: String,
    },
    /// A PUT with the resourceVersion of a read that returned `expected`.
    Cas {
        /// The register's name.
        key: String,
        /// The value the precondition's resourceVersion carried.
        expected: String,
        /// The value written (unique in the run).
        value: String,
    },
}

impl RegisterOp {
    /// The register this operation is on.
    pub fn key(&self) -> &str {
        match self {
            RegisterOp::Read { key, .. } | RegisterOp::Write { key, .. } | RegisterOp::Cas { key, .. } => key,
        }
    }
}

/// A recorded register operation.
#[derive(Debug, Clone, Serialize)]
pub struct RegisterRecord {
    /// The client that issued it.
    pub client: String,
    /// What it did.
    pub op: RegisterOp,
    /// How it went.
    pub call: Call,
}

/// A create or delete of a churn object.
#[derive(Debug, Clone, Serialize)]
pub struct ChurnRecord {
    /// The unique id the create wrote into the object's data.
    pub id: String,
    /// `create` or `delete`.
    pub action: &'static str,
    /// The object's name, when known (a create with unknown outcome has none).
    pub name: Option<String>,
    /// How it went.
    pub call: Call,
}

/// A successful write of the election Lease, as the candidate saw it acknowledged.
#[derive(Debug, Clone, Serialize)]
pub struct LeaseRecord {
    /// The candidate that wrote it.
    pub candidate: String,
    /// `acquire` (holder changed, or created) or `renew`.
    pub action: &'static str,
    /// `spec.leaseTransitions` after the write: the term.
    pub term: u64,
    /// The holder the write set.
    pub holder: String,
    /// How it went.
    pub call: Call,
}

/// One event as a watcher received it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED` or `BOOKMARK`.
    pub kind: String,
    /// The object's name (empty for bookmarks).
    pub name: String,
    /// The event's resourceVersion.
    pub rv: u64,
    /// The object's `data.value` (registers) or `data.id` (churn), to compare contents.
    pub content: String,
}

/// One connection of a watch stream.
#[derive(Debug, Clone, Serialize)]
pub struct WatchSegment {
    /// The replica it was opened on.
    pub replica: usize,
    /// The resourceVersion it resumed from.
    pub from_rv: u64,
    /// When it was opened.
    pub start: f64,
    /// Events in the order received.
    pub events: Vec<WatchEvent>,
    /// How it ended (error text), if not by the server's timeout.
    pub end_error: Option<String>,
}

/// A watcher's whole life: one logical stream resumed over many connections.
#[derive(Debug, Clone, Serialize)]
pub struct WatchRecord {
    /// The watcher.
    pub watcher: String,
    /// Its connections in order.
    pub segments: Vec<WatchSegment>,
}

/// One complete paginated list.
#[derive(Debug, Clone, Serialize)]
pub struct ListRecord {
    /// The client that listed.
    pub client: String,
    /// The resourceVersion of every page, in order.
    pub page_rvs: Vec<u64>,
    /// (name, resourceVersion) of every item in the order received.
    pub items: Vec<(String, u64)>,
    /// When the first page was requested.
    pub start: f64,
}

/// A fault as injected: what, on whom, from when to when.
#[derive(Debug, Clone, Serialize)]
pub struct FaultWindow {
    /// The kind (`kill`, `pause`, `partition`, `netem`, `restart`).
    pub kind: String,
    /// A human-readable description (targets, parameters).
    pub detail: String,
    /// Start (seconds since the start of the run).
    pub start: f64,
    /// End: when it was healed and the affected replicas were serving again.
    pub end: f64,
    /// The start as UTC time of day, to find it in the replicas' logs.
    pub start_utc: String,
    /// Whether it hit the replica that was leader when it started.
    pub hit_leader: bool,
}

/// Everything recorded in one run.
#[derive(Debug, Default, Clone, Serialize)]
pub struct History {
    /// Register operations.
    pub registers: Vec<RegisterRecord>,
    /// Churn creates and deletes.
    pub churn: Vec<ChurnRecord>,
    /// Acknowledged Lease writes.
    pub leases: Vec<LeaseRecord>,
    /// Lease calls that did not succeed (for availability).
    pub lease_calls: Vec<Call>,
    /// Watch streams.
    pub watches: Vec<WatchRecord>,
    /// Watches started without a resourceVersion (initial events, then changes).
    pub initial_watches: Vec<WatchSegment>,
    /// Paginated lists.
    pub lists: Vec<ListRecord>,
    /// Injected faults.
    pub faults: Vec<FaultWindow>,
}

impl History {
    /// Every call of the run that wrote (registers, churn, leases), for availability.
    pub fn write_calls(&self) -> Vec<&Call> {
        let mut calls: Vec<&Call> = self
            .registers
            .iter()
            .map(|r| &r.call)
            .chain(self.churn.iter().map(|c| &c.call))
            .chain(self.leases.iter().map(|l| &l.call))
            .chain(self.lease_calls.iter())
            .filter(|c| c.write)
            .collect();
        calls.sort_by(|a, b| a.start.total_cmp(&b.start));
        calls
    }
}

/// A shared, appendable history.
#[derive(Debug, Clone, Default)]
pub struct Recorder(Arc<Mutex<History>>);

impl Recorder {
    /// Locks the history for appending; a poisoned lock (a panicked recorder) still yields it,
    /// since records are appended whole.
    pub fn lock(&self) -> MutexGuard<'_, History> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> History {
        self.lock().clone()
    }
}
