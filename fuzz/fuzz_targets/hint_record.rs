//! Fuzzes the hint store's codec (`crates/node/src/hints/record.rs`), what
//! the store reads back from its engine after a restart.
//!
//! Three readings of the input, none of which may panic:
//! - as a hint record: if it decodes, the key is within the key limit, and
//!   the record re-encodes to exactly the bytes it was decoded from;
//! - as a hint engine key: it parses exactly when it has the key's length,
//!   and then re-encodes to the same bytes;
//! - as the parts of a hint (ts, tombstone or value, key and value split
//!   at a point the input picks): encoding then decoding gives them back,
//!   so the decoder is exercised past its header checks even though random
//!   bytes rarely carry a plausible `key_len`.
#![no_main]

use ataman_engine::key::KEY_BYTES_MAX;
use ataman_node::hints::record::{
    HINT_KEY_BYTES, RecordRef, decode_record, encode_record, hint_key, parse_hint_key,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(record) = decode_record(data) {
        assert!(record.key.len() <= KEY_BYTES_MAX);
        let again = encode_record(record.key, record.ts, record.value, record.deadline_ms);
        assert_eq!(again.as_slice(), data, "{record:?} re-encodes differently");
    }

    match parse_hint_key(data) {
        Ok((peer_hash, seq)) => assert_eq!(hint_key(peer_hash, seq).as_slice(), data),
        Err(_) => assert_ne!(data.len(), HINT_KEY_BYTES),
    }

    if let Some((ts, rest)) = data.split_first_chunk::<8>()
        && let Some((&shape, rest)) = rest.split_first()
    {
        let ts = u64::from_le_bytes(*ts);
        let key_len = (usize::from(shape >> 1) % (rest.len() + 1)).min(KEY_BYTES_MAX);
        let (key, value) = rest.split_at(key_len);
        let value = (shape & 1 == 1).then_some(value);
        let key = if value.is_none() { rest } else { key };
        // The timestamp doubles as a deadline (within its bound) for odd timestamps.
        let deadline_ms = (ts & 1 == 1)
            .then_some(ts >> 16)
            .filter(|_| value.is_some());
        if key.len() <= KEY_BYTES_MAX {
            let record = encode_record(key, ts, value, deadline_ms);
            assert_eq!(
                decode_record(&record),
                Ok(RecordRef {
                    ts,
                    key,
                    value,
                    deadline_ms
                })
            );
        }
    }
});
