//! Property tests of WAL replay: both modes agree with each other and with
//! the written model, and no input makes the decoders or replay panic.

use crate::batch::decode_payload;
use crate::error::Error;
use crate::wal::record::{Decoded, decode_record, encode_record};
use crate::wal::replay::{ReplayOptions, ReplayReport};
use crate::wal::test_segments::{Applied, BOTH_MODES, records, replay_os, write_segment};
use proptest::prelude::*;
use std::path::Path;

/// Walks `data` as a segment with the raw decoders, the way the
/// `wal_record` fuzz target does (after a bad record, retry a byte later);
/// returns the number of records whose payload decodes.
fn walk_with_decoders(data: &[u8]) -> usize {
    let mut rest = data;
    let mut valid = 0;
    while !rest.is_empty() {
        match decode_record(rest) {
            Decoded::Record { payload, consumed } => {
                let mut again = Vec::new();
                encode_record(&mut again, payload);
                assert_eq!(again.as_slice(), &rest[..consumed]);
                if let Ok(p) = decode_payload(payload) {
                    assert!(p.entries().all(|e| e.is_ok()));
                    assert_eq!(p.entries().count(), p.count as usize);
                    valid += 1;
                }
                rest = &rest[consumed..];
            }
            Decoded::Incomplete { needed } => {
                assert!(needed > rest.len() as u64);
                rest = &rest[1..];
            }
            Decoded::Corrupt(_) => rest = &rest[1..],
        }
    }
    let _ = decode_payload(data);
    valid
}

/// Everything a replay produced, as comparable text.
fn outcome(dir: &Path, seen: &[Applied], result: &Result<ReplayReport, Error>) -> String {
    let text = format!("{seen:?} {result:?}");
    text.replace(&dir.display().to_string(), "<dir>")
}

/// Writes `segments` to a fresh directory and replays them with `opts`.
fn replay_fresh(segments: &[Vec<u8>], opts: ReplayOptions) -> String {
    let dir = tempfile::tempdir().unwrap();
    let numbers: Vec<u64> = (1..=segments.len() as u64).collect();
    for (segment, number) in segments.iter().zip(&numbers) {
        write_segment(dir.path(), *number, std::slice::from_ref(segment));
    }
    let (seen, result) = replay_os(dir.path(), &numbers, opts);
    outcome(dir.path(), &seen, &result)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random segments with a random cut in the last one replay to exactly
    /// the records written before the cut, identically in both modes.
    #[test]
    fn both_modes_match_the_model(
        sizes in prop::collection::vec((0usize..40, 0usize..3000), 1..4),
        cut_permille in 0u64..=1000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 1;
        let mut model = Vec::new();
        let mut segments = Vec::new();
        for (count, value_bytes) in &sizes {
            let (framed, applied) = records(seq, *count, *value_bytes);
            if let Some(last) = applied.last() {
                seq = last.0 + u64::from(last.1);
            }
            segments.push(framed);
            model.push(applied);
        }
        // Cut the last segment somewhere; records wholly before the cut survive.
        let last = segments.len() - 1;
        let last_bytes = segments[last].concat();
        let cut = (last_bytes.len() as u64 * cut_permille / 1000) as usize;
        let mut kept = 0;
        let mut end = 0;
        for r in &segments[last] {
            if end + r.len() > cut { break; }
            end += r.len();
            kept += 1;
        }
        model[last].truncate(kept);
        let expected: Vec<Applied> = model.concat();
        let numbers: Vec<u64> = (1..=segments.len() as u64).collect();
        let mut outcomes = Vec::new();
        for mode in BOTH_MODES {
            for (segment, number) in segments.iter().zip(&numbers) {
                write_segment(dir.path(), *number, segment);
            }
            let path = write_segment(dir.path(), numbers[last], &[last_bytes[..cut].to_vec()]);
            let (seen, result) = replay_os(dir.path(), &numbers, mode);
            let report = result.unwrap();
            prop_assert_eq!(&seen, &expected);
            let torn = (cut > end).then(|| (path.clone(), end as u64, (cut - end) as u64));
            prop_assert_eq!(&report.torn_tail, &torn);
            prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), end as u64);
            outcomes.push(outcome(dir.path(), &seen, &Ok(report)));
        }
        prop_assert_eq!(&outcomes[0], &outcomes[1]);
    }

    /// Arbitrary bytes, alone or after valid records, never make the
    /// decoders or replay panic, and both modes give the same outcome,
    /// forced or not.
    #[test]
    fn garbage_never_panics_and_modes_agree(
        garbage in prop::collection::vec(any::<u8>(), 0..2048),
        valid_before in 0usize..4,
        garbage_first in any::<bool>(),
    ) {
        walk_with_decoders(&garbage);
        let (framed, _) = records(1, valid_before, 16);
        let mut mixed = framed.concat();
        mixed.extend_from_slice(&garbage);
        prop_assert!(walk_with_decoders(&mixed) >= valid_before);
        let segments = if garbage_first {
            vec![garbage.clone(), mixed]
        } else {
            vec![mixed, garbage.clone()]
        };
        for force in [false, true] {
            let outcomes: Vec<String> = BOTH_MODES
                .iter()
                .map(|mode| replay_fresh(&segments, ReplayOptions { force, ..*mode }))
                .collect();
            prop_assert_eq!(&outcomes[0], &outcomes[1]);
        }
    }

    /// Valid segments with a few flipped bytes: both modes agree, forced or
    /// not; forced recovery applies only written records, in order, and
    /// every written record it did not apply lies at or after a reported
    /// skip or torn-tail cut in its segment.
    #[test]
    fn damaged_segments_are_never_silently_dropped(
        counts in prop::collection::vec(1usize..12, 1..4),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let mut seq = 1;
        let mut segments = Vec::new();
        let mut model = Vec::new();
        let mut starts = Vec::new();
        for (number, count) in (1u64..).zip(&counts) {
            let (framed, applied) = records(seq, *count, 24);
            let last = applied.last().unwrap();
            seq = last.0 + u64::from(last.1);
            let mut at = 0u64;
            for (r, a) in framed.iter().zip(applied) {
                starts.push((number, at));
                model.push(a);
                at += r.len() as u64;
            }
            segments.push(framed.concat());
        }
        for (index, xor) in &flips {
            let segment = &mut segments[index.index(counts.len())];
            let byte = index.index(segment.len());
            segment[byte] ^= xor;
        }
        let mut outcomes = Vec::new();
        for force in [false, true] {
            for mode in BOTH_MODES {
                let dir = tempfile::tempdir().unwrap();
                let numbers: Vec<u64> = (1..=segments.len() as u64).collect();
                for (segment, number) in segments.iter().zip(&numbers) {
                    write_segment(dir.path(), *number, std::slice::from_ref(segment));
                }
                let (seen, result) = replay_os(dir.path(), &numbers, ReplayOptions { force, ..mode });
                outcomes.push(outcome(dir.path(), &seen, &result));
                if !force {
                    continue;
                }
                let report = result.unwrap();
                let mut cuts: Vec<(u64, u64)> = report.skipped.iter().map(|s| (&s.0, s.1))
                    .chain(report.torn_tail.iter().map(|t| (&t.0, t.1)))
                    .map(|(path, offset)| {
                        let name = path.file_name().unwrap().to_str().unwrap();
                        (crate::wal::segment::parse_segment_file_name(name).unwrap(), offset)
                    })
                    .collect();
                cuts.sort();
                let mut next = seen.iter().peekable();
                for (written, (number, start)) in model.iter().zip(&starts) {
                    if next.peek() == Some(&written) {
                        next.next();
                        continue;
                    }
                    prop_assert!(
                        cuts.iter().any(|(n, offset)| n == number && offset <= start),
                        "record at {number}:{start} dropped silently: {report:?}"
                    );
                }
                prop_assert!(next.next().is_none(), "applied a record that was never written");
            }
        }
        prop_assert_eq!(&outcomes[0], &outcomes[1]);
        prop_assert_eq!(&outcomes[2], &outcomes[3]);
    }
}
