//! A checkpoint against a model (`BTreeMap`): opened, it holds exactly the
//! writes acknowledged before it was taken and none submitted after it
//! returned, across flushed tables and memtables; a writer running during
//! it leaves a prefix of its own write order in it.

use super::{Db, Entry};
use crate::options::{Durability, Options, WalMode};
use crate::{Result, WriteBatch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn options() -> Options {
    Options {
        wal_mode: WalMode::Write,
        // Small memtables: the store holds tables, immutable memtables and
        // a memtable at once.
        memtable_bytes_max: 16 << 10,
        block_bytes: 512,
        // Tombstones are kept (the test's timestamps are small, so any
        // grace would have passed and a compaction of the opened
        // checkpoint could collect them): the comparison is exact.
        tombstone_grace: std::time::Duration::from_secs(100 * 365 * 24 * 3600),
        ..Options::default()
    }
}

fn key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}{i:05}").into_bytes()
}

/// Everything a store holds, tombstones included.
fn contents(db: &Db) -> Result<BTreeMap<Vec<u8>, Entry>> {
    db.scan(b"", None, true)?.collect()
}

/// The differences between `got` and `want` on keys outside prefix `w`,
/// one line each (empty: equal).
fn differences(got: &BTreeMap<Vec<u8>, Entry>, want: &BTreeMap<Vec<u8>, Entry>) -> Vec<String> {
    let mut out = Vec::new();
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    for k in keys {
        if k.starts_with(b"w") {
            continue;
        }
        if got.get(k) != want.get(k) {
            out.push(format!(
                "{}: checkpoint {:?}, model {:?}",
                String::from_utf8_lossy(k),
                got.get(k),
                want.get(k)
            ));
        }
    }
    out
}

/// Writes (puts, overwrites, deletes) `n` operations on keys with
/// `prefix`, timestamps from `ts0`, applying each to `model` once acknowledged.
fn write_some(db: &Db, model: &mut BTreeMap<Vec<u8>, Entry>, prefix: &str, ts0: u64, n: u64) {
    for i in 0..n {
        let ts = ts0 + i;
        let k = key(prefix, i % 700);
        if i % 11 == 5 {
            db.delete(&k, ts, Durability::Complete).unwrap();
            model.insert(k, Entry::tombstone(ts));
        } else {
            let v = format!("v{ts}-{}", "x".repeat((i % 40) as usize)).into_bytes();
            db.put(&k, &v, ts, Durability::Complete).unwrap();
            model.insert(k, Entry::value(ts, v));
        }
    }
}

/// The checkpoint holds exactly the acknowledged writes before it and none
/// after it; the concurrent writer's keys in it are a prefix of its order,
/// holding every write it had acknowledged when the checkpoint was called.
/// Negative control: the live store after the later writes differs from
/// the model (the checker catches writes after the point).
#[test]
fn checkpoint_holds_exactly_the_writes_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let live_dir = tmp.path().join("live");
    let db = Arc::new(Db::open(&live_dir, options()).unwrap());
    let mut model = BTreeMap::new();
    write_some(&db, &mut model, "a", 1_000, 2_500);
    assert!(
        db.stats().level_files.iter().sum::<usize>() > 0,
        "the store should hold tables before the checkpoint"
    );
    // A writer of `w` keys, in order, running across the checkpoint.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (db, stop, acked) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&acked));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Acquire) && i < 200_000 {
                let mut b = WriteBatch::new();
                b.put(&key("w", i), b"w", 50_000 + i);
                db.write(b, Durability::Complete).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
            i
        })
    };
    // Wait (bounded) until the writer has acknowledged a few writes.
    for _ in 0..10_000 {
        if acked.load(Ordering::Acquire) >= 20 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let acked_before = acked.load(Ordering::Acquire);
    assert!(acked_before >= 20, "the writer did not start");
    let ckpt_dir = tmp.path().join("ckpt");
    let report = db.checkpoint(&ckpt_dir).unwrap();
    stop.store(true, Ordering::Release);
    let written_by_writer = writer.join().unwrap();
    let before = model.clone();
    write_some(&db, &mut model, "a", 100_000, 900);
    assert!(!report.linked.is_empty(), "no table was linked: {report:?}");
    assert!(report.linked_bytes() > 0);
    assert!(
        db.checkpoint(&ckpt_dir).is_err(),
        "a second checkpoint into an existing directory must be refused"
    );
    let live = contents(&db).unwrap();
    db.compact().unwrap();
    let ckpt = Db::open(&ckpt_dir, options()).unwrap();
    assert_eq!(ckpt.recovery_report().replay.records, 0);
    let got = contents(&ckpt).unwrap();
    let diff = differences(&got, &before);
    assert!(
        diff.is_empty(),
        "checkpoint differs from the model: {diff:?}"
    );
    // Negative control: the live store holds the later writes.
    assert!(
        !differences(&live, &before).is_empty(),
        "the checker must see writes after the point"
    );
    let w: Vec<u64> = got
        .keys()
        .filter(|k| k.starts_with(b"w"))
        .map(|k| String::from_utf8_lossy(&k[1..]).parse().unwrap())
        .collect();
    let n = w.len() as u64;
    assert!(
        w.iter().copied().eq(0..n),
        "the writer's keys are not a prefix of its order"
    );
    assert!(
        n >= acked_before && n <= written_by_writer,
        "{n} of the writer's keys, {acked_before} acknowledged before, {written_by_writer} written"
    );
    ckpt.close().unwrap();
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    assert_linked_files_survive(&ckpt_dir);
}

/// Every table of the checkpoint is still readable after the live store
/// compacted (its names gone) and closed: the links keep the bytes.
fn assert_linked_files_survive(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    assert!(contents(&db).unwrap().len() > 100);
    db.close().unwrap();
}

/// A checkpoint of an empty store opens empty; one of a store whose
/// writes are all in the memtable holds them in its one written table.
#[test]
fn checkpoint_of_memtable_only_store() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path().join("live"), options()).unwrap();
    let empty = db.checkpoint(&tmp.path().join("c0")).unwrap();
    assert!(empty.linked.is_empty() && empty.written.is_empty());
    let mut model = BTreeMap::new();
    write_some(&db, &mut model, "m", 10, 50);
    let report = db.checkpoint(&tmp.path().join("c1")).unwrap();
    assert!(report.linked.is_empty());
    assert_eq!(report.written.len(), 1);
    let c0 = Db::open(tmp.path().join("c0"), options()).unwrap();
    assert!(contents(&c0).unwrap().is_empty());
    let c1 = Db::open(tmp.path().join("c1"), options()).unwrap();
    assert!(differences(&contents(&c1).unwrap(), &model).is_empty());
}

/// The CRC-32C a checkpoint reports for a table is that of the file's
/// bytes on disk, for every table this process wrote (linked and the
/// memtables' own); after a reopen the tables opened from the manifest
/// have none (it is not recorded there), and what is known is never wrong.
#[test]
fn known_crc32c_are_the_files_own() {
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live");
    let db = Db::open(&live, options()).unwrap();
    let mut model = BTreeMap::new();
    write_some(&db, &mut model, "k", 1_000, 2_500);
    write_some(&db, &mut model, "m", 9_000, 10);
    let report = db.checkpoint(&tmp.path().join("c1")).unwrap();
    assert!(
        !report.linked.is_empty() && report.written.len() == 1,
        "{report:?}"
    );
    assert_eq!(
        report.known_crc32c.len(),
        report.linked.len() + report.written.len(),
        "every table here was written by this process: {report:?}"
    );
    for (name, bytes, crc) in &report.known_crc32c {
        let on_disk = std::fs::read(tmp.path().join("c1").join(name)).unwrap();
        assert_eq!(on_disk.len() as u64, *bytes, "{name}");
        assert_eq!(crc32c::crc32c(&on_disk), *crc, "{name}");
    }
    // Negative control: a flipped byte no longer matches the known CRC.
    let (name, _, crc) = &report.known_crc32c[0];
    let mut bytes = std::fs::read(tmp.path().join("c1").join(name)).unwrap();
    bytes[0] ^= 1;
    assert_ne!(crc32c::crc32c(&bytes), *crc);
    db.close().unwrap();
    let db = Db::open(&live, options()).unwrap();
    let report = db.checkpoint(&tmp.path().join("c2")).unwrap();
    assert!(
        report.known_crc32c.len() < report.linked.len() + report.written.len(),
        "the tables opened from the manifest have no known CRC: {report:?}"
    );
    for (name, _, crc) in &report.known_crc32c {
        let on_disk = std::fs::read(tmp.path().join("c2").join(name)).unwrap();
        assert_eq!(crc32c::crc32c(&on_disk), *crc, "{name}");
    }
    db.close().unwrap();
}
