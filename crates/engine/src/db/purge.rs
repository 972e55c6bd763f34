//! [`Db::purge`](super::Db::purge): the steps of a purge
//! (`crate::compaction::purge` has its rules).
//!
//! 1. The caller's thread asks the writer thread to freeze the memtable,
//!    and in that same step (the writer assigns sequence numbers, so none
//!    is assigned meanwhile) reads the last sequence number applied: the
//!    cutoff. Every version up to it is now in an immutable memtable or a
//!    table; every later one in the new memtable.
//! 2. It waits until every immutable memtable is flushed.
//! 3. The compaction thread takes the job ([`Purges`]): every table live
//!    then is *dirty* (it may hold a version the purge drops). It rewrites
//!    them a merge at a time (`Purges::step`), the deepest dirty table first: a
//!    table of level 1 or deeper into its own level through the filter, or,
//!    once only level 0 is dirty, level 0 into level 1 (the merge
//!    compaction would do). Each merge is installed by its own manifest
//!    edit. Between two merges the thread runs the compaction the tree
//!    needs, so a purge of a large store never holds compactions up for
//!    longer than one table's merge, and never needs room for a second
//!    copy of the store (a purge used to merge every table in one job).
//! 4. A compaction that runs during the purge drops the purge's versions
//!    too when no dirty table deeper than its output overlaps it
//!    ([`ActivePurge::may_filter`]); then its outputs are clean. Otherwise
//!    its outputs are dirty if any input was.
//!
//! While it runs, a rejected key may read as one of its earlier versions
//! (or as gone): a key's versions can lie in several tables, and the one
//! that wins (the newest timestamp) may be dropped before another. Deepest
//! first, and the rule of step 4, keep that from happening in the usual
//! order (a key's newer versions lie shallower); writes out of timestamp
//! order can still show one. Kept keys and versions after the cutoff are
//! never touched, and at the end none of the rejected versions is left.
//! A node purges only keys it replicates in no live layout, and never
//! beside a copy, so no replicated read asks it for them meanwhile
//! (docs/ARCHITECTURE.md, "Cleanup").
//!
//! Memory stays bounded as in any compaction: the merge streams, block
//! by block, and the output is cut into tables of the target size.

use super::flush_compaction_thread::{
    claim, count_compaction, drop_policy, install_compaction, merge_inputs,
};
use super::handle::wait_until_flushed;
use super::shared::{Shared, WriteRequest, lock};
use crate::compaction::output::write_tables_filtered;
use crate::compaction::pace::{Pace, Pacer};
use crate::compaction::picker::{self, Plan};
use crate::compaction::purge::{KeepKey, PurgeFilter, PurgeReport};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key;
use crate::version::{LiveTable, Version};
use std::collections::{HashSet, VecDeque};
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

/// Steps 1 and 2, then hands the rest to the compaction thread and waits.
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

/// The compaction thread's purges: the one under way and those waiting
/// (one at a time, in the order asked).
#[derive(Default)]
pub struct Purges {
    waiting: VecDeque<PurgeJob>,
    /// The purge under way.
    pub active: Option<ActivePurge>,
}

impl Purges {
    /// Queues `jobs`, and starts the first if none is under way.
    pub fn take(&mut self, shared: &Shared, jobs: Vec<PurgeJob>) {
        self.waiting.extend(jobs);
        if self.active.is_none()
            && let Some(job) = self.waiting.pop_front()
        {
            self.active = Some(ActivePurge::start(shared, job));
        }
    }

    /// Answers every purge, under way or waiting, `outcome()`.
    pub fn answer_all(&mut self, outcome: impl Fn() -> Result<PurgeReport>) {
        if let Some(active) = self.active.take() {
            active.job.answer(outcome());
        }
        for job in self.waiting.drain(..) {
            job.answer(outcome());
        }
    }

    /// One merge of the purge under way; answers it when it is done (or
    /// stopped by the close). An error other than the close is returned
    /// (it poisons the engine) after the caller heard it.
    pub fn step(&mut self, shared: &Shared) -> Result<()> {
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        let outcome = step(shared, active);
        match outcome {
            Ok(false) => {
                // More to do: the thread comes back at once.
                lock(&shared.bg).compaction_hint = true;
                Ok(())
            }
            Ok(true) => {
                if let Some(done) = self.active.take() {
                    let report = done.report;
                    done.job.answer(Ok(report));
                }
                if let Some(job) = self.waiting.pop_front() {
                    self.active = Some(ActivePurge::start(shared, job));
                    lock(&shared.bg).compaction_hint = true;
                }
                Ok(())
            }
            Err(e) => {
                let failed = !matches!(e, Error::Closed);
                let poisoned = e.to_poisoned();
                if let Some(stopped) = self.active.take() {
                    stopped.job.answer(Err(e));
                }
                if failed { Err(poisoned) } else { Ok(()) }
            }
        }
    }
}

/// A purge under way on the compaction thread.
pub struct ActivePurge {
    job: PurgeJob,
    /// Its schedule, carried from one merge to the next.
    pace: Option<Pace>,
    /// Live tables that may still hold a version it drops (by number).
    dirty: HashSet<u64>,
    /// What its merges (and compactions that dropped for it) did so far.
    report: PurgeReport,
}

impl ActivePurge {
    /// The purge of `job`: every table live now is dirty.
    fn start(shared: &Shared, job: PurgeJob) -> ActivePurge {
        let sv = shared.sv.load();
        let dirty = sv.version.all_files().map(|f| f.meta.number).collect();
        ActivePurge {
            pace: job
                .bytes_per_sec
                .map(|rate| Pace::new(rate, Instant::now())),
            job,
            dirty,
            report: PurgeReport::default(),
        }
    }

    /// True when a merge of `plan` may drop this purge's versions: no dirty
    /// table deeper than its output overlaps its keys (so no older version
    /// of a key it drops is left).
    pub fn may_filter(&self, version: &Version, plan: &Plan) -> bool {
        let Some((lo, hi)) = plan.user_span() else {
            return true;
        };
        version
            .levels
            .iter()
            .skip(plan.output_level + 1)
            .flatten()
            .all(|f| !self.dirty.contains(&f.meta.number) || !f.overlaps(&lo, &hi))
    }

    /// A filter of this purge, unpaced (for a compaction).
    pub fn filter(&self) -> PurgeFilter<'_> {
        PurgeFilter::new(self.job.keep.as_ref(), self.job.seq_max)
    }

    /// After `plan`'s merge into `outputs` was installed: its inputs are
    /// gone; its outputs are dirty if it did not filter and took a dirty
    /// input. `dropped` is what its filter dropped, if it filtered.
    pub fn merged(
        &mut self,
        plan: &Plan,
        outputs: &[Arc<LiveTable>],
        dropped: Option<&PurgeReport>,
    ) {
        let mut took_dirty = false;
        for (_, f) in &plan.inputs {
            took_dirty |= self.dirty.remove(&f.meta.number);
        }
        match dropped {
            Some(report) => {
                // Its inputs were read through this purge's filter.
                self.report.keys_dropped += report.keys_dropped;
                self.report.bytes_dropped += report.bytes_dropped;
                self.report.tables_read += plan.inputs.len() as u64;
                self.report.bytes_read += plan
                    .inputs
                    .iter()
                    .map(|(_, f)| f.meta.file_bytes)
                    .sum::<u64>();
                self.report.bytes_written += outputs.iter().map(|t| t.meta.file_bytes).sum::<u64>();
            }
            None if took_dirty => self.dirty.extend(outputs.iter().map(|t| t.meta.number)),
            None => {}
        }
    }

    /// The next merge: the deepest dirty table into its own level, or all
    /// of level 0 into level 1 once only level 0 is dirty; `None` when
    /// nothing live is dirty (the purge is done).
    fn next_plan(&mut self, version: &Version) -> Option<Plan> {
        let live: HashSet<u64> = version.all_files().map(|f| f.meta.number).collect();
        self.dirty.retain(|n| live.contains(n));
        let (level, file) =
            version
                .levels
                .iter()
                .enumerate()
                .rev()
                .find_map(|(level, files)| {
                    files
                        .iter()
                        .find(|f| self.dirty.contains(&f.meta.number))
                        .map(|f| (level, Arc::clone(f)))
                })?;
        if level == 0 {
            picker::pick_level0(version)
        } else {
            Some(picker::pick_in_place(version, level, &file))
        }
    }
}

/// One merge of `active` (paced if it is), installed; true when nothing
/// was left to merge (the purge is done).
fn step(shared: &Shared, active: &mut ActivePurge) -> Result<bool> {
    let Some((plan, _merging)) = claim(shared, |version| active.next_plan(version)) else {
        return Ok(true);
    };
    // Paced, it waits between reads, except while level 0 holds twice
    // its compaction trigger (compactions wait for this merge: it hurries
    // instead of letting writers reach the stall); it stops at a close.
    let hurry = || shared.level0_crowded();
    let wait = |d: Duration| shared.wait_paced(d);
    let keep = Arc::clone(&active.job.keep);
    let seq_max = active.job.seq_max;
    let filter_with = |pace: Option<Pace>| {
        let filter = PurgeFilter::new(keep.as_ref(), seq_max);
        match pace {
            Some(pace) => filter.paced(Pacer {
                pace,
                hurry: &hurry,
                wait: &wait,
                waited: Duration::ZERO,
            }),
            None => filter,
        }
    };
    let mut pace = active.pace.take();
    if let [(level, table)] = plan.inputs.as_slice()
        && *level == plan.output_level
    {
        // A table with nothing to drop (a node's copies of keys it still
        // replicates) is read, not rewritten.
        let mut scan = filter_with(pace);
        let found = holds_a_dropped_entry(table, &mut scan);
        pace = scan.finish().0;
        if !found? {
            active.pace = pace;
            active.dirty.remove(&table.meta.number);
            active.report.tables_read += 1;
            active.report.bytes_read += table.meta.file_bytes;
            return Ok(false);
        }
    }
    let mut filter = filter_with(pace);
    let mut merged: MergingIterator = merge_inputs(&plan)?;
    let written = write_tables_filtered(
        &shared.table_sink(),
        &mut merged,
        plan.output_level as u32,
        shared.opts.sst_target_bytes,
        drop_policy(shared, &plan),
        Some(&mut filter),
        None,
    );
    let (pace, dropped) = filter.finish();
    active.pace = pace;
    let outputs = written?;
    install_compaction(shared, &plan, &outputs)?;
    count_compaction(shared, &plan, &outputs);
    active.merged(&plan, &outputs, Some(&dropped));
    Ok(false)
}

/// Reads `table` through `filter` until an entry the filter drops: true if
/// there is one. `Error::Closed` if the filter's pace was stopped by a close.
fn holds_a_dropped_entry(table: &Arc<LiveTable>, filter: &mut PurgeFilter<'_>) -> Result<bool> {
    let mut entries = table.table.iter_filling(false);
    entries.seek_to_first()?;
    while entries.valid() {
        let ikey = entries.key();
        let parsed = key::parse_internal_key(ikey).ok_or_else(|| Error::Corruption {
            path: table.table.path().to_path_buf(),
            offset: 0,
            kind: crate::error::CorruptionKind::Malformed(
                "undecodable internal key in a purge's scan".into(),
            ),
        })?;
        let dropped = filter.drops(
            parsed.user_key,
            parsed.seq,
            ikey.len() + entries.value().len(),
        );
        if filter.stopped {
            return Err(Error::Closed);
        }
        if dropped {
            return Ok(true);
        }
        entries.next()?;
    }
    Ok(false)
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
        crate::db::until_merging(&db, Duration::from_secs(30));
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

    /// A purge is a series of merges with the tree's compactions between
    /// them: level 0, filled to its trigger while a slow paced purge runs,
    /// is compacted before that purge ends. Negative control: a purge
    /// that merged the whole tree in one job held every compaction until
    /// it ended (then the purge is over by the time level 0 shrinks).
    #[test]
    fn level_0_is_compacted_while_a_slow_purge_runs() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            wal_mode: WalMode::None,
            memtable_bytes_max: 256 * 1024,
            sst_target_bytes: 256 * 1024,
            l1_bytes_max: 1024 * 1024,
            l0_compaction_trigger: 2,
            ..Options::default()
        };
        let trigger = opts.l0_compaction_trigger;
        let db = Db::open(dir.path(), opts).unwrap();
        // 8 MiB in the deeper levels: at 1 MiB/s the purge takes 8 s or more.
        for i in 0..8192u64 {
            let key = format!("k{i:05}");
            db.put(key.as_bytes(), &[7u8; 1024], 1000 + i, Durability::None)
                .unwrap();
        }
        db.compact().unwrap();
        let shared = Arc::clone(db.shared_for_tests());
        let keep: Arc<KeepKey> = Arc::new(|k: &[u8]| k.ends_with(b"0"));
        let purging = std::thread::spawn(move || purge(&shared, keep, Some(1024 * 1024)));
        crate::db::until_merging(&db, Duration::from_secs(60));
        let deadline = Instant::now() + Duration::from_secs(60);
        // Level 0 to its trigger, written after the purge began.
        for round in 0..trigger as u64 {
            for i in 0..64u64 {
                let key = format!("n{round}-{i:03}");
                db.put(key.as_bytes(), &[9u8; 1024], 100_000 + i, Durability::None)
                    .unwrap();
            }
            db.flush().unwrap();
        }
        while db.stats().level_files[0] >= trigger {
            assert!(Instant::now() < deadline, "level 0 was never compacted");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            !purging.is_finished(),
            "level 0 was compacted only once the purge was over"
        );
        // The close stops the purge (or it just ended).
        db.close().unwrap();
        assert!(matches!(
            purging.join().unwrap(),
            Ok(_) | Err(Error::Closed)
        ));
    }

    /// A purge that finds nothing to drop in a table leaves it as it is
    /// (read, not rewritten): a node's cleanup of a store holding only
    /// keys it still replicates writes nothing. Negative control: without
    /// the scan first, every table is rewritten.
    #[test]
    fn a_table_with_nothing_to_drop_is_not_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            wal_mode: WalMode::None,
            memtable_bytes_max: 64 * 1024,
            sst_target_bytes: 64 * 1024,
            ..Options::default()
        };
        let db = Db::open(dir.path(), opts).unwrap();
        for i in 0..2000u64 {
            let key = format!("k{i:05}");
            let keep_it = if i % 2 == 0 { b'y' } else { b'n' };
            // Keys ending in 'y' are kept; the ones ending in 'n' all
            // lie in the second half of the key space.
            let key = if i < 1000 {
                format!("{key}y")
            } else {
                format!("{key}{}", keep_it as char)
            };
            // Values that do not compress, so the tables are many.
            let value = crate::db::incompressible(i, 256);
            db.put(key.as_bytes(), &value, 1000 + i, Durability::None)
                .unwrap();
        }
        db.compact().unwrap();
        let files = |db: &Db| -> Vec<u64> {
            let sv = db.shared_for_tests().sv.load();
            let mut n: Vec<u64> = sv.version.all_files().map(|f| f.meta.number).collect();
            n.sort_unstable();
            n
        };
        let before = files(&db);
        assert!(before.len() >= 4, "{before:?}");
        let keep: Arc<KeepKey> = Arc::new(|k: &[u8]| k.ends_with(b"y"));
        let report = db.purge(keep).unwrap();
        assert_eq!(report.keys_dropped, 500, "{report:?}");
        let after = files(&db);
        // The tables of the first half (every key kept) are the same files.
        let kept: Vec<u64> = before
            .iter()
            .copied()
            .filter(|n| after.contains(n))
            .collect();
        assert!(
            kept.len() >= before.len() / 3,
            "tables with nothing to drop were rewritten: before {before:?}, after {after:?}"
        );
        assert!(report.tables_read as usize >= before.len(), "{report:?}");
        assert_eq!(db.get(b"k00001y").unwrap().map(|e| e.ts), Some(1001));
        assert_eq!(db.get(b"k01001n").unwrap(), None);
        assert_eq!(db.get(b"k01002y").unwrap().map(|e| e.ts), Some(2002));
        db.close().unwrap();
    }
}
