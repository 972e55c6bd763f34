//! Shared block cache with a byte budget.
//!
//! Keys are (file number, block offset); file numbers are never reused, so
//! a deleted table's blocks simply age out. The cache is split into
//! [`CACHE_SHARDS`] shards, each a mutex-protected LRU with an equal share
//! of the budget, so readers of different blocks rarely contend. A block
//! larger than a shard's budget is not cached.

use super::block::Block;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Shards of the block cache.
pub const CACHE_SHARDS: usize = 16;

/// Hit and miss counters of the block cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that read the file.
    pub misses: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// Byte budget.
    pub capacity_bytes: u64,
}

type CacheKey = (u64, u64);

/// The cache's hasher. Keys are (file number, offset) pairs the engine
/// chose, never client input, so a multiply-rotate mix is enough; it costs
/// a few instructions where the standard SipHash cost about a hundred per
/// lookup (callgrind of `bench engine --readrandom`,
/// docs/bench-log/2026-11-22-engine-11-fjall-quiet.md).
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(23) ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 31)
    }
}

/// A key's hash under [`KeyHasher`].
fn key_hash(key: CacheKey) -> u64 {
    let mut h = KeyHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// A held block and its ages.
struct Held {
    block: Arc<Block>,
    /// Tick of the last insert or hit.
    age: u64,
    /// Tick under which `by_age` records the block (at or below `age`).
    recorded_age: u64,
}

/// One LRU shard.
///
/// A hit only stamps the entry with the current tick (a hash lookup, no
/// tree update); `by_age` is brought up to date lazily, by the eviction
/// loop: a popped record older than its entry's age is put back under the
/// entry's age instead of evicting it. The victim is therefore still the
/// least recently used block, and each hit costs at most one tree
/// re-insert, paid only when the shard is full and only for blocks that
/// reach the old end.
///
/// # Invariants
/// `entries` and `by_age` hold the same keys, `by_age` each under its
/// entry's `recorded_age`; `bytes` is the sum of the held blocks' sizes and
/// never exceeds `capacity_bytes`.
#[derive(Default)]
struct Shard {
    entries: HashMap<CacheKey, Held, BuildHasherDefault<KeyHasher>>,
    by_age: BTreeMap<u64, CacheKey>,
    tick: u64,
    bytes: usize,
    capacity_bytes: usize,
}

impl Shard {
    fn touch(&mut self, key: CacheKey) -> Option<Arc<Block>> {
        self.tick += 1;
        let held = self.entries.get_mut(&key)?;
        held.age = self.tick;
        Some(held.block.clone())
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>) {
        let size = block.size_bytes();
        if size > self.capacity_bytes {
            return;
        }
        if let Some(old) = self.entries.remove(&key) {
            self.by_age.remove(&old.recorded_age);
            self.bytes -= old.block.size_bytes();
        }
        // Each pass evicts a block or refreshes a stale record (at most once
        // per held block), so this is bounded by twice the held blocks.
        while self.bytes + size > self.capacity_bytes {
            let Some((recorded, victim)) = self.by_age.pop_first() else {
                break;
            };
            match self.entries.get_mut(&victim) {
                Some(held) if held.age != recorded => {
                    held.recorded_age = held.age;
                    self.by_age.insert(held.age, victim);
                }
                Some(_) => {
                    if let Some(old) = self.entries.remove(&victim) {
                        self.bytes -= old.block.size_bytes();
                    }
                }
                None => debug_assert!(false, "by_age names a block that is not held"),
            }
        }
        self.tick += 1;
        self.by_age.insert(self.tick, key);
        self.entries.insert(
            key,
            Held {
                block,
                age: self.tick,
                recorded_age: self.tick,
            },
        );
        self.bytes += size;
        assert!(self.bytes <= self.capacity_bytes);
        debug_assert_eq!(self.entries.len(), self.by_age.len());
    }
}

/// Caches decoded (decompressed, checksum-verified) blocks by (file number, offset).
///
/// # Thread safety
/// Shared by all readers (`Arc<BlockCache>`); each shard has its own mutex,
/// held only for a map update, never across I/O.
///
/// # Invariants
/// Never holds more than `capacity_bytes` of blocks (each shard holds at
/// most its share).
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    capacity_bytes: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: usize) -> Self {
        let shards = (0..CACHE_SHARDS)
            .map(|i| {
                // Spread the remainder so the shares sum to the budget exactly.
                let share =
                    capacity_bytes / CACHE_SHARDS + usize::from(i < capacity_bytes % CACHE_SHARDS);
                Mutex::new(Shard {
                    capacity_bytes: share,
                    ..Shard::default()
                })
            })
            .collect();
        BlockCache {
            shards,
            capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: CacheKey) -> MutexGuard<'_, Shard> {
        // The top bits pick the shard; the map inside uses the low bits
        // (and the top 7), so a shard's keys still spread over its buckets.
        let h = key_hash(key);
        let shard = &self.shards[((h >> 40) % CACHE_SHARDS as u64) as usize];
        // A panic while holding the lock cannot leave a shard inconsistent
        // in a way that matters: its invariants are restored before any
        // call that could panic, and the assert that checks them would fire
        // again. So a poisoned lock is used as is.
        shard
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached block at (`file_number`, `offset`), counting a hit or a miss.
    pub fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        let found = self
            .shard((file_number, offset))
            .touch((file_number, offset));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block` as (`file_number`, `offset`), evicting the least
    /// recently used blocks of its shard to make room; not cached if larger
    /// than a shard's budget.
    pub fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        self.shard((file_number, offset))
            .insert((file_number, offset), block);
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        let bytes: usize = self
            .shards
            .iter()
            .map(|s| {
                s.lock()
                    .map(|g| g.bytes)
                    .unwrap_or_else(|p| p.into_inner().bytes)
            })
            .sum();
        assert!(bytes <= self.capacity_bytes);
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: bytes as u64,
            capacity_bytes: self.capacity_bytes as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_testkit::rng::Rng;
    use std::path::Path;

    fn block_of(bytes: usize, tag: u8) -> Arc<Block> {
        // A one-entry block padded with value bytes to `bytes` in all.
        let key = crate::key::internal_key(&[tag], 1, 1, crate::key::Kind::Put);
        let mut b = super::super::block_builder::BlockBuilder::new(1);
        let overhead = 3 + key.len() + 8;
        b.add(&key, &vec![tag; bytes.saturating_sub(overhead)]);
        let data = b.finish();
        Arc::new(Block::new(data, Arc::from(Path::new("t")), 0).unwrap())
    }

    /// The byte budget holds under many inserts, and hits and misses are counted.
    #[test]
    fn budget_and_hits() {
        let cache = BlockCache::new(64 * 1024);
        for i in 0..2_000u64 {
            cache.insert(i % 7, i * 4096, block_of(500 + (i as usize % 900), i as u8));
            let s = cache.stats();
            assert!(s.bytes <= s.capacity_bytes, "over budget after insert {i}");
        }
        assert!(
            cache.stats().bytes > 32 * 1024,
            "cache should be mostly full"
        );
        let recent = cache.get(1999 % 7, 1999 * 4096);
        assert!(recent.is_some(), "the newest block is cached");
        assert!(cache.get(999, 0).is_none());
        let s = cache.stats();
        assert_eq!((s.hits, s.misses), (1, 1));
    }

    /// A block larger than a shard's budget is not cached; reinserting a key
    /// does not double-count it.
    #[test]
    fn oversized_and_reinsert() {
        let cache = BlockCache::new(16 * 1024);
        cache.insert(1, 0, block_of(2048, 1));
        assert_eq!(cache.stats().bytes, 0);
        assert!(cache.get(1, 0).is_none());
        let small = block_of(600, 2);
        cache.insert(1, 8, small.clone());
        cache.insert(1, 8, small.clone());
        assert_eq!(cache.stats().bytes, small.size_bytes() as u64);
    }

    /// With lazy age updates the shard still evicts exactly what a plain LRU
    /// list would, over a long random mix of hits, misses and inserts.
    #[test]
    fn lazy_lru_matches_a_plain_lru_model() {
        let block = block_of(1000, 0);
        let capacity_blocks = 8;
        let mut shard = Shard {
            capacity_bytes: block.size_bytes() * capacity_blocks,
            ..Shard::default()
        };
        // Most recently used last.
        let mut model: Vec<u64> = Vec::new();
        let mut rng = Rng::new(1);
        for _ in 0..20_000 {
            let k = rng.below(20);
            let hit = shard.touch((1, k)).is_some();
            let pos = model.iter().position(|&m| m == k);
            assert_eq!(hit, pos.is_some(), "key {k}");
            if let Some(i) = pos {
                model.remove(i);
                model.push(k);
            } else {
                shard.insert((1, k), block.clone());
                if model.len() == capacity_blocks {
                    model.remove(0);
                }
                model.push(k);
            }
            assert_eq!(shard.entries.len(), model.len());
        }
    }

    /// The least recently used block of a shard is evicted first.
    #[test]
    fn lru_order() {
        // Room for three blocks, not four.
        let capacity_bytes = 3 * block_of(1000, 0).size_bytes() + 100;
        let mut shard = Shard {
            capacity_bytes,
            ..Shard::default()
        };
        shard.insert((1, 0), block_of(1000, 0));
        shard.insert((1, 1), block_of(1000, 1));
        shard.insert((1, 2), block_of(1000, 2));
        assert!(shard.touch((1, 0)).is_some());
        shard.insert((1, 3), block_of(1000, 3));
        assert!(shard.touch((1, 0)).is_some());
        assert!(
            shard.touch((1, 1)).is_none(),
            "oldest untouched block evicted"
        );
        assert!(shard.bytes <= capacity_bytes);
    }
}
