//! What the collection rule costs (docs/BENCHMARKS.md, "collection rule"):
//! one delete-heavy workload on a virtual clock that passes the tombstone
//! grace ten times over, so automatic compactions meet dead versions past
//! the grace all along, run with the rule (`new`: ask every other source
//! for an older version) and the old one (`old`: collect once nothing
//! deeper overlaps), alternated in one process.
//!
//! ```text
//! cargo run --release -p ataman-engine --example collection_cost -- ROUNDS [new|old|both] [OPS]
//! ```
//!
//! Per round: CPU seconds of the process (all threads: the writer, the
//! flush and the compaction thread), write amplification ((WAL + flush +
//! compaction bytes) / user bytes), compaction bytes written, and entries
//! and tombstones left in the tables at the end. Then the medians and the
//! ratios new/old. Under `valgrind --tool=callgrind` run one mode at a time
//! with 1 round: the instruction count is the figure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measuring tool: a failure ends it

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Compression, Db, Durability, Options, VirtualClock, WalMode, WriteBatch};
use ataman_testkit::rng::Rng;
use std::sync::Arc;
use std::time::Duration;

/// Writes per round unless the third argument says otherwise.
const OPS: u64 = 300_000;
const KEYS: u64 = 40_000;
const START_MS: u64 = 1_700_000_000_000;
const GRACE_MS: u64 = 1_000;
/// The clock moves 1 ms every this many writes: 15 s in all (300,000
/// writes), 15 graces.
const OPS_PER_MS: u64 = 20;

struct Round {
    cpu_s: f64,
    write_amp: f64,
    compaction_bytes: u64,
    entries_left: u64,
    tombstones_left: u64,
}

fn cpu_seconds() -> f64 {
    // utime and stime, fields 14 and 15 of /proc/self/stat, in clock ticks.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / hz as f64
}

fn run(old_rule: bool, ops: u64) -> Round {
    let dir = tempfile::tempdir().unwrap();
    let clock = VirtualClock::new(START_MS);
    let opts = Options {
        wal_mode: WalMode::Write,
        memtable_bytes_max: 512 * 1024,
        sst_target_bytes: 256 * 1024,
        l0_compaction_trigger: 4,
        l0_stop_writes: 1000,
        l1_bytes_max: 1024 * 1024,
        level_size_ratio: 4,
        levels: 5,
        compression: Compression::Lz4,
        write_stall_timeout: Duration::from_secs(600),
        tombstone_grace: Duration::from_millis(GRACE_MS),
        clock: Arc::clone(&clock) as _,
        planted_collect_when_nothing_deeper: old_rule,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let mut rng = Rng::new(7);
    let value = vec![b'v'; 100];
    let cpu0 = cpu_seconds();
    for i in 0..ops {
        if i % OPS_PER_MS == 0 {
            clock.advance_ms(1);
        }
        let now = START_MS + i / OPS_PER_MS;
        let k = format!("key{:08}", rng.below(KEYS)).into_bytes();
        let mut batch = WriteBatch::new();
        match rng.below(10) {
            // A delete, stamped now.
            0..4 => batch.delete(&k, timestamp_from_millis(now, (i % 60_000) as u16)),
            // A peer's late value, up to two graces old.
            4 => batch.put(
                &k,
                &value,
                timestamp_from_millis(now - rng.below(2 * GRACE_MS), (i % 60_000) as u16),
            ),
            _ => batch.put(&k, &value, timestamp_from_millis(now, (i % 60_000) as u16)),
        };
        db.write(batch, Durability::None).unwrap();
    }
    db.flush().unwrap();
    let stats = db.stats();
    let m = db.metrics();
    let compaction_bytes = m.compaction_bytes_written.get();
    let round = Round {
        cpu_s: 0.0,
        write_amp: stats.write_amplification,
        compaction_bytes,
        entries_left: stats.level_entries.iter().sum(),
        tombstones_left: stats.level_tombstones.iter().sum(),
    };
    db.close().unwrap();
    Round {
        cpu_s: cpu_seconds() - cpu0,
        ..round
    }
}

/// One figure of a round.
type Figure = dyn Fn(&Round) -> f64;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).map_or(3, |a| a.parse().unwrap());
    let modes: &[bool] = match args.get(2).map(String::as_str) {
        Some("new") => &[false],
        Some("old") => &[true],
        _ => &[false, true],
    };
    let ops: u64 = args.get(3).map_or(OPS, |a| a.parse().unwrap());
    let mut results: Vec<(bool, Round)> = Vec::new();
    for r in 0..rounds {
        // Alternate which goes first.
        let order: Vec<bool> = if r % 2 == 0 {
            modes.to_vec()
        } else {
            modes.iter().rev().copied().collect()
        };
        for old in order {
            let round = run(old, ops);
            println!(
                "round {r} {}: cpu {:.3} s, write amp {:.3}, compaction bytes {}, entries left {}, tombstones left {}",
                if old { "old" } else { "new" },
                round.cpu_s,
                round.write_amp,
                round.compaction_bytes,
                round.entries_left,
                round.tombstones_left
            );
            results.push((old, round));
        }
    }
    let med = |old: bool, f: &Figure| {
        let v: Vec<f64> = results
            .iter()
            .filter(|(o, _)| *o == old)
            .map(|(_, r)| f(r))
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let figures: [(&str, &Figure); 5] = [
        ("cpu s", &|r| r.cpu_s),
        ("write amp", &|r| r.write_amp),
        ("compaction bytes", &|r| r.compaction_bytes as f64),
        ("entries left", &|r| r.entries_left as f64),
        ("tombstones left", &|r| r.tombstones_left as f64),
    ];
    for (name, f) in figures {
        match (med(false, f), med(true, f)) {
            (Some(n), Some(o)) => println!(
                "median {name}: new {n:.3}, old {o:.3}, new/old {:.3}",
                n / o
            ),
            (Some(n), None) => println!("median {name}: new {n:.3}"),
            (None, Some(o)) => println!("median {name}: old {o:.3}"),
            (None, None) => {}
        }
    }
}
