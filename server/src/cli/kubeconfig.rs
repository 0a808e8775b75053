//! The kubeconfig `cluster up` writes, and how the CLI finds replicas' peer addresses in it.
//!
//! Each node gets a cluster entry and a context `node-<i>`. The cluster entry carries a
//! `kuberaft` extension with the node's peer address and the cluster name, which
//! `kuberaft endpoint status` uses to reach the admin service; kubectl ignores it.

use serde::{Deserialize, Serialize};

use crate::config::ServeConfig;

/// The kuberaft extension of a kubeconfig cluster entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KuberaftExtension {
    /// Raft node id.
    pub node_id: u64,
    /// The replica's peer (admin) address.
    pub peer_addr: String,
    /// The cluster's name.
    pub cluster_name: String,
}

/// Renders the kubeconfig for a set of replicas; `node-1` is the current context.
pub fn render(configs: &[ServeConfig]) -> anyhow::Result<String> {
    let clusters: Vec<serde_json::Value> = configs
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": format!("node-{}", c.id),
                "cluster": {
                    "server": format!("http://{}", c.me().api_addr),
                    "extensions": [{
                        "name": "kuberaft",
                        "extension": KuberaftExtension {
                            node_id: c.id,
                            peer_addr: c.me().peer_addr.clone(),
                            cluster_name: c.cluster_name.clone(),
                        },
                    }],
                },
            })
        })
        .collect();
    let contexts: Vec<serde_json::Value> = configs
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": format!("node-{}", c.id),
                "context": {"cluster": format!("node-{}", c.id), "user": "kuberaft"},
            })
        })
        .collect();
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "contexts": contexts,
        "current-context": configs.first().map(|c| format!("node-{}", c.id)).unwrap_or_default(),
        "users": [{"name": "kuberaft", "user": {}}],
        "preferences": {},
    });
    Ok(serde_yaml::to_string(&doc)?)
}

/// The kuberaft extensions found in a kubeconfig's cluster entries.
pub fn replicas(text: &str) -> anyhow::Result<Vec<KuberaftExtension>> {
    let doc: serde_yaml::Value = serde_yaml::from_str(text)?;
    let mut out = Vec::new();
    for cluster in doc
        .get("clusters")
        .and_then(|c| c.as_sequence())
        .into_iter()
        .flatten()
    {
        let exts = cluster
            .get("cluster")
            .and_then(|c| c.get("extensions"))
            .and_then(|e| e.as_sequence());
        for ext in exts.into_iter().flatten() {
            if ext.get("name").and_then(|n| n.as_str()) == Some("kuberaft") {
                if let Some(body) = ext.get("extension") {
                    out.push(serde_yaml::from_value(body.clone())?);
                }
            }
        }
    }
    Ok(out)
}
