//! Reaching a Service from the API server (kube's `ResolveEndpoint`): a Service reference
//! (namespace, name, port) becomes one ready address from the Service's EndpointSlices, or
//! else its Endpoints, in the replica's watch cache — never the cluster IP, which only a
//! node's proxy routes. Used by admission webhooks and by the aggregation proxy alike.

use std::net::{IpAddr, SocketAddr};

use serde_json::Value;

use super::cacher::WatchCache;
use super::keys;

/// Why a Service reference has no address (worded as kube-apiserver words it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unresolved {
    /// No such Service.
    #[error("service \"{name}\" not found")]
    ServiceNotFound {
        /// The Service's name.
        name: String,
    },
    /// The Service has no such port.
    #[error("service {namespace}/{name}:{port} is not a port of the service")]
    NoPort {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The port asked for.
        port: i64,
    },
    /// Nothing ready behind the Service's port.
    #[error("no endpoints available for service \"{name}\"")]
    MissingEndpoints {
        /// The Service's name.
        name: String,
    },
}

fn by_ref<'a>(obj: &'a Value, field: &str) -> std::slice::Iter<'a, Value> {
    obj[field]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
}

/// The Service's target port for `port`: (its port name, the target port number or name).
fn service_port(svc: &Value, port: i64) -> Option<(String, Value)> {
    by_ref(&svc["spec"], "ports")
        .find(|p| p["port"].as_i64() == Some(port))
        .map(|p| {
            let name = p["name"].as_str().unwrap_or_default().to_string();
            let target = match &p["targetPort"] {
                Value::Null => serde_json::json!(port),
                t => t.clone(),
            };
            (name, target)
        })
}

/// The first ready address of the Service's EndpointSlices, or else of its Endpoints, with the
/// port named as the Service's port (or its numeric target port).
fn endpoint_of(
    cache: &WatchCache,
    ns: &str,
    name: &str,
    port_name: &str,
    target: &Value,
) -> Option<SocketAddr> {
    let port_of = |ports: &Value| {
        by_ref(ports, "ports")
            .find(|p| p["name"].as_str().unwrap_or_default() == port_name)
            .and_then(|p| p["port"].as_u64())
            .or_else(|| target.as_u64())
            .and_then(|p| u16::try_from(p).ok())
    };
    let slices = cache.list(
        &format!("{}{ns}/", keys::type_prefix("discovery.k8s.io", "endpointslices")),
        None,
        None,
    );
    for (_, slice) in slices.map(|s| s.objects).unwrap_or_default() {
        let slice = slice.value();
        if slice["metadata"]["labels"]["kubernetes.io/service-name"].as_str() != Some(name) {
            continue;
        }
        let Some(port) = port_of(&slice) else { continue };
        let ready = by_ref(&slice, "endpoints").filter(|e| e["conditions"]["ready"].as_bool() != Some(false));
        if let Some(ip) = ready
            .flat_map(|e| by_ref(e, "addresses"))
            .find_map(|a| a.as_str()?.parse::<IpAddr>().ok())
        {
            return Some(SocketAddr::new(ip, port));
        }
    }
    let endpoints = cache
        .get(&keys::object("", "endpoints", Some(ns), name))
        .ok()
        .flatten()?
        .value();
    by_ref(&endpoints, "subsets").find_map(|subset| {
        let port = port_of(subset)?;
        let ip = by_ref(subset, "addresses").find_map(|a| a["ip"].as_str()?.parse::<IpAddr>().ok())?;
        Some(SocketAddr::new(ip, port))
    })
}

/// One ready address of Service `namespace/name`'s port `port`.
pub fn resolve(cache: &WatchCache, namespace: &str, name: &str, port: i64) -> Result<SocketAddr, Unresolved> {
    let svc = cache
        .get(&keys::object("", "services", Some(namespace), name))
        .ok()
        .flatten()
        .ok_or_else(|| Unresolved::ServiceNotFound { name: name.into() })?
        .value();
    let (port_name, target_port) = service_port(&svc, port).ok_or_else(|| Unresolved::NoPort {
        namespace: namespace.into(),
        name: name.into(),
        port,
    })?;
    endpoint_of(cache, namespace, name, &port_name, &target_port)
        .ok_or_else(|| Unresolved::MissingEndpoints { name: name.into() })
}
