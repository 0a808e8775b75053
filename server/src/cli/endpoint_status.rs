//! `kuberaft endpoint status`: one row per member, like `etcdctl endpoint status`.
//!
//! Asks every replica it knows of (from the kubeconfig's kuberaft extensions or
//! `--endpoints`) and every member those replicas report, so a member that is down still gets
//! a row that says so.

use std::collections::BTreeMap;
use std::time::Duration;

use kuberaft_proto::{CertificateExpiry, StatusRequest, StatusResponse};
use time::OffsetDateTime;

use crate::cli::admin::{Admin, AdminArgs};
use crate::cli::certs::RENEW_WITHIN_DAYS;
use crate::machinery::timestamp;

/// Options of `endpoint status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// Where the cluster is and who to speak as.
    #[command(flatten)]
    pub admin: AdminArgs,
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
    /// Log entries this member has still to apply, against the highest commit index any
    /// member reported (a learner catching up, a follower behind).
    lag: u64,
    log_entries: u64,
    db_size_bytes: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    state_hash: String,
    #[serde(skip_serializing_if = "is_zero")]
    hash_revision: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    certificates: Vec<CertificateJson>,
}

/// A certificate a replica serves with and when it expires.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CertificateJson {
    name: String,
    /// RFC 3339.
    not_after: String,
    days_left: i64,
}

impl CertificateJson {
    fn new(c: &CertificateExpiry, now: OffsetDateTime) -> CertificateJson {
        let at = OffsetDateTime::from_unix_timestamp(c.not_after).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        CertificateJson {
            name: c.name.clone(),
            not_after: timestamp::format_time(at),
            days_left: (at - now).whole_days(),
        }
    }

    fn due(&self) -> bool {
        self.days_left <= RENEW_WITHIN_DAYS
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

async fn ask(admin: &Admin, addr: &str, hash: bool) -> Result<StatusResponse, String> {
    let mut client = admin
        .connect(addr, Some(Duration::from_secs(if hash { 30 } else { 3 })))
        .await?;
    client
        .status(StatusRequest { with_hash: hash })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| format!("unreachable: {}", s.message()))
}

/// Collects every member's row.
pub async fn collect(args: &StatusArgs) -> anyhow::Result<Vec<Row>> {
    let admin = args.admin.resolve()?;
    let mut targets: BTreeMap<String, (u64, String)> = admin
        .targets
        .iter()
        .map(|t| (t.peer_addr.clone(), (t.node_id, String::new())))
        .collect();
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut pending: Vec<String> = targets.keys().cloned().collect();
    while let Some(addr) = pending.pop() {
        if rows.contains_key(&addr) {
            continue;
        }
        let (id, api) = targets.get(&addr).cloned().unwrap_or_default();
        let row = match ask(&admin, &addr, args.hash).await {
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
                        lag: 0,
                        log_entries: s.log_entries,
                        db_size_bytes: s.db_size_bytes,
                        state_hash: s.state_hash,
                        hash_revision: s.hash_revision,
                        certificates: s
                            .certificates
                            .iter()
                            .map(|c| CertificateJson::new(c, OffsetDateTime::now_utc()))
                            .collect(),
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
    let committed = out
        .iter()
        .filter_map(|r| r.status.as_ref().map(|s| s.commit_index))
        .max()
        .unwrap_or(0);
    for s in out.iter_mut().filter_map(|r| r.status.as_mut()) {
        s.lag = committed.saturating_sub(s.applied_index);
    }
    Ok(out)
}

pub(crate) fn human_bytes(n: u64) -> String {
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

/// The earliest expiry of a replica's certificates, in days, flagged when due for renewal.
fn first_expiry(certs: &[CertificateJson]) -> String {
    match certs.iter().min_by_key(|c| c.days_left) {
        None => "-".into(),
        Some(c) if c.due() => format!("{} in {}d RENEW", c.name, c.days_left),
        Some(c) => format!("{} in {}d", c.name, c.days_left),
    }
}

/// One line per certificate due for renewal (expiring within [`RENEW_WITHIN_DAYS`] days),
/// saying how to renew it.
pub fn renewal_warnings(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rows {
        for c in r.status.iter().flat_map(|s| &s.certificates).filter(|c| c.due()) {
            let how = match c.name.as_str() {
                "ca" => "make a new CA and reissue every certificate".to_string(),
                _ => format!(
                    "`kuberaft certs replica --name node-{} --host ... --renew`, then restart it",
                    r.id
                ),
            };
            out.push(format!(
                "warning: member {}'s {} certificate expires {} ({} days): renew it with {how}",
                r.id, c.name, c.not_after, c.days_left
            ));
        }
    }
    out
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
            "LAG",
            "LOG ENTRIES",
            "DB SIZE",
            "CERTIFICATES EXPIRE",
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
                    s.lag.to_string(),
                    s.log_entries.to_string(),
                    human_bytes(s.db_size_bytes),
                    first_expiry(&s.certificates),
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
    crate::cli::columns::align(&lines)
}

/// Runs `endpoint status`; fails only when no member answered.
pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let rows = collect(&args).await?;
    match args.output {
        Format::Table => println!("{}", table(&rows, args.hash)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
    }
    for w in renewal_warnings(&rows) {
        eprintln!("{w}");
    }
    if rows.iter().all(|r| r.status.is_none()) {
        anyhow::bail!("no member answered");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u64, certs: &[(&str, i64)], now: OffsetDateTime) -> Row {
        Row {
            id,
            peer_addr: format!("10.0.0.{id}:7443"),
            api_addr: format!("10.0.0.{id}:6443"),
            status: Some(StatusJson {
                role: "follower".into(),
                term: 2,
                leader_id: 1,
                revision: 10,
                compacted_revision: 0,
                commit_index: 12,
                applied_index: 12,
                lag: 0,
                log_entries: 12,
                db_size_bytes: 4096,
                state_hash: String::new(),
                hash_revision: 0,
                certificates: certs
                    .iter()
                    .map(|(name, days)| {
                        let c = CertificateExpiry {
                            name: (*name).into(),
                            not_after: (now + time::Duration::days(*days) + time::Duration::hours(1))
                                .unix_timestamp(),
                        };
                        CertificateJson::new(&c, now)
                    })
                    .collect(),
            }),
            error: None,
        }
    }

    #[test]
    fn certificates_within_thirty_days_are_flagged_with_how_to_renew_them() {
        let now = OffsetDateTime::now_utc();
        let rows = [
            row(1, &[("ca", 3650), ("api", 300), ("peer", 300)], now),
            row(2, &[("ca", 3650), ("api", 12), ("peer", 300)], now),
        ];
        let table = table(&rows, false);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].ends_with("api in 300d"), "{table}");
        assert!(lines[2].ends_with("api in 12d RENEW"), "{table}");
        let warnings = renewal_warnings(&rows);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("warning: member 2's api certificate expires ")
                && warnings[0].contains("(12 days)")
                && warnings[0].contains("kuberaft certs replica --name node-2"),
            "{}",
            warnings[0]
        );
    }
}
