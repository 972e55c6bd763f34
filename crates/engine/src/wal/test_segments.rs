//! Test helpers for WAL replay: building records and segment files with
//! plain `std::fs` writes, replaying into a list, and a file system that
//! watches (or sabotages) the reads.

use crate::batch::{WriteBatch, encode_payload};
use crate::error::Result;
use crate::fs::{DirLock, FileSystem, OsFs, ReadableFile, WritableFile};
use crate::wal::record::encode_record;
use crate::wal::replay::{ReplayOptions, ReplayReport, replay};
use crate::wal::segment::segment_file_name;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Both replay modes, strict.
pub const BOTH_MODES: [ReplayOptions; 2] = [
    ReplayOptions {
        reader_thread: false,
        force: false,
    },
    ReplayOptions {
        reader_thread: true,
        force: false,
    },
];

/// A decoded record as the applier saw it: first sequence number, count, batch bytes.
pub type Applied = (u64, u32, Vec<u8>);

/// A batch of `entries` puts whose keys and values are derived from `seed`.
pub fn batch(seed: u64, entries: u32, value_bytes: usize) -> WriteBatch {
    let mut b = WriteBatch::new();
    for i in 0..u64::from(entries) {
        let key = format!("key-{seed}-{i}");
        let value = vec![(seed.wrapping_add(i) % 251) as u8; value_bytes];
        if i % 3 == 2 {
            b.delete(key.as_bytes(), seed + i);
        } else {
            b.put(key.as_bytes(), &value, seed + i);
        }
    }
    b
}

/// One framed record holding `batch` at `first_seq`.
pub fn record(first_seq: u64, batch: &WriteBatch) -> Vec<u8> {
    let mut payload = Vec::new();
    encode_payload(&mut payload, first_seq, batch);
    let mut out = Vec::new();
    encode_record(&mut out, &payload);
    out
}

/// What replay must apply for `batch` at `first_seq`.
pub fn applied(first_seq: u64, batch: &WriteBatch) -> Applied {
    (first_seq, batch.len() as u32, batch.as_bytes().to_vec())
}

/// `records` consecutive records starting at sequence `first_seq`; returns
/// the framed records and what replay must apply for them.
pub fn records(first_seq: u64, records: usize, value_bytes: usize) -> (Vec<Vec<u8>>, Vec<Applied>) {
    let mut seq = first_seq;
    let mut framed = Vec::new();
    let mut model = Vec::new();
    for i in 0..records {
        let b = batch(seq, (i % 4) as u32 + 1, value_bytes);
        framed.push(record(seq, &b));
        model.push(applied(seq, &b));
        seq += b.len() as u64;
    }
    (framed, model)
}

/// Writes segment `number` of `dir` holding `records` back to back; returns its path.
pub fn write_segment(dir: &Path, number: u64, records: &[Vec<u8>]) -> PathBuf {
    let path = dir.join(segment_file_name(number));
    std::fs::write(&path, records.concat()).expect("write segment");
    path
}

/// Replays with `opts` through `fs`, collecting every applied record.
pub fn replay_with(
    fs: &dyn FileSystem,
    dir: &Path,
    segments: &[u64],
    opts: ReplayOptions,
) -> (Vec<Applied>, Result<ReplayReport>) {
    let mut seen = Vec::new();
    let mut last_segment = 0;
    let result = replay(fs, dir, segments, opts, &mut |segment, p| {
        assert!(segments.contains(&segment) && segment >= last_segment);
        last_segment = segment;
        assert_eq!(p.entries().count(), p.count as usize);
        seen.push((p.first_seq, p.count, p.batch.to_vec()));
        Ok(())
    });
    (seen, result)
}

/// Replays with `opts` on the real file system.
pub fn replay_os(
    dir: &Path,
    segments: &[u64],
    opts: ReplayOptions,
) -> (Vec<Applied>, Result<ReplayReport>) {
    replay_with(&OsFs, dir, segments, opts)
}

/// The real file system, remembering the furthest byte any read reached and
/// panicking on reads when told to.
#[derive(Default)]
pub struct WatchedFs {
    /// Largest `offset + len` of any read so far.
    pub read_end_max: Arc<AtomicU64>,
    /// When set, every read panics.
    pub panic_on_read: Arc<AtomicBool>,
    /// Names of the threads that read.
    pub read_threads: Arc<Mutex<BTreeSet<String>>>,
}

struct WatchedFile {
    inner: Arc<dyn ReadableFile>,
    read_end_max: Arc<AtomicU64>,
    panic_on_read: Arc<AtomicBool>,
    read_threads: Arc<Mutex<BTreeSet<String>>>,
}

impl ReadableFile for WatchedFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        assert!(
            !self.panic_on_read.load(Ordering::SeqCst),
            "injected read panic"
        );
        let name = std::thread::current().name().unwrap_or("").to_string();
        self.read_threads.lock().unwrap().insert(name);
        self.read_end_max
            .fetch_max(offset + buf.len() as u64, Ordering::SeqCst);
        self.inner.read_exact_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for WatchedFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        OsFs.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        OsFs.create(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        OsFs.open_append(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadableFile>> {
        Ok(Arc::new(WatchedFile {
            inner: OsFs.open_read(path)?,
            read_end_max: self.read_end_max.clone(),
            panic_on_read: self.panic_on_read.clone(),
            read_threads: self.read_threads.clone(),
        }))
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        OsFs.list_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        OsFs.remove_file(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        OsFs.truncate(path, len)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        OsFs.sync_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        OsFs.exists(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        OsFs.lock(path)
    }
}
