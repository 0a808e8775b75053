//! Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
//! candidates read the Lease, take it over only after it went unrenewed for the lease duration
//! (measured on their own clock from when they saw it change), and renew it with the
//! resourceVersion precondition. A leader gives up when no renew succeeded within the renew
//! deadline of the last successful one's start.

use std::time::Duration;

use kuberaft::machinery::timestamp;
use serde_json::{json, Value};

use crate::api;
use crate::history::{Call, LeaseRecord};
use crate::workloads::Ctx;

/// The Lease's name.
pub const LEASE: &str = "chaos-leader";
/// `spec.leaseDurationSeconds`: how long others wait before taking an unrenewed lease.
pub const LEASE_DURATION: Duration = Duration::from_secs(3);
/// How long a leader keeps leading without a successful renew.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(2);
/// Time between attempts.
const RETRY_PERIOD_MS: u64 = 300;

/// A MicroTime-formatted timestamp is not needed by the checker; the spec carries the run's
/// clock in seconds as text so the object stays valid and readable.
fn spec(holder: &str, transitions: u64, now: f64) -> Value {
    json!({
        "holderIdentity": holder,
        "leaseDurationSeconds": LEASE_DURATION.as_secs(),
        "leaseTransitions": transitions,
        "renewTime": micro_time(now),
    })
}

/// The fixed epoch the run's relative clock is written from: 2000-01-01T00:00:00Z.
const EPOCH: i64 = 946_684_800;

/// A Kubernetes MicroTime for `secs` seconds after [`EPOCH`] (the run's clock is relative).
fn micro_time(secs: f64) -> String {
    let whole = secs.floor();
    let micros = ((secs - whole) * 1e6) as i32;
    timestamp::format_rfc3339(EPOCH + whole as i64, micros * 1000, true).unwrap_or_default()
}

/// One candidate until the phase ends; its API calls go to replica `home` (client-go talks to
/// one endpoint).
pub async fn run(mut ctx: Ctx, name: String, home: usize) {
    let client = ctx.clients[home % ctx.clients.len()].clone();
    // (resourceVersion, local time it was first seen) of the last observed record.
    let mut observed: Option<(u64, f64)> = None;
    while !ctx.pause(RETRY_PERIOD_MS, RETRY_PERIOD_MS + 1).await {
        let Ok(current) = client.get_lease(LEASE).await else {
            continue;
        };
        let now = ctx.clock.now();
        let start = now;
        let (result, transitions, action) = match current {
            None => (
                client.create_lease(LEASE, spec(&name, 0, now)).await,
                0,
                "acquire",
            ),
            Some(lease) => {
                let rv = api::resource_version(&lease);
                if observed.is_none_or(|(seen, _)| seen != rv) {
                    observed = Some((rv, now));
                }
                let seen_at = observed.map_or(now, |(_, t)| t);
                let s = &lease["spec"];
                let holder = s["holderIdentity"].as_str().unwrap_or_default();
                let transitions = s["leaseTransitions"].as_u64().unwrap_or(0);
                let expired = now >= seen_at + LEASE_DURATION.as_secs_f64();
                if holder == name {
                    let r = client
                        .update_lease(LEASE, &rv.to_string(), spec(&name, transitions, now))
                        .await;
                    (r, transitions, "renew")
                } else if holder.is_empty() || expired {
                    let r = client
                        .update_lease(LEASE, &rv.to_string(), spec(&name, transitions + 1, now))
                        .await;
                    (r, transitions + 1, "acquire")
                } else {
                    continue;
                }
            }
        };
        let call = Call::finish(&ctx.clock, client.replica, start, true, &result);
        let mut history = ctx.recorder.lock();
        match result {
            Ok(lease) => {
                observed = Some((api::resource_version(&lease), ctx.clock.now()));
                history.leases.push(LeaseRecord {
                    candidate: name.clone(),
                    action,
                    term: transitions,
                    holder: name.clone(),
                    call,
                });
            }
            Err(_) => history.lease_calls.push(call),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_times_are_rfc3339_with_microseconds() {
        assert_eq!(micro_time(3725.5), "2000-01-01T01:02:05.500000Z");
        assert_eq!(micro_time(0.0), "2000-01-01T00:00:00.000000Z");
    }

    #[test]
    fn others_wait_longer_than_a_leader_keeps_leading() {
        assert!(LEASE_DURATION > RENEW_DEADLINE);
    }
}
