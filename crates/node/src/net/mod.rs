//! The network threads.
//!
//! Each network thread runs one `mio` event loop over its connections:
//! it reads, parses, serves reads from the engine's read view on the spot,
//! hands writes to the engine's tx thread, and writes answers. Completions
//! of writes come back through the thread's completion queue
//! ([`crate::state::Inbox`]); the engine thread that finishes a write pushes
//! it and wakes the loop only when the queue was empty (one wake-up per
//! batch, not per write).
//!
//! Thread 0 owns the listener and deals accepted connections round-robin
//! to all threads (itself included) through the same inbox.
//!
//! - `event_loop`: the loop: accept, poll, completions, timeouts, shutdown.
//! - [`conn`]: one client connection: read, parse (HTTP/1.1), flush, answer
//!   slots, upgrades.
//! - [`dispatch`]: a parsed request, whatever its protocol, to engine or
//!   coordinator work.
//! - [`answer`]: every outcome mapped to one protocol-neutral answer (pure).
//! - [`render`]: HTTP's rendering of an answer (status, headers, body).
//! - [`resp`]: the Redis protocol's decoder, command table and encoder (pure).
//! - `conn_driver` (tests and the `conn-driver` feature only): a connection
//!   driven without an event loop, for the stateful connection fuzzer.
//! - [`peer_conn`]: a connection a peer upgraded to the peer protocol.
//! - [`membership_gate`]: what a joining or removed node answers.
//! - [`fence`]: no peer request from a coordinator on an older layout version.
//! - [`body_gate`]: the body an HTTP request may send before its token is
//!   checked.
//! - [`backup_http`]: `/v0/backup`'s answers (a checkpoint taken on a job).
//! - [`backup_transfer`]: a checkpoint's files in chunks, a restore's
//!   versions applied (`/v0/backup`).
//! - [`recent`]: `/v0/recent` (the recent-figures ring, a member's or the
//!   cluster's) and the dashboard's files at `/ui`; [`peer_get`]: the one
//!   internal GET a cluster report sends each member.
//! - [`slowlog_cluster`]: `GET /v0/slowlog?cluster=1` (every member's
//!   slow log merged) and a peer's `GET /v0/internal/slowlog`.
//! - [`authorize`]: the role each command needs; [`auth_gate`]: the
//!   `Authorization` header, the 401 and 403, the peer upgrade's verdict.

pub mod answer;
pub mod auth_gate;
pub mod authorize;
pub mod backup_http;
pub mod backup_transfer;
pub mod body_gate;
pub mod conn;
#[cfg(any(test, feature = "conn-driver"))]
pub mod conn_driver;
#[cfg(test)]
mod conn_driver_tests;
pub mod dispatch;
mod event_loop;
pub mod fence;
pub mod health;
pub mod hotkeys;
pub mod membership_gate;
pub mod peer_conn;
pub mod peer_get;
pub mod recent;
pub mod register_acceptor;
pub mod register_rmw;
pub mod render;
pub mod resp;
pub mod rmw_local;
pub mod slowlog_cluster;

pub use event_loop::{WAKER, run_thread};
