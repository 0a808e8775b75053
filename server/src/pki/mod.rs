//! The cluster's public key infrastructure: making the CA, the replicas' serving and peer
//! certificates, users' client certificates and the service-account key (`issue`), checking
//! them before a replica serves (`check`), the rustls and tonic TLS configurations built from
//! them (`tls`), and the file layout `cluster up` and `kuberaft certs` share (`layout`).
//!
//! *Invariant:* a replica never serves with a certificate it has not checked: `serve` fails
//! first, naming the file and the problem.

pub mod check;
pub mod credentials;
pub mod issue;
pub mod layout;
pub mod tls;

/// Why a key or certificate cannot be made or used.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// The file does not exist.
    #[error("{0}: no such file")]
    Missing(String),
    /// The file exists but cannot be read.
    #[error("{file}: cannot read: {source}")]
    Unreadable {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds no usable certificate.
    #[error("{file}: not a PEM certificate: {why}")]
    NoCertificate {
        /// The file.
        file: String,
        /// The parser's complaint.
        why: String,
    },
    /// The file holds no usable private key.
    #[error("{file}: not a PEM private key: {why}")]
    BadKeyFile {
        /// The file.
        file: String,
        /// The parser's complaint.
        why: String,
    },
    /// A key in memory is unusable.
    #[error("invalid key: {0}")]
    BadKey(String),
    /// A certificate in memory is unusable.
    #[error("invalid certificate: {0}")]
    BadCertificate(String),
    /// The certificate's validity ended.
    #[error("{file}: the certificate expired on {when}")]
    Expired {
        /// The file.
        file: String,
        /// The end of its validity.
        when: String,
    },
    /// The certificate's validity has not begun.
    #[error("{file}: the certificate is not valid before {when}")]
    NotYetValid {
        /// The file.
        file: String,
        /// The start of its validity.
        when: String,
    },
    /// The key is not the certificate's.
    #[error("{key} does not match the certificate {cert}")]
    KeyMismatch {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
    },
    /// The certificate was not signed by the cluster CA.
    #[error("{file}: the certificate is not issued by the cluster CA ({ca})")]
    NotIssuedBy {
        /// The certificate file.
        file: String,
        /// The CA's subject.
        ca: String,
    },
    /// A host or user name cannot go into a certificate.
    #[error("invalid name {0:?}")]
    BadName(String),
    /// Key or certificate generation failed.
    #[error("cannot generate: {0}")]
    Generate(String),
    /// A file could not be written.
    #[error("cannot write {file}: {source}")]
    Write {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A TLS configuration could not be built.
    #[error("TLS: {0}")]
    Tls(String),
}

impl PkiError {
    fn generate(e: rcgen::Error) -> PkiError {
        PkiError::Generate(e.to_string())
    }
}
