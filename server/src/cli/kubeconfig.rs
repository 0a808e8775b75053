//! The kubeconfig `cluster up` and `kuberaft certs kubeconfig` write, and how the CLI finds
//! replicas' peer addresses and the credentials in it.
//!
//! Each node gets a cluster entry and a context `node-<i>`. The cluster entry carries the
//! cluster CA and a `kuberaft` extension with the node's peer address and the cluster name,
//! which `kuberaft endpoint status` uses to reach the admin service; kubectl ignores it. The
//! user entry carries a client certificate and key of the cluster CA.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::config::ServeConfig;

/// Who a kubeconfig speaks as, and the CA it trusts.
#[derive(Debug, Clone)]
pub struct ClientCredentials {
    /// The cluster CA, PEM.
    pub ca_pem: String,
    /// The user's name (the kubeconfig's user entry).
    pub user: String,
    /// The user's client certificate, PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

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

/// Renders the kubeconfig for a set of replicas, over TLS as `creds` (plain HTTP without);
/// `node-1` is the current context.
pub fn render(configs: &[ServeConfig], creds: Option<&ClientCredentials>) -> anyhow::Result<String> {
    let scheme = if creds.is_some() { "https" } else { "http" };
    let entries = configs
        .iter()
        .map(|c| {
            let mut cluster = serde_json::json!({
                "server": format!("{scheme}://{}", c.me().api_addr),
            });
            if let Some(creds) = creds {
                cluster["certificate-authority-data"] = b64(&creds.ca_pem).into();
            }
            cluster["extensions"] = serde_json::json!([{
                "name": "kuberaft",
                "extension": KuberaftExtension {
                    node_id: c.id,
                    peer_addr: c.me().peer_addr.clone(),
                    cluster_name: c.cluster_name.clone(),
                },
            }]);
            (format!("node-{}", c.id), cluster)
        })
        .collect();
    document(entries, creds.map_or("kuberaft", |c| c.user.as_str()), creds)
}

/// Renders a kubeconfig for `creds` with one cluster and context per server URL
/// (`server-1`, ...; the first is current), the CA embedded.
pub fn render_servers(servers: &[String], creds: &ClientCredentials) -> anyhow::Result<String> {
    let entries = servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let cluster = serde_json::json!({
                "server": s,
                "certificate-authority-data": b64(&creds.ca_pem),
            });
            (format!("server-{}", i + 1), cluster)
        })
        .collect();
    document(entries, &creds.user, Some(creds))
}

/// A kubeconfig with a cluster and a context of the same name per entry, all for `user`
/// (with `creds`' client certificate); the first context is current.
fn document(
    entries: Vec<(String, serde_json::Value)>,
    user: &str,
    creds: Option<&ClientCredentials>,
) -> anyhow::Result<String> {
    let contexts: Vec<serde_json::Value> = entries
        .iter()
        .map(|(name, _)| serde_json::json!({"name": name, "context": {"cluster": name, "user": user}}))
        .collect();
    let current = entries.first().map(|(name, _)| name.clone()).unwrap_or_default();
    let clusters: Vec<serde_json::Value> = entries
        .into_iter()
        .map(|(name, cluster)| serde_json::json!({"name": name, "cluster": cluster}))
        .collect();
    let credentials = match creds {
        Some(c) => serde_json::json!({
            "client-certificate-data": b64(&c.cert_pem),
            "client-key-data": b64(&c.key_pem),
        }),
        None => serde_json::json!({}),
    };
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "contexts": contexts,
        "current-context": current,
        "users": [{"name": user, "user": credentials}],
        "preferences": {},
    });
    Ok(yaml_serde::to_string(&doc)?)
}

/// The kuberaft extensions found in a kubeconfig's cluster entries.
pub fn replicas(text: &str) -> anyhow::Result<Vec<KuberaftExtension>> {
    let doc: yaml_serde::Value = yaml_serde::from_str(text)?;
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
                    out.push(yaml_serde::from_value(body.clone())?);
                }
            }
        }
    }
    Ok(out)
}

/// The CA and client certificate of a kubeconfig's current context, inline (`*-data`) or as
/// files (relative paths against `base`, the kubeconfig's directory), when it has them.
pub fn credentials(text: &str, base: &std::path::Path) -> anyhow::Result<Option<ClientCredentials>> {
    let doc: yaml_serde::Value = yaml_serde::from_str(text)?;
    let current = doc.get("current-context").and_then(|c| c.as_str()).unwrap_or("");
    let named = |list: &str, name: &str| -> Option<yaml_serde::Value> {
        doc.get(list)?
            .as_sequence()?
            .iter()
            .find(|e| e.get("name").and_then(|n| n.as_str()) == Some(name))
            .cloned()
    };
    let Some(context) = named("contexts", current) else {
        return Ok(None);
    };
    let field = |v: &yaml_serde::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let ctx = context.get("context").cloned().unwrap_or_default();
    let (Some(cluster_name), Some(user_name)) = (field(&ctx, "cluster"), field(&ctx, "user")) else {
        return Ok(None);
    };
    let data = |v: Option<String>| -> anyhow::Result<Option<String>> {
        v.map(|d| {
            let bytes = base64::engine::general_purpose::STANDARD.decode(d.trim())?;
            Ok(String::from_utf8(bytes)?)
        })
        .transpose()
    };
    let cluster = named("clusters", &cluster_name)
        .and_then(|c| c.get("cluster").cloned())
        .unwrap_or_default();
    let user = named("users", &user_name)
        .and_then(|u| u.get("user").cloned())
        .unwrap_or_default();
    let inline_or_file = |v: &yaml_serde::Value, k: &str| -> anyhow::Result<Option<String>> {
        if let Some(d) = data(field(v, &format!("{k}-data")))? {
            return Ok(Some(d));
        }
        field(v, k)
            .map(|f| {
                let path = base.join(f);
                std::fs::read_to_string(&path)
                    .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))
            })
            .transpose()
    };
    let ca = inline_or_file(&cluster, "certificate-authority")?;
    let cert = inline_or_file(&user, "client-certificate")?;
    let key = inline_or_file(&user, "client-key")?;
    Ok(match (ca, cert, key) {
        (Some(ca_pem), Some(cert_pem), Some(key_pem)) => Some(ClientCredentials {
            ca_pem,
            user: user_name,
            cert_pem,
            key_pem,
        }),
        _ => None,
    })
}
