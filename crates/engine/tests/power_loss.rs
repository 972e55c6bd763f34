//! Power loss, not only kill -9: the engine runs on the simulated file
//! system, writers record every acknowledged write, and at random moments
//! the test takes the images a power cut could leave (unsynced data
//! dropped, a random prefix kept, the last write torn at 512 B or 4 KiB,
//! directory entries not yet synced gone). Every image must open, hold
//! every write acknowledged before the cut, and hold nothing never written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::fs::sim::{CrashMode, NamespaceMode, SimFs, TailMode};
use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Options, WalMode};
use ataman_testkit::rng::Rng;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const DIR: &str = "/db";
const KEYS: u64 = 300;

fn value_for(key: &str, ts: u64) -> Vec<u8> {
    let mut v = format!("{key}@{ts}").into_bytes();
    v.resize(v.len() + (ts % 300) as usize, b'0' + (ts % 10) as u8);
    v
}

fn options(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        wal_mode: WalMode::Fsync,
        memtable_bytes_max: 16 * 1024,
        sst_target_bytes: 16 * 1024,
        l0_compaction_trigger: 2,
        l1_bytes_max: 64 * 1024,
        block_bytes: 512,
        ..Options::default()
    }
}

/// Opens the image and checks it against the acknowledged writes.
fn check_image(image: &SimFs, acked: &HashMap<String, u64>, label: &str) {
    let before = format!(
        "{:?} {:?}",
        image.durable_names(Path::new(DIR)),
        ataman_engine::manifest::load_manifest(image, Path::new(DIR)).map(|s| s.map(|s| (
            s.wal_segment_min,
            s.last_seq,
            s.files
                .iter()
                .map(|f| (f.level, f.number))
                .collect::<Vec<_>>()
        )))
    );
    let db = Db::open(Path::new(DIR), options(image))
        .unwrap_or_else(|e| panic!("{label}: image does not open: {e}"));
    for (key, &ts) in acked {
        let entry = db.get(key.as_bytes()).unwrap().unwrap_or_else(|| {
            panic!(
                "{label}: acknowledged {key}@{ts} lost; before {before}; recovery {:?}",
                db.recovery_report()
            )
        });
        assert!(
            entry.ts >= ts,
            "{label}: {key} went back from {ts} to {}",
            entry.ts
        );
    }
    for item in db.scan(b"", None, true).unwrap() {
        let (key, entry) = item.unwrap();
        let key = String::from_utf8(key).unwrap();
        let expected = (entry.ts % 7 != 0).then(|| value_for(&key, entry.ts));
        assert_eq!(
            entry.value, expected,
            "{label}: {key}@{} holds a version never written",
            entry.ts
        );
    }
    db.close().unwrap();
}

/// Runs writers on a simulated disk and checks `cuts` crash images taken while they run.
fn run(seed: u64, cuts: usize, modes: &[CrashMode]) {
    let fs = SimFs::new();
    let db = Arc::new(Db::open(Path::new(DIR), options(&fs)).unwrap());
    let acked: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    // Hybrid-logical-clock timestamps of now: tombstones are inside their
    // grace period, so compaction keeps them (as it must, for replicas).
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let next_ts = Arc::new(AtomicU64::new(timestamp_from_millis(now_ms, 0)));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3u64)
        .map(|t| {
            let (db, acked, next_ts, stop) = (
                Arc::clone(&db),
                Arc::clone(&acked),
                Arc::clone(&next_ts),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut rng = Rng::derive(seed, t);
                for _ in 0..20_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let key = format!("k{:04}", rng.below(KEYS));
                    let ts = next_ts.fetch_add(1, Ordering::Relaxed);
                    // Every seventh timestamp is a delete, so a tombstone's
                    // timestamp tells it was really written as one.
                    if ts % 7 == 0 {
                        db.delete(key.as_bytes(), ts, Durability::Complete).unwrap();
                    } else {
                        db.put(
                            key.as_bytes(),
                            &value_for(&key, ts),
                            ts,
                            Durability::Complete,
                        )
                        .unwrap();
                    }
                    let mut a = acked.lock().unwrap();
                    let slot = a.entry(key).or_insert(0);
                    *slot = (*slot).max(ts);
                }
            })
        })
        .collect();
    for cut in 0..cuts {
        std::thread::sleep(Duration::from_millis(5 + (seed + cut as u64) % 20));
        // Acknowledged before the image is taken, so durable in it.
        let snapshot = acked.lock().unwrap().clone();
        for (i, mode) in modes.iter().enumerate() {
            let mut mode = *mode;
            mode.seed = seed.wrapping_mul(1000).wrapping_add((cut * 16 + i) as u64);
            let image = fs.crash_image_with(mode);
            check_image(
                &image,
                &snapshot,
                &format!("seed {seed} cut {cut} mode {mode:?}"),
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let final_acked = acked.lock().unwrap().clone();
    assert!(!final_acked.is_empty(), "no write was acknowledged");
    // After the writers stopped, the durable-only image holds everything.
    check_image(
        &fs.crash_image_with(CrashMode::durable_only()),
        &final_acked,
        "final durable image",
    );
    drop(db);
}

/// Each tail and namespace mode, deterministically, at several cut points.
#[test]
fn every_crash_mode_keeps_acknowledged_writes() {
    let tails = [
        TailMode::Drop,
        TailMode::Keep,
        TailMode::RandomPrefix,
        TailMode::TornSector,
        TailMode::TornPage,
    ];
    let spaces = [
        NamespaceMode::Durable,
        NamespaceMode::Live,
        NamespaceMode::RandomPrefix,
    ];
    let modes: Vec<CrashMode> = tails
        .iter()
        .flat_map(|&tail| {
            spaces.iter().map(move |&namespace| CrashMode {
                tail,
                namespace,
                seed: 0,
            })
        })
        .collect();
    run(1, 6, &modes);
}

/// Random modes over several seeds.
#[test]
fn random_crash_images_keep_acknowledged_writes() {
    for seed in 2..8u64 {
        run(
            seed,
            5,
            &[CrashMode::random(seed), CrashMode::random(seed + 100)],
        );
    }
}
