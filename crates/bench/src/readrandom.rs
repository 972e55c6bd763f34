//! The read phase of `ataman bench engine --readrandom`.
//!
//! Reopens the database with a small memtable, writes every key of the
//! read key space (so each read hits, and the data is several memtables
//! large, so reads go to SSTables rather than the memtable), flushes and
//! compacts, then R reader threads read random keys for a fixed count.
//! Every read must find a value of the written size; a miss is a bug and
//! is reported as one.

use crate::error::{BenchError, Result};
use crate::report::{Percentiles, latency_histogram, merge, per_sec, record_latency};
use crate::workload::{Clock, KEY_BYTES, Workload, format_key, key};
use ataman_engine::{Db, Durability, Error, Options, WalMode, WriteBatch};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

/// Memtable size for the read phase: small, so the data spans tables.
pub const READ_MEMTABLE_BYTES: usize = 4 * 1024 * 1024;

/// The read key space holds at least this many bytes of keys and values
/// (four memtables), growing the key count past `--keys` if needed.
const READ_DATA_BYTES_MIN: u64 = 4 * READ_MEMTABLE_BYTES as u64;

/// Puts per batch while filling.
const FILL_BATCH_PUTS: u64 = 1000;

/// A fill batch refused as `Busy` (write stall) is retried at most this many times.
const FILL_BUSY_RETRIES_MAX: u32 = 100;

/// Wait between fill retries.
const FILL_BUSY_WAIT: Duration = Duration::from_millis(50);

/// What the read phase is asked to do.
#[derive(Debug, Clone, Copy)]
pub struct ReadLoad {
    /// Reads in total.
    pub reads: u64,
    /// Reader threads.
    pub readers: usize,
    /// Key space of the write phase (the read key space is at least this).
    pub keys: u64,
    /// Bytes per value.
    pub value_bytes: usize,
    /// RNG seed.
    pub seed: u64,
}

/// What the read phase measured.
#[derive(Debug, Clone, Serialize)]
pub struct ReadReport {
    /// Reads done.
    pub reads: u64,
    /// Reader threads.
    pub readers: usize,
    /// Keys in the read key space (all present).
    pub read_keys: u64,
    /// Reads per second over all readers.
    pub reads_per_sec: f64,
    /// Per-read latency, microseconds.
    pub read_latency_us: Percentiles,
    /// SSTables per level when the reads ran.
    pub level_files: Vec<usize>,
}

/// Fills, settles and reads `dir`.
pub fn run(dir: &Path, load: &ReadLoad) -> Result<ReadReport> {
    if load.readers == 0 || load.reads == 0 {
        return Err(BenchError::InvalidArgument(
            "--reads and --readers must be positive".into(),
        ));
    }
    let opts = Options {
        memtable_bytes_max: READ_MEMTABLE_BYTES,
        wal_mode: WalMode::None,
        ..Options::default()
    };
    let db = Db::open(dir, opts)?;
    let entry_bytes = (KEY_BYTES + load.value_bytes) as u64;
    let read_keys = load.keys.max(READ_DATA_BYTES_MIN.div_ceil(entry_bytes));
    let result = fill(&db, read_keys, load)
        .and_then(|()| db.compact().map_err(BenchError::from))
        .and_then(|()| read(&db, read_keys, load));
    let closed = db.close();
    let report = result?;
    closed?;
    Ok(report)
}

/// Writes every key in `0..read_keys` once, in order.
fn fill(db: &Db, read_keys: u64, load: &ReadLoad) -> Result<()> {
    let mut workload = Workload::new(load.seed ^ 0xf111, read_keys, load.value_bytes);
    let clock = Clock::default();
    let mut next = 0u64;
    let mut k = [0u8; KEY_BYTES];
    while next < read_keys {
        let end = (next + FILL_BATCH_PUTS).min(read_keys);
        let mut batch = WriteBatch::new();
        for n in next..end {
            format_key(n, &mut k);
            // Timestamps far above the write phase's, so the fill's values win.
            batch.put(&k, workload.value(), u64::MAX / 2 + clock.tick());
        }
        write_retrying(db, batch)?;
        next = end;
    }
    Ok(())
}

fn write_retrying(db: &Db, batch: WriteBatch) -> Result<()> {
    let mut retries = 0;
    loop {
        match db.write(batch.clone(), Durability::None) {
            Ok(_) => return Ok(()),
            Err(Error::Busy { .. }) if retries < FILL_BUSY_RETRIES_MAX => {
                retries += 1;
                std::thread::sleep(FILL_BUSY_WAIT);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn read(db: &Db, read_keys: u64, load: &ReadLoad) -> Result<ReadReport> {
    let level_files = db.stats().level_files;
    let per_reader = load.reads / load.readers as u64;
    let extra = load.reads % load.readers as u64;
    let started = Instant::now();
    let parts: Vec<Result<hdrhistogram::Histogram<u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..load.readers)
            .map(|r| {
                let count = per_reader + u64::from((r as u64) < extra);
                let seed = load.seed.wrapping_mul(7919).wrapping_add(r as u64);
                s.spawn(move || read_some(db, count, read_keys, load.value_bytes, seed))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Check("a reader thread panicked".into())))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut latency = latency_histogram()?;
    for part in parts {
        merge(&mut latency, &part?)?;
    }
    Ok(ReadReport {
        reads: latency.len(),
        readers: load.readers,
        read_keys,
        reads_per_sec: per_sec(latency.len(), elapsed.as_secs_f64()),
        read_latency_us: Percentiles::of(&latency),
        level_files,
    })
}

fn read_some(
    db: &Db,
    count: u64,
    read_keys: u64,
    value_bytes: usize,
    seed: u64,
) -> Result<hdrhistogram::Histogram<u64>> {
    let mut workload = Workload::new(seed, read_keys, 0);
    let mut latency = latency_histogram()?;
    for _ in 0..count {
        let k = key(workload.key_number());
        let started = Instant::now();
        let found = db.get(&k)?;
        record_latency(&mut latency, started.elapsed());
        let len = found.as_ref().and_then(|e| e.value.as_ref()).map(Vec::len);
        if len != Some(value_bytes) {
            return Err(BenchError::Check(format!(
                "get({}) found {found:?}, expected a {value_bytes}-byte value",
                String::from_utf8_lossy(&k)
            )));
        }
    }
    Ok(latency)
}

/// Prints the read phase for a person.
pub fn print(r: &ReadReport) {
    println!(
        "  readrandom         {} reads of {} keys by {} readers, levels {:?}",
        r.reads, r.read_keys, r.readers, r.level_files
    );
    println!("  reads/s            {:.0}", r.reads_per_sec);
    println!("  read latency       {}", r.read_latency_us);
}
