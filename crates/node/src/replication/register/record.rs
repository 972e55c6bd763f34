//! Where an acceptor's state for one key lives on disk, as pure rules: the
//! *Paxos record* (the promise and the accepted proposal) and the
//! committed proposal (the key's stored version), and which writes one
//! acceptor [`super::acceptor::step`] needs before its answer may leave.
//!
//! Byte layout of the record: `docs/FORMAT.md`, section "Paxos record".
//!
//! # Rules
//! - The committed proposal is not kept in the record: it is the key's
//!   stored version in the engine, its timestamp the ballot's time (an HLC
//!   timestamp, whose low `hlc::NODE_BITS` bits are the proposer's node
//!   id), so a plain read sees every decided value and nothing is stored
//!   twice. [`committed_of`] reads it back: `ts` is the ballot's time, the
//!   node id is the timestamp's low bits.
//! - The record is stored under the client's key in the node's register
//!   store, a namespace of its own (not the client's key space: no client
//!   key can name a record, and ranges, anti-entropy and backups, which
//!   walk the client's key space, never see one; a backup does not carry
//!   records, which only matter to rounds in flight).
//! - [`plan`] turns a step into at most two writes, in order: the
//!   committed version first (when the step changed it), then the record
//!   (a put while [`KeyState::holds_record`], else a delete: pruning).
//!   The answer is sent once both are done; which must be *durable*
//!   (fsynced) first:
//!   - the committed version, always;
//!   - a record that holds a newly accepted proposal, always (an accept
//!     answered and then forgotten could undo a decided value);
//!   - any other record write (a promise raised or released, an accepted
//!     proposal dropped because a commit superseded it, a prune) only when
//!     its promise is above `covered`, the node clock's durable
//!     reservation (`hlc`, "Reservation"). Below it, the write is applied
//!     and the answer sent without waiting for an fsync: a crash may lose
//!     it, and the restarted acceptor then refuses every ballot at or
//!     below the reservation its last run left ([`restart_floor`]), which
//!     is at least every promise it may have forgotten. Losing a prune or
//!     a superseded accepted proposal brings back a record whose accepted
//!     proposal is at or below the committed ballot: superseded, and the
//!     next commit prunes it. So the acceptor never answers below what it
//!     answered before, and a prepare (a promise) or a commit (besides
//!     the committed version) costs no fsync.
//!
//!   A crash between the two writes leaves the old record beside the new
//!   committed version: the same superseded case.
//! - A record that does not decode is corruption, reported with what was
//!   found ([`RecordError`]); the acceptor then answers an error, never a
//!   guess.

use super::acceptor::{KeyState, Proposal, Step};
use super::ballot::Ballot;
use crate::cluster::layout::NodeId;
use crate::peer::frame::Stamped;
use crate::peer::framing::{Cursor, put_bytes};
use ataman_engine::key::VALUE_BYTES_MAX;

/// First byte of every record: the format's version ("Paxos record").
pub const RECORD_FORMAT: u8 = 1;

/// Largest record, bytes: the format byte, a promise, an accepted proposal
/// with a value at `VALUE_BYTES_MAX` ("Paxos record").
pub const RECORD_BYTES_MAX: usize = 1 + 10 + 1 + 10 + 1 + 4 + VALUE_BYTES_MAX + 8;

/// Why a stored record cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The first byte names a format this node does not know.
    #[error("Paxos record format {found}, expected {expected}")]
    UnknownFormat {
        /// The byte found.
        found: u8,
        /// [`RECORD_FORMAT`].
        expected: u8,
    },
    /// The bytes do not decode; the text names the field.
    #[error("corrupt Paxos record: {0}")]
    Corrupt(String),
}

/// The record's bytes for `state` (its promise and accepted proposal).
pub fn encode(state: &KeyState) -> Vec<u8> {
    let mut out = vec![RECORD_FORMAT];
    put_ballot(&mut out, state.promised);
    match &state.accepted {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            put_ballot(&mut out, p.ballot);
            put_value(&mut out, p);
        }
    }
    debug_assert!(out.len() <= RECORD_BYTES_MAX);
    out
}

/// `has_value: u8` (0 absent, 1 a value, 2 a value with a deadline) |
/// value (u32 len + bytes) when 1 or 2 | deadline_ms: u64 LE when 2.
/// The register's wire codec writes a proposal's value the same way.
pub fn put_value(out: &mut Vec<u8>, p: &Proposal) {
    match (&p.value, p.deadline_ms) {
        (None, _) => out.push(0),
        (Some(v), None) => {
            out.push(1);
            put_bytes(out, v);
        }
        (Some(v), Some(d)) => {
            out.push(2);
            put_bytes(out, v);
            out.extend_from_slice(&d.to_le_bytes());
        }
    }
}

/// [`put_value`]'s fields back: the value and its deadline.
pub fn value(c: &mut Cursor<'_>) -> Result<(Option<Vec<u8>>, Option<u64>), String> {
    match c.u8("has_value")? {
        0 => Ok((None, None)),
        1 => Ok((Some(c.bytes("value", VALUE_BYTES_MAX)?), None)),
        2 => {
            let v = c.bytes("value", VALUE_BYTES_MAX)?;
            Ok((Some(v), Some(c.u64("deadline_ms")?)))
        }
        other => Err(format!("has_value: {other} is not 0, 1 or 2")),
    }
}

fn put_ballot(out: &mut Vec<u8>, b: Ballot) {
    out.extend_from_slice(&b.time.to_le_bytes());
    out.extend_from_slice(&b.node.to_le_bytes());
}

/// The acceptor's state from its record (none: no record) and the key's
/// stored version (none: never written); a record that holds nothing
/// beyond the committed version (its prune lost in a crash) reads as none
/// ([`as_stored`]) and stays until the key's next record write.
pub fn decode(record: Option<&[u8]>, stored: Option<&Stamped>) -> Result<KeyState, RecordError> {
    let committed = stored.map(committed_of);
    let Some(bytes) = record else {
        return Ok(KeyState {
            committed,
            ..KeyState::default()
        });
    };
    let mut c = Cursor::new(bytes);
    let format = c.u8("format").map_err(RecordError::Corrupt)?;
    if format != RECORD_FORMAT {
        return Err(RecordError::UnknownFormat {
            found: format,
            expected: RECORD_FORMAT,
        });
    }
    let (promised, accepted) = fields(&mut c).map_err(RecordError::Corrupt)?;
    // A record a crash brought back after its prune (the prune is not
    // synced) says nothing the committed version does not: read as none.
    Ok(normalized(KeyState {
        promised,
        accepted,
        committed,
    }))
}

fn fields(c: &mut Cursor<'_>) -> Result<(Ballot, Option<Proposal>), String> {
    let promised = ballot(c)?;
    let accepted = match c.u8("has_accepted")? {
        0 => None,
        1 => {
            let ballot = ballot(c)?;
            let (value, deadline_ms) = value(c)?;
            Some(Proposal {
                ballot,
                value,
                deadline_ms,
            })
        }
        other => return Err(format!("has_accepted: {other} is not 0 or 1")),
    };
    c.finish()?;
    Ok((promised, accepted))
}

fn ballot(c: &mut Cursor<'_>) -> Result<Ballot, String> {
    let time = c.u64("ballot time")?;
    let raw = c.take(2, "ballot node")?;
    Ok(Ballot {
        time,
        node: NodeId::from_le_bytes([raw[0], raw[1]]),
    })
}

/// The committed proposal a stored version stands for: its timestamp is
/// the ballot's time, whose low bits name the node (the "Rules").
pub fn committed_of(stored: &Stamped) -> Proposal {
    let mask = (1u64 << crate::hlc::NODE_BITS) - 1;
    Proposal {
        ballot: Ballot {
            time: stored.ts,
            node: (stored.ts & mask) as NodeId,
        },
        value: stored.value.clone(),
        deadline_ms: stored.value.as_ref().and(stored.deadline_ms),
    }
}

/// The stored version of a committed proposal, its deadline with it.
pub fn version_of(committed: &Proposal) -> Stamped {
    Stamped {
        ts: committed.ballot.time,
        value: committed.value.clone(),
        deadline_ms: committed.value.as_ref().and(committed.deadline_ms),
    }
}

/// `state` as it reads back once [`plan`]'s writes are done: a promise at
/// or below the committed ballot is not kept (the committed ballot is the
/// floor already, so every rule of `acceptor::step` decides the same).
pub fn as_stored(state: &KeyState) -> KeyState {
    normalized(state.clone())
}

/// [`as_stored`] of a state owned (no copy of its values).
fn normalized(mut state: KeyState) -> KeyState {
    if !state.holds_record() {
        state.promised = Ballot::ZERO;
    }
    state
}

/// A write one step needs, in the order [`plan`] gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Persist {
    /// Store this version of the key (the committed proposal).
    Committed(Stamped),
    /// Store the record (its bytes) in the register store; `sync`: durable
    /// before the answer (the "Rules").
    Record {
        /// The record's bytes ([`encode`]).
        bytes: Vec<u8>,
        /// Durable before the answer is sent.
        sync: bool,
    },
    /// Delete the key's record from the register store (pruned); never
    /// waits for an fsync (the "Rules").
    Prune,
}

impl Persist {
    /// True when the write must be durable before the step's answer.
    pub fn sync(&self) -> bool {
        match self {
            Persist::Committed(_) => true,
            Persist::Record { sync, .. } => *sync,
            Persist::Prune => false,
        }
    }
}

/// The ballot floor of an acceptor restarted after `reserved` was the
/// node clock's durable reservation (`<data-dir>/CLOCK` as the last run
/// left it; `None`: no reservation, so no promise was ever left
/// unsynced): every ballot below it is refused, so a promise the crash
/// lost is never undercut (the "Rules"). Its node id is the highest a
/// node can hold (the wire carries no other), so every ballot whose time
/// is at most the reservation is at most the floor; one equal to it is
/// the same proposer's ballot as any forgotten promise it could equal.
pub fn restart_floor(reserved: Option<u64>) -> Ballot {
    match reserved {
        None => Ballot::ZERO,
        Some(time) => Ballot {
            time,
            node: (crate::hlc::NODES_MAX - 1) as NodeId,
        },
    }
}

/// The writes `step` (taken from `before`) needs before its answer, in
/// order (the "Rules"); empty when nothing changed. `covered`: the
/// node clock's durable reservation (0: none, every record write synced).
pub fn plan(before: &KeyState, step: &Step, covered: u64) -> Vec<Persist> {
    let mut out = Vec::new();
    if !step.persist {
        return out;
    }
    let next = &step.next;
    if next.committed != before.committed
        && let Some(c) = &next.committed
    {
        out.push(Persist::Committed(version_of(c)));
    }
    // The record on disk is a function of the state: its bytes while the
    // state holds one, else nothing. It is written whenever that changes
    // (a commit can end a record without touching the promise).
    let stored = |state: &KeyState| state.holds_record().then(|| encode(state));
    let (was, now) = (stored(before), stored(next));
    if was != now {
        let accepts = next.accepted.is_some() && next.accepted != before.accepted;
        out.push(match now {
            Some(bytes) => Persist::Record {
                bytes,
                sync: accepts || next.promised.time > covered,
            },
            None => Persist::Prune,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::acceptor::{self, Mode, Request};
    use super::*;

    /// A ballot of node 3 whose time names it, as the node's clock stamps.
    fn b(time: u64) -> Ballot {
        Ballot {
            time: (time << crate::hlc::NODE_BITS) | 3,
            node: 3,
        }
    }

    /// A ballot as the worked example writes it.
    fn raw(time: u64) -> Ballot {
        Ballot { time, node: 3 }
    }

    /// The worked example of docs/FORMAT.md ("Paxos record"): promise
    /// (time 9, node 3), accepted (time 8, node 3) with value `v`.
    #[test]
    fn worked_example() {
        let state = KeyState {
            promised: raw(9),
            accepted: Some(Proposal {
                ballot: raw(8),
                value: Some(b"v".to_vec()),
                deadline_ms: None,
            }),
            committed: None,
        };
        let bytes: Vec<u8> = [
            &[1u8][..],
            &9u64.to_le_bytes(),
            &3u16.to_le_bytes(),
            &[1],
            &8u64.to_le_bytes(),
            &3u16.to_le_bytes(),
            &[1],
            &1u32.to_le_bytes(),
            b"v",
        ]
        .concat();
        assert_eq!(encode(&state), bytes);
        assert_eq!(decode(Some(&bytes), None), Ok(state));
    }

    /// A committed version round-trips through the engine's form: the
    /// ballot's node is the timestamp's low bits (as the HLC stamps).
    #[test]
    fn committed_is_the_stored_version() {
        let ts = (77 << crate::hlc::NODE_BITS) | 3;
        let p = Proposal {
            ballot: Ballot { time: ts, node: 3 },
            value: None,
            deadline_ms: None,
        };
        assert_eq!(committed_of(&version_of(&p)), p);
        let state = decode(None, Some(&version_of(&p)));
        assert_eq!(state.map(|s| s.committed), Ok(Some(p)));
    }

    /// A whole round on one acceptor: prepare and accept store a record,
    /// the commit stores the value first and prunes the record after.
    /// With the promise covered by the clock's durable reservation only
    /// the accept's record and the committed version wait for an fsync.
    #[test]
    fn a_round_persists_then_prunes() {
        for covered in [0, b(5).time - 1, b(5).time, u64::MAX] {
            a_round_at(covered, covered >= b(5).time);
        }
    }

    fn a_round_at(covered: u64, promise_covered: bool) {
        let s0 = KeyState::default();
        let prepare = acceptor::step(&s0, &Request::Prepare(b(5)), Mode::Sound);
        assert_eq!(
            plan(&s0, &prepare, covered),
            vec![Persist::Record {
                bytes: encode(&prepare.next),
                sync: !promise_covered
            }],
            "covered {covered}"
        );
        let proposal = Proposal {
            ballot: b(5),
            value: Some(b"x".to_vec()),
            deadline_ms: None,
        };
        let accept = acceptor::step(
            &prepare.next,
            &Request::Accept(proposal.clone()),
            Mode::Sound,
        );
        assert_eq!(
            plan(&prepare.next, &accept, covered),
            vec![Persist::Record {
                bytes: encode(&accept.next),
                sync: true
            }],
            "an accept is durable before its answer, covered or not"
        );
        let commit = acceptor::step(
            &accept.next,
            &Request::Commit(proposal.clone()),
            Mode::Sound,
        );
        let writes = plan(&accept.next, &commit, covered);
        assert_eq!(
            writes,
            vec![Persist::Committed(version_of(&proposal)), Persist::Prune]
        );
        assert_eq!(
            writes.iter().map(Persist::sync).collect::<Vec<_>>(),
            vec![true, false]
        );
        let dup = acceptor::step(
            &commit.next,
            &Request::Commit(proposal.clone()),
            Mode::Sound,
        );
        assert_eq!(plan(&commit.next, &dup, covered), vec![]);
        let stored = decode(None, Some(&version_of(&proposal)));
        assert_eq!(stored, Ok(as_stored(&commit.next)));
        assert_eq!(stored.map(|s| s.floor()), Ok(commit.next.floor()));
    }

    /// Regression (found by the simulation): a commit of the promised
    /// ballot that this acceptor never accepted (it missed the Accept)
    /// leaves the promise as it was but ends the record; the plan compared
    /// only the promise and the accepted proposal, so the record stayed on
    /// disk, stale, for ever.
    #[test]
    fn commit_of_the_promise_prunes_without_an_accept() {
        let promised = acceptor::step(&KeyState::default(), &Request::Prepare(b(5)), Mode::Sound);
        let proposal = Proposal {
            ballot: b(5),
            value: Some(b"x".to_vec()),
            deadline_ms: None,
        };
        let commit = acceptor::step(
            &promised.next,
            &Request::Commit(proposal.clone()),
            Mode::Sound,
        );
        assert_eq!(commit.next.promised, promised.next.promised);
        assert_eq!(
            plan(&promised.next, &commit, 0),
            vec![Persist::Committed(version_of(&proposal)), Persist::Prune]
        );
    }

    /// A record that does not decode is a typed error naming what is wrong.
    #[test]
    fn bad_records_are_errors() {
        assert_eq!(
            decode(Some(&[2]), None),
            Err(RecordError::UnknownFormat {
                found: 2,
                expected: RECORD_FORMAT
            })
        );
        assert!(matches!(
            decode(Some(&[1, 0]), None),
            Err(RecordError::Corrupt(_))
        ));
        let mut ok = encode(&KeyState::default());
        ok.push(0);
        assert!(
            matches!(decode(Some(&ok), None), Err(RecordError::Corrupt(why)) if why.contains("after the last field"))
        );
        let mut bad = encode(&KeyState::default());
        *bad.last_mut().unwrap_or(&mut 0) = 7;
        assert!(
            matches!(decode(Some(&bad), None), Err(RecordError::Corrupt(why)) if why.contains("has_accepted"))
        );
    }
}
