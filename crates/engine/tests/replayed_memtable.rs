//! An open keeps the WAL tail it replays in memory as immutable memtables
//! and returns before writing them to L0. These tests check that nothing
//! is lost by it: reads and scans see the replayed entries with newer
//! writes on top, a crash at any point before the background flush is
//! installed loses nothing, the open makes the kept segments durable, and
//! a replay larger than the immutable-memtable budget writes only the
//! excess at open.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::batch::encode_payload;
use ataman_engine::fs::FileSystem;
use ataman_engine::fs::sim::{
    CrashMode, Fault, FaultKind, FaultOp, NamespaceMode, SimFs, TailMode,
};
use ataman_engine::key::timestamp_from_millis;
use ataman_engine::wal::record::encode_record;
use ataman_engine::wal::segment::{parse_segment_file_name, segment_file_name};
use ataman_engine::{Db, Durability, Options, WalMode, WriteBatch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};

const DIR: &str = "/db";

/// Keys the crashed node wrote.
const KEYS: u64 = 2000;

/// Newest version of each key: timestamp and value (`None`: deleted).
type Model = BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)>;

/// A hybrid-logical-clock timestamp of now: tombstones written at
/// `NOW + offset` are inside their grace period, so compaction keeps them.
static NOW: LazyLock<u64> = LazyLock::new(|| {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    timestamp_from_millis(ms, 0)
});

fn options(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        wal_mode: WalMode::Fsync,
        memtable_bytes_max: 4 * 1024 * 1024,
        block_bytes: 512,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u64, ts: u64) -> Vec<u8> {
    let mut v = format!("v{i}@{ts}").into_bytes();
    v.resize(v.len() + (i % 150) as usize, b'.');
    v
}

/// Records a write in the model: the newest timestamp wins.
fn apply(model: &mut Model, key: Vec<u8>, ts: u64, value: Option<Vec<u8>>) {
    let slot = model.entry(key).or_insert((0, None));
    if ts > slot.0 {
        *slot = (ts, value);
    }
}

/// Writes `KEYS` keys in batches of 10, then deletes every ninth, all
/// acknowledged and nothing flushed; returns the model of what was written.
fn write_unflushed(db: &Db) -> Model {
    let mut model = Model::new();
    for start in (0..KEYS).step_by(10) {
        let mut b = WriteBatch::new();
        for i in start..start + 10 {
            let ts = *NOW + 1000 + i;
            b.put(&key(i), &value(i, ts), ts);
            apply(&mut model, key(i), ts, Some(value(i, ts)));
        }
        db.write(b, Durability::Complete).unwrap();
    }
    for i in (0..KEYS).step_by(9) {
        let ts = *NOW + 100_000 + i;
        db.delete(&key(i), ts, Durability::Complete).unwrap();
        apply(&mut model, key(i), ts, None);
    }
    let stats = db.stats();
    assert_eq!(
        stats.level_files.iter().sum::<usize>(),
        0,
        "the fill flushed"
    );
    model
}

/// A node that wrote `KEYS` keys (WAL fsync) and lost power: the durable
/// image of its disk, and what it acknowledged.
fn crashed_node() -> (SimFs, Model) {
    let fs = SimFs::new();
    let db = Db::open(Path::new(DIR), options(&fs)).unwrap();
    let model = write_unflushed(&db);
    let image = fs.crash_image_with(CrashMode::durable_only());
    drop(db);
    (image, model)
}

/// Panics at the first difference between two sequences (not printing them whole).
fn assert_same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!("{what}: item {i} is {:?}, expected {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: length");
}

/// Every key of the model reads as the model says, and a full scan (with
/// and without tombstones) and a ranged scan yield exactly the model.
fn check(db: &Db, model: &Model, label: &str) {
    for (k, (ts, v)) in model {
        let got = db
            .get(k)
            .unwrap()
            .unwrap_or_else(|| panic!("{label}: {} lost", String::from_utf8_lossy(k)));
        assert_eq!((got.ts, &got.value), (*ts, v), "{label}: {k:?}");
    }
    let scan = |start: &[u8], end: Option<&[u8]>, tombstones: bool| -> Vec<(Vec<u8>, u64, bool)> {
        db.scan(start, end, tombstones)
            .unwrap()
            .map(|r| r.unwrap())
            .map(|(k, e)| (k, e.ts, e.value.is_some()))
            .collect()
    };
    let want = |range: (std::ops::Bound<&[u8]>, std::ops::Bound<&[u8]>), tombstones: bool| {
        model
            .range::<[u8], _>(range)
            .filter(|(_, (_, v))| tombstones || v.is_some())
            .map(|(k, (ts, v))| (k.clone(), *ts, v.is_some()))
            .collect::<Vec<_>>()
    };
    use std::ops::Bound::{Excluded, Included, Unbounded};
    for tombstones in [true, false] {
        assert_same(
            &scan(b"", None, tombstones),
            &want((Unbounded, Unbounded), tombstones),
            &format!("{label}: full scan, tombstones {tombstones}"),
        );
    }
    let (lo, hi) = (key(300), key(700));
    for tombstones in [true, false] {
        assert_same(
            &scan(&lo, Some(&hi), tombstones),
            &want((Included(&lo[..]), Excluded(&hi[..])), tombstones),
            &format!("{label}: ranged scan, tombstones {tombstones}"),
        );
    }
}

fn every_crash_mode() -> Vec<CrashMode> {
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
    let mut modes = Vec::new();
    for (i, &tail) in tails.iter().enumerate() {
        for (j, &namespace) in spaces.iter().enumerate() {
            modes.push(CrashMode {
                tail,
                namespace,
                seed: (i * 10 + j) as u64,
            });
        }
    }
    modes
}

/// Reopens `image` and checks it holds the model.
fn reopen_and_check(image: &SimFs, model: &Model, label: &str) {
    let db = Db::open(Path::new(DIR), options(image))
        .unwrap_or_else(|e| panic!("{label}: image does not open: {e}"));
    check(&db, model, label);
    db.close().unwrap();
}

/// Right after an open that kept the replayed tail in memory, reads and
/// scans see it, and newer writes (puts, deletes, new keys) win over it
/// while a late write with an older timestamp does not; the same holds
/// after the flush and after a reopen.
#[test]
fn reads_see_replayed_tail_and_newer_writes_on_top() {
    let (image, mut model) = crashed_node();
    let db = Db::open(Path::new(DIR), options(&image)).unwrap();
    let report = db.recovery_report().clone();
    assert_eq!(report.replay.entries, KEYS + KEYS.div_ceil(9));
    assert_eq!(
        (report.runs_kept, report.tables_flushed),
        (1, 0),
        "{report:?}"
    );
    check(&db, &model, "right after open");
    for i in (0..KEYS).step_by(3) {
        let ts = *NOW + 200_000 + i;
        db.put(&key(i), &value(i, ts), ts, Durability::Complete)
            .unwrap();
        apply(&mut model, key(i), ts, Some(value(i, ts)));
    }
    for i in (1..KEYS).step_by(5) {
        let ts = *NOW + 250_000 + i;
        db.delete(&key(i), ts, Durability::Complete).unwrap();
        apply(&mut model, key(i), ts, None);
    }
    for i in (2..KEYS).step_by(7) {
        // Late: older than the replayed version, so it must not show.
        db.put(&key(i), b"late", *NOW + 5, Durability::Complete)
            .unwrap();
        apply(&mut model, key(i), *NOW + 5, Some(b"late".to_vec()));
    }
    for i in 0..100 {
        let k = format!("new{i:03}").into_bytes();
        let ts = *NOW + 300_000 + i;
        db.put(&k, b"n", ts, Durability::Complete).unwrap();
        apply(&mut model, k, ts, Some(b"n".to_vec()));
    }
    check(&db, &model, "newer writes on top");
    db.flush().unwrap();
    assert_eq!(db.stats().immutable_memtables, 0);
    check(&db, &model, "after the flush");
    db.close().unwrap();
    let db = Db::open(Path::new(DIR), options(&image)).unwrap();
    assert_eq!(db.recovery_report().replay.entries, 0);
    check(&db, &model, "after a clean reopen");
}

/// A crash while the replayed run is still only in memory (its background
/// flush cannot finish: the first SSTable write fails) loses nothing, in
/// every crash mode: the reopen replays the same segments again.
#[test]
fn crash_before_replayed_run_is_flushed_loses_nothing() {
    let (image, model) = crashed_node();
    image.inject(Fault::new(FaultOp::Write, 1, FaultKind::NoSpace).on_paths_containing(".sst"));
    let db = Db::open(Path::new(DIR), options(&image)).unwrap();
    assert_eq!(db.recovery_report().runs_kept, 1);
    check(&db, &model, "open with the flush held");
    for mode in every_crash_mode() {
        let crashed = image.crash_image_with(mode);
        let label = format!("crash before flush, {mode:?}");
        let reopened = Db::open(Path::new(DIR), options(&crashed)).unwrap();
        assert_eq!(
            reopened.recovery_report().replay.entries,
            KEYS + KEYS.div_ceil(9),
            "{label}: the segments must be replayed again"
        );
        check(&reopened, &model, &label);
        reopened.close().unwrap();
    }
    drop(db);
}

/// Crash images taken while the background flush of the replayed run runs
/// (before, during and after its install), each reopened and checked.
#[test]
fn crash_during_background_flush_loses_nothing() {
    let (image, model) = crashed_node();
    let db = Db::open(Path::new(DIR), options(&image)).unwrap();
    let modes = every_crash_mode();
    let mut before_install = 0;
    let mut after_install = 0;
    for (n, &mode) in modes.iter().cycle().take(60).enumerate() {
        let crashed = image.crash_image_with(mode);
        // Read after the image: still pending means the image predates the install.
        if db.stats().immutable_memtables > 0 {
            before_install += 1;
        } else {
            after_install += 1;
        }
        reopen_and_check(&crashed, &model, &format!("image {n}, {mode:?}"));
        if after_install >= 3 {
            break;
        }
    }
    db.flush().unwrap();
    reopen_and_check(
        &image.crash_image_with(CrashMode::durable_only()),
        &model,
        "after the flush",
    );
    assert!(before_install + after_install > 0);
    drop(db);
}

/// A previous process wrote with WAL mode `write` (nothing synced) and was
/// killed; the next open, in mode `fsync`, replays that tail from the page
/// cache and keeps it in memory. It must sync those segments before
/// returning: a power cut before the background flush (held here by a
/// failing SSTable write) must not take back what the open served.
#[test]
fn open_syncs_segments_of_kept_runs() {
    let fs = SimFs::new();
    let write_mode = Options {
        wal_mode: WalMode::Write,
        ..options(&fs)
    };
    let db = Db::open(Path::new(DIR), write_mode).unwrap();
    let model = write_unflushed(&db);
    let killed = fs.process_crash_image();
    drop(db);
    killed.inject(Fault::new(FaultOp::Write, 1, FaultKind::NoSpace).on_paths_containing(".sst"));
    let db = Db::open(Path::new(DIR), options(&killed)).unwrap();
    assert_eq!(db.recovery_report().runs_kept, 1);
    check(&db, &model, "open after kill -9");
    let power_cut = killed.crash_image_with(CrashMode::durable_only());
    drop(db);
    reopen_and_check(&power_cut, &model, "power cut after the open");
}

/// A replay of about seven memtables' worth with a budget of two immutable
/// memtables writes the oldest runs to L0 at open and keeps the two newest
/// in memory. A crash before the kept runs are flushed (held by failing
/// the first SSTable sync after the open's own) loses nothing: the segment
/// the oldest kept run starts in is kept although a written table also
/// holds part of it, and compaction over the duplicates the re-replay
/// leaves is correct.
#[test]
fn replay_over_budget_writes_only_the_excess() {
    let (image, model) = crashed_node();
    let small = |fs: &SimFs| Options {
        memtable_bytes_max: 64 * 1024,
        immutable_memtables_max: 2,
        ..options(fs)
    };
    // A dry run on a copy counts the tables the open writes (one sync each).
    let copy = image.crash_image_with(CrashMode::durable_only());
    let dry = Db::open(Path::new(DIR), small(&copy)).unwrap();
    let written = dry.recovery_report().tables_flushed as u64;
    drop(dry);
    image.inject(Fault::new(FaultOp::Sync, written + 1, FaultKind::Io).on_paths_containing(".sst"));
    let db = Db::open(Path::new(DIR), small(&image)).unwrap();
    let report = db.recovery_report().clone();
    assert_eq!(report.tables_flushed as u64, written);
    assert_eq!(report.runs_kept, 2, "{report:?}");
    assert!(report.tables_flushed >= 3, "{report:?}");
    assert!(
        report.runs_kept_bytes <= 2 * (64 * 1024 + 10 * 1024),
        "{report:?}"
    );
    assert!(db.stats().immutable_memtables <= 2);
    check(&db, &model, "over budget");
    for mode in every_crash_mode() {
        let crashed = image.crash_image_with(mode);
        let label = format!("crash after an over-budget open, {mode:?}");
        let db = Db::open(Path::new(DIR), small(&crashed)).unwrap();
        check(&db, &model, &label);
        db.compact().unwrap();
        check(&db, &model, &format!("{label}, compacted"));
        db.close().unwrap();
    }
    drop(db);
}

/// Segments of a node that rotated twice and lost power before any flush:
/// an empty database's directory plus three WAL segments of `per_segment`
/// one-put records each, all synced. Returns the image and its model.
fn three_segments(per_segment: u64) -> (SimFs, Model) {
    let fs = SimFs::new();
    Db::open(Path::new(DIR), options(&fs))
        .unwrap()
        .close()
        .unwrap();
    let dir = Path::new(DIR);
    let first = fs
        .list_dir(dir)
        .unwrap()
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .max()
        .expect("the open made a segment");
    let mut model = Model::new();
    let mut seq = 1;
    for s in 0..3 {
        let path = dir.join(segment_file_name(first + s));
        let mut file = if s == 0 {
            fs.open_append(&path).unwrap()
        } else {
            fs.create(&path).unwrap()
        };
        let mut bytes = Vec::new();
        for _ in 0..per_segment {
            let i = seq;
            let ts = *NOW + i;
            let mut b = WriteBatch::new();
            b.put(&key(i), &value(i, ts), ts);
            let mut payload = Vec::new();
            encode_payload(&mut payload, seq, &b);
            encode_record(&mut bytes, &payload);
            apply(&mut model, key(i), ts, Some(value(i, ts)));
            seq += 1;
        }
        file.append(&bytes).unwrap();
        file.sync().unwrap();
    }
    fs.sync_dir(dir).unwrap();
    (fs, model)
}

/// Runs cut in the middle of segments: each kept run keeps the segment its
/// first entry came from (and every later one), so a crash before the
/// background flush, with the oldest runs already written at open and the
/// segments before the oldest kept run removed, loses nothing.
#[test]
fn runs_across_segments_keep_their_first_segment() {
    let (image, model) = three_segments(400);
    let small = |fs: &SimFs| Options {
        // A segment is about 80 KiB here: runs end in the middle of segments.
        memtable_bytes_max: 96 * 1024,
        immutable_memtables_max: 2,
        ..options(fs)
    };
    let copy = image.crash_image_with(CrashMode::durable_only());
    let dry = Db::open(Path::new(DIR), small(&copy)).unwrap();
    let written = dry.recovery_report().tables_flushed as u64;
    drop(dry);
    assert!(
        written >= 1,
        "the replay should write a run at open: {written}"
    );
    image.inject(Fault::new(FaultOp::Sync, written + 1, FaultKind::Io).on_paths_containing(".sst"));
    let db = Db::open(Path::new(DIR), small(&image)).unwrap();
    assert_eq!(db.recovery_report().runs_kept, 2);
    check(&db, &model, "runs across segments");
    let kept_segments = image
        .list_dir(Path::new(DIR))
        .unwrap()
        .iter()
        .filter(|n| parse_segment_file_name(n).is_some())
        .count();
    // The oldest kept run starts in the middle of the second segment: the
    // first is gone, the second and third stay, and the new one.
    assert_eq!(kept_segments, 3, "segments left");
    for mode in every_crash_mode() {
        let crashed = image.crash_image_with(mode);
        reopen_and_check(&crashed, &model, &format!("runs across segments, {mode:?}"));
    }
    drop(db);
}
