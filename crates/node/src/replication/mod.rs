//! Replication: coordinating requests that name `from` replicas, over the
//! local engine and the peer links, and delivering hints.
//!
//! - [`coordinator`]: the rules of one request (quorum, newest wins,
//!   re-stamping, read repair and hints after the answer), pure logic.
//! - [`driver`]: the replication driver, sans I/O: the requests in flight
//!   and the hint rounds of one coordinator, events in and actions out.
//!   The network threads and the deterministic simulation (`crates/sim`)
//!   both run it.
//! - [`net_io`]: the network thread's adapter: carries out the driver's
//!   actions with the thread's peer links, the engine and the hint store.
//! - [`local`]: the local replica's reads and writes.
//! - [`rehome`]: hints for a node that left every live layout, re-kept
//!   for their keys' current replicas.
//! - [`layout_status`]: `GET /v0/layout`.
//! - [`status`]: what the node knows of each peer, `/v0/cluster`, `/metrics`.

pub mod coordinator;
pub mod driver;
pub mod layout_status;
pub mod local;
pub mod net_io;
pub mod register;
pub mod register_ops;
pub mod rehome;
pub mod status;

pub use driver::{COORDINATIONS_MAX, HINT_BATCH_MAX};
pub use local::local_write;
pub use net_io::{ReplicationIo, Reply, ReplyTo, Request};
