//! Leveled compaction's rules and output.
//!
//! - [`output`]: copying merged entries into new SSTables (old versions
//!   dropped, dead versions as [`collect`] says).
//! - [`collect`]: when a tombstone or an expired value is dropped for good
//!   (past the grace, with no older version of its key anywhere else).
//! - [`picker`]: which files to compact next (scores, round robin).
//! - [`purge`]: dropping every version of the keys a predicate rejects,
//!   without tombstones (a cleanup compaction).
//! - [`pace`]: how long a paced merge (a purge) waits to keep its rate.
//!
//! The background threads that flush, compact and install the results
//! are the engine's (`db/flush_compaction_thread.rs`): this module knows
//! nothing of the engine's shared state.

pub mod collect;
pub mod output;
pub mod pace;
pub mod picker;
pub mod purge;
