//! The memtable's bump allocator: nodes are carved out of large chunks and
//! freed all at once when the memtable is dropped.
//!
//! A memtable never deletes an entry, so per-entry `malloc`/`free` buys
//! nothing: a bump pointer makes an insert's allocation a few instructions,
//! and dropping a full 64 MiB memtable frees a few dozen chunks instead of
//! a million small blocks (which took tens of milliseconds on whatever
//! thread happened to drop the last reference).
//!
//! # Invariants
//! - Every returned pointer is 8-byte aligned and valid for the requested
//!   size until the arena is dropped; chunks never move (each is its own
//!   heap allocation, and the list of them only grows).
//! - Memory handed out is not initialised; the caller writes it before
//!   anything reads it.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};

/// Bytes of an ordinary chunk: one transparent huge page.
const CHUNK_BYTES: usize = 2 * 1024 * 1024;

/// Requests above this get a chunk of their own, so a large value does not
/// waste the rest of an ordinary chunk: what a request that does not fit
/// leaves unused of a chunk is at most this, 1/16 of it.
const OWN_CHUNK_ABOVE_BYTES: usize = CHUNK_BYTES / 16;

/// Alignment of every allocation.
pub const ALIGN: usize = 8;

/// A bump allocator over 8-byte-aligned chunks.
pub struct Arena {
    /// Every chunk, in allocation order; freed together on drop.
    chunks: Vec<(*mut u8, Layout)>,
    /// Next free byte of the current chunk.
    cursor: *mut u8,
    /// Bytes left in the current chunk after `cursor`.
    left: usize,
    /// Bytes handed out, alignment padding included.
    used: usize,
    /// Bytes of all chunks.
    reserved: usize,
}

// SAFETY: the arena owns its chunks; `cursor` points into the last of them
// and is only used by whoever holds the arena mutably. Moving the arena to
// another thread moves that ownership with it.
unsafe impl Send for Arena {}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Arena {
    /// An empty arena (no chunk yet).
    pub fn new() -> Self {
        Arena {
            chunks: Vec::new(),
            cursor: std::ptr::null_mut(),
            left: 0,
            used: 0,
            reserved: 0,
        }
    }

    /// `bytes` of uninitialised memory, 8-byte aligned, valid until the
    /// arena is dropped.
    pub fn allocate(&mut self, bytes: usize) -> *mut u8 {
        // Zero bytes still get a distinct, valid, aligned address.
        let rounded = bytes.max(1).div_ceil(ALIGN) * ALIGN;
        self.used += rounded;
        if rounded > OWN_CHUNK_ABOVE_BYTES {
            return self.new_chunk(rounded);
        }
        if rounded > self.left {
            self.cursor = self.new_chunk(CHUNK_BYTES);
            self.left = CHUNK_BYTES;
        }
        let out = self.cursor;
        // SAFETY: `rounded <= left`, so the result stays inside the current
        // chunk (or one past its end when it is used up exactly).
        self.cursor = unsafe { self.cursor.add(rounded) };
        self.left -= rounded;
        out
    }

    /// Bytes handed out so far (with alignment padding).
    pub fn used(&self) -> usize {
        self.used
    }

    /// Bytes of memory the arena holds.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// A new chunk of `bytes`. Ordinary chunks are aligned to their size
    /// and offered to the kernel as a huge page: a skip-list search visits
    /// nodes all over the memtable, and with 4 KiB pages nearly every visit
    /// of a large memtable was a TLB miss.
    fn new_chunk(&mut self, bytes: usize) -> *mut u8 {
        let align = if bytes == CHUNK_BYTES {
            CHUNK_BYTES
        } else {
            ALIGN
        };
        let Ok(layout) = Layout::from_size_align(bytes.max(ALIGN), align) else {
            // Only for a size near usize::MAX, which no key or value has.
            panic!("memtable arena: no layout for {bytes} bytes");
        };
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            handle_alloc_error(layout);
        }
        #[cfg(not(miri))]
        if align == CHUNK_BYTES {
            // SAFETY: `ptr` starts a mapping of `bytes` we own; the advice
            // changes only how the kernel backs it. Failure (no THP support)
            // leaves ordinary pages, which is fine.
            unsafe { libc::madvise(ptr.cast(), bytes, libc::MADV_HUGEPAGE) };
        }
        self.reserved += layout.size();
        self.chunks.push((ptr, layout));
        ptr
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for &(ptr, layout) in &self.chunks {
            // SAFETY: each chunk was allocated with exactly this layout and
            // is freed once; nothing points into the arena after it drops
            // (its owner, the skip list, is being dropped).
            unsafe { dealloc(ptr, layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocations are aligned, do not overlap, and keep what was written
    /// into them while later allocations (small, and chunk-sized) come.
    #[test]
    fn allocations_are_aligned_disjoint_and_stable() {
        let mut arena = Arena::new();
        let sizes = [
            0usize,
            1,
            7,
            8,
            9,
            100,
            4096,
            OWN_CHUNK_ABOVE_BYTES + 1,
            3,
            CHUNK_BYTES,
            17,
        ];
        // Under Miri (which checks this file's unsafe code) every byte
        // costs a thousand times more: one round, the large sizes left out.
        let (rounds, sizes) = if cfg!(miri) {
            (1u8, &sizes[..6])
        } else {
            (50u8, &sizes[..])
        };
        let mut blocks: Vec<(*mut u8, usize, u8)> = Vec::new();
        for round in 0..rounds {
            for (i, &size) in sizes.iter().enumerate() {
                let p = arena.allocate(size);
                assert_eq!(p as usize % ALIGN, 0);
                let fill = round.wrapping_mul(31).wrapping_add(i as u8);
                // SAFETY: `p` is valid for `size` bytes (the arena's contract).
                unsafe { std::ptr::write_bytes(p, fill, size) };
                blocks.push((p, size, fill));
            }
        }
        let mut spans: Vec<(usize, usize)> = blocks
            .iter()
            .map(|&(p, s, _)| (p as usize, p as usize + s))
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {w:?}");
        }
        for &(p, size, fill) in &blocks {
            // SAFETY: as above; the arena is still alive.
            let bytes = unsafe { std::slice::from_raw_parts(p, size) };
            assert!(bytes.iter().all(|&b| b == fill));
        }
        assert!(arena.used() <= arena.reserved());
        let requested: usize = blocks.iter().map(|b| b.1).sum();
        assert!(arena.used() >= requested);
    }
}
