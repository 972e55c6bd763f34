//! `ataman`: one binary for a node, a local cluster, the benchmarks and a client.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

use ataman::{cluster_cmd, crash_writer, ctl, harness};

#[derive(Parser)]
#[command(
    name = "ataman",
    version,
    about = "A persistent, sharded, replicated key-value database"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node.
    Serve(ataman_node::ServeArgs),
    /// Talk to a node over HTTP: get, put, delete, range, status (docs/CTL.md).
    Ctl(ctl::CtlArgs),
    /// Run a local cluster, or show a cluster's state (docs/CLUSTER.md).
    Cluster(cluster_cmd::ClusterArgs),
    /// Run a local cluster under seeded faults and check that nothing
    /// acknowledged was lost (docs/RELIABILITY.md).
    TestCluster(harness::TestClusterArgs),
    /// Benchmarks: the storage engine, recovery, HTTP load and plots.
    Bench {
        #[command(subcommand)]
        which: ataman_bench::BenchCommand,
    },
    /// Helpers for the test suite (not a stable interface).
    #[command(hide = true)]
    Internal {
        #[command(subcommand)]
        which: Internal,
    },
}

#[derive(Subcommand)]
enum Internal {
    /// Write durably and print acknowledgements until killed (crash tests).
    CrashWriter(crash_writer::CrashWriterArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        // ctl has its own exit codes (docs/CTL.md).
        Command::Ctl(args) => return ctl::run(args),
        // So has cluster (docs/CLUSTER.md).
        Command::Cluster(args) => return cluster_cmd::run(args),
        // So has test-cluster (docs/RELIABILITY.md).
        Command::TestCluster(args) => return harness::run_command(&args),
        Command::Serve(args) => ataman_node::serve(args),
        Command::Bench { which } => ataman_bench::run(which),
        Command::Internal {
            which: Internal::CrashWriter(args),
        } => crash_writer::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ataman: {e}");
            ExitCode::FAILURE
        }
    }
}
