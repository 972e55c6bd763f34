//! Replaying WAL segments at open. (stub: being written)

use crate::batch::Payload;
use crate::error::Result;
use crate::fs::FileSystem;
use std::path::{Path, PathBuf};

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
}

/// Replays segments `segments` (numbers, ascending) of `dir` in order,
/// calling `apply` for every valid payload.
pub fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    segments: &[u64],
    opts: ReplayOptions,
    apply: &mut dyn FnMut(Payload<'_>) -> Result<()>,
) -> Result<ReplayReport> {
    let _ = (fs, dir, segments, opts, apply);
    todo!()
}
