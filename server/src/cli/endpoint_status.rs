//! `kuberaft endpoint status`: one row per member, like `etcdctl endpoint status`.
//!
//! Asks every replica it knows of (from the kubeconfig's kuberaft extensions or
//! `--endpoints`) and every member those replicas report, so a member that is down still gets
//! a row that says so.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use kuberaft_proto::kv_client::KvClient;
use kuberaft_proto::{StatusRequest, StatusResponse};

use crate::cli::kubeconfig;

/// Options of `endpoint status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// kubeconfig written by `cluster up` (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Peer addresses (host:port, comma separated) to ask instead of the kubeconfig's.
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// Talk plaintext to replicas started with `serve --insecure`.
    #[arg(long)]
    pub insecure: bool,
    /// Also compute each replica's state hash (a full scan).
    #[arg(long)]
    pub hash: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Format,
}

/// How `endpoint status` prints.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns.
    Table,
    /// One JSON array.
    Json,
}

/// One member's row: its status or why it could not be reached.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    id: u64,
    peer_addr: String,
    api_addr: String,
    #[serde(flatten)]
    status: Option<StatusJson>,
    error: Option<String>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    role: String,
    term: u64,
    leader_id: u64,
    revision: i64,
    compacted_revision: i64,
    commit_index: u64,
    applied_index: u64,
    log_entries: u64,
    db_size_bytes: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    state_hash: String,
    #[serde(skip_serializing_if = "is_zero")]
    hash_revision: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

async fn ask(
    addr: &str,
    hash: bool,
    tls: Option<&tonic::transport::ClientTlsConfig>,
) -> Result<StatusResponse, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint =
        tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}")).map_err(|e| e.to_string())?;
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls.clone()).map_err(|e| e.to_string())?;
    }
    let endpoint = endpoint
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(if hash { 30 } else { 3 }));
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("unreachable: {e}"))?;
    let mut client = KvClient::new(channel);
    client
        .status(StatusRequest { with_hash: hash })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| format!("unreachable: {}", s.message()))
}

fn default_kubeconfig() -> Option<PathBuf> {
    if let Ok(k) = std::env::var("KUBECONFIG") {
        if let Some(first) = k.split(':').find(|s| !s.is_empty()) {
            return Some(PathBuf::from(first));
        }
    }
    std::env::var("HOME")
        .ok()
        .map(|h| PathBuf::from(h).join(".kube/config"))
}

/// Collects every member's row.
pub async fn collect(args: &StatusArgs) -> anyhow::Result<Vec<Row>> {
    let mut targets: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let path = args
        .kubeconfig
        .clone()
        .or_else(default_kubeconfig)
        .context("no kubeconfig given and no $KUBECONFIG or $HOME")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()));
    // The peer port takes the kubeconfig's client certificate (of the cluster CA); --insecure
    // replicas are asked in plaintext.
    let tls = match &text {
        Ok(t) if !args.insecure => {
            kubeconfig::credentials(t, path.parent().unwrap_or(std::path::Path::new(".")))
                .with_context(|| format!("cannot parse {}", path.display()))?
                .map(|c| crate::pki::tls::peer_client(&c.ca_pem, &c.cert_pem, &c.key_pem))
        }
        _ => None,
    };
    if tls.is_none() && !args.insecure {
        anyhow::bail!(
            "{} has no client certificate and CA for the current context; pass --insecure for replicas started with --insecure",
            path.display()
        );
    }
    if args.endpoints.is_empty() {
        let text = text?;
        let found =
            kubeconfig::replicas(&text).with_context(|| format!("cannot parse {}", path.display()))?;
        if found.is_empty() {
            anyhow::bail!(
                "{} names no kuberaft replicas (no `kuberaft` cluster extensions); pass --endpoints",
                path.display()
            );
        }
        for r in found {
            targets.insert(r.peer_addr, (r.node_id, String::new()));
        }
    } else {
        for e in &args.endpoints {
            targets.insert(e.clone(), (0, String::new()));
        }
    }
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut pending: Vec<String> = targets.keys().cloned().collect();
    while let Some(addr) = pending.pop() {
        if rows.contains_key(&addr) {
            continue;
        }
        let (id, api) = targets.get(&addr).cloned().unwrap_or_default();
        let row = match ask(&addr, args.hash, tls.as_ref()).await {
            Ok(s) => {
                for m in &s.members {
                    targets
                        .entry(m.peer_addr.clone())
                        .or_insert_with(|| (m.id, m.api_addr.clone()))
                        .clone_from(&(m.id, m.api_addr.clone()));
                    if !rows.contains_key(&m.peer_addr) {
                        pending.push(m.peer_addr.clone());
                    }
                }
                Row {
                    id: s.id,
                    peer_addr: addr.clone(),
                    api_addr: s.api_addr.clone(),
                    status: Some(StatusJson {
                        role: s.role,
                        term: s.term,
                        leader_id: s.leader_id,
                        revision: s.revision,
                        compacted_revision: s.compacted_revision,
                        commit_index: s.commit_index,
                        applied_index: s.applied_index,
                        log_entries: s.log_entries,
                        db_size_bytes: s.db_size_bytes,
                        state_hash: s.state_hash,
                        hash_revision: s.hash_revision,
                    }),
                    error: None,
                }
            }
            Err(e) => Row {
                id,
                peer_addr: addr.clone(),
                api_addr: api,
                status: None,
                error: Some(e),
            },
        };
        rows.insert(addr, row);
    }
    // Rows of members first found unreachable may have learned their id/api address later.
    let mut out: Vec<Row> = rows
        .into_values()
        .map(|mut r| {
            if r.status.is_none() {
                if let Some((id, api)) = targets.get(&r.peer_addr) {
                    r.id = *id;
                    r.api_addr.clone_from(api);
                }
            }
            r
        })
        .collect();
    out.sort_by_key(|r| r.id);
    Ok(out)
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Renders rows as an aligned table.
pub fn table(rows: &[Row], hash: bool) -> String {
    let mut lines = vec![{
        let mut h = vec![
            "ID",
            "API ADDRESS",
            "PEER ADDRESS",
            "ROLE",
            "TERM",
            "REVISION",
            "COMPACTED",
            "COMMIT INDEX",
            "APPLIED INDEX",
            "LOG ENTRIES",
            "DB SIZE",
        ];
        if hash {
            h.push("STATE HASH");
        }
        h.into_iter().map(String::from).collect::<Vec<_>>()
    }];
    for r in rows {
        let mut cells = vec![r.id.to_string(), r.api_addr.clone(), r.peer_addr.clone()];
        match &r.status {
            Some(s) => {
                cells.extend([
                    s.role.clone(),
                    s.term.to_string(),
                    s.revision.to_string(),
                    s.compacted_revision.to_string(),
                    s.commit_index.to_string(),
                    s.applied_index.to_string(),
                    s.log_entries.to_string(),
                    human_bytes(s.db_size_bytes),
                ]);
                if hash {
                    cells.push(format!(
                        "{}@{}",
                        &s.state_hash[..s.state_hash.len().min(16)],
                        s.hash_revision
                    ));
                }
            }
            None => cells.push(r.error.clone().unwrap_or_else(|| "unreachable".into())),
        }
        lines.push(cells);
    }
    let cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .filter_map(|l| l.get(c))
                .map(String::len)
                .max()
                .unwrap_or(0)
        })
        .collect();
    lines
        .iter()
        .map(|l| {
            l.iter()
                .enumerate()
                .map(|(i, c)| {
                    if i + 1 == l.len() {
                        c.clone()
                    } else {
                        format!("{c:<w$}", w = widths[i])
                    }
                })
                .collect::<Vec<_>>()
                .join("   ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `endpoint status`; fails only when no member answered.
pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let rows = collect(&args).await?;
    match args.output {
        Format::Table => println!("{}", table(&rows, args.hash)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
    }
    if rows.iter().all(|r| r.status.is_none()) {
        anyhow::bail!("no member answered");
    }
    Ok(())
}
