//! Opening, reopening and refusing to open: WAL replay after an unclean
//! stop, torn tails, corrupt records named by file and offset, forced
//! recovery, foreign files, the directory lock, and corrupt SSTables.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::batch::encode_payload;
use ataman_engine::wal::record::encode_record;
use ataman_engine::wal::segment::{parse_segment_file_name, segment_file_name};
use ataman_engine::{Db, Durability, Error, Options, WalMode, WriteBatch};
use std::fs;
use std::path::{Path, PathBuf};

fn opts() -> Options {
    Options {
        wal_mode: WalMode::Write,
        ..Options::default()
    }
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(parse_segment_file_name)
                .is_some()
        })
        .collect();
    v.sort();
    v
}

/// Writes `n` keys and drops the handle without closing (the WAL keeps them).
fn write_unflushed(dir: &Path, prefix: &str, n: u64) {
    let db = Db::open(dir, opts()).unwrap();
    for i in 0..n {
        let k = format!("{prefix}{i:04}");
        db.put(k.as_bytes(), k.as_bytes(), 1000 + i, Durability::Complete)
            .unwrap();
    }
    drop(db);
}

/// Writes unflushed by dropping the handle are replayed from the WAL at the next open.
#[test]
fn unclean_stop_is_replayed() {
    let dir = tempfile::tempdir().unwrap();
    write_unflushed(dir.path(), "k", 100);
    let db = Db::open(dir.path(), opts()).unwrap();
    let replay = db.recovery_report().replay.clone();
    assert_eq!(replay.records, 100);
    // The segment was preallocated: its unwritten zeros end the log quietly.
    assert!(replay.torn_tail.is_none(), "{replay:?}");
    assert!(replay.zero_tail_bytes > 0, "{replay:?}");
    for i in 0..100u64 {
        let k = format!("k{i:04}");
        assert_eq!(
            db.get(k.as_bytes()).unwrap().unwrap().value.unwrap(),
            k.as_bytes()
        );
    }
    db.close().unwrap();
    // The replay was flushed: nothing is replayed a second time.
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.recovery_report().replay.records, 0);
    assert!(db.get(b"k0099").unwrap().is_some());
}

/// A torn last record is cut, reported with file and offset, and the rest survives.
#[test]
fn torn_tail_is_cut_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    write_unflushed(dir.path(), "k", 10);
    let seg = segments(dir.path()).pop().unwrap();
    // The end of the records (the segment is preallocated: zeros follow).
    let bytes = fs::read(&seg).unwrap();
    let mut len = 0;
    while let ataman_engine::wal::record::Decoded::Record { consumed, .. } =
        ataman_engine::wal::record::decode_record(&bytes[len..])
    {
        len += consumed;
    }
    let len = len as u64;
    let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - 3).unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let report = db.recovery_report().replay.clone();
    assert_eq!(report.records, 9);
    let (path, offset, _dropped) = report.torn_tail.expect("torn tail reported");
    assert_eq!(path, seg);
    assert!(offset < len);
    assert!(db.get(b"k0008").unwrap().is_some());
    assert!(db.get(b"k0009").unwrap().is_none());
}

/// A corrupt record in a segment that is not the last stops the open with
/// an error naming the file and offset; forced recovery skips it and says so.
#[test]
fn corruption_before_the_tail_is_an_error_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    write_unflushed(dir.path(), "k", 20);
    let first = segments(dir.path()).pop().unwrap();
    // A later segment with one valid record, as if a rotation had happened.
    let number = parse_segment_file_name(first.file_name().unwrap().to_str().unwrap()).unwrap();
    let later = dir.path().join(segment_file_name(number + 100));
    let mut b = WriteBatch::new();
    b.put(b"later", b"v", 5000);
    let mut payload = Vec::new();
    encode_payload(&mut payload, 1_000_000, &b);
    let mut rec = Vec::new();
    encode_record(&mut rec, &payload);
    fs::write(&later, &rec).unwrap();
    // Flip a byte in the middle of the first segment.
    let mut bytes = fs::read(&first).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    fs::write(&first, &bytes).unwrap();

    let err = match Db::open(dir.path(), opts()) {
        Err(e) => e,
        Ok(_) => panic!("open succeeded over a corrupt WAL record"),
    };
    match &err {
        Error::Corruption { path, offset, .. } => {
            assert_eq!(path, &first);
            assert!(
                *offset <= mid as u64,
                "offset {offset} after the flipped byte {mid}"
            );
        }
        other => panic!("expected corruption, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(first.file_name().unwrap().to_str().unwrap()),
        "{msg}"
    );

    let forced = Options {
        force_recovery: true,
        ..opts()
    };
    let db = Db::open(dir.path(), forced).unwrap();
    let report = db.recovery_report().replay.clone();
    assert!(
        !report.skipped.is_empty(),
        "forced recovery must report what it skipped"
    );
    assert_eq!(db.get(b"later").unwrap().unwrap().value.unwrap(), b"v");
    assert!(
        db.get(b"k0000").unwrap().is_some(),
        "records before the bad one survive"
    );
    // A forced open writes what it replayed to L0 before returning, so the
    // damaged segment is gone: after a crash (no close) an ordinary open works.
    let opened = db.recovery_report();
    assert!(
        opened.tables_flushed > 0 && opened.runs_kept == 0,
        "{opened:?}"
    );
    drop(db);
    assert!(!first.exists(), "the damaged segment is still there");
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.get(b"later").unwrap().unwrap().value.unwrap(), b"v");
}

/// Files the engine does not own are left alone; data files without a manifest are refused.
#[test]
fn foreign_files_ignored_and_orphans_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("README.txt"), b"operator notes").unwrap();
    fs::write(dir.path().join("backup.sst.old"), b"not ours").unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    db.put(b"a", b"1", 1, Durability::Complete).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert!(db.get(b"a").unwrap().is_some());
    db.close().unwrap();
    assert_eq!(
        fs::read(dir.path().join("README.txt")).unwrap(),
        b"operator notes"
    );
    assert!(dir.path().join("backup.sst.old").exists());

    fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    let err = Db::open(dir.path(), opts()).err().expect("must refuse");
    assert!(err.to_string().contains("MANIFEST"), "{err}");
}

/// A second open of the same directory fails with `Locked` while the first is open.
#[test]
fn directory_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert!(matches!(
        Db::open(dir.path(), opts()),
        Err(Error::Locked { .. })
    ));
    db.close().unwrap();
    Db::open(dir.path(), opts()).unwrap().close().unwrap();
}

/// A flipped byte in an SSTable data block is reported as corruption, never a wrong value.
#[test]
fn corrupt_sstable_is_an_error_not_a_wrong_answer() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        compression: ataman_engine::Compression::None,
        ..opts()
    };
    let db = Db::open(dir.path(), o.clone()).unwrap();
    for i in 0..2000u64 {
        let k = format!("key{i:05}");
        db.put(
            k.as_bytes(),
            format!("value-{i}").as_bytes(),
            i + 1,
            Durability::None,
        )
        .unwrap();
    }
    db.close().unwrap();
    let sst = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = fs::read(&sst).unwrap();
    bytes[100] ^= 0xff; // inside the first data block
    fs::write(&sst, &bytes).unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    let mut errors = 0;
    for i in 0..2000u64 {
        let k = format!("key{i:05}");
        match db.get(k.as_bytes()) {
            Ok(Some(e)) => assert_eq!(e.value.unwrap(), format!("value-{i}").as_bytes()),
            Ok(None) => panic!("{k} silently missing"),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0, "the flipped byte went unnoticed");
    let scan = db
        .scan(b"", None, false)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>());
    assert!(
        scan.unwrap_err().is_corruption(),
        "a scan over the corrupt block must fail"
    );
}

/// Regression: a damaged length field in the middle of the LAST segment was
/// taken for a torn tail, and every valid record after it was cut away. It
/// must be reported as corruption, since valid records follow it.
#[test]
fn damaged_length_mid_last_segment_is_corruption_not_a_tear() {
    use ataman_engine::wal::record::{Decoded, decode_record};
    let dir = tempfile::tempdir().unwrap();
    write_unflushed(dir.path(), "k", 20);
    let seg = segments(dir.path()).pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    // Offset of the 6th record.
    let mut offset = 0;
    for _ in 0..5 {
        match decode_record(&bytes[offset..]) {
            Decoded::Record { consumed, .. } => offset += consumed,
            other => panic!("unexpected {other:?}"),
        }
    }
    bytes[offset + 1] ^= 0x7f; // the length's second byte
    fs::write(&seg, &bytes).unwrap();
    match Db::open(dir.path(), opts()) {
        Err(Error::Corruption {
            path, offset: at, ..
        }) => {
            assert_eq!(path, seg);
            assert_eq!(at, offset as u64);
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(db) => panic!(
            "opened and cut valid records: {:?}",
            db.recovery_report().replay
        ),
    }
}

/// A flipped byte in the manifest's snapshot record stops the open with an
/// error naming the manifest; the database is not opened as empty.
#[test]
fn corrupt_manifest_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    db.put(b"a", b"1", 1, Durability::Complete).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap(); // append an edit after the snapshot
    db.put(b"b", b"2", 2, Durability::Complete).unwrap();
    db.flush().unwrap();
    drop(db);
    let path = dir.path().join("MANIFEST");
    let mut bytes = fs::read(&path).unwrap();
    bytes[10] ^= 0x01; // inside the first (snapshot) record, which is followed by an edit
    fs::write(&path, &bytes).unwrap();
    match Db::open(dir.path(), opts()) {
        Err(e @ Error::Corruption { .. }) => assert!(e.to_string().contains("MANIFEST"), "{e}"),
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("opened over a corrupt manifest"),
    }
}

/// The largest stored timestamp survives a reopen (memtable replayed, then flushed).
#[test]
fn timestamp_max_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.timestamp_max(), 0);
    db.put(b"a", b"1", 500, Durability::Complete).unwrap();
    db.put(b"b", b"1", 90, Durability::Complete).unwrap();
    assert_eq!(db.timestamp_max(), 500);
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.timestamp_max(), 500);
}

/// The WAL writes zeros a megabyte ahead of its appends into the segment's
/// reserved space; they read as the end of the log, as unwritten space
/// does, and every acknowledged write is replayed after an unclean stop.
#[test]
fn zeros_written_ahead_end_the_log_like_reserved_space() {
    let dir = tempfile::tempdir().unwrap();
    let value = vec![7u8; 1000];
    let n = 3000u64; // about 3 MB of WAL: the zeros are written ahead twice or more
    {
        let db = Db::open(dir.path(), opts()).unwrap();
        for i in 0..n {
            let k = format!("z{i:05}");
            db.put(k.as_bytes(), &value, 1000 + i, Durability::Complete)
                .unwrap();
        }
        let zeros = db.metrics().wal_zero_fill_bytes.get();
        assert!(zeros >= 3 * 1024 * 1024, "zeros written ahead: {zeros}");
        drop(db);
    }
    let seg = segments(dir.path()).pop().unwrap();
    let bytes = fs::read(&seg).unwrap();
    let mut end = 0;
    while let ataman_engine::wal::record::Decoded::Record { consumed, .. } =
        ataman_engine::wal::record::decode_record(&bytes[end..])
    {
        end += consumed;
    }
    // Zeros were written at least half a megabyte past the last record.
    assert!(bytes.len() > end + 512 * 1024);
    assert!(bytes[end..end + 512 * 1024].iter().all(|&b| b == 0));
    let db = Db::open(dir.path(), opts()).unwrap();
    let replay = db.recovery_report().replay.clone();
    assert_eq!(replay.records, n);
    assert!(replay.torn_tail.is_none(), "{replay:?}");
    for i in (0..n).step_by(97) {
        let k = format!("z{i:05}");
        assert_eq!(db.get(k.as_bytes()).unwrap().unwrap().value.unwrap(), value);
    }
    db.close().unwrap();
}
