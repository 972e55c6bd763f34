//! # ataman-sim
//!
//! A deterministic simulation of ataman's replication layer. Simulated
//! nodes, each with its own engine ([`ataman_engine::Db`]) on its own
//! simulated disk ([`ataman_engine::fs::sim::SimFs`]), coordinate client
//! requests with the node's own replication driver
//! ([`ataman_node::replication::driver::Replicator`], with the rules of
//! [`ataman_node::replication::coordinator`]), placement and the hybrid
//! logical clock, over a simulated network, on a virtual
//! clock. Crashes (power loss and kill -9 images of the disks), partitions,
//! one-way cuts, message loss, clock skew, disk faults and dropped hints
//! are injected at times a seeded random number generator picks, and an
//! independent checker judges the record of the run: no acknowledged write
//! lost, read-your-writes when quorums intersect, every replica equal once
//! the faults heal and the repairs ran. The seed alone decides the run, so
//! every failure is replayed by its seed (`cargo run -p ataman-sim
//! --release -- --seeds SEED ...`, printed with each failure).
//!
//! What it does not cover: the sockets and event loops (`mio`, the peer
//! link's framing, back-off and black-hole detection); the real-process
//! cluster tests cover those.
//!
//! ## Layout
//! - [`world`]: the virtual clock, the event queue, the seeded RNG.
//! - [`network`]: messages between nodes, delays, loss, cuts.
//! - [`node`]: a node's process: engine, disk, clock, crash and restart.
//! - [`replica`]: a node serving its peers' reads and writes.
//! - [`hint_store`]: the hints a node keeps (their delivery is the
//!   driver's).
//! - [`antientropy`]: anti-entropy rounds between two nodes.
//! - [`collection`]: the short tombstone grace and the repair-based
//!   horizon that decides collection.
//! - [`client`]: the workloads.
//! - [`register`]: the consensus register's model checker (its own
//!   acceptors and proposers on the register rules, checked for
//!   linearizability).
//! - [`faults`]: which faults, when, for how long.
//! - [`history`]: the record of a run.
//! - [`check`]: the checker.
//! - [`sim`]: the driver of one run (phases; `traffic`: requests and
//!   messages; `disruption`: faults, restarts, maintenance).
//! - [`config`]: what a run does besides its seed.

pub mod antientropy;
pub mod check;
pub mod client;
pub mod collection;
pub mod config;
pub mod faults;
pub mod hint_store;
pub mod history;
pub mod network;
pub mod node;
pub mod register;
pub mod replica;
pub mod sim;
pub mod world;

pub use check::{Report, ViolationKind};
pub use config::{CrashKind, FaultMix, PlantedBug, SimConfig};
pub use sim::{RunResult, RunStats, run};

use ataman_engine::WalMode;

/// The name of a WAL mode on the command line.
pub fn wal_mode_name(mode: WalMode) -> &'static str {
    match mode {
        WalMode::Fsync => "fsync",
        WalMode::Write => "write",
        WalMode::None => "none",
    }
}

/// The command that replays `seed` with `config`.
pub fn replay_command(seed: u64, config: &SimConfig) -> String {
    let mut cmd = format!(
        "cargo run -p ataman-sim --release -- --seeds {seed} --nodes {} --replicas {} --steps {} --clients {} --wal-mode {} --faults {}",
        config.nodes,
        config.replicas,
        config.steps,
        config.clients,
        wal_mode_name(config.wal_mode),
        config.faults.name(),
    );
    if !config.final_power_cut {
        cmd.push_str(" --no-final-power-cut");
    }
    if !config.anti_entropy_during_run {
        cmd.push_str(" --no-anti-entropy-during-run");
    }
    if config.grow {
        cmd.push_str(" --grow");
    }
    if config.shrink > 0 {
        cmd.push_str(&format!(" --shrink {}", config.shrink));
    }
    if let Some(bug) = config.planted_bug {
        cmd.push_str(" --planted-bug ");
        cmd.push_str(bug.name());
    }
    cmd
}
