//! The memtable: where writes land before they are flushed to an SSTable.
//!
//! A lock-free skip list (`crossbeam-skiplist`) ordered by encoded internal
//! key. The single writer thread inserts; any number of readers search and
//! iterate at the same time without locks, so reads never block the writer.
//!
//! # Invariants
//! - Only the writer thread (or recovery, before threads start) inserts.
//! - Every entry's sequence number is unique; readers skip entries whose
//!   sequence number is above the read view's visible sequence number, so a
//!   batch being applied is seen whole or not at all.
//! - Once a memtable is immutable (rotated out), nothing inserts into it.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Timestamp};
use crossbeam_skiplist::SkipMap;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

/// Per-entry overhead counted towards the memtable's size (skip-list node, vectors).
pub(crate) const ENTRY_OVERHEAD_BYTES: usize = 96;

/// Entries an iterator copies out of the skip list per refill.
const ITER_CHUNK_ENTRIES: usize = 64;

/// An encoded internal key ordered by [`key::compare_internal`].
///
/// It carries the first [`MEM_KEY_PREFIX_BYTES`] bytes of its user key
/// inline, big-endian and zero-padded, so a skip-list search compares most
/// keys without following the pointer to their bytes (a cache miss per
/// node visited). Equal prefixes fall back to the whole keys; unequal
/// prefixes order like the user keys (the first differing byte is a real
/// byte of both keys, or a padding zero against a real byte, which is the
/// shorter key first either way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemKey {
    prefix: u128,
    ikey: Vec<u8>,
}

thread_local! {
    /// The seek key of a point read, reused by every read on this thread.
    static SEEK_KEY: RefCell<MemKey> = const {
        RefCell::new(MemKey {
            prefix: 0,
            ikey: Vec::new(),
        })
    };
}

/// User-key bytes a [`MemKey`] holds inline.
pub const MEM_KEY_PREFIX_BYTES: usize = 16;

impl MemKey {
    /// Wraps an encoded internal key.
    pub fn new(ikey: Vec<u8>) -> Self {
        MemKey {
            prefix: Self::prefix_of(key::user_key(&ikey)),
            ikey,
        }
    }

    /// Makes this the seek key of `user_key` (see [`key::seek_key`]),
    /// reusing its buffer.
    fn set_seek_key(&mut self, user_key: &[u8]) {
        self.ikey.clear();
        self.ikey.extend_from_slice(user_key);
        self.ikey
            .extend_from_slice(&[0xff; key::INTERNAL_KEY_TRAILER_BYTES]);
        self.prefix = Self::prefix_of(user_key);
        debug_assert_eq!(self.ikey, key::seek_key(user_key));
    }

    fn prefix_of(user_key: &[u8]) -> u128 {
        let mut word = [0u8; MEM_KEY_PREFIX_BYTES];
        let n = user_key.len().min(MEM_KEY_PREFIX_BYTES);
        word[..n].copy_from_slice(&user_key[..n]);
        u128::from_be_bytes(word)
    }

    /// The encoded internal key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.ikey
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| key::compare_internal(&self.ikey, &other.ikey))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One memtable.
///
/// # Thread safety
/// Shared as `Arc<Memtable>`; inserts from the writer thread only, reads from anywhere.
pub struct Memtable {
    map: SkipMap<MemKey, Vec<u8>>,
    bytes: AtomicUsize,
    /// The WAL segment this memtable's writes are logged in.
    wal_segment: u64,
    seq_max: AtomicU64,
    ts_max: AtomicU64,
}

/// A version found in a memtable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Timestamp of the version.
    pub ts: Timestamp,
    /// Its sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: Kind,
    /// The value (empty for a delete).
    pub value: Vec<u8>,
}

impl Memtable {
    /// An empty memtable whose writes go to WAL segment `wal_segment`.
    pub fn new(wal_segment: u64) -> Self {
        Memtable {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            wal_segment,
            seq_max: AtomicU64::new(0),
            ts_max: AtomicU64::new(0),
        }
    }

    /// Inserts one entry (writer thread only).
    pub fn insert(&self, user_key: &[u8], ts: Timestamp, seq: u64, kind: Kind, value: &[u8]) {
        let ikey = key::internal_key(user_key, ts, seq, kind);
        let size = ikey.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        self.map.insert(MemKey::new(ikey), value.to_vec());
        self.bytes.fetch_add(size, AtomicOrdering::Relaxed);
        self.seq_max.fetch_max(seq, AtomicOrdering::Relaxed);
        self.ts_max.fetch_max(ts, AtomicOrdering::Relaxed);
    }

    /// The newest version of `user_key` with `seq <= visible_seq`.
    ///
    /// The seek key is built in a per-thread buffer, so a read allocates
    /// only the value it returns.
    pub fn get(&self, user_key: &[u8], visible_seq: u64) -> Option<Found> {
        SEEK_KEY.with_borrow_mut(|start| {
            start.set_seek_key(user_key);
            self.get_from(start, user_key, visible_seq)
        })
    }

    fn get_from(&self, start: &MemKey, user_key: &[u8], visible_seq: u64) -> Option<Found> {
        for entry in self
            .map
            .range::<MemKey, _>((Bound::Included(start), Bound::Unbounded))
        {
            let parsed = key::parse_internal_key(entry.key().as_bytes())?;
            if parsed.user_key != user_key {
                return None;
            }
            if parsed.seq <= visible_seq {
                return Some(Found {
                    ts: parsed.ts,
                    seq: parsed.seq,
                    kind: parsed.kind,
                    value: entry.value().clone(),
                });
            }
        }
        None
    }

    /// Approximate bytes used.
    pub fn bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The WAL segment holding this memtable's writes.
    pub fn wal_segment(&self) -> u64 {
        self.wal_segment
    }

    /// Highest sequence number inserted (0 if empty).
    pub fn seq_max(&self) -> u64 {
        self.seq_max.load(AtomicOrdering::Relaxed)
    }

    /// Highest timestamp inserted (0 if empty).
    pub fn ts_max(&self) -> Timestamp {
        self.ts_max.load(AtomicOrdering::Relaxed)
    }

    /// An iterator over entries with `seq <= visible_seq`.
    pub fn iter(self: &Arc<Self>, visible_seq: u64) -> MemtableIter {
        MemtableIter {
            mem: Arc::clone(self),
            visible_seq,
            buf: Vec::with_capacity(ITER_CHUNK_ENTRIES),
            pos: 0,
            exhausted: true,
        }
    }
}

/// Iterator over a memtable. It copies entries out in small chunks so that
/// it owns what it points at and holds no borrow of the skip list.
pub struct MemtableIter {
    mem: Arc<Memtable>,
    visible_seq: u64,
    buf: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
    /// True when the skip list has nothing after the last buffered entry.
    exhausted: bool,
}

impl MemtableIter {
    /// Buffers up to a chunk of visible entries from `lower` on. Invisible
    /// entries (a batch being applied right now) are skipped; a chunk that
    /// held only invisible ones is followed by the next.
    fn fill_from(&mut self, mut lower: Bound<MemKey>) {
        self.buf.clear();
        self.pos = 0;
        loop {
            let mut last_scanned: Option<Vec<u8>> = None;
            let mut more = false;
            let range = self.mem.map.range((lower.clone(), Bound::Unbounded));
            for (scanned, entry) in range.enumerate() {
                if scanned == ITER_CHUNK_ENTRIES {
                    more = true;
                    break;
                }
                let visible = key::parse_internal_key(entry.key().as_bytes())
                    .is_some_and(|p| p.seq <= self.visible_seq);
                if visible {
                    self.buf
                        .push((entry.key().as_bytes().to_vec(), entry.value().clone()));
                } else {
                    last_scanned = Some(entry.key().as_bytes().to_vec());
                }
            }
            self.exhausted = !more;
            if !self.buf.is_empty() || !more {
                return;
            }
            match last_scanned {
                Some(last) => lower = Bound::Excluded(MemKey::new(last)),
                None => return,
            }
        }
    }

    fn advance_chunk(&mut self) {
        if let Some((last, _)) = self.buf.last().cloned() {
            if self.exhausted {
                self.buf.clear();
                self.pos = 0;
            } else {
                self.fill_from(Bound::Excluded(MemKey::new(last)));
            }
        }
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.pos < self.buf.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.fill_from(Bound::Unbounded);
        Ok(())
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        self.fill_from(Bound::Included(MemKey::new(ikey.to_vec())));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        if self.pos >= self.buf.len() {
            self.advance_chunk();
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        &self.buf[self.pos].0
    }

    fn value(&self) -> &[u8] {
        &self.buf[self.pos].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// get returns the newest visible version; invisible sequence numbers are skipped.
    #[test]
    fn get_newest_visible() {
        let m = Memtable::new(1);
        m.insert(b"a", 5, 1, Kind::Put, b"v5");
        m.insert(b"a", 9, 2, Kind::Delete, b"");
        m.insert(b"a", 7, 3, Kind::Put, b"v7");
        m.insert(b"b", 1, 4, Kind::Put, b"b1");
        let f = m.get(b"a", 10).unwrap();
        assert_eq!((f.ts, f.kind), (9, Kind::Delete));
        let f = m.get(b"a", 1).unwrap();
        assert_eq!(f.value, b"v5");
        assert!(m.get(b"c", 10).is_none());
        assert!(m.get(b"", 10).is_none());
    }

    /// Reads reuse one seek-key buffer per thread: long keys, short keys,
    /// keys that are prefixes of others and absent keys, read back to back
    /// in any order, each find exactly their own newest version.
    #[test]
    fn get_reuses_seek_key_across_lengths() {
        let m = Memtable::new(1);
        let users: Vec<Vec<u8>> = vec![
            b"a".to_vec(),
            b"ab".to_vec(),
            b"0123456789abcdef".to_vec(),
            b"0123456789abcdef0123456789".to_vec(),
            vec![0xff; 100],
            vec![],
        ];
        for (i, u) in users.iter().enumerate() {
            m.insert(u, 10, i as u64 + 1, Kind::Put, &[i as u8]);
        }
        let absent: Vec<Vec<u8>> =
            vec![b"abc".to_vec(), vec![0xff; 99], b"0123456789abcde".to_vec()];
        for round in 0..2 {
            let mut order: Vec<usize> = (0..users.len()).collect();
            if round == 1 {
                order.reverse();
            }
            for i in order {
                assert_eq!(
                    m.get(&users[i], u64::MAX).map(|f| f.value),
                    Some(vec![i as u8])
                );
                for a in &absent {
                    assert_eq!(m.get(a, u64::MAX), None, "{a:?}");
                }
            }
        }
    }

    /// MemKey's prefix-first order is exactly compare_internal's, for keys
    /// shorter and longer than the prefix, sharing it, or padded with zeros.
    #[test]
    fn mem_key_order_is_internal_order() {
        let users: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"a\0\0b".to_vec(),
            b"0123456789abcdef".to_vec(),
            b"0123456789abcdef\0".to_vec(),
            b"0123456789abcdefg".to_vec(),
            b"0123456789abcdeg".to_vec(),
            vec![0xff; 20],
        ];
        let mut keys = Vec::new();
        for (i, u) in users.iter().enumerate() {
            for ts in [0, 7, u64::MAX] {
                keys.push(key::internal_key(u, ts, i as u64 + 1, Kind::Put));
                keys.push(key::internal_key(u, ts, i as u64 + 100, Kind::Delete));
            }
            keys.push(key::seek_key(u));
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(
                    MemKey::new(a.clone()).cmp(&MemKey::new(b.clone())),
                    key::compare_internal(a, b),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    /// Iteration yields all visible entries in internal order across chunk boundaries.
    #[test]
    fn iterates_in_order_across_chunks() {
        let m = Arc::new(Memtable::new(1));
        let mut expected = Vec::new();
        for i in 0..500u64 {
            let k = format!("key{:04}", (i * 7919) % 500);
            m.insert(k.as_bytes(), i, i + 1, Kind::Put, k.as_bytes());
            if i < 300 {
                expected.push(key::internal_key(k.as_bytes(), i, i + 1, Kind::Put));
            }
        }
        expected.sort_by(|a, b| key::compare_internal(a, b));
        let mut it = m.iter(300);
        it.seek_to_first().unwrap();
        let mut got = Vec::new();
        while it.valid() {
            got.push(it.key().to_vec());
            it.next().unwrap();
        }
        assert_eq!(got, expected);
        let mut it = m.iter(u64::MAX);
        it.seek(&key::seek_key(b"key0250")).unwrap();
        assert_eq!(key::user_key(it.key()), b"key0250");
    }
}
