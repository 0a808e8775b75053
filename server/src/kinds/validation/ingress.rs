//! kube's `ValidateIngressSpec` for `networking.k8s.io/v1` Ingresses: a default backend or
//! rules; each rule's host a DNS name or a wildcard (`*.example.com`), not an IP address; its
//! TLS hosts the same and its TLS secret a valid name; its HTTP paths present, each with
//! a known path type and a path that type allows; every backend either a service (named, with
//! a port name or number) or a resource (with kind and name), not both.

use serde_json::Value;

use super::{dns1035_label, list_of, not_supported, port_name_errors, port_number, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{
    dns_subdomain_error, dns_subdomain_reasons, wildcard_dns_subdomain_reasons, Causes,
};

/// The path types, as kube's error lists them (sorted).
const PATH_TYPES: [&str; 3] = ["Exact", "ImplementationSpecific", "Prefix"];
/// What an `Exact` or `Prefix` path may not contain, and may not end with.
const BAD_SEQUENCES: [&str; 5] = ["//", "/./", "/../", "%2f", "%2F"];
const BAD_SUFFIXES: [&str; 2] = ["/..", "/."];

/// An Ingress.
pub fn ingress(obj: &Value, causes: &mut Causes) {
    let spec = &obj["spec"];
    let rules = spec.get("rules").and_then(Value::as_array);
    let default = spec.get("defaultBackend").filter(|b| !b.is_null());
    if rules.is_none_or(Vec::is_empty) && default.is_none() {
        // kube prints the Go slice.
        let shown = if rules.is_some() {
            "[]networking.IngressRule{}"
        } else {
            "[]networking.IngressRule(nil)"
        };
        causes.push((
            "spec".to_string(),
            format!("Invalid value: {shown}: either `defaultBackend` or `rules` must be specified"),
        ));
    }
    if let Some(b) = default {
        backend(b, "spec.defaultBackend", causes);
    }
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let at = format!("spec.rules[{i}]");
        let host = str_of(rule, "host");
        if !host.is_empty() {
            if host.parse::<std::net::IpAddr>().is_ok() {
                causes.push((
                    format!("{at}.host"),
                    format!(
                        "Invalid value: {}: must be a DNS name, not an IP address",
                        go_quote(host)
                    ),
                ));
            }
            host_name(host, &format!("{at}.host"), causes);
        }
        if let Some(http) = rule.get("http").filter(|h| !h.is_null()) {
            let paths = list_of(http, "paths");
            if paths.is_empty() {
                causes.push((format!("{at}.http.paths"), "Required value".to_string()));
            }
            for (j, p) in paths.iter().enumerate() {
                http_path(p, &format!("{at}.http.paths[{j}]"), causes);
            }
        }
    }
    for (i, tls) in list_of(spec, "tls").iter().enumerate() {
        for (j, host) in list_of(tls, "hosts").iter().enumerate() {
            host_name(
                host.as_str().unwrap_or_default(),
                &format!("spec.tls[{i}].hosts[{j}]"),
                causes,
            );
        }
        let secret = str_of(tls, "secretName");
        if !secret.is_empty() {
            for why in dns_subdomain_reasons(secret.as_bytes()) {
                causes.push((
                    format!("spec.tls[{i}].secretName"),
                    format!("Invalid value: {}: {why}", go_quote(secret)),
                ));
            }
        }
    }
    if let Some(class) = spec.get("ingressClassName").and_then(Value::as_str) {
        if let Some(e) = dns_subdomain_error(class) {
            causes.push(("spec.ingressClassName".to_string(), e));
        }
    }
}

/// A rule's or a TLS entry's host: a wildcard (`*.example.com`) or a DNS subdomain, every
/// reason it is neither named, as kube's `IsWildcardDNS1123Subdomain` and
/// `IsDNS1123Subdomain` name them.
fn host_name(host: &str, at: &str, causes: &mut Causes) {
    let reasons = if host.contains('*') {
        wildcard_dns_subdomain_reasons(host.as_bytes())
    } else {
        dns_subdomain_reasons(host.as_bytes())
    };
    for why in reasons {
        causes.push((
            at.to_string(),
            format!("Invalid value: {}: {why}", go_quote(host)),
        ));
    }
}

/// One HTTP path: its type, the path that type allows, and its backend.
fn http_path(p: &Value, at: &str, causes: &mut Causes) {
    let Some(kind) = p.get("pathType").and_then(Value::as_str) else {
        causes.push((
            format!("{at}.pathType"),
            "Required value: pathType must be specified".to_string(),
        ));
        return;
    };
    let path = str_of(p, "path");
    let invalid = |why: String| {
        (
            format!("{at}.path"),
            format!("Invalid value: {}: {why}", go_quote(path)),
        )
    };
    match kind {
        "Exact" | "Prefix" => {
            if !path.starts_with('/') {
                causes.push(invalid("must be an absolute path".to_string()));
            }
            for bad in BAD_SEQUENCES.iter().filter(|s| path.contains(*s)) {
                causes.push(invalid(format!("must not contain '{bad}'")));
            }
            for bad in BAD_SUFFIXES.iter().filter(|s| path.ends_with(*s)) {
                causes.push(invalid(format!("cannot end with '{bad}'")));
            }
        }
        "ImplementationSpecific" => {
            if !path.is_empty() && !path.starts_with('/') {
                causes.push(invalid("must be an absolute path".to_string()));
            }
        }
        other => causes.push((format!("{at}.pathType"), not_supported(other, &PATH_TYPES))),
    }
    backend(&p["backend"], &format!("{at}.backend"), causes);
}

/// A backend: a service (named, with a port name or number) or a resource, exactly one.
fn backend(b: &Value, at: &str, causes: &mut Causes) {
    let set = |field: &str| b.get(field).is_some_and(|v| !v.is_null());
    let empty = |why: &str| (at.to_string(), format!("Invalid value: \"\": {why}"));
    match (set("resource"), set("service")) {
        (true, true) => causes.push(empty("cannot set both resource and service backends")),
        (true, false) => {
            let r = &b["resource"];
            for field in ["kind", "name"] {
                if str_of(r, field).is_empty() {
                    causes.push((
                        format!("{at}.resource.{field}"),
                        format!("Required value: {field} is required"),
                    ));
                }
            }
        }
        (false, true) => {
            let service = &b["service"];
            let name = str_of(service, "name");
            if name.is_empty() {
                causes.push((format!("{at}.service.name"), "Required value".to_string()));
            } else {
                dns1035_label(name, &format!("{at}.service.name"), causes);
            }
            let port_name = str_of(&service["port"], "name");
            let number = service["port"]["number"].as_i64().unwrap_or(0);
            match (port_name.is_empty(), number) {
                (false, n) if n != 0 => causes.push(empty("cannot set both port name & port number")),
                (false, _) => {
                    for e in port_name_errors(port_name) {
                        causes.push((
                            format!("{at}.service.port.name"),
                            format!("Invalid value: {}: {e}", go_quote(port_name)),
                        ));
                    }
                }
                (true, 0) => causes.push((
                    at.to_string(),
                    "Required value: port name or number is required".to_string(),
                )),
                (true, n) => port_number(n, format!("{at}.service.port.number"), causes),
            }
        }
        (false, false) => causes.push(empty("resource or service backend is required")),
    }
}
