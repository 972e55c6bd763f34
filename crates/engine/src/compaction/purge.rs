//! A purge: dropping every version of the keys a predicate rejects,
//! without writing a tombstone (a "cleanup compaction").
//!
//! The engine's part of a cluster node's cleanup after a layout change
//! (docs/ARCHITECTURE.md, "Membership"): a node deletes its copies of the
//! keys it no longer replicates. A tombstone would be wrong there (stamped
//! now it would beat newer values the node never saw, if it became a
//! replica again; stamped at the value's timestamp it ties), so the
//! versions are removed from the files instead.
//!
//! # Rules
//! - **A cutoff.** The purge applies to the versions written up to the
//!   sequence number the memtable held when the purge began
//!   ([`crate::Db::purge`] freezes it, flushes it, and reads that number
//!   in the writer thread, which assigns them). Versions written later
//!   are kept whatever their key: they may be flushed and merged into the
//!   purge's input, and the filter looks at each entry's sequence number.
//! - **Every version, by the end.** A rejected entry is skipped before
//!   compaction's newest-version rule looks at it. A purge rewrites every
//!   table live when it began, a merge at a time (the engine's `db/purge.rs`):
//!   when it ends, no version up to the cutoff of a rejected key is left.
//!   While it runs, such a key may read as an earlier version of its own
//!   (one in a table not merged yet) or as gone.
//! - **A merge at a time.** Each merge is installed by one manifest edit
//!   that adds its tables and removes its inputs, as a compaction's; a
//!   crash before it leaves that merge's inputs (the new tables are
//!   unreferenced and removed at the next open), after it the new ones.
//!   A purge cut short leaves the tree as before, as after, or between;
//!   one run again with the same predicate finishes it. Between two
//!   merges the compaction thread runs the compaction the tree needs.

use super::pace::{Pace, Pacer};

/// Says whether a user key is kept (true) or purged (false).
pub type KeepKey = dyn Fn(&[u8]) -> bool + Send + Sync;

/// What a purge dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// User keys with at least one version dropped, counted once per
    /// merge: a key whose dropped versions lay in tables that different
    /// merges rewrote counts once for each.
    pub keys_dropped: u64,
    /// Bytes of the dropped entries (internal key plus stored value).
    pub bytes_dropped: u64,
    /// Tables read through the purge's filter: by its own merges and
    /// scans, and by the compactions that dropped for it meanwhile.
    pub tables_read: u64,
    /// Bytes of the tables read.
    pub bytes_read: u64,
    /// Bytes of the tables written.
    pub bytes_written: u64,
}

/// The filter [`super::output::write_tables_filtered`] applies.
pub struct PurgeFilter<'a> {
    keep: &'a KeepKey,
    seq_max: u64,
    last_dropped: Option<Vec<u8>>,
    pacer: Option<Pacer<'a>>,
    /// What was dropped so far.
    pub report: PurgeReport,
    /// Set when the pacer was told to stop: the merge ends with
    /// `Error::Closed` (nothing installed; a purge run again redoes it).
    pub stopped: bool,
}

impl<'a> PurgeFilter<'a> {
    /// Drops the versions with a sequence number up to `seq_max` of every
    /// key `keep` rejects.
    pub fn new(keep: &'a KeepKey, seq_max: u64) -> Self {
        PurgeFilter {
            keep,
            seq_max,
            last_dropped: None,
            pacer: None,
            report: PurgeReport::default(),
            stopped: false,
        }
    }

    /// The same filter, sleeping between entries to keep `pacer`'s rate.
    pub fn paced(mut self, pacer: Pacer<'a>) -> Self {
        self.pacer = Some(pacer);
        self
    }

    /// The pace as the filter left it (for the purge's next merge), and
    /// what it dropped.
    pub fn finish(self) -> (Option<Pace>, PurgeReport) {
        (self.pacer.map(|p| p.pace), self.report)
    }

    /// True when the entry is dropped (and counted); a paced filter first
    /// waits as its pace says.
    pub fn drops(&mut self, user_key: &[u8], seq: u64, entry_bytes: usize) -> bool {
        if let Some(p) = &mut self.pacer {
            self.stopped |= p.step(entry_bytes as u64);
        }
        if seq > self.seq_max {
            return false;
        }
        // Entries of one key are adjacent: the last dropped key decides
        // without asking the predicate again.
        let known = self.last_dropped.as_deref() == Some(user_key);
        if !known {
            if (self.keep)(user_key) {
                return false;
            }
            self.report.keys_dropped += 1;
            let last = self.last_dropped.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(user_key);
        }
        self.report.bytes_dropped += entry_bytes as u64;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A paced filter asks its pace once per step and stops when the
    /// engine closes during a wait; unpaced, it never stops.
    #[test]
    fn a_paced_filter_waits_per_step_and_stops_at_a_close() {
        use std::cell::RefCell;
        let keep = |_: &[u8]| true;
        let waits = RefCell::new(Vec::new());
        let closing = RefCell::new(false);
        let wait = |d: Duration| {
            waits.borrow_mut().push(d);
            *closing.borrow()
        };
        let hurry = || false;
        let pacer = Pacer {
            pace: Pace::new(1024 * 1024, Instant::now()),
            hurry: &hurry,
            wait: &wait,
            waited: Duration::ZERO,
        };
        let mut f = PurgeFilter::new(&keep, 10).paced(pacer);
        let entry = 64 * 1024;
        for _ in 0..32 {
            assert!(!f.drops(b"k", 1, entry));
        }
        // 2 MiB read at once at 1 MiB/s: two decisions, each a wait.
        assert_eq!(waits.borrow().len(), 2);
        assert!(waits.borrow().iter().all(|d| !d.is_zero()));
        assert!(!f.stopped);
        *closing.borrow_mut() = true;
        for _ in 0..16 {
            f.drops(b"k", 1, entry);
        }
        assert!(f.stopped);
        let mut unpaced = PurgeFilter::new(&keep, 10);
        for _ in 0..64 {
            unpaced.drops(b"k", 1, entry);
        }
        assert!(!unpaced.stopped);
    }

    /// Rejected keys are dropped and counted once per key; kept keys and
    /// versions after the cutoff are not.
    #[test]
    fn drops_rejected_keys_up_to_the_cutoff() {
        let keep = |k: &[u8]| k.starts_with(b"keep");
        let mut f = PurgeFilter::new(&keep, 10);
        assert!(f.drops(b"gone", 5, 7));
        assert!(f.drops(b"gone", 3, 7));
        assert!(!f.drops(b"gone", 11, 7), "written after the cutoff");
        assert!(!f.drops(b"keep1", 2, 9));
        assert!(f.drops(b"lost", 1, 1));
        assert_eq!(f.report.keys_dropped, 2);
        assert_eq!(f.report.bytes_dropped, 15);
    }
}
