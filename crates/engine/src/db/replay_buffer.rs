//! The sorted run recovery fills instead of a memtable.
//!
//! At open nothing reads the replayed entries before they are written to
//! L0, so recovery does not need a concurrent ordered map: it appends every
//! entry to a [`ReplayBuffer`] (key and value copied into large arena
//! blocks, a fixed-size [`Slot`] per entry) and sorts the slots once, just
//! before the table is written. Inserting each entry into the skip list
//! cost a search of ~log2(n) heap-allocated keys (two cache misses per
//! step) plus two allocations; appending costs a copy, and the sort
//! compares an inline 8-byte key prefix first. Measured in
//! `docs/BENCHMARKS-engine.md`, "recovery".
//!
//! The order is the memtable's: [`crate::key::compare_internal`] on the
//! encoded internal keys (user key ascending, timestamp descending, sequence
//! number descending), and the buffer counts its size like a memtable
//! ([`crate::memtable::ENTRY_OVERHEAD_BYTES`] per entry), so a replay
//! flushes at the same points and writes the same tables as before.
//!
//! # Invariants
//! - Sequence numbers of the entries are unique, so no two slots compare
//!   equal and the unstable sort gives one order.
//! - After [`ReplayBuffer::sorted`] the slots are in internal-key order.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, INTERNAL_KEY_TRAILER_BYTES, Kind, Timestamp};
use crate::memtable::ENTRY_OVERHEAD_BYTES;
use std::cmp::Ordering;

/// Bytes of one arena block; an entry larger than this gets a block of its own.
pub const ARENA_BLOCK_BYTES: usize = 4 * 1024 * 1024;

/// Where one entry lives, and the parts of its internal key that order it.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The first 8 bytes of the user key, big-endian, zero-padded: equal
    /// prefixes fall back to the whole key.
    prefix: u64,
    /// Arena block of the key and value.
    block: u32,
    /// Offset of the key in the block; the value follows it.
    offset: u32,
    key_len: u32,
    value_len: u32,
    ts: Timestamp,
    /// `seq << 8 | kind`, the internal key's last word.
    seq_kind: u64,
}

/// Entries replayed from the WAL, in arrival order until sorted.
///
/// # Thread safety
/// Owned by the thread running recovery; not shared.
#[derive(Debug, Default)]
pub struct ReplayBuffer {
    blocks: Vec<Vec<u8>>,
    slots: Vec<Slot>,
    bytes: usize,
}

fn key_prefix(user_key: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = user_key.len().min(8);
    word[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(word)
}

impl ReplayBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
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
    }

    /// Bytes counted the way a memtable counts them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// True when nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Number of entries.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    fn user_key(&self, slot: &Slot) -> &[u8] {
        let start = slot.offset as usize;
        &self.blocks[slot.block as usize][start..start + slot.key_len as usize]
    }

    fn value(&self, slot: &Slot) -> &[u8] {
        let start = slot.offset as usize + slot.key_len as usize;
        &self.blocks[slot.block as usize][start..start + slot.value_len as usize]
    }

    fn compare(&self, a: &Slot, b: &Slot) -> Ordering {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| self.user_key(a).cmp(self.user_key(b)))
            .then_with(|| b.ts.cmp(&a.ts))
            .then_with(|| b.seq_kind.cmp(&a.seq_kind))
    }

    /// Sorts the entries in internal-key order and returns an iterator over them.
    pub fn sorted(mut self) -> SortedRunIter {
        let mut slots = std::mem::take(&mut self.slots);
        slots.sort_unstable_by(|a, b| self.compare(a, b));
        debug_assert!(
            slots
                .windows(2)
                .all(|w| self.compare(&w[0], &w[1]) == Ordering::Less)
        );
        self.slots = slots;
        SortedRunIter {
            run: self,
            pos: 0,
            key: Vec::new(),
        }
    }
}

/// An iterator over a sorted [`ReplayBuffer`].
#[derive(Debug)]
pub struct SortedRunIter {
    run: ReplayBuffer,
    pos: usize,
    /// The encoded internal key of the current entry.
    key: Vec<u8>,
}

impl SortedRunIter {
    fn load_key(&mut self) {
        self.key.clear();
        if let Some(slot) = self.run.slots.get(self.pos) {
            let word = slot.seq_kind;
            let kind = Kind::from_u8((word & 0xff) as u8).unwrap_or(Kind::Put);
            key::encode_internal_key(
                &mut self.key,
                self.run.user_key(slot),
                slot.ts,
                word >> 8,
                kind,
            );
        }
    }
}

impl InternalIterator for SortedRunIter {
    fn valid(&self) -> bool {
        self.pos < self.run.slots.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        self.load_key();
        Ok(())
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        let mut scratch = Vec::new();
        let run = &self.run;
        self.pos = run.slots.partition_point(|slot| {
            scratch.clear();
            key::encode_internal_key(
                &mut scratch,
                run.user_key(slot),
                slot.ts,
                slot.seq_kind >> 8,
                Kind::from_u8((slot.seq_kind & 0xff) as u8).unwrap_or(Kind::Put),
            );
            key::compare_internal(&scratch, ikey) == Ordering::Less
        });
        self.load_key();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        self.load_key();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.run.value(&self.run.slots[self.pos])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::Memtable;
    use std::sync::Arc;

    /// The sorted run yields exactly the memtable's entries in the memtable's
    /// order (keys sharing 8-byte prefixes, equal timestamps, deletes,
    /// entries larger than an arena block), and seek agrees with it.
    #[test]
    fn sorted_run_matches_memtable_order() {
        let mem = Arc::new(Memtable::new(0));
        let mut buf = ReplayBuffer::new();
        let big = vec![7u8; ARENA_BLOCK_BYTES + 10];
        for i in 0..3000u64 {
            let seq = i + 1;
            let k = match i % 4 {
                0 => format!("prefix00{}", (i * 7919) % 997).into_bytes(),
                1 => format!("{}", (i * 31) % 50).into_bytes(),
                2 => b"prefix00".to_vec(),
                _ => Vec::new(),
            };
            let ts = i % 5;
            let kind = if i % 7 == 0 { Kind::Delete } else { Kind::Put };
            let value: &[u8] = match (kind, i) {
                (Kind::Delete, _) => b"",
                (_, 1001) => &big,
                _ => k.as_slice(),
            };
            mem.insert(&k, ts, seq, kind, value);
            buf.push(&k, ts, seq, kind, value);
        }
        assert_eq!(buf.bytes(), mem.bytes());
        assert_eq!(buf.len(), mem.len());
        let mut expected = mem.iter(u64::MAX);
        expected.seek_to_first().unwrap();
        let mut got = buf.sorted();
        got.seek_to_first().unwrap();
        let mut keys = Vec::new();
        while expected.valid() {
            assert!(got.valid());
            assert_eq!(got.key(), expected.key());
            assert_eq!(got.value(), expected.value());
            keys.push(got.key().to_vec());
            expected.next().unwrap();
            got.next().unwrap();
        }
        assert!(!got.valid());
        for probe in [0, 1, 17, 1500, keys.len() - 1] {
            got.seek(&keys[probe]).unwrap();
            assert_eq!(got.key(), keys[probe].as_slice());
        }
        got.seek(&key::seek_key(b"zzz")).unwrap();
        assert!(!got.valid());
    }
}
