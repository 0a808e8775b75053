//! Whether an aggregated API is available, as kube-aggregator's availability controller
//! decides it: its Service exists and has the port, the port has a ready endpoint, and the
//! backend answers its discovery document (`GET /apis/<group>/<version>`). The verdict is an
//! `Available` condition with kube's reasons and messages; the leader writes it.

use std::time::Duration;

use serde_json::{json, Value};

use super::proxy::Aggregator;
use super::Backend;
use crate::store::services::{self, Unresolved};

/// How long the discovery check may take (kube's is 5 seconds).
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `True` or `False`.
    pub available: bool,
    /// kube's reason (`Passed`, `ServiceNotFound`, `ServicePortError`, `MissingEndpoints`,
    /// `FailedDiscoveryCheck`).
    pub reason: &'static str,
    /// kube's message.
    pub message: String,
    /// The discovery document the backend answered, when it did.
    pub discovery: Option<Value>,
}

/// Checks `backend` now.
pub async fn check(aggregator: &Aggregator, backend: &Backend) -> Verdict {
    let fail = |reason, message| Verdict {
        available: false,
        reason,
        message,
        discovery: None,
    };
    let (ns, svc) = (&backend.namespace, &backend.service);
    match services::resolve(aggregator.cache(), ns, svc, backend.port) {
        Err(Unresolved::ServiceNotFound { .. }) => {
            return fail(
                "ServiceNotFound",
                format!("service/{svc} in {ns:?} is not present"),
            )
        }
        Err(Unresolved::NoPort { port, .. }) => {
            return fail(
                "ServicePortError",
                format!("service/{svc} in {ns:?} is not listening on port {port}"),
            )
        }
        Err(Unresolved::MissingEndpoints { .. }) => {
            return fail(
                "MissingEndpoints",
                format!("endpoints for service/{svc} in {ns:?} have no addresses"),
            )
        }
        Ok(_) => {}
    }
    let path = format!("/apis/{}/{}", backend.group, backend.version);
    match aggregator.get_json(backend, &path, CHECK_TIMEOUT).await {
        Ok(doc) => Verdict {
            available: true,
            reason: "Passed",
            message: "all checks passed".into(),
            discovery: Some(doc),
        },
        Err(e) => fail("FailedDiscoveryCheck", e.to_string()),
    }
}

/// The APIService's status with the verdict as its `Available` condition; `None` when the
/// condition already says so (its transition time moves only when its status does).
pub fn status_with(obj: &Value, verdict: &Verdict, now: &str) -> Option<Value> {
    let status = if verdict.available { "True" } else { "False" };
    let mut conditions: Vec<Value> = obj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let at = conditions.iter().position(|c| c["type"] == "Available");
    if let Some(i) = at {
        let c = &conditions[i];
        if c["status"] == status && c["reason"] == verdict.reason && c["message"] == *verdict.message {
            return None;
        }
    }
    let since = at
        .filter(|i| conditions[*i]["status"] == status)
        .and_then(|i| conditions[i]["lastTransitionTime"].as_str().map(str::to_string))
        .unwrap_or_else(|| now.to_string());
    let condition = json!({"type": "Available", "status": status, "lastTransitionTime": since,
                           "reason": verdict.reason, "message": verdict.message});
    match at {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    Some(json!({"conditions": conditions}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let failed = |message: &str| Verdict {
            available: false,
            reason: "FailedDiscoveryCheck",
            message: message.into(),
            discovery: None,
        };
        let obj = json!({"status": {"conditions": [{"type": "Available", "status": "True",
            "lastTransitionTime": "t0", "reason": "Passed", "message": "all checks passed"}]}});
        let s = status_with(&obj, &failed("down"), "t1").expect("a change");
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "t1");
        assert_eq!(s["conditions"][0]["status"], "False");
        let again = json!({"status": s});
        assert_eq!(status_with(&again, &failed("down"), "t2"), None);
        let other = status_with(&again, &failed("still down"), "t3").expect("a new message");
        assert_eq!(other["conditions"][0]["lastTransitionTime"], "t1");
    }
}
