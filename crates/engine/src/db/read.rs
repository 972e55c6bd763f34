//! Reads: point lookups and range scans on a consistent read view.
//!
//! A read takes the current [`SuperVersion`] (lock-free) and then the
//! visible sequence number; it sees every batch up to that number that is
//! in the view's memtables and tables, and nothing of a batch being applied.
//!
//! Newest timestamp wins wherever it is: a write with an old timestamp may
//! arrive late and sit in the memtable above a newer version in an SSTable.
//! So a point read looks in every place the key may be, but skips any
//! source whose largest timestamp cannot beat what it already found (the
//! common case: timestamps grow with time, so the first hit usually wins).
//! Equal timestamps are settled by the kind's tie rank
//! ([`key::compare_versions`]), the same rule the internal order follows.
//!
//! An expiring value whose deadline has passed on the engine's clock reads
//! as a tombstone at its timestamp ([`crate::expiry`]).

use super::shared::Shared;
use super::{Entry, EntryRef};
use crate::error::{CorruptionKind, Error, Result};
use crate::expiry::{self, Visible};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{self, Kind};
use crate::version::LevelIter;
use crate::version::{LiveTable, SuperVersion};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;

#[derive(Debug)]
struct Best<'a> {
    ts: u64,
    seq: u64,
    kind: Kind,
    /// Lent by a memtable of the read view, or owned (read from a table).
    value: Cow<'a, [u8]>,
}

impl Best<'_> {
    fn beats(&self, ts: u64, kind: Kind, seq: u64) -> bool {
        key::compare_versions((self.ts, self.kind, self.seq), (ts, kind, seq))
            != std::cmp::Ordering::Less
    }
}

fn offer<'a>(best: &mut Option<Best<'a>>, ts: u64, seq: u64, kind: Kind, value: Cow<'a, [u8]>) {
    if best.as_ref().is_none_or(|b| !b.beats(ts, kind, seq)) {
        *best = Some(Best {
            ts,
            seq,
            kind,
            value,
        });
    }
}

/// The read view: the super version and the visible sequence number.
pub fn read_view(shared: &Shared) -> (Arc<SuperVersion>, u64) {
    let sv = shared.sv.load_full();
    let visible = shared.visible_seq.load(Ordering::Acquire);
    (sv, visible)
}

/// The newest version of `user_key`, owning its value.
pub fn get(shared: &Shared, user_key: &[u8]) -> Result<Option<Entry>> {
    get_with(shared, user_key, |found| found.map(EntryRef::to_entry))
}

/// The newest version of `user_key`, lent to `with`: a value found in a
/// memtable is not copied (a point read of a key in a memtable allocates
/// nothing); one read from a table is read into a buffer of its own.
pub fn get_with<R>(
    shared: &Shared,
    user_key: &[u8],
    with: impl FnOnce(Option<EntryRef<'_>>) -> R,
) -> Result<R> {
    let (sv, visible) = read_view(shared);
    let mut best: Option<Best<'_>> = None;
    shared.metrics.gets.add(1);
    // An empty memtable (the usual state right after a flush) is not
    // searched. Anything inserted before the visible sequence number was
    // published is counted by then (the Acquire load in `read_view`).
    if !sv.mem.is_empty()
        && let Some(f) = sv.mem.get(user_key, visible)
    {
        offer(&mut best, f.ts, f.seq, f.kind, Cow::Borrowed(f.value));
    }
    for imm in &sv.imms {
        if best.as_ref().is_some_and(|b| b.ts > imm.ts_max()) {
            continue;
        }
        if let Some(f) = imm.get(user_key, visible) {
            offer(&mut best, f.ts, f.seq, f.kind, Cow::Borrowed(f.value));
        }
    }
    // L0 newest first, then the one file of each deeper level that covers
    // the key; empty levels cost one length check.
    for (level, files) in sv.version.levels.iter().enumerate() {
        if files.is_empty() {
            continue;
        }
        if level == 0 {
            for file in files.iter().filter(|f| f.covers(user_key)) {
                probe_table(shared, file, user_key, &mut best)?;
            }
        } else if let Some(file) = sv.version.file_covering(level, user_key) {
            probe_table(shared, file, user_key, &mut best)?;
        }
    }
    Ok(with(best.as_ref().map(|b| {
        // Only an expiring value reads the clock (`expiry::visible` reads
        // `now_ms` for no other kind): a clock read per GET saved.
        let now_ms = match b.kind {
            Kind::PutExpiring => shared.now_ms(),
            Kind::Put | Kind::Delete => 0,
        };
        entry_at(b.ts, b.kind, &b.value, now_ms)
    })))
}

/// What a stored version reads as at `now_ms`, its value lent.
fn entry_at(ts: u64, kind: Kind, stored: &[u8], now_ms: u64) -> EntryRef<'_> {
    match expiry::visible(kind, stored, now_ms) {
        Visible::Tombstone => EntryRef {
            ts,
            value: None,
            deadline_ms: None,
        },
        Visible::Value { value, deadline_ms } => EntryRef {
            ts,
            value: Some(value),
            deadline_ms,
        },
    }
}

/// Looks for `user_key` in one table whose range covers it, unless its
/// newest timestamp or its bloom filter rule it out.
#[inline]
fn probe_table(
    shared: &Shared,
    file: &LiveTable,
    user_key: &[u8],
    best: &mut Option<Best<'_>>,
) -> Result<()> {
    debug_assert!(file.covers(user_key));
    if best.as_ref().is_some_and(|b| b.ts > file.meta.ts_max) {
        return Ok(());
    }
    if !file.table.may_contain(user_key) {
        shared.metrics.bloom_negatives.add(1);
        return Ok(());
    }
    shared.metrics.get_tables_read.add(1);
    if let Some(e) = file.table.get_past_filter(user_key)? {
        offer(best, e.ts, e.seq, e.kind, Cow::Owned(e.value));
    }
    Ok(())
}

/// Iterator of a scan: `(key, newest entry)` in key order.
///
/// Holds its read view (and so the files it reads) until dropped.
pub struct ScanIter {
    _sv: Arc<SuperVersion>,
    merged: MergingIterator,
    end: Option<Vec<u8>>,
    include_tombstones: bool,
    last_user_key: Option<Vec<u8>>,
    done: bool,
    /// The engine clock's time when the scan started: expiry is judged
    /// once for the whole scan.
    now_ms: u64,
}

/// Starts a scan of `[start, end)`; its table reads fill the block cache
/// if `fill_cache` (off for a pass over the whole store).
pub fn scan(
    shared: &Shared,
    start: &[u8],
    end: Option<&[u8]>,
    include_tombstones: bool,
    fill_cache: bool,
) -> Result<ScanIter> {
    let (sv, visible) = read_view(shared);
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    children.push(Box::new(sv.mem.iter(visible)));
    for imm in &sv.imms {
        children.push(imm.iter(visible));
    }
    for (level, files) in sv.version.levels.iter().enumerate() {
        if level == 0 {
            for f in files {
                children.push(Box::new(f.table.iter_filling(fill_cache)));
            }
        } else if !files.is_empty() {
            children.push(Box::new(LevelIter::filling(files.clone(), fill_cache)));
        }
    }
    let mut merged = MergingIterator::new(children);
    merged.seek(&key::seek_key(start))?;
    Ok(ScanIter {
        _sv: sv,
        merged,
        end: end.map(<[u8]>::to_vec),
        include_tombstones,
        last_user_key: None,
        done: false,
        now_ms: shared.now_ms(),
    })
}

impl ScanIter {
    fn step(&mut self) -> Result<Option<(Vec<u8>, Entry)>> {
        while self.merged.valid() {
            let ikey = self.merged.key();
            let p = key::parse_internal_key(ikey).ok_or_else(|| Error::Corruption {
                path: Default::default(),
                offset: 0,
                kind: CorruptionKind::Malformed("undecodable internal key in scan".into()),
            })?;
            if let Some(end) = &self.end
                && p.user_key >= end.as_slice()
            {
                return Ok(None);
            }
            let newest = self.last_user_key.as_deref() != Some(p.user_key);
            let item = if newest {
                self.last_user_key = Some(p.user_key.to_vec());
                match expiry::visible(p.kind, self.merged.value(), self.now_ms) {
                    Visible::Value { value, deadline_ms } => Some((
                        p.user_key.to_vec(),
                        Entry {
                            ts: p.ts,
                            value: Some(value.to_vec()),
                            deadline_ms,
                        },
                    )),
                    Visible::Tombstone => self
                        .include_tombstones
                        .then(|| (p.user_key.to_vec(), Entry::tombstone(p.ts))),
                }
            } else {
                None
            };
            self.merged.next()?;
            if item.is_some() {
                return Ok(item);
            }
        }
        Ok(None)
    }
}

impl Iterator for ScanIter {
    type Item = Result<(Vec<u8>, Entry)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
