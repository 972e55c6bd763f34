//! `ataman bench fjall`: ataman's engine side by side with fjall, a
//! pure-Rust LSM, on the same machine in the same run, same keys and values.
//!
//! The write phases run first on ataman (to completion; ataman then stays
//! open and idle), then on fjall:
//! 1. `fillrandom, durable per put`: one writer, every put durable before
//!    the next (ataman: `Durability::Complete` with `WalMode::Fsync`;
//!    fjall: insert then `persist(PersistMode::SyncData)`). Both use
//!    `fdatasync`: ataman's fsync mode is `sync_data`, so fjall's `SyncData`
//!    is the like-for-like mode (`SyncAll` would add metadata syncs).
//! 2. `fillrandom, batch N`: the same, N puts per durable commit (ataman: a
//!    `WriteBatch`; fjall: a `Batch` with `durability(Some(SyncData))`).
//!
//! Each engine then settles (ataman: `compact()` into one level; fjall:
//! memtable flushed, then a major compaction), and
//! 3. `readrandom`: one thread reads random keys among those written;
//!    every read must hit. Both engines stay open and take turns over
//!    [`READ_ROUNDS`] rounds, each engine reading the same chunk of keys
//!    in a round, the one going first alternating: a slow spell of a
//!    shared machine lands on both, and the per-round ratios show the
//!    spread. Before the rounds each engine reads a round's worth of other
//!    random keys untimed, so neither starts with a cold block cache (a
//!    first round measured cold gave ataman 1.8-2.1x fjall, against
//!    1.1-1.8x warm). CPU seconds are the whole process's, so they include
//!    whatever the idle engine's threads do meanwhile.

use crate::cpu::{cpu_sec_per_mop, process_cpu_time};
use crate::error::{BenchError, Result};
use crate::report::per_sec;
use crate::workload::{Clock, KEY_BYTES, Workload, format_key, key};
use ataman_engine::{Db, Durability, Options, WalMode, WriteBatch};
use fjall::{Config, PartitionCreateOptions, PersistMode};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// fjall partition the benchmark writes to.
const FJALL_PARTITION: &str = "bench";

/// The fjall release this comparison is built against (from Cargo.lock's major).
const FJALL_MAJOR: &str = "2";

/// `ataman bench fjall` options.
#[derive(Debug, Clone, clap::Args)]
pub struct FjallArgs {
    /// Puts in the batched fill (and reads in the read phase, unless --reads).
    #[arg(long, default_value_t = 200_000)]
    pub ops: u64,
    /// Reads in the read phase (default: --ops). More reads over the same
    /// data give a longer, steadier read phase.
    #[arg(long)]
    pub reads: Option<u64>,
    /// Puts in the durable-per-put fill (default: --ops; each costs one fdatasync).
    #[arg(long)]
    pub per_put_ops: Option<u64>,
    /// Puts per durable commit in the batched fill.
    #[arg(long, default_value_t = 100)]
    pub batch: u64,
    /// Keys are uniform in 0..keys (16-digit decimal).
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
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
}

/// One phase on both engines.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    /// What ran.
    pub phase: String,
    /// Operations (puts or reads) per engine.
    pub ops: u64,
    /// ataman's rate.
    pub ataman_ops_per_sec: f64,
    /// fjall's rate.
    pub fjall_ops_per_sec: f64,
    /// `ataman_ops_per_sec / fjall_ops_per_sec`.
    pub ratio: f64,
    /// ataman's process CPU seconds per million ops.
    pub ataman_cpu_sec_per_mop: f64,
    /// fjall's process CPU seconds per million ops.
    pub fjall_cpu_sec_per_mop: f64,
}

/// What `ataman bench fjall` reports.
#[derive(Debug, Clone, Serialize)]
pub struct FjallReport {
    /// Always "fjall".
    pub bench: &'static str,
    /// fjall major version compared against.
    pub fjall_major: &'static str,
    /// Key space.
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// The phases.
    pub phases: Vec<PhaseReport>,
    /// Seconds each engine took to settle before the reads (ataman, fjall).
    pub settle_sec: (f64, f64),
    /// The read phase's ratio (ataman/fjall) in each of its rounds.
    pub read_round_ratios: Vec<f64>,
}

/// The workload both engines get.
#[derive(Clone, Copy)]
struct Plan {
    per_put_ops: u64,
    batch_ops: u64,
    batch: u64,
    reads: u64,
    keys: u64,
    value_bytes: usize,
    seed: u64,
}

/// What the phases of one engine need: three writes and a read.
trait Subject {
    fn put_durable(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    fn commit_durable(&mut self, puts: &[([u8; KEY_BYTES], Vec<u8>)]) -> Result<()>;
    fn settle(&mut self) -> Result<()>;
    fn read_len(&mut self, key: &[u8]) -> Result<Option<usize>>;
}

struct Ataman {
    db: Db,
    clock: Clock,
}

impl Subject for Ataman {
    fn put_durable(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.db
            .put(key, value, self.clock.tick(), Durability::Complete)?;
        Ok(())
    }
    fn commit_durable(&mut self, puts: &[([u8; KEY_BYTES], Vec<u8>)]) -> Result<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in puts {
            batch.put(k, v, self.clock.tick());
        }
        self.db.write(batch, Durability::Complete)?;
        Ok(())
    }
    fn settle(&mut self) -> Result<()> {
        Ok(self.db.compact()?)
    }
    fn read_len(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.db.get(key)?.and_then(|e| e.value).map(|v| v.len()))
    }
}

struct Fjall {
    keyspace: fjall::Keyspace,
    partition: fjall::PartitionHandle,
}

impl Subject for Fjall {
    fn put_durable(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.partition.insert(key, value)?;
        self.keyspace.persist(PersistMode::SyncData)?;
        Ok(())
    }
    fn commit_durable(&mut self, puts: &[([u8; KEY_BYTES], Vec<u8>)]) -> Result<()> {
        let mut batch = self
            .keyspace
            .batch()
            .durability(Some(PersistMode::SyncData));
        for (k, v) in puts {
            batch.insert(&self.partition, k.as_slice(), v.as_slice());
        }
        batch.commit()?;
        Ok(())
    }
    fn settle(&mut self) -> Result<()> {
        self.partition.rotate_memtable_and_wait()?;
        self.partition.major_compact()?;
        Ok(())
    }
    fn read_len(&mut self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.partition.get(key)?.map(|v| v.len()))
    }
}

/// Rounds of the read phase: the engines take turns, each reading the same
/// chunk of keys, so a slow spell of a shared machine hits both alike.
pub const READ_ROUNDS: u64 = 10;
const _: () = assert!(
    READ_ROUNDS.is_multiple_of(2),
    "each engine goes first in half the rounds"
);

/// Runs both engines and returns the comparison.
pub fn run(args: &FjallArgs) -> Result<FjallReport> {
    if args.ops == 0 || args.batch == 0 {
        return Err(BenchError::InvalidArgument(
            "--ops and --batch must be positive".into(),
        ));
    }
    if args.reads.unwrap_or(args.ops) < READ_ROUNDS {
        return Err(BenchError::InvalidArgument(format!(
            "the read phase needs at least {READ_ROUNDS} reads (one per round)"
        )));
    }
    let work = crate::workdir::WorkDir::new(args.dir.as_deref(), "ataman-bench-fjall-")?;
    let base: &Path = work.path();
    let plan = Plan {
        per_put_ops: args.per_put_ops.unwrap_or(args.ops),
        batch_ops: args.ops,
        batch: args.batch,
        reads: args.reads.unwrap_or(args.ops),
        keys: args.keys,
        value_bytes: args.value_size,
        seed: args.seed,
    };
    let opts = Options {
        wal_mode: WalMode::Fsync,
        ..Options::default()
    };
    let mut ataman = Ataman {
        db: Db::open(base.join("ataman"), opts)?,
        clock: Clock::default(),
    };
    let result = compare(&mut ataman, base, &plan);
    let closed = ataman.db.close();
    let (writes, reads) = result?;
    closed?;
    let (ataman_writes, fjall_writes) = &writes;
    let names = [
        "fillrandom, durable per put".to_string(),
        format!("fillrandom, batch {} per durable commit", plan.batch),
        "readrandom (after settle)".to_string(),
    ];
    let ataman_phases = ataman_writes.phases.iter().chain([&reads.ataman]);
    let fjall_phases = fjall_writes.phases.iter().chain([&reads.fjall]);
    let phases = names
        .into_iter()
        .zip(ataman_phases.zip(fjall_phases))
        .map(|(phase, (&(ops, a_sec, a_cpu), &(_, f_sec, f_cpu)))| {
            let a = per_sec(ops, a_sec);
            let f = per_sec(ops, f_sec);
            PhaseReport {
                phase,
                ops,
                ataman_ops_per_sec: a,
                fjall_ops_per_sec: f,
                ratio: if f > 0.0 { a / f } else { 0.0 },
                ataman_cpu_sec_per_mop: cpu_sec_per_mop(
                    std::time::Duration::from_secs_f64(a_cpu),
                    ops,
                ),
                fjall_cpu_sec_per_mop: cpu_sec_per_mop(
                    std::time::Duration::from_secs_f64(f_cpu),
                    ops,
                ),
            }
        })
        .collect();
    Ok(FjallReport {
        bench: "fjall",
        fjall_major: FJALL_MAJOR,
        keys: args.keys,
        value_size: args.value_size,
        phases,
        settle_sec: (ataman_writes.settle_sec, fjall_writes.settle_sec),
        read_round_ratios: reads.round_ratios,
    })
}

/// Both engines' write phases (ataman's first, to completion, so the two
/// never compete for the cores), then the read rounds with both open.
fn compare(ataman: &mut Ataman, base: &Path, plan: &Plan) -> Result<((Writes, Writes), Reads)> {
    let ataman_writes = write_phases(ataman, plan)?;
    let keyspace = Config::new(base.join("fjall")).open()?;
    let partition = keyspace.open_partition(FJALL_PARTITION, PartitionCreateOptions::default())?;
    let mut fjall = Fjall {
        keyspace,
        partition,
    };
    let fjall_writes = write_phases(&mut fjall, plan)?;
    // The same seed wrote the same keys in the same order to both.
    debug_assert_eq!(ataman_writes.written, fjall_writes.written);
    let reads = read_rounds(ataman, &mut fjall, plan, &ataman_writes.written)?;
    Ok(((ataman_writes, fjall_writes), reads))
}

/// Times `f`, returning (elapsed seconds, process CPU seconds).
fn timed(f: impl FnOnce() -> Result<()>) -> Result<(f64, f64)> {
    let cpu = process_cpu_time();
    let started = Instant::now();
    f()?;
    Ok((
        started.elapsed().as_secs_f64(),
        process_cpu_time().saturating_sub(cpu).as_secs_f64(),
    ))
}

/// One engine's write phases and what they wrote.
struct Writes {
    /// (ops, elapsed seconds, cpu seconds) of the per-put and batched fills.
    phases: Vec<(u64, f64, f64)>,
    /// Key numbers written, in order.
    written: Vec<u64>,
    settle_sec: f64,
}

fn write_phases(subject: &mut dyn Subject, plan: &Plan) -> Result<Writes> {
    // The same seed for both engines: the same keys and values in the same order.
    let mut workload = Workload::new(plan.seed, plan.keys, plan.value_bytes);
    let mut written: Vec<u64> = Vec::new();
    let mut k = [0u8; KEY_BYTES];
    let mut phases = Vec::new();

    let (sec, cpu) = timed(|| {
        for _ in 0..plan.per_put_ops {
            let n = workload.key_number();
            written.push(n);
            format_key(n, &mut k);
            subject.put_durable(&k, workload.value())?;
        }
        Ok(())
    })?;
    phases.push((plan.per_put_ops, sec, cpu));

    let mut puts: Vec<([u8; KEY_BYTES], Vec<u8>)> = Vec::new();
    let mut batch_time = (0.0, 0.0);
    let mut done = 0;
    while done < plan.batch_ops {
        // Building the batch's keys and values is the benchmark's work, not
        // the engine's: it is kept off the clock.
        let n = plan.batch.min(plan.batch_ops - done);
        puts.clear();
        for _ in 0..n {
            let number = workload.key_number();
            written.push(number);
            puts.push((key(number), workload.value().to_vec()));
        }
        let (sec, cpu) = timed(|| subject.commit_durable(&puts))?;
        batch_time.0 += sec;
        batch_time.1 += cpu;
        done += n;
    }
    phases.push((plan.batch_ops, batch_time.0, batch_time.1));

    let (settle_sec, _) = timed(|| subject.settle())?;
    Ok(Writes {
        phases,
        written,
        settle_sec,
    })
}

/// Both engines' read phase, taken in turns.
struct Reads {
    /// (reads, elapsed seconds, cpu seconds), summed over the rounds.
    ataman: (u64, f64, f64),
    fjall: (u64, f64, f64),
    /// ataman's rate over fjall's, per round.
    round_ratios: Vec<f64>,
}

/// Reads random written keys, [`READ_ROUNDS`] rounds of an equal chunk per
/// engine, after an untimed warm-up chunk each; the engine that goes first
/// alternates. Every read must hit.
fn read_rounds(
    ataman: &mut dyn Subject,
    fjall: &mut dyn Subject,
    plan: &Plan,
    written: &[u64],
) -> Result<Reads> {
    let mut picks = Workload::new(plan.seed ^ 0x5eed, written.len() as u64, 0);
    let mut pick = || {
        let index = usize::try_from(picks.key_number()).unwrap_or(0);
        written.get(index).copied().unwrap_or(0)
    };
    // Exactly READ_ROUNDS chunks (`run` asks for at least that many reads),
    // differing in length by at most one.
    let rounds = usize::try_from(READ_ROUNDS).unwrap_or(1);
    let total = usize::try_from(plan.reads).unwrap_or(usize::MAX);
    let chunks: Vec<Vec<u64>> = (0..rounds)
        .map(|r| {
            let len = total * (r + 1) / rounds - total * r / rounds;
            (0..len).map(|_| pick()).collect()
        })
        .collect();
    // Untimed, keys of their own (a round's length, picked like the
    // rest): neither engine's block cache starts cold in the timed rounds,
    // and no timed round reads only what the warm-up just read.
    let warm_up: Vec<u64> = (0..total / rounds).map(|_| pick()).collect();
    read_chunk(ataman, &warm_up, plan.value_bytes)?;
    read_chunk(fjall, &warm_up, plan.value_bytes)?;
    let mut reads = Reads {
        ataman: (0, 0.0, 0.0),
        fjall: (0, 0.0, 0.0),
        round_ratios: Vec::new(),
    };
    // READ_ROUNDS is even: each engine goes first in half the rounds.
    for (round, chunk) in chunks.iter().enumerate() {
        let mut times = [(0.0, 0.0); 2];
        for turn in 0..2 {
            let engine = (turn + round) % 2;
            let subject: &mut dyn Subject = if engine == 0 { ataman } else { fjall };
            times[engine] = timed(|| read_chunk(subject, chunk, plan.value_bytes))?;
        }
        let n = chunk.len() as u64;
        for (total, (sec, cpu)) in [&mut reads.ataman, &mut reads.fjall].into_iter().zip(times) {
            *total = (total.0 + n, total.1 + sec, total.2 + cpu);
        }
        let (a, f) = (per_sec(n, times[0].0), per_sec(n, times[1].0));
        reads.round_ratios.push(if f > 0.0 { a / f } else { 0.0 });
    }
    Ok(reads)
}

fn read_chunk(subject: &mut dyn Subject, keys: &[u64], value_bytes: usize) -> Result<()> {
    let mut k = [0u8; KEY_BYTES];
    for &number in keys {
        format_key(number, &mut k);
        if subject.read_len(&k)? != Some(value_bytes) {
            return Err(BenchError::Check(format!(
                "a read of written key {} missed",
                String::from_utf8_lossy(&k)
            )));
        }
    }
    Ok(())
}

/// The median of sorted, non-empty `values` (the mean of the middle two
/// for an even count).
fn median(values: &[f64]) -> f64 {
    let n = values.len();
    match (values.get((n - 1) / 2), values.get(n / 2)) {
        (Some(a), Some(b)) => (a + b) / 2.0,
        _ => 0.0,
    }
}

/// Prints the comparison table.
pub fn print(r: &FjallReport) {
    println!(
        "ataman vs fjall {}: {} keys, {} B values (ops/s; ratio = ataman/fjall)",
        r.fjall_major, r.keys, r.value_size
    );
    println!(
        "  {:<42} {:>9} {:>14} {:>14} {:>8}",
        "phase", "ops", "ataman ops/s", "fjall ops/s", "ratio"
    );
    for p in &r.phases {
        println!(
            "  {:<42} {:>9} {:>14.0} {:>14.0} {:>8.2}",
            p.phase, p.ops, p.ataman_ops_per_sec, p.fjall_ops_per_sec, p.ratio
        );
    }
    println!(
        "  settle before reads: ataman {:.2} s, fjall {:.2} s",
        r.settle_sec.0, r.settle_sec.1
    );
    let mut ratios = r.read_round_ratios.clone();
    ratios.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (ratios.first(), ratios.last()) {
        println!(
            "  readrandom in {} alternating rounds: ratio median {:.2}, range {:.2}..{:.2}",
            ratios.len(),
            median(&ratios),
            min,
            max
        );
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[1.0, 2.0, 4.0, 9.0]), 3.0);
        assert_eq!(median(&[1.0, 2.0, 9.0]), 2.0);
        assert_eq!(median(&[5.0]), 5.0);
    }
}
