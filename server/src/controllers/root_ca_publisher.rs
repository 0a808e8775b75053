//! The root CA publisher: every active namespace has a ConfigMap `kube-root-ca.crt` whose
//! `ca.crt` is the cluster CA (PEM), so that pods can verify the API server (the token volume
//! the `ServiceAccount` admission plugin mounts projects it), as kube-controller-manager's
//! `root-ca-cert-publisher` does. It is created when the namespace appears and again when it is
//! deleted; when its data is changed, or its description annotation removed, both are put
//! back (other labels and annotations stay). It runs only on a replica with a CA: not with
//! `serve --insecure`, as kube's does not run without a root CA. The mechanism is
//! [`super::per_namespace`].

use std::sync::Arc;

use serde_json::{json, Value};

use super::per_namespace::{self, Ensured};
use crate::scheme::LiveRegistry;
use crate::store::Store;

/// The ConfigMap's name.
pub const CONFIGMAP_NAME: &str = "kube-root-ca.crt";
/// The key of the CA in its data.
const CA_KEY: &str = "ca.crt";
/// The annotation that says what the ConfigMap is for.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
/// kube-controller-manager's description.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// The `kube-root-ca.crt` ConfigMap of a cluster whose CA is `ca_pem`.
pub struct RootCaConfigMap {
    /// The cluster CA, PEM, exactly as its file holds it.
    pub ca_pem: String,
}

impl RootCaConfigMap {
    fn data(&self) -> Value {
        json!({CA_KEY: self.ca_pem})
    }
}

impl Ensured for RootCaConfigMap {
    fn controller(&self) -> &'static str {
        "root-ca-cert-publisher"
    }

    fn plural(&self) -> &'static str {
        "configmaps"
    }

    fn name(&self) -> &'static str {
        CONFIGMAP_NAME
    }

    fn object(&self) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": CONFIGMAP_NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
               "data": self.data()})
    }

    /// The data must be exactly the CA (no other keys) and the description annotation
    /// present; binary data and other metadata are left as they are, as kube's publisher does.
    fn repaired(&self, current: &Value) -> Option<Value> {
        let data = self.data();
        let described = current["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
            .as_str()
            .is_some_and(|d| !d.is_empty());
        if current["data"] == data && described {
            return None;
        }
        let mut next = current.clone();
        let object = next.as_object_mut()?;
        object.insert("data".into(), data);
        let metadata = object.entry("metadata").or_insert_with(|| json!({}));
        let annotations = metadata
            .as_object_mut()?
            .entry("annotations")
            .or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations
            .as_object_mut()?
            .insert(DESCRIPTION_ANNOTATION.into(), json!(DESCRIPTION));
        Some(next)
    }
}

/// Runs the publisher of `ca_pem` while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>, ca_pem: String) {
    per_namespace::spawn(store, live, Arc::new(RootCaConfigMap { ca_pem }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::per_namespace::{decide, Action};

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn publisher() -> RootCaConfigMap {
        RootCaConfigMap { ca_pem: PEM.into() }
    }

    #[test]
    fn a_missing_configmap_is_created_with_the_ca_and_kubes_description() {
        let Some(Action::Create(cm)) = decide(&publisher(), None) else {
            panic!("a create");
        };
        assert_eq!(
            cm,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "kube-root-ca.crt", "annotations": {"kubernetes.io/description":
                       "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                   "data": {"ca.crt": PEM}})
        );
    }

    #[test]
    fn changed_data_is_put_back_and_the_rest_kept() {
        let Some(Action::Create(good)) = decide(&publisher(), None) else {
            panic!("a create");
        };
        let mut current = good.clone();
        current["metadata"]["resourceVersion"] = json!("7");
        assert_eq!(decide(&publisher(), Some(&current)), None);

        let mut edited = current.clone();
        edited["data"] = json!({"ca.crt": "forged", "extra": "x"});
        edited["metadata"]["labels"] = json!({"team": "a"});
        let Some(Action::Update(fixed)) = decide(&publisher(), Some(&edited)) else {
            panic!("an update");
        };
        assert_eq!(fixed["data"], json!({"ca.crt": PEM}));
        assert_eq!(fixed["metadata"]["labels"], json!({"team": "a"}));
        assert_eq!(
            fixed["metadata"]["resourceVersion"], "7",
            "a write of what was read"
        );

        let mut undescribed = current.clone();
        undescribed["metadata"]["annotations"] = json!({"mine": "yes"});
        let Some(Action::Update(fixed)) = decide(&publisher(), Some(&undescribed)) else {
            panic!("an update");
        };
        assert_eq!(fixed["metadata"]["annotations"]["mine"], "yes");
        assert_eq!(
            fixed["metadata"]["annotations"]["kubernetes.io/description"],
            good["metadata"]["annotations"]["kubernetes.io/description"]
        );
    }
}
