//! Making keys and certificates: the cluster CA, a replica's serving and peer certificates, a
//! user's client certificate and the service-account signing key. Every key is ECDSA P-256
//! (fast to sign and verify with `ring`, accepted by every Kubernetes client).

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

use super::PkiError;

/// How long the CA is valid.
pub const CA_VALIDITY_DAYS: i64 = 3650;
/// How long a replica or user certificate is valid (kubeadm's one year).
pub const LEAF_VALIDITY_DAYS: i64 = 365;

/// The organization of every replica's peer certificate: what the peer port admits to Raft.
/// No user certificate may carry it.
pub const PEER_GROUP: &str = "system:kuberaft-peers";

/// The most groups a client certificate carries.
pub const MAX_CERT_GROUPS: usize = 2;

/// X.520 `organizationName` (2.5.4.10): a user's group in a client certificate.
const ORGANIZATION_OID: &[u64] = &[2, 5, 4, 10];

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The certificate.
    pub cert_pem: String,
    /// The PKCS#8 private key.
    pub key_pem: String,
}

/// The names every replica's serving certificate carries besides its own addresses: what
/// in-cluster clients and kubeconfigs call the API server.
pub const SERVING_NAMES: &[&str] = &[
    "localhost",
    "127.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

fn key() -> Result<KeyPair, PkiError> {
    KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(PkiError::generate)
}

fn params(common_name: &str, days: i64) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    p.distinguished_name = dn;
    // Backdated a little: clocks of the replicas and their clients are never exactly equal.
    let now = OffsetDateTime::now_utc();
    p.not_before = now - Duration::minutes(5);
    p.not_after = now + Duration::days(days);
    p.use_authority_key_identifier_extension = true;
    p
}

/// Subject alternative names from host names and IP addresses (a name that parses as an IP
/// address becomes an IP SAN).
fn sans(names: &[String]) -> Result<Vec<SanType>, PkiError> {
    let mut out: Vec<SanType> = Vec::new();
    for n in names {
        let san = match n.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(n.as_str().try_into().map_err(|_| PkiError::BadName(n.clone()))?),
        };
        if !out.contains(&san) {
            out.push(san);
        }
    }
    Ok(out)
}

/// A new self-signed cluster CA named `name`.
pub fn ca(name: &str) -> Result<Pair, PkiError> {
    let key = key()?;
    let mut p = params(name, CA_VALIDITY_DAYS);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = p.self_signed(&key).map_err(PkiError::generate)?;
    Ok(Pair {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The CA that signs: its certificate and key as PEM.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// Loads the CA from its PEM certificate and key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Authority, PkiError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| PkiError::BadKey(e.to_string()))?;
        let issuer =
            Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| PkiError::BadCertificate(e.to_string()))?;
        Ok(Authority { issuer })
    }

    fn sign(&self, p: &CertificateParams) -> Result<Pair, PkiError> {
        let key = key()?;
        let cert = p.signed_by(&key, &self.issuer).map_err(PkiError::generate)?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A serving certificate for the API port of replica `name`, valid for `hosts` (its
    /// addresses and names) and [`SERVING_NAMES`].
    pub fn serving(&self, name: &str, hosts: &[String]) -> Result<Pair, PkiError> {
        let mut names = hosts.to_vec();
        names.extend(SERVING_NAMES.iter().map(|s| s.to_string()));
        let mut p = params(&format!("kuberaft-apiserver-{name}"), LEAF_VALIDITY_DAYS);
        p.subject_alt_names = sans(&names)?;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&p)
    }

    /// A peer certificate for replica `name`: both ends of mutual TLS between replicas, valid
    /// for `hosts`.
    pub fn peer(&self, name: &str, hosts: &[String]) -> Result<Pair, PkiError> {
        let mut names = hosts.to_vec();
        names.extend(["localhost".to_string(), "127.0.0.1".to_string()]);
        let mut p = params(&format!("kuberaft-peer-{name}"), LEAF_VALIDITY_DAYS);
        p.distinguished_name.push(DnType::OrganizationName, PEER_GROUP);
        p.subject_alt_names = sans(&names)?;
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        self.sign(&p)
    }

    /// A client certificate for `user` in `groups` (CN = user, one O per group), as
    /// kube-apiserver's x509 authenticator reads them. At most [`MAX_CERT_GROUPS`] groups: the
    /// certificate generator keeps one value per attribute type, and the organization
    /// attribute can be named two ways; more groups come from RBAC bindings of the user or a
    /// token.
    pub fn client(&self, user: &str, groups: &[String]) -> Result<Pair, PkiError> {
        if user.is_empty() {
            return Err(PkiError::BadName("an empty user name".into()));
        }
        if groups.iter().any(|g| g == PEER_GROUP) {
            return Err(PkiError::BadName(format!(
                "{PEER_GROUP} is the replicas' group; a user certificate cannot carry it"
            )));
        }
        if groups.len() > MAX_CERT_GROUPS {
            return Err(PkiError::BadName(format!(
                "{} groups: a client certificate carries at most {MAX_CERT_GROUPS}",
                groups.len()
            )));
        }
        let mut p = params(user, LEAF_VALIDITY_DAYS);
        let organization = [
            DnType::OrganizationName,
            DnType::CustomDnType(ORGANIZATION_OID.to_vec()),
        ];
        for (ty, g) in organization.into_iter().zip(groups) {
            p.distinguished_name.push(ty, g.as_str());
        }
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&p)
    }
}

/// A new service-account signing key (PKCS#8 PEM) and its public key (SPKI PEM).
pub fn signing_key() -> Result<Pair, PkiError> {
    let key = key()?;
    Ok(Pair {
        cert_pem: key.public_key_pem(),
        key_pem: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::check;

    #[test]
    fn issued_certificates_chain_to_their_ca_and_carry_the_names() {
        let ca = ca("test-ca").unwrap();
        let authority = Authority::from_pem(&ca.cert_pem, &ca.key_pem).unwrap();
        let serving = authority
            .serving("node-1", &["10.0.0.7".into(), "api.example.com".into()])
            .unwrap();
        let ca_cert = check::parse_pem_cert(&ca.cert_pem, "ca.crt").unwrap();
        let facts = check::facts(&serving.cert_pem, "api.crt").unwrap();
        assert!(facts.dns_names.contains(&"kubernetes.default.svc".to_string()));
        assert!(facts.dns_names.contains(&"api.example.com".to_string()));
        assert!(facts.ips.contains(&"10.0.0.7".parse().unwrap()));
        check::pair(
            &serving.cert_pem,
            &serving.key_pem,
            &ca_cert,
            "api.crt",
            "api.key",
        )
        .unwrap();

        let alice = authority.client("alice", &["dev".into(), "ops".into()]).unwrap();
        let facts = check::facts(&alice.cert_pem, "alice.crt").unwrap();
        assert_eq!(facts.common_name, "alice");
        assert_eq!(facts.organizations, vec!["dev", "ops"]);
        let err = authority
            .client("bob", &["a".into(), "b".into(), "c".into()])
            .unwrap_err();
        assert!(err.to_string().contains("at most 2"), "{err}");
    }

    #[test]
    fn a_key_of_another_certificate_or_a_foreign_ca_is_refused() {
        let ca1 = ca("one").unwrap();
        let ca2 = ca("two").unwrap();
        let a1 = Authority::from_pem(&ca1.cert_pem, &ca1.key_pem).unwrap();
        let a2 = Authority::from_pem(&ca2.cert_pem, &ca2.key_pem).unwrap();
        let ca1_cert = check::parse_pem_cert(&ca1.cert_pem, "ca.crt").unwrap();
        let x = a1.peer("n1", &[]).unwrap();
        let y = a1.peer("n2", &[]).unwrap();
        let err = check::pair(&x.cert_pem, &y.key_pem, &ca1_cert, "x.crt", "y.key").unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
        let foreign = a2.peer("n3", &[]).unwrap();
        let err = check::pair(&foreign.cert_pem, &foreign.key_pem, &ca1_cert, "f.crt", "f.key").unwrap_err();
        assert!(err.to_string().contains("not issued by"), "{err}");
    }
}
