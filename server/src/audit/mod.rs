//! Audit logging, as kube-apiserver's `--audit-policy-file` and `--audit-log-*` do it: a
//! policy decides for each request how much of it is recorded, and the record is written as
//! `audit.k8s.io/v1` events, one JSON line each, to a size-rotated file or standard output,
//! and (as `--audit-webhook-config-file` does) in `EventList` batches to a webhook. Off unless
//! the config file has an `audit` section.
//!
//! - [`policy`] reads the `Policy` file and evaluates its rules (first match wins).
//! - [`request`] describes a request as kube's audit sees it (its `RequestInfo` from the path,
//!   long-running or not, source IPs, user agent).
//! - [`context`] is one request's record, filled in by the filters and written per stage.
//! - [`event`] is the `Event` and its JSON line; [`object`] turns bodies into its objects.
//! - [`sink`] is the bounded buffer and the writer thread; [`log`] the rotating file;
//!   [`webhook`] the webhook backend (`--audit-webhook-config-file`, batched).
//!
//! The filter that creates the record and the calls that fill it in are in
//! `filters::audit`; where it sits in the chain is `server::router::with_filters`.

pub mod context;
pub mod event;
pub mod log;
pub mod object;
pub mod policy;
pub mod request;
pub mod sink;
pub mod webhook;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::AuditConfig;
use context::AuditContext;
use log::{Limits, Log, LogError};
use policy::{Policy, PolicyError};
use sink::{LogWriter, Sink};
use webhook::{Webhook, WebhookError};

/// Why auditing cannot start (a replica then refuses to run).
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The policy file cannot be read.
    #[error("cannot read the audit policy {path}: {source}")]
    ReadPolicy {
        /// The policy file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The policy file is not a valid policy.
    #[error("audit policy {path}: {source}")]
    Policy {
        /// The policy file.
        path: PathBuf,
        /// What is wrong.
        source: PolicyError,
    },
    /// The log cannot be opened.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The writer thread cannot be started.
    #[error("cannot start the audit log writer: {0}")]
    Writer(std::io::Error),
    /// The webhook backend's config is unusable.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
}

/// A replica's audit: its policy and the sink its events go to (cheap to clone).
#[derive(Debug, Clone)]
pub struct Auditor {
    policy: Arc<Policy>,
    sink: Sink,
}

impl Auditor {
    /// Reads the policy and opens the log the config names, and starts the writer.
    pub fn load(config: &AuditConfig) -> Result<Auditor, AuditError> {
        let text = std::fs::read_to_string(&config.policy_file).map_err(|source| AuditError::ReadPolicy {
            path: config.policy_file.clone(),
            source,
        })?;
        let policy = Policy::parse(&text).map_err(|source| AuditError::Policy {
            path: config.policy_file.clone(),
            source,
        })?;
        let limits = Limits::from_config(
            config.log_max_size_mb,
            config.log_max_backups,
            config.log_max_age_days,
        );
        let log = match &config.log_path {
            Some(path) => Some(LogWriter::start(Log::open(path, limits)?).map_err(AuditError::Writer)?),
            None => None,
        };
        let webhook = match &config.webhook_config_file {
            Some(path) => Some(Webhook::start(
                path,
                Duration::from_secs(config.webhook_batch_max_wait_seconds),
            )?),
            None => None,
        };
        Ok(Auditor::new(policy, Sink::new(log, webhook)))
    }

    /// An auditor judging by `policy` and writing to `sink`.
    pub fn new(policy: Policy, sink: Sink) -> Auditor {
        Auditor {
            policy: Arc::new(policy),
            sink,
        }
    }

    /// The record of a request that arrives now.
    pub fn context(&self) -> AuditContext {
        AuditContext::new(self.policy.clone(), self.sink.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &std::path::Path, policy: &str) -> AuditConfig {
        std::fs::write(dir.join("policy.yaml"), policy).unwrap();
        AuditConfig {
            policy_file: dir.join("policy.yaml"),
            log_path: Some(dir.join("log/audit.log")),
            webhook_config_file: None,
            webhook_batch_max_wait_seconds: 30,
            log_max_size_mb: 100,
            log_max_backups: 0,
            log_max_age_days: 0,
        }
    }

    #[test]
    fn a_bad_policy_or_log_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(
            dir.path(),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        );
        Auditor::load(&c).unwrap();
        assert!(dir.path().join("log/audit.log").exists());

        let e = Auditor::load(&config(
            dir.path(),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with(&format!(
                "audit policy {}: rules[0].level: Unsupported value",
                dir.path().join("policy.yaml").display()
            )),
            "{e}"
        );

        c.policy_file = dir.path().join("missing.yaml");
        let e = Auditor::load(&c).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "cannot read the audit policy {}",
                c.policy_file.display()
            )),
            "{e}"
        );

        let mut c = config(
            dir.path(),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        );
        std::fs::write(dir.path().join("file"), "").unwrap();
        c.log_path = Some(dir.path().join("file/audit.log"));
        let e = Auditor::load(&c).unwrap_err().to_string();
        assert!(e.contains("cannot create the audit log directory"), "{e}");
    }
}
