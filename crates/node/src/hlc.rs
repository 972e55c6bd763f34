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
//! A test hook may shift the wall clock the HLC reads by a signed offset
//! ([`Hlc::with_offset`], the node's `--fault-control` file): the fault
//! harness jumps one node's clock ahead or back to check that writes stay
//! ordered. Without the hook the offset is absent and `now` takes one
//! untaken branch.
//!
//! # Thread safety
//! Lock-free (`fetch_max` loop on one atomic); any thread may call `now`.
//! The offset is an atomic read with `Relaxed` ordering: a change is seen
//! by the next call of any thread, which is all a clock jump needs.

use ataman_engine::key::{TIMESTAMP_LOGICAL_BITS, Timestamp, timestamp_from_millis};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
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
    /// Milliseconds added to the wall clock (test hook); `None` in production.
    offset_ms: Option<Arc<AtomicI64>>,
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
            offset_ms: None,
        }
    }

    /// The clock of node `index`, reading the wall clock shifted by
    /// `offset_ms` milliseconds (changed at any time by its owner).
    pub fn with_offset(index: usize, offset_ms: Arc<AtomicI64>) -> Self {
        Hlc {
            offset_ms: Some(offset_ms),
            ..Hlc::for_node(index)
        }
    }

    /// The wall clock this HLC follows, in Unix milliseconds.
    fn wall_ms(&self) -> u64 {
        match &self.offset_ms {
            None => wall_ms(),
            Some(offset) => wall_ms().saturating_add_signed(offset.load(Ordering::Relaxed)),
        }
    }

    /// The next timestamp: above every one returned or observed before,
    /// not behind the wall clock, and ending in this node's bits.
    pub fn now(&self) -> Timestamp {
        let wall = timestamp_from_millis(self.wall_ms(), 0);
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
    ts <= timestamp_from_millis(wall_ms().saturating_add(PEER_CLOCK_AHEAD_MS_MAX), u16::MAX)
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

    /// An offset moves the clock's wall reading both ways, yet timestamps
    /// still only grow: a jump back stalls the milliseconds, not the order.
    #[test]
    fn offset_jumps_ahead_and_back_without_going_back() {
        let offset = Arc::new(AtomicI64::new(0));
        let clock = Hlc::with_offset(3, Arc::clone(&offset));
        let before = clock.now();
        offset.store(30_000, Ordering::Relaxed);
        let ahead = clock.now();
        assert!(millis(ahead) >= millis(before) + 29_000, "{before} {ahead}");
        offset.store(-30_000, Ordering::Relaxed);
        let back = clock.now();
        assert!(back > ahead, "went back: {ahead} then {back}");
        assert_eq!(back & 0xff, 3);
        assert!(acceptable_from_peer(ahead));
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
