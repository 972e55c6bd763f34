//! The network thread's side of the consensus register's proposers: the
//! adapter between [`super::register_ops`] (pure) and the thread's links
//! and the node's acceptor. A child of `net_io`: it uses the same links.
//!
//! - A read-modify-write a connection parsed (`state::RegisterStart`)
//!   becomes an operation over the key's replica set (the placement's
//!   write replicas; refused during a layout transition: the register's
//!   records are not carried to new replicas yet, issue 37).
//! - Its messages: to this node's own replica through the acceptor
//!   (`state::RegisterPort`, the reply through the thread's inbox), to
//!   the others as register Asks on the peer links (`Waiter::Register`).
//! - A failed or expired peer request is dropped: the round's timeout ends
//!   a round that lacks its quorum.

use super::{ReplicationIo, ReplyTo};
use crate::metrics::register::RegisterFigures;
use crate::peer::link::PeerReply;
use crate::replication::driver::Waiter;
use crate::replication::register::acceptor::Request;
use crate::replication::register::proposer::{Current, Next, RegisterError};
use crate::replication::register::quorum::{self, Quorum};
use crate::replication::register::wire::{self, RegisterMessage};
use crate::replication::register_ops::{Outcome, UpdateFn};
use crate::state::{NetContext, RegisterRead, RegisterStart, RegisterTo, RegisterUpdate};
use mio::Registry;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A read-modify-write's end as the connection gets it: the outcome, or
/// why it was not started (nothing was applied).
pub type RegisterDone = (ReplyTo, Result<Outcome, String>);

/// The error of an operation refused during a layout transition.
pub const REFUSED_IN_TRANSITION: &str = "a layout transition is running: atomic read-modify-writes of keys with replicas on other nodes wait for it to end; nothing was applied";

impl ReplicationIo {
    /// Starts the read-modify-writes the connections parsed.
    pub fn register_start(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        starts: Vec<RegisterStart>,
    ) {
        let now = Instant::now();
        let placement = ctx.placement();
        let mut clock = |above| ballot_time(ctx, above);
        if let Some(node) = crate::state::clock_node(&ctx.config, &placement) {
            self.register.set_node(node);
        }
        for s in starts {
            let to = ReplyTo {
                token: s.token,
                generation: s.generation,
                slot: s.slot,
            };
            if placement.in_transition() {
                ctx.shared
                    .metrics
                    .register
                    .refused
                    .fetch_add(1, Ordering::Relaxed);
                self.register_done
                    .push((to, Err(REFUSED_IN_TRANSITION.to_owned())));
                continue;
            }
            let r = placement.replication_factor().max(1);
            let replicas = placement.write(&s.key, r);
            let sets: Vec<Vec<u16>> = replicas
                .sets
                .iter()
                .map(|set| {
                    set.iter()
                        .filter_map(|&p| replicas.replicas.get(p))
                        .filter_map(|&i| u16::try_from(i).ok())
                        .collect()
                })
                .collect();
            let sets = if sets.is_empty() {
                vec![
                    replicas
                        .replicas
                        .iter()
                        .filter_map(|&i| u16::try_from(i).ok())
                        .collect(),
                ]
            } else {
                sets
            };
            let quorum = match Quorum::new(sets, quorum::Mode::Sound) {
                Ok(q) => q,
                Err(e) => {
                    self.register_done.push((to, Err(e.to_string())));
                    continue;
                }
            };
            if let Err(e) =
                self.register
                    .start(s.key, quorum, as_update(s.update), to, now, &mut clock)
            {
                ctx.shared
                    .metrics
                    .register
                    .refused
                    .fetch_add(1, Ordering::Relaxed);
                self.register_done.push((to, Err(e.to_string())));
            }
        }
        self.register_send(ctx, registry);
    }

    /// Sends what the operations queued and collects their outcomes.
    pub(super) fn register_send(&mut self, ctx: &NetContext, registry: &Registry) {
        let sends = self.register.take_sends();
        if !sends.is_empty() {
            let me = ctx.placement().self_index();
            let now = Instant::now();
            let deadline = now + ctx.config.replication_timeout;
            for s in sends {
                count_request(&ctx.shared.metrics.register, &s.request);
                if s.node == me {
                    let Some(port) = ctx.shared.register.as_ref() else {
                        continue;
                    };
                    let mut frame = Vec::new();
                    wire::encode(
                        &RegisterMessage::Ask {
                            id: s.op,
                            key: s.key,
                            request: s.request,
                        },
                        &mut frame,
                    );
                    // Our own encoding: it decodes.
                    let _ = port.ask(ctx, RegisterTo::Local, &frame);
                    continue;
                }
                let Some(link) = self.links.get_mut(s.node).and_then(Option::as_mut) else {
                    continue;
                };
                let (key, request) = (s.key, s.request);
                // A refused send is a missing answer: the round's timeout covers it.
                let _ = link.send_register(
                    &ctx.link_env(s.node),
                    registry,
                    now,
                    deadline,
                    Waiter::Register { op: s.op },
                    |id, out| wire::encode(&RegisterMessage::Ask { id, key, request }, out),
                );
            }
        }
        for (to, outcome, started) in self.register.take_outcomes() {
            let figures = &ctx.shared.metrics.register;
            count_outcome(figures, &outcome);
            let took = Instant::now().saturating_duration_since(started);
            figures
                .operation_us
                .record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
            self.register_done.push((to, Ok(outcome)));
        }
    }

    /// This node's acceptor answered one of this thread's operations.
    pub fn register_reply(&mut self, ctx: &NetContext, registry: &Registry, frame: &[u8]) {
        let me = ctx.placement().self_index();
        self.register_answer(ctx, registry, me, None, frame);
    }

    /// A peer's link reported on operation `op`'s request.
    pub(super) fn register_peer(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        node: usize,
        op: u64,
        reply: PeerReply,
    ) {
        if let PeerReply::Register(frame) = reply {
            self.register_answer(ctx, registry, node, Some(op), &frame);
        }
    }

    /// A Reply frame from `node` (`op`: the operation, for a peer's; else
    /// the Reply's id names it).
    fn register_answer(
        &mut self,
        ctx: &NetContext,
        registry: &Registry,
        node: usize,
        op: Option<u64>,
        frame: &[u8],
    ) {
        let Ok(Some((RegisterMessage::Reply { id, result }, _))) = wire::decode(frame) else {
            ctx.shared
                .metrics
                .register
                .bad_replies
                .fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Ok(Some(answer)) = result else {
            // A Release's acknowledgement, or a replica's error: no answer.
            return;
        };
        let op = op.unwrap_or(id);
        let now = Instant::now();
        let mut clock = |above| ballot_time(ctx, above);
        self.register.on_answer(op, node, answer, now, &mut clock);
        self.register_send(ctx, registry);
    }

    /// Round timeouts and back-offs due now.
    pub fn register_tick(&mut self, ctx: &NetContext, registry: &Registry) {
        if self.register.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut clock = |above| ballot_time(ctx, above);
        self.register.tick(now, &mut clock);
        self.register_send(ctx, registry);
    }

    /// How long the event loop may sleep before [`Self::register_tick`]
    /// has work (`None`: no operation).
    pub fn register_wait(&self) -> Option<Duration> {
        self.register
            .next_due()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// The read-modify-writes that ended, emptied.
    pub fn take_register_done(&mut self) -> Vec<RegisterDone> {
        std::mem::take(&mut self.register_done)
    }
}

/// A connection's update in the proposer's terms.
fn as_update(mut update: RegisterUpdate) -> UpdateFn {
    Box::new(move |c: &Current| {
        let read = RegisterRead {
            value: &c.value,
            deadline_ms: c.deadline_ms,
            at: c.at,
            version: c.version,
        };
        update(&read).map(|(value, deadline_ms)| Next { value, deadline_ms })
    })
}

fn count_request(figures: &RegisterFigures, request: &Request) {
    let kind = match request {
        Request::Prepare(_) => 0,
        Request::Accept(_) => 1,
        Request::Commit(_) => 2,
        Request::Release(_) => 3,
    };
    figures.sent[kind].fetch_add(1, Ordering::Relaxed);
}

fn count_outcome(figures: &RegisterFigures, outcome: &Outcome) {
    let attempts = match outcome {
        Outcome::Done { attempts, .. } => {
            figures.decided.fetch_add(1, Ordering::Relaxed);
            *attempts
        }
        Outcome::Failed(RegisterError::Exhausted { attempts, .. }) => {
            figures.exhausted.fetch_add(1, Ordering::Relaxed);
            *attempts
        }
        Outcome::Failed(RegisterError::Indeterminate) => {
            figures.indeterminate.fetch_add(1, Ordering::Relaxed);
            1
        }
        Outcome::Failed(RegisterError::Unconfirmed { attempts, .. }) => {
            figures.unconfirmed.fetch_add(1, Ordering::Relaxed);
            *attempts
        }
    };
    figures
        .rounds
        .fetch_add(u64::from(attempts), Ordering::Relaxed);
    figures
        .retries
        .fetch_add(u64::from(attempts.saturating_sub(1)), Ordering::Relaxed);
}

/// A ballot's time: the node's clock after it observed `above` (the
/// highest ballot the operation saw), so never a time this node gave
/// before (`register::proposer`, "Rules"). A clock that cannot stamp (no
/// node id, its reservation not durable) gives 1: the proposer then bumps
/// above what it saw, and the write it would make answers 503 anyway.
fn ballot_time(ctx: &NetContext, above: u64) -> u64 {
    ctx.shared.hlc.observe(above);
    ctx.shared.hlc.now().unwrap_or(1)
}
