//! Reads one SSTable. (stub: being written)

use super::cache::BlockCache;
use crate::error::Result;
use crate::fs::ReadableFile;
use crate::iter::InternalIterator;
use std::path::PathBuf;
use std::sync::Arc;

/// An open SSTable: footer, index and filter in memory, data blocks through the cache.
///
/// # Thread safety
/// Shared by readers (`Arc<Table>`); all methods take `&self`.
pub struct Table {}

impl Table {
    /// Opens a table: reads and verifies footer, index and filter.
    pub fn open(
        file: Arc<dyn ReadableFile>,
        path: PathBuf,
        file_number: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Arc<Table>> {
        let _ = (file, path, file_number, cache);
        todo!()
    }
    /// False if the bloom filter proves `user_key` absent.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let _ = user_key;
        todo!()
    }
    /// The first (newest) entry of `user_key`: encoded internal key and value.
    /// Consults the bloom filter first.
    pub fn get(&self, user_key: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let _ = user_key;
        todo!()
    }
    /// An iterator over all entries.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        todo!()
    }
    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        todo!()
    }
}

/// Iterator over a table's entries in internal-key order.
pub struct TableIter {}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        todo!()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        todo!()
    }
    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        let _ = ikey;
        todo!()
    }
    fn next(&mut self) -> Result<()> {
        todo!()
    }
    fn key(&self) -> &[u8] {
        todo!()
    }
    fn value(&self) -> &[u8] {
        todo!()
    }
}
