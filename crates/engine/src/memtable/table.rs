//! [`Memtable`]: the skip list of internal keys the tx thread writes and
//! every reader searches, its point read ([`Memtable::get`]) and its
//! iterator ([`MemtableIter`]). The module header of `memtable` states the
//! invariants.

use super::skiplist::{self, Cursor, SkipList};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Timestamp};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

/// Per-entry overhead counted towards the memtable's size besides the key
/// and value bytes: a skip-list node's header, links and padding, on
/// average. The replay buffer uses it to cut runs the size memtables are.
pub(crate) const ENTRY_OVERHEAD_BYTES: usize = skiplist::NODE_OVERHEAD_BYTES_MEAN;

/// One memtable.
///
/// # Thread safety
/// Shared as `Arc<Memtable>`; inserts from the writer thread only, reads from anywhere.
pub struct Memtable {
    list: SkipList,
    /// Bytes its entries take: keys, values and [`ENTRY_OVERHEAD_BYTES`]
    /// each (the arena's real use differs only by the random node heights).
    bytes: AtomicUsize,
    /// The WAL segment this memtable's writes are logged in.
    wal_segment: u64,
    seq_max: AtomicU64,
    ts_max: AtomicU64,
}

/// A version found in a memtable, its value lent by the memtable (a
/// point read copies nothing; the caller copies what it keeps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'a> {
    /// Timestamp of the version.
    pub ts: Timestamp,
    /// Its sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: Kind,
    /// The value (empty for a delete), in the memtable's memory.
    pub value: &'a [u8],
}

impl Memtable {
    /// An empty memtable whose writes go to WAL segment `wal_segment`,
    /// its point index sized for a small one (tests, placeholders).
    pub fn new(wal_segment: u64) -> Self {
        Self::with_list(wal_segment, SkipList::new())
    }

    /// An empty memtable whose writes go to WAL segment `wal_segment`,
    /// its point index sized for `budget_bytes` of entries (the engine's
    /// `memtable_bytes_max`: [`skiplist::index_buckets_for`]).
    pub fn with_budget(wal_segment: u64, budget_bytes: usize) -> Self {
        let buckets = skiplist::index_buckets_for(budget_bytes);
        Self::with_list(wal_segment, SkipList::with_index_buckets(buckets))
    }

    /// An empty memtable on `list`.
    pub(super) fn with_list(wal_segment: u64, list: SkipList) -> Self {
        Memtable {
            list,
            bytes: AtomicUsize::new(0),
            wal_segment,
            seq_max: AtomicU64::new(0),
            ts_max: AtomicU64::new(0),
        }
    }

    /// Inserts one entry (writer thread only).
    pub fn insert(&self, user_key: &[u8], ts: Timestamp, seq: u64, kind: Kind, value: &[u8]) {
        let mut ikey = [0u8; 64];
        if user_key.len() + key::INTERNAL_KEY_TRAILER_BYTES <= ikey.len() {
            let n = encode_into(&mut ikey, user_key, ts, seq, kind);
            self.list.insert(&ikey[..n], value);
        } else {
            self.list
                .insert(&key::internal_key(user_key, ts, seq, kind), value);
        }
        let size =
            user_key.len() + key::INTERNAL_KEY_TRAILER_BYTES + value.len() + ENTRY_OVERHEAD_BYTES;
        self.bytes.fetch_add(size, AtomicOrdering::Relaxed);
        self.seq_max.fetch_max(seq, AtomicOrdering::Relaxed);
        self.ts_max.fetch_max(ts, AtomicOrdering::Relaxed);
    }

    /// The newest version of `user_key` with `seq <= visible_seq`.
    ///
    /// The key's newest version is found through the skip list's point
    /// index ([`SkipList::seek_user`]), not by a seek from the head; its
    /// older versions follow it. A read allocates nothing: the value is
    /// lent from the memtable's arena.
    pub fn get(&self, user_key: &[u8], visible_seq: u64) -> Option<Found<'_>> {
        Self::newest_visible(self.list.seek_user(user_key), user_key, visible_seq)
    }

    /// [`Memtable::get`] by a seek from the skip list's head: what the
    /// point index must agree with (its model tests).
    #[cfg(test)]
    pub(crate) fn get_by_seek(&self, user_key: &[u8], visible_seq: u64) -> Option<Found<'_>> {
        let cursor = self.list.seek(&key::seek_key(user_key));
        Self::newest_visible(cursor, user_key, visible_seq)
    }

    /// From `c` (on `user_key`'s first entry, or anywhere past it when
    /// the key is absent), the first entry of `user_key` with
    /// `seq <= visible_seq`.
    fn newest_visible<'a>(
        mut c: Cursor<'a>,
        user_key: &[u8],
        visible_seq: u64,
    ) -> Option<Found<'a>> {
        while c.valid() {
            let parsed = key::parse_internal_key(c.key())?;
            if parsed.user_key != user_key {
                return None;
            }
            if parsed.seq <= visible_seq {
                return Some(Found {
                    ts: parsed.ts,
                    seq: parsed.seq,
                    kind: parsed.kind,
                    value: c.value(),
                });
            }
            c.advance();
        }
        None
    }

    /// Approximate bytes used.
    pub fn bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
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
        let mem = Arc::clone(self);
        // SAFETY: the cursor borrows the skip list inside `mem`, which the
        // iterator owns alongside it: the list lives on the heap, never
        // moves, and is dropped only after the cursor (fields drop in
        // declaration order, and `cursor` is declared first). Nothing hands
        // the 'static borrow out: `key` and `value` re-borrow it for
        // `&self`.
        let cursor: Cursor<'static> =
            unsafe { std::mem::transmute::<Cursor<'_>, Cursor<'static>>(mem.list.end()) };
        MemtableIter {
            cursor,
            _mem: mem,
            visible_seq,
        }
    }
}

/// Encodes the internal key of (`user_key`, `ts`, `seq`, `kind`) into
/// `out` (which is long enough); returns its length.
fn encode_into(out: &mut [u8], user_key: &[u8], ts: Timestamp, seq: u64, kind: Kind) -> usize {
    let n = user_key.len();
    out[..n].copy_from_slice(user_key);
    out[n..n + 8].copy_from_slice(&ts.to_be_bytes());
    out[n + 8..n + 16].copy_from_slice(&((seq << 8) | kind as u64).to_be_bytes());
    debug_assert_eq!(
        &out[..n + 16],
        &key::internal_key(user_key, ts, seq, kind)[..]
    );
    n + key::INTERNAL_KEY_TRAILER_BYTES
}

/// Iterator over a memtable: a cursor walking the skip list in place.
/// Keys and values are read where they lie in the arena, not copied.
pub struct MemtableIter {
    /// Declared before `mem`, so it is dropped first (see [`Memtable::iter`]).
    cursor: Cursor<'static>,
    /// Keeps the skip list the cursor walks alive.
    _mem: Arc<Memtable>,
    visible_seq: u64,
}

impl MemtableIter {
    /// Moves forward past entries the read view cannot see (a batch being
    /// applied right now).
    fn skip_invisible(&mut self) {
        while self.cursor.valid()
            && key::parse_internal_key(self.cursor.key()).is_none_or(|p| p.seq > self.visible_seq)
        {
            self.cursor.advance();
        }
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.cursor = self.cursor.list().first();
        self.skip_invisible();
        Ok(())
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        self.cursor = self.cursor.list().seek(ikey);
        self.skip_invisible();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.cursor.advance();
        self.skip_invisible();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.cursor.key()
    }

    fn value(&self) -> &[u8] {
        self.cursor.value()
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
                    Some(&[i as u8][..])
                );
                for a in &absent {
                    assert_eq!(m.get(a, u64::MAX), None, "{a:?}");
                }
            }
        }
    }

    /// The size the memtable counts is within a few percent of what its
    /// arena really holds, for small and for larger entries.
    #[test]
    fn counted_bytes_follow_the_arena() {
        for value_len in [0usize, 100, 1000] {
            let m = Memtable::new(1);
            // Under Miri (which checks the skip list's unsafe code) fewer.
            let entries = if cfg!(miri) { 300 } else { 50_000u64 };
            for i in 0..entries {
                let k = format!("{:010}", (i * 7919) % 1_000_003);
                m.insert(k.as_bytes(), i, i + 1, Kind::Put, &vec![1u8; value_len]);
            }
            let counted = m.bytes() as f64;
            let used = m.list.used_bytes() as f64;
            let ratio = counted / used;
            assert!(
                (0.95..1.05).contains(&ratio),
                "{value_len}: counted {counted}, used {used}"
            );
            assert!(m.list.reserved_bytes() as f64 >= used);
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
