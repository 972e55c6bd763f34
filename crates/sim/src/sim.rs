//! The driver of one run: takes events from the world in order and carries
//! them out on the nodes, the network and the clients, recording what
//! happens in the [`History`].
//!
//! A run has two phases:
//! 1. **Workload**: the clients send `steps` requests while faults,
//!    flushes, compactions, hint deliveries and anti-entropy rounds happen
//!    at times the random number generator picks.
//! 2. **Heal and settle**: every fault ends (cuts healed, loss off, armed
//!    disk faults disarmed, crashed nodes restarted), the cluster runs
//!    until no request, message or hint is pending; then an anti-entropy
//!    round between every pair of nodes; then, if configured, every node
//!    loses power once more and restarts;
//!    then each node's state is recorded and the checker judges the run.

use crate::antientropy;
use crate::check::{self, Report};
use crate::client::Client;
use crate::config::{CrashKind, HINT_TICK_MS, REPLICATION_TIMEOUT_MS, SimConfig};
use crate::coordinator::{LocalWrite, Outbox};
use crate::faults::{self, Fault};
use crate::history::{Happening, History, Op, OpId, OpKind, OpResult};
use crate::network::{Answer, Message, Network, NetworkStats, Request, Waiter};
use crate::node::{Reopened, SimNode};
use crate::world::World;
use ataman_node::cluster::placement;
use ataman_node::peer::frame::Version;
use ataman_node::replication::HINT_BATCH_MAX;
use ataman_node::replication::coordinator::{Decision, Kind, Outcome};
use rand::Rng;
use std::collections::BTreeMap;

/// Longest a disk takes to make a local write durable, ms.
pub const DISK_MS_MAX: u64 = 2;
/// Shortest and longest gap between two flushes or compactions, ms.
pub const MAINTENANCE_GAP_MS: (u64, u64) = (50, 400);
/// Shortest and longest gap between two anti-entropy rounds during the workload, ms.
pub const ANTI_ENTROPY_GAP_MS: (u64, u64) = (100, 800);
/// The heal phase waits at most this long (virtual) for the cluster to settle.
pub const SETTLE_MS_MAX: u64 = 60_000;

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
    /// A coordinated request's deadline.
    Deadline {
        /// The coordinator.
        node: usize,
        /// Its incarnation when the request started.
        incarnation: u64,
        /// The request.
        id: u64,
    },
    /// Every node's hint-delivery tick.
    HintTick,
    /// A hint round's deadline.
    HintDeadline {
        /// The node delivering.
        node: usize,
        /// Its incarnation when the round started.
        incarnation: u64,
        /// The peer.
        peer: usize,
        /// The round.
        round: u64,
    },
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
    /// The network's counters.
    pub network: NetworkStats,
    /// Events run.
    pub events: u64,
    /// Virtual time at the end, ms.
    pub virtual_ms: u64,
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
    config: SimConfig,
    world: World<Event>,
    network: Network,
    nodes: Vec<SimNode>,
    seeds: Vec<u64>,
    clients: Vec<Client>,
    history: History,
    ops_issued: usize,
    ops_done: usize,
    healing: bool,
    local_writes_pending: usize,
    stats: RunStats,
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
    fn new(seed: u64, config: SimConfig) -> Result<Sim, String> {
        let nodes = (0..config.nodes)
            .map(|i| SimNode::new(i, config.wal_mode))
            .collect::<Result<Vec<_>, _>>()?;
        let seeds = placement::seeds(&node_names(config.nodes));
        let clients = (0..config.clients).map(Client::new).collect();
        let history = History {
            nodes: config.nodes,
            replicas: config.replicas,
            seeds: seeds.clone(),
            ..History::default()
        };
        Ok(Sim {
            world: World::new(seed),
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
            config,
        })
    }

    fn now(&self) -> u64 {
        self.world.now_ms()
    }

    fn between(&mut self, (lo, hi): (u64, u64)) -> u64 {
        self.world.rng.random_range(lo..=hi)
    }

    // ---- phases ----

    fn workload(&mut self) {
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

    fn heal_and_settle(&mut self) {
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
        self.converge();
        self.run_until_quiet("after the final repairs");
        if self.config.final_power_cut {
            for node in 0..self.nodes.len() {
                let seed = self.world.rng.random();
                self.crash(node, CrashKind::PowerLoss, seed);
                self.restart(node);
            }
        }
    }

    fn finish(mut self, seed: u64) -> RunResult {
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
        for node in &self.nodes {
            self.stats.hints_dropped += node.hints().dropped;
            self.stats.hints_delivered += node.hints().delivered;
        }
        self.stats.network = self.network.stats;
        self.stats.events = self.world.taken();
        self.stats.virtual_ms = self.world.now_ms();
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
    fn run_until_quiet(&mut self, when: &str) {
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

    fn quiet(&self) -> bool {
        self.network.in_flight() == 0
            && self.local_writes_pending == 0
            && self.nodes.iter().all(|n| {
                n.coordinating().is_empty() && n.hints().is_empty() && !n.hints().delivering()
            })
    }

    fn pending(&self) -> String {
        let per_node: Vec<String> = self
            .nodes
            .iter()
            .map(|n| {
                format!(
                    "node {}: up {}, {} requests, {} hints",
                    n.index,
                    n.is_up(),
                    n.coordinating().len(),
                    n.hints().len()
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

    fn stuck(&mut self, what: String) {
        let at_ms = self.now();
        self.history
            .happenings
            .push(Happening::Stuck { at_ms, what });
    }

    /// Makes every replica of every key equal: an anti-entropy round
    /// between every pair of nodes (all up, no cut, nothing in flight, so
    /// one pass suffices: after the rounds of a key's replicas with each
    /// other, every one holds the newest).
    fn converge(&mut self) {
        for a in 0..self.nodes.len() {
            for b in a + 1..self.nodes.len() {
                self.anti_entropy(a, b, ataman_node::antientropy::merkle::DEPTH);
            }
        }
    }

    /// One anti-entropy round between `a` (initiator) and `b`.
    fn anti_entropy(&mut self, a: usize, b: usize, depth: u32) {
        assert_ne!(a, b, "a round needs two nodes");
        let now = self.now();
        let (low, high) = self.nodes.split_at_mut(a.max(b));
        let (na, nb) = if a < b {
            (&mut low[a], &mut high[0])
        } else {
            (&mut high[0], &mut low[b])
        };
        self.stats.anti_entropy_rounds += 1;
        match antientropy::round(na, nb, &self.seeds, self.config.replicas, depth, now) {
            Ok(report) => {
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

    fn handle(&mut self, event: Event) {
        match event {
            Event::ClientNext { client } => self.client_next(client),
            Event::Deliver { from, to, message } => self.deliver(from, to, message),
            Event::LocalWrite {
                node,
                incarnation,
                write,
            } => self.local_write(node, incarnation, write),
            Event::Deadline {
                node,
                incarnation,
                id,
            } => {
                let n = &mut self.nodes[node];
                if n.is_up() && n.incarnation() == incarnation {
                    let mut out = Outbox::default();
                    n.expire(id, &mut out);
                    self.carry_out(node, out);
                }
            }
            Event::HintTick => self.hint_tick(),
            Event::HintDeadline {
                node,
                incarnation,
                peer,
                round,
            } => {
                let n = &mut self.nodes[node];
                if n.incarnation() == incarnation {
                    n.hints.expire(peer, round);
                }
            }
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
        }
    }

    fn client_next(&mut self, client: usize) {
        if self.ops_issued >= self.config.steps {
            return;
        }
        let id = self.history.ops.len();
        let plan = self.clients[client].plan(
            &mut self.world.rng,
            id,
            self.config.nodes,
            self.config.replicas,
        );
        self.ops_issued += 1;
        self.issue(client, plan);
    }

    /// Sends a request for `client` (an index past the clients: the final sweep).
    fn issue(&mut self, client: usize, plan: crate::client::Plan) {
        let id = self.history.ops.len();
        let now = self.now();
        let node = &mut self.nodes[plan.coordinator];
        let mut op = Op {
            id,
            client,
            coordinator: plan.coordinator,
            key: plan.key.clone(),
            kind: plan.kind.clone(),
            ack: plan.ack,
            from: self.config.replicas,
            ts: None,
            invoked_ms: now,
            completed_ms: None,
            result: OpResult::Pending,
        };
        if !node.is_up() {
            op.result = OpResult::Refused;
            op.completed_ms = Some(now);
            self.history.ops.push(op);
            self.ops_done += usize::from(client < self.clients.len());
            self.client_answered(client);
            return;
        }
        let kind = match &plan.kind {
            OpKind::Get => Kind::Read,
            OpKind::Put(value) => Kind::Write(Version {
                ts: node.stamp(now),
                value: Some(value.clone()),
            }),
            OpKind::Delete => Kind::Write(Version {
                ts: node.stamp(now),
                value: None,
            }),
        };
        if let Kind::Write(v) = &kind {
            op.ts = Some(v.ts);
        }
        self.history.ops.push(op);
        if let Some(c) = self.clients.get_mut(client) {
            c.waiting = Some(id);
        }
        let mut out = Outbox::default();
        node.coordinate(
            &self.seeds,
            id,
            plan.key,
            kind,
            plan.ack,
            self.config.replicas,
            self.config.planted_bug,
            &mut out,
        );
        self.carry_out(plan.coordinator, out);
    }

    fn client_answered(&mut self, client: usize) {
        if let Some(c) = self.clients.get_mut(client) {
            c.waiting = None;
            let think = Client::think_ms(&mut self.world.rng);
            self.world.schedule(think, Event::ClientNext { client });
        }
    }

    /// Records the answer of `op` (the first one only).
    fn complete(&mut self, op: OpId, result: OpResult) {
        let now = self.now();
        let entry = &mut self.history.ops[op];
        if entry.result != OpResult::Pending {
            return;
        }
        entry.result = result;
        entry.completed_ms = Some(now);
        let client = entry.client;
        if client < self.clients.len() {
            self.ops_done += 1;
        }
        self.client_answered(client);
    }

    fn carry_out(&mut self, node: usize, out: Outbox) {
        let incarnation = self.nodes[node].incarnation();
        for (to, message) in out.sends {
            self.send(node, to, message, 0);
        }
        for write in out.local_writes {
            self.local_writes_pending += 1;
            let after = self.world.rng.random_range(0..=DISK_MS_MAX);
            self.world.schedule(
                after,
                Event::LocalWrite {
                    node,
                    incarnation,
                    write,
                },
            );
        }
        for id in out.deadlines {
            self.world.schedule(
                REPLICATION_TIMEOUT_MS,
                Event::Deadline {
                    node,
                    incarnation,
                    id,
                },
            );
        }
        for (op, decision) in out.replies {
            let result = match decision {
                Decision::Written => OpResult::Written,
                Decision::Read(v) => OpResult::Read(v),
                Decision::Failed(why) => OpResult::Failed(why),
            };
            self.complete(op, result);
        }
        self.stats.repairs += out.repairs;
        self.stats.hints_kept += out.hints;
    }

    fn send(&mut self, from: usize, to: usize, message: Message, extra_ms: u64) {
        let now = self.now();
        if let Some(delay) = self.network.send(&mut self.world.rng, from, to, now) {
            self.world
                .schedule(extra_ms + delay, Event::Deliver { from, to, message });
        }
    }

    fn deliver(&mut self, from: usize, to: usize, message: Message) {
        let now = self.now();
        if !self.network.arrive(from, to, now) {
            return;
        }
        match message {
            Message::Request {
                waiter,
                incarnation,
                request,
            } => {
                let answer = if self.nodes[to].is_up() {
                    let answer = self.nodes[to].serve(now, &request);
                    match (&answer, &request) {
                        (Answer::Written, Request::Write { key, version }) => {
                            self.replica_wrote(to, key.clone(), version.ts)
                        }
                        (Answer::Failed(_), _) => self.check_disk(to),
                        _ => {}
                    }
                    answer
                } else if self.nodes[to].powered_off() {
                    return; // the machine is off: silence until the deadline
                } else {
                    Answer::Failed(format!("node {to}: connection refused"))
                };
                if waiter != Waiter::Nobody {
                    let disk = self.world.rng.random_range(0..=DISK_MS_MAX);
                    let reply = Message::Answer {
                        waiter,
                        incarnation,
                        answer,
                    };
                    self.send(to, from, reply, disk);
                }
            }
            Message::Answer {
                waiter,
                incarnation,
                answer,
            } => {
                let node = &mut self.nodes[to];
                if !node.is_up() || node.incarnation() != incarnation {
                    return;
                }
                match waiter {
                    Waiter::Coordination { id, position } => {
                        let outcome = match answer {
                            Answer::Written => Outcome::Written,
                            Answer::Read(v) => Outcome::Read(v),
                            Answer::Failed(why) => Outcome::Failed(why),
                        };
                        let mut out = Outbox::default();
                        node.on_outcome(id, position, outcome, &mut out);
                        self.carry_out(to, out);
                    }
                    Waiter::Hint { seq } => {
                        node.hints.answered(from, seq, answer == Answer::Written);
                    }
                    Waiter::Nobody => {}
                }
            }
        }
    }

    fn local_write(&mut self, node: usize, incarnation: u64, write: LocalWrite) {
        assert!(self.local_writes_pending > 0, "local write never started");
        self.local_writes_pending -= 1;
        let n = &self.nodes[node];
        if !n.is_up() || n.incarnation() != incarnation {
            return; // the process died with the write in flight
        }
        let result = n.write(&write.key, &write.version);
        match &result {
            Ok(()) => self.replica_wrote(node, write.key.clone(), write.version.ts),
            Err(_) => self.check_disk(node),
        }
        if let Some((id, position)) = write.waiter {
            let outcome = match result {
                Ok(()) => Outcome::Written,
                Err(e) => Outcome::Failed(format!("local replica: {e}")),
            };
            let mut out = Outbox::default();
            self.nodes[node].on_outcome(id, position, outcome, &mut out);
            self.carry_out(node, out);
        }
    }

    fn replica_wrote(&mut self, node: usize, key: Vec<u8>, ts: u64) {
        let at_ms = self.now();
        self.history.happenings.push(Happening::ReplicaWrote {
            at_ms,
            node,
            key,
            ts,
        });
    }

    /// A write failed on `node`: if its engine refuses writes (a disk
    /// fault), restart it a little later, as an operator would.
    fn check_disk(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        if n.restart_scheduled || !n.poisoned() {
            return;
        }
        n.restart_scheduled = true;
        let after = self.between(faults::DISK_RESTART_MS);
        self.world.schedule(
            after,
            Event::Restart {
                node,
                kill_first: true,
            },
        );
    }

    fn hint_tick(&mut self) {
        for node in 0..self.nodes.len() {
            if !self.nodes[node].is_up() {
                continue;
            }
            let incarnation = self.nodes[node].incarnation();
            let rounds = self.nodes[node].hints.start_rounds(HINT_BATCH_MAX);
            for crate::hints::RoundStart { peer, round, hints } in rounds {
                self.world.schedule(
                    REPLICATION_TIMEOUT_MS,
                    Event::HintDeadline {
                        node,
                        incarnation,
                        peer,
                        round,
                    },
                );
                for (seq, hint) in hints {
                    let message = Message::Request {
                        waiter: Waiter::Hint { seq },
                        incarnation,
                        request: Request::Write {
                            key: hint.key,
                            version: hint.version,
                        },
                    };
                    self.send(node, peer, message, 0);
                }
            }
        }
        self.world.schedule(HINT_TICK_MS, Event::HintTick);
    }

    // ---- faults ----

    fn fault_record(&mut self, what: String) {
        let at_ms = self.now();
        self.history
            .happenings
            .push(Happening::Fault { at_ms, what });
    }

    fn count_fault(&mut self, name: &'static str) {
        *self.stats.faults.entry(name).or_insert(0) += 1;
    }

    fn fault_tick(&mut self) {
        let up: Vec<bool> = self.nodes.iter().map(SimNode::is_up).collect();
        let fault = faults::choose(&mut self.world.rng, &self.config.faults, &up);
        if let Some(fault) = fault {
            self.apply(fault);
        }
        let gap = faults::gap_ms(&mut self.world.rng);
        self.world.schedule(gap, Event::FaultTick);
    }

    fn apply(&mut self, fault: Fault) {
        let now = self.now();
        match &fault {
            Fault::Crash {
                node,
                kind,
                down_ms,
                image_seed,
            } => {
                self.count_fault(match kind {
                    CrashKind::PowerLoss => "crash (power loss)",
                    CrashKind::Kill => "crash (kill -9)",
                });
                self.crash(*node, *kind, *image_seed);
                self.world.schedule(
                    *down_ms,
                    Event::Restart {
                        node: *node,
                        kill_first: false,
                    },
                );
                return;
            }
            Fault::Partition { minority, heal_ms } => {
                self.count_fault("partition");
                for a in 0..self.nodes.len() {
                    for b in 0..self.nodes.len() {
                        if minority.contains(&a) && !minority.contains(&b) {
                            self.network.cut(a, b, now + heal_ms, now);
                            self.network.cut(b, a, now + heal_ms, now);
                        }
                    }
                }
            }
            Fault::OneWayCut { from, to, heal_ms } => {
                self.count_fault("one-way cut");
                self.network.cut(*from, *to, now + heal_ms, now);
            }
            Fault::Loss { per_mille, for_ms } => {
                self.count_fault("message loss");
                self.network.lossy(*per_mille, now + for_ms);
            }
            Fault::Skew { node, skew_ms } => {
                self.count_fault("clock skew");
                self.nodes[*node].set_skew(*skew_ms);
            }
            Fault::Disk {
                node,
                op,
                file,
                nth,
                kind,
            } => {
                self.count_fault("disk fault");
                let fault = ataman_engine::fs::sim::Fault::new(*op, *nth, *kind);
                self.nodes[*node].inject(fault.on_paths_containing(file));
            }
            Fault::DropHints { node } => {
                self.count_fault("hints dropped");
                self.nodes[*node].hints.drop_all();
            }
        }
        self.fault_record(format!("{fault:?}"));
    }

    /// Node `node` crashes: its requests in flight are never answered.
    fn crash(&mut self, node: usize, kind: CrashKind, image_seed: u64) {
        let orphans = self.nodes[node].coordinating();
        self.nodes[node].crash(kind, image_seed);
        let at_ms = self.now();
        self.history
            .happenings
            .push(Happening::Crash { at_ms, node, kind });
        for op in orphans {
            self.complete(op, OpResult::Unknown);
        }
    }

    fn restart(&mut self, node: usize) {
        let reopened = self.nodes[node].restart();
        self.record_restart(node, reopened);
    }

    fn record_restart(&mut self, node: usize, reopened: Reopened) {
        self.stats.restarts += 1;
        let state = self.nodes[node].state().unwrap_or_default();
        let at_ms = self.now();
        self.history.happenings.push(Happening::Restart {
            at_ms,
            node,
            reopened,
            state,
        });
    }

    fn maintenance(&mut self) {
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_up())
            .collect();
        if !up.is_empty() {
            let node = up[self.world.rng.random_range(0..up.len())];
            let compact = self.world.rng.random_range(0..100) < 30;
            self.stats.maintenance += 1;
            let orphans = self.nodes[node].coordinating();
            let before = self.nodes[node].incarnation();
            let restarted = if compact {
                self.nodes[node].compact()
            } else {
                self.nodes[node].flush()
            };
            if self.nodes[node].incarnation() != before {
                // A disk fault fired during the flush: the process died and restarted.
                let at_ms = self.now();
                self.history.happenings.push(Happening::Crash {
                    at_ms,
                    node,
                    kind: CrashKind::Kill,
                });
                for op in orphans {
                    self.complete(op, OpResult::Unknown);
                }
                self.record_restart(node, restarted.unwrap_or(Reopened::Clean));
            }
        }
        let gap = self.between(MAINTENANCE_GAP_MS);
        self.world.schedule(gap, Event::Maintenance);
    }

    /// An anti-entropy round between two random nodes that are up and can
    /// reach each other both ways; depths other than the real one make
    /// buckets hold several keys.
    fn anti_entropy_tick(&mut self) {
        let now = self.now();
        let n = self.nodes.len();
        if n >= 2 {
            let a = self.world.rng.random_range(0..n);
            let b = (a + self.world.rng.random_range(1..n)) % n;
            let depth =
                [1, 4, ataman_node::antientropy::merkle::DEPTH][self.world.rng.random_range(0..3)];
            let reachable = !self.network.is_cut(a, b, now) && !self.network.is_cut(b, a, now);
            if reachable && self.nodes[a].is_up() && self.nodes[b].is_up() {
                self.anti_entropy(a, b, depth);
            }
        }
        let gap = self.between(ANTI_ENTROPY_GAP_MS);
        self.world.schedule(gap, Event::AntiEntropy);
    }
}
