//! Flushes and compactions run on separate threads: a compaction that is
//! held up (here: its output file cannot be created until a gate opens)
//! does not hold up flushes, so writers keep going; and the compaction
//! thread runs at `Options::compaction_nice`, the flush thread does not.
//! Obsolete tables are removed by the reap thread, not by the reader that
//! drops them last.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::fs::{DirLock, FileSystem, OsFs, ReadableFile, WritableFile};
use ataman_engine::key::timestamp_from_millis;
use ataman_engine::{Db, Durability, Entry, Options, WalMode};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The local file system, except that the compaction thread waits, before
/// creating a table, until the gate opens (and says it is waiting); it
/// records which thread removed which file.
#[derive(Default)]
struct GatedFs {
    /// (gate open, a compaction waiting at it)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
    /// (thread name, file name) of every removal.
    removals: Mutex<Vec<(String, String)>>,
}

impl GatedFs {
    fn open_gate(&self) {
        self.state.lock().unwrap().0 = true;
        self.changed.notify_all();
    }

    /// Waits (bounded) until a compaction waits at the gate.
    fn wait_for_a_waiting_compaction(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut state = self.state.lock().unwrap();
        while !state.1 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.changed.wait_timeout(state, left).unwrap().0;
        }
        true
    }

    fn compaction_waiting(&self) -> bool {
        self.state.lock().unwrap().1
    }
}

/// Opens the gate when dropped: a failing test unwinds past the database
/// (whose threads it joins) without leaving its compaction waiting.
struct OpenOnDrop(Arc<GatedFs>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open_gate();
    }
}

impl FileSystem for GatedFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        OsFs.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let compacting = std::thread::current().name() == Some("ataman-compact");
        if compacting && path.extension().is_some_and(|e| e == "sst") {
            let mut state = self.state.lock().unwrap();
            if !state.0 {
                state.1 = true;
                self.changed.notify_all();
            }
            while !state.0 {
                state = self.changed.wait(state).unwrap();
            }
            state.1 = false;
        }
        OsFs.create(path)
    }
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        OsFs.open_append(path)
    }
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadableFile>> {
        OsFs.open_read(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        OsFs.list_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFs.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        self.removals.lock().unwrap().push((thread, name));
        OsFs.remove_file(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        OsFs.truncate(path, len)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        OsFs.sync_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        OsFs.exists(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        OsFs.lock(path)
    }
}

/// 64 KiB memtables, a compaction from two L0 tables, no L0 stop, a 20 s
/// stall bound, on `fs`.
fn gated_options(fs: &Arc<GatedFs>) -> Options {
    Options {
        fs: fs.clone(),
        wal_mode: WalMode::None,
        memtable_bytes_max: 64 * 1024,
        l0_compaction_trigger: 2,
        l0_stop_writes: 1000,
        write_stall_timeout: Duration::from_secs(20),
        ..Options::default()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Writes `n` keys from `first` (64 KiB memtables: about 60 keys of 1 KiB each).
fn write(db: &Db, model: &mut BTreeMap<Vec<u8>, Entry>, first: u64, n: u64, base: u64) {
    for i in first..first + n {
        let key = format!("k{:06}", i % 500).into_bytes();
        let value = vec![(i % 251) as u8; 1024];
        let ts = base + i;
        db.put(&key, &value, ts, Durability::None).unwrap();
        model.insert(key, Entry::value(ts, value));
    }
}

/// A compaction stuck on its output while writers fill ten more
/// memtables: every write succeeds and is flushed to L0 meanwhile (with
/// flushes on the compaction's thread, the writer would stall behind
/// the two immutable memtables and be refused after the stall timeout).
/// Once the gate opens, the tree compacts and holds the model.
#[test]
fn a_held_up_compaction_does_not_hold_up_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(GatedFs::default());
    let opts = gated_options(&fs);
    let db = Db::open(dir.path(), opts).unwrap();
    let _gate = OpenOnDrop(Arc::clone(&fs));
    let base = timestamp_from_millis(now_ms(), 0);
    let mut model = BTreeMap::new();
    // Three memtables: two L0 tables start a compaction, which waits.
    write(&db, &mut model, 0, 200, base);
    db.flush().unwrap();
    assert!(
        fs.wait_for_a_waiting_compaction(Duration::from_secs(20)),
        "no compaction started: {:?}",
        db.stats().level_files
    );
    let l0_before = db.stats().level_files[0];
    write(&db, &mut model, 200, 700, base);
    db.flush().unwrap();
    let stats = db.stats();
    assert!(
        fs.compaction_waiting(),
        "the compaction finished while its gate was closed"
    );
    assert!(
        stats.level_files[0] >= l0_before + 10,
        "flushes waited for the compaction: L0 {} tables before, {} after",
        l0_before,
        stats.level_files[0]
    );
    assert_eq!(stats.immutable_memtables, 0);
    fs.open_gate();
    db.compact().unwrap();
    let after = db.stats();
    assert_eq!(after.level_files[0], 0, "{:?}", after.level_files);
    for (key, entry) in &model {
        assert_eq!(db.get(key).unwrap().as_ref(), Some(entry), "{key:?}");
    }
    db.close().unwrap();
}

/// The compaction thread is nicer than the process by
/// `compaction_nice`; the flush thread is not.
#[cfg(target_os = "linux")]
#[test]
fn the_compaction_thread_runs_nicer() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        wal_mode: WalMode::None,
        compaction_nice: 6,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    // Every thread of that name in the process: the other tests of this
    // binary run their own engines (at `compaction_nice` 0) beside this one.
    let nices_of = |name: &str| -> Vec<i64> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|task| task.unwrap().path())
            .filter(|task| {
                std::fs::read_to_string(task.join("comm")).is_ok_and(|c| c.trim() == name)
            })
            .filter_map(|task| nice_in(&task.join("stat")))
            .collect()
    };
    let base = nice_in(Path::new("/proc/thread-self/stat")).unwrap();
    let lowered = (base + 6).min(19);
    // The thread lowers itself as it starts: wait (bounded) for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !nices_of("ataman-compact").contains(&lowered) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        nices_of("ataman-compact").contains(&lowered),
        "{:?}",
        nices_of("ataman-compact")
    );
    // A listing of /proc/self/task can skip a live thread while another
    // test's threads exit (procfs walks the tasks by position): read again
    // (bounded) until it finds the flush threads.
    let mut flush = nices_of("ataman-flush");
    while flush.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        flush = nices_of("ataman-flush");
    }
    assert!(
        !flush.is_empty() && flush.iter().all(|&n| n == base),
        "{flush:?}"
    );
    db.close().unwrap();
}

/// The nice value in a `/proc/.../stat` file: field 19, the 17th after
/// the command's closing parenthesis.
#[cfg(target_os = "linux")]
fn nice_in(stat: &Path) -> Option<i64> {
    let stat = std::fs::read_to_string(stat).ok()?;
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split(' ').nth(16)?.parse().ok()
}

/// An ingest never lands where a running merge writes: with L2 and
/// deeper taken over a key span (earlier ingests) and a compaction of
/// L0 into L1 over the same span held at its output, the only level
/// free in the tree (L1) is the merge's, so the ingest is declined; once
/// the merge is installed, reads see every version.
#[test]
fn an_ingest_avoids_the_level_a_merge_writes() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(GatedFs::default());
    let opts = gated_options(&fs);
    let levels = opts.levels;
    let db = Db::open(dir.path(), opts).unwrap();
    let _gate = OpenOnDrop(Arc::clone(&fs));
    let base = timestamp_from_millis(now_ms(), 0);
    let mut model = BTreeMap::new();
    let span_batch = |ts: u64| {
        let mut batch = ataman_engine::WriteBatch::new();
        for k in [b"k000000", b"k000499"] {
            batch.put(k, b"ingested", ts);
        }
        batch
    };
    for level in (2..levels).rev() {
        let report = db.ingest(&span_batch(base)).unwrap().unwrap();
        assert_eq!(report.level, level);
    }
    for k in [b"k000000", b"k000499"] {
        model.insert(k.to_vec(), Entry::value(base, b"ingested".to_vec()));
    }
    // Two L0 tables over the span: a compaction into L1 starts, and waits.
    write(&db, &mut model, 1, 200, base);
    db.flush().unwrap();
    assert!(
        fs.wait_for_a_waiting_compaction(Duration::from_secs(20)),
        "no compaction started: {:?}",
        db.stats().level_files
    );
    assert_eq!(db.stats().level_files[1], 0);
    assert_eq!(db.ingest(&span_batch(base + 10_000)).unwrap(), None);
    fs.open_gate();
    db.compact().unwrap();
    for (key, entry) in &model {
        assert_eq!(db.get(key).unwrap().as_ref(), Some(entry), "{key:?}");
    }
    db.close().unwrap();
}

/// A reader's view holds the tables a compaction replaced; when the reader
/// drops it (the last holder, on the test's thread), their files are
/// removed by the engine's reap thread: a reader never pays for an unlink.
/// Every other table removal is the reap thread's too, and every write
/// reads back. (Negative control: tables marked obsolete without the reap
/// thread are removed by the test's thread.)
#[test]
fn obsolete_tables_are_removed_by_the_reap_thread() {
    let fs = Arc::new(GatedFs::default());
    fs.open_gate();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), gated_options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    write(&db, &mut model, 0, 400, now_ms());
    db.flush().unwrap();
    let view = db.scan(b"", None, false).unwrap();
    db.compact().unwrap();
    let tables = |fs: &GatedFs| {
        fs.removals
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, name)| name.ends_with(".sst"))
            .cloned()
            .collect::<Vec<_>>()
    };
    let before = tables(&fs).len();
    drop(view);
    let deadline = Instant::now() + Duration::from_secs(30);
    while tables(&fs).len() == before {
        assert!(
            Instant::now() < deadline,
            "the view's tables were never removed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let removed = tables(&fs);
    let elsewhere: Vec<_> = removed
        .iter()
        .filter(|(thread, _)| thread != "ataman-reap")
        .collect();
    assert!(
        elsewhere.is_empty(),
        "tables removed off the reap thread: {elsewhere:?}"
    );
    for (key, entry) in &model {
        assert_eq!(db.get(key).unwrap().as_ref(), Some(entry));
    }
    db.close().unwrap();
}
