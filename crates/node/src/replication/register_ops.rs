//! The consensus register's proposers on one network thread: the
//! operations this thread coordinates, each a [`Proposer`] driven by the
//! answers that come back and by the clock (round timeout, back-off).
//! Events in, messages and outcomes out: [`super::net_io`] sends the
//! messages (this node's own replica through the acceptor directly, the
//! others over the peer links) and hands the outcomes to the connections.
//!
//! # Rules
//! - **One round per key at a time on a thread.** A second operation
//!   of a key waits in the key's queue until the first has its outcome,
//!   so one thread's clients of a hot key never duel with each other
//!   (operations from other threads and nodes still compete: the
//!   proposer's refusal, back-off and retry settle them).
//! - **A key's waiting operations ride one round.** When the running
//!   operation ends, every operation waiting for the key (at most
//!   [`BATCH_MAX`]) starts as one proposer whose update applies theirs
//!   in arrival order, each to the value the one before it left: one
//!   prepare, accept and commit for all of them, as group commit does for
//!   the WAL. They are linearized in that order at the round's decision;
//!   each gets the value its own update saw ([`Outcome::Done`]'s
//!   `before`), so its reply is what it would be alone, and a failed round
//!   fails every one of them.
//! - **Bounded.** At most [`OPS_MAX`] operations (running and queued) per
//!   thread; one past it is refused at once ([`Refused::Full`]) and
//!   nothing was applied.
//! - **Round timeout**: a round with no quorum after `round_timeout` ends
//!   ([`Proposer::timed_out`]); the back-off before the next round is
//!   [`super::register::proposer::backoff_ms`] with this thread's seeded generator.
//! - An answer to an operation that already has its outcome is dropped
//!   (its Commit and Release were sent; a replica that did not take the
//!   Commit keeps its record until the key's next commit reaches it).

use super::register::acceptor::{Answer, Request};
use super::register::proposer::{self, Current, Limits, Next, Output, Proposer, RegisterError};
use super::register::quorum::Quorum;
use ataman_testkit::rng::Rng;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Operations per network thread at most, running and queued.
pub const OPS_MAX: usize = 4096;
/// Operations of one key that ride one round at most.
pub const BATCH_MAX: usize = 128;

/// An operation's update: the current value to the new one, or none
/// (nothing to write).
pub type UpdateFn = Box<dyn FnMut(&Current) -> Option<Next>>;

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Decided: the value the update was applied to, whether its new
    /// value was written, round trips taken.
    Done {
        /// The current value the update saw (its deadline, its time).
        before: Current,
        /// Its new value was decided.
        written: bool,
        /// Round trips (prepare, accept and commit each count one).
        round_trips: u32,
        /// Rounds taken (1: no retry).
        attempts: u32,
    },
    /// No outcome ([`RegisterError`]).
    Failed(RegisterError),
}

/// Why an operation was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// [`OPS_MAX`] operations on this thread already.
    #[error(
        "{OPS_MAX} consensus operations already in flight on this connection's thread; nothing was applied"
    )]
    Full,
}

/// A message to send: operation `op`'s request to replica `node` about `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    /// The operation (the Ask's id for this node's own replica; the link's waiter for the others).
    pub op: u64,
    /// The replica (a placement index).
    pub node: usize,
    /// The key.
    pub key: Vec<u8>,
    /// The request.
    pub request: Request,
}

/// What each operation of a batch saw in the round's last run of its
/// update, and whether it wrote (the decided run: a run is repeated only
/// once no earlier accept of the batch can have been taken).
type Seen = Rc<RefCell<Vec<(Current, bool)>>>;

struct Op<T> {
    key: Vec<u8>,
    to: T,
    /// A batch's first operation: the others that ride its round, and what
    /// each operation saw (`None`: a lone operation).
    riders: Option<(Vec<u64>, Seen)>,
    quorum: Quorum,
    /// Until the operation runs: its update; then in the proposer.
    update: Option<UpdateFn>,
    proposer: Option<Proposer<UpdateFn>>,
    /// The current round ends without a quorum at this instant.
    round_ends: Option<Instant>,
    /// The next round starts at this instant (backing off).
    retry_at: Option<Instant>,
    attempts: u32,
    /// When it was started (queued).
    started: Instant,
}

/// This thread's operations (the "Rules"); `T` says where an outcome goes.
pub struct RegisterOps<T> {
    node: u16,
    limits: Limits,
    round_timeout: Duration,
    ops: HashMap<u64, Op<T>>,
    keys: HashMap<Vec<u8>, VecDeque<u64>>,
    next_op: u64,
    rng: Rng,
    sends: Vec<Send>,
    outcomes: Vec<(T, Outcome, Instant)>,
}

impl<T: Copy> RegisterOps<T> {
    /// The operations of a thread whose ballots name node id `node`;
    /// `seed` seeds the back-off's jitter.
    pub fn new(node: u16, round_timeout: Duration, seed: u64) -> RegisterOps<T> {
        RegisterOps {
            node,
            // The peer links send each request once per round.
            limits: Limits {
                at_most_once: true,
                ..Limits::default()
            },
            round_timeout,
            ops: HashMap::new(),
            keys: HashMap::new(),
            next_op: 1,
            rng: Rng::new(seed),
            sends: Vec::new(),
            outcomes: Vec::new(),
        }
    }

    /// Ballots name node id `node` from now on (the layout gave one).
    pub fn set_node(&mut self, node: u16) {
        self.node = node;
    }

    /// Operations running or queued.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True with no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Starts (or queues behind the key's running one) an operation of
    /// `key` over `quorum`; its outcome goes to `to`. `clock` is the
    /// node's clock (a ballot's time): given a time, it observes it and
    /// returns a time above it that it never gave before.
    pub fn start(
        &mut self,
        key: Vec<u8>,
        quorum: Quorum,
        update: UpdateFn,
        to: T,
        now: Instant,
        clock: &mut dyn FnMut(u64) -> u64,
    ) -> Result<(), Refused> {
        if self.ops.len() >= OPS_MAX {
            return Err(Refused::Full);
        }
        let op = self.next_op;
        self.next_op += 1;
        self.ops.insert(
            op,
            Op {
                key: key.clone(),
                to,
                riders: None,
                quorum,
                update: Some(update),
                proposer: None,
                round_ends: None,
                retry_at: None,
                attempts: 0,
                started: now,
            },
        );
        let queue = self.keys.entry(key).or_default();
        queue.push_back(op);
        if queue.len() == 1 {
            self.begin(op, now, clock);
        }
        Ok(())
    }

    /// Runs queued operation `op` (its key's turn came), with the key's
    /// other waiting operations riding its round (the "Rules").
    fn begin(&mut self, op: u64, now: Instant, clock: &mut dyn FnMut(u64) -> u64) {
        let node = self.node;
        let limits = self.limits;
        let waiting: Vec<u64> = match self.ops.get(&op) {
            Some(o) => self.keys.get(&o.key).map_or_else(Vec::new, |q| {
                q.iter()
                    .copied()
                    .filter(|&id| id != op)
                    .take(BATCH_MAX - 1)
                    .collect()
            }),
            None => return,
        };
        let mut updates = Vec::with_capacity(1 + waiting.len());
        for id in std::iter::once(op).chain(waiting.iter().copied()) {
            if let Some(u) = self.ops.get_mut(&id).and_then(|o| o.update.take()) {
                updates.push(u);
            }
        }
        let Some(o) = self.ops.get_mut(&op) else {
            return;
        };
        if updates.len() != 1 + waiting.len() {
            return; // an operation of the batch already ran: never here
        }
        let update = if waiting.is_empty() {
            updates
                .pop()
                .unwrap_or_else(|| Box::new(|_: &Current| None))
        } else {
            let seen: Seen = Rc::new(RefCell::new(Vec::new()));
            o.riders = Some((waiting, Rc::clone(&seen)));
            batch(updates, seen)
        };
        let mut p = Proposer::new(node, o.quorum.clone(), limits, update);
        p.start(clock(p.seen().time));
        o.attempts = 1;
        o.round_ends = Some(now + self.round_timeout);
        o.proposer = Some(p);
        self.collect(op);
    }

    /// Moves `op`'s proposer's messages to the sends.
    fn collect(&mut self, op: u64) {
        let Some(o) = self.ops.get_mut(&op) else {
            return;
        };
        let Some(p) = o.proposer.as_mut() else {
            return;
        };
        for (node, request) in p.take_outbox() {
            self.sends.push(Send {
                op,
                node: usize::from(node),
                key: o.key.clone(),
                request,
            });
        }
    }

    /// Replica `node` answered operation `op`.
    pub fn on_answer(
        &mut self,
        op: u64,
        node: usize,
        answer: Answer,
        now: Instant,
        clock: &mut dyn FnMut(u64) -> u64,
    ) {
        let Ok(from) = u16::try_from(node) else {
            return;
        };
        let Some(p) = self.ops.get_mut(&op).and_then(|o| o.proposer.as_mut()) else {
            return;
        };
        let output = p.on_answer(from, answer);
        self.after(op, output, now, clock);
    }

    /// What `op`'s proposer said: wait, back off, or the outcome.
    fn after(&mut self, op: u64, output: Output, now: Instant, clock: &mut dyn FnMut(u64) -> u64) {
        self.collect(op);
        match output {
            Output::Wait => {}
            Output::Backoff { attempt } => {
                let wait = proposer::backoff_ms(attempt, self.rng.next_u64());
                if let Some(o) = self.ops.get_mut(&op) {
                    o.round_ends = None;
                    o.retry_at = Some(now + Duration::from_millis(wait));
                }
            }
            Output::Done {
                before,
                written,
                round_trips,
            } => {
                let attempts = self.ops.get(&op).map_or(1, |o| o.attempts);
                self.end(
                    op,
                    Outcome::Done {
                        before,
                        written,
                        round_trips,
                        attempts,
                    },
                    now,
                    clock,
                );
            }
            Output::Failed(e) => self.end(op, Outcome::Failed(e), now, clock),
        }
    }

    /// `op` has its outcome: reported (each rider's too), and its key's
    /// next operation runs.
    fn end(&mut self, op: u64, outcome: Outcome, now: Instant, clock: &mut dyn FnMut(u64) -> u64) {
        let Some(mut o) = self.ops.remove(&op) else {
            return;
        };
        let mut ended = vec![op];
        match o.riders.take() {
            None => self.outcomes.push((o.to, outcome, o.started)),
            Some((riders, seen)) => {
                let seen = seen.borrow();
                let ids = std::iter::once(op).chain(riders.iter().copied());
                for (i, id) in ids.enumerate() {
                    let (to, started) = if id == op {
                        (o.to, o.started)
                    } else {
                        match self.ops.remove(&id) {
                            Some(r) => (r.to, r.started),
                            None => continue,
                        }
                    };
                    ended.push(id);
                    let own = match (&outcome, seen.get(i)) {
                        (
                            Outcome::Done {
                                written,
                                round_trips,
                                attempts,
                                ..
                            },
                            Some((before, wrote)),
                        ) => Outcome::Done {
                            before: before.clone(),
                            written: *written && *wrote,
                            round_trips: *round_trips,
                            attempts: *attempts,
                        },
                        (Outcome::Done { .. }, None) => {
                            Outcome::Failed(RegisterError::Indeterminate)
                        }
                        (failed, _) => failed.clone(),
                    };
                    self.outcomes.push((to, own, started));
                }
            }
        }
        let next = match self.keys.get_mut(&o.key) {
            Some(queue) => {
                queue.retain(|id| !ended.contains(id));
                let next = queue.front().copied();
                if next.is_none() {
                    self.keys.remove(&o.key);
                }
                next
            }
            None => None,
        };
        if let Some(next) = next {
            self.begin(next, now, clock);
        }
    }

    /// Round timeouts and back-offs due at `now`.
    pub fn tick(&mut self, now: Instant, clock: &mut dyn FnMut(u64) -> u64) {
        let due: Vec<(u64, bool)> = self
            .ops
            .iter()
            .filter_map(|(&id, o)| {
                if o.retry_at.is_some_and(|at| at <= now) {
                    Some((id, true))
                } else if o.round_ends.is_some_and(|at| at <= now) {
                    Some((id, false))
                } else {
                    None
                }
            })
            .collect();
        for (op, retry) in due {
            let round_timeout = self.round_timeout;
            let Some(o) = self.ops.get_mut(&op) else {
                continue;
            };
            let Some(p) = o.proposer.as_mut() else {
                continue;
            };
            if retry {
                o.retry_at = None;
                o.attempts += 1;
                o.round_ends = Some(now + round_timeout);
                p.retry(clock(p.seen().time));
                self.collect(op);
            } else {
                o.round_ends = None;
                let output = p.timed_out();
                self.after(op, output, now, clock);
            }
        }
    }

    /// The messages to send now, emptied.
    pub fn take_sends(&mut self) -> Vec<Send> {
        std::mem::take(&mut self.sends)
    }

    /// The outcomes reached (with when each operation started), emptied.
    pub fn take_outcomes(&mut self) -> Vec<(T, Outcome, Instant)> {
        std::mem::take(&mut self.outcomes)
    }

    /// The earliest round timeout or back-off end (`None`: no operation
    /// waits on the clock).
    pub fn next_due(&self) -> Option<Instant> {
        self.ops
            .values()
            .filter_map(|o| match (o.retry_at, o.round_ends) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            })
            .min()
    }
}

/// The update of a batch: `updates` applied in order, each to the value
/// the one before it left (at the same ballot time); what each saw and
/// whether it wrote go to `seen`, replaced at every run.
fn batch(mut updates: Vec<UpdateFn>, seen: Seen) -> UpdateFn {
    Box::new(move |start: &Current| {
        let mut seen = seen.borrow_mut();
        seen.clear();
        let mut current = start.clone();
        let mut wrote = false;
        for update in updates.iter_mut() {
            let next = update(&current);
            seen.push((current.clone(), next.is_some()));
            if let Some(next) = next {
                wrote = true;
                // Decided, it is stored under the round's ballot time.
                current = Current {
                    deadline_ms: next.value.as_ref().and(next.deadline_ms),
                    value: next.value,
                    at: start.at,
                    version: Some(start.at),
                };
            }
        }
        wrote.then_some(Next {
            value: current.value,
            deadline_ms: current.deadline_ms,
        })
    })
}

#[cfg(test)]
#[path = "register_ops_tests.rs"]
mod tests;
