//! The memtable's skip list: one writer, any number of lock-free readers,
//! every node (tower, key and value) in one arena allocation.
//!
//! The algorithm is the classic one of LevelDB's memtable: a writer finds
//! the predecessors of the new key at every level, fills in the new node
//! completely (its links point at those predecessors' successors), then
//! publishes it bottom-up with a release store into each predecessor's
//! link. Readers follow links with acquire loads, so a node they reach is
//! fully written; a reader racing an insert sees the node at some levels and
//! not yet at others, which only changes how fast it walks, never what it
//! finds. Nothing is ever unlinked, so a node stays valid as long as the
//! list (its arena) lives.
//!
//! Compared with `crossbeam-skiplist` (used before): no epoch pinning (a
//! full fence per operation), no reference counts, no per-entry `malloc`
//! (the key and the value were two more), branching factor 4 instead of 2
//! (half the levels), and the first 16 bytes of the user key stored in the
//! node, so most comparisons touch only the node's first cache line.
//!
//! # The point index
//!
//! A seek from the head touches ~log4(n) nodes per level walked, most of
//! them cache misses in a large list (~440 instructions of a RESP GET and
//! most of its stalls: docs/BENCHMARKS.md). Point reads ([`SkipList::seek_user`])
//! go through a hash index instead: a fixed array of buckets, each the
//! head of a chain of the nodes that are the **first of their user key**
//! in list order (the key's newest version), linked through the nodes'
//! own `hash_next` fields. A read hashes the user key, walks one chain
//! (a 32-bit tag, then the key) and lands on the key's first node; from
//! there the level-0 links reach its older versions, as after a seek.
//! Range order is the skip list's, untouched.
//!
//! The writer keeps it: a node inserted as the first of its key either
//! takes the place of the key's previous first node in its chain (the
//! same slot, a release store) or, for a key new to the list, is pushed
//! on the front of its bucket's chain. A node that left a chain keeps
//! its `hash_next` (never written again), so a reader standing on it
//! walks on into the chain. A reader sees every change made before the
//! read view's sequence number was published (the tx thread inserts,
//! then publishes with release, and the reader loads it with acquire
//! before walking), so the first node it finds is at or before the first
//! one it may see; a newer first node it finds is skipped over by the
//! reader's sequence-number test, as after a seek.
//!
//! The hash is xxh3 with a seed drawn per list (`RandomState`), so keys
//! sent over the network cannot be chosen to share a chain without
//! knowing it. The bucket count is fixed when the list is made
//! ([`SkipList::with_index_buckets`]; the memtable sizes it from its byte
//! budget): chains grow past one node on average only in a memtable with
//! more distinct keys than buckets.
//!
//! # Invariants
//! - Inserts are serialised by the `writer` mutex; readers take no lock.
//! - A node's fields and all its links are written before the first
//!   release store that makes it reachable; after that only its links
//!   change, and only by the writer, with release stores.
//! - The list is ordered by [`key::compare_internal`]; keys are unique
//!   (the engine's sequence numbers are).

use super::arena::Arena;
use crate::key;
use std::cmp::Ordering;
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Levels a node may have. With branching factor 4, twelve levels keep
/// searches logarithmic up to about 4^12 = 16 M entries.
pub const HEIGHT_MAX: usize = 12;

/// A node is promoted to the next level with probability 1 / 2^BRANCHING_BITS
/// (branching factor 4).
const BRANCHING_BITS: u32 = 2;

/// Bytes of user key a node keeps inline for comparisons.
pub const PREFIX_BYTES: usize = 16;

/// Point-index buckets of a list made by [`SkipList::new`] (tests and
/// small lists; the memtable sizes its own, [`index_buckets_for`]).
pub const INDEX_BUCKETS_DEFAULT: usize = 1024;

/// Bytes of memtable budget per point-index bucket: a memtable of 64 MiB
/// gets 262,144 buckets (2 MiB of bucket array, 3% of its budget), about
/// one per distinct key at ~250 bytes an entry.
pub const INDEX_BUDGET_BYTES_PER_BUCKET: usize = 256;

/// Fewest and most point-index buckets a memtable gets.
pub const INDEX_BUCKETS_MIN: usize = 1024;
/// See [`INDEX_BUCKETS_MIN`] (32 MiB of bucket array).
pub const INDEX_BUCKETS_MAX: usize = 1 << 22;

/// The point-index bucket count for a memtable of `budget_bytes`: a power
/// of two within [`INDEX_BUCKETS_MIN`]..=[`INDEX_BUCKETS_MAX`].
pub fn index_buckets_for(budget_bytes: usize) -> usize {
    (budget_bytes / INDEX_BUDGET_BYTES_PER_BUCKET)
        .clamp(INDEX_BUCKETS_MIN, INDEX_BUCKETS_MAX)
        .next_power_of_two()
        .min(INDEX_BUCKETS_MAX)
}

/// A node's fixed part. Its `height` links (`AtomicPtr<Node>`) follow it in
/// the same allocation, then the encoded internal key, then the value. The
/// parts after the header are reached by pointer arithmetic on the node's
/// raw pointer (which carries the provenance of the whole arena chunk),
/// never through a reference to the header, which covers the header only.
#[repr(C)]
struct Node {
    /// The first [`PREFIX_BYTES`] of the user key, big-endian, zero-padded.
    prefix_hi: u64,
    prefix_lo: u64,
    key_len: u32,
    value_len: u32,
    height: u32,
    /// The high 32 bits of the user key's index hash (0 for the head).
    hash_tag: u32,
    /// The next node of this node's point-index chain (see the module
    /// header), while this node is in one; frozen once it left it.
    hash_next: AtomicPtr<Node>,
}

/// Bytes of a node's fixed part (a multiple of 8, so the links that follow
/// are aligned).
const NODE_HEADER_BYTES: usize = std::mem::size_of::<Node>();

// Every key and value the engine accepts has a length that fits a u32.
const _: () = assert!(key::KEY_BYTES_MAX + key::INTERNAL_KEY_TRAILER_BYTES <= u32::MAX as usize);
const _: () = assert!(key::VALUE_BYTES_MAX <= u32::MAX as usize);

// The arena's alignment suits a node and its links.
const _: () = assert!(std::mem::align_of::<Node>() <= super::arena::ALIGN);
const _: () = assert!(NODE_HEADER_BYTES.is_multiple_of(super::arena::ALIGN));

/// Bytes of one link.
const LINK_BYTES: usize = std::mem::size_of::<AtomicPtr<Node>>();

/// Mean bytes a node takes besides its key and value: the fixed part, the
/// expected 4/3 links and the expected alignment padding.
pub const NODE_OVERHEAD_BYTES_MEAN: usize = NODE_HEADER_BYTES + LINK_BYTES * 4 / 3 + 4;

impl Node {
    /// The first of `node`'s links.
    ///
    /// # Safety
    /// `node` points at a node allocated by [`alloc_node`].
    unsafe fn links(node: *const Node) -> *const AtomicPtr<Node> {
        // SAFETY: the links follow the header inside the node's allocation.
        unsafe { node.cast::<u8>().add(NODE_HEADER_BYTES).cast() }
    }

    /// Link `level` of `node`.
    ///
    /// # Safety
    /// `node` points at a live node whose links are written, with
    /// `height > level`.
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        // SAFETY: the caller promises `level < height`, so the link lies in
        // the node's allocation, written and aligned (header and links are
        // multiples of 8 bytes from an 8-aligned start).
        unsafe { &*Self::links(node).add(level) }
    }

    /// Where the node's key starts (its value follows the key).
    ///
    /// # Safety
    /// `node` points at a live, fully written node.
    unsafe fn key_start(node: *const Node) -> *const u8 {
        // SAFETY: the key follows the `height` links in the allocation.
        unsafe {
            let height = (*node).height as usize;
            Self::links(node).add(height).cast::<u8>()
        }
    }

    /// The node's encoded internal key.
    ///
    /// # Safety
    /// `node` points at a live, fully written node.
    unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: `key_len` key bytes, written before the node was published.
        unsafe { std::slice::from_raw_parts(Self::key_start(node), (*node).key_len as usize) }
    }

    /// The node's user key (its internal key less the trailer).
    ///
    /// # Safety
    /// `node` points at a live, fully written node other than the head.
    unsafe fn user_key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the caller's promise; every key but the head's is an
        // internal key, at least a trailer long.
        unsafe { key::user_key(Self::key(node)) }
    }

    /// The node's value.
    ///
    /// # Safety
    /// `node` points at a live, fully written node.
    unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: `value_len` value bytes follow the key, written before the
        // node was published.
        unsafe {
            let start = Self::key_start(node).add((*node).key_len as usize);
            std::slice::from_raw_parts(start, (*node).value_len as usize)
        }
    }
}

/// What a search compares nodes with: an encoded internal key and its
/// prefix words.
pub struct Probe<'a> {
    prefix_hi: u64,
    prefix_lo: u64,
    ikey: &'a [u8],
}

impl<'a> Probe<'a> {
    /// A probe for the encoded internal key `ikey`.
    pub fn new(ikey: &'a [u8]) -> Self {
        let (prefix_hi, prefix_lo) = prefix_words(key::user_key(ikey));
        Probe {
            prefix_hi,
            prefix_lo,
            ikey,
        }
    }
}

/// The prefix words of a user key: its first 16 bytes, big-endian,
/// zero-padded. Unequal prefixes order like the keys (the first differing
/// byte is a real byte of both, or a padding zero against a real byte,
/// which is the shorter key first either way); equal ones say nothing.
fn prefix_words(user_key: &[u8]) -> (u64, u64) {
    let mut word = [0u8; PREFIX_BYTES];
    let n = user_key.len().min(PREFIX_BYTES);
    word[..n].copy_from_slice(&user_key[..n]);
    let hi = u64::from_be_bytes(word[..8].try_into().unwrap_or_default());
    let lo = u64::from_be_bytes(word[8..].try_into().unwrap_or_default());
    (hi, lo)
}

/// Orders `node` against `probe`.
///
/// # Safety
/// `node` points at a live, fully written node.
unsafe fn compare(node: *const Node, probe: &Probe<'_>) -> Ordering {
    // SAFETY: the caller's promise.
    let n = unsafe { &*node };
    n.prefix_hi
        .cmp(&probe.prefix_hi)
        .then(n.prefix_lo.cmp(&probe.prefix_lo))
        // SAFETY: the caller's promise.
        .then_with(|| key::compare_internal(unsafe { Node::key(node) }, probe.ikey))
}

/// What only the writer touches.
struct Writer {
    arena: Arena,
    /// xorshift64 state for node heights.
    rng: u64,
}

/// The skip list.
pub struct SkipList {
    /// A node of height [`HEIGHT_MAX`] with no key, before every entry.
    head: *const Node,
    /// The point index's buckets (a power of two of them), each the first
    /// node of its chain or null (module header, "The point index").
    buckets: Box<[AtomicPtr<Node>]>,
    /// The index hash's seed, drawn per list.
    seed: u64,
    /// Levels in use (1..=HEIGHT_MAX); only grows.
    height: AtomicUsize,
    len: AtomicUsize,
    writer: Mutex<Writer>,
}

// SAFETY: the raw pointers point into the arena the list owns (behind
// `writer`); nodes are immutable once published except for their atomic
// links, which readers load with acquire and the single writer (serialised
// by the mutex) stores with release. So the list may be moved to and shared
// with other threads.
unsafe impl Send for SkipList {}
// SAFETY: see `Send`.
unsafe impl Sync for SkipList {}

impl Default for SkipList {
    fn default() -> Self {
        Self::new()
    }
}

impl SkipList {
    /// An empty list with [`INDEX_BUCKETS_DEFAULT`] point-index buckets.
    pub fn new() -> Self {
        Self::with_index_buckets(INDEX_BUCKETS_DEFAULT)
    }

    /// An empty list whose point index has `buckets` buckets (rounded up
    /// to a power of two, at least 1).
    pub fn with_index_buckets(buckets: usize) -> Self {
        let mut arena = Arena::new();
        // The head's links start null (alloc_node writes them so).
        let head = alloc_node(&mut arena, HEIGHT_MAX, &[], &[], 0);
        SkipList {
            head,
            buckets: zeroed_buckets(buckets.max(1).next_power_of_two()),
            seed: std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                0u64,
            ),
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            writer: Mutex::new(Writer {
                arena,
                rng: 0x9E37_79B9_7F4A_7C15,
            }),
        }
    }

    /// Entries inserted.
    pub fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Acquire)
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the list's nodes take in its arena (the head's included).
    pub fn used_bytes(&self) -> usize {
        self.lock_writer().arena.used()
    }

    /// Bytes the list's arena holds (whole chunks).
    pub fn reserved_bytes(&self) -> usize {
        self.lock_writer().arena.reserved()
    }

    /// Inserts `ikey` (an encoded internal key not already present) with
    /// `value`; returns the bytes the node took.
    pub fn insert(&self, ikey: &[u8], value: &[u8]) -> usize {
        let mut w = self.lock_writer();
        let probe = Probe::new(ikey);
        let mut prev = [self.head; HEIGHT_MAX];
        let found = self.find_ge(&probe, Some(&mut prev));
        debug_assert!(
            // SAFETY: a non-null result is a published node.
            found.is_null() || unsafe { compare(found, &probe) } != Ordering::Equal,
            "duplicate internal key"
        );
        let user = key::user_key(ikey);
        let hash = self.hash(user);
        let height = random_height(&mut w.rng);
        let used_before = w.arena.used();
        let node = alloc_node(&mut w.arena, height, ikey, value, hash_tag(hash));
        let bytes = w.arena.used() - used_before;
        let list_height = self.height.load(AtomicOrdering::Relaxed);
        if height > list_height {
            // `prev` above the old height is already the head. Readers that
            // see the new height before the links just step down from the
            // head's null links.
            self.height.store(height, AtomicOrdering::Relaxed);
        }
        for (level, &p) in prev.iter().enumerate().take(height) {
            // SAFETY: `p` is the head or a published node of height > level
            // (find_ge recorded it at this level); `node` has `height` links.
            unsafe {
                let next = Node::link(p, level).load(AtomicOrdering::Relaxed);
                Node::link(node, level).store(next, AtomicOrdering::Relaxed);
            }
        }
        for (level, &p) in prev.iter().enumerate().take(height) {
            // SAFETY: as above. The release store publishes the node whole.
            unsafe { Node::link(p, level) }.store(node.cast_mut(), AtomicOrdering::Release);
        }
        // SAFETY: `prev[0]` is the head or a published node.
        let first_of_key = prev[0] == self.head || unsafe { Node::user_key(prev[0]) } != user;
        if first_of_key {
            // SAFETY: a non-null `found` is a published node (not the head).
            let replaces = !found.is_null() && unsafe { Node::user_key(found) } == user;
            self.index(node, hash, replaces.then_some(found));
        }
        self.len.fetch_add(1, AtomicOrdering::Release);
        drop(w);
        bytes
    }

    /// Puts `node`, now the first of its user key, in the point index: in
    /// the place of `old` (the key's previous first node) or, for a key
    /// new to the list, at the front of its bucket's chain. Writer only.
    fn index(&self, node: *const Node, hash: u64, old: Option<*const Node>) {
        let bucket = self.bucket(hash);
        // SAFETY: `node` is published and not yet in any chain.
        let node_next = unsafe { &(*node).hash_next };
        if old.is_some() && planted_stale_index() {
            return;
        }
        if let Some(old) = old {
            // The link that points at `old`: the bucket's, or a chain node's.
            let mut slot = bucket;
            loop {
                let at = slot.load(AtomicOrdering::Relaxed);
                if at.is_null() {
                    break; // not found (never, by the invariant): push below
                }
                if ptr::eq(at, old) {
                    // SAFETY: `old` is a published node in this chain.
                    let after = unsafe { &(*old).hash_next }.load(AtomicOrdering::Relaxed);
                    node_next.store(after, AtomicOrdering::Relaxed);
                    slot.store(node.cast_mut(), AtomicOrdering::Release);
                    return;
                }
                // SAFETY: a chain holds published nodes only.
                slot = unsafe { &(*at).hash_next };
            }
            debug_assert!(false, "a key's first node missing from its chain");
        }
        node_next.store(
            bucket.load(AtomicOrdering::Relaxed),
            AtomicOrdering::Relaxed,
        );
        bucket.store(node.cast_mut(), AtomicOrdering::Release);
    }

    /// The index hash of a user key.
    fn hash(&self, user_key: &[u8]) -> u64 {
        xxh3_64_with_seed(user_key, self.seed)
    }

    /// The bucket of `hash`.
    fn bucket(&self, hash: u64) -> &AtomicPtr<Node> {
        // The low bits pick the bucket (a power of two of them), the high
        // 32 are the tag: independent bits.
        &self.buckets[hash as usize & (self.buckets.len() - 1)]
    }

    /// A cursor on the first entry of `user_key` (its newest version), or
    /// past the end when the list holds none: what
    /// `seek(seek_key(user_key))` gives when the key is present, found
    /// through the point index (module header) instead of from the head.
    pub fn seek_user(&self, user_key: &[u8]) -> Cursor<'_> {
        let hash = self.hash(user_key);
        let tag = hash_tag(hash);
        let mut x = self.bucket(hash).load(AtomicOrdering::Acquire);
        while !x.is_null() {
            // SAFETY: a chain holds published nodes (never the head), and
            // `hash_next` is only ever stored with release after the node it
            // points at was published.
            unsafe {
                if (*x).hash_tag == tag && Node::user_key(x) == user_key {
                    return Cursor {
                        list: self,
                        node: x,
                    };
                }
                x = (*x).hash_next.load(AtomicOrdering::Acquire);
            }
        }
        self.end()
    }

    /// The first node at or after `probe` (null if none); with `prev`, also
    /// the last node before it at every level.
    fn find_ge(
        &self,
        probe: &Probe<'_>,
        mut prev: Option<&mut [*const Node; HEIGHT_MAX]>,
    ) -> *const Node {
        let mut x = self.head;
        let mut level = self.height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached through a link at a
            // level >= `level`, so it has a link at `level`.
            let next = unsafe { Node::link(x, level) }.load(AtomicOrdering::Acquire);
            // SAFETY: a non-null link points at a published node.
            if !next.is_null() && unsafe { compare(next, probe) } == Ordering::Less {
                x = next;
                continue;
            }
            if let Some(prev) = prev.as_deref_mut() {
                prev[level] = x;
            }
            if level == 0 {
                return next;
            }
            level -= 1;
        }
    }

    /// A cursor on the first entry at or after the internal key `ikey`.
    pub fn seek(&self, ikey: &[u8]) -> Cursor<'_> {
        Cursor {
            list: self,
            node: self.find_ge(&Probe::new(ikey), None),
        }
    }

    /// A cursor past the last entry.
    pub fn end(&self) -> Cursor<'_> {
        Cursor {
            list: self,
            node: ptr::null(),
        }
    }

    /// A cursor on the first entry.
    pub fn first(&self) -> Cursor<'_> {
        // SAFETY: the head has HEIGHT_MAX links.
        let node = unsafe { Node::link(self.head, 0) }.load(AtomicOrdering::Acquire);
        Cursor { list: self, node }
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, Writer> {
        ataman_testkit::lock::lock(&self.writer)
    }
}

/// A position in a [`SkipList`]: an entry, or past the end.
#[derive(Clone, Copy)]
pub struct Cursor<'a> {
    list: &'a SkipList,
    node: *const Node,
}

// SAFETY: a cursor only reads published nodes of a list that is `Sync`, and
// the borrow keeps that list alive; which thread reads them does not matter.
unsafe impl Send for Cursor<'_> {}

impl<'a> Cursor<'a> {
    /// True when on an entry.
    pub fn valid(&self) -> bool {
        !self.node.is_null()
    }

    /// The entry's encoded internal key. Only while `valid()`.
    pub fn key(&self) -> &'a [u8] {
        assert!(self.valid(), "skip-list cursor read past the end");
        // SAFETY: a valid cursor is on a published node of a list that
        // lives for 'a; nodes are never freed before the list.
        unsafe { Node::key(self.node) }
    }

    /// The entry's value. Only while `valid()`.
    pub fn value(&self) -> &'a [u8] {
        assert!(self.valid(), "skip-list cursor read past the end");
        // SAFETY: as for `key`.
        unsafe { Node::value(self.node) }
    }

    /// Moves to the next entry (or past the end).
    pub fn advance(&mut self) {
        if self.valid() {
            // SAFETY: as for `key`; every node has a level-0 link.
            self.node = unsafe { Node::link(self.node, 0) }.load(AtomicOrdering::Acquire);
        }
    }

    /// The list this cursor walks.
    pub fn list(&self) -> &'a SkipList {
        self.list
    }
}

/// A height with P(h > k) = 4^-k, at most HEIGHT_MAX.
fn random_height(rng: &mut u64) -> usize {
    let mut x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    let mut height = 1;
    let mut bits = x;
    let mask = (1u64 << BRANCHING_BITS) - 1;
    while height < HEIGHT_MAX && bits & mask == 0 {
        height += 1;
        bits >>= BRANCHING_BITS;
    }
    height
}

/// The tag of an index hash kept in a node.
fn hash_tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// `n` null bucket links, from zeroed memory (a large array is then
/// zero pages the kernel hands out on first touch, not a memset on the
/// writer's thread at each memtable rotation).
fn zeroed_buckets(n: usize) -> Box<[AtomicPtr<Node>]> {
    let layout = match std::alloc::Layout::array::<AtomicPtr<Node>>(n) {
        Ok(layout) if layout.size() > 0 => layout,
        _ => return (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
    };
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicPtr<Node>>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: `p` is a fresh allocation of `n` `AtomicPtr`s by the global
    // allocator with the layout `Box<[AtomicPtr<Node>]>` frees with, and
    // all-zero bytes are a valid (null) `AtomicPtr`.
    unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) }
}

#[cfg(test)]
thread_local! {
    /// The planted bug of the point index's negative control: a key's new
    /// first node does not take its old first node's place in the index
    /// (reads land on the old one and miss the newer version).
    static PLANTED_STALE_INDEX: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Plants (or takes out) the stale-index bug for inserts made by this
/// thread: the negative control of the point index's model tests.
#[cfg(test)]
pub(crate) fn plant_stale_index(on: bool) {
    PLANTED_STALE_INDEX.set(on);
}

/// True while this thread plants the stale-index bug (tests only).
fn planted_stale_index() -> bool {
    #[cfg(test)]
    return PLANTED_STALE_INDEX.get();
    #[cfg(not(test))]
    false
}

/// Allocates and fills a node (links left for the caller).
fn alloc_node(
    arena: &mut Arena,
    height: usize,
    ikey: &[u8],
    value: &[u8],
    hash_tag: u32,
) -> *const Node {
    let links_bytes = height * LINK_BYTES;
    let bytes = NODE_HEADER_BYTES + links_bytes + ikey.len() + value.len();
    // Batches are validated against KEY_BYTES_MAX and VALUE_BYTES_MAX,
    // which fit a u32 (checked at compile time below), so these do not
    // truncate.
    debug_assert!(ikey.len() <= u32::MAX as usize && value.len() <= u32::MAX as usize);
    let key_len = ikey.len() as u32;
    let value_len = value.len() as u32;
    let node = arena.allocate(bytes).cast::<Node>();
    let (prefix_hi, prefix_lo) = if ikey.is_empty() {
        (0, 0)
    } else {
        prefix_words(key::user_key(ikey))
    };
    // SAFETY: the arena returned `bytes` writable, 8-byte-aligned bytes
    // (Node's alignment is 8), enough for the header, `height` links, the
    // key and the value, laid out in that order. Nothing else can see the
    // node yet.
    unsafe {
        node.write(Node {
            prefix_hi,
            prefix_lo,
            key_len,
            value_len,
            height: height as u32,
            hash_tag,
            hash_next: AtomicPtr::new(ptr::null_mut()),
        });
        let links = Node::links(node).cast_mut();
        for level in 0..height {
            links.add(level).write(AtomicPtr::new(ptr::null_mut()));
        }
        let key_at = links.add(height).cast::<u8>();
        ptr::copy_nonoverlapping(ikey.as_ptr(), key_at, ikey.len());
        ptr::copy_nonoverlapping(value.as_ptr(), key_at.add(ikey.len()), value.len());
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Kind;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    /// The internal keys of a model, in `compare_internal` order.
    #[derive(Clone, PartialEq, Eq)]
    struct Ik(Vec<u8>);
    impl Ord for Ik {
        fn cmp(&self, other: &Self) -> Ordering {
            key::compare_internal(&self.0, &other.0)
        }
    }
    impl PartialOrd for Ik {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }

    fn collect(list: &SkipList) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut c = list.first();
        while c.valid() {
            out.push((c.key().to_vec(), c.value().to_vec()));
            c.advance();
        }
        out
    }

    fn user_key_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            // Short keys over a tiny alphabet: many shared prefixes and
            // many versions of one key.
            proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(0xff)], 0..4),
            // Keys around the inline prefix's length.
            proptest::collection::vec(any::<u8>(), 14..19),
            proptest::collection::vec(any::<u8>(), 0..40),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 64 }))]

        /// Iteration and seeks agree with a BTreeMap ordered by
        /// `compare_internal`, for any keys, timestamps and values.
        #[test]
        fn matches_a_sorted_model(
            entries in proptest::collection::vec(
                (user_key_strategy(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..20)),
                0..300,
            ),
            seeks in proptest::collection::vec((user_key_strategy(), any::<u64>()), 0..40),
        ) {
            let list = SkipList::new();
            let mut model = BTreeMap::new();
            for (i, (user, ts, value)) in entries.iter().enumerate() {
                let kind = if i % 5 == 0 { Kind::Delete } else { Kind::Put };
                let ikey = key::internal_key(user, *ts, i as u64 + 1, kind);
                let bytes = list.insert(&ikey, value);
                prop_assert!(bytes >= NODE_HEADER_BYTES + 8 + ikey.len() + value.len());
                model.insert(Ik(ikey), value.clone());
            }
            prop_assert_eq!(list.len(), model.len());
            let expected: Vec<(Vec<u8>, Vec<u8>)> =
                model.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect();
            prop_assert_eq!(collect(&list), expected);
            for (user, ts) in seeks {
                let target = key::internal_key(&user, ts, 0, Kind::Put);
                let c = list.seek(&target);
                let want = model.range(Ik(target.clone())..).next();
                match want {
                    Some((k, v)) => {
                        prop_assert!(c.valid());
                        prop_assert_eq!(c.key(), &k.0[..]);
                        prop_assert_eq!(c.value(), &v[..]);
                    }
                    None => prop_assert!(!c.valid()),
                }
                let c = list.seek(&key::seek_key(&user));
                let want = model.range(Ik(key::seek_key(&user))..).next();
                prop_assert_eq!(c.valid().then(|| c.key().to_vec()), want.map(|(k, _)| k.0.clone()));
            }
        }
    }

    /// A node's prefix-first comparison with a probe is exactly
    /// compare_internal's order, for keys
    /// shorter and longer than the prefix, sharing it, or padded with zeros.
    #[test]
    fn prefix_order_is_internal_order() {
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
        let mut arena = Arena::new();
        for a in &keys {
            let node = alloc_node(&mut arena, 1, a, b"", 0);
            for b in &keys {
                // SAFETY: `node` was written whole and `arena` is alive.
                let got = unsafe { compare(node, &Probe::new(b)) };
                assert_eq!(got, key::compare_internal(a, b), "{a:?} vs {b:?}");
            }
        }
    }

    /// Heights follow the branching factor: about 3/4 of nodes have one
    /// level, none more than HEIGHT_MAX.
    #[test]
    fn heights_are_geometric() {
        let mut rng = 1u64;
        let mut counts = [0usize; HEIGHT_MAX + 1];
        for _ in 0..100_000 {
            counts[random_height(&mut rng)] += 1;
        }
        assert_eq!(counts[0], 0);
        let one = counts[1] as f64 / 100_000.0;
        assert!((0.73..0.77).contains(&one), "share of height 1: {one}");
        let two = counts[2] as f64 / 100_000.0;
        assert!((0.17..0.21).contains(&two), "share of height 2: {two}");
    }

    /// Readers walking and seeking while the writer inserts always see a
    /// sorted list whose entries are all ones that were inserted, with
    /// their own values, and end by seeing all of them.
    #[test]
    fn readers_see_a_consistent_list_during_inserts() {
        // Miri (which checks this file's unsafe code) is ~1000x slower.
        const N: u64 = if cfg!(miri) { 300 } else { 20_000 };
        let list = Arc::new(SkipList::new());
        let done = Arc::new(AtomicBool::new(false));
        let value_of = |i: u64| (i * 7).to_le_bytes().to_vec();
        let key_of = |i: u64| {
            let user = format!("{:08}", (i * 7919) % N);
            key::internal_key(user.as_bytes(), i, i + 1, Kind::Put)
        };
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let list = Arc::clone(&list);
                let done = Arc::clone(&done);
                std::thread::spawn(move || {
                    let mut passes = 0u64;
                    loop {
                        let finished = done.load(AtomicOrdering::Acquire);
                        let mut c = if passes.is_multiple_of(2) {
                            list.first()
                        } else {
                            list.seek(&key::seek_key(format!("{:08}", passes * 13 % N).as_bytes()))
                        };
                        let mut last: Option<Vec<u8>> = None;
                        let mut seen = 0u64;
                        while c.valid() {
                            let k = c.key();
                            let parsed = key::parse_internal_key(k).expect("well-formed key");
                            let i = parsed.ts;
                            assert_eq!(k, &key_of(i)[..], "reader {r}");
                            assert_eq!(c.value(), &value_of(i)[..], "reader {r}");
                            if let Some(prev) = &last {
                                assert_eq!(key::compare_internal(prev, k), Ordering::Less);
                            }
                            last = Some(k.to_vec());
                            seen += 1;
                            c.advance();
                        }
                        passes += 1;
                        if finished {
                            if !passes.is_multiple_of(2) {
                                assert_eq!(seen, N, "a full pass after the writer ended");
                            }
                            if passes > 2 {
                                return passes;
                            }
                        }
                    }
                })
            })
            .collect();
        for i in 0..N {
            list.insert(&key_of(i), &value_of(i));
        }
        done.store(true, AtomicOrdering::Release);
        for r in readers {
            assert!(r.join().expect("reader panicked") > 2);
        }
        assert_eq!(list.len() as u64, N);
    }
}
