//! Writes one SSTable.
//!
//! `docs/FORMAT.md`, "SSTable":
//!
//! ```text
//! table := data_block+ filter_block index_block footer
//! ```
//!
//! Every block is followed by its trailer ([`super::block_io`]). The index
//! block has one entry per data block: key = the last internal key of the
//! block, value = varint offset ++ varint size of the block's stored bytes.
//! The builder writes each block as soon as it is full, so memory stays at
//! one block plus the index and the filter's hashes.

use super::block_builder::BlockBuilder;
use super::block_io::{self, BLOCK_BYTES_MAX, BlockEncoder, BlockHandle};
use super::bloom::BloomBuilder;
use super::footer::{FOOTER_BYTES, Footer};
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{self, INTERNAL_KEY_TRAILER_BYTES, KEY_BYTES_MAX, Kind, VALUE_BYTES_MAX};
use crate::options::Compression;
use std::cmp::Ordering;
use std::path::PathBuf;

/// Restart interval of index blocks ("SSTable: index block"): every key
/// in full, for a pure binary search.
pub const INDEX_RESTART_INTERVAL: usize = 1;

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
    /// The CRC-32C of the whole file as written (every byte handed to the
    /// file, in order); `None` when the builder did not start the file (it
    /// was not empty). Kept in memory only (`LiveTable::file_crc32c`): a
    /// checkpoint records it instead of reading the file back.
    pub file_crc32c: Option<u32>,
}

/// Bytes of a table between two `WritableFile::start_writeback` calls.
pub const WRITEBACK_STEP_BYTES: u64 = 1024 * 1024;

/// Builds a table from entries added in strictly increasing internal-key order.
///
/// # Invariants
/// `offset` is the file's length; keys added strictly increase; after a
/// failed write every call fails (the file's tail is unknown).
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    opts: TableOptions,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    bloom: BloomBuilder,
    encoder: BlockEncoder,
    last_key: Vec<u8>,
    smallest: Vec<u8>,
    entries: u64,
    tombstones: u64,
    ts_min: u64,
    ts_max: u64,
    /// The running CRC-32C of the bytes written (`None`: the file was not
    /// empty at the start).
    file_crc32c: Option<u32>,
    failed: Option<String>,
}

impl TableBuilder {
    /// Starts a table in `file` (already created); `path` is for error messages.
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, opts: TableOptions) -> Self {
        let offset = file.len();
        TableBuilder {
            file,
            path,
            opts,
            offset,
            data_block: BlockBuilder::new(opts.restart_interval),
            index_block: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            bloom: BloomBuilder::new(opts.bloom_bits_per_key),
            encoder: BlockEncoder::new(opts.compression),
            last_key: Vec::new(),
            smallest: Vec::new(),
            entries: 0,
            tombstones: 0,
            ts_min: u64::MAX,
            ts_max: 0,
            file_crc32c: (offset == 0).then_some(0),
            failed: None,
        }
    }

    /// Adds an entry; keys must strictly increase in internal order.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        self.check_not_failed()?;
        let parsed = key::parse_internal_key(ikey).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}-byte SST key is not an internal key",
                ikey.len()
            ))
        })?;
        if parsed.user_key.len() > KEY_BYTES_MAX || value.len() > VALUE_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "SST entry with a {}-byte key and a {}-byte value is over the limits",
                parsed.user_key.len(),
                value.len()
            )));
        }
        assert!(
            self.entries == 0 || key::compare_internal(&self.last_key, ikey) == Ordering::Less,
            "SST keys must strictly increase"
        );
        let entry_bytes = BlockBuilder::entry_bytes_max(ikey, value);
        if !self.data_block.is_empty()
            && self.data_block.size_estimate() + entry_bytes > BLOCK_BYTES_MAX
        {
            self.flush_data_block()?;
        }
        if self.entries == 0 {
            self.smallest = ikey.to_vec();
        }
        self.data_block.add(ikey, value);
        self.bloom.add_internal_key(ikey);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.entries += 1;
        self.tombstones += u64::from(parsed.kind == Kind::Delete);
        self.ts_min = self.ts_min.min(parsed.ts);
        self.ts_max = self.ts_max.max(parsed.ts);
        if self.data_block.size_estimate() >= self.opts.block_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Approximate file size if finished now.
    pub fn estimated_bytes(&self) -> u64 {
        let pending = self.data_block.size_estimate()
            + self.index_block.size_estimate()
            + self.last_key.len()
            + 20
            + self.bloom.size_estimate()
            + 3 * block_io::BLOCK_TRAILER_BYTES
            + FOOTER_BYTES;
        self.offset + pending as u64
    }

    fn check_not_failed(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if let Err(e) = self.file.append(bytes) {
            let err = Error::io(&self.path, e);
            self.failed = Some(err.to_string());
            return Err(err);
        }
        if let Some(crc) = &mut self.file_crc32c {
            *crc = crc32c::crc32c_append(*crc, bytes);
        }
        let before = self.offset;
        self.offset += bytes.len() as u64;
        debug_assert_eq!(self.offset, self.file.len());
        // Every MiB, start the writeback of what was written since: the
        // table's pages reach the disk as it grows, not all at its sync
        // (a 64 MiB burst that other files' syncs would queue behind).
        if before / WRITEBACK_STEP_BYTES != self.offset / WRITEBACK_STEP_BYTES {
            self.file.start_writeback();
        }
        Ok(())
    }

    /// Writes an encoded block (stored bytes and trailer); returns its handle.
    fn write_block(&mut self, stored: Vec<u8>) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset,
            size: (stored.len() - block_io::BLOCK_TRAILER_BYTES) as u64,
        };
        self.write(&stored)?;
        Ok(handle)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        debug_assert!(!self.data_block.is_empty());
        let last_key = self.data_block.last_key().to_vec();
        debug_assert!(last_key.len() >= INTERNAL_KEY_TRAILER_BYTES);
        let raw = self.data_block.finish();
        let stored = self.encoder.encode_data(raw);
        let handle = self.write_block(stored)?;
        let mut value = Vec::with_capacity(20);
        handle.encode_varint(&mut value);
        self.index_block.add(&last_key, &value);
        Ok(())
    }

    /// Writes filter, index and footer, fsyncs the file, returns its properties.
    /// An error if no entry was added.
    pub fn finish(mut self) -> Result<TableProperties> {
        self.check_not_failed()?;
        if self.entries == 0 {
            return Err(Error::InvalidArgument(
                "an SST needs at least one entry".into(),
            ));
        }
        if !self.data_block.is_empty() {
            self.flush_data_block()?;
        }
        // Bloom bits look random to LZ4: never worth compressing.
        let filter = self.write_block(block_io::encode_block(
            self.bloom.finish(),
            Compression::None,
        ))?;
        let index_raw = self.index_block.finish();
        let index_stored = self.encoder.encode(index_raw);
        let index = self.write_block(index_stored)?;
        self.write(&Footer { filter, index }.encode())?;
        if let Err(e) = self.file.sync() {
            return Err(Error::io(&self.path, e));
        }
        assert!(self.ts_min <= self.ts_max);
        Ok(TableProperties {
            file_bytes: self.offset,
            entries: self.entries,
            tombstones: self.tombstones,
            smallest: self.smallest,
            largest: self.last_key,
            ts_min: self.ts_min,
            ts_max: self.ts_max,
            file_crc32c: self.file_crc32c,
        })
    }
}
