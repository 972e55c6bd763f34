//! The node's shared state: what every thread of a node reads and updates
//! ([`NodeShared`]), what one network thread's code needs besides
//! ([`NetContext`]), and how a finished write finds its way back to the
//! network thread that asked for it ([`Target`], [`Completion`], [`Inbox`],
//! [`CompletionSender`]).
//!
//! A leaf of the node's layering (docs/ARCHITECTURE.md, "Layering of the
//! node"): it names the types of the subsystems' shared parts, and no
//! subsystem below it names it.
//!
//! # Thread safety
//! A connection belongs to one thread for its whole life. Only the inbox
//! (new connections, completions) is shared, behind one mutex per thread.

use crate::api::RouteConfig;
use crate::cluster::Topology;
use crate::cluster::live::{LivePlacement, Placement};
use crate::config::NodeConfig;
use crate::hints::HintStore;
use crate::hlc::Hlc;
use crate::metrics::NodeMetrics;
use crate::peer::link::{LinkEnv, PeerStatus};
use ataman_engine::Db;
use ataman_testkit::lock::lock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Who waits for a write the engine finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An HTTP request's answer slot.
    Slot {
        /// The connection's token in its thread.
        token: usize,
        /// The connection's generation (a token may be reused).
        generation: u64,
        /// The connection's slot for the answer.
        slot: u64,
    },
    /// A peer's write request on an upgraded connection.
    Peer {
        /// The connection's token in its thread.
        token: usize,
        /// The connection's generation.
        generation: u64,
        /// The peer's request id.
        id: u64,
    },
    /// The local replica of a replicated write.
    Replica {
        /// The coordination's key in the thread's table.
        coordination: usize,
        /// Its generation (keys are reused).
        generation: u64,
        /// This node's position in the coordination's replica list.
        position: usize,
    },
    /// A connection streaming a cluster range: its range thread queued
    /// more of the answer (`crate::range::feed`).
    Feed {
        /// The connection's token in its thread.
        token: usize,
        /// The connection's generation.
        generation: u64,
    },
    /// A write of one consensus-register acceptor step
    /// ([`RegisterPort::written`]).
    Register {
        /// The step's id in the acceptor's table.
        step: u64,
    },
    /// Nobody (a read repair or a hint applied locally).
    Nobody,
}

/// Where a consensus-register acceptor's reply goes, on the network
/// thread whose inbox it is delivered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterTo {
    /// A peer connection that sent the Ask (its frame is written there).
    Peer {
        /// The connection's token in its thread.
        token: usize,
        /// The connection's generation.
        generation: u64,
    },
    /// This node's own proposer on that thread (its replica of the key).
    Local,
}

/// A register operation's update: the current value (absent: `None`),
/// its deadline, the round's ballot time and the value's version, to the
/// new value and its deadline, or `None` when it writes nothing (the
/// proposer's `Current` and `Next` in plain types: this module does not
/// import the replication module, which imports it).
pub type RegisterUpdate =
    Box<dyn FnMut(&RegisterRead<'_>) -> Option<(Option<Vec<u8>>, Option<u64>)>>;

/// What a register operation's update reads ([`RegisterUpdate`]).
#[derive(Debug, Clone, Copy)]
pub struct RegisterRead<'a> {
    /// The value (`None`: absent).
    pub value: &'a Option<Vec<u8>>,
    /// Its deadline, Unix milliseconds.
    pub deadline_ms: Option<u64>,
    /// The round's ballot time.
    pub at: u64,
    /// The version the value is stored under (`None`: never written).
    pub version: Option<u64>,
}

/// A read-modify-write a connection hands to its thread's consensus
/// register proposers (`replication::register_ops`), with the event
/// loop's other requests.
pub struct RegisterStart {
    /// The key.
    pub key: Vec<u8>,
    /// The connection's token, generation and answer slot.
    pub token: usize,
    /// The connection's generation.
    pub generation: u64,
    /// The answer slot.
    pub slot: u64,
    /// The update: the current value to the new one, or none (no write).
    pub update: RegisterUpdate,
}

/// An acceptor's reply on its way to the thread that waits for it: the
/// encoded register Reply frame (`replication::register::wire`).
#[derive(Debug)]
pub struct RegisterDelivery {
    /// Who waits.
    pub to: RegisterTo,
    /// The Reply frame's bytes.
    pub frame: Vec<u8>,
}

/// The node's consensus-register acceptor as the network threads reach it
/// (`net::register_acceptor` implements it; a trait here so the shared
/// state does not depend on the network layer).
///
/// # Thread safety
/// Called from every network thread; the implementation serializes the
/// steps of one key itself.
pub trait RegisterPort: Send + Sync {
    /// A register Ask frame arrived on thread `ctx.index` for `to`; its
    /// reply is delivered to that thread's inbox once the step's state is
    /// durable. `Err`: the frame does not decode (the caller closes the
    /// connection).
    fn ask(&self, ctx: &NetContext, to: RegisterTo, frame: &[u8]) -> Result<(), String>;
    /// A write of step `step` finished (`Target::Register`).
    fn written(&self, ctx: &NetContext, step: u64, result: Result<(), String>);
}

/// A finished write, on its way back to the thread that asked for it.
#[derive(Debug)]
pub struct Completion {
    /// Who waits for it.
    pub target: Target,
    /// Durable, or why not.
    pub result: Result<(), String>,
    /// The engine refused the batch as invalid (400), not for load or failure (503).
    pub invalid: bool,
    /// A conditional write refused: its key changed since it was read
    /// (the read-modify-write reads again and retries).
    pub conflict: bool,
}

/// The protocol a listener speaks; an accepted connection keeps its listener's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (`--listen`).
    Http,
    /// RESP (`--resp-listen`).
    Resp,
}

#[derive(Default)]
struct InboxItems {
    conns: Vec<(mio::net::TcpStream, Protocol)>,
    completions: Vec<Completion>,
    register: Vec<RegisterDelivery>,
}

/// What other threads hand to one network thread.
pub struct Inbox {
    items: Mutex<InboxItems>,
    waker: mio::Waker,
}

impl Inbox {
    /// An inbox whose pushes wake `waker`.
    pub fn new(waker: mio::Waker) -> Self {
        Inbox {
            items: Mutex::new(InboxItems::default()),
            waker,
        }
    }

    fn push_with(&self, f: impl FnOnce(&mut InboxItems)) {
        let mut items = lock(&self.items);
        let was_empty =
            items.conns.is_empty() && items.completions.is_empty() && items.register.is_empty();
        f(&mut items);
        drop(items);
        if was_empty {
            // A failed wake-up leaves the item for the loop's next periodic tick.
            let _ = self.waker.wake();
        }
    }

    /// Queues a completion.
    pub fn push(&self, c: Completion) {
        self.push_with(|items| items.completions.push(c));
    }

    /// Queues a register acceptor's reply.
    pub fn push_register(&self, d: RegisterDelivery) {
        self.push_with(|items| items.register.push(d));
    }

    /// Takes the register replies queued.
    pub(crate) fn take_register(&self, out: &mut Vec<RegisterDelivery>) {
        std::mem::swap(out, &mut lock(&self.items).register);
    }

    /// Queues an accepted connection.
    pub fn push_conn(&self, s: mio::net::TcpStream, protocol: Protocol) {
        self.push_with(|items| items.conns.push((s, protocol)));
    }

    /// Takes everything queued.
    pub(crate) fn take(
        &self,
        conns: &mut Vec<(mio::net::TcpStream, Protocol)>,
        completions: &mut Vec<Completion>,
    ) {
        let mut items = lock(&self.items);
        std::mem::swap(conns, &mut items.conns);
        std::mem::swap(completions, &mut items.completions);
    }
}

/// A cheap handle engine callbacks use to reach a network thread.
#[derive(Clone)]
pub struct CompletionSender(Arc<Inbox>);

impl CompletionSender {
    /// Queues a completion and wakes the thread if needed.
    pub fn push(&self, c: Completion) {
        self.0.push(c);
    }

    /// An engine callback that reports a write's outcome to `target`.
    pub fn callback(&self, target: Target) -> ataman_engine::WriteCallback {
        let inbox = self.clone();
        Box::new(move |result: ataman_engine::Result<u64>| {
            inbox.push(Completion {
                target,
                invalid: matches!(result, Err(ataman_engine::Error::InvalidArgument(_))),
                conflict: matches!(result, Err(ataman_engine::Error::Conflict)),
                result: result.map(|_| ()).map_err(|e| e.to_string()),
            });
        })
    }
}

/// What every network thread shares.
pub struct NodeShared {
    /// The engine.
    pub db: Arc<Db>,
    /// Write timestamps.
    pub hlc: Hlc,
    /// Configuration.
    pub config: NodeConfig,
    /// Request metrics.
    pub metrics: NodeMetrics,
    /// Open client connections, all threads (every accepted connection
    /// until it is upgraded to the peer protocol or handed to the sync thread).
    pub connections: AtomicUsize,
    /// Open peer connections to this node (upgraded; descriptors reserved
    /// for them, see [`crate::descriptors`]).
    pub peer_connections: AtomicUsize,
    /// Client connections at most (`descriptors::Budget::cap`); a
    /// connection accepted past it is closed at once. The main thread
    /// lowers it as the engines' SSTables grow.
    pub connections_cap: AtomicUsize,
    /// Set on SIGTERM / SIGINT.
    pub shutting_down: AtomicBool,
    /// Each thread's inbox.
    pub inboxes: Vec<Arc<Inbox>>,
    /// The layout the node started with (`--cluster`, or the stored
    /// layout's members). Only `GET /v0/layout` still reads it; everything
    /// that knows about replicas follows [`NodeShared::placement`].
    pub topology: Topology,
    /// The live layouts and the acceptor (`None` for a single node, which
    /// keeps no layout).
    pub membership: Option<Arc<crate::cluster::membership::Membership>>,
    /// The live placement, following `membership` (see [`LivePlacement`]).
    pub placement: LivePlacement,
    /// The placement each network thread uses, for the transition driver.
    pub transition: Arc<crate::cluster::transition_state::TransitionShared>,
    /// Writes peers missed, kept for them.
    pub hints: Arc<HintStore>,
    /// The node's checkpoints (`crate::backup`).
    pub backups: Arc<crate::backup::Backups>,
    /// Each node's link status as this node sees it (index: the node
    /// table's; [`crate::hlc::NODES_MAX`] of them, so a node the table
    /// gains has one at once; only the placement's `len()` first are used).
    pub peers: Vec<PeerStatus>,
    /// When the engine acknowledges a client's or a peer's write:
    /// `Complete` (after the WAL made it durable), except under the
    /// `--debug-planted-bug ack-before-wal` test hook.
    pub write_durability: ataman_engine::Durability,
    /// Anti-entropy: rounds, session places, the sync thread's hand-off channel.
    pub antientropy: crate::antientropy::AntiEntropy,
    /// Refilling after a wipe (`--refill`): reads refused until a round with every peer completed.
    pub refill: crate::refill::Refill,
    /// Client tokens, the cluster secret, refusals (docs/SECURITY.md).
    pub auth: crate::auth::Auth,
    /// Cluster ranges: the bound on range threads, and counters.
    pub ranges: crate::range::Ranges,
    /// The consensus register's acceptor (`None` in unit tests that build
    /// a node by hand: register Asks are then refused).
    pub register: Option<Arc<dyn RegisterPort>>,
    /// TLS (`--tls-cert`): the listener's and the peer links' configurations.
    pub tls: Option<crate::tls::NodeTls>,
}

impl NodeShared {
    /// True once shutdown started.
    pub fn stopping(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// The current placement (rebuilt first if the membership changed).
    pub fn placement(&self) -> Arc<Placement> {
        self.placement.get()
    }

    /// Link statuses for `peers`: one per possible node index, node
    /// `self_index` marked as this node.
    pub fn peer_statuses(self_index: usize) -> Vec<PeerStatus> {
        (0..crate::hlc::NODES_MAX)
            .map(|i| {
                PeerStatus::new(if i == self_index {
                    crate::peer::link::LinkState::Myself
                } else {
                    crate::peer::link::LinkState::Idle
                })
            })
            .collect()
    }

    /// What a cluster range's thread uses of the node.
    pub fn range_node(&self) -> crate::range::source::Node<'_> {
        crate::range::source::Node {
            db: &self.db,
            placement: &self.placement,
            peers: &self.peers,
            config: &self.config,
            refill: &self.refill,
            ranges: &self.ranges,
            tls: self.tls.as_ref(),
            secret: self.auth.secret.as_ref(),
        }
    }

    /// What anti-entropy's threads use of the node.
    pub fn antientropy_node(&self) -> crate::antientropy::Node<'_> {
        crate::antientropy::Node {
            db: &self.db,
            hlc: &self.hlc,
            config: &self.config,
            topology: &self.topology,
            placement: &self.placement,
            antientropy: &self.antientropy,
            refill: &self.refill,
            tls: self.tls.as_ref(),
            shutting_down: &self.shutting_down,
            secret: self.auth.secret.as_ref(),
        }
    }
}

/// What one network thread's code needs (shared state plus its own inbox).
pub struct NetContext {
    /// Shared node state (clock, metrics, counters).
    pub shared: Arc<NodeShared>,
    /// The engine (from `shared`).
    pub db: Arc<Db>,
    /// Configuration (from `shared`).
    pub config: NodeConfig,
    /// Routing limits (`from`'s bound and default follow the placement).
    pub route_config: std::cell::Cell<RouteConfig>,
    /// The placement this thread works with, refreshed once per loop
    /// iteration ([`NetContext::refresh_placement`]).
    pub placement: std::cell::RefCell<Arc<Placement>>,
    /// This thread's completion handle.
    pub completions: CompletionSender,
    /// Writes parsed in this loop iteration, handed to the engine together.
    pub pending_writes: std::cell::RefCell<Vec<ataman_engine::Submission>>,
    /// The thread's index.
    pub index: usize,
    /// The loop's clock: read once when `poll` returns and used for every
    /// connection's activity and request-start times in that iteration
    /// (the idle and request timeouts are coarse), instead of one clock
    /// read per socket read and write.
    pub now: std::cell::Cell<std::time::Instant>,
    /// Which requests this thread samples for the hot keys
    /// ([`crate::hotkeys::Gate`]).
    pub hot_gate: std::cell::Cell<crate::hotkeys::Gate>,
    /// This thread's in-flight read-modify-writes, per key
    /// ([`crate::rmw_chain`]).
    pub rmw_chains: std::cell::RefCell<crate::rmw_chain::Chains>,
    /// Read-modify-writes parsed in this loop iteration for the consensus
    /// register (started with the replicated requests).
    pub register_starts: std::cell::RefCell<Vec<RegisterStart>>,
    /// The buffer a local GET copies its value into, given back once the
    /// answer is rendered ([`crate::value_spare`]).
    pub value_spare: crate::value_spare::ValueSpare,
}

impl NetContext {
    /// The context of network thread `index`.
    pub fn new(shared: Arc<NodeShared>, index: usize) -> Self {
        let placement = shared.placement();
        // The thread places with it (and fences older coordinators) from
        // its first request on.
        shared.transition.note_placement(index, placement.version());
        NetContext {
            db: Arc::clone(&shared.db),
            config: shared.config.clone(),
            route_config: std::cell::Cell::new(route_config(
                shared.config.key_bytes_max,
                &shared.placement(),
            )),
            placement: std::cell::RefCell::new(placement),
            completions: CompletionSender(Arc::clone(&shared.inboxes[index])),
            pending_writes: std::cell::RefCell::new(Vec::new()),
            index,
            shared,
            now: std::cell::Cell::new(std::time::Instant::now()),
            hot_gate: std::cell::Cell::new(crate::hotkeys::Gate::new(index as u64)),
            rmw_chains: std::cell::RefCell::new(Default::default()),
            register_starts: std::cell::RefCell::new(Vec::new()),
            value_spare: Default::default(),
        }
    }
}

/// Routing limits under `placement`: `from` at most the read version's
/// members, `R` by default.
fn route_config(key_bytes_max: usize, placement: &Placement) -> RouteConfig {
    RouteConfig {
        key_bytes_max,
        cluster_size: placement.read_members().len().max(1) as u32,
        from_default: placement.replication_factor().max(1) as u32,
    }
}

impl NetContext {
    /// Wakes this thread for the connection `token` of `generation`, so
    /// it looks at its front slot again (a range thread's batch or page, a
    /// job's answer): what a range or job thread calls once its result is
    /// queued.
    pub fn feed_wake(&self, token: usize, generation: u64) -> Box<dyn Fn() + Send> {
        let target = Target::Feed { token, generation };
        let inbox = Arc::clone(&self.shared.inboxes[self.index]);
        Box::new(move || {
            inbox.push(Completion {
                target,
                result: Ok(()),
                invalid: false,
                conflict: false,
            });
        })
    }

    /// This thread's placement.
    pub fn placement(&self) -> Arc<Placement> {
        Arc::clone(&self.placement.borrow())
    }

    /// Takes the node's current placement if it changed since the last
    /// call; true when it did (the caller grows its links).
    pub fn refresh_placement(&self) -> bool {
        let latest = self.shared.placement();
        if Arc::ptr_eq(&latest, &self.placement.borrow()) {
            return false;
        }
        self.route_config
            .set(route_config(self.config.key_bytes_max, &latest));
        let version = latest.version();
        // The clock stamps with this node's id in the live layouts (none:
        // joining or removed, it stamps nothing).
        self.shared
            .hlc
            .set_node(clock_node(&self.shared.config, &latest));
        *self.placement.borrow_mut() = latest;
        // From here on this thread places with `version` and its fence
        // (`net::fence`) refuses coordinators on older versions.
        self.shared.transition.note_placement(self.index, version);
        true
    }

    /// What this thread's link to node `node` uses of the node.
    pub fn link_env(&self, node: usize) -> LinkEnv<'_> {
        LinkEnv {
            status: &self.shared.peers[node],
            self_url: self.shared.placement.self_url(),
            batch_frames: &self.shared.metrics.peer_batch_frames,
            silence_timeout: self.config.replication_timeout,
            secret: self.shared.auth.secret.as_ref(),
            tls: self.shared.tls.as_ref(),
            layout_version: self.placement.borrow().version(),
            resolve_once: self.config.planted_bug
                == Some(crate::config::PlantedBug::PeerAddressResolvedOnce),
        }
    }
}

/// The node id this node's clock stamps with under `placement`: its id in
/// the live layouts, none while it is a member of none (`crate::hlc`). The
/// planted bug `joined-takes-id-zero` gives a node started with `--join`
/// id 0 once it has one.
pub fn clock_node(config: &NodeConfig, placement: &Placement) -> Option<u16> {
    let id = placement.self_id();
    match config.planted_bug {
        Some(crate::config::PlantedBug::JoinedTakesIdZero) if config.join.is_some() => {
            id.map(|_| 0)
        }
        _ => id,
    }
}
