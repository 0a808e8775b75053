//! kube-aggregator's rules for an APIService: its name is `<version>.<group>`, the group a
//! DNS subdomain (empty only for the core `v1`), the version a DNS-1035 label, the priorities
//! in their ranges, and a local APIService (no `service`) without TLS settings — the checks
//! of `apiregistration/validation`, with its messages.

use base64::Engine;
use serde_json::Value;

use super::{dns1035_label, port_number, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_subdomain_error, Causes};

/// A priority that must lie in `1..=max`.
fn priority(spec: &Value, field: &str, max: i64, causes: &mut Causes) {
    let value = spec[field].as_i64().unwrap_or(0);
    if value <= 0 || value > max {
        causes.push((
            format!("spec.{field}"),
            format!("Invalid value: {value}: must be positive and less than {max}"),
        ));
    }
}

/// An APIService.
pub fn api_service(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    let (group, version) = (str_of(spec, "group"), str_of(spec, "version"));
    let required_name = format!("{version}.{group}");
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    if name != required_name {
        causes.push((
            "metadata.name".to_string(),
            format!(
                "Invalid value: {}: must be `spec.version+\".\"+spec.group`: {}",
                go_quote(name),
                go_quote(&required_name)
            ),
        ));
    }
    if group.is_empty() && version != "v1" {
        causes.push((
            "spec.group".to_string(),
            "Required value: only v1 may have an empty group and it better be legacy kube".to_string(),
        ));
    }
    if let Some(e) = (!group.is_empty()).then(|| dns_subdomain_error(group)).flatten() {
        causes.push(("spec.group".to_string(), e));
    }
    dns1035_label(version, "spec.version", causes);
    priority(spec, "groupPriorityMinimum", 20000, causes);
    priority(spec, "versionPriority", 1000, causes);
    let insecure = spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false);
    let ca_bytes = spec["caBundle"].as_str().map_or(0, |ca| {
        base64::engine::general_purpose::STANDARD
            .decode(ca)
            .map_or(ca.len(), |b| b.len())
    });
    let service = &spec["service"];
    if !service.is_object() {
        if ca_bytes != 0 {
            causes.push((
                "spec.caBundle".to_string(),
                format!("Invalid value: \"{ca_bytes} bytes\": local APIServices may not have a caBundle"),
            ));
        }
        if insecure {
            causes.push((
                "spec.insecureSkipTLSVerify".to_string(),
                "Invalid value: true: local APIServices may not have insecureSkipTLSVerify".to_string(),
            ));
        }
        return;
    }
    for field in ["namespace", "name"] {
        if str_of(service, field).is_empty() {
            causes.push((format!("spec.service.{field}"), "Required value".to_string()));
        }
    }
    let mut port = Causes::new();
    port_number(
        service["port"].as_i64().unwrap_or(0),
        "spec.service.port".to_string(),
        &mut port,
    );
    causes.extend(port.into_iter().map(|(field, message)| {
        let message = message.replacen(": must be", ": port is not valid: must be", 1);
        (field, message)
    }));
    if insecure && ca_bytes > 0 {
        causes.push((
            "spec.insecureSkipTLSVerify".to_string(),
            "Invalid value: true: may not be true if caBundle is present".to_string(),
        ));
    }
}
