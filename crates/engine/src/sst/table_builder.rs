//! Writes one SSTable. (stub: being written)

use crate::error::Result;
use crate::fs::WritableFile;
use crate::options::Compression;
use std::path::PathBuf;

/// How tables are built.
#[derive(Debug, Clone, Copy)]
pub struct TableOptions {
    /// Target uncompressed size of a data block.
    pub block_bytes: usize,
    /// Keys between restart points.
    pub restart_interval: usize,
    /// Bloom filter bits per key.
    pub bloom_bits_per_key: usize,
    /// Block compression.
    pub compression: Compression,
}

/// What a finished table holds; goes into the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProperties {
    /// Size of the file.
    pub file_bytes: u64,
    /// Entries (puts and tombstones).
    pub entries: u64,
    /// Tombstones among them.
    pub tombstones: u64,
    /// Smallest encoded internal key.
    pub smallest: Vec<u8>,
    /// Largest encoded internal key.
    pub largest: Vec<u8>,
    /// Smallest timestamp of any entry.
    pub ts_min: u64,
    /// Largest timestamp of any entry.
    pub ts_max: u64,
}

/// Builds a table from entries added in strictly increasing internal-key order.
pub struct TableBuilder {}

impl TableBuilder {
    /// Starts a table in `file` (already created); `path` is for error messages.
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, opts: TableOptions) -> Self {
        let _ = (file, path, opts);
        todo!()
    }
    /// Adds an entry; keys must strictly increase in internal order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let _ = (ikey, value);
        todo!()
    }
    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        todo!()
    }
    /// Approximate file size if finished now.
    pub fn estimated_bytes(&self) -> u64 {
        todo!()
    }
    /// Writes filter, index and footer, fsyncs the file, returns its properties.
    /// An error if no entry was added.
    pub fn finish(self) -> Result<TableProperties> {
        todo!()
    }
}
