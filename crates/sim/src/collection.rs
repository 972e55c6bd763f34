//! Tombstone and expiry collection in a run: a grace short enough that
//! compactions drop dead versions while the run goes on, and the node's
//! repair-based horizon deciding when (docs/decisions/0007).
//!
//! Each node keeps a [`SimHorizon`]: the records of its completed
//! anti-entropy sessions, by peer (the node's own
//! [`ataman_node::antientropy::repaired::Repairs`], as its `REPAIRED` file
//! keeps them: they survive crashes), asked by the engine for every dead
//! version a merge meets (`Options::collection_horizon`) through the node's
//! rule ([`repaired::repaired_before`], [`repaired::horizon_ms`]).
//!
//! # Rules
//! - **A session is recorded by its initiator**, as the real rounds thread
//!   does; a round here runs at one virtual instant, so it starts and ends
//!   at the initiator's wall time then.
//! - **The margin covers the run's clocks.** A version stamped `ts` lands
//!   on its replicas within the request timeout, on its coordinator's
//!   clock; a replica's clock may be up to twice [`SKEW_MS_MAX`] from it.
//!   So the margin is [`REPLICATION_TIMEOUT_MS`] + 2 × [`SKEW_MS_MAX`]
//!   (the real node assumes clocks within 1 s, `horizon::CLOCK_SKEW_MS`).
//! - **A layout transition collects nothing.** With `--grow` or `--shrink`
//!   the key's replicas change under the run; the horizon is then 0 for
//!   every key (nothing is collected), a residual named in
//!   docs/RELIABILITY.md.
//! - **A wiped node forgets its records** (its `REPAIRED` went with the
//!   disk).
//! - **The planted `collect-on-grace-alone`** gives the engine no horizon:
//!   it collects once past the grace, whether repair covered the version
//!   or not (the rule before repair-based collection).
//!
//! # Thread safety
//! The records are behind a mutex: the run's driver records sessions, the
//! engine's compaction thread asks (the driver waits for it, so the lock
//! is never contended).

use crate::config::REPLICATION_TIMEOUT_MS;
use crate::faults::SKEW_MS_MAX;
use ataman_engine::Clock;
use ataman_node::antientropy::repaired::{self, Repairs, Replica, Session};
use ataman_node::cluster::placement;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The engines' tombstone grace in a run: a dead version may go once it is
/// this old and repair covered it (the horizon), so compactions collect
/// during the run. Far below the node's 10 days; a run lasts seconds.
pub const SIM_TOMBSTONE_GRACE: Duration = Duration::from_millis(300);

/// How long after its stamp a version may still land on a replica, on
/// another node's clock (module header, "The margin").
pub const HORIZON_MARGIN_MS: u64 = REPLICATION_TIMEOUT_MS + 2 * SKEW_MS_MAX.unsigned_abs();

/// The layout version the records are kept under (a run without a
/// transition has one layout).
const LAYOUT_VERSION: u64 = 1;

/// One node's collection horizon.
#[derive(Debug)]
pub struct SimHorizon {
    me: usize,
    /// Placement seeds of the run's one layout; `None` during a run with a
    /// transition (nothing is collected).
    seeds: Option<Vec<u64>>,
    replicas: usize,
    clock: Arc<dyn Clock>,
    repairs: Mutex<Repairs>,
}

impl SimHorizon {
    /// The horizon of node `me` placing keys by `seeds` on `replicas`
    /// nodes (`None`: a run with a layout transition), reading `clock`
    /// (the node's skewed wall clock).
    pub fn new(
        me: usize,
        seeds: Option<Vec<u64>>,
        replicas: usize,
        clock: Arc<dyn Clock>,
    ) -> Arc<SimHorizon> {
        Arc::new(SimHorizon {
            me,
            seeds,
            replicas,
            clock,
            repairs: Mutex::new(Repairs::default()),
        })
    }

    fn repairs(&self) -> std::sync::MutexGuard<'_, Repairs> {
        self.repairs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A session of this node's round with `peer` completed at `wall_ms`
    /// on this node's clock.
    pub fn record(&self, peer: usize, wall_ms: u64) {
        let session = Session {
            started_ms: wall_ms,
            ended_ms: wall_ms,
        };
        // At most one record per peer of a run (at most `NODES_MAX`), far
        // below the table's bound.
        let kept = self
            .repairs()
            .record(&peer_name(peer), LAYOUT_VERSION, session);
        debug_assert!(kept, "repair records full");
    }

    /// The disk was wiped: no session is known any more.
    pub fn forget(&self) {
        *self.repairs() = Repairs::default();
    }

    /// The horizon of `key` at `now_ms` on this node's clock.
    pub fn horizon_at(&self, key: &[u8], now_ms: u64) -> u64 {
        let Some(seeds) = &self.seeds else {
            return 0;
        };
        let names: Vec<String> = placement::rank_with_seeds(seeds, key, self.replicas)
            .into_iter()
            .filter(|&n| n != self.me)
            .map(peer_name)
            .collect();
        let others: Vec<Replica<'_>> = names
            .iter()
            .map(|url| Replica {
                url,
                version: LAYOUT_VERSION,
            })
            .collect();
        let before = repaired::repaired_before(&others, &self.repairs());
        repaired::horizon_ms(before, now_ms, HORIZON_MARGIN_MS)
    }

    /// What the engine calls: the horizon of a key now.
    pub fn engine_hook(horizon: &Arc<SimHorizon>) -> ataman_engine::CollectionHorizon {
        let horizon = Arc::clone(horizon);
        Arc::new(move |key: &[u8]| {
            let now_ms = horizon.clock.now_ms();
            horizon.horizon_at(key, now_ms)
        })
    }
}

/// The name a peer's records are kept under.
fn peer_name(peer: usize) -> String {
    format!("sim://node-{peer}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ataman_engine::VirtualClock;

    fn horizon(seeds: Option<Vec<u64>>) -> Arc<SimHorizon> {
        SimHorizon::new(0, seeds, 3, VirtualClock::new(0))
    }

    fn seeds() -> Vec<u64> {
        placement::seeds(&(0..3).map(peer_name).collect::<Vec<_>>())
    }

    /// Nothing is collected before a session with every other replica.
    #[test]
    fn no_horizon_before_every_replica_repaired() {
        let h = horizon(Some(seeds()));
        assert_eq!(h.horizon_at(b"k", 100_000), 0);
        h.record(1, 50_000);
        assert_eq!(h.horizon_at(b"k", 100_000), 0, "node 2 never repaired");
        h.record(2, 60_000);
        assert_eq!(
            h.horizon_at(b"k", 100_000),
            0,
            "one session each is not enough"
        );
    }

    /// Two sessions with each replica: the horizon is the earliest start of
    /// the sessions that ended by the last ones' earliest start, less the
    /// margin.
    #[test]
    fn horizon_after_two_sessions_each() {
        let h = horizon(Some(seeds()));
        h.record(1, 50_000);
        h.record(2, 60_000);
        h.record(1, 70_000);
        h.record(2, 80_000);
        assert_eq!(h.horizon_at(b"k", 100_000), 60_000 - HORIZON_MARGIN_MS);
        h.forget();
        assert_eq!(h.horizon_at(b"k", 100_000), 0, "a wiped node knows nothing");
    }

    /// A run with a layout transition collects nothing.
    #[test]
    fn transition_collects_nothing() {
        let h = horizon(None);
        for t in [1, 2, 3] {
            h.record(1, t * 10_000);
            h.record(2, t * 10_000);
        }
        assert_eq!(h.horizon_at(b"k", 100_000), 0);
    }
}
