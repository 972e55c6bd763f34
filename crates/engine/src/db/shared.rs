//! State shared by the engine's threads.
//!
//! # Thread safety
//! - `sv` (the current [`SuperVersion`]) is read lock-free by every reader;
//!   it is replaced, never mutated, under `sv_update` by the writer thread
//!   (memtable rotation) and the background thread (flush, compaction).
//! - `versions` (manifest writer and state) is touched by the background
//!   thread only, and by `open` before threads start.
//! - `visible_seq` is stored by the writer after a whole batch is in the
//!   memtable, and loaded by readers after they loaded `sv`.
//!
//! Lock order: `versions`, then `sv_update`, then `bg`.

use crate::WriteBatch;
use crate::compaction::output::TableSink;
use crate::error::{Error, Result};
use crate::fs::{DirLock, FileSystem};
use crate::memtable::Memtable;
use crate::metrics::EngineMetrics;
use crate::options::{Durability, Options};
use crate::queue::HandoffQueue;
use crate::sst::{BlockCache, TableOptions};
use crate::version::ObsoleteFiles;
use crate::version::{SuperVersion, VersionSet};
use crate::wal::WriteCallback;
use crate::wal::writer::WalItem;
use arc_swap::ArcSwap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A request to the writer thread.
pub enum WriteRequest {
    /// Apply and log a batch.
    Write {
        /// The batch.
        batch: WriteBatch,
        /// When to answer.
        durability: Durability,
        /// The answer.
        callback: WriteCallback,
        /// When `submit` queued it (queue-wait metrics).
        enqueued: std::time::Instant,
        /// Apply it only if this holds (`super::condition`).
        condition: Option<Box<super::condition::Condition>>,
    },
    /// Make the memtable immutable now (if it holds anything), then answer.
    Rotate(Box<dyn FnOnce(Result<()>) + Send>),
    /// Hand back the read view and the last applied sequence number, between
    /// two batches: one point of the write order (`super::checkpoint`).
    Checkpoint(CheckpointPoint),
    /// Take one sequence number with no write and publish it, then answer:
    /// reads after an ingest read above the ingest's mark
    /// (`super::condition`, rule 1).
    Advance(Box<dyn FnOnce() + Send>),
}

/// What a [`WriteRequest::Checkpoint`] is answered with: the view and the
/// last sequence number applied when the tx thread took it.
pub type CheckpointPoint = Box<dyn FnOnce(Arc<SuperVersion>, u64) + Send>;

/// Background thread requests and status, under the `bg` mutex.
#[derive(Default)]
pub struct BgState {
    /// Stop after the current job.
    pub shutdown: bool,
    /// Manual compactions waiting for the background thread.
    pub manual_compactions: Vec<std::sync::mpsc::Sender<Result<()>>>,
    /// Purges waiting for the background thread.
    pub purges: Vec<super::purge::PurgeJob>,
    /// Per-level key after which the next compaction of that level starts (round robin).
    pub compact_pointers: Vec<Vec<u8>>,
    /// Something changed that may need a flush.
    pub flush_hint: bool,
    /// Something changed that may need a compaction or a purge.
    pub compaction_hint: bool,
}

/// Where a running merge writes: its output level and the user-key span
/// of its inputs (its outputs lie inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeSpan {
    /// The level the merge's outputs are installed in.
    pub output_level: usize,
    /// The smallest user key of its inputs.
    pub lo: Vec<u8>,
    /// The largest user key of its inputs.
    pub hi: Vec<u8>,
}

impl MergeSpan {
    /// True when the merge's outputs could overlap `[lo, hi]` in `level`.
    pub fn blocks(&self, level: usize, lo: &[u8], hi: &[u8]) -> bool {
        self.output_level == level && self.lo.as_slice() <= hi && lo <= self.hi.as_slice()
    }
}

/// The background state, locked.
pub type BgGuard<'a> = std::sync::MutexGuard<'a, BgState>;

/// Everything the engine's threads share.
pub struct Shared {
    /// The database directory.
    pub dir: PathBuf,
    /// The options it was opened with.
    pub opts: Options,
    /// The file system (from the options).
    pub fs: Arc<dyn FileSystem>,
    /// The current read view.
    pub sv: ArcSwap<SuperVersion>,
    /// Serializes replacements of `sv`.
    pub sv_update: Mutex<()>,
    /// Entries with a sequence number up to this are visible to readers.
    pub visible_seq: AtomicU64,
    /// The highest sequence number whose write may have left the
    /// memtables (flushed, or overtaken by an ingest): conditional writes
    /// that read below it are refused (`super::condition`, rule 1).
    pub left_memtables_seq: AtomicU64,
    /// Next unused file number (WAL segments and SSTables share the space).
    pub next_file_number: AtomicU64,
    poisoned: AtomicBool,
    /// The failure that poisoned the engine was a full disk or quota.
    out_of_space: AtomicBool,
    poison_reason: Mutex<Option<String>>,
    /// Counters and histograms.
    pub metrics: Arc<EngineMetrics>,
    /// Shared block cache.
    pub cache: Arc<BlockCache>,
    /// Requests for the writer thread.
    pub write_queue: HandoffQueue<WriteRequest>,
    /// Groups for the WAL thread.
    pub wal_queue: Arc<HandoffQueue<WalItem>>,
    /// Manifest and live-file state.
    pub versions: Mutex<VersionSet>,
    /// The merge the compaction thread runs now, if any: its output level
    /// and user-key span. An ingest never installs a table there
    /// (`super::ingest`). Lock order: `versions`, then this, then `bg` or
    /// `sv_update`.
    pub merging: Mutex<Option<MergeSpan>>,
    /// Background thread state.
    pub bg: Mutex<BgState>,
    /// Signalled on every background state change and install.
    pub bg_cond: Condvar,
    /// Obsolete tables' files, removed by the reap thread
    /// (`crate::version::obsolete`).
    pub obsolete: Arc<ObsoleteFiles>,
    /// The memtable size this engine flushes at (`super::flush_point`).
    pub flush_at: usize,
    /// Held for the engine's lifetime.
    pub _lock: Mutex<Box<dyn DirLock>>,
}

/// Every mutex here is locked ignoring poisoning: the data each guards is
/// replaced whole, never left half-updated, so a panic elsewhere leaves it
/// consistent.
pub use ataman_testkit::lock::lock;

impl Shared {
    /// Builds the shared state (used by `open`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dir: PathBuf,
        opts: Options,
        sv: SuperVersion,
        visible_seq: u64,
        next_file_number: u64,
        cache: Arc<BlockCache>,
        versions: VersionSet,
        dir_lock: Box<dyn DirLock>,
        metrics: Arc<EngineMetrics>,
    ) -> Self {
        let fs = Arc::clone(&opts.fs);
        let flush_at = {
            use super::flush_point::{flush_point, fresh_seed, random_fraction, slot_fraction};
            let fraction = opts
                .memtable_flush_slot
                .map_or_else(|| random_fraction(fresh_seed()), slot_fraction);
            flush_point(
                opts.memtable_bytes_max,
                opts.memtable_flush_jitter_percent,
                fraction,
            )
        };
        let bg = BgState {
            compact_pointers: vec![Vec::new(); opts.levels],
            flush_hint: true,
            compaction_hint: true,
            ..BgState::default()
        };
        Shared {
            dir,
            write_queue: HandoffQueue::new(
                opts.write_queue_requests_max,
                opts.write_queue_bytes_max,
            ),
            wal_queue: Arc::new(HandoffQueue::new(
                opts.write_queue_requests_max,
                opts.write_queue_bytes_max,
            )),
            opts,
            fs,
            sv: ArcSwap::from_pointee(sv),
            sv_update: Mutex::new(()),
            visible_seq: AtomicU64::new(visible_seq),
            // Everything replayed at open may sit in tables already.
            left_memtables_seq: AtomicU64::new(visible_seq),
            next_file_number: AtomicU64::new(next_file_number),
            poisoned: AtomicBool::new(false),
            out_of_space: AtomicBool::new(false),
            poison_reason: Mutex::new(None),
            metrics,
            cache,
            versions: Mutex::new(versions),
            merging: Mutex::new(None),
            bg: Mutex::new(bg),
            bg_cond: Condvar::new(),
            obsolete: Arc::new(ObsoleteFiles::default()),
            flush_at,
            _lock: Mutex::new(dir_lock),
        }
    }

    /// Table-building options derived from the engine options.
    pub fn table_options(&self) -> TableOptions {
        TableOptions {
            block_bytes: self.opts.block_bytes,
            restart_interval: self.opts.block_restart_interval,
            bloom_bits_per_key: self.opts.bloom_bits_per_key,
            compression: self.opts.compression,
        }
    }

    /// Stops all further writes, remembering the first reason.
    pub fn poison(&self, e: &Error) {
        let mut reason = lock(&self.poison_reason);
        if reason.is_none() {
            *reason = Some(e.to_string());
            if e.is_out_of_space() {
                self.out_of_space.store(true, Ordering::Release);
            }
        }
        self.poisoned.store(true, Ordering::Release);
        drop(reason);
        self.notify_bg();
    }

    /// True once the engine was poisoned by a full disk or quota.
    pub fn out_of_space(&self) -> bool {
        self.out_of_space.load(Ordering::Acquire)
    }

    /// `Err(Poisoned)` once a write, fsync or install has failed.
    pub fn check_poisoned(&self) -> Result<()> {
        if !self.poisoned.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(Error::Poisoned {
            reason: lock(&self.poison_reason)
                .clone()
                .unwrap_or_else(|| "unknown failure".into()),
        })
    }

    /// An empty memtable for WAL segment `segment`, its point index sized
    /// for `memtable_bytes_max`.
    pub fn new_memtable(&self, segment: u64) -> Arc<Memtable> {
        Arc::new(Memtable::with_budget(segment, self.opts.memtable_bytes_max))
    }

    /// Wakes the background threads and anyone waiting on an install.
    pub fn notify_bg(&self) {
        let mut bg = lock(&self.bg);
        bg.flush_hint = true;
        bg.compaction_hint = true;
        drop(bg);
        self.bg_cond.notify_all();
    }

    /// What writing new tables needs of the engine ([`TableSink`]).
    pub fn table_sink(&self) -> TableSink<'_> {
        TableSink {
            dir: &self.dir,
            fs: &self.fs,
            next_file_number: &self.next_file_number,
            table_options: self.table_options(),
            cache: &self.cache,
            metrics: &self.metrics,
        }
    }

    /// The engine clock's time, in Unix milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.opts.clock.now_ms()
    }

    /// True when the planted expiry bug is armed (a test hook).
    pub fn planted_drop_expired(&self) -> bool {
        self.opts.planted_drop_expired_without_tombstone
    }

    /// Allocates a file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::Relaxed)
    }

    /// True while level 0 holds twice its compaction trigger: a paced
    /// merge hurries (writers are nearer their stall than its rate is
    /// worth).
    pub fn level0_crowded(&self) -> bool {
        self.sv.load().version.levels[0].len() >= 2 * self.opts.l0_compaction_trigger
    }

    /// A paced merge's wait: up to `d` on the background condition, less
    /// if the engine begins to close (its close wakes every waiter: true)
    /// or level 0 becomes crowded (every flush wakes it: false, and the
    /// merge's next decision hurries).
    pub fn wait_paced(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut bg = lock(&self.bg);
        loop {
            if bg.shutdown {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.level0_crowded() {
                return false;
            }
            bg = self
                .bg_cond
                .wait_timeout(bg, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
