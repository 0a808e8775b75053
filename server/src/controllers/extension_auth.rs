//! The `extension-apiserver-authentication` ConfigMap in `kube-system`: what an aggregated
//! API server needs to trust this server's callers, as kube-apiserver's cluster
//! authentication trust controller publishes it — the client CA, the front-proxy CA that
//! signs the proxy's client certificate, the name that certificate carries, and the headers
//! the proxy names the caller in (each list JSON-encoded). The leader creates it and puts its
//! data back when it is changed.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::machinery::errors::ApiResult;
use crate::pki::layout::FRONT_PROXY_CLIENT;
use crate::scheme::LiveRegistry;
use crate::store::{keys, Store};

/// The ConfigMap's name.
pub const NAME: &str = "extension-apiserver-authentication";
/// Its namespace.
pub const NAMESPACE: &str = "kube-system";

/// The ConfigMap's data for a cluster CA and a front-proxy CA (PEM).
pub fn data(client_ca: &str, front_proxy_ca: &str) -> Value {
    let list = |items: &[&str]| serde_json::to_string(items).unwrap_or_default();
    json!({
        "client-ca-file": client_ca,
        "requestheader-allowed-names": list(&[FRONT_PROXY_CLIENT]),
        "requestheader-client-ca-file": front_proxy_ca,
        "requestheader-extra-headers-prefix": list(&["X-Remote-Extra-"]),
        "requestheader-group-headers": list(&["X-Remote-Group"]),
        "requestheader-uid-headers": list(&["X-Remote-Uid"]),
        "requestheader-username-headers": list(&["X-Remote-User"]),
    })
}

async fn reconcile(store: &Store, live: &LiveRegistry, data: &Value) -> ApiResult<()> {
    let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data});
    match super::ensure(store, &live.current(), ("", "configmaps"), desired, &["data"]).await {
        // kube-system is not there yet: its creation brings another pass.
        Err(e) if e.code == 403 => Ok(()),
        other => other,
    }
}

/// Runs the controller while this replica leads.
pub fn spawn(store: Store, live: Arc<LiveRegistry>, client_ca: String, front_proxy_ca: String) {
    let data = data(&client_ca, &front_proxy_ca);
    super::run_while_leader(store, "extension-apiserver-authentication", move |store| {
        let (live, data) = (live.clone(), data.clone());
        async move {
            let key = keys::object("", "configmaps", Some(NAMESPACE), NAME);
            let namespaces = keys::type_prefix("", "namespaces");
            let relevant = move |k: &str| k == key || k.starts_with(&namespaces);
            super::run_passes(&store, "extension-apiserver-authentication", relevant, || {
                let (store, live, data) = (&store, &live, &data);
                async move { reconcile(store, live, data).await }
            })
            .await;
        }
    });
}
