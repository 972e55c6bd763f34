//! The layout agreement between processes (docs/ARCHITECTURE.md,
//! "Membership"): the I/O around the pure rules of `crate::cluster`.
//!
//! - [`voters_http`]: the proposer's calls to the voters over HTTP, and
//!   whether an added node answers.
//! - [`endpoints`]: `POST /v0/layout` and `POST /v0/internal/layout` run
//!   on the bounded layout workers (`crate::cluster::workers`), their
//!   answers rendered whole.
//! - [`gossip`]: the `ataman-layout-gossip` thread, live layouts and
//!   trackers to every node of them each second, both ways.
//! - [`seed`]: how a node started with `--join` asks its seed, as a peer.

pub mod endpoints;
pub mod gossip;
pub mod seed;
pub mod voters_http;
