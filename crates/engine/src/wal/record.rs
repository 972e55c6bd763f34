//! The frame of one WAL (and manifest) record.
//!
//! `docs/FORMAT.md`, "Record frame":
//!
//! ```text
//! record := payload_len: u32 LE, crc: u32 LE, payload: payload_len bytes
//! crc    := CRC32C over payload_len (4 bytes LE) followed by payload
//! ```
//!
//! The length is covered by the checksum, so a torn or flipped length is
//! caught like a flipped payload byte. A zero-length payload is malformed
//! (no record the engine writes is empty), which also makes a run of zero
//! bytes (a preallocated or zero-filled tail) decode as corrupt, not as
//! empty records.

use crate::error::CorruptionKind;

/// Bytes of the record header.
pub const RECORD_HEADER_BYTES: usize = 8;

/// Largest payload a record may declare.
pub const RECORD_PAYLOAD_BYTES_MAX: usize = crate::batch::BATCH_BYTES_MAX + 8;

fn record_crc(len_bytes: [u8; 4], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len_bytes), payload)
}

/// Appends a framed record holding `payload` to `out`.
pub fn encode_record(out: &mut Vec<u8>, payload: &[u8]) {
    assert!(!payload.is_empty() && payload.len() <= RECORD_PAYLOAD_BYTES_MAX);
    let len_bytes = (payload.len() as u32).to_le_bytes();
    out.reserve(RECORD_HEADER_BYTES + payload.len());
    out.extend_from_slice(&len_bytes);
    out.extend_from_slice(&record_crc(len_bytes, payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The outcome of decoding one record at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole, verified record: its payload and the bytes it took.
    Record {
        /// The payload.
        payload: &'a [u8],
        /// Header plus payload bytes.
        consumed: usize,
    },
    /// The buffer ends inside the record (`needed` bytes in all, as far as known).
    Incomplete {
        /// Bytes the whole record would take (the header size if even that is missing).
        needed: u64,
    },
    /// The record is malformed or its checksum does not match.
    Corrupt(CorruptionKind),
}

/// Decodes the record at the start of `buf`.
pub fn decode_record(buf: &[u8]) -> Decoded<'_> {
    let Some(header) = buf.get(..RECORD_HEADER_BYTES) else {
        return Decoded::Incomplete {
            needed: RECORD_HEADER_BYTES as u64,
        };
    };
    let len_bytes = [header[0], header[1], header[2], header[3]];
    let len = u32::from_le_bytes(len_bytes) as usize;
    let expected = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len == 0 || len > RECORD_PAYLOAD_BYTES_MAX {
        return Decoded::Corrupt(CorruptionKind::Malformed(format!(
            "record length {len} outside 1..={RECORD_PAYLOAD_BYTES_MAX}"
        )));
    }
    let needed = RECORD_HEADER_BYTES + len;
    let Some(payload) = buf.get(RECORD_HEADER_BYTES..needed) else {
        return Decoded::Incomplete {
            needed: needed as u64,
        };
    };
    let got = record_crc(len_bytes, payload);
    if got != expected {
        return Decoded::Corrupt(CorruptionKind::ChecksumMismatch { expected, got });
    }
    Decoded::Record {
        payload,
        consumed: needed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record round-trips, and every flipped bit and every truncation is detected.
    #[test]
    fn round_trip_and_detects_damage() {
        let mut buf = Vec::new();
        encode_record(&mut buf, b"hello wal");
        assert_eq!(
            decode_record(&buf),
            Decoded::Record {
                payload: b"hello wal",
                consumed: buf.len()
            }
        );
        for cut in 0..buf.len() {
            assert!(matches!(
                decode_record(&buf[..cut]),
                Decoded::Incomplete { .. }
            ));
        }
        for byte in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[byte] ^= 1 << bit;
                assert!(
                    !matches!(decode_record(&bad), Decoded::Record { payload, .. } if payload == b"hello wal"),
                    "flip of byte {byte} bit {bit} went unnoticed"
                );
            }
        }
        assert!(matches!(decode_record(&[0u8; 64]), Decoded::Corrupt(_)));
    }
}
