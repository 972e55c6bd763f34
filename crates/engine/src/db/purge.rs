//! [`Db::purge`](super::Db::purge): the steps of a purge
//! (`crate::compaction::purge` has its rules).
//!
//! 1. The caller's thread asks the writer thread to freeze the memtable,
//!    and in that same step (the writer assigns sequence numbers, so none
//!    is assigned meanwhile) reads the last sequence number applied: the
//!    cutoff. Every version up to it is now in an immutable memtable or a
//!    table; every later one in the new memtable.
//! 2. It waits until every immutable memtable is flushed.
//! 3. The compaction thread (which runs every compaction, so none runs
//!    beside the purge; flushes of later writes may) merges every table of the tree into its deepest
//!    level through the filter, as a full manual compaction does, and
//!    installs the result with one manifest edit.
//!
//! Memory stays bounded as in any compaction: the merge streams, block
//! by block, and the output is cut into tables of the target size.

use super::flush_compaction_thread::{
    count_compaction, drop_policy, install_compaction, merge_inputs,
};
use super::handle::wait_until_flushed;
use super::shared::{Shared, WriteRequest, lock};
use crate::compaction::output::write_tables_filtered;
use crate::compaction::picker;
use crate::compaction::purge::{KeepKey, PurgeFilter, PurgeReport};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

/// A purge waiting for the compaction thread.
pub struct PurgeJob {
    keep: Arc<KeepKey>,
    seq_max: u64,
    reply: mpsc::Sender<Result<PurgeReport>>,
}

impl PurgeJob {
    /// Answers the caller (who may have gone: then nobody hears it).
    pub fn answer(self, outcome: Result<PurgeReport>) {
        let _ = self.reply.send(outcome);
    }
}

/// Steps 1 and 2, then hands step 3 to the compaction thread and waits.
pub fn purge(shared: &Arc<Shared>, keep: Arc<KeepKey>) -> Result<PurgeReport> {
    shared.check_poisoned()?;
    let (tx, rx) = mpsc::sync_channel(1);
    let reader = Arc::clone(shared);
    let request = WriteRequest::Rotate(Box::new(move |r| {
        // Runs on the writer thread: no sequence number moves meanwhile.
        let seq = reader.visible_seq.load(Ordering::Acquire);
        let _ = tx.send(r.map(|()| seq));
    }));
    if shared.write_queue.push_unbounded(request).is_err() {
        return Err(Error::Closed);
    }
    let seq_max = rx.recv().map_err(|_| Error::Closed)??;
    wait_until_flushed(shared)?;
    let (reply, answer) = mpsc::channel();
    {
        let mut bg = lock(&shared.bg);
        bg.purges.push(PurgeJob {
            keep,
            seq_max,
            reply,
        });
        bg.compaction_hint = true;
    }
    shared.bg_cond.notify_all();
    answer.recv().map_err(|_| Error::Closed)?
}

/// Step 3, on the compaction thread. An error poisons the engine (as a
/// failed compaction's does); the caller hears it too.
pub fn run(shared: &Shared, job: PurgeJob) -> Result<()> {
    let outcome = rewrite(shared, &job);
    let failed = outcome.as_ref().err().map(Error::to_poisoned);
    job.answer(outcome);
    failed.map_or(Ok(()), Err)
}

fn rewrite(shared: &Shared, job: &PurgeJob) -> Result<PurgeReport> {
    let Some(plan) = picker::pick_all(&shared.sv.load().version) else {
        return Ok(PurgeReport::default());
    };
    let mut filter = PurgeFilter::new(job.keep.as_ref(), job.seq_max);
    let mut merged = merge_inputs(&plan)?;
    let outputs = write_tables_filtered(
        &shared.table_sink(),
        &mut merged,
        plan.output_level as u32,
        shared.opts.sst_target_bytes,
        drop_policy(shared, &plan),
        Some(&mut filter),
    )?;
    install_compaction(shared, &plan, &outputs)?;
    count_compaction(shared, &plan, &outputs);
    let mut report = filter.report;
    report.tables_read = plan.inputs.len() as u64;
    report.bytes_read = plan.inputs.iter().map(|(_, f)| f.meta.file_bytes).sum();
    report.bytes_written = outputs.iter().map(|t| t.meta.file_bytes).sum();
    Ok(report)
}
