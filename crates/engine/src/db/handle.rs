//! [`Db`], the public engine handle: it starts the engine's threads,
//! submits writes to the tx thread and reads on the caller's thread.
//!
//! # Thread safety
//! `Db` is `Send + Sync`: share it (e.g. in an `Arc`) between any number of
//! reader and writer threads. Writes are queued to the single writer
//! thread; reads run on the caller's thread and never block the writer.

use super::shared::{Shared, WriteRequest, lock};
use super::{flush_compaction_thread, open, read, tx_thread};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::Timestamp;
use crate::memtable::immutable::ImmutableMemtable;
use crate::options::{Durability, Options};
use crate::queue::PushError;
use crate::sst::CacheStats;
use crate::wal::WriteCallback;
use crate::wal::writer::WalWriter;
use open::RecoveryReport;
use read::ScanIter;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

/// The newest version of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The version's timestamp.
    pub ts: Timestamp,
    /// The value, or `None` for a tombstone (or an expired value, which
    /// reads as a tombstone at its timestamp).
    pub value: Option<Vec<u8>>,
    /// The value's absolute deadline in Unix milliseconds, if it expires
    /// (always `None` for a tombstone).
    pub deadline_ms: Option<u64>,
}

impl Entry {
    /// A plain value at `ts`.
    pub fn value(ts: Timestamp, value: Vec<u8>) -> Entry {
        Entry {
            ts,
            value: Some(value),
            deadline_ms: None,
        }
    }

    /// A tombstone at `ts`.
    pub fn tombstone(ts: Timestamp) -> Entry {
        Entry {
            ts,
            value: None,
            deadline_ms: None,
        }
    }
}

/// The newest version of a key, its value lent by the engine
/// ([`Db::get_with`]): in a memtable's memory, or a buffer read from a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The version's timestamp.
    pub ts: Timestamp,
    /// The value, or `None` for a tombstone (or an expired value).
    pub value: Option<&'a [u8]>,
    /// The value's absolute deadline in Unix milliseconds, if it expires.
    pub deadline_ms: Option<u64>,
}

impl EntryRef<'_> {
    /// The entry, owning a copy of the value.
    pub fn to_entry(self) -> Entry {
        Entry {
            ts: self.ts,
            value: self.value.map(<[u8]>::to_vec),
            deadline_ms: self.deadline_ms,
        }
    }
}

/// Engine figures for metrics and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Files per level.
    pub level_files: Vec<usize>,
    /// Bytes per level.
    pub level_bytes: Vec<u64>,
    /// Entries (versions and tombstones) per level.
    pub level_entries: Vec<u64>,
    /// Tombstones per level.
    pub level_tombstones: Vec<u64>,
    /// Bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Bytes in the immutable memtables waiting for flush.
    pub immutable_memtable_bytes: u64,
    /// The size this engine freezes a memtable at (`super::flush_point`).
    pub memtable_flush_point_bytes: u64,
    /// Entries (versions and tombstones) in the active and immutable
    /// memtables.
    pub memtable_entries: u64,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Highest visible sequence number.
    pub visible_seq: u64,
    /// Requests queued for the writer thread.
    pub write_queue_depth: usize,
    /// Groups queued for the WAL thread.
    pub wal_queue_depth: usize,
    /// (WAL + flush + compaction bytes written) / user bytes written.
    pub write_amplification: f64,
    /// Total SSTable bytes / bytes of the largest level (1.0 when all data is in one level).
    pub space_amplification: f64,
    /// Block cache counters.
    pub cache: CacheStats,
    /// Why writes are refused, if they are.
    pub poisoned: Option<String>,
}

/// One batch for [`Db::submit_many`].
pub struct Submission {
    /// The batch.
    pub batch: WriteBatch,
    /// When to answer.
    pub durability: Durability,
    /// The answer (first sequence number, or why not).
    pub done: WriteCallback,
    /// Apply it only if this holds, else answer [`Error::Conflict`]
    /// (`super::condition`).
    pub condition: Option<super::Condition>,
}

/// An open database directory.
pub struct Db {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// The reap thread, stopped after the others (it removes the files
    /// their last merges made obsolete).
    reaper: Option<JoinHandle<()>>,
    report: RecoveryReport,
}

impl Db {
    /// Opens (creating if missing) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let (shared, report) = open::open(dir.as_ref(), opts)?;
        let segment = shared.sv.load().mem.wal_segment();
        let poison_target = Arc::clone(&shared);
        let wal = WalWriter::create(
            Arc::clone(&shared.fs),
            &shared.dir,
            segment,
            shared.opts.wal_mode,
            shared
                .opts
                .wal_segment_preallocate_bytes
                .min(shared.opts.memtable_bytes_max as u64),
            Arc::clone(&shared.metrics),
            Arc::new(move |e| poison_target.poison(e)),
        )?;
        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| Error::io(name, e))
        };
        let wal_queue = Arc::clone(&shared.wal_queue);
        threads.push(spawn("ataman-wal", Box::new(move || wal.run(wal_queue)))?);
        let s = Arc::clone(&shared);
        threads.push(spawn("ataman-tx", Box::new(move || tx_thread::run(s)))?);
        let s = Arc::clone(&shared);
        threads.push(spawn(
            "ataman-flush",
            Box::new(move || flush_compaction_thread::run_flushes(s)),
        )?);
        let s = Arc::clone(&shared);
        threads.push(spawn(
            "ataman-compact",
            Box::new(move || flush_compaction_thread::run_compactions(s)),
        )?);
        let obsolete = Arc::clone(&shared.obsolete);
        let nice = shared.opts.compaction_nice;
        let reaper = spawn(
            "ataman-reap",
            Box::new(move || {
                if nice > 0 {
                    // Best effort, as the compaction thread's.
                    let _ = crate::thread_priority::lower_this_thread(nice);
                }
                obsolete.run()
            }),
        )?;
        Ok(Db {
            shared,
            threads,
            reaper: Some(reaper),
            report,
        })
    }

    /// The state the engine's threads share (crate tests drive steps the
    /// handle does not expose).
    #[cfg(test)]
    pub(crate) fn shared_for_tests(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// What the open found (WAL replay, torn tail, skipped records, timings).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Queues a batch; `done` runs (on an engine thread; keep it short) once
    /// the batch reached `durability`, with the batch's first sequence number.
    /// Refused at once with `Busy` when the writer's queue is full.
    pub fn submit(
        &self,
        batch: WriteBatch,
        durability: Durability,
        done: WriteCallback,
    ) -> Result<()> {
        batch.validate().map_err(Error::InvalidArgument)?;
        self.shared.check_poisoned()?;
        let bytes = batch.encoded_bytes();
        let request = WriteRequest::Write {
            batch,
            durability,
            callback: done,
            enqueued: std::time::Instant::now(),
            condition: None,
        };
        match self.shared.write_queue.push(request, bytes) {
            Ok(()) => Ok(()),
            Err((PushError::Full, _)) => {
                self.shared.metrics.writes_refused_busy.add(1);
                Err(Error::Busy {
                    what: "write queue full",
                })
            }
            Err((PushError::Closed, _)) => Err(Error::Closed),
        }
    }

    /// Queues several batches with one hand-off (one lock, at most one
    /// wake-up of the writer): what a network thread collects in one loop
    /// iteration. Each batch is atomic on its own. Returns the callbacks of
    /// the batches that were refused (invalid, queue full, engine failed or
    /// closed) with the reason; the others run their callbacks as usual.
    pub fn submit_many(&self, submissions: Vec<Submission>) -> Vec<(WriteCallback, Error)> {
        let mut refused = Vec::new();
        let poisoned = self.shared.check_poisoned().err();
        let now = std::time::Instant::now();
        let mut items = Vec::with_capacity(submissions.len());
        for s in submissions {
            if let Some(e) = &poisoned {
                refused.push((s.done, e.to_poisoned()));
                continue;
            }
            if let Err(msg) = s.batch.validate() {
                refused.push((s.done, Error::InvalidArgument(msg)));
                continue;
            }
            let bytes = s.batch.encoded_bytes();
            let request = WriteRequest::Write {
                batch: s.batch,
                durability: s.durability,
                callback: s.done,
                enqueued: now,
                condition: s.condition.map(Box::new),
            };
            items.push((request, bytes));
        }
        for (reason, request) in self.shared.write_queue.push_many(items) {
            if let WriteRequest::Write { callback, .. } = request {
                let e = match reason {
                    PushError::Full => {
                        self.shared.metrics.writes_refused_busy.add(1);
                        Error::Busy {
                            what: "write queue full",
                        }
                    }
                    PushError::Closed => Error::Closed,
                };
                refused.push((callback, e));
            }
        }
        refused
    }

    /// Writes a batch atomically and waits for `durability`. Returns the first sequence number.
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<u64> {
        // One wake-up of this thread per write (see `oneshot`).
        let (tx, rx) = crate::oneshot::oneshot();
        self.submit(batch, durability, Box::new(move |r| tx.send(r)))?;
        rx.wait().ok_or(Error::Closed)?
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
        read::get(&self.shared, key)
    }

    /// [`Db::get`] with the entry lent to `with` instead of returned: a
    /// key found in a memtable is read without an allocation (the network
    /// threads copy the value straight into their reply).
    pub fn get_with<R>(
        &self,
        key: &[u8],
        with: impl FnOnce(Option<EntryRef<'_>>) -> R,
    ) -> Result<R> {
        read::get_with(&self.shared, key, with)
    }

    /// [`Db::get`] and a sequence number the read saw every write up to:
    /// the `read_seq` of a conditional write computed from it
    /// (`super::condition`).
    pub fn get_at(&self, key: &[u8]) -> Result<(Option<Entry>, u64)> {
        // Loaded before the read: the read sees at least these writes, and
        // one it sees above them only makes the condition stricter.
        let seq = self.shared.visible_seq.load(Ordering::Acquire);
        Ok((read::get(&self.shared, key)?, seq))
    }

    /// Entries with `start <= key < end` in key order, on one consistent view.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        include_tombstones: bool,
    ) -> Result<ScanIter> {
        read::scan(&self.shared, start, end, include_tombstones, true)
    }

    /// [`Db::scan`] for a pass over much of the store (anti-entropy, a
    /// layout transition's copy): it uses the blocks the cache holds and
    /// adds none, so it does not evict the blocks point reads use.
    pub fn scan_without_filling(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        include_tombstones: bool,
    ) -> Result<ScanIter> {
        read::scan(&self.shared, start, end, include_tombstones, false)
    }

    /// Makes the memtable immutable and waits until every immutable memtable is flushed.
    pub fn flush(&self) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let request = WriteRequest::Rotate(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        if self.shared.write_queue.push_unbounded(request).is_err() {
            return Err(Error::Closed);
        }
        rx.recv().map_err(|_| Error::Closed)??;
        wait_until_flushed(&self.shared)
    }

    /// Drops every version of every key `keep` rejects, without writing a
    /// tombstone, among the versions written before the call (later ones
    /// are kept); waits, and says what it dropped (`super::purge`). It
    /// rewrites the tree a table at a time, with compactions between: until
    /// it returns, a rejected key may read as one of its earlier versions.
    pub fn purge(
        &self,
        keep: Arc<crate::compaction::purge::KeepKey>,
    ) -> Result<crate::compaction::purge::PurgeReport> {
        super::purge::purge(&self.shared, keep, None)
    }

    /// [`Db::purge`] with its reads paced at `bytes_per_sec` on average
    /// (`crate::compaction::pace`), so a purge of a large store does not
    /// take the disk and a CPU at once; it hurries while level 0 holds
    /// twice its compaction trigger (compactions wait for its current
    /// merge), and a close stops it (`Error::Closed`: the merges done stay
    /// done; run it again after the open to finish).
    pub fn purge_paced(
        &self,
        keep: Arc<crate::compaction::purge::KeepKey>,
        bytes_per_sec: u64,
    ) -> Result<crate::compaction::purge::PurgeReport> {
        super::purge::purge(&self.shared, keep, Some(bytes_per_sec))
    }

    /// Writes `batch`, whose keys must be strictly increasing (one version
    /// each), straight to tables of the deepest level free for its key
    /// span, durably, without the WAL or the memtable (`super::ingest`);
    /// `Ok(None)` when no level is free (nothing changed: write the batch
    /// the ordinary way). The versions compete with the others by
    /// timestamp, as every version does.
    pub fn ingest(&self, batch: &crate::WriteBatch) -> Result<Option<super::ingest::IngestReport>> {
        super::ingest::ingest(&self.shared, batch)
    }

    /// Writes a checkpoint into `dir` (which must not exist): the store as
    /// of one point of its write order, a directory [`Db::open`] opens
    /// (`super::checkpoint`). A write acknowledged before the call is in
    /// it; a write submitted after it returned is not. No foreground
    /// stall: the SSTables are hard-linked, the memtables' entries written
    /// as one table on this thread.
    pub fn checkpoint(&self, dir: &Path) -> Result<super::CheckpointReport> {
        super::checkpoint::checkpoint(&self.shared, dir)
    }

    /// Flushes, then compacts every table into the deepest level and waits.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let mut bg = lock(&self.shared.bg);
            bg.manual_compactions.push(tx);
            bg.compaction_hint = true;
        }
        self.shared.bg_cond.notify_all();
        rx.recv().map_err(|_| Error::Closed)?
    }

    /// Current figures.
    pub fn stats(&self) -> Stats {
        let s = &self.shared;
        let sv = s.sv.load();
        let m = &s.metrics;
        let level_bytes: Vec<u64> = (0..sv.version.levels.len())
            .map(|l| sv.version.level_bytes(l))
            .collect();
        let total: u64 = level_bytes.iter().sum();
        let largest = level_bytes.iter().copied().max().unwrap_or(0);
        let written = m.wal_bytes_written.get()
            + m.flush_bytes_written.get()
            + m.compaction_bytes_written.get();
        let user = m.user_bytes_written.get();
        Stats {
            level_files: sv.version.levels.iter().map(Vec::len).collect(),
            level_bytes,
            level_entries: sv
                .version
                .levels
                .iter()
                .map(|l| l.iter().map(|t| t.meta.entries).sum())
                .collect(),
            level_tombstones: sv
                .version
                .levels
                .iter()
                .map(|l| l.iter().map(|t| t.meta.tombstones).sum())
                .collect(),
            memtable_bytes: sv.mem.bytes() as u64,
            immutable_memtable_bytes: sv.imms.iter().map(|m| m.bytes() as u64).sum(),
            memtable_flush_point_bytes: s.flush_at as u64,
            memtable_entries: (sv.mem.len()
                + sv.imms.iter().map(ImmutableMemtable::len).sum::<usize>())
                as u64,
            immutable_memtables: sv.imms.len(),
            visible_seq: s.visible_seq.load(Ordering::Acquire),
            write_queue_depth: s.write_queue.depth(),
            wal_queue_depth: s.wal_queue.depth(),
            write_amplification: if user == 0 {
                0.0
            } else {
                written as f64 / user as f64
            },
            space_amplification: if largest == 0 {
                0.0
            } else {
                total as f64 / largest as f64
            },
            cache: s.cache.stats(),
            poisoned: s.check_poisoned().err().map(|e| e.to_string()),
        }
    }

    /// The largest timestamp of any version stored (0 when empty). A node
    /// seeds its clock with it, so writes after a restart with the wall
    /// clock behind are still newer than everything already stored.
    pub fn timestamp_max(&self) -> crate::key::Timestamp {
        let sv = self.shared.sv.load();
        let mems = std::iter::once(sv.mem.ts_max()).chain(sv.imms.iter().map(|m| m.ts_max()));
        let files = sv.version.all_files().map(|t| t.meta.ts_max);
        mems.chain(files).max().unwrap_or(0)
    }

    /// True once a write failed because the disk or the quota was full
    /// (ENOSPC, EDQUOT): the engine is poisoned (read-only until a
    /// restart), and this says why, so a server can answer 507.
    pub fn out_of_space(&self) -> bool {
        self.shared.out_of_space()
    }

    /// The engine's counters and histograms.
    pub fn metrics(&self) -> &crate::metrics::EngineMetrics {
        &self.shared.metrics
    }

    /// Flushes the memtable (so the next open replays nothing), stops the
    /// threads and releases the directory. Pending writes are answered first.
    pub fn close(mut self) -> Result<()> {
        let flushed = if self.shared.check_poisoned().is_ok() {
            self.flush()
        } else {
            Ok(())
        };
        self.stop();
        flushed?;
        self.shared.check_poisoned()
    }

    fn stop(&mut self) {
        self.shared.write_queue.close();
        {
            let mut bg = lock(&self.shared.bg);
            bg.shutdown = true;
        }
        self.shared.bg_cond.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.shared.obsolete.close();
        if let Some(t) = self.reaper.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Wakes the background thread and waits until no immutable memtable is
/// left (every one flushed).
pub(crate) fn wait_until_flushed(shared: &Shared) -> Result<()> {
    shared.notify_bg();
    let mut bg = lock(&shared.bg);
    loop {
        shared.check_poisoned()?;
        if shared.sv.load().imms.is_empty() {
            return Ok(());
        }
        bg = shared
            .bg_cond
            .wait_timeout(bg, std::time::Duration::from_millis(50))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
