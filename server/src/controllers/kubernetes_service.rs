//! The `default/kubernetes` Service and its endpoints: how pods (and anything else in the
//! cluster) find the API, kept by kube-apiserver itself and so by kuberaft.
//!
//! The `kubernetes` ServiceCIDR holds the cluster IP range, as kube-apiserver keeps it. The
//! Service is created with the first address of the cluster IP range and port 443
//! (`https`), targeting the replicas' API port, and is not reconciled afterwards, as
//! kube-apiserver leaves it; if it is deleted it is created again. Its Endpoints name every
//! member's API address, voters and learners alike (every replica serves the API), and follow
//! the membership: a replica added or removed with `kuberaft member` appears or disappears. Its
//! EndpointSlice is derived from the Endpoints as kube's endpoints adapter derives it. The
//! objects are written through the registry's verbs as `kube-apiserver`, like kube's. Each
//! pass first creates the system namespaces that are missing (kube's system namespaces
//! controller), so that one deleted (`kube-node-lease`) comes back.
//!
//! Replicas on one host with different API ports (a `cluster up` cluster) give Endpoints one
//! subset per port; the Service targets the port most replicas use, and the EndpointSlice,
//! which has one port list, lists the replicas of that port, as kube's adapter takes the first
//! subset.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::ServiceRanges;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::scheme::{LiveRegistry, Registry};
use crate::store::{keys, Store};

/// The Service's, Endpoints' and EndpointSlice's name.
pub const NAME: &str = "kubernetes";
/// Their namespace.
pub const NAMESPACE: &str = "default";
/// The name of the Service's and endpoints' port.
const PORT_NAME: &str = "https";
/// The Service's port.
const SERVICE_PORT: u16 = 443;

/// The API addresses as Endpoints subsets: one per port, the port most replicas use first
/// (the lowest on a tie), addresses sorted. Addresses that are not IPv4 literals are resolved;
/// what cannot be resolved is left out.
async fn subsets(addresses: &[(u64, String)]) -> Vec<(u16, Vec<Ipv4Addr>)> {
    let mut by_port: BTreeMap<u16, Vec<Ipv4Addr>> = BTreeMap::new();
    for (id, addr) in addresses {
        let resolved = match addr.parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => match tokio::net::lookup_host(addr.as_str()).await {
                Ok(mut found) => found.find(SocketAddr::is_ipv4),
                Err(e) => {
                    tracing::warn!(member = id, addr, error = %e, "cannot resolve a replica's API address");
                    None
                }
            },
        };
        if let Some(SocketAddr::V4(a)) = resolved {
            by_port.entry(a.port()).or_default().push(*a.ip());
        }
    }
    let mut subsets: Vec<(u16, Vec<Ipv4Addr>)> = by_port
        .into_iter()
        .map(|(port, mut ips)| {
            ips.sort();
            ips.dedup();
            (port, ips)
        })
        .collect();
    subsets.sort_by_key(|(port, ips)| (std::cmp::Reverse(ips.len()), *port));
    subsets
}

fn port(port: u16) -> Value {
    json!({"name": PORT_NAME, "port": port, "protocol": "TCP"})
}

/// The Service as kube-apiserver creates it.
fn service(ranges: &ServiceRanges, target_port: u16) -> Value {
    let ip = ranges.kubernetes_service_ip().to_string();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {
            "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP", "targetPort": target_port}],
            "clusterIP": ip,
            "clusterIPs": [ip],
            "sessionAffinity": "None",
            "type": "ClusterIP",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
        },
    })
}

/// The default ServiceCIDR, as kube-apiserver keeps it for its `--service-cluster-ip-range`.
fn service_cidr(ranges: &ServiceRanges) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "ServiceCIDR",
        "metadata": {"name": NAME},
        "spec": {"cidrs": [ranges.cidr().to_string()]},
    })
}

/// The Endpoints' labels and subsets.
fn endpoints(subsets: &[(u16, Vec<Ipv4Addr>)]) -> Value {
    let subsets: Vec<Value> = subsets
        .iter()
        .map(|(p, ips)| {
            json!({"addresses": ips.iter().map(|ip| json!({"ip": ip.to_string()})).collect::<Vec<_>>(),
                   "ports": [port(*p)]})
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
                     "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": subsets,
    })
}

/// The EndpointSlice kube's endpoints adapter derives from the Endpoints' first subset.
fn endpoint_slice(subsets: &[(u16, Vec<Ipv4Addr>)]) -> Value {
    let (ports, endpoints) = match subsets.first() {
        Some((p, ips)) => (
            json!([port(*p)]),
            ips.iter()
                .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
                .collect::<Vec<_>>(),
        ),
        None => (Value::Null, Vec::new()),
    };
    let mut slice = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": NAME}},
        "addressType": "IPv4",
        "endpoints": endpoints,
    });
    if !ports.is_null() {
        slice["ports"] = ports;
    }
    slice
}

/// One pass: the system namespaces, the ServiceCIDR, the Service, the Endpoints, the
/// EndpointSlice.
async fn reconcile(store: &Store, registry: &Registry, ranges: &ServiceRanges) -> ApiResult<()> {
    super::namespace::ensure_system_namespaces(store, registry).await?;
    let subsets = subsets(&store.node().api_addresses()).await;
    let Some((target_port, _)) = subsets.first() else {
        return Err(ApiError::internal(
            "no replica has an IPv4 API address".to_string(),
        ));
    };
    super::ensure(
        store,
        registry,
        ("networking.k8s.io", "servicecidrs"),
        service_cidr(ranges),
        &["spec"],
    )
    .await?;
    super::ensure(
        store,
        registry,
        ("", "services"),
        service(ranges, *target_port),
        &[],
    )
    .await?;
    super::ensure(
        store,
        registry,
        ("", "endpoints"),
        endpoints(&subsets),
        &["labels", "subsets"],
    )
    .await?;
    super::ensure(
        store,
        registry,
        ("discovery.k8s.io", "endpointslices"),
        endpoint_slice(&subsets),
        &["labels", "addressType", "endpoints", "ports"],
    )
    .await
}

/// Whether a cache key is one of the objects kept here, or a namespace.
fn relevant(key: &str) -> bool {
    let namespaces = keys::type_prefix("", "namespaces");
    key.starts_with(&namespaces)
        || [
            ("", "services"),
            ("", "endpoints"),
            ("discovery.k8s.io", "endpointslices"),
        ]
        .iter()
        .any(|(group, plural)| key == keys::object(group, plural, Some(NAMESPACE), NAME))
}

/// Runs the controller while this replica leads: a pass at once, after every change to the
/// objects or the namespaces, after every membership change, and every resync.
pub fn spawn(store: Store, live: Arc<LiveRegistry>, ranges: ServiceRanges) {
    super::run_while_leader(store, "kubernetes-service", move |store| {
        let live = live.clone();
        async move {
            let node = store.node().clone();
            let start = (node.metrics(), node.api_addresses());
            let membership = futures::stream::unfold(start, move |(mut metrics, last)| {
                let node = node.clone();
                async move {
                    loop {
                        metrics.changed().await.ok()?;
                        let now = node.api_addresses();
                        if now != last {
                            return Some(((), (metrics, now)));
                        }
                    }
                }
            });
            super::run_passes_also_on(&store, "kubernetes-service", relevant, membership, || {
                let (store, live) = (&store, &live);
                async move { reconcile(store, &live.current(), &ranges).await }
            })
            .await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subsets_group_replicas_by_port_the_most_used_first() {
        let addrs = [
            (1, "10.0.0.3:6443".to_string()),
            (2, "10.0.0.1:6443".to_string()),
            (3, "127.0.0.1:7000".to_string()),
            (4, "[fd00::1]:6443".to_string()),
        ];
        let s = subsets(&addrs).await;
        assert_eq!(
            s,
            vec![
                (6443, vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 3)]),
                (7000, vec![Ipv4Addr::LOCALHOST]),
            ]
        );
        let e = endpoints(&s);
        assert_eq!(
            e["subsets"][0],
            json!({"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.3"}],
                   "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})
        );
        let slice = endpoint_slice(&s);
        assert_eq!(slice["endpoints"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            slice["ports"],
            json!([{"name": "https", "port": 6443, "protocol": "TCP"}])
        );
        let svc = service(&ServiceRanges::parse("10.0.0.0/24", "30000-32767").unwrap(), 6443);
        assert_eq!(svc["spec"]["clusterIP"], "10.0.0.1");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 6443);
        let tied = subsets(&[(1, "127.0.0.1:7001".into()), (2, "127.0.0.1:7000".into())]).await;
        assert_eq!(tied[0].0, 7000);
    }
}
