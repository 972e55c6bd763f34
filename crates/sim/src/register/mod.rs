//! The consensus register's model checker: a deterministic randomized
//! simulation of acceptors and concurrent proposers running the node's own
//! register rules (`ataman_node::replication::register`), every run judged
//! by the linearizability checker (`ataman_testkit::linearizable`).
//!
//! - [`config`]: what a run does besides its seed; the planted bugs.
//! - [`run`]: one run: the events, the network's faults, the history.

pub mod config;
pub mod run;

pub use config::{RegisterBug, RegisterSimConfig};
pub use run::{RegisterRun, run_register};
