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
    claim, count_compaction, drop_policy, install_compaction, merge_inputs,
};
use super::handle::wait_until_flushed;
use super::shared::{Shared, WriteRequest, lock};
use crate::compaction::output::write_tables_filtered;
use crate::compaction::pace::Pace;
use crate::compaction::picker;
use crate::compaction::purge::{KeepKey, Pacer, PurgeFilter, PurgeReport};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A purge waiting for the compaction thread.
pub struct PurgeJob {
    keep: Arc<KeepKey>,
    seq_max: u64,
    /// The pace of its reads, if paced.
    bytes_per_sec: Option<u64>,
    reply: mpsc::Sender<Result<PurgeReport>>,
}

impl PurgeJob {
    /// Answers the caller (who may have gone: then nobody hears it).
    pub fn answer(self, outcome: Result<PurgeReport>) {
        let _ = self.reply.send(outcome);
    }
}

/// Steps 1 and 2, then hands step 3 to the compaction thread and waits.
pub fn purge(
    shared: &Arc<Shared>,
    keep: Arc<KeepKey>,
    bytes_per_sec: Option<u64>,
) -> Result<PurgeReport> {
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
            bytes_per_sec,
            reply,
        });
        bg.compaction_hint = true;
    }
    shared.bg_cond.notify_all();
    answer.recv().map_err(|_| Error::Closed)?
}

/// Step 3, on the compaction thread. An error poisons the engine (as a
/// failed compaction's does); the caller hears it too. A paced purge
/// stopped by the engine's close is not an error of the engine: its
/// caller hears `Closed`, and a purge run again after the open redoes it.
pub fn run(shared: &Shared, job: PurgeJob) -> Result<()> {
    let outcome = rewrite(shared, &job);
    let failed = match &outcome {
        Err(Error::Closed) => None,
        Err(e) => Some(e.to_poisoned()),
        Ok(_) => None,
    };
    job.answer(outcome);
    failed.map_or(Ok(()), Err)
}

fn rewrite(shared: &Shared, job: &PurgeJob) -> Result<PurgeReport> {
    let Some((plan, _merging)) = claim(shared, picker::pick_all) else {
        return Ok(PurgeReport::default());
    };
    // Paced, it waits between reads, except while level 0 holds twice
    // its compaction trigger (compactions wait for the purge: it hurries
    // instead of letting writers reach the stall); it stops at a close.
    let hurry =
        || shared.sv.load().version.levels[0].len() >= 2 * shared.opts.l0_compaction_trigger;
    let wait = |d: Duration| wait_unless_closing(shared, d);
    let mut filter = PurgeFilter::new(job.keep.as_ref(), job.seq_max);
    if let Some(rate) = job.bytes_per_sec {
        filter = filter.paced(Pacer {
            pace: Pace::new(rate, Instant::now()),
            hurry: &hurry,
            wait: &wait,
        });
    }
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

/// Waits up to `d` on the background condition, less if the engine
/// begins to close (its close wakes every waiter); true when it is
/// closing.
fn wait_unless_closing(shared: &Shared, d: Duration) -> bool {
    let deadline = Instant::now() + d;
    let mut bg = lock(&shared.bg);
    loop {
        if bg.shutdown {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        bg = shared
            .bg_cond
            .wait_timeout(bg, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Durability, Options, WalMode};

    /// A paced purge too slow to end (1 byte/s) is stopped by the close:
    /// its caller hears `Closed`, the engine is not poisoned (the close
    /// succeeds), and the store is as before (nothing installed).
    #[test]
    fn a_close_stops_a_paced_purge() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            wal_mode: WalMode::None,
            ..Options::default()
        };
        let db = Db::open(dir.path(), opts.clone()).unwrap();
        for i in 0..3000u64 {
            let key = format!("k{i:05}");
            db.put(key.as_bytes(), &[7u8; 1024], 1000 + i, Durability::None)
                .unwrap();
        }
        let shared = Arc::clone(db.shared_for_tests());
        let keep: Arc<KeepKey> = Arc::new(|k: &[u8]| k.ends_with(b"0"));
        let purging = std::thread::spawn(move || purge(&shared, keep, Some(1)));
        // Until the purge has claimed its merge (bounded).
        let deadline = Instant::now() + Duration::from_secs(30);
        while lock(&db.shared_for_tests().merging).is_none() {
            assert!(Instant::now() < deadline, "the purge never began");
            std::thread::sleep(Duration::from_millis(5));
        }
        // The close must not wait for the purge's schedule (bounded).
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(db.close());
        });
        let closed = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the close waited for the paced purge");
        closed.unwrap();
        assert!(matches!(purging.join().unwrap(), Err(Error::Closed)));
        let db = Db::open(dir.path(), opts).unwrap();
        assert_eq!(db.get(b"k00001").unwrap().map(|e| e.ts), Some(1001));
        db.close().unwrap();
    }
}
