//! The node's hybrid logical clock: write timestamps that never go back.
//!
//! A timestamp is `unix_ms << 16 | logical` (see `ataman_engine::key`). Each
//! call returns a value greater than every value returned before and not
//! behind the wall clock's milliseconds, so versions written through one
//! node are ordered even if the wall clock steps back.
//!
//! The low [`NODE_BITS`] bits of every timestamp a node issues are its index
//! in the cluster list, so two nodes never issue the same timestamp: two
//! writes of one key through different coordinators in the same millisecond
//! still have a newest one every replica agrees on.
//!
//! # Thread safety
//! Lock-free (`fetch_max` loop on one atomic); any thread may call `now`.

use ataman_engine::key::{TIMESTAMP_LOGICAL_BITS, Timestamp, timestamp_from_millis};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Low bits of a timestamp that name the node that issued it.
pub const NODE_BITS: u32 = 8;
/// Most nodes a cluster may have (one per value of the node bits).
pub const NODES_MAX: usize = 1 << NODE_BITS;

/// A hybrid logical clock.
#[derive(Debug, Default)]
pub struct Hlc {
    last: AtomicU64,
    node: u64,
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Hlc {
    /// The clock of a single node (node index 0).
    pub fn new() -> Self {
        Hlc::default()
    }

    /// The clock of node `index` of the cluster list.
    pub fn for_node(index: usize) -> Self {
        assert!(index < NODES_MAX, "node index {index} over {NODES_MAX}");
        Hlc {
            last: AtomicU64::new(0),
            node: index as u64,
        }
    }

    /// The next timestamp: above every one returned or observed before,
    /// not behind the wall clock, and ending in this node's bits.
    pub fn now(&self) -> Timestamp {
        self.now_at(wall_ms())
    }

    /// [`Hlc::now`] with the wall clock's reading given: `wall_ms`
    /// milliseconds since the Unix epoch. The deterministic simulation
    /// (`crates/sim`) drives the clock with its virtual time through this.
    pub fn now_at(&self, wall_ms: u64) -> Timestamp {
        let wall = timestamp_from_millis(wall_ms, 0);
        let mask = (1u64 << NODE_BITS) - 1;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let above = wall.max(last.saturating_add(1));
            // The smallest value >= `above` whose low bits are the node's.
            let mut next = (above & !mask) | self.node;
            if next < above {
                next = next.saturating_add(1 << NODE_BITS);
            }
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// Moves the clock past a timestamp seen from elsewhere (a replica, a recovered write).
    pub fn observe(&self, ts: Timestamp) {
        self.last.fetch_max(ts, Ordering::AcqRel);
    }
}

/// How far ahead of this node's wall clock a peer's timestamp may be; a
/// write stamped later is refused (a clock that far off, or a forged
/// timestamp, would make the key unwritable until then).
pub const PEER_CLOCK_AHEAD_MS_MAX: u64 = 60 * 60 * 1000;

/// True when `ts` is not too far ahead of the local wall clock to accept from a peer.
pub fn acceptable_from_peer(ts: Timestamp) -> bool {
    acceptable_from_peer_at(ts, wall_ms())
}

/// [`acceptable_from_peer`] with the local wall clock's reading given
/// (milliseconds since the Unix epoch), for the simulation's virtual clock.
pub fn acceptable_from_peer_at(ts: Timestamp, wall_ms: u64) -> bool {
    ts <= timestamp_from_millis(wall_ms.saturating_add(PEER_CLOCK_AHEAD_MS_MAX), u16::MAX)
}

/// Milliseconds part of a timestamp (for logs).
pub fn millis(ts: Timestamp) -> u64 {
    ts >> TIMESTAMP_LOGICAL_BITS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamps strictly increase, even across threads, and follow the wall clock.
    #[test]
    fn strictly_increasing() {
        let clock = std::sync::Arc::new(Hlc::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = std::sync::Arc::clone(&clock);
                std::thread::spawn(move || (0..10_000).map(|_| c.now()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<u64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "duplicate timestamps");
        assert!(millis(all[0]) + 60_000 > wall_ms());
        clock.observe(u64::MAX / 2);
        assert!(clock.now() > u64::MAX / 2);
    }

    /// Regression: observing a huge timestamp from a peer made `now` overflow
    /// (a panic in debug builds, a wrapped clock in release); `now` saturates,
    /// and the peer server refuses such timestamps in the first place.
    #[test]
    fn observing_a_huge_timestamp_does_not_overflow() {
        let clock = Hlc::for_node(1);
        clock.observe(u64::MAX - 3);
        assert_eq!(clock.now(), u64::MAX);
        assert!(!acceptable_from_peer(u64::MAX - 3));
        assert!(acceptable_from_peer(Hlc::for_node(2).now()));
    }

    /// `now_at` follows the given wall clock, never goes back when it steps
    /// back, and `acceptable_from_peer_at` draws the line at exactly
    /// `PEER_CLOCK_AHEAD_MS_MAX` ahead of the given reading.
    #[test]
    fn driven_by_a_given_wall_clock() {
        let clock = Hlc::for_node(3);
        let a = clock.now_at(1_000_000);
        assert_eq!(millis(a), 1_000_000);
        assert_eq!(a & 0xff, 3);
        let b = clock.now_at(999_000);
        assert!(b > a, "stepped back: {b} <= {a}");
        let c = clock.now_at(2_000_000);
        assert_eq!(millis(c), 2_000_000);
        let edge = timestamp_from_millis(5_000 + PEER_CLOCK_AHEAD_MS_MAX, u16::MAX);
        assert!(acceptable_from_peer_at(edge, 5_000));
        assert!(!acceptable_from_peer_at(edge + 1, 5_000));
    }

    /// Two nodes never issue the same timestamp, and each stays above what it observed.
    #[test]
    fn nodes_never_collide() {
        let a = Hlc::for_node(1);
        let b = Hlc::for_node(2);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let (x, y) = (a.now(), b.now());
            assert_eq!(x & 0xff, 1);
            assert_eq!(y & 0xff, 2);
            assert!(seen.insert(x) && seen.insert(y));
            b.observe(x);
            assert!(b.now() > x);
        }
    }
}
