//! Where the cluster's keys and certificates live in a PKI directory, shared by `cluster up`
//! and `kuberaft certs`, and how they are written (directories `0700`, files `0600`: readable
//! only by their owner). Making a file that exists keeps it, so re-running a command reuses
//! the cluster's identity; renewing is asked for explicitly.
//!
//! ```text
//! ca.crt ca.key                         the cluster CA
//! service-account.key .pub              the service-account token signing key
//! replicas/NAME/api.crt api.key         NAME's serving certificate (the API port)
//! replicas/NAME/peer.crt peer.key       NAME's peer certificate (mutual TLS between replicas)
//! users/USER.crt USER.key               a user's client certificate
//! front-proxy-ca.crt front-proxy-ca.key the front-proxy CA (kube's requestheader client CA)
//! front-proxy-client.crt .key           the aggregation proxy's client certificate
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use super::issue::{self, Authority, Pair};
use super::{check, PkiError};
use crate::config::SecurityConfig;

/// The common name of the aggregation proxy's client certificate.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";
/// The kubelet client certificate's common name, as kubeadm names it.
pub const KUBELET_CLIENT: &str = "kube-apiserver-kubelet-client";
/// Its group, as kubeadm gives it (bound to `cluster-admin` on kubeadm clusters).
pub const KUBELET_CLIENT_GROUP: &str = "kubeadm:cluster-admins";

/// A PKI directory.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The directory.
    pub dir: PathBuf,
}

/// The files of one replica.
#[derive(Debug, Clone)]
pub struct ReplicaFiles {
    /// Serving certificate of the API port.
    pub api_cert: PathBuf,
    /// Its key.
    pub api_key: PathBuf,
    /// Peer certificate (client and server side of mutual TLS).
    pub peer_cert: PathBuf,
    /// Its key.
    pub peer_key: PathBuf,
}

/// Whether a command made a file or found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Newly written.
    Made,
    /// Already there, kept.
    Kept,
}

impl Layout {
    /// The PKI directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Layout {
        Layout { dir: dir.into() }
    }

    /// The CA certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The CA key.
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join("ca.key")
    }

    /// The service-account signing key.
    pub fn sa_key(&self) -> PathBuf {
        self.dir.join("service-account.key")
    }

    /// The service-account public key.
    pub fn sa_pub(&self) -> PathBuf {
        self.dir.join("service-account.pub")
    }

    /// The encryption-at-rest config (kube's `EncryptionConfiguration`): a secret like the
    /// keys, so it lives with them.
    pub fn encryption_config(&self) -> PathBuf {
        self.dir.join("encryption-config.yaml")
    }

    /// The front-proxy CA: it signs the certificate the aggregation proxy presents to
    /// aggregated API servers, which trust the identity headers of a caller it verifies.
    pub fn front_proxy_ca(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("front-proxy-ca.crt"),
            self.dir.join("front-proxy-ca.key"),
        )
    }

    /// The aggregation proxy's client certificate and key.
    pub fn front_proxy_client(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("front-proxy-client.crt"),
            self.dir.join("front-proxy-client.key"),
        )
    }

    /// Makes the front-proxy CA and the proxy's client certificate (`CN=front-proxy-client`,
    /// the name kube's published `requestheader-allowed-names` allows) unless they exist.
    pub fn ensure_front_proxy(&self) -> Result<Outcome, PkiError> {
        let (ca_cert, ca_key) = self.front_proxy_ca();
        let (cert, key) = self.front_proxy_client();
        if [&ca_cert, &ca_key, &cert, &key].iter().all(|p| p.exists()) {
            return Ok(Outcome::Kept);
        }
        if !(ca_cert.exists() && ca_key.exists()) {
            write_pair(&ca_cert, &ca_key, &issue::ca("front-proxy-ca")?)?;
        }
        let ca = Authority::from_pem(&check::read(&ca_cert)?, &check::read(&ca_key)?)?;
        write_pair(&cert, &key, &ca.client(FRONT_PROXY_CLIENT, &[])?)?;
        Ok(Outcome::Made)
    }

    /// The client certificate and key replicas present to kubelets.
    pub fn kubelet_client(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("kubelet-client.crt"),
            self.dir.join("kubelet-client.key"),
        )
    }

    /// Makes the kubelet client certificate (kubeadm's `apiserver-kubelet-client`:
    /// `CN=kube-apiserver-kubelet-client`, `O=kubeadm:cluster-admins`), issued by the cluster
    /// CA that kubelets trust for clients, unless it exists.
    pub fn ensure_kubelet_client(&self) -> Result<Outcome, PkiError> {
        let (cert, key) = self.kubelet_client();
        if cert.exists() && key.exists() {
            return Ok(Outcome::Kept);
        }
        let pair = self
            .authority()?
            .client(KUBELET_CLIENT, &[KUBELET_CLIENT_GROUP.to_string()])?;
        write_pair(&cert, &key, &pair)?;
        Ok(Outcome::Made)
    }

    /// The files of replica `name`.
    pub fn replica(&self, name: &str) -> ReplicaFiles {
        let d = self.dir.join("replicas").join(name);
        ReplicaFiles {
            api_cert: d.join("api.crt"),
            api_key: d.join("api.key"),
            peer_cert: d.join("peer.crt"),
            peer_key: d.join("peer.key"),
        }
    }

    /// The `security` section of replica `name`'s config: this PKI's CA, the replica's
    /// certificates, the service-account key and the encryption config (relative paths when
    /// the directory is, as `cluster up` writes them), and no token file.
    pub fn security_config(&self, name: &str) -> SecurityConfig {
        let files = self.replica(name);
        SecurityConfig {
            certificate_authority: self.ca_cert(),
            serving_certificate: files.api_cert,
            serving_key: files.api_key,
            peer_certificate: files.peer_cert,
            peer_key: files.peer_key,
            service_account_key: Some(self.sa_key()),
            token_file: None,
            encryption_config: Some(self.encryption_config()),
            encryption_config_automatic_reload: false,
            front_proxy_ca: Some(self.front_proxy_ca().0),
            proxy_client_certificate: Some(self.front_proxy_client().0),
            proxy_client_key: Some(self.front_proxy_client().1),
            kubelet_client_certificate: Some(self.kubelet_client().0),
            kubelet_client_key: Some(self.kubelet_client().1),
            kubelet_certificate_authority: None,
        }
    }

    /// The certificate and key of user `user`.
    pub fn user(&self, user: &str) -> (PathBuf, PathBuf) {
        let safe: String = user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let d = self.dir.join("users");
        (d.join(format!("{safe}.crt")), d.join(format!("{safe}.key")))
    }

    /// Makes the CA unless it exists.
    pub fn ensure_ca(&self, name: &str) -> Result<Outcome, PkiError> {
        if self.ca_cert().exists() && self.ca_key().exists() {
            return Ok(Outcome::Kept);
        }
        let ca = issue::ca(name)?;
        write_pair(&self.ca_cert(), &self.ca_key(), &ca)?;
        Ok(Outcome::Made)
    }

    /// Makes the service-account signing key unless it exists.
    pub fn ensure_sa_key(&self) -> Result<Outcome, PkiError> {
        if self.sa_key().exists() && self.sa_pub().exists() {
            return Ok(Outcome::Kept);
        }
        write_pair(&self.sa_pub(), &self.sa_key(), &issue::signing_key()?)?;
        Ok(Outcome::Made)
    }

    /// The CA, loaded to sign.
    pub fn authority(&self) -> Result<Authority, PkiError> {
        Authority::from_pem(&check::read(&self.ca_cert())?, &check::read(&self.ca_key())?)
    }

    /// Issues replica `name`'s serving and peer certificates for `hosts`, unless they exist
    /// (or always, with `renew`).
    pub fn ensure_replica(&self, name: &str, hosts: &[String], renew: bool) -> Result<Outcome, PkiError> {
        let f = self.replica(name);
        let present = [&f.api_cert, &f.api_key, &f.peer_cert, &f.peer_key]
            .iter()
            .all(|p| p.exists());
        if present && !renew {
            return Ok(Outcome::Kept);
        }
        let ca = self.authority()?;
        write_pair(&f.api_cert, &f.api_key, &ca.serving(name, hosts)?)?;
        write_pair(&f.peer_cert, &f.peer_key, &ca.peer(name, hosts)?)?;
        Ok(Outcome::Made)
    }

    /// Issues a client certificate for `user` in `groups`, unless one exists (or always, with
    /// `renew`).
    pub fn ensure_user(&self, user: &str, groups: &[String], renew: bool) -> Result<Outcome, PkiError> {
        let (cert, key) = self.user(user);
        if cert.exists() && key.exists() && !renew {
            return Ok(Outcome::Kept);
        }
        write_pair(&cert, &key, &self.authority()?.client(user, groups)?)?;
        Ok(Outcome::Made)
    }
}

/// Writes a certificate and its key, each readable only by the owner.
pub fn write_pair(cert: &Path, key: &Path, pair: &Pair) -> Result<(), PkiError> {
    write_private(cert, &pair.cert_pem)?;
    write_private(key, &pair.key_pem)
}

/// Creates (or truncates) `path` readable and writable by its owner only (mode 0600): keys,
/// kubeconfigs, backups.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Writes `text` to `path` with mode `0600`, its directory made with `0700`; replaces the file
/// atomically (written beside it, then renamed).
pub fn write_private(path: &Path, text: &str) -> Result<(), PkiError> {
    use std::os::unix::fs::DirBuilderExt;
    let err = |source| PkiError::Write {
        file: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(err)?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = create_private(&tmp).map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
