//! `ataman bench engine`: the engine analog of Tarantool's `1mops_write`.
//!
//! C writers each commit batches of B random-key puts (see
//! [`crate::writers`]); the report gives ops/s, commit latency
//! percentiles, the WAL's group-commit figures (writes/s, records per
//! write, fsyncs/s) from the engine's own metrics, and CPU seconds per
//! million puts for the whole process. `--readrandom` adds a read phase
//! (see [`crate::readrandom`]).

use crate::args::{DurabilityArg, WalModeArg};
use crate::cpu::{cpu_sec_per_mop, process_cpu_time};
use crate::error::{BenchError, Result};
use crate::readrandom::{ReadLoad, ReadReport};
use crate::report::{Percentiles, per_sec};
use crate::writers::{WriteLoad, WriteOutcome};
use ataman_engine::{Db, Options};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `ataman bench engine` options.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineArgs {
    /// Puts to write in total.
    #[arg(long, default_value_t = 200_000)]
    pub ops: u64,
    /// Concurrent writers (batches in flight), not threads.
    #[arg(long, default_value_t = 1)]
    pub writers: usize,
    /// Puts per committed batch.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// When a batch is acknowledged.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Complete)]
    pub durability: DurabilityArg,
    /// Keys are uniform in 0..keys (16-digit decimal).
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// What the WAL does per group.
    #[arg(long, value_enum, default_value_t = WalModeArg::Fsync)]
    pub wal_mode: WalModeArg,
    /// Database directory (default: a fresh temporary one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// After the writes, read random existing keys.
    #[arg(long)]
    pub readrandom: bool,
    /// Reads in the read phase.
    #[arg(long, default_value_t = 200_000)]
    pub reads: u64,
    /// Reader threads in the read phase.
    #[arg(long, default_value_t = 2)]
    pub readers: usize,
    /// Driver threads that resubmit for the writers (at most one per writer).
    #[arg(long, default_value_t = 2)]
    pub drivers: usize,
    /// RNG seed (keys and values).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write every put as an expiring put with this time to live (the
    /// deadline is the wall clock's milliseconds at build time plus it).
    #[arg(long)]
    pub ttl_ms: Option<u64>,
}

/// The parameters, as they appear in the report.
#[derive(Debug, Clone, Serialize)]
pub struct EngineParams {
    /// Puts asked for.
    pub ops: u64,
    /// Writers.
    pub writers: usize,
    /// Puts per batch.
    pub batch: usize,
    /// Durability name.
    pub durability: &'static str,
    /// Key space.
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// WAL mode name.
    pub wal_mode: &'static str,
    /// Time to live of every put, if they expire.
    pub ttl_ms: Option<u64>,
    /// Driver threads used.
    pub drivers: usize,
}

/// What `ataman bench engine` reports (and writes with `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct EngineReport {
    /// Always "engine".
    pub bench: &'static str,
    /// The parameters.
    #[serde(flatten)]
    pub params: EngineParams,
    /// Puts acknowledged (equals `ops`).
    pub ops_done: u64,
    /// Wall seconds of the write phase.
    pub elapsed_sec: f64,
    /// Acknowledged puts per second.
    pub ops_per_sec: f64,
    /// Per-batch commit latency, microseconds.
    pub latency_us: Percentiles,
    /// WAL `write` calls per second (one per group).
    pub wal_writes_per_sec: f64,
    /// Mean records (batches) per WAL write.
    pub mean_batch: f64,
    /// Largest records per WAL write.
    pub max_batch: u64,
    /// WAL fsyncs per second.
    pub fsyncs_per_sec: f64,
    /// Mean microseconds of one WAL `write` call (engine metric).
    pub wal_write_us_mean: f64,
    /// Mean microseconds of one WAL fsync (engine metric; 0 without fsyncs).
    pub wal_fsync_us_mean: f64,
    /// Process CPU (user + system) seconds per million puts.
    pub cpu_sec_per_mop: f64,
    /// `submit` calls refused as `Busy` and retried.
    pub busy_retries: u64,
    /// The read phase, with `--readrandom`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadReport>,
}

/// Runs the benchmark and returns its report (printing is the caller's).
pub fn run(args: &EngineArgs) -> Result<EngineReport> {
    if args.drivers == 0 {
        return Err(BenchError::InvalidArgument(
            "--drivers must be positive".into(),
        ));
    }
    let work = crate::workdir::WorkDir::new(args.dir.as_deref(), "ataman-bench-engine-")?;
    let dir: &Path = work.path();
    let params = EngineParams {
        ops: args.ops,
        writers: args.writers,
        batch: args.batch,
        durability: args.durability.name(),
        keys: args.keys,
        value_size: args.value_size,
        wal_mode: args.wal_mode.name(),
        drivers: args.drivers.min(args.writers.max(1)),
        ttl_ms: args.ttl_ms,
    };
    let load = WriteLoad {
        ops: args.ops,
        writers: args.writers,
        batch: args.batch,
        drivers: args.drivers,
        durability: args.durability.to_engine(),
        keys: args.keys,
        value_bytes: args.value_size,
        seed: args.seed,
        ttl_ms: args.ttl_ms,
    };
    let opts = Options {
        wal_mode: args.wal_mode.to_engine(),
        ..Options::default()
    };
    let db = Db::open(dir, opts)?;
    let wal_before = WalFigures::of(&db);
    let cpu_before = process_cpu_time();
    let outcome = crate::writers::run(&db, &load);
    let cpu = process_cpu_time().saturating_sub(cpu_before);
    let wal = WalFigures::of(&db).since(&wal_before);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            // Still release the directory; the benchmark's error is the news.
            let _ = db.close();
            return Err(e);
        }
    };
    db.close()?;
    let mut report = write_report(params, &outcome, &wal, cpu);
    if args.readrandom {
        let read = ReadLoad {
            reads: args.reads,
            readers: args.readers,
            keys: args.keys,
            value_bytes: args.value_size,
            seed: args.seed,
        };
        report.read = Some(crate::readrandom::run(dir, &read)?);
    }
    Ok(report)
}

fn write_report(
    params: EngineParams,
    outcome: &WriteOutcome,
    wal: &WalFigures,
    cpu: std::time::Duration,
) -> EngineReport {
    let secs = outcome.elapsed.as_secs_f64();
    EngineReport {
        bench: "engine",
        params,
        ops_done: outcome.ops_acked,
        elapsed_sec: secs,
        ops_per_sec: per_sec(outcome.ops_acked, secs),
        latency_us: Percentiles::of(&outcome.latency_ns),
        wal_writes_per_sec: per_sec(wal.writes, secs),
        mean_batch: if wal.batch_count == 0 {
            0.0
        } else {
            wal.batch_records_sum as f64 / wal.batch_count as f64
        },
        max_batch: wal.batch_records_max,
        fsyncs_per_sec: per_sec(wal.syncs, secs),
        wal_write_us_mean: mean(wal.write_us_sum, wal.writes),
        wal_fsync_us_mean: mean(wal.sync_us_sum, wal.syncs),
        cpu_sec_per_mop: cpu_sec_per_mop(cpu, outcome.ops_acked),
        busy_retries: outcome.busy_retries,
        read: None,
    }
}

fn mean(sum: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        sum as f64 / count as f64
    }
}

/// The WAL counters of the engine at one moment.
struct WalFigures {
    writes: u64,
    syncs: u64,
    write_us_sum: u64,
    sync_us_sum: u64,
    batch_count: u64,
    batch_records_sum: u64,
    batch_records_max: u64,
}

impl WalFigures {
    fn of(db: &Db) -> Self {
        let m = db.metrics();
        let records = m.wal_batch_records.snapshot();
        WalFigures {
            writes: m.wal_writes.get(),
            syncs: m.wal_syncs.get(),
            write_us_sum: m.wal_write_latency_us.snapshot().sum,
            sync_us_sum: m.wal_sync_latency_us.snapshot().sum,
            batch_count: records.count,
            batch_records_sum: records.sum,
            batch_records_max: records.max,
        }
    }

    /// The change since `before`; the maximum is over the engine's life
    /// (the database is opened fresh for the phase, so that is the phase).
    fn since(&self, before: &WalFigures) -> WalFigures {
        WalFigures {
            writes: self.writes - before.writes,
            syncs: self.syncs - before.syncs,
            write_us_sum: self.write_us_sum - before.write_us_sum,
            sync_us_sum: self.sync_us_sum - before.sync_us_sum,
            batch_count: self.batch_count - before.batch_count,
            batch_records_sum: self.batch_records_sum - before.batch_records_sum,
            batch_records_max: self.batch_records_max,
        }
    }
}

/// Prints a report for a person.
pub fn print(r: &EngineReport) {
    let p = &r.params;
    println!(
        "engine: {} puts, {} writers, batch {}, durability {}, wal {}, {} keys, {} B values, {} drivers",
        p.ops, p.writers, p.batch, p.durability, p.wal_mode, p.keys, p.value_size, p.drivers
    );
    println!("  ops/s              {:.0}", r.ops_per_sec);
    println!("  commit latency     {}", r.latency_us);
    println!("  WAL writes/s       {:.0}", r.wal_writes_per_sec);
    println!(
        "  WAL batch          mean {:.1}, max {} records per write",
        r.mean_batch, r.max_batch
    );
    println!("  fsyncs/s           {:.0}", r.fsyncs_per_sec);
    println!(
        "  WAL write / fsync  mean {:.1} us / {:.1} us",
        r.wal_write_us_mean, r.wal_fsync_us_mean
    );
    println!("  CPU s per M ops    {:.2}", r.cpu_sec_per_mop);
    if r.busy_retries > 0 {
        println!("  busy retries       {}", r.busy_retries);
    }
    if let Some(read) = &r.read {
        crate::readrandom::print(read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of an engine report has the keys scripts read, with "p99.9" spelled so.
    #[test]
    fn report_json_shape() {
        let mut h = crate::report::latency_histogram().unwrap();
        crate::report::record_latency(&mut h, std::time::Duration::from_micros(10));
        let report = EngineReport {
            bench: "engine",
            params: EngineParams {
                ops: 1,
                writers: 1,
                batch: 1,
                durability: "complete",
                keys: 1,
                value_size: 1,
                wal_mode: "fsync",
                drivers: 1,
                ttl_ms: None,
            },
            ops_done: 1,
            elapsed_sec: 1.0,
            ops_per_sec: 1.0,
            latency_us: Percentiles::of(&h),
            wal_writes_per_sec: 1.0,
            mean_batch: 1.0,
            max_batch: 1,
            fsyncs_per_sec: 1.0,
            wal_write_us_mean: 1.0,
            wal_fsync_us_mean: 1.0,
            cpu_sec_per_mop: 1.0,
            busy_retries: 0,
            read: None,
        };
        let json = serde_json::to_value(&report).unwrap();
        for key in [
            "ops_per_sec",
            "wal_writes_per_sec",
            "mean_batch",
            "max_batch",
            "fsyncs_per_sec",
            "cpu_sec_per_mop",
            "ops",
            "writers",
            "batch",
            "durability",
            "keys",
            "value_size",
            "wal_mode",
        ] {
            assert!(json.get(key).is_some(), "missing {key}");
        }
        for key in ["p50", "p99", "p99.9"] {
            assert!(
                json["latency_us"].get(key).is_some(),
                "missing latency_us.{key}"
            );
        }
        assert!(json.get("reads_per_sec").is_none());
    }
}
