//! The engine: its public handle and its threads.
//!
//! - [`handle`]: [`Db`], the handle (open, write, read, stats, close).
//! - [`open`]: recovery: manifest, SSTables, WAL replay.
//! - [`tx_thread`]: the tx thread, the single owner of mutable state.
//! - [`flush_point`]: the memtable size this engine flushes at (jittered).
//! - [`flush_compaction_thread`]: the background threads: one flushes
//!   memtables, one compacts (and purges); each installs new versions.
//!   `compaction_pace_tests`: automatic compactions at
//!   `Options::compaction_rate_bytes`.
//! - the WAL thread is [`crate::wal::writer`].
//! - [`read`]: point reads and scans on a read view.
//! - `replayed_runs`: the WAL tail replayed at open, kept as immutable
//!   memtables until flushed.
//! - [`purge`]: dropping the keys a predicate rejects, without tombstones.
//! - [`ingest`]: a sorted batch written straight to tables of one level.
//! - [`shared`]: the state the threads share.
//! - [`checkpoint`]: the store at one point of its write order, in a new
//!   directory (linked tables, the memtables' entries as one table).

pub mod checkpoint;
#[cfg(test)]
mod checkpoint_tests;
#[cfg(test)]
mod compaction_pace_tests;
pub mod condition;
pub mod flush_compaction_thread;
pub mod flush_point;
pub mod handle;
pub mod ingest;
pub mod open;
pub mod purge;
pub mod read;
pub(crate) mod replayed_runs;
#[cfg(test)]
mod replayed_view_tests;
pub mod shared;
pub mod tx_thread;

pub use crate::wal::WriteCallback;

/// Waits until the compaction thread has claimed a merge (a compaction or
/// a purge's step), failing the test after `within`.
#[cfg(test)]
pub(crate) fn until_merging(db: &Db, within: std::time::Duration) {
    let deadline = std::time::Instant::now() + within;
    while shared::lock(&db.shared_for_tests().merging).is_none() {
        assert!(std::time::Instant::now() < deadline, "no merge began");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `len` bytes that do not compress (xorshift from `seed`), for tests that
/// need a store of many tables.
#[cfg(test)]
pub(crate) fn incompressible(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
pub use checkpoint::CheckpointReport;
pub use condition::Condition;
pub use handle::{Db, Entry, EntryRef, Stats, Submission};
pub use open::RecoveryReport;
pub use read::ScanIter;
