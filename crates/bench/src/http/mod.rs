//! `ataman bench http`: a constant-rate HTTP load generator with wrk2's
//! semantics, for ataman's `/v0/entity` API or any HTTP server.
//!
//! ## Layout
//! - `run`: one run, from the options to the report ([`run()`], [`main`]).
//! - [`args`]: the options and their spellings.
//! - [`target`]: the URLs, resolved once.
//! - [`workload`] and [`zipf`]: which requests, written into reused buffers.
//! - [`schedule`]: when each connection's k-th request is due.
//! - [`client`]: one thread's `mio` event loop over many connections;
//!   [`response`] frames answers; [`timer`] wakes it on time, at the
//!   moment [`wake`] chooses (the send slack).
//! - [`stats`]: what threads count; [`phase`]: threads, progress line;
//!   [`report`]: the JSON contract and the wrk2-shaped text.
//!
//! ## Semantics
//! Each connection has one request in flight, as wrk2. With `--rate R`
//! over C connections the k-th request of a connection is due at a fixed
//! planned time (see [`schedule`]); latency is taken from that time
//! (corrected) and from the actual send (uncorrected). `--rate 0` is a
//! closed loop. After `--duration` no new request is sent; requests
//! planned before the end are still sent and awaited up to `--timeout`
//! (the drain), so a stall at the end is not hidden either. Achieved rate
//! is responses / (start of measuring .. last response).
//!
//! `--url` may list several targets (the nodes of a cluster), separated by
//! commas: connection `i` talks to target `i % targets` in both the fill
//! and the measured run, and the report counts each target's share.
//!
//! ## Cost
//! The whole bench process's CPU time (getrusage) over the run, divided by
//! the requests, is reported as `generator.cpu_us_per_request`.

pub mod args;
pub mod client;
pub mod phase;
pub mod plot;
pub mod report;
pub mod response;
mod run;
pub mod schedule;
pub mod stats;
pub mod target;
pub mod timer;
pub mod wake;
pub mod workload;
pub mod zipf;

pub use args::HttpArgs;
pub use report::HttpReport;

pub use run::{CONNECTIONS_MAX, RATE_MAX, THREADS_MAX, main, run};
