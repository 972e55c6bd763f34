//! Builders and proptest strategies shared by the manifest tests.

use super::edit::{FileMeta, LEVELS_MAX, VersionEdit};
use crate::key::{Kind, internal_key};
use proptest::prelude::*;

/// A valid file of `number` at `level` with keys `a..z`.
pub fn meta(number: u64, level: u32) -> FileMeta {
    FileMeta {
        number,
        level,
        file_bytes: 4096 + number,
        smallest: internal_key(b"a", 5, 1, Kind::Put),
        largest: internal_key(b"z", 7, 2, Kind::Delete),
        entries: 10,
        tombstones: 3,
        ts_min: 5,
        ts_max: 7,
    }
}

/// Any valid file description.
pub fn arb_meta() -> impl Strategy<Value = FileMeta> {
    (
        any::<u64>(),
        0..LEVELS_MAX,
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(any::<u8>(), 0..24),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()),
        (0..(1u64 << 56), any::<bool>()),
    )
        .prop_map(
            |(number, level, file_bytes, k1, k2, (e, t, ts1, ts2), (seq, del))| {
                let (lo, hi) = if k1 <= k2 { (k1, k2) } else { (k2, k1) };
                let kind = if del { Kind::Delete } else { Kind::Put };
                FileMeta {
                    number,
                    level,
                    file_bytes,
                    smallest: internal_key(&lo, ts1.max(ts2), seq, kind),
                    largest: internal_key(&hi, ts1.min(ts2), seq, kind),
                    entries: e.max(t),
                    tombstones: e.min(t),
                    ts_min: ts1.min(ts2),
                    ts_max: ts1.max(ts2),
                }
            },
        )
}

/// Any valid edit.
pub fn arb_edit() -> impl Strategy<Value = VersionEdit> {
    (
        proptest::collection::vec(arb_meta(), 0..5),
        proptest::collection::vec((0..LEVELS_MAX, any::<u64>()), 0..5),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(
            |(added, removed, wal_segment_min, next_file_number, last_seq)| VersionEdit {
                added,
                removed,
                wal_segment_min,
                next_file_number,
                last_seq,
            },
        )
}
