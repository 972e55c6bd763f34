//! Opening a database: manifest, tables, WAL replay, a fresh manifest.
//!
//! The protocol (`docs/ARCHITECTURE.md`, "Recovery"):
//! 1. Lock the directory.
//! 2. Load the manifest (none: a new database, unless data files are
//!    present, which is refused rather than silently ignored).
//! 3. Open every live table.
//! 4. Replay WAL segments from the manifest's `wal_segment_min` on, into
//!    memtables; each full memtable, and the last one, is written to L0.
//! 5. Write a new manifest naming the tables and a new, empty WAL segment
//!    (temp file, fsync, rename, fsync dir). Only now are the replayed
//!    segments obsolete.
//! 6. Remove obsolete files (replayed segments, tables not in the manifest,
//!    the temp manifest). Files with names the engine does not use are left alone.

use super::replay_buffer::ReplayBuffer;
use super::shared::{Shared, VersionSet};
use super::version::{LiveTable, SuperVersion, Version};
use crate::compaction::output::{DropPolicy, write_tables};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::manifest::{ManifestState, ManifestWriter, load_manifest};
use crate::memtable::Memtable;
use crate::metrics::EngineMetrics;
use crate::options::Options;
use crate::sst::{BlockCache, Table, parse_table_file_name, table_file_name};
use crate::wal::replay::{ReplayOptions, ReplayReport, replay};
use crate::wal::segment::parse_segment_file_name;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Name of the lock file.
pub const LOCK_FILE_NAME: &str = "LOCK";
/// Name of the temp file a new manifest is written to.
pub const MANIFEST_TMP_NAME: &str = "MANIFEST.tmp";

/// What an open found and did.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// The WAL replay's report.
    pub replay: ReplayReport,
    /// Tables written from replayed memtables.
    pub tables_flushed: usize,
    /// Time spent replaying the WAL: reading, decoding, applying, and
    /// writing the replayed entries as L0 tables (so `replay_apply_duration
    /// + flush_duration`, give or take the bookkeeping between them).
    pub replay_duration: Duration,
    /// Part of `replay_duration` spent reading, checking, decoding and
    /// buffering WAL records (everything but `flush_duration`).
    pub replay_apply_duration: Duration,
    /// Part of `replay_duration` spent writing L0 tables: sorting the
    /// replayed entries, building, writing and syncing the tables.
    pub flush_duration: Duration,
    /// Part of `flush_duration` spent sorting the replayed entries.
    pub flush_sort_duration: Duration,
    /// Time the whole open took.
    pub open_duration: Duration,
}

/// Opens `dir`; returns the shared state (threads not started) and the report.
pub fn open(dir: &Path, opts: Options) -> Result<(Arc<Shared>, RecoveryReport)> {
    let started = Instant::now();
    let fs = Arc::clone(&opts.fs);
    fs.create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let lock_path = dir.join(LOCK_FILE_NAME);
    let dir_lock = fs.lock(&lock_path).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => Error::Locked {
            path: dir.to_path_buf(),
        },
        _ => Error::io(&lock_path, e),
    })?;
    let names = fs.list_dir(dir).map_err(|e| Error::io(dir, e))?;
    let state = match load_manifest(fs.as_ref(), dir)? {
        Some(state) => state,
        None => {
            if let Some(name) = names.iter().find(|n| {
                parse_table_file_name(n).is_some() || parse_segment_file_name(n).is_some()
            }) {
                return Err(Error::InvalidArgument(format!(
                    "{} holds data file {name} but no MANIFEST; refusing to start empty over it",
                    dir.display()
                )));
            }
            ManifestState {
                next_file_number: 1,
                ..ManifestState::default()
            }
        }
    };
    let max_number = names
        .iter()
        .filter_map(|n| parse_table_file_name(n).or_else(|| parse_segment_file_name(n)))
        .max()
        .unwrap_or(0);
    let next_file_number = state.next_file_number.max(max_number + 1);
    let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
    let mut version = Version::empty(opts.levels);
    for meta in &state.files {
        let path = dir.join(table_file_name(meta.number));
        let file = fs.open_read(&path).map_err(|e| Error::io(&path, e))?;
        let table = Table::open(file, path.clone(), meta.number, Arc::clone(&cache))?;
        let level = (meta.level as usize).min(opts.levels - 1);
        version.levels[level].push(Arc::new(LiveTable::new(
            meta.clone(),
            table,
            path,
            Arc::clone(&fs),
        )));
    }
    version.normalize();
    let mut segments: Vec<u64> = names
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .filter(|n| *n >= state.wal_segment_min)
        .collect();
    segments.sort_unstable();

    // Shared state for the replay (its table writer needs it); the manifest
    // writer is created after the replay, so start with a placeholder state.
    let metrics = Arc::new(EngineMetrics::default());
    let sv = SuperVersion {
        mem: Arc::new(Memtable::new(0)),
        imms: Vec::new(),
        version: Arc::new(version),
    };
    let manifest = ManifestWriter::create(Arc::clone(&fs), dir, &state)?;
    let versions = VersionSet {
        manifest,
        state: state.clone(),
    };
    let shared = Arc::new(Shared::new(
        dir.to_path_buf(),
        opts,
        sv,
        state.last_seq,
        next_file_number,
        cache,
        versions,
        dir_lock,
        Arc::clone(&metrics),
    ));
    let mut report = RecoveryReport::default();
    let replay_started = Instant::now();
    let mut flushed: Vec<Arc<LiveTable>> = Vec::new();
    let mut buffer = ReplayBuffer::new();
    let mut flush_timing = FlushTiming::default();
    let mut last_seq = state.last_seq;
    let replay_opts = ReplayOptions {
        reader_thread: shared.opts.recovery_reader_thread,
        force: shared.opts.force_recovery,
    };
    report.replay = replay(fs.as_ref(), dir, &segments, replay_opts, &mut |payload| {
        for (i, entry) in payload.entries().enumerate() {
            let entry = entry.map_err(|e| Error::InvalidArgument(format!("replay: {e}")))?;
            buffer.push(
                entry.key,
                entry.ts,
                payload.first_seq + i as u64,
                entry.kind,
                entry.value,
            );
        }
        last_seq = last_seq.max(payload.first_seq + u64::from(payload.count) - 1);
        if buffer.bytes() >= shared.opts.memtable_bytes_max {
            let full = std::mem::take(&mut buffer);
            flushed.extend(flush_recovered(&shared, full, &mut flush_timing)?);
        }
        Ok(())
    })?;
    if !buffer.is_empty() {
        flushed.extend(flush_recovered(&shared, buffer, &mut flush_timing)?);
    }
    report.replay_duration = replay_started.elapsed();
    report.flush_duration = flush_timing.total;
    report.flush_sort_duration = flush_timing.sort;
    report.replay_apply_duration = report.replay_duration.saturating_sub(flush_timing.total);
    report.tables_flushed = flushed.len();

    // Install: the replayed tables in L0, a new segment, a fresh manifest.
    let segment = shared.new_file_number();
    let mut version = Version::clone(&shared.sv.load().version);
    version.levels[0].extend(flushed.iter().cloned());
    version.normalize();
    let mut files: Vec<_> = version.all_files().map(|t| t.meta.clone()).collect();
    // `ManifestState` keeps its files sorted by (level, number).
    files.sort_by_key(|f| (f.level, f.number));
    let new_state = ManifestState {
        files,
        wal_segment_min: segment,
        next_file_number: shared.next_file_number.load(Ordering::Relaxed),
        last_seq,
    };
    {
        let mut versions = super::shared::lock(&shared.versions);
        versions.manifest = ManifestWriter::create(Arc::clone(&fs), dir, &new_state)?;
        versions.state = new_state;
    }
    shared.visible_seq.store(last_seq, Ordering::Release);
    shared.sv.store(Arc::new(SuperVersion {
        mem: Arc::new(Memtable::new(segment)),
        imms: Vec::new(),
        version: Arc::new(version),
    }));
    remove_obsolete_files(&shared, segment)?;
    report.open_duration = started.elapsed();
    Ok((shared, report))
}

/// Time spent writing replayed entries to L0, summed over the flushes.
#[derive(Debug, Default)]
struct FlushTiming {
    total: Duration,
    sort: Duration,
}

/// Sorts `buffer` and writes it as one L0 table (older versions dropped,
/// tombstones kept, as a memtable flush does).
fn flush_recovered(
    shared: &Shared,
    buffer: ReplayBuffer,
    timing: &mut FlushTiming,
) -> Result<Vec<Arc<LiveTable>>> {
    let started = Instant::now();
    let mut it = buffer.sorted();
    timing.sort += started.elapsed();
    it.seek_to_first()?;
    let tables = write_tables(shared, &mut it, 0, u64::MAX, DropPolicy::keep_tombstones());
    // Freeing the buffer is part of the flush's cost.
    drop(it);
    timing.total += started.elapsed();
    tables
}

/// Removes tables not in the current version, segments below `segment_min`,
/// and a leftover temp manifest.
fn remove_obsolete_files(shared: &Shared, segment_min: u64) -> Result<()> {
    let dir = &shared.dir;
    let live: std::collections::HashSet<u64> = shared
        .sv
        .load()
        .version
        .all_files()
        .map(|t| t.meta.number)
        .collect();
    let names = shared.fs.list_dir(dir).map_err(|e| Error::io(dir, e))?;
    for name in names {
        let obsolete = match (parse_table_file_name(&name), parse_segment_file_name(&name)) {
            (Some(n), _) => !live.contains(&n),
            (_, Some(n)) => n < segment_min,
            _ => name == MANIFEST_TMP_NAME,
        };
        if obsolete {
            let path = dir.join(&name);
            shared
                .fs
                .remove_file(&path)
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    Ok(())
}
