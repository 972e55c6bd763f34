//! Tests of the manifest file: install, append, load, torn tails, damage.

use super::*;
use crate::fs::OsFs;
use crate::manifest::edit::VersionEdit;
use crate::manifest::test_support::meta;

fn os() -> Arc<dyn FileSystem> {
    Arc::new(OsFs)
}

fn initial_state() -> ManifestState {
    let mut state = ManifestState::default();
    state
        .apply(&VersionEdit {
            added: vec![meta(1, 0), meta(2, 1)],
            wal_segment_min: Some(1),
            next_file_number: Some(3),
            last_seq: Some(10),
            ..VersionEdit::default()
        })
        .unwrap();
    state
}

fn edits() -> Vec<VersionEdit> {
    vec![
        VersionEdit {
            added: vec![meta(3, 0)],
            next_file_number: Some(4),
            last_seq: Some(20),
            ..VersionEdit::default()
        },
        VersionEdit {
            added: vec![meta(4, 1)],
            removed: vec![(0, 1), (0, 3)],
            wal_segment_min: Some(3),
            next_file_number: Some(5),
            ..VersionEdit::default()
        },
    ]
}

/// Writes the initial state and `edits()`; returns the dir, the file's bytes and the
/// expected state after each record (index 0 = after the snapshot).
fn write_manifest() -> (tempfile::TempDir, Vec<u8>, Vec<ManifestState>, Vec<usize>) {
    let dir = tempfile::tempdir().unwrap();
    let mut state = initial_state();
    let mut writer = ManifestWriter::create(os(), dir.path(), &state).unwrap();
    let mut states = vec![state.clone()];
    let mut ends = vec![writer.bytes() as usize];
    for edit in edits() {
        writer.append(&edit).unwrap();
        state.apply(&edit).unwrap();
        states.push(state.clone());
        ends.push(writer.bytes() as usize);
    }
    let bytes = std::fs::read(writer.path()).unwrap();
    assert_eq!(bytes.len(), *ends.last().unwrap());
    (dir, bytes, states, ends)
}

/// A missing manifest loads as None (a new database).
#[test]
fn missing_manifest_is_none() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load_manifest(&OsFs, dir.path()).unwrap(), None);
}

/// create + append + load round-trips the state through OsFs, leaves no temp file,
/// and a second create replaces the log with one snapshot.
#[test]
fn create_append_load_round_trip() {
    let (dir, _, states, ends) = write_manifest();
    let load = load_manifest_report(&OsFs, dir.path()).unwrap().unwrap();
    assert_eq!(&load.state, states.last().unwrap());
    assert_eq!(load.records, 3);
    assert_eq!(load.valid_bytes, *ends.last().unwrap() as u64);
    assert_eq!(load.torn_tail, None);
    assert!(!dir.path().join(MANIFEST_TMP_FILE_NAME).exists());

    let writer = ManifestWriter::create(os(), dir.path(), &load.state).unwrap();
    assert!(writer.bytes() < *ends.last().unwrap() as u64);
    let again = load_manifest_report(&OsFs, dir.path()).unwrap().unwrap();
    assert_eq!((again.state, again.records), (load.state, 1));
}

/// A zero-length manifest is corruption at offset 0.
#[test]
fn empty_manifest_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(manifest_path(dir.path()), b"").unwrap();
    let err = load_manifest(&OsFs, dir.path()).unwrap_err();
    assert!(matches!(err, Error::Corruption { offset: 0, .. }), "{err}");
}

/// Cutting the file anywhere inside the last record loses only that record, and
/// the report names its offset; a cut inside the snapshot is corruption.
#[test]
fn torn_tail_at_every_cut_is_ignored() {
    let (_dir, bytes, states, ends) = write_manifest();
    let path = Path::new("MANIFEST");
    for cut in 0..bytes.len() {
        let result = replay(path, &bytes[..cut]);
        let complete = ends.iter().filter(|&&end| end <= cut).count();
        if complete == 0 {
            assert!(result.unwrap_err().is_corruption(), "cut {cut}");
            continue;
        }
        let load = result.unwrap();
        assert_eq!(load.state, states[complete - 1], "cut {cut}");
        let valid = ends[complete - 1];
        assert_eq!(load.valid_bytes, valid as u64);
        match load.torn_tail {
            None => assert_eq!(cut, valid),
            Some(torn) => {
                assert_eq!(torn.offset, valid as u64, "cut {cut}");
                assert_eq!(torn.bytes, (cut - valid) as u64);
            }
        }
    }
}

/// Zeros after the last record (a zero-filled tail) are a torn tail, not corruption.
#[test]
fn zero_filled_tail_is_ignored() {
    let (_dir, mut bytes, states, ends) = write_manifest();
    bytes.extend_from_slice(&[0u8; 4096]);
    let load = replay(Path::new("MANIFEST"), &bytes).unwrap();
    assert_eq!(&load.state, states.last().unwrap());
    assert_eq!(load.torn_tail.unwrap().offset, *ends.last().unwrap() as u64);
}

/// Flipping any bit anywhere yields corruption, or (inside the last record) drops
/// only that record: never a wrong state, never a panic.
#[test]
fn flipped_bits_never_give_a_wrong_state() {
    let (_dir, bytes, states, ends) = write_manifest();
    let last_start = ends[ends.len() - 2];
    for byte in 0..bytes.len() {
        for bit in 0..8 {
            let mut bad = bytes.clone();
            bad[byte] ^= 1 << bit;
            match replay(Path::new("MANIFEST"), &bad) {
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    assert!(
                        byte < last_start,
                        "flip in the last record at {byte} was fatal"
                    );
                }
                Ok(load) => {
                    assert!(
                        byte >= last_start,
                        "flip at {byte} bit {bit} went unnoticed"
                    );
                    assert_eq!(load.state, states[states.len() - 2]);
                    assert_eq!(load.torn_tail.unwrap().offset, last_start as u64);
                }
            }
        }
    }
}

/// A bad record followed by a valid one is corruption naming the bad record's offset.
#[test]
fn damage_before_a_valid_record_names_its_offset() {
    let (dir, mut bytes, _, ends) = write_manifest();
    bytes[ends[0] + 10] ^= 0x40;
    let path = manifest_path(dir.path());
    std::fs::write(&path, &bytes).unwrap();
    match load_manifest(&OsFs, dir.path()).unwrap_err() {
        Error::Corruption {
            path: p, offset, ..
        } => {
            assert_eq!((p, offset), (path, ends[0] as u64));
        }
        other => panic!("unexpected {other}"),
    }
}

/// A well-framed record whose edit does not decode, or does not apply, is corruption.
#[test]
fn undecodable_or_inapplicable_edit_is_corruption() {
    let (_dir, bytes, _, ends) = write_manifest();
    let last = *ends.last().unwrap() as u64;
    let mut unknown = bytes.clone();
    encode_record(&mut unknown, &[99, 1]);
    let mut inapplicable = bytes.clone();
    let removal = VersionEdit {
        removed: vec![(5, 77)],
        ..VersionEdit::default()
    };
    inapplicable.extend_from_slice(&framed(&removal).unwrap());
    for (bad, what) in [(unknown, "edit:"), (inapplicable, "apply:")] {
        match replay(Path::new("MANIFEST"), &bad).unwrap_err() {
            Error::Corruption { offset, kind, .. } => {
                assert_eq!(offset, last);
                assert!(kind.to_string().contains(what), "{kind}");
            }
            other => panic!("unexpected {other}"),
        }
    }
}

/// An invalid edit is refused before anything is written, and the writer stays usable.
#[test]
fn invalid_edit_is_refused_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = ManifestWriter::create(os(), dir.path(), &initial_state()).unwrap();
    let before = writer.bytes();
    let edit = VersionEdit {
        removed: vec![(crate::manifest::LEVELS_MAX, 1)],
        ..VersionEdit::default()
    };
    assert!(matches!(
        writer.append(&edit),
        Err(Error::InvalidArgument(_))
    ));
    writer.append(&VersionEdit::default()).unwrap();
    assert_eq!(writer.bytes(), before);
    assert!(!writer.is_poisoned());
    writer.append(&edits()[0]).unwrap();
    assert!(writer.bytes() > before);
}
