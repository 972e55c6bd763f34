//! What an open does with the entries it replays: which stay in memory as
//! immutable memtables and which are written to L0 before the open returns.
//!
//! The rule (`docs/ARCHITECTURE.md`, "Recovery"): replayed entries fill a
//! [`ReplayBuffer`] until it holds a memtable's worth
//! (`memtable_bytes_max`); then it is sorted into a [`SortedRun`] and
//! kept. Kept runs count toward the same budget as rotated memtables,
//! `immutable_memtables_max`: when one more would exceed it, the oldest
//! kept run is written to L0 now (synchronously), so an open holds at most
//! the budget in memory, as a running engine does, and the writer's stall
//! bound is unchanged. The newest runs stay in memory because WAL segments
//! can only become obsolete oldest first.
//!
//! # Invariants
//! - Kept runs are in replay order, oldest first, and each one's entries
//!   are newer (by sequence number) than every written table's.
//! - At most `immutable_memtables_max` runs are kept.

use super::shared::Shared;
use crate::compaction::output::{DropPolicy, write_tables};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::memtable::replay_buffer::ReplayBuffer;
use crate::memtable::sorted_run::SortedRun;
use crate::version::LiveTable;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The runs an open keeps and the tables it wrote.
///
/// # Thread safety
/// Owned by the thread running recovery; not shared.
#[derive(Default)]
pub struct ReplayedRuns {
    /// Runs kept in memory, oldest first.
    kept: VecDeque<Arc<SortedRun>>,
    /// Tables written at open from runs over the budget.
    pub tables: Vec<Arc<LiveTable>>,
    /// Time spent sorting buffers into runs.
    pub sort_duration: Duration,
    /// Time spent writing runs to L0 at open (building, writing, syncing).
    pub flush_duration: Duration,
}

impl ReplayedRuns {
    /// Sorts a full (or the last) buffer into a run and keeps it, writing
    /// the oldest kept run to L0 first if the budget would be exceeded.
    pub fn add(&mut self, shared: &Shared, buffer: ReplayBuffer) -> Result<()> {
        if buffer.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let run = Arc::new(buffer.freeze());
        self.sort_duration += started.elapsed();
        debug_assert!(
            self.kept
                .back()
                .is_none_or(|newest| newest.seq_max() < run.seq_max())
        );
        self.kept.push_back(run);
        while self.kept.len() > shared.opts.immutable_memtables_max {
            self.flush_oldest(shared)?;
        }
        assert!(self.kept.len() <= shared.opts.immutable_memtables_max);
        Ok(())
    }

    /// Writes every kept run to L0 (a forced recovery does, so that the
    /// segments with the records it skipped are obsolete once it returns).
    pub fn flush_all(&mut self, shared: &Shared) -> Result<()> {
        while !self.kept.is_empty() {
            self.flush_oldest(shared)?;
        }
        Ok(())
    }

    fn flush_oldest(&mut self, shared: &Shared) -> Result<()> {
        let Some(run) = self.kept.pop_front() else {
            return Ok(());
        };
        let started = Instant::now();
        let mut it = run.iter(u64::MAX);
        it.seek_to_first()?;
        let tables = write_tables(
            &shared.table_sink(),
            &mut it,
            0,
            u64::MAX,
            DropPolicy::keep_tombstones(shared.now_ms()),
        )?;
        self.tables.extend(tables);
        // Freeing the run is part of the flush's cost.
        drop(it);
        drop(run);
        self.flush_duration += started.elapsed();
        Ok(())
    }

    /// The oldest WAL segment a kept run has entries in, if any run is kept.
    pub fn oldest_wal_segment(&self) -> Option<u64> {
        self.kept.front().map(|r| r.wal_segment())
    }

    /// Number of runs kept.
    pub fn kept_len(&self) -> usize {
        self.kept.len()
    }

    /// Bytes of the kept runs, counted like memtables.
    pub fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|r| r.bytes()).sum()
    }

    /// The kept runs, newest first (the order of `SuperVersion::imms`).
    pub fn newest_first(&self) -> Vec<Arc<SortedRun>> {
        self.kept.iter().rev().cloned().collect()
    }
}
