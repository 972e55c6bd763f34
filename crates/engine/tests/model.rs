//! Model-based test: the engine against a `BTreeMap`, through random puts,
//! deletes, batches, point reads, scans, flushes, compactions and reopens
//! (clean, and by dropping the handle so the WAL is replayed).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Compression, Db, Durability, Entry, Options, WalMode, WriteBatch};
use ataman_testkit::rng::Rng;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const KEYS: u8 = 40;

#[derive(Debug, Clone)]
enum Op {
    Put {
        key: u8,
        value: Vec<u8>,
        ts_offset: u16,
    },
    Delete {
        key: u8,
        ts_offset: u16,
    },
    Batch(Vec<(u8, Option<Vec<u8>>, u16)>),
    Get(u8),
    Scan {
        start: u8,
        end: Option<u8>,
        tombstones: bool,
    },
    Flush,
    Compact,
    Reopen {
        clean: bool,
    },
}

fn key_bytes(k: u8) -> Vec<u8> {
    // Varied lengths and a shared prefix, to exercise prefix compression.
    format!("key/{:0width$}", k, width = 1 + (k % 4) as usize).into_bytes()
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => proptest::collection::vec(any::<u8>(), 0..24),
        1 => proptest::collection::vec(any::<u8>(), 200..2000),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (0..KEYS, value_strategy(), 0u16..500).prop_map(|(key, value, ts_offset)| Op::Put { key, value, ts_offset }),
        10 => (0..KEYS, 0u16..500).prop_map(|(key, ts_offset)| Op::Delete { key, ts_offset }),
        8 => proptest::collection::vec((0..KEYS, proptest::option::of(value_strategy()), 0u16..500), 1..8).prop_map(Op::Batch),
        20 => (0..KEYS).prop_map(Op::Get),
        6 => (0..KEYS, proptest::option::of(0..KEYS), any::<bool>()).prop_map(|(start, end, tombstones)| Op::Scan { start, end, tombstones }),
        3 => Just(Op::Flush),
        2 => Just(Op::Compact),
        2 => any::<bool>().prop_map(|clean| Op::Reopen { clean }),
    ]
}

fn small_options() -> Options {
    Options {
        wal_mode: WalMode::Write,
        memtable_bytes_max: 4 * 1024,
        block_bytes: 256,
        block_restart_interval: 4,
        compression: Compression::Lz4,
        block_cache_bytes: 64 * 1024,
        sst_target_bytes: 4 * 1024,
        l0_compaction_trigger: 2,
        l0_stop_writes: 1000,
        l1_bytes_max: 8 * 1024,
        level_size_ratio: 4,
        levels: 4,
        write_stall_timeout: Duration::from_secs(30),
        ..Options::default()
    }
}

/// A key's winning version: (timestamp, write order, value or tombstone);
/// at equal timestamps a tombstone wins, then the later write.
type Version = (u64, u64, Option<Vec<u8>>);

/// The model: per key the winning version.
#[derive(Default)]
struct Model {
    map: BTreeMap<Vec<u8>, Version>,
    order: u64,
}

impl Model {
    fn write(&mut self, key: Vec<u8>, ts: u64, value: Option<Vec<u8>>) {
        self.order += 1;
        let order = self.order;
        let slot = self.map.entry(key).or_insert((0, 0, None));
        // Equal timestamps: a tombstone beats a value, then the later write wins.
        let rank = |v: &Option<Vec<u8>>| u8::from(v.is_none());
        if (ts, rank(&value), order) > (slot.0, rank(&slot.2), slot.1) || slot.1 == 0 {
            *slot = (ts, order, value);
        }
    }

    fn get(&self, key: &[u8]) -> Option<Entry> {
        self.map.get(key).map(|(ts, _, v)| Entry {
            ts: *ts,
            value: v.clone(),
            deadline_ms: None,
        })
    }
}

fn run_ops(dir: &Path, ops: &[Op]) -> ataman_engine::Stats {
    let base_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ts = |offset: u16| timestamp_from_millis(base_ms + u64::from(offset / 4), offset % 4);
    let mut db = Some(Db::open(dir, small_options()).unwrap());
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let d = db.as_ref().unwrap();
        match op {
            Op::Put {
                key,
                value,
                ts_offset,
            } => {
                d.put(
                    &key_bytes(*key),
                    value,
                    ts(*ts_offset),
                    Durability::Complete,
                )
                .unwrap();
                model.write(key_bytes(*key), ts(*ts_offset), Some(value.clone()));
            }
            Op::Delete { key, ts_offset } => {
                d.delete(&key_bytes(*key), ts(*ts_offset), Durability::Complete)
                    .unwrap();
                model.write(key_bytes(*key), ts(*ts_offset), None);
            }
            Op::Batch(entries) => {
                let mut b = WriteBatch::new();
                for (key, value, t) in entries {
                    match value {
                        Some(v) => b.put(&key_bytes(*key), v, ts(*t)),
                        None => b.delete(&key_bytes(*key), ts(*t)),
                    };
                }
                d.write(b, Durability::Complete).unwrap();
                for (key, value, t) in entries {
                    model.write(key_bytes(*key), ts(*t), value.clone());
                }
            }
            Op::Get(key) => {
                let k = key_bytes(*key);
                assert_eq!(d.get(&k).unwrap(), model.get(&k), "step {step}: get {k:?}");
            }
            Op::Scan {
                start,
                end,
                tombstones,
            } => {
                let (s, e) = (key_bytes(*start), end.map(key_bytes));
                let got: Vec<(Vec<u8>, Entry)> = d
                    .scan(&s, e.as_deref(), *tombstones)
                    .unwrap()
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<(Vec<u8>, Entry)> = model
                    .map
                    .range(s.clone()..)
                    .filter(|(k, _)| e.as_ref().is_none_or(|e| *k < e))
                    .filter(|(_, (_, _, v))| *tombstones || v.is_some())
                    .map(|(k, (ts, _, v))| {
                        (
                            k.clone(),
                            Entry {
                                ts: *ts,
                                value: v.clone(),
                                deadline_ms: None,
                            },
                        )
                    })
                    .collect();
                assert_eq!(got, want, "step {step}: scan {s:?}..{e:?}");
            }
            Op::Flush => d.flush().unwrap(),
            Op::Compact => d.compact().unwrap(),
            Op::Reopen { clean } => {
                let old = db.take().unwrap();
                if *clean {
                    old.close().unwrap();
                } else {
                    drop(old);
                }
                db = Some(Db::open(dir, small_options()).unwrap());
            }
        }
    }
    let stats = db.as_ref().unwrap().stats();
    // Final full comparison, then once more after a reopen.
    for pass in 0..2 {
        let d = db.as_ref().unwrap();
        for k in 0..KEYS {
            let k = key_bytes(k);
            assert_eq!(
                d.get(&k).unwrap(),
                model.get(&k),
                "final pass {pass}: get {k:?}"
            );
        }
        let all: Vec<_> = d
            .scan(b"", None, true)
            .unwrap()
            .map(|r| r.unwrap().0)
            .collect();
        let want: Vec<_> = model.map.keys().cloned().collect();
        assert_eq!(all, want, "final pass {pass}: keys");
        let old = db.take().unwrap();
        old.close().unwrap();
        db = Some(Db::open(dir, small_options()).unwrap());
    }
    stats
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, max_shrink_iters: 200, .. ProptestConfig::default() })]

    /// Any sequence of operations gives the same answers as the model.
    #[test]
    fn engine_matches_btreemap(ops in proptest::collection::vec(op_strategy(), 1..300)) {
        let dir = tempfile::tempdir().unwrap();
        run_ops(dir.path(), &ops);
    }
}

/// A long fixed workload that forces many flushes and compactions through
/// several levels, checked against the model at the end.
#[test]
fn long_workload_reaches_deeper_levels() {
    let dir = tempfile::tempdir().unwrap();
    let mut ops = Vec::new();
    let mut rng = Rng::new(12345);
    for i in 0..3000u32 {
        let key = rng.below(u64::from(KEYS)) as u8;
        let op = match i % 10 {
            0 => Op::Delete {
                key,
                ts_offset: (i % 500) as u16,
            },
            1 => Op::Get(key),
            _ => Op::Put {
                key,
                // Incompressible bytes, so the data really fills the levels.
                value: {
                    let len = 100 + rng.below(400) as usize;
                    rng.bytes(len)
                },
                ts_offset: (i % 500) as u16,
            },
        };
        ops.push(op);
        if i % 700 == 699 {
            ops.push(Op::Reopen {
                clean: i % 1400 == 699,
            });
        }
    }
    let stats = run_ops(dir.path(), &ops);
    assert!(
        stats.level_files.iter().skip(2).sum::<usize>() > 0,
        "the workload never reached L2: {stats:?}"
    );
}
