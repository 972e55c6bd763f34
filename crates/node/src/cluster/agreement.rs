//! Agreement on the next layout: single-decree Paxos, one instance per
//! version number.
//!
//! Version `N + 1` is chosen among the members of version `N`. Each member
//! is an acceptor of the slot `N + 1`; any node that received a
//! `POST /v0/layout` is a proposer. Pure logic: messages in, replies and
//! decisions out; the caller persists the acceptor's state (its
//! [`Acceptor::encode`] bytes) before sending any reply that changed it.
//!
//! # Rules
//! - A ballot is `(round, node id)`, ordered by round then node id, so two
//!   proposers never share one.
//! - Phase 1: the proposer sends `prepare(slot, ballot)`. An acceptor of
//!   that slot promises (and returns what it accepted, if anything) when
//!   the ballot is at least its promise, and rejects it otherwise, naming
//!   its promise.
//! - Phase 2: after promises from a majority of the slot's voters, the
//!   proposer asks `accept(slot, ballot, value)` where the value is the
//!   one accepted under the highest ballot among the promises, or its own
//!   when none was. An acceptor accepts when the ballot is at least its
//!   promise.
//! - Once a majority accepted one ballot, its value is chosen. The
//!   proposer answers its client 200 if the chosen value is its own, 409
//!   if another one (so of two concurrent proposals for one slot with
//!   different values, exactly one wins); rejections that leave no
//!   majority possible mean a retry with a higher round (bounded by the
//!   caller); failures that leave no majority possible mean 503.
//! - An acceptor whose slot is past the one asked (its node already
//!   learned the version) answers [`AcceptorReply::Decided`]: the proposer
//!   was stale (409). One whose slot is behind answers
//!   [`AcceptorReply::Behind`] and counts as failed until it learns.
//!
//! # Invariants
//! - An acceptor's promise only grows within a slot; it accepts nothing
//!   below its promise; its slot only grows.
//! - Chosen is stable: once a majority accepted `(b, v)`, every higher
//!   ballot's phase 2 carries `v` (the classic Paxos argument: any majority
//!   of promises meets the accepting majority, and the highest accepted
//!   ballot among them carries `v`).

use super::layout::{Layout, LayoutDecodeError};
use std::collections::BTreeMap;

/// The first four bytes of an encoded acceptor state.
pub const ACCEPTOR_MAGIC: [u8; 4] = *b"ATPX";
/// The format byte of an encoded acceptor state.
pub const ACCEPTOR_FORMAT: u8 = 1;

/// A proposal number: round first, then the proposer's node id.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    /// The round; a retry takes one above every promise it met.
    pub round: u64,
    /// The proposer's node id (the placement seed of its URL).
    pub node: u64,
}

/// An acceptor's reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptorReply {
    /// Phase 1 granted; what this acceptor accepted in the slot, if anything.
    Promise {
        /// The ballot promised.
        ballot: Ballot,
        /// The highest-ballot value accepted so far.
        accepted: Option<(Ballot, Layout)>,
    },
    /// Phase 2 granted.
    Accepted {
        /// The ballot accepted.
        ballot: Ballot,
    },
    /// Refused: the acceptor promised this higher ballot.
    Reject {
        /// Its promise.
        promised: Ballot,
    },
    /// The slot was decided already: the acceptor's node is at this version.
    Decided {
        /// The node's committed version.
        version: u64,
    },
    /// The acceptor is behind: its slot is this one (it must learn first).
    Behind {
        /// Its slot.
        slot: u64,
    },
}

/// One node's acceptor state for the next version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acceptor {
    /// The version being decided (committed + 1).
    pub slot: u64,
    /// The highest ballot promised in this slot.
    pub promised: Ballot,
    /// The highest-ballot value accepted in this slot.
    pub accepted: Option<(Ballot, Layout)>,
}

/// Why bytes are not an acceptor state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptorDecodeError {
    /// Too short, wrong magic or format, or bytes left over.
    #[error("acceptor state malformed at byte {0}")]
    Malformed(usize),
    /// The checksum does not match.
    #[error("acceptor state checksum mismatch: expected {expected:#010x}, got {got:#010x}")]
    Checksum {
        /// Stored.
        expected: u32,
        /// Computed.
        got: u32,
    },
    /// The accepted layout is bad.
    #[error("acceptor state's layout: {0}")]
    Layout(LayoutDecodeError),
}

impl Acceptor {
    /// A fresh acceptor for `slot` (the node's committed version + 1).
    pub fn new(slot: u64) -> Self {
        Acceptor {
            slot,
            promised: Ballot::default(),
            accepted: None,
        }
    }

    fn check_slot(&self, slot: u64) -> Option<AcceptorReply> {
        if slot < self.slot {
            Some(AcceptorReply::Decided {
                version: self.slot - 1,
            })
        } else if slot > self.slot {
            Some(AcceptorReply::Behind { slot: self.slot })
        } else {
            None
        }
    }

    /// Phase 1. Returns the reply and whether the state changed (then it
    /// must be made durable before the reply is sent).
    pub fn on_prepare(&mut self, slot: u64, ballot: Ballot) -> (AcceptorReply, bool) {
        if let Some(reply) = self.check_slot(slot) {
            return (reply, false);
        }
        if ballot < self.promised {
            return (
                AcceptorReply::Reject {
                    promised: self.promised,
                },
                false,
            );
        }
        let changed = ballot > self.promised;
        self.promised = ballot;
        (
            AcceptorReply::Promise {
                ballot,
                accepted: self.accepted.clone(),
            },
            changed,
        )
    }

    /// Phase 2. Returns the reply and whether the state changed.
    pub fn on_accept(&mut self, slot: u64, ballot: Ballot, value: Layout) -> (AcceptorReply, bool) {
        if let Some(reply) = self.check_slot(slot) {
            return (reply, false);
        }
        if ballot < self.promised || value.version != slot {
            return (
                AcceptorReply::Reject {
                    promised: self.promised,
                },
                false,
            );
        }
        let before = (self.promised, self.accepted.clone());
        self.promised = ballot;
        self.accepted = Some((ballot, value));
        let changed = before != (self.promised, self.accepted.clone());
        (AcceptorReply::Accepted { ballot }, changed)
    }

    /// The node committed `version`: the next slot starts fresh (an older
    /// or equal slot is left as it is). Returns whether the state changed.
    pub fn advance(&mut self, version: u64) -> bool {
        if version < self.slot {
            return false;
        }
        *self = Acceptor::new(version + 1);
        true
    }

    /// `ATPX`, format, slot, promised (round, node), accepted flag, then
    /// the accepted ballot and the layout's length-prefixed bytes; crc32c.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&ACCEPTOR_MAGIC);
        out.push(ACCEPTOR_FORMAT);
        out.extend_from_slice(&self.slot.to_le_bytes());
        out.extend_from_slice(&self.promised.round.to_le_bytes());
        out.extend_from_slice(&self.promised.node.to_le_bytes());
        match &self.accepted {
            None => out.push(0),
            Some((ballot, layout)) => {
                out.push(1);
                out.extend_from_slice(&ballot.round.to_le_bytes());
                out.extend_from_slice(&ballot.node.to_le_bytes());
                let bytes = layout.encode();
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                out.extend_from_slice(&bytes);
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// An acceptor state from [`Acceptor::encode`]'s bytes.
    pub fn decode(bytes: &[u8]) -> Result<Acceptor, AcceptorDecodeError> {
        let Some(body_len) = bytes.len().checked_sub(4) else {
            return Err(AcceptorDecodeError::Malformed(bytes.len()));
        };
        let mut stored = [0u8; 4];
        stored.copy_from_slice(&bytes[body_len..]);
        let expected = u32::from_le_bytes(stored);
        let got = crc32c::crc32c(&bytes[..body_len]);
        if expected != got {
            return Err(AcceptorDecodeError::Checksum { expected, got });
        }
        let body = &bytes[..body_len];
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], AcceptorDecodeError> {
            let end = at
                .checked_add(n)
                .filter(|&e| e <= body.len())
                .ok_or(AcceptorDecodeError::Malformed(at))?;
            let out = &body[at..end];
            at = end;
            Ok(out)
        };
        let u64_of = |b: &[u8]| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        };
        if take(4)? != ACCEPTOR_MAGIC || take(1)? != [ACCEPTOR_FORMAT] {
            return Err(AcceptorDecodeError::Malformed(0));
        }
        let slot = u64_of(take(8)?);
        let promised = Ballot {
            round: u64_of(take(8)?),
            node: u64_of(take(8)?),
        };
        let accepted = match take(1)? {
            [0] => None,
            [1] => {
                let ballot = Ballot {
                    round: u64_of(take(8)?),
                    node: u64_of(take(8)?),
                };
                let mut len = [0u8; 4];
                len.copy_from_slice(take(4)?);
                let layout = Layout::decode(take(u32::from_le_bytes(len) as usize)?)
                    .map_err(AcceptorDecodeError::Layout)?;
                Some((ballot, layout))
            }
            _ => return Err(AcceptorDecodeError::Malformed(at)),
        };
        if at != body.len() {
            return Err(AcceptorDecodeError::Malformed(at));
        }
        Ok(Acceptor {
            slot,
            promised,
            accepted,
        })
    }
}

/// What a proposer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing yet: wait for more replies.
    Wait,
    /// Phase 1 reached a majority: send `accept(slot, ballot, value)` to every voter.
    Accept {
        /// This proposal's ballot.
        ballot: Ballot,
        /// The value phase 2 carries (maybe another proposer's).
        value: Layout,
    },
    /// A majority accepted: `value` is chosen for the slot; `own` when it
    /// is the value this proposer was asked to propose (200; else 409).
    Chosen {
        /// The chosen layout.
        value: Layout,
        /// True if it is this proposer's own value.
        own: bool,
    },
    /// Rejections leave no majority: retry with a round above `above`.
    Retry {
        /// The highest promise met.
        above: Ballot,
    },
    /// The slot was decided already (a voter is at `version`): 409.
    Stale {
        /// The newest version a voter named.
        version: u64,
    },
    /// Failures leave no majority: 503.
    NoMajority,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prepare,
    Accept,
    Done,
}

/// One proposal for one slot under one ballot.
#[derive(Debug, Clone)]
pub struct Proposer {
    slot: u64,
    ballot: Ballot,
    own: Layout,
    voters: Vec<String>,
    phase: Phase,
    value: Option<Layout>,
    promises: BTreeMap<String, Option<(Ballot, Layout)>>,
    accepts: Vec<String>,
    refused: BTreeMap<String, Option<Ballot>>,
}

impl Proposer {
    /// Proposes `own` (version `slot`) to `voters` (the members of version
    /// `slot - 1`) under `ballot`.
    pub fn new(ballot: Ballot, own: Layout, voters: Vec<String>) -> Self {
        assert!(!voters.is_empty(), "a slot has voters");
        Proposer {
            slot: own.version,
            ballot,
            own,
            voters,
            phase: Phase::Prepare,
            value: None,
            promises: BTreeMap::new(),
            accepts: Vec::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Voters needed: a majority.
    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    /// The slot proposed for.
    pub fn slot(&self) -> u64 {
        self.slot
    }

    /// The ballot.
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// The voters.
    pub fn voters(&self) -> &[String] {
        &self.voters
    }

    fn refusals(&mut self) -> Step {
        let possible = self.voters.len() - self.refused.len();
        let have = match self.phase {
            Phase::Prepare => self.promises.len(),
            _ => self.accepts.len(),
        };
        debug_assert!(have <= possible);
        if possible >= self.majority() {
            return Step::Wait;
        }
        self.phase = Phase::Done;
        match self.refused.values().flatten().max() {
            Some(&above) => Step::Retry { above },
            None => Step::NoMajority,
        }
    }

    /// Voter `from` replied (`None`: it failed to answer).
    pub fn on_reply(&mut self, from: &str, reply: Option<AcceptorReply>) -> Step {
        if self.phase == Phase::Done
            || !self.voters.iter().any(|v| v == from)
            || self.refused.contains_key(from)
        {
            return Step::Wait;
        }
        match (self.phase, reply) {
            (_, Some(AcceptorReply::Decided { version })) if version >= self.slot => {
                self.phase = Phase::Done;
                Step::Stale { version }
            }
            (_, Some(AcceptorReply::Reject { promised })) => {
                self.refused.insert(from.to_owned(), Some(promised));
                self.refusals()
            }
            (Phase::Prepare, Some(AcceptorReply::Promise { ballot, accepted }))
                if ballot == self.ballot =>
            {
                self.promises.insert(from.to_owned(), accepted);
                if self.promises.len() < self.majority() {
                    return Step::Wait;
                }
                let value = self
                    .promises
                    .values()
                    .flatten()
                    .max_by_key(|(b, _)| *b)
                    .map_or_else(|| self.own.clone(), |(_, v)| v.clone());
                self.phase = Phase::Accept;
                self.value = Some(value.clone());
                Step::Accept {
                    ballot: self.ballot,
                    value,
                }
            }
            (Phase::Accept, Some(AcceptorReply::Accepted { ballot })) if ballot == self.ballot => {
                if !self.accepts.iter().any(|a| a == from) {
                    self.accepts.push(from.to_owned());
                }
                if self.accepts.len() < self.majority() {
                    return Step::Wait;
                }
                self.phase = Phase::Done;
                let value = self.value.clone().unwrap_or_else(|| self.own.clone());
                let own = value == self.own;
                Step::Chosen { value, own }
            }
            // A promise answered late in phase 2 changes nothing; anything
            // else (a failure, a node behind, a reply to another ballot) is
            // a voter lost to this proposal.
            (Phase::Accept, Some(AcceptorReply::Promise { .. })) => Step::Wait,
            _ => {
                self.refused.insert(from.to_owned(), None);
                self.refusals()
            }
        }
    }
}

#[cfg(test)]
#[path = "agreement_tests.rs"]
mod tests;
