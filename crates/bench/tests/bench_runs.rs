//! The benchmarks as a user runs them, tiny: they must finish, do exactly
//! the work asked for, and report every promised key. Never speeds: the
//! machines are shared and noisy, so no assertion here is about timing.

use ataman_bench::args::{DurabilityArg, WalModeArg};
use ataman_bench::engine::{self, EngineArgs};

fn tiny(ops: u64, writers: usize, batch: usize) -> EngineArgs {
    EngineArgs {
        ops,
        writers,
        batch,
        durability: DurabilityArg::Complete,
        keys: 1000,
        value_size: 100,
        wal_mode: WalModeArg::None,
        dir: None,
        json: None,
        readrandom: false,
        reads: 1000,
        readers: 2,
        drivers: 2,
        seed: 1,
        ttl_ms: None,
    }
}

/// Keys `--json` promises for `ataman bench engine`.
const ENGINE_JSON_KEYS: [&str; 7] = [
    "ops_per_sec",
    "latency_us",
    "wal_writes_per_sec",
    "mean_batch",
    "max_batch",
    "fsyncs_per_sec",
    "cpu_sec_per_mop",
];

fn assert_engine_json_shape(json: &serde_json::Value) {
    for key in ENGINE_JSON_KEYS {
        assert!(json.get(key).is_some(), "missing {key} in {json}");
    }
    for key in ["p50", "p99", "p99.9"] {
        assert!(
            json["latency_us"].get(key).is_some(),
            "missing latency_us.{key}"
        );
    }
    for key in [
        "ops",
        "writers",
        "batch",
        "durability",
        "keys",
        "value_size",
        "wal_mode",
    ] {
        assert!(json.get(key).is_some(), "missing parameter {key}");
    }
}

/// A tiny run with 4 writers acknowledges exactly the 2000 puts asked for and reports every key.
#[test]
fn tiny_engine_run_acknowledges_every_op() {
    let report = engine::run(&tiny(2000, 4, 1)).unwrap();
    assert_eq!(report.ops_done, 2000);
    assert!(report.ops_per_sec > 0.0);
    assert!(report.read.is_none());
    let json = serde_json::to_value(&report).unwrap();
    assert_engine_json_shape(&json);
    assert_eq!(json["ops"], 2000);
    assert!(json.get("reads_per_sec").is_none());
}

/// A batch size that does not divide the op count ends with a short batch, never an extra put.
#[test]
fn short_last_batch_is_not_overcounted() {
    let mut args = tiny(2000, 3, 7);
    args.durability = DurabilityArg::None;
    let report = engine::run(&args).unwrap();
    assert_eq!(report.ops_done, 2000);
}

/// More writers than ops, with the WAL on (write mode): each put is acknowledged once.
#[test]
fn more_writers_than_ops_with_wal() {
    let mut args = tiny(50, 100, 1);
    args.wal_mode = WalModeArg::Write;
    args.durability = DurabilityArg::Submit;
    let report = engine::run(&args).unwrap();
    assert_eq!(report.ops_done, 50);
    assert!(report.max_batch >= 1);
    assert!(report.mean_batch >= 1.0);
}

/// `--readrandom` reads the count asked for, every read hits, and the JSON says so; `--json` writes the file.
#[test]
fn tiny_readrandom_reports_reads() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("engine.json");
    let mut args = tiny(2000, 4, 10);
    args.readrandom = true;
    args.reads = 1001;
    args.json = Some(json_path.clone());
    let report = engine::run(&args).unwrap();
    let read = report.read.as_ref().unwrap();
    assert_eq!(read.reads, 1001);
    assert!(read.read_keys >= 1000);
    ataman_bench::report::write_json(&json_path, &report).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_engine_json_shape(&json);
    assert!(json.get("reads_per_sec").is_some());
    assert!(json["read_latency_us"].get("p99.9").is_some());
}

/// The fjall comparison runs all three phases on both engines with the asked counts.
#[cfg(feature = "fjall")]
#[test]
fn tiny_fjall_comparison_has_three_phases() {
    let args = ataman_bench::fjall_cmp::FjallArgs {
        ops: 300,
        reads: Some(503),
        per_put_ops: Some(20),
        batch: 100,
        keys: 1000,
        value_size: 100,
        dir: None,
        json: None,
        seed: 1,
    };
    let report = ataman_bench::fjall_cmp::run(&args).unwrap();
    let ops: Vec<u64> = report.phases.iter().map(|p| p.ops).collect();
    assert_eq!(ops, vec![20, 300, 503]);
    // 503 reads in ten rounds of 50 or 51, each with a ratio.
    assert_eq!(
        report.read_round_ratios.len(),
        ataman_bench::fjall_cmp::READ_ROUNDS as usize
    );
    assert!(report.read_round_ratios.iter().all(|r| *r > 0.0));
    let json = serde_json::to_value(&report).unwrap();
    for phase in json["phases"].as_array().unwrap() {
        for key in ["phase", "ataman_ops_per_sec", "fjall_ops_per_sec", "ratio"] {
            assert!(phase.get(key).is_some(), "missing {key}");
        }
    }
    // Fewer reads than rounds is refused before anything is written.
    let too_few = ataman_bench::fjall_cmp::FjallArgs {
        reads: Some(ataman_bench::fjall_cmp::READ_ROUNDS - 1),
        ..args
    };
    assert!(matches!(
        ataman_bench::fjall_cmp::run(&too_few),
        Err(ataman_bench::error::BenchError::InvalidArgument(_))
    ));
}
