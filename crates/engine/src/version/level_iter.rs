//! Iterating one level of non-overlapping SSTables as one sorted stream.

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sst::TableIter;
use crate::version::LiveTable;
use std::cmp::Ordering;
use std::sync::Arc;

/// Concatenates the tables of a level (sorted, disjoint), opening each
/// table's iterator only when the cursor reaches it.
pub struct LevelIter {
    files: Vec<Arc<LiveTable>>,
    index: usize,
    current: Option<TableIter>,
    /// Whether the blocks read are added to the block cache
    /// ([`crate::sst::Table::iter_filling`]).
    fill_cache: bool,
}

impl LevelIter {
    /// Iterates `files`, which must be sorted by key and must not overlap.
    pub fn new(files: Vec<Arc<LiveTable>>) -> Self {
        LevelIter::filling(files, true)
    }

    /// [`LevelIter::new`] adding the blocks it reads to the block cache
    /// only if `fill_cache` (false for a merge or a bulk scan).
    pub fn filling(files: Vec<Arc<LiveTable>>, fill_cache: bool) -> Self {
        LevelIter {
            files,
            index: 0,
            current: None,
            fill_cache,
        }
    }

    fn open(&mut self, index: usize) -> Option<&mut TableIter> {
        self.index = index;
        let fill_cache = self.fill_cache;
        self.current = self
            .files
            .get(index)
            .map(|f| f.table.iter_filling(fill_cache));
        self.current.as_mut()
    }

    /// Moves to the next file's first entry while the current one is exhausted.
    fn skip_exhausted(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            let next = self.index + 1;
            match self.open(next) {
                Some(it) => it.seek_to_first()?,
                None => break,
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if let Some(it) = self.open(0) {
            it.seek_to_first()?;
        }
        self.skip_exhausted()
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        // The first file whose largest key is at or after ikey.
        let idx = self
            .files
            .partition_point(|f| compare_internal(&f.meta.largest, ikey) == Ordering::Less);
        match self.open(idx) {
            Some(it) => it.seek(ikey)?,
            None => return Ok(()),
        }
        self.skip_exhausted()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(it) = self.current.as_mut() {
            it.next()?;
        }
        self.skip_exhausted()
    }

    fn key(&self) -> &[u8] {
        match &self.current {
            Some(c) => c.key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match &self.current {
            Some(c) => c.value(),
            None => &[],
        }
    }
}
