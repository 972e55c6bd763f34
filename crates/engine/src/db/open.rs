//! Opening a database: manifest, tables, WAL replay, a fresh manifest.
//!
//! The protocol (`docs/ARCHITECTURE.md`, "Recovery"):
//! 1. Lock the directory.
//! 2. Load the manifest (none: a new database, unless data files are
//!    present, which is refused rather than silently ignored).
//! 3. Open every live table.
//! 4. Replay WAL segments from the manifest's `wal_segment_min` on, into
//!    sorted runs of a memtable's size each (`ReplayedRuns`): up to
//!    `immutable_memtables_max` of the newest stay in memory as immutable
//!    memtables, older ones are written to L0 now.
//! 5. In `WalMode::Fsync`, sync the segments the kept runs came from: they
//!    stay the only durable copy of those entries until the background
//!    flush, and a process crash may have left their tail unsynced.
//! 6. Write a new manifest naming the tables, `wal_segment_min` = the
//!    segment of the oldest kept run (or, if none, a new, empty segment),
//!    and the new segment's number (temp file, fsync, rename, fsync dir).
//!    Only now are segments below that minimum obsolete; the others become
//!    obsolete as the background thread flushes the kept runs, exactly as
//!    for rotated memtables.
//! 7. Remove obsolete files (segments below the minimum, tables not in the
//!    manifest, the temp manifest). Files with names the engine does not
//!    use are left alone.
//!
//! A forced recovery that skipped records writes every run to L0 at step
//! 4 instead of keeping any, so the damaged segments are obsolete when the
//! open returns and the next open does not meet them again.

use super::replayed_runs::ReplayedRuns;
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::manifest::{ManifestState, ManifestWriter, load_manifest};
use crate::memtable::Memtable;
use crate::memtable::immutable::ImmutableMemtable;
use crate::memtable::replay_buffer::ReplayBuffer;
use crate::metrics::EngineMetrics;
use crate::options::{Options, WalMode};
use crate::sst::{BlockCache, Table, parse_table_file_name, table_file_name};
use crate::version::VersionSet;
use crate::version::{LiveTable, SuperVersion, Version};
use crate::wal::replay::{ReplayOptions, ReplayReport, replay};
use crate::wal::segment::{parse_segment_file_name, segment_file_name};
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
    /// Tables written to L0 during the open (runs over the immutable
    /// memtable budget, or every run after a forced recovery skipped records).
    pub tables_flushed: usize,
    /// Replayed runs left in memory as immutable memtables for the
    /// background flush.
    pub runs_kept: usize,
    /// Their bytes, counted like memtables.
    pub runs_kept_bytes: usize,
    /// Time from the first segment read until the replayed entries were
    /// ready to serve: reading, decoding, buffering, sorting, and any L0
    /// table written during the open (`replay_apply_duration +
    /// sort_duration + flush_duration`, give or take the bookkeeping).
    pub replay_duration: Duration,
    /// Part of `replay_duration` spent reading, checking, decoding and
    /// buffering WAL records.
    pub replay_apply_duration: Duration,
    /// Part of `replay_duration` spent sorting buffers into runs.
    pub sort_duration: Duration,
    /// Part of `replay_duration` spent writing L0 tables during the open.
    pub flush_duration: Duration,
    /// Time spent syncing the WAL segments the kept runs came from
    /// (`WalMode::Fsync` only; zero otherwise).
    pub wal_sync_duration: Duration,
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
    let mut runs = ReplayedRuns::default();
    let mut buffer: Option<ReplayBuffer> = None;
    let mut last_seq = state.last_seq;
    let replay_opts = ReplayOptions {
        reader_thread: shared.opts.recovery_reader_thread,
        force: shared.opts.force_recovery,
    };
    report.replay = replay(
        fs.as_ref(),
        dir,
        &segments,
        replay_opts,
        &mut |segment, payload| {
            let buf = buffer.get_or_insert_with(|| ReplayBuffer::new(segment));
            for (i, entry) in payload.entries().enumerate() {
                let entry = entry.map_err(|e| Error::InvalidArgument(format!("replay: {e}")))?;
                buf.push(
                    entry.key,
                    entry.ts,
                    payload.first_seq + i as u64,
                    entry.kind,
                    entry.value,
                );
            }
            last_seq = last_seq.max(payload.first_seq + u64::from(payload.count) - 1);
            if buf.bytes() >= shared.opts.memtable_bytes_max
                && let Some(full) = buffer.take()
            {
                runs.add(&shared, full)?;
            }
            Ok(())
        },
    )?;
    if let Some(last) = buffer.take() {
        runs.add(&shared, last)?;
    }
    if !report.replay.skipped.is_empty() {
        runs.flush_all(&shared)?;
    }
    report.replay_duration = replay_started.elapsed();
    report.sort_duration = runs.sort_duration;
    report.flush_duration = runs.flush_duration;
    report.replay_apply_duration = report
        .replay_duration
        .saturating_sub(runs.sort_duration + runs.flush_duration);
    report.tables_flushed = runs.tables.len();
    report.runs_kept = runs.kept_len();
    report.runs_kept_bytes = runs.kept_bytes();

    // The kept runs' entries live only in their segments until flushed.
    let wal_sync_started = Instant::now();
    if let Some(oldest) = runs.oldest_wal_segment()
        && shared.opts.wal_mode == WalMode::Fsync
    {
        for &number in segments.iter().filter(|n| **n >= oldest) {
            let path = dir.join(segment_file_name(number));
            let mut file = fs.open_append(&path).map_err(|e| Error::io(&path, e))?;
            file.sync().map_err(|e| Error::io(&path, e))?;
        }
    }
    report.wal_sync_duration = wal_sync_started.elapsed();

    // Install: written tables in L0, a new segment, a fresh manifest whose
    // `wal_segment_min` keeps every segment a kept run has entries in.
    let segment = shared.new_file_number();
    let wal_segment_min = runs.oldest_wal_segment().unwrap_or(segment);
    debug_assert!(wal_segment_min <= segment);
    let mut version = Version::clone(&shared.sv.load().version);
    version.levels[0].extend(runs.tables.iter().cloned());
    version.normalize();
    let mut files: Vec<_> = version.all_files().map(|t| t.meta.clone()).collect();
    // `ManifestState` keeps its files sorted by (level, number).
    files.sort_by_key(|f| (f.level, f.number));
    let new_state = ManifestState {
        files,
        wal_segment_min,
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
        mem: shared.new_memtable(segment),
        imms: runs
            .newest_first()
            .into_iter()
            .map(ImmutableMemtable::Replayed)
            .collect(),
        version: Arc::new(version),
    }));
    remove_obsolete_files(&shared, wal_segment_min)?;
    report.open_duration = started.elapsed();
    Ok((shared, report))
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
