//! Reads one SSTable (format: [`super::table_builder`], `docs/FORMAT.md`, "SSTable").
//!
//! Opening a table reads the footer, then the index and filter blocks,
//! which stay in memory for the table's life. Data blocks are read on
//! demand through the shared [`BlockCache`]. Every block is checksummed
//! before it is decoded, and every error names the file and the offset of
//! the block that failed.

use super::block::{Block, BlockIter};
use super::block_io::{self, BlockHandle};
use super::bloom::BloomFilter;
use super::cache::BlockCache;
use super::footer::{FOOTER_BYTES, Footer};
use crate::error::{CorruptionKind, Error, Result};
use crate::fs::ReadableFile;
use crate::iter::InternalIterator;
use crate::key;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

thread_local! {
    /// The key buffer of a point read's block seek, reused by every point
    /// read on this thread (taken while in use, so a nested read would just
    /// allocate its own).
    static POINT_READ_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// The newest entry of a user key in a table, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// Timestamp of the version.
    pub ts: key::Timestamp,
    /// Its sequence number.
    pub seq: u64,
    /// Put or delete.
    pub kind: key::Kind,
    /// The value (empty for a delete).
    pub value: Vec<u8>,
}

/// An open SSTable: footer, index and filter in memory, data blocks through the cache.
///
/// # Thread safety
/// Shared by readers (`Arc<Table>`); all methods take `&self`.
pub struct Table {
    file: Arc<dyn ReadableFile>,
    path: Arc<Path>,
    file_number: u64,
    cache: Arc<BlockCache>,
    index: Arc<Block>,
    /// The index decoded at open, for point reads (see [`IndexEntry`]).
    index_entries: Vec<IndexEntry>,
    /// The user-key prefix every index key shares ([`IndexEntry::fingerprint`]
    /// is taken after it).
    index_prefix: Vec<u8>,
    filter: BloomFilter,
    /// First byte of the filter block: data blocks end before it.
    data_end: u64,
}

impl Table {
    /// Opens a table: reads and verifies footer, index and filter.
    pub fn open(
        file: Arc<dyn ReadableFile>,
        path: PathBuf,
        file_number: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Arc<Table>> {
        let path: Arc<Path> = Arc::from(path);
        let file_bytes = file.len();
        let footer_at = file_bytes.checked_sub(FOOTER_BYTES as u64).ok_or_else(|| {
            Error::corruption(
                &*path,
                0,
                CorruptionKind::Truncated {
                    needed: FOOTER_BYTES as u64,
                    available: file_bytes,
                },
            )
        })?;
        let mut footer_bytes = [0u8; FOOTER_BYTES];
        file.read_exact_at(&mut footer_bytes, footer_at)
            .map_err(|e| Error::io(&*path, e))?;
        let footer =
            Footer::decode(&footer_bytes).map_err(|k| Error::corruption(&*path, footer_at, k))?;
        // The layout is data, filter, index, footer: check it before reading.
        let filter_end = footer.filter.end_with_trailer();
        let index_end = footer.index.end_with_trailer();
        if filter_end.is_none_or(|end| end > footer.index.offset) || index_end != Some(footer_at) {
            return Err(Error::corruption(
                &*path,
                footer_at,
                CorruptionKind::Malformed(format!(
                    "footer handles {:?} {:?} do not fit a {file_bytes}-byte file",
                    footer.filter, footer.index
                )),
            ));
        }
        let filter_bytes = block_io::read_block(&*file, &path, footer.filter)?;
        let filter = BloomFilter::decode(filter_bytes)
            .map_err(|k| Error::corruption(&*path, footer.filter.offset, k))?;
        let index_bytes = block_io::read_block(&*file, &path, footer.index)?;
        let index = Arc::new(Block::new(index_bytes, path.clone(), footer.index.offset)?);
        let (index_entries, index_prefix) = decode_index(&index, footer.filter.offset)?;
        Ok(Arc::new(Table {
            file,
            path,
            file_number,
            cache,
            index,
            index_entries,
            index_prefix,
            filter,
            data_end: footer.filter.offset,
        }))
    }

    /// False if the bloom filter proves `user_key` absent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.may_contain(user_key)
    }

    /// The first (newest) entry of `user_key`: encoded internal key and value.
    /// Consults the bloom filter first.
    pub fn get(&self, user_key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        self.find(user_key, |ikey, value| Ok((ikey.to_vec(), value.to_vec())))
    }

    /// [`Table::get`] without the bloom probe, for a caller that already
    /// called [`Table::may_contain`] (the filter probe costs a hash and a
    /// cache miss per probe position; a point read should pay it once).
    /// Returns the entry decoded, so the read path copies only the value.
    pub fn get_past_filter(&self, user_key: &[u8]) -> Result<Option<TableEntry>> {
        self.find(user_key, |ikey, value| {
            let parsed = key::parse_internal_key(ikey).ok_or_else(|| {
                Error::corruption(
                    &*self.path,
                    0,
                    CorruptionKind::Malformed("block iterator yielded an undecodable key".into()),
                )
            })?;
            Ok(TableEntry {
                ts: parsed.ts,
                seq: parsed.seq,
                kind: parsed.kind,
                value: value.to_vec(),
            })
        })
    }

    /// Finds the newest entry of `user_key` past the filter and hands its
    /// internal key and value to `found`. No allocation of its own: both
    /// seeks compare user keys in place (see [`BlockIter::seek_user_key`]).
    fn find<T>(
        &self,
        user_key: &[u8],
        found: impl FnOnce(&[u8], &[u8]) -> Result<T>,
    ) -> Result<Option<T>> {
        let first = self.first_block_not_below(user_key);
        let mut found = Some(found);
        // A well-formed table stops in the first block, whose last key is
        // at or after the target; bounded by the index's entries.
        for entry in self.index_entries.get(first..).unwrap_or(&[]) {
            let block = self.data_block_at(entry.handle, true)?;
            let mut data = BlockIter::with_key_buffer(block, POINT_READ_KEY.take());
            let result = data.seek_user_key(user_key).and_then(|()| {
                if !data.valid() {
                    return Ok(None);
                }
                if key::user_key(data.key()) != user_key {
                    return Ok(Some(None));
                }
                match found.take() {
                    Some(found) => found(data.key(), data.value()).map(|t| Some(Some(t))),
                    None => Ok(Some(None)),
                }
            });
            POINT_READ_KEY.set(data.into_key_buffer());
            if let Some(answer) = result? {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    /// The index of the first data block whose last user key is not below
    /// `user_key`: a binary search over the decoded index. Each step compares
    /// the 8-byte fingerprints and only on a tie the keys themselves, which
    /// sit whole in the index block.
    fn first_block_not_below(&self, user_key: &[u8]) -> usize {
        let index_data = self.index.data();
        let last_user_key = |e: &IndexEntry| {
            let start = e.key_start as usize;
            key::user_key(
                index_data
                    .get(start..start + e.key_len as usize)
                    .unwrap_or(&[]),
            )
        };
        let Some(rest) = user_key.strip_prefix(self.index_prefix.as_slice()) else {
            // Outside the range the prefix spans: plain comparisons.
            return self
                .index_entries
                .partition_point(|e| last_user_key(e) < user_key);
        };
        // `key::fingerprint` is monotone: a smaller fingerprint means a smaller
        // key, a larger one a larger key; only equal ones need the keys.
        let target = key::fingerprint(rest);
        self.index_entries.partition_point(|e| {
            e.fingerprint < target || (e.fingerprint == target && last_user_key(e) < user_key)
        })
    }

    /// An iterator over all entries.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        self.iter_filling(true)
    }

    /// An iterator over all entries that adds the blocks it reads to the
    /// cache only if `fill_cache`. It always uses the blocks the cache
    /// holds. A merge or a bulk scan passes false: such a pass reads each
    /// block once, and cached, those blocks would evict the ones point
    /// reads use.
    pub fn iter_filling(self: &Arc<Self>, fill_cache: bool) -> TableIter {
        TableIter {
            table: self.clone(),
            index: BlockIter::new(self.index.clone()),
            data: None,
            fill_cache,
        }
    }

    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The table's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes held in memory by the table itself (index and filter).
    pub fn memory_bytes(&self) -> usize {
        self.index.size_bytes()
            + self.index_entries.len() * std::mem::size_of::<IndexEntry>()
            + self.index_prefix.len()
            + self.filter.size_bytes()
    }

    /// The data block named by the index value `handle_bytes`, through
    /// the cache (added to it if `fill_cache`).
    fn data_block(&self, handle_bytes: &[u8], fill_cache: bool) -> Result<Arc<Block>> {
        let handle = decode_handle(handle_bytes, self.data_end)
            .ok_or_else(|| bad_handle(&self.path, self.index.offset()))?;
        self.data_block_at(handle, fill_cache)
    }

    /// The data block at `handle` (already checked to end before the
    /// filter) from the cache, or read (and added to the cache if
    /// `fill_cache`).
    fn data_block_at(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        if let Some(block) = self.cache.get(self.file_number, handle.offset) {
            return Ok(block);
        }
        let bytes = block_io::read_block(&*self.file, &self.path, handle)?;
        let block = Arc::new(Block::new(bytes, self.path.clone(), handle.offset)?);
        if fill_cache {
            self.cache
                .insert(self.file_number, handle.offset, block.clone());
        }
        Ok(block)
    }
}

/// One index entry decoded at open: where the block's last key lies in
/// the index block's bytes (index keys are stored whole,
/// [`INDEX_RESTART_INTERVAL`](super::table_builder::INDEX_RESTART_INTERVAL)
/// = 1), the block's handle, and a fingerprint of the key. 32 bytes per
/// data block, so a point read binary-searches integers and plain slices
/// instead of decoding index entries.
#[derive(Debug, Clone, Copy)]
struct IndexEntry {
    key_start: u32,
    key_len: u32,
    handle: BlockHandle,
    /// [`key::fingerprint`] of the last user key after the table's index prefix.
    fingerprint: u64,
}

/// A handle that decodes and ends (trailer included) at or before `data_end`.
fn decode_handle(bytes: &[u8], data_end: u64) -> Option<BlockHandle> {
    BlockHandle::decode_varint(bytes)
        .filter(|h| h.end_with_trailer().is_some_and(|end| end <= data_end))
}

fn bad_handle(path: &Path, index_offset: u64) -> Error {
    Error::corruption(
        path,
        index_offset,
        CorruptionKind::Malformed("index entry with a bad block handle".into()),
    )
}

/// Decodes every index entry once, checking what a point read relies on:
/// keys stored whole and strictly increasing, handles inside the data region.
/// Returns the entries and the user-key prefix they all share (that of the
/// first and the last key: every key between two sorted keys starts with
/// what they share).
fn decode_index(index: &Arc<Block>, data_end: u64) -> Result<(Vec<IndexEntry>, Vec<u8>)> {
    let malformed = |msg: &str| {
        Error::corruption(
            index.path(),
            index.offset(),
            CorruptionKind::Malformed(msg.into()),
        )
    };
    let mut entries = Vec::new();
    let mut it = BlockIter::new(index.clone());
    it.seek_to_first()?;
    let mut previous: Option<std::ops::Range<usize>> = None;
    // Bounded by the block's size: every entry takes at least 3 bytes.
    while it.valid() {
        let (Some(key), Some(value)) = (it.whole_key_range(), it.value_range()) else {
            return Err(malformed("index key shares a prefix"));
        };
        // The iterator checked both ranges against the block.
        let bytes = |r: std::ops::Range<usize>| index.data().get(r).unwrap_or(&[]);
        if let Some(prev) = previous
            && key::compare_internal(bytes(prev), bytes(key.clone())) != std::cmp::Ordering::Less
        {
            return Err(malformed("index keys out of order"));
        }
        let handle = decode_handle(bytes(value), data_end)
            .ok_or_else(|| bad_handle(index.path(), index.offset()))?;
        // Block offsets fit u32: a block is at most BLOCK_BYTES_MAX bytes.
        entries.push(IndexEntry {
            key_start: u32::try_from(key.start).map_err(|_| malformed("index key offset"))?,
            key_len: u32::try_from(key.len()).map_err(|_| malformed("index key length"))?,
            handle,
            fingerprint: 0,
        });
        previous = Some(key);
        it.next()?;
    }
    let user_key_of = |e: &IndexEntry| {
        let start = e.key_start as usize;
        key::user_key(
            index
                .data()
                .get(start..start + e.key_len as usize)
                .unwrap_or(&[]),
        )
    };
    let prefix = match (entries.first(), entries.last()) {
        (Some(first), Some(last)) => {
            let (a, b) = (user_key_of(first), user_key_of(last));
            a[..key::common_prefix_len(a, b)].to_vec()
        }
        _ => Vec::new(),
    };
    for entry in &mut entries {
        let user_key = user_key_of(entry);
        debug_assert!(user_key.starts_with(&prefix));
        entry.fingerprint = key::fingerprint(user_key.get(prefix.len()..).unwrap_or(&[]));
    }
    Ok((entries, prefix))
}

// Tables and the cache are shared between reader threads; iterators move
// between threads (`InternalIterator: Send`).
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Table>();
    shared::<BlockCache>();
};

/// Iterator over a table's entries in internal-key order: an index block
/// iterator, and an iterator over the data block it points at.
///
/// # Invariants
/// When valid, `data` is valid and belongs to the block `index` points at.
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    /// Add the blocks read to the cache (off for a merge).
    fill_cache: bool,
}

impl TableIter {
    /// Loads the data block the index iterator is on (none if the index is exhausted).
    fn load_data_block(&mut self) -> Result<()> {
        self.data = None;
        if !self.index.valid() {
            return Ok(());
        }
        let block = self.table.data_block(self.index.value(), self.fill_cache)?;
        self.data = Some(BlockIter::new(block));
        Ok(())
    }

    /// Moves past exhausted data blocks. Bounded by the index's entries.
    fn skip_empty_blocks(&mut self) -> Result<()> {
        while let Some(data) = &self.data {
            if data.valid() {
                return Ok(());
            }
            self.index.next()?;
            self.load_data_block()?;
            if let Some(data) = &mut self.data {
                data.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn guard(&mut self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            self.data = None;
        }
        result
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let result = (|| {
            self.index.seek_to_first()?;
            self.load_data_block()?;
            if let Some(data) = &mut self.data {
                data.seek_to_first()?;
            }
            self.skip_empty_blocks()
        })();
        self.guard(result)
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        let result = (|| {
            // The first block whose last key is at or after the target.
            self.index.seek(ikey)?;
            self.load_data_block()?;
            if let Some(data) = &mut self.data {
                data.seek(ikey)?;
            }
            self.skip_empty_blocks()
        })();
        self.guard(result)
    }

    fn next(&mut self) -> Result<()> {
        let result = match &mut self.data {
            Some(data) if data.valid() => data.next(),
            _ => panic!("next on an invalid table iterator"),
        };
        let result = result.and_then(|()| self.skip_empty_blocks());
        self.guard(result)
    }

    fn key(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.value(),
            None => &[],
        }
    }
}
