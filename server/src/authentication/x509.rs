//! The x509 authenticator: a client certificate chain that verifies against the cluster CA
//! names the user (its common name) and groups (its organizations), as kube-apiserver's
//! `--client-ca-file` authenticator reads them.

use rustls_pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::user::{UserInfo, AUTHENTICATED};
use crate::pki::check;
use crate::pki::tls::ApiTls;

/// The user a verified chain names, or why the chain is refused.
pub fn authenticate(tls: &ApiTls, chain: &[CertificateDer<'static>]) -> Result<UserInfo, String> {
    tls.verify_client(chain)?;
    let leaf = chain.first().ok_or("no certificate")?;
    let (_, cert) = X509Certificate::from_der(leaf).map_err(|e| e.to_string())?;
    let facts = check::facts_of(&cert);
    if facts.common_name.is_empty() {
        return Err("common name of client cert is empty".into());
    }
    let mut groups = facts.organizations;
    groups.push(AUTHENTICATED.into());
    Ok(UserInfo {
        name: facts.common_name,
        groups,
        ..UserInfo::default()
    })
}
