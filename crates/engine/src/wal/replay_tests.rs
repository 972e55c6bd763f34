//! Tests of WAL replay's rules: round trip, torn tails, corruption, forced
//! recovery, sequence order (`docs/FORMAT.md`, "Replay rules").

use crate::error::{CorruptionKind, Error};
use crate::wal::record::{RECORD_HEADER_BYTES, encode_record};
use crate::wal::replay::ReplayOptions;
use crate::wal::test_segments::{BOTH_MODES, batch, record, records, replay_os, write_segment};
use std::path::Path;

/// The options of `mode` with forced recovery.
fn forced(mode: ReplayOptions) -> ReplayOptions {
    ReplayOptions {
        force: true,
        ..mode
    }
}

/// A named way to damage a segment's bytes.
type Damage<'a> = (&'a str, Box<dyn Fn(&mut Vec<u8>) + 'a>);

/// Byte offsets at which each record of `framed` starts in a segment.
fn offsets(framed: &[Vec<u8>]) -> Vec<u64> {
    let mut at = 0u64;
    framed
        .iter()
        .map(|r| {
            let start = at;
            at += r.len() as u64;
            start
        })
        .collect()
}

/// Asserts `err` is a corruption in `path` at `offset`.
fn assert_corruption(err: &Error, path: &Path, offset: u64) {
    match err {
        Error::Corruption {
            path: p, offset: o, ..
        } => assert_eq!((p.as_path(), *o), (path, offset), "{err}"),
        other => panic!("expected corruption at {path:?}:{offset}, got {other}"),
    }
}

/// Many records over several segments, one spanning read blocks, come back
/// exactly and in order in both modes, with an exact report.
#[test]
fn round_trip_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut framed, mut model) = records(1, 3000, 300);
    let big = batch(100_000, 1, 3 * 1024 * 1024);
    framed.insert(1500, record(50_000, &big));
    model.insert(1500, crate::wal::test_segments::applied(50_000, &big));
    // Keep sequence numbers growing across the inserted record.
    let (tail_framed, tail_model) = records(200_000, 1000, 300);
    framed.truncate(1501);
    model.truncate(1501);
    framed.extend(tail_framed);
    model.extend(tail_model);
    write_segment(dir.path(), 7, &framed[..1000]);
    write_segment(dir.path(), 8, &[]);
    write_segment(dir.path(), 9, &framed[1000..]);
    for mode in BOTH_MODES {
        let (seen, result) = replay_os(dir.path(), &[7, 8, 9], mode);
        let report = result.unwrap();
        assert_eq!(seen, model, "mode {mode:?}");
        assert_eq!(report.records, model.len() as u64);
        let entries: u64 = model.iter().map(|m| u64::from(m.1)).sum();
        assert_eq!(report.entries, entries);
        let bytes: u64 = model.iter().map(|m| m.2.len() as u64 + 8).sum();
        assert_eq!(report.bytes, bytes);
        let last = model.last().unwrap();
        assert_eq!(report.last_seq, last.0 + u64::from(last.1) - 1);
        assert!(report.torn_tail.is_none() && report.skipped.is_empty());
    }
}

/// A missing segment is an I/O error naming it; empty segments are fine.
#[test]
fn missing_segment_is_io_error_and_empty_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), 1, &[]);
    for mode in BOTH_MODES {
        let (seen, result) = replay_os(dir.path(), &[1], mode);
        assert!(seen.is_empty() && result.unwrap().records == 0);
        let (_, result) = replay_os(dir.path(), &[1, 2], mode);
        match result {
            Err(Error::Io { path, .. }) => assert_eq!(path, dir.path().join("000002.wal")),
            other => panic!("expected an I/O error, got {other:?}"),
        }
    }
}

/// Every cut inside the last record of the last segment is a torn tail: the
/// earlier records are applied, the file is cut where the record began, and
/// a second replay finds nothing to cut.
#[test]
fn torn_tail_at_every_cut_point() {
    let dir = tempfile::tempdir().unwrap();
    let (framed, model) = records(1, 6, 20);
    let start = *offsets(&framed).last().unwrap();
    let full = framed.concat();
    for cut in start + 1..full.len() as u64 {
        for mode in BOTH_MODES {
            let path = write_segment(dir.path(), 3, &[full[..cut as usize].to_vec()]);
            let (seen, result) = replay_os(dir.path(), &[3], mode);
            let report = result.unwrap();
            assert_eq!(seen, model[..5], "cut {cut}");
            assert_eq!(report.torn_tail, Some((path.clone(), start, cut - start)));
            assert_eq!(std::fs::metadata(&path).unwrap().len(), start);
            let (again, result) = replay_os(dir.path(), &[3], mode);
            assert_eq!(again, model[..5]);
            assert!(result.unwrap().torn_tail.is_none(), "cut {cut}");
        }
    }
}

/// A flipped byte anywhere in the last record of the last segment is cut as a torn tail.
#[test]
fn flipped_byte_in_last_record_is_torn() {
    let dir = tempfile::tempdir().unwrap();
    let (framed, model) = records(1, 4, 10);
    let start = *offsets(&framed).last().unwrap();
    let full = framed.concat();
    for byte in start as usize..full.len() {
        let mut bad = full.clone();
        bad[byte] ^= 0x41;
        for mode in BOTH_MODES {
            let path = write_segment(dir.path(), 1, &[bad.clone()]);
            let (seen, result) = replay_os(dir.path(), &[1], mode);
            let report = result.unwrap();
            assert_eq!(seen, model[..3], "byte {byte}");
            let dropped = full.len() as u64 - start;
            assert_eq!(
                report.torn_tail,
                Some((path, start, dropped)),
                "byte {byte}"
            );
        }
    }
}

/// A flipped checksum or payload byte in a record followed by valid records
/// of the last segment is corruption naming file and offset; forced
/// recovery skips it, reports it and applies the rest.
#[test]
fn flipped_byte_mid_log_is_corruption_or_skipped_when_forced() {
    let dir = tempfile::tempdir().unwrap();
    let (framed, model) = records(1, 5, 10);
    let at = offsets(&framed);
    for byte in 4..framed[2].len() {
        let mut bad = framed.clone();
        bad[2][byte] ^= 0x08;
        for mode in BOTH_MODES {
            let path = write_segment(dir.path(), 1, &bad);
            let (seen, result) = replay_os(dir.path(), &[1], mode);
            assert_corruption(&result.unwrap_err(), &path, at[2]);
            assert_eq!(seen, model[..2]);
            let (seen, result) = replay_os(dir.path(), &[1], forced(mode));
            let report = result.unwrap();
            assert_eq!(seen, [&model[..2], &model[3..]].concat(), "byte {byte}");
            assert_eq!(report.skipped.len(), 1);
            assert_eq!((&report.skipped[0].0, report.skipped[0].1), (&path, at[2]));
            assert!(report.torn_tail.is_none());
        }
    }
}

/// Any bad record in a segment that is not the last is corruption, even at
/// its end; forced recovery skips it (or the rest of that segment, when no
/// valid record follows), reports it, and applies the later segments.
#[test]
fn bad_record_in_non_last_segment_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (framed, model) = records(1, 6, 10);
    let at = offsets(&framed[..3]);
    let seg_len: usize = framed[..3].iter().map(Vec::len).sum();
    let cases: [Damage<'_>; 3] = [
        (
            "flipped payload byte",
            Box::new(|s| s[at[2] as usize + 12] ^= 1),
        ),
        ("torn end", Box::new(|s| s.truncate(seg_len - 3))),
        (
            "implausible length",
            Box::new(|s| s[at[2] as usize + 3] = 0xff),
        ),
    ];
    for (name, damage) in &cases {
        let mut first = framed[..3].concat();
        damage(&mut first);
        for mode in BOTH_MODES {
            let path = write_segment(dir.path(), 1, &[first.clone()]);
            write_segment(dir.path(), 2, &framed[3..]);
            let (seen, result) = replay_os(dir.path(), &[1, 2], mode);
            assert_corruption(&result.unwrap_err(), &path, at[2]);
            assert_eq!(seen, model[..2], "{name}");
            let (seen, result) = replay_os(dir.path(), &[1, 2], forced(mode));
            let report = result.unwrap();
            assert_eq!(seen, [&model[..2], &model[3..]].concat(), "{name}");
            assert_eq!(report.skipped.len(), 1, "{name}");
            assert_eq!((&report.skipped[0].0, report.skipped[0].1), (&path, at[2]));
        }
    }
}

/// Zeros after the valid records of a segment are preallocated space, not a
/// torn tail: replay ends there, reports the bytes, and cuts nothing.
#[test]
fn trailing_zeros_are_preallocated_space() {
    let dir = tempfile::tempdir().unwrap();
    let (mut framed, model) = records(1, 3, 10);
    let end: usize = framed.iter().map(Vec::len).sum();
    framed.push(vec![0u8; 4096]);
    for mode in BOTH_MODES {
        let path = write_segment(dir.path(), 1, &framed);
        let (seen, result) = replay_os(dir.path(), &[1], mode);
        assert_eq!(seen, model);
        let report = result.unwrap();
        assert_eq!((report.torn_tail, report.zero_tail_bytes), (None, 4096));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), end as u64 + 4096);
    }
}

/// A sequence number that does not grow, within a segment or across two, is
/// corruption at that record; forced recovery skips and reports it.
#[test]
fn sequence_regression_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (framed, model) = records(10, 3, 10);
    let repeat = record(model[2].0, &batch(1, 1, 10));
    let cases = [
        vec![framed.clone(), vec![repeat.clone()], vec![]],
        vec![
            framed.clone(),
            vec![repeat.clone(), record(1000, &batch(2, 2, 10))],
        ],
        vec![vec![framed[1].clone(), framed[0].clone()]],
    ];
    for segments in &cases {
        for mode in BOTH_MODES {
            let numbers: Vec<u64> = (1..=segments.len() as u64).collect();
            let paths: Vec<_> = segments
                .iter()
                .zip(&numbers)
                .map(|(s, n)| write_segment(dir.path(), *n, s))
                .collect();
            let bad_segment = if segments.len() == 1 { 0 } else { 1 };
            let bad_offset = if segments.len() == 1 {
                framed[1].len() as u64
            } else {
                0
            };
            let (_, result) = replay_os(dir.path(), &numbers, mode);
            let err = result.unwrap_err();
            assert_corruption(&err, &paths[bad_segment], bad_offset);
            assert!(matches!(
                err,
                Error::Corruption {
                    kind: CorruptionKind::Malformed(_),
                    ..
                }
            ));
            let (_, result) = replay_os(dir.path(), &numbers, forced(mode));
            let report = result.unwrap();
            assert_eq!(report.skipped.len(), 1);
            assert_eq!(
                (&report.skipped[0].0, report.skipped[0].1),
                (&paths[bad_segment], bad_offset)
            );
        }
    }
}

/// A checksummed record whose payload does not decode is corruption, never a
/// torn tail, even as the last record of the last segment.
#[test]
fn undecodable_payload_is_corruption_even_at_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (mut framed, model) = records(1, 2, 10);
    let start: usize = framed.iter().map(Vec::len).sum();
    let mut bad = Vec::new();
    encode_record(&mut bad, b"not a payload");
    framed.push(bad);
    for mode in BOTH_MODES {
        let path = write_segment(dir.path(), 1, &framed);
        let (seen, result) = replay_os(dir.path(), &[1], mode);
        assert_corruption(&result.unwrap_err(), &path, start as u64);
        assert_eq!(seen, model);
        let (seen, result) = replay_os(dir.path(), &[1], forced(mode));
        let report = result.unwrap();
        assert_eq!(seen, model);
        assert!(report.torn_tail.is_none());
        assert_eq!(report.skipped.len(), 1);
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(
            len as usize,
            start + RECORD_HEADER_BYTES + 13,
            "nothing was cut"
        );
    }
}

/// The example record in `docs/FORMAT.md` is exactly what the encoders write.
#[test]
fn format_doc_example_is_what_the_encoder_writes() {
    let mut b = crate::batch::WriteBatch::new();
    b.put(b"k", b"v", 7);
    let expected: [u8; 33] = [
        0x19, 0, 0, 0, // payload_len
        0xff, 0x6c, 0x20, 0x52, // crc
        5, 0, 0, 0, 0, 0, 0, 0, // first_seq
        1, 0, 0, 0, // count
        1, // kind = Put
        7, 0, 0, 0, 0, 0, 0, 0, // ts
        1, b'k', 1, b'v', // key, value
    ];
    assert_eq!(record(5, &b), expected);
}
