//! The per-key consensus register: linearizable reads, writes and
//! read-modify-writes of one key over its replica set (CASPaxos with a
//! commit message; docs/ARCHITECTURE.md "Consensus register"), as pure
//! rules the node and the simulation both drive.
//!
//! - [`ballot`]: ballots, ordered by (HLC time, node id).
//! - [`quorum`]: a majority of every replica set named (old and new during
//!   a layout transition).
//! - [`acceptor`]: one replica's promise and accept state per key;
//!   persist, then answer; the commit and pruning rules.
//! - [`proposer`]: one operation from its first prepare to its outcome:
//!   two round trips for a write, one for a read that finds nothing in
//!   flight, bounded retries with the caller's jitter.
//! - [`record`]: the acceptor's state on disk (the Paxos record and the
//!   key's stored version) and the writes a step needs before it answers.
//! - [`serial`]: one acceptor step per key at a time (the table the
//!   node's network threads share).
//! - [`wire`]: the register's requests and answers as peer-framed bytes
//!   (docs/FORMAT.md "Register frame").

pub mod acceptor;
pub mod ballot;
pub mod proposer;
pub mod quorum;
pub mod record;
pub mod serial;
pub mod wire;

#[cfg(test)]
mod proposer_tests;

pub use acceptor::{Answer, KeyState, Proposal, Request, Value};
pub use ballot::Ballot;
pub use proposer::{Output, Proposer, RegisterError};
pub use quorum::Quorum;
