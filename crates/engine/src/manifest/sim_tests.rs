//! Manifest tests on the simulated file system: poisoning and power cuts.

use super::edit::VersionEdit;
use super::log::*;
use super::test_support::meta;
use crate::error::Error;
use crate::fs::FileSystem;
use crate::fs::sim::{CrashMode, Fault, FaultKind, FaultOp, SimFs};
use crate::wal::record::encode_record;
use std::path::Path;
use std::sync::Arc;

const SEEDS: u64 = 200;

fn dir() -> &'static Path {
    Path::new("/db")
}

fn sim() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(dir()).unwrap();
    fs
}

fn state_with(numbers: &[u64]) -> ManifestState {
    let mut state = ManifestState::default();
    let edit = VersionEdit {
        added: numbers.iter().map(|&n| meta(n, 0)).collect(),
        next_file_number: Some(100),
        last_seq: Some(7),
        ..VersionEdit::default()
    };
    state.apply(&edit).unwrap();
    state
}

/// A failed sync (or write) poisons the writer: the error is I/O, every later append
/// is Poisoned and does not touch the file.
#[test]
fn failed_sync_or_write_poisons_the_writer() {
    for op in [FaultOp::Sync, FaultOp::Write] {
        let fs = sim();
        let mut writer =
            ManifestWriter::create(Arc::new(fs.clone()), dir(), &state_with(&[1])).unwrap();
        fs.inject(Fault::new(op, 1, FaultKind::Io).on_paths_containing("MANIFEST"));
        let edit = VersionEdit {
            added: vec![meta(2, 0)],
            ..VersionEdit::default()
        };
        assert!(
            matches!(writer.append(&edit), Err(Error::Io { .. })),
            "{op:?}"
        );
        assert!(writer.is_poisoned());
        let before = fs.stats();
        for _ in 0..3 {
            assert!(matches!(writer.append(&edit), Err(Error::Poisoned { .. })));
        }
        assert_eq!(fs.stats(), before, "a poisoned writer touched the file");
        // What is on disk is the state before the failed edit.
        let image = fs.crash_image(1);
        assert_eq!(
            load_manifest(&image, dir()).unwrap(),
            Some(state_with(&[1]))
        );
    }
}

/// A power cut in the middle of an append (record written, not synced) loads as the
/// state before or after that edit, never anything else.
#[test]
fn power_cut_mid_append_loads_old_or_new_state() {
    let fs = sim();
    let old = state_with(&[1, 2]);
    let writer = ManifestWriter::create(Arc::new(fs.clone()), dir(), &old).unwrap();
    let edit = VersionEdit {
        added: vec![meta(3, 1)],
        removed: vec![(0, 1)],
        last_seq: Some(9),
        ..VersionEdit::default()
    };
    let mut new = old.clone();
    new.apply(&edit).unwrap();
    let mut payload = Vec::new();
    edit.encode(&mut payload);
    let mut record = Vec::new();
    encode_record(&mut record, &payload);
    let mut raw = fs.open_append(&writer.path()).unwrap();
    raw.append(&record).unwrap();
    let mut seen = Vec::new();
    for seed in 0..SEEDS {
        let load = load_manifest_report(&fs.crash_image(seed), dir())
            .unwrap()
            .unwrap();
        assert!(load.state == old || load.state == new, "seed {seed}");
        if load.state == new {
            assert_eq!(load.torn_tail, None);
        } else {
            assert_eq!(load.valid_bytes, writer.bytes());
        }
        seen.push(load.state == new);
    }
    assert!(seen.contains(&true) && seen.contains(&false));
}

/// A power cut at any step of installing a new manifest leaves the old or the new one,
/// whole; after the directory sync only the new one.
#[test]
fn power_cut_during_install_leaves_old_or_new() {
    let old = state_with(&[1]);
    let new = state_with(&[1, 2, 3]);
    // (operation that fails, states a crash may then show)
    let cases = [
        (FaultOp::Write, vec![&old]),
        (FaultOp::Sync, vec![&old]),
        (FaultOp::SyncDir, vec![&old, &new]),
    ];
    for (op, allowed) in cases {
        let fs = sim();
        ManifestWriter::create(Arc::new(fs.clone()), dir(), &old).unwrap();
        fs.inject(Fault::new(op, 1, FaultKind::NoSpace));
        assert!(ManifestWriter::create(Arc::new(fs.clone()), dir(), &new).is_err());
        let mut seen = Vec::new();
        for seed in 0..SEEDS {
            let state = load_manifest(&fs.crash_image(seed), dir())
                .unwrap()
                .unwrap();
            assert!(allowed.contains(&&state), "{op:?} seed {seed}: {state:?}");
            seen.push(state);
        }
        assert!(
            allowed.iter().all(|s| seen.contains(s)),
            "{op:?}: not every outcome reached"
        );
    }
    let fs = sim();
    ManifestWriter::create(Arc::new(fs.clone()), dir(), &old).unwrap();
    ManifestWriter::create(Arc::new(fs.clone()), dir(), &new).unwrap();
    let image = fs.crash_image_with(CrashMode::durable_only());
    assert_eq!(load_manifest(&image, dir()).unwrap(), Some(new));
}

/// A brand-new database whose first install was cut before the directory sync has
/// no manifest or the whole one, never a partial one.
#[test]
fn power_cut_during_first_install() {
    let fs = sim();
    let state = state_with(&[4]);
    fs.inject(Fault::new(FaultOp::SyncDir, 1, FaultKind::Io));
    assert!(ManifestWriter::create(Arc::new(fs.clone()), dir(), &state).is_err());
    for seed in 0..SEEDS {
        match load_manifest(&fs.crash_image(seed), dir()).unwrap() {
            None => {}
            Some(loaded) => assert_eq!(loaded, state),
        }
    }
}
