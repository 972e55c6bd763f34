//! Merging sorted iterators into one sorted stream.

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal;
use std::cmp::Ordering;

/// Yields the entries of all children in internal-key order.
///
/// Children are few (memtables, L0 files, one iterator per deeper level),
/// so the smallest is found by a linear pass over the children's current
/// keys; equal keys (the same entry replayed twice) come out child by
/// child, lowest child index first. Callers that want one entry per user
/// key skip the rest themselves.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
}

impl MergingIterator {
    /// Merges `children`, which must each be sorted in internal-key order.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator {
            children,
            current: None,
        }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, child) in self.children.iter().enumerate() {
            if !child.valid() {
                continue;
            }
            best = match best {
                Some(b)
                    if compare_internal(child.key(), self.children[b].key()) != Ordering::Less =>
                {
                    Some(b)
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        for child in &mut self.children {
            child.seek_to_first()?;
        }
        self.find_smallest();
        Ok(())
    }

    fn seek(&mut self, ikey: &[u8]) -> Result<()> {
        for child in &mut self.children {
            child.seek(ikey)?;
        }
        self.find_smallest();
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(i) = self.current {
            self.children[i].next()?;
            self.find_smallest();
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
            None => &[],
        }
    }
}
