//! Anti-entropy: replicas compare Merkle trees of the keys they share and
//! exchange the versions one of them misses (docs/ARCHITECTURE.md,
//! "Anti-entropy").
//!
//! The pure core, shared with the deterministic simulation:
//! - [`merkle`]: the hash tree over key buckets.
//! - [`reconcile`]: the steps that make two digests of a key range equal.
//! - [`scope`]: which keys two nodes both keep.
//!
//! The protocol and the threads:
//! - [`wire`]: the sync protocol's frames (docs/FORMAT.md, "Sync frame").
//! - [`stream`]: blocking frame I/O with deadlines and the stop flag.
//! - [`local`]: the local engine's side of a session (trees, digests, versions).
//! - [`server`]: the `ataman-sync` thread serving sessions peers start.
//! - [`client`]: one session this node starts with one peer.
//! - [`rounds`]: the `ataman-rounds` thread: when rounds run, what a round does.
//! - [`rate`]: the token bucket bounding scanned plus sent bytes
//!   (`crate::token_bucket`, shared with the backup's copy).
//! - [`priority`]: background threads at a lower CPU priority.
//! - [`status`]: round reports (`/v0/repair`) and metrics.
//! - [`repaired`]: repair-based collection's rule (until when a key's
//!   replicas hold what this node holds), [`repaired_file`] its durable
//!   records, [`horizon`] the engine's collection horizon from them.
//! - [`transfer`]: copying what a node gains in a layout transition, on
//!   the same sessions, scoped to the transition.
//! - `service`: the hand-off from the network threads, the node's view
//!   the threads take, and [`start`].
//!
//! ## Threads
//! The network threads never scan or block for anti-entropy. A sync
//! upgrade reserves a place ([`AntiEntropy::try_reserve`]; none left: 503
//! `anti-entropy busy`), writes the 101, and hands the socket to the
//! `ataman-sync` thread through a bounded channel ([`AntiEntropy::hand_off`]).
//! The `ataman-rounds` thread starts rounds. Both use blocking sockets with
//! timeouts and check the node's stop flag between batches.

pub mod client;
pub mod horizon;
pub mod local;
pub mod merkle;
pub mod priority;
pub use crate::token_bucket as rate;
pub mod reconcile;
pub mod repaired;
pub mod repaired_file;
pub mod rounds;
pub mod scope;
pub mod server;
mod service;
pub mod status;
pub mod stream;
pub mod transfer;
pub mod wire;

pub use service::{
    AntiEntropy, Handoff, Node, SYNC_SESSIONS_MAX, SYNC_SESSIONS_WAITING_MAX, Ticket, start,
};

#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod tests;
