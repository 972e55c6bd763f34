//! ataman's test kit, shared by every crate of the workspace.
//!
//! It has no dependencies, so the engine, the node, the simulation and
//! the binary can all depend on it, in tests and in code that runs
//! seeded (the simulated file system's crash images, the fault harness,
//! the deterministic simulation).
//!
//! - [`rng`]: the one seeded generator; its stream is pinned by a test,
//!   so a seed replays the same run on every machine and every version.
//! - [`linearizable`]: the linearizability checker (Wing & Gong with
//!   memoization) and a register model.
//! - [`lock`]: locking a mutex while ignoring poisoning.
//!
//! The real-process node launcher is not here: it needs the HTTP client
//! and lives with it in the `ataman` crate (`ataman::launcher`).

pub mod linearizable;
pub mod lock;
pub mod rng;
