//! The Merkle tree two replicas compare: one leaf per hash bucket of keys.
//!
//! A key falls in bucket `top depth bits of xxh3_64(key)`, so buckets spread
//! evenly over the key space whatever the keys look like. A leaf is the
//! wrapping sum of the [`entry_hash`]es of its keys' newest versions, so it
//! does not depend on the order keys are added in (one scan in key order
//! fills every leaf at once). An internal node is `xxh3_64` of its two
//! children. Two replicas whose trees agree at a node agree (up to a 64-bit
//! hash collision) on every key below it; [`Tree::differing_leaves`] walks
//! down only where they disagree.
//!
//! An entry hash covers the version's [`Tag`] (timestamp, kind and the
//! digest of the value, `crate::version_order`), not just its timestamp:
//! timestamps are meant to be unique per write, but two replicas holding
//! different values under one timestamp (a timestamp issued twice, a bit
//! flip) must differ here, or no round would ever find them.
//!
//! The hashes are part of the sync protocol (both sides must compute the
//! same ones): `docs/FORMAT.md`, section "Sync frame", "Tree hashes".

use crate::version_order::{Kind, Tag};
use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// Depth of the trees nodes build: 2^12 = 4096 leaves ("Sync frame").
pub const DEPTH: u32 = 12;

/// Deepest tree [`Tree::new`] accepts (2^20 leaves, 16 MiB of hashes).
pub const DEPTH_MAX: u32 = 20;

/// Key bytes [`entry_hash`] hashes from a stack buffer; longer keys stream.
const ENTRY_STACK_KEY_BYTES_MAX: usize = 512;

/// Kind byte hashed after a version's timestamp: a value.
const ENTRY_KIND_VALUE: u8 = 0;
/// Kind byte hashed after a version's timestamp: a tombstone.
const ENTRY_KIND_TOMBSTONE: u8 = 1;
/// Kind byte hashed after a version's timestamp: an expiring value.
const ENTRY_KIND_EXPIRING: u8 = 2;
/// Bytes hashed after the key: ts (8), kind (1), value digest (8).
const ENTRY_TRAILER_BYTES: usize = 17;

/// The kind byte of a version in entry hashes and digest entries ("Tree
/// hashes"): 0 a value, 1 a tombstone, 2 an expiring value.
pub fn kind_byte(kind: Kind) -> u8 {
    match kind {
        Kind::Value => ENTRY_KIND_VALUE,
        Kind::Tombstone => ENTRY_KIND_TOMBSTONE,
        Kind::Expiring => ENTRY_KIND_EXPIRING,
    }
}

/// The kind of a [`kind_byte`], `None` for any other byte.
pub fn kind_of_byte(byte: u8) -> Option<Kind> {
    match byte {
        ENTRY_KIND_VALUE => Some(Kind::Value),
        ENTRY_KIND_TOMBSTONE => Some(Kind::Tombstone),
        ENTRY_KIND_EXPIRING => Some(Kind::Expiring),
        _ => None,
    }
}

/// The bucket (leaf index) of `key` in a tree of `depth`: the top `depth`
/// bits of `xxh3_64(key)`. Depth 0 has one bucket, 0.
pub fn bucket_of(key: &[u8], depth: u32) -> u32 {
    assert!(depth <= DEPTH_MAX, "tree depth {depth} over {DEPTH_MAX}");
    if depth == 0 {
        return 0;
    }
    (xxh3_64(key) >> (64 - depth)) as u32
}

/// The hash of one version: `xxh3_64(key ‖ ts as u64 LE ‖ kind u8 ‖
/// value digest as u64 LE)`, kind as [`kind_byte`], the digest
/// `crate::version_order::value_digest` of the value (0 for a tombstone).
pub fn entry_hash(key: &[u8], tag: &Tag) -> u64 {
    let mut trailer = [0u8; ENTRY_TRAILER_BYTES];
    trailer[..8].copy_from_slice(&tag.ts.to_le_bytes());
    trailer[8] = kind_byte(tag.kind);
    trailer[9..].copy_from_slice(&tag.digest.to_le_bytes());
    if key.len() <= ENTRY_STACK_KEY_BYTES_MAX {
        let mut buf = [0u8; ENTRY_STACK_KEY_BYTES_MAX + ENTRY_TRAILER_BYTES];
        let n = key.len();
        buf[..n].copy_from_slice(key);
        buf[n..n + ENTRY_TRAILER_BYTES].copy_from_slice(&trailer);
        xxh3_64(&buf[..n + ENTRY_TRAILER_BYTES])
    } else {
        let mut h = Xxh3::new();
        h.update(key);
        h.update(&trailer);
        h.digest()
    }
}

/// The hash of an internal node: `xxh3_64(left as u64 LE ‖ right as u64 LE)`.
fn parent_hash(left: u64, right: u64) -> u64 {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&left.to_le_bytes());
    buf[8..].copy_from_slice(&right.to_le_bytes());
    xxh3_64(&buf)
}

/// A complete binary hash tree over `2^depth` buckets.
///
/// # Invariants
/// `levels[l]` holds `2^l` hashes; `levels[depth]` are the leaves. After
/// [`Tree::finish`] (and until the next [`Tree::add`]) every internal node
/// is the parent hash of its two children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    depth: u32,
    levels: Vec<Vec<u64>>,
    finished: bool,
}

impl Tree {
    /// An empty tree (every leaf 0) of `depth` levels below the root.
    pub fn new(depth: u32) -> Tree {
        assert!(depth <= DEPTH_MAX, "tree depth {depth} over {DEPTH_MAX}");
        let levels = (0..=depth).map(|l| vec![0u64; 1usize << l]).collect();
        let mut tree = Tree {
            depth,
            levels,
            finished: false,
        };
        tree.finish();
        tree
    }

    /// Adds one key's newest version to its bucket's leaf.
    pub fn add(&mut self, key: &[u8], tag: &Tag) {
        let bucket = bucket_of(key, self.depth) as usize;
        let leaf = &mut self.levels[self.depth as usize][bucket];
        *leaf = leaf.wrapping_add(entry_hash(key, tag));
        self.finished = false;
    }

    /// Takes one key's version out of its bucket's leaf again (the inverse
    /// of [`Tree::add`]: a tree kept current while versions are replaced).
    pub fn remove(&mut self, key: &[u8], tag: &Tag) {
        let bucket = bucket_of(key, self.depth) as usize;
        let leaf = &mut self.levels[self.depth as usize][bucket];
        *leaf = leaf.wrapping_sub(entry_hash(key, tag));
        self.finished = false;
    }

    /// Computes the internal nodes from the leaves.
    pub fn finish(&mut self) {
        for level in (0..self.depth as usize).rev() {
            let (upper, lower) = self.levels.split_at_mut(level + 1);
            let children = &lower[0];
            for (i, node) in upper[level].iter_mut().enumerate() {
                *node = parent_hash(children[2 * i], children[2 * i + 1]);
            }
        }
        self.finished = true;
    }

    /// Levels below the root.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// The root hash.
    pub fn root(&self) -> u64 {
        self.node(0, 0)
    }

    /// The hash at `index` of `level` (level 0 is the root, level `depth`
    /// the leaves). Panics on an index outside the level, or on an internal
    /// node of a tree added to since [`Tree::finish`].
    pub fn node(&self, level: u32, index: u32) -> u64 {
        assert!(
            self.finished || level == self.depth,
            "internal node read before finish"
        );
        self.levels[level as usize][index as usize]
    }

    /// The buckets whose leaves differ from `other`'s, in increasing order,
    /// found by descending only into subtrees whose hashes differ.
    pub fn differing_leaves(&self, other: &Tree) -> Vec<u32> {
        assert_eq!(self.depth, other.depth, "trees of different depths");
        let mut differing = Vec::new();
        let mut frontier = vec![0u32];
        for level in 0..=self.depth {
            let mut next = Vec::new();
            for index in frontier {
                if self.node(level, index) == other.node(level, index) {
                    continue;
                }
                if level == self.depth {
                    differing.push(index);
                } else {
                    next.push(2 * index);
                    next.push(2 * index + 1);
                }
            }
            frontier = next;
        }
        differing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// A version in the model: (ts, kind byte, value digest).
    type Model = BTreeMap<Vec<u8>, (u64, u8, u64)>;

    fn tag((ts, kind, digest): (u64, u8, u64)) -> Tag {
        Tag {
            ts,
            kind: kind_of_byte(kind % 3).unwrap_or(Kind::Value),
            digest,
        }
    }

    fn tree_of(model: &Model, depth: u32) -> Tree {
        let mut t = Tree::new(depth);
        for (k, &v) in model {
            t.add(k, &tag(v));
        }
        t.finish();
        t
    }

    /// Buckets holding a key whose version differs between the two models.
    fn model_differences(a: &Model, b: &Model, depth: u32) -> BTreeSet<u32> {
        let keys: BTreeSet<&Vec<u8>> = a.keys().chain(b.keys()).collect();
        keys.into_iter()
            .filter(|k| a.get(*k) != b.get(*k))
            .map(|k| bucket_of(k, depth))
            .collect()
    }

    /// A model version: few timestamps and digests, so versions that
    /// differ only in the kind or only in the value digest are common.
    fn version() -> impl Strategy<Value = (u64, u8, u64)> {
        (1u64..8, 0u8..3, 0u64..3)
    }

    /// An edit: which side and put or remove, the key, the version.
    type Edit = (u8, Vec<u8>, (u64, u8, u64));

    fn edits() -> impl Strategy<Value = Vec<Edit>> {
        proptest::collection::vec(
            (
                0u8..4,
                proptest::collection::vec(any::<u8>(), 0..6),
                version(),
            ),
            0..40,
        )
    }

    proptest! {
        /// Two replicas with random keys and random edits on one or both
        /// sides: `differing_leaves` names exactly the buckets with a
        /// difference, whatever the order keys were added in.
        #[test]
        fn differing_leaves_match_the_model(
            base in proptest::collection::btree_map(
                proptest::collection::vec(any::<u8>(), 0..6),
                version(),
                0..200,
            ),
            edits in edits(),
            depth in 0u32..9,
        ) {
            let mut a = base.clone();
            let mut b = base;
            for (op, key, v) in edits {
                let side = if op % 2 == 0 { &mut a } else { &mut b };
                if op < 2 {
                    side.insert(key, v);
                } else {
                    side.remove(&key);
                }
            }
            let ta = tree_of(&a, depth);
            // Insert b's keys in reverse order: leaves are order-independent.
            let mut tb = Tree::new(depth);
            for (k, &v) in b.iter().rev() {
                tb.add(k, &tag(v));
            }
            tb.finish();
            let expected: Vec<u32> = model_differences(&a, &b, depth).into_iter().collect();
            prop_assert_eq!(ta.differing_leaves(&tb), expected.clone());
            prop_assert_eq!(tb.differing_leaves(&ta), expected.clone());
            prop_assert_eq!(ta.root() == tb.root(), expected.is_empty());
        }
    }

    /// The bucket is the top bits of the key's hash; depth 0 is one bucket.
    #[test]
    fn bucket_is_top_bits() {
        let h = xxh3_64(b"key");
        assert_eq!(bucket_of(b"key", 0), 0);
        assert_eq!(bucket_of(b"key", 1) as u64, h >> 63);
        assert_eq!(bucket_of(b"key", DEPTH) as u64, h >> (64 - DEPTH));
        assert!(bucket_of(b"key", DEPTH) < 1 << DEPTH);
    }

    /// The entry hash covers key, timestamp, kind and value digest, and
    /// the stack and streaming paths agree with the specified concatenation.
    #[test]
    fn entry_hash_is_the_specified_concatenation() {
        let t = |ts, kind, digest| Tag { ts, kind, digest };
        for len in [0usize, 1, 511, 512, 513, 4000] {
            let key = vec![7u8; len];
            let mut spec = key.clone();
            spec.extend_from_slice(&42u64.to_le_bytes());
            spec.push(2);
            spec.extend_from_slice(&9u64.to_le_bytes());
            let e = t(42, Kind::Expiring, 9);
            assert_eq!(entry_hash(&key, &e), xxh3_64(&spec), "len {len}");
            assert_ne!(
                entry_hash(&key, &e),
                entry_hash(&key, &t(42, Kind::Value, 9))
            );
            assert_ne!(
                entry_hash(&key, &e),
                entry_hash(&key, &t(43, Kind::Expiring, 9))
            );
            // Issue 31: one timestamp, two values: the leaves must differ.
            assert_ne!(
                entry_hash(&key, &e),
                entry_hash(&key, &t(42, Kind::Expiring, 8))
            );
        }
        assert_eq!(kind_byte(Kind::Value), 0);
        assert_eq!(kind_byte(Kind::Tombstone), 1);
        for kind in [Kind::Value, Kind::Tombstone, Kind::Expiring] {
            assert_eq!(kind_of_byte(kind_byte(kind)), Some(kind));
        }
        assert_eq!(kind_of_byte(3), None);
    }

    /// An empty tree's internal nodes are parent hashes of zeros, and the
    /// root changes with any one added entry.
    #[test]
    fn internal_nodes_are_parent_hashes() {
        let mut t = Tree::new(2);
        assert_eq!(t.node(1, 0), parent_hash(0, 0));
        assert_eq!(t.root(), parent_hash(parent_hash(0, 0), parent_hash(0, 0)));
        let empty_root = t.root();
        t.add(b"k", &tag((5, 0, 1)));
        t.finish();
        assert_ne!(t.root(), empty_root);
        assert_eq!(t.depth(), 2);
    }

    /// `remove` undoes `add`: replacing a version in place gives the tree of
    /// the new contents.
    #[test]
    fn remove_undoes_add() {
        let mut a = Tree::new(6);
        a.add(b"k1", &tag((5, 0, 1)));
        a.add(b"k2", &tag((7, 0, 2)));
        a.remove(b"k1", &tag((5, 0, 1)));
        a.add(b"k1", &tag((9, 1, 0)));
        a.finish();
        let mut b = Tree::new(6);
        b.add(b"k2", &tag((7, 0, 2)));
        b.add(b"k1", &tag((9, 1, 0)));
        b.finish();
        assert_eq!(a, b);
    }

    /// Reading an internal node after an `add` without `finish` is a bug.
    #[test]
    #[should_panic(expected = "before finish")]
    fn stale_internal_node_panics() {
        let mut t = Tree::new(3);
        t.add(b"k", &tag((1, 0, 0)));
        let _ = t.root();
    }
}
