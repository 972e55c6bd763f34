//! Shared block cache with a byte budget. (stub: being written)

/// Hit and miss counters of the block cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that read the file.
    pub misses: u64,
    /// Bytes held now.
    pub bytes: u64,
    /// Byte budget.
    pub capacity_bytes: u64,
}

/// Caches decoded (decompressed, checksum-verified) blocks by (file number, offset).
pub struct BlockCache {}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of blocks.
    pub fn new(capacity_bytes: usize) -> Self {
        let _ = capacity_bytes;
        todo!()
    }
    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        todo!()
    }
}
