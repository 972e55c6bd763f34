//! `Db::purge` against a model (a `BTreeMap` of each key's newest
//! version): a purge of predicate P leaves exactly the model's keys P
//! keeps, with their newest versions, whether their versions were in the
//! memtable, level 0 or deeper levels; writes after it are kept and no
//! older version comes back; a reopen sees the same; and a purge cut
//! short by a failed write, then a power cut, leaves the old state or the
//! new one, and a purge run again leaves the new one.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::compaction::purge::{KeepKey, PurgeReport};
use ataman_engine::fs::sim::{CrashMode, Fault, FaultKind, FaultOp, SimFs};
use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Entry, Options};
use ataman_testkit::rng::Rng;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/db";
const KEYS: u64 = 200;
/// Distinct timestamps: the newest version of a key is never a tie.
const TS_SLOTS: u64 = 1 << 12;

type Model = BTreeMap<Vec<u8>, Entry>;

fn options(fs: &SimFs, background: bool) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        memtable_bytes_max: 16 * 1024,
        sst_target_bytes: 8 * 1024,
        l0_compaction_trigger: 2,
        l1_bytes_max: 32 * 1024,
        block_bytes: 512,
        background_compaction: background,
        ..Options::default()
    }
}

fn key(k: u64) -> Vec<u8> {
    format!("key/{k:04}").into_bytes()
}

/// P: keeps keys whose number is not a multiple of 3 (a third purged).
fn keep(k: &[u8]) -> bool {
    let n: u64 = std::str::from_utf8(&k[4..]).unwrap().parse().unwrap();
    !n.is_multiple_of(3)
}

fn keep_fn() -> Arc<KeepKey> {
    Arc::new(keep)
}

/// Writes `count` random puts and deletes (timestamps out of order, all
/// distinct) to `db` and `model`.
fn write_some(
    db: &Db,
    model: &mut Model,
    rng: &mut Rng,
    base_ms: u64,
    count: u64,
    serial: &mut u64,
) {
    for _ in 0..count {
        *serial += 1;
        let k = key(rng.below(KEYS));
        let ts = timestamp_from_millis(base_ms + rng.below(TS_SLOTS), 0) + *serial;
        let entry = if rng.below(5) == 0 {
            db.delete(&k, ts, Durability::None).unwrap();
            Entry::tombstone(ts)
        } else {
            let mut value = format!("{ts}").into_bytes();
            value.resize(20 + rng.below(200) as usize, b'v');
            db.put(&k, &value, ts, Durability::None).unwrap();
            Entry::value(ts, value)
        };
        let slot = model.entry(k).or_insert_with(|| entry.clone());
        if entry.ts > slot.ts {
            *slot = entry;
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
    let missing: Vec<_> = model.keys().filter(|k| !got.contains_key(*k)).collect();
    let extra: Vec<_> = got.keys().filter(|k| !model.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{label}: missing {missing:?}, extra {extra:?}"
    );
    for (k, want) in model {
        assert_eq!(got.get(k), Some(want), "{label}: {k:?}");
        assert_eq!(
            db.get(k).unwrap().as_ref(),
            Some(want),
            "{label}: get {k:?}"
        );
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn kept(model: &Model) -> Model {
    model
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, e)| (k.clone(), e.clone()))
        .collect()
}

/// Fills a tree with versions in the deepest level, two level-0 tables
/// and the memtable, every key overwritten across them (with background
/// compaction on, level 0 may be compacted meanwhile).
fn fill(
    db: &Db,
    model: &mut Model,
    rng: &mut Rng,
    base_ms: u64,
    serial: &mut u64,
    background: bool,
) {
    write_some(db, model, rng, base_ms, 600, serial);
    db.compact().unwrap();
    for _ in 0..2 {
        write_some(db, model, rng, base_ms, 150, serial);
        db.flush().unwrap();
    }
    write_some(db, model, rng, base_ms, 100, serial);
    if background {
        return;
    }
    let stats = db.stats();
    assert!(stats.level_files[0] >= 2, "{:?}", stats.level_files);
    assert!(stats.level_files[1..].iter().sum::<usize>() >= 1);
    assert!(stats.memtable_entries > 0);
}

#[test]
fn purge_leaves_exactly_the_kept_keys_of_the_model() {
    for seed in 0..8u64 {
        let fs = SimFs::new();
        let background = seed % 2 == 0;
        let db = Db::open(Path::new(DIR), options(&fs, background)).unwrap();
        let mut rng = Rng::new(seed);
        let (mut model, mut serial, base_ms) = (Model::new(), 0, now_ms());
        fill(&db, &mut model, &mut rng, base_ms, &mut serial, background);
        let before = model.len();
        let report = db.purge(keep_fn()).unwrap();
        model = kept(&model);
        let label = format!("seed {seed}");
        check(&db, &model, &label);
        // A key counts once per merge that dropped its versions (a purge
        // rewrites the tree a table at a time): at least once each.
        assert!(
            report.keys_dropped as usize >= before - model.len(),
            "{label}: {report:?}, {} keys rejected",
            before - model.len()
        );
        assert!(
            report.bytes_dropped > 0 && report.tables_read > 0,
            "{report:?}"
        );
        // Nothing is left to drop.
        assert_eq!(db.purge(keep_fn()).unwrap().keys_dropped, 0, "{label}");
        // No tombstone was stamped and no older version survived: a
        // purged key written again at an old timestamp reads as written.
        let purged = key(3);
        let old_ts = timestamp_from_millis(base_ms - 1, 0);
        db.put(&purged, b"again", old_ts, Durability::None).unwrap();
        model.insert(purged.clone(), Entry::value(old_ts, b"again".to_vec()));
        write_some(
            &db,
            &mut model,
            &mut rng,
            base_ms + TS_SLOTS,
            50,
            &mut serial,
        );
        check(&db, &model, &format!("{label} after writes"));
        db.close().unwrap();
        let db = Db::open(Path::new(DIR), options(&fs, true)).unwrap();
        check(&db, &model, &format!("{label} after reopen"));
        db.compact().unwrap();
        check(&db, &model, &format!("{label} after compaction"));
        db.close().unwrap();
    }
}

/// Negative control for the model check: without the purge the rejected
/// keys are there (so the check above can fail).
#[test]
fn without_a_purge_the_rejected_keys_remain() {
    let fs = SimFs::new();
    let db = Db::open(Path::new(DIR), options(&fs, false)).unwrap();
    let mut rng = Rng::new(99);
    let (mut model, mut serial) = (Model::new(), 0);
    fill(&db, &mut model, &mut rng, now_ms(), &mut serial, false);
    assert!(kept(&model).len() < model.len());
    check(&db, &model, "unpurged");
    db.close().unwrap();
}

/// Where a purge cut short left a store.
#[derive(Debug, PartialEq)]
enum Left {
    /// The state before the purge.
    Old,
    /// Some merges installed: some rejected keys gone, the rest as before.
    Between,
    /// The state after it.
    New,
}

/// Opens `image` and says where it stands between `old` and `new`: every
/// key of `new` holds exactly its entry, and any other key it holds (a
/// rejected one the purge has not dropped yet) one of its versions before
/// the purge: `old`'s or an older one (a purge drops a key's versions
/// table by table, so one lying in a table not merged yet may show).
fn left_by_purge(image: &SimFs, old: &Model, new: &Model, label: &str) -> Left {
    let db = Db::open(Path::new(DIR), options(image, false))
        .unwrap_or_else(|e| panic!("{label}: does not open: {e}"));
    let got: Model = db
        .scan(b"", None, true)
        .unwrap()
        .map(|item| item.unwrap())
        .collect();
    db.close().unwrap();
    for (k, entry) in new {
        assert_eq!(got.get(k), Some(entry), "{label}: kept key {k:?} changed");
    }
    for (k, entry) in &got {
        let before = old
            .get(k)
            .unwrap_or_else(|| panic!("{label}: key {k:?} was never written"));
        assert!(
            entry.ts <= before.ts,
            "{label}: key {k:?} reads newer than before the purge"
        );
    }
    if got == *new {
        Left::New
    } else if got == *old {
        Left::Old
    } else {
        Left::Between
    }
}

/// A purge failing at its n-th write or sync, for every n until one
/// completes, then a power cut: the image holds the old state, the new
/// one, or one between (each merge of the purge is installed on its
/// own: some rejected keys gone, every other key exactly as before), and
/// a purge run on it again gives the new one.
#[test]
fn a_purge_cut_short_leaves_the_old_state_the_new_or_one_between() {
    let fs = SimFs::new();
    let db = Db::open(Path::new(DIR), options(&fs, false)).unwrap();
    let mut rng = Rng::new(7);
    let (mut model, mut serial) = (Model::new(), 0);
    fill(&db, &mut model, &mut rng, now_ms(), &mut serial, false);
    db.flush().unwrap();
    db.close().unwrap();
    let base = fs.crash_image_with(CrashMode::durable_only());
    let new = kept(&model);
    let mut saw = Vec::new();
    let mut completed = None;
    for nth in 1..=400u64 {
        let image = base.crash_image_with(CrashMode::durable_only());
        let db = Db::open(Path::new(DIR), options(&image, false)).unwrap();
        image.inject(Fault::new(FaultOp::WriteOrSync, nth, FaultKind::Io));
        let outcome: Result<PurgeReport, _> = db.purge(keep_fn());
        let fired = image.faults_armed() == 0;
        drop(db);
        image.clear_faults();
        let label = format!("fault at write or sync {nth}");
        let cut = image.crash_image_with(CrashMode::random(nth));
        let left = left_by_purge(&cut, &model, &new, &label);
        if !saw.contains(&left) {
            saw.push(left);
        }
        let db = Db::open(Path::new(DIR), options(&cut, false)).unwrap();
        db.purge(keep_fn()).unwrap();
        check(&db, &new, &format!("{label}, purged again"));
        db.close().unwrap();
        if !fired {
            outcome.unwrap();
            completed = Some(nth);
            break;
        }
        assert!(
            outcome.is_err(),
            "{label}: the purge did not report the failure"
        );
    }
    assert!(completed.is_some(), "no purge completed within the bound");
    for state in [Left::Old, Left::Between, Left::New] {
        assert!(saw.contains(&state), "no cut left {state:?}: {saw:?}");
    }
}

/// One write of the concurrent writer: its key, timestamp, and the
/// event numbers taken just before and just after it.
struct Timed {
    key: Vec<u8>,
    ts: u64,
    started: u64,
    ended: u64,
}

/// Writes racing a purge: a write ended before the purge began is gone
/// (its key rejected), one started after the purge returned is kept, one
/// in between either (but nothing older than the purge's start survives).
#[test]
fn writes_during_a_purge_are_kept_and_earlier_ones_dropped() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let fs = SimFs::new();
    let db = Arc::new(Db::open(Path::new(DIR), options(&fs, true)).unwrap());
    let mut rng = Rng::new(11);
    let (mut model, mut serial, base_ms) = (Model::new(), 0, now_ms());
    fill(&db, &mut model, &mut rng, base_ms, &mut serial, true);
    let events = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, events, stop) = (Arc::clone(&db), Arc::clone(&events), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut done = Vec::new();
            // Half the rejected keys only, timestamps above everything filled.
            let mut ts = timestamp_from_millis(base_ms + 2 * TS_SLOTS, 0);
            for n in 0..100_000u64 {
                if stop.load(Ordering::Acquire) && n % 50 == 0 {
                    break;
                }
                let key = key(3 * (n % (KEYS / 6)));
                ts += 1;
                let started = events.fetch_add(1, Ordering::SeqCst);
                db.put(&key, b"late", ts, Durability::None).unwrap();
                let ended = events.fetch_add(1, Ordering::SeqCst);
                done.push(Timed {
                    key,
                    ts,
                    started,
                    ended,
                });
            }
            done
        })
    };
    // Let some writes in first.
    while events.load(Ordering::SeqCst) < 200 {
        std::thread::yield_now();
    }
    let purge_began = events.fetch_add(1, Ordering::SeqCst);
    db.purge(keep_fn()).unwrap();
    let purge_ended = events.fetch_add(1, Ordering::SeqCst);
    while events.load(Ordering::SeqCst) < purge_ended + 200 {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Release);
    let done = writer.join().unwrap();
    let mut last: BTreeMap<Vec<u8>, &Timed> = BTreeMap::new();
    for w in &done {
        last.insert(w.key.clone(), w);
    }
    let mut kept_after = 0;
    for (k, w) in &last {
        let got = db.get(k).unwrap();
        if w.started > purge_ended {
            assert_eq!(got, Some(Entry::value(w.ts, b"late".to_vec())), "{k:?}");
            kept_after += 1;
        } else if w.ended < purge_began {
            assert_eq!(got, None, "{k:?} written before the purge survived");
        } else if let Some(e) = got {
            let from = done.iter().find(|x| x.key == *k && x.ts == e.ts);
            assert!(
                from.is_some_and(|x| x.ended > purge_began),
                "{k:?}: {e:?} is not a write that overlapped the purge"
            );
        }
    }
    // Keys the writer never wrote are the model's, purged.
    for (k, e) in &model {
        if !last.contains_key(k) {
            let want = keep(k).then(|| e.clone());
            assert_eq!(db.get(k).unwrap(), want, "{k:?}");
        }
    }
    assert!(kept_after > 0, "no write after the purge to check");
}

/// A purge paced too slowly to end (1 byte/s) hurries while level 0
/// holds twice its compaction trigger (compactions wait for the purge):
/// it ends, and leaves exactly the kept keys.
#[test]
fn a_paced_purge_hurries_while_level_0_is_full() {
    let fs = SimFs::new();
    let opts = Options {
        memtable_bytes_max: 1024 * 1024,
        l0_stop_writes: 1000,
        ..options(&fs, false)
    };
    let full = 2 * opts.l0_compaction_trigger;
    let db = Arc::new(Db::open(Path::new(DIR), opts).unwrap());
    let mut model = Model::new();
    let base = timestamp_from_millis(now_ms(), 0);
    // More than a pace step (1 MiB) in `full` level-0 tables.
    for round in 0..full as u64 {
        for k in 0..KEYS {
            let ts = base + round * KEYS + k;
            let value = vec![b'a' + round as u8; 2048];
            db.put(&key(k), &value, ts, Durability::None).unwrap();
            model.insert(key(k), Entry::value(ts, value));
        }
        db.flush().unwrap();
    }
    assert!(
        db.stats().level_files[0] >= full,
        "{:?}",
        db.stats().level_files
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let purging = Arc::clone(&db);
    std::thread::spawn(move || {
        let _ = tx.send(purging.purge_paced(keep_fn(), 1));
    });
    let report = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the paced purge did not hurry")
        .unwrap();
    assert!(report.keys_dropped > 0);
    check(&db, &kept(&model), "after a hurried purge");
}
