//! The iterator interface shared by memtables, blocks, tables and merges.

use crate::error::Result;

/// A cursor over entries sorted by encoded internal key
/// ([`crate::key::compare_internal`]).
///
/// Positioning calls return an error on I/O or corruption; after an error
/// the iterator is invalid. `key` and `value` may only be called while
/// `valid()` is true.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions on the first entry whose key is at or after `ikey`.
    fn seek(&mut self, ikey: &[u8]) -> Result<()>;
    /// Moves to the next entry.
    fn next(&mut self) -> Result<()>;
    /// The current encoded internal key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
}

mod merge;

pub use merge::MergingIterator;
