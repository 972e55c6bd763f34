//! Reads run concurrently with the writer on consistent read views: a batch
//! is seen whole or not at all, across memtable rotations, flushes and
//! compactions; and many concurrent writers all get their writes applied.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::{Db, Durability, Options, WalMode, WriteBatch};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn small() -> Options {
    Options {
        wal_mode: WalMode::Write,
        memtable_bytes_max: 32 * 1024,
        sst_target_bytes: 32 * 1024,
        l1_bytes_max: 128 * 1024,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

/// Every batch writes the same counter to keys a and b; no reader ever sees them differ.
#[test]
fn batches_are_atomic_for_readers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), small()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        readers.push(std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let pair: Vec<_> = db
                    .scan(b"pair/", Some(b"pair0"), false)
                    .unwrap()
                    .map(|r| r.unwrap().1.value.unwrap())
                    .collect();
                if !pair.is_empty() {
                    assert_eq!(pair.len(), 2, "half a batch visible");
                    assert_eq!(pair[0], pair[1], "a scan saw two different batches");
                }
                checks += 1;
            }
            checks
        }));
    }
    let padding = vec![7u8; 300];
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0..3000u64 {
        let v = format!("{i:08}");
        let mut b = WriteBatch::new();
        b.put(b"pair/a", v.as_bytes(), i + 1)
            .put(b"pair/b", v.as_bytes(), i + 1)
            .put(format!("filler/{i}").as_bytes(), &padding, i + 1);
        db.write(b, Durability::Submit).unwrap();
        if Instant::now() > deadline {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let checks: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(checks > 0);
    let stats = db.stats();
    assert!(
        stats.level_files.iter().sum::<usize>() > 0,
        "the test never flushed: {stats:?}"
    );
}

/// Many threads writing distinct keys concurrently: every write is applied once.
#[test]
fn concurrent_writers_all_applied() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), small()).unwrap());
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..500u64 {
                    let k = format!("t{t}/k{i}");
                    db.put(
                        k.as_bytes(),
                        k.as_bytes(),
                        t * 1000 + i + 1,
                        Durability::Complete,
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let all: Vec<_> = db
        .scan(b"", None, false)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(all.len(), 8 * 500);
    for (k, e) in &all {
        assert_eq!(e.value.as_deref(), Some(k.as_slice()));
    }
    let m = db.metrics();
    // Group commit: fewer WAL writes than batches when writers overlap.
    assert!(m.wal_writes.get() <= m.batches_written.get());
    assert_eq!(m.batches_written.get(), 4000);
}
