//! Fuzzes the WAL decoders: arbitrary bytes walked as a segment with
//! `decode_record`, every checksummed payload fed to `decode_payload` and
//! its entries iterated, and the bytes themselves decoded as a payload.
//!
//! Nothing may panic; a record that decodes must re-encode to the same
//! bytes; a payload that decodes must yield exactly `count` valid entries.
//! The engine's `wal::replay_props` proptests walk the same decoders.
#![no_main]

use ataman_engine::batch::{BatchIter, decode_payload};
use ataman_engine::wal::record::{Decoded, RECORD_HEADER_BYTES, decode_record, encode_record};

/// Checks one payload: if it decodes, every entry decodes and the count matches.
fn check_payload(payload: &[u8]) {
    if let Ok(decoded) = decode_payload(payload) {
        let mut entries = 0u64;
        for entry in decoded.entries() {
            assert!(entry.is_ok(), "a validated payload yielded a bad entry");
            entries += 1;
        }
        assert_eq!(entries, u64::from(decoded.count));
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The bytes as a segment: records from offset 0; after a bad record,
    // look for the next one a byte later, so every offset gets decoded.
    let mut rest = data;
    while !rest.is_empty() {
        match decode_record(rest) {
            Decoded::Record { payload, consumed } => {
                assert!(consumed > RECORD_HEADER_BYTES && consumed <= rest.len());
                let mut again = Vec::new();
                encode_record(&mut again, payload);
                assert_eq!(again.as_slice(), &rest[..consumed]);
                check_payload(payload);
                rest = &rest[consumed..];
            }
            Decoded::Incomplete { needed } => {
                assert!(needed > rest.len() as u64);
                rest = &rest[1..];
            }
            Decoded::Corrupt(_) => rest = &rest[1..],
        }
    }
    // The bytes as a payload and as a bare batch.
    check_payload(data);
    if let Ok(iter) = BatchIter::new(data) {
        for entry in iter {
            if entry.is_err() {
                break;
            }
        }
    }
});
