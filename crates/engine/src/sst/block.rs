//! Reads one data or index block (format: [`super::block_builder`],
//! `docs/FORMAT.md`, "SSTable: data block").
//!
//! A [`Block`] owns its decoded (decompressed, checksum-verified) bytes and
//! validates the restart array when it is built. Entries are decoded
//! lazily by [`BlockIter`]; every malformed entry (bad varint, `shared`
//! longer than the previous key, lengths past the entry region, a key that
//! is not an internal key) becomes a [`CorruptionKind::Malformed`] naming
//! the block's file and offset, never a panic.

use super::block_builder::RESTART_BYTES;
use super::block_io::BLOCK_BYTES_MAX;
use super::restarts::{Probe, Restarts};
use crate::coding;
use crate::error::{CorruptionKind, Error, Result};
use crate::iter::InternalIterator;
use crate::key;
use std::cmp::Ordering;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

/// A decoded block.
///
/// # Invariants
/// `restarts` is non-empty, starts at 0, strictly increases, and every
/// restart is below `entries_end` (the start of the restart array).
///
/// # Thread safety
/// Immutable; shared through `Arc` by the cache and iterators.
///
/// `repr(C)` keeps the restart table first, next to the `Arc`'s reference
/// counts: the cache hit that increments them brings the fingerprints a
/// point read searches next into the same cache lines.
#[derive(Debug)]
#[repr(C)]
pub struct Block {
    restarts: Restarts,
    entries_end: usize,
    data: Vec<u8>,
    path: Arc<Path>,
    offset: u64,
}

impl Block {
    /// Validates the restart array of `data`, the block at `offset` in `path`.
    pub fn new(data: Vec<u8>, path: Arc<Path>, offset: u64) -> Result<Block> {
        let malformed =
            |msg: String| Error::corruption(&*path, offset, CorruptionKind::Malformed(msg));
        if data.len() > BLOCK_BYTES_MAX {
            return Err(malformed(format!("block of {} bytes", data.len())));
        }
        let Some(count_at) = data.len().checked_sub(RESTART_BYTES) else {
            return Err(Error::corruption(
                &*path,
                offset,
                CorruptionKind::Truncated {
                    needed: RESTART_BYTES as u64,
                    available: data.len() as u64,
                },
            ));
        };
        let mut cursor = &data[count_at..];
        let count = coding::get_u32_le(&mut cursor).unwrap_or(0) as usize;
        if count == 0 || count > count_at / RESTART_BYTES {
            return Err(malformed(format!(
                "restart count {count} does not fit a block of {} bytes",
                data.len()
            )));
        }
        let entries_end = count_at - count * RESTART_BYTES;
        let mut cursor = &data[entries_end..count_at];
        let mut restarts = Vec::with_capacity(count);
        for i in 0..count {
            let r = coding::get_u32_le(&mut cursor).unwrap_or(u32::MAX);
            let in_order = match restarts.last() {
                None => r == 0,
                Some(&prev) => r > prev,
            };
            if !in_order || r as usize >= entries_end {
                return Err(malformed(format!(
                    "restart {i} at {r} out of order or past entries ending at {entries_end}"
                )));
            }
            restarts.push(r);
        }
        let restarts = Restarts::new(restarts, |at| {
            let h = entry_header(&data, entries_end, at)?;
            let key = data.get(h.key_start..h.value_start)?;
            (h.shared == 0 && key::is_internal_key(key)).then(|| key::user_key(key))
        });
        Ok(Block {
            restarts,
            entries_end,
            data,
            path,
            offset,
        })
    }

    /// The decoded bytes (entries, restart array and count).
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Bytes the decoded block holds (what the cache charges for it): its
    /// data, the struct with its inline restart table, and any restarts
    /// spilled to the heap.
    pub fn size_bytes(&self) -> usize {
        self.data.len() + std::mem::size_of::<Block>() + self.restarts.heap_bytes()
    }

    /// Offset of the block in its file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The file the block came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn malformed(&self, msg: String) -> Error {
        Error::corruption(&*self.path, self.offset, CorruptionKind::Malformed(msg))
    }

    /// The entry header at `at`, checked to end inside the entry region;
    /// `None` if it is malformed ([`Block::entry_error`] says how).
    #[inline(always)]
    fn entry_header(&self, at: usize) -> Option<EntryHeader> {
        entry_header(&self.data, self.entries_end, at)
    }

    /// Why the entry header at `at` did not decode (off the hot path).
    #[cold]
    #[inline(never)]
    fn entry_error(&self, at: usize) -> Error {
        let mut cursor = self.data.get(at..self.entries_end).unwrap_or(&[]);
        let lengths = [(); 3].map(|()| coding::get_len(&mut cursor, BLOCK_BYTES_MAX));
        match lengths {
            [Some(_), Some(u), Some(v)] => {
                let end = self.entries_end - cursor.len() + u + v;
                self.malformed(format!(
                    "entry at block byte {at} ends at {end}, past {}",
                    self.entries_end
                ))
            }
            _ => self.malformed(format!("bad entry header at block byte {at}")),
        }
    }
}

/// The header of the entry at `at` in `data`, whose entries end at
/// `entries_end`, checked to end inside the entry region; `None` if it is
/// malformed.
#[inline(always)]
fn entry_header(data: &[u8], entries_end: usize, at: usize) -> Option<EntryHeader> {
    let region = data.get(at..entries_end)?;
    // Fast path: all three lengths below 128, one byte each (a data
    // block's keys and small values, every index entry).
    let (shared, unshared, value_len, header_bytes) = match *region {
        [s, u, v, ..] if (s | u | v) < 0x80 => (usize::from(s), usize::from(u), usize::from(v), 3),
        _ => {
            let mut cursor = region;
            let shared = coding::get_len(&mut cursor, BLOCK_BYTES_MAX)?;
            let unshared = coding::get_len(&mut cursor, BLOCK_BYTES_MAX)?;
            let value_len = coding::get_len(&mut cursor, BLOCK_BYTES_MAX)?;
            (shared, unshared, value_len, region.len() - cursor.len())
        }
    };
    // No overflow: `at` < BLOCK_BYTES_MAX and each length <= BLOCK_BYTES_MAX.
    let key_start = at + header_bytes;
    let value_start = key_start + unshared;
    let value_end = value_start + value_len;
    (value_end <= entries_end).then_some(EntryHeader {
        shared,
        key_start,
        value_start,
        value_end,
    })
}

/// An entry's header, decoded: the entry's key delta is
/// `key_start..value_start` and its value `value_start..value_end`.
#[derive(Debug, Clone, Copy)]
struct EntryHeader {
    shared: usize,
    key_start: usize,
    value_start: usize,
    value_end: usize,
}

/// A cursor over one block's entries.
///
/// # Invariants
/// When valid, `key` is the full key of the entry at `current`, which
/// lies in restart region `restart_index` (the entries from byte
/// `region_start` to `region_end`), and `next` is the offset of the
/// following entry.
pub struct BlockIter {
    block: Arc<Block>,
    current: usize,
    next: usize,
    restart_index: usize,
    region_start: usize,
    region_end: usize,
    key: Vec<u8>,
    /// Where the current key lies in the block when it is stored whole
    /// (shared == 0); empty otherwise.
    whole_key: Range<usize>,
    value: Range<usize>,
    valid: bool,
}

impl BlockIter {
    /// An unpositioned iterator over `block`.
    pub fn new(block: Arc<Block>) -> Self {
        Self::with_key_buffer(block, Vec::new())
    }

    /// An unpositioned iterator over `block` that builds keys in `key`
    /// (cleared first): a point read lends it a buffer it reuses, so the
    /// seek allocates nothing. [`BlockIter::into_key_buffer`] hands it back.
    pub fn with_key_buffer(block: Arc<Block>, mut key: Vec<u8>) -> Self {
        key.clear();
        BlockIter {
            block,
            current: 0,
            next: 0,
            restart_index: 0,
            region_start: 0,
            region_end: 0,
            key,
            whole_key: 0..0,
            value: 0..0,
            valid: false,
        }
    }

    /// The key buffer, for the next [`BlockIter::with_key_buffer`].
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// The block iterated.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    fn restart_point(&self, i: usize) -> usize {
        self.block.restarts.offsets().get(i).copied().unwrap_or(0) as usize
    }

    /// Where restart region `i` ends: the next restart, or the entries' end.
    fn region_end_of(&self, i: usize) -> usize {
        match self.block.restarts.offsets().get(i + 1) {
            Some(&r) => r as usize,
            None => self.block.entries_end,
        }
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.region_start = self.restart_point(i);
        self.region_end = self.region_end_of(i);
        self.next = self.region_start;
        self.valid = false;
    }

    /// Decodes the entry at `self.next`; invalid (not an error) at the end.
    fn parse_next(&mut self) -> Result<()> {
        self.valid = false;
        let at = self.next;
        if at >= self.block.entries_end {
            return Ok(());
        }
        let Some(h) = self.block.entry_header(at) else {
            return Err(self.block.entry_error(at));
        };
        // Bounded by the restarts: each pass moves to the next region.
        while at >= self.region_end && self.restart_index + 1 < self.block.restarts.count() {
            self.restart_index += 1;
            self.region_start = self.region_end;
            self.region_end = self.region_end_of(self.restart_index);
        }
        let is_restart = at == self.region_start;
        if h.shared > self.key.len() || (is_restart && h.shared != 0) {
            return Err(self.shared_error(at, h.shared, is_restart));
        }
        let delta = h.key_start..h.value_start;
        self.key.truncate(h.shared);
        self.key
            .extend_from_slice(self.block.data.get(delta.clone()).unwrap_or(&[]));
        self.whole_key = if h.shared == 0 { delta } else { 0..0 };
        if !key::is_internal_key(&self.key) {
            return Err(self.block.malformed(format!(
                "entry at block byte {at} has no valid internal key"
            )));
        }
        self.current = at;
        self.next = h.value_end;
        self.value = h.value_start..h.value_end;
        self.valid = true;
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn shared_error(&self, at: usize, shared: usize, is_restart: bool) -> Error {
        self.block.malformed(format!(
            "entry at block byte {at} shares {shared} bytes of a {}-byte key",
            if is_restart { 0 } else { self.key.len() }
        ))
    }

    /// The full key stored at restart point `i`.
    fn restart_key(&self, i: usize) -> Result<&[u8]> {
        let at = self.restart_point(i);
        match self.block.entry_header(at) {
            Some(h) if h.shared == 0 => Ok(self
                .block
                .data
                .get(h.key_start..h.value_start)
                .unwrap_or(&[])),
            Some(h) => Err(self.block.malformed(format!(
                "restart entry at block byte {at} shares {} bytes",
                h.shared
            ))),
            None => Err(self.block.entry_error(at)),
        }
    }

    /// Where the current entry's key lies in [`Block::data`], if it is
    /// stored whole (no prefix shared with the previous key, as in every
    /// index entry); `None` if invalid or prefix-compressed.
    pub fn whole_key_range(&self) -> Option<Range<usize>> {
        (self.valid && !self.whole_key.is_empty()).then(|| self.whole_key.clone())
    }

    /// Where the current entry's value lies in [`Block::data`]; `None` if invalid.
    pub fn value_range(&self) -> Option<Range<usize>> {
        self.valid.then(|| self.value.clone())
    }

    /// Positions at the newest entry of `user_key` or, if it has none, the
    /// first entry after it: the same as seeking to [`key::seek_key`] of it,
    /// without building that key (an internal key sorts before the seek key
    /// exactly when its user key is smaller).
    pub fn seek_user_key(&mut self, user_key: &[u8]) -> Result<()> {
        self.seek_by(user_key, |k| key::user_key(k) < user_key)
    }

    /// Positions at the first entry whose key is not `below` the target;
    /// `below` must be monotone in key order (true, then false), true for
    /// every key whose user key is below `target_user_key` and false for
    /// every key whose user key is above it.
    fn seek_by(&mut self, target_user_key: &[u8], below: impl Fn(&[u8]) -> bool) -> Result<()> {
        // Last restart point whose key is below the target. The restart
        // table's fingerprints decide most probes without reading a
        // restart key (see `super::restarts`); a tie reads the key.
        let last = self.block.restarts.count() - 1;
        let probe = self.block.restarts.probe(target_user_key);
        let (mut left, mut right) = match probe {
            Probe::BelowAll => (0, 0),
            Probe::AboveAll => (last, last),
            Probe::Keys | Probe::Fingerprint(_) => (0, last),
        };
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let decided = match probe {
                Probe::Fingerprint(target) => match self.block.restarts.fingerprints().get(mid) {
                    Some(&f) if f != target => Some(f < target),
                    _ => None,
                },
                _ => None,
            };
            let is_below = match decided {
                Some(is_below) => is_below,
                None => match self.restart_key(mid) {
                    Ok(k) => below(k),
                    Err(e) => return self.fail(e),
                },
            };
            if is_below {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        // Each entry takes at least 3 bytes, so this scan is bounded by the block size.
        loop {
            if let Err(e) = self.parse_next() {
                return self.fail(e);
            }
            if !self.valid || !below(&self.key) {
                return Ok(());
            }
        }
    }

    fn fail<T>(&mut self, err: Error) -> Result<T> {
        self.valid = false;
        self.key.clear();
        Err(err)
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_restart(0);
        match self.parse_next() {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.seek_by(key::user_key(target), |k| {
            key::compare_internal(k, target) == Ordering::Less
        })
    }

    fn next(&mut self) -> Result<()> {
        assert!(self.valid, "next on an invalid block iterator");
        match self.parse_next() {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid);
        &self.key
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid);
        self.block.data.get(self.value.clone()).unwrap_or(&[])
    }
}
