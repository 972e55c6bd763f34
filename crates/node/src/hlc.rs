//! The node's hybrid logical clock: write timestamps that never go back.
//!
//! A timestamp is `unix_ms << 16 | logical` (see `ataman_engine::key`). Each
//! call returns a value greater than every value returned before and not
//! behind the wall clock's milliseconds, so versions written through one
//! node are ordered even if the wall clock steps back.
//!
//! The low [`NODE_BITS`] bits of every timestamp a node issues are its node
//! id in the live layout (`cluster::node_ids`: agreed with the layout, kept
//! across restarts, never a position in a list), so two nodes never issue
//! the same timestamp: two writes of one key through different coordinators
//! in the same millisecond still have a newest one every replica agrees on.
//! A clock whose node holds no id (joining, not added yet, or removed)
//! stamps nothing: [`Hlc::now`] fails with [`Unstamped::NoNodeId`] (the
//! node answers the write 503 with the reason). The id is one atomic,
//! set when the node's placement changes ([`Hlc::set_node`]).
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
//! # When the reservation cannot be persisted
//! Persisting can fail (a full or broken disk, no file descriptor left).
//! The clock then never returns a timestamp above the reservation it last
//! persisted: those are covered, so it goes on issuing them until it
//! reaches it, and then [`Hlc::now`] fails with [`NotDurable`] (the node
//! answers the write 503 with the reason; nothing is acknowledged). While
//! the last attempt failed, `now` does not try again itself (no disk I/O
//! on the request path of a broken disk); [`Hlc::renew`] tries on every
//! call, and once one persist succeeds timestamps past the old reservation
//! are issued again.
//!
//! A test hook may shift the wall clock the HLC reads by a signed offset
//! ([`Hlc::set_offset_hook`], the node's `--fault-control` file): the fault
//! harness jumps one node's clock ahead or back to check that writes stay
//! ordered. Without the hook the offset is absent and `now` takes one
//! untaken branch.
//!
//! # Thread safety
//! `now` is lock-free (a load of the node id, a compare-exchange loop on one atomic) unless it must
//! extend the reservation; persisting a reservation holds a mutex, so one
//! is written at a time and the reservation only grows.

use ataman_engine::key::{TIMESTAMP_LOGICAL_BITS, Timestamp, timestamp_from_millis};
use ataman_testkit::lock::lock;
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

/// Persists a new reservation durably before returning `Ok`; an error
/// leaves the reservation where it was (see "When the reservation cannot
/// be persisted").
pub type Persist = Box<dyn FnMut(Timestamp, Renewal) -> std::io::Result<()> + Send>;

/// Why [`Hlc::now`] issued no timestamp: the next one is past the durable
/// reservation and persisting a new reservation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("clock reservation not durable: {reason}")]
pub struct NotDurable {
    /// The persist error.
    pub reason: String,
}

/// Why [`Hlc::now`] issued no timestamp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unstamped {
    /// The reservation could not be persisted.
    #[error(transparent)]
    NotDurable(#[from] NotDurable),
    /// This node holds no node id in the live layout (joining, or removed).
    #[error(
        "this node holds no node id in the cluster's layout (joining and not added yet, or removed): it stamps no write"
    )]
    NoNodeId,
}

/// The node bits' value while the clock has no node id.
const NO_NODE: u64 = u64::MAX;

/// The persisting side of a reserving clock, behind one mutex.
struct Persister {
    persist: Persist,
    /// The last attempt's error, `None` once one succeeded.
    failure: Option<String>,
}

/// A hybrid logical clock.
pub struct Hlc {
    last: AtomicU64,
    /// The node bits, [`NO_NODE`] while the node holds no id.
    node: AtomicU64,
    /// No timestamp above this is returned (`u64::MAX` without a
    /// reservation); only a persisted reservation is stored here.
    reserved: AtomicU64,
    persist: Option<Mutex<Persister>>,
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
            node: AtomicU64::new(index as u64),
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
            persist: Some(Mutex::new(Persister {
                persist,
                failure: None,
            })),
            ..Hlc::for_node(index)
        }
    }

    /// Sets the node id whose bits end every timestamp from now on; `None`:
    /// the node holds none (joining, removed) and [`Hlc::now`] stamps nothing.
    pub fn set_node(&self, id: Option<u16>) {
        let bits = match id {
            Some(id) if usize::from(id) < NODES_MAX => u64::from(id),
            _ => NO_NODE,
        };
        self.node.store(bits, Ordering::Release);
    }

    /// The node id the clock stamps with, `None` while it holds none.
    pub fn node(&self) -> Option<u16> {
        let bits = self.node.load(Ordering::Acquire);
        (bits != NO_NODE).then_some(bits as u16)
    }

    /// The current reservation (`u64::MAX` without one).
    pub fn reserved(&self) -> Timestamp {
        self.reserved.load(Ordering::Acquire)
    }

    /// The reservation as far as it is durable: [`Hlc::reserved`] for a
    /// clock that persists one, 0 for one that does not (nothing is
    /// durable; the register's acceptor then syncs every promise).
    pub fn durable_reservation(&self) -> Timestamp {
        if self.persist.is_some() {
            self.reserved()
        } else {
            0
        }
    }

    /// The error of the last attempt to persist a reservation, `None` when
    /// it succeeded (or none was made).
    pub fn persist_failure(&self) -> Option<String> {
        let persister = self.persist.as_ref()?;
        let persister = lock(persister);
        persister.failure.clone()
    }

    /// The next timestamp: above every one returned or observed before,
    /// not behind the wall clock, and ending in this node's bits; or
    /// [`Unstamped::NotDurable`] when it would be past the reservation and a
    /// new one could not be persisted, [`Unstamped::NoNodeId`] while the
    /// node holds no id.
    pub fn now(&self) -> Result<Timestamp, Unstamped> {
        self.now_at(self.wall_ms())
    }

    /// [`Hlc::now`] with the wall clock's reading given: `wall_ms`
    /// milliseconds since the Unix epoch. The deterministic simulation
    /// (`crates/sim`) drives the clock with its virtual time through this.
    pub fn now_at(&self, wall_ms: u64) -> Result<Timestamp, Unstamped> {
        let node = self.node.load(Ordering::Acquire);
        if node == NO_NODE {
            return Err(Unstamped::NoNodeId);
        }
        let wall = timestamp_from_millis(wall_ms, 0);
        let mask = (1u64 << NODE_BITS) - 1;
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let above = wall.max(last.saturating_add(1));
            // The smallest value >= `above` whose low bits are the node's.
            let mut next = (above & !mask) | node;
            if next < above {
                next = next.saturating_add(1 << NODE_BITS);
            }
            if next > self.reserved.load(Ordering::Acquire) {
                // Rare: persist a reservation covering `next` first. The
                // reservation then covers it, so the loop goes on.
                self.extend(next, next, Renewal::Synchronous { wanted: next })?;
                last = self.last.load(Ordering::Relaxed);
                continue;
            }
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(next),
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
    /// thread calls this often (well within half a lease); it is also what
    /// retries after a failed persist. The error is the persist's.
    pub fn renew(&self) -> Result<(), NotDurable> {
        self.renew_at(self.wall_ms())
    }

    /// [`Hlc::renew`] with the wall clock's reading given.
    pub fn renew_at(&self, wall_ms: u64) -> Result<(), NotDurable> {
        let current = self
            .last
            .load(Ordering::Acquire)
            .max(timestamp_from_millis(wall_ms, 0));
        self.extend(
            current.saturating_add(LEASE / 2),
            current,
            Renewal::Background,
        )
    }

    /// Unless the reservation already reaches `needed`, persists
    /// `base + LEASE` and then makes it the reservation. A synchronous
    /// extension after a failed attempt fails at once with that attempt's
    /// error (the background renewal retries).
    fn extend(&self, needed: Timestamp, base: Timestamp, why: Renewal) -> Result<(), NotDurable> {
        let Some(persister) = &self.persist else {
            return Ok(());
        };
        let mut persister = lock(persister);
        if self.reserved.load(Ordering::Acquire) >= needed {
            return Ok(()); // another thread got there first
        }
        if let (Renewal::Synchronous { .. }, Some(reason)) = (why, &persister.failure) {
            return Err(NotDurable {
                reason: reason.clone(),
            });
        }
        let target = base.saturating_add(LEASE).max(needed);
        match (persister.persist)(target, why) {
            Ok(()) => {
                persister.failure = None;
                self.reserved.fetch_max(target, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                let reason = e.to_string();
                persister.failure = Some(reason.clone());
                Err(NotDurable { reason })
            }
        }
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
                std::thread::spawn(move || {
                    (0..10_000).map(|_| c.now().unwrap()).collect::<Vec<_>>()
                })
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
        assert!(clock.now().unwrap() > u64::MAX / 2);
    }

    /// Regression: observing a huge timestamp from a peer made `now` overflow
    /// (a panic in debug builds, a wrapped clock in release); `now` saturates,
    /// and the peer server refuses such timestamps in the first place.
    #[test]
    fn observing_a_huge_timestamp_does_not_overflow() {
        let clock = Hlc::for_node(1);
        clock.observe(u64::MAX - 3);
        assert_eq!(clock.now().unwrap(), u64::MAX);
        assert!(!acceptable_from_peer(u64::MAX - 3));
        assert!(acceptable_from_peer(Hlc::for_node(2).now().unwrap()));
    }

    /// A clock whose node holds no id stamps nothing (a clear error); once
    /// the id is set, every timestamp ends in it, and it follows a change
    /// of id (a node added, removed) without going back.
    #[test]
    fn stamps_only_with_a_node_id() {
        let clock = Hlc::for_node(0);
        clock.set_node(None);
        assert_eq!(clock.node(), None);
        let err = clock.now_at(1_000_000).unwrap_err();
        assert_eq!(err, Unstamped::NoNodeId);
        assert!(err.to_string().contains("no node id"), "{err}");
        clock.set_node(Some(7));
        let a = clock.now_at(1_000_000).unwrap();
        assert_eq!((a & 0xff, clock.node()), (7, Some(7)));
        clock.set_node(Some(200));
        let b = clock.now_at(1_000_000).unwrap();
        assert_eq!(b & 0xff, 200);
        assert!(b > a);
        // An id past the node bits is no id (never a wrapped one).
        clock.set_node(Some(NODES_MAX as u16));
        assert_eq!(clock.now_at(1_000_000), Err(Unstamped::NoNodeId));
    }

    /// `now_at` follows the given wall clock, never goes back when it steps
    /// back, and `acceptable_from_peer_at` draws the line at exactly
    /// `PEER_CLOCK_AHEAD_MS_MAX` ahead of the given reading.
    #[test]
    fn driven_by_a_given_wall_clock() {
        let clock = Hlc::for_node(3);
        let a = clock.now_at(1_000_000).unwrap();
        assert_eq!(millis(a), 1_000_000);
        assert_eq!(a & 0xff, 3);
        let b = clock.now_at(999_000).unwrap();
        assert!(b > a, "stepped back: {b} <= {a}");
        let c = clock.now_at(2_000_000).unwrap();
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
        let before = clock.now().unwrap();
        offset.store(30_000, Ordering::Relaxed);
        let ahead = clock.now().unwrap();
        assert!(millis(ahead) >= millis(before) + 29_000, "{before} {ahead}");
        offset.store(-30_000, Ordering::Relaxed);
        let back = clock.now().unwrap();
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
            let (x, y) = (a.now().unwrap(), b.now().unwrap());
            assert_eq!(x & 0xff, 1);
            assert_eq!(y & 0xff, 2);
            assert!(seen.insert(x) && seen.insert(y));
            b.observe(x);
            assert!(b.now().unwrap() > x);
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
                Ok(())
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
            clock.renew_at(base).unwrap();
            if peer_ahead_ms > 0 {
                clock.observe(timestamp_from_millis(base + peer_ahead_ms, 7));
            }
            let issued: Vec<_> = (0..1000).map(|_| clock.now_at(base).unwrap()).collect();
            let max = *issued.iter().max().unwrap();
            assert!(
                max <= durable.load(Ordering::SeqCst),
                "issued past the durable reservation"
            );
            drop(clock); // crash: nothing of the clock survives but the reservation
            let (clock, wall) = restart(4, &durable, restart_wall);
            for _ in 0..1000 {
                let ts = clock.now_at(wall).unwrap();
                assert!(
                    ts > max,
                    "reissued {ts} <= {max} (peer ahead {peer_ahead_ms} ms)"
                );
            }
        }
        // Seeding from the data alone (the old start) would have reissued.
        let old = Hlc::for_node(4);
        let first = old.now_at(base).unwrap();
        assert_eq!(Hlc::for_node(4).now_at(base).unwrap(), first);
        assert_eq!(restore_plan(None, base), Restore::Nothing);
        assert_eq!(restore_plan(Some(first), base + 1), Restore::Nothing);
    }

    /// What the register's acceptor leans on: a clock without a persister
    /// has no durable reservation (0); with one, every timestamp issued
    /// (each after an observed peer ballot) is at or below the durable
    /// reservation, which is what the persister last wrote.
    #[test]
    fn the_durable_reservation_covers_what_was_issued() {
        assert_eq!(Hlc::new().durable_reservation(), 0);
        let base = 3_000_000;
        let durable = std::sync::Arc::new(AtomicU64::new(0));
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        let clock = reserving(1, &durable, &log);
        assert_eq!(clock.durable_reservation(), 0);
        for ahead_ms in [0, 100, 5_000] {
            let ballot = timestamp_from_millis(base + ahead_ms, 7);
            clock.observe(ballot);
            let ts = clock.now_at(base).unwrap();
            assert!(ballot < ts && ts <= clock.durable_reservation());
            assert_eq!(clock.durable_reservation(), durable.load(Ordering::SeqCst));
        }
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
        let first = clock.now_at(base).unwrap();
        assert_eq!(
            log.lock().unwrap().clone(),
            vec![(first + LEASE, Renewal::Synchronous { wanted: first })]
        );
        // Within the lease: no write.
        clock.now_at(base + LEASE_MS / 4).unwrap();
        clock.renew_at(base + LEASE_MS / 4).unwrap();
        assert_eq!(log.lock().unwrap().len(), 1);
        // Less than half left: a background renewal.
        clock.renew_at(base + LEASE_MS / 2 + 1).unwrap();
        let (ts, why) = *log.lock().unwrap().last().unwrap();
        assert_eq!(why, Renewal::Background);
        assert_eq!(
            ts,
            timestamp_from_millis(base + LEASE_MS / 2 + 1 + LEASE_MS, 0)
        );
        // A peer far ahead: the next timestamp waits for its reservation.
        clock.observe(timestamp_from_millis(base + 60_000, 0));
        let ts = clock.now_at(base).unwrap();
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
                        let ts = c.now_at(base + 60_000 + i * (t + 1)).unwrap();
                        assert!(ts <= d.load(Ordering::SeqCst), "{ts} not covered");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    /// A clock whose persister fails while `fail` is set (with EMFILE, as
    /// when the process ran out of descriptors); `durable` holds what was
    /// persisted, `attempts` counts calls.
    fn failing(
        index: usize,
        fail: &std::sync::Arc<std::sync::atomic::AtomicBool>,
        durable: &std::sync::Arc<AtomicU64>,
        attempts: &std::sync::Arc<AtomicU64>,
    ) -> Hlc {
        let (fail, durable, attempts) = (
            std::sync::Arc::clone(fail),
            std::sync::Arc::clone(durable),
            std::sync::Arc::clone(attempts),
        );
        Hlc::with_reservation(
            index,
            Box::new(move |ts, _| {
                attempts.fetch_add(1, Ordering::SeqCst);
                if fail.load(Ordering::SeqCst) {
                    return Err(std::io::Error::from_raw_os_error(libc::EMFILE));
                }
                durable.fetch_max(ts, Ordering::SeqCst);
                Ok(())
            }),
        )
    }

    /// While persisting fails the clock issues what the durable reservation
    /// covers and nothing past it: `now` fails with the persist error and
    /// does not retry itself; the background renewal retries, and once it
    /// succeeds timestamps go on, above every one issued before.
    #[test]
    fn failed_persist_stops_at_the_durable_reservation() {
        let base = 5_000_000;
        let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let durable = std::sync::Arc::new(AtomicU64::new(0));
        let attempts = std::sync::Arc::new(AtomicU64::new(0));
        let clock = failing(6, &fail, &durable, &attempts);
        clock.renew_at(base).unwrap();
        assert_eq!(clock.persist_failure(), None);
        let covered = durable.load(Ordering::SeqCst);
        fail.store(true, Ordering::SeqCst);
        // Within the reservation: issued, no persist needed.
        let mut issued = vec![clock.now_at(base).unwrap()];
        // The background renewal fails; the reservation stays.
        let half = base + LEASE_MS / 2 + 1;
        let err = clock.renew_at(half).unwrap_err();
        assert!(err.reason.contains("Too many open files"), "{err}");
        assert_eq!(clock.reserved(), covered);
        assert_eq!(clock.persist_failure(), Some(err.reason.clone()));
        // Still covered: issued.
        issued.push(clock.now_at(half).unwrap());
        // Past it: refused with the reason, no persist attempted.
        let tried = attempts.load(Ordering::SeqCst);
        for wall in [base + LEASE_MS + 1, base + 10 * LEASE_MS, base + 60_000] {
            let Err(Unstamped::NotDurable(err)) = clock.now_at(wall) else {
                panic!("issued past the durable reservation at {wall}");
            };
            assert_eq!(
                err.to_string(),
                format!("clock reservation not durable: {}", err.reason)
            );
        }
        assert_eq!(attempts.load(Ordering::SeqCst), tried);
        assert!(issued.iter().all(|&ts| ts <= covered));
        assert_eq!(durable.load(Ordering::SeqCst), covered);
        // Healed: `now` alone does not retry; the renewal does.
        fail.store(false, Ordering::SeqCst);
        let later = base + 60_000;
        assert!(clock.now_at(later).is_err());
        clock.renew_at(later).unwrap();
        assert_eq!(clock.persist_failure(), None);
        let ts = clock.now_at(later).unwrap();
        assert!(ts > *issued.iter().max().unwrap());
        assert!(ts <= durable.load(Ordering::SeqCst));
        assert_eq!(millis(ts), later);
    }

    /// A clock whose first reservation cannot be persisted issues nothing.
    #[test]
    fn no_timestamp_without_a_first_reservation() {
        let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let durable = std::sync::Arc::new(AtomicU64::new(0));
        let attempts = std::sync::Arc::new(AtomicU64::new(0));
        let clock = failing(1, &fail, &durable, &attempts);
        let err = clock.now_at(7_000_000).unwrap_err();
        assert!(err.to_string().contains("Too many open files"), "{err}");
        assert!(clock.renew_at(7_000_000).is_err());
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
        fail.store(false, Ordering::SeqCst);
        clock.renew_at(7_000_000).unwrap();
        let ts = clock.now_at(7_000_000).unwrap();
        assert!(ts <= durable.load(Ordering::SeqCst));
    }

    /// Threads stamping while persisting fails on and off and a renewer
    /// runs: every timestamp returned is covered by what was persisted
    /// when it was returned, and each thread's stamps only grow.
    #[test]
    fn failing_persists_never_uncover_a_timestamp() {
        let fail = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let durable = std::sync::Arc::new(AtomicU64::new(0));
        let attempts = std::sync::Arc::new(AtomicU64::new(0));
        let clock = std::sync::Arc::new(failing(9, &fail, &durable, &attempts));
        let wall = std::sync::Arc::new(AtomicU64::new(9_000_000));
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let (c, d, w, stop) = (
                    std::sync::Arc::clone(&clock),
                    std::sync::Arc::clone(&durable),
                    std::sync::Arc::clone(&wall),
                    std::sync::Arc::clone(&stop),
                );
                std::thread::spawn(move || {
                    let mut last = 0;
                    for _ in 0..5_000_000 {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Ok(ts) = c.now_at(w.load(Ordering::SeqCst)) {
                            assert!(ts <= d.load(Ordering::SeqCst), "{ts} not covered");
                            assert!(ts > last);
                            last = ts;
                        }
                    }
                })
            })
            .collect();
        // Failing windows of 600 ms of the test's wall clock: longer than
        // a lease, so the reservation runs out in each of them.
        for round in 0..3_000u64 {
            fail.store((round / 600) % 2 == 1, Ordering::SeqCst);
            wall.fetch_add(1, Ordering::SeqCst);
            let _ = clock.renew_at(wall.load(Ordering::SeqCst));
        }
        stop.store(true, Ordering::SeqCst);
        for h in handles {
            h.join().unwrap();
        }
        fail.store(false, Ordering::SeqCst);
        clock.renew_at(wall.load(Ordering::SeqCst)).unwrap();
        assert!(clock.now().is_ok());
    }

    /// Through a real `CLOCK` file: reservations land in the file, and a
    /// clock restarted from it never goes back to what the first issued.
    #[test]
    fn clock_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let clock = Hlc::with_reservation(
            1,
            Box::new(move |ts, _| crate::clock_file::write(&path, ts)),
        );
        let wall = 3_000_000;
        clock.observe(timestamp_from_millis(wall + 10_000, 0));
        let issued = clock.now_at(wall).unwrap();
        let reserved = crate::clock_file::read(dir.path()).unwrap().unwrap();
        assert!(reserved >= issued && reserved == clock.reserved());
        let restarted = Hlc::for_node(1);
        match restore_plan(Some(reserved), wall) {
            Restore::Observe(ts) => restarted.observe(ts),
            other => panic!("{other:?}"),
        }
        assert!(restarted.now_at(wall).unwrap() > issued);
    }
}
