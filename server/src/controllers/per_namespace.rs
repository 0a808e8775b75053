//! One object in every namespace: the mechanism behind the controllers that give each active
//! namespace an object of its own (the `default` ServiceAccount, the `kube-root-ca.crt`
//! ConfigMap), as kube-controller-manager's `serviceaccount` and `root-ca-cert-publisher`
//! controllers do.
//!
//! What the object is, and when an existing one must be put right, is an [`Ensured`]; the
//! rest is written once here. A pass reads the namespaces and the objects from the leader's
//! watch cache, creates the object in every active namespace that lacks it and rewrites the
//! ones that must change, through the registry's verbs (so they are admitted, defaulted and
//! recorded in `managedFields` as kube-controller-manager's writes are). Namespaces that are
//! being deleted are left alone. A pass runs when this replica starts leading, after every
//! change to a namespace or to one of the objects (deleted, edited), and every [`super::RESYNC`] in
//! any case; a failed pass is retried after [`super::RETRY`], and later and later while it keeps
//! failing — never at once. The controller keeps no state, so a new leader simply continues.

use std::sync::Arc;

use serde_json::Value;

use crate::machinery::errors::ApiResult;
use crate::machinery::field_validation::Decoded;
use crate::machinery::meta::meta_str;
use crate::registry::options::WriteOptions;
use crate::registry::{create, update};
use crate::scheme::{LiveRegistry, Registry};
use crate::store::{keys, Store};

/// Whose writes these are, in `managedFields`: kube's controllers write as this.
const FIELD_MANAGER: &str = "kube-controller-manager";

/// An object every active namespace holds: one core resource, one name.
pub trait Ensured: Send + Sync + 'static {
    /// The controller's name (kube-controller-manager's), for logs.
    fn controller(&self) -> &'static str;
    /// The resource (plural) of the object, in the core group.
    fn plural(&self) -> &'static str;
    /// The object's name.
    fn name(&self) -> &'static str;
    /// The object to create (its namespace is the one it goes into).
    fn object(&self) -> Value;
    /// The object as it must be when the existing `current` is not right; `None` when it is.
    fn repaired(&self, current: &Value) -> Option<Value>;
}

/// What a pass does in one namespace.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Create this object.
    Create(Value),
    /// Replace the object with this (which carries the resourceVersion it was read at).
    Update(Value),
}

/// Whether a namespace may receive objects: active, not being deleted.
pub fn active(namespace: &Value) -> bool {
    namespace["status"]["phase"] == "Active" && meta_str(namespace, "deletionTimestamp").is_none()
}

/// What `ensured` needs done in a namespace whose object is `current` (`None`: absent).
pub fn decide(ensured: &dyn Ensured, current: Option<&Value>) -> Option<Action> {
    match current {
        None => Some(Action::Create(ensured.object())),
        Some(current) => ensured.repaired(current).map(Action::Update),
    }
}

/// Whether a cache key is a namespace or the ensured object in some namespace.
fn relevant(ensured: &dyn Ensured, key: &str) -> bool {
    let namespaces = keys::type_prefix("", "namespaces");
    let objects = keys::type_prefix("", ensured.plural());
    key.starts_with(&namespaces)
        || key
            .strip_prefix(&objects)
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(_, name)| name == ensured.name())
}

/// Carries out `action` in `namespace`. A write that lost a race (the namespace went or is
/// terminating, the object appeared, changed or went meanwhile) is no failure: the change
/// that won brings another pass.
async fn act(
    store: &Store,
    registry: &Registry,
    ensured: &dyn Ensured,
    namespace: &str,
    action: Action,
) -> ApiResult<()> {
    let opts = WriteOptions::by(FIELD_MANAGER);
    let (verb, outcome) = match action {
        Action::Create(value) => {
            let req = super::core_request(registry, ensured.plural(), namespace, None)?;
            let body = Decoded {
                value,
                duplicates: Vec::new(),
            };
            ("created", create::create(store, &req, &opts, body).await)
        }
        Action::Update(value) => {
            let req = super::core_request(registry, ensured.plural(), namespace, Some(ensured.name()))?;
            let body = Decoded {
                value,
                duplicates: Vec::new(),
            };
            ("updated", update::update(store, &req, &opts, body).await)
        }
    };
    match outcome {
        Ok(_) => {
            tracing::info!(
                controller = ensured.controller(),
                namespace,
                name = ensured.name(),
                "{verb}"
            );
            Ok(())
        }
        Err(e) if matches!(e.code, 403 | 404 | 409) => Ok(()),
        Err(e) => Err(e),
    }
}

/// One pass over the namespaces in the watch cache; returns how many it acted in. Every
/// namespace is tried; the first failure is returned after all of them.
pub async fn reconcile(store: &Store, registry: &Registry, ensured: &dyn Ensured) -> ApiResult<usize> {
    let Some(namespaces) = store
        .cache()
        .list(&keys::type_prefix("", "namespaces"), None, None)
    else {
        return Ok(0);
    };
    let mut acted = 0;
    let mut failure = None;
    for (_, cached) in &namespaces.objects {
        let ns = cached.value();
        let Some(name) = meta_str(&ns, "name").filter(|_| active(&ns)) else {
            continue;
        };
        let key = keys::object("", ensured.plural(), Some(name), ensured.name());
        let current = match store.cache().get(&key) {
            Ok(current) => current.map(|c| c.value()),
            Err(why) => {
                tracing::warn!(controller = ensured.controller(), key, %why, "unreadable; left alone");
                continue;
            }
        };
        let Some(action) = decide(ensured, current.as_ref()) else {
            continue;
        };
        acted += 1;
        if let Err(e) = act(store, registry, ensured, name, action).await {
            failure.get_or_insert(e);
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(acted),
    }
}

async fn run(store: Store, live: Arc<LiveRegistry>, ensured: Arc<dyn Ensured>) {
    super::run_passes(
        &store,
        ensured.controller(),
        |key| relevant(&*ensured, key),
        || async { reconcile(&store, &live.current(), &*ensured).await.map(|_| ()) },
    )
    .await;
}

/// Runs the controller for `ensured` while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>, ensured: Arc<dyn Ensured>) {
    super::run_while_leader(store, ensured.controller(), move |store| {
        run(store, live.clone(), ensured.clone())
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    struct Named;

    impl Ensured for Named {
        fn controller(&self) -> &'static str {
            "test"
        }
        fn plural(&self) -> &'static str {
            "serviceaccounts"
        }
        fn name(&self) -> &'static str {
            "default"
        }
        fn object(&self) -> Value {
            json!({"metadata": {"name": "default"}})
        }
        fn repaired(&self, _current: &Value) -> Option<Value> {
            None
        }
    }

    #[test]
    fn only_active_namespaces_receive_objects() {
        assert!(active(
            &json!({"metadata": {"name": "a"}, "status": {"phase": "Active"}})
        ));
        assert!(!active(
            &json!({"metadata": {"name": "t"}, "status": {"phase": "Terminating"}})
        ));
        assert!(!active(
            &json!({"metadata": {"name": "d", "deletionTimestamp": "2025-01-01T00:00:00Z"}, "status": {"phase": "Active"}})
        ));
        assert!(!active(&json!({"metadata": {"name": "n"}})));
    }

    #[test]
    fn a_missing_object_is_created_and_a_present_one_kept() {
        assert_eq!(
            decide(&Named, None),
            Some(Action::Create(json!({"metadata": {"name": "default"}})))
        );
        assert_eq!(
            decide(&Named, Some(&json!({"metadata": {"name": "default"}}))),
            None
        );
    }

    #[test]
    fn passes_follow_namespaces_and_the_ensured_objects_only() {
        assert!(relevant(&Named, "/registry/core/namespaces/shop"));
        assert!(relevant(&Named, "/registry/core/serviceaccounts/shop/default"));
        assert!(!relevant(&Named, "/registry/core/serviceaccounts/shop/robot"));
        assert!(!relevant(&Named, "/registry/core/serviceaccounts/shop/default-2"));
        assert!(!relevant(&Named, "/registry/core/configmaps/shop/default"));
    }
}
