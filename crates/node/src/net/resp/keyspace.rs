//! How many keys this node's replica holds, for `DBSIZE` and `INFO`'s
//! `# Keyspace` line (`keys=`, `expires=`, `avg_ttl=`), counted on a range
//! thread ([`crate::range::job_thread`]), never on a network thread.
//!
//! # What the numbers mean
//! - While the engine holds at most [`KEYSPACE_SCAN_ENTRIES_MAX`] entries
//!   (versions and tombstones, memtables and tables), a scan counts them
//!   exactly: `keys` the live keys (a value, deadline not passed on this
//!   node's clock), `expires` those of them with a deadline, `avg_ttl` the
//!   mean time their deadlines have left, in milliseconds.
//! - Past that bound, `keys` is estimated from the engine's counts without
//!   reading a key: entries less the tables' tombstones, so every
//!   overwritten, deleted or expired version not yet compacted away counts
//!   (high); `expires` and `avg_ttl` are the first
//!   [`KEYSPACE_SCAN_ENTRIES_MAX`] entries' (in key order) share and mean,
//!   scaled to `keys`.
//! - Either way these are this node's copies: a cluster of `N` nodes with
//!   `R` copies of each key holds about `R / N` of its keys on each node.

use ataman_engine::{Db, Entry};

/// Entries a count reads at most (values included, on a range thread):
/// the count is exact below it and estimated above it.
pub const KEYSPACE_SCAN_ENTRIES_MAX: u64 = 10_000;

/// This node's keys ([the rules](self)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keyspace {
    /// Live keys.
    pub keys: u64,
    /// Live keys with a deadline.
    pub expires: u64,
    /// Mean time those deadlines have left, in milliseconds (0: none).
    pub avg_ttl_ms: u64,
    /// True when counted exactly (not estimated).
    pub exact: bool,
}

/// What a scan of some entries found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Entries read.
    pub entries: u64,
    /// Live keys among them.
    pub live: u64,
    /// Live keys with a deadline.
    pub expiring: u64,
    /// The sum of the time their deadlines have left, in milliseconds.
    pub ttl_left_ms: u128,
}

impl Tally {
    /// Adds `entry` as read at `now_ms`.
    pub fn add(&mut self, entry: &Entry, now_ms: u64) {
        self.entries += 1;
        if entry.value.is_none() {
            return;
        }
        match entry.deadline_ms {
            None => self.live += 1,
            Some(deadline) if deadline > now_ms => {
                self.live += 1;
                self.expiring += 1;
                self.ttl_left_ms += u128::from(deadline - now_ms);
            }
            Some(_) => {}
        }
    }
}

/// The counts from a tally of the first entries and the engine's count of
/// entries (`entries`, of which `tombstones` in tables): exact when the
/// tally read every entry, else the estimate of [the rules](self).
pub fn keyspace(tally: Tally, read_all: bool, entries: u64, tombstones: u64) -> Keyspace {
    let avg_ttl_ms = match tally.expiring {
        0 => 0,
        n => u64::try_from(tally.ttl_left_ms / u128::from(n)).unwrap_or(u64::MAX),
    };
    if read_all {
        return Keyspace {
            keys: tally.live,
            expires: tally.expiring,
            avg_ttl_ms,
            exact: true,
        };
    }
    let keys = entries.saturating_sub(tombstones);
    let expires = match tally.live {
        0 => 0,
        live => {
            let scaled = u128::from(keys) * u128::from(tally.expiring) / u128::from(live);
            u64::try_from(scaled).unwrap_or(u64::MAX)
        }
    };
    Keyspace {
        keys,
        expires,
        avg_ttl_ms,
        exact: false,
    }
}

/// Counts this node's keys (a scan of at most
/// [`KEYSPACE_SCAN_ENTRIES_MAX`] entries: run it on a range thread).
pub fn count(db: &Db, now_ms: u64) -> Keyspace {
    let stats = db.stats();
    let entries = stats.memtable_entries + stats.level_entries.iter().sum::<u64>();
    let tombstones: u64 = stats.level_tombstones.iter().sum();
    let mut tally = Tally::default();
    let mut read_all = false;
    // Each key's newest version, tombstones included: each one read
    // counts against the bound.
    if let Ok(iter) = db.scan_without_filling(&[], None, true) {
        read_all = true;
        for entry in iter {
            if tally.entries >= KEYSPACE_SCAN_ENTRIES_MAX {
                read_all = false;
                break;
            }
            match entry {
                Ok((_, e)) => tally.add(&e, now_ms),
                Err(_) => {
                    read_all = false;
                    break;
                }
            }
        }
    }
    keyspace(tally, read_all, entries, tombstones)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(value: Option<&[u8]>, deadline_ms: Option<u64>) -> Entry {
        Entry {
            ts: 1,
            value: value.map(<[u8]>::to_vec),
            deadline_ms,
        }
    }

    /// A tally counts live keys and those with a deadline still ahead;
    /// exact when it read everything.
    #[test]
    fn an_exact_count_reads_deadlines_on_the_clock_given() {
        let mut t = Tally::default();
        t.add(&entry(Some(b"v"), None), 1_000);
        t.add(&entry(Some(b"v"), Some(3_000)), 1_000);
        t.add(&entry(Some(b"v"), Some(5_000)), 1_000);
        t.add(&entry(Some(b"v"), Some(900)), 1_000); // expired
        t.add(&entry(None, None), 1_000); // a tombstone
        assert_eq!((t.entries, t.live, t.expiring), (5, 3, 2));
        assert_eq!(
            keyspace(t, true, 99, 9),
            Keyspace {
                keys: 3,
                expires: 2,
                avg_ttl_ms: 3_000,
                exact: true
            }
        );
    }

    /// Past the bound: keys from the engine's counts, expires scaled by
    /// the share the first entries showed.
    #[test]
    fn past_the_bound_the_counts_are_estimated() {
        let t = Tally {
            entries: 100,
            live: 100,
            expiring: 25,
            ttl_left_ms: 25 * 4_000,
        };
        assert_eq!(
            keyspace(t, false, 1_000_100, 100),
            Keyspace {
                keys: 1_000_000,
                expires: 250_000,
                avg_ttl_ms: 4_000,
                exact: false
            }
        );
        assert_eq!(keyspace(Tally::default(), false, 5, 9).keys, 0);
    }
}
