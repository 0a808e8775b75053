//! Cluster IPs and node ports for Services, unique across the cluster whichever replica hands
//! them out.
//!
//! Every allocated value is a claim key in the store, written in the same transaction as the
//! Service that holds it, with a compare on the claim: two replicas can never give out the same
//! value. A claim is free again as soon as its owner no longer holds the value (the Service was
//! deleted, changed type or dropped a port), so deletes need no cleanup step and a crash cannot
//! leak a value. Cluster IP claims are `networking.k8s.io/v1` IPAddress objects, the way
//! kube-apiserver's allocator records them.
//!
//! Candidates are probed from a point derived from the Service's name, so allocation is
//! deterministic for a given cluster state and needs one read per probe.

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use crate::config::ServiceRanges;
use crate::machinery::errors::{ApiError, ApiResult};
use crate::machinery::meta::{meta_str, new_uid, Causes};
use crate::machinery::timestamp::now_rfc3339;
use crate::store::keys;
use crate::store::{object_changed, Alongside, Cas, Store, Stored, Written};

/// Probes before a range counts as full.
const MAX_PROBES: u32 = 256;
/// Write attempts when concurrent allocations keep taking the chosen values.
const MAX_ATTEMPTS: usize = 16;
/// The pool of cluster IPs of `ranges`.
fn cluster_ips(ranges: &ServiceRanges) -> Pool {
    let base = u32::from(ranges.cidr().network());
    let last = u32::from(ranges.cidr().broadcast()) - 1;
    let first = base + 1;
    Pool {
        group: Some("networking.k8s.io"),
        kind: "ipaddresses",
        dynamic: (first + static_band(last - first + 1), last),
        valid: (first, last),
    }
}

/// The pool of node ports of `ranges`.
fn node_port_pool(ranges: &ServiceRanges) -> Pool {
    Pool {
        group: None,
        kind: "servicenodeports",
        dynamic: ranges.node_ports(),
        valid: ranges.node_ports(),
    }
}

/// How many addresses at the bottom of a range of `size` are left for clients that ask for a
/// specific IP (kube's static band: a sixteenth of the range, at least 16 and at most 256,
/// none in a range of fewer than 16 addresses).
fn static_band(size: u32) -> u32 {
    if size < 16 {
        0
    } else {
        (size / 16).clamp(16, 256)
    }
}

/// One kind of allocated value.
struct Pool {
    /// Where the claims are stored: under an API type's prefix (`Some(group)`, plural `kind`),
    /// or among kuberaft's own records (`None`).
    group: Option<&'static str>,
    /// The plural of the claims' type (or the name of the internal records).
    kind: &'static str,
    /// Lowest and highest value handed out when the client asks for none.
    dynamic: (u32, u32),
    /// Lowest and highest value a client may ask for.
    valid: (u32, u32),
}

impl Pool {
    fn is_ip(&self) -> bool {
        self.group.is_some()
    }

    fn prefix(&self) -> String {
        match self.group {
            Some(group) => keys::type_prefix(group, self.kind),
            None => keys::internal_prefix(self.kind),
        }
    }

    fn render(&self, v: u32) -> String {
        if self.is_ip() {
            Ipv4Addr::from(v).to_string()
        } else {
            v.to_string()
        }
    }

    fn key(&self, v: u32) -> String {
        format!("{}{}", self.prefix(), self.render(v))
    }

    /// Whether `svc` (a stored Service) holds `v`.
    fn held_by(&self, svc: &Value, v: u32) -> bool {
        let spec = &svc["spec"];
        if self.is_ip() {
            let ip = self.render(v);
            spec["clusterIP"] == ip.as_str()
                || spec["clusterIPs"]
                    .as_array()
                    .is_some_and(|ips| ips.iter().any(|i| i == ip.as_str()))
        } else {
            spec["ports"]
                .as_array()
                .is_some_and(|ports| ports.iter().any(|p| p["nodePort"].as_u64() == Some(u64::from(v))))
        }
    }
}

/// A claim to write with the Service: absent before (`None`) or at a stale owner's revision.
#[derive(Debug)]
pub struct Claim {
    key: String,
    expect: Option<i64>,
    value: Value,
}

/// The Service being written: its namespace, name and storage key prefix (to find owners).
struct Owner<'a> {
    namespace: &'a str,
    name: &'a str,
    services_prefix: &'a str,
}

impl Owner<'_> {
    fn parent_ref(&self) -> Value {
        json!({"group": "", "resource": "services", "namespace": self.namespace, "name": self.name})
    }

    fn is(&self, claim: &Value) -> bool {
        let p = &claim["spec"]["parentRef"];
        p["namespace"] == self.namespace && p["name"] == self.name
    }
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// What a stored claim says about value `v`.
enum ClaimState {
    Free(Option<i64>),
    Ours,
    Taken,
}

async fn claim_state(store: &Store, pool: &Pool, v: u32, owner: &Owner<'_>) -> ApiResult<ClaimState> {
    let Some(Stored { obj: claim, rv, .. }) = store.get(&pool.key(v), true).await? else {
        return Ok(ClaimState::Free(None));
    };
    let parent = &claim["spec"]["parentRef"];
    let (Some(ns), Some(name)) = (parent["namespace"].as_str(), parent["name"].as_str()) else {
        return Ok(ClaimState::Free(Some(rv)));
    };
    let holder = store
        .get(&format!("{}{ns}/{name}", owner.services_prefix), true)
        .await?;
    Ok(match holder {
        Some(svc) if pool.held_by(&svc.obj, v) => {
            if owner.is(&claim) {
                ClaimState::Ours
            } else {
                ClaimState::Taken
            }
        }
        _ => ClaimState::Free(Some(rv)),
    })
}

fn claim(pool: &Pool, v: u32, expect: Option<i64>, owner: &Owner<'_>) -> Claim {
    let value = if pool.is_ip() {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IPAddress",
            "metadata": {
                "name": pool.render(v),
                "uid": new_uid(),
                "creationTimestamp": now_rfc3339(),
                "labels": {
                    "ipaddress.kubernetes.io/ip-family": "IPv4",
                    "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io",
                },
            },
            "spec": {"parentRef": owner.parent_ref()},
        })
    } else {
        json!({"port": v, "spec": {"parentRef": owner.parent_ref()}})
    };
    Claim {
        key: pool.key(v),
        expect,
        value,
    }
}

/// Claims a value the client asked for: an error when another Service holds it.
async fn claim_specific(
    store: &Store,
    pool: &Pool,
    v: u32,
    owner: &Owner<'_>,
    field: &str,
) -> ApiResult<Option<Claim>> {
    match claim_state(store, pool, v, owner).await? {
        ClaimState::Free(expect) => Ok(Some(claim(pool, v, expect, owner))),
        ClaimState::Ours => Ok(None),
        ClaimState::Taken => Err(invalid(
            owner.name,
            field,
            format!(
                "Invalid value: {}: provided {} is already allocated",
                quoted(pool, v),
                if pool.is_ip() { "IP" } else { "port" }
            ),
        )),
    }
}

/// Finds a free value, probing from a point derived from the Service's name.
async fn claim_any(
    store: &Store,
    pool: &Pool,
    owner: &Owner<'_>,
    salt: &str,
    chosen: &[u32],
) -> ApiResult<(u32, Claim)> {
    let (lo, hi) = pool.dynamic;
    let size = u64::from(hi - lo + 1);
    let start = fnv1a(&format!("{}/{}/{salt}", owner.namespace, owner.name)) % size;
    for i in 0..u64::from(MAX_PROBES).min(size) {
        let v = lo + u32::try_from((start + i) % size).unwrap_or(0);
        if chosen.contains(&v) {
            continue;
        }
        if let ClaimState::Free(expect) = claim_state(store, pool, v, owner).await? {
            return Ok((v, claim(pool, v, expect, owner)));
        }
    }
    Err(ApiError::internal(format!(
        "failed to allocate a {} for service {}/{}: range is full",
        if pool.is_ip() { "serviceIP" } else { "nodePort" },
        owner.namespace,
        owner.name
    )))
}

fn quoted(pool: &Pool, v: u32) -> String {
    if pool.is_ip() {
        format!("{:?}", pool.render(v))
    } else {
        v.to_string()
    }
}

fn invalid(name: &str, field: &str, message: String) -> ApiError {
    ApiError::invalid("", "Service", name, &[(field.to_string(), message)])
}

fn parse_ip(pool: &Pool, ip: &str) -> Option<u32> {
    let v = u32::from(ip.parse::<Ipv4Addr>().ok()?);
    (pool.valid.0..=pool.valid.1).contains(&v).then_some(v)
}

fn needs_node_ports(spec: &Value) -> bool {
    match spec["type"].as_str() {
        Some("NodePort") => true,
        Some("LoadBalancer") => spec["allocateLoadBalancerNodePorts"] != false,
        _ => false,
    }
}

/// Fills in what a Service needs — cluster IP, IP families, node ports — and returns the
/// claims to write with it. `key` is the Service's storage key.
pub async fn plan(
    store: &Store,
    ranges: &ServiceRanges,
    key: &str,
    svc: &mut Value,
) -> ApiResult<Vec<Claim>> {
    let cluster_ips = cluster_ips(ranges);
    let node_port_pool = node_port_pool(ranges);
    let namespace = meta_str(svc, "namespace").unwrap_or("").to_string();
    let name = meta_str(svc, "name").unwrap_or("").to_string();
    let services_prefix = key
        .strip_suffix(&format!("{namespace}/{name}"))
        .unwrap_or(key)
        .to_string();
    let owner = Owner {
        namespace: &namespace,
        name: &name,
        services_prefix: &services_prefix,
    };
    let Some(spec) = svc.get_mut("spec").filter(|s| s.is_object()) else {
        return Ok(Vec::new());
    };
    if spec["type"] == "ExternalName" {
        return Ok(Vec::new());
    }
    let mut claims = Vec::new();
    let requested = match spec["clusterIP"].as_str().filter(|s| !s.is_empty()) {
        Some(ip) => Some(ip.to_string()),
        None => spec["clusterIPs"][0].as_str().map(str::to_string),
    };
    let ip = match requested.as_deref() {
        Some("None") => "None".to_string(),
        Some(ip) => {
            let v = parse_ip(&cluster_ips, ip).ok_or_else(|| {
                invalid(
                    &name,
                    "spec.clusterIPs[0]",
                    format!("Invalid value: {ip:?}: provided IP is not in the valid range. The range of valid IPs is {}", ranges.cidr()),
                )
            })?;
            claims.extend(claim_specific(store, &cluster_ips, v, &owner, "spec.clusterIPs[0]").await?);
            ip.to_string()
        }
        None => {
            let (v, c) = claim_any(store, &cluster_ips, &owner, "clusterIP", &[]).await?;
            claims.push(c);
            cluster_ips.render(v)
        }
    };
    let headless_without_selector = ip == "None" && spec["selector"].as_object().is_none_or(|s| s.is_empty());
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    if spec["ipFamilies"].as_array().is_none_or(|f| f.is_empty()) {
        spec["ipFamilies"] = json!(["IPv4"]);
    }
    if spec["ipFamilyPolicy"].as_str().is_none_or(str::is_empty) {
        spec["ipFamilyPolicy"] = json!(if headless_without_selector {
            "RequireDualStack"
        } else {
            "SingleStack"
        });
    }
    if needs_node_ports(spec) {
        let asked: Vec<(usize, Option<u64>)> = spec["ports"]
            .as_array()
            .map(|ports| {
                ports
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.is_object())
                    .map(|(i, p)| (i, p["nodePort"].as_u64().filter(|n| *n != 0)))
                    .collect()
            })
            .unwrap_or_default();
        let mut chosen: Vec<u32> = Vec::new();
        let mut assigned = Vec::new();
        for (i, asked) in asked {
            let field = format!("spec.ports[{i}].nodePort");
            let port = match asked {
                Some(p) => {
                    let v = u32::try_from(p)
                        .ok()
                        .filter(|v| (node_port_pool.valid.0..=node_port_pool.valid.1).contains(v))
                        .ok_or_else(|| {
                            invalid(
                                &name,
                                &field,
                                format!(
                                    "Invalid value: {p}: provided port is not in the valid range. The range of valid ports is {}-{}",
                                    ranges.node_ports().0, ranges.node_ports().1
                                ),
                            )
                        })?;
                    if chosen.contains(&v) {
                        return Err(invalid(&name, &field, format!("Duplicate value: {v}")));
                    }
                    claims.extend(claim_specific(store, &node_port_pool, v, &owner, &field).await?);
                    v
                }
                None => {
                    let salt = format!("nodePort/{i}");
                    let (v, c) = claim_any(store, &node_port_pool, &owner, &salt, &chosen).await?;
                    claims.push(c);
                    v
                }
            };
            chosen.push(port);
            assigned.push((i, port));
        }
        if let Some(ports) = spec["ports"].as_array_mut() {
            for (i, port) in assigned {
                if let Some(p) = ports.get_mut(i).and_then(Value::as_object_mut) {
                    p.insert("nodePort".into(), json!(port));
                }
            }
        }
    }
    Ok(claims)
}

/// Writes a Service with the claims its cluster IP and node ports need and what `alongside`
/// plans (the quotas it is charged to), in one transaction: a create when `rev` is `None`,
/// else an update of the object at mod revision `rev`. Values taken concurrently, and quotas
/// charged concurrently, are planned again; a changed Service is reported as [`Cas::Failed`].
pub async fn write(
    store: &Store,
    ranges: &ServiceRanges,
    key: &str,
    svc: &mut Value,
    rev: Option<i64>,
    alongside: &dyn Alongside,
) -> ApiResult<Cas> {
    let base = svc.clone();
    for attempt in 0..MAX_ATTEMPTS {
        *svc = base.clone();
        let claims = plan(store, ranges, key, svc).await?;
        let mut charged = alongside.plan(store, svc).await?;
        let mut conditions = vec![(key, rev)];
        let mut puts = vec![(key, &*svc)];
        for c in &claims {
            conditions.push((&c.key, c.expect));
            puts.push((&c.key, &c.value));
        }
        for g in &charged.guarded {
            conditions.push((&g.key, Some(g.mod_revision)));
            puts.push((&g.key, &g.value));
        }
        let compared = match store.write_if(&conditions, &puts).await? {
            Written::Done(revision) => {
                if let Some(hold) = charged.hold.as_mut() {
                    **hold = revision;
                }
                return Ok(Cas::Done(revision));
            }
            Written::NotWritten(compared) => compared,
        };
        if object_changed(&compared, key, rev) {
            return Ok(Cas::Failed(store.get(key, true).await?));
        }
        if !charged.guarded.is_empty() {
            drop(charged);
            store.replan_after(attempt).await?;
        }
    }
    Err(ApiError::conflict(
        "",
        "services",
        meta_str(&base, "name").unwrap_or(""),
        "too many concurrent allocations; try again",
    ))
}

/// Deletes the claims a deleted Service held, where they still name it. Failures are ignored:
/// a claim whose owner is gone is free to be taken over anyway.
pub async fn release(store: &Store, ranges: &ServiceRanges, svc: &Value) {
    let cluster_ips = cluster_ips(ranges);
    let node_port_pool = node_port_pool(ranges);
    let namespace = meta_str(svc, "namespace").unwrap_or("");
    let name = meta_str(svc, "name").unwrap_or("");
    let spec = &svc["spec"];
    let ips = spec["clusterIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| parse_ip(&cluster_ips, ip.as_str()?))
        .map(|v| cluster_ips.key(v));
    let ports = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| u32::try_from(p["nodePort"].as_u64()?).ok())
        .map(|v| node_port_pool.key(v));
    for key in ips.chain(ports).collect::<Vec<_>>() {
        let Ok(Some(claim)) = store.get(&key, true).await else {
            continue;
        };
        let parent = &claim.obj["spec"]["parentRef"];
        if parent["namespace"] == namespace && parent["name"] == name {
            if let Err(e) = store.delete(&key, claim.rv).await {
                tracing::debug!(key, error = %e.message, "could not release a service allocation");
            }
        }
    }
}

/// On update, a Service keeps what was allocated to it when the new object leaves it out (a
/// `kubectl replace` of the original manifest); its cluster IP may not change.
pub fn keep_allocated(old: &Value, new: &mut Value) -> Result<(), Causes> {
    let old_spec = &old["spec"];
    let Some(spec) = new.get_mut("spec").filter(|s| s.is_object()) else {
        return Ok(());
    };
    if spec["type"] == "ExternalName" {
        return Ok(());
    }
    let old_ip = old_spec["clusterIP"].as_str().filter(|ip| !ip.is_empty());
    let new_ip = spec["clusterIP"]
        .as_str()
        .filter(|ip| !ip.is_empty())
        .or_else(|| spec["clusterIPs"][0].as_str())
        .map(str::to_string);
    match (old_ip, new_ip) {
        (Some(old_ip), None) => {
            spec["clusterIP"] = json!(old_ip);
            spec["clusterIPs"] = old_spec["clusterIPs"].clone();
        }
        (Some(old_ip), Some(new_ip)) if old_ip != new_ip => {
            return Err(vec![(
                "spec.clusterIPs[0]".into(),
                format!("Invalid value: []string{{{new_ip:?}}}: may not change once set"),
            )]);
        }
        _ => {}
    }
    for field in ["ipFamilies", "ipFamilyPolicy"] {
        if spec[field].is_null() && !old_spec[field].is_null() {
            spec[field] = old_spec[field].clone();
        }
    }
    if needs_node_ports(spec) && needs_node_ports(old_spec) {
        let old_ports = old_spec["ports"].as_array().cloned().unwrap_or_default();
        if let Some(ports) = spec["ports"].as_array_mut() {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                if p.get("nodePort").and_then(Value::as_u64).is_some_and(|n| n != 0) {
                    continue;
                }
                let same = old_ports
                    .iter()
                    .find(|o| Some(&o["port"]) == p.get("port") && Some(&o["protocol"]) == p.get("protocol"));
                if let Some(n) = same.map(|o| o["nodePort"].clone()).filter(|n| !n.is_null()) {
                    p.insert("nodePort".into(), n);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_render_and_check_holders() {
        let ranges = ServiceRanges::default();
        let (cluster_ips, node_ports) = (cluster_ips(&ranges), node_port_pool(&ranges));
        const BASE: u32 = 0x0A60_0000;
        assert_eq!(cluster_ips.render(cluster_ips.dynamic.0), "10.96.1.1");
        assert_eq!(cluster_ips.render(cluster_ips.valid.1), "10.111.255.254");
        assert_eq!(parse_ip(&cluster_ips, "10.96.0.10"), Some(BASE + 10));
        assert_eq!(parse_ip(&cluster_ips, "10.112.0.1"), None);
        assert_eq!(parse_ip(&cluster_ips, "10.96.0.0"), None);
        assert_eq!(parse_ip(&cluster_ips, "fd00::1"), None);
        let svc = json!({"spec": {"clusterIP": "10.96.1.7", "clusterIPs": ["10.96.1.7"], "ports": [{"port": 80, "nodePort": 30080}]}});
        assert!(cluster_ips.held_by(&svc, BASE + 263));
        assert!(!cluster_ips.held_by(&svc, BASE + 264));
        assert!(node_ports.held_by(&svc, 30080));
        assert!(!node_ports.held_by(&svc, 30081));
        assert_eq!(node_ports.key(30080), "/registry/kuberaft/servicenodeports/30080");
    }

    #[test]
    fn ranges_parse_as_kube_apiserver_flags_do() {
        let r = ServiceRanges::parse("10.0.0.0/24", "30000+100").unwrap();
        assert_eq!(r.kubernetes_service_ip(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(r.node_ports(), (30000, 30100));
        let ips = cluster_ips(&r);
        assert_eq!(
            (ips.render(ips.valid.0), ips.render(ips.valid.1)),
            ("10.0.0.1".into(), "10.0.0.254".into())
        );
        assert_eq!(ips.render(ips.dynamic.0), "10.0.0.17");
        let tiny = cluster_ips(&ServiceRanges::parse("192.168.7.0/29", "80").unwrap());
        assert_eq!(
            (tiny.dynamic, tiny.valid),
            (tiny.valid, (0xC0A8_0701, 0xC0A8_0706))
        );
        assert_eq!(
            ServiceRanges::parse("10.96.0.0/12", "30000-32767").unwrap(),
            ServiceRanges::default()
        );
        for (cidr, ports, why) in [
            (
                "10.0.0.0/8",
                "30000-32767",
                "too large; for 32-bit addresses, the mask must be >= 12",
            ),
            (
                "10.0.0.1/24",
                "30000-32767",
                "host bits set; the network is 10.0.0.0/24",
            ),
            ("fd00::/108", "30000-32767", "not an IPv4 CIDR"),
            ("10.0.0.0/31", "30000-32767", "too small"),
            ("10.0.0.0/24", "32767-30000", "not a port range"),
            ("10.0.0.0/24", "0-100", "not a port range"),
            ("10.0.0.0/24", "65000+1000", "not a port range"),
        ] {
            let e = ServiceRanges::parse(cidr, ports).unwrap_err();
            assert!(e.contains(why), "{cidr} {ports}: {e}");
        }
    }

    #[test]
    fn updates_keep_allocated_values_and_refuse_a_new_cluster_ip() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.1.7", "clusterIPs": ["10.96.1.7"],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}});
        let mut new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 81, "protocol": "TCP"}]}});
        keep_allocated(&old, &mut new).unwrap();
        assert_eq!(new["spec"]["clusterIP"], "10.96.1.7");
        assert_eq!(new["spec"]["clusterIPs"], json!(["10.96.1.7"]));
        assert_eq!(new["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30080);
        assert!(new["spec"]["ports"][1].get("nodePort").is_none());
        let mut moved = json!({"spec": {"clusterIP": "10.96.1.8"}});
        let causes = keep_allocated(&old, &mut moved).unwrap_err();
        assert!(causes[0].1.contains("may not change once set"), "{causes:?}");
    }
}
