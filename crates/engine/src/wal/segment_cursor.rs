//! Reading one WAL segment record by record, in bounded memory.
//!
//! The cursor keeps a window of the file in memory: bytes
//! `[window_offset, window_offset + window.len())`. Probing a record at an
//! offset makes sure the window covers the record's header (reading a
//! [`SEGMENT_READ_BYTES`] block at a time), then, if the header declares a
//! longer record, grows the window to exactly that record, never past the
//! end of the file. Bytes before the probed offset are dropped and the
//! partial record at the end of a block is carried over to the front, so a
//! record spanning two blocks is read once.
//!
//! # Memory bound
//! The window holds at most `max(SEGMENT_READ_BYTES, largest record read)`
//! bytes, and a record only counts once its header's length is plausible
//! (`1..=RECORD_PAYLOAD_BYTES_MAX`) *and* the file is long enough to hold
//! it, so a corrupt length near the end of a file never allocates more than
//! the bytes the file really has. After a large record the buffer's spare
//! capacity is released again.

use crate::batch::decode_payload;
use crate::error::CorruptionKind;
use crate::fs::ReadableFile;
use crate::wal::record::{Decoded, RECORD_HEADER_BYTES, RECORD_PAYLOAD_BYTES_MAX, decode_record};
use std::io;
use std::sync::Arc;

/// Bytes read from a segment per read call when records are small
/// (`docs/FORMAT.md`, "WAL segment": records follow each other from offset 0).
pub const SEGMENT_READ_BYTES: usize = 1024 * 1024;

/// Capacity the window may keep between reads; more is released after a large record.
const WINDOW_RETAINED_BYTES_MAX: usize = 2 * SEGMENT_READ_BYTES;

/// What is at an offset of a segment.
#[derive(Debug)]
pub enum Probe<'a> {
    /// A verified record whose payload decodes.
    Valid {
        /// Sequence number of the payload's first entry.
        first_seq: u64,
        /// Entries in the batch.
        count: u32,
        /// The whole record payload (sequence number and batch).
        payload: &'a [u8],
        /// Header plus payload bytes.
        consumed: u64,
    },
    /// A record that is not valid.
    Bad {
        /// Why.
        kind: CorruptionKind,
        /// The payload length the header declares, when the header is there and plausible.
        declared_len: Option<u64>,
        /// True when a torn write can explain it (the frame is cut short or
        /// its checksum fails); false for a checksummed record whose payload
        /// does not decode, which a tear cannot produce.
        tearable: bool,
    },
}

/// A reading position over one open segment file.
///
/// # Invariants
/// `window` holds the file's bytes `[window_offset, window_offset + window.len())`
/// and `window_offset + window.len() <= file_len`.
pub struct SegmentCursor {
    file: Arc<dyn ReadableFile>,
    file_len: u64,
    window: Vec<u8>,
    window_offset: u64,
}

impl SegmentCursor {
    /// A cursor over `file`, nothing read yet.
    pub fn new(file: Arc<dyn ReadableFile>) -> Self {
        let file_len = file.len();
        SegmentCursor {
            file,
            file_len,
            window: Vec::new(),
            window_offset: 0,
        }
    }

    /// The file's length when it was opened.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Decodes and validates the record at `offset` (`offset < file_len`).
    pub fn probe(&mut self, offset: u64) -> io::Result<Probe<'_>> {
        debug_assert!(offset < self.file_len);
        let available = self.file_len - offset;
        let first = decode_record(self.window_at(offset, RECORD_HEADER_BYTES)?);
        let needed = match first {
            Decoded::Incomplete { needed } if needed <= available => needed,
            _ => 0,
        };
        let bytes = if needed > 0 {
            // The header is here and its length is plausible (decode_record
            // checked it) and fits in the file: read the whole record.
            let needed = usize::try_from(needed).map_err(io::Error::other)?;
            self.window_at(offset, needed)?
        } else {
            self.window_at(offset, RECORD_HEADER_BYTES)?
        };
        Ok(classify(bytes, available))
    }

    /// The first offset at or after `offset` holding a non-zero byte, if any.
    pub fn first_nonzero_from(&mut self, offset: u64) -> io::Result<Option<u64>> {
        let mut at = offset;
        while at < self.file_len {
            let window = self.window_at(at, SEGMENT_READ_BYTES)?;
            if window.is_empty() {
                break;
            }
            if let Some(i) = window.iter().position(|&b| b != 0) {
                return Ok(Some(at + i as u64));
            }
            at += window.len() as u64;
        }
        Ok(None)
    }

    /// True when every byte from `offset` to the end of the file is zero:
    /// space the WAL writer preallocated and never wrote.
    pub fn is_zero_from(&mut self, offset: u64) -> io::Result<bool> {
        Ok(self.first_nonzero_from(offset)?.is_none())
    }

    /// The window from `offset`, holding at least `want` bytes or up to the end of the file.
    fn window_at(&mut self, offset: u64, want: usize) -> io::Result<&[u8]> {
        let available = self.file_len.saturating_sub(offset);
        let want = usize::try_from(available).map_or(want, |a| want.min(a));
        let window_end = self.window_offset + self.window.len() as u64;
        let inside = offset >= self.window_offset && offset <= window_end;
        if !inside || window_end - offset < want as u64 {
            self.refill(offset, want, available)?;
        }
        let start = usize::try_from(offset - self.window_offset).map_err(io::Error::other)?;
        Ok(&self.window[start..])
    }

    /// Moves the window to start at `offset` and fills it with at least `want` bytes.
    fn refill(&mut self, offset: u64, want: usize, available: u64) -> io::Result<()> {
        let window_end = self.window_offset + self.window.len() as u64;
        if offset >= self.window_offset && offset <= window_end {
            // Carry the bytes from `offset` on over to the front.
            let drop = usize::try_from(offset - self.window_offset).map_err(io::Error::other)?;
            self.window.drain(..drop);
        } else {
            self.window.clear();
        }
        self.window_offset = offset;
        let target = usize::try_from(available).map_or(want.max(SEGMENT_READ_BYTES), |a| {
            want.max(SEGMENT_READ_BYTES).min(a)
        });
        if target <= WINDOW_RETAINED_BYTES_MAX && self.window.capacity() > WINDOW_RETAINED_BYTES_MAX
        {
            self.window.shrink_to(WINDOW_RETAINED_BYTES_MAX);
        }
        let have = self.window.len();
        if target > have {
            self.window.resize(target, 0);
            let read_at = offset + have as u64;
            if let Err(e) = self.file.read_exact_at(&mut self.window[have..], read_at) {
                self.window.truncate(have);
                return Err(e);
            }
        }
        debug_assert!(self.window_offset + self.window.len() as u64 <= self.file_len);
        Ok(())
    }
}

/// Classifies the record at the start of `bytes` (`available` bytes are left in the file).
fn classify(bytes: &[u8], available: u64) -> Probe<'_> {
    match decode_record(bytes) {
        Decoded::Record { payload, consumed } => match decode_payload(payload) {
            Ok(p) => Probe::Valid {
                first_seq: p.first_seq,
                count: p.count,
                payload,
                consumed: consumed as u64,
            },
            Err(reason) => Probe::Bad {
                kind: CorruptionKind::Malformed(format!(
                    "record payload does not decode: {reason}"
                )),
                declared_len: Some(payload.len() as u64),
                tearable: false,
            },
        },
        Decoded::Incomplete { needed } => Probe::Bad {
            kind: CorruptionKind::Truncated { needed, available },
            declared_len: declared_len(bytes),
            tearable: true,
        },
        Decoded::Corrupt(kind) => Probe::Bad {
            kind,
            declared_len: declared_len(bytes),
            tearable: true,
        },
    }
}

/// The payload length a record header declares, if the header is whole and the length plausible.
pub fn declared_len(bytes: &[u8]) -> Option<u64> {
    let len_bytes: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    if bytes.len() < RECORD_HEADER_BYTES {
        return None;
    }
    let len = u32::from_le_bytes(len_bytes) as usize;
    (1..=RECORD_PAYLOAD_BYTES_MAX)
        .contains(&len)
        .then_some(len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, OsFs};
    use crate::wal::test_segments::{batch, record};

    /// Opens `bytes` as a segment file through the real file system.
    fn cursor_over(bytes: &[u8]) -> (tempfile::TempDir, SegmentCursor) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.wal");
        std::fs::write(&path, bytes).unwrap();
        let file = OsFs.open_read(&path).unwrap();
        (dir, SegmentCursor::new(file))
    }

    /// A header declaring a huge length near the end of the file is a
    /// tearable truncation, and the window never grows past the file's bytes.
    #[test]
    fn corrupt_length_near_eof_allocates_only_the_file() {
        let mut bytes = (100u32 * 1024 * 1024).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[7u8; 16]);
        let (_dir, mut cursor) = cursor_over(&bytes);
        match cursor.probe(0).unwrap() {
            Probe::Bad {
                kind: CorruptionKind::Truncated { needed, available },
                declared_len,
                tearable,
            } => {
                assert_eq!((needed, available), (100 * 1024 * 1024 + 8, 20));
                assert_eq!(declared_len, Some(100 * 1024 * 1024));
                assert!(tearable);
            }
            other => panic!("expected a truncation, got {other:?}"),
        }
        assert!(
            cursor.window.capacity() <= 64,
            "{}",
            cursor.window.capacity()
        );
    }

    /// A record larger than a read block, starting mid-block, decodes whole,
    /// and the window gives back its extra capacity afterwards.
    #[test]
    fn record_spanning_read_blocks_decodes_and_memory_is_released() {
        let small = record(1, &batch(1, 1, 100));
        let big = record(2, &batch(2, 1, 5 * SEGMENT_READ_BYTES));
        let tail = record(3, &batch(3, 1, 100));
        let bytes = [small.clone(), big.clone(), tail].concat();
        let (_dir, mut cursor) = cursor_over(&bytes);
        let mut offset = 0;
        let mut firsts = Vec::new();
        while offset < cursor.file_len() {
            match cursor.probe(offset).unwrap() {
                Probe::Valid {
                    first_seq,
                    consumed,
                    ..
                } => {
                    firsts.push(first_seq);
                    offset += consumed;
                }
                other => panic!("bad record at {offset}: {other:?}"),
            }
        }
        assert_eq!(firsts, [1, 2, 3]);
        assert!(cursor.window.capacity() <= WINDOW_RETAINED_BYTES_MAX);
    }
}
