//! Flush and leveled compaction.
//!
//! - [`output`]: copying merged entries into new SSTables (old versions
//!   dropped, tombstones dropped only at the bottom after their grace period).
//! - [`picker`]: which files to compact next (scores, round robin).
//! - [`worker`]: the background thread that flushes, compacts and installs.

pub mod output;
pub mod picker;
pub mod worker;
