//! `ataman`: one binary for a node, a local cluster, the benchmarks and a client.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

use ataman::{backup_cmd, cert_cmd, cluster_cmd, crash_writer, ctl, harness, healthcheck, logging};

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
    Serve(Box<ataman_node::ServeArgs>),
    /// Talk to a node over HTTP: get, put, delete, range, status (docs/CTL.md).
    Ctl(ctl::CtlArgs),
    /// Node checkpoints: create, verify, list, delete (docs/BACKUP.md).
    Backup(backup_cmd::BackupArgs),
    /// Run a local cluster, or show a cluster's state (docs/CLUSTER.md).
    Cluster(cluster_cmd::ClusterArgs),
    /// Run a local cluster under seeded faults and check that nothing
    /// acknowledged was lost (docs/RELIABILITY.md).
    TestCluster(harness::TestClusterArgs),
    /// Probe a node's /livez (or /readyz with --ready): exit 0 on 200 (for images without a shell).
    Healthcheck(healthcheck::HealthcheckArgs),
    /// Make a test CA and node certificates for a TLS cluster (docs/SECURITY.md, "TLS").
    Cert(cert_cmd::CertArgs),
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
    // A node's options choose its log; the other commands log (the
    // supervisors' events) as text at info.
    if !matches!(cli.command, Command::Serve(_) | Command::Healthcheck(_)) {
        logging::init(tracing::Level::INFO, logging::LogFormat::Text);
    }
    let result = match cli.command {
        // ctl has its own exit codes (docs/CTL.md).
        Command::Ctl(args) => return ctl::run(args),
        // So has backup (docs/BACKUP.md).
        Command::Backup(args) => return backup_cmd::run(args),
        // So has cluster (docs/CLUSTER.md).
        Command::Cluster(args) => return cluster_cmd::run(args),
        // So has test-cluster (docs/RELIABILITY.md).
        Command::TestCluster(args) => return harness::run_command(&args),
        Command::Serve(args) => return serve(*args),
        // So has healthcheck (docs/API.md, "Health").
        Command::Healthcheck(args) => return healthcheck::run(&args),
        Command::Bench { which } => ataman_bench::run(which),
        Command::Cert(args) => cert_cmd::run(&args).map_err(Into::into),
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

/// `ataman serve`: the log as its options say, then the node; a failure
/// to start or a failed stop is the log's last event.
fn serve(args: ataman_node::ServeArgs) -> ExitCode {
    let config = match ataman_node::NodeConfig::resolve(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("ataman: {e}");
            return ExitCode::FAILURE;
        }
    };
    logging::init(config.log_level, config.log_format);
    match ataman_node::serve(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
