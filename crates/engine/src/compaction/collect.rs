//! Collecting dead versions: when a merge may drop a tombstone or an
//! expired value for good (docs/ARCHITECTURE.md, "Expiry").
//!
//! Versions are ordered by timestamp, not by level: a cluster node puts
//! older versions above newer ones (a peer's version applied to the
//! memtable by anti-entropy, read repair or a refill, after the newer one
//! was flushed and compacted down) and newer ones below older ones (a
//! transition copy ingested at the deepest free level). So "no deeper level
//! overlaps the merge" does not mean "nothing older is left": a dead
//! version dropped on that rule lets an older value read again.
//!
//! # Rules
//! - **Only a key's newest version in the merge** is considered; older
//!   versions in the merge go with it (compaction's newest-version rule).
//! - **Past the horizon.** A version is dead since: a tombstone, its
//!   timestamp; an expired value, its deadline or its timestamp, whichever
//!   is later (one cut to a deadline of 0, its timestamp). It may go once
//!   that is at or before the key's *collection horizon*: `now - grace`
//!   for an engine alone, or what `Options::collection_horizon` says for
//!   the key (a cluster node: the time before which anti-entropy has
//!   brought every replica of the key up to date, docs/decisions/0007).
//! - **Past the grace, not past the horizon: kept, and counted.** A dead
//!   version older than the grace that the horizon still holds back is
//!   kept (repair has not covered it) and reported
//!   ([`Verdict::waiting_past_grace`], `tombstones_waiting_past_grace`):
//!   the grace is then an upper bound that warns, not the rule.
//! - **Nothing older anywhere else.** Then, and only then, it is dropped
//!   when no source outside the merge's inputs may hold a version of its key
//!   at or below its timestamp ([`may_hold_older`] on each): the memtable,
//!   every immutable memtable, and every other live table of every level,
//!   shallower or deeper. A table does when its user-key range covers the
//!   key, its smallest timestamp (`ts_min`, in every table's manifest
//!   record) is at or below the version's, its bloom filter does not rule
//!   the key out, and a seek finds such a version (a block read, not
//!   filling the cache: the first three, from memory, settle most); a
//!   memtable does when it holds such a version. An
//!   equal timestamp counts as older (a version with an equal timestamp and
//!   a lower tie rank loses to the dead one): kept, to be safe.
//! - **What arrives later is the cluster's.** The sources are those of the
//!   engine's current read view when the version is judged; a version
//!   written or ingested after that is the same as one written after the
//!   drop: no replica should hold a version older than the horizon (that
//!   is the horizon's assumption: the grace's, or repair's,
//!   docs/RELIABILITY.md).
//! - **Any level.** The rule needs no "bottom": a merge into any level may
//!   collect, since deeper tables are sources like the others.
//!
//! The old rule (collect when no level deeper than the output overlaps the
//! merge) remains as a planted bug (`Options::planted_collect_when_nothing_deeper`).

use crate::expiry::{self, split_expiring_value};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, Timestamp};
use crate::memtable::Memtable;
use crate::memtable::immutable::ImmutableMemtable;
use crate::version::{LiveTable, SuperVersion};
use arc_swap::ArcSwap;
use std::collections::HashSet;
use std::sync::Arc;

/// What becomes of a key's newest version in a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Copied as it is.
    Keep,
    /// An expired value: copied with its deadline only (it reads as a
    /// tombstone at its timestamp, and keeps shadowing older versions).
    KeepExpired,
    /// Dropped.
    Drop,
}

/// What the rule says of one version: its fate, and whether it is a dead
/// version past the grace that the key's horizon holds back (kept until
/// repair covers it; counted so an operator sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// What becomes of the version.
    pub fate: Fate,
    /// Dead for longer than the grace, yet not before the key's horizon.
    pub waiting_past_grace: bool,
}

impl Verdict {
    fn of(fate: Fate) -> Self {
        Verdict {
            fate,
            waiting_past_grace: false,
        }
    }
}

/// The clock and the grace a merge judges dead versions by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Judge {
    /// Unix milliseconds now.
    pub now_ms: u64,
    /// The tombstone grace, in milliseconds.
    pub grace_ms: u64,
    /// False: nothing is collected (a flush, an ingest).
    pub collecting: bool,
    /// The planted expiry bug: expired values dropped at once.
    pub planted_drop_expired: bool,
}

impl Judge {
    /// `now - grace`: the horizon of an engine that is told none; none
    /// when the grace reaches back before the epoch (nothing is past it:
    /// a version of millisecond 0 is not).
    pub fn grace_horizon_ms(&self) -> Option<u64> {
        self.now_ms.checked_sub(self.grace_ms)
    }
}

/// The rule: the fate of a key's newest version `(kind, ts, stored)`.
/// `horizon_ms` is asked only for a dead version of a collecting merge:
/// the key's collection horizon (Unix ms; a version dead at or before it
/// may go; none: no version may). `older_elsewhere` is asked only for a dead version at or
/// before the horizon: true when a source outside the merge may hold an
/// older version.
pub fn fate(
    judge: &Judge,
    kind: Kind,
    ts: Timestamp,
    stored: &[u8],
    horizon_ms: impl FnOnce() -> Option<u64>,
    older_elsewhere: impl FnOnce() -> bool,
) -> Verdict {
    let ts_ms = key::timestamp_millis(ts);
    // Since when the version is dead (its grace counts from then), and
    // what it becomes when kept.
    let (dead_since_ms, kept) = match kind {
        Kind::Put => return Verdict::of(Fate::Keep),
        Kind::Delete => (ts_ms, Fate::Keep),
        Kind::PutExpiring => {
            // A stored value too short for a deadline reads as a
            // tombstone; treat it as expired at once.
            let deadline_ms = split_expiring_value(stored).map_or(0, |(d, _)| d);
            if !expiry::is_expired(deadline_ms, judge.now_ms) {
                return Verdict::of(Fate::Keep);
            }
            if judge.planted_drop_expired {
                return Verdict::of(Fate::Drop);
            }
            (deadline_ms.max(ts_ms), Fate::KeepExpired)
        }
    };
    if !judge.collecting {
        return Verdict::of(kept);
    }
    if horizon_ms().is_some_and(|h| dead_since_ms <= h) {
        let fate = if older_elsewhere() { kept } else { Fate::Drop };
        return Verdict::of(fate);
    }
    Verdict {
        fate: kept,
        waiting_past_grace: judge.grace_horizon_ms().is_some_and(|h| dead_since_ms <= h),
    }
}

/// True when a table with user-key range `[lo, hi]` and smallest timestamp
/// `ts_min` may hold a version of `user_key` at or below `ts`;
/// `look` is asked last (the bloom filter, then a seek: false when they
/// prove it absent).
pub fn may_hold_older(
    (lo, hi): (&[u8], &[u8]),
    ts_min: Timestamp,
    user_key: &[u8],
    ts: Timestamp,
    look: impl FnOnce() -> bool,
) -> bool {
    lo <= user_key && user_key <= hi && ts_min <= ts && look()
}

/// Where older versions of a merge's keys may be: every source of the
/// engine's current read view except the merge's inputs. The view is
/// loaded at each question (it is asked only about dead versions past the
/// grace), so it sees what was flushed or ingested meanwhile, and a long
/// merge pins no memtable the flush has written out.
pub struct Elsewhere<'a> {
    view: &'a ArcSwap<SuperVersion>,
    inputs: HashSet<u64>,
}

impl std::fmt::Debug for Elsewhere<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elsewhere")
            .field("inputs", &self.inputs)
            .finish_non_exhaustive()
    }
}

impl<'a> Elsewhere<'a> {
    /// The sources of `view` other than the tables numbered in `inputs`.
    pub fn new(view: &'a ArcSwap<SuperVersion>, inputs: impl IntoIterator<Item = u64>) -> Self {
        Elsewhere {
            view,
            inputs: inputs.into_iter().collect(),
        }
    }

    /// True when some source may hold a version of `user_key` at or below
    /// `ts`. A source that cannot be read says yes (kept, to be safe).
    pub fn may_hold_older(&self, user_key: &[u8], ts: Timestamp) -> bool {
        let seek = seek_at_or_below(user_key, ts);
        let view = self.view.load();
        if memtable_holds(&view.mem, &seek, user_key) {
            return true;
        }
        if view
            .imms
            .iter()
            .any(|m| immutable_holds(m, &seek, user_key))
        {
            return true;
        }
        let version = &view.version;
        let table_may = |t: &Arc<LiveTable>| {
            !self.inputs.contains(&t.meta.number)
                && may_hold_older(t.user_range(), t.meta.ts_min, user_key, ts, || {
                    t.table.may_contain(user_key)
                        && first_is(&mut t.table.iter_filling(false), &seek, user_key)
                })
        };
        if version
            .levels
            .first()
            .is_some_and(|l0| l0.iter().any(table_may))
        {
            return true;
        }
        (1..version.levels.len()).any(|level| {
            version
                .file_covering(level, user_key)
                .is_some_and(table_may)
        })
    }
}

/// The internal key just before every version of `user_key` at or below
/// `ts` (the highest tie rank and sequence number at `ts`).
fn seek_at_or_below(user_key: &[u8], ts: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + key::INTERNAL_KEY_TRAILER_BYTES);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&ts.to_be_bytes());
    out.extend_from_slice(&u64::MAX.to_be_bytes());
    out
}

fn first_is(it: &mut dyn InternalIterator, seek: &[u8], user_key: &[u8]) -> bool {
    match it.seek(seek) {
        Ok(()) => it.valid() && key::user_key(it.key()) == user_key,
        Err(_) => true,
    }
}

fn memtable_holds(mem: &Arc<Memtable>, seek: &[u8], user_key: &[u8]) -> bool {
    !mem.is_empty() && first_is(&mut mem.iter(u64::MAX), seek, user_key)
}

fn immutable_holds(mem: &ImmutableMemtable, seek: &[u8], user_key: &[u8]) -> bool {
    !mem.is_empty() && first_is(mem.iter(u64::MAX).as_mut(), seek, user_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expiry::encode_expiring_value;

    const NOW: u64 = 1_000_000;
    const GRACE: u64 = 1_000;

    fn judge() -> Judge {
        Judge {
            now_ms: NOW,
            grace_ms: GRACE,
            collecting: true,
            planted_drop_expired: false,
        }
    }

    /// The rule with the grace's horizon (an engine alone).
    fn f(
        judge: &Judge,
        kind: Kind,
        ts: Timestamp,
        stored: &[u8],
        older_elsewhere: impl FnOnce() -> bool,
    ) -> Fate {
        fate(
            judge,
            kind,
            ts,
            stored,
            || judge.grace_horizon_ms(),
            older_elsewhere,
        )
        .fate
    }

    fn ts(ms: u64) -> Timestamp {
        key::timestamp_from_millis(ms, 0)
    }

    fn expiring(deadline_ms: u64) -> Vec<u8> {
        let mut v = Vec::new();
        encode_expiring_value(&mut v, deadline_ms, b"v");
        v
    }

    /// A tombstone past the grace is dropped only when nothing older is
    /// elsewhere; within the grace, or in a flush, it is kept and nobody
    /// is asked.
    #[test]
    fn tombstone_dropped_only_past_grace_and_with_nothing_older_elsewhere() {
        let old = ts(NOW - GRACE);
        assert_eq!(f(&judge(), Kind::Delete, old, b"", || false), Fate::Drop);
        assert_eq!(f(&judge(), Kind::Delete, old, b"", || true), Fate::Keep);
        let young = ts(NOW - GRACE + 1);
        let asked = std::cell::Cell::new(false);
        let ask = || {
            asked.set(true);
            false
        };
        assert_eq!(f(&judge(), Kind::Delete, young, b"", ask), Fate::Keep);
        let flush = Judge {
            collecting: false,
            ..judge()
        };
        assert_eq!(f(&flush, Kind::Delete, old, b"", ask), Fate::Keep);
        assert!(!asked.get(), "asked about sources for a version it keeps");
        assert_eq!(f(&judge(), Kind::Put, old, b"v", || false), Fate::Keep);
    }

    /// An expired value: cut to a tombstone until past the grace (from its
    /// deadline or timestamp, the later), then dropped only with nothing
    /// older elsewhere; a live one is kept whole.
    #[test]
    fn expired_value_follows_the_same_rule() {
        let old = ts(NOW - 5 * GRACE);
        let live = expiring(NOW + 1);
        assert_eq!(
            f(&judge(), Kind::PutExpiring, old, &live, || false),
            Fate::Keep
        );
        let recent = expiring(NOW - GRACE + 1);
        assert_eq!(
            f(&judge(), Kind::PutExpiring, old, &recent, || false),
            Fate::KeepExpired
        );
        let long_ago = expiring(NOW - GRACE);
        assert_eq!(
            f(&judge(), Kind::PutExpiring, old, &long_ago, || false),
            Fate::Drop
        );
        assert_eq!(
            f(&judge(), Kind::PutExpiring, old, &long_ago, || true),
            Fate::KeepExpired
        );
        // Cut to a deadline of 0: its grace counts from its timestamp.
        let cut = [0u8; expiry::DEADLINE_BYTES];
        assert_eq!(
            f(&judge(), Kind::PutExpiring, ts(NOW - 10), &cut, || false),
            Fate::KeepExpired
        );
        assert_eq!(
            f(&judge(), Kind::PutExpiring, old, &cut, || false),
            Fate::Drop
        );
        let planted = Judge {
            planted_drop_expired: true,
            ..judge()
        };
        assert_eq!(
            f(&planted, Kind::PutExpiring, ts(NOW), &recent, || true),
            Fate::Drop
        );
    }

    /// A horizon replaces the grace: a tombstone at or before it goes
    /// (nothing older elsewhere), after it stays; one past the grace that
    /// the horizon holds back is reported as waiting. The horizon is not
    /// asked for a live version or a merge that does not collect.
    /// Regression (the full suite, 2026-12-07): a grace reaching back
    /// before the epoch has no horizon, so a tombstone of millisecond 0
    /// is kept (a horizon saturated to 0 collected it).
    #[test]
    fn a_grace_longer_than_the_clock_collects_nothing() {
        let judge = Judge {
            grace_ms: NOW + 1,
            ..judge()
        };
        assert_eq!(judge.grace_horizon_ms(), None);
        let v = fate(
            &judge,
            Kind::Delete,
            0,
            b"",
            || judge.grace_horizon_ms(),
            || false,
        );
        assert_eq!((v.fate, v.waiting_past_grace), (Fate::Keep, false));
    }

    #[test]
    fn horizon_replaces_the_grace_and_reports_waiting_past_it() {
        let old = ts(NOW - 5 * GRACE);
        let at = |h: u64| fate(&judge(), Kind::Delete, old, b"", || Some(h), || false);
        let dropped = at(NOW - 5 * GRACE);
        assert_eq!(
            (dropped.fate, dropped.waiting_past_grace),
            (Fate::Drop, false)
        );
        let waiting = at(NOW - 5 * GRACE - 1);
        assert_eq!(
            (waiting.fate, waiting.waiting_past_grace),
            (Fate::Keep, true)
        );
        // Within the grace and not repaired: kept, not reported.
        let young = ts(NOW - GRACE + 1);
        let v = fate(&judge(), Kind::Delete, young, b"", || Some(0), || false);
        assert_eq!((v.fate, v.waiting_past_grace), (Fate::Keep, false));
        // Repaired within the grace: the horizon, not the grace, rules.
        let v = fate(&judge(), Kind::Delete, young, b"", || Some(NOW), || false);
        assert_eq!(v.fate, Fate::Drop);
        // An expired value waits as a tombstone.
        let v = fate(
            &judge(),
            Kind::PutExpiring,
            old,
            &expiring(NOW - 2 * GRACE),
            || Some(0),
            || false,
        );
        assert_eq!((v.fate, v.waiting_past_grace), (Fate::KeepExpired, true));
        let never = || -> Option<u64> { panic!("horizon asked") };
        assert_eq!(
            fate(&judge(), Kind::Put, old, b"v", never, || false).fate,
            Fate::Keep
        );
        let flush = Judge {
            collecting: false,
            ..judge()
        };
        assert_eq!(
            fate(&flush, Kind::Delete, old, b"", never, || false).fate,
            Fate::Keep
        );
    }

    /// A table may hold an older version only if its range covers the key,
    /// its smallest timestamp is at or below the version's (equal counts),
    /// and its bloom filter does not rule the key out.
    #[test]
    fn table_may_hold_older_by_range_timestamp_and_filter() {
        let range = (&b"b"[..], &b"d"[..]);
        assert!(may_hold_older(range, 10, b"c", 10, || true));
        assert!(may_hold_older(range, 5, b"b", 10, || true));
        assert!(may_hold_older(range, 5, b"d", 10, || true));
        assert!(!may_hold_older(range, 11, b"c", 10, || true));
        assert!(!may_hold_older(range, 5, b"a", 10, || true));
        assert!(!may_hold_older(range, 5, b"e", 10, || true));
        assert!(!may_hold_older(range, 5, b"c", 10, || false));
    }

    /// A memtable holds an older version when one of the key's versions is
    /// at or below the timestamp, whatever newer ones it also holds.
    #[test]
    fn memtable_holds_versions_at_or_below() {
        let mem = Arc::new(Memtable::new(0));
        mem.insert(b"k", 20, 1, Kind::Put, b"new");
        mem.insert(b"k", 10, 2, Kind::Put, b"old");
        mem.insert(b"l", 5, 3, Kind::Put, b"other");
        let holds = |k: &[u8], t| memtable_holds(&mem, &seek_at_or_below(k, t), k);
        assert!(holds(b"k", 10));
        assert!(holds(b"k", 15));
        assert!(holds(b"k", 30));
        assert!(!holds(b"k", 9));
        assert!(!holds(b"j", 100));
        assert!(holds(b"l", 5));
        assert!(!holds(b"m", 100));
        // Equal timestamp, any kind: counts as older.
        let tomb = Arc::new(Memtable::new(0));
        tomb.insert(b"k", 10, 1, Kind::Delete, b"");
        assert!(memtable_holds(&tomb, &seek_at_or_below(b"k", 10), b"k"));
        assert!(!memtable_holds(
            &Arc::new(Memtable::new(0)),
            &seek_at_or_below(b"k", 10),
            b"k"
        ));
    }
}
