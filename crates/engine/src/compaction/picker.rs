//! Leveled compaction: which files to merge next.
//!
//! Each level has a score: L0 its file count over the trigger, deeper
//! levels their bytes over their budget (`l1_bytes_max`, times
//! `level_size_ratio` per level down). The level with the highest score of
//! at least 1 is compacted into the next: all of L0 (its files overlap), or
//! one file of a deeper level chosen round-robin by key, plus every file of
//! the next level its key range overlaps.

use crate::key;
use crate::options::Options;
use crate::version::{LiveTable, Version};
use std::sync::Arc;

/// A chosen compaction.
pub struct Plan {
    /// Files to merge, each with its level.
    pub inputs: Vec<(usize, Arc<LiveTable>)>,
    /// Level the outputs go to.
    pub output_level: usize,
    /// No deeper level holds a file overlapping the inputs: tombstones past
    /// their grace period may be dropped.
    pub bottom: bool,
}

/// Byte budget of `level` (>= 1).
pub fn level_budget_bytes(opts: &Options, level: usize) -> u64 {
    let mut budget = opts.l1_bytes_max;
    for _ in 1..level {
        budget = budget.saturating_mul(opts.level_size_ratio);
    }
    budget
}

/// Scores of every level (index = level); the last level never scores.
pub fn scores(version: &Version, opts: &Options) -> Vec<f64> {
    let levels = version.levels.len();
    (0..levels)
        .map(|level| {
            if level + 1 >= levels {
                0.0
            } else if level == 0 {
                version.levels[0].len() as f64 / opts.l0_compaction_trigger.max(1) as f64
            } else {
                version.level_bytes(level) as f64 / level_budget_bytes(opts, level) as f64
            }
        })
        .collect()
}

impl Plan {
    /// The smallest and largest user keys of the inputs (the outputs lie
    /// between them).
    pub fn user_span(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        let lo = self.inputs.iter().map(|(_, f)| f.user_range().0).min()?;
        let hi = self.inputs.iter().map(|(_, f)| f.user_range().1).max()?;
        Some((lo.to_vec(), hi.to_vec()))
    }
}

fn user_span(files: &[Arc<LiveTable>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files.iter().map(|f| f.user_range().0).min()?;
    let hi = files.iter().map(|f| f.user_range().1).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

fn overlapping(version: &Version, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<LiveTable>> {
    version.levels[level]
        .iter()
        .filter(|f| f.overlaps(lo, hi))
        .cloned()
        .collect()
}

fn is_bottom(version: &Version, output_level: usize, lo: &[u8], hi: &[u8]) -> bool {
    version.levels[output_level + 1..]
        .iter()
        .flatten()
        .all(|f| !f.overlaps(lo, hi))
}

/// Picks the next automatic compaction; `pointers[level]` is the largest
/// user key the previous compaction of that level took (round robin).
pub fn pick(version: &Version, opts: &Options, pointers: &[Vec<u8>]) -> Option<Plan> {
    let scores = scores(version, opts);
    let (level, score) = scores
        .iter()
        .copied()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if score < 1.0 {
        return None;
    }
    if level == 0 {
        return pick_level0(version);
    }
    let files = &version.levels[level];
    let pointer = pointers.get(level).map_or(&[][..], |p| p.as_slice());
    let chosen = files
        .iter()
        .find(|f| pointer.is_empty() || key::user_key(&f.meta.smallest) > pointer)
        .or_else(|| files.first())?;
    into_next_level(version, vec![(level, Arc::clone(chosen))], level + 1)
}

/// All of level 0 into level 1, with every level-1 file their span
/// overlaps (what [`pick`] chooses for level 0); `None` when level 0 is
/// empty.
pub fn pick_level0(version: &Version) -> Option<Plan> {
    let inputs: Vec<(usize, Arc<LiveTable>)> = version
        .levels
        .first()?
        .iter()
        .map(|f| (0, Arc::clone(f)))
        .collect();
    into_next_level(version, inputs, 1.min(version.levels.len() - 1))
}

/// `inputs` (files of one level) merged into `output_level`, with every
/// file there their span overlaps.
fn into_next_level(
    version: &Version,
    mut inputs: Vec<(usize, Arc<LiveTable>)>,
    output_level: usize,
) -> Option<Plan> {
    let upper: Vec<Arc<LiveTable>> = inputs.iter().map(|(_, f)| Arc::clone(f)).collect();
    let (lo, hi) = user_span(&upper)?;
    for f in overlapping(version, output_level, &lo, &hi) {
        inputs.push((output_level, f));
    }
    let all: Vec<Arc<LiveTable>> = inputs.iter().map(|(_, f)| Arc::clone(f)).collect();
    let (lo, hi) = user_span(&all)?;
    Some(Plan {
        bottom: is_bottom(version, output_level, &lo, &hi),
        inputs,
        output_level,
    })
}

/// One file of `level` (at least 1) rewritten into the same level: its
/// outputs span at most its keys, so they overlap no other file there.
pub fn pick_in_place(version: &Version, level: usize, file: &Arc<LiveTable>) -> Plan {
    let (lo, hi) = file.user_range();
    Plan {
        bottom: is_bottom(version, level, lo, hi),
        inputs: vec![(level, Arc::clone(file))],
        output_level: level,
    }
}

/// A manual full compaction: every file into the deepest non-empty level (at least L1).
pub fn pick_all(version: &Version) -> Option<Plan> {
    let deepest = version
        .levels
        .iter()
        .rposition(|l| !l.is_empty())?
        .max(1)
        .min(version.levels.len() - 1);
    let inputs: Vec<(usize, Arc<LiveTable>)> = version
        .levels
        .iter()
        .enumerate()
        .flat_map(|(level, files)| files.iter().map(move |f| (level, Arc::clone(f))))
        .collect();
    Some(Plan {
        inputs,
        output_level: deepest,
        bottom: true,
    })
}
