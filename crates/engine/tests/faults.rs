//! A failed write or fsync (injected EIO or ENOSPC) makes the engine refuse
//! further writes with a clear error; it never retries an fsync and reports
//! success. Every write acknowledged is durable, and none is acknowledged
//! after the first failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::fs::sim::{CrashMode, Fault, FaultKind, FaultOp, SimFs};
use ataman_engine::{Db, Durability, Error, Options, WalMode};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const DIR: &str = "/db";

fn options(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        wal_mode: WalMode::Fsync,
        memtable_bytes_max: 8 * 1024,
        sst_target_bytes: 8 * 1024,
        l0_compaction_trigger: 2,
        l1_bytes_max: 32 * 1024,
        ..Options::default()
    }
}

/// Writes from 3 threads until every thread has seen an error (bounded);
/// returns the acknowledged keys and the first error seen.
fn write_until_failure(db: &Arc<Db>) -> (Vec<(String, u64)>, String) {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let first_error = Arc::new(Mutex::new(None::<String>));
    let failed = Arc::new(AtomicBool::new(false));
    let acked_after_failure = Arc::new(AtomicU64::new(0));
    let next = Arc::new(AtomicU64::new(1));
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (db, acked, first_error, failed, after, next) = (
                Arc::clone(db),
                Arc::clone(&acked),
                Arc::clone(&first_error),
                Arc::clone(&failed),
                Arc::clone(&acked_after_failure),
                Arc::clone(&next),
            );
            std::thread::spawn(move || {
                for _ in 0..5_000 {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let key = format!("key{:05}", i % 997);
                    // Read the flag before the write: an acknowledgement of a
                    // write submitted after a failure was observed is a bug.
                    let failure_seen = failed.load(Ordering::SeqCst);
                    match db.put(key.as_bytes(), &[b'v'; 100], i, Durability::Complete) {
                        Ok(_) => {
                            if failure_seen {
                                after.fetch_add(1, Ordering::SeqCst);
                            }
                            acked.lock().unwrap().push((key, i));
                        }
                        Err(e) => {
                            failed.store(true, Ordering::SeqCst);
                            first_error.lock().unwrap().get_or_insert(e.to_string());
                            assert!(
                                matches!(e, Error::Poisoned { .. } | Error::Io { .. }),
                                "unexpected error kind: {e}"
                            );
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        acked_after_failure.load(Ordering::SeqCst),
        0,
        "writes were acknowledged after the engine failed"
    );
    let err = first_error
        .lock()
        .unwrap()
        .clone()
        .expect("the fault never fired");
    let acked = acked.lock().unwrap().clone();
    (acked, err)
}

/// After the failure: writes refused with the reason, stats say so, and a
/// durable-only image holds every acknowledged write.
fn check_after_failure(fs: &SimFs, db: &Arc<Db>, acked: &[(String, u64)], needle: &str) {
    let err = db
        .put(b"late", b"x", u64::MAX >> 1, Durability::Complete)
        .unwrap_err();
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    assert!(
        err.to_string().contains(needle),
        "reason should name the failure: {err}"
    );
    assert!(db.stats().poisoned.is_some());
    let err = db
        .put(b"late", b"x", u64::MAX >> 1, Durability::None)
        .unwrap_err();
    assert!(matches!(err, Error::Poisoned { .. }));
    // Reads still work.
    if let Some((k, _)) = acked.first() {
        assert!(db.get(k.as_bytes()).unwrap().is_some());
    }
    let image = fs.crash_image_with(CrashMode::durable_only());
    let reopened = Db::open(Path::new(DIR), options(&image)).unwrap();
    for (key, ts) in acked {
        let e = reopened
            .get(key.as_bytes())
            .unwrap()
            .expect("acknowledged write lost");
        assert!(e.ts >= *ts, "{key}: {} < acknowledged {ts}", e.ts);
    }
    assert!(reopened.get(b"late").unwrap().is_none());
}

/// Opens an engine on a fresh simulated disk, arms `fault`, writes until
/// it fires, and checks the aftermath; `needle` must appear in the reason.
/// A full disk (and only that) is reported by `Db::out_of_space`.
fn run_with_fault(fault: Fault, needle: &str) {
    let out_of_space = fault.kind == FaultKind::NoSpace;
    let fs = SimFs::new();
    let db = Arc::new(Db::open(Path::new(DIR), options(&fs)).unwrap());
    fs.inject(fault);
    let (acked, err) = write_until_failure(&db);
    assert!(
        !acked.is_empty(),
        "the fault fired before any write was acknowledged"
    );
    assert!(
        err.contains(needle),
        "error should name the failing file: {err}"
    );
    check_after_failure(&fs, &db, &acked, needle);
    assert_eq!(db.out_of_space(), out_of_space, "out of space? {err}");
}

/// EIO on a WAL fsync.
#[test]
fn wal_fsync_failure_poisons() {
    run_with_fault(
        Fault::new(FaultOp::Sync, 40, FaultKind::Io).on_paths_containing(".wal"),
        ".wal",
    );
}

/// ENOSPC on a WAL write.
#[test]
fn wal_write_no_space_poisons() {
    run_with_fault(
        Fault::new(FaultOp::Write, 25, FaultKind::NoSpace).on_paths_containing(".wal"),
        ".wal",
    );
}

/// ENOSPC while a flush writes an SSTable.
#[test]
fn sstable_write_failure_poisons() {
    run_with_fault(
        Fault::new(FaultOp::Write, 3, FaultKind::NoSpace).on_paths_containing(".sst"),
        ".sst",
    );
}

/// EIO on a manifest fsync.
#[test]
fn manifest_sync_failure_poisons() {
    run_with_fault(
        Fault::new(FaultOp::Sync, 2, FaultKind::Io).on_paths_containing("MANIFEST"),
        "MANIFEST",
    );
}
