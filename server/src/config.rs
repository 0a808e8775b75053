//! The replica config file (`kuberaft serve --config node.yaml`).
//!
//! Unknown fields are errors (a typo must not silently fall back to a default), and every
//! cross-field rule is checked before anything touches the data dir.

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::Ipv4Net;
use kuberaft_raft::{Member, NodeConfig};
use serde::{Deserialize, Serialize};

/// Why a config file is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The YAML does not match the schema (bad field, wrong type, unknown field).
    #[error("config {path}: {source}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// Where and what.
        source: yaml_serde::Error,
    },
    /// The config could not be rendered as YAML.
    #[error("cannot render a config: {0}")]
    Render(yaml_serde::Error),
    /// A rule between fields is broken.
    #[error("config {path}: {message}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// Which rule.
        message: String,
    },
}

/// One member of the cluster as the config file lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemberConfig {
    /// Raft node id (> 0).
    pub id: u64,
    /// host:port other replicas use for Raft and the Kv admin service.
    pub peer_addr: String,
    /// host:port of the Kubernetes API.
    pub api_addr: String,
}

/// Raft timing and log retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RaftConfig {
    /// Leader heartbeat interval.
    pub heartbeat_millis: u64,
    /// Lower bound of the randomised election timeout.
    pub election_timeout_min_millis: u64,
    /// Upper bound of the randomised election timeout. It is also the leader lease: a
    /// follower campaigns only after lease plus its election timeout pass without a
    /// heartbeat (1.0–1.2 s with the defaults, like etcd's 1 s election timeout).
    pub election_timeout_max_millis: u64,
    /// Take a snapshot after this many log entries since the last one.
    pub snapshot_logs: u64,
    /// Log entries kept behind a snapshot.
    pub logs_kept_after_snapshot: u64,
    /// The worst round trip between two replicas (0: loopback or one zone). openraft 0.9 uses
    /// the heartbeat interval as the timeout of every AppendEntries and read-index round, so no
    /// write commits while the round trip exceeds it: with this set, the heartbeat is at least
    /// twice it, and the election timeouts at least 4 and 6 heartbeats.
    #[serde(skip_serializing_if = "is_zero")]
    pub peer_rtt_millis: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            heartbeat_millis: 100,
            election_timeout_min_millis: 400,
            election_timeout_max_millis: 600,
            snapshot_logs: 20_000,
            logs_kept_after_snapshot: 5_000,
            peer_rtt_millis: 0,
        }
    }
}

impl RaftConfig {
    /// The timing the replica runs with, `(heartbeat, election min, election max)` in
    /// milliseconds: the configured values, raised as `peerRttMillis` requires.
    pub fn timing(&self) -> (u64, u64, u64) {
        let rtt = self.peer_rtt_millis;
        let heartbeat = self.heartbeat_millis.max(rtt.saturating_mul(2));
        if rtt == 0 {
            return (
                heartbeat,
                self.election_timeout_min_millis,
                self.election_timeout_max_millis,
            );
        }
        (
            heartbeat,
            self.election_timeout_min_millis.max(heartbeat.saturating_mul(4)),
            self.election_timeout_max_millis.max(heartbeat.saturating_mul(6)),
        )
    }
}

/// History retention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CompactionConfig {
    /// Keep at least this many seconds of history (older revisions answer "compacted").
    pub retention_seconds: u64,
    /// How often the leader considers compacting.
    pub interval_seconds: u64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            retention_seconds: 300,
            interval_seconds: 10,
        }
    }
}

/// Alpha behaviours the cluster operator turns on, named as kube-apiserver's feature gates
/// (`featureGates:` in the config file, or `--feature-gates Name=true,...`). All are off by
/// default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureGates {
    /// A delete with `ignoreStoreReadErrorWithClusterBreakingPotential=true` removes an
    /// object that cannot be decoded, skipping preconditions and finalizers.
    #[serde(rename = "AllowUnsafeMalformedObjectDeletion", default)]
    pub allow_unsafe_malformed_object_deletion: bool,
}

impl FeatureGates {
    /// Whether every gate is at its default (then the config file leaves them out).
    pub fn is_default(&self) -> bool {
        *self == FeatureGates::default()
    }

    /// Applies `--feature-gates` text: comma-separated `Name=true|false` pairs.
    pub fn apply(&mut self, spec: &str) -> Result<(), String> {
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("feature gate {pair:?} must be Name=true or Name=false"))?;
            let on = match value.trim() {
                "true" => true,
                "false" => false,
                v => return Err(format!("invalid value of {name}: {v:?}, must be true or false")),
            };
            match name.trim() {
                "AllowUnsafeMalformedObjectDeletion" => self.allow_unsafe_malformed_object_deletion = on,
                other => return Err(format!("unrecognized feature gate: {other}")),
            }
        }
        Ok(())
    }
}

/// TLS and authentication of a replica: the files `cluster up` or `kuberaft certs` make.
/// Relative paths are relative to the config file's directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityConfig {
    /// The cluster CA: trusted for peers and for clients' certificates.
    pub certificate_authority: PathBuf,
    /// The API port's serving certificate.
    pub serving_certificate: PathBuf,
    /// Its key.
    pub serving_key: PathBuf,
    /// This replica's peer certificate (mutual TLS between replicas).
    pub peer_certificate: PathBuf,
    /// Its key.
    pub peer_key: PathBuf,
    /// The key that signs and verifies service-account tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_key: Option<PathBuf>,
    /// Static bearer tokens, kube's token file format (`token,user,uid,"group1,group2"`),
    /// re-read when it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<PathBuf>,
    /// kube's `EncryptionConfiguration`: which resources are encrypted at rest, and with which
    /// keys (kube-apiserver's `--encryption-provider-config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption_config: Option<PathBuf>,
    /// Re-read `encryptionConfig` when it changes, without a restart (kube-apiserver's
    /// `--encryption-provider-config-automatic-reload`; off by default, as there).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub encryption_config_automatic_reload: bool,
    /// The front-proxy CA (kube-apiserver's `--requestheader-client-ca-file`): published to
    /// aggregated API servers, which verify the proxy's client certificate with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub front_proxy_ca: Option<PathBuf>,
    /// The client certificate the aggregation proxy presents (`--proxy-client-cert-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_client_certificate: Option<PathBuf>,
    /// Its key (`--proxy-client-key-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_client_key: Option<PathBuf>,
    /// The client certificate this server presents to kubelets for `exec`, `attach` and
    /// `port-forward` and logs (`--kubelet-client-certificate`); `cluster up` issues it from the
    /// cluster CA, which kubelets trust for clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_client_certificate: Option<PathBuf>,
    /// Its key (`--kubelet-client-key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_client_key: Option<PathBuf>,
    /// The CA that kubelets' serving certificates are verified with
    /// (`--kubelet-certificate-authority`); without it they are not verified, as in kube.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_certificate_authority: Option<PathBuf>,
}

impl SecurityConfig {
    /// The paths made absolute against `base` (the config file's directory).
    pub fn resolved(&self, base: &Path) -> SecurityConfig {
        let abs = |p: &PathBuf| if p.is_absolute() { p.clone() } else { base.join(p) };
        SecurityConfig {
            certificate_authority: abs(&self.certificate_authority),
            serving_certificate: abs(&self.serving_certificate),
            serving_key: abs(&self.serving_key),
            peer_certificate: abs(&self.peer_certificate),
            peer_key: abs(&self.peer_key),
            service_account_key: self.service_account_key.as_ref().map(abs),
            token_file: self.token_file.as_ref().map(abs),
            encryption_config: self.encryption_config.as_ref().map(abs),
            encryption_config_automatic_reload: self.encryption_config_automatic_reload,
            front_proxy_ca: self.front_proxy_ca.as_ref().map(abs),
            proxy_client_certificate: self.proxy_client_certificate.as_ref().map(abs),
            proxy_client_key: self.proxy_client_key.as_ref().map(abs),
            kubelet_client_certificate: self.kubelet_client_certificate.as_ref().map(abs),
            kubelet_client_key: self.kubelet_client_key.as_ref().map(abs),
            kubelet_certificate_authority: self.kubelet_certificate_authority.as_ref().map(abs),
        }
    }
}

/// Audit logging (kube-apiserver's `--audit-policy-file` and `--audit-log-*` flags). Relative
/// paths are relative to the config file's directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuditConfig {
    /// The `audit.k8s.io/v1` `Policy` that decides what is logged.
    pub policy_file: PathBuf,
    /// The log file (`-`: standard output); backups are written next to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<PathBuf>,
    /// A kubeconfig file naming the webhook that audit events are also (or only) sent to
    /// (`--audit-webhook-config-file`), in batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_config_file: Option<PathBuf>,
    /// The longest a webhook batch waits for more events after its first
    /// (`--audit-webhook-batch-max-wait`).
    #[serde(default = "default_webhook_batch_max_wait")]
    pub webhook_batch_max_wait_seconds: u64,
    /// Rotate the file before it exceeds this many megabytes (`--audit-log-maxsize`; 0 means
    /// 100, as in kube).
    #[serde(rename = "logMaxSizeMB", default = "default_log_max_size")]
    pub log_max_size_mb: u64,
    /// Keep at most this many rotated files (`--audit-log-maxbackup`; 0 keeps all).
    #[serde(default)]
    pub log_max_backups: usize,
    /// Remove rotated files older than this many days, by the time in their name
    /// (`--audit-log-maxage`; 0 keeps all).
    #[serde(default)]
    pub log_max_age_days: u64,
}

fn default_log_max_size() -> u64 {
    AuditConfig::DEFAULT_LOG_MAX_SIZE_MB
}

fn default_webhook_batch_max_wait() -> u64 {
    AuditConfig::DEFAULT_WEBHOOK_BATCH_MAX_WAIT_SECONDS
}

impl AuditConfig {
    /// `logMaxSizeMB` when the file does not set it.
    pub const DEFAULT_LOG_MAX_SIZE_MB: u64 = 100;
    /// `webhookBatchMaxWaitSeconds` when the file does not set it (kube's 30 s).
    pub const DEFAULT_WEBHOOK_BATCH_MAX_WAIT_SECONDS: u64 = 30;

    /// The paths made absolute against `base` (the config file's directory); `-` stays.
    pub fn resolved(&self, base: &Path) -> AuditConfig {
        let abs = |p: &PathBuf| {
            if p.is_absolute() || p.as_path() == Path::new("-") {
                p.clone()
            } else {
                base.join(p)
            }
        };
        AuditConfig {
            policy_file: abs(&self.policy_file),
            log_path: self.log_path.as_ref().map(abs),
            webhook_config_file: self.webhook_config_file.as_ref().map(abs),
            ..self.clone()
        }
    }
}

/// Scheduled backups of this replica's store (as k3s's etcd snapshots): every
/// `intervalSeconds` a backup file is written to `dir` and all but the newest `keep` are removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackupConfig {
    /// Seconds between backups (the first is taken one interval after start).
    pub interval_seconds: u64,
    /// Where the files go; relative paths are relative to the config file's directory
    /// (default: `backups` in the data dir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// How many of the newest files to keep.
    #[serde(default = "default_backup_keep")]
    pub keep: usize,
}

fn default_backup_keep() -> usize {
    BackupConfig::DEFAULT_KEEP
}

impl BackupConfig {
    /// `keep` when the file does not set it.
    pub const DEFAULT_KEEP: usize = 5;

    /// The directory made absolute against `base` (the config file's directory), defaulting
    /// to `backups` in `data_dir`.
    pub fn resolved(&self, base: &Path, data_dir: &Path) -> BackupConfig {
        let dir = match &self.dir {
            Some(d) if d.is_absolute() => d.clone(),
            Some(d) => base.join(d),
            None => data_dir.join("backups"),
        };
        BackupConfig {
            dir: Some(dir),
            ..self.clone()
        }
    }
}

/// The whole config file of one replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServeConfig {
    /// This replica's node id; must be one of `members`.
    pub id: u64,
    /// The cluster's name; replicas refuse peers of another cluster.
    pub cluster_name: String,
    /// Where the database and snapshots live.
    pub data_dir: PathBuf,
    /// Address to listen on for peers (defaults to this member's `peerAddr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_listen: Option<String>,
    /// Address to listen on for the Kubernetes API (defaults to this member's `apiAddr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_listen: Option<String>,
    /// The cluster's initial members.
    pub members: Vec<MemberConfig>,
    /// Raft timing and log retention.
    #[serde(default)]
    pub raft: RaftConfig,
    /// History retention.
    #[serde(default)]
    pub compaction: CompactionConfig,
    /// How long a request may wait for a leader before it fails.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_seconds: u64,
    /// The database size above which writes that add data are refused (space alarm) until
    /// compaction brings it back below (etcd's `--quota-backend-bytes`).
    #[serde(default = "default_quota")]
    pub quota_backend_bytes: u64,
    /// Revision batches a watcher may fall behind before its watch is closed (it then resumes
    /// from its last resourceVersion): bounds the memory a slow client can hold.
    #[serde(default = "default_watch_buffer")]
    pub watch_buffer: usize,
    /// Alpha behaviours turned on.
    #[serde(default, skip_serializing_if = "FeatureGates::is_default")]
    pub feature_gates: FeatureGates,
    /// Certificates, keys and token sources. A replica without them serves only with
    /// `serve --insecure` (plain HTTP, no authentication: development only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecurityConfig>,
    /// Audit logging; off without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditConfig>,
    /// An `AdmissionConfiguration` file with the plugins' configurations (kube-apiserver's
    /// `--admission-control-config-file`): PodSecurity's default levels and exemptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_config_file: Option<PathBuf>,
    /// Scheduled backups; off without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupConfig>,
    /// The IPv4 range Services' cluster IPs come from; its first address is the
    /// `default/kubernetes` Service's (kube-apiserver's `--service-cluster-ip-range`). The same
    /// on every replica.
    #[serde(default = "default_cluster_ip_range", rename = "serviceClusterIPRange")]
    pub service_cluster_ip_range: String,
    /// The ports NodePort and LoadBalancer Services' node ports come from (`30000-32767`,
    /// `30000+2767`; kube-apiserver's `--service-node-port-range`). The same on every replica.
    #[serde(default = "default_node_port_range")]
    pub service_node_port_range: String,
    /// With priority and fairness (the default), the seats of a replica are this plus
    /// `maxMutatingRequestsInflight`, shared among the priority levels. Without it, the most
    /// read-only requests (`get`, `list`) a replica executes at once; more are refused with
    /// `429` (kube-apiserver's `--max-requests-inflight`; 0: no limit). Watches and
    /// `system:masters` are not counted.
    #[serde(default = "default_max_requests_inflight")]
    pub max_requests_inflight: usize,
    /// See `maxRequestsInflight`. Without priority and fairness, the most mutating requests a
    /// replica executes at once (kube-apiserver's `--max-mutating-requests-inflight`; 0: no
    /// limit); lease writes have as many seats again of their own.
    #[serde(default = "default_max_mutating_requests_inflight")]
    pub max_mutating_requests_inflight: usize,
    /// API Priority and Fairness (kube-apiserver's `--enable-priority-and-fairness`, on by
    /// default): requests are classified by FlowSchemas into priority levels that share the
    /// replica's seats and queue fairly; `false` falls back to the two in-flight limits alone.
    #[serde(default = "default_enable_priority_and_fairness")]
    pub enable_priority_and_fairness: bool,
}

fn default_enable_priority_and_fairness() -> bool {
    true
}

fn default_max_requests_inflight() -> usize {
    ServeConfig::DEFAULT_MAX_REQUESTS_INFLIGHT
}

fn default_max_mutating_requests_inflight() -> usize {
    ServeConfig::DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT
}

fn default_cluster_ip_range() -> String {
    ServiceRanges::DEFAULT_CLUSTER_IP_RANGE.into()
}

fn default_node_port_range() -> String {
    ServiceRanges::DEFAULT_NODE_PORT_RANGE.into()
}

fn default_request_timeout() -> u64 {
    ServeConfig::DEFAULT_REQUEST_TIMEOUT_SECONDS
}

fn default_quota() -> u64 {
    ServeConfig::DEFAULT_QUOTA_BACKEND_BYTES
}

fn default_watch_buffer() -> usize {
    ServeConfig::DEFAULT_WATCH_BUFFER
}

impl ServeConfig {
    /// `requestTimeoutSeconds` when the file does not set it.
    pub const DEFAULT_REQUEST_TIMEOUT_SECONDS: u64 = 10;
    /// `quotaBackendBytes` when the file does not set it: 8 GiB.
    pub const DEFAULT_QUOTA_BACKEND_BYTES: u64 = 8 << 30;
    /// `watchBuffer` when the file does not set it.
    pub const DEFAULT_WATCH_BUFFER: usize = 4096;
    /// `maxRequestsInflight` when the file does not set it (kube-apiserver's default).
    pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
    /// `maxMutatingRequestsInflight` when the file does not set it (kube-apiserver's default).
    pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;

    /// The config as a config file says it: what `cluster up`, the tests and the chaos harness
    /// write for `serve --config`.
    pub fn to_yaml(&self) -> Result<String, ConfigError> {
        yaml_serde::to_string(self).map_err(ConfigError::Render)
    }

    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<ServeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config: ServeConfig = yaml_serde::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        config.validate().map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.security = config.security.map(|s| s.resolved(base));
        config.audit = config.audit.map(|a| a.resolved(base));
        config.backup = config.backup.map(|b| b.resolved(base, &config.data_dir));
        config.admission_config_file = config.admission_config_file.map(|f| base.join(f));
        Ok(config)
    }

    /// The Service ranges the config sets.
    pub fn service_ranges(&self) -> Result<ServiceRanges, String> {
        ServiceRanges::parse(&self.service_cluster_ip_range, &self.service_node_port_range)
    }

    /// Checks the rules between fields.
    pub fn validate(&self) -> Result<(), String> {
        self.service_ranges()?;
        if let Some(b) = &self.backup {
            if b.interval_seconds == 0 {
                return Err("backup.intervalSeconds must be greater than 0".into());
            }
            if b.keep == 0 {
                return Err("backup.keep must be at least 1".into());
            }
        }
        if self.id == 0 {
            return Err("id must be greater than 0".into());
        }
        if self.cluster_name.trim().is_empty() {
            return Err("clusterName must not be empty".into());
        }
        if self.cluster_name.chars().any(|c| !(c.is_ascii_graphic())) {
            return Err("clusterName must be printable ASCII without spaces".into());
        }
        if self.data_dir.as_os_str().is_empty() {
            return Err("dataDir must not be empty".into());
        }
        if self.members.is_empty() {
            return Err("members must list at least this replica".into());
        }
        let mut ids = HashSet::new();
        let mut addrs = HashSet::new();
        for m in &self.members {
            if m.id == 0 {
                return Err("member ids must be greater than 0".into());
            }
            if !ids.insert(m.id) {
                return Err(format!("two members have the same id {}", m.id));
            }
            for (field, addr) in [("peerAddr", &m.peer_addr), ("apiAddr", &m.api_addr)] {
                check_addr(addr).map_err(|e| format!("member {} {field}: {e}", m.id))?;
                if !addrs.insert(addr.clone()) {
                    return Err(format!("address {addr} is used twice"));
                }
            }
        }
        if !ids.contains(&self.id) {
            return Err(format!("id {} is not one of the members", self.id));
        }
        for (field, addr) in [("peerListen", &self.peer_listen), ("apiListen", &self.api_listen)] {
            if let Some(a) = addr {
                check_addr(a).map_err(|e| format!("{field}: {e}"))?;
            }
        }
        let r = &self.raft;
        let (heartbeat, election_min, election_max) = r.timing();
        if heartbeat == 0 {
            return Err("raft.heartbeatMillis must be greater than 0".into());
        }
        if election_min <= heartbeat {
            return Err("raft.electionTimeoutMinMillis must be greater than raft.heartbeatMillis".into());
        }
        if election_max <= election_min {
            return Err(
                "raft.electionTimeoutMaxMillis must be greater than raft.electionTimeoutMinMillis".into(),
            );
        }
        if r.snapshot_logs == 0 {
            return Err("raft.snapshotLogs must be greater than 0".into());
        }
        if self.compaction.interval_seconds == 0 {
            return Err("compaction.intervalSeconds must be greater than 0".into());
        }
        if self.request_timeout_seconds == 0 {
            return Err("requestTimeoutSeconds must be greater than 0".into());
        }
        if let Some(a) = &self.audit {
            if a.policy_file.as_os_str().is_empty() {
                return Err("audit.policyFile must not be empty".into());
            }
            match (&a.log_path, &a.webhook_config_file) {
                (None, None) => return Err("audit needs a logPath, a webhookConfigFile or both".into()),
                (Some(p), _) if p.as_os_str().is_empty() => {
                    return Err("audit.logPath must not be empty".into())
                }
                (_, Some(p)) if p.as_os_str().is_empty() => {
                    return Err("audit.webhookConfigFile must not be empty".into())
                }
                _ => {}
            }
            if a.webhook_batch_max_wait_seconds == 0 {
                return Err("audit.webhookBatchMaxWaitSeconds must be greater than 0".into());
            }
        }
        Ok(())
    }

    /// This replica's member entry.
    pub fn me(&self) -> &MemberConfig {
        // `validate` guarantees the entry exists; `load` always validates.
        self.members
            .iter()
            .find(|m| m.id == self.id)
            .unwrap_or_else(|| unreachable!("validated config lists its own id"))
    }

    /// Where to listen for peers.
    pub fn peer_listen(&self) -> &str {
        self.peer_listen.as_deref().unwrap_or(&self.me().peer_addr)
    }

    /// Where to listen for the Kubernetes API.
    pub fn api_listen(&self) -> &str {
        self.api_listen.as_deref().unwrap_or(&self.me().api_addr)
    }

    /// The Raft layer's view of this config.
    pub fn node_config(&self) -> NodeConfig {
        let members: BTreeMap<u64, Member> = self
            .members
            .iter()
            .map(|m| {
                (
                    m.id,
                    Member {
                        peer_addr: m.peer_addr.clone(),
                        api_addr: m.api_addr.clone(),
                    },
                )
            })
            .collect();
        NodeConfig {
            id: self.id,
            cluster_name: self.cluster_name.clone(),
            data_dir: self.data_dir.clone(),
            members,
            heartbeat: Duration::from_millis(self.raft.timing().0),
            election_timeout: (
                Duration::from_millis(self.raft.timing().1),
                Duration::from_millis(self.raft.timing().2),
            ),
            snapshot_logs: self.raft.snapshot_logs,
            logs_kept_after_snapshot: self.raft.logs_kept_after_snapshot,
            compaction_retention: Duration::from_secs(self.compaction.retention_seconds),
            compaction_interval: Duration::from_secs(self.compaction.interval_seconds),
            request_timeout: Duration::from_secs(self.request_timeout_seconds),
            peer_tls: None,
            certificates: Vec::new(),
            join: None,
            quota_bytes: self.quota_backend_bytes,
            mergers: Default::default(),
        }
    }
}

fn check_addr(addr: &str) -> Result<(), String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("{addr:?} is not host:port"))?;
    if host.is_empty() {
        return Err(format!("{addr:?} has no host"));
    }
    port.parse::<u16>()
        .map_err(|_| format!("{addr:?} has no valid port"))?;
    Ok(())
}

/// The largest service range kube-apiserver accepts: a /12 (20 host bits).
const MAX_HOST_BITS: u8 = 20;

/// Where Services' cluster IPs and node ports come from: kube-apiserver's
/// `--service-cluster-ip-range` and `--service-node-port-range`. Every replica must be given
/// the same ranges, as every kube-apiserver of a cluster must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceRanges {
    /// The cluster IP range (IPv4).
    cidr: Ipv4Net,
    /// The lowest and highest node port.
    node_ports: (u32, u32),
}

impl Default for ServiceRanges {
    /// kubeadm's defaults: 10.96.0.0/12 and 30000-32767.
    fn default() -> Self {
        ServiceRanges {
            cidr: Ipv4Net::new_assert(Ipv4Addr::new(10, 96, 0, 0), 12),
            node_ports: (30000, 32767),
        }
    }
}

impl ServiceRanges {
    /// The cluster IP range text when the config sets none.
    pub const DEFAULT_CLUSTER_IP_RANGE: &'static str = "10.96.0.0/12";
    /// The node port range text when the config sets none.
    pub const DEFAULT_NODE_PORT_RANGE: &'static str = "30000-32767";

    /// Parses a cluster IP range (`10.96.0.0/12`) and a node port range (`30000-32767`,
    /// `30000+2767` or a single port), with the limits kube-apiserver puts on its flags.
    pub fn parse(cluster_ip_range: &str, node_port_range: &str) -> Result<ServiceRanges, String> {
        let cidr: Ipv4Net = cluster_ip_range.trim().parse().map_err(|_| {
            format!("serviceClusterIPRange {cluster_ip_range:?} is not an IPv4 CIDR such as 10.96.0.0/12")
        })?;
        if cidr.network() != cidr.addr() {
            return Err(format!(
                "serviceClusterIPRange {cluster_ip_range:?} has host bits set; the network is {}",
                cidr.trunc()
            ));
        }
        let host_bits = 32 - cidr.prefix_len();
        if host_bits > MAX_HOST_BITS {
            return Err(format!(
                "serviceClusterIPRange {cluster_ip_range:?} is too large; for 32-bit addresses, the mask must be >= {}",
                32 - MAX_HOST_BITS
            ));
        }
        if host_bits < 2 {
            return Err(format!(
                "serviceClusterIPRange {cluster_ip_range:?} is too small: it must hold at least the kubernetes Service's address"
            ));
        }
        let node_ports = parse_port_range(node_port_range.trim()).ok_or_else(|| {
            format!("serviceNodePortRange {node_port_range:?} is not a port range such as 30000-32767")
        })?;
        Ok(ServiceRanges { cidr, node_ports })
    }

    /// The first address of the range: the `default/kubernetes` Service's cluster IP.
    pub fn kubernetes_service_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.cidr.network()) + 1)
    }

    /// The cluster IP range.
    pub fn cidr(&self) -> Ipv4Net {
        self.cidr
    }

    /// The lowest and highest node port.
    pub fn node_ports(&self) -> (u32, u32) {
        self.node_ports
    }
}

/// `A-B`, `A+N` (A to A+N) or `A`, within 1-65535.
fn parse_port_range(text: &str) -> Option<(u32, u32)> {
    let port = |s: &str| s.trim().parse::<u32>().ok().filter(|p| (1..=65535).contains(p));
    let (lo, hi) = if let Some((a, b)) = text.split_once('-') {
        (port(a)?, port(b)?)
    } else if let Some((a, n)) = text.split_once('+') {
        let lo = port(a)?;
        (lo, port(&(lo + n.trim().parse::<u32>().ok()?).to_string())?)
    } else {
        let p = port(text)?;
        (p, p)
    };
    (lo <= hi).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        r#"
id: 1
clusterName: test
dataDir: /tmp/x
members:
  - {id: 1, peerAddr: "127.0.0.1:7001", apiAddr: "127.0.0.1:6001"}
  - {id: 2, peerAddr: "127.0.0.1:7002", apiAddr: "127.0.0.1:6002"}
"#
        .to_string()
    }

    fn load(text: &str) -> Result<ServeConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.yaml");
        std::fs::write(&p, text).unwrap();
        ServeConfig::load(&p)
    }

    #[test]
    fn a_valid_file_loads_with_defaults() {
        let c = load(&sample()).unwrap();
        assert_eq!(c.raft, RaftConfig::default());
        assert_eq!(c.api_listen(), "127.0.0.1:6001");
        assert_eq!(c.node_config().members.len(), 2);
        let across_zones = RaftConfig {
            peer_rtt_millis: 300,
            ..RaftConfig::default()
        };
        assert_eq!(across_zones.timing(), (600, 2400, 3600));
        assert_eq!(RaftConfig::default().timing(), (100, 400, 600));
    }

    #[test]
    fn bad_fields_are_named() {
        let err = load(&sample().replace("dataDir", "dataDri"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `dataDri`"), "{err}");
        let err = load(&sample().replace("id: 1\n", "id: one\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("id"), "{err}");
        let err = load(&sample().replace("id: 2,", "id: 1,"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("same id 1"), "{err}");
        let err = load(&sample().replace("id: 1\n", "id: 3\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not one of the members"), "{err}");
        let err = load(&sample().replace("127.0.0.1:7002", "127.0.0.1:7001"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("used twice"), "{err}");
        let err = load(&sample().replace("127.0.0.1:6002", "nope"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not host:port"), "{err}");
    }

    #[test]
    fn the_audit_section_has_kubes_defaults_and_paths_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n.yaml");
        std::fs::write(
            &p,
            format!(
                "{}audit:\n  policyFile: audit-policy.yaml\n  logPath: logs/audit.log\n",
                sample()
            ),
        )
        .unwrap();
        let c = ServeConfig::load(&p).unwrap();
        assert_eq!(
            c.audit,
            Some(AuditConfig {
                policy_file: dir.path().join("audit-policy.yaml"),
                log_path: Some(dir.path().join("logs/audit.log")),
                webhook_config_file: None,
                webhook_batch_max_wait_seconds: 30,
                log_max_size_mb: 100,
                log_max_backups: 0,
                log_max_age_days: 0,
            })
        );
        std::fs::write(
            &p,
            format!(
                "{}audit:\n  policyFile: /etc/p.yaml\n  logPath: \"-\"\n  logMaxSizeMB: 5\n  logMaxBackups: 3\n  logMaxAgeDays: 7\n",
                sample()
            ),
        )
        .unwrap();
        let a = ServeConfig::load(&p).unwrap().audit.unwrap();
        assert_eq!(
            (
                a.policy_file.to_str(),
                a.log_path.as_deref().and_then(Path::to_str)
            ),
            (Some("/etc/p.yaml"), Some("-"))
        );
        assert_eq!(
            (a.log_max_size_mb, a.log_max_backups, a.log_max_age_days),
            (5, 3, 7)
        );
        assert!(load(&format!("{}audit:\n  policyFile: p.yaml\n", sample()))
            .unwrap_err()
            .to_string()
            .contains("audit needs a logPath, a webhookConfigFile or both"));
        std::fs::write(
            &p,
            format!(
                "{}audit:\n  policyFile: p.yaml\n  webhookConfigFile: hook.yaml\n  webhookBatchMaxWaitSeconds: 1\n",
                sample()
            ),
        )
        .unwrap();
        let a = ServeConfig::load(&p).unwrap().audit.unwrap();
        assert_eq!(
            (
                a.log_path,
                a.webhook_config_file,
                a.webhook_batch_max_wait_seconds
            ),
            (None, Some(dir.path().join("hook.yaml")), 1)
        );
        assert!(load(&format!(
            "{}audit:\n  policyFile: p.yaml\n  logPath: a.log\n  logMaxSize: 1\n",
            sample()
        ))
        .unwrap_err()
        .to_string()
        .contains("unknown field `logMaxSize`"));
    }

    #[test]
    fn feature_gates_come_from_the_file_and_the_flag() {
        let c = load(&sample()).unwrap();
        assert!(!c.feature_gates.allow_unsafe_malformed_object_deletion);
        let on = load(&format!(
            "{}featureGates:\n  AllowUnsafeMalformedObjectDeletion: true\n",
            sample()
        ))
        .unwrap();
        assert!(on.feature_gates.allow_unsafe_malformed_object_deletion);
        let err = load(&format!("{}featureGates:\n  NoSuchGate: true\n", sample()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `NoSuchGate`"), "{err}");

        let mut gates = on.feature_gates.clone();
        gates.apply("AllowUnsafeMalformedObjectDeletion=false").unwrap();
        assert!(gates.is_default());
        gates.apply(" AllowUnsafeMalformedObjectDeletion=true, ").unwrap();
        assert!(gates.allow_unsafe_malformed_object_deletion);
        assert_eq!(
            gates.apply("NoSuchGate=true").unwrap_err(),
            "unrecognized feature gate: NoSuchGate"
        );
        assert!(gates.apply("AllowUnsafeMalformedObjectDeletion").is_err());
        assert!(gates.apply("AllowUnsafeMalformedObjectDeletion=yes").is_err());
    }
}
