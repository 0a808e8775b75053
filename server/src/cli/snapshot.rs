//! `kuberaft snapshot save | status | restore`: backups of a running cluster, and new clusters
//! made from them — what `etcdctl snapshot save` and `etcdutl snapshot status|restore` do,
//! with the revision bump and compaction that Kubernetes clients need built in.
//!
//! `save` streams a backup from one replica's admin service (any replica; the backup holds
//! every write acknowledged before it was asked for) into `FILE.part`, verifies it, and only
//! then renames it to `FILE`. `restore` verifies the file, checks that the new cluster's
//! encryption config opens every encrypted value in it, and only then writes each replica's
//! data dir.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kuberaft_proto::{BackupHeader, SnapshotRequest};
use kuberaft_raft::node::backup;
use kuberaft_raft::{read_backup, BackupSummary, Identity};
use time::OffsetDateTime;

use crate::cli::admin::{Admin, AdminArgs};
use crate::cli::cluster_up::{self, UpArgs};
use crate::cli::endpoint_status::{human_bytes, Format};
use crate::config::ServeConfig;
use crate::machinery::timestamp;
use crate::pki::layout::create_private;
use crate::store::encryption::Encryption;

/// `kuberaft snapshot ...`.
#[derive(Debug, clap::Subcommand)]
pub enum SnapshotCmd {
    /// Save a consistent backup of a running cluster to FILE (from any replica, online).
    Save(SaveArgs),
    /// Print a backup file's header and verify its checksum.
    Status(StatusArgs),
    /// Make a new cluster from a backup file.
    Restore(RestoreArgs),
}

/// Options of `snapshot save`.
#[derive(Debug, Clone, clap::Args)]
pub struct SaveArgs {
    /// Where to write the backup.
    pub file: PathBuf,
    /// Where the cluster is and who to speak as (the first replica that answers is used).
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// Options of `snapshot status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// The backup file.
    pub file: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Format,
}

/// The default revision bump of a restore: far more writes than a cluster makes between two
/// backups, so no resourceVersion the old cluster served is ever served again.
pub const DEFAULT_BUMP: i64 = 1_000_000_000;

/// Options of `snapshot restore`.
#[derive(Debug, Clone, clap::Args)]
pub struct RestoreArgs {
    /// The backup file.
    pub file: PathBuf,
    /// Make a new local cluster in this directory (as `cluster up --dir DIR` would: configs,
    /// PKI, data dirs); start it with `kuberaft cluster up --dir DIR`. A PKI already in
    /// `DIR/pki` (e.g. a copy of the old cluster's, for its encryption key) is used.
    #[arg(long, conflicts_with = "config", required_unless_present = "config")]
    pub dir: Option<PathBuf>,
    /// Replicas of the new local cluster (with `--dir`).
    #[arg(long, default_value_t = 3)]
    pub nodes: u64,
    /// API port of node 1 of the new local cluster; node i listens on api-port + i - 1.
    #[arg(long, default_value_t = 6443)]
    pub api_port: u16,
    /// Peer port of node 1 of the new local cluster; node i listens on peer-port + i - 1.
    #[arg(long, default_value_t = 7443)]
    pub peer_port: u16,
    /// Restore into the data dir of this replica's config instead (one host of a new
    /// multi-host cluster: run it on every host with that host's config). The config must name
    /// a new `clusterName`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How far above the backup's revision the new cluster starts; everything up to there is
    /// compacted, so clients holding the old cluster's resourceVersions get `410 Gone` and
    /// re-list.
    #[arg(long, default_value_t = DEFAULT_BUMP)]
    pub bump_revision: i64,
}

/// Runs a `snapshot` subcommand.
pub async fn run(cmd: SnapshotCmd) -> anyhow::Result<()> {
    match cmd {
        SnapshotCmd::Save(args) => save(args).await,
        SnapshotCmd::Status(args) => status(&args),
        SnapshotCmd::Restore(args) => restore(&args),
    }
}

fn part_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

async fn save(args: SaveArgs) -> anyhow::Result<()> {
    let admin = args.admin.resolve()?;
    let part = part_path(&args.file);
    let mut failures = Vec::new();
    for target in &admin.targets {
        if let Err(e) = download(&admin, &target.peer_addr, &part).await {
            let _ = std::fs::remove_file(&part);
            failures.push(format!("{}: {e:#}", target.peer_addr));
            continue;
        }
        let summary = verify(&part).inspect_err(|_| {
            let _ = std::fs::remove_file(&part);
        })?;
        std::fs::rename(&part, &args.file)
            .with_context(|| format!("cannot rename {} to {}", part.display(), args.file.display()))?;
        let h = &summary.header;
        println!(
            "Snapshot saved at {}: revision {} (compacted {}), {} keys, {}, from node {} of cluster {:?}",
            args.file.display(),
            h.revision,
            h.compacted_revision,
            summary.keys,
            human_bytes(summary.bytes),
            h.node_id,
            h.cluster_name
        );
        return Ok(());
    }
    bail!("no replica gave a backup: {}", failures.join("; "))
}

/// Streams a backup from the replica at `addr` into `part`, synced.
async fn download(admin: &Admin, addr: &str, part: &Path) -> anyhow::Result<()> {
    let mut client = admin.connect(addr, None).await.map_err(anyhow::Error::msg)?;
    let mut stream = client
        .snapshot(SnapshotRequest {})
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
        .into_inner();
    let mut file = std::io::BufWriter::new(
        create_private(part).with_context(|| format!("cannot create {}", part.display()))?,
    );
    while let Some(chunk) = stream
        .message()
        .await
        .map_err(|s| anyhow::anyhow!("{}", s.message()))?
    {
        file.write_all(&chunk.data)
            .with_context(|| format!("cannot write {}", part.display()))?;
    }
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(())
}

fn verify(file: &Path) -> anyhow::Result<BackupSummary> {
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    read_backup(f, |_, _| Ok(())).with_context(|| format!("{} is not a usable backup", file.display()))
}

/// `snapshot status -o json`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    format_version: u32,
    cluster_name: String,
    node_id: u64,
    revision: i64,
    compacted_revision: i64,
    created: String,
    keys: u64,
    size_bytes: u64,
    sha256: String,
}

fn created(h: &BackupHeader) -> String {
    OffsetDateTime::from_unix_timestamp(h.created_unix)
        .map_or_else(|_| h.created_unix.to_string(), timestamp::format_time)
}

fn status(args: &StatusArgs) -> anyhow::Result<()> {
    let s = verify(&args.file)?;
    let h = &s.header;
    match args.output {
        Format::Json => {
            let json = StatusJson {
                format_version: h.format_version,
                cluster_name: h.cluster_name.clone(),
                node_id: h.node_id,
                revision: h.revision,
                compacted_revision: h.compacted_revision,
                created: created(h),
                keys: s.keys,
                size_bytes: s.bytes,
                sha256: s.sha256.clone(),
            };
            println!("{}", serde_json::to_string_pretty(&json)?);
        }
        Format::Table => {
            let rows = [
                [
                    "CLUSTER",
                    "NODE",
                    "REVISION",
                    "COMPACTED",
                    "KEYS",
                    "SIZE",
                    "TAKEN",
                    "FORMAT",
                    "SHA256",
                ]
                .map(String::from),
                [
                    h.cluster_name.clone(),
                    h.node_id.to_string(),
                    h.revision.to_string(),
                    h.compacted_revision.to_string(),
                    s.keys.to_string(),
                    human_bytes(s.bytes),
                    created(h),
                    h.format_version.to_string(),
                    s.sha256.clone(),
                ],
            ];
            let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
            println!("{}", crate::cli::columns::align(&rows));
        }
    }
    Ok(())
}

/// The configs of the replicas to restore into: the one given, or a new local cluster's.
fn targets(args: &RestoreArgs) -> anyhow::Result<Vec<ServeConfig>> {
    if let Some(path) = &args.config {
        return Ok(vec![ServeConfig::load(path)?]);
    }
    let Some(dir) = &args.dir else {
        bail!("give --dir for a new local cluster or --config for one replica of a new cluster");
    };
    if dir.join("node-1.yaml").exists() {
        bail!(
            "{} already holds a cluster; restore into a new directory",
            dir.display()
        );
    }
    let up = UpArgs {
        nodes: args.nodes,
        dir: dir.clone(),
        api_port: args.api_port,
        peer_port: args.peer_port,
        retention_seconds: cluster_up::DEFAULT_RETENTION_SECONDS,
        ready_timeout_seconds: cluster_up::DEFAULT_READY_TIMEOUT_SECONDS,
        feature_gates: None,
        insecure: false,
    };
    Ok(cluster_up::prepare(&up)?.into_iter().map(|(_, c)| c).collect())
}

/// Refuses a restore whose encrypted values the new replica could not open: they would be
/// corrupt objects in the new cluster.
fn check_encryption(file: &Path, config: &ServeConfig) -> anyhow::Result<()> {
    let source = config
        .security
        .as_ref()
        .and_then(|s| s.encryption_config.as_ref());
    let encryption = match source {
        Some(path) => Encryption::load(path)?,
        None => Encryption::none(),
    };
    let mut unreadable: Vec<String> = Vec::new();
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    read_backup(f, |key, kv| {
        if kv.value.starts_with(b"k8s:enc:") {
            let key = String::from_utf8_lossy(key);
            let readable = encryption
                .open(&key, &kv.value)
                .is_ok_and(|plain| !plain.starts_with(b"k8s:enc:"));
            if !readable {
                unreadable.push(key.into_owned());
            }
        }
        Ok(())
    })
    .with_context(|| format!("{} is not a usable backup", file.display()))?;
    if let Some(first) = unreadable.first() {
        let source = source.map_or_else(|| "no encryption config".to_string(), |p| p.display().to_string());
        bail!(
            "{} encrypted value(s) in the backup (e.g. {first}) cannot be opened with {source}: \
             give the new cluster the old cluster's encryption config (for a local cluster, copy \
             the old cluster's pki directory to DIR/pki before restoring)",
            unreadable.len()
        );
    }
    Ok(())
}

fn restore(args: &RestoreArgs) -> anyhow::Result<()> {
    let summary = verify(&args.file)?;
    let old = summary.header.cluster_name.clone();
    // What a failed restore into a new local cluster removes again: the directory when it made
    // it, else the node configs and data dirs it made (a PKI put there is kept).
    let made: Vec<PathBuf> = match &args.dir {
        Some(dir) if !dir.exists() => vec![dir.clone()],
        Some(dir) => (1..=args.nodes)
            .flat_map(|i| [dir.join(format!("node-{i}.yaml")), dir.join(format!("node-{i}"))])
            .filter(|p| !p.exists())
            .collect(),
        None => Vec::new(),
    };
    let result = (|| {
        let configs = targets(args)?;
        for config in &configs {
            if config.cluster_name == old {
                bail!(
                    "the backup is of cluster {old:?}, and so is the config of node {}: a restore makes a new cluster, give it a new clusterName",
                    config.id
                );
            }
            check_encryption(&args.file, config)?;
        }
        for config in &configs {
            let identity = Identity {
                cluster_name: config.cluster_name.clone(),
                node_id: config.id,
            };
            backup::restore(&config.data_dir, &identity, &args.file, args.bump_revision)
                .with_context(|| format!("cannot restore into {}", config.data_dir.display()))?;
        }
        Ok(configs)
    })();
    let configs = match result {
        Ok(c) => c,
        Err(e) => {
            for path in &made {
                let _ = std::fs::remove_dir_all(path).or_else(|_| std::fs::remove_file(path));
            }
            return Err(e);
        }
    };
    println!(
        "Restored {} (revision {} of cluster {old:?}, {} keys) as cluster {:?} at revision {}; \
         every older resourceVersion is compacted, so clients re-list.",
        args.file.display(),
        summary.header.revision,
        summary.keys,
        configs
            .first()
            .map(|c| c.cluster_name.as_str())
            .unwrap_or_default(),
        summary.header.revision.saturating_add(args.bump_revision),
    );
    for c in &configs {
        println!("  node-{}  data {}", c.id, c.data_dir.display());
    }
    if let Some(dir) = &args.dir {
        println!(
            "Start it with: kuberaft cluster up --dir {} --nodes {}",
            dir.display(),
            args.nodes
        );
    }
    Ok(())
}
