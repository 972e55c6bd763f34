//! Replaying WAL segments at open.
//!
//! Replay is split in two halves that talk through chunks (`replay_scan::Chunk`):
//! - the scanner (`wal::replay_scan`) reads segments in bounded
//!   memory, verifies checksums, decodes and validates payloads, checks that
//!   sequence numbers grow, and tells a torn tail from corruption;
//! - the applier (here) calls `apply` for every record, collects the
//!   report, and carries out the one write replay does: cutting a torn tail.
//!
//! With [`ReplayOptions::reader_thread`] the scanner runs on its own thread
//! (`wal::reader_thread`), at most two chunks ahead; without it the
//! same scanner runs inline. Either way the applier sees the same chunks in
//! the same order, so both modes give identical results and reports.
//!
//! The rules (torn tail, corruption, forced recovery) are specified in
//! `docs/FORMAT.md`, "Replay rules".

use crate::batch::Payload;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::wal::reader_thread;
use crate::wal::replay_scan::{Chunk, Event, Scanner};
use std::path::{Path, PathBuf};

/// Bytes of the sequence number in front of the batch in a WAL payload
/// (`docs/FORMAT.md`, "Payload").
const PAYLOAD_SEQ_BYTES: usize = 8;

/// How to replay.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// Read and decode in a separate reader thread, at most two batches ahead.
    pub reader_thread: bool,
    /// Skip bad records that are not a torn tail (and report them) instead of failing.
    pub force: bool,
}

/// What a replay found.
#[derive(Debug, Default, Clone)]
pub struct ReplayReport {
    /// Records applied.
    pub records: u64,
    /// Batch entries applied.
    pub entries: u64,
    /// Payload bytes applied.
    pub bytes: u64,
    /// Highest sequence number applied (0 if none).
    pub last_seq: u64,
    /// A torn tail cut from the last segment: file, offset of the cut, bytes dropped.
    pub torn_tail: Option<(PathBuf, u64, u64)>,
    /// Records skipped by forced recovery: file, offset, reason.
    pub skipped: Vec<(PathBuf, u64, String)>,
    /// Bytes of preallocated, never-written space after the last records of segments.
    pub zero_tail_bytes: u64,
}

/// Replays segments `segments` (numbers, ascending) of `dir` in order,
/// calling `apply` for every valid payload with the number of the segment
/// it was read from (non-decreasing from call to call).
///
/// Errors: [`Error::Io`] naming a segment that is missing or unreadable (or
/// a torn tail that could not be cut); [`Error::Corruption`] naming the file
/// and offset of a bad record that is not a torn tail (unless
/// `opts.force`); [`Error::InvalidArgument`] when `segments` is not strictly
/// ascending; any error `apply` returns, as is.
pub fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    segments: &[u64],
    opts: ReplayOptions,
    apply: &mut dyn FnMut(u64, Payload<'_>) -> Result<()>,
) -> Result<ReplayReport> {
    if !segments.windows(2).all(|pair| pair[0] < pair[1]) {
        return Err(Error::InvalidArgument(format!(
            "WAL segments to replay are not strictly ascending: {segments:?}"
        )));
    }
    let mut scanner = Scanner::new(fs, dir, segments, opts.force);
    let mut applier = Applier {
        fs,
        apply,
        report: ReplayReport::default(),
    };
    if opts.reader_thread {
        reader_thread::run(scanner, dir, &mut |chunk| applier.apply_chunk(chunk))?;
    } else {
        while let Some(chunk) = scanner.next_chunk() {
            applier.apply_chunk(chunk)?;
        }
    }
    Ok(applier.report)
}

/// The applying half: runs on the caller's thread in both modes.
struct Applier<'a> {
    fs: &'a dyn FileSystem,
    apply: &'a mut dyn FnMut(u64, Payload<'_>) -> Result<()>,
    report: ReplayReport,
}

impl Applier<'_> {
    /// Applies the records of a chunk and carries out its events, in order.
    fn apply_chunk(&mut self, chunk: Chunk) -> Result<()> {
        let Chunk { data, events } = chunk;
        for event in events {
            match event {
                Event::Record {
                    segment,
                    start,
                    end,
                    first_seq,
                    count,
                } => {
                    // The scanner validated the payload with decode_payload,
                    // so it is at least the sequence number long.
                    let payload = &data[start..end];
                    let batch = &payload[PAYLOAD_SEQ_BYTES..];
                    (self.apply)(
                        segment,
                        Payload {
                            first_seq,
                            count,
                            batch,
                        },
                    )?;
                    let last_seq = first_seq + u64::from(count) - 1;
                    debug_assert!(self.report.records == 0 || last_seq > self.report.last_seq);
                    self.report.records += 1;
                    self.report.entries += u64::from(count);
                    self.report.bytes += payload.len() as u64;
                    self.report.last_seq = last_seq;
                }
                Event::Skipped(path, offset, reason) => {
                    self.report.skipped.push((path, offset, reason));
                }
                Event::TornTail {
                    path,
                    offset,
                    bytes_dropped,
                } => {
                    self.fs
                        .truncate(&path, offset)
                        .map_err(|e| Error::io(path.clone(), e))?;
                    self.report.torn_tail = Some((path, offset, bytes_dropped));
                }
                Event::ZeroTail { bytes } => self.report.zero_tail_bytes += bytes,
                Event::Failed(e) => return Err(e),
            }
        }
        Ok(())
    }
}
