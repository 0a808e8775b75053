//! `kuberaft member list | add | promote | remove`: the cluster's membership, like
//! `etcdctl member ...`. Each command asks the first replica that answers (found as
//! `endpoint status` finds them); the replica hands it to the leader, which refuses what would
//! hurt the cluster and says why.

use anyhow::bail;
use kuberaft_proto::member_request::Op;
use kuberaft_proto::{MemberRequest, MembersResponse};

use crate::cli::admin::AdminArgs;
use crate::cli::endpoint_status::Format;

/// `kuberaft member ...`.
#[derive(Debug, clap::Subcommand)]
pub enum MemberCmd {
    /// List the members: voters and learners, and how far each has the leader's log.
    List(ListArgs),
    /// Add a new member as a learner (then start it with `kuberaft serve --join`).
    Add(AddArgs),
    /// Make a learner that has caught up a voter.
    Promote(IdArgs),
    /// Remove a member (voter or learner); it stops serving.
    Remove(IdArgs),
}

/// Options of `member list`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Where the cluster is and who to speak as.
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "table")]
    pub output: Format,
}

/// Options of `member add`.
#[derive(Debug, Clone, clap::Args)]
pub struct AddArgs {
    /// The new member's node id (never one a removed member had).
    #[arg(long)]
    pub id: u64,
    /// Its peer address, host:port.
    #[arg(long)]
    pub peer_addr: String,
    /// Its Kubernetes API address, host:port.
    #[arg(long)]
    pub api_addr: String,
    /// Where the cluster is and who to speak as.
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// Options of `move-leader`.
#[derive(Debug, Clone, clap::Args)]
pub struct MoveLeaderArgs {
    /// The voter to hand leadership to (default: the one with the most of the log).
    #[arg(long)]
    pub to: Option<u64>,
    /// Where the cluster is and who to speak as.
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// `kuberaft move-leader`: hands leadership to another voter and says who leads now.
pub async fn move_leader(args: MoveLeaderArgs) -> anyhow::Result<()> {
    let before = ask(&args.admin, MemberRequest::default()).await?.leader_id;
    let started = std::time::Instant::now();
    let req = MemberRequest {
        op: Op::MoveLeader as i32,
        id: args.to.unwrap_or(0),
        ..Default::default()
    };
    let after = ask(&args.admin, req).await?.leader_id;
    println!(
        "leadership moved from node {before} to node {after} in {} ms",
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Options of `member promote` and `member remove`.
#[derive(Debug, Clone, clap::Args)]
pub struct IdArgs {
    /// The member's node id.
    pub id: u64,
    /// Where the cluster is and who to speak as.
    #[command(flatten)]
    pub admin: AdminArgs,
}

/// Runs a `member` subcommand.
pub async fn run(cmd: MemberCmd) -> anyhow::Result<()> {
    let (admin, req) = match cmd {
        MemberCmd::List(args) => {
            let members = ask(&args.admin, MemberRequest::default()).await?;
            match args.output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&json(&members))?),
                Format::Table => println!("{}", table(&members)),
            }
            return Ok(());
        }
        MemberCmd::Add(a) => (
            a.admin,
            MemberRequest {
                op: Op::AddLearner as i32,
                id: a.id,
                peer_addr: a.peer_addr,
                api_addr: a.api_addr,
            },
        ),
        MemberCmd::Promote(a) => (
            a.admin,
            MemberRequest {
                op: Op::Promote as i32,
                id: a.id,
                ..Default::default()
            },
        ),
        MemberCmd::Remove(a) => (
            a.admin,
            MemberRequest {
                op: Op::Remove as i32,
                id: a.id,
                ..Default::default()
            },
        ),
    };
    let (op, id) = (req.op, req.id);
    let members = ask(&admin, req).await?;
    let done = match Op::try_from(op) {
        Ok(Op::AddLearner) => format!(
            "node {id} added as a learner; start it with `kuberaft serve --config CONFIG --join https://PEER-ADDRESS` \
             (any replica), then promote it once it caught up"
        ),
        Ok(Op::Promote) => format!("node {id} promoted to voter"),
        _ => format!("node {id} removed"),
    };
    println!("{done}");
    println!("{}", table(&members));
    Ok(())
}

/// Sends `req` to the first replica that answers; a refusal is the answer.
async fn ask(args: &AdminArgs, req: MemberRequest) -> anyhow::Result<MembersResponse> {
    let admin = args.resolve()?;
    let mut failures = Vec::new();
    for target in &admin.targets {
        let mut client = match admin
            .connect(&target.peer_addr, Some(std::time::Duration::from_secs(30)))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{}: {e}", target.peer_addr));
                continue;
            }
        };
        match client.members(req.clone()).await {
            Ok(r) => return Ok(r.into_inner()),
            Err(s) if s.code() == tonic::Code::Unavailable || s.code() == tonic::Code::DeadlineExceeded => {
                failures.push(format!("{}: {}", target.peer_addr, s.message()));
            }
            Err(s) => bail!("{}", s.message()),
        }
    }
    bail!("no replica answered: {}", failures.join("; "))
}

fn role(m: &kuberaft_proto::MemberInfo, leader: u64) -> &'static str {
    match (m.id == leader, m.voter) {
        (true, _) => "leader",
        (false, true) => "voter",
        (false, false) => "learner",
    }
}

fn lag(m: &kuberaft_proto::MemberInfo, last: u64) -> String {
    if m.has_matched {
        last.saturating_sub(m.matched_index).to_string()
    } else {
        "unknown".into()
    }
}

fn json(r: &MembersResponse) -> serde_json::Value {
    serde_json::Value::Array(
        r.members
            .iter()
            .map(|m| {
                serde_json::json!({
                    "id": m.id,
                    "role": role(m, r.leader_id),
                    "peerAddr": m.peer_addr,
                    "apiAddr": m.api_addr,
                    "matchedIndex": m.has_matched.then_some(m.matched_index),
                    "lag": m.has_matched.then(|| r.last_log_index.saturating_sub(m.matched_index)),
                })
            })
            .collect(),
    )
}

/// The member table: one row per member with its role and how far it is behind the leader.
pub fn table(r: &MembersResponse) -> String {
    let mut rows = vec![[
        "ID",
        "ROLE",
        "PEER ADDRESS",
        "API ADDRESS",
        "MATCHED INDEX",
        "LAG",
    ]
    .map(String::from)];
    for m in &r.members {
        rows.push([
            m.id.to_string(),
            role(m, r.leader_id).into(),
            m.peer_addr.clone(),
            m.api_addr.clone(),
            if m.has_matched {
                m.matched_index.to_string()
            } else {
                "-".into()
            },
            lag(m, r.last_log_index),
        ]);
    }
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    crate::cli::columns::align(&rows)
}
