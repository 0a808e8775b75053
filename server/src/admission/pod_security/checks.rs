//! The Pod Security Standards' checks (pod-security-admission's `policy` package): each looks
//! at a pod's metadata and spec (a pod's, or a controller's template) and says what in it a
//! level forbids, in kube's words — the `reason (detail)` pairs of its messages. The checks run
//! in kube's order (its evaluator's: the baseline checks, then, for `restricted`, the restricted
//! ones), each from the policy version that introduced it.

use serde_json::{Map, Value};

use crate::machinery::errors::go_quote;

/// How strict a policy is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Anything goes.
    Privileged,
    /// Known privilege escalations are refused.
    Baseline,
    /// Pod hardening best practices are required as well.
    Restricted,
}

impl Level {
    /// The level as its label value spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// What one failed check says: `reason` alone in summaries, `reason (detail)` in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The short reason (`allowPrivilegeEscalation != false`).
    pub reason: String,
    /// What to change (`container "c" must set ...`), possibly empty.
    pub detail: String,
}

/// The pod (or template) a check looks at.
pub struct PodView<'a> {
    /// `metadata` (annotations).
    pub meta: &'a Value,
    /// `spec`.
    pub spec: &'a Value,
}

type CheckFn = fn(&PodView<'_>, u32) -> Option<Violation>;

/// One check: its level and the policy version (`1.x`) from which it applies.
struct Check {
    level: Level,
    since: u32,
    run: CheckFn,
}

/// The checks in kube's evaluation order: baseline ones (seccomp last: at `restricted` the
/// restricted seccomp check replaces it), then restricted ones.
const CHECKS: &[Check] = &[
    check(Level::Baseline, 0, app_armor_profile),
    check(Level::Baseline, 0, capabilities_baseline),
    check(Level::Baseline, 0, host_namespaces),
    check(Level::Baseline, 0, host_path_volumes),
    check(Level::Baseline, 0, host_ports),
    check(Level::Baseline, 0, privileged),
    check(Level::Baseline, 0, proc_mount),
    check(Level::Baseline, 0, se_linux_options),
    check(Level::Baseline, 0, sysctls),
    check(Level::Restricted, 8, allow_privilege_escalation),
    check(Level::Restricted, 22, capabilities_restricted),
    check(Level::Restricted, 0, restricted_volumes),
    check(Level::Restricted, 0, run_as_non_root),
    check(Level::Restricted, 23, run_as_user),
    check(Level::Restricted, 19, seccomp_profile_restricted),
];

/// The baseline check that only runs at `baseline` (`restricted` has a stricter one).
const SECCOMP_BASELINE: Check = check(Level::Baseline, 19, seccomp_profile_baseline);

const fn check(level: Level, since: u32, run: CheckFn) -> Check {
    Check { level, since, run }
}

/// What `level` at policy version `1.minor` forbids in the pod, in kube's order.
pub fn evaluate(level: Level, minor: u32, pod: &PodView<'_>) -> Vec<Violation> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let overlap = (level == Level::Baseline).then_some(&SECCOMP_BASELINE);
    let baseline = CHECKS.iter().filter(|c| c.level == Level::Baseline);
    let restricted = CHECKS
        .iter()
        .filter(|c| level == Level::Restricted && c.level == Level::Restricted);
    baseline
        .chain(overlap)
        .chain(restricted)
        .filter(|c| minor >= c.since)
        .filter_map(|c| (c.run)(pod, minor))
        .collect()
}

/// `reason (detail), reason, ...`, as kube's aggregate result words a refusal.
pub fn forbidden_detail(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            if v.detail.is_empty() {
                v.reason.clone()
            } else {
                format!("{} ({})", v.reason, v.detail)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The reasons alone, comma-separated (the summary of one existing pod).
pub fn forbidden_reason(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| v.reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn violation(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
    Some(Violation {
        reason: reason.into(),
        detail: detail.into(),
    })
}

fn pluralize<'a>(singular: &'a str, plural: &'a str, n: usize) -> &'a str {
    if n == 1 {
        singular
    } else {
        plural
    }
}

/// `"a", "b"`: Go-quoted, comma-separated.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|s| go_quote(s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `container "a"` or `containers "a", "b"`.
fn containers_named(names: &[String]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quote(names)
    )
}

/// `reason (containers "a", "b" <rest>)`; nothing when no container is named.
fn containers_must(reason: &str, bad: &[String], rest: &str) -> Option<Violation> {
    if bad.is_empty() {
        return None;
    }
    violation(reason, format!("{} {rest}", containers_named(bad)))
}

/// Sorted and without duplicates, as Go's string sets list themselves.
fn set(mut items: Vec<String>) -> Vec<String> {
    items.sort();
    items.dedup();
    items
}

/// Init containers, containers and ephemeral containers, in the order kube visits them.
fn containers<'a>(pod: &PodView<'a>) -> impl Iterator<Item = &'a Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|k| pod.spec.get(k).and_then(Value::as_array))
        .flatten()
}

fn name(container: &Value) -> String {
    container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn security_context(v: &Value) -> Option<&Map<String, Value>> {
    v.get("securityContext").and_then(Value::as_object)
}

fn pod_context<'a>(pod: &PodView<'a>) -> Option<&'a Map<String, Value>> {
    security_context(pod.spec)
}

fn annotations<'a>(pod: &PodView<'a>) -> Option<&'a Map<String, Value>> {
    pod.meta.get("annotations").and_then(Value::as_object)
}

/// Containers whose security context field `key` is the boolean `value`.
fn containers_setting(pod: &PodView<'_>, key: &str, value: bool) -> Vec<String> {
    containers(pod)
        .filter(|c| {
            security_context(c)
                .and_then(|s| s.get(key))
                .and_then(Value::as_bool)
                == Some(value)
        })
        .map(name)
        .collect()
}

/// Pods in a user namespace (`hostUsers: false`) get the checks that are moot there relaxed.
fn in_user_namespace(pod: &PodView<'_>) -> bool {
    pod.spec.get("hostUsers").and_then(Value::as_bool) == Some(false)
}

/// Windows pods are spared the Linux-only restricted checks (policy 1.25 on).
fn windows(pod: &PodView<'_>, minor: u32) -> bool {
    minor >= 25 && pod.spec.pointer("/os/name").and_then(Value::as_str) == Some("windows")
}

const APP_ARMOR_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

fn app_armor_profile(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let bad: Vec<String> = annotations(pod)?
        .iter()
        .filter(|(k, _)| k.starts_with(APP_ARMOR_PREFIX))
        .filter_map(|(k, v)| {
            let v = v.as_str().unwrap_or_default();
            let allowed = v.is_empty() || v == "runtime/default" || v.starts_with("localhost/");
            (!allowed).then(|| format!("{k}={}", go_quote(v)))
        })
        .collect();
    if bad.is_empty() {
        return None;
    }
    let bad = set(bad);
    violation(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            bad.len(),
        ),
        bad.join(", "),
    )
}

const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The capabilities a container adds.
fn added(container: &Value) -> Vec<String> {
    security_context(container)
        .and_then(|s| s.get("capabilities"))
        .and_then(|c| c.get("add"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

fn capabilities_baseline(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut caps = Vec::new();
    for c in containers(pod) {
        let extra: Vec<String> = added(c)
            .into_iter()
            .filter(|a| !BASELINE_CAPABILITIES.contains(&a.as_str()))
            .collect();
        if !extra.is_empty() {
            bad.push(name(c));
            caps.extend(extra);
        }
    }
    containers_must(
        "non-default capabilities",
        &bad,
        &format!(
            "must not include {} in securityContext.capabilities.add",
            join_quote(&set(caps))
        ),
    )
}

fn host_namespaces(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let set_ones: Vec<&str> = ["hostIPC", "hostNetwork", "hostPID"]
        .into_iter()
        .filter(|k| pod.spec.get(*k).and_then(Value::as_bool) == Some(true))
        .collect();
    if set_ones.is_empty() {
        return None;
    }
    violation("host namespaces", set_ones.join(", "))
}

fn volumes<'a>(pod: &PodView<'a>) -> impl Iterator<Item = &'a Map<String, Value>> {
    pod.spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn volume_name(v: &Map<String, Value>) -> String {
    v.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn host_path_volumes(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let bad: Vec<String> = volumes(pod)
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(volume_name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad)
        ),
    )
}

fn host_ports(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = Vec::new();
    for c in containers(pod) {
        let used: Vec<String> = c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("hostPort").and_then(Value::as_i64))
            .filter(|p| *p != 0)
            .map(|p| p.to_string())
            .collect();
        if !used.is_empty() {
            bad.push(name(c));
            ports.extend(used);
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports = set(ports);
    violation(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_named(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn privileged(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    containers_must(
        "privileged",
        &containers_setting(pod, "privileged", true),
        "must not set securityContext.privileged=true",
    )
}

fn proc_mount(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for c in containers(pod) {
        let Some(t) = security_context(c)
            .and_then(|s| s.get("procMount"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        if t != "Default" {
            bad.push(name(c));
            types.push(t.to_string());
        }
    }
    containers_must(
        "procMount",
        &bad,
        &format!(
            "must not set securityContext.procMount to {}",
            join_quote(&set(types))
        ),
    )
}

fn se_linux_options(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    const ALLOWED_TYPES: [&str; 4] = ["", "container_t", "container_init_t", "container_kvm_t"];
    let mut bad_types = Vec::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |ctx: Option<&Map<String, Value>>| -> bool {
        let Some(opts) = ctx
            .and_then(|s| s.get("seLinuxOptions"))
            .and_then(Value::as_object)
        else {
            return true;
        };
        let field = |k: &str| {
            opts.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let mut ok = true;
        let t = field("type");
        if !ALLOWED_TYPES.contains(&t.as_str()) {
            ok = false;
            bad_types.push(t);
        }
        if !field("user").is_empty() {
            ok = false;
            set_user = true;
        }
        if !field("role").is_empty() {
            ok = false;
            set_role = true;
        }
        ok
    };
    let mut setters = Vec::new();
    if !valid(pod_context(pod)) {
        setters.push("pod".to_string());
    }
    let bad: Vec<String> = containers(pod)
        .filter(|c| !valid(security_context(c)))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    // As kube words it: the user and role notes only follow a forbidden type.
    let mut data = Vec::new();
    let bad_types = set(bad_types);
    if !bad_types.is_empty() {
        data.push(format!(
            "{} {}",
            pluralize("type", "types", bad_types.len()),
            join_quote(&bad_types)
        ));
        if set_user {
            data.push("user may not be set".to_string());
        }
        if set_role {
            data.push("role may not be set".to_string());
        }
    }
    violation(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            data.join("; ")
        ),
    )
}

/// The sysctls the baseline level allows, with the policy version that allowed each.
const SAFE_SYSCTLS: [(&str, u32); 12] = [
    ("kernel.shm_rmid_forced", 0),
    ("net.ipv4.ip_local_port_range", 0),
    ("net.ipv4.tcp_syncookies", 0),
    ("net.ipv4.ping_group_range", 0),
    ("net.ipv4.ip_unprivileged_port_start", 0),
    ("net.ipv4.ip_local_reserved_ports", 27),
    ("net.ipv4.tcp_keepalive_time", 29),
    ("net.ipv4.tcp_fin_timeout", 29),
    ("net.ipv4.tcp_keepalive_intvl", 29),
    ("net.ipv4.tcp_keepalive_probes", 29),
    ("net.ipv4.tcp_rmem", 32),
    ("net.ipv4.tcp_wmem", 32),
];

fn sysctls(pod: &PodView<'_>, minor: u32) -> Option<Violation> {
    let bad: Vec<&str> = pod_context(pod)
        .and_then(|s| s.get("sysctls"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| {
            !SAFE_SYSCTLS
                .iter()
                .any(|(safe, since)| safe == n && minor >= *since)
        })
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation("forbidden sysctls", bad.join(", "))
}

fn seccomp_type(ctx: Option<&Map<String, Value>>) -> Option<String> {
    ctx.and_then(|s| s.get("seccompProfile"))
        .filter(|p| !p.is_null())
        .map(|p| {
            p.get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
}

fn valid_seccomp(t: &str) -> bool {
    t == "RuntimeDefault" || t == "Localhost"
}

/// Who sets a forbidden seccomp profile type (`pod`, `containers "a", "b"`), which types, and
/// the containers that set none while the pod sets no valid one.
struct SeccompFindings {
    setters: Vec<String>,
    values: Vec<String>,
    unset: Vec<String>,
}

fn seccomp_findings(pod: &PodView<'_>) -> SeccompFindings {
    let mut setters = Vec::new();
    let mut values = Vec::new();
    let pod_type = seccomp_type(pod_context(pod));
    let pod_valid = match &pod_type {
        Some(t) if !valid_seccomp(t) => {
            setters.push("pod".to_string());
            values.push(t.clone());
            false
        }
        Some(_) => true,
        None => false,
    };
    let mut bad = Vec::new();
    let mut unset = Vec::new();
    for c in containers(pod) {
        match seccomp_type(security_context(c)) {
            Some(t) if !valid_seccomp(&t) => {
                bad.push(name(c));
                values.push(t);
            }
            Some(_) => {}
            None if !pod_valid => unset.push(name(c)),
            None => {}
        }
    }
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    SeccompFindings {
        setters,
        values: set(values),
        unset,
    }
}

fn seccomp_setters(found: &SeccompFindings) -> Option<Violation> {
    violation(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            found.setters.join(" and "),
            join_quote(&found.values)
        ),
    )
}

fn seccomp_profile_baseline(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let found = seccomp_findings(pod);
    if found.setters.is_empty() {
        return None;
    }
    seccomp_setters(&found)
}

fn seccomp_profile_restricted(pod: &PodView<'_>, minor: u32) -> Option<Violation> {
    if windows(pod, minor) {
        return None;
    }
    let found = seccomp_findings(pod);
    if !found.setters.is_empty() {
        return seccomp_setters(&found);
    }
    if found.unset.is_empty() {
        return None;
    }
    violation(
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            containers_named(&found.unset)
        ),
    )
}

fn allow_privilege_escalation(pod: &PodView<'_>, minor: u32) -> Option<Violation> {
    if windows(pod, minor) {
        return None;
    }
    let bad: Vec<String> = containers(pod)
        .filter(|c| {
            security_context(c)
                .and_then(|s| s.get("allowPrivilegeEscalation"))
                .and_then(Value::as_bool)
                != Some(false)
        })
        .map(name)
        .collect();
    containers_must(
        "allowPrivilegeEscalation != false",
        &bad,
        "must set securityContext.allowPrivilegeEscalation=false",
    )
}

fn capabilities_restricted(pod: &PodView<'_>, minor: u32) -> Option<Violation> {
    if windows(pod, minor) {
        return None;
    }
    let mut missing_drop_all = Vec::new();
    let mut adding = Vec::new();
    let mut caps = Vec::new();
    for c in containers(pod) {
        let Some(capabilities) = security_context(c)
            .and_then(|s| s.get("capabilities"))
            .filter(|c| !c.is_null())
        else {
            missing_drop_all.push(name(c));
            continue;
        };
        let drops_all = capabilities
            .get("drop")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|x| x.as_str() == Some("ALL")));
        if !drops_all {
            missing_drop_all.push(name(c));
        }
        let extra: Vec<String> = added(c).into_iter().filter(|a| a != "NET_BIND_SERVICE").collect();
        if !extra.is_empty() {
            adding.push(name(c));
            caps.extend(extra);
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quote(&set(caps))
        ));
    }
    if details.is_empty() {
        return None;
    }
    violation("unrestricted capabilities", details.join("; "))
}

/// The volume types the restricted level allows.
const ALLOWED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The volume types kube names when it refuses them (any other is `unknown`).
const NAMED_VOLUMES: [&str; 21] = [
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    let has = |v: &Map<String, Value>, k: &str| v.get(k).is_some_and(|x| !x.is_null());
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for v in volumes(pod) {
        if ALLOWED_VOLUMES.iter().any(|k| has(v, k)) {
            continue;
        }
        bad.push(volume_name(v));
        let t = NAMED_VOLUMES
            .iter()
            .find(|k| has(v, k))
            .copied()
            .unwrap_or("unknown");
        types.push(t.to_string());
    }
    if bad.is_empty() {
        return None;
    }
    let types = set(types);
    violation(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("restricted volume type", "restricted volume types", types.len()),
            join_quote(&types)
        ),
    )
}

fn run_as_non_root(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    let pod_value = pod_context(pod)
        .and_then(|s| s.get("runAsNonRoot"))
        .and_then(Value::as_bool);
    let mut setters = Vec::new();
    if pod_value == Some(false) {
        setters.push("pod".to_string());
    }
    let explicit = containers_setting(pod, "runAsNonRoot", false);
    let implicit: Vec<String> = containers(pod)
        .filter(|c| {
            pod_value != Some(true)
                && security_context(c)
                    .and_then(|s| s.get("runAsNonRoot"))
                    .and_then(Value::as_bool)
                    .is_none()
        })
        .map(name)
        .collect();
    if !explicit.is_empty() {
        setters.push(containers_named(&explicit));
    }
    if !setters.is_empty() {
        return violation(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if implicit.is_empty() {
        return None;
    }
    violation(
        "runAsNonRoot != true",
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_named(&implicit)
        ),
    )
}

fn run_as_user(pod: &PodView<'_>, _: u32) -> Option<Violation> {
    if in_user_namespace(pod) {
        return None;
    }
    let root = |ctx: Option<&Map<String, Value>>| {
        ctx.and_then(|s| s.get("runAsUser")).and_then(Value::as_i64) == Some(0)
    };
    let mut setters = Vec::new();
    if root(pod_context(pod)) {
        setters.push("pod".to_string());
    }
    let bad: Vec<String> = containers(pod)
        .filter(|c| root(security_context(c)))
        .map(name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detail(level: Level, minor: u32, meta: Value, spec: Value) -> String {
        forbidden_detail(&evaluate(
            level,
            minor,
            &PodView {
                meta: &meta,
                spec: &spec,
            },
        ))
    }

    fn latest(level: Level, spec: Value) -> String {
        detail(level, u32::MAX, json!({}), spec)
    }

    #[test]
    fn a_plain_container_meets_baseline_but_not_restricted() {
        let spec = json!({"containers": [{"name": "c", "image": "nginx"}]});
        assert_eq!(latest(Level::Baseline, spec.clone()), "");
        assert_eq!(latest(Level::Privileged, json!({"hostPID": true})), "");
        assert_eq!(
            latest(Level::Restricted, spec),
            "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
             unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
             runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
             seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
    }

    #[test]
    fn a_hardened_pod_meets_restricted() {
        let spec = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
            }}],
            "volumes": [{"name": "v", "configMap": {"name": "x"}}]
        });
        assert_eq!(latest(Level::Restricted, spec), "");
    }

    #[test]
    fn baseline_names_each_privilege_in_kubes_words() {
        let spec = json!({
            "hostNetwork": true, "hostPID": true,
            "securityContext": {
                "sysctls": [{"name": "kernel.msgmax", "value": "1"}, {"name": "net.ipv4.tcp_syncookies", "value": "1"}],
                "seLinuxOptions": {"type": "spc_t", "user": "u"}
            },
            "initContainers": [{"name": "i", "securityContext": {"procMount": "Unmasked"}}],
            "containers": [
                {"name": "a", "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_ADMIN"]}},
                 "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 90, "hostPort": 10000}]},
                {"name": "b", "securityContext": {"privileged": true, "seccompProfile": {"type": "Unconfined"}}}
            ],
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}]
        });
        let meta = json!({"annotations": {APP_ARMOR_PREFIX.to_string() + "a": "unconfined"}});
        assert_eq!(
            detail(Level::Baseline, u32::MAX, meta, spec),
            "forbidden AppArmor profile (container.apparmor.security.beta.kubernetes.io/a=\"unconfined\"), \
             non-default capabilities (container \"a\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add), \
             host namespaces (hostNetwork, hostPID), \
             hostPath volumes (volume \"h\"), \
             hostPort (container \"a\" uses hostPorts 10000, 8080), \
             privileged (containers \"a\", \"b\" must not set securityContext.privileged=true), \
             procMount (container \"i\" must not set securityContext.procMount to \"Unmasked\"), \
             seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set), \
             forbidden sysctls (kernel.msgmax), \
             seccompProfile (container \"b\" must not set securityContext.seccompProfile.type to \"Unconfined\")"
        );
    }

    #[test]
    fn restricted_checks_apply_from_their_policy_version() {
        let spec = json!({
            "securityContext": {"runAsNonRoot": true, "runAsUser": 0},
            "containers": [{"name": "c", "securityContext": {"runAsNonRoot": false}}],
            "volumes": [{"name": "n", "nfs": {}}, {"name": "x", "somethingNew": {}}]
        });
        let at = |minor| detail(Level::Restricted, minor, json!({}), spec.clone());
        assert_eq!(
            at(7),
            "restricted volume types (volumes \"n\", \"x\" use restricted volume types \"nfs\", \"unknown\"), \
             runAsNonRoot != true (container \"c\" must not set securityContext.runAsNonRoot=false)"
        );
        assert!(at(22).contains("unrestricted capabilities"));
        assert!(!at(22).contains("runAsUser=0"));
        assert!(at(23).contains("runAsUser=0 (pod must not set runAsUser=0)"));
        let sysctl = json!({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_rmem"}]}});
        assert_eq!(
            detail(Level::Baseline, 31, json!({}), sysctl.clone()),
            "forbidden sysctls (net.ipv4.tcp_rmem)"
        );
        assert_eq!(detail(Level::Baseline, 32, json!({}), sysctl), "");
    }

    #[test]
    fn user_namespaces_and_windows_relax_what_is_moot_there() {
        let spec = json!({"hostUsers": false, "os": {"name": "windows"},
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]});
        assert_eq!(latest(Level::Restricted, spec), "");
    }

    #[test]
    fn summaries_name_the_reasons_only() {
        let v = evaluate(
            Level::Baseline,
            u32::MAX,
            &PodView {
                meta: &json!({}),
                spec: &json!({"hostIPC": true, "containers": [{"name": "c", "securityContext": {"privileged": true}}]}),
            },
        );
        assert_eq!(forbidden_reason(&v), "host namespaces, privileged");
    }
}
