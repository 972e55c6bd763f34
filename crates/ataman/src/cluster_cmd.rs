//! `ataman cluster`: run a local cluster in the foreground, or show a
//! running cluster's state (documented in docs/CLUSTER.md).
//!
//! Layout: [`start`] spawns and supervises the `ataman serve` children
//! (and those [`grow`]'s `add` asks for, through [`local_members`]),
//! [`status`] samples `GET /v0/cluster` of every node and prints the
//! table, [`view`] parses that JSON leniently.
//!
//! Exit codes: `start` exits 0 after a stop by SIGINT or SIGTERM and 1 when
//! it cannot start (or every node died); `status` exits [`EXIT_OK`] when
//! every node answered and [`EXIT_NO_ANSWER`] otherwise (2 on bad usage).

pub mod grow;
pub mod local_members;
pub mod start;
pub mod status;
pub mod view;

use crate::ctl::{EXIT_NO_ANSWER, EXIT_OK};
use std::process::ExitCode;

/// `ataman cluster` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// A file whose first token is sent as `Authorization: Bearer` (default: the `ATAMAN_TOKEN` variable).
    #[arg(long, global = true, env = "ATAMAN_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// One `ataman cluster` command.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ClusterCommand {
    /// Start N nodes on consecutive local ports and run until SIGINT or SIGTERM.
    Start(start::StartArgs),
    /// Show every node's view of the cluster and its request rates.
    Status(status::StatusArgs),
    /// Add a node to the local cluster `cluster start` runs in --dir.
    Add(grow::AddArgs),
    /// Remove node --node from the local cluster `cluster start` runs in --dir.
    Remove(grow::RemoveArgs),
}

/// Runs one `ataman cluster` command and returns the process exit code.
pub fn run(args: ClusterArgs) -> ExitCode {
    if let Err(e) = crate::http_client::token::init(args.token_file.as_deref()) {
        eprintln!("ataman: {e}");
        return ExitCode::from(crate::ctl::EXIT_REFUSED);
    }
    match args.command {
        ClusterCommand::Start(args) => match start::run(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ataman cluster start: {e}");
                ExitCode::FAILURE
            }
        },
        ClusterCommand::Add(args) => grown(grow::add(&args), "add"),
        ClusterCommand::Remove(args) => grown(grow::remove(&args), "remove"),
        ClusterCommand::Status(args) => match status::run(&args) {
            Ok(true) => ExitCode::from(EXIT_OK),
            Ok(false) => ExitCode::from(EXIT_NO_ANSWER),
            Err(e) => {
                eprintln!("ataman cluster status: {e}");
                ExitCode::from(e.exit_code())
            }
        },
    }
}

/// The exit of `cluster add|remove`: 0, or the error on stderr and 1.
fn grown(result: Result<(), grow::GrowError>, what: &str) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ataman cluster {what}: {e}");
            ExitCode::FAILURE
        }
    }
}
