//! The WAL thread: group commit.
//!
//! The writer (tx) thread hands over [`WalItem`]s; the WAL thread wakes,
//! takes everything queued, frames all records into one buffer, writes it
//! with one call and fsyncs once (per [`WalMode`]). While that fsync runs,
//! the next group grows in the queue: this is where write throughput comes
//! from. Then it runs the callbacks of the writes in the group.
//!
//! # Invariants
//! - A `Complete` write's callback runs only after the `write` (and, in
//!   `Fsync` mode, the `fsync`) of the group holding it returned `Ok`.
//! - After the first failed write or fsync the WAL is poisoned: it never
//!   retries, it fails every pending and later write, and the engine stops
//!   accepting writes.
//! - The `first_seq` of the writes it is handed only grows (the tx thread
//!   numbers batches in order).
//!
//! Both orders are asserted (`debug_assert!`, on the hot path) where they
//! are made: `first_seq` in `process`, the sync before the callbacks in
//! `commit_group`.

use super::WriteCallback;
use crate::batch::{WriteBatch, encode_payload};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::metrics::EngineMetrics;
use crate::options::{Durability, WalMode};
use crate::queue::HandoffQueue;
use crate::wal::record::encode_record;
use crate::wal::segment::segment_file_name;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest group the WAL thread writes with one call; a larger backlog is
/// written as several groups (each still fsynced once).
pub const WAL_GROUP_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Zeros written into a segment's reserved space at a time (see
/// `WalWriter::zero_ahead`).
const ZERO_AHEAD_CHUNK_BYTES: u64 = 1024 * 1024;

/// Zeros are written again when fewer than this many are left ahead of the
/// appends.
const ZERO_AHEAD_MIN_BYTES: u64 = 512 * 1024;

/// What the writer thread hands to the WAL thread.
pub enum WalItem {
    /// A batch to log.
    Write {
        /// Sequence number of its first entry.
        first_seq: u64,
        /// The batch.
        batch: WriteBatch,
        /// When to run `callback`.
        durability: Durability,
        /// Runs once the batch reached `durability` (`None` if already answered).
        callback: Option<WriteCallback>,
    },
    /// Close the current segment and continue in a new one.
    Rotate {
        /// The new segment's number.
        segment: u64,
    },
    /// Runs once everything queued before it is as durable as the mode allows.
    Barrier(Box<dyn FnOnce(Result<()>) + Send>),
}

/// Reports a WAL failure to the rest of the engine (poisons it).
pub type PoisonFn = Arc<dyn Fn(&Error) + Send + Sync>;

/// The WAL thread's state.
pub struct WalWriter {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    mode: WalMode,
    file: Option<Box<dyn WritableFile>>,
    path: PathBuf,
    metrics: Arc<EngineMetrics>,
    poison: PoisonFn,
    preallocate_bytes: u64,
    /// The current segment's zeros were written (not just reserved) up to here.
    zeroed_to: u64,
    /// The current segment's reserved (preallocated) length.
    reserved_to: u64,
    failed: Option<String>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    /// The `first_seq` of the last write handed over (0: none yet).
    last_first_seq: u64,
}

enum Done {
    Write(WriteCallback, u64),
    Barrier(Box<dyn FnOnce(Result<()>) + Send>),
}

impl WalWriter {
    /// Creates segment `segment` in `dir` (and fsyncs the directory).
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        segment: u64,
        mode: WalMode,
        preallocate_bytes: u64,
        metrics: Arc<EngineMetrics>,
        poison: PoisonFn,
    ) -> Result<Self> {
        let mut w = WalWriter {
            fs,
            dir: dir.to_path_buf(),
            mode,
            file: None,
            path: PathBuf::new(),
            metrics,
            poison,
            preallocate_bytes,
            zeroed_to: 0,
            reserved_to: 0,
            failed: None,
            buf: Vec::new(),
            scratch: Vec::new(),
            last_first_seq: 0,
        };
        w.open_segment(segment)?;
        Ok(w)
    }

    fn open_segment(&mut self, segment: u64) -> Result<()> {
        let path = self.dir.join(segment_file_name(segment));
        let mut file = self.fs.create(&path).map_err(|e| Error::io(&path, e))?;
        self.zeroed_to = 0;
        self.reserved_to = 0;
        if self.preallocate_bytes > 0 && self.mode != WalMode::None {
            // Reserve the segment and make its size durable now, so the
            // group commits' fdatasyncs carry no metadata; write the zeros
            // of its first stretch too (see `zero_ahead`).
            file.preallocate(self.preallocate_bytes)
                .map_err(|e| Error::io(&path, e))?;
            self.reserved_to = self.preallocate_bytes;
            let first = ZERO_AHEAD_CHUNK_BYTES.min(self.reserved_to);
            self.zeroed_to = match file.zero_fill(0, first) {
                Ok(()) => {
                    self.metrics.wal_zero_fill_bytes.add(first);
                    first
                }
                Err(_) => self.reserved_to,
            };
            file.sync().map_err(|e| Error::io(&path, e))?;
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| Error::io(&self.dir, e))?;
        self.file = Some(file);
        self.path = path;
        Ok(())
    }

    /// The thread body: drains `queue` until it is closed and empty.
    pub fn run(mut self, queue: Arc<HandoffQueue<WalItem>>) {
        let mut items = Vec::new();
        while queue.drain(&mut items, Duration::from_secs(1)) {
            self.process(&mut items);
        }
        if let Some(mut file) = self.file.take()
            && self.failed.is_none()
            && self.mode != WalMode::None
        {
            let _ = file.sync();
        }
    }

    /// Logs one drained group (exposed for recovery-free tests).
    pub fn process(&mut self, items: &mut Vec<WalItem>) {
        let mut done: Vec<Done> = Vec::with_capacity(items.len());
        let mut records = 0u64;
        for item in items.drain(..) {
            match item {
                WalItem::Write {
                    first_seq,
                    batch,
                    durability,
                    callback,
                } => {
                    debug_assert!(
                        first_seq > self.last_first_seq,
                        "WAL handed first_seq {first_seq} after {}",
                        self.last_first_seq
                    );
                    self.last_first_seq = first_seq;
                    if self.mode != WalMode::None && self.failed.is_none() {
                        self.scratch.clear();
                        encode_payload(&mut self.scratch, first_seq, &batch);
                        encode_record(&mut self.buf, &self.scratch);
                        records += 1;
                    }
                    match (callback, durability) {
                        (Some(cb), Durability::Submit) => cb(self.check().map(|()| first_seq)),
                        (Some(cb), _) => done.push(Done::Write(cb, first_seq)),
                        (None, _) => {}
                    }
                    if self.buf.len() >= WAL_GROUP_BYTES_MAX {
                        self.commit_group(&mut done, records);
                        records = 0;
                    }
                }
                WalItem::Rotate { segment } => {
                    self.commit_group(&mut done, records);
                    records = 0;
                    if self.failed.is_none() {
                        self.file = None;
                        if let Err(e) = self.open_segment(segment) {
                            self.fail(&e);
                        }
                    }
                }
                WalItem::Barrier(cb) => done.push(Done::Barrier(cb)),
            }
        }
        self.commit_group(&mut done, records);
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
            }),
        }
    }

    fn fail(&mut self, e: &Error) {
        if self.failed.is_none() {
            self.failed = Some(e.to_string());
            (self.poison)(e);
        }
    }

    /// Writes and syncs the buffered group, answers everything in `done`,
    /// and only then writes zeros ahead if they are due: the group's
    /// answers never wait for a megabyte of zeros.
    fn commit_group(&mut self, done: &mut Vec<Done>, records: u64) {
        let mut synced = false;
        let had_records = !self.buf.is_empty();
        if had_records && self.failed.is_none() {
            match self.write_and_sync(records) {
                Ok(()) => synced = true,
                Err(e) => self.fail(&e),
            }
        }
        self.buf.clear();
        let result = self.check();
        // The invariant: a group's records are written (and synced, per
        // the mode) before any of its callbacks is told `Ok`.
        debug_assert!(
            !had_records || synced || result.is_err(),
            "a WAL group's callbacks would run before its write and sync"
        );
        for d in done.drain(..) {
            match d {
                Done::Write(cb, seq) => {
                    cb(result.as_ref().map(|()| seq).map_err(Error::to_poisoned))
                }
                Done::Barrier(cb) => cb(result.as_ref().map(|_| ()).map_err(Error::to_poisoned)),
            }
        }
        if synced {
            self.zero_ahead();
        }
    }

    /// Keeps at least [`ZERO_AHEAD_MIN_BYTES`] of the segment's reserved
    /// space ahead of the appends written with zeros, a chunk at a time.
    /// `fallocate` only reserves blocks ("unwritten" extents); the first
    /// sync that reaches such a block has the file system convert the
    /// extent, kernel work in a worker thread that the sync waits for, at
    /// nearly every group commit. Zeros written a megabyte ahead make that
    /// one conversion per megabyte, carried by the next group's sync
    /// (docs/bench-log/2026-11-22-http-latency-cluster-wal-zeros.md, "WAL
    /// segments written ahead with zeros"). Only
    /// an optimisation: if writing zeros fails, this segment goes on
    /// without.
    fn zero_ahead(&mut self) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        let appended = file.len();
        if self.zeroed_to >= self.reserved_to
            || self.zeroed_to >= appended.saturating_add(ZERO_AHEAD_MIN_BYTES)
        {
            return;
        }
        let from = self.zeroed_to.max(appended);
        // A record larger than the space reserved ahead (a value near the
        // 16 MiB limit) leaves the file past `reserved_to`: nothing is
        // reserved ahead to zero (the subtraction below once underflowed
        // and panicked the WAL thread, every write hanging after it).
        if from >= self.reserved_to {
            return;
        }
        let bytes = ZERO_AHEAD_CHUNK_BYTES.min(self.reserved_to - from);
        match file.zero_fill(from, bytes) {
            Ok(()) => {
                self.zeroed_to = from + bytes;
                self.metrics.wal_zero_fill_bytes.add(bytes);
            }
            Err(_) => self.zeroed_to = self.reserved_to,
        }
    }

    fn write_and_sync(&mut self, records: u64) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(Error::Closed);
        };
        let started = Instant::now();
        file.append(&self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        let written = Instant::now();
        let m = &self.metrics;
        m.wal_writes.add(1);
        m.wal_bytes_written.add(self.buf.len() as u64);
        m.wal_batch_records.record(records);
        m.wal_batch_bytes.record(self.buf.len() as u64);
        m.wal_write_latency_us
            .record(written.duration_since(started).as_micros() as u64);
        if self.mode == WalMode::Fsync {
            file.sync().map_err(|e| Error::io(&self.path, e))?;
            m.wal_syncs.add(1);
            m.wal_sync_latency_us
                .record(written.elapsed().as_micros() as u64);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{DirLock, OsFs, ReadableFile};
    use std::sync::Mutex;

    type Log = Arc<Mutex<Vec<&'static str>>>;

    /// The real file system, logging the WAL file's syncs and zero fills.
    struct LoggingFs {
        inner: OsFs,
        log: Log,
    }

    struct LoggingFile {
        inner: Box<dyn WritableFile>,
        log: Log,
    }

    impl WritableFile for LoggingFile {
        fn append(&mut self, data: &[u8]) -> std::io::Result<()> {
            self.inner.append(data)
        }
        fn sync(&mut self) -> std::io::Result<()> {
            self.log.lock().unwrap().push("sync");
            self.inner.sync()
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn preallocate(&mut self, bytes: u64) -> std::io::Result<()> {
            self.inner.preallocate(bytes)
        }
        fn zero_fill(&mut self, from: u64, bytes: u64) -> std::io::Result<()> {
            self.log.lock().unwrap().push("zero_fill");
            self.inner.zero_fill(from, bytes)
        }
    }

    impl FileSystem for LoggingFs {
        fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
            self.inner.create_dir_all(path)
        }
        fn create(&self, path: &Path) -> std::io::Result<Box<dyn WritableFile>> {
            Ok(Box::new(LoggingFile {
                inner: self.inner.create(path)?,
                log: Arc::clone(&self.log),
            }))
        }
        fn open_append(&self, path: &Path) -> std::io::Result<Box<dyn WritableFile>> {
            self.inner.open_append(path)
        }
        fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn ReadableFile>> {
            self.inner.open_read(path)
        }
        fn list_dir(&self, path: &Path) -> std::io::Result<Vec<String>> {
            self.inner.list_dir(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
            self.inner.rename(from, to)
        }
        fn remove_file(&self, path: &Path) -> std::io::Result<()> {
            self.inner.remove_file(path)
        }
        fn truncate(&self, path: &Path, len: u64) -> std::io::Result<()> {
            self.inner.truncate(path, len)
        }
        fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
            self.inner.sync_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn lock(&self, path: &Path) -> std::io::Result<Box<dyn DirLock>> {
            self.inner.lock(path)
        }
    }

    /// A writer (fsync mode) on [`LoggingFs`] in `dir`, reserving
    /// `preallocate` bytes ahead.
    fn logged_writer(dir: &Path, log: &Log, preallocate: u64) -> WalWriter {
        let fs = Arc::new(LoggingFs {
            inner: OsFs,
            log: Arc::clone(log),
        });
        WalWriter::create(
            fs,
            dir,
            1,
            WalMode::Fsync,
            preallocate,
            Arc::new(EngineMetrics::default()),
            Arc::new(|_: &Error| {}),
        )
        .unwrap()
    }

    /// A group whose commit brings the appends within
    /// `ZERO_AHEAD_MIN_BYTES` of the written zeros is answered before the
    /// next megabyte of zeros is written: the answers never wait for it.
    #[test]
    fn group_is_answered_before_zeros_are_written_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let log: Log = Arc::default();
        let mut wal = logged_writer(dir.path(), &log, 8 * ZERO_AHEAD_CHUNK_BYTES);
        // The first chunk of zeros is written when the segment is created.
        assert_eq!(*log.lock().unwrap(), ["zero_fill", "sync"]);
        log.lock().unwrap().clear();
        // One group of 600 KiB: past the 512 KiB margin of the first chunk.
        let mut batch = WriteBatch::new();
        batch.put(b"k", &vec![7u8; 600 * 1024], 1);
        let answer_log = Arc::clone(&log);
        let mut items = vec![WalItem::Write {
            first_seq: 1,
            batch,
            durability: Durability::Complete,
            callback: Some(Box::new(move |r| {
                assert_eq!(r.unwrap(), 1);
                answer_log.lock().unwrap().push("answer");
            })),
        }];
        wal.process(&mut items);
        assert_eq!(*log.lock().unwrap(), ["sync", "answer", "zero_fill"]);
    }

    /// A group that carries the file past the space reserved ahead (a
    /// value near the 16 MiB limit) writes no zeros and does not stop the
    /// WAL thread: the next group is answered too (attacker, 2026-12-07:
    /// `reserved_to - from` underflowed and panicked the thread).
    #[test]
    fn a_group_past_the_reserved_space_is_answered_and_the_next_too() {
        let dir = tempfile::tempdir().unwrap();
        let log: Log = Arc::default();
        let mut wal = logged_writer(dir.path(), &log, 2 * ZERO_AHEAD_CHUNK_BYTES);
        let answered = Arc::new(Mutex::new(Vec::new()));
        for seq in [1, 2] {
            let mut batch = WriteBatch::new();
            let big = (3 * ZERO_AHEAD_CHUNK_BYTES) as usize;
            batch.put(b"k", &vec![7u8; big], seq);
            let answers = Arc::clone(&answered);
            let mut items = vec![WalItem::Write {
                first_seq: seq,
                batch,
                durability: Durability::Complete,
                callback: Some(Box::new(move |r| answers.lock().unwrap().push(r.unwrap()))),
            }];
            wal.process(&mut items);
        }
        assert_eq!(*answered.lock().unwrap(), [1, 2]);
    }

    /// The `first_seq` invariant is checked where it is relied on: a write
    /// handed over out of order stops a debug build (the negative control
    /// of the assertion in `process`).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "WAL handed first_seq 5 after 9")]
    fn first_seq_going_back_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = WalWriter::create(
            Arc::new(OsFs),
            dir.path(),
            1,
            WalMode::Fsync,
            0,
            Arc::new(EngineMetrics::default()),
            Arc::new(|_: &Error| {}),
        )
        .unwrap();
        for first_seq in [9, 5] {
            let mut batch = WriteBatch::new();
            batch.put(b"k", b"v", 1);
            let mut items = vec![WalItem::Write {
                first_seq,
                batch,
                durability: Durability::Complete,
                callback: None,
            }];
            wal.process(&mut items);
        }
    }
}
