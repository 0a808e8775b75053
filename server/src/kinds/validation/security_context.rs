//! The security settings of a pod and its containers, as kube checks them
//! (`validatePodSpecSecurityContext`, `ValidateSecurityContext`, `validateLinux`,
//! `validateWindows`, `validateWindowsHostProcessPod`, and the seccomp and AppArmor
//! annotations of `ValidatePodSpecificAnnotations` and `ValidatePodCreate`): user and group ids
//! in range, sysctls with valid unique names that do not reach a namespace the pod shares with
//! the host, known policies, seccomp and AppArmor profiles of a known type with a local profile
//! exactly when it is `Localhost`, Windows options kube can pass on, no privileged container
//! that may not escalate, `Unmasked` /proc only in a user namespace, the settings of one
//! operating system only, and annotations that agree with the fields.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{keys, list_of, not_supported, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_subdomain_reasons, Causes};

const PROFILE_TYPES: [&str; 3] = ["Localhost", "RuntimeDefault", "Unconfined"];

/// The pod-level fields that hold one of a few values, each with kube's supported values.
const POD_POLICIES: [(&str, &[&str]); 3] = [
    ("fsGroupChangePolicy", &["Always", "OnRootMismatch"]),
    ("supplementalGroupsPolicy", &["Merge", "Strict"]),
    ("seLinuxChangePolicy", &["MountOption", "Recursive"]),
];

/// A sysctl name: dot- or slash-separated segments.
const SYSCTL_PATTERN: &str = r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
const SYSCTL_MAX: usize = 253;
static SYSCTL: LazyLock<Regex> = LazyLock::new(|| Regex::new(SYSCTL_PATTERN).expect("valid"));

/// The pod-level settings a Windows pod may not have, and where kube reports them (under the
/// security context, or on the spec itself).
const NOT_FOR_WINDOWS_POD: [(&str, bool); 15] = [
    ("appArmorProfile", true),
    ("seLinuxOptions", true),
    ("hostUsers", false),
    ("hostPID", false),
    ("hostIPC", false),
    ("seccompProfile", true),
    ("fsGroup", true),
    ("fsGroupChangePolicy", true),
    ("sysctls", true),
    ("shareProcessNamespace", false),
    ("runAsUser", true),
    ("runAsGroup", true),
    ("supplementalGroups", true),
    ("supplementalGroupsPolicy", true),
    ("seLinuxChangePolicy", true),
];
/// The container settings a Windows pod may not have.
const NOT_FOR_WINDOWS_CONTAINER: [&str; 10] = [
    "appArmorProfile",
    "seLinuxOptions",
    "seccompProfile",
    "capabilities",
    "readOnlyRootFilesystem",
    "privileged",
    "allowPrivilegeEscalation",
    "procMount",
    "runAsUser",
    "runAsGroup",
];

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_CONTAINER_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Whether a JSON field is set (present and not null).
fn set(v: &Value, field: &str) -> bool {
    v.get(field).is_some_and(|f| !f.is_null())
}

/// kube's `IsValidUserID`/`IsValidGroupID` for the id at `field`, if it is set.
fn id(v: &Value, field: String, causes: &mut Causes) {
    if let Some(n) = v.as_i64().filter(|n| !(0..=i64::from(i32::MAX)).contains(n)) {
        causes.push((
            field,
            format!("Invalid value: {n}: must be between 0 and 2147483647, inclusive"),
        ));
    }
}

/// Every container of a pod spec with its path, in kube's order: init containers, containers,
/// ephemeral containers.
fn containers<'a>(spec: &'a Value, path: &str) -> Vec<(String, &'a Value)> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| {
            list_of(spec, list)
                .iter()
                .enumerate()
                .map(move |(i, c)| (format!("{path}.{list}[{i}]"), c))
        })
        .collect()
}

/// Whether the pod runs in the host's user namespace (`hostUsers` unset or true).
pub fn host_users(spec: &Value) -> bool {
    spec["hostUsers"] != Value::Bool(false)
}

/// kube's `validatePodSpecSecurityContext` for the pod spec `spec` at `path`.
pub fn pod(spec: &Value, path: &str, causes: &mut Causes) {
    let sc = &spec["securityContext"];
    let at = format!("{path}.securityContext");
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        id(&sc[field], format!("{at}.{field}"), causes);
    }
    for (i, g) in list_of(sc, "supplementalGroups").iter().enumerate() {
        id(g, format!("{at}.supplementalGroups[{i}]"), causes);
    }
    if spec["shareProcessNamespace"] == Value::Bool(true) && spec["hostPID"] == Value::Bool(true) {
        causes.push((
            format!("{at}.shareProcessNamespace"),
            "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled".to_string(),
        ));
    }
    sysctls(spec, &format!("{at}.sysctls"), causes);
    if let Some(p) = sc.get("fsGroupChangePolicy").and_then(Value::as_str) {
        policy(p, POD_POLICIES[0].1, format!("{at}.fsGroupChangePolicy"), causes);
    }
    profiles_and_windows_options(sc, &at, causes);
    for (field, supported) in &POD_POLICIES[1..] {
        if let Some(p) = sc.get(*field).and_then(Value::as_str) {
            policy(p, supported, format!("{at}.{field}"), causes);
        }
    }
}

/// A field that must hold one of `supported` (kube's `NotSupported`, an empty value too).
fn policy(value: &str, supported: &[&str], field: String, causes: &mut Causes) {
    if !supported.contains(&value) {
        causes.push((field, not_supported(value, supported)));
    }
}

/// The seccomp profile, Windows options and AppArmor profile of a pod's or a container's
/// security context, in kube's order.
fn profiles_and_windows_options(sc: &Value, at: &str, causes: &mut Causes) {
    if sc["seccompProfile"].is_object() {
        seccomp_profile(&sc["seccompProfile"], &format!("{at}.seccompProfile"), causes);
    }
    if sc["windowsOptions"].is_object() {
        windows_options(&sc["windowsOptions"], &format!("{at}.windowsOptions"), causes);
    }
    if sc["appArmorProfile"].is_object() {
        apparmor_profile(&sc["appArmorProfile"], &format!("{at}.appArmorProfile"), causes);
    }
}

/// kube's `validateSysctls`: each name set, valid and unique, and not one of a namespace the
/// pod shares with the host.
fn sysctls(spec: &Value, path: &str, causes: &mut Causes) {
    let mut names = HashSet::new();
    for (i, s) in list_of(&spec["securityContext"], "sysctls").iter().enumerate() {
        let name = str_of(s, "name");
        let at = format!("{path}[{i}].name");
        if name.is_empty() {
            causes.push((at.clone(), "Required value".to_string()));
        } else if name.len() > SYSCTL_MAX || !SYSCTL.is_match(name) {
            causes.push((
                at.clone(),
                format!(
                    "Invalid value: {}: must have at most {SYSCTL_MAX} characters and match regex {SYSCTL_PATTERN}",
                    go_quote(name)
                ),
            ));
        } else if names.contains(name) {
            causes.push((at.clone(), format!("Duplicate value: {}", go_quote(name))));
        }
        let shared = match sysctl_namespace(name) {
            Some("net") if spec["hostNetwork"] == Value::Bool(true) => Some("hostNetwork"),
            Some("ipc") if spec["hostIPC"] == Value::Bool(true) => Some("hostIPC"),
            _ => None,
        };
        if let Some(host) = shared {
            causes.push((
                at,
                format!(
                    "Invalid value: {}: may not be specified when '{host}' is true",
                    go_quote(name)
                ),
            ));
        }
        names.insert(name);
    }
}

/// The kernel namespace a sysctl belongs to (component-helpers' `GetNamespace`), its name
/// normalized to dots first.
fn sysctl_namespace(name: &str) -> Option<&'static str> {
    let normalized: String = match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '.' => '/',
                '/' => '.',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    };
    const PREFIXES: [(&str, &str); 4] = [
        ("kernel.shm", "ipc"),
        ("kernel.msg", "ipc"),
        ("fs.mqueue.", "ipc"),
        ("net.", "net"),
    ];
    if normalized == "kernel.sem" {
        return Some("ipc");
    }
    PREFIXES
        .iter()
        .find(|(prefix, _)| normalized.starts_with(prefix))
        .map(|(_, ns)| *ns)
}

/// kube's `ValidateSecurityContext` for a container's security context at `path`.
pub fn container(sc: &Value, path: &str, host_users: bool, causes: &mut Causes) {
    for field in ["runAsUser", "runAsGroup"] {
        id(&sc[field], format!("{path}.{field}"), causes);
    }
    if let Some(mount) = sc.get("procMount").and_then(Value::as_str) {
        let at = format!("{path}.procMount");
        policy(mount, &["Default", "Unmasked"], at.clone(), causes);
        if host_users && mount == "Unmasked" {
            causes.push((
                at,
                "Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`".to_string(),
            ));
        }
    }
    if sc["seccompProfile"].is_object() {
        seccomp_profile(&sc["seccompProfile"], &format!("{path}.seccompProfile"), causes);
    }
    if sc["allowPrivilegeEscalation"] == Value::Bool(false) {
        if sc["privileged"] == Value::Bool(true) {
            causes.push((
                path.to_string(),
                format!("Invalid value: {sc}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"),
            ));
        }
        for cap in list_of(&sc["capabilities"], "add") {
            if cap.as_str() == Some("CAP_SYS_ADMIN") {
                causes.push((
                    path.to_string(),
                    format!("Invalid value: {sc}: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"),
                ));
            }
        }
    }
    if sc["windowsOptions"].is_object() {
        windows_options(&sc["windowsOptions"], &format!("{path}.windowsOptions"), causes);
    }
    if sc["appArmorProfile"].is_object() {
        apparmor_profile(&sc["appArmorProfile"], &format!("{path}.appArmorProfile"), causes);
    }
}

/// kube's `validateSeccompProfileField`: a known type, and a relative local profile exactly
/// when the type is `Localhost`. (kube shows the profile as a Go struct dump when a local
/// profile comes with another type; it is shown as JSON here.)
fn seccomp_profile(profile: &Value, path: &str, causes: &mut Causes) {
    let kind = str_of(profile, "type");
    if kind.is_empty() {
        causes.push((
            format!("{path}.type"),
            "Required value: type is required when seccompProfile is set".to_string(),
        ));
    } else if !PROFILE_TYPES.contains(&kind) {
        causes.push((format!("{path}.type"), not_supported(kind, &PROFILE_TYPES)));
    }
    let at = format!("{path}.localhostProfile");
    match (kind, profile.get("localhostProfile").filter(|p| !p.is_null())) {
        ("Localhost", None) => causes.push((
            at,
            "Required value: must be set when seccomp type is Localhost".to_string(),
        )),
        ("Localhost", Some(file)) => local_descending_path(file.as_str().unwrap_or_default(), &at, causes),
        (_, Some(_)) => causes.push((
            at,
            format!("Invalid value: {profile}: can only be set when seccomp type is Localhost"),
        )),
        (_, None) => {}
    }
}

/// kube's `validateLocalDescendingPath`: relative, and never stepping up.
fn local_descending_path(file: &str, path: &str, causes: &mut Causes) {
    if file.starts_with('/') {
        causes.push((
            path.to_string(),
            format!("Invalid value: {}: must be a relative path", go_quote(file)),
        ));
    }
    if file.split('/').any(|part| part == "..") {
        causes.push((
            path.to_string(),
            format!("Invalid value: {}: must not contain '..'", go_quote(file)),
        ));
    }
}

/// kube's `ValidateAppArmorProfileField`.
fn apparmor_profile(profile: &Value, path: &str, causes: &mut Causes) {
    let at = format!("{path}.localhostProfile");
    let local = profile.get("localhostProfile").filter(|p| !p.is_null());
    match str_of(profile, "type") {
        "Localhost" => match local.map(|p| p.as_str().unwrap_or_default()) {
            None => causes.push((
                at,
                "Required value: must be set when AppArmor type is Localhost".to_string(),
            )),
            Some(name) => {
                if name.trim() != name {
                    causes.push((
                        at.clone(),
                        format!(
                            "Invalid value: {}: must not be padded with whitespace",
                            go_quote(name)
                        ),
                    ));
                } else if name.is_empty() {
                    causes.push((
                        at.clone(),
                        "Required value: must be set when AppArmor type is Localhost".to_string(),
                    ));
                }
                if name.len() > 4095 {
                    causes.push((at, "Too long: may not be more than 4095 bytes".to_string()));
                }
            }
        },
        "RuntimeDefault" | "Unconfined" => {
            if let Some(name) = local {
                causes.push((
                    at,
                    format!(
                        "Invalid value: {}: can only be set when AppArmor type is Localhost",
                        go_quote(name.as_str().unwrap_or_default())
                    ),
                ));
            }
        }
        "" => causes.push((
            format!("{path}.type"),
            "Required value: type is required when appArmorProfile is set".to_string(),
        )),
        other => causes.push((format!("{path}.type"), not_supported(other, &PROFILE_TYPES))),
    }
}

static CONTROL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[\x00-\x1f\x7f]").expect("valid"));
static NETBIOS_DOMAIN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^[^\\/:\*\?"<>|\.][^\\/:\*\?"<>|]{0,14}$"#).expect("valid"));
static DNS_DOMAIN: LazyLock<Regex> = LazyLock::new(|| {
    let label = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
    Regex::new(&format!(r"^{label}(?:\.{label})*$")).expect("valid")
});
static USER_BAD_CHARS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"["/\\:;|=,\+\*\?<>@\[\]]"#).expect("valid"));
static USER_DOTS_SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[\. ]+$").expect("valid"));

/// kube's `validateWindowsSecurityContextOptions`: a GMSA credential spec name that is a DNS
/// subdomain, a credential spec of 1 byte to 64 KiB, and a `runAsUserName` Windows accepts.
fn windows_options(options: &Value, path: &str, causes: &mut Causes) {
    if let Some(name) = options.get("gmsaCredentialSpecName").and_then(Value::as_str) {
        for why in dns_subdomain_reasons(name.as_bytes()) {
            causes.push((
                format!("{path}.gmsaCredentialSpecName"),
                format!("Invalid value: {}: {why}", go_quote(name)),
            ));
        }
    }
    if let Some(spec) = options.get("gmsaCredentialSpec").and_then(Value::as_str) {
        let why = match spec.len() {
            0 => Some("gmsaCredentialSpec cannot be an empty string".to_string()),
            l if l > 64 * 1024 => Some("gmsaCredentialSpec size must be under 64 KiB".to_string()),
            _ => None,
        };
        if let Some(why) = why {
            causes.push((
                format!("{path}.gmsaCredentialSpec"),
                format!("Invalid value: {}: {why}", go_quote(spec)),
            ));
        }
    }
    if let Some(user) = options.get("runAsUserName").and_then(Value::as_str) {
        for why in user_name_errors(user) {
            causes.push((
                format!("{path}.runAsUserName"),
                format!("Invalid value: {}: {why}", go_quote(user)),
            ));
        }
    }
}

/// Why a Windows `runAsUserName` (`[DOMAIN\]USER`) is refused, in kube's order.
fn user_name_errors(value: &str) -> Vec<String> {
    if value.is_empty() {
        return vec!["runAsUserName cannot be an empty string".to_string()];
    }
    if CONTROL.is_match(value) {
        return vec!["runAsUserName cannot contain control characters".to_string()];
    }
    let parts: Vec<&str> = value.split('\\').collect();
    let (domain, user) = match parts.as_slice() {
        [user] => (None, *user),
        [domain, user] => (Some(*domain), *user),
        _ => return vec!["runAsUserName cannot contain more than one backslash".to_string()],
    };
    let mut errors = Vec::new();
    if domain.is_some_and(|d| d.len() >= 256) {
        errors.push("runAsUserName's Domain length must be under 256 characters".to_string());
    }
    if domain.is_some_and(|d| !NETBIOS_DOMAIN.is_match(d) && !DNS_DOMAIN.is_match(d)) {
        errors.push("runAsUserName's Domain doesn't match the NetBios nor the DNS format".to_string());
    }
    if user.is_empty() {
        errors.push("runAsUserName's User cannot be empty".to_string());
    } else if user.len() > 104 {
        errors.push("runAsUserName's User length must not be longer than 104 characters".to_string());
    }
    if USER_DOTS_SPACES.is_match(user) {
        errors.push("runAsUserName's User cannot contain only periods or spaces".to_string());
    }
    if USER_BAD_CHARS.is_match(user) {
        errors.push(
            r#"runAsUserName's User cannot contain the following characters: "/\:;|=,+*?<>@[]"#.to_string(),
        );
    }
    errors
}

/// kube's `validateWindowsHostProcessPod`: the pod's and a container's `hostProcess` agree,
/// and a pod with one host process container has only those, on the host's network.
pub fn host_process(spec: &Value, path: &str, causes: &mut Causes) {
    let pod_value = spec["securityContext"]["windowsOptions"]["hostProcess"].as_bool();
    let all = containers(spec, path);
    let mut host_process = 0;
    for (at, c) in &all {
        let own = c["securityContext"]["windowsOptions"]["hostProcess"].as_bool();
        if let (Some(p), Some(o)) = (pod_value, own) {
            if p != o {
                causes.push((
                    format!("{at}.securityContext.windowsOptions.hostProcess"),
                    format!("Invalid value: {o}: pod hostProcess value must be identical if both are specified, was {p}"),
                ));
            }
        }
        if own.or(pod_value) == Some(true) {
            host_process += 1;
        }
    }
    if host_process > 0 {
        if host_process != all.len() {
            causes.push((
                path.to_string(),
                "Invalid value: \"\": If pod contains any hostProcess containers then all containers must be HostProcess containers".to_string(),
            ));
        }
        if spec["hostNetwork"] != Value::Bool(true) {
            causes.push((
                format!("{path}.hostNetwork"),
                "Invalid value: false: hostNetwork must be true if pod contains any hostProcess containers"
                    .to_string(),
            ));
        }
    }
}

/// kube's `validateHostUsers`: a pod in its own user namespace shares no other namespace
/// with the host.
pub fn own_user_namespace(spec: &Value, path: &str, causes: &mut Causes) {
    if host_users(spec) {
        return;
    }
    for shared in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[shared] == Value::Bool(true) {
            causes.push((
                format!("{path}.{shared}"),
                "Forbidden: when `hostUsers` is false".to_string(),
            ));
        }
    }
}

/// kube's `validateOS` and, for a known OS, `validateLinux` or `validateWindows`: the settings
/// of the other operating system are refused.
pub fn os(spec: &Value, path: &str, causes: &mut Causes) {
    if !spec["os"].is_object() {
        return;
    }
    let at = format!("{path}.os");
    match str_of(&spec["os"], "name") {
        "" => causes.push((
            format!("{at}.name"),
            "Required value: cannot be empty".to_string(),
        )),
        "linux" => linux(spec, path, causes),
        "windows" => windows(spec, path, causes),
        other => causes.push((at, not_supported(other, &["linux", "windows"]))),
    }
}

fn linux(spec: &Value, path: &str, causes: &mut Causes) {
    const WHY: &str = "Forbidden: windows options cannot be set for a linux pod";
    if set(&spec["securityContext"], "windowsOptions") {
        causes.push((format!("{path}.securityContext.windowsOptions"), WHY.to_string()));
    }
    for (at, c) in containers(spec, path) {
        if set(&c["securityContext"], "windowsOptions") {
            causes.push((format!("{at}.securityContext.windowsOptions"), WHY.to_string()));
        }
    }
}

fn windows(spec: &Value, path: &str, causes: &mut Causes) {
    const WHY: &str = "Forbidden: cannot be set for a windows pod";
    let sc = &spec["securityContext"];
    for (field, in_context) in NOT_FOR_WINDOWS_POD {
        let present = match field {
            "hostPID" | "hostIPC" => spec[field] == Value::Bool(true),
            "sysctls" => !list_of(sc, field).is_empty(),
            _ if in_context => set(sc, field),
            _ => set(spec, field),
        };
        if present {
            let at = if in_context {
                format!("{path}.securityContext.{field}")
            } else {
                format!("{path}.{field}")
            };
            causes.push((at, WHY.to_string()));
        }
    }
    for (at, c) in containers(spec, path) {
        for field in NOT_FOR_WINDOWS_CONTAINER {
            if set(&c["securityContext"], field) {
                causes.push((format!("{at}.securityContext.{field}"), WHY.to_string()));
            }
        }
    }
}

/// Whether a container of that name is in the pod spec.
fn has_container(spec: &Value, name: &str) -> bool {
    containers(spec, "spec")
        .iter()
        .any(|(_, c)| str_of(c, "name") == name)
}

/// The seccomp and AppArmor annotations of a pod or pod template (kube's
/// `ValidateSeccompPodAnnotations` and `ValidateAppArmorPodAnnotations`), its annotations at
/// `path`. kube walks them in map order; they are walked by name here.
pub fn annotations(annotations: &Value, spec: &Value, path: &str, causes: &mut Causes) {
    let mut all: Vec<(&String, &str)> = keys(annotations)
        .map(|(k, v)| (k, v.as_str().unwrap_or_default()))
        .collect();
    all.sort();
    if let Some((_, p)) = all.iter().find(|(k, _)| *k == SECCOMP_POD_ANNOTATION) {
        seccomp_annotation(p, &format!("{path}.{SECCOMP_POD_ANNOTATION}"), causes);
    }
    for (k, p) in all
        .iter()
        .filter(|(k, _)| k.starts_with(SECCOMP_CONTAINER_ANNOTATION))
    {
        seccomp_annotation(p, &format!("{path}.{k}"), causes);
    }
    for (k, p) in &all {
        let Some(container) = k.strip_prefix(APPARMOR_CONTAINER_ANNOTATION) else {
            continue;
        };
        let at = format!("{path}[{k}]");
        if !has_container(spec, container) {
            causes.push((
                at.clone(),
                format!("Invalid value: {}: container not found", go_quote(container)),
            ));
        }
        let known = ["", "runtime/default", "unconfined"].contains(p) || p.starts_with("localhost/");
        if !known {
            causes.push((
                at,
                format!(
                    "Invalid value: {}: invalid AppArmor profile name: {}",
                    go_quote(p),
                    go_quote(p)
                ),
            ));
        }
    }
}

/// kube's `ValidateSeccompProfile` of an annotation's value.
fn seccomp_annotation(profile: &str, path: &str, causes: &mut Causes) {
    match profile {
        "runtime/default" | "docker/default" | "unconfined" => {}
        _ => match profile.strip_prefix("localhost/") {
            Some(file) => local_descending_path(file, path, causes),
            None => causes.push((
                path.to_string(),
                format!(
                    "Invalid value: {}: must be a valid seccomp profile",
                    go_quote(profile)
                ),
            )),
        },
    }
}

/// What an annotation's value must be for a profile of each type (a prefix for `Localhost`,
/// followed by the local profile).
fn annotation_fits(
    annotation: &str,
    profile: &Value,
    exact: &[(&str, &[&str])],
    local_prefix: &str,
) -> Result<(), &'static str> {
    let kind = str_of(profile, "type");
    if kind == "Localhost" {
        return match annotation.strip_prefix(local_prefix) {
            None => Err("type"),
            Some(file) if profile.get("localhostProfile").and_then(Value::as_str) != Some(file) => {
                Err("localhostProfile")
            }
            Some(_) => Ok(()),
        };
    }
    match exact.iter().find(|(k, _)| *k == kind) {
        Some((_, allowed)) if !allowed.contains(&annotation) => Err("type"),
        _ => Ok(()),
    }
}

/// kube's `validateSeccompAnnotationsAndFields` and
/// `validateAppArmorAnnotationsAndFieldsMatchOnCreate`, on a pod's create: where both an
/// annotation and the field name a profile, they agree.
pub fn annotations_match_fields(pod: &Value, causes: &mut Causes) {
    let annotations = &pod["metadata"]["annotations"];
    let spec = &pod["spec"];
    let annotation = |key: &str| annotations.get(key).and_then(Value::as_str);
    const SECCOMP: [(&str, &[&str]); 2] = [
        ("Unconfined", &["unconfined"]),
        ("RuntimeDefault", &["runtime/default", "docker/default"]),
    ];
    const APPARMOR: [(&str, &[&str]); 2] = [
        ("Unconfined", &["unconfined"]),
        ("RuntimeDefault", &["runtime/default"]),
    ];
    let mismatch = |what: &str, field: &str, at: &str, causes: &mut Causes| {
        let message = match field {
            "type" => format!("Forbidden: {what} type in annotation and field must match"),
            _ => format!("Forbidden: {what} profile in annotation and field must match"),
        };
        causes.push((format!("{at}.{field}"), message));
    };
    let pod_seccomp = &spec["securityContext"]["seccompProfile"];
    if let (true, Some(a)) = (pod_seccomp.is_object(), annotation(SECCOMP_POD_ANNOTATION)) {
        if let Err(field) = annotation_fits(a, pod_seccomp, &SECCOMP, "localhost/") {
            mismatch("seccomp", field, "spec.securityContext.seccompProfile", causes);
        }
    }
    let all = containers(spec, "spec");
    for (at, c) in &all {
        let profile = &c["securityContext"]["seccompProfile"];
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION}{}", str_of(c, "name"));
        if let (true, Some(a)) = (profile.is_object(), annotation(&key)) {
            if let Err(field) = annotation_fits(a, profile, &SECCOMP, "localhost/") {
                mismatch(
                    "seccomp",
                    field,
                    &format!("{at}.securityContext.seccompProfile"),
                    causes,
                );
            }
        }
    }
    if str_of(&spec["os"], "name") == "windows" {
        return;
    }
    let pod_apparmor = &spec["securityContext"]["appArmorProfile"];
    for (at, c) in &all {
        let own = &c["securityContext"]["appArmorProfile"];
        let profile = if own.is_object() { own } else { pod_apparmor };
        let key = format!("{APPARMOR_CONTAINER_ANNOTATION}{}", str_of(c, "name"));
        if let (true, Some(a)) = (profile.is_object(), annotation(&key)) {
            if let Err(field) = annotation_fits(a, profile, &APPARMOR, "localhost/") {
                mismatch(
                    "apparmor",
                    field,
                    &format!("{at}.securityContext.appArmorProfile"),
                    causes,
                );
            }
        }
    }
}

/// kube's rule (in `ValidatePodSpecificAnnotationUpdates`) that a pod's AppArmor annotations
/// are fixed once created: none added, changed or removed.
pub fn annotation_updates(old: &Value, new: &Value, causes: &mut Causes) {
    let (before, after) = (&old["metadata"]["annotations"], &new["metadata"]["annotations"]);
    let mut changed: Vec<&String> = keys(before)
        .filter(|(k, v)| k.starts_with(APPARMOR_CONTAINER_ANNOTATION) && after.get(k.as_str()) != Some(v))
        .map(|(k, _)| k)
        .collect();
    changed.sort();
    for k in changed {
        causes.push((
            format!("metadata.annotations[{k}]"),
            "Forbidden: may not remove or update AppArmor annotations".to_string(),
        ));
    }
    let mut added: Vec<&String> = keys(after)
        .filter(|(k, _)| k.starts_with(APPARMOR_CONTAINER_ANNOTATION) && before.get(k.as_str()).is_none())
        .map(|(k, _)| k)
        .collect();
    added.sort();
    for k in added {
        causes.push((
            format!("metadata.annotations[{k}]"),
            "Forbidden: may not add AppArmor annotations".to_string(),
        ));
    }
}
