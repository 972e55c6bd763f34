//! Hot keys: which keys take the most of this node's (and the cluster's)
//! client requests now, estimated with a bound (docs/API.md "Hot keys").
//!
//! - [`space_saving`]: the pure summary with a fixed number of counters,
//!   its error bound and its merge.
//! - [`sampler`]: 1 request in N sampled per network thread into a
//!   summary per window; a report merges them.
//! - [`report`]: the JSON report (`GET /v0/hotkeys`), its parse (a
//!   peer's, for the cluster view) and the cluster merge.
//! - [`zipf`]: a seeded Zipf workload for the tests and the benchmark.

pub mod report;
pub mod sampler;
pub mod space_saving;
pub mod zipf;

pub use sampler::{Gate, HotKeys};
