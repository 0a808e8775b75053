//! kube's validation of CertificateSigningRequests (`pkg/apis/certificates/validation`): a
//! request that is a PEM `CERTIFICATE REQUEST` whose signature verifies, known and unique
//! usages, a well-formed signer name, an expiration of at least ten minutes, conditions of
//! known statuses (Approved and Denied exclusive, types unique), a certificate made of
//! `CERTIFICATE` blocks; and on update, no condition of type Approved, Denied or Failed
//! removed, no certificate replaced, and (through `status`) no approval condition added or
//! changed. What kube tolerates because the stored request already had it stays tolerated.

use base64::Engine;
use serde_json::Value;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::error::X509Error;
use x509_parser::oid_registry::{OID_KEY_TYPE_EC_PUBLIC_KEY, OID_PKCS1_RSAENCRYPTION, OID_SIG_ED25519};
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;

use super::{list_of, not_supported, str_of};
use crate::machinery::errors::go_quote;
use crate::machinery::meta::{dns_label_reasons, dns_subdomain_reasons, Causes};

/// The key usages kube knows, as its error lists them (sorted).
const USAGES: [&str; 23] = [
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// The signer name `v1` no longer accepts for new requests.
const LEGACY_SIGNER: &str = "kubernetes.io/legacy-unknown";

/// The condition types that, once there, stay; the first two only the `approval` subresource
/// sets.
const APPROVED: &str = "Approved";
const DENIED: &str = "Denied";
const FAILED: &str = "Failed";

/// What kube tolerates in a write because the stored request (`old`) already has it.
#[derive(Default)]
struct Tolerated {
    legacy_signer: bool,
    unknown_usages: bool,
    duplicate_usages: bool,
    empty_condition_type: bool,
    duplicate_condition_types: bool,
    approved_and_denied: bool,
    any_certificate: bool,
}

impl Tolerated {
    /// kube's `getValidationOptions` for `new` over `old`.
    fn of(new: &Value, old: Option<&Value>) -> Self {
        let Some(old) = old else {
            return Self::default();
        };
        let usages: Vec<&str> = strings(&old["spec"], "usages");
        let types: Vec<&str> = conditions(old).iter().map(|c| str_of(c, "type")).collect();
        let certificate = |v: &Value| v["status"]["certificate"].clone();
        Tolerated {
            legacy_signer: str_of(&old["spec"], "signerName") == LEGACY_SIGNER,
            unknown_usages: usages.iter().any(|u| !USAGES.contains(u)),
            duplicate_usages: has_duplicates(&usages),
            empty_condition_type: types.contains(&""),
            duplicate_condition_types: has_duplicates(&types),
            approved_and_denied: types.contains(&APPROVED) && types.contains(&DENIED),
            any_certificate: certificate(new) == certificate(old)
                || certificate_problem(&old["status"]["certificate"]).is_some(),
        }
    }
}

/// The strings of the list `field` of `v`.
fn strings<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    list_of(v, field).iter().filter_map(Value::as_str).collect()
}

fn has_duplicates(items: &[&str]) -> bool {
    items.iter().enumerate().any(|(i, a)| items[..i].contains(a))
}

/// The request's conditions.
fn conditions(csr: &Value) -> &[Value] {
    list_of(&csr["status"], "conditions")
}

/// A CertificateSigningRequest's create.
pub fn create(csr: &Value, causes: &mut Causes) {
    check(csr, &Tolerated::of(csr, None), causes);
}

/// A CertificateSigningRequest's update, through the object or a subresource: the request as
/// on create (tolerating what `old` had), no Approved, Denied or Failed condition removed, and
/// a certificate, once there, kept.
pub fn update(old: &Value, new: &Value, causes: &mut Causes) {
    check(new, &Tolerated::of(new, Some(old)), causes);
    for kind in [APPROVED, DENIED, FAILED] {
        if of_type(new, kind).len() < of_type(old, kind).len() {
            causes.push((
                "status.conditions".to_string(),
                format!(
                    "Forbidden: updates may not remove a condition of type {}",
                    go_quote(kind)
                ),
            ));
        }
    }
    let (was, is) = (&old["status"]["certificate"], &new["status"]["certificate"]);
    if was != is && !str_of(&old["status"], "certificate").is_empty() {
        causes.push((
            "status.certificate".to_string(),
            "Forbidden: updates may not modify existing certificate content".to_string(),
        ));
    }
}

/// What a write through `status` may not do: add or change an Approved or Denied condition
/// (only `approval` sets them). kube adds a Go diff of the conditions to a change; kuberaft
/// shows the old and new ones as JSON.
pub fn status_update(old: &Value, new: &Value) -> Causes {
    let mut causes = Causes::new();
    for kind in [APPROVED, DENIED] {
        let (was, is) = (of_type(old, kind), of_type(new, kind));
        let why = if is.len() > was.len() {
            format!("updates may not add a condition of type {}", go_quote(kind))
        } else if is.len() == was.len() && was != is {
            format!(
                "updates may not modify a condition of type {}\n- {}\n+ {}",
                go_quote(kind),
                Value::Array(was.into_iter().cloned().collect()),
                Value::Array(is.into_iter().cloned().collect())
            )
        } else {
            continue;
        };
        causes.push(("status.conditions".to_string(), format!("Forbidden: {why}")));
    }
    causes
}

/// The conditions of type `kind`.
fn of_type<'a>(csr: &'a Value, kind: &str) -> Vec<&'a Value> {
    conditions(csr)
        .iter()
        .filter(|c| str_of(c, "type") == kind)
        .collect()
}

/// kube's `validateCertificateSigningRequest`, but for its metadata.
fn check(csr: &Value, tolerated: &Tolerated, causes: &mut Causes) {
    let spec = &csr["spec"];
    let request = str_of(spec, "request");
    if let Err(why) = request_problem(request) {
        causes.push((
            "spec.request".to_string(),
            format!("Invalid value: {}: {why}", go_quote(request)),
        ));
    }
    let usages = strings(spec, "usages");
    if list_of(spec, "usages").is_empty() {
        causes.push(("spec.usages".to_string(), "Required value".to_string()));
    }
    if !tolerated.unknown_usages {
        for (i, usage) in usages.iter().enumerate().filter(|(_, u)| !USAGES.contains(u)) {
            causes.push((format!("spec.usages[{i}]"), not_supported(usage, &USAGES)));
        }
    }
    if !tolerated.duplicate_usages {
        for (i, usage) in usages.iter().enumerate() {
            if usages[..i].contains(usage) {
                causes.push((
                    format!("spec.usages[{i}]"),
                    format!("Duplicate value: {}", go_quote(usage)),
                ));
            }
        }
    }
    let signer = str_of(spec, "signerName");
    if !tolerated.legacy_signer && signer == LEGACY_SIGNER {
        causes.push((
            "spec.signerName".to_string(),
            format!(
                "Invalid value: {}: the legacy signerName is not allowed via this API version",
                go_quote(signer)
            ),
        ));
    } else {
        signer_name(signer, "spec.signerName", causes);
    }
    if let Some(seconds) = spec["expirationSeconds"].as_i64().filter(|s| *s < 600) {
        causes.push((
            "spec.expirationSeconds".to_string(),
            format!(
                "Invalid value: {seconds}: may not specify a duration less than 600 seconds (10 minutes)"
            ),
        ));
    }
    condition_problems(csr, tolerated, causes);
    if !tolerated.any_certificate {
        if let Some(why) = certificate_problem(&csr["status"]["certificate"]) {
            causes.push((
                "status.certificate".to_string(),
                format!("Invalid value: \"<certificate data>\": {why}"),
            ));
        }
    }
}

/// kube's `validateConditions`.
fn condition_problems(csr: &Value, tolerated: &Tolerated, causes: &mut Causes) {
    let (mut approved, mut denied) = (false, false);
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conditions(csr).iter().enumerate() {
        let at = format!("status.conditions[{i}]");
        let kind = str_of(c, "type");
        if !tolerated.empty_condition_type && kind.is_empty() {
            causes.push((format!("{at}.type"), "Required value".to_string()));
        }
        let allowed: &[&str] = if [APPROVED, DENIED, FAILED].contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        match str_of(c, "status") {
            "" => causes.push((format!("{at}.status"), "Required value".to_string())),
            s if !allowed.contains(&s) => causes.push((format!("{at}.status"), not_supported(s, allowed))),
            _ => {}
        }
        if !tolerated.approved_and_denied {
            let clash = match kind {
                APPROVED => {
                    approved = true;
                    denied
                }
                DENIED => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if clash {
                causes.push((
                    "status.conditions".to_string(),
                    format!(
                        "Invalid value: {}: Approved and Denied conditions are mutually exclusive",
                        go_quote(kind)
                    ),
                ));
            }
        }
        if !tolerated.duplicate_condition_types && seen.contains(&kind) {
            causes.push((
                format!("{at}.type"),
                format!("Duplicate value: {}", go_quote(kind)),
            ));
        }
        seen.push(kind);
    }
}

/// The bytes of a base64 field (`[]byte` in Go); undecodable text reads as nothing.
fn bytes_of(field: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(field)
        .unwrap_or_default()
}

/// kube's `validateCSR`: why the base64 PEM `request` is not a certificate request whose
/// signature verifies, in Go's words.
fn request_problem(request: &str) -> Result<(), String> {
    let pem = bytes_of(request);
    let block = Pem::iter_from_buffer(&pem).next().and_then(Result::ok);
    let Some(block) = block.filter(|b| b.label == "CERTIFICATE REQUEST") else {
        return Err("PEM block type must be CERTIFICATE REQUEST".to_string());
    };
    let csr = match X509CertificationRequest::from_der(&block.contents) {
        Ok(([], csr)) => csr,
        Ok(_) => return Err("asn1: syntax error: trailing data".to_string()),
        Err(_) => return Err("x509: malformed certificate request".to_string()),
    };
    match csr.verify_signature() {
        Ok(()) => Ok(()),
        Err(X509Error::SignatureUnsupportedAlgorithm) => {
            Err("x509: cannot verify signature: algorithm unimplemented".to_string())
        }
        Err(_) => {
            let key = &csr.certification_request_info.subject_pki.algorithm.algorithm;
            Err(if *key == OID_PKCS1_RSAENCRYPTION {
                "crypto/rsa: verification error"
            } else if *key == OID_KEY_TYPE_EC_PUBLIC_KEY {
                "x509: ECDSA verification failure"
            } else if *key == OID_SIG_ED25519 {
                "x509: Ed25519 verification failure"
            } else {
                "x509: cannot verify signature: algorithm unimplemented"
            }
            .to_string())
        }
    }
}

/// kube's `validateCertificate`: why the base64 PEM `certificate` (when set) is not one or more
/// `CERTIFICATE` blocks.
fn certificate_problem(certificate: &Value) -> Option<String> {
    let pem = bytes_of(certificate.as_str().unwrap_or_default());
    if pem.is_empty() {
        return None;
    }
    let mut blocks = 0;
    for block in Pem::iter_from_buffer(&pem) {
        let Ok(block) = block else {
            break;
        };
        if block.label != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                go_quote(&block.label)
            ));
        }
        blocks += 1;
        if block.parse_x509().is_err() {
            return Some("x509: malformed certificate".to_string());
        }
    }
    (blocks == 0).then(|| "must contain at least one CERTIFICATE PEM block".to_string())
}

/// kube's `ValidateSignerName`: `<domain>/<path>`, the domain DNS labels (at least two), the
/// path DNS subdomains separated by dots, within kube's lengths.
fn signer_name(signer: &str, at: &str, causes: &mut Causes) {
    const DOMAIN_MAX: usize = 253;
    const PATH_MAX: usize = 253 + 63 + 1;
    let invalid = |value: &str, why: &str| {
        (
            at.to_string(),
            format!("Invalid value: {}: {why}", go_quote(value)),
        )
    };
    if signer.is_empty() {
        causes.push((at.to_string(), "Required value".to_string()));
        return;
    }
    let Some((domain, path)) = signer.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        causes.push(invalid(
            signer,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    if domain.len() > DOMAIN_MAX {
        causes.push((
            at.to_string(),
            format!("Too long: may not be more than {DOMAIN_MAX} bytes"),
        ));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some((label, reasons)) = labels
        .iter()
        .map(|l| (l, dns_label_reasons(l.as_bytes())))
        .find(|(_, r)| !r.is_empty())
    {
        for why in reasons {
            causes.push(invalid(
                domain,
                &format!("validating label {}: {why}", go_quote(label)),
            ));
        }
    }
    if labels.len() < 2 {
        causes.push(invalid(
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    if let Some((label, reasons)) = path
        .split('.')
        .map(|l| (l, dns_subdomain_reasons(l.as_bytes())))
        .find(|(_, r)| !r.is_empty())
    {
        for why in reasons {
            causes.push(invalid(
                path,
                &format!("validating label {}: {why}", go_quote(label)),
            ));
        }
    }
    if signer.len() > DOMAIN_MAX + PATH_MAX + 1 {
        causes.push((
            at.to_string(),
            format!(
                "Too long: may not be more than {} bytes",
                DOMAIN_MAX + PATH_MAX + 1
            ),
        ));
    }
}
