//! Where a proxy subresource leads (kube's `ResourceLocation` of pods, Services and Nodes).
//! The object's name in the path may carry a scheme and a port, `[SCHEME:]NAME[:PORT]`:
//!
//! - `pods/NAME/proxy`: the pod's first IP, at the port named or else the first port its
//!   containers declare; only a global unicast address (never loopback or link-local, so a
//!   pod's status cannot point the server at itself);
//! - `services/NAME/proxy`: a random ready address of the Service's Endpoints for the named
//!   port (a port number is first turned into the Service port's name), and only an address
//!   that is the IP of the pod it names, as kube checks;
//! - `nodes/NAME/proxy`: the node's kubelet, with this server's kubelet client, or another
//!   port of the node's address.
//!
//! The path after `proxy` and the request itself are the endpoint's business
//! (`endpoints::connect`); the errors here are kube's, in its words.

use std::net::IpAddr;

use serde_json::Value;

use crate::kinds::connect::kubelet_address;
use crate::machinery::errors::{go_quote, ApiError, ApiResult};
use crate::machinery::net::{is_global_unicast, join_host_port, split_scheme_name_port};
use crate::registry::strategy::{Location, Via};
use crate::registry::ResourceRequest;
use crate::store::{keys, Store};

/// A location reached with kube's proxy transport, plain HTTP unless `https` was asked for.
fn proxied(scheme: &str, host: &str, port: &str) -> Location {
    let scheme = if scheme.is_empty() { "http" } else { scheme };
    Location {
        url: format!("{scheme}://{}", join_host_port(host, port)),
        via: Via::Proxy,
    }
}

/// The object `name` of `plural` in `namespace`, or kube's `404` for it.
async fn object(store: &Store, plural: &str, namespace: Option<&str>, name: &str) -> ApiResult<Value> {
    Ok(store
        .get(&keys::object("", plural, namespace, name), true)
        .await?
        .ok_or_else(|| ApiError::not_found("", plural, name))?
        .obj)
}

/// The first of a pod's IPs (kube's `getPodIP`), empty when it has none.
fn pod_ip(pod: &Value) -> &str {
    pod["status"]["podIPs"][0]["ip"].as_str().unwrap_or("")
}

/// Where `pods/ID/proxy` leads.
pub async fn pod(store: &Store, req: &ResourceRequest) -> ApiResult<Option<Location>> {
    let id = req.name.as_deref().unwrap_or_default();
    let (scheme, name, port) = split_scheme_name_port(id)
        .ok_or_else(|| ApiError::bad_request(format!("invalid pod request {}", go_quote(id))))?;
    let pod = object(store, "pods", req.namespace.as_deref(), name).await?;
    let declared = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|c| c["ports"].as_array().filter(|p| !p.is_empty()))
        .map(|ports| ports[0]["containerPort"].as_i64().unwrap_or(0).to_string());
    let port = match (port, declared) {
        ("", Some(declared)) => declared,
        (port, _) => port.to_string(),
    };
    let ip = pod_ip(&pod);
    if !ip.parse().is_ok_and(is_global_unicast) {
        return Err(ApiError::bad_request("address not allowed"));
    }
    Ok(Some(proxied(scheme, ip, &port)))
}

/// Whether `address` (an Endpoints address) is an IP of the pod it names in `namespace`
/// (kube's `isValidAddress`; an address that names no pod is never proxied to).
async fn is_pod_address(store: &Store, namespace: &str, address: &Value) -> bool {
    let target = &address["targetRef"];
    if !target.is_object() || target["namespace"].as_str().unwrap_or("") != namespace {
        return false;
    }
    let Some(name) = target["name"].as_str() else {
        return false;
    };
    let Ok(pod) = object(store, "pods", Some(namespace), name).await else {
        return false;
    };
    let ip = address["ip"].as_str().unwrap_or("");
    pod["status"]["podIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|p| p["ip"].as_str() == Some(ip))
}

/// Where `services/ID/proxy` leads.
pub async fn service(store: &Store, req: &ResourceRequest) -> ApiResult<Option<Location>> {
    let id = req.name.as_deref().unwrap_or_default();
    let namespace = req.namespace.as_deref().unwrap_or_default();
    let (scheme, name, port) = split_scheme_name_port(id)
        .ok_or_else(|| ApiError::bad_request(format!("invalid service request {}", go_quote(id))))?;
    // A port number names the Service port it is; the Endpoints know ports by name.
    let mut port_name = port.to_string();
    if let Ok(number) = port.parse::<i64>() {
        let service = object(store, "services", Some(namespace), name).await?;
        port_name = service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_i64() == Some(number))
            .map(|p| p["name"].as_str().unwrap_or("").to_string())
            .ok_or_else(|| {
                ApiError::service_unavailable(format!(
                    "no service port {number} found for service {}",
                    go_quote(name)
                ))
            })?;
    }
    let endpoints = object(store, "endpoints", Some(namespace), name).await?;
    let empty = Vec::new();
    let subsets = endpoints["subsets"].as_array().unwrap_or(&empty);
    if subsets.is_empty() {
        return Err(ApiError::service_unavailable(format!(
            "no endpoints available for service {}",
            go_quote(name)
        )));
    }
    // Start from a random subset and a random address in it, as kube spreads the requests.
    let start = rand::random_range(0..subsets.len());
    for subset in subsets.iter().cycle().skip(start).take(subsets.len()) {
        let addresses = subset["addresses"].as_array().unwrap_or(&empty);
        if addresses.is_empty() {
            continue;
        }
        for subset_port in subset["ports"].as_array().unwrap_or(&empty) {
            if subset_port["name"].as_str().unwrap_or("") != port_name {
                continue;
            }
            let first = rand::random_range(0..addresses.len());
            for address in addresses.iter().cycle().skip(first).take(addresses.len()) {
                if !is_pod_address(store, namespace, address).await {
                    tracing::debug!(%address, "an endpoint address that is not its pod's is skipped");
                    continue;
                }
                let ip = address["ip"].as_str().unwrap_or("");
                let port = subset_port["port"].as_i64().unwrap_or(0).to_string();
                return Ok(Some(proxied(scheme, ip, &port)));
            }
        }
    }
    Err(ApiError::service_unavailable(format!(
        "no endpoints available for service {}",
        go_quote(id)
    )))
}

/// Why the server will not proxy to `host` (kube's `isProxyableHostname`): every address it
/// resolves to must be global unicast.
async fn proxyable(host: &str) -> Result<(), String> {
    let addresses: Vec<IpAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| format!("lookup {host}: {e}"))?
        .map(|a| a.ip())
        .collect();
    if addresses.is_empty() {
        return Err("no addresses for hostname".into());
    }
    if addresses.into_iter().all(is_global_unicast) {
        Ok(())
    } else {
        Err("address not allowed".into())
    }
}

/// Where `nodes/ID/proxy` leads: the kubelet, when no port or the kubelet's is named.
pub async fn node(store: &Store, req: &ResourceRequest) -> ApiResult<Option<Location>> {
    let id = req.name.as_deref().unwrap_or_default();
    let (scheme, name, port) = split_scheme_name_port(id)
        .ok_or_else(|| ApiError::bad_request(format!("invalid node request {}", go_quote(id))))?;
    let (host, kubelet_port) = kubelet_address(store, name).await?;
    proxyable(&host).await.map_err(ApiError::bad_request)?;
    let kubelet_port = kubelet_port.to_string();
    Ok(Some(if port.is_empty() || port == kubelet_port {
        Location {
            url: format!("https://{}", join_host_port(&host, &kubelet_port)),
            via: Via::Kubelet,
        }
    } else {
        proxied(scheme, &host, port)
    }))
}
