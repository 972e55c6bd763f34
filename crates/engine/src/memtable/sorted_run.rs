//! A sorted run: entries replayed from the WAL at open, sorted once and
//! kept in memory as an immutable memtable until the background thread
//! flushes them to L0.
//!
//! It answers what the read view asks of an immutable memtable (point
//! lookups, ordered iteration, `seq_max`/`ts_max`, the WAL segment its
//! entries start in) from two flat arrays: arena blocks holding each
//! entry's key and value back to back, and a `Slot` per entry, sorted.
//! Seeks are binary searches over the slots; the 8-byte key prefix in a
//! slot settles most comparisons without touching the arena.
//!
//! # The point index
//! A point read does not search: like a live memtable's skip list
//! (`skiplist`, "The point index"), a run carries a hash index from each
//! user key to its first slot (its newest version), built once after the
//! sort. Open addressing with linear probing over a power-of-two table of
//! `u32` slot numbers (plus one; 0 is an empty bucket) at least twice the
//! distinct keys, so a probe sequence always ends at an empty bucket and
//! is short on average; the hash is xxh3 with a seed drawn per run. 4 to 8
//! bytes per distinct key, beside slots of 48.
//!
//! The order is the memtable's: [`crate::key::compare_internal`] on the
//! encoded internal keys (user key ascending, timestamp descending, the
//! kind's tie rank, sequence number descending).
//!
//! # Thread safety
//! Shared as `Arc<SortedRun>` by read views and the background flush; it
//! is never modified after `SortedRun::from_unsorted`, so reads need no lock.
//!
//! # Invariants
//! - The slots are in strictly increasing internal-key order (sequence
//!   numbers are unique, so no two entries compare equal).
//! - `seq_max` and `ts_max` are the largest of the entries'.
//! - Every distinct user key has exactly one bucket in the point index,
//!   holding its first slot; the index has at least one empty bucket.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, INTERNAL_KEY_TRAILER_BYTES, Kind, Timestamp};
use crate::memtable::Found;
use std::cmp::Ordering;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Where one entry lives, and the parts of its internal key that order it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    /// The first 8 bytes of the user key, big-endian, zero-padded: unequal
    /// prefixes order like the user keys (the first differing byte is a
    /// real byte of both, or a padding zero against a real byte, which is
    /// the shorter key first either way); equal ones fall back to the keys.
    pub(super) prefix: u64,
    /// Arena block of the key and value.
    pub(super) block: u32,
    /// Offset of the key in the block; the value follows it.
    pub(super) offset: u32,
    pub(super) key_len: u32,
    pub(super) value_len: u32,
    pub(super) ts: Timestamp,
    /// `seq << 8 | kind`, the internal key's last word.
    pub(super) seq_kind: u64,
}

impl Slot {
    fn seq(&self) -> u64 {
        self.seq_kind >> 8
    }

    fn kind(&self) -> Kind {
        // Only `ReplayBuffer::push` builds slots, from a valid `Kind`.
        Kind::from_u8((self.seq_kind & 0xff) as u8).unwrap_or(Kind::Put)
    }

    /// The internal key's trailer (timestamp, then `seq << 8 | kind`, big-endian).
    fn trailer(&self) -> [u8; INTERNAL_KEY_TRAILER_BYTES] {
        let mut t = [0u8; INTERNAL_KEY_TRAILER_BYTES];
        t[..8].copy_from_slice(&self.ts.to_be_bytes());
        t[8..].copy_from_slice(&self.seq_kind.to_be_bytes());
        t
    }
}

/// A seed for a run's point-index hash, drawn per run (`RandomState`),
/// so keys chosen to collide in one run do not collide in the next.
fn index_seed() -> u64 {
    std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u64)
}

#[cfg(test)]
thread_local! {
    /// Point-index lookups made on this thread (tests: a recovered run's
    /// reads go through its index).
    pub(crate) static INDEX_LOOKUPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The prefix a [`Slot`] carries for `user_key`.
pub(super) fn key_prefix(user_key: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = user_key.len().min(8);
    word[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(word)
}

/// Replayed entries in internal-key order (an immutable memtable).
#[derive(Debug)]
pub struct SortedRun {
    blocks: Vec<Vec<u8>>,
    slots: Vec<Slot>,
    /// The point index (module header): per bucket, a user key's first
    /// slot plus one, or 0.
    index: Box<[u32]>,
    /// The point index's hash seed.
    seed: u64,
    bytes: usize,
    wal_segment: u64,
    seq_max: u64,
    ts_max: Timestamp,
}

impl SortedRun {
    /// Sorts `slots` (pointing into `blocks`) into a run. `bytes` is the
    /// size counted like a memtable's; `wal_segment` the segment the first
    /// replayed entry came from.
    pub(super) fn from_unsorted(
        blocks: Vec<Vec<u8>>,
        mut slots: Vec<Slot>,
        bytes: usize,
        wal_segment: u64,
        seq_max: u64,
        ts_max: Timestamp,
    ) -> Self {
        let mut run = SortedRun {
            blocks,
            slots: Vec::new(),
            index: Box::new([]),
            seed: index_seed(),
            bytes,
            wal_segment,
            seq_max,
            ts_max,
        };
        // `ReplayBuffer` cuts runs at the memtable's size, far below this.
        assert!(
            slots.len() < u32::MAX as usize,
            "a run of {} entries",
            slots.len()
        );
        slots.sort_unstable_by(|a, b| run.compare(a, b));
        debug_assert!(
            slots
                .windows(2)
                .all(|w| run.compare(&w[0], &w[1]) == Ordering::Less)
        );
        run.slots = slots;
        run.index = run.build_index();
        run
    }

    /// The point index of the sorted slots (module header).
    fn build_index(&self) -> Box<[u32]> {
        let firsts: Vec<usize> = (0..self.slots.len())
            .filter(|&i| {
                i == 0 || self.user_key(&self.slots[i - 1]) != self.user_key(&self.slots[i])
            })
            .collect();
        let buckets = (firsts.len() * 2).max(1).next_power_of_two();
        let mask = buckets - 1;
        let mut index = vec![0u32; buckets].into_boxed_slice();
        for first in firsts {
            // Fits: `from_unsorted` asserts fewer than `u32::MAX` slots.
            let number = (first + 1) as u32;
            let mut bucket = self.hash(self.user_key(&self.slots[first])) as usize & mask;
            while index[bucket] != 0 {
                bucket = (bucket + 1) & mask;
            }
            index[bucket] = number;
        }
        debug_assert!(index.contains(&0));
        index
    }

    /// The point index's hash of a user key.
    fn hash(&self, user_key: &[u8]) -> u64 {
        xxh3_64_with_seed(user_key, self.seed)
    }

    /// Index of the first slot of `user_key` (its newest version), found
    /// through the point index; `None` when the run does not hold the key.
    fn first_slot(&self, user_key: &[u8]) -> Option<usize> {
        #[cfg(test)]
        INDEX_LOOKUPS.with(|n| n.set(n.get() + 1));
        let mask = self.index.len() - 1;
        let prefix = key_prefix(user_key);
        let mut bucket = self.hash(user_key) as usize & mask;
        // At most every bucket; the index always has an empty one.
        for _ in 0..self.index.len() {
            let number = self.index[bucket] as usize;
            let slot = self.slots.get(number.checked_sub(1)?)?;
            if slot.prefix == prefix && self.user_key(slot) == user_key {
                return Some(number - 1);
            }
            bucket = (bucket + 1) & mask;
        }
        None
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
            .then_with(|| key::compare_trailers(&a.trailer(), &b.trailer()))
    }

    /// Index of the first entry of `user_key` or of the next user key
    /// (the point index's model; reads use the index).
    #[cfg(test)]
    fn lower_bound_user_key(&self, user_key: &[u8]) -> usize {
        let prefix = key_prefix(user_key);
        self.slots.partition_point(|s| {
            s.prefix
                .cmp(&prefix)
                .then_with(|| self.user_key(s).cmp(user_key))
                == Ordering::Less
        })
    }

    /// Index of the first entry at or after the encoded internal key
    /// `ikey`, in [`key::compare_internal`]'s order (the trailer compared
    /// bytewise and reversed, so seek keys with any trailer work).
    fn lower_bound(&self, ikey: &[u8]) -> usize {
        let user_key = key::user_key(ikey);
        let trailer = &ikey[user_key.len()..];
        let prefix = key_prefix(user_key);
        self.slots.partition_point(|s| {
            s.prefix
                .cmp(&prefix)
                .then_with(|| self.user_key(s).cmp(user_key))
                .then_with(|| key::compare_trailers(&s.trailer(), trailer))
                == Ordering::Less
        })
    }

    /// The newest version of `user_key` with `seq <= visible_seq`, found
    /// through the point index (module header).
    pub fn get(&self, user_key: &[u8], visible_seq: u64) -> Option<Found<'_>> {
        self.newest_visible(self.first_slot(user_key)?, user_key, visible_seq)
    }

    /// [`SortedRun::get`] by a binary search: what the point index must
    /// agree with (its model test).
    #[cfg(test)]
    fn get_by_search(&self, user_key: &[u8], visible_seq: u64) -> Option<Found<'_>> {
        self.newest_visible(self.lower_bound_user_key(user_key), user_key, visible_seq)
    }

    /// From slot `first` on, the first entry of `user_key` with
    /// `seq <= visible_seq`.
    fn newest_visible(&self, first: usize, user_key: &[u8], visible_seq: u64) -> Option<Found<'_>> {
        self.slots[first..]
            .iter()
            .take_while(|s| self.user_key(s) == user_key)
            .find(|s| s.seq() <= visible_seq)
            .map(|s| Found {
                ts: s.ts,
                seq: s.seq(),
                kind: s.kind(),
                value: self.value(s),
            })
    }

    /// An iterator over entries with `seq <= visible_seq`.
    pub fn iter(self: &Arc<Self>, visible_seq: u64) -> SortedRunIter {
        SortedRunIter {
            run: Arc::clone(self),
            visible_seq,
            pos: self.slots.len(),
            key: Vec::new(),
        }
    }

    /// Bytes counted the way a memtable counts them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the run holds nothing.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The WAL segment the first entry was replayed from: this run's
    /// entries are all in it or later segments.
    pub fn wal_segment(&self) -> u64 {
        self.wal_segment
    }

    /// Highest sequence number (0 if empty).
    pub fn seq_max(&self) -> u64 {
        self.seq_max
    }

    /// Highest timestamp (0 if empty).
    pub fn ts_max(&self) -> Timestamp {
        self.ts_max
    }
}

/// An iterator over a [`SortedRun`]; it holds the run, so it borrows nothing.
#[derive(Debug)]
pub struct SortedRunIter {
    run: Arc<SortedRun>,
    visible_seq: u64,
    pos: usize,
    /// The encoded internal key of the current entry.
    key: Vec<u8>,
}

impl SortedRunIter {
    /// Skips entries above the visible sequence number, then encodes the
    /// current key.
    fn settle(&mut self) {
        let slots = &self.run.slots;
        while self.pos < slots.len() && slots[self.pos].seq() > self.visible_seq {
            self.pos += 1;
        }
        self.key.clear();
        if let Some(slot) = slots.get(self.pos) {
            self.key.extend_from_slice(self.run.user_key(slot));
            self.key.extend_from_slice(&slot.trailer());
        }
    }
}

impl InternalIterator for SortedRunIter {
    fn valid(&self) -> bool {
        self.pos < self.run.slots.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        self.settle();
        Ok(())
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        self.pos = self.run.lower_bound(ikey);
        self.settle();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        self.settle();
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
    use super::super::replay_buffer::{ARENA_BLOCK_BYTES, ReplayBuffer};
    use super::*;
    use crate::memtable::Memtable;

    /// Fills a memtable and a replay buffer with the same 3000 entries: keys
    /// sharing 8-byte prefixes, the empty key, equal timestamps, deletes,
    /// and a value larger than an arena block.
    fn same_entries() -> (Arc<Memtable>, ReplayBuffer) {
        let mem = Arc::new(Memtable::new(0));
        let mut buf = ReplayBuffer::new(7);
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
        (mem, buf)
    }

    fn collect(it: &mut dyn InternalIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        out
    }

    /// The run yields exactly the memtable's entries in the memtable's
    /// order, at every visible sequence number, and seek agrees with it.
    #[test]
    fn sorted_run_matches_memtable_order() {
        let (mem, buf) = same_entries();
        assert_eq!(buf.bytes(), mem.bytes());
        assert_eq!(buf.len(), mem.len());
        let run = Arc::new(buf.freeze());
        assert_eq!((run.seq_max(), run.ts_max()), (mem.seq_max(), mem.ts_max()));
        assert_eq!(run.wal_segment(), 7);
        for visible in [0, 1, 1500, u64::MAX] {
            let mut expected = mem.iter(visible);
            expected.seek_to_first().unwrap();
            let mut got = run.iter(visible);
            got.seek_to_first().unwrap();
            assert_eq!(
                collect(&mut got),
                collect(&mut expected),
                "visible {visible}"
            );
        }
        let mut it = mem.iter(u64::MAX);
        it.seek_to_first().unwrap();
        let keys: Vec<Vec<u8>> = collect(&mut it).into_iter().map(|(k, _)| k).collect();
        let mut got = run.iter(u64::MAX);
        for probe in [0, 1, 17, 1500, keys.len() - 1] {
            got.seek(&keys[probe]).unwrap();
            assert_eq!(got.key(), keys[probe].as_slice());
        }
        got.seek(&key::seek_key(b"zzz")).unwrap();
        assert!(!got.valid());
    }

    /// Point lookups and seeks to seek keys (trailer of 0xff bytes) give
    /// what the memtable gives, for present and absent keys, at several
    /// visible sequence numbers.
    #[test]
    fn get_and_seek_match_memtable() {
        let (mem, buf) = same_entries();
        let run = Arc::new(buf.freeze());
        let mut probes: Vec<Vec<u8>> = vec![Vec::new(), b"prefix00".to_vec(), b"zz".to_vec()];
        probes.extend((0..60).map(|i| format!("{i}").into_bytes()));
        probes.extend(
            (0..1000)
                .step_by(37)
                .map(|i| format!("prefix00{i}").into_bytes()),
        );
        for probe in &probes {
            for visible in [0, 5, 2999, u64::MAX] {
                assert_eq!(
                    run.get(probe, visible),
                    mem.get(probe, visible),
                    "{probe:?}"
                );
                assert_eq!(
                    run.get(probe, visible),
                    run.get_by_search(probe, visible),
                    "{probe:?}"
                );
                let mut want = mem.iter(visible);
                want.seek(&key::seek_key(probe)).unwrap();
                let mut got = run.iter(visible);
                got.seek(&key::seek_key(probe)).unwrap();
                assert_eq!(got.valid(), want.valid(), "{probe:?} at {visible}");
                if want.valid() {
                    assert_eq!(got.key(), want.key());
                    assert_eq!(got.value(), want.value());
                }
            }
        }
    }

    /// Point reads of a run go through its point index: one index lookup
    /// per read, present keys and absent ones alike, and every distinct
    /// key has its own bucket (the index is no plain binary search).
    #[test]
    fn get_goes_through_the_point_index() {
        let (_, buf) = same_entries();
        let run = buf.freeze();
        let distinct = (0..run.slots.len())
            .filter(|&i| i == 0 || run.user_key(&run.slots[i - 1]) != run.user_key(&run.slots[i]))
            .count();
        assert_eq!(run.index.iter().filter(|&&n| n != 0).count(), distinct);
        assert!(run.index.len() >= 2 * distinct);
        let before = INDEX_LOOKUPS.with(std::cell::Cell::get);
        assert!(run.get(b"prefix00", u64::MAX).is_some());
        assert!(run.get(b"absent", u64::MAX).is_none());
        assert_eq!(INDEX_LOOKUPS.with(std::cell::Cell::get) - before, 2);
    }
}
