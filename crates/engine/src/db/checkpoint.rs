//! A checkpoint: the store as it was at one point of its write order, in a
//! new directory that opens as an ordinary engine directory, taken while the
//! engine goes on serving reads and writes.
//!
//! # Protocol
//! 1. **The point.** A `WriteRequest::Checkpoint` goes through the write
//!    queue; the tx thread, between two batches, hands back the current
//!    read view (`SuperVersion`) and the last sequence number it applied,
//!    `S`. Every batch applied before the request is at or below `S` and in
//!    that view (its memtable, its immutable memtables or its tables: an
//!    entry only moves from one to the next, and a view is replaced whole);
//!    every batch applied after it is above `S`. So a write acknowledged
//!    before [`checkpoint`] was called is in the checkpoint, and a write
//!    submitted after it returned is not.
//! 2. **The tables, linked.** The view's SSTables are hard-linked into the
//!    directory (the same bytes, no copy). The view holds each table (an
//!    `Arc`), so the reap thread cannot remove one before its link exists;
//!    after that the link keeps its bytes on disk, whatever the engine
//!    does. SSTables are never modified once written.
//! 3. **The WAL tail, as a table.** The entries of the view's memtables up
//!    to `S` (what the WAL tail holds) are written as one new level-0 table
//!    numbered above every linked one, by the flush's own table writer.
//!    Not a byte copy of the live WAL segment: its writer appends while a
//!    copy reads, and a copy cut inside a record would open as a torn or
//!    corrupt tail. The memtables hold exactly the entries, filtered by
//!    sequence number.
//! 4. **The manifest.** A manifest naming exactly those tables, with
//!    `last_seq = S` and no live WAL segment, written as the engine writes
//!    its own (temp file, fsync, rename, fsync of the directory).
//! 5. The directory is fsynced: every name in it is durable.
//!
//! The report names the tables whose whole-file CRC-32C the engine knows
//! from writing them in this process (`LiveTable::file_crc32c`): a caller
//! recording checksums (the node's `BACKUP-MANIFEST`) need not read them
//! back, so a checkpoint of tables written since the start reads nothing.
//!
//! Opening the directory is an ordinary open; it replays no WAL.
//!
//! Nothing here waits on the request path: the tx thread's part is one
//! pointer load; the links and the table are written on the caller's
//! thread. Flushes and compactions go on meanwhile (they replace views;
//! the checkpoint keeps its own).
//!
//! The directory must not exist; a failure leaves it half-written, for the
//! caller to remove (the node writes a checkpoint under a temporary name and
//! renames it into place when complete).

use super::shared::{Shared, WriteRequest};
use crate::compaction::output::{DropPolicy, TableSink, write_tables};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::manifest::{FileMeta, ManifestState, ManifestWriter, VersionEdit};
use crate::sst::table_file_name;
use crate::version::SuperVersion;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReport {
    /// The last sequence number in it: every batch at or below is in it,
    /// none above.
    pub seq: u64,
    /// The tables linked from the engine's directory: file name and bytes.
    /// Their bytes are shared with the live store while it still uses them.
    pub linked: Vec<(String, u64)>,
    /// The files written for it (the memtables' table, if any): name and bytes.
    pub written: Vec<(String, u64)>,
    /// The tables (linked or written) whose whole-file CRC-32C the engine
    /// knows from writing them in this process: name, bytes and CRC. A
    /// caller recording checksums takes these instead of reading the files
    /// back; a table opened from the manifest is not here.
    pub known_crc32c: Vec<(String, u64, u32)>,
}

impl CheckpointReport {
    /// Bytes of the linked tables: what the checkpoint pins on disk.
    pub fn linked_bytes(&self) -> u64 {
        self.linked.iter().map(|(_, b)| b).sum()
    }
}

/// Takes the point of step 1: the tx thread's view and `S`.
fn take_point(shared: &Shared) -> Result<(Arc<SuperVersion>, u64)> {
    shared.check_poisoned()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let request = WriteRequest::Checkpoint(Box::new(move |sv, seq| {
        let _ = tx.send((sv, seq));
    }));
    if shared.write_queue.push_unbounded(request).is_err() {
        return Err(Error::Closed);
    }
    rx.recv().map_err(|_| Error::Closed)
}

/// Writes a checkpoint of the engine into `dir`, which must not exist
/// (module header: the protocol).
pub fn checkpoint(shared: &Shared, dir: &Path) -> Result<CheckpointReport> {
    if shared.fs.exists(dir) {
        return Err(Error::InvalidArgument(format!(
            "checkpoint directory {} already exists",
            dir.display()
        )));
    }
    let fs = &shared.fs;
    fs.create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let (sv, seq) = take_point(shared)?;
    let mut files: Vec<FileMeta> = Vec::new();
    let mut linked = Vec::new();
    let mut known_crc32c = Vec::new();
    for (level, tables) in sv.version.levels.iter().enumerate() {
        for t in tables {
            let name = table_file_name(t.meta.number);
            let to = dir.join(&name);
            fs.hard_link(&shared.dir.join(&name), &to)
                .map_err(|e| Error::io(&to, e))?;
            let mut meta = t.meta.clone();
            meta.level = level as u32;
            if let Some(crc) = t.file_crc32c {
                known_crc32c.push((name.clone(), meta.file_bytes, crc));
            }
            linked.push((name, meta.file_bytes));
            files.push(meta);
        }
    }
    let mut sources: Vec<Box<dyn InternalIterator>> = Vec::new();
    sources.push(Box::new(sv.mem.iter(seq)));
    sources.extend(sv.imms.iter().map(|m| m.iter(seq)));
    let mut merged = MergingIterator::new(sources);
    merged.seek_to_first()?;
    let sink = TableSink {
        dir,
        ..shared.table_sink()
    };
    let tail = write_tables(
        &sink,
        &mut merged,
        0,
        u64::MAX,
        DropPolicy::keep_tombstones(shared.now_ms()),
    )?;
    let written: Vec<(String, u64)> = tail
        .iter()
        .map(|t| (table_file_name(t.meta.number), t.meta.file_bytes))
        .collect();
    known_crc32c.extend(tail.iter().filter_map(|t| {
        let name = table_file_name(t.meta.number);
        t.file_crc32c.map(|crc| (name, t.meta.file_bytes, crc))
    }));
    files.extend(tail.iter().map(|t| t.meta.clone()));
    drop(tail);
    // The newest table's number is above every linked one (numbers only grow).
    let next_file_number = shared.next_file_number.load(Ordering::Relaxed);
    debug_assert!(files.iter().all(|f| f.number < next_file_number));
    let mut state = ManifestState::default();
    state
        .apply(&VersionEdit {
            added: files,
            removed: Vec::new(),
            wal_segment_min: Some(next_file_number),
            next_file_number: Some(next_file_number),
            last_seq: Some(seq),
        })
        .map_err(|e| Error::InvalidArgument(format!("checkpoint manifest: {e}")))?;
    drop(ManifestWriter::create(Arc::clone(fs), dir, &state)?);
    fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
    drop(sv);
    Ok(CheckpointReport {
        seq,
        linked,
        written,
        known_crc32c,
    })
}
