//! Cluster-wide range reads (`GET /v0/entities?...&cluster=1`): the live
//! keys of the whole cluster in key order, each once, with its newest
//! version, merged from enough nodes to cover every key's `ack` copies.
//!
//! - [`merge`]: the pure merge of key-ordered version streams (resumable
//!   from a key: what a `SCAN` cursor needs).
//! - [`coverage`]: how many nodes to stream from, and the proof.
//! - [`wire`]: the internal node-to-node stream of versions
//!   (`GET /v0/internal/range`).
//! - [`source`]: the streams (this node's engine, peers over blocking
//!   sockets) and which nodes to open; [`source::open`] gives a merge any
//!   caller on its own thread can page through.
//! - [`feed`]: the range threads (bounded) and the bounded queue to the
//!   client's connection, with back-pressure end to end.
//! - [`page_thread`]: one page of a cluster iteration (RESP `SCAN`) on a
//!   range thread, within the same bound, handed back whole.
//! - [`job_thread`]: a connection's short job that reads much of the
//!   engine (RESP `DBSIZE`, `INFO`'s key counts) on a range thread,
//!   within the same bound.

pub mod coverage;
pub mod feed;
pub mod job_thread;
pub mod merge;
pub mod page_thread;
pub mod peer_auth;
pub mod source;
#[cfg(test)]
mod source_tests;
pub mod wire;

pub use feed::{Feed, FeedReceiver, Ranges};
pub use source::Plan;
