//! What one simulated run does: cluster shape, workload size, the engine's
//! durability, which faults are injected, and (for the checker's own
//! tests) a bug planted in the coordinator.

use ataman_engine::WalMode;

/// Milliseconds the first virtual instant is after the Unix epoch
/// (2023-11-14): timestamps look like real ones.
pub const EPOCH_MS: u64 = 1_700_000_000_000;

/// A request without `ack` answers this long after it started (the node's
/// `--replication-timeout-ms` default).
pub const REPLICATION_TIMEOUT_MS: u64 = 1000;

/// How often a node runs its hint-delivery tick (the node's tick).
pub const HINT_TICK_MS: u64 = 50;

/// Share of PUTs, per cent, that carry a TTL (`ttl_ms`): the coordinator
/// stamps their deadline from its own, possibly skewed, clock.
pub const TTL_PUT_PERCENT: u64 = 30;

/// Shortest and longest TTL of an expiring PUT, ms: short enough that
/// most expire while the run goes on.
pub const TTL_MS: (u64, u64) = (20, 1500);

/// Most nodes a simulated cluster may have.
pub const NODES_MAX: usize = 9;

/// How a node loses its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    /// Power loss: only what was synced survives (`SimFs::crash_image`).
    PowerLoss,
    /// kill -9: the page cache survives (`SimFs::process_crash_image`).
    Kill,
}

/// A deliberate coordinator bug, so the tests can show the checker notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// A write with `ack >= 2` answers after `ack - 1` durable replicas.
    AckMinusOne,
    /// Replicas store a write older than the version they hold and answer
    /// it stored, so no coordinator re-stamps: last writer wins by clocks
    /// alone, as before re-stamping existed.
    NoRestamp,
    /// A layout transition (`--grow`): reads use the new version's
    /// replicas before every node confirmed its copying.
    ReadsBeforeSync,
    /// A layout transition: writes go to the old version's replicas only,
    /// skipping the new ones, although the coordinator acked the new version.
    WritesSkipNew,
    /// A layout transition: nodes delete the copies they do not hold in
    /// the new version while the old one is still live.
    CleanupEarly,
    /// The engine's compaction drops an expired version outright, without
    /// keeping it as a tombstone for the grace, so an older version on
    /// another replica (or below it) comes back.
    DropExpiredWithoutTombstone,
    /// A layout transition: the added node's clock takes node id 0 (the
    /// first member's) instead of its id from the layout, as a node started
    /// with `--join` once took its position in the start-up list.
    JoinedTakesIdZero,
    /// A layout transition that removes nodes (`--shrink`): a node's copy
    /// completes without the leaving sources it cannot reach, as the
    /// node's old rule did (`copy_completion::Mode::PlantedSkipsLeaving`,
    /// the node's `--debug-planted-bug copy-skips-partitioned-leaving-node`),
    /// so what only a partitioned leaving node held is lost at cleanup.
    CopySkipsPartitionedLeavingNode,
    /// A layout transition that removes nodes (`--shrink`): a leaving
    /// source's copy counts although its `ack` for the new version was not
    /// known when it was read, as the node's rule did before "Leaving not
    /// acked" (`copy_completion::Mode::PlantedIgnoresLeavingAck`), so a
    /// write a leaving node still on the old version acknowledges after
    /// its copy was read is lost at cleanup.
    CopyIgnoresLeavingAck,
    /// The coordinator stamps an expiring PUT's deadline a quarter of its
    /// `ttl_ms` after the stamp: the node's own planted rule
    /// (`ataman_node::ttl::Expiry::as_planted`, the node's
    /// `--debug-planted-bug expires-early`), so values expire early.
    ExpiresEarly,
    /// The engines collect tombstones and expired versions once past the
    /// short grace, whether anti-entropy covered them with every replica
    /// or not: the node's `--debug-planted-bug collect-on-grace-alone`
    /// (the rule before repair-based collection), so a replica that missed
    /// a delete brings the deleted value back (module `collection`).
    CollectOnGraceAlone,
}

impl PlantedBug {
    /// Every planted bug by its command-line name.
    pub const NAMES: [(&'static str, PlantedBug); 11] = [
        ("ack-minus-one", PlantedBug::AckMinusOne),
        ("no-restamp", PlantedBug::NoRestamp),
        ("reads-before-sync", PlantedBug::ReadsBeforeSync),
        ("writes-skip-new", PlantedBug::WritesSkipNew),
        ("cleanup-early", PlantedBug::CleanupEarly),
        (
            "drop-expired-without-tombstone",
            PlantedBug::DropExpiredWithoutTombstone,
        ),
        ("joined-takes-id-zero", PlantedBug::JoinedTakesIdZero),
        (
            "copy-skips-partitioned-leaving-node",
            PlantedBug::CopySkipsPartitionedLeavingNode,
        ),
        (
            "copy-ignores-leaving-ack",
            PlantedBug::CopyIgnoresLeavingAck,
        ),
        ("expires-early", PlantedBug::ExpiresEarly),
        ("collect-on-grace-alone", PlantedBug::CollectOnGraceAlone),
    ];

    /// Its command-line name.
    pub fn name(self) -> &'static str {
        PlantedBug::NAMES
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("?", |(n, _)| n)
    }
}

/// Which kinds of fault a run injects while the workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultMix {
    /// Node crashes of these kinds (none: no crashes).
    pub crashes: &'static [CrashKind],
    /// Two-sided partitions of the node set.
    pub partitions: bool,
    /// Cuts of one direction of one link.
    pub one_way_cuts: bool,
    /// Periods in which the network drops a share of messages.
    pub message_loss: bool,
    /// Nodes' clocks stepped within ±`SKEW_MS_MAX` (of `faults`).
    pub clock_skew: bool,
    /// A failed write or fsync on a node's disk (the engine stops writing; the node is restarted).
    pub disk_faults: bool,
    /// A node's pending hints are dropped (the hint store's byte bound).
    pub hint_drops: bool,
}

impl FaultMix {
    /// Every kind of fault.
    pub const ALL: FaultMix = FaultMix {
        crashes: &[CrashKind::PowerLoss, CrashKind::Kill],
        partitions: true,
        one_way_cuts: true,
        message_loss: true,
        clock_skew: true,
        disk_faults: true,
        hint_drops: true,
    };

    /// No faults at all.
    pub const NONE: FaultMix = FaultMix {
        crashes: &[],
        partitions: false,
        one_way_cuts: false,
        message_loss: false,
        clock_skew: false,
        disk_faults: false,
        hint_drops: false,
    };

    /// Only power-loss crashes.
    pub const POWER_LOSS: FaultMix = FaultMix {
        crashes: &[CrashKind::PowerLoss],
        ..FaultMix::NONE
    };

    /// Every kind of fault but clock skew: the expiry checks then allow
    /// no skew, so a deadline early by any amount shows.
    pub const NO_SKEW: FaultMix = FaultMix {
        clock_skew: false,
        ..FaultMix::ALL
    };

    /// The presets by their command-line name.
    pub const PRESETS: [(&'static str, FaultMix); 4] = [
        ("all", FaultMix::ALL),
        ("no-skew", FaultMix::NO_SKEW),
        ("power-loss", FaultMix::POWER_LOSS),
        ("none", FaultMix::NONE),
    ];

    /// The preset's command-line name, or `custom`.
    pub fn name(&self) -> &'static str {
        FaultMix::PRESETS
            .iter()
            .find(|(_, m)| m == self)
            .map_or("custom", |(n, _)| n)
    }

    /// The preset named `name`.
    pub fn by_name(name: &str) -> Option<FaultMix> {
        FaultMix::PRESETS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, m)| *m)
    }
}

/// Everything that decides a run, besides its seed.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Replicas per key: every request uses `from = replicas` (the
    /// anti-entropy scope and the convergence check use the same number).
    pub replicas: usize,
    /// Client operations in a run.
    pub steps: usize,
    /// Clients issuing operations concurrently, one request each at a time.
    pub clients: usize,
    /// The engine's WAL mode on every node.
    pub wal_mode: WalMode,
    /// The faults injected.
    pub faults: FaultMix,
    /// Power-cut every node after the final repairs, and check the reopened state.
    pub final_power_cut: bool,
    /// Anti-entropy rounds between node pairs while the workload runs (besides the final ones).
    pub anti_entropy_during_run: bool,
    /// A bug planted in the coordinator (tests of the checker only).
    pub planted_bug: Option<PlantedBug>,
    /// A layout transition mid-run (`sim::membership`): the last node
    /// starts outside the layout (version 1: the others) and is added
    /// (version 2) while the workload runs.
    pub grow: bool,
    /// Nodes removed mid-run (0: none; `sim::membership`): version 1
    /// holds every node, version 2 all but the last `shrink`, and while
    /// their copy runs the leaving nodes are cut off from the others.
    pub shrink: usize,
}

impl SimConfig {
    /// Three nodes, three replicas, fsync on, every fault.
    pub fn default_with_steps(steps: usize) -> Self {
        SimConfig {
            nodes: 3,
            replicas: 3,
            steps,
            clients: 4,
            wal_mode: WalMode::Fsync,
            faults: FaultMix::ALL,
            final_power_cut: true,
            anti_entropy_during_run: true,
            planted_bug: None,
            grow: false,
            shrink: 0,
        }
    }

    /// Checks the shape; returns why it is not valid.
    pub fn validate(&self) -> Result<(), String> {
        if self.nodes == 0 || self.nodes > NODES_MAX {
            return Err(format!("nodes {} not in 1..={NODES_MAX}", self.nodes));
        }
        if self.replicas == 0 || self.replicas > self.nodes {
            return Err(format!(
                "replicas {} not in 1..={}",
                self.replicas, self.nodes
            ));
        }
        if self.grow && self.replicas > self.nodes - 1 {
            return Err(format!(
                "--grow: replicas {} must fit the {} nodes of version 1",
                self.replicas,
                self.nodes - 1
            ));
        }
        if self.shrink > 0 {
            if self.grow {
                return Err("--grow and --shrink: one layout change a run".into());
            }
            if self.shrink >= self.nodes || self.replicas > self.nodes - self.shrink {
                return Err(format!(
                    "--shrink {}: replicas {} must fit the {} nodes that stay",
                    self.shrink,
                    self.replicas,
                    self.nodes.saturating_sub(self.shrink)
                ));
            }
        }
        if self.clients == 0 {
            return Err("at least one client".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--shrink`: the staying nodes must hold `replicas`, at the bound and
    /// past it, and one layout change a run (not with `--grow`).
    #[test]
    fn shrink_shapes_are_checked_at_and_past_the_bound() {
        let shape = |nodes, replicas, shrink, grow| SimConfig {
            nodes,
            replicas,
            shrink,
            grow,
            ..SimConfig::default_with_steps(10)
        };
        assert_eq!(shape(5, 2, 3, false).validate(), Ok(()));
        let past = shape(5, 3, 3, false).validate().unwrap_err();
        assert!(past.contains("must fit the 2 nodes that stay"), "{past}");
        let all = shape(3, 1, 3, false).validate().unwrap_err();
        assert!(all.contains("--shrink 3"), "{all}");
        let both = shape(5, 2, 1, true).validate().unwrap_err();
        assert!(both.contains("one layout change"), "{both}");
        let name = PlantedBug::CopySkipsPartitionedLeavingNode.name();
        assert_eq!(name, "copy-skips-partitioned-leaving-node");
    }
}
