//! The faults: what kinds there are, the seeded schedule, and injecting
//! and healing each one on a running [`Cluster`].
//!
//! The schedule is a pure function of the seed, the node count, the
//! duration and the kinds enabled ([`schedule`]): the same seed gives the
//! same faults at the same offsets, with the same targets and parameters.
//! It has two lanes that overlap freely, each run by its own thread:
//! process faults (kill, pause, wipe, disk full, clock) one at a time, and
//! network faults (partition, one-way drop, delay) one at a time; within a
//! lane a fault is healed before the next starts, after a random quiet gap
//! (a heal that takes long, such as a refill, or a membership step delays
//! its lane's next faults, never the other lane's; a fault that starts late
//! keeps its full duration). Every fault has a bounded duration; the
//! network lane heals what is on at the run's end at once,
//! [`Injector::heal_all`] the process lane's after its last step.
//!
//! | kind | injected | healed |
//! | --- | --- | --- |
//! | `kill` | `kill -9` | restarted on its data |
//! | `pause` | SIGSTOP | SIGCONT |
//! | `partition` | the nodes split in two sides; every link across cut (closed) or black-holed, both ways | links pass |
//! | `oneway` | everything node A sends to node B dropped (A's requests on A's link, A's answers on B's link); B to A untouched | links pass |
//! | `delay` | each directed link delayed by its own random 0–150 ms (reordering across links; TCP keeps order within a connection) | links pass |
//! | `wipe` | `kill -9`, data directory removed | restarted empty with `--refill` (it answers no replica read before an anti-entropy round with every peer), then repair rounds on it (`POST /v0/repair`) until one succeeds with every peer |
//! | `diskfull` | `disk_full=1`: the node's file writes fail with ENOSPC | `disk_full=0`, then `kill -9` and restart (a failed write poisons the engine until a restart) |
//! | `clock` | `clock_offset_ms=±5..30 s`: the node's HLC reads a shifted wall clock | offset 0 |
//! | `crash` | every member's syncs 50 ms slower for 300 ms, then `kill -9` of every member at once ([`super::crash`]) | every member restarted on its data |
//! | `join`, `leave`, `replace`, `leavecut` | a layout change (`membership.rs`), in the process lane, only where the member count stays within `R..=slots` ([`Shape`]) | never: permanent (a `leavecut`'s cut is healed within its step) |
//!
//! With spare slots ([`Shape`]), a process fault's target is a choice among
//! the members at the time (`membership::pick`), never a spare or a
//! removed slot; network faults may name any slot.

use super::HarnessError;
use super::cluster::{Cluster, Control, Links, Role};
use super::converge;
use super::history::{Crash, FaultEvent, Recorder};
use crate::faultproxy::{Direction, LinkMode};
use ataman_testkit::rng::Rng;
// Locked ignoring poisoning: a panicked lane leaves the cluster as it was
// (every operation on it is one step).
use ataman_testkit::lock::lock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Largest delay of one link in a `delay` fault, ms (well under the
/// replication timeout, so a delayed replica still answers in time).
pub const LINK_DELAY_MS_MAX: u64 = 150;
/// Largest clock offset of a `clock` fault, ms: far under the hour a peer's
/// timestamp may be ahead (`hlc::PEER_CLOCK_AHEAD_MS_MAX`).
pub const CLOCK_OFFSET_MS_MAX: u64 = 30_000;
/// How often the injector looks for nodes that died on their own.
pub const EXIT_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// Restarts of a node that died on its own, at most per run.
pub const CRASH_RESTARTS_MAX: usize = 3;
/// Bound on refilling a wiped node by a repair round.
pub const REFILL_TIMEOUT: Duration = Duration::from_secs(10);

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// `kill -9` and restart.
    Kill,
    /// SIGSTOP, then SIGCONT.
    Pause,
    /// Two sides that cannot reach each other.
    Partition,
    /// One direction of one pair of nodes dropped.
    Oneway,
    /// Random per-link delays.
    Delay,
    /// `kill -9`, data removed, restart empty.
    Wipe,
    /// File writes fail with ENOSPC.
    DiskFull,
    /// The node's clock jumps.
    Clock,
    /// Every member killed at once, after a moment of slow disks.
    Crash,
    /// A spare slot's node joins: `--join`, then a layout adding it.
    Join,
    /// A member leaves: a layout removing it, then it stops once safe.
    Leave,
    /// A member dies (`kill -9`) and a spare replaces it in one layout.
    Replace,
    /// Two members leave in one layout while cut off from the rest.
    LeaveCut,
}

impl FaultKind {
    /// Every kind, in schedule order of the lanes.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::Partition,
        FaultKind::Oneway,
        FaultKind::Delay,
        FaultKind::Wipe,
        FaultKind::DiskFull,
        FaultKind::Clock,
        FaultKind::Crash,
    ];

    /// The membership kinds (`membership.rs`): permanent steps, never healed.
    pub const MEMBERSHIP: [FaultKind; 4] = [
        FaultKind::Join,
        FaultKind::Leave,
        FaultKind::Replace,
        FaultKind::LeaveCut,
    ];

    /// What `--faults all` means: every kind but `wipe` (a wiped member's
    /// data directory holds no layout, and a node whose layout names it
    /// refuses to start without one: see `membership.rs`).
    pub fn all() -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .chain(FaultKind::MEMBERSHIP)
            .filter(|&k| k != FaultKind::Wipe)
            .collect()
    }

    /// The name on the command line and in the history.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Oneway => "oneway",
            FaultKind::Delay => "delay",
            FaultKind::Wipe => "wipe",
            FaultKind::DiskFull => "diskfull",
            FaultKind::Clock => "clock",
            FaultKind::Crash => "crash",
            FaultKind::Join => "join",
            FaultKind::Leave => "leave",
            FaultKind::Replace => "replace",
            FaultKind::LeaveCut => "leavecut",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .chain(FaultKind::MEMBERSHIP)
            .find(|k| k.name() == s)
    }

    /// True for `join`, `leave`, `replace` and `leavecut`.
    pub fn is_membership(self) -> bool {
        FaultKind::MEMBERSHIP.contains(&self)
    }

    /// True for the network lane (links), false for the process lane.
    pub fn is_network(self) -> bool {
        matches!(
            self,
            FaultKind::Partition | FaultKind::Oneway | FaultKind::Delay
        )
    }
}

/// What one fault does, with its targets and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `kill -9` `node`; restart at the heal.
    Kill {
        /// The node.
        node: usize,
    },
    /// SIGSTOP `node`.
    Pause {
        /// The node.
        node: usize,
    },
    /// `side` against the other nodes; black hole or cut.
    Partition {
        /// One side (never empty, never everyone).
        side: Vec<usize>,
        /// Drop silently (true) or close connections (false).
        black_hole: bool,
    },
    /// Everything `from` sends to `to` is dropped.
    Oneway {
        /// The sender whose messages are lost.
        from: usize,
        /// The receiver that never hears them.
        to: usize,
    },
    /// Each listed link `(from, to)` delayed by its own ms.
    Delay {
        /// `(from, to, delay_ms)`.
        links: Vec<(usize, usize, u64)>,
    },
    /// `kill -9` `node`, remove its data; restart at the heal.
    Wipe {
        /// The node.
        node: usize,
    },
    /// `node`'s disk full.
    DiskFull {
        /// The node.
        node: usize,
    },
    /// `node`'s clock shifted by `offset_ms`.
    Clock {
        /// The node.
        node: usize,
        /// Milliseconds, either sign.
        offset_ms: i64,
    },
    /// Every member killed at once (the members at the time).
    Crash,
    /// The first spare slot joins.
    Join,
    /// A member leaves (`node` names it among the members at the time,
    /// `membership::pick`).
    Leave {
        /// The planned choice.
        node: usize,
    },
    /// A member is killed and replaced by the first spare slot.
    Replace {
        /// The planned choice (as for `Leave`).
        node: usize,
    },
    /// Two members leave while cut off: the planned choice (as for
    /// `Leave`) and the next member.
    LeaveCut {
        /// The planned choice.
        node: usize,
    },
}

impl Action {
    /// The kind of this action.
    pub fn kind(&self) -> FaultKind {
        match self {
            Action::Kill { .. } => FaultKind::Kill,
            Action::Pause { .. } => FaultKind::Pause,
            Action::Partition { .. } => FaultKind::Partition,
            Action::Oneway { .. } => FaultKind::Oneway,
            Action::Delay { .. } => FaultKind::Delay,
            Action::Wipe { .. } => FaultKind::Wipe,
            Action::DiskFull { .. } => FaultKind::DiskFull,
            Action::Clock { .. } => FaultKind::Clock,
            Action::Crash => FaultKind::Crash,
            Action::Join => FaultKind::Join,
            Action::Leave { .. } => FaultKind::Leave,
            Action::Replace { .. } => FaultKind::Replace,
            Action::LeaveCut { .. } => FaultKind::LeaveCut,
        }
    }

    /// The nodes it hits (a partition: the side named; a link fault: both ends).
    pub fn targets(&self) -> Vec<usize> {
        match self {
            Action::Kill { node }
            | Action::Pause { node }
            | Action::Wipe { node }
            | Action::DiskFull { node }
            | Action::Clock { node, .. }
            | Action::Leave { node }
            | Action::Replace { node }
            | Action::LeaveCut { node } => vec![*node],
            Action::Join | Action::Crash => Vec::new(),
            Action::Partition { side, .. } => side.clone(),
            Action::Oneway { from, to } => vec![*from, *to],
            Action::Delay { links } => {
                let mut nodes: Vec<usize> = links
                    .iter()
                    .filter(|l| l.2 > 0)
                    .flat_map(|l| [l.0, l.1])
                    .collect();
                nodes.sort_unstable();
                nodes.dedup();
                nodes
            }
        }
    }
}

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Injected this long after the workload started.
    pub at_ms: u64,
    /// Healed this long after it was injected.
    pub duration_ms: u64,
    /// What it does.
    pub action: Action,
}

/// `(low, high)` duration of each kind, ms.
fn duration_range(kind: FaultKind) -> (u64, u64) {
    match kind {
        FaultKind::Kill | FaultKind::Crash => (200, 1500),
        FaultKind::Pause => (300, 2000),
        FaultKind::Wipe => (200, 1000),
        FaultKind::DiskFull => (500, 2500),
        FaultKind::Clock => (1000, 4000),
        FaultKind::Partition | FaultKind::Oneway | FaultKind::Delay => (1000, 4000),
        // A membership step's own time is what it takes (bounded in
        // `membership.rs`); this is only the lane's pause after it.
        FaultKind::Join | FaultKind::Leave | FaultKind::Replace | FaultKind::LeaveCut => (100, 500),
    }
}

/// Quiet time between two faults of a lane, ms.
const GAP_MS: (u64, u64) = (300, 1500);
/// No fault starts in the last this-many ms of the run.
const TAIL_MS: u64 = 500;

fn action(rng: &mut Rng, kind: FaultKind, nodes: usize) -> Action {
    let node = rng.below(nodes as u64) as usize;
    match kind {
        FaultKind::Kill => Action::Kill { node },
        FaultKind::Pause => Action::Pause { node },
        FaultKind::Wipe => Action::Wipe { node },
        FaultKind::Join => Action::Join,
        FaultKind::Crash => Action::Crash,
        FaultKind::Leave => Action::Leave { node },
        FaultKind::Replace => Action::Replace { node },
        FaultKind::LeaveCut => Action::LeaveCut { node },
        FaultKind::DiskFull => Action::DiskFull { node },
        FaultKind::Clock => {
            let magnitude = rng.between(5_000, CLOCK_OFFSET_MS_MAX) as i64;
            let offset_ms = if rng.percent(50) {
                magnitude
            } else {
                -magnitude
            };
            Action::Clock { node, offset_ms }
        }
        FaultKind::Partition => {
            // A random proper, non-empty subset.
            let mut side: Vec<usize> = (0..nodes).filter(|_| rng.percent(50)).collect();
            if side.is_empty() || side.len() == nodes {
                side = vec![node];
            }
            Action::Partition {
                side,
                black_hole: rng.percent(50),
            }
        }
        FaultKind::Oneway => {
            let to = (node + 1 + rng.below(nodes as u64 - 1) as usize) % nodes;
            Action::Oneway { from: node, to }
        }
        FaultKind::Delay => {
            let mut links = Vec::new();
            for from in 0..nodes {
                for to in (0..nodes).filter(|&to| to != from) {
                    links.push((from, to, rng.below(LINK_DELAY_MS_MAX + 1)));
                }
            }
            Action::Delay { links }
        }
    }
}

/// The slots a schedule plans for: `members` nodes at the start, `slots`
/// in all (the rest spares a `join` or `replace` starts), and at least
/// `min_members` members at any time (the replication factor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Members at the start.
    pub members: usize,
    /// Members and spare slots.
    pub slots: usize,
    /// Fewest members a `leave` may leave.
    pub min_members: usize,
}

impl Shape {
    /// `nodes` members, no spare, never fewer members.
    pub fn fixed(nodes: usize) -> Shape {
        Shape {
            members: nodes,
            slots: nodes,
            min_members: nodes,
        }
    }
}

/// Whether a step of `kind` fits when `members` of `shape.slots` are members.
pub fn fits(kind: FaultKind, members: usize, shape: Shape) -> bool {
    match kind {
        FaultKind::Join | FaultKind::Replace => members < shape.slots,
        FaultKind::Leave => members > shape.min_members,
        FaultKind::LeaveCut => {
            members >= (shape.min_members + 2).max(super::membership::LEAVE_CUT_MEMBERS_MIN)
        }
        _ => true,
    }
}

/// Members after a step of `kind` (a replace keeps the count).
pub fn members_after(kind: FaultKind, members: usize) -> usize {
    match kind {
        FaultKind::Join => members + 1,
        FaultKind::Leave => members.saturating_sub(1),
        FaultKind::LeaveCut => members.saturating_sub(2),
        _ => members,
    }
}

/// The fault schedule of a run of `nodes` fixed members: a pure function
/// of its arguments.
pub fn schedule(seed: u64, nodes: usize, duration_ms: u64, kinds: &[FaultKind]) -> Vec<Step> {
    schedule_shaped(seed, Shape::fixed(nodes), duration_ms, kinds)
}

/// The fault schedule of a run of `shape`: a pure function of its
/// arguments. Targets are slot numbers below `shape.slots`; the process
/// lane's are choices among the members at the time (`membership::pick`).
/// Membership steps go in the process lane, only where they fit (the
/// member count the plan reaches stays within `min_members..=slots`); a
/// lane whose kinds all stop fitting ends.
pub fn schedule_shaped(
    seed: u64,
    shape: Shape,
    duration_ms: u64,
    kinds: &[FaultKind],
) -> Vec<Step> {
    let mut steps = Vec::new();
    let nodes = shape.slots;
    if shape.members < 2 || nodes < shape.members {
        return steps;
    }
    for (lane, network) in [false, true].into_iter().enumerate() {
        let lane_kinds: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .chain(FaultKind::MEMBERSHIP)
            .filter(|k| kinds.contains(k) && k.is_network() == network)
            .collect();
        if lane_kinds.is_empty() {
            continue;
        }
        let mut rng = Rng::derive(seed, 0xfa17 + lane as u64);
        let mut at_ms = rng.between(GAP_MS.0, GAP_MS.1);
        let mut members = shape.members;
        // Bounded: each step moves `at_ms` forward by at least GAP_MS.0.
        while at_ms + TAIL_MS < duration_ms {
            let fitting: Vec<FaultKind> = lane_kinds
                .iter()
                .copied()
                .filter(|&k| fits(k, members, shape))
                .collect();
            let Some(&kind) = rng.pick(&fitting) else {
                break;
            };
            members = members_after(kind, members);
            let (low, high) = duration_range(kind);
            let duration_ms = rng.between(low, high).min(duration_ms - at_ms);
            let action = action(&mut rng, kind, nodes);
            steps.push(Step {
                at_ms,
                duration_ms,
                action,
            });
            at_ms += duration_ms + rng.between(GAP_MS.0, GAP_MS.1);
        }
    }
    steps.sort_by_key(|s| (s.at_ms, s.action.kind()));
    steps
}

/// A fault injected and not yet healed.
pub struct Active {
    step: Step,
    start_us: u64,
    /// A membership step's outcome (it is done at injection, never healed);
    /// a `crash`'s members killed (restarted at the heal).
    done: Option<(Vec<usize>, String)>,
}

/// Applies a schedule to a cluster, in real time, and records each fault.
///
/// Thread safety: each lane runs on its own thread. The process lane locks
/// the cluster for one operation at a time (a kill, a restart), never
/// while it waits for a fault's duration or a refill; the network lane
/// never locks it (the link proxies are shared, [`Links`]), so a slow
/// restart never delays a partition.
pub struct Injector<'a> {
    cluster: &'a Mutex<Cluster>,
    links: Arc<Links>,
    recorder: &'a Recorder,
    crash_restarts: Mutex<Vec<usize>>,
    membership: super::membership::Membership<'a>,
    min_members: usize,
}

impl<'a> Injector<'a> {
    /// An injector for `cluster`, recording into `recorder`.
    pub fn new(cluster: &'a Mutex<Cluster>, recorder: &'a Recorder) -> Injector<'a> {
        Injector::with_min_members(cluster, recorder, 1)
    }

    /// An injector whose `leave` steps keep at least `min_members` members.
    pub fn with_min_members(
        cluster: &'a Mutex<Cluster>,
        recorder: &'a Recorder,
        min_members: usize,
    ) -> Injector<'a> {
        let (n, links) = {
            let c = lock(cluster);
            (c.len(), c.links())
        };
        Injector {
            cluster,
            links,
            recorder,
            crash_restarts: Mutex::new(vec![0; n]),
            membership: super::membership::Membership::new(cluster),
            min_members,
        }
    }

    /// Runs `steps` from `started` (the workload's start) until `deadline`,
    /// each lane on its own thread; the process lane also watches for nodes
    /// that die on their own. Returns the faults still active at the
    /// deadline, for [`Injector::heal_all`].
    pub fn run(&self, steps: &[Step], started: Instant, deadline: Instant) -> Vec<Active> {
        let lane = |network: bool| -> Vec<Step> {
            steps
                .iter()
                .filter(|s| s.action.kind().is_network() == network)
                .cloned()
                .collect()
        };
        let (process, network) = (lane(false), lane(true));
        std::thread::scope(|scope| {
            // The network lane heals what it left at once: the process
            // lane may run on past the deadline (a membership step waits
            // for its transition) and must not keep a partition on.
            let net = scope.spawn(|| {
                for active in self.run_lane(&network, started, deadline, false) {
                    self.heal(active);
                }
                Vec::new()
            });
            let mut left = self.run_lane(&process, started, deadline, true);
            match net.join() {
                Ok(mut more) => left.append(&mut more),
                Err(_) => tracing::error!("test-cluster: the network fault lane panicked"),
            }
            left
        })
    }

    /// One lane: inject and heal its steps in order until `deadline`.
    fn run_lane(
        &self,
        steps: &[Step],
        started: Instant,
        deadline: Instant,
        watch: bool,
    ) -> Vec<Active> {
        // The fault on, with when it is healed (ms from `started`): its
        // planned end, or its full duration after a late start (behind a
        // slow heal or a membership step).
        let mut active: Option<(u64, Active)> = None;
        let mut next = 0;
        // Bounded by the deadline: each iteration sleeps at most one poll
        // interval (an injection or a heal takes its own bounded time).
        while Instant::now() < deadline && !super::interrupted() {
            if watch {
                self.watch_exits();
            }
            let now_ms = started.elapsed().as_millis() as u64;
            if let Some((end_ms, _)) = &active
                && *end_ms <= now_ms
                && let Some((_, a)) = active.take()
            {
                self.heal(a);
            }
            if active.is_none()
                && let Some(step) = steps.get(next)
                && step.at_ms <= now_ms
            {
                let end_ms = now_ms.max(step.at_ms) + step.duration_ms;
                active = Some((end_ms, self.inject(step)));
                next += 1;
            }
            std::thread::sleep(EXIT_POLL_INTERVAL);
        }
        active.into_iter().map(|(_, a)| a).collect()
    }

    /// Records and restarts nodes that died on their own.
    pub fn watch_exits(&self) {
        let exited = lock(self.cluster).poll_exits();
        for (node, status) in exited {
            self.recorder.crash(Crash {
                node,
                at_us: self.recorder.now_us(),
                status: format!("exited on its own: {status}"),
            });
            if lock(self.cluster).role(node) != Role::Member {
                continue;
            }
            let again = {
                let mut restarts = lock(&self.crash_restarts);
                restarts[node] += 1;
                restarts[node] <= CRASH_RESTARTS_MAX
            };
            if again {
                self.restart(node);
            }
        }
    }

    fn restart(&self, node: usize) -> String {
        let result = lock(self.cluster).restart(node);
        match result {
            Ok(()) => "restarted".into(),
            Err(e) => {
                self.recorder.crash(Crash {
                    node,
                    at_us: self.recorder.now_us(),
                    status: format!("restart failed: {e}"),
                });
                format!("restart failed: {e}")
            }
        }
    }

    fn kill(&self, node: usize) {
        let result = lock(self.cluster).kill9(node);
        if let Err(status) = result {
            self.recorder.crash(Crash {
                node,
                at_us: self.recorder.now_us(),
                status: format!("already gone before kill -9: {status}"),
            });
        }
    }

    /// `step` with its process-lane target resolved among the members at
    /// this time ([`super::membership::pick`]; the same node when every
    /// slot is a member).
    fn resolve(&self, step: &Step) -> Step {
        let members = lock(self.cluster).member_slots();
        let to = |node: usize| super::membership::pick(node, &members).unwrap_or(node);
        let action = match step.action.clone() {
            Action::Kill { node } => Action::Kill { node: to(node) },
            Action::Pause { node } => Action::Pause { node: to(node) },
            Action::Wipe { node } => Action::Wipe { node: to(node) },
            Action::DiskFull { node } => Action::DiskFull { node: to(node) },
            Action::Clock { node, offset_ms } => Action::Clock {
                node: to(node),
                offset_ms,
            },
            other => other,
        };
        Step {
            action,
            ..step.clone()
        }
    }

    /// Injects `step`; the fault's start is when it took effect (a
    /// membership step's, when it began: it is done here).
    fn inject(&self, step: &Step) -> Active {
        let step = &self.resolve(step);
        let start_us = self.recorder.now_us();
        let done = match &step.action {
            Action::Join => Some(self.membership.join()),
            Action::Leave { node } => Some(self.membership.leave(*node, self.min_members)),
            Action::Replace { node } => Some(self.membership.replace(*node)),
            Action::LeaveCut { node } => Some(self.membership.leave_cut(*node, self.min_members)),
            _ => None,
        };
        if done.is_some() {
            self.record_node_ids();
            return Active {
                step: step.clone(),
                start_us,
                done,
            };
        }
        match &step.action {
            Action::Join
            | Action::Leave { .. }
            | Action::Replace { .. }
            | Action::LeaveCut { .. } => {}
            Action::Kill { node } => self.kill(*node),
            Action::Crash => {
                let (killed, gone) = super::crash::inject(self.cluster);
                for (node, status) in gone {
                    self.recorder.crash(Crash {
                        node,
                        at_us: self.recorder.now_us(),
                        status: format!("already gone before kill -9: {status}"),
                    });
                }
                return Active {
                    step: step.clone(),
                    start_us: self.recorder.now_us(),
                    done: Some((killed, String::new())),
                };
            }
            Action::Wipe { node } => {
                self.kill(*node);
                if let Err(e) = lock(self.cluster).wipe(*node) {
                    tracing::warn!(node, error = %e, "test-cluster: cannot wipe the node's data");
                }
            }
            Action::Pause { node } => {
                lock(self.cluster).pause(*node);
            }
            Action::DiskFull { node } => self.control(*node, true, 0),
            Action::Clock { node, offset_ms } => self.control(*node, false, *offset_ms),
            Action::Partition { side, black_hole } => {
                let mode = if *black_hole {
                    LinkMode::Drop
                } else {
                    LinkMode::Cut
                };
                for a in side {
                    for b in (0..self.links.len()).filter(|b| !side.contains(b)) {
                        for (x, y) in [(*a, b), (b, *a)] {
                            if let Some(link) = self.links.link(x, y) {
                                link.set_mode(mode);
                            }
                        }
                    }
                }
            }
            Action::Oneway { from, to } => {
                if let Some(link) = self.links.link(*from, *to) {
                    link.set_mode_one_way(Direction::ToTarget, LinkMode::Drop);
                }
                if let Some(link) = self.links.link(*to, *from) {
                    link.set_mode_one_way(Direction::FromTarget, LinkMode::Drop);
                }
            }
            Action::Delay { links } => {
                for &(from, to, ms) in links {
                    if let Some(link) = self.links.link(from, to) {
                        link.set_mode(LinkMode::Delay(Duration::from_millis(ms)));
                    }
                }
            }
        }
        Active {
            step: step.clone(),
            start_us: self.recorder.now_us(),
            done: None,
        }
    }

    /// Records the node id each slot holds in the newest layout the
    /// members serve (the history's `node_id` lines, which the checker's
    /// stamp rule reads): at the start and after every membership step.
    pub fn record_node_ids(&self) {
        for (node, id) in self.membership.node_ids() {
            self.recorder.node_id(node, id);
        }
    }

    /// Refills a wiped node, as an operator would after replacing a disk:
    /// repair rounds on it until one succeeds with every peer, bounded by
    /// [`REFILL_TIMEOUT`] (a round fails while a partition cuts a peer off).
    fn refill(&self, node: usize) -> String {
        let addr = lock(self.cluster).view().addr(node);
        let started = Instant::now();
        let mut outcome = String::from("no round finished");
        // Bounded by REFILL_TIMEOUT: every wait below stops at it.
        while started.elapsed() < REFILL_TIMEOUT {
            let round = match converge::start_repair(addr, REFILL_TIMEOUT) {
                Ok(Some(round)) => round,
                Ok(None) => return "no repair endpoint: not refilled".into(),
                Err(e) => return format!("refill not started: {e}"),
            };
            let last = loop {
                if started.elapsed() >= REFILL_TIMEOUT {
                    break None;
                }
                match converge::repair_done(addr, round, REFILL_TIMEOUT) {
                    Ok(Some(last)) => break Some(last),
                    Ok(None) => std::thread::sleep(converge::REPAIR_POLL),
                    Err(e) => return format!("refill round {round}: {e}"),
                }
            };
            let Some(last) = last else { break };
            outcome = format!(
                "refill round {round} after {} ms: {last}",
                started.elapsed().as_millis()
            );
            if last["ok"].as_bool() == Some(true) {
                return outcome;
            }
            std::thread::sleep(converge::REPAIR_POLL);
        }
        format!("refill not complete within {REFILL_TIMEOUT:?}; last: {outcome}")
    }

    fn control(&self, node: usize, disk_full: bool, clock_offset_ms: i64) {
        let control = Control {
            disk_full,
            clock_offset_ms,
            ..Control::default()
        };
        if let Err(e) = lock(self.cluster).set_control(node, control) {
            tracing::warn!(node, error = %e, "test-cluster: cannot set the node's faults");
        }
    }

    fn heal(&self, active: Active) {
        let is_up = |node: usize| lock(self.cluster).is_up(node);
        let mut targets = active.step.action.targets();
        let detail = match &active.step.action {
            Action::Join
            | Action::Leave { .. }
            | Action::Replace { .. }
            | Action::LeaveCut { .. } => {
                let (hit, detail) = active.done.clone().unwrap_or_default();
                targets = hit;
                detail
            }
            Action::Kill { node } => {
                if is_up(*node) {
                    "already up".into()
                } else {
                    self.restart(*node)
                }
            }
            Action::Crash => {
                super::crash::restore_disks(self.cluster);
                let (killed, _) = active.done.clone().unwrap_or_default();
                let restarted: Vec<String> = killed
                    .iter()
                    .map(|&node| format!("node {node} {}", self.restart(node)))
                    .collect();
                targets = killed;
                format!("every member killed at once; {}", restarted.join(", "))
            }
            Action::Wipe { node } => {
                let restarted = if is_up(*node) {
                    "already up".into()
                } else {
                    self.restart(*node)
                };
                format!("{restarted}; {}", self.refill(*node))
            }
            Action::Pause { node } => {
                lock(self.cluster).resume(*node);
                "resumed".into()
            }
            Action::DiskFull { node } => {
                self.control(*node, false, 0);
                // Let the node read the file (it polls every 75 ms), then
                // look whether a write failed meanwhile.
                std::thread::sleep(Duration::from_millis(200));
                let metrics = lock(self.cluster).metrics(*node);
                let poisoned = metrics
                    .is_some_and(|m| m.lines().any(|l| l.trim() == "ataman_engine_poisoned 1"));
                self.kill(*node);
                format!(
                    "engine {}; kill -9 and {}",
                    if poisoned { "poisoned" } else { "not poisoned" },
                    self.restart(*node)
                )
            }
            Action::Clock { node, offset_ms } => {
                self.control(*node, false, 0);
                format!("offset {offset_ms} ms, back to 0")
            }
            Action::Partition { side, black_hole } => {
                self.links.heal();
                format!(
                    "{side:?} | rest, {}",
                    if *black_hole { "black hole" } else { "cut" }
                )
            }
            Action::Oneway { from, to } => {
                self.links.heal();
                format!("{from} -> {to} dropped")
            }
            Action::Delay { links } => {
                self.links.heal();
                format!("delays (from, to, ms): {links:?}")
            }
        };
        self.recorder.fault(FaultEvent {
            kind: active.step.action.kind(),
            targets,
            start_us: active.start_us,
            end_us: self.recorder.now_us(),
            detail,
            clock_offset_ms: match active.step.action {
                Action::Clock { offset_ms, .. } => Some(offset_ms),
                _ => None,
            },
        });
    }

    /// Heals `left` (what [`Injector::run`] returned), then makes sure
    /// every node runs, no link is faulty and no node is paused or has a
    /// fault switched on.
    pub fn heal_all(&self, left: Vec<Active>) -> Result<(), HarnessError> {
        for active in left {
            self.heal(active);
        }
        self.watch_exits();
        let mut cluster = lock(self.cluster);
        cluster.heal_links();
        for node in 0..cluster.len() {
            cluster.set_control(node, Control::default())?;
            if cluster.is_up(node) {
                cluster.resume(node);
            } else if cluster.role(node) == Role::Member {
                cluster.restart(node)?;
            }
        }
        Ok(())
    }

    /// Where the membership ended, after [`Injector::heal_all`]: removed
    /// nodes stopped once safe, every member settled (bounded), the final
    /// version and member slots (`membership.rs`).
    pub fn finish_membership(&self) -> String {
        self.membership.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same seed gives the same schedule; another seed another one;
    /// every fault ends within the run, lanes never overlap within
    /// themselves, and only enabled kinds appear.
    #[test]
    fn schedule_is_seeded_and_bounded() {
        let a = schedule(42, 3, 30_000, &FaultKind::ALL);
        assert_eq!(a, schedule(42, 3, 30_000, &FaultKind::ALL));
        assert_ne!(a, schedule(43, 3, 30_000, &FaultKind::ALL));
        assert!(a.len() >= 10, "{a:?}");
        for network in [false, true] {
            let lane: Vec<&Step> = a
                .iter()
                .filter(|s| s.action.kind().is_network() == network)
                .collect();
            for pair in lane.windows(2) {
                assert!(
                    pair[0].at_ms + pair[0].duration_ms < pair[1].at_ms,
                    "{pair:?}"
                );
            }
        }
        for s in &a {
            assert!(s.at_ms + s.duration_ms <= 30_000, "{s:?}");
            let targets = s.action.targets();
            assert!(targets.iter().all(|&t| t < 3), "{s:?}");
            if let Action::Partition { side, .. } = &s.action {
                assert!(!side.is_empty() && side.len() < 3);
            }
            if let Action::Clock { offset_ms, .. } = s.action {
                assert!(offset_ms.unsigned_abs() <= CLOCK_OFFSET_MS_MAX);
            }
        }
        let kills = schedule(7, 3, 20_000, &[FaultKind::Kill]);
        assert!(!kills.is_empty());
        assert!(kills.iter().all(|s| s.action.kind() == FaultKind::Kill));
        assert!(schedule(7, 3, 20_000, &[]).is_empty());
        for kind in FaultKind::ALL {
            assert_eq!(FaultKind::parse(kind.name()), Some(kind));
        }
    }

    /// A short run's default schedule can include every kind, `crash`
    /// too: a 15 s run plans about four process-lane steps among six
    /// kinds, so one seed may draw no crash, but some seeds of a bounded
    /// few do (checked after two 15 s runs of one seed injected none).
    #[test]
    fn a_short_runs_default_schedule_can_include_every_kind() {
        for kind in FaultKind::ALL {
            let drawn = (0..64u64).any(|seed| {
                schedule(seed, 3, 15_000, &FaultKind::ALL)
                    .iter()
                    .any(|s| s.action.kind() == kind)
            });
            assert!(drawn, "{kind:?} never scheduled in 64 seeds of 15 s");
        }
        // Negative control: a kind left out is never drawn.
        let no_crash: Vec<FaultKind> = FaultKind::ALL
            .into_iter()
            .filter(|&k| k != FaultKind::Crash)
            .collect();
        assert!((0..64u64).all(|seed| {
            schedule(seed, 3, 15_000, &no_crash)
                .iter()
                .all(|s| s.action.kind() != FaultKind::Crash)
        }));
    }

    /// Membership steps go in the process lane and only where they fit:
    /// replaying any seed's plan keeps the member count within
    /// `min_members..=slots`; a join-only plan stops once the spares are
    /// used; process-lane targets stay below the slot count; a fixed
    /// shape plans as before (no membership step, same schedule).
    #[test]
    fn membership_steps_keep_the_count_within_bounds() {
        let shape = Shape {
            members: 4,
            slots: 6,
            min_members: 3,
        };
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let steps = schedule_shaped(seed, shape, 60_000, &FaultKind::all());
            let mut members = shape.members;
            for s in &steps {
                let kind = s.action.kind();
                assert!(!(kind.is_membership() && kind.is_network()));
                assert!(
                    fits(kind, members, shape),
                    "seed {seed}: {s:?} at {members}"
                );
                members = members_after(kind, members);
                assert!((shape.min_members..=shape.slots).contains(&members));
                assert!(s.action.targets().iter().all(|&t| t < shape.slots));
                seen.insert(kind);
            }
        }
        for kind in FaultKind::MEMBERSHIP {
            assert!(seen.contains(&kind), "{kind:?} never planned");
        }
        assert!(!seen.contains(&FaultKind::Wipe));
        let joins = schedule_shaped(5, shape, 60_000, &[FaultKind::Join]);
        assert_eq!(joins.len(), 2, "{joins:?}");
        let leaves = schedule_shaped(5, shape, 60_000, &[FaultKind::Leave]);
        assert_eq!(leaves.len(), 1, "{leaves:?}");
        // Two leave at once only from five members (three stay: a
        // majority) and never below the minimum.
        assert!(schedule_shaped(5, shape, 60_000, &[FaultKind::LeaveCut]).is_empty());
        let five = Shape {
            members: 5,
            slots: 5,
            min_members: 2,
        };
        let cuts = schedule_shaped(5, five, 60_000, &[FaultKind::LeaveCut]);
        assert_eq!(cuts.len(), 1, "{cuts:?}");
        assert!(!fits(
            FaultKind::LeaveCut,
            6,
            Shape {
                min_members: 5,
                ..five
            }
        ));
        let fixed = schedule(42, 3, 30_000, &FaultKind::ALL);
        assert_eq!(
            fixed,
            schedule_shaped(42, Shape::fixed(3), 30_000, &FaultKind::ALL)
        );
        assert!(schedule(42, 3, 30_000, &FaultKind::MEMBERSHIP).is_empty());
        for kind in FaultKind::MEMBERSHIP {
            assert_eq!(FaultKind::parse(kind.name()), Some(kind));
        }
    }
}
