//! The `kuberaft` binary: parses the command line and runs the library's command.
//!
//! Subcommands: `serve` (one replica), `cluster up` (a local cluster of replicas), `certs`
//! (the PKI step by step), `endpoint status` (one row per member), `member` (membership
//! changes), `move-leader` and `snapshot` (backup and restore).

use kuberaft::cli::{certs, cluster_up, endpoint_status, member, snapshot};
use kuberaft::server::{self, observability};

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kuberaft",
    version,
    about = "A Kubernetes API server that is its own replicated database"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one replica.
    Serve {
        /// The replica's config file.
        #[arg(long)]
        config: PathBuf,
        /// Alpha features to turn on or off over the config file's `featureGates`, as
        /// `Name=true,...` (e.g. `AllowUnsafeMalformedObjectDeletion=true`).
        #[arg(long)]
        feature_gates: Option<String>,
        /// Serve plain HTTP without authentication or authorization, and talk to peers in
        /// plaintext: development only (a warning is printed).
        #[arg(long)]
        insecure: bool,
        /// Join a running cluster through one of its replicas (its peer address,
        /// `https://HOST:PORT`) as a learner, with an empty data dir; promote it with
        /// `kuberaft member promote` once it caught up.
        #[arg(long, value_name = "URL")]
        join: Option<String>,
    },
    /// Manage a local cluster.
    Cluster {
        #[command(subcommand)]
        command: ClusterCmd,
    },
    /// Make and check the cluster's CA, replica and user certificates and kubeconfigs.
    Certs {
        #[command(subcommand)]
        command: certs::CertsCmd,
    },
    /// Inspect the members of a cluster.
    Endpoint {
        #[command(subcommand)]
        command: EndpointCmd,
    },
    /// List, add, promote and remove the cluster's members.
    Member {
        #[command(subcommand)]
        command: member::MemberCmd,
    },
    /// Hand leadership to another voter (without an election timeout).
    MoveLeader(member::MoveLeaderArgs),
    /// Back up a running cluster, inspect a backup, make a new cluster from one.
    Snapshot {
        #[command(subcommand)]
        command: snapshot::SnapshotCmd,
    },
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Start a local cluster on loopback and stop it on Ctrl-C.
    Up(cluster_up::UpArgs),
}

#[derive(Subcommand)]
enum EndpointCmd {
    /// One row per member: role, term, revision, indexes, log and database size.
    Status(endpoint_status::StatusArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    observability::init_logging();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Cmd::Serve {
                config,
                feature_gates,
                insecure,
                join,
            } => server::run(&config, feature_gates.as_deref(), insecure, join.as_deref()).await,
            Cmd::Cluster {
                command: ClusterCmd::Up(args),
            } => cluster_up::up(args).await,
            Cmd::Certs { command } => certs::run(command),
            Cmd::Endpoint {
                command: EndpointCmd::Status(args),
            } => endpoint_status::run(args).await,
            Cmd::Member { command } => member::run(command).await,
            Cmd::MoveLeader(args) => member::move_leader(args).await,
            Cmd::Snapshot { command } => snapshot::run(command).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
