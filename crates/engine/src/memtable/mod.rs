//! The memtable: where writes land before they are flushed to an SSTable.
//!
//! A skip list ([`skiplist`]) ordered by encoded internal key, its nodes in
//! an arena (`arena`). The single writer thread inserts; any number of
//! readers search and iterate at the same time without locks, so reads
//! never block the writer. Point reads find a key's newest version through
//! a hash index beside the list (`skiplist`, "The point index"), not by a
//! seek from its head.
//!
//! [`Memtable`] (in `table.rs`) wraps the skip list. Beside it, the other
//! in-memory tables: [`immutable`] (what waits for the
//! flush: rotated memtables and runs replayed from the WAL), [`sorted_run`]
//! (a replayed run, a sorted array) and `replay_buffer` (building runs
//! during replay).
//!
//! # Invariants
//! - Only the writer thread (or recovery, before threads start) inserts.
//! - Every entry's sequence number is unique; readers skip entries whose
//!   sequence number is above the read view's visible sequence number, so a
//!   batch being applied is seen whole or not at all.
//! - Once a memtable is immutable (rotated out), nothing inserts into it.

mod arena;
pub mod immutable;
#[cfg(test)]
mod index_tests;
pub(crate) mod replay_buffer;
pub mod skiplist;
pub mod sorted_run;
mod table;

pub(crate) use table::ENTRY_OVERHEAD_BYTES;
pub use table::{Found, Memtable, MemtableIter};
