//! The buffer recovery fills instead of a memtable.
//!
//! At open nothing reads the replayed entries while they are being
//! replayed, so recovery does not need a concurrent ordered map: it appends
//! every entry to a [`ReplayBuffer`] (key and value copied into large arena
//! blocks, a fixed-size [`Slot`] per entry) and sorts the slots once, when
//! the buffer is full or the replay ends ([`ReplayBuffer::freeze`]). The
//! result is a [`SortedRun`]: an immutable memtable that reads and scans see
//! and the background thread flushes like any other. Inserting each entry
//! into the skip list cost a search of ~log2(n) heap-allocated keys (two
//! cache misses per step) plus two allocations; appending costs a copy, and
//! the sort compares an inline 8-byte key prefix first. Measured in
//! `docs/bench-log/2026-11-21-engine-05-perf-recovery.md`.
//!
//! The buffer counts its size like a memtable
//! ([`crate::memtable::ENTRY_OVERHEAD_BYTES`] per entry), so a replay cuts
//! runs where a memtable of the same budget would have become full.
//!
//! # Invariants
//! - Sequence numbers of the entries are unique (the WAL's grow strictly),
//!   so no two slots compare equal and the unstable sort gives one order.

use super::sorted_run::{Slot, SortedRun, key_prefix};
use crate::key::{self, INTERNAL_KEY_TRAILER_BYTES, Kind, Timestamp};
use crate::memtable::ENTRY_OVERHEAD_BYTES;

/// Bytes of one arena block; an entry larger than this gets a block of its own.
pub const ARENA_BLOCK_BYTES: usize = 4 * 1024 * 1024;

/// Entries replayed from the WAL, in arrival order until frozen.
///
/// # Thread safety
/// Owned by the thread running recovery; not shared.
#[derive(Debug)]
pub struct ReplayBuffer {
    /// The WAL segment the first entry was read from: every entry is in it
    /// or a later one.
    wal_segment: u64,
    blocks: Vec<Vec<u8>>,
    slots: Vec<Slot>,
    bytes: usize,
    seq_max: u64,
    ts_max: Timestamp,
}

impl ReplayBuffer {
    /// An empty buffer whose first entry comes from WAL segment `wal_segment`.
    pub fn new(wal_segment: u64) -> Self {
        ReplayBuffer {
            wal_segment,
            blocks: Vec::new(),
            slots: Vec::new(),
            bytes: 0,
            seq_max: 0,
            ts_max: 0,
        }
    }

    /// Appends one entry; `seq` must be unique. Keys and values are within
    /// the engine's limits (the replay validated the batch), which fit a `u32`.
    pub fn push(&mut self, user_key: &[u8], ts: Timestamp, seq: u64, kind: Kind, value: &[u8]) {
        debug_assert!(seq <= key::SEQ_MAX);
        let need = user_key.len() + value.len();
        let fits = self
            .blocks
            .last()
            .is_some_and(|b| b.capacity() - b.len() >= need);
        if !fits {
            self.blocks
                .push(Vec::with_capacity(need.max(ARENA_BLOCK_BYTES)));
        }
        let block_index = self.blocks.len() - 1;
        let block = &mut self.blocks[block_index];
        let offset = block.len();
        block.extend_from_slice(user_key);
        block.extend_from_slice(value);
        self.slots.push(Slot {
            prefix: key_prefix(user_key),
            block: block_index as u32,
            offset: offset as u32,
            key_len: user_key.len() as u32,
            value_len: value.len() as u32,
            ts,
            seq_kind: (seq << 8) | kind as u64,
        });
        self.bytes +=
            user_key.len() + INTERNAL_KEY_TRAILER_BYTES + value.len() + ENTRY_OVERHEAD_BYTES;
        self.seq_max = self.seq_max.max(seq);
        self.ts_max = self.ts_max.max(ts);
    }

    /// Bytes counted the way a memtable counts them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Number of entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Sorts the entries in internal-key order: the buffer becomes an
    /// immutable run.
    pub fn freeze(self) -> SortedRun {
        SortedRun::from_unsorted(
            self.blocks,
            self.slots,
            self.bytes,
            self.wal_segment,
            self.seq_max,
            self.ts_max,
        )
    }
}
