//! The reading half of WAL replay: walks segments, verifies and decodes
//! records, decides torn tail versus corruption, and groups the results into
//! [`Chunk`]s for the applier.
//!
//! The scanner has no side effects on the files: cutting a torn tail is an
//! event the applier carries out after applying every record before it, so
//! replay with and without the reader thread does exactly the same things in
//! the same order (`docs/FORMAT.md`, "Replay rules").

use crate::error::{CorruptionKind, Error};
use crate::fs::FileSystem;
use crate::wal::record::RECORD_HEADER_BYTES;
use crate::wal::segment::segment_file_name;
use crate::wal::segment_cursor::{Probe, SegmentCursor};
use std::path::{Path, PathBuf};

/// Payload bytes after which the scanner hands a chunk to the applier.
/// A chunk holds whole records, so one record larger than this makes a
/// chunk of its own.
pub const CHUNK_PAYLOAD_BYTES_TARGET: usize = 128 * 1024;

/// Records and events read ahead of the applier, in file order.
#[derive(Debug, Default)]
pub struct Chunk {
    /// The record payloads (sequence number and batch), back to back.
    pub data: Vec<u8>,
    /// What happened, in order.
    pub events: Vec<Event>,
}

/// One thing the applier must do.
#[derive(Debug)]
pub enum Event {
    /// Apply the record whose payload is `data[start..end]` of the chunk.
    Record {
        /// Number of the segment the record was read from.
        segment: u64,
        /// Start of the payload in the chunk's data.
        start: usize,
        /// End of the payload in the chunk's data.
        end: usize,
        /// The payload's first sequence number.
        first_seq: u64,
        /// Entries in the batch.
        count: u32,
    },
    /// Forced recovery skipped a bad record: file, offset, reason.
    Skipped(PathBuf, u64, String),
    /// The last segment ends in a torn tail: cut it. Always the final event.
    TornTail {
        /// The segment.
        path: PathBuf,
        /// Offset of the first bad byte, the new length.
        offset: u64,
        /// Bytes after `offset`.
        bytes_dropped: u64,
    },
    /// The rest of a segment is zeros: preallocated space never written.
    ZeroTail {
        /// Bytes of zeros.
        bytes: u64,
    },
    /// Replay must stop with this error. Always the final event.
    Failed(Error),
}

/// The segment being read.
struct Current {
    /// The segment's number.
    number: u64,
    path: PathBuf,
    cursor: SegmentCursor,
    offset: u64,
    is_last: bool,
}

/// Walks the segments of one replay.
///
/// # Thread safety
/// Owned by one thread (the reader thread, or the caller's when inline).
pub struct Scanner<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    segments: &'a [u64],
    force: bool,
    next_segment: usize,
    current: Option<Current>,
    /// Last sequence number of the last record handed out.
    last_seq: Option<u64>,
    finished: bool,
}

impl<'a> Scanner<'a> {
    /// A scanner over segments `segments` (ascending) of `dir`.
    pub fn new(fs: &'a dyn FileSystem, dir: &'a Path, segments: &'a [u64], force: bool) -> Self {
        Scanner {
            fs,
            dir,
            segments,
            force,
            next_segment: 0,
            current: None,
            last_seq: None,
            finished: false,
        }
    }

    /// The next chunk, or `None` once everything (including a final event) was handed out.
    pub fn next_chunk(&mut self) -> Option<Chunk> {
        if self.finished {
            return None;
        }
        let mut chunk = Chunk::default();
        while !self.finished && chunk.data.len() < CHUNK_PAYLOAD_BYTES_TARGET {
            if let Err(e) = self.step(&mut chunk) {
                chunk.events.push(Event::Failed(e));
                self.finished = true;
            }
        }
        Some(chunk)
    }

    /// Reads one record (or opens the next segment), adding what it found to `chunk`.
    fn step(&mut self, chunk: &mut Chunk) -> Result<(), Error> {
        let Some(current) = self.current.as_mut() else {
            return self.open_next();
        };
        if current.offset >= current.cursor.file_len() {
            self.current = None;
            return Ok(());
        }
        let offset = current.offset;
        let path = &current.path;
        let probe = current
            .cursor
            .probe(offset)
            .map_err(|e| Error::io(path.clone(), e))?;
        let (kind, declared_len, tearable) = match probe {
            Probe::Valid {
                first_seq,
                count,
                payload,
                consumed,
            } => {
                let in_order = self.last_seq.is_none_or(|last| first_seq > last);
                if in_order {
                    let start = chunk.data.len();
                    chunk.data.extend_from_slice(payload);
                    chunk.events.push(Event::Record {
                        segment: current.number,
                        start,
                        end: chunk.data.len(),
                        first_seq,
                        count,
                    });
                    // decode_payload checked first_seq + count <= SEQ_MAX.
                    self.last_seq = Some(first_seq + u64::from(count) - 1);
                    current.offset += consumed;
                    return Ok(());
                }
                let kind = CorruptionKind::Malformed(format!(
                    "sequence number {first_seq} does not follow {}",
                    self.last_seq.unwrap_or(0)
                ));
                (kind, Some(consumed - RECORD_HEADER_BYTES as u64), false)
            }
            Probe::Bad {
                kind,
                declared_len,
                tearable,
            } => (kind, declared_len, tearable),
        };
        self.bad_record(chunk, kind, declared_len, tearable)
    }

    /// Opens the next segment, or finishes when there is none.
    fn open_next(&mut self) -> Result<(), Error> {
        let Some(&number) = self.segments.get(self.next_segment) else {
            self.finished = true;
            return Ok(());
        };
        self.next_segment += 1;
        let path = self.dir.join(segment_file_name(number));
        let file = self
            .fs
            .open_read(&path)
            .map_err(|e| Error::io(path.clone(), e))?;
        self.current = Some(Current {
            number,
            path,
            cursor: SegmentCursor::new(file),
            offset: 0,
            is_last: self.next_segment == self.segments.len(),
        });
        Ok(())
    }

    /// Handles a bad record at the current offset: a torn tail, an error, or
    /// (forced) a skip to the next valid record or the end of the segment.
    fn bad_record(
        &mut self,
        chunk: &mut Chunk,
        kind: CorruptionKind,
        declared_len: Option<u64>,
        tearable: bool,
    ) -> Result<(), Error> {
        let Some(current) = self.current.as_mut() else {
            return Ok(());
        };
        let offset = current.offset;
        let file_len = current.cursor.file_len();
        // Zeros to the end of the file are the segment's preallocated,
        // never-written space: the log of this segment ends here. (The
        // writer syncs a segment's records before moving to the next one,
        // so zeros cannot stand for lost records.)
        if tearable
            && current
                .cursor
                .is_zero_from(offset)
                .map_err(|e| Error::io(current.path.clone(), e))?
        {
            chunk.events.push(Event::ZeroTail {
                bytes: file_len - offset,
            });
            current.offset = file_len;
            return Ok(());
        }
        let resume = match declared_len {
            Some(len) => {
                let next = offset + RECORD_HEADER_BYTES as u64 + len;
                let valid_next = next < file_len
                    && match current.cursor.probe(next) {
                        Ok(probe) => matches!(probe, Probe::Valid { .. }),
                        Err(e) => return Err(Error::io(current.path.clone(), e)),
                    };
                valid_next.then_some(next)
            }
            None => None,
        };
        // A length damaged in place points nowhere useful: look for any
        // valid record further on. Finding one means this is damage in the
        // middle of the log, not a torn final write (a torn write leaves
        // nothing valid after it).
        let resume = match resume {
            Some(next) => Some(next),
            None => find_valid_record(&mut current.cursor, offset + 1)
                .map_err(|e| Error::io(current.path.clone(), e))?,
        };
        if current.is_last && tearable && resume.is_none() {
            chunk.events.push(Event::TornTail {
                path: current.path.clone(),
                offset,
                bytes_dropped: file_len - offset,
            });
            self.finished = true;
            return Ok(());
        }
        if !self.force {
            return Err(Error::corruption(current.path.clone(), offset, kind));
        }
        let reason = match resume {
            Some(next) => format!("{kind}; resumed at the next valid record at {next}"),
            None => format!(
                "{kind}; no valid record follows, skipped the rest of the segment ({} bytes)",
                file_len - offset
            ),
        };
        chunk
            .events
            .push(Event::Skipped(current.path.clone(), offset, reason));
        current.offset = resume.unwrap_or(file_len);
        Ok(())
    }
}

/// The first offset at or after `from` where a valid record starts.
///
/// Probes every byte offset; only a header whose length fits the rest of
/// the file costs a checksum, so a torn tail of garbage or zeros is scanned
/// at memory speed. Runs only when a bad record was found.
fn find_valid_record(cursor: &mut SegmentCursor, from: u64) -> std::io::Result<Option<u64>> {
    let file_len = cursor.file_len();
    let mut at = from;
    while at + RECORD_HEADER_BYTES as u64 <= file_len {
        // A record's length is at least 1, so one of its first four bytes
        // is non-zero: runs of zeros (preallocated space) are skipped whole.
        match cursor.first_nonzero_from(at)? {
            None => return Ok(None),
            Some(nz) if nz >= at + 4 => {
                at = nz - 3;
                continue;
            }
            Some(_) => {}
        }
        if matches!(cursor.probe(at)?, Probe::Valid { .. }) {
            return Ok(Some(at));
        }
        at += 1;
    }
    Ok(None)
}
