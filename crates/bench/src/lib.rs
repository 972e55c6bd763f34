//! # ataman-bench
//!
//! Benchmarks shipped in the binary, so every figure in `docs/BENCHMARKS.md`
//! is reproducible with one command. (being written)

/// `ataman bench …` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Storage engine write (and read) benchmark.
    Engine,
}

/// Runs a benchmark.
pub fn run(cmd: BenchCommand) -> Result<(), Box<dyn std::error::Error>> {
    let _ = cmd;
    Err("not yet".into())
}
