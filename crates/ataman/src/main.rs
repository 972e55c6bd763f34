//! `ataman`: one binary for a node, a local cluster, the benchmarks and a client.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

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
    /// Benchmarks: the storage engine, recovery.
    Bench {
        #[command(subcommand)]
        which: ataman_bench::BenchCommand,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => ataman_node::serve(args),
        Command::Bench { which } => ataman_bench::run(which),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ataman: {e}");
            ExitCode::FAILURE
        }
    }
}
