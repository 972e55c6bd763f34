//! `ataman bench recovery`: how fast a node reopens after a crash, with
//! the WAL replay's reader thread on and off.
//!
//! 1. A child process (this binary, `bench recovery-fill`) writes N rows
//!    in batches of [`FILL_BATCH_ROWS`] with a memtable large enough that
//!    nothing is flushed, and exits with `std::process::exit` without
//!    closing the engine: the rows are only in the WAL, as after a crash.
//!    (A crash must be a process exit: dropping or forgetting the handle
//!    inside this process would either flush or leak threads that hold
//!    the directory lock.)
//! 2. This process copies the directory twice (a reopen replays, flushes
//!    and deletes the WAL, so each measurement needs its own copy) and
//!    reopens one copy with `recovery_reader_thread = true`, the other with
//!    `false`. The reopen uses the fill's large memtable, so the replay
//!    makes exactly one sorted run, which the open keeps in memory as an
//!    immutable memtable (no L0 table is written before `open` returns);
//!    `close` then waits for the background thread to flush it, and the
//!    benchmark times that separately.
//!    (Before `main` 3533216 a replay that wrote several L0 tables left the
//!    manifest state unsorted and the first L0 compaction poisoned the
//!    engine: "edit removes file N at level 0, which is not live".)
//!    `--node-memtable` reopens with the node's 64 MiB memtable instead:
//!    the replay then makes several runs, and those over the immutable
//!    memtable budget are written to L0 during the open.

use crate::error::{BenchError, Result};
use crate::report::{per_sec, write_json};
use crate::workload::{Clock, KEY_BYTES, KEY_NUMBER_MAX, Workload, format_key};
use ataman_engine::{Db, Durability, Options, WalMode, WriteBatch};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Rows per batch the child writes.
pub const FILL_BATCH_ROWS: u64 = 100;

/// Memtable bytes the engine counts per entry beyond key and value (its
/// internal key trailer and node overhead), rounded up generously so the
/// child's memtable surely never fills.
const MEMTABLE_ENTRY_BYTES_EXTRA: u64 = 256;

/// The arguments after the executable that run the child: the child is
/// this very binary, whose command line is `ataman bench <which>`.
const FILL_CHILD_COMMAND: [&str; 2] = ["bench", "recovery-fill"];

/// `ataman bench recovery` options.
#[derive(Debug, Clone, clap::Args)]
pub struct RecoveryArgs {
    /// Rows to write before the crash.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Work directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// RNG seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Reopen with the node's default memtable size (replay then writes
    /// several L0 tables) instead of the fill's.
    #[arg(long)]
    pub node_memtable: bool,
}

/// The hidden child command: fill a directory and exit without closing.
#[derive(Debug, Clone, clap::Args)]
pub struct RecoveryFillArgs {
    /// Database directory to fill.
    #[arg(long)]
    pub dir: PathBuf,
    /// Rows to write.
    #[arg(long)]
    pub rows: u64,
    /// Bytes per value.
    #[arg(long)]
    pub value_size: usize,
    /// RNG seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// One reopen's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ReopenFigures {
    /// Wall seconds of `Db::open`, measured by the benchmark.
    pub reopen_sec: f64,
    /// Rows replayed per second of `reopen_sec` (the whole open).
    pub reopen_rows_per_sec: f64,
    /// Seconds the engine reports for the WAL replay (read, decode,
    /// buffer, sort, and any L0 table written during the open).
    pub replay_sec: f64,
    /// Rows replayed per second of `replay_sec`.
    pub replay_rows_per_sec: f64,
    /// Part of `replay_sec` spent reading, decoding and buffering records.
    pub replay_apply_sec: f64,
    /// Part of `replay_sec` spent sorting the replayed entries into runs.
    pub sort_sec: f64,
    /// Part of `replay_sec` spent writing L0 tables during the open.
    pub flush_sec: f64,
    /// Seconds the open spent syncing the kept runs' WAL segments (WAL
    /// mode `fsync` only, so 0 here: the benchmark reopens in mode `write`).
    pub wal_sync_sec: f64,
    /// WAL records (batches) replayed.
    pub records: u64,
    /// L0 tables written during the open.
    pub tables_flushed: usize,
    /// Replayed runs the open kept in memory for the background flush.
    pub runs_kept: usize,
    /// Wall seconds of `Db::close` right after the open: mostly waiting
    /// for the background flush of the kept runs (not part of `reopen_sec`).
    pub close_sec: f64,
}

/// What `ataman bench recovery` reports.
#[derive(Debug, Clone, Serialize)]
pub struct RecoveryReport {
    /// Always "recovery".
    pub bench: &'static str,
    /// Rows written before the crash (and replayed by each reopen).
    pub rows: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Bytes of WAL left by the crash.
    pub wal_bytes: u64,
    /// Reopen with the reader thread.
    pub reader_thread_on: ReopenFigures,
    /// Reopen without it.
    pub reader_thread_off: ReopenFigures,
    /// `reader_thread_on.replay_rows_per_sec / reader_thread_off.replay_rows_per_sec`.
    pub replay_rate_ratio_on_off: f64,
    /// `reader_thread_off.reopen_sec / reader_thread_on.reopen_sec` (above 1: the thread helps).
    pub reopen_speedup_on_off: f64,
}

/// Runs the benchmark: fill in a child, crash, reopen two copies.
pub fn run(args: &RecoveryArgs) -> Result<RecoveryReport> {
    if args.rows == 0 {
        return Err(BenchError::InvalidArgument(
            "--rows must be positive".into(),
        ));
    }
    let work = crate::workdir::WorkDir::new(args.dir.as_deref(), "ataman-bench-recovery-")?;
    let base: &Path = work.path();
    let filled = base.join("crashed");
    let on = base.join("reopen-reader-thread-on");
    let off = base.join("reopen-reader-thread-off");
    for d in [&filled, &on, &off] {
        if d.exists() {
            return Err(BenchError::InvalidArgument(format!(
                "{} already exists; give an empty --dir",
                d.display()
            )));
        }
    }
    fill_in_child(&filled, args)?;
    let wal_bytes = copy_dir(&filled, &on)?;
    copy_dir(&filled, &off)?;
    let memtable_bytes = if args.node_memtable {
        Options::default().memtable_bytes_max
    } else {
        fill_memtable_bytes(args.rows, args.value_size)
    };
    let reader_thread_on = reopen(&on, true, args.rows, memtable_bytes)?;
    let reader_thread_off = reopen(&off, false, args.rows, memtable_bytes)?;
    Ok(RecoveryReport {
        bench: "recovery",
        rows: args.rows,
        value_size: args.value_size,
        wal_bytes,
        replay_rate_ratio_on_off: ratio(
            reader_thread_on.replay_rows_per_sec,
            reader_thread_off.replay_rows_per_sec,
        ),
        reopen_speedup_on_off: ratio(reader_thread_off.reopen_sec, reader_thread_on.reopen_sec),
        reader_thread_on,
        reader_thread_off,
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

fn fill_in_child(dir: &Path, args: &RecoveryArgs) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| BenchError::io("current executable", e))?;
    let output = Command::new(&exe)
        .args(FILL_CHILD_COMMAND)
        .arg("--dir")
        .arg(dir)
        .args(["--rows", &args.rows.to_string()])
        .args(["--value-size", &args.value_size.to_string()])
        .args(["--seed", &args.seed.to_string()])
        .output()
        .map_err(|e| BenchError::io(&exe, e))?;
    if !output.status.success() {
        return Err(BenchError::Child(format!(
            "{} exited with {}: {}",
            exe.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// The child: writes the rows, checks they are only in the WAL, and exits
/// the process without closing the engine. Returns only on failure.
pub fn fill_child(args: &RecoveryFillArgs) -> Result<()> {
    let opts = Options {
        wal_mode: WalMode::Write,
        memtable_bytes_max: fill_memtable_bytes(args.rows, args.value_size),
        ..Options::default()
    };
    let db = Db::open(&args.dir, opts)?;
    let mut workload = Workload::new(args.seed, KEY_NUMBER_MAX, args.value_size);
    let clock = Clock::default();
    let mut key = [0u8; KEY_BYTES];
    let mut written = 0u64;
    while written < args.rows {
        let end = (written + FILL_BATCH_ROWS).min(args.rows);
        let mut batch = WriteBatch::new();
        for _ in written..end {
            format_key(workload.key_number(), &mut key);
            batch.put(&key, workload.value(), clock.tick());
        }
        // The last batch waits for its WAL write, so every earlier one
        // (the WAL is written in order) is in the file before the exit.
        let durability = if end == args.rows {
            Durability::Complete
        } else {
            Durability::None
        };
        db.write(batch, durability)?;
        written = end;
    }
    let stats = db.stats();
    let flushed: usize = stats.level_files.iter().sum();
    if flushed != 0 || stats.immutable_memtables != 0 || db.metrics().flushes.get() != 0 {
        return Err(BenchError::Check(format!(
            "the fill flushed ({flushed} tables, {} immutable memtables); rows are not only in the WAL",
            stats.immutable_memtables
        )));
    }
    println!("filled {written} rows");
    // The crash: leave without closing, so the memtable is never flushed
    // and the rows survive only in the WAL.
    std::process::exit(0)
}

/// A memtable size `rows` rows surely fit in.
fn fill_memtable_bytes(rows: u64, value_bytes: usize) -> usize {
    let entry_bytes = (KEY_BYTES + value_bytes) as u64 + MEMTABLE_ENTRY_BYTES_EXTRA;
    let bytes = rows
        .saturating_mul(entry_bytes)
        .saturating_add(Options::default().memtable_bytes_max as u64);
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Copies the files of `from` (a flat engine directory) into a new `to`; returns the bytes of WAL segments.
fn copy_dir(from: &Path, to: &Path) -> Result<u64> {
    std::fs::create_dir_all(to).map_err(|e| BenchError::io(to, e))?;
    let mut wal_bytes = 0;
    for entry in std::fs::read_dir(from).map_err(|e| BenchError::io(from, e))? {
        let entry = entry.map_err(|e| BenchError::io(from, e))?;
        let src = entry.path();
        if !src.is_file() {
            return Err(BenchError::Check(format!(
                "{} is not a plain file; the engine directory layout changed",
                src.display()
            )));
        }
        let dst = to.join(entry.file_name());
        let bytes = std::fs::copy(&src, &dst).map_err(|e| BenchError::io(&dst, e))?;
        if ataman_engine::wal::segment::parse_segment_file_name(
            &entry.file_name().to_string_lossy(),
        )
        .is_some()
        {
            wal_bytes += bytes;
        }
    }
    Ok(wal_bytes)
}

fn reopen(
    dir: &Path,
    reader_thread: bool,
    rows: u64,
    memtable_bytes: usize,
) -> Result<ReopenFigures> {
    let opts = Options {
        wal_mode: WalMode::Write,
        recovery_reader_thread: reader_thread,
        memtable_bytes_max: memtable_bytes,
        ..Options::default()
    };
    let started = Instant::now();
    let db = Db::open(dir, opts)?;
    let reopen_sec = started.elapsed().as_secs_f64();
    let report = db.recovery_report().clone();
    let closing = Instant::now();
    db.close()?;
    let close_sec = closing.elapsed().as_secs_f64();
    if report.replay.entries != rows {
        return Err(BenchError::Check(format!(
            "reopen of {} replayed {} rows, {rows} were written",
            dir.display(),
            report.replay.entries
        )));
    }
    let replay_sec = report.replay_duration.as_secs_f64();
    Ok(ReopenFigures {
        reopen_sec,
        reopen_rows_per_sec: per_sec(report.replay.entries, reopen_sec),
        replay_sec,
        replay_rows_per_sec: per_sec(report.replay.entries, replay_sec),
        replay_apply_sec: report.replay_apply_duration.as_secs_f64(),
        sort_sec: report.sort_duration.as_secs_f64(),
        flush_sec: report.flush_duration.as_secs_f64(),
        wal_sync_sec: report.wal_sync_duration.as_secs_f64(),
        records: report.replay.records,
        tables_flushed: report.tables_flushed,
        runs_kept: report.runs_kept,
        close_sec,
    })
}

/// Prints the report for a person.
pub fn print(r: &RecoveryReport) {
    println!(
        "recovery: {} rows of {} B values, {} MiB of WAL",
        r.rows,
        r.value_size,
        r.wal_bytes / (1024 * 1024)
    );
    for (name, f) in [
        ("reader thread on ", &r.reader_thread_on),
        ("reader thread off", &r.reader_thread_off),
    ] {
        println!(
            "  {name}  reopen {:.3} s ({:.0} rows/s), replay {:.3} s (apply {:.3} s, sort {:.3} s, L0 write {:.3} s), {:.0} rows/s, {} L0 tables written, {} runs kept; close {:.3} s",
            f.reopen_sec,
            f.reopen_rows_per_sec,
            f.replay_sec,
            f.replay_apply_sec,
            f.sort_sec,
            f.flush_sec,
            f.replay_rows_per_sec,
            f.tables_flushed,
            f.runs_kept,
            f.close_sec
        );
    }
    println!(
        "  on/off             replay rate x{:.2}, reopen speedup x{:.2}",
        r.replay_rate_ratio_on_off, r.reopen_speedup_on_off
    );
}

/// Writes the JSON report.
pub fn write(r: &RecoveryReport, path: &Path) -> Result<()> {
    write_json(path, r)
}
