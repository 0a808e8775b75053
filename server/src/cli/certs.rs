//! `kuberaft certs`: the cluster's PKI step by step, for replicas on different hosts — make the
//! CA and the service-account key, issue a replica's serving and peer certificates for its
//! names and addresses, issue a user's client certificate, write a kubeconfig, and list every
//! certificate with its expiry (renewing is issuing again with `--renew`). `cluster up` does all
//! of it for a local cluster; both use the same layout (`pki::layout`).

use std::path::PathBuf;

use anyhow::Context;
use time::OffsetDateTime;

use crate::cli::kubeconfig::{self, ClientCredentials};
use crate::pki::check;
use crate::pki::layout::{write_private, Layout, Outcome};
use crate::store::encryption;

/// `kuberaft certs` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CertsCmd {
    /// Make the cluster CA, the service-account signing key and the encryption-at-rest config
    /// with a new key (each kept if it exists).
    Ca {
        /// The PKI directory.
        #[arg(long)]
        dir: PathBuf,
        /// The CA's common name.
        #[arg(long, default_value = "kuberaft-ca")]
        name: String,
    },
    /// Issue a replica's serving and peer certificates.
    Replica {
        /// The PKI directory (holding the CA).
        #[arg(long)]
        dir: PathBuf,
        /// The replica's name (`node-1`): its files go to `DIR/replicas/NAME/`.
        #[arg(long)]
        name: String,
        /// A host name or IP address clients and peers reach it by (repeatable).
        #[arg(long = "host")]
        hosts: Vec<String>,
        /// Issue new certificates even if they exist (renewal).
        #[arg(long)]
        renew: bool,
    },
    /// Issue a user's client certificate (CN = user, O = groups).
    Client {
        /// The PKI directory (holding the CA).
        #[arg(long)]
        dir: PathBuf,
        /// The user name.
        #[arg(long)]
        user: String,
        /// A group (repeatable; at most two per certificate).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Issue a new certificate even if one exists (renewal).
        #[arg(long)]
        renew: bool,
    },
    /// Write a kubeconfig for a user whose client certificate exists, one context per server.
    Kubeconfig {
        /// The PKI directory.
        #[arg(long)]
        dir: PathBuf,
        /// The user.
        #[arg(long)]
        user: String,
        /// A replica's API URL, `https://HOST:PORT` (repeatable; the first is the current
        /// context).
        #[arg(long = "server", required = true)]
        servers: Vec<String>,
        /// Where to write it (mode 0600).
        #[arg(long)]
        out: PathBuf,
    },
    /// List every certificate with its subject and expiry; those within 30 days are flagged.
    Check {
        /// The PKI directory.
        #[arg(long)]
        dir: PathBuf,
    },
}

/// Days before expiry from which a certificate is reported as due for renewal.
pub const RENEW_WITHIN_DAYS: i64 = 30;

fn said(outcome: Outcome, what: &str) {
    match outcome {
        Outcome::Made => println!("made {what}"),
        Outcome::Kept => println!("kept {what} (exists; --renew to issue anew)"),
    }
}

/// The name of the key a new encryption config encrypts Secrets with.
pub const ENCRYPTION_KEY_NAME: &str = "key1";

/// Writes an encryption config (Secrets sealed with a new AES-256 key, owner-only) unless the
/// PKI has one.
pub fn ensure_encryption_config(pki: &Layout) -> anyhow::Result<Outcome> {
    if pki.encryption_config().exists() {
        return Ok(Outcome::Kept);
    }
    let secret =
        encryption::new_key_secret().map_err(|_| anyhow::anyhow!("cannot make an encryption key"))?;
    write_private(
        &pki.encryption_config(),
        &encryption::config_yaml(ENCRYPTION_KEY_NAME, &secret),
    )?;
    Ok(Outcome::Made)
}

/// Runs a `certs` subcommand.
pub fn run(cmd: CertsCmd) -> anyhow::Result<()> {
    match cmd {
        CertsCmd::Ca { dir, name } => {
            let pki = Layout::new(dir);
            said(pki.ensure_ca(&name)?, &pki.ca_cert().display().to_string());
            said(pki.ensure_sa_key()?, &pki.sa_key().display().to_string());
            said(
                pki.ensure_front_proxy()?,
                &pki.front_proxy_client().0.display().to_string(),
            );
            said(
                pki.ensure_kubelet_client()?,
                &pki.kubelet_client().0.display().to_string(),
            );
            said(
                ensure_encryption_config(&pki)?,
                &pki.encryption_config().display().to_string(),
            );
        }
        CertsCmd::Replica {
            dir,
            name,
            hosts,
            renew,
        } => {
            let pki = Layout::new(dir);
            let files = pki.replica(&name);
            let outcome = pki.ensure_replica(&name, &hosts, renew)?;
            said(
                outcome,
                &format!("{} and {}", files.api_cert.display(), files.peer_cert.display()),
            );
        }
        CertsCmd::Client {
            dir,
            user,
            groups,
            renew,
        } => {
            let pki = Layout::new(dir);
            let outcome = pki.ensure_user(&user, &groups, renew)?;
            said(outcome, &pki.user(&user).0.display().to_string());
        }
        CertsCmd::Kubeconfig {
            dir,
            user,
            servers,
            out,
        } => {
            let pki = Layout::new(dir);
            let (cert, key) = pki.user(&user);
            let creds = ClientCredentials {
                ca_pem: check::read(&pki.ca_cert())?,
                user: user.clone(),
                cert_pem: check::read(&cert).context("issue it first with `kuberaft certs client`")?,
                key_pem: check::read(&key)?,
            };
            write_private(&out, &kubeconfig::render_servers(&servers, &creds)?)?;
            println!("wrote {} for {user}", out.display());
        }
        CertsCmd::Check { dir } => check_all(&Layout::new(dir))?,
    }
    Ok(())
}

fn check_all(pki: &Layout) -> anyhow::Result<()> {
    let mut files = vec![pki.ca_cert()];
    for sub in ["replicas", "users"] {
        let mut found: Vec<PathBuf> = walk(&pki.dir.join(sub));
        found.sort();
        files.extend(found);
    }
    let now = OffsetDateTime::now_utc();
    println!("{:<60} {:<40} {:<22} STATE", "FILE", "SUBJECT", "EXPIRES");
    for f in files {
        let name = f.display().to_string();
        let facts = check::facts(&check::read(&f)?, &name)?;
        let days = (facts.not_after - now).whole_days();
        let state = if days < 0 {
            "EXPIRED".to_string()
        } else if days <= RENEW_WITHIN_DAYS {
            format!("renew: {days} days left")
        } else {
            format!("ok: {days} days left")
        };
        let date = facts.not_after.date().to_string();
        println!("{name:<60} {:<40} {date:<22} {state}", facts.common_name);
    }
    Ok(())
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "crt") {
            out.push(p);
        }
    }
    out
}
