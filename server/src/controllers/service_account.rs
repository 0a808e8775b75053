//! The ServiceAccount controller: every active namespace has a ServiceAccount named `default`
//! (the one its pods run as when they name none), created when the namespace appears and
//! again whenever it is deleted, as kube-controller-manager's `serviceaccount` controller
//! does. It creates the bare object — no labels, no annotations — and never changes an
//! existing one. The mechanism is [`super::per_namespace`].

use std::sync::Arc;

use serde_json::{json, Value};

use super::per_namespace::{self, Ensured};
use crate::scheme::LiveRegistry;
use crate::store::Store;

/// The ServiceAccount every namespace has.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The `default` ServiceAccount, as an object every namespace holds.
pub struct DefaultServiceAccount;

impl Ensured for DefaultServiceAccount {
    fn controller(&self) -> &'static str {
        "serviceaccount"
    }

    fn plural(&self) -> &'static str {
        "serviceaccounts"
    }

    fn name(&self) -> &'static str {
        DEFAULT_SERVICE_ACCOUNT
    }

    fn object(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_SERVICE_ACCOUNT}})
    }

    fn repaired(&self, _current: &Value) -> Option<Value> {
        None
    }
}

/// Runs the ServiceAccount controller while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>) {
    per_namespace::spawn(store, live, Arc::new(DefaultServiceAccount));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::per_namespace::{decide, Action};

    #[test]
    fn a_missing_default_is_created_bare_and_an_edited_one_left_alone() {
        assert_eq!(
            decide(&DefaultServiceAccount, None),
            Some(Action::Create(
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
            ))
        );
        let edited = json!({"metadata": {"name": "default", "labels": {"team": "a"}},
                            "automountServiceAccountToken": false});
        assert_eq!(decide(&DefaultServiceAccount, Some(&edited)), None);
    }
}
