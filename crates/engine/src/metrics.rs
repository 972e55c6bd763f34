//! The engine's own counters and histograms, read by `/metrics` and the benchmarks.
//!
//! Histograms use power-of-two buckets held in atomics: recording is one
//! `fetch_add` on the hot path, with no lock and no allocation.
//!
//! # Thread safety
//! Everything here is updated with relaxed atomics from any thread; a
//! snapshot is not a consistent cut across counters, which is fine for
//! monitoring.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of a histogram: bucket `i` counts values in `[2^(i-1), 2^i)`, bucket 0 counts 0.
pub const HISTOGRAM_BUCKETS: usize = 40;

/// A histogram of non-negative integers (microseconds, bytes, batch sizes).
pub struct Histogram {
    buckets: [AtomicU64; HISTOGRAM_BUCKETS],
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

/// A copy of a histogram's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket counts (see [`HISTOGRAM_BUCKETS`]).
    pub buckets: Vec<u64>,
    /// Values recorded.
    pub count: u64,
    /// Sum of the values.
    pub sum: u64,
    /// Largest value.
    pub max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// The bucket a value falls in.
pub fn bucket_of(value: u64) -> usize {
    ((u64::BITS - value.leading_zeros()) as usize).min(HISTOGRAM_BUCKETS - 1)
}

/// The exclusive upper bound of bucket `i` (`u64::MAX` for the last).
pub fn bucket_upper_bound(i: usize) -> u64 {
    if i + 1 >= HISTOGRAM_BUCKETS {
        u64::MAX
    } else {
        1u64 << i
    }
}

impl Histogram {
    /// Records one value.
    pub fn record(&self, value: u64) {
        self.buckets[bucket_of(value)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.max.fetch_max(value, Ordering::Relaxed);
    }

    /// A copy of the current state.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count.load(Ordering::Relaxed))
            .field("sum", &self.sum.load(Ordering::Relaxed))
            .field("max", &self.max.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl HistogramSnapshot {
    /// Mean of the values (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// An upper bound of the `q` quantile (0..=1): the upper edge of the
    /// bucket it falls in, capped at the maximum seen.
    pub fn quantile_upper_bound(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return bucket_upper_bound(i).saturating_sub(1).min(self.max);
            }
        }
        self.max
    }
}

/// A plain counter.
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Everything the engine counts while it runs.
#[derive(Default)]
pub struct EngineMetrics {
    /// Key and value bytes of accepted writes (the denominator of write amplification).
    pub user_bytes_written: Counter,
    /// Write batches accepted.
    pub batches_written: Counter,
    /// Entries (puts and deletes) accepted.
    pub entries_written: Counter,
    /// Bytes appended to WAL segments.
    pub wal_bytes_written: Counter,
    /// Zeros written ahead of the appends into WAL segments' reserved space.
    pub wal_zero_fill_bytes: Counter,
    /// `write` calls on WAL segments (one per group).
    pub wal_writes: Counter,
    /// fsyncs of WAL segments.
    pub wal_syncs: Counter,
    /// Records per WAL group.
    pub wal_batch_records: Histogram,
    /// Bytes per WAL group.
    pub wal_batch_bytes: Histogram,
    /// Microseconds per WAL `write` call.
    pub wal_write_latency_us: Histogram,
    /// Microseconds per WAL fsync.
    pub wal_sync_latency_us: Histogram,
    /// Requests per writer-thread wake-up.
    pub writer_batch_requests: Histogram,
    /// Microseconds a write waited in the writer's queue (submit to pick-up).
    pub write_queue_wait_us: Histogram,
    /// Microseconds the writer spent applying one batch to the memtable.
    pub tx_apply_us: Histogram,
    /// Memtables flushed.
    pub flushes: Counter,
    /// Bytes of SSTables written by flushes.
    pub flush_bytes_written: Counter,
    /// Compactions run.
    pub compactions: Counter,
    /// Bytes of SSTables read by compactions.
    pub compaction_bytes_read: Counter,
    /// Bytes of SSTables written by compactions.
    pub compaction_bytes_written: Counter,
    /// Microseconds automatic compactions waited to keep
    /// `Options::compaction_rate_bytes`.
    pub compaction_pace_wait_us: Counter,
    /// Ingests installed (`Db::ingest`).
    pub ingests: Counter,
    /// Bytes of SSTables written by ingests.
    pub ingest_bytes_written: Counter,
    /// Ingests that found no level free for their key range (the caller
    /// then writes the batch the ordinary way).
    pub ingests_declined: Counter,
    /// Times the writer stalled waiting for flush or compaction.
    pub write_stalls: Counter,
    /// Microseconds spent stalled.
    pub write_stall_us: Counter,
    /// Writes refused because a queue was full or a stall timed out.
    pub writes_refused_busy: Counter,
    /// Conditional writes refused because their key changed since the
    /// read (`db/condition.rs`).
    pub conditional_conflicts: Counter,
    /// Point reads served.
    pub gets: Counter,
    /// SSTables consulted by point reads (after bloom filters).
    pub get_tables_read: Counter,
    /// Point reads a bloom filter answered without reading a block.
    pub bloom_negatives: Counter,
    /// Expired versions flushes and compactions met as a key's newest
    /// version (each kept as a tombstone, its value cut off, or dropped).
    pub expired_seen: Counter,
    /// Expired versions dropped after the tombstone grace (nothing older left).
    pub expired_dropped: Counter,
    /// Tombstones dropped after the tombstone grace (nothing older left).
    pub tombstones_dropped: Counter,
    /// Dead versions (tombstones and expired values) a merge kept though
    /// they were dead for longer than the grace, because their key's
    /// collection horizon had not reached them (repair has not covered
    /// them); each merge that meets one counts it again.
    pub tombstones_waiting_past_grace: Counter,
}
