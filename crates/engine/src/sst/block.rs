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
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    entries_end: usize,
    restarts: Vec<u32>,
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
        Ok(Block {
            data,
            entries_end,
            restarts,
            path,
            offset,
        })
    }

    /// The decoded bytes (entries, restart array and count).
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Bytes of the decoded block (what the cache charges for it).
    pub fn size_bytes(&self) -> usize {
        self.data.len()
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

    /// Decodes the entry header at `at`: (shared, key delta range, value range).
    fn entry_at(&self, at: usize) -> Result<(usize, Range<usize>, Range<usize>)> {
        let region = self.data.get(at..self.entries_end).unwrap_or(&[]);
        // Fast path: all three lengths below 128, one byte each (a data
        // block's keys and small values, every index entry).
        let (shared, unshared, value_len, header_bytes) = match *region {
            [s, u, v, ..] if (s | u | v) < 0x80 => {
                (usize::from(s), usize::from(u), usize::from(v), 3)
            }
            _ => {
                let mut cursor = region;
                let bad = || self.malformed(format!("bad entry header at block byte {at}"));
                let shared = coding::get_len(&mut cursor, BLOCK_BYTES_MAX).ok_or_else(bad)?;
                let unshared = coding::get_len(&mut cursor, BLOCK_BYTES_MAX).ok_or_else(bad)?;
                let value_len = coding::get_len(&mut cursor, BLOCK_BYTES_MAX).ok_or_else(bad)?;
                (shared, unshared, value_len, region.len() - cursor.len())
            }
        };
        // No overflow: `at` < BLOCK_BYTES_MAX and each length <= BLOCK_BYTES_MAX.
        let key_start = at + header_bytes;
        let value_start = key_start + unshared;
        let value_end = value_start + value_len;
        if value_end > self.entries_end {
            return Err(self.malformed(format!(
                "entry at block byte {at} ends at {value_end}, past {}",
                self.entries_end
            )));
        }
        Ok((shared, key_start..value_start, value_start..value_end))
    }
}

/// A cursor over one block's entries.
///
/// # Invariants
/// When valid, `key` is the full key of the entry at `current`, which
/// lies in restart region `restart_index`, and `next` is the offset of the
/// following entry.
pub struct BlockIter {
    block: Arc<Block>,
    current: usize,
    next: usize,
    restart_index: usize,
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
        BlockIter {
            block,
            current: 0,
            next: 0,
            restart_index: 0,
            key: Vec::new(),
            whole_key: 0..0,
            value: 0..0,
            valid: false,
        }
    }

    /// The block iterated.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    fn restart_point(&self, i: usize) -> usize {
        self.block.restarts.get(i).copied().unwrap_or(0) as usize
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next = self.restart_point(i);
        self.valid = false;
    }

    /// Decodes the entry at `self.next`; invalid (not an error) at the end.
    fn parse_next(&mut self) -> Result<()> {
        self.valid = false;
        if self.next >= self.block.entries_end {
            return Ok(());
        }
        let at = self.next;
        let (shared, delta, value) = self.block.entry_at(at)?;
        while self.restart_index + 1 < self.block.restarts.len()
            && self.restart_point(self.restart_index + 1) <= at
        {
            self.restart_index += 1;
        }
        let is_restart = self.restart_point(self.restart_index) == at;
        if shared > self.key.len() || (is_restart && shared != 0) {
            return Err(self.block.malformed(format!(
                "entry at block byte {at} shares {shared} bytes of a {}-byte key",
                if is_restart { 0 } else { self.key.len() }
            )));
        }
        self.key.truncate(shared);
        self.key
            .extend_from_slice(self.block.data.get(delta.clone()).unwrap_or(&[]));
        self.whole_key = if shared == 0 { delta } else { 0..0 };
        if !key::is_internal_key(&self.key) {
            return Err(self.block.malformed(format!(
                "entry at block byte {at} has no valid internal key"
            )));
        }
        self.current = at;
        self.next = value.end;
        self.value = value;
        self.valid = true;
        Ok(())
    }

    /// The full key stored at restart point `i`.
    fn restart_key(&self, i: usize) -> Result<&[u8]> {
        let at = self.restart_point(i);
        let (shared, delta, _) = self.block.entry_at(at)?;
        if shared != 0 {
            return Err(self.block.malformed(format!(
                "restart entry at block byte {at} shares {shared} bytes"
            )));
        }
        Ok(self.block.data.get(delta).unwrap_or(&[]))
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
        self.seek_by(|k| key::user_key(k) < user_key)
    }

    /// Positions at the first entry whose key is not `below` the target;
    /// `below` must be monotone in key order (true, then false).
    fn seek_by(&mut self, below: impl Fn(&[u8]) -> bool) -> Result<()> {
        // Last restart point whose key is below the target.
        let (mut left, mut right) = (0usize, self.block.restarts.len() - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let is_below = match self.restart_key(mid) {
                Ok(k) => below(k),
                Err(e) => return self.fail(e),
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
        self.seek_by(|k| key::compare_internal(k, target) == Ordering::Less)
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
