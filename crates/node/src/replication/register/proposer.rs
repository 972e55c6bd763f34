//! The proposer of the per-key consensus register: one operation (a read,
//! a write, a compare-and-set, any read-modify-write) from its first
//! prepare to its outcome, as pure rules (answers in, messages and
//! decisions out).
//!
//! # Rules
//! - A round starts with `Prepare(b)` to every replica of every set
//!   ([`super::quorum`]), `b` above every ballot the proposer has seen
//!   ([`Ballot::above`]), and never a ballot its node used before: the
//!   caller's `now` comes from the node's clock after it observed
//!   [`Proposer::seen`]'s time, and that clock never gives one time twice
//!   (the HLC), so `b = (now, node)`. (Bumping above `seen` alone let two
//!   operations of one node, refused with the same floor, take the same
//!   ballot: the second's accept was taken at the ballot the first had
//!   committed, and dropped as superseded though it was answered; the
//!   simulation found it, `ballots_reused`.)
//! - Once the promises form a quorum, the *current* proposal is the one
//!   with the highest ballot among their accepted and committed proposals
//!   (absent when none). It is *settled* when a promiser knows it
//!   committed, or when the promisers that accepted it form a quorum by
//!   themselves (it was decided); otherwise it is *in flight*.
//! - The operation's update maps the current value to a new value, or to
//!   none (a read, a compare-and-set whose condition failed).
//!   - none, and the current proposal settled: it sends `Release(b)` to
//!     the promisers (its promise is no longer needed, the record can be
//!     pruned). When promisers that hold the current value committed form
//!     a quorum by themselves, the operation is done in this one round
//!     trip with the current value ("a linearizable read in one round");
//!     otherwise it sends `Commit` of it to every replica and is done once
//!     a quorum holds it committed (below).
//!   - none, and in flight: it completes what it found, `Accept(b,
//!     current)`, then is done with the current value.
//!   - a new value: `Accept(b, new)` (CASPaxos: the in-flight proposal,
//!     if any, is decided as the new one's predecessor).
//! - Once the accepts form a quorum the value is decided; `Commit` goes
//!   to every replica, and the operation is **done once the `Committed`
//!   answers form a quorum**: a replica answers `Committed` only when the
//!   key's stored version (what a plain quorum read of the main store
//!   reads) is durable, so a plain read that starts after the reply, from
//!   any quorum, finds the value or a later one. (Replying at the accept
//!   quorum let a `GET` right after an acknowledged `INCR` read the value
//!   before it.) Later `Committed` answers tell which replicas still hold a
//!   record ([`Proposer::uncommitted`]).
//! - A commit round that times out before its quorum backs off like any
//!   round; the retry sends `Commit` again to the replicas that did not
//!   acknowledge it (no new ballot: the value is decided). At
//!   [`Limits::attempts_max`] rounds it fails with
//!   [`RegisterError::Unconfirmed`]: the value *was* decided and takes
//!   effect, but a quorum did not confirm holding it.
//! - A `Refused` answer to the round's ballot ends the round at once; so
//!   does the caller's round timeout ([`Proposer::timed_out`]). The
//!   proposer then backs off ([`Output::Backoff`]: the caller waits
//!   [`backoff_ms`] with its seeded random number, then calls
//!   [`Proposer::retry`]) and starts a new round, at most
//!   [`Limits::attempts_max`] rounds in all; then it fails with
//!   [`RegisterError::Exhausted`]. A failed or timed-out operation may
//!   still have taken effect (its accept may have reached a quorum).
//! - A round's accept that ended without a quorum may still be decided
//!   (a retry must not apply a write twice: a compare-and-set would then
//!   report that it failed although it swapped). So the proposer keeps
//!   the ballot and outcome of each accept it sent. If a later round's
//!   current proposal is one of its own, that round's outcome is the
//!   operation's (completed first if in flight). An accept round that
//!   wrote a new value and ended without a quorum makes the operation
//!   *doubtful* (a refusal does not prove the acceptor never accepted:
//!   a duplicated accept is refused after the first was taken): a later round
//!   whose current proposal is not its own fails with
//!   [`RegisterError::Indeterminate`] (the value may have been decided
//!   and built upon by another proposer).
//! - Answers to a ballot other than the round's are ignored (late,
//!   duplicated); so are answers after the outcome, except `Committed`,
//!   and a refusal of a doubted accept's ballot, which is noted.
//! - With at-most-once delivery an accept round that met a refusal ends
//!   once every promiser answered its accept (or at the timeout), not at
//!   the first refusal, so the refusals are known when it ends.
//! - A doubt is cleared when the transport delivers each request at most
//!   once ([`Limits::at_most_once`]: the node's links) and every replica
//!   promised the doubted ballot and refused it since: each then refused
//!   the accept (its one answer to the prepare was the promise), so no
//!   replica holds it and nothing can build on it; a later round may then
//!   apply the update afresh. (With duplicates, a repeated prepare can be
//!   refused after its accept was taken, so the simulation keeps it off.)

use super::acceptor::{Answer, Proposal, Request, Value};
use super::ballot::Ballot;
use super::quorum::Quorum;
use crate::cluster::layout::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// Rounds one operation may take before it fails, by default.
pub const ATTEMPTS_MAX_DEFAULT: u32 = 8;
/// The first back-off's upper bound, milliseconds.
pub const BACKOFF_MS_BASE: u64 = 2;
/// The largest back-off's upper bound, milliseconds.
pub const BACKOFF_MS_MAX: u64 = 200;

/// The operation's bounds, and what the transport promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rounds at most (at least 1).
    pub attempts_max: u32,
    /// The transport delivers each request to each replica at most once
    /// (the node's peer links: one send per round, no resend), so a
    /// replica that promised a ballot and then refused it refused its
    /// accept: it never accepted it. The "Rules"' last item uses it;
    /// the simulation's network duplicates, so it leaves it false.
    pub at_most_once: bool,
    /// A planted bug (the simulation's negative control
    /// `register-replies-before-commit`): the outcome at the accept
    /// quorum, before a quorum stored the value, as the first wiring did.
    /// Always false on the node.
    pub planted_replies_before_commit: bool,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            attempts_max: ATTEMPTS_MAX_DEFAULT,
            at_most_once: false,
            planted_replies_before_commit: false,
        }
    }
}

/// An accept of this operation's write that ended without a quorum: who
/// promised its ballot, and which of them refused it since.
#[derive(Debug)]
struct Doubt {
    ballot: Ballot,
    promisers: BTreeSet<NodeId>,
    refusers: BTreeSet<NodeId>,
}

/// The back-off before round `attempt + 1` (attempt counts from 1):
/// uniform in `0..=min(BACKOFF_MS_BASE << (attempt - 1), BACKOFF_MS_MAX)`,
/// drawn from the caller's `random` (a seeded generator's next value).
pub fn backoff_ms(attempt: u32, random: u64) -> u64 {
    let shift = attempt.saturating_sub(1).min(16);
    let bound = BACKOFF_MS_BASE
        .saturating_mul(1u64 << shift)
        .min(BACKOFF_MS_MAX);
    random % (bound + 1)
}

/// What an operation's update runs on: the current value with its
/// deadline, and the time it runs at (the round's ballot time, an HLC
/// timestamp: a value whose deadline is at or before its milliseconds has
/// expired). [`Output::Done`] gives back the one the decided update ran
/// on, so a reply computed from it is the update's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Current {
    /// The value (`None`: absent).
    pub value: Value,
    /// Its deadline, Unix milliseconds (`None`: never).
    pub deadline_ms: Option<u64>,
    /// The round's ballot time.
    pub at: u64,
    /// The version the value is stored under: the timestamp of the
    /// decided proposal it comes from, its ballot's time, which is the
    /// key's stored version's timestamp once committed (`None`: the key
    /// was never written). What `WATCH` remembers and an `ETag` names.
    pub version: Option<u64>,
}

/// What an update writes: the new value (`None`: delete) and its deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Next {
    /// The value.
    pub value: Value,
    /// Its deadline (ignored for a delete).
    pub deadline_ms: Option<u64>,
}

/// Why a round ended without the operation's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// An acceptor had seen a ballot at least this one (a competing proposer).
    Refused(Ballot),
    /// No quorum answered within the caller's round timeout.
    Timeout,
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Every round ended without an outcome.
    #[error(
        "consensus not reached after {attempts} rounds (last: {}); the operation may or may not have taken effect",
        match .last { Cause::Refused(_) => "a competing proposer", Cause::Timeout => "no quorum answered in time" }
    )]
    Exhausted {
        /// Rounds taken.
        attempts: u32,
        /// Why the last one ended.
        last: Cause,
    },
    /// An accept of the operation's write ended without a quorum and a
    /// later value superseded it: whether it took effect is unknown.
    #[error(
        "the outcome is unknown: a round's accept did not complete and another proposer's value followed it; the operation may or may not have taken effect"
    )]
    Indeterminate,
    /// The operation's value was decided but fewer than a quorum confirmed
    /// its commit within the rounds allowed: it took effect, and a plain
    /// read may not see it yet.
    #[error(
        "the operation took effect, but only {confirmed} replicas, short of a quorum, confirmed storing it after {attempts} rounds; a plain read may not see it until the others catch up"
    )]
    Unconfirmed {
        /// Rounds taken.
        attempts: u32,
        /// Replicas that confirmed the commit.
        confirmed: usize,
    },
}

/// What the caller does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Nothing yet: wait for answers (or the round's timeout).
    Wait,
    /// The round ended: wait [`backoff_ms`]`(attempt, random)`, then call
    /// [`Proposer::retry`].
    Backoff {
        /// Rounds taken so far.
        attempt: u32,
    },
    /// The outcome: the value the operation found (before its update) and
    /// whether it wrote a new one.
    Done {
        /// The current value the update was applied to.
        before: Current,
        /// True when the update's new value was decided.
        written: bool,
        /// Round trips taken in all (prepare, accept and commit each count one).
        round_trips: u32,
    },
    /// The operation failed.
    Failed(RegisterError),
}

#[derive(Debug)]
enum Phase {
    Preparing {
        promises: BTreeMap<NodeId, (Option<Proposal>, Option<Proposal>)>,
    },
    Accepting {
        proposal: Proposal,
        before: Current,
        written: bool,
        accepted: BTreeSet<NodeId>,
        /// The replicas that promised the round's ballot.
        promisers: BTreeSet<NodeId>,
        /// The replicas that refused its accept.
        refused: BTreeSet<NodeId>,
    },
    BackingOff,
    /// Decided; waiting for a quorum of `Committed` answers.
    Committing(Commit),
    /// A commit round timed out: the retry resends `Commit`.
    CommitBackoff(Commit),
    Done {
        proposal: Option<Proposal>,
        committed: BTreeSet<NodeId>,
        /// A one-round read: a late promise to its ballot is released too.
        releases: bool,
    },
    Failed,
}

/// A decided proposal on its way to a quorum of stored versions.
#[derive(Debug)]
struct Commit {
    proposal: Proposal,
    before: Current,
    written: bool,
    /// Replicas known to hold it committed.
    committed: BTreeSet<NodeId>,
    /// A one-round read's promisers get `Release` (late promises too).
    releases: bool,
}

/// One operation of the register, from its first round to its outcome.
#[derive(Debug)]
pub struct Proposer<F> {
    node: NodeId,
    quorum: Quorum,
    limits: Limits,
    update: F,
    ballot: Ballot,
    seen: Ballot,
    attempts: u32,
    round_trips: u32,
    phase: Phase,
    outbox: Vec<(NodeId, Request)>,
    /// Every accept round sent: its ballot, the value before, whether it wrote.
    own: Vec<(Ballot, Current, bool)>,
    doubts: Vec<Doubt>,
}

impl<F: FnMut(&Current) -> Option<Next>> Proposer<F> {
    /// An operation of node `node` over `quorum`; `update` maps the
    /// current value to the new one, or to none (nothing to write).
    pub fn new(node: NodeId, quorum: Quorum, limits: Limits, update: F) -> Proposer<F> {
        Proposer {
            node,
            quorum,
            limits: Limits {
                attempts_max: limits.attempts_max.max(1),
                ..limits
            },
            update,
            ballot: Ballot::ZERO,
            seen: Ballot::ZERO,
            attempts: 0,
            round_trips: 0,
            phase: Phase::BackingOff,
            outbox: Vec::new(),
            own: Vec::new(),
            doubts: Vec::new(),
        }
    }

    /// Starts the first round at clock time `now`; the messages to send
    /// are in [`Proposer::take_outbox`].
    pub fn start(&mut self, now: u64) {
        self.retry(now);
    }

    /// Starts the next round at clock time `now` (after a [`Output::Backoff`]).
    pub fn retry(&mut self, now: u64) {
        if let Phase::CommitBackoff(_) = self.phase {
            let Phase::CommitBackoff(commit) = std::mem::replace(&mut self.phase, Phase::Failed)
            else {
                return;
            };
            self.attempts += 1;
            self.round_trips += 1;
            for id in self.quorum.replicas() {
                if !commit.committed.contains(&id) {
                    self.outbox
                        .push((id, Request::Commit(commit.proposal.clone())));
                }
            }
            self.phase = Phase::Committing(commit);
            return;
        }
        if !matches!(self.phase, Phase::BackingOff) {
            return;
        }
        self.attempts += 1;
        self.round_trips += 1;
        self.ballot = Ballot::above(self.seen, now, self.node);
        self.seen = self.ballot;
        self.phase = Phase::Preparing {
            promises: BTreeMap::new(),
        };
        self.broadcast(Request::Prepare(self.ballot));
    }

    /// The highest ballot the operation has seen (its own and the floors
    /// refusals named): the caller's clock observes its time before it
    /// gives [`Proposer::start`] or [`Proposer::retry`] their `now` (the
    /// "Rules").
    pub fn seen(&self) -> Ballot {
        self.seen
    }

    /// The current round's ballot.
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// The messages to send now (each to one replica), emptied.
    pub fn take_outbox(&mut self) -> Vec<(NodeId, Request)> {
        std::mem::take(&mut self.outbox)
    }

    /// Replicas that did not acknowledge the decided proposal's commit yet
    /// (they still hold a Paxos record for it); empty before the outcome.
    pub fn uncommitted(&self) -> Vec<NodeId> {
        match &self.phase {
            Phase::Done {
                proposal: Some(_),
                committed,
                ..
            } => self
                .quorum
                .replicas()
                .into_iter()
                .filter(|id| !committed.contains(id))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The caller's round timeout passed without a quorum.
    pub fn timed_out(&mut self) -> Output {
        match &self.phase {
            Phase::Preparing { .. } | Phase::Accepting { .. } => self.end_round(Cause::Timeout),
            Phase::Committing(commit) => {
                if self.attempts >= self.limits.attempts_max {
                    let confirmed = commit.committed.len();
                    self.phase = Phase::Failed;
                    return Output::Failed(RegisterError::Unconfirmed {
                        attempts: self.attempts,
                        confirmed,
                    });
                }
                let Phase::Committing(commit) = std::mem::replace(&mut self.phase, Phase::Failed)
                else {
                    return Output::Wait;
                };
                self.phase = Phase::CommitBackoff(commit);
                Output::Backoff {
                    attempt: self.attempts,
                }
            }
            _ => Output::Wait,
        }
    }

    /// `from` answered `answer`.
    pub fn on_answer(&mut self, from: NodeId, answer: Answer) -> Output {
        match answer {
            Answer::Refused { ballot, floor } => {
                self.seen = self.seen.max(floor);
                self.note_refusal(ballot, from);
                let live = matches!(
                    self.phase,
                    Phase::Preparing { .. } | Phase::Accepting { .. }
                );
                if ballot != self.ballot || !live {
                    return Output::Wait;
                }
                if let Phase::Accepting { refused, .. } = &mut self.phase {
                    refused.insert(from);
                    // At most once: the round waits for every promiser's
                    // answer, so a doubt every promiser refused is known.
                    if self.limits.at_most_once && !self.promisers_answered() {
                        return Output::Wait;
                    }
                }
                let out = self.end_round(Cause::Refused(floor));
                // The refusal that ended an accept round counts too.
                self.note_refusal(ballot, from);
                out
            }
            Answer::Promise {
                ballot,
                accepted,
                committed,
            } => {
                if ballot != self.ballot {
                    return Output::Wait;
                }
                let releases = match &self.phase {
                    Phase::Done { releases, .. } => *releases,
                    Phase::Committing(c) | Phase::CommitBackoff(c) => c.releases,
                    _ => false,
                };
                if releases {
                    self.outbox.push((from, Request::Release(ballot)));
                }
                // A promise after the quorum's: a promiser of the accept.
                if let Phase::Accepting { promisers, .. } = &mut self.phase {
                    promisers.insert(from);
                    return Output::Wait;
                }
                let Phase::Preparing { promises } = &mut self.phase else {
                    return Output::Wait;
                };
                promises.insert(from, (accepted, committed));
                let promisers: BTreeSet<NodeId> = promises.keys().copied().collect();
                if !self.quorum.reached(&promisers) {
                    return Output::Wait;
                }
                let promises = std::mem::take(promises);
                self.promised(promises)
            }
            Answer::Accepted(ballot) => {
                if ballot != self.ballot {
                    return Output::Wait;
                }
                let Phase::Accepting { accepted, .. } = &mut self.phase else {
                    return Output::Wait;
                };
                accepted.insert(from);
                if !self.quorum.reached(accepted) {
                    let some_refused = matches!(&self.phase, Phase::Accepting { refused, .. } if !refused.is_empty());
                    if self.limits.at_most_once && some_refused && self.promisers_answered() {
                        return self.end_round(Cause::Refused(self.seen));
                    }
                    return Output::Wait;
                }
                let Phase::Accepting {
                    proposal,
                    before,
                    written,
                    ..
                } = std::mem::replace(&mut self.phase, Phase::Failed)
                else {
                    return Output::Wait;
                };
                self.round_trips += 1;
                self.broadcast(Request::Commit(proposal.clone()));
                self.phase = Phase::Committing(Commit {
                    proposal,
                    before,
                    written,
                    committed: BTreeSet::new(),
                    releases: false,
                });
                if self.limits.planted_replies_before_commit {
                    return self.committed_at_quorum();
                }
                Output::Wait
            }
            Answer::Committed(ballot) => match &mut self.phase {
                Phase::Done {
                    proposal: Some(p),
                    committed,
                    ..
                } if p.ballot == ballot => {
                    committed.insert(from);
                    Output::Wait
                }
                Phase::Committing(c) | Phase::CommitBackoff(c) if c.proposal.ballot == ballot => {
                    c.committed.insert(from);
                    if self.quorum.reached(&c.committed) {
                        self.committed_at_quorum()
                    } else {
                        Output::Wait
                    }
                }
                _ => Output::Wait,
            },
        }
    }

    /// A quorum promised: decide from the current proposal (the "Rules").
    fn promised(
        &mut self,
        promises: BTreeMap<NodeId, (Option<Proposal>, Option<Proposal>)>,
    ) -> Output {
        let mut current: Option<&Proposal> = None;
        for (accepted, committed) in promises.values() {
            for p in accepted.iter().chain(committed.iter()) {
                if current.is_none_or(|c| p.ballot > c.ballot) {
                    current = Some(p);
                }
            }
        }
        let known_committed = current.is_none_or(|c| {
            promises
                .values()
                .any(|(_, committed)| committed.as_ref().is_some_and(|k| k.ballot >= c.ballot))
        });
        let accepted_by: BTreeSet<NodeId> = match current {
            Some(c) => promises
                .iter()
                .filter(|(_, (a, _))| a.as_ref().is_some_and(|a| a.ballot == c.ballot))
                .map(|(id, _)| *id)
                .collect(),
            None => BTreeSet::new(),
        };
        let committed_by: BTreeSet<NodeId> = match current {
            Some(c) => promises
                .iter()
                .filter(|(_, (_, k))| k.as_ref().is_some_and(|k| k.ballot >= c.ballot))
                .map(|(id, _)| *id)
                .collect(),
            None => BTreeSet::new(),
        };
        let settled = known_committed || self.quorum.reached(&accepted_by);
        let current = current.cloned();
        let own = current
            .as_ref()
            .and_then(|c| self.own.iter().find(|(b, _, _)| *b == c.ballot))
            .map(|(_, before, written)| (before.clone(), *written));
        if own.is_none() && self.doubtful() {
            self.phase = Phase::Failed;
            return Output::Failed(RegisterError::Indeterminate);
        }
        let (before, new, written) = match own {
            // This operation's own earlier proposal: its outcome stands;
            // complete it if it is in flight.
            Some((before, written)) => (before, None, written),
            None => {
                let before = Current {
                    value: current.as_ref().and_then(|p| p.value.clone()),
                    deadline_ms: current.as_ref().and_then(|p| p.deadline_ms),
                    at: self.ballot.time,
                    version: current.as_ref().map(|p| p.ballot.time),
                };
                let new = (self.update)(&before);
                let written = new.is_some();
                (before, new, written)
            }
        };
        match (new, settled) {
            (None, true) => {
                for id in promises.keys() {
                    self.outbox.push((*id, Request::Release(self.ballot)));
                }
                match current {
                    // A quorum holds the value committed (or nothing was
                    // ever written): done in this one round trip.
                    Some(p) if !self.quorum.reached(&committed_by) => {
                        self.round_trips += 1;
                        self.broadcast(Request::Commit(p.clone()));
                        self.phase = Phase::Committing(Commit {
                            proposal: p,
                            before,
                            written,
                            committed: committed_by,
                            releases: true,
                        });
                        Output::Wait
                    }
                    _ => {
                        self.phase = Phase::Done {
                            proposal: None,
                            committed: BTreeSet::new(),
                            releases: true,
                        };
                        Output::Done {
                            before,
                            written,
                            round_trips: self.round_trips,
                        }
                    }
                }
            }
            (new, _) => {
                let (value, deadline_ms) = match new {
                    Some(next) => (next.value, next.deadline_ms),
                    None => current.map_or((None, None), |p| (p.value, p.deadline_ms)),
                };
                let proposal = Proposal {
                    ballot: self.ballot,
                    deadline_ms: value.as_ref().and(deadline_ms),
                    value,
                };
                self.round_trips += 1;
                self.own.push((self.ballot, before.clone(), written));
                self.broadcast(Request::Accept(proposal.clone()));
                self.phase = Phase::Accepting {
                    proposal,
                    before,
                    written,
                    accepted: BTreeSet::new(),
                    promisers: promises.keys().copied().collect(),
                    refused: BTreeSet::new(),
                };
                Output::Wait
            }
        }
    }

    /// A quorum holds the decided value committed: the outcome.
    fn committed_at_quorum(&mut self) -> Output {
        let (Phase::Committing(c) | Phase::CommitBackoff(c)) =
            std::mem::replace(&mut self.phase, Phase::Failed)
        else {
            return Output::Wait;
        };
        self.phase = Phase::Done {
            proposal: Some(c.proposal),
            committed: c.committed,
            releases: c.releases,
        };
        Output::Done {
            before: c.before,
            written: c.written,
            round_trips: self.round_trips,
        }
    }

    fn end_round(&mut self, cause: Cause) -> Output {
        if let Phase::Accepting {
            written: true,
            promisers,
            refused,
            ..
        } = &self.phase
        {
            self.doubts.push(Doubt {
                ballot: self.ballot,
                promisers: promisers.clone(),
                refusers: refused.intersection(promisers).copied().collect(),
            });
        }
        if self.attempts >= self.limits.attempts_max {
            self.phase = Phase::Failed;
            return Output::Failed(RegisterError::Exhausted {
                attempts: self.attempts,
                last: cause,
            });
        }
        self.phase = Phase::BackingOff;
        Output::Backoff {
            attempt: self.attempts,
        }
    }

    /// Every replica that promised the round's ballot answered its accept.
    fn promisers_answered(&self) -> bool {
        match &self.phase {
            Phase::Accepting {
                promisers,
                accepted,
                refused,
                ..
            } => promisers
                .iter()
                .all(|id| accepted.contains(id) || refused.contains(id)),
            _ => true,
        }
    }

    /// `from` refused `ballot`: a promiser of a doubted accept refused it.
    fn note_refusal(&mut self, ballot: Ballot, from: NodeId) {
        for d in &mut self.doubts {
            if d.ballot == ballot && d.promisers.contains(&from) {
                d.refusers.insert(from);
            }
        }
    }

    /// An accept of this operation's write may have been taken without
    /// its knowing the outcome: some doubt is not cleared by every
    /// replica having promised and then refused its ballot (at most once
    /// delivery only, [`Limits::at_most_once`]).
    fn doubtful(&self) -> bool {
        let all: BTreeSet<NodeId> = self.quorum.replicas().into_iter().collect();
        self.doubts
            .iter()
            .any(|d| !(self.limits.at_most_once && d.refusers == all))
    }

    fn broadcast(&mut self, request: Request) {
        for id in self.quorum.replicas() {
            self.outbox.push((id, request.clone()));
        }
    }
}
