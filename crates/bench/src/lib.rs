//! # ataman-bench
//!
//! Benchmarks shipped in the binary, so every figure in
//! `docs/BENCHMARKS.md` and `docs/bench-log/` is reproducible with one command.
//!
//! ## Layout
//! - [`engine`]: `ataman bench engine`, the engine analog of Tarantool's
//!   `1mops_write`; [`writers`] holds its closed-loop writers and
//!   [`readrandom`] its optional read phase.
//! - [`recovery`]: `ataman bench recovery`, reopen after a crash with the
//!   WAL replay's reader thread on and off.
//! - `fjall_cmp` (feature `fjall`, on by default): `ataman bench fjall`,
//!   side by side with fjall.
//! - [`http`]: `ataman bench http`, a constant-rate HTTP load generator
//!   with wrk2's semantics; [`http::plot`]: its SVG charts and `ataman bench plot`.
//! - [`workload`]: keys, values, timestamps; [`report`]: percentiles and
//!   JSON; [`cpu`]: process CPU time; [`args`]: mode flags; [`error`].
//!
//! Benchmarks assert counts (every op asked for was acknowledged, every
//! read hit) and fail loudly otherwise; they never judge speed.

pub mod args;
pub mod cpu;
pub mod engine;
pub mod error;
#[cfg(feature = "fjall")]
pub mod fjall_cmp;
pub mod http;
pub mod readrandom;
pub mod recovery;
pub mod report;
pub mod workdir;
pub mod workload;
pub mod writers;

pub use error::{BenchError, Result};

/// `ataman bench …` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Storage engine writes: C writers committing batches of B puts (and, with --readrandom, reads).
    Engine(engine::EngineArgs),
    /// Reopen after a crash, WAL replay reader thread on and off.
    Recovery(recovery::RecoveryArgs),
    /// ataman's engine side by side with fjall (fillrandom durable, batched; readrandom).
    #[cfg(feature = "fjall")]
    Fjall(fjall_cmp::FjallArgs),
    /// Constant-rate HTTP load (wrk2 semantics) against a node or any HTTP server.
    Http(http::HttpArgs),
    /// Overlay `ataman bench http --json` reports in one SVG chart.
    Plot(http::plot::PlotArgs),
    /// (internal) the recovery benchmark's child: fill a directory and exit without closing.
    #[command(hide = true)]
    RecoveryFill(recovery::RecoveryFillArgs),
}

/// Runs a benchmark, prints its report, and writes JSON when asked.
pub fn run(cmd: BenchCommand) -> std::result::Result<(), Box<dyn std::error::Error>> {
    match cmd {
        BenchCommand::Engine(args) => {
            let report = engine::run(&args)?;
            engine::print(&report);
            if let Some(path) = &args.json {
                report::write_json(path, &report)?;
            }
        }
        BenchCommand::Recovery(args) => {
            let report = recovery::run(&args)?;
            recovery::print(&report);
            if let Some(path) = &args.json {
                recovery::write(&report, path)?;
            }
        }
        #[cfg(feature = "fjall")]
        BenchCommand::Fjall(args) => {
            let report = fjall_cmp::run(&args)?;
            fjall_cmp::print(&report);
            if let Some(path) = &args.json {
                report::write_json(path, &report)?;
            }
        }
        BenchCommand::Http(args) => http::main(&args)?,
        BenchCommand::Plot(args) => http::plot::main(&args)?,
        BenchCommand::RecoveryFill(args) => recovery::fill_child(&args)?,
    }
    Ok(())
}
