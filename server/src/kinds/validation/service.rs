//! kube's rules for Services (`ValidateService`): ports required unless headless or
//! ExternalName, each named (when there are several) by a unique RFC 1123 label, in range,
//! with a known protocol and a valid target port, no two alike by port and protocol; a known
//! type; an external name for ExternalName Services. The cluster IP and node ports kept on
//! update are [`crate::kinds::allocation`]'s.

use std::collections::HashSet;

use serde_json::Value;

use super::pod::protocol;
use super::{list_of, not_supported, port_name_errors, port_number, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_error, Causes};

/// The Service types kube knows, as its error lists them (sorted).
const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

/// A Service.
pub fn service(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    let kind = str_of(spec, "type");
    let headless = str_of(spec, "clusterIP") == "None";
    let ports = list_of(spec, "ports");
    if ports.is_empty() && !headless && kind != "ExternalName" {
        causes.push(("spec.ports".to_string(), "Required value".to_string()));
    }
    if kind == "ExternalName" && str_of(spec, "externalName").is_empty() {
        causes.push(("spec.externalName".to_string(), "Required value".to_string()));
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        port(
            p,
            ports.len() > 1,
            &mut names,
            &format!("spec.ports[{i}]"),
            causes,
        );
    }
    if !TYPES.contains(&kind) {
        causes.push(("spec.type".to_string(), not_supported(kind, &TYPES)));
    }
    let mut node_ports = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        if let Some(n) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
            if !node_ports.insert((n, str_of(p, "protocol"))) {
                causes.push((
                    format!("spec.ports[{i}].nodePort"),
                    format!("Duplicate value: {n}"),
                ));
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let number = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        let proto = str_of(p, "protocol");
        if !seen.insert((number, proto)) {
            causes.push((
                format!("spec.ports[{i}]"),
                format!(
                    "Duplicate value: core.ServicePort{{Name:\"\", Protocol:{}, AppProtocol:(*string)(nil), Port:{number}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}",
                    go_quote(proto)
                ),
            ));
        }
    }
}

/// kube's `validateServicePort`.
fn port<'a>(p: &'a Value, require_name: bool, names: &mut HashSet<&'a str>, path: &str, causes: &mut Causes) {
    let name = str_of(p, "name");
    if require_name && name.is_empty() {
        causes.push((format!("{path}.name"), "Required value".to_string()));
    } else if !name.is_empty() {
        if let Some(e) = dns_label_error(name) {
            causes.push((format!("{path}.name"), e));
        }
        if !names.insert(name) {
            causes.push((
                format!("{path}.name"),
                format!("Duplicate value: {}", go_quote(name)),
            ));
        }
    }
    port_number(
        p.get("port").and_then(Value::as_i64).unwrap_or(0),
        format!("{path}.port"),
        causes,
    );
    protocol(p, path, causes);
    match p.get("targetPort") {
        Some(Value::Number(n)) => port_number(n.as_i64().unwrap_or(0), format!("{path}.targetPort"), causes),
        Some(Value::String(s)) => {
            for e in port_name_errors(s) {
                causes.push((
                    format!("{path}.targetPort"),
                    format!("Invalid value: {}: {e}", go_quote(s)),
                ));
            }
        }
        _ => {}
    }
}
