//! The network thread's side of replication: the one adapter between the
//! sans-I/O [`super::driver`] and the thread's sockets, engine,
//! clock, hint store and metrics.
//!
//! [`ReplicationIo`] owns the thread's links to every peer and the
//! driver. The event loop hands it client requests, link readiness, local
//! write completions and ticks; it turns each into a driver event, then
//! carries out every action the driver queued: frames to peers through
//! the links, reads and writes of the local engine ([`super::local`]),
//! answers for the connections, hints kept and removed, counters. What a
//! link reports (an answer, a refused send, a failure when it goes down or
//! a request expires) goes back to the driver as the answer of the waiter
//! it names. Nothing here decides what to do next: the driver does.
//!
//! # Threads
//! A replicated request lives on the network thread that parsed it, from
//! start to answer: its local replica goes through the engine (writes via
//! tx, the completion comes back through the thread's inbox; reads on the
//! spot), its remote replicas through this thread's links. No lock is
//! taken on the request path except the engine's hand-off. Thread 0 also
//! delivers hints.

use super::coordinator::{Decision, ReplicaAnswer, ReplicaOp};
use super::driver::{
    self, Action, COORDINATIONS_MAX, DriverConfig, PeerRequest, Replicator, Waiter,
};
use super::local::{local_read, local_write};
use crate::peer::frame::Message;
use crate::peer::link::{LinkWaiter, PeerLink, PeerReply};
use crate::slowlog::StageMarks;
use crate::state::{NetContext, Target};
use mio::{Registry, Token};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Tokens from here on are peer links (`LINK_TOKEN_BASE + node`).
pub const LINK_TOKEN_BASE: usize = usize::MAX / 2;

/// Where a replicated request's answer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyTo {
    /// The connection's token.
    pub token: usize,
    /// The connection's generation.
    pub generation: u64,
    /// The request's answer slot.
    pub slot: u64,
}

/// A request the connection handed over.
#[derive(Debug)]
pub struct Request {
    /// Where the answer goes.
    pub reply_to: ReplyTo,
    /// The key.
    pub key: Vec<u8>,
    /// Read, or write this version.
    pub kind: ReplicaOp,
    /// Replicas that must answer.
    pub ack: usize,
    /// Replicas asked.
    pub from: usize,
}

/// A decided answer, for the event loop to put in its slot (`Err`: 503),
/// with its stages for the slow log (`None` while the slow log is off).
pub type Reply = (ReplyTo, Result<Decision, String>, Option<StageMarks>);

impl LinkWaiter for Waiter {
    fn is_client_request(&self) -> bool {
        matches!(self, Waiter::Coordination { .. })
    }
}

/// One network thread's replication: the driver and the links it sends through.
pub struct ReplicationIo {
    driver: Replicator<ReplyTo>,
    links: Vec<Option<PeerLink<Waiter>>>,
    /// The driver's clock counts milliseconds from here.
    epoch: Instant,
    replies: Vec<Reply>,
    outcomes: Vec<(Waiter, PeerReply)>,
    delivers_hints: bool,
    rehoming: super::rehome::Rehoming,
    /// Client requests' replicas a peer fenced (it knows a newer layout
    /// version than this thread placed them with), with when: each is
    /// asked again once this thread places with a newer version
    /// ([`ReplicationIo::redial_stale_links`]), or failed after the
    /// replication timeout ([`ReplicationIo::tick`]). At most one entry
    /// per replica of a request in flight: bounded by the driver's table.
    fenced: Vec<(usize, Waiter, Instant)>,
    /// The slow log's marks of the client requests not answered yet
    /// (taken with their answer): at most one per request in the
    /// driver's table, so at most [`COORDINATIONS_MAX`]; none while the
    /// slow log is off.
    marks: HashMap<ReplyTo, StageMarks>,
    /// The consensus register's operations this thread coordinates
    /// (`super::register_io`).
    register: super::register_ops::RegisterOps<ReplyTo>,
    /// Their ends, for the connections.
    register_done: Vec<register_io::RegisterDone>,
}

impl ReplicationIo {
    /// The replication of network thread `ctx.index`: a (not yet
    /// connected) link to every other node of the placement's table, an
    /// idle driver.
    pub fn new(ctx: &NetContext) -> Self {
        let placement = ctx.placement();
        let config = DriverConfig {
            self_index: placement.self_index(),
            nodes: placement.len(),
            timeout_ms: u64::try_from(ctx.config.replication_timeout.as_millis())
                .unwrap_or(u64::MAX),
            planted_older_repair: ctx.config.planted_bug
                == Some(crate::config::PlantedBug::ReadRepairWritesOlder),
        };
        let mut io = ReplicationIo {
            driver: Replicator::new(config),
            links: Vec::new(),
            epoch: Instant::now(),
            replies: Vec::new(),
            outcomes: Vec::new(),
            delivers_hints: ctx.index == 0,
            rehoming: super::rehome::Rehoming::default(),
            fenced: Vec::new(),
            marks: HashMap::new(),
            register: super::register_ops::RegisterOps::new(
                crate::state::clock_node(&ctx.config, &placement).unwrap_or(0),
                ctx.config.replication_timeout,
                0x5EED_0000 ^ ctx.index as u64 ^ crate::hlc::wall_ms(),
            ),
            register_done: Vec::new(),
        };
        io.grow_links(ctx);
        io
    }

    /// Gives every node the placement's table gained a (not yet
    /// connected) link, and the driver its per-node state. Indices never
    /// move, so existing links stay. Called when the thread's placement
    /// changed (`NetContext::refresh_placement`).
    pub fn grow_links(&mut self, ctx: &NetContext) {
        let placement = ctx.placement();
        let nodes = placement.len().min(crate::hlc::NODES_MAX);
        while self.links.len() < nodes {
            let node = self.links.len();
            self.links.push((node != placement.self_index()).then(|| {
                PeerLink::new(
                    placement.url(node).to_owned(),
                    placement.dial(node),
                    Token(LINK_TOKEN_BASE + node),
                    ctx.config.peer_inflight_max,
                )
            }));
        }
        self.driver.grow_nodes(nodes);
    }

    /// Links, by node index (tests).
    pub fn links_len(&self) -> usize {
        self.links.len()
    }

    /// The node a token's link leads to, if the token is a link's.
    pub fn link_of(token: Token) -> Option<usize> {
        token.0.checked_sub(LINK_TOKEN_BASE)
    }

    /// Answers decided since the last call.
    pub fn take_replies(&mut self) -> Vec<Reply> {
        std::mem::take(&mut self.replies)
    }

    /// Replicated requests in flight.
    pub fn live(&self) -> usize {
        self.driver.live()
    }

    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    /// Starts requests on all their replicas at once.
    pub fn start(&mut self, ctx: &NetContext, registry: &Registry, requests: Vec<Request>) {
        let now = Instant::now();
        let now_ms = self.ms(now);
        let placement = ctx.placement();
        let marking = ctx.shared.metrics.slowlog.threshold_us() >= 0;
        for request in requests {
            if marking && self.marks.len() < COORDINATIONS_MAX {
                self.marks.insert(request.reply_to, StageMarks::new(now));
            }
            match placed_request(&placement, request) {
                Ok(request) => {
                    if !request.sets.is_empty() {
                        ctx.shared
                            .metrics
                            .layout_writes_both_sets
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    self.driver.start(now_ms, request);
                }
                Err((to, why)) => {
                    self.marks.remove(&to);
                    self.replies.push((to, Err(why), None));
                }
            }
            self.drive(ctx, registry);
        }
    }

    /// The local replica of request `coordination` finished its write.
    pub fn on_local_write(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        coordination: usize,
        generation: u64,
        position: usize,
        result: Result<(), String>,
    ) {
        let outcome = match result {
            Ok(()) => ReplicaAnswer::Written,
            Err(e) => ReplicaAnswer::Failed(format!("local replica: {e}")),
        };
        let waiter = Waiter::Coordination {
            index: coordination,
            generation,
            position,
        };
        let me = ctx.placement().self_index();
        self.answer(ctx, me, waiter, outcome);
        self.drive(ctx, registry);
    }

    /// Feeds the driver `node`'s answer to `waiter` (what it leads to is
    /// queued for [`ReplicationIo::drive`]).
    fn answer(&mut self, ctx: &NetContext, node: usize, waiter: Waiter, outcome: ReplicaAnswer) {
        if let Waiter::Coordination {
            index, generation, ..
        } = waiter
            && !self.marks.is_empty()
            && let Some(to) = self.driver.reply_to_of(index, generation)
            && let Some(marks) = self.marks.get_mut(&to)
        {
            marks.answer(node, Instant::now());
        }
        let hlc = &ctx.shared.hlc;
        let mut stamp = |above: u64| {
            hlc.observe(above);
            hlc.now().map_err(|e| e.to_string())
        };
        self.driver.on_answer(node, waiter, outcome, &mut stamp);
    }

    /// Carries out every action the driver queued, and those they lead to
    /// (a local read or a refused send is answered at once).
    fn drive(&mut self, ctx: &NetContext, registry: &Registry) {
        while let Some(action) = self.driver.next_action() {
            self.carry_out(ctx, registry, action);
        }
    }

    fn carry_out(&mut self, ctx: &NetContext, registry: &Registry, action: Action<ReplyTo>) {
        let shared = &ctx.shared;
        match action {
            Action::Send {
                node,
                waiter,
                request,
                deadline_ms,
            } => self.send(ctx, registry, node, waiter, request, deadline_ms),
            Action::ReadLocal { waiter, key } => {
                let outcome = local_read(ctx, &key);
                let me = ctx.placement().self_index();
                self.answer(ctx, me, waiter, outcome);
            }
            Action::WriteLocal {
                waiter: None,
                key,
                version,
            } => {
                // A read repair. The clock observes every version the
                // engine holds, so this node's own stamps stay above them.
                shared.metrics.read_repairs.fetch_add(1, Ordering::Relaxed);
                shared.hlc.observe(version.ts);
                local_write(ctx, &key, &version, Target::Nobody);
            }
            Action::WriteLocal {
                waiter: Some(waiter),
                key,
                version,
            } => {
                if shared.refill.active() {
                    // Refilling: the engine may not hold yet what the write
                    // must be stamped above, so the copy is kept but not counted.
                    local_write(ctx, &key, &version, Target::Nobody);
                    let why = format!("local replica: {}", crate::refill::WRITE_NOT_COUNTED);
                    let me = ctx.placement().self_index();
                    self.answer(ctx, me, waiter, ReplicaAnswer::Failed(why));
                } else if let Waiter::Coordination {
                    index,
                    generation,
                    position,
                } = waiter
                {
                    let target = Target::Replica {
                        coordination: index,
                        generation,
                        position,
                    };
                    local_write(ctx, &key, &version, target);
                }
            }
            Action::Reply { to, answer } => {
                let marks = self.marks.remove(&to);
                self.replies.push((to, answer, marks));
            }
            Action::Restamped { .. } => {
                shared
                    .metrics
                    .writes_restamped
                    .fetch_add(1, Ordering::Relaxed);
            }
            Action::RestampsExhausted => {
                shared
                    .metrics
                    .writes_restamp_exhausted
                    .fetch_add(1, Ordering::Relaxed);
            }
            Action::KeepHint { node, key, version } => {
                let placement = ctx.placement();
                let url = placement.url(node);
                if let Err(e) = shared.hints.add_expiring(
                    url,
                    &key,
                    version.ts,
                    version.value.as_deref(),
                    version.deadline_ms,
                ) {
                    shared.metrics.hints_refused.fetch_add(1, Ordering::Relaxed);
                    log_hint_refusal(url, &e.to_string());
                }
            }
            Action::RemoveHints { node, seqs } => {
                shared.hints.remove(ctx.placement().url(node), &seqs);
                if let Some(peer) = shared.peers.get(node) {
                    peer.hints_delivered
                        .fetch_add(seqs.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }

    /// Queues `request` on `node`'s link; a send refused at once is
    /// answered at once (a repair that cannot be sent is dropped: the next
    /// read or anti-entropy finds the difference again).
    fn send(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        node: usize,
        waiter: Waiter,
        request: PeerRequest,
        deadline_ms: u64,
    ) {
        if waiter == Waiter::Repair {
            ctx.shared
                .metrics
                .read_repairs
                .fetch_add(1, Ordering::Relaxed);
            // A table past `NODES_MAX` indices has no status (nor link) for the rest.
            if let Some(peer) = ctx.shared.peers.get(node) {
                peer.repairs.fetch_add(1, Ordering::Relaxed);
            }
        }
        let deadline = self.epoch + Duration::from_millis(deadline_ms);
        let now = Instant::now();
        if let Some(link) = self.links.get_mut(node).and_then(Option::as_mut)
            && let Some(why) = link.fenced(&ctx.link_env(node), now)
        {
            self.on_fenced(ctx, node, waiter, why, now);
            return;
        }
        let sent = match self.links.get_mut(node).and_then(Option::as_mut) {
            Some(link) => link.send(
                &ctx.link_env(node),
                registry,
                Instant::now(),
                deadline,
                waiter,
                |id| match request {
                    PeerRequest::Read { key } => Message::Read { id, key },
                    PeerRequest::Write { key, version } => Message::Write { id, key, version },
                },
            ),
            None => Err(format!("no link to node {node}")),
        };
        if let Err(why) = sent
            && waiter != Waiter::Repair
        {
            self.answer(ctx, node, waiter, ReplicaAnswer::Failed(why));
        }
    }

    /// After this thread's placement moved to a newer layout version:
    /// every link whose connection named an older one dials again
    /// (`PeerLink::redial_if_older`; the fence would refuse it), and every
    /// replica a peer fenced is asked again, on the new connection.
    pub fn redial_stale_links(&mut self, ctx: &NetContext, registry: &Registry) {
        let mut outcomes = std::mem::take(&mut self.outcomes);
        for node in 0..self.links.len() {
            if let Some(Some(link)) = self.links.get_mut(node) {
                link.redial_if_older(&ctx.link_env(node), registry, &mut outcomes);
            }
            if !outcomes.is_empty() {
                self.dispatch(ctx, registry, node, &mut outcomes);
            }
        }
        self.outcomes = outcomes;
        for (node, waiter, _) in std::mem::take(&mut self.fenced) {
            if !self.driver.resend(waiter) {
                let why = format!(
                    "{}: fenced (a newer layout version), and not asked again",
                    ctx.placement().url(node)
                );
                self.answer(ctx, node, waiter, ReplicaAnswer::Failed(why));
            }
            self.drive(ctx, registry);
        }
    }

    /// A peer fenced `waiter`'s request (it knows a newer layout version
    /// than this thread placed it with). A client request's replica waits
    /// for this thread's placement to move on (a node learns a committed
    /// version within milliseconds of its peers), then is asked again
    /// under the same deadline (`Replicator::resend`, which bounds how
    /// often); anything else fails now (a hint or a repair is tried
    /// again later anyway).
    fn on_fenced(
        &mut self,
        ctx: &NetContext,
        node: usize,
        waiter: Waiter,
        why: String,
        now: Instant,
    ) {
        if waiter.is_client_request() {
            ctx.shared
                .metrics
                .peer_requests_fenced
                .fetch_add(1, Ordering::Relaxed);
            self.fenced.push((node, waiter, now));
        } else {
            self.answer(ctx, node, waiter, ReplicaAnswer::Failed(why));
        }
    }

    /// Readiness of node `node`'s link.
    pub fn on_link_event(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        node: usize,
        readable: bool,
        writable: bool,
    ) {
        let mut outcomes = std::mem::take(&mut self.outcomes);
        if let Some(Some(link)) = self.links.get_mut(node) {
            link.on_event(
                &ctx.link_env(node),
                registry,
                readable,
                writable,
                &mut outcomes,
            );
        }
        self.dispatch(ctx, registry, node, &mut outcomes);
        self.outcomes = outcomes;
    }

    /// Hands what node `node`'s link reported to the driver.
    fn dispatch(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        node: usize,
        outcomes: &mut Vec<(Waiter, PeerReply)>,
    ) {
        for (waiter, outcome) in outcomes.drain(..) {
            if let Waiter::Register { op } = waiter {
                self.register_peer(ctx, registry, node, op, outcome);
                continue;
            }
            let outcome = match outcome {
                PeerReply::Written => ReplicaAnswer::Written,
                // A version stamped too far ahead is not trusted (the same
                // bound as a peer's write): re-stamping above it would
                // carry a broken clock to this node. (A hint answered so
                // is needed no more all the same.)
                PeerReply::HoldsNewer(ts)
                    if waiter.is_client_request() && !crate::hlc::acceptable_from_peer(ts) =>
                {
                    ReplicaAnswer::Failed(format!(
                        "{}: holds a version stamped {ts}, more than {} ms ahead of this node's clock",
                        ctx.placement().url(node),
                        crate::hlc::PEER_CLOCK_AHEAD_MS_MAX
                    ))
                }
                PeerReply::HoldsNewer(ts) => ReplicaAnswer::HoldsNewer(ts),
                PeerReply::Read(v) => ReplicaAnswer::Read(v),
                PeerReply::Failed(why) => ReplicaAnswer::Failed(why),
                // This node learned a newer layout version; the next
                // connection names it.
                PeerReply::Redialed(_) if self.driver.resend(waiter) => {
                    self.drive(ctx, registry);
                    continue;
                }
                PeerReply::Redialed(why) => ReplicaAnswer::Failed(why),
                PeerReply::Fenced(why) => {
                    self.on_fenced(ctx, node, waiter, why, Instant::now());
                    continue;
                }
                PeerReply::Register(_) => ReplicaAnswer::Failed(format!(
                    "{}: a register Reply to a replication request",
                    ctx.placement().url(node)
                )),
            };
            self.answer(ctx, node, waiter, outcome);
            self.drive(ctx, registry);
        }
    }

    /// Writes everything queued on every link, one write per link. A
    /// failed link's outcomes can queue read repairs on links already
    /// flushed, so a second pass follows when anything was dispatched.
    pub fn flush(&mut self, ctx: &NetContext, registry: &Registry) {
        let mut outcomes = std::mem::take(&mut self.outcomes);
        for _pass in 0..2 {
            let mut dispatched = false;
            for node in 0..self.links.len() {
                if let Some(link) = self.links[node].as_mut() {
                    link.flush(&ctx.link_env(node), registry, &mut outcomes);
                }
                if !outcomes.is_empty() {
                    dispatched = true;
                    self.dispatch(ctx, registry, node, &mut outcomes);
                }
            }
            if !dispatched {
                break;
            }
        }
        self.outcomes = outcomes;
    }

    /// Shutdown: every request still in flight ends now (504 if unanswered),
    /// and writes keep their hints for replicas that did not acknowledge, so
    /// a write answered 201 before the stop still reaches them later.
    pub fn expire_all(&mut self, ctx: &NetContext, registry: &Registry) {
        self.driver.expire_all("the node is stopping");
        self.drive(ctx, registry);
    }

    /// Periodic work: deadlines of requests and links, reconnects, hint delivery.
    pub fn tick(&mut self, ctx: &NetContext, registry: &Registry) {
        let now = Instant::now();
        self.driver.tick(self.ms(now));
        self.drive(ctx, registry);
        // Fenced replicas whose request outlived its deadline while this
        // thread's placement stayed: failed (their requests have ended).
        let timeout = ctx.config.replication_timeout;
        let (expired, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.fenced)
            .into_iter()
            .partition(|(_, _, at)| now.duration_since(*at) >= timeout);
        self.fenced = waiting;
        for (node, waiter, _) in expired {
            let why = format!(
                "{}: fenced (a newer layout version) until the request's deadline",
                ctx.placement().url(node)
            );
            self.answer(ctx, node, waiter, ReplicaAnswer::Failed(why));
            self.drive(ctx, registry);
        }
        let mut outcomes = std::mem::take(&mut self.outcomes);
        for node in 0..self.links.len() {
            if let Some(link) = self.links[node].as_mut() {
                link.tick(&ctx.link_env(node), registry, now, &mut outcomes);
            }
            self.dispatch(ctx, registry, node, &mut outcomes);
        }
        self.outcomes = outcomes;
        self.register_tick(ctx, registry);
        if self.delivers_hints {
            self.deliver_hints(ctx, registry, now);
        }
    }

    /// Starts a round of hint delivery to every node that has hints, is not
    /// in back-off, and has no round in flight.
    fn deliver_hints(&mut self, ctx: &NetContext, registry: &Registry, now: Instant) {
        let placement = ctx.placement();
        let now_ms = self.ms(now);
        for node in 0..self.links.len() {
            let Some(link) = self.links[node].as_ref() else {
                continue;
            };
            if !placement.is_live_member(node) {
                // It left every live layout: its hints go to the keys'
                // current replicas instead (`super::rehome`).
                super::rehome::rehome_hints(ctx, &placement, node, &self.rehoming);
                continue;
            }
            let Some(query) = self.driver.hint_round_due(node) else {
                continue;
            };
            let url = placement.url(node);
            if ctx.shared.hints.count(url).0 == 0 || !link.may_try(now) {
                continue;
            }
            let hints = match ctx.shared.hints.pending(url, query.after, query.max) {
                Ok(h) => h,
                Err(e) => {
                    log_hint_refusal(url, &e.to_string());
                    continue;
                }
            };
            let hints = hints
                .into_iter()
                .map(|h| driver::Hint {
                    seq: h.seq,
                    key: h.key,
                    version: crate::peer::frame::Stamped {
                        ts: h.ts,
                        value: h.value,
                        deadline_ms: h.deadline_ms,
                    },
                })
                .collect();
            self.driver.start_hint_round(now_ms, node, hints);
            self.drive(ctx, registry);
        }
    }
}

/// A client's request placed on the current layouts: its replicas (a
/// write: the union of every live version's first `from`, `ack` needed in
/// each; a read: the read version's), or the 503 of a request whose `ack`
/// the placement can no longer give (the layout shrank since it was routed).
fn placed_request(
    placement: &crate::cluster::live::Placement,
    request: Request,
) -> Result<driver::Request<ReplyTo>, (ReplyTo, String)> {
    let placed = match request.kind {
        ReplicaOp::Read => placement.read(&request.key, request.from),
        ReplicaOp::Write(_) => placement.write(&request.key, request.from),
    };
    if let Some(&past) = placed
        .replicas
        .iter()
        .find(|&&r| r >= crate::hlc::NODES_MAX)
    {
        // The table only grows; past `NODES_MAX` indices a node has no link.
        let why = format!(
            "{} has node index {past}, past {}: restart this node to renumber",
            placement.url(past),
            crate::hlc::NODES_MAX
        );
        return Err((request.reply_to, why));
    }
    if request.ack == 0 || request.ack > placed.replicas.len() {
        let why = format!(
            "ack={} of {} replicas under layout version {}: the layout changed; retry",
            request.ack,
            placed.replicas.len(),
            placement.version()
        );
        return Err((request.reply_to, why));
    }
    Ok(driver::Request {
        reply_to: request.reply_to,
        key: request.key,
        kind: request.kind,
        ack: request.ack,
        replicas: placed.replicas,
        sets: if placed.sets.len() > 1 {
            placed.sets
        } else {
            Vec::new()
        },
    })
}

pub(crate) fn log_hint_refusal(url: &str, why: &str) {
    // Rate-limited: one line per second at most.
    static LAST_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let last = LAST_MS.load(Ordering::Relaxed);
    if now_ms >= last + 1000
        && LAST_MS
            .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            peer = %url,
            reason = %why,
            "hint not kept: the peer misses this write until anti-entropy repairs it"
        );
    }
}

#[path = "register_io.rs"]
mod register_io;
pub use register_io::{REFUSED_IN_TRANSITION, RegisterDone};

#[cfg(test)]
#[path = "placement_tests.rs"]
mod placement_tests;
