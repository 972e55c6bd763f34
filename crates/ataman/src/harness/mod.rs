//! The fault-injection test harness: real nodes, seeded faults, seeded
//! workloads, a history of everything, and a checker that proves nothing
//! acknowledged was lost (`ataman test-cluster`, docs/RELIABILITY.md).
//!
//! # Layout
//! - [`cluster`]: the `ataman serve` processes, a fault proxy on every
//!   directed link, process control (kill -9, pause, restart, wipe, stop).
//! - [`faults`]: fault kinds, the seeded schedule, injecting and healing;
//!   [`crash`]: the `crash` fault (every member killed at once).
//! - [`workload`]: seeded client threads (register, set, deletes) and the
//!   final reads; [`client`] is their keep-alive HTTP client; [`graves`]:
//!   the keys the deletes workload leaves dead, so runs collect them.
//! - [`cas`]: the `cas` workload (RESP, through the consensus register)
//!   and its linearizability and counter checks.
//! - [`collected`]: what the nodes' compactions collected during the run.
//! - [`history`]: every operation and fault, as JSON lines.
//! - [`converge`]: anti-entropy rounds and reading every replica's own copy.
//! - [`checker`]: the pure checks over a history ([`checker::versions`]:
//!   the exact rules, by the versions the answers name).
//! - [`report`]: the figures, printed and as JSON.
//! - [`command`]: `ataman test-cluster`'s options and exit codes.
//! - [`config`]: what a run needs; [`error`]: why a run could not be
//!   carried out.
//! - [`run`](mod@run): one run, start to report.
//!
//! Everything random comes from the test kit's seeded generator
//! (`ataman_testkit::rng`).
//!
//! # A run
//! Start the cluster; run the clients and the fault schedule for the
//! duration; stop the clients; heal everything; converge; read every key;
//! stop the nodes (each must exit 0); check the history; report.
//!
//! Same seed, same faults and same operations: the schedule and each
//! client's operations are functions of the seed alone. Timing is not
//! replayed (threads, processes and the network run in real time), so two
//! runs of a seed interleave differently and may find different things.

pub mod cas;
pub mod checker;
pub mod client;
pub mod cluster;
pub mod collected;
pub mod command;
pub mod config;
pub mod converge;
pub mod crash;
pub mod error;
pub mod faults;
pub mod graves;
pub mod history;
pub mod membership;
pub mod report;
pub mod run;
pub mod workload;

pub use command::{EXIT_HARNESS_ERROR, EXIT_VIOLATIONS, TestClusterArgs, run_command};
pub use config::Config;
pub use error::HarnessError;
pub use run::{CLIENT_JOIN_TIMEOUT, INTERRUPTED, REQUEST_MARGIN_MS, interrupted, run};
