//! The bytes of a hint in the hint engine: its key (peer hash, seq) and
//! its record (the missed write), specified in `docs/FORMAT.md`, "Hint
//! record".
//!
//! ```text
//! key    := peer_hash: u64 BE, seq: u64 BE          (peer_hash = xxh3_64(peer URL))
//! record := ts: u64 LE, kind: u8, key_len: u32 LE, key, [deadline_ms: u64 LE], [value]
//!           (deadline only for kind 2, value only for kinds 1 and 2)
//! ```
//!
//! Decoders return what is wrong as a string; the store turns it into
//! [`HintError::Corrupt`] naming the engine key. The codec is public for
//! the fuzz target (`fuzz/fuzz_targets/hint_record.rs`), which calls exactly
//! what the store calls.

use super::HintError;
use ataman_engine::Entry;
use ataman_engine::expiry::DEADLINE_MS_MAX;
use ataman_engine::key::KEY_BYTES_MAX;

/// Bytes of a key in the hint engine: peer hash (8) and seq (8), both BE
/// (`docs/FORMAT.md`, "Hint record").
pub const HINT_KEY_BYTES: usize = 16;

/// Bytes of a hint record before the key: ts (8), kind (1), key_len (4)
/// (`docs/FORMAT.md`, "Hint record").
pub const HINT_RECORD_HEADER_BYTES: usize = 13;

/// Record kind: the missed write is a tombstone.
const HINT_KIND_TOMBSTONE: u8 = 0;

/// Record kind: the missed write is a value (possibly empty).
const HINT_KIND_VALUE: u8 = 1;

/// Record kind: the missed write is a value with a deadline (the deadline,
/// u64 LE, follows the key).
const HINT_KIND_EXPIRING: u8 = 2;

/// The engine timestamp every hint is put with (each key is written once).
pub const HINT_PUT_TS: u64 = 1;

/// The engine timestamp of the tombstone that removes a delivered hint.
pub const HINT_DELETE_TS: u64 = 2;

/// The peer's hash: the first half of its hints' keys.
pub(super) fn peer_hash(peer: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(peer.as_bytes())
}

/// The hint engine key of `seq` for the peer hashing to `peer_hash`.
pub fn hint_key(peer_hash: u64, seq: u64) -> [u8; HINT_KEY_BYTES] {
    let mut key = [0u8; HINT_KEY_BYTES];
    key[..8].copy_from_slice(&peer_hash.to_be_bytes());
    key[8..].copy_from_slice(&seq.to_be_bytes());
    key
}

/// `(peer hash, seq)` of a hint engine key.
pub fn parse_hint_key(engine_key: &[u8]) -> Result<(u64, u64), HintError> {
    let (hash, seq) = engine_key
        .split_first_chunk::<8>()
        .and_then(|(hash, rest)| Some((hash, <[u8; 8]>::try_from(rest).ok()?)))
        .ok_or_else(|| {
            corrupt(
                engine_key,
                format!(
                    "key of {} bytes, expected {HINT_KEY_BYTES}",
                    engine_key.len()
                ),
            )
        })?;
    Ok((u64::from_be_bytes(*hash), u64::from_be_bytes(seq)))
}

/// The record of a live entry (`None` for a tombstone), after checking the
/// engine timestamp is the one hints are written with.
pub(super) fn checked_record<'a>(
    engine_key: &[u8],
    entry: &'a Entry,
) -> Result<Option<&'a [u8]>, HintError> {
    let expected = if entry.value.is_some() {
        HINT_PUT_TS
    } else {
        HINT_DELETE_TS
    };
    if entry.ts != expected {
        return Err(corrupt(
            engine_key,
            format!("engine timestamp {}, expected {expected}", entry.ts),
        ));
    }
    Ok(entry.value.as_deref())
}

pub(super) fn corrupt(engine_key: &[u8], reason: String) -> HintError {
    HintError::Corrupt {
        key: hex(engine_key),
        reason,
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A decoded hint record, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The missed write's timestamp.
    pub ts: u64,
    /// The missed write's user key.
    pub key: &'a [u8],
    /// Its value; `None` for a tombstone.
    pub value: Option<&'a [u8]>,
    /// The value's deadline, Unix milliseconds, if it expires.
    pub deadline_ms: Option<u64>,
}

/// Encodes a hint record (`docs/FORMAT.md`, "Hint record"); `key` is at
/// most [`KEY_BYTES_MAX`] bytes (the store checks before it encodes).
/// A deadline goes with a value only (a tombstone's is ignored).
pub fn encode_record(
    key: &[u8],
    ts: u64,
    value: Option<&[u8]>,
    deadline_ms: Option<u64>,
) -> Vec<u8> {
    let value_len = value.map_or(0, <[u8]>::len);
    let mut out = Vec::with_capacity(HINT_RECORD_HEADER_BYTES + key.len() + 8 + value_len);
    out.extend_from_slice(&ts.to_le_bytes());
    let deadline_ms = deadline_ms.filter(|_| value.is_some());
    out.push(match (value, deadline_ms) {
        (Some(_), Some(_)) => HINT_KIND_EXPIRING,
        (Some(_), None) => HINT_KIND_VALUE,
        (None, _) => HINT_KIND_TOMBSTONE,
    });
    // `add` checked key.len() <= KEY_BYTES_MAX, which fits in u32.
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    if let Some(deadline_ms) = deadline_ms {
        out.extend_from_slice(&deadline_ms.to_le_bytes());
    }
    if let Some(v) = value {
        out.extend_from_slice(v);
    }
    debug_assert_eq!(decode_record(&out).map(|r| r.key), Ok(key));
    out
}

/// Decodes a hint record; the error says what is wrong.
pub fn decode_record(record: &[u8]) -> Result<RecordRef<'_>, String> {
    let (ts, rest) = record
        .split_first_chunk::<8>()
        .ok_or_else(|| format!("{} bytes, shorter than the header", record.len()))?;
    let (&kind, rest) = rest
        .split_first()
        .ok_or_else(|| format!("{} bytes, shorter than the header", record.len()))?;
    let (key_len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| format!("{} bytes, shorter than the header", record.len()))?;
    let key_len = u32::from_le_bytes(*key_len) as usize;
    if key_len > KEY_BYTES_MAX {
        return Err(format!(
            "key_len {key_len} exceeds the limit of {KEY_BYTES_MAX}"
        ));
    }
    let (key, value) = rest.split_at_checked(key_len).ok_or_else(|| {
        format!(
            "key_len {key_len} but only {} bytes follow the header",
            rest.len()
        )
    })?;
    let mut deadline_ms = None;
    let value = match kind {
        HINT_KIND_VALUE => Some(value),
        HINT_KIND_EXPIRING => {
            let (deadline, value) = value
                .split_first_chunk::<8>()
                .ok_or_else(|| format!("expiring value of {} bytes, no deadline", value.len()))?;
            let deadline = u64::from_le_bytes(*deadline);
            if deadline > DEADLINE_MS_MAX {
                return Err(format!(
                    "deadline {deadline} ms over the limit of {DEADLINE_MS_MAX}"
                ));
            }
            deadline_ms = Some(deadline);
            Some(value)
        }
        HINT_KIND_TOMBSTONE if value.is_empty() => None,
        HINT_KIND_TOMBSTONE => {
            return Err(format!(
                "tombstone followed by {} bytes of value",
                value.len()
            ));
        }
        other => return Err(format!("unknown kind {other}")),
    };
    Ok(RecordRef {
        ts: u64::from_le_bytes(*ts),
        key,
        value,
        deadline_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bytes of the example in `docs/FORMAT.md`, "Hint record".
    #[test]
    fn format_doc_example_is_what_the_encoder_writes() {
        let record = encode_record(b"k", 7, Some(b"v"), None);
        assert_eq!(record, [7, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, b'k', b'v']);
        let expiring = encode_record(b"k", 7, Some(b"v"), Some(9));
        assert_eq!(
            expiring,
            [
                7, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, b'k', 9, 0, 0, 0, 0, 0, 0, 0, b'v'
            ]
        );
        let tombstone = encode_record(b"k", 7, None, None);
        assert_eq!(tombstone, [7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, b'k']);
        assert_eq!(
            hint_key(0x0102_0304_0506_0708, 5),
            [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 5]
        );
        assert_eq!(parse_hint_key(&hint_key(9, 5)).unwrap(), (9, 5));
    }

    /// Each malformed record shape is rejected with a reason.
    #[test]
    fn decode_rejects_malformed_records() {
        let good = encode_record(b"key", 3, Some(b"value"), None);
        assert!(decode_record(&good).is_ok());
        for n in 0..HINT_RECORD_HEADER_BYTES {
            let err = decode_record(&good[..n]).unwrap_err();
            assert!(err.contains("shorter than the header"), "{err}");
        }
        let err = decode_record(&good[..HINT_RECORD_HEADER_BYTES + 2]).unwrap_err();
        assert!(err.contains("key_len 3"), "{err}");
        let mut long = good.clone();
        long[9..13].copy_from_slice(&(KEY_BYTES_MAX as u32 + 1).to_le_bytes());
        assert!(decode_record(&long).unwrap_err().contains("exceeds"));
        let mut tombstone = good.clone();
        tombstone[8] = HINT_KIND_TOMBSTONE;
        assert!(
            decode_record(&tombstone)
                .unwrap_err()
                .contains("tombstone followed")
        );
        let mut kind = good;
        kind[8] = 3;
        assert!(decode_record(&kind).unwrap_err().contains("unknown kind 3"));
        let short = encode_record(b"key", 3, Some(b""), Some(1));
        assert!(
            decode_record(&short[..short.len() - 1])
                .unwrap_err()
                .contains("no deadline")
        );
        let mut far = encode_record(b"key", 3, Some(b"v"), Some(DEADLINE_MS_MAX));
        far[16..24].copy_from_slice(&(DEADLINE_MS_MAX + 1).to_le_bytes());
        assert!(decode_record(&far).unwrap_err().contains("over the limit"));
    }

    proptest! {
        /// Any bytes decode or fail cleanly; what decodes re-encodes to the
        /// same bytes.
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = decode_record(&bytes) {
                prop_assert_eq!(encode_record(r.key, r.ts, r.value, r.deadline_ms), bytes);
            }
        }

        /// Every hint round-trips through its record.
        #[test]
        fn encode_decode_round_trip(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            ts in any::<u64>(),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            deadline_ms in proptest::option::of(0..=DEADLINE_MS_MAX),
        ) {
            let record = encode_record(&key, ts, value.as_deref(), deadline_ms);
            let r = decode_record(&record).unwrap();
            let deadline_ms = deadline_ms.filter(|_| value.is_some());
            prop_assert_eq!(r, RecordRef { ts, key: &key, value: value.as_deref(), deadline_ms });
        }
    }
}
