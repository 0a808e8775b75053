//! Legacy ServiceAccount tokens: the part of kube-controller-manager's tokens controller that
//! clusters still run. A Secret of type `kubernetes.io/service-account-token` whose
//! `kubernetes.io/service-account.name` annotation names a ServiceAccount gets a token that
//! never expires (valid while the Secret holds it and the ServiceAccount exists), the cluster CA
//! and its namespace in `data`, and the ServiceAccount's uid annotated; a Secret whose
//! ServiceAccount does not exist (or has another uid) is deleted, as kube does.
//!
//! Level-triggered and stateless like the other controllers: a pass looks at every such Secret
//! in the leader's watch cache; passes run after changes to Secrets or ServiceAccounts and every
//! [`super::RESYNC`]; a failed pass is retried later, never at once.

use std::sync::Arc;

use base64::Engine;
use serde_json::{json, Value};

use crate::authentication::service_account::LEGACY_SECRET_TYPE;
use crate::authentication::ServiceAccountTokens;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::field_validation::Decoded;
use crate::machinery::meta::meta_str;
use crate::registry::delete::{self, DeleteOptions};
use crate::registry::options::WriteOptions;
use crate::registry::update;
use crate::scheme::LiveRegistry;
use crate::store::{keys, Store};

/// The annotation naming the Secret's ServiceAccount.
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// The annotation holding the ServiceAccount's uid.
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// Whose writes these are, in `managedFields`.
const FIELD_MANAGER: &str = "kube-controller-manager";

/// What the controller does with one token Secret.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Fill it in: the Secret as it must be (with the resourceVersion it was read at); the
    /// token is issued only when the Secret has none.
    Populate(Value),
    /// Delete it: its ServiceAccount is gone.
    Delete,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What `secret` needs given its ServiceAccount `account` (`None`: absent); `issue` makes a
/// token for (namespace, name, uid, secret name) when one is needed.
pub fn decide(
    secret: &Value,
    account: Option<&Value>,
    ca_pem: Option<&str>,
    issue: impl FnOnce(&str, &str, &str, &str) -> Result<String, String>,
) -> Result<Option<Action>, String> {
    let meta = &secret["metadata"];
    if secret["type"] != LEGACY_SECRET_TYPE || meta.get("deletionTimestamp").is_some() {
        return Ok(None);
    }
    let Some(name) = meta["annotations"][NAME_ANNOTATION].as_str() else {
        return Ok(None);
    };
    let Some(account) = account else {
        return Ok(Some(Action::Delete));
    };
    let uid = account["metadata"]["uid"].as_str().unwrap_or_default();
    match meta["annotations"][UID_ANNOTATION].as_str() {
        Some(annotated) if annotated != uid => return Ok(Some(Action::Delete)),
        _ => {}
    }
    let namespace = meta_str(secret, "namespace").unwrap_or_default();
    let secret_name = meta_str(secret, "name").unwrap_or_default();
    let mut next = secret.clone();
    next["metadata"]["annotations"][UID_ANNOTATION] = json!(uid);
    if !next["data"].is_object() {
        next["data"] = json!({});
    }
    let data = &mut next["data"];
    if let Some(ca) = ca_pem {
        data["ca.crt"] = json!(b64(ca.as_bytes()));
    }
    data["namespace"] = json!(b64(namespace.as_bytes()));
    if data["token"].as_str().is_none_or(str::is_empty) {
        data["token"] = json!(b64(issue(namespace, name, uid, secret_name)?.as_bytes()));
    }
    Ok((next != *secret).then_some(Action::Populate(next)))
}

/// What the controller needs besides the store.
struct Tokens {
    live: Arc<LiveRegistry>,
    issuer: ServiceAccountTokens,
    ca_pem: Option<String>,
}

/// One pass over the token Secrets in the watch cache; the first failure is returned after
/// every Secret was tried. A write that lost a race is no failure: the change that won brings
/// another pass.
async fn reconcile(store: &Store, tokens: &Tokens) -> ApiResult<()> {
    let Some(secrets) = store.cache().list(&keys::type_prefix("", "secrets"), None, None) else {
        return Ok(());
    };
    let registry = tokens.live.current();
    let mut failure = None;
    for (_, cached) in &secrets.objects {
        let secret = cached.value();
        if secret["type"] != LEGACY_SECRET_TYPE {
            continue;
        }
        let (Some(ns), Some(name)) = (meta_str(&secret, "namespace"), meta_str(&secret, "name")) else {
            continue;
        };
        let Some(account_name) = secret["metadata"]["annotations"][NAME_ANNOTATION].as_str() else {
            continue;
        };
        let key = keys::object("", "serviceaccounts", Some(ns), account_name);
        let mut account = store.cache().get(&key).ok().flatten().map(|a| a.value());
        if account.is_none() {
            // Absent here may be only not here yet: ask the leader's store before deleting.
            account = store.get(&key, true).await?.map(|s| s.obj);
        }
        let action = decide(
            &secret,
            account.as_ref(),
            tokens.ca_pem.as_deref(),
            |ns, sa, uid, secret| tokens.issuer.issue_legacy(ns, sa, uid, secret),
        )
        .map_err(ApiError::internal)?;
        let req = super::core_request(&registry, "secrets", ns, Some(name))?;
        let outcome = match action {
            None => continue,
            Some(Action::Delete) => delete::delete(store, &req, &DeleteOptions::default()).await,
            Some(Action::Populate(next)) => {
                let body = Decoded {
                    value: next,
                    duplicates: Vec::new(),
                };
                update::update(store, &req, &WriteOptions::by(FIELD_MANAGER), body).await
            }
        };
        match outcome {
            Ok(_) => tracing::info!(
                namespace = ns,
                secret = name,
                "service account token secret reconciled"
            ),
            Err(e) if matches!(e.code, 404 | 409) => {}
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    failure.map_or(Ok(()), Err)
}

fn relevant(key: &str) -> bool {
    key.starts_with(&keys::type_prefix("", "secrets"))
        || key.starts_with(&keys::type_prefix("", "serviceaccounts"))
}

async fn run(store: Store, tokens: Arc<Tokens>) {
    super::run_passes(&store, "serviceaccount-token", relevant, || {
        reconcile(&store, &tokens)
    })
    .await;
}

/// Runs the controller while this replica leads; tokens are signed by `issuer`, and `ca_pem`
/// (when the replica has a CA) goes into each Secret's `ca.crt`.
pub fn spawn(store: Store, live: Arc<LiveRegistry>, issuer: ServiceAccountTokens, ca_pem: Option<String>) {
    let tokens = Arc::new(Tokens { live, issuer, ca_pem });
    super::run_while_leader(store, "serviceaccount-token", move |store| {
        run(store, tokens.clone())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(annotations: Value, data: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": LEGACY_SECRET_TYPE,
            "metadata": {"name": "robot-token", "namespace": "shop", "resourceVersion": "7", "annotations": annotations},
            "data": data,
        })
    }

    fn account(uid: &str) -> Value {
        json!({"metadata": {"name": "robot", "namespace": "shop", "uid": uid}})
    }

    fn issue(ns: &str, sa: &str, uid: &str, secret: &str) -> Result<String, String> {
        Ok(format!("jwt:{ns}:{sa}:{uid}:{secret}"))
    }

    #[test]
    fn a_new_token_secret_gets_a_token_the_ca_its_namespace_and_the_uid() {
        let s = secret(json!({NAME_ANNOTATION: "robot"}), json!(null));
        let Ok(Some(Action::Populate(next))) = decide(&s, Some(&account("u1")), Some("CA"), issue) else {
            panic!("expected a populate");
        };
        assert_eq!(next["metadata"]["annotations"][UID_ANNOTATION], "u1");
        assert_eq!(next["metadata"]["resourceVersion"], "7");
        assert_eq!(
            next["data"],
            json!({"ca.crt": b64(b"CA"), "namespace": b64(b"shop"), "token": b64(b"jwt:shop:robot:u1:robot-token")})
        );
        // Filled in, it is left alone (the token is never reissued).
        assert_eq!(
            decide(&next, Some(&account("u1")), Some("CA"), |_, _, _, _| Err(
                "reissued".into()
            )),
            Ok(None)
        );
    }

    #[test]
    fn a_secret_whose_account_is_gone_or_replaced_is_deleted() {
        let s = secret(json!({NAME_ANNOTATION: "robot", UID_ANNOTATION: "u1"}), json!({}));
        assert_eq!(decide(&s, None, None, issue), Ok(Some(Action::Delete)));
        assert_eq!(
            decide(&s, Some(&account("u2")), None, issue),
            Ok(Some(Action::Delete))
        );
    }

    #[test]
    fn other_secrets_are_not_touched() {
        let mut opaque = secret(json!({NAME_ANNOTATION: "robot"}), json!({}));
        opaque["type"] = json!("Opaque");
        assert_eq!(decide(&opaque, None, None, issue), Ok(None));
        let unnamed = secret(json!({}), json!({}));
        assert_eq!(decide(&unnamed, None, None, issue), Ok(None));
    }
}
