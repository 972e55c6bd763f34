//! The run: its events, what it counts, [`Sim`] and its phases, and
//! [`run`]; the halves of the work are `traffic` and `disruption`.

use crate::antientropy;
use crate::check::{self, Report};
use crate::client::Client;
use crate::collection::SimHorizon;
use crate::config::{CrashKind, HINT_TICK_MS, PlantedBug, SimConfig};
use crate::faults;
use crate::history::{Happening, History};
use crate::network::{Message, Network, NetworkStats};
use crate::node::{Collection, SimNode};
use crate::world::World;
use ataman_node::cluster::placement;
use ataman_node::peer::frame::Stamped;
use ataman_node::replication::driver::Waiter;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Longest a disk takes to make a local write durable, ms.
pub const DISK_MS_MAX: u64 = 2;
/// Shortest and longest gap between two flushes or compactions, ms.
pub const MAINTENANCE_GAP_MS: (u64, u64) = (50, 400);
/// Shortest and longest gap between two anti-entropy rounds during the workload, ms.
pub const ANTI_ENTROPY_GAP_MS: (u64, u64) = (100, 800);
/// The heal phase waits at most this long (virtual) for the cluster to settle.
pub const SETTLE_MS_MAX: u64 = 60_000;

/// A write to a node's own engine, carried out after a disk delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalWrite {
    /// Who waits for it in the node's driver (`None`: a read repair).
    pub waiter: Option<Waiter>,
    /// The key.
    pub key: Vec<u8>,
    /// The version.
    pub version: Stamped,
}

/// An event of the simulated world.
#[derive(Debug)]
pub enum Event {
    /// A client sends its next request.
    ClientNext {
        /// Which client.
        client: usize,
    },
    /// A message reaches its destination.
    Deliver {
        /// Sender.
        from: usize,
        /// Destination.
        to: usize,
        /// The message.
        message: Message,
    },
    /// A node's own engine finished a write.
    LocalWrite {
        /// Which node.
        node: usize,
        /// Its incarnation when the write started.
        incarnation: u64,
        /// The write.
        write: LocalWrite,
    },
    /// A deadline in a node's driver: time passes for it (`tick`).
    Deadline {
        /// The node.
        node: usize,
        /// Its incarnation when the deadline was set.
        incarnation: u64,
    },
    /// Every node's hint-delivery tick.
    HintTick,
    /// The next fault.
    FaultTick,
    /// Restart a node: a crashed one, or (`kill_first`) one whose disk failed.
    Restart {
        /// Which node.
        node: usize,
        /// Kill it first (its engine refuses writes after a disk fault).
        kill_first: bool,
    },
    /// A flush or compaction somewhere.
    Maintenance,
    /// An anti-entropy round between two nodes.
    AntiEntropy,
    /// Every node's layout work (`membership`, runs with `--grow` only).
    MembershipTick,
}

/// Counters of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Restarts (after crashes and disk faults).
    pub restarts: u64,
    /// Read repairs sent.
    pub repairs: u64,
    /// Hints kept.
    pub hints_kept: u64,
    /// Writes re-stamped above a newer version a replica held.
    pub restamps: u64,
    /// Hints acknowledged by their peer.
    pub hints_delivered: u64,
    /// Hints dropped.
    pub hints_dropped: u64,
    /// Flushes and compactions.
    pub maintenance: u64,
    /// Anti-entropy rounds.
    pub anti_entropy_rounds: u64,
    /// Versions anti-entropy copied.
    pub anti_entropy_copies: u64,
    /// A layout transition ran and every node settled at its new version (`--grow`).
    pub layout_settled: bool,
    /// Versions copied to nodes that gained keys in the transition.
    pub layout_copied: u64,
    /// Copies dropped by cleanups after it.
    pub layout_dropped: u64,
    /// Membership ticks in which a node's copy waited for a leaving
    /// source it could not reach (`--shrink`).
    pub layout_copy_waits: u64,
    /// Copies completed without a leaving source they could not reach
    /// (the planted `copy-skips-partitioned-leaving-node` only).
    pub layout_copy_skips: u64,
    /// The network's counters.
    pub network: NetworkStats,
    /// Events run.
    pub events: u64,
    /// Virtual time at the end, ms.
    pub virtual_ms: u64,
    /// Tombstones and expired versions the engines collected.
    pub collected: u64,
}

/// Everything one run produced.
#[derive(Debug)]
pub struct RunResult {
    /// The seed.
    pub seed: u64,
    /// The record.
    pub history: History,
    /// The checker's verdict.
    pub report: Report,
    /// Counters.
    pub stats: RunStats,
    /// [`History::digest`].
    pub digest: u64,
}

/// One run in progress.
pub struct Sim {
    pub(super) config: SimConfig,
    pub(super) world: World<Event>,
    pub(super) network: Network,
    pub(super) nodes: Vec<SimNode>,
    pub(super) seeds: Vec<u64>,
    pub(super) clients: Vec<Client>,
    pub(super) history: History,
    pub(super) ops_issued: usize,
    pub(super) ops_done: usize,
    pub(super) healing: bool,
    pub(super) local_writes_pending: usize,
    pub(super) stats: RunStats,
    pub(super) membership: Option<super::membership::Membership>,
}

/// The URL-like names the nodes' placement seeds are made from.
pub fn node_names(nodes: usize) -> Vec<String> {
    (0..nodes).map(|i| format!("sim://node-{i}")).collect()
}

/// Runs `config` with `seed` to the end and checks it.
pub fn run(seed: u64, config: &SimConfig) -> Result<RunResult, String> {
    config.validate()?;
    let mut sim = Sim::new(seed, config.clone())?;
    sim.workload();
    sim.heal_and_settle();
    Ok(sim.finish(seed))
}

impl Sim {
    pub(super) fn new(seed: u64, config: SimConfig) -> Result<Sim, String> {
        let world = World::new(seed);
        let planted_drop_expired =
            config.planted_bug == Some(PlantedBug::DropExpiredWithoutTombstone);
        // Collection (`crate::collection`): by each node's repair-based
        // horizon, on the one layout's placement (none during a transition).
        let layout_seeds = (!config.grow && config.shrink == 0)
            .then(|| placement::seeds(&node_names(config.nodes)));
        let mut nodes = (0..config.nodes)
            .map(|i| {
                let clock = crate::node::SimClock::new(world.now_cell());
                let collection = match config.planted_bug {
                    Some(PlantedBug::CollectOnGraceAlone) => Collection::GraceAlone,
                    // That plant drops within the grace: none is collected.
                    Some(PlantedBug::DropExpiredWithoutTombstone) => Collection::Never,
                    _ => Collection::Repaired(SimHorizon::new(
                        i,
                        layout_seeds.clone(),
                        config.replicas,
                        Arc::clone(&clock) as Arc<dyn ataman_engine::Clock>,
                    )),
                };
                let engine = crate::node::EngineSetup {
                    clock,
                    planted_drop_expired,
                    collection,
                };
                SimNode::with_engine(i, config.nodes, config.wal_mode, engine)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (seeds, membership) = if config.grow {
            let m = super::membership::Membership::grow(config.nodes, config.replicas)?;
            let urls = super::membership::node_urls(config.nodes);
            // The added node starts as `--join` does: no id, stamping nothing.
            if let Some(joining) = nodes.last_mut() {
                joining.set_node_id(m.node_id(config.nodes - 1));
            }
            (placement::seeds(&urls), Some(m))
        } else if config.shrink > 0 {
            let m = super::membership::Membership::shrink(
                config.nodes,
                config.replicas,
                config.shrink,
            )?;
            let urls = super::membership::node_urls(config.nodes);
            (placement::seeds(&urls), Some(m))
        } else {
            (placement::seeds(&node_names(config.nodes)), None)
        };
        // The checker places keys on the final layout's members (a
        // prefix of the nodes): a removed node must end holding nothing.
        let members = membership
            .as_ref()
            .map_or(seeds.len(), |m| m.final_members());
        let clients = (0..config.clients).map(Client::new).collect();
        let history = History {
            nodes: config.nodes,
            replicas: config.replicas,
            seeds: seeds[..members].to_vec(),
            collects: config.planted_bug != Some(PlantedBug::DropExpiredWithoutTombstone),
            ..History::default()
        };
        Ok(Sim {
            world,
            network: Network::new(),
            nodes,
            seeds,
            clients,
            history,
            ops_issued: 0,
            ops_done: 0,
            healing: false,
            local_writes_pending: 0,
            stats: RunStats::default(),
            membership,
            config,
        })
    }

    pub(super) fn now(&self) -> u64 {
        self.world.now_ms()
    }

    pub(super) fn between(&mut self, (lo, hi): (u64, u64)) -> u64 {
        self.world.rng.between(lo, hi)
    }

    // ---- phases ----

    pub(super) fn workload(&mut self) {
        for client in 0..self.clients.len() {
            let at = Client::think_ms(&mut self.world.rng);
            self.world.schedule(at, Event::ClientNext { client });
        }
        self.world.schedule(HINT_TICK_MS, Event::HintTick);
        let gap = faults::gap_ms(&mut self.world.rng);
        self.world.schedule(gap, Event::FaultTick);
        let gap = self.between(MAINTENANCE_GAP_MS);
        self.world.schedule(gap, Event::Maintenance);
        if self.config.anti_entropy_during_run {
            let gap = self.between(ANTI_ENTROPY_GAP_MS);
            self.world.schedule(gap, Event::AntiEntropy);
        }
        if self.membership.is_some() {
            self.world
                .schedule(super::membership::MEMBERSHIP_TICK_MS, Event::MembershipTick);
        }
        while self.ops_done < self.config.steps {
            let Some(event) = self.world.pop() else {
                let what = format!(
                    "workload ended with {} of {} operations answered ({} events)",
                    self.ops_done,
                    self.config.steps,
                    self.world.taken()
                );
                self.stuck(what);
                return;
            };
            self.handle(event);
        }
    }

    pub(super) fn heal_and_settle(&mut self) {
        self.healing = true;
        self.network.heal_all();
        self.fault_record("heal: every cut and loss ends, disk faults disarmed".into());
        for node in 0..self.nodes.len() {
            self.nodes[node].clear_faults();
            if !self.nodes[node].is_up() {
                self.restart(node);
            } else if self.nodes[node].poisoned() {
                self.crash(node, CrashKind::Kill, 0);
                self.restart(node);
            }
        }
        self.run_until_quiet("after healing");
        self.settle_membership();
        self.converge();
        self.run_until_quiet("after the final repairs");
        self.final_collection();
        if self.config.final_power_cut {
            for node in 0..self.nodes.len() {
                let seed = self.world.rng.next_u64();
                self.crash(node, CrashKind::PowerLoss, seed);
                self.restart(node);
            }
        }
    }

    pub(super) fn finish(mut self, seed: u64) -> RunResult {
        let mut states = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            match node.state() {
                Ok(s) => states.push(s),
                Err(e) => {
                    let at_ms = self.world.now_ms();
                    self.history.happenings.push(Happening::Stuck {
                        at_ms,
                        what: format!("node {} state unreadable: {e}", node.index),
                    });
                    states.push(Default::default());
                }
            }
        }
        self.history.final_states = states;
        self.history.final_ms = self.world.now_ms();
        for node in &self.nodes {
            self.stats.hints_dropped += node.hints.dropped;
            self.stats.hints_delivered += node.hints.delivered;
        }
        if let Some(m) = &self.membership {
            self.stats.layout_settled = m.settled();
            self.stats.layout_copied = m.copied;
            self.stats.layout_dropped = m.dropped;
            self.stats.layout_copy_waits = m.copy_waits;
            self.stats.layout_copy_skips = m.copy_skips;
        }
        self.stats.network = self.network.stats;
        self.stats.events = self.world.taken();
        self.stats.virtual_ms = self.world.now_ms();
        self.stats.collected = self.nodes.iter().map(|n| n.collected).sum();
        let report = check::check(&self.history);
        let digest = self.history.digest();
        RunResult {
            seed,
            history: self.history,
            report,
            stats: self.stats,
            digest,
        }
    }

    /// Runs events until nothing is pending, at most [`SETTLE_MS_MAX`].
    pub(super) fn run_until_quiet(&mut self, when: &str) {
        let deadline = self.now() + SETTLE_MS_MAX;
        while !self.quiet() {
            match self.world.next_at_ms() {
                Some(at) if at <= deadline => {}
                _ => break,
            }
            let Some(event) = self.world.pop() else {
                break;
            };
            self.handle(event);
        }
        if !self.quiet() {
            let what = format!("{when}: not settled: {}", self.pending());
            self.stuck(what);
        }
    }

    pub(super) fn quiet(&self) -> bool {
        self.network.in_flight() == 0
            && self.local_writes_pending == 0
            && self
                .nodes
                .iter()
                .all(|n| n.driver.live() == 0 && n.hints.is_empty() && !n.driver.delivering_hints())
    }

    pub(super) fn pending(&self) -> String {
        let per_node: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "node {}: up {}, {} requests, {} hints",
                    n.index,
                    n.is_up(),
                    n.driver.live(),
                    n.hints.len()
                )
            })
            .collect();
        format!(
            "{} messages in flight, {} local writes; {}",
            self.network.in_flight(),
            self.local_writes_pending,
            per_node.join("; ")
        )
    }

    pub(super) fn stuck(&mut self, what: String) {
        let at_ms = self.now();
        self.history
            .happenings
            .push(Happening::Stuck { at_ms, what });
    }

    /// Makes every replica of every key equal: an anti-entropy round
    /// between every pair of nodes (all up, no cut, nothing in flight, so
    /// one pass suffices: after the rounds of a key's replicas with each
    /// other, every one holds the newest).
    pub(super) fn converge(&mut self) {
        for a in 0..self.nodes.len() {
            for b in a + 1..self.nodes.len() {
                self.anti_entropy(a, b, ataman_node::antientropy::merkle::DEPTH);
            }
        }
    }

    /// One anti-entropy round between `a` (initiator) and `b`.
    pub(super) fn anti_entropy(&mut self, a: usize, b: usize, depth: u32) {
        assert_ne!(a, b, "a round needs two nodes");
        let now = self.now();
        let (low, high) = self.nodes.split_at_mut(a.max(b));
        let (na, nb) = if a < b {
            (&mut low[a], &mut high[0])
        } else {
            (&mut high[0], &mut low[b])
        };
        let seeds = match &self.membership {
            Some(m) => m.scope_seeds(&self.seeds),
            None => &self.seeds,
        };
        if a.max(b) >= seeds.len() {
            return; // a node outside the layout anti-entropy follows
        }
        self.stats.anti_entropy_rounds += 1;
        match antientropy::round(na, nb, seeds, self.config.replicas, depth, now) {
            Ok(report) => {
                // The initiator's session completed (`crate::collection`).
                if let Collection::Repaired(h) = &self.nodes[a].engine.collection {
                    h.record(b, self.nodes[a].wall_ms(now));
                }
                self.stats.anti_entropy_copies +=
                    (report.fetched.len() + report.pushed.len()) as u64;
                for (key, ts) in report.fetched {
                    self.replica_wrote(a, key, ts);
                }
                for (key, ts) in report.pushed {
                    self.replica_wrote(b, key, ts);
                }
            }
            Err(_) => {
                // A disk fault on one side: the round is abandoned (a later one retries).
                self.check_disk(a);
                self.check_disk(b);
            }
        }
    }

    // ---- events ----

    pub(super) fn handle(&mut self, event: Event) {
        match event {
            Event::ClientNext { client } => self.client_next(client),
            Event::Deliver { from, to, message } => self.deliver(from, to, message),
            Event::LocalWrite {
                node,
                incarnation,
                write,
            } => self.local_write(node, incarnation, write),
            Event::Deadline { node, incarnation } => {
                let n = &mut self.nodes[node];
                if n.is_up() && n.incarnation() == incarnation {
                    let now = self.world.now_ms();
                    n.driver.tick(now);
                    self.drive(node);
                }
            }
            Event::HintTick => self.hint_tick(),
            Event::FaultTick => {
                if !self.healing {
                    self.fault_tick();
                }
            }
            Event::Restart { node, kill_first } => {
                if kill_first {
                    if self.nodes[node].is_up() && self.nodes[node].poisoned() {
                        self.crash(node, CrashKind::Kill, 0);
                        self.restart(node);
                    }
                } else if !self.nodes[node].is_up() {
                    self.restart(node);
                }
            }
            Event::Maintenance => {
                if !self.healing {
                    self.maintenance();
                }
            }
            Event::AntiEntropy => {
                if !self.healing {
                    self.anti_entropy_tick();
                }
            }
            Event::MembershipTick => self.membership_tick(),
        }
    }
}
