//! The read view right after an open that kept its WAL replay in memory,
//! driven step by step without the engine's threads: `open` alone, then
//! the writer's own `apply` and `rotate`, then the background thread's
//! `flush_memtable`, so every state is reached deterministically.

use super::{Db, Entry, open, read, tx_thread};
use crate::fs::FileSystem;
use crate::fs::sim::{CrashMode, SimFs};
use crate::memtable::immutable::ImmutableMemtable;
use crate::options::{Durability, Options, WalMode};
use crate::wal::segment::parse_segment_file_name;
use crate::{Result, WriteBatch};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const DIR: &str = "/db";

fn options(fs: &SimFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        wal_mode: WalMode::Fsync,
        block_bytes: 512,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn segments(fs: &SimFs) -> Vec<u64> {
    let names = fs.list_dir(Path::new(DIR)).unwrap_or_default();
    names
        .iter()
        .filter_map(|n| parse_segment_file_name(n))
        .collect()
}

/// Reads every key of `model` with `read::get` and scans the whole view,
/// tombstones included; both must agree with the model exactly.
fn check(shared: &super::shared::Shared, model: &BTreeMap<Vec<u8>, Entry>) -> Result<()> {
    for (k, want) in model {
        assert_eq!(read::get(shared, k)?.as_ref(), Some(want), "{k:?}");
    }
    let scanned = read::scan(shared, b"", None, true, true)?.collect::<Result<Vec<_>>>()?;
    let expected: Vec<_> = model.iter().map(|(k, e)| (k.clone(), e.clone())).collect();
    assert!(scanned == expected, "scan differs from the model");
    let from_k0100 = read::scan(shared, &key(100), Some(&key(110)), true, true)?.count();
    assert_eq!(from_k0100, model.range(key(100)..key(110)).count());
    Ok(())
}

/// After the open, the replayed run is the only immutable memtable and
/// reads see it; writes applied on top (newer puts, deletes, a late
/// older-timestamp put, new keys), then a rotation, then the flush of the
/// run, each leave exactly the model visible; the flush of the run makes
/// the replayed segments obsolete and no earlier step does.
#[test]
fn replayed_run_is_read_under_newer_writes_and_flushed_in_order() -> Result<()> {
    let fs = SimFs::new();
    let db = Db::open(DIR, options(&fs))?;
    let mut model = BTreeMap::new();
    for i in 0..300u64 {
        db.put(
            &key(i),
            format!("old{i}").as_bytes(),
            1000 + i,
            Durability::Complete,
        )?;
        let value = Some(format!("old{i}").into_bytes());
        model.insert(
            key(i),
            Entry {
                ts: 1000 + i,
                value,
                deadline_ms: None,
            },
        );
    }
    let image = fs.crash_image_with(CrashMode::durable_only());
    drop(db);
    let replayed_segments = segments(&image);

    let (shared, report) = open::open(Path::new(DIR), options(&image))?;
    assert_eq!((report.runs_kept, report.tables_flushed), (1, 0));
    let sv = shared.sv.load_full();
    assert!(matches!(
        sv.imms.as_slice(),
        [ImmutableMemtable::Replayed(_)]
    ));
    assert!(sv.mem.is_empty());
    for s in &replayed_segments {
        assert!(segments(&image).contains(s), "segment {s} removed at open");
    }
    // The recovered run answers point reads through its point index:
    // one index lookup per key read (the scans do not use it).
    let lookups = || crate::memtable::sorted_run::INDEX_LOOKUPS.with(std::cell::Cell::get);
    let before = lookups();
    check(&shared, &model)?;
    assert_eq!(lookups() - before, model.len() as u64);

    let mut next_seq = shared.visible_seq.load(Ordering::Acquire) + 1;
    let mut batch = WriteBatch::new();
    for i in (0..300u64).step_by(4) {
        batch.put(&key(i), b"new", 5000 + i);
        model.insert(
            key(i),
            Entry {
                ts: 5000 + i,
                value: Some(b"new".to_vec()),
                deadline_ms: None,
            },
        );
    }
    for i in (1..300u64).step_by(4) {
        batch.delete(&key(i), 6000 + i);
        model.insert(
            key(i),
            Entry {
                ts: 6000 + i,
                value: None,
                deadline_ms: None,
            },
        );
    }
    // Late: an older timestamp than the replayed version, so it must not show.
    batch.put(&key(2), b"late", 1);
    batch.put(b"z-new", b"n", 7000);
    model.insert(
        b"z-new".to_vec(),
        Entry {
            ts: 7000,
            value: Some(b"n".to_vec()),
            deadline_ms: None,
        },
    );
    tx_thread::apply(&shared, &batch, next_seq);
    next_seq += batch.len() as u64;
    check(&shared, &model)?;

    let mut wal_items = Vec::new();
    tx_thread::rotate(&shared, &mut wal_items);
    let mut batch = WriteBatch::new();
    batch.put(&key(3), b"newest", 9000);
    model.insert(
        key(3),
        Entry {
            ts: 9000,
            value: Some(b"newest".to_vec()),
            deadline_ms: None,
        },
    );
    tx_thread::apply(&shared, &batch, next_seq);
    let sv = shared.sv.load_full();
    assert!(matches!(
        sv.imms.as_slice(),
        [
            ImmutableMemtable::Rotated(_),
            ImmutableMemtable::Replayed(_)
        ]
    ));
    check(&shared, &model)?;
    for s in &replayed_segments {
        assert!(
            segments(&image).contains(s),
            "segment {s} removed before the flush"
        );
    }

    let oldest = sv.imms[1].clone();
    crate::db::flush_compaction_thread::flush_memtable(&shared, &oldest)?;
    let sv = shared.sv.load_full();
    assert!(matches!(
        sv.imms.as_slice(),
        [ImmutableMemtable::Rotated(_)]
    ));
    assert_eq!(sv.version.levels[0].len(), 1);
    check(&shared, &model)?;
    let left = segments(&image);
    for s in &replayed_segments {
        assert!(
            !left.contains(s),
            "segment {s} kept after its run was flushed"
        );
    }
    let min = super::shared::lock(&shared.versions).state.wal_segment_min;
    assert_eq!(min, sv.imms[0].wal_segment());
    Ok(())
}
