//! Automatic compactions at `Options::compaction_rate_bytes`: they wait
//! to keep the rate, hurry when level 0 is crowded, and stop at a close
//! without poisoning the engine.

use crate::{Db, Durability, Options, WalMode};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A small tree whose level-0 trigger is 2, compacting at `rate` bytes/s.
fn options(rate: u64) -> Options {
    Options {
        wal_mode: WalMode::None,
        memtable_bytes_max: 4 * 1024 * 1024,
        l0_compaction_trigger: 2,
        compaction_rate_bytes: rate,
        ..Options::default()
    }
}

/// Writes one level-0 table of `keys` 1 KiB values (which do not
/// compress), named `round`, and records them in `model`.
fn write_table(db: &Db, round: u64, keys: u64, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..keys {
        let key = format!("k{i:05}").into_bytes();
        let value = crate::db::incompressible(round * 100_000 + i, 1024);
        db.put(&key, &value, 1000 + round, Durability::None)
            .unwrap();
        model.insert(key, value);
    }
    db.flush().unwrap();
}

/// A store paced at 1 byte/s whose compaction of two 1 MiB level-0
/// tables has begun (waited for, bounded), and what it holds.
fn merging_at_one_byte_a_second(dir: &std::path::Path) -> (Db, BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open(dir, options(1)).unwrap();
    let mut model = BTreeMap::new();
    write_table(&db, 1, 1024, &mut model);
    write_table(&db, 2, 1024, &mut model);
    crate::db::until_merging(&db, Duration::from_secs(30));
    (db, model)
}

fn assert_matches(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (key, value) in model {
        let got = db.get(key).unwrap().expect("a written key is readable");
        assert_eq!(got.value.as_ref(), Some(value), "key {key:?}");
    }
}

/// At 1 byte/s a compaction of 2 MiB waits at its first decision (after
/// 1 MiB) for days: level 0 keeps its tables. The close does not wait for
/// it, the engine is not poisoned, and every write reads back after the
/// next open. The control: unpaced, the same tree is compacted.
#[test]
fn a_paced_compaction_waits_and_a_close_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = merging_at_one_byte_a_second(dir.path());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(db.stats().level_files[0], 2, "the paced compaction ended");
    assert_eq!(db.metrics().compactions.get(), 0);
    assert_matches(&db, &model);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(db.close());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the close waited for the paced compaction")
        .expect("a close during a paced compaction succeeds");
    // Unpaced (the control), the same tree is compacted at the open.
    let db = Db::open(dir.path(), options(0)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats().level_files[0] >= 2 {
        assert!(
            Instant::now() < deadline,
            "the unpaced compaction never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_matches(&db, &model);
    db.close().unwrap();
}

/// A compaction paced at 1 byte/s hurries once level 0 holds twice its
/// trigger: the tables flushed while it waits end its wait, it finishes
/// at full speed, and every write reads back.
#[test]
fn a_paced_compaction_hurries_when_level_0_is_crowded() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = merging_at_one_byte_a_second(dir.path());
    // Level 0 to twice its trigger (the merge holds the first two).
    write_table(&db, 3, 256, &mut model);
    write_table(&db, 4, 256, &mut model);
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.metrics().compactions.get() == 0 {
        assert!(Instant::now() < deadline, "the compaction never hurried");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.metrics().compaction_pace_wait_us.get() > 0);
    assert_matches(&db, &model);
    db.close().unwrap();
}
