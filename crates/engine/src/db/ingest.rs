//! [`Db::ingest`](super::Db::ingest): a batch of versions in key order
//! written straight to tables of one level, without the WAL, the memtable
//! or the compactions that would carry them down (a cluster node's copy
//! of a layout transition: its keys arrive sorted, about as many bytes
//! as the node serves; docs/ARCHITECTURE.md, "Ingest").
//!
//! # Rules
//! - **Any level will do for reads.** A point read looks in every place a
//!   key may be and the newest timestamp wins ([`super::read`]); scans and
//!   compactions merge by the internal order, timestamp first. So a
//!   version can sit in any level, above or below older and newer ones.
//! - **A level's tables never overlap** (below L0). An ingest goes to the
//!   deepest level with no table overlapping its key span and no running
//!   merge writing into that span ([`super::shared::MergeSpan`]), chosen
//!   before its tables are written and checked again, under the manifest
//!   lock, when they are installed. With no such level nothing is
//!   installed, and the caller writes the batch the ordinary way.
//! - **Sequence number 0.** Ingested versions are visible to every read at
//!   once, and a version of the same key with the same timestamp and kind
//!   written the ordinary way wins the tie (it is the same write, copied).
//!   They are never newer than a purge's cutoff.
//! - **Durable when it returns.** The tables are synced, then one manifest
//!   edit (synced) names them. A crash before the edit leaves unreferenced
//!   tables that the next open removes; after it, the versions are there.
//! - **A failed write of its tables changes nothing** and does not
//!   poison the engine (nothing shared was touched): the caller hears the
//!   error; tables it had written are unreferenced until the next open
//!   removes them. A failed manifest edit poisons it, as any install's.

use super::shared::{Shared, WriteRequest, lock};
use crate::WriteBatch;
use crate::compaction::output::{DropPolicy, write_tables};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::manifest::VersionEdit;
use crate::memtable::replay_buffer::ReplayBuffer;
use crate::version::{LiveTable, SuperVersion, Version};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// What an ingest installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestReport {
    /// The level its tables went to.
    pub level: usize,
    /// Tables written.
    pub tables: usize,
    /// Their bytes.
    pub bytes: u64,
}

/// Writes `batch` (keys strictly increasing) to tables of one level and
/// installs them; `Ok(None)` when no level is free for its key span
/// (nothing changed: write the batch instead).
pub fn ingest(shared: &Shared, batch: &WriteBatch) -> Result<Option<IngestReport>> {
    shared.check_poisoned()?;
    batch.validate().map_err(Error::InvalidArgument)?;
    let mut run = ReplayBuffer::new(0);
    let mut span: Option<(Vec<u8>, Vec<u8>)> = None;
    for entry in batch.iter() {
        let entry = entry.map_err(Error::InvalidArgument)?;
        if let Some((_, last)) = &span
            && entry.key <= last.as_slice()
        {
            return Err(Error::InvalidArgument(
                "ingest: keys must be strictly increasing".into(),
            ));
        }
        run.push(entry.key, entry.ts, 0, entry.kind, entry.value);
        match &mut span {
            None => span = Some((entry.key.to_vec(), entry.key.to_vec())),
            Some((_, last)) => {
                last.clear();
                last.extend_from_slice(entry.key);
            }
        }
    }
    let Some((lo, hi)) = span else {
        return Ok(Some(IngestReport {
            level: 0,
            tables: 0,
            bytes: 0,
        }));
    };
    let Some(level) = free_level(shared, &shared.sv.load().version, &lo, &hi) else {
        shared.metrics.ingests_declined.add(1);
        return Ok(None);
    };
    let run = Arc::new(run.freeze());
    let mut input = run.iter(u64::MAX);
    input.seek_to_first()?;
    let outputs = write_tables(
        &shared.table_sink(),
        &mut input,
        level as u32,
        shared.opts.sst_target_bytes,
        DropPolicy::keep_tombstones(shared.now_ms()),
    )?;
    if install(shared, level, &lo, &hi, &outputs)? {
        advance(shared);
        let bytes = outputs.iter().map(|t| t.meta.file_bytes).sum();
        shared.metrics.ingests.add(1);
        shared.metrics.ingest_bytes_written.add(bytes);
        Ok(Some(IngestReport {
            level,
            tables: outputs.len(),
            bytes,
        }))
    } else {
        // A merge began writing into that span meanwhile: the tables were
        // never named; they are removed as they are dropped (or by the
        // next open).
        for table in &outputs {
            table.mark_obsolete_for(&shared.obsolete);
        }
        shared.metrics.ingests_declined.add(1);
        Ok(None)
    }
}

/// Moves the read sequence past the ingest's mark (`super::condition`,
/// rule 1): without it, every conditional write that reads after the
/// ingest is refused until some other write arrives. Waits for the writer
/// (no lock is held here); a closed engine has no reads left to unblock.
fn advance(shared: &Shared) {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let request = WriteRequest::Advance(Box::new(move || {
        let _ = tx.send(());
    }));
    if shared.write_queue.push_unbounded(request).is_ok() {
        let _ = rx.recv();
    }
}

/// The deepest level (L1 or deeper) where `[lo, hi]` overlaps no table
/// of `version` and no running merge's output.
fn free_level(shared: &Shared, version: &Version, lo: &[u8], hi: &[u8]) -> Option<usize> {
    let merging = lock(&shared.merging);
    (1..version.levels.len()).rev().find(|&level| {
        version.levels[level].iter().all(|f| !f.overlaps(lo, hi))
            && merging.as_ref().is_none_or(|m| !m.blocks(level, lo, hi))
    })
}

/// Installs `outputs` in `level` if it is still free for `[lo, hi]`
/// (checked under the manifest lock, against the tree every install
/// builds on and the running merge); false when it is not.
fn install(
    shared: &Shared,
    level: usize,
    lo: &[u8],
    hi: &[u8],
    outputs: &[Arc<LiveTable>],
) -> Result<bool> {
    let mut versions = lock(&shared.versions);
    let merging = lock(&shared.merging);
    // Installs log their edit under `versions`, then publish under
    // `sv_update`: a compaction may have logged and not yet published,
    // but its merge is still marked in `merging` until it has.
    let current = shared.sv.load_full();
    let free = current.version.levels[level]
        .iter()
        .all(|f| !f.overlaps(lo, hi))
        && merging.as_ref().is_none_or(|m| !m.blocks(level, lo, hi));
    if !free {
        return Ok(false);
    }
    let edit = VersionEdit {
        added: outputs.iter().map(|t| t.meta.clone()).collect(),
        removed: Vec::new(),
        wal_segment_min: None,
        next_file_number: Some(shared.next_file_number.load(Ordering::Relaxed)),
        last_seq: None,
    };
    if let Err(e) = versions.log_and_apply(&edit) {
        shared.poison(&e);
        return Err(e);
    }
    let _guard = lock(&shared.sv_update);
    let latest = shared.sv.load_full();
    // Ingested versions bypass the memtables: a conditional write that
    // read before them must not pass (`super::condition`, rule 1).
    let visible = shared.visible_seq.load(Ordering::SeqCst);
    shared
        .left_memtables_seq
        .fetch_max(visible + 1, Ordering::SeqCst);
    let mut version = Version::clone(&latest.version);
    version.levels[level].extend(outputs.iter().cloned());
    version.normalize();
    shared.sv.store(Arc::new(SuperVersion {
        mem: Arc::clone(&latest.mem),
        imms: latest.imms.clone(),
        version: Arc::new(version),
    }));
    drop(merging);
    drop(versions);
    Ok(true)
}
