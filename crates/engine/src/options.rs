//! Options of an open engine, with the defaults a node uses.

use crate::clock::{Clock, SystemClock};
use crate::fs::{FileSystem, OsFs};
use std::sync::Arc;
use std::time::Duration;

/// How far the WAL thread goes before it reports a batch persisted (per node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalMode {
    /// `write` then `fdatasync` once per group: survives power loss.
    Fsync,
    /// `write` only: survives a process crash (kill -9), not a power cut.
    Write,
    /// Nothing is written to the WAL: data since the last flush is lost on any crash.
    None,
}

/// When a write is acknowledged to its caller (per write).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// After the WAL made it as durable as the [`WalMode`] allows.
    Complete,
    /// After the WAL thread took it into a group (not yet written).
    Submit,
    /// After the writer thread applied it to the memtable.
    None,
}

/// Block compression for SSTables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Blocks are stored as built.
    None,
    /// Each block is LZ4-compressed when that saves at least 1/8 of its size.
    Lz4,
}

/// Engine options. `Options::default()` is what a node uses.
#[derive(Clone)]
pub struct Options {
    /// The file system; tests pass a simulated one.
    pub fs: Arc<dyn FileSystem>,
    /// How durable the WAL makes each group.
    pub wal_mode: WalMode,
    /// A memtable becomes immutable and is flushed at this size, less
    /// the jitter below.
    pub memtable_bytes_max: usize,
    /// Memtables are flushed at a size in
    /// `[memtable_bytes_max × (1 − p/100), memtable_bytes_max]`, fixed
    /// at open (`db::flush_point`), so replicas that take the same writes
    /// do not flush and compact in the same second. 0 flushes at
    /// `memtable_bytes_max`; capped at 90.
    pub memtable_flush_jitter_percent: u32,
    /// Where in that span: slot `n`'s place in the golden-ratio sequence
    /// (a node passes its place in `--cluster`, so no two members share a
    /// point), or a random place drawn at open when `None`.
    pub memtable_flush_slot: Option<u64>,
    /// Immutable memtables waiting for flush before writes stall.
    pub immutable_memtables_max: usize,
    /// How long a write waits in a stall before it fails with `Busy`.
    pub write_stall_timeout: Duration,
    /// Write requests queued for the writer thread before `submit` answers `Busy`.
    pub write_queue_requests_max: usize,
    /// Bytes queued for the writer thread before `submit` answers `Busy`.
    pub write_queue_bytes_max: usize,
    /// Target size of an SSTable data block before compression.
    pub block_bytes: usize,
    /// Keys between restart points in a data block. A point read scans
    /// about half an interval after its binary search over the restarts;
    /// 8 (not LevelDB's 16) cut a point read from 8.2k to 7.6k instructions
    /// for about 1% more bytes with 116-byte entries
    /// (`docs/bench-log/2026-11-22-engine-10-read-path.md`).
    pub block_restart_interval: usize,
    /// Bloom filter bits per key (10 gives about 1% false positives).
    pub bloom_bits_per_key: usize,
    /// Compression of data blocks.
    pub compression: Compression,
    /// Byte budget of the shared block cache.
    pub block_cache_bytes: usize,
    /// Target size of one SSTable written by compaction.
    pub sst_target_bytes: u64,
    /// L0 file count that triggers a compaction into L1.
    pub l0_compaction_trigger: usize,
    /// L0 file count at which writes stall until compaction catches up.
    pub l0_stop_writes: usize,
    /// Size budget of L1; each deeper level is `level_size_ratio` times larger.
    pub l1_bytes_max: u64,
    /// Size ratio between adjacent levels.
    pub level_size_ratio: u64,
    /// Number of levels (L0 to L(n-1)).
    pub levels: usize,
    /// Without a `collection_horizon`, a tombstone is dropped only once its
    /// timestamp's millisecond part is older than this (replicas must have
    /// seen it); with one, this only marks the dead versions counted as
    /// waiting past the grace. Either way only when no older
    /// version of its key is left elsewhere in the engine
    /// (`compaction::collect`).
    pub tombstone_grace: Duration,
    /// The collection horizon of a key, Unix milliseconds: a tombstone or
    /// expired version dead at or before it may be dropped (still only
    /// with nothing older left in the engine). `None`: `now -
    /// tombstone_grace`. A cluster node sets it from its anti-entropy
    /// rounds (repair-based collection, docs/decisions/0007); a dead
    /// version past the grace that the horizon holds back is kept and
    /// counted (`tombstones_waiting_past_grace`). Called from the
    /// compaction thread, once per dead version a merge meets.
    pub collection_horizon: Option<CollectionHorizon>,
    /// Bytes reserved (fallocate) for each new WAL segment, capped at the
    /// memtable size: appends then change no file size, so each fdatasync
    /// flushes data only (0 turns preallocation off).
    pub wal_segment_preallocate_bytes: u64,
    /// Decode WAL batches in a reader thread during recovery (two batches ahead).
    pub recovery_reader_thread: bool,
    /// Skip bad WAL records that are not a torn tail, instead of refusing to open.
    pub force_recovery: bool,
    /// Run flushes and compactions in the background automatically.
    pub background_compaction: bool,
    /// How much nicer than the process the compaction thread runs (Linux
    /// nice steps; 0 leaves it as is). Compactions and purges then take
    /// the CPU the foreground leaves; flushes (their own thread) keep the
    /// process's priority. A compaction that falls behind still bounds the
    /// writers: they stall at `l0_stop_writes`.
    pub compaction_nice: i32,
    /// Bytes per second an automatic compaction reads at, on average
    /// (0: as fast as it can). A paced compaction spreads its CPU and I/O
    /// over time instead of taking them in a burst; it hurries while level
    /// 0 holds twice its compaction trigger, so writers do not reach their
    /// stall because of it. Manual compactions are not paced.
    pub compaction_rate_bytes: u64,
    /// The wall clock expiry and the tombstone grace read; tests pass a
    /// [`crate::clock::VirtualClock`].
    pub clock: Arc<dyn Clock>,
    /// Planted bug, a test hook no node sets (no flag reaches it):
    /// compaction drops an expired version outright, tombstone and all, so
    /// an older version below it comes back. The expiry model test's
    /// negative control arms it and must catch the resurrection.
    #[doc(hidden)]
    pub planted_drop_expired_without_tombstone: bool,
    /// Planted bug, a test hook no node sets: the old collection rule.
    /// Compaction drops a tombstone or expired version past the grace once
    /// no level *deeper* than its output overlaps the merge, though an
    /// older version of the key may lie shallower (a peer's late version
    /// applied to the memtable) or the dead version may have been
    /// ingested below an older one. The collection model test's negative
    /// control arms it and must catch the resurrection.
    #[doc(hidden)]
    pub planted_collect_when_nothing_deeper: bool,
}

/// A key's collection horizon (see [`Options::collection_horizon`]).
pub type CollectionHorizon = Arc<dyn Fn(&[u8]) -> u64 + Send + Sync>;

impl Default for Options {
    fn default() -> Self {
        Options {
            fs: Arc::new(OsFs),
            wal_mode: WalMode::Fsync,
            memtable_bytes_max: 64 * 1024 * 1024,
            memtable_flush_jitter_percent: 0,
            memtable_flush_slot: None,
            immutable_memtables_max: 2,
            write_stall_timeout: Duration::from_secs(10),
            write_queue_requests_max: 65_536,
            write_queue_bytes_max: 256 * 1024 * 1024,
            block_bytes: 4096,
            block_restart_interval: 8,
            bloom_bits_per_key: 10,
            compression: Compression::Lz4,
            block_cache_bytes: 256 * 1024 * 1024,
            sst_target_bytes: 64 * 1024 * 1024,
            l0_compaction_trigger: 4,
            l0_stop_writes: 20,
            l1_bytes_max: 256 * 1024 * 1024,
            level_size_ratio: 10,
            levels: 7,
            tombstone_grace: Duration::from_secs(10 * 24 * 3600),
            collection_horizon: None,
            wal_segment_preallocate_bytes: 64 * 1024 * 1024,
            recovery_reader_thread: true,
            force_recovery: false,
            background_compaction: true,
            compaction_nice: 0,
            compaction_rate_bytes: 0,
            clock: Arc::new(SystemClock),
            planted_drop_expired_without_tombstone: false,
            planted_collect_when_nothing_deeper: false,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("wal_mode", &self.wal_mode)
            .field("memtable_bytes_max", &self.memtable_bytes_max)
            .field("compression", &self.compression)
            .field("levels", &self.levels)
            .finish_non_exhaustive()
    }
}
