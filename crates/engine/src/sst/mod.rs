//! Sorted string tables: the immutable on-disk files of the LSM tree.
//!
//! Layout (`docs/FORMAT.md`, "SSTable"):
//! data blocks, a filter block (bloom), an index block, a footer.
//! Every block carries a compression byte and a CRC32C; the footer carries
//! a magic number and a format version.
//!
//! ## Layout
//! - [`block_builder`] / [`block`]: one data or index block, written and read
//!   (prefix-compressed keys, restart points).
//! - `restarts`: a block's restart array with restart-key fingerprints,
//!   decoded when the block is loaded (not stored).
//! - [`block_io`]: block handles and the block trailer (compression, checksum).
//! - [`bloom`]: the filter block, a bloom filter over user keys.
//! - [`footer`]: the fixed-size footer (handles, version, magic).
//! - [`cache`]: the shared, sharded LRU block cache with a byte budget.
//! - [`table_builder`] / [`table`]: a whole table, written and read.

pub mod block;
pub mod block_builder;
pub mod block_io;
pub mod bloom;
pub mod cache;
pub mod footer;
mod restarts;
pub mod table;
pub mod table_builder;

#[cfg(test)]
mod test_file;
#[cfg(test)]
mod tests;

pub use cache::{BlockCache, CacheStats};
pub use table::{Table, TableIter};
pub use table_builder::{TableBuilder, TableOptions, TableProperties};

/// File name of SSTable number `n`.
pub fn table_file_name(n: u64) -> String {
    format!("{n:06}.sst")
}

/// The number of an SSTable file name, if it is one.
pub fn parse_table_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".sst")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}
