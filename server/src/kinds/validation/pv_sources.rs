//! A PersistentVolume's volume sources, as kube's `ValidatePersistentVolumeSpec` checks them:
//! exactly one source, and that source's own fields. The sources are a table: each names its
//! field, the paths kube reports it at, the fields it requires (kube's `Required value` when
//! empty), and the checks of its own that go beyond required fields.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::str_of;
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_reasons, dns_subdomain_reasons, Causes};

/// One kind of volume source of a PersistentVolume.
struct Source {
    /// The field of the spec that holds it.
    field: &'static str,
    /// The path kube names when it is one source too many.
    named: &'static str,
    /// The path kube reports the source's own fields under (kube names a few differently).
    checked_at: &'static str,
    /// Fields that must not be empty, in the order kube checks them.
    required: &'static [&'static str],
    /// The source's other checks, after the required fields: the source, the volume's name,
    /// the path of the source.
    rest: Option<fn(&Value, &str, &str, &mut Causes)>,
}

const fn source(field: &'static str, required: &'static [&'static str]) -> Source {
    Source {
        field,
        named: field,
        checked_at: field,
        required,
        rest: None,
    }
}

const fn with(
    field: &'static str,
    required: &'static [&'static str],
    rest: fn(&Value, &str, &str, &mut Causes),
) -> Source {
    Source {
        rest: Some(rest),
        ..source(field, required)
    }
}

/// The sources in the order kube checks them (the first one set is the volume's source; the
/// others are one too many, except `flexVolume`, which kube always counts and checks).
const SOURCES: [Source; 22] = [
    with("hostPath", &[], host_path),
    Source {
        checked_at: "persistentDisk",
        ..with("gcePersistentDisk", &["pdName"], partition)
    },
    with("awsElasticBlockStore", &["volumeID"], partition),
    with("glusterfs", &["endpoints", "path"], glusterfs),
    with("flocker", &[], flocker),
    with("nfs", &["server", "path"], nfs),
    source("rbd", &["monitors", "image"]),
    with("quobyte", &[], quobyte),
    Source {
        named: "cephFS",
        ..source("cephfs", &["monitors"])
    },
    with("iscsi", &["targetPortal"], iscsi),
    with("cinder", &["volumeID"], secret_ref_named),
    with("fc", &[], fc),
    with("flexVolume", &["driver"], flex_options),
    with("azureFile", &["secretName", "shareName"], azure_file),
    source("vsphereVolume", &["volumePath"]),
    source("photonPersistentDisk", &["pdID"]),
    source("portworxVolume", &["volumeID"]),
    with("azureDisk", &["diskName", "diskURI"], azure_disk),
    source("scaleIO", &["gateway", "system", "volumeName"]),
    with("local", &[], local),
    with("storageos", &[], storageos),
    with("csi", &[], csi),
];

/// The fields of a PersistentVolume's spec that hold its source (kube's
/// `PersistentVolumeSource`).
pub fn source_fields() -> impl Iterator<Item = &'static str> {
    SOURCES.iter().map(|s| s.field)
}

/// The volume's sources: exactly one (`must specify a volume type`, `may not specify more than
/// 1 volume type`), checked, and node affinity for a `local` one.
pub fn sources(spec: &Value, pv_name: &str, causes: &mut Causes) {
    let mut found: Option<&'static str> = None;
    for s in &SOURCES {
        let value = &spec[s.field];
        if value.is_null() {
            continue;
        }
        if found.is_some() && s.field != "flexVolume" {
            causes.push((
                format!("spec.{}", s.named),
                super::EXTRA_VOLUME_SOURCE.to_string(),
            ));
            continue;
        }
        found = found.or(Some(s.field));
        let at = format!("spec.{}", s.checked_at);
        for field in s.required {
            required(value, field, &at, causes);
        }
        if let Some(rest) = s.rest {
            rest(value, pv_name, &at, causes);
        }
        if s.field == "local" && spec["nodeAffinity"].is_null() {
            causes.push((
                "spec.nodeAffinity".to_string(),
                "Required value: Local volume requires node affinity".to_string(),
            ));
        }
    }
    if found.is_none() {
        causes.push((
            "spec".to_string(),
            "Required value: must specify a volume type".to_string(),
        ));
    }
}

/// Whether a field is empty as Go sees it: absent, `""`, `[]` or `{}`.
fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// kube's `Required value` for `field` of `source` when it is empty.
fn required(source: &Value, field: &str, at: &str, causes: &mut Causes) {
    if empty(&source[field]) {
        causes.push((format!("{at}.{field}"), "Required value".to_string()));
    }
}

/// kube's `Invalid value` cause for a string.
fn invalid(path: String, value: &str, why: &str, causes: &mut Causes) {
    causes.push((path, format!("Invalid value: {}: {why}", go_quote(value))));
}

/// kube's `validatePathNoBacksteps`: no `..` element.
fn no_backsteps(path: &str, at: String, causes: &mut Causes) {
    if path.split('/').any(|p| p == "..") {
        invalid(at, path, "must not contain '..'", causes);
    }
}

/// The types a hostPath may have, as kube's error lists them (sorted).
const HOST_PATH_TYPES: [&str; 8] = [
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// kube's `validateHostPathVolumeSource`.
fn host_path(hp: &Value, _: &str, at: &str, causes: &mut Causes) {
    let path = str_of(hp, "path");
    if path.is_empty() {
        causes.push((format!("{at}.path"), "Required value".to_string()));
        return;
    }
    no_backsteps(path, format!("{at}.path"), causes);
    if let Some(t) = hp["type"].as_str().filter(|t| !HOST_PATH_TYPES.contains(t)) {
        causes.push((format!("{at}.type"), super::not_supported(t, &HOST_PATH_TYPES)));
    }
}

/// kube's `validateLocalVolumeSource`.
fn local(ls: &Value, _: &str, at: &str, causes: &mut Causes) {
    let path = str_of(ls, "path");
    if path.is_empty() {
        causes.push((format!("{at}.path"), "Required value".to_string()));
        return;
    }
    no_backsteps(path, format!("{at}.path"), causes);
}

/// The rest of kube's `validateNFSVolumeSource`: an absolute path.
fn nfs(nfs: &Value, _: &str, at: &str, causes: &mut Causes) {
    let path = str_of(nfs, "path");
    if !path.starts_with('/') {
        invalid(format!("{at}.path"), path, "must be an absolute path", causes);
    }
}

/// A GCE or AWS disk's partition, 0–255 (kube's message says 1).
fn partition(pd: &Value, _: &str, at: &str, causes: &mut Causes) {
    if let Some(p) = pd["partition"].as_i64().filter(|p| !(0..=255).contains(p)) {
        causes.push((
            format!("{at}.partition"),
            format!("Invalid value: {p}: must be between 1 and 255, inclusive"),
        ));
    }
}

/// The rest of kube's `validateGlusterfsPersistentVolumeSource`: a set endpoints namespace is
/// a namespace name.
fn glusterfs(g: &Value, _: &str, at: &str, causes: &mut Causes) {
    let Some(ns) = g["endpointsNamespace"].as_str() else {
        return;
    };
    let path = format!("{at}.endpointsNamespace");
    if ns.is_empty() {
        invalid(
            path,
            ns,
            "if the endpointnamespace is set, it must be a valid namespace name",
            causes,
        );
        return;
    }
    for why in dns_label_reasons(ns.as_bytes()) {
        invalid(path.clone(), ns, &why, causes);
    }
}

/// kube's `validateFlockerVolumeSource`: a dataset name or UUID, not both, a name without `/`.
fn flocker(f: &Value, _: &str, at: &str, causes: &mut Causes) {
    let (name, uuid) = (str_of(f, "datasetName"), str_of(f, "datasetUUID"));
    if name.is_empty() && uuid.is_empty() {
        causes.push((
            at.to_string(),
            "Required value: one of datasetName and datasetUUID is required".to_string(),
        ));
    }
    if !name.is_empty() && !uuid.is_empty() {
        invalid(
            at.to_string(),
            "resource",
            "datasetName and datasetUUID can not be specified simultaneously",
            causes,
        );
    }
    if name.contains('/') {
        invalid(format!("{at}.datasetName"), name, "must not contain '/'", causes);
    }
}

/// kube's `validateQuobyteVolumeSource`: a registry of `host:port` pairs, a tenant of at most 64
/// characters, a volume.
fn quobyte(q: &Value, _: &str, at: &str, causes: &mut Causes) {
    const PAIRS: &str = "must be a host:port pair or multiple pairs separated by commas";
    let registry = str_of(q, "registry");
    if registry.is_empty() {
        causes.push((format!("{at}.registry"), format!("Required value: {PAIRS}")));
    } else if str_of(q, "tenant").len() >= 65 {
        causes.push((
            format!("{at}.tenant"),
            "Required value: must be a UUID and may not exceed a length of 64 characters".to_string(),
        ));
    } else {
        for pair in registry.split(',') {
            if !host_port(pair) {
                invalid(format!("{at}.registry"), registry, PAIRS, causes);
            }
        }
    }
    required(q, "volume", at, causes);
}

/// Whether Go's `net.SplitHostPort` accepts `s`: `host:port`, or `[host]:port` for IPv6.
fn host_port(s: &str) -> bool {
    match s.strip_prefix('[') {
        Some(rest) => rest
            .split_once("]:")
            .is_some_and(|(host, port)| !host.contains(['[', ']']) && !port.contains(':')),
        None => s.split_once(':').is_some_and(|(host, port)| {
            !port.contains(':') && !host.contains(['[', ']']) && !port.contains(['[', ']'])
        }),
    }
}

/// The iSCSI names kube accepts: an IQN, an EUI or an NAA name (its regular expressions are
/// not anchored at the start).
static IQN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"iqn\.\d{4}-\d{2}\.([[:alnum:]\-.]+)(:[^,;*&$|\s]+)$").expect("valid pattern")
});
static EUI: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^eui.[[:alnum:]]{16}$").expect("valid pattern"));
static NAA: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^naa.[[:alnum:]]{32}$").expect("valid pattern"));

/// Whether `name` is an iSCSI name kube accepts: starting `iqn`, `eui` or `naa`, in its form.
fn iscsi_name(name: &str) -> bool {
    let form: &Regex = match name.get(..3) {
        Some("iqn") => &IQN,
        Some("eui") => &EUI,
        Some("naa") => &NAA,
        _ => return false,
    };
    form.is_match(name)
}

/// The rest of kube's `validateISCSIPersistentVolumeSource`.
fn iscsi(iscsi: &Value, pv_name: &str, at: &str, causes: &mut Causes) {
    let portal = str_of(iscsi, "targetPortal");
    let initiator = iscsi["initiatorName"].as_str();
    if initiator.is_some() && pv_name.len() + 1 + portal.len() > 64 {
        invalid(
            format!("{at}.targetportal"),
            portal,
            "Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.",
            causes,
        );
    }
    let iqn = str_of(iscsi, "iqn");
    if iqn.is_empty() {
        causes.push((format!("{at}.iqn"), "Required value".to_string()));
    } else if !iscsi_name(iqn) {
        invalid(format!("{at}.iqn"), iqn, "must be valid format", causes);
    }
    if let Some(lun) = iscsi["lun"].as_i64().filter(|l| !(0..=255).contains(l)) {
        causes.push((
            format!("{at}.lun"),
            format!("Invalid value: {lun}: must be between 0 and 255, inclusive"),
        ));
    }
    let chap = ["chapAuthDiscovery", "chapAuthSession"]
        .iter()
        .any(|f| iscsi[f].as_bool() == Some(true));
    if chap && iscsi["secretRef"].is_null() {
        causes.push((format!("{at}.secretRef"), "Required value".to_string()));
    }
    if iscsi["secretRef"].is_object() {
        required(&iscsi["secretRef"], "name", &format!("{at}.secretRef"), causes);
    }
    if let Some(initiator) = initiator.filter(|i| !iscsi_name(i)) {
        invalid(
            format!("{at}.initiatorname"),
            initiator,
            "must be valid format",
            causes,
        );
    }
}

/// kube's `validateFCVolumeSource`: target WWNs (with a LUN in 0–255) or WWIDs, not both.
fn fc(fc: &Value, _: &str, at: &str, causes: &mut Causes) {
    let (wwns, wwids) = (&fc["targetWWNs"], &fc["wwids"]);
    if empty(wwns) && empty(wwids) {
        causes.push((
            format!("{at}.targetWWNs"),
            "Required value: must specify either targetWWNs or wwids, but not both".to_string(),
        ));
    }
    if !empty(wwns) && !empty(wwids) {
        causes.push((
            format!("{at}.targetWWNs"),
            format!("Invalid value: {wwns}: targetWWNs and wwids can not be specified simultaneously"),
        ));
    }
    if !empty(wwns) {
        match fc["lun"].as_i64() {
            None => causes.push((
                format!("{at}.lun"),
                "Required value: lun is required if targetWWNs is specified".to_string(),
            )),
            Some(lun) if !(0..=255).contains(&lun) => causes.push((
                format!("{at}.lun"),
                format!("Invalid value: {lun}: must be between 0 and 255, inclusive"),
            )),
            Some(_) => {}
        }
    }
}

/// A Cinder volume's secret reference: named, in a namespace.
fn secret_ref_named(cd: &Value, _: &str, at: &str, causes: &mut Causes) {
    if cd["secretRef"].is_object() {
        let at = format!("{at}.secretRef");
        required(&cd["secretRef"], "name", &at, causes);
        required(&cd["secretRef"], "namespace", &at, causes);
    }
}

/// A FlexVolume's options: none in the `kubernetes.io` or `k8s.io` namespaces.
fn flex_options(fv: &Value, _: &str, at: &str, causes: &mut Causes) {
    let mut keys: Vec<&String> = fv["options"]
        .as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .collect();
    keys.sort();
    for key in keys {
        let namespace = key.split_once('/').map_or(key.as_str(), |(ns, _)| ns);
        let normalized = format!(".{}", namespace.to_lowercase());
        if normalized.ends_with(".kubernetes.io") || normalized.ends_with(".k8s.io") {
            invalid(
                format!("{at}.options[{key}]"),
                key,
                "kubernetes.io and k8s.io namespaces are reserved",
                causes,
            );
        }
    }
}

/// An Azure File volume's secret namespace, when set, is not empty.
fn azure_file(af: &Value, _: &str, at: &str, causes: &mut Causes) {
    if af["secretNamespace"].as_str() == Some("") {
        causes.push((format!("{at}.secretNamespace"), "Required value".to_string()));
    }
}

/// The rest of kube's `validateAzureDisk`: a known caching mode and kind, and a disk URI of
/// the kind's form (a managed disk's an Azure resource path, the others' a blob URL).
fn azure_disk(ad: &Value, _: &str, at: &str, causes: &mut Causes) {
    const CACHING: [&str; 3] = ["None", "ReadOnly", "ReadWrite"];
    const KINDS: [&str; 3] = ["Dedicated", "Managed", "Shared"];
    if let Some(mode) = ad["cachingMode"].as_str().filter(|m| !CACHING.contains(m)) {
        causes.push((format!("{at}.cachingMode"), super::not_supported(mode, &CACHING)));
    }
    let Some(kind) = ad["kind"].as_str() else {
        return;
    };
    if !KINDS.contains(&kind) {
        causes.push((format!("{at}.kind"), super::not_supported(kind, &KINDS)));
    }
    let uri = str_of(ad, "diskURI");
    let expected = if kind == "Managed" {
        (!uri.starts_with("/subscriptions/")).then_some(
            "/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/{disk-id}",
        )
    } else {
        (!uri.starts_with("https://"))
            .then_some("https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd")
    };
    if let Some(expected) = expected {
        causes.push((format!("{at}.diskURI"), super::not_supported(uri, &[expected])));
    }
}

/// kube's `validateStorageOSPersistentVolumeSource`: a volume name and namespace that are DNS
/// labels, a secret reference named and in a namespace.
fn storageos(s: &Value, _: &str, at: &str, causes: &mut Causes) {
    let name = str_of(s, "volumeName");
    if name.is_empty() {
        causes.push((format!("{at}.volumeName"), "Required value".to_string()));
    }
    let namespace = str_of(s, "volumeNamespace");
    for (field, value) in [("volumeName", name), ("volumeNamespace", namespace)] {
        if value.is_empty() {
            continue;
        }
        for why in dns_label_reasons(value.as_bytes()) {
            invalid(format!("{at}.{field}"), value, &why, causes);
        }
    }
    secret_ref_named(s, "", at, causes);
}

/// The secret references a CSI volume may carry.
const CSI_SECRETS: [&str; 4] = [
    "controllerPublishSecretRef",
    "controllerExpandSecretRef",
    "nodePublishSecretRef",
    "nodeExpandSecretRef",
];

/// kube's `validateCSIPersistentVolumeSource`: a driver name (`ValidateCSIDriverName`), a
/// volume handle, and secret references with a subdomain name and a label namespace.
fn csi(csi: &Value, _: &str, at: &str, causes: &mut Causes) {
    csi_driver_name(str_of(csi, "driver"), &format!("{at}.driver"), causes);
    required(csi, "volumeHandle", at, causes);
    for field in CSI_SECRETS {
        let secret = &csi[field];
        if secret.is_null() {
            continue;
        }
        let at = format!("{at}.{field}");
        for (key, reasons) in [
            ("name", dns_subdomain_reasons as fn(&[u8]) -> Vec<String>),
            ("namespace", dns_label_reasons),
        ] {
            let value = str_of(secret, key);
            if value.is_empty() {
                causes.push((format!("{at}.{key}"), "Required value".to_string()));
                continue;
            }
            for why in reasons(value.as_bytes()) {
                invalid(format!("{at}.{key}"), value, &why, causes);
            }
        }
    }
}

/// kube's `ValidateCSIDriverName`: present, at most 63 bytes, a DNS subdomain once lowercased.
pub fn csi_driver_name(driver: &str, at: &str, causes: &mut Causes) {
    if driver.is_empty() {
        causes.push((at.to_string(), "Required value".to_string()));
    }
    if driver.len() > 63 {
        causes.push((
            at.to_string(),
            "Too long: may not be more than 63 bytes".to_string(),
        ));
    }
    for why in dns_subdomain_reasons(driver.to_lowercase().as_bytes()) {
        invalid(at.to_string(), driver, &why, causes);
    }
}
