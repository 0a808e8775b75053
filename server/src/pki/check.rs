//! Reading and checking certificates and keys: what `serve` verifies before it binds a port
//! (every file present, readable, current, matching its key and issued by the cluster CA), and
//! the facts the CLI reports (names, groups, expiry).

use std::net::IpAddr;
use std::path::Path;

use rcgen::{KeyPair, PublicKeyData};
use rustls_pki_types::CertificateDer;
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::PkiError;

/// What a certificate says about itself.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The subject's common name (a user name for client certificates).
    pub common_name: String,
    /// The subject's organizations (groups for client certificates).
    pub organizations: Vec<String>,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// IP subject alternative names.
    pub ips: Vec<IpAddr>,
    /// Start of validity.
    pub not_before: OffsetDateTime,
    /// End of validity.
    pub not_after: OffsetDateTime,
}

/// Reads a PEM file, naming it when it is missing or unreadable.
pub fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            PkiError::Missing(path.display().to_string())
        } else {
            PkiError::Unreadable {
                file: path.display().to_string(),
                source,
            }
        }
    })
}

/// The first certificate of a PEM text, as DER.
pub fn parse_pem_cert(pem: &str, file: &str) -> Result<CertificateDer<'static>, PkiError> {
    use rustls_pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes()).map_err(|e| PkiError::NoCertificate {
        file: file.to_string(),
        why: e.to_string(),
    })
}

fn parse_der<'a>(der: &'a [u8], file: &str) -> Result<X509Certificate<'a>, PkiError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| PkiError::NoCertificate {
            file: file.to_string(),
            why: e.to_string(),
        })
}

/// The facts of a parsed certificate.
pub fn facts_of(cert: &X509Certificate<'_>) -> Facts {
    let strings = |it: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| {
        it.filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect::<Vec<_>>()
    };
    let mut dns_names = Vec::new();
    let mut ips = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(n) => dns_names.push(n.to_string()),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap_or_default())),
                    16 => ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap_or_default())),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    Facts {
        common_name: strings(&mut cert.subject().iter_common_name())
            .into_iter()
            .next()
            .unwrap_or_default(),
        organizations: strings(&mut cert.subject().iter_organization()),
        dns_names,
        ips,
        not_before: cert.validity().not_before.to_datetime(),
        not_after: cert.validity().not_after.to_datetime(),
    }
}

/// The facts of the first certificate of a PEM text.
pub fn facts(pem: &str, file: &str) -> Result<Facts, PkiError> {
    let der = parse_pem_cert(pem, file)?;
    Ok(facts_of(&parse_der(&der, file)?))
}

/// Checks that the certificate is valid now and that `key_pem` is its key, whoever issued it;
/// returns its facts.
pub fn own_pair(cert_pem: &str, key_pem: &str, cert_file: &str, key_file: &str) -> Result<Facts, PkiError> {
    let der = parse_pem_cert(cert_pem, cert_file)?;
    let cert = parse_der(&der, cert_file)?;
    let facts = facts_of(&cert);
    current(&facts, cert_file)?;
    let key = KeyPair::from_pem(key_pem).map_err(|e| PkiError::BadKeyFile {
        file: key_file.to_string(),
        why: e.to_string(),
    })?;
    if key.subject_public_key_info() != cert.public_key().raw {
        return Err(PkiError::KeyMismatch {
            cert: cert_file.to_string(),
            key: key_file.to_string(),
        });
    }
    Ok(facts)
}

/// Checks that the certificate is valid now, that `key_pem` is its key and that `ca` issued
/// it; returns its facts.
pub fn pair(
    cert_pem: &str,
    key_pem: &str,
    ca: &CertificateDer<'_>,
    cert_file: &str,
    key_file: &str,
) -> Result<Facts, PkiError> {
    let facts = own_pair(cert_pem, key_pem, cert_file, key_file)?;
    let der = parse_pem_cert(cert_pem, cert_file)?;
    let cert = parse_der(&der, cert_file)?;
    let ca_cert = parse_der(ca, "the CA certificate")?;
    if cert.issuer() != ca_cert.subject() || cert.verify_signature(Some(ca_cert.public_key())).is_err() {
        return Err(PkiError::NotIssuedBy {
            file: cert_file.to_string(),
            ca: ca_cert.subject().to_string(),
        });
    }
    Ok(facts)
}

/// Checks that a certificate is within its validity window.
pub fn current(facts: &Facts, file: &str) -> Result<(), PkiError> {
    let now = OffsetDateTime::now_utc();
    if now < facts.not_before {
        return Err(PkiError::NotYetValid {
            file: file.to_string(),
            when: facts.not_before.to_string(),
        });
    }
    if now > facts.not_after {
        return Err(PkiError::Expired {
            file: file.to_string(),
            when: facts.not_after.to_string(),
        });
    }
    Ok(())
}
