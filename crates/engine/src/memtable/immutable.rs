//! Immutable memtables: what waits in the read view for the background flush.
//!
//! Two kinds, one interface: a memtable the writer rotated out (a skip
//! list), and a run of entries replayed from the WAL at open (a sorted
//! array, [`SortedRun`]). Reads, scans, the write-stall budget
//! (`immutable_memtables_max`) and the flush treat them alike; the flush
//! makes a WAL segment obsolete only once every immutable memtable whose
//! entries are in it is in an installed table (`docs/ARCHITECTURE.md`,
//! "Recovery").
//!
//! # Thread safety
//! Cheap to clone (an `Arc`); both kinds are read concurrently by any
//! number of threads and never written once they are immutable.

use super::sorted_run::SortedRun;
use crate::iter::InternalIterator;
use crate::key::Timestamp;
use crate::memtable::{Found, Memtable};
use std::sync::Arc;

/// A memtable that takes no more writes.
#[derive(Clone)]
pub enum ImmutableMemtable {
    /// A memtable the writer made immutable when it rotated the WAL segment.
    Rotated(Arc<Memtable>),
    /// Entries replayed from the WAL at open.
    Replayed(Arc<SortedRun>),
}

impl ImmutableMemtable {
    /// The newest version of `user_key` with `seq <= visible_seq`.
    pub fn get(&self, user_key: &[u8], visible_seq: u64) -> Option<Found<'_>> {
        match self {
            Self::Rotated(m) => m.get(user_key, visible_seq),
            Self::Replayed(r) => r.get(user_key, visible_seq),
        }
    }

    /// An iterator over entries with `seq <= visible_seq`.
    pub fn iter(&self, visible_seq: u64) -> Box<dyn InternalIterator> {
        match self {
            Self::Rotated(m) => Box::new(m.iter(visible_seq)),
            Self::Replayed(r) => Box::new(r.iter(visible_seq)),
        }
    }

    /// The oldest WAL segment holding any of its entries.
    pub fn wal_segment(&self) -> u64 {
        match self {
            Self::Rotated(m) => m.wal_segment(),
            Self::Replayed(r) => r.wal_segment(),
        }
    }

    /// Highest sequence number (0 if empty).
    pub fn seq_max(&self) -> u64 {
        match self {
            Self::Rotated(m) => m.seq_max(),
            Self::Replayed(r) => r.seq_max(),
        }
    }

    /// Highest timestamp (0 if empty).
    pub fn ts_max(&self) -> Timestamp {
        match self {
            Self::Rotated(m) => m.ts_max(),
            Self::Replayed(r) => r.ts_max(),
        }
    }

    /// Entries (versions and tombstones) it holds.
    pub fn len(&self) -> usize {
        match self {
            Self::Rotated(m) => m.len(),
            Self::Replayed(r) => r.len(),
        }
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes counted the way a memtable counts them.
    pub fn bytes(&self) -> usize {
        match self {
            Self::Rotated(m) => m.bytes(),
            Self::Replayed(r) => r.bytes(),
        }
    }

    /// True when both are the same memtable (not merely equal contents).
    pub fn same(&self, other: &ImmutableMemtable) -> bool {
        match (self, other) {
            (Self::Rotated(a), Self::Rotated(b)) => Arc::ptr_eq(a, b),
            (Self::Replayed(a), Self::Replayed(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}
