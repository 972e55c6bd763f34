//! The public engine handle. (stub: being written)

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::key::Timestamp;
use crate::options::{Durability, Options};
use std::path::Path;

/// The newest version of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The version's timestamp.
    pub ts: Timestamp,
    /// The value, or `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Engine figures for metrics and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct Stats {}

/// Callback run when a submitted write reaches its durability (or fails).
pub type WriteCallback = Box<dyn FnOnce(Result<u64>) + Send>;

/// An open database directory.
pub struct Db {}

impl Db {
    /// Opens (creating if missing) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let _ = (dir, opts);
        todo!()
    }
    /// Writes a batch atomically and waits for `durability`. Returns the first sequence number.
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<u64> {
        let _ = (batch, durability);
        todo!()
    }
    /// Queues a batch; `done` runs (on an engine thread) once it reached `durability`.
    pub fn submit(
        &self,
        batch: WriteBatch,
        durability: Durability,
        done: WriteCallback,
    ) -> Result<()> {
        let _ = (batch, durability, done);
        todo!()
    }
    /// Puts one value.
    pub fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ts: Timestamp,
        durability: Durability,
    ) -> Result<u64> {
        let mut b = WriteBatch::new();
        b.put(key, value, ts);
        self.write(b, durability)
    }
    /// Writes one tombstone.
    pub fn delete(&self, key: &[u8], ts: Timestamp, durability: Durability) -> Result<u64> {
        let mut b = WriteBatch::new();
        b.delete(key, ts);
        self.write(b, durability)
    }
    /// The newest version of `key` (a tombstone included), or `None`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        let _ = key;
        todo!()
    }
    /// Entries with `start <= key < end` in key order on one consistent view.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        include_tombstones: bool,
    ) -> Result<ScanIter> {
        let _ = (start, end, include_tombstones);
        todo!()
    }
    /// Flushes the memtable to an SSTable and waits.
    pub fn flush(&self) -> Result<()> {
        todo!()
    }
    /// Compacts everything into the bottom level and waits.
    pub fn compact(&self) -> Result<()> {
        todo!()
    }
    /// Current figures.
    pub fn stats(&self) -> Stats {
        todo!()
    }
    /// Stops the engine's threads, flushing nothing more than the WAL already holds.
    pub fn close(self) -> Result<()> {
        todo!()
    }
}

/// Iterator of a scan: `(key, entry)` in key order.
pub struct ScanIter {}

impl Iterator for ScanIter {
    type Item = Result<(Vec<u8>, Entry)>;
    fn next(&mut self) -> Option<Self::Item> {
        todo!()
    }
}
