//! The background threads: the flush thread writes immutable memtables to
//! L0 tables; the compaction thread runs compactions and purges. Each
//! installs its results as new versions.
//!
//! Two threads, so a long compaction or purge never holds up a flush (a
//! writer stalls only when memtables, not merges, are behind), and so the
//! compaction thread can run at a lower CPU priority than the foreground
//! (`Options::compaction_nice`) while flushes keep theirs. Their installs
//! compose: each takes the manifest lock for its edit, then rebuilds the
//! read view from the latest one under `sv_update`; a flush only adds L0
//! tables, a compaction removes exactly the tables it merged.
//!
//! On the compaction thread manual compactions come first, then one
//! automatic compaction, then one merge of the purge under way (a purge is
//! a series of merges, `super::purge`), per round. Any failure poisons the
//! engine: a half-installed tree is never used.

use crate::compaction::collect::Elsewhere;
use crate::compaction::output::{DropPolicy, write_tables, write_tables_filtered};
use crate::compaction::pace::{Pace, Pacer};
use crate::compaction::picker::{self, Plan};
use crate::db::shared::{Shared, lock};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key;
use crate::manifest::VersionEdit;
use crate::memtable::immutable::ImmutableMemtable;
use crate::version::LevelIter;
use crate::version::{LiveTable, SuperVersion, Version};
use crate::wal::segment::parse_segment_file_name;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long an idle background thread waits before re-checking its work.
const BG_IDLE_WAIT: Duration = Duration::from_millis(500);

/// Which background thread a wait is for.
#[derive(Clone, Copy)]
enum Role {
    Flush,
    Compaction,
}

/// Waits until `role` has work (its hint, set by `Shared::notify_bg` and
/// the other thread, or the idle re-check) and clears the hint; `None` at
/// shutdown.
fn wait_for_work(shared: &Shared, role: Role) -> Option<super::shared::BgGuard<'_>> {
    let mut bg = lock(&shared.bg);
    loop {
        if bg.shutdown {
            return None;
        }
        let hint = match role {
            Role::Flush => &mut bg.flush_hint,
            Role::Compaction => &mut bg.compaction_hint,
        };
        if std::mem::take(hint) {
            return Some(bg);
        }
        let (guard, timeout) = shared
            .bg_cond
            .wait_timeout(bg, BG_IDLE_WAIT)
            .unwrap_or_else(|e| e.into_inner());
        bg = guard;
        if timeout.timed_out() {
            // The periodic re-check (e.g. tombstone expiry).
            return Some(bg);
        }
    }
}

/// The flush thread's body: every immutable memtable, oldest first.
pub fn run_flushes(shared: Arc<Shared>) {
    while let Some(bg) = wait_for_work(&shared, Role::Flush) {
        drop(bg);
        if shared.check_poisoned().is_err() {
            continue;
        }
        match flush_all(&shared) {
            Ok(0) => {}
            // New L0 tables: the compaction thread may have work.
            Ok(_) => shared.notify_bg(),
            Err(e) => shared.poison(&e),
        }
        shared.bg_cond.notify_all();
    }
}

/// Flushes every immutable memtable, oldest first; says how many.
fn flush_all(shared: &Shared) -> Result<usize> {
    let mut flushed = 0;
    loop {
        let sv = shared.sv.load_full();
        let Some(oldest) = sv.imms.last().cloned() else {
            return Ok(flushed);
        };
        flush_memtable(shared, &oldest)?;
        flushed += 1;
        shared.bg_cond.notify_all();
    }
}

/// The compaction thread's body (at `Options::compaction_nice`).
pub fn run_compactions(shared: Arc<Shared>) {
    if shared.opts.compaction_nice > 0 {
        // Best effort: a thread that cannot lower itself runs as it was.
        let _ = crate::thread_priority::lower_this_thread(shared.opts.compaction_nice);
    }
    let mut purges = super::purge::Purges::default();
    loop {
        let Some(mut bg) = wait_for_work(&shared, Role::Compaction) else {
            let mut bg = lock(&shared.bg);
            for reply in bg.manual_compactions.drain(..) {
                let _ = reply.send(Err(Error::Closed));
            }
            let jobs = std::mem::take(&mut bg.purges);
            drop(bg);
            purges.take(&shared, jobs);
            purges.answer_all(|| Err(Error::Closed));
            return;
        };
        let manual = std::mem::take(&mut bg.manual_compactions);
        let jobs = std::mem::take(&mut bg.purges);
        drop(bg);
        if shared.check_poisoned().is_err() {
            for reply in manual {
                let _ = reply.send(shared.check_poisoned());
            }
            purges.take(&shared, jobs);
            purges.answer_all(|| shared.check_poisoned().map(|()| Default::default()));
            continue;
        }
        purges.take(&shared, jobs);
        if let Err(e) = compaction_step(&shared, manual, &mut purges) {
            shared.poison(&e);
        }
        shared.bg_cond.notify_all();
    }
}

/// One round of the compaction thread: manual compactions, one automatic
/// compaction, one merge of the purge under way.
fn compaction_step(
    shared: &Shared,
    manual: Vec<std::sync::mpsc::Sender<Result<()>>>,
    purges: &mut super::purge::Purges,
) -> Result<()> {
    for reply in manual {
        let result = match claim(shared, picker::pick_all) {
            Some((plan, _merging)) => compact(shared, plan, purges.active.as_mut(), Pacing::Off),
            None => Ok(()),
        };
        let failed = result.as_ref().err().map(Error::to_poisoned);
        let _ = reply.send(result);
        if let Some(e) = failed {
            return Err(e);
        }
    }
    if shared.opts.background_compaction {
        let claimed = claim(shared, |version| {
            let bg = lock(&shared.bg);
            picker::pick(version, &shared.opts, &bg.compact_pointers)
        });
        if let Some((plan, _merging)) = claimed {
            match compact(shared, plan, purges.active.as_mut(), Pacing::Automatic) {
                // A paced compaction stopped by the close: nothing was
                // installed, and the next open removes its tables.
                Err(Error::Closed) => return Ok(()),
                result => result?,
            }
            shared.notify_bg(); // there may be more to do
        }
    }
    purges.step(shared)
}

/// Says, while alive, where the compaction thread's current merge writes
/// (`Shared::merging`); cleared when dropped, after the install or a
/// failure.
pub(crate) struct Merging<'a>(&'a Shared);

impl Drop for Merging<'_> {
    fn drop(&mut self) {
        *lock(&self.0.merging) = None;
    }
}

/// Picks a merge on the current tree with `pick` and marks where it will
/// write, in one step under `Shared::merging`: an ingest that installs
/// after this sees the mark, one that installed before is in the tree
/// `pick` saw.
pub(crate) fn claim<'a>(
    shared: &'a Shared,
    pick: impl FnOnce(&Version) -> Option<Plan>,
) -> Option<(Plan, Merging<'a>)> {
    let mut merging = lock(&shared.merging);
    let plan = pick(&shared.sv.load().version)?;
    let (lo, hi) = plan.user_span()?;
    *merging = Some(super::shared::MergeSpan {
        output_level: plan.output_level,
        lo,
        hi,
    });
    drop(merging);
    Some((plan, Merging(shared)))
}

/// Writes the oldest immutable memtable to an L0 table and installs it.
pub fn flush_memtable(shared: &Shared, imm: &ImmutableMemtable) -> Result<()> {
    let mut it = imm.iter(u64::MAX);
    it.seek_to_first()?;
    let outputs = write_tables(
        &shared.table_sink(),
        it.as_mut(),
        0,
        u64::MAX,
        DropPolicy::keep_tombstones(shared.now_ms()),
    )?;
    let mut versions = lock(&shared.versions);
    let current = shared.sv.load_full();
    debug_assert!(current.imms.last().is_some_and(|m| m.same(imm)));
    // The WAL segments of the memtables still in memory must be kept.
    let remaining_oldest_segment = current
        .imms
        .iter()
        .rev()
        .nth(1)
        .map_or(current.mem.wal_segment(), |m| m.wal_segment());
    let edit = VersionEdit {
        added: outputs.iter().map(|t| t.meta.clone()).collect(),
        removed: Vec::new(),
        wal_segment_min: Some(remaining_oldest_segment),
        next_file_number: Some(shared.next_file_number.load(Ordering::Relaxed)),
        last_seq: Some(imm.seq_max().max(versions.state.last_seq)),
    };
    versions.log_and_apply(&edit)?;
    drop(versions);
    {
        let _guard = lock(&shared.sv_update);
        let latest = shared.sv.load_full();
        let mut version = Version::clone(&latest.version);
        version.levels[0].extend(outputs.iter().cloned());
        version.normalize();
        let imms: Vec<ImmutableMemtable> = latest
            .imms
            .iter()
            .filter(|m| !m.same(imm))
            .cloned()
            .collect();
        // Before the view without it is published (`super::condition`).
        shared
            .left_memtables_seq
            .fetch_max(imm.seq_max(), Ordering::SeqCst);
        shared.sv.store(Arc::new(SuperVersion {
            mem: Arc::clone(&latest.mem),
            imms,
            version: Arc::new(version),
        }));
    }
    let m = &shared.metrics;
    m.flushes.add(1);
    m.flush_bytes_written
        .add(outputs.iter().map(|t| t.meta.file_bytes).sum());
    remove_obsolete_segments(shared, remaining_oldest_segment);
    Ok(())
}

/// Removes WAL segments numbered below `min` (their data is in SSTables).
pub fn remove_obsolete_segments(shared: &Shared, min: u64) {
    let Ok(names) = shared.fs.list_dir(&shared.dir) else {
        return;
    };
    for name in names {
        if parse_segment_file_name(&name).is_some_and(|n| n < min) {
            // A segment that cannot be removed now is removed by the next open.
            let _ = shared.fs.remove_file(&shared.dir.join(&name));
        }
    }
}

/// Whether a compaction keeps `Options::compaction_rate_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// A manual compaction: as fast as it can.
    Off,
    /// An automatic one: at the rate, if one is set.
    Automatic,
}

/// Runs a compaction plan and installs its outputs. During `purge`, it
/// drops that purge's versions too where that is safe
/// (`ActivePurge::may_filter`), and tells the purge what it merged.
/// Paced, it reads at `Options::compaction_rate_bytes` (hurrying while
/// level 0 is crowded), and ends with `Error::Closed`, nothing installed,
/// when the engine closes during a wait.
pub fn compact(
    shared: &Shared,
    plan: Plan,
    purge: Option<&mut super::purge::ActivePurge>,
    pacing: Pacing,
) -> Result<()> {
    let output_level = plan.output_level;
    let mut merged = merge_inputs(&plan)?;
    let mut filter = purge
        .as_deref()
        .filter(|p| p.may_filter(&shared.sv.load().version, &plan))
        .map(super::purge::ActivePurge::filter);
    let hurry = || shared.level0_crowded();
    let wait = |d: Duration| shared.wait_paced(d);
    let rate = shared.opts.compaction_rate_bytes;
    let mut pacer = (pacing == Pacing::Automatic && rate > 0).then(|| Pacer {
        pace: Pace::new(rate, Instant::now()),
        hurry: &hurry,
        wait: &wait,
        waited: Duration::ZERO,
    });
    let written = write_tables_filtered(
        &shared.table_sink(),
        &mut merged,
        output_level as u32,
        shared.opts.sst_target_bytes,
        drop_policy(shared, &plan),
        filter.as_mut(),
        pacer.as_mut(),
    );
    if let Some(p) = &pacer {
        let waited = u64::try_from(p.waited.as_micros()).unwrap_or(u64::MAX);
        shared.metrics.compaction_pace_wait_us.add(waited);
    }
    let outputs = written?;
    let dropped = filter.map(|f| f.finish().1);
    install_compaction(shared, &plan, &outputs)?;
    count_compaction(shared, &plan, &outputs);
    if let Some(p) = purge {
        p.merged(&plan, &outputs, dropped.as_ref());
    }
    if let Some(last) = plan
        .inputs
        .iter()
        .filter(|(l, _)| *l + 1 == output_level)
        .map(|(_, f)| f)
        .next_back()
    {
        let mut bg = lock(&shared.bg);
        if let Some(p) = bg.compact_pointers.get_mut(output_level - 1) {
            *p = key::user_key(&last.meta.largest).to_vec();
        }
    }
    Ok(())
}

/// What a compaction of `plan` drops: dead versions past their key's
/// horizon (`Options::collection_horizon`, else the grace) with no older
/// version of their key outside the merge (`compaction::collect`), at any
/// level. The planted old rule collects, blind, only when no deeper
/// level overlaps the merge.
pub(crate) fn drop_policy<'a>(shared: &'a Shared, plan: &Plan) -> DropPolicy<'a> {
    let now_ms = shared.now_ms();
    let grace_ms = u64::try_from(shared.opts.tombstone_grace.as_millis()).unwrap_or(u64::MAX);
    let policy = if shared.opts.planted_collect_when_nothing_deeper {
        if plan.bottom {
            DropPolicy::planted_collecting_blind(now_ms, grace_ms)
        } else {
            DropPolicy::keep_tombstones(now_ms)
        }
    } else {
        let inputs = plan.inputs.iter().map(|(_, f)| f.meta.number);
        DropPolicy::collecting(now_ms, grace_ms, Elsewhere::new(&shared.sv, inputs))
            .with_horizon(shared.opts.collection_horizon.as_ref())
    };
    policy.with_planted_drop_expired(shared.planted_drop_expired())
}

/// Counts a compaction's bytes read and written.
pub(crate) fn count_compaction(shared: &Shared, plan: &Plan, outputs: &[Arc<LiveTable>]) {
    let m = &shared.metrics;
    m.compactions.add(1);
    m.compaction_bytes_read
        .add(plan.inputs.iter().map(|(_, f)| f.meta.file_bytes).sum());
    m.compaction_bytes_written
        .add(outputs.iter().map(|t| t.meta.file_bytes).sum());
}

/// One iterator over every input of `plan`, positioned at its first
/// entry; it does not fill the block cache.
pub(crate) fn merge_inputs(plan: &Plan) -> Result<MergingIterator> {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    let mut deeper: Vec<Arc<LiveTable>> = Vec::new();
    for (level, file) in &plan.inputs {
        if *level == 0 {
            children.push(Box::new(file.table.iter_filling(false)));
        } else {
            deeper.push(Arc::clone(file));
        }
    }
    // Files of one deeper level are disjoint; one LevelIter per level.
    deeper.sort_by(|a, b| {
        (a.meta.level, &a.meta.smallest)
            .partial_cmp(&(b.meta.level, &b.meta.smallest))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut start = 0;
    while start < deeper.len() {
        let level = deeper[start].meta.level;
        let end = start + deeper[start..].partition_point(|f| f.meta.level == level);
        let mut files = deeper[start..end].to_vec();
        files.sort_by(|a, b| key::compare_internal(&a.meta.smallest, &b.meta.smallest));
        children.push(Box::new(LevelIter::filling(files, false)));
        start = end;
    }
    let mut merged = MergingIterator::new(children);
    merged.seek_to_first()?;
    Ok(merged)
}

/// Installs `outputs` in place of `plan`'s inputs: one manifest edit, then
/// a new read view.
pub(crate) fn install_compaction(
    shared: &Shared,
    plan: &Plan,
    outputs: &[Arc<LiveTable>],
) -> Result<()> {
    let mut versions = lock(&shared.versions);
    let edit = VersionEdit {
        added: outputs.iter().map(|t| t.meta.clone()).collect(),
        removed: plan
            .inputs
            .iter()
            .map(|(level, f)| (*level as u32, f.meta.number))
            .collect(),
        wal_segment_min: None,
        next_file_number: Some(shared.next_file_number.load(Ordering::Relaxed)),
        last_seq: None,
    };
    versions.log_and_apply(&edit)?;
    drop(versions);
    let _guard = lock(&shared.sv_update);
    let latest = shared.sv.load_full();
    let mut version = Version::clone(&latest.version);
    for (level, file) in &plan.inputs {
        version.levels[*level].retain(|f| f.meta.number != file.meta.number);
        file.mark_obsolete_for(&shared.obsolete);
    }
    version.levels[plan.output_level].extend(outputs.iter().cloned());
    version.normalize();
    shared.sv.store(Arc::new(SuperVersion {
        mem: Arc::clone(&latest.mem),
        imms: latest.imms.clone(),
        version: Arc::new(version),
    }));
    Ok(())
}
