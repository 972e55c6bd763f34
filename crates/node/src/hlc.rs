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
//! # Reservation (`<data-dir>/CLOCK`)
//! The clock can run ahead of the wall clock (a peer's timestamp up to
//! [`PEER_CLOCK_AHEAD_MS_MAX`] ahead observed, the wall clock stepped back,
//! logical increments), and it stamps writes the node never stores itself
//! (it is not a replica of the key, its local write failed, it crashed
//! first). Seeding a restarted clock from the stored data alone could then
//! issue a timestamp again, with the same node bits, to another write of the
//! same key: replicas would keep different values under one version forever.
//!
//! So a clock made by [`Hlc::with_reservation`] never returns a timestamp
//! above its *reservation*, an upper bound kept durably (the node keeps it
//! in `CLOCK`, see [`crate::clock_file`]). [`Hlc::renew`], called often by a
//! background thread, keeps the reservation [`LEASE`] ahead of the clock,
//! renewing when less than half is left; a `now` that would still pass it
//! (a big wall-clock jump, a far-ahead peer timestamp just observed)
//! persists a new one itself before returning ([`Renewal::Synchronous`],
//! rare). At start, [`restore_plan`] says how to get past the old
//! reservation: wait for the wall clock when it is close, observe it when
//! it is far ahead.
//!
//! A test hook may shift the wall clock the HLC reads by a signed offset
//! ([`Hlc::set_offset_hook`], the node's `--fault-control` file): the fault
//! harness jumps one node's clock ahead or back to check that writes stay
//! ordered. Without the hook the offset is absent and `now` takes one
//! untaken branch.
//!
//! # Thread safety
//! `now` is lock-free (a compare-exchange loop on one atomic) unless it must
//! extend the reservation; persisting a reservation holds a mutex, so one
//! is written at a time and the reservation only grows.

use ataman_engine::key::{TIMESTAMP_LOGICAL_BITS, Timestamp, timestamp_from_millis};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// Low bits of a timestamp that name the node that issued it.
pub const NODE_BITS: u32 = 8;
/// Most nodes a cluster may have (one per value of the node bits).
pub const NODES_MAX: usize = 1 << NODE_BITS;

/// How far ahead of the clock the reservation is kept, milliseconds.
pub const LEASE_MS: u64 = 500;
/// [`LEASE_MS`] as a timestamp difference.
pub const LEASE: Timestamp = LEASE_MS << TIMESTAMP_LOGICAL_BITS;

/// Why a reservation is persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// [`Hlc::renew`]: less than half the lease was left.
    Background,
    /// [`Hlc::now`] was about to return `wanted`, past the reservation; it
    /// waits for the new one to be persisted.
    Synchronous {
        /// The timestamp `now` is about to return.
        wanted: Timestamp,
    },
}

/// Persists a new reservation durably before returning. It cannot fail:
/// on an I/O error it should log loudly and return (the clock goes on
/// with the new reservation in memory).
pub type Persist = Box<dyn FnMut(Timestamp, Renewal) + Send>;

/// A hybrid logical clock.
pub struct Hlc {
    last: AtomicU64,
    node: u64,
    /// No timestamp above this is returned (`u64::MAX` without a reservation).
    reserved: AtomicU64,
    persist: Option<Mutex<Persist>>,
    /// Milliseconds added to the wall clock (test hook); `None` in production.
    offset_ms: Option<Arc<AtomicI64>>,
}

impl std::fmt::Debug for Hlc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hlc")
            .field("last", &self.last)
            .field("node", &self.node)
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

impl Default for Hlc {
    fn default() -> Self {
        Hlc::for_node(0)
    }
}

/// Wall-clock milliseconds since the Unix epoch.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Hlc {
    /// The clock of a single node (node index 0), without a reservation.
    pub fn new() -> Self {
        Hlc::default()
    }

    /// The clock of node `index` of the cluster list, without a
    /// reservation (nothing bounds it across a restart: for tests).
    pub fn for_node(index: usize) -> Self {
        assert!(index < NODES_MAX, "node index {index} over {NODES_MAX}");
        Hlc {
            last: AtomicU64::new(0),
            node: index as u64,
            reserved: AtomicU64::new(u64::MAX),
            persist: None,
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

    /// Makes this clock read the wall clock shifted by `offset_ms` (the
    /// fault harness's clock jumps); the reservation is kept.
    pub fn set_offset_hook(mut self, offset_ms: Arc<AtomicI64>) -> Self {
        self.offset_ms = Some(offset_ms);
        self
    }

    /// The wall clock this HLC follows, in Unix milliseconds.
    fn wall_ms(&self) -> u64 {
        match &self.offset_ms {
            None => wall_ms(),
            Some(offset) => wall_ms().saturating_add_signed(offset.load(Ordering::Relaxed)),
        }
    }

    /// The clock of node `index` bounded by a reservation that `persist`
    /// keeps durably. It starts with none: the first `now` persists one
    /// (call [`Hlc::renew`] before serving to do it ahead).
    pub fn with_reservation(index: usize, persist: Persist) -> Self {
        Hlc {
            reserved: AtomicU64::new(0),
            persist: Some(Mutex::new(persist)),
            ..Hlc::for_node(index)
        }
    }

    /// The current reservation (`u64::MAX` without one).
    pub fn reserved(&self) -> Timestamp {
        self.reserved.load(Ordering::Acquire)
    }

    /// The next timestamp: above every one returned or observed before,
    /// not behind the wall clock, and ending in this node's bits.
    pub fn now(&self) -> Timestamp {
        self.now_at(self.wall_ms())
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
            if next > self.reserved.load(Ordering::Acquire) {
                // Rare: persist a reservation covering `next` first. The
                // reservation then covers it, so the loop goes on.
                self.extend(next, next, Renewal::Synchronous { wanted: next });
                last = self.last.load(Ordering::Relaxed);
                continue;
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

    /// Keeps the reservation at least [`LEASE`] ahead of the clock,
    /// persisting a new one when less than half is left. A background
    /// thread calls this often (well within half a lease).
    pub fn renew(&self) {
        self.renew_at(self.wall_ms());
    }

    /// [`Hlc::renew`] with the wall clock's reading given.
    pub fn renew_at(&self, wall_ms: u64) {
        let current = self
            .last
            .load(Ordering::Acquire)
            .max(timestamp_from_millis(wall_ms, 0));
        self.extend(
            current.saturating_add(LEASE / 2),
            current,
            Renewal::Background,
        );
    }

    /// Unless the reservation already reaches `needed`, persists
    /// `base + LEASE` and then makes it the reservation.
    fn extend(&self, needed: Timestamp, base: Timestamp, why: Renewal) {
        let Some(persist) = &self.persist else {
            return;
        };
        let mut persist = persist.lock().unwrap_or_else(|e| e.into_inner());
        if self.reserved.load(Ordering::Acquire) >= needed {
            return; // another thread got there first
        }
        let target = base.saturating_add(LEASE).max(needed);
        (*persist)(target, why);
        self.reserved.fetch_max(target, Ordering::AcqRel);
    }
}

/// What a starting node does with the reservation its last run left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restore {
    /// Nothing: no reservation, or the wall clock is past it already.
    Nothing,
    /// Wait until the wall clock reads this (Unix milliseconds): then every
    /// timestamp the clock issues is above the old reservation.
    WaitUntilMs(u64),
    /// The reservation is far ahead of the wall clock (the clock had run
    /// ahead on peers' timestamps): observe it instead of waiting.
    Observe(Timestamp),
}

/// How to start past `reserved` (the last run's reservation, `None` when
/// there is none) with the wall clock at `wall_ms`: wait when it is at
/// most 2 × [`LEASE`] ahead, observe it when further.
pub fn restore_plan(reserved: Option<Timestamp>, wall_ms: u64) -> Restore {
    let Some(reserved) = reserved else {
        return Restore::Nothing;
    };
    let wall = timestamp_from_millis(wall_ms, 0);
    if reserved < wall {
        Restore::Nothing
    } else if reserved - wall <= 2 * LEASE {
        Restore::WaitUntilMs(millis(reserved).saturating_add(1))
    } else {
        Restore::Observe(reserved)
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

    /// A clock whose reservations go to a shared "durable" cell, as the
    /// simulation's do; the log records (reservation, why) in order.
    fn reserving(
        index: usize,
        durable: &std::sync::Arc<AtomicU64>,
        log: &std::sync::Arc<Mutex<Vec<(Timestamp, Renewal)>>>,
    ) -> Hlc {
        let (durable, log) = (std::sync::Arc::clone(durable), std::sync::Arc::clone(log));
        Hlc::with_reservation(
            index,
            Box::new(move |ts, why| {
                durable.store(ts, Ordering::SeqCst);
                log.lock().unwrap().push((ts, why));
            }),
        )
    }

    /// Starts a clock from a crashed one's durable reservation as
    /// `ataman serve` does, at wall time `wall`; the wall time it serves from.
    fn restart(index: usize, durable: &std::sync::Arc<AtomicU64>, wall: u64) -> (Hlc, u64) {
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        let clock = reserving(index, durable, &log);
        let reserved = Some(durable.load(Ordering::SeqCst)).filter(|&r| r != 0);
        match restore_plan(reserved, wall) {
            Restore::Nothing => (clock, wall),
            Restore::WaitUntilMs(until) => {
                assert!(until > wall && until - wall <= 2 * LEASE_MS + 1);
                (clock, until)
            }
            Restore::Observe(ts) => {
                clock.observe(ts);
                (clock, wall)
            }
        }
    }

    /// The bug the simulation found: a clock run ahead (a far-ahead peer
    /// timestamp, a wall clock stepped back, logical increments) stamps
    /// writes that are never stored; a restart from its reservation never
    /// issues any of those timestamps again, whether it waits for the wall
    /// clock (close reservation) or observes it (far ahead).
    #[test]
    fn restart_never_reissues() {
        let base = 1_700_000_000_000;
        for (peer_ahead_ms, restart_wall) in [
            (0, base),               // only logical increments: wait
            (300, base - 5_000),     // wall clock stepped back: observe
            (3_600_000, base + 100), // a peer an hour ahead: observe
        ] {
            let durable = std::sync::Arc::new(AtomicU64::new(0));
            let log = std::sync::Arc::new(Mutex::new(Vec::new()));
            let clock = reserving(4, &durable, &log);
            clock.renew_at(base);
            if peer_ahead_ms > 0 {
                clock.observe(timestamp_from_millis(base + peer_ahead_ms, 7));
            }
            let issued: Vec<_> = (0..1000).map(|_| clock.now_at(base)).collect();
            let max = *issued.iter().max().unwrap();
            assert!(
                max <= durable.load(Ordering::SeqCst),
                "issued past the durable reservation"
            );
            drop(clock); // crash: nothing of the clock survives but the reservation
            let (clock, wall) = restart(4, &durable, restart_wall);
            for _ in 0..1000 {
                let ts = clock.now_at(wall);
                assert!(
                    ts > max,
                    "reissued {ts} <= {max} (peer ahead {peer_ahead_ms} ms)"
                );
            }
        }
        // Seeding from the data alone (the old start) would have reissued.
        let old = Hlc::for_node(4);
        let first = old.now_at(base);
        assert_eq!(Hlc::for_node(4).now_at(base), first);
        assert_eq!(restore_plan(None, base), Restore::Nothing);
        assert_eq!(restore_plan(Some(first), base + 1), Restore::Nothing);
    }

    /// A `now` past the reservation persists a new one before it returns
    /// the timestamp; background renewal keeps a lease ahead and renews
    /// only when less than half is left.
    #[test]
    fn synchronous_reservation_before_returning() {
        let base = 2_000_000;
        let durable = std::sync::Arc::new(AtomicU64::new(0));
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        let clock = reserving(2, &durable, &log);
        let first = clock.now_at(base);
        assert_eq!(
            log.lock().unwrap().clone(),
            vec![(first + LEASE, Renewal::Synchronous { wanted: first })]
        );
        // Within the lease: no write.
        clock.now_at(base + LEASE_MS / 4);
        clock.renew_at(base + LEASE_MS / 4);
        assert_eq!(log.lock().unwrap().len(), 1);
        // Less than half left: a background renewal.
        clock.renew_at(base + LEASE_MS / 2 + 1);
        let (ts, why) = *log.lock().unwrap().last().unwrap();
        assert_eq!(why, Renewal::Background);
        assert_eq!(
            ts,
            timestamp_from_millis(base + LEASE_MS / 2 + 1 + LEASE_MS, 0)
        );
        // A peer far ahead: the next timestamp waits for its reservation.
        clock.observe(timestamp_from_millis(base + 60_000, 0));
        let ts = clock.now_at(base);
        assert!(millis(ts) >= base + 60_000);
        assert!(durable.load(Ordering::SeqCst) >= ts);
        assert_eq!(
            log.lock().unwrap().last().unwrap().1,
            Renewal::Synchronous { wanted: ts }
        );
        // Every timestamp, from any thread, is covered when it is returned.
        let clock = std::sync::Arc::new(clock);
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (c, d) = (
                    std::sync::Arc::clone(&clock),
                    std::sync::Arc::clone(&durable),
                );
                std::thread::spawn(move || {
                    for i in 0..5_000u64 {
                        let ts = c.now_at(base + 60_000 + i * (t + 1));
                        assert!(ts <= d.load(Ordering::SeqCst), "{ts} not covered");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    /// Through a real `CLOCK` file: reservations land in the file, and a
    /// clock restarted from it never goes back to what the first issued.
    #[test]
    fn clock_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let clock = Hlc::with_reservation(
            1,
            Box::new(move |ts, _| crate::clock_file::write(&path, ts).unwrap()),
        );
        let wall = 3_000_000;
        clock.observe(timestamp_from_millis(wall + 10_000, 0));
        let issued = clock.now_at(wall);
        let reserved = crate::clock_file::read(dir.path()).unwrap().unwrap();
        assert!(reserved >= issued && reserved == clock.reserved());
        let restarted = Hlc::for_node(1);
        match restore_plan(Some(reserved), wall) {
            Restore::Observe(ts) => restarted.observe(ts),
            other => panic!("{other:?}"),
        }
        assert!(restarted.now_at(wall) > issued);
    }
}
