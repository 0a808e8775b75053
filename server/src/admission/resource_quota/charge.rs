//! A quota charge as the state machine applies it: the merge function every replica registers,
//! which adds what a write uses to a ResourceQuota's `status.used` as the log has the quota at
//! that write, and refuses the write if the quota would go over a hard limit.
//!
//! It runs inside the apply of every replica, so it must give the same bytes everywhere: it
//! reads nothing but the stored quota and the operand (no clock, no cache, no configuration).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::resources;
use crate::store::{Merged, Merger};

/// The name the charge is registered under in every replica's state machine. A change to what
/// the function computes needs a new name, so that replicas of two versions never apply one
/// name differently.
pub const MERGER: &str = "resourcequota.charge/v1";

/// What a write adds to one quota.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operand {
    /// The uid of the quota the charge was planned over (a quota deleted and made again
    /// since is not the one the write was checked against).
    pub uid: String,
    /// What the write adds, as a resource list (`{"pods": "1", "requests.cpu": "500m"}`).
    pub requested: Value,
    /// Whether the hard limits hold (not for a status update, which kube lets through).
    pub enforced: bool,
}

/// The merge that charges `operand` to the quota stored at `key`.
pub fn merged(key: &str, operand: &Operand) -> Merged {
    Merged {
        key: key.to_string(),
        merger: MERGER,
        operand: serde_json::to_vec(operand).unwrap_or_default(),
    }
}

/// The charge's merge function (see the module's documentation).
pub struct QuotaCharge;

impl Merger for QuotaCharge {
    fn merge(&self, current: Option<&[u8]>, operand: &[u8]) -> Result<Vec<u8>, String> {
        let current = current.ok_or("the quota no longer exists")?;
        let operand: Operand =
            serde_json::from_slice(operand).map_err(|e| format!("the charge is not readable: {e}"))?;
        let mut quota: Value = serde_json::from_slice(current)
            .map_err(|_| "the quota is not stored as plain JSON".to_string())?;
        if quota["metadata"]["uid"].as_str().unwrap_or("") != operand.uid {
            return Err("the quota was replaced".into());
        }
        let requested = resources::parse(&operand.requested);
        let mut used = resources::parse(&quota["status"]["used"]);
        if let Some(name) = requested.keys().find(|n| !used.contains_key(*n)) {
            return Err(format!("the usage of {name} is not known"));
        }
        resources::add(&mut used, &requested);
        if operand.enforced {
            let hard = resources::parse(&quota["status"]["hard"]);
            let over = requested.keys().find(|n| {
                let total = used.get(*n).map_or(0, |u| u.value);
                hard.get(*n).is_some_and(|h| total > h.value)
            });
            if let Some(name) = over {
                return Err(format!("{name} would exceed its hard limit"));
            }
        }
        let status = quota
            .get_mut("status")
            .and_then(Value::as_object_mut)
            .ok_or("the quota has no status")?;
        status.insert("used".into(), resources::to_json(&used));
        serde_json::to_vec(&quota).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(used: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "metadata": {"name": "q", "namespace": "shop", "uid": "u1"},
            "spec": {"hard": {"pods": "2", "requests.memory": "1Gi"}},
            "status": {"hard": {"pods": "2", "requests.memory": "1Gi"}, "used": used},
        }))
        .unwrap()
    }

    fn charge(requested: Value, enforced: bool) -> Vec<u8> {
        serde_json::to_vec(&Operand {
            uid: "u1".into(),
            requested,
            enforced,
        })
        .unwrap()
    }

    #[test]
    fn a_charge_adds_to_the_usage_as_stored_and_keeps_the_rest() {
        let before = stored(json!({"pods": "1", "requests.memory": "512Mi"}));
        let after = QuotaCharge
            .merge(
                Some(&before),
                &charge(json!({"pods": "1", "requests.memory": "256Mi"}), true),
            )
            .expect("within the quota");
        let after: Value = serde_json::from_slice(&after).unwrap();
        assert_eq!(
            after["status"]["used"],
            json!({"pods": "2", "requests.memory": "768Mi"})
        );
        assert_eq!(
            after["metadata"],
            json!({"name": "q", "namespace": "shop", "uid": "u1"})
        );
        assert_eq!(
            after["status"]["hard"],
            json!({"pods": "2", "requests.memory": "1Gi"})
        );
    }

    #[test]
    fn a_charge_over_a_hard_limit_is_refused_unless_not_enforced() {
        let full = stored(json!({"pods": "2", "requests.memory": "0"}));
        assert_eq!(
            QuotaCharge.merge(Some(&full), &charge(json!({"pods": "1"}), true)),
            Err("pods would exceed its hard limit".to_string())
        );
        let after = QuotaCharge
            .merge(Some(&full), &charge(json!({"pods": "1"}), false))
            .expect("a status update is not limited");
        let after: Value = serde_json::from_slice(&after).unwrap();
        assert_eq!(after["status"]["used"]["pods"], "3");
    }

    #[test]
    fn a_charge_to_a_quota_gone_replaced_unknown_or_encrypted_is_refused() {
        let op = charge(json!({"pods": "1"}), true);
        assert!(QuotaCharge.merge(None, &op).is_err());
        assert!(QuotaCharge
            .merge(Some(b"k8s:enc:aesgcm:v1:key1:..."), &op)
            .is_err());
        assert!(QuotaCharge.merge(Some(&stored(json!({}))), &op).is_err());
        let other = serde_json::to_vec(&Operand {
            uid: "u2".into(),
            requested: json!({"pods": "1"}),
            enforced: true,
        })
        .unwrap();
        assert_eq!(
            QuotaCharge.merge(Some(&stored(json!({"pods": "0"}))), &other),
            Err("the quota was replaced".to_string())
        );
        assert!(QuotaCharge
            .merge(Some(&stored(json!({"pods": "0"}))), b"{")
            .is_err());
    }
}
