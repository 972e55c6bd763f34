//! Compaction keeps only the newest version of each key, drops tombstones
//! only at the bottom and only after their grace period, and reports write
//! and space amplification.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Options, WalMode};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn opts(grace: Duration) -> Options {
    Options {
        wal_mode: WalMode::None,
        memtable_bytes_max: 64 * 1024,
        tombstone_grace: grace,
        background_compaction: false,
        ..Options::default()
    }
}

fn total(v: &[u64]) -> u64 {
    v.iter().sum()
}

/// Many versions of few keys compact down to one entry per key.
#[test]
fn old_versions_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        l0_stop_writes: 1000,
        ..opts(Duration::from_secs(3600))
    };
    let db = Db::open(dir.path(), o).unwrap();
    let base = timestamp_from_millis(now_ms(), 0);
    for round in 0..50u64 {
        for k in 0..20u64 {
            db.put(
                format!("k{k}").as_bytes(),
                &[round as u8; 64],
                base + round,
                Durability::None,
            )
            .unwrap();
        }
        db.flush().unwrap();
    }
    let before = db.stats();
    assert_eq!(total(&before.level_entries), 50 * 20);
    db.compact().unwrap();
    let after = db.stats();
    assert_eq!(total(&after.level_entries), 20, "{after:?}");
    assert_eq!(after.level_files[0], 0);
    for k in 0..20u64 {
        let e = db.get(format!("k{k}").as_bytes()).unwrap().unwrap();
        assert_eq!((e.ts, e.value.unwrap()), (base + 49, vec![49u8; 64]));
    }
    // Compressed flushes and a compaction were counted (no WAL in this test).
    let m = db.metrics();
    assert!(m.compaction_bytes_written.get() > 0 && m.flush_bytes_written.get() > 0);
    let expected = (m.flush_bytes_written.get() + m.compaction_bytes_written.get()) as f64
        / m.user_bytes_written.get() as f64;
    assert!(
        (after.write_amplification - expected).abs() < 1e-9,
        "{after:?}"
    );
    assert!((after.space_amplification - 1.0).abs() < 1e-9, "{after:?}");
}

/// Tombstones inside the grace period survive a full compaction; expired ones are dropped.
#[test]
fn tombstones_dropped_only_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(Duration::from_secs(3600))).unwrap();
    let fresh = timestamp_from_millis(now_ms(), 0);
    let expired = timestamp_from_millis(now_ms() - 2 * 3600 * 1000, 0);
    db.put(b"a", b"1", expired - 10, Durability::None).unwrap();
    db.delete(b"a", expired, Durability::None).unwrap(); // deleted long ago
    db.put(b"b", b"2", fresh - 10, Durability::None).unwrap();
    db.delete(b"b", fresh, Durability::None).unwrap(); // deleted just now
    db.compact().unwrap();
    let s = db.stats();
    assert_eq!(total(&s.level_tombstones), 1, "{s:?}");
    assert_eq!(total(&s.level_entries), 1, "{s:?}");
    assert_eq!(db.get(b"a").unwrap(), None);
    let b = db.get(b"b").unwrap().unwrap();
    assert_eq!((b.ts, b.value), (fresh, None));
    let with_tombstones: Vec<_> = db
        .scan(b"", None, true)
        .unwrap()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(with_tombstones, vec![b"b".to_vec()]);
}

/// A tombstone above a deeper level that holds the key is kept, however
/// old: dropping it would resurrect the older value below.
#[test]
fn tombstone_kept_when_a_deeper_level_has_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        background_compaction: true,
        l0_compaction_trigger: 1,
        l1_bytes_max: 4096,
        compression: ataman_engine::Compression::None,
        ..opts(Duration::from_secs(1))
    };
    let db = Db::open(dir.path(), o).unwrap();
    let old = timestamp_from_millis(now_ms() - 10_000, 0);
    db.put(b"k", &[7u8; 10_000], old, Durability::None).unwrap();
    db.compact().unwrap();
    // The 10 KB file is over L1's 4 KiB budget: the background moves it to L2.
    wait_for(&db, |s| {
        s.level_files[0] == 0 && s.level_files[1] == 0 && s.level_files[2] == 1
    });
    db.delete(b"k", old + 1, Durability::None).unwrap();
    db.flush().unwrap();
    // L0 -> L1 (trigger 1); L2 overlaps, so L1 is not the bottom for "k".
    wait_for(&db, |s| s.level_files[0] == 0 && s.level_files[1] == 1);
    let s = db.stats();
    assert_eq!((s.level_tombstones[1], s.level_entries[2]), (1, 1), "{s:?}");
    assert_eq!(
        db.get(b"k").unwrap().map(|e| e.value),
        Some(None),
        "the delete must still win"
    );
}

fn wait_for(db: &Db, done: impl Fn(&ataman_engine::Stats) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done(&db.stats()) {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out: {:?}",
            db.stats()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A pass over the whole store (`scan_without_filling`: anti-entropy, a
/// layout transition's copy), like a compaction's merge, reads every entry
/// and adds no block to the cache; the same scan through `scan` fills it
/// (the control).
#[test]
fn a_bulk_scan_does_not_fill_the_block_cache() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts(Duration::from_secs(3600))).unwrap();
    for i in 0..2000u64 {
        let key = format!("k{i:05}");
        db.put(key.as_bytes(), &[7u8; 512], 1000 + i, Durability::None)
            .unwrap();
    }
    db.flush().unwrap();
    assert!(db.stats().level_files[0] > 0, "the keys are in tables");
    let before = db.stats().cache.bytes;
    let bulk = db.scan_without_filling(b"", None, true).unwrap().count();
    assert_eq!(bulk, 2000);
    assert_eq!(
        db.stats().cache.bytes,
        before,
        "the bulk scan filled the cache"
    );
    let plain = db.scan(b"", None, true).unwrap().count();
    assert_eq!(plain, 2000);
    assert!(
        db.stats().cache.bytes > before + 100 * 1024,
        "the plain scan fills it"
    );
    db.close().unwrap();
}
