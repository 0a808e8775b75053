//! The clients of a chaos run: real Kubernetes API clients spread over all replicas, each
//! recording what it did and saw into the shared history.

pub mod churn;
pub mod lease;
pub mod lister;
pub mod register;
pub mod watcher;

use std::time::Duration;

use tokio::sync::watch;

use crate::api::ApiClient;
use crate::history::{Clock, Recorder};
use crate::workload::XorShift;

/// What every workload task gets: one client per replica, the clock, the history, the stop
/// signal and its own seed.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// One API client per replica; a task picks one per operation.
    pub clients: Vec<ApiClient>,
    /// The run's clock.
    pub clock: Clock,
    /// Where records go.
    pub recorder: Recorder,
    /// Becomes `true` when the workload phase ends.
    pub stop: watch::Receiver<bool>,
    /// This task's random source.
    pub rng: XorShift,
}

impl Ctx {
    /// A copy for a new task, with its own random stream derived from `salt`.
    pub fn fork(&self, salt: u64) -> Self {
        let mut c = self.clone();
        c.rng = XorShift::new(self.rng.clone().next_u64() ^ salt.wrapping_mul(0x2545_F491_4F6C_DD1D));
        c
    }

    /// Whether the workload phase has ended.
    pub fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// A random replica's client.
    pub fn any_client(&mut self) -> ApiClient {
        let i = self.rng.below(self.clients.len() as u64) as usize;
        self.clients[i].clone()
    }

    /// Sleeps a random time in `min..max` milliseconds; `true` if the phase ended meanwhile.
    pub async fn pause(&mut self, min_ms: u64, max_ms: u64) -> bool {
        let d = Duration::from_millis(min_ms + self.rng.below(max_ms.saturating_sub(min_ms).max(1)));
        sleep_or_cancel(d, &mut self.stop).await
    }
}

/// Sleeps for `d`; returns `true` if `stop` became true (or its sender went away) first.
pub async fn sleep_or_cancel(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stop.wait_for(|s| *s) => true,
    }
}
