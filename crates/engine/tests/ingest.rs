//! `Db::ingest` against a model (a `BTreeMap` of each key's newest
//! version): sorted batches ingested between ordinary writes, flushes and
//! compactions (timestamps out of order, so an ingested version is
//! sometimes older, sometimes newer than what the tree holds) read back
//! as the model says, by point reads and scans, after a full compaction
//! and a reopen; an ingest that returned survives a power cut. A batch out of key order
//! is refused; a key span that overlaps a table in every level is
//! declined, and nothing changes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::fs::sim::{CrashMode, SimFs};
use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Entry, Error, Options, WriteBatch};
use ataman_testkit::rng::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/db";
const KEYS: u64 = 400;
/// Distinct timestamps: the newest version of a key is never a tie.
const TS_SLOTS: u64 = 1 << 12;

type Model = BTreeMap<Vec<u8>, Entry>;

fn options(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        memtable_bytes_max: 16 * 1024,
        sst_target_bytes: 8 * 1024,
        l0_compaction_trigger: 2,
        l1_bytes_max: 32 * 1024,
        block_bytes: 512,
        ..Options::default()
    }
}

/// Now: tombstones stay within their grace through every compaction.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn key(k: u64) -> Vec<u8> {
    format!("key/{k:04}").into_bytes()
}

fn offer(model: &mut Model, k: Vec<u8>, entry: Entry) {
    let slot = model.entry(k).or_insert_with(|| entry.clone());
    if entry.ts > slot.ts {
        *slot = entry;
    }
}

/// A random version (a fifth are tombstones) with a distinct timestamp.
fn version(rng: &mut Rng, base_ms: u64, serial: &mut u64) -> Entry {
    *serial += 1;
    let ts = timestamp_from_millis(base_ms + rng.below(TS_SLOTS), 0) + *serial;
    if rng.below(5) == 0 {
        Entry::tombstone(ts)
    } else {
        let mut value = format!("{ts}").into_bytes();
        value.resize(20 + rng.below(200) as usize, b'v');
        Entry::value(ts, value)
    }
}

fn add(batch: &mut WriteBatch, k: &[u8], e: &Entry) {
    match &e.value {
        Some(v) => {
            batch.put(k, v, e.ts);
        }
        None => {
            batch.delete(k, e.ts);
        }
    }
}

/// The engine holds exactly `model`, tombstones included.
fn check(db: &Db, model: &Model, label: &str) {
    let got: Model = db
        .scan(b"", None, true)
        .unwrap()
        .map(|item| item.unwrap())
        .collect();
    assert_eq!(got.len(), model.len(), "{label}: scan count");
    for (k, want) in model {
        assert_eq!(got.get(k), Some(want), "{label}: scan {k:?}");
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(want),
            "{label}: get {k:?}"
        );
    }
}

/// Rounds of ordinary writes and ingests of a random sorted subset of the
/// keys, with flushes and background compactions between; checked after
/// every round, after a full compaction and after a reopen.
#[test]
fn ingested_versions_read_as_the_model_says() {
    for seed in 1..=4u64 {
        let fs = SimFs::new();
        let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
        let mut rng = Rng::new(seed);
        let (mut model, mut serial, base_ms) = (Model::new(), 0, now_ms());
        let mut installed = 0;
        for round in 0..12 {
            for _ in 0..rng.between(20, 200) {
                let k = key(rng.below(KEYS));
                let e = version(&mut rng, base_ms, &mut serial);
                let mut batch = WriteBatch::new();
                add(&mut batch, &k, &e);
                db.write(batch, Durability::None).unwrap();
                offer(&mut model, k, e);
            }
            if rng.below(3) == 0 {
                db.flush().unwrap();
            }
            // A sorted run of keys from one stretch of the key space.
            let from = rng.below(KEYS);
            let to = (from + rng.between(1, KEYS / 2)).min(KEYS);
            let mut batch = WriteBatch::new();
            let mut offered = Vec::new();
            for n in from..to {
                if rng.below(3) == 0 {
                    continue;
                }
                let k = key(n);
                let e = version(&mut rng, base_ms, &mut serial);
                add(&mut batch, &k, &e);
                offered.push((k, e));
            }
            match db.ingest(&batch).unwrap() {
                Some(report) => {
                    installed += usize::from(report.tables > 0);
                    assert!(report.level >= 1 || offered.is_empty(), "{report:?}");
                }
                // No free level: the caller writes it instead.
                None => {
                    db.write(batch, Durability::Complete).unwrap();
                }
            }
            for (k, e) in offered {
                offer(&mut model, k, e);
            }
            check(&db, &model, &format!("seed {seed} round {round}"));
        }
        assert!(installed > 0, "seed {seed}: no ingest was installed");
        db.compact().unwrap();
        check(&db, &model, &format!("seed {seed} compacted"));
        db.close().unwrap();
        let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
        check(&db, &model, &format!("seed {seed} reopened"));
        db.close().unwrap();
    }
}

/// An ingest that returned is durable: a power cut right after it (every
/// other write unsynced) keeps all of its versions.
#[test]
fn an_ingest_survives_a_power_cut() {
    let fs = SimFs::new();
    let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
    let mut rng = Rng::new(9);
    let mut serial = 0;
    let mut model = Model::new();
    let mut batch = WriteBatch::new();
    for n in 0..300 {
        let (k, e) = (key(n), version(&mut rng, now_ms(), &mut serial));
        add(&mut batch, &k, &e);
        model.insert(k, e);
    }
    db.ingest(&batch)
        .unwrap()
        .expect("an empty tree has a free level");
    let image = fs.crash_image_with(CrashMode::random(3));
    drop(db);
    let db = Db::open(Path::new(DIR), options(&image)).unwrap();
    check(&db, &model, "after the power cut");
    db.close().unwrap();
}

/// Keys out of order (or repeated) are refused, and nothing is written.
#[test]
fn keys_out_of_order_are_refused() {
    let fs = SimFs::new();
    let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
    for keys in [&[b"b", b"a"][..], &[b"a", b"a"][..]] {
        let mut batch = WriteBatch::new();
        for (i, k) in keys.iter().enumerate() {
            batch.put(&k[..], b"v", 1000 + i as u64);
        }
        let e = db.ingest(&batch).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.stats().level_files.iter().sum::<usize>(), 0);
    db.close().unwrap();
}

/// The same key span ingested again and again goes one level up each
/// time (the deepest free level first); once every level from L1 down
/// holds a table over it, the next is declined and changes nothing.
#[test]
fn a_span_with_no_free_level_is_declined() {
    let fs = SimFs::new();
    let opts = Options {
        background_compaction: false,
        ..options(&fs)
    };
    let levels = opts.levels;
    let db = Db::open(Path::new(DIR), opts).unwrap();
    let batch_at = |ts: u64| {
        let mut batch = WriteBatch::new();
        batch.put(b"a", format!("{ts}").as_bytes(), ts);
        batch.put(b"m", format!("{ts}").as_bytes(), ts);
        batch
    };
    for (i, level) in (1..levels).rev().enumerate() {
        let ts = 1000 + i as u64;
        let report = db.ingest(&batch_at(ts)).unwrap().unwrap();
        assert_eq!(report.level, level);
        assert_eq!(
            db.get(b"m").unwrap(),
            Some(Entry::value(ts, format!("{ts}").into_bytes()))
        );
    }
    let before = db.stats().level_files;
    assert_eq!(db.ingest(&batch_at(5000)).unwrap(), None);
    assert_eq!(db.stats().level_files, before);
    assert_eq!(db.metrics().ingests_declined.get(), 1);
    let newest = 1000 + levels as u64 - 2;
    assert_eq!(
        db.get(b"a").unwrap(),
        Some(Entry::value(newest, format!("{newest}").into_bytes()))
    );
    db.close().unwrap();
}
