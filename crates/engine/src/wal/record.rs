//! The frame of one WAL (and manifest) record. (stub: being written)
//!
//! ```text
//! record := payload_len: u32 LE, crc: u32 LE (CRC32C of payload), payload
//! ```

use crate::error::CorruptionKind;

/// Bytes of the record header.
pub const RECORD_HEADER_BYTES: usize = 8;

/// Largest payload a record may declare.
pub const RECORD_PAYLOAD_BYTES_MAX: usize = crate::batch::BATCH_BYTES_MAX + 8;

/// Appends a framed record holding `payload` to `out`.
pub fn encode_record(out: &mut Vec<u8>, payload: &[u8]) {
    let _ = (out, payload);
    todo!()
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
    /// The buffer ends inside the record (`needed` bytes in all).
    Incomplete {
        /// Bytes the whole record would take.
        needed: u64,
    },
    /// The record is malformed or its checksum does not match.
    Corrupt(CorruptionKind),
}

/// Decodes the record at the start of `buf`.
pub fn decode_record(buf: &[u8]) -> Decoded<'_> {
    let _ = buf;
    todo!()
}
