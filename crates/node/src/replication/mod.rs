//! Replication as one network thread does it: coordinating requests that
//! name `from` replicas, over the local engine and the peer links.
//!
//! - [`coordinator`]: the rules of one request (quorum, newest wins, read
//!   repair and hints after the answer), pure logic.
//! - [`status`]: what the node knows of each peer, `/v0/cluster`, `/metrics`.
//! - this file: the [`Replicator`], one per network thread. It owns the
//!   thread's links to every peer and the table of requests in flight,
//!   starts requests on every replica at once, routes answers back, and
//!   expires what passed its deadline.
//!
//! # Threads
//! A replicated request lives on the network thread that parsed it, from
//! start to answer: its local replica goes through the engine (writes via
//! tx, the completion comes back through the thread's inbox; reads on the
//! spot), its remote replicas through this thread's links. No lock is
//! taken on the request path except the engine's hand-off. Thread 0 also
//! delivers hints.

pub mod coordinator;
pub mod status;

use crate::cluster::dial_address;
use crate::peer::frame::{Message, Version};
use crate::peer::link::{PeerLink, PeerReply, Waiter};
use crate::state::{NetContext, Target};
use ataman_engine::{Submission, WriteBatch};
use coordinator::{Aftermath, Coordination, Decision, Kind, Outcome};
use mio::{Registry, Token};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Replicated requests in flight on one network thread; more are 503.
pub const COORDINATIONS_MAX: usize = 65_536;
/// Hints sent to one peer per delivery round.
pub const HINT_BATCH_MAX: usize = 256;
/// Tokens from here on are peer links (`LINK_TOKEN_BASE + node`).
pub const LINK_TOKEN_BASE: usize = usize::MAX / 2;

/// Where a replicated request's answer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    pub kind: Kind,
    /// Replicas that must answer.
    pub ack: usize,
    /// Replicas asked.
    pub from: usize,
}

/// A decided answer, for the event loop to put in its slot (`Err`: 503).
pub type Reply = (ReplyTo, Result<Decision, String>);

struct Live {
    coordination: Coordination,
    reply_to: ReplyTo,
    key: Vec<u8>,
    replicas: Vec<usize>,
    deadline: Instant,
}

struct Entry {
    generation: u64,
    live: Option<Live>,
}

struct HintCursor {
    /// Every hint up to this seq was delivered (or is being retried from here).
    after: Option<u64>,
    /// Hints of the current round still unanswered.
    in_flight: usize,
    /// A hint of the current round failed: next round starts at `after` again.
    failed: bool,
    /// Highest seq sent in the current round.
    sent_max: Option<u64>,
    /// Seqs acknowledged in the current round (removed when the round ends).
    acked: Vec<u64>,
}

/// One network thread's replication state.
pub struct Replicator {
    links: Vec<Option<PeerLink>>,
    table: Vec<Entry>,
    free: Vec<usize>,
    live: usize,
    replies: Vec<Reply>,
    outcomes: Vec<(Waiter, PeerReply)>,
    hint_cursors: Vec<HintCursor>,
    delivers_hints: bool,
}

impl Replicator {
    /// The replicator of network thread `ctx.index`: a (not yet connected) link to every other node.
    pub fn new(ctx: &NetContext) -> Self {
        let topology = &ctx.shared.topology;
        let links = topology
            .nodes()
            .iter()
            .enumerate()
            .map(|(node, url)| {
                (node != topology.self_index()).then(|| {
                    let dial = ctx.config.peer_via[node]
                        .clone()
                        .unwrap_or_else(|| dial_address(url));
                    PeerLink::new(
                        url.clone(),
                        dial,
                        Token(LINK_TOKEN_BASE + node),
                        ctx.config.peer_inflight_max,
                    )
                })
            })
            .collect();
        Replicator {
            links,
            table: Vec::new(),
            free: Vec::new(),
            live: 0,
            replies: Vec::new(),
            outcomes: Vec::new(),
            hint_cursors: (0..topology.len())
                .map(|_| HintCursor {
                    after: None,
                    in_flight: 0,
                    failed: false,
                    sent_max: None,
                    acked: Vec::new(),
                })
                .collect(),
            delivers_hints: ctx.index == 0,
        }
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
        self.live
    }

    /// Starts requests on all their replicas at once.
    pub fn start(&mut self, ctx: &NetContext, registry: &Registry, requests: Vec<Request>) {
        let now = Instant::now();
        let deadline = now + ctx.config.replication_timeout;
        for request in requests {
            if self.live >= COORDINATIONS_MAX {
                self.replies.push((
                    request.reply_to,
                    Err(format!(
                        "{COORDINATIONS_MAX} replicated requests in flight on this thread; retry"
                    )),
                ));
                continue;
            }
            let replicas = ctx.shared.topology.replicas(&request.key, request.from);
            let coordination = Coordination::new(request.kind, request.ack, replicas.len());
            let index = match self.free.pop() {
                Some(i) => i,
                None => {
                    self.table.push(Entry {
                        generation: 0,
                        live: None,
                    });
                    self.table.len() - 1
                }
            };
            let entry = &mut self.table[index];
            entry.generation += 1;
            let generation = entry.generation;
            entry.live = Some(Live {
                coordination,
                reply_to: request.reply_to,
                key: request.key,
                replicas: replicas.clone(),
                deadline,
            });
            self.live += 1;
            for (position, &node) in replicas.iter().enumerate() {
                let outcome = self.ask(
                    ctx, registry, index, generation, position, node, deadline, now,
                );
                if let Some(outcome) = outcome {
                    self.record(ctx, registry, index, generation, position, outcome);
                }
            }
        }
    }

    /// Asks one replica; returns its outcome when known at once (a local
    /// read, a refused send).
    #[allow(clippy::too_many_arguments)]
    fn ask(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        index: usize,
        generation: u64,
        position: usize,
        node: usize,
        deadline: Instant,
        now: Instant,
    ) -> Option<Outcome> {
        let live = self.table[index].live.as_ref()?;
        let kind = live.coordination.kind().clone();
        if node == ctx.shared.topology.self_index() {
            return match kind {
                Kind::Read => Some(local_read(ctx, &live.key)),
                // Refilling: the engine may not hold yet what the write must
                // be stamped above, so the copy is kept but not counted.
                Kind::Write(version) if ctx.shared.refill.active() => {
                    local_write(ctx, &live.key, &version, Target::Nobody);
                    Some(Outcome::Failed(format!(
                        "local replica: {}",
                        crate::refill::WRITE_NOT_COUNTED
                    )))
                }
                Kind::Write(version) => {
                    let target = Target::Replica {
                        coordination: index,
                        generation,
                        position,
                    };
                    local_write(ctx, &live.key, &version, target);
                    None
                }
            };
        }
        let key = live.key.clone();
        let link = self.links[node].as_mut()?;
        let waiter = Waiter::Coordination {
            index,
            generation,
            position,
        };
        let sent = match kind {
            Kind::Read => link.send(&ctx.link_env(node), registry, now, deadline, waiter, |id| {
                Message::Read { id, key }
            }),
            Kind::Write(version) => {
                link.send(&ctx.link_env(node), registry, now, deadline, waiter, |id| {
                    Message::Write { id, key, version }
                })
            }
        };
        sent.err().map(Outcome::Failed)
    }

    fn record(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        index: usize,
        generation: u64,
        position: usize,
        outcome: Outcome,
    ) {
        let Some(entry) = self.table.get_mut(index) else {
            return;
        };
        if entry.generation != generation {
            return; // finished before this late answer came
        }
        let Some(live) = entry.live.as_mut() else {
            return;
        };
        match live.coordination.record(position, outcome) {
            Some(Decision::Restamp { above }) => {
                self.restamp(ctx, registry, index, above);
                return;
            }
            Some(decision) => {
                if matches!(decision, Decision::Failed(_)) && live.coordination.gave_up_restamping()
                {
                    ctx.shared
                        .metrics
                        .writes_restamp_exhausted
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.replies.push((live.reply_to, Ok(decision)));
            }
            None => {}
        }
        if live.coordination.settled() {
            self.finish(ctx, registry, index);
        }
    }

    /// A replica holds a version stamped `above`, newer than the unanswered
    /// write `index`: stamps the write above it and asks every replica again.
    /// Answers to the earlier round are dropped by the generation; replicas
    /// that stored the earlier stamp get the newer one over it.
    ///
    /// A clock that cannot stamp (its reservation is not durable) ends the
    /// request with 503 and the reason, without aftermath: nothing was
    /// acknowledged, and replicas that stored the earlier stamp keep it.
    fn restamp(&mut self, ctx: &NetContext, registry: &Registry, index: usize, above: u64) {
        ctx.shared.hlc.observe(above);
        let ts = match ctx.shared.hlc.now() {
            Ok(ts) => ts,
            Err(e) => {
                let entry = &mut self.table[index];
                entry.generation += 1; // answers to the earlier round are dropped
                if let Some(live) = entry.live.take() {
                    self.free.push(index);
                    self.live -= 1;
                    self.replies.push((live.reply_to, Err(e.to_string())));
                }
                return;
            }
        };
        ctx.shared
            .metrics
            .writes_restamped
            .fetch_add(1, Ordering::Relaxed);
        let entry = &mut self.table[index];
        entry.generation += 1;
        let generation = entry.generation;
        let Some(live) = entry.live.as_mut() else {
            return;
        };
        live.coordination = live.coordination.restamped(ts);
        let (replicas, deadline) = (live.replicas.clone(), live.deadline);
        let now = Instant::now();
        for (position, &node) in replicas.iter().enumerate() {
            let outcome = self.ask(
                ctx, registry, index, generation, position, node, deadline, now,
            );
            if let Some(outcome) = outcome {
                self.record(ctx, registry, index, generation, position, outcome);
            }
        }
    }

    /// Frees a settled request and carries out its aftermath.
    fn finish(&mut self, ctx: &NetContext, registry: &Registry, index: usize) {
        let Some(live) = self.table[index].live.take() else {
            return;
        };
        self.free.push(index);
        self.live -= 1;
        let Aftermath { repair, hint } = live.coordination.aftermath();
        let topology = &ctx.shared.topology;
        if let Some((version, stale)) = repair {
            let now = Instant::now();
            let deadline = now + ctx.config.replication_timeout;
            for position in stale {
                let node = live.replicas[position];
                ctx.shared
                    .metrics
                    .read_repairs
                    .fetch_add(1, Ordering::Relaxed);
                if node == topology.self_index() {
                    // The clock observes every version the engine holds,
                    // so this node's own stamps stay above them.
                    ctx.shared.hlc.observe(version.ts);
                    local_write(ctx, &live.key, &version, Target::Nobody);
                } else if let Some(link) = self.links[node].as_mut() {
                    ctx.shared.peers[node]
                        .repairs
                        .fetch_add(1, Ordering::Relaxed);
                    let (key, version) = (live.key.clone(), version.clone());
                    // A repair that cannot be sent is dropped: the next read
                    // or anti-entropy finds the difference again.
                    let _ = link.send(
                        &ctx.link_env(node),
                        registry,
                        now,
                        deadline,
                        Waiter::Repair,
                        |id| Message::Write { id, key, version },
                    );
                }
            }
        }
        if let Kind::Write(version) = live.coordination.kind() {
            for position in hint {
                let node = live.replicas[position];
                if node == topology.self_index() {
                    continue; // the local engine failed: nothing a hint could fix
                }
                let url = &topology.nodes()[node];
                if let Err(e) =
                    ctx.shared
                        .hints
                        .add(url, &live.key, version.ts, version.value.as_deref())
                {
                    ctx.shared
                        .metrics
                        .hints_refused
                        .fetch_add(1, Ordering::Relaxed);
                    log_hint_refusal(url, &e.to_string());
                }
            }
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
            Ok(()) => Outcome::Written,
            Err(e) => Outcome::Failed(format!("local replica: {e}")),
        };
        self.record(ctx, registry, coordination, generation, position, outcome);
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

    fn dispatch(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        node: usize,
        outcomes: &mut Vec<(Waiter, PeerReply)>,
    ) {
        for (waiter, outcome) in outcomes.drain(..) {
            match waiter {
                Waiter::Coordination {
                    index,
                    generation,
                    position,
                } => {
                    let outcome = match outcome {
                        PeerReply::Written => Outcome::Written,
                        // A version stamped too far ahead is not trusted
                        // (the same bound as a peer's write): re-stamping
                        // above it would carry a broken clock to this node.
                        PeerReply::HoldsNewer(ts) if !crate::hlc::acceptable_from_peer(ts) => {
                            Outcome::Failed(format!(
                                "{}: holds a version stamped {ts}, more than {} ms ahead of this node's clock",
                                ctx.shared.topology.nodes()[node],
                                crate::hlc::PEER_CLOCK_AHEAD_MS_MAX
                            ))
                        }
                        PeerReply::HoldsNewer(ts) => Outcome::HoldsNewer(ts),
                        PeerReply::Read(v) => Outcome::Read(v),
                        PeerReply::Failed(why) => Outcome::Failed(why),
                    };
                    self.record(ctx, registry, index, generation, position, outcome);
                }
                Waiter::Hint { seq } => {
                    let cursor = &mut self.hint_cursors[node];
                    cursor.in_flight = cursor.in_flight.saturating_sub(1);
                    match outcome {
                        // A peer holding a newer version needs this hint no more.
                        PeerReply::Written | PeerReply::HoldsNewer(_) => cursor.acked.push(seq),
                        _ => cursor.failed = true,
                    }
                    if cursor.in_flight == 0 {
                        self.end_hint_round(ctx, node);
                    }
                }
                Waiter::Repair => {}
            }
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
        for index in 0..self.table.len() {
            let Some(live) = self.table[index].live.as_mut() else {
                continue;
            };
            if let Some(decision) = live.coordination.expire("the node is stopping") {
                self.replies.push((live.reply_to, Ok(decision)));
            }
            self.finish(ctx, registry, index);
        }
    }

    /// Periodic work: deadlines of requests and links, reconnects, hint delivery.
    pub fn tick(&mut self, ctx: &NetContext, registry: &Registry) {
        let now = Instant::now();
        let why = format!("{} ms", ctx.config.replication_timeout.as_millis());
        for index in 0..self.table.len() {
            let Some(live) = self.table[index].live.as_mut() else {
                continue;
            };
            if live.deadline > now {
                continue;
            }
            if let Some(decision) = live.coordination.expire(&why) {
                self.replies.push((live.reply_to, Ok(decision)));
            }
            self.finish(ctx, registry, index);
        }
        let mut outcomes = std::mem::take(&mut self.outcomes);
        for node in 0..self.links.len() {
            if let Some(link) = self.links[node].as_mut() {
                link.tick(&ctx.link_env(node), registry, now, &mut outcomes);
            }
            self.dispatch(ctx, registry, node, &mut outcomes);
        }
        self.outcomes = outcomes;
        if self.delivers_hints {
            self.deliver_hints(ctx, registry, now);
        }
    }

    /// Starts a round of hint delivery to every node that has hints, is not
    /// in back-off, and has no round in flight.
    fn deliver_hints(&mut self, ctx: &NetContext, registry: &Registry, now: Instant) {
        let topology = &ctx.shared.topology;
        for node in 0..self.links.len() {
            let Some(link) = self.links[node].as_mut() else {
                continue;
            };
            let url = &topology.nodes()[node];
            let cursor = &mut self.hint_cursors[node];
            if cursor.in_flight > 0 || ctx.shared.hints.count(url).0 == 0 || !link.may_try(now) {
                continue;
            }
            let hints = match ctx.shared.hints.pending(url, cursor.after, HINT_BATCH_MAX) {
                Ok(h) => h,
                Err(e) => {
                    log_hint_refusal(url, &e.to_string());
                    continue;
                }
            };
            if hints.is_empty() {
                // Everything after the cursor was delivered; what is counted
                // pending is being removed. Start over from the beginning
                // next time in case an earlier round left gaps.
                cursor.after = None;
                continue;
            }
            let deadline = now + ctx.config.replication_timeout;
            cursor.failed = false;
            cursor.sent_max = None;
            for hint in hints {
                let seq = hint.seq;
                let version = Version {
                    ts: hint.ts,
                    value: hint.value,
                };
                let key = hint.key;
                match link.send(
                    &ctx.link_env(node),
                    registry,
                    now,
                    deadline,
                    Waiter::Hint { seq },
                    |id| Message::Write { id, key, version },
                ) {
                    Ok(()) => {
                        cursor.in_flight += 1;
                        cursor.sent_max = Some(seq);
                    }
                    Err(_) => {
                        cursor.failed = true;
                        break;
                    }
                }
            }
            if cursor.in_flight == 0 {
                self.end_hint_round(ctx, node);
            }
        }
    }

    /// A delivery round ended: remove what was acknowledged, move the cursor
    /// past it unless something failed (then the next round retries from it).
    fn end_hint_round(&mut self, ctx: &NetContext, node: usize) {
        let url = &ctx.shared.topology.nodes()[node];
        let cursor = &mut self.hint_cursors[node];
        let acked = std::mem::take(&mut cursor.acked);
        if !acked.is_empty() {
            ctx.shared.hints.remove(url, &acked);
            ctx.shared.peers[node]
                .hints_delivered
                .fetch_add(acked.len() as u64, Ordering::Relaxed);
        }
        if !cursor.failed && cursor.sent_max.is_some() {
            cursor.after = cursor.sent_max;
        }
        cursor.sent_max = None;
    }
}

fn local_read(ctx: &NetContext, key: &[u8]) -> Outcome {
    if ctx.shared.refill.active() {
        return Outcome::Failed(format!("local replica: {}", crate::refill::REFUSAL));
    }
    match ctx.db.get(key) {
        Ok(entry) => Outcome::Read(entry.map(|e| Version {
            ts: e.ts,
            value: e.value,
        })),
        Err(e) => Outcome::Failed(format!("local replica: read failed: {e}")),
    }
}

/// Queues a write of `version` to the local engine (handed over with the
/// loop iteration's other writes); `target` hears the outcome.
pub fn local_write(ctx: &NetContext, key: &[u8], version: &Version, target: Target) {
    let mut batch = WriteBatch::new();
    match &version.value {
        Some(value) => batch.put(key, value, version.ts),
        None => batch.delete(key, version.ts),
    };
    ctx.pending_writes.borrow_mut().push(Submission {
        batch,
        durability: ctx.shared.write_durability,
        done: ctx.completions.callback(target),
    });
}

fn log_hint_refusal(url: &str, why: &str) {
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
