//! The read view: the memtables plus the live SSTables, frozen.
//!
//! A [`SuperVersion`] adds the memtables to a [`Version`]; readers take an
//! `Arc` of the current one and keep using it while writers move on, so a
//! read never waits for the writer and never sees half an install.

use super::files::Version;
use crate::memtable::Memtable;
use crate::memtable::immutable::ImmutableMemtable;
use std::sync::Arc;

/// Memtables plus version: everything a reader needs, frozen.
pub struct SuperVersion {
    /// The memtable taking writes.
    pub mem: Arc<Memtable>,
    /// Immutable memtables waiting for flush, newest first (rotated ones
    /// and, after an open, the runs replayed from the WAL).
    pub imms: Vec<ImmutableMemtable>,
    /// The live SSTables.
    pub version: Arc<Version>,
}
