//! The node's collection horizon: what the engine asks, per key, before
//! it drops a tombstone or an expired version (`Options::collection_horizon`,
//! docs/decisions/0007).
//!
//! The rounds thread records each completed session here
//! ([`RepairHorizon::record_round`], then the `REPAIRED` file); the
//! compaction thread asks [`RepairHorizon::horizon_ms`] for each dead
//! version a merge meets: the key's other replicas in every live layout
//! (from the placement the node follows, [`RepairHorizon::follow`]), the
//! rule ([`super::repaired::repaired_before`]), capped at now, less the
//! margin a write takes to land (the request timeout plus
//! [`CLOCK_SKEW_MS`]).
//!
//! Before the node has a placement (the engine opens first) the horizon
//! is 0: nothing is collected.
//!
//! # Thread safety
//! The records are behind a short mutex (the rounds thread writes once per
//! session, the compaction thread reads once per dead version); the
//! placement is an `ArcSwapOption`, swapped by the main thread and the
//! rounds thread.

use super::repaired::{self, Repairs, Replica, Session};
use super::repaired_file;
use crate::cluster::live::Placement;
use arc_swap::ArcSwapOption;
use ataman_testkit::lock::lock;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;

/// How far apart two members' clocks may be, in ms, as the margin counts
/// it: a tombstone stamped by a coordinator whose clock is behind this
/// node's lands here later, by this node's clock, than its stamp says
/// (the same allowance as the backup's default skew, `SKEW_MS_DEFAULT`).
pub const CLOCK_SKEW_MS: u64 = 1_000;

/// The repair records and the placement the horizon is judged by.
pub struct RepairHorizon {
    dir: PathBuf,
    repairs: Mutex<Repairs>,
    placement: ArcSwapOption<Placement>,
    margin_ms: u64,
    /// When this horizon was opened (a peer never repaired counts as
    /// unrepaired past the grace only once the node has run that long).
    opened_ms: u64,
}

impl std::fmt::Debug for RepairHorizon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepairHorizon")
            .field("dir", &self.dir)
            .field("margin_ms", &self.margin_ms)
            .finish_non_exhaustive()
    }
}

impl RepairHorizon {
    /// The horizon of a node whose data directory is `dir` and whose
    /// replicated requests time out after `timeout_ms`: the records of
    /// `REPAIRED`, or none, with a warning, when it cannot be trusted
    /// (the safe default: nothing collected until rounds complete).
    pub fn open(dir: PathBuf, timeout_ms: u64) -> Self {
        let repairs = repaired_file::read(&dir).unwrap_or_else(|e| {
            tracing::warn!(
                "{e}; starting as if no anti-entropy round had completed (no tombstone is \
                 collected until rounds with every replica complete)"
            );
            Repairs::default()
        });
        RepairHorizon {
            dir,
            repairs: Mutex::new(repairs),
            placement: ArcSwapOption::empty(),
            margin_ms: timeout_ms.saturating_add(CLOCK_SKEW_MS),
            opened_ms: crate::last_seen::now_ms(),
        }
    }

    /// The horizon of the node `config` describes ([`RepairHorizon::open`]).
    pub fn for_node(config: &crate::config::NodeConfig) -> Arc<Self> {
        let timeout_ms = u64::try_from(config.replication_timeout.as_millis()).unwrap_or(u64::MAX);
        Arc::new(RepairHorizon::open(config.data_dir.clone(), timeout_ms))
    }

    /// What the engine calls (`Options::collection_horizon`): the horizon
    /// of a key on the wall clock.
    pub fn engine_hook(horizon: &Arc<Self>) -> ataman_engine::CollectionHorizon {
        let horizon = Arc::clone(horizon);
        Arc::new(move |key: &[u8]| horizon.horizon_ms(key, crate::last_seen::now_ms()))
    }

    /// Judges keys by `placement` from now on (its live layouts).
    pub fn follow(&self, placement: Arc<Placement>) {
        let current = self.placement.load();
        if (*current)
            .as_ref()
            .is_none_or(|c| !Arc::ptr_eq(c, &placement))
        {
            self.placement.store(Some(placement));
        }
    }

    /// The horizon of `key` at `now_ms` (module header).
    pub fn horizon_ms(&self, key: &[u8], now_ms: u64) -> u64 {
        let Some(placement) = self.placement.load_full() else {
            return 0;
        };
        let me = placement.self_index();
        let set = placement.placed().write(key);
        let mut replicas = Vec::with_capacity(set.replicas.len() * placement.versions().len());
        for (members, &version) in set.sets.iter().zip(placement.versions()) {
            for &p in members {
                let node = set.replicas[p];
                if node != me {
                    replicas.push(Replica {
                        url: placement.url(node),
                        version,
                    });
                }
            }
        }
        let before = repaired::repaired_before(&replicas, &lock(&self.repairs));
        repaired::horizon_ms(before, now_ms, self.margin_ms)
    }

    /// Records the sessions of one round under layout `version` that
    /// completed (`(peer URL, session)`), forgets versions no longer live,
    /// and writes the file when anything changed.
    pub fn record_round(&self, version: u64, done: &[(String, Session)]) -> std::io::Result<()> {
        let snapshot = {
            let mut repairs = lock(&self.repairs);
            let before = repairs.clone();
            if let Some(p) = &*self.placement.load() {
                repairs.keep_versions(p.versions());
            }
            for (url, session) in done {
                if !repairs.record(url, version, *session) {
                    tracing::warn!(
                        peer = %url,
                        "repair records full ({} of them): this session is not kept",
                        repaired::RECORDS_MAX
                    );
                }
            }
            if *repairs == before {
                return Ok(());
            }
            repairs.clone()
        };
        repaired_file::write(&self.dir, &snapshot)
    }

    /// The peers of layout `version` (URLs) whose last completed session
    /// started more than `grace_ms` before `now_ms`, or none since this
    /// node has run for longer than the grace: their shared keys'
    /// tombstones wait past the grace.
    pub fn unrepaired_past_grace(
        &self,
        version: u64,
        peers: &[String],
        now_ms: u64,
        grace_ms: u64,
    ) -> Vec<String> {
        let repairs = lock(&self.repairs);
        peers
            .iter()
            .filter(|url| {
                let since = repairs
                    .get(url, version)
                    .map_or(self.opened_ms, |p| p.last.started_ms);
                since.saturating_add(grace_ms) < now_ms
            })
            .cloned()
            .collect()
    }
}
