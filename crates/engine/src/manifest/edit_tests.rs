//! Tests of the version edit encoding.

use super::*;
use crate::coding::put_varint;
use crate::manifest::log::ManifestState;
use crate::manifest::test_support::{arb_edit, meta};
use proptest::prelude::*;

fn encoded(edit: &VersionEdit) -> Vec<u8> {
    let mut out = Vec::new();
    edit.encode(&mut out);
    out
}

proptest! {
    /// Every valid edit decodes to itself.
    #[test]
    fn round_trip(edit in arb_edit()) {
        prop_assert_eq!(VersionEdit::decode(&encoded(&edit)), Ok(edit));
    }

    /// Every strict prefix of a non-empty encoding is rejected or decodes to a different, smaller edit.
    #[test]
    fn truncation_never_decodes_to_the_same_edit(edit in arb_edit()) {
        let bytes = encoded(&edit);
        for cut in 0..bytes.len() {
            if let Ok(short) = VersionEdit::decode(&bytes[..cut]) {
                prop_assert_ne!(short, edit.clone());
            }
        }
    }

    /// Arbitrary bytes never panic the decoder or `apply` (the in-crate twin of the fuzz target).
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(edit) = VersionEdit::decode(&bytes) {
            let mut state = ManifestState::default();
            let _ = state.apply(&edit);
            let _ = state.apply(&edit);
        }
    }

    /// Random bytes after a valid tag never panic and never make a file that fails validation.
    #[test]
    fn random_field_bodies_never_panic(tag in 0u64..8, body in proptest::collection::vec(any::<u8>(), 0..128)) {
        let mut bytes = Vec::new();
        put_varint(&mut bytes, tag);
        bytes.extend_from_slice(&body);
        if let Ok(edit) = VersionEdit::decode(&bytes) {
            prop_assert_eq!(edit.validate(), Ok(()));
        }
    }
}

/// The empty input is the empty edit, and the empty edit encodes to nothing.
#[test]
fn empty_edit_is_empty_bytes() {
    assert_eq!(VersionEdit::decode(&[]), Ok(VersionEdit::default()));
    assert!(encoded(&VersionEdit::default()).is_empty());
    assert!(VersionEdit::default().is_empty());
}

/// Unknown tags and repeated scalar tags are rejected.
#[test]
fn rejects_unknown_and_repeated_tags() {
    let err = VersionEdit::decode(&[9, 0]).unwrap_err();
    assert!(err.contains("unknown tag 9"), "{err}");
    let mut bytes = Vec::new();
    for _ in 0..2 {
        put_varint(&mut bytes, TAG_LAST_SEQ);
        put_varint(&mut bytes, 7);
    }
    assert!(VersionEdit::decode(&bytes).unwrap_err().contains("twice"));
}

/// Level LEVELS_MAX - 1 is accepted; LEVELS_MAX and beyond (even past u32) are rejected.
#[test]
fn level_bound() {
    let ok = VersionEdit {
        added: vec![meta(1, LEVELS_MAX - 1)],
        removed: vec![(LEVELS_MAX - 1, 2)],
        ..VersionEdit::default()
    };
    assert_eq!(VersionEdit::decode(&encoded(&ok)), Ok(ok));
    for level in [u64::from(LEVELS_MAX), u64::from(u32::MAX) + 1] {
        let mut bytes = Vec::new();
        put_varint(&mut bytes, TAG_REMOVED_FILE);
        put_varint(&mut bytes, level);
        put_varint(&mut bytes, 2);
        assert!(
            VersionEdit::decode(&bytes)
                .unwrap_err()
                .contains("LEVELS_MAX")
        );
    }
    let mut bad = meta(1, LEVELS_MAX);
    assert!(bad.validate().is_err());
    bad.level = 0;
    assert!(bad.validate().is_ok());
}

/// A key of exactly EDIT_KEY_BYTES_MAX bytes is accepted; one byte more is rejected
/// from its length alone, before any allocation.
#[test]
fn key_length_bound() {
    let mut file = meta(1, 0);
    let user_key = vec![b'k'; KEY_BYTES_MAX];
    file.smallest = crate::key::internal_key(&user_key, 7, 1, crate::key::Kind::Put);
    file.largest = file.smallest.clone();
    assert_eq!(file.smallest.len(), EDIT_KEY_BYTES_MAX);
    let edit = VersionEdit {
        added: vec![file],
        ..VersionEdit::default()
    };
    assert_eq!(VersionEdit::decode(&encoded(&edit)), Ok(edit));

    let mut bytes = Vec::new();
    put_varint(&mut bytes, TAG_ADDED_FILE);
    for field in [1, 0, 100] {
        put_varint(&mut bytes, field);
    }
    put_varint(&mut bytes, (EDIT_KEY_BYTES_MAX + 1) as u64);
    let err = VersionEdit::decode(&bytes).unwrap_err();
    assert!(err.contains("above"), "{err}");
    // A huge declared length with few bytes behind it is refused, not allocated.
    let mut huge = bytes[..bytes.len() - 3].to_vec();
    put_varint(&mut huge, u64::MAX);
    assert!(VersionEdit::decode(&huge).is_err());
}

/// Files whose keys are not internal keys, are out of order, or whose counts contradict
/// each other are rejected.
#[test]
fn rejects_inconsistent_files() {
    let mut short_key = meta(1, 0);
    short_key.smallest = b"abc".to_vec();
    let mut reversed = meta(2, 0);
    std::mem::swap(&mut reversed.smallest, &mut reversed.largest);
    let mut tombstones = meta(3, 0);
    tombstones.tombstones = tombstones.entries + 1;
    let mut ts = meta(4, 0);
    ts.ts_min = ts.ts_max + 1;
    for file in [short_key, reversed, tombstones, ts] {
        assert!(file.validate().is_err(), "{file:?}");
        // Bypass encode's debug assertion to check that decode rejects it too.
        let mut bytes = Vec::new();
        put_varint(&mut bytes, TAG_ADDED_FILE);
        file.encode(&mut bytes);
        assert!(VersionEdit::decode(&bytes).is_err(), "{file:?}");
    }
}
