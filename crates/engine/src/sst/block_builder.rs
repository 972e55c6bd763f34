//! Builds one data or index block.
//!
//! `docs/FORMAT.md`, "SSTable: data block":
//!
//! ```text
//! block   := entry* restart* restart_count
//! entry   := shared: varint, unshared: varint, value_len: varint,
//!            key_delta: unshared bytes, value: value_len bytes
//! restart := u32 LE byte offset of an entry whose shared == 0
//! restart_count := u32 LE, at least 1
//! ```
//!
//! Each key is stored as the number of bytes it shares with the previous
//! key plus the rest. Every `restart_interval` entries the key is stored in
//! full (shared = 0) and its offset is recorded, so a reader can binary
//! search the restart points and then scan at most `restart_interval`
//! entries.

use crate::coding;
use crate::key;
use std::cmp::Ordering;

/// Bytes of one restart point and of the restart count ("SSTable: data block").
pub const RESTART_BYTES: usize = 4;

/// Upper bound of an entry's header: three varints of lengths below 2^32.
pub const ENTRY_HEADER_BYTES_MAX: usize = 3 * 5;

/// Accumulates sorted entries into the bytes of one block.
///
/// # Invariants
/// Keys are added in strictly increasing internal order; `restarts` is
/// never empty and starts with 0; `counter < restart_interval`.
#[derive(Debug)]
pub struct BlockBuilder {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    counter: usize,
    entries: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// An empty block with a restart point every `restart_interval` keys (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buffer: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            entries: 0,
            last_key: Vec::new(),
        }
    }

    /// Appends an entry. `ikey` must follow the previous key in internal order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) {
        debug_assert!(
            self.entries == 0 || key::compare_internal(&self.last_key, ikey) == Ordering::Less,
            "block keys out of order"
        );
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(ikey)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            self.restarts.push(self.offset_u32());
            self.counter = 0;
            0
        };
        let unshared = ikey.len() - shared;
        coding::put_varint(&mut self.buffer, shared as u64);
        coding::put_varint(&mut self.buffer, unshared as u64);
        coding::put_varint(&mut self.buffer, value.len() as u64);
        self.buffer.extend_from_slice(&ikey[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&ikey[shared..]);
        debug_assert_eq!(self.last_key, ikey);
        self.counter += 1;
        self.entries += 1;
    }

    fn offset_u32(&self) -> u32 {
        // The table builder closes blocks before BLOCK_BYTES_MAX (< 4 GiB).
        u32::try_from(self.buffer.len()).unwrap_or(u32::MAX)
    }

    /// Bytes the block would take if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buffer.len() + (self.restarts.len() + 1) * RESTART_BYTES
    }

    /// Upper bound of the bytes adding this entry would add to the block.
    pub fn entry_bytes_max(ikey: &[u8], value: &[u8]) -> usize {
        ENTRY_HEADER_BYTES_MAX + ikey.len() + value.len() + RESTART_BYTES
    }

    /// True when no entry was added since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Entries in the block being built.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the block's bytes; the builder
    /// is empty again afterwards.
    pub fn finish(&mut self) -> Vec<u8> {
        assert!(!self.is_empty(), "finishing an empty block");
        assert!(self.buffer.len() < u32::MAX as usize);
        let mut out = std::mem::take(&mut self.buffer);
        out.reserve_exact((self.restarts.len() + 1) * RESTART_BYTES);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        let count = u32::try_from(self.restarts.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&count.to_le_bytes());
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.entries = 0;
        self.last_key.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Kind, internal_key};

    /// Keys sharing a prefix are delta-encoded, and a restart is taken every interval.
    #[test]
    fn prefix_compression_and_restarts() {
        let mut b = BlockBuilder::new(2);
        let k1 = internal_key(b"apple", 1, 1, Kind::Put);
        let k2 = internal_key(b"apricot", 1, 2, Kind::Put);
        let k3 = internal_key(b"avocado", 1, 3, Kind::Put);
        b.add(&k1, b"1");
        b.add(&k2, b"");
        b.add(&k3, b"333");
        assert_eq!(b.last_key(), &k3[..]);
        let estimate = b.size_estimate();
        let block = b.finish();
        assert_eq!(block.len(), estimate);
        assert!(b.is_empty());
        // First entry: shared 0, full key.
        assert_eq!(&block[..3], &[0, k1.len() as u8, 1]);
        // Second entry shares "ap".
        let second = 3 + k1.len() + 1;
        assert_eq!(&block[second..second + 3], &[2, (k2.len() - 2) as u8, 0]);
        // Two restarts: offset 0 and the third entry.
        let n = block.len();
        assert_eq!(&block[n - 4..], &2u32.to_le_bytes());
        assert_eq!(&block[n - 12..n - 8], &0u32.to_le_bytes());
        let third =
            u32::from_le_bytes([block[n - 8], block[n - 7], block[n - 6], block[n - 5]]) as usize;
        assert_eq!(block[third], 0, "restart entries store the full key");
    }
}
