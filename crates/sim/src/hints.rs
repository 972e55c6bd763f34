//! A simulated node's hints: writes a replica did not acknowledge, kept by
//! the coordinator and delivered when the replica answers again.
//!
//! The real store (`ataman_node::hints::HintStore`) is a second engine
//! whose `add` returns before its fsync. Here the hints are an in-memory
//! list with the same delivery rule as the real node's thread 0
//! (`replication::Replicator::deliver_hints`): every tick, for each peer
//! with hints pending and no round in flight, up to
//! [`HINT_BATCH_MAX`](ataman_node::replication::HINT_BATCH_MAX) hints are
//! sent in sequence order; an acknowledged hint is removed; a round ends
//! when all its hints were answered or at the replication deadline, and
//! what was not acknowledged is sent again by a later round.
//!
//! What survives a crash follows the hint store's WAL mode (the node's):
//! with `fsync` every hint survives (simplification: the real store makes
//! a hint durable one group commit after `add`); with `write` they
//! survive kill -9 but not power loss; with `none` no crash. Hints can also
//! be dropped on purpose (the store's byte bound), see
//! [`Hints::drop_all`].

use crate::config::CrashKind;
use crate::node::SimNode;
use ataman_engine::WalMode;
use ataman_node::peer::frame::Version;
use std::collections::{BTreeMap, BTreeSet};

/// Hints one node keeps, all peers together; more are dropped (counted),
/// as the real store drops hints at `--hints-bytes-max`.
pub const HINTS_MAX: usize = 100_000;

/// One hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The key.
    pub key: Vec<u8>,
    /// The missed version.
    pub version: Version,
}

/// A delivery round just started: send these hints to `peer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundStart {
    /// The peer.
    pub peer: usize,
    /// The round's id (its deadline names it).
    pub round: u64,
    /// The hints, `(seq, hint)`, in sequence order.
    pub hints: Vec<(u64, Hint)>,
}

/// A delivery round to one peer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Round {
    id: u64,
    outstanding: BTreeSet<u64>,
}

/// A node's hints and delivery rounds.
#[derive(Debug, Default)]
pub struct Hints {
    /// Pending hints by (peer, seq).
    pending: BTreeMap<(usize, u64), Hint>,
    next_seq: u64,
    next_round: u64,
    /// The round in flight to each peer.
    rounds: BTreeMap<usize, Round>,
    /// Hints dropped at [`HINTS_MAX`] or by [`Hints::drop_all`].
    pub dropped: u64,
    /// Hints acknowledged by their peer.
    pub delivered: u64,
}

impl Hints {
    /// Keeps a hint for `peer`.
    pub fn add(&mut self, peer: usize, key: Vec<u8>, version: Version) {
        if self.pending.len() >= HINTS_MAX {
            self.dropped += 1;
            return;
        }
        self.next_seq += 1;
        self.pending
            .insert((peer, self.next_seq), Hint { key, version });
    }

    /// Hints pending, all peers.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no hint is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// True when a delivery round is in flight to any peer.
    pub fn delivering(&self) -> bool {
        !self.rounds.is_empty()
    }

    /// Drops every pending hint (the store's byte bound, or a crash that loses them).
    pub fn drop_all(&mut self) {
        self.dropped += self.pending.len() as u64;
        self.pending.clear();
        self.rounds.clear();
    }

    /// What a crash of kind `kind` leaves of the hints, with the node's WAL mode.
    pub fn crash(&mut self, kind: CrashKind, wal_mode: WalMode) {
        self.rounds.clear();
        let survive = match wal_mode {
            WalMode::Fsync => true,
            WalMode::Write => kind == CrashKind::Kill,
            WalMode::None => false,
        };
        if !survive {
            self.drop_all();
        }
    }

    /// Starts a round to every peer that has hints and no round in flight.
    pub fn start_rounds(&mut self, batch_max: usize) -> Vec<RoundStart> {
        let peers: BTreeSet<usize> = self.pending.keys().map(|(peer, _)| *peer).collect();
        let mut out = Vec::new();
        for peer in peers {
            if self.rounds.contains_key(&peer) {
                continue;
            }
            let batch: Vec<(u64, Hint)> = self
                .pending
                .range((peer, 0)..=(peer, u64::MAX))
                .take(batch_max)
                .map(|((_, seq), h)| (*seq, h.clone()))
                .collect();
            self.next_round += 1;
            self.rounds.insert(
                peer,
                Round {
                    id: self.next_round,
                    outstanding: batch.iter().map(|(seq, _)| *seq).collect(),
                },
            );
            out.push(RoundStart {
                peer,
                round: self.next_round,
                hints: batch,
            });
        }
        out
    }

    /// Peer `peer` answered hint `seq` (`written`: acknowledged).
    pub fn answered(&mut self, peer: usize, seq: u64, written: bool) {
        if written && self.pending.remove(&(peer, seq)).is_some() {
            self.delivered += 1;
        }
        if let Some(round) = self.rounds.get_mut(&peer) {
            round.outstanding.remove(&seq);
            if round.outstanding.is_empty() {
                self.rounds.remove(&peer);
            }
        }
    }

    /// The deadline of round `round` to `peer` passed: the round ends.
    pub fn expire(&mut self, peer: usize, round: u64) {
        if self.rounds.get(&peer).is_some_and(|r| r.id == round) {
            self.rounds.remove(&peer);
        }
    }
}

impl SimNode {
    /// Hints this node keeps.
    pub fn hints(&self) -> &Hints {
        &self.hints
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ts: u64) -> Version {
        Version {
            ts,
            value: Some(b"v".to_vec()),
        }
    }

    /// A round per peer, in sequence order, at most a batch; acknowledged
    /// hints go, the rest are sent again after the round ends.
    #[test]
    fn rounds() {
        let mut h = Hints::default();
        for ts in 1..=5 {
            h.add(1, b"a".to_vec(), v(ts));
        }
        h.add(2, b"b".to_vec(), v(9));
        let rounds = h.start_rounds(3);
        assert_eq!(rounds.len(), 2);
        assert_eq!(rounds[0].peer, 1);
        let seqs: Vec<u64> = rounds[0].hints.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert!(h.start_rounds(3).is_empty(), "rounds in flight");
        h.answered(1, 1, true);
        h.answered(1, 2, false);
        h.expire(1, rounds[0].round);
        assert_eq!(h.len(), 5);
        let again = h.start_rounds(3);
        let seqs: Vec<u64> = again[0].hints.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![2, 3, 4]);
        assert_eq!(h.delivered, 1);
    }

    /// What survives a crash depends on the WAL mode and the kind of crash.
    #[test]
    fn crash_survival() {
        let cases = [
            (WalMode::Fsync, CrashKind::PowerLoss, 1),
            (WalMode::Write, CrashKind::Kill, 1),
            (WalMode::Write, CrashKind::PowerLoss, 0),
            (WalMode::None, CrashKind::Kill, 0),
        ];
        for (mode, kind, left) in cases {
            let mut h = Hints::default();
            h.add(1, b"a".to_vec(), v(1));
            h.crash(kind, mode);
            assert_eq!(h.len(), left, "{mode:?} {kind:?}");
            assert!(!h.delivering());
        }
    }
}
