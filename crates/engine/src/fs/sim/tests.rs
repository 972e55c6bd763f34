//! Tests of the simulated file system itself.

use super::*;
use crate::fs::{FileSystem, WritableFile};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

const SEEDS: u64 = 300;

fn dir() -> &'static Path {
    Path::new("/db")
}

fn file(name: &str) -> PathBuf {
    dir().join(name)
}

fn fs_with_dir() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(dir()).unwrap();
    fs
}

fn read(fs: &SimFs, path: &Path) -> Option<Vec<u8>> {
    fs.exists(path)
        .then(|| crate::fs::read_all(fs, path).unwrap())
}

fn all_modes(seed: u64) -> Vec<CrashMode> {
    let tails = [
        TailMode::Drop,
        TailMode::Keep,
        TailMode::RandomPrefix,
        TailMode::TornSector,
        TailMode::TornPage,
        TailMode::Random,
    ];
    let spaces = [
        NamespaceMode::Durable,
        NamespaceMode::Live,
        NamespaceMode::RandomPrefix,
    ];
    let mut modes = Vec::new();
    for tail in tails {
        for namespace in spaces {
            modes.push(CrashMode {
                tail,
                namespace,
                seed,
            });
        }
    }
    modes
}

/// A durable file with a synced prefix of 5000 bytes and three unsynced appends
/// (ending at 6000, 9000 and 13000).
fn file_with_tail(fs: &SimFs) -> (PathBuf, Vec<u8>) {
    let path = file("000001.wal");
    let mut w = fs.create(&path).unwrap();
    let bytes: Vec<u8> = (0..13000u32).map(|i| (i % 251) as u8).collect();
    w.append(&bytes[..5000]).unwrap();
    w.sync().unwrap();
    fs.sync_dir(dir()).unwrap();
    for range in [5000..6000, 6000..9000, 9000..13000] {
        w.append(&bytes[range]).unwrap();
    }
    fs.check_invariants();
    (path, bytes)
}

/// Synced bytes of a dir-synced file survive every crash image, and what follows them
/// is a prefix of what was written.
#[test]
fn synced_data_survives_every_image() {
    let fs = fs_with_dir();
    let (path, bytes) = file_with_tail(&fs);
    for seed in 0..SEEDS {
        for mode in all_modes(seed).into_iter().chain([CrashMode::random(seed)]) {
            let image = fs.crash_image_with(mode);
            image.check_invariants();
            let got = read(&image, &path).unwrap();
            assert!(got.len() >= 5000 && bytes.starts_with(&got), "{mode:?}");
            assert_eq!(image.durable_len(&path), Some(got.len() as u64));
        }
    }
}

/// Each tail mode yields exactly the lengths it documents, and `Random` only those.
#[test]
fn tail_lengths_are_exactly_the_documented_ones() {
    let fs = fs_with_dir();
    let (path, _) = file_with_tail(&fs);
    // The last write is 9000..13000: sector cuts 9216, 9728, ..., 12800; page cut 12288.
    let sector: Vec<usize> = (18..=25).map(|k| k * SECTOR_BYTES).collect();
    let page = [3 * PAGE_BYTES];
    let mut seen_random = BTreeSet::new();
    let mut seen_sector = BTreeSet::new();
    for seed in 0..SEEDS {
        let len_in = |tail| {
            let mode = CrashMode {
                tail,
                namespace: NamespaceMode::Durable,
                seed,
            };
            read(&fs.crash_image_with(mode), &path).unwrap().len()
        };
        assert_eq!(len_in(TailMode::Drop), 5000);
        assert_eq!(len_in(TailMode::Keep), 13000);
        assert!((5000..=13000).contains(&len_in(TailMode::RandomPrefix)));
        let torn = len_in(TailMode::TornSector);
        assert!(sector.contains(&torn), "{torn}");
        seen_sector.insert(torn);
        assert!(page.contains(&len_in(TailMode::TornPage)));
        let any = len_in(TailMode::Random);
        seen_random.insert(any);
        let documented =
            [5000, 13000].contains(&any) || sector.contains(&any) || (5000..=13000).contains(&any);
        assert!(documented, "{any}");
    }
    assert_eq!(
        seen_sector.len(),
        sector.len(),
        "every sector cut is reachable"
    );
    for len in [5000, 13000, 3 * PAGE_BYTES] {
        assert!(
            seen_random.contains(&len),
            "Random never chose length {len}"
        );
    }
}

/// A last write that crosses no boundary is dropped whole by the torn modes.
#[test]
fn torn_small_write_is_dropped_whole() {
    let fs = fs_with_dir();
    let path = file("MANIFEST");
    let mut w = fs.create(&path).unwrap();
    w.append(&[1; 100]).unwrap();
    w.sync().unwrap();
    fs.sync_dir(dir()).unwrap();
    w.append(&[2; 50]).unwrap();
    w.append(&[3; 60]).unwrap();
    for tail in [TailMode::TornSector, TailMode::TornPage] {
        let mode = CrashMode {
            tail,
            namespace: NamespaceMode::Durable,
            seed: 1,
        };
        assert_eq!(read(&fs.crash_image_with(mode), &path).unwrap().len(), 150);
    }
}

/// A file created and synced in a directory that was not synced may vanish; both
/// outcomes occur under random seeds, and a surviving file has only its synced bytes.
#[test]
fn undirsynced_file_can_vanish() {
    let fs = fs_with_dir();
    let path = file("000002.sst");
    let mut w = fs.create(&path).unwrap();
    w.append(b"table").unwrap();
    w.sync().unwrap();
    assert!(read(&fs.crash_image_with(CrashMode::durable_only()), &path).is_none());
    let live = CrashMode {
        tail: TailMode::Drop,
        namespace: NamespaceMode::Live,
        seed: 0,
    };
    assert_eq!(read(&fs.crash_image_with(live), &path).unwrap(), b"table");
    let outcomes: BTreeSet<bool> = (0..SEEDS)
        .map(|seed| read(&fs.crash_image(seed), &path).is_some())
        .collect();
    assert_eq!(outcomes.len(), 2);
    fs.sync_dir(dir()).unwrap();
    assert!(read(&fs.crash_image_with(CrashMode::durable_only()), &path).is_some());
}

/// An unsynced removal can be undone; an unsynced rename is undone or done, never half.
#[test]
fn removal_and_rename_need_dir_sync() {
    let fs = fs_with_dir();
    for name in ["old", "tmp"] {
        let mut w = fs.create(&file(name)).unwrap();
        w.append(name.as_bytes()).unwrap();
        w.sync().unwrap();
    }
    fs.sync_dir(dir()).unwrap();
    fs.remove_file(&file("old")).unwrap();
    fs.rename(&file("tmp"), &file("new")).unwrap();
    assert_eq!(fs.list_dir(dir()).unwrap(), vec!["new".to_owned()]);
    assert_eq!(
        fs.durable_names(dir()),
        vec!["old".to_owned(), "tmp".to_owned()]
    );
    let durable = fs.crash_image_with(CrashMode::durable_only());
    assert_eq!(durable.list_dir(dir()).unwrap(), vec!["old", "tmp"]);
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let names = fs.crash_image(seed).list_dir(dir()).unwrap();
        let renamed = names.contains(&"new".to_owned());
        assert_ne!(renamed, names.contains(&"tmp".to_owned()), "{names:?}");
        seen.insert(names);
    }
    // Changes apply in order: [], [remove old], [remove old, rename].
    assert_eq!(seen.len(), 3, "{seen:?}");
}

/// An injected write fault fires on the n-th matching write only, for matching paths,
/// with the chosen kind; failed writes change nothing and are not counted.
#[test]
fn write_fault_fires_on_the_right_op() {
    let fs = fs_with_dir();
    let mut wal = fs.create(&file("000001.wal")).unwrap();
    let mut sst = fs.create(&file("000002.sst")).unwrap();
    fs.inject(Fault::new(FaultOp::Write, 3, FaultKind::NoSpace).on_paths_containing(".wal"));
    wal.append(b"a").unwrap();
    sst.append(b"x").unwrap();
    sst.append(b"y").unwrap();
    wal.append(b"b").unwrap();
    let err = wal.append(b"c").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::StorageFull);
    assert_eq!(fs.faults_armed(), 0);
    wal.append(b"d").unwrap();
    assert_eq!(fs.contents(&file("000001.wal")).unwrap(), b"abd");
    let stats = fs.stats();
    assert_eq!(
        (stats.writes, stats.bytes_written, stats.faults_fired),
        (5, 5, 1)
    );

    fs.inject(Fault::new(FaultOp::WriteOrSync, 2, FaultKind::Io));
    wal.append(b"e").unwrap();
    let err = wal.sync().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Other);
    assert!(err.to_string().contains("000001.wal"), "{err}");
    assert_eq!(fs.stats().syncs, 0);
}

/// After a failed sync the unsynced bytes are gone from the live file too, so a
/// retried sync "succeeds" without them.
#[test]
fn failed_sync_drops_unsynced_bytes() {
    let fs = fs_with_dir();
    let path = file("000001.wal");
    let mut w = fs.create(&path).unwrap();
    w.append(b"synced").unwrap();
    w.sync().unwrap();
    fs.sync_dir(dir()).unwrap();
    w.append(b"-lost").unwrap();
    fs.inject(Fault::new(FaultOp::Sync, 1, FaultKind::Io));
    assert!(w.sync().is_err());
    assert_eq!(fs.contents(&path).unwrap(), b"synced");
    assert_eq!(w.len(), 11, "the handle still counts what it appended");
    w.sync().unwrap();
    let keep = CrashMode {
        tail: TailMode::Keep,
        namespace: NamespaceMode::Live,
        seed: 0,
    };
    assert_eq!(read(&fs.crash_image_with(keep), &path).unwrap(), b"synced");
    fs.check_invariants();
}

/// A failed dir sync leaves the namespace changes pending.
#[test]
fn failed_dir_sync_leaves_names_pending() {
    let fs = fs_with_dir();
    fs.create(&file("a")).unwrap();
    fs.inject(Fault::new(FaultOp::SyncDir, 1, FaultKind::Io));
    assert!(fs.sync_dir(dir()).is_err());
    assert!(fs.durable_names(dir()).is_empty());
    fs.sync_dir(dir()).unwrap();
    assert_eq!(fs.durable_names(dir()), vec!["a"]);
    assert_eq!(fs.stats().dir_syncs, 1);
}

/// truncate is durable at once, and crash images are the same for the same seed.
#[test]
fn truncate_is_durable_and_images_are_deterministic() {
    let fs = fs_with_dir();
    let (path, bytes) = file_with_tail(&fs);
    fs.truncate(&path, 7000).unwrap();
    assert_eq!(fs.durable_len(&path), Some(7000));
    let image = fs.crash_image_with(CrashMode::durable_only());
    assert_eq!(read(&image, &path).unwrap(), &bytes[..7000]);
    let (path2, _) = {
        let p = file("000009.wal");
        let mut w = fs.create(&p).unwrap();
        w.append(&[7; 10000]).unwrap();
        (p, ())
    };
    for seed in 0..20 {
        let a = fs.crash_image(seed);
        let b = fs.crash_image(seed);
        assert_eq!(read(&a, &path2), read(&b, &path2));
        assert_eq!(a.list_dir(dir()).unwrap(), b.list_dir(dir()).unwrap());
    }
}

/// A process crash keeps the live names and bytes but makes nothing durable:
/// a power cut after it still loses what was never synced. Locks are released.
#[test]
fn process_crash_keeps_page_cache_not_durability() {
    let fs = fs_with_dir();
    let lock_path = file("LOCK");
    let _held = fs.lock(&lock_path).unwrap();
    let synced = file("synced");
    let mut w = fs.create(&synced).unwrap();
    w.append(b"durable").unwrap();
    w.sync().unwrap();
    fs.sync_dir(dir()).unwrap();
    w.append(b"+cached").unwrap();
    let mut unsynced = fs.create(&file("unsynced")).unwrap();
    unsynced.append(b"cached only").unwrap();
    let after = fs.process_crash_image();
    assert_eq!(read(&after, &synced).unwrap(), b"durable+cached");
    assert_eq!(read(&after, &file("unsynced")).unwrap(), b"cached only");
    assert_eq!(after.durable_len(&synced), Some(7));
    assert!(
        after.lock(&lock_path).is_ok(),
        "the lock died with the process"
    );
    let power_cut = after.crash_image_with(CrashMode::durable_only());
    assert_eq!(read(&power_cut, &synced).unwrap(), b"durable");
    assert!(read(&power_cut, &file("unsynced")).is_none());
    after.check_invariants();
}

/// A second lock of a path fails until the first is dropped.
#[test]
fn lock_table() {
    let fs = fs_with_dir();
    let lock_path = file("LOCK");
    let held = fs.lock(&lock_path).unwrap();
    let err = fs.clone().lock(&lock_path).err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    drop(held);
    assert!(fs.lock(&lock_path).is_ok());
}

/// Reads stop at the length at open; a removed file stays readable while open; paths
/// without a directory fail; no directory is made under a file.
#[test]
fn reads_and_missing_paths() {
    let fs = fs_with_dir();
    let path = file("f");
    let mut w = fs.create(&path).unwrap();
    w.append(b"hello").unwrap();
    let r = fs.open_read(&path).unwrap();
    w.append(b" world").unwrap();
    let mut buf = [0u8; 5];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"hello");
    assert!(r.read_exact_at(&mut buf, 1).is_err());
    assert!(r.read_exact_at(&mut buf, u64::MAX).is_err());
    fs.remove_file(&path).unwrap();
    fs.sync_dir(dir()).unwrap();
    r.read_exact_at(&mut buf, 0).unwrap();
    assert!(!fs.exists(&path));
    assert!(fs.open_read(&path).is_err());
    assert!(fs.create(Path::new("/nodir/x")).is_err());
    assert!(fs.rename(&file("missing"), &file("x")).is_err());
    let g = file("g");
    fs.create(&g).unwrap();
    assert!(fs.create_dir_all(&g.join("sub")).is_err());
    assert!(!fs.exists(&g.join("sub")));
    fs.create_dir_all(&file("sub/deeper")).unwrap();
    assert_eq!(fs.list_dir(dir()).unwrap(), vec!["g", "sub"]);
}

#[derive(Debug, Clone)]
enum Op {
    Create(u8),
    Append(u8, u16),
    Sync(u8),
    SyncDir,
    Rename(u8, u8),
    Remove(u8),
}

fn arb_op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        (0..4u8).prop_map(Op::Create),
        (0..4u8, 0..2000u16).prop_map(|(i, n)| Op::Append(i, n)),
        (0..4u8).prop_map(Op::Sync),
        Just(Op::SyncDir),
        (0..4u8, 0..4u8).prop_map(|(a, b)| Op::Rename(a, b)),
        (0..4u8).prop_map(Op::Remove),
    ]
}

proptest::proptest! {
    /// Against a reference model: after any sequence of operations, the durable-names
    /// image holds exactly the dir-synced names, each with at least its synced bytes
    /// and otherwise a prefix of what was written.
    #[test]
    fn model_based_durability(ops in proptest::collection::vec(arb_op(), 1..40), seed in 0u64..1000) {
        use std::collections::BTreeMap;
        let fs = fs_with_dir();
        let name = |i: u8| file(&format!("f{i}"));
        // Reference: file id -> (bytes written, bytes synced); names -> file id.
        let mut files: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut handles: BTreeMap<usize, Box<dyn WritableFile>> = BTreeMap::new();
        let mut live: BTreeMap<u8, usize> = BTreeMap::new();
        let mut durable: BTreeMap<u8, usize> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Create(i) => {
                    handles.insert(files.len(), fs.create(&name(i)).unwrap());
                    live.insert(i, files.len());
                    files.push((Vec::new(), 0));
                }
                Op::Append(i, n) => if let Some(&id) = live.get(&i) {
                    let bytes: Vec<u8> = (0..n).map(|k| (k as usize + id) as u8).collect();
                    handles.get_mut(&id).unwrap().append(&bytes).unwrap();
                    files[id].0.extend_from_slice(&bytes);
                },
                Op::Sync(i) => if let Some(&id) = live.get(&i) {
                    handles.get_mut(&id).unwrap().sync().unwrap();
                    files[id].1 = files[id].0.len();
                },
                Op::SyncDir => {
                    fs.sync_dir(dir()).unwrap();
                    durable = live.clone();
                }
                Op::Rename(a, b) => if let Some(id) = live.get(&a).copied() {
                    fs.rename(&name(a), &name(b)).unwrap();
                    live.remove(&a);
                    live.insert(b, id);
                },
                Op::Remove(i) => if live.remove(&i).is_some() {
                    fs.remove_file(&name(i)).unwrap();
                },
            }
            fs.check_invariants();
        }
        let mode = CrashMode { tail: TailMode::Random, namespace: NamespaceMode::Durable, seed };
        let image = fs.crash_image_with(mode);
        let expected: Vec<String> = durable.keys().map(|i| format!("f{i}")).collect();
        proptest::prop_assert_eq!(image.list_dir(dir()).unwrap(), expected);
        for (&i, &id) in &durable {
            let got = read(&image, &name(i)).unwrap();
            let (written, synced) = &files[id];
            proptest::prop_assert!(got.len() >= *synced && written.starts_with(&got));
        }
    }
}
