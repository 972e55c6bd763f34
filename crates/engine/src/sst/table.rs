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
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
        Ok(Arc::new(Table {
            file,
            path,
            file_number,
            cache,
            index,
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
        let mut index = BlockIter::new(self.index.clone());
        index.seek_user_key(user_key)?;
        // Bounded by the index's entries; a well-formed table stops in the
        // first block, whose last key is at or after the target.
        while index.valid() {
            let mut data = BlockIter::new(self.data_block(index.value())?);
            data.seek_user_key(user_key)?;
            if data.valid() {
                if key::user_key(data.key()) != user_key {
                    return Ok(None);
                }
                return found(data.key(), data.value()).map(Some);
            }
            index.next()?;
        }
        Ok(None)
    }

    /// An iterator over all entries.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter {
            table: self.clone(),
            index: BlockIter::new(self.index.clone()),
            data: None,
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
        self.index.size_bytes() + self.filter.size_bytes()
    }

    /// The data block named by the index value `handle_bytes`, through the cache.
    fn data_block(&self, handle_bytes: &[u8]) -> Result<Arc<Block>> {
        let handle = BlockHandle::decode_varint(handle_bytes)
            .filter(|h| h.end_with_trailer().is_some_and(|end| end <= self.data_end))
            .ok_or_else(|| {
                Error::corruption(
                    &*self.path,
                    self.index.offset(),
                    CorruptionKind::Malformed("index entry with a bad block handle".into()),
                )
            })?;
        if let Some(block) = self.cache.get(self.file_number, handle.offset) {
            return Ok(block);
        }
        let bytes = block_io::read_block(&*self.file, &self.path, handle)?;
        let block = Arc::new(Block::new(bytes, self.path.clone(), handle.offset)?);
        self.cache
            .insert(self.file_number, handle.offset, block.clone());
        Ok(block)
    }
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
}

impl TableIter {
    /// Loads the data block the index iterator is on (none if the index is exhausted).
    fn load_data_block(&mut self) -> Result<()> {
        self.data = None;
        if !self.index.valid() {
            return Ok(());
        }
        let block = self.table.data_block(self.index.value())?;
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
