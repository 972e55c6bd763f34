//! The acceptor of the per-key consensus register: one replica's promise
//! and accept state for one key, as pure rules (a request in, the next
//! state and an answer out).
//!
//! The register is CASPaxos (Rystsov 2018) with a commit message: each
//! key is one Paxos register, no log. An acceptor holds, per key, a
//! [`KeyState`]: the highest ballot it promised, the proposal it accepted
//! last (not known committed yet) and the newest proposal it knows
//! committed (in the node, the key's stored version). The *Paxos record*
//! is the first two; it is pruned (held no longer) once it says nothing
//! the committed proposal does not ([`KeyState::holds_record`]).
//!
//! # Rules
//! The acceptor's *floor* is the highest of its promise, its accepted
//! ballot and its committed ballot: a ballot at or below the floor of
//! another proposer can no longer win here.
//! - `Prepare(b)`: if `b` is at least the floor (at least: a duplicate of
//!   the same proposer's prepare is answered again), promise `b` and answer
//!   `Promise` with the accepted and committed proposals (the current value
//!   piggy-backed); else answer `Refused` with the floor.
//! - `Accept(b, v)`: if `b` is at least the floor (and `b` is not the
//!   ballot of a proposal it holds with another value: one ballot has one
//!   value), accept it (the promise
//!   becomes `b`) and answer `Accepted`; else `Refused` with the floor.
//! - `Commit(b, v)`: `v` was accepted by a quorum (decided). Keep it as
//!   the committed proposal if it is newer than the one held; drop an
//!   accepted proposal at or below it (superseded); answer `Committed`.
//! - `Release(b)`: the proposer of `b` (a read that decided in one round)
//!   will send nothing more at `b`. If the promise is still `b`, it falls
//!   back to nothing: the same state as if the prepare had been lost, so
//!   sound; no answer.
//! - Every step that changes the state says [`Step::persist`]: the caller
//!   stores the new state BEFORE it sends the answer ("persist then
//!   reply"); an accepted proposal and a committed one are durable (the
//!   WAL, fsync) by then, a promise only as far as the node's clock
//!   reservation covers it (`super::record`, "Rules"). A crash between
//!   the two loses the answer, never an accept already answered; a
//!   promise it loses is covered by the restarted acceptor's floor
//!   ([`step_above`], `record::restart_floor`): the acceptor refuses
//!   every ballot up to the clock reservation its last run left, which
//!   is at least every ballot it promised.
//! - Pruning: after a `Commit` every replica acknowledged, no replica
//!   holds a record for that ballot any more (each dropped its accepted
//!   proposal at the commit, and its promise is at most the committed
//!   ballot unless a newer proposer came). A replica that missed the
//!   commit holds its record until the next commit of the key reaches it
//!   (the proposer's aftermath names it, [`super::proposer`]).
//!
//! [`Mode::PlantedAcceptsBelowPromise`] (the simulation's planted bug
//! `register-accepts-below-promise`): `Accept` ignores the promise, so a
//! proposer that lost the prepare race still decides.

use super::ballot::Ballot;

/// A register value: the key's bytes, or absent (never written, deleted).
pub type Value = Option<Vec<u8>>;

/// A value proposed under a ballot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The proposer's ballot.
    pub ballot: Ballot,
    /// The value.
    pub value: Value,
    /// The value's absolute deadline, Unix milliseconds (`None`: it never
    /// expires; always `None` when the value is absent), carried with it
    /// into the key's stored version.
    pub deadline_ms: Option<u64>,
}

/// One acceptor's state for one key (durable: see the "Rules").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyState {
    /// The highest ballot promised (ZERO: none, or released).
    pub promised: Ballot,
    /// The proposal accepted last and not known committed.
    pub accepted: Option<Proposal>,
    /// The newest proposal known decided (the key's stored version).
    pub committed: Option<Proposal>,
}

impl KeyState {
    /// The ballot another proposer must reach: promise, accepted or committed.
    pub fn floor(&self) -> Ballot {
        let accepted = self.accepted.as_ref().map_or(Ballot::ZERO, |p| p.ballot);
        self.promised.max(accepted).max(self.committed_ballot())
    }

    /// The committed proposal's ballot (ZERO: none).
    pub fn committed_ballot(&self) -> Ballot {
        self.committed.as_ref().map_or(Ballot::ZERO, |p| p.ballot)
    }

    /// True while this replica holds a Paxos record for the key beyond its
    /// committed value (a promise above it, or an accepted proposal).
    pub fn holds_record(&self) -> bool {
        self.accepted.is_some() || self.promised > self.committed_ballot()
    }
}

/// A proposer's request to an acceptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Phase 1: promise this ballot, answer with the current state.
    Prepare(Ballot),
    /// Phase 2: accept this proposal.
    Accept(Proposal),
    /// The proposal was accepted by a quorum.
    Commit(Proposal),
    /// The proposer of this ballot will send nothing more under it.
    Release(Ballot),
}

/// An acceptor's answer; each names the ballot it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// `Prepare(ballot)` promised; the acceptor's accepted and committed
    /// proposals.
    Promise {
        /// The ballot promised.
        ballot: Ballot,
        /// The proposal accepted last, not known committed.
        accepted: Option<Proposal>,
        /// The newest proposal known committed.
        committed: Option<Proposal>,
    },
    /// `Accept` of this ballot done.
    Accepted(Ballot),
    /// `Commit` of this ballot stored.
    Committed(Ballot),
    /// A `Prepare` or `Accept` of `ballot` refused: the acceptor's floor is
    /// `floor` (the proposer retries above it).
    Refused {
        /// The ballot refused.
        ballot: Ballot,
        /// The acceptor's floor.
        floor: Ballot,
    },
}

/// How [`step`] decides `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The "Rules".
    #[default]
    Sound,
    /// A planted bug: `Accept` checks only the accepted and committed
    /// ballots, not the promise.
    PlantedAcceptsBelowPromise,
}

/// What the acceptor does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The key's state after the request.
    pub next: KeyState,
    /// `next` differs from the state before: make it durable before
    /// sending `answer`.
    pub persist: bool,
    /// The answer to send (after persisting), if any.
    pub answer: Option<Answer>,
}

/// The acceptor's rules: `state` and `request` in, the [`Step`] out.
pub fn step(state: &KeyState, request: &Request, mode: Mode) -> Step {
    step_above(state, request, mode, Ballot::ZERO)
}

/// [`step`] on an acceptor that refuses every ballot below `restart`
/// besides its state's floor (`record::restart_floor`: a restarted
/// acceptor's promises that were not synced are all at or below it).
pub fn step_above(state: &KeyState, request: &Request, mode: Mode, restart: Ballot) -> Step {
    let mut next = state.clone();
    let floor = state.floor().max(restart);
    let refused = |ballot: Ballot| Answer::Refused { ballot, floor };
    let answer = match request {
        Request::Prepare(ballot) => {
            if *ballot >= floor {
                next.promised = *ballot;
                Some(Answer::Promise {
                    ballot: *ballot,
                    accepted: next.accepted.clone(),
                    committed: next.committed.clone(),
                })
            } else {
                Some(refused(*ballot))
            }
        }
        Request::Accept(proposal) => {
            let bar = match mode {
                Mode::Sound => floor,
                Mode::PlantedAcceptsBelowPromise => {
                    let accepted = state.accepted.as_ref().map_or(Ballot::ZERO, |p| p.ballot);
                    accepted.max(state.committed_ballot())
                }
            };
            // One ballot has one value: an accept of a ballot this acceptor
            // holds (accepted or committed) with another value is a reused
            // ballot (`proposer`, "Rules"), refused whatever the floor.
            let reused = [state.accepted.as_ref(), state.committed.as_ref()]
                .into_iter()
                .flatten()
                .any(|held| held.ballot == proposal.ballot && held != proposal);
            if proposal.ballot >= bar && !reused {
                next.promised = next.promised.max(proposal.ballot);
                next.accepted = Some(proposal.clone());
                Some(Answer::Accepted(proposal.ballot))
            } else {
                Some(refused(proposal.ballot))
            }
        }
        Request::Commit(proposal) => {
            if proposal.ballot > state.committed_ballot() {
                next.committed = Some(proposal.clone());
            }
            if next
                .accepted
                .as_ref()
                .is_some_and(|a| a.ballot <= next.committed_ballot())
            {
                next.accepted = None;
            }
            Some(Answer::Committed(proposal.ballot))
        }
        Request::Release(ballot) => {
            let accepted_here = state.accepted.as_ref().is_some_and(|a| a.ballot == *ballot);
            if state.promised == *ballot && !accepted_here {
                next.promised = Ballot::ZERO;
            }
            None
        }
    };
    debug_assert!(
        next.committed_ballot() >= state.committed_ballot(),
        "the committed proposal never goes back"
    );
    let persist = next != *state;
    Step {
        next,
        persist,
        answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(time: u64) -> Ballot {
        Ballot::new(time, 1)
    }

    fn p(time: u64, value: &[u8]) -> Proposal {
        Proposal {
            ballot: b(time),
            value: Some(value.to_vec()),
            deadline_ms: None,
        }
    }

    fn run(state: &KeyState, request: Request) -> Step {
        step(state, &request, Mode::Sound)
    }

    /// A prepare promises and returns the current state; a lower one is
    /// refused with the floor; a duplicate is answered again.
    #[test]
    fn prepare_promises_once_and_refuses_lower() {
        let s0 = KeyState {
            committed: Some(p(3, b"c")),
            ..KeyState::default()
        };
        let s1 = run(&s0, Request::Prepare(b(5)));
        assert!(s1.persist);
        assert_eq!(
            s1.answer,
            Some(Answer::Promise {
                ballot: b(5),
                accepted: None,
                committed: Some(p(3, b"c")),
            })
        );
        let dup = run(&s1.next, Request::Prepare(b(5)));
        assert!(!dup.persist);
        assert!(matches!(dup.answer, Some(Answer::Promise { .. })));
        let low = run(&s1.next, Request::Prepare(b(4)));
        assert!(!low.persist);
        assert_eq!(
            low.answer,
            Some(Answer::Refused {
                ballot: b(4),
                floor: b(5)
            })
        );
        assert_eq!(
            run(&s0, Request::Prepare(b(2))).answer,
            Some(Answer::Refused {
                ballot: b(2),
                floor: b(3)
            })
        );
    }

    /// An accept below the promise is refused; the planted mode takes it
    /// (the negative control of the simulation's check).
    #[test]
    fn accept_below_promise_is_refused() {
        let promised = run(&KeyState::default(), Request::Prepare(b(9))).next;
        let low = run(&promised, Request::Accept(p(7, b"x")));
        assert_eq!(
            low.answer,
            Some(Answer::Refused {
                ballot: b(7),
                floor: b(9)
            })
        );
        assert_eq!(low.next, promised);
        let planted = step(
            &promised,
            &Request::Accept(p(7, b"x")),
            Mode::PlantedAcceptsBelowPromise,
        );
        assert_eq!(planted.answer, Some(Answer::Accepted(b(7))));
        let ok = run(&promised, Request::Accept(p(9, b"y")));
        assert!(ok.persist);
        assert_eq!(ok.answer, Some(Answer::Accepted(b(9))));
        assert_eq!(ok.next.accepted, Some(p(9, b"y")));
    }

    /// A commit supersedes the accepted proposal and prunes the record; an
    /// older commit changes nothing but is acknowledged.
    #[test]
    fn commit_prunes_the_record() {
        let s = run(&KeyState::default(), Request::Prepare(b(4))).next;
        let s = run(&s, Request::Accept(p(4, b"v"))).next;
        assert!(s.holds_record());
        let c = run(&s, Request::Commit(p(4, b"v")));
        assert!(c.persist);
        assert_eq!(c.answer, Some(Answer::Committed(b(4))));
        assert!(!c.next.holds_record());
        assert_eq!(c.next.committed, Some(p(4, b"v")));
        let old = run(&c.next, Request::Commit(p(2, b"o")));
        assert!(!old.persist);
        assert_eq!(old.next.committed, Some(p(4, b"v")));
    }

    /// A read's release drops its promise only while it is the latest one.
    #[test]
    fn release_drops_only_its_own_promise() {
        let committed = KeyState {
            committed: Some(p(2, b"c")),
            ..KeyState::default()
        };
        let s = run(&committed, Request::Prepare(b(6))).next;
        assert!(s.holds_record());
        let r = run(&s, Request::Release(b(6)));
        assert_eq!(r.answer, None);
        assert!(r.persist);
        assert!(!r.next.holds_record());
        assert_eq!(r.next.floor(), b(2));
        let newer = run(&s, Request::Prepare(b(8))).next;
        let r = run(&newer, Request::Release(b(6)));
        assert!(!r.persist);
        assert_eq!(r.next.promised, b(8));
    }

    /// A restarted acceptor (its unsynced promises maybe lost) refuses
    /// every ballot up to its restart floor, prepare and accept alike,
    /// answering the floor so the proposer retries above it; above it
    /// the rules are the same as without one. Negative control: with no
    /// restart floor, the accept of a ballot below a promise the crash
    /// forgot is taken.
    #[test]
    fn a_restart_floor_covers_forgotten_promises() {
        let restart = crate::replication::register::record::restart_floor(Some(10));
        let forgot = KeyState::default(); // promised b(9) before the crash, unsynced
        for request in [Request::Prepare(b(9)), Request::Accept(p(9, b"x"))] {
            let s = step_above(&forgot, &request, Mode::Sound, restart);
            assert!(!s.persist);
            assert!(matches!(s.answer, Some(Answer::Refused { floor, .. }) if floor == restart));
            let at = Request::Prepare(Ballot::new(10, 1));
            assert!(matches!(
                step_above(&forgot, &at, Mode::Sound, restart).answer,
                Some(Answer::Refused { .. })
            ));
        }
        let above = Ballot::above(restart, 3, 1);
        let s = step_above(&forgot, &Request::Prepare(above), Mode::Sound, restart);
        assert_eq!(s.next.promised, above);
        let accept = Request::Accept(Proposal {
            ballot: above,
            value: None,
            deadline_ms: None,
        });
        let a = step_above(&s.next, &accept, Mode::Sound, restart);
        assert_eq!(a.answer, Some(Answer::Accepted(above)));
        // A commit is not a ballot race: taken whatever the floor.
        let c = step_above(&forgot, &Request::Commit(p(9, b"d")), Mode::Sound, restart);
        assert_eq!(c.answer, Some(Answer::Committed(b(9))));
        // Without the floor the forgotten promise is undercut.
        let undercut = step(&forgot, &Request::Accept(p(8, b"y")), Mode::Sound);
        assert_eq!(undercut.answer, Some(Answer::Accepted(b(8))));
    }

    /// An accept of a ballot the acceptor holds with another value (a
    /// reused ballot) is refused, accepted or committed; the same proposal
    /// again is a duplicate and answered again.
    #[test]
    fn one_ballot_has_one_value() {
        let committed = KeyState {
            promised: b(5),
            committed: Some(p(5, b"a")),
            ..KeyState::default()
        };
        let other = run(&committed, Request::Accept(p(5, b"b")));
        assert!(matches!(other.answer, Some(Answer::Refused { .. })));
        assert!(!other.persist);
        let accepted = run(&KeyState::default(), Request::Accept(p(5, b"a"))).next;
        let other = run(&accepted, Request::Accept(p(5, b"b")));
        assert!(matches!(other.answer, Some(Answer::Refused { .. })));
        let dup = run(&accepted, Request::Accept(p(5, b"a")));
        assert_eq!(dup.answer, Some(Answer::Accepted(b(5))));
        assert!(!dup.persist);
    }
}
