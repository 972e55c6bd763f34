//! One replicated request seen from its coordinator: which replicas were
//! asked, what each answered, when the client's answer is decided, and
//! what is left to do after it (read repair, hints).
//!
//! Pure logic, no I/O: the network thread feeds it outcomes and carries
//! out what it returns, so the rules below are tested directly.
//!
//! # Rules
//! - A write succeeds once `ack` replicas made it durable, and fails (504)
//!   once more than `from - ack` replicas failed, or at the deadline.
//! - A replica that holds a newer version of the key than the write's (or
//!   another version under the same timestamp) answers with that
//!   version's timestamp instead of storing the write.
//!   If the client was not answered yet, the write is re-stamped: the
//!   coordinator stamps it above that timestamp and asks every replica
//!   again ([`Decision::Restamp`]), at most [`RESTAMPS_MAX`] times; after
//!   that such an answer counts as a failure. So when write `A` was
//!   acknowledged before write `B` was sent and their quorums meet
//!   (`ack_A + ack_B > from`), `B` ends stamped above `A`, whatever the
//!   clocks of the nodes that stamped them said (docs/ARCHITECTURE.md,
//!   "Re-stamping").
//! - A read answers once `ack` replicas answered, with the newest version
//!   among those answers: no version ranks below every version, and a newer
//!   tombstone means 404. It fails like a write.
//! - During a layout transition a request's replicas are the union of
//!   several replica sets (one per live layout version,
//!   `cluster::history`): it succeeds once `ack` replicas of EACH set
//!   succeeded (at most the set's size), and fails once any set can no
//!   longer reach that. A request built with [`Coordination::new`] has one
//!   set, all its replicas.
//! - After the answer the coordinator keeps listening until every replica
//!   answered or the deadline passed, then: a read sends the newest version
//!   to every replica that answered with an older one (read repair); a
//!   write leaves a hint for every remote replica that did not acknowledge.

use crate::peer::frame::Stamped;

/// Re-stamps one write may take; one more newer version answered after
/// them counts as a failed replica.
pub const RESTAMPS_MAX: u32 = 4;

/// What the request does on each replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaOp {
    /// Read the newest version.
    Read,
    /// Apply this version (a PUT, or a DELETE's tombstone).
    Write(Stamped),
}

/// One replica's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaAnswer {
    /// A write was made durable.
    Written,
    /// A read's answer: the replica's newest version, if any.
    Read(Option<Stamped>),
    /// A write was not stored: the replica holds a newer version stamped so.
    HoldsNewer(u64),
    /// No answer: why.
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ReplicaState {
    Waiting,
    Done(ReplicaAnswer),
}

/// The client's answer, once decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The write reached `ack` replicas, under this timestamp (the one it
    /// was last stamped with: a re-stamp moves it).
    Written {
        /// The version's timestamp.
        ts: u64,
    },
    /// The read's newest version among `ack` answers (None: no replica had one).
    Read(Option<Stamped>),
    /// `ack` can no longer be reached, or the deadline passed: 504 with this reason.
    Failed(String),
    /// Not for the client: a replica holds a version stamped `above`, newer
    /// than the write's. The driver stamps the write above it, calls
    /// [`Coordination::restamped`] and asks every replica again; answers to
    /// this round that come later must be dropped.
    Restamp {
        /// The newer version's timestamp.
        above: u64,
    },
}

/// What the coordinator does once every replica answered or the deadline passed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aftermath {
    /// Read repair: send this version to these replicas (positions in the replica list).
    pub repair: Option<(Stamped, Vec<usize>)>,
    /// Write: these replicas (positions) did not acknowledge; keep a hint for each.
    pub hint: Vec<usize>,
}

/// A replicated request in flight.
#[derive(Debug)]
pub struct Coordination {
    kind: ReplicaOp,
    ack: usize,
    replicas: Vec<ReplicaState>,
    sets: Vec<Vec<usize>>,
    decided: bool,
    restamps: u32,
}

/// Orders two optional versions: none ranks below every version; equal
/// timestamps are broken by the one tie rule (tombstone, then expiring
/// value, then plain value, then the value digest: [`Stamped::newer_than`],
/// `crate::version_order`).
pub fn newer(a: &Option<Stamped>, b: &Option<Stamped>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.newer_than(b),
        (Some(_), None) => true,
        (None, _) => false,
    }
}

impl Coordination {
    /// A request asking `replicas` replicas and waiting for `ack` of them.
    pub fn new(kind: ReplicaOp, ack: usize, replicas: usize) -> Self {
        Coordination::with_sets(kind, ack, replicas, vec![(0..replicas).collect()])
    }

    /// A request asking `replicas` replicas and waiting for `ack` of them
    /// in each of `sets` (positions; each set non-empty, every position in
    /// range, every replica in some set).
    pub fn with_sets(kind: ReplicaOp, ack: usize, replicas: usize, sets: Vec<Vec<usize>>) -> Self {
        assert!(ack >= 1 && ack <= replicas, "ack {ack} of {replicas}");
        assert!(!sets.is_empty(), "at least one replica set");
        assert!(
            sets.iter()
                .all(|s| !s.is_empty() && s.iter().all(|&p| p < replicas)),
            "sets {sets:?} of {replicas} replicas"
        );
        debug_assert!(
            (0..replicas).all(|p| sets.iter().any(|s| s.contains(&p))),
            "every replica in a set"
        );
        Coordination {
            kind,
            ack,
            replicas: vec![ReplicaState::Waiting; replicas],
            sets,
            decided: false,
            restamps: 0,
        }
    }

    /// The next round of a write after [`Decision::Restamp`]: the same
    /// value stamped `ts`, every replica asked again.
    pub fn restamped(&self, ts: u64) -> Self {
        let ReplicaOp::Write(version) = &self.kind else {
            panic!("only a write is re-stamped");
        };
        Coordination {
            // The deadline was stamped once, with the first timestamp: a
            // re-stamp moves the version, never its deadline.
            kind: ReplicaOp::Write(Stamped {
                ts,
                value: version.value.clone(),
                deadline_ms: version.deadline_ms,
            }),
            ack: self.ack,
            replicas: vec![ReplicaState::Waiting; self.replicas.len()],
            sets: self.sets.clone(),
            decided: false,
            restamps: self.restamps + 1,
        }
    }

    /// How many times this write was re-stamped.
    pub fn restamps(&self) -> u32 {
        self.restamps
    }

    /// True if this write may re-stamp no more and a replica answered with
    /// a newer version (so a failure decided now is the re-stamps' end).
    pub fn gave_up_restamping(&self) -> bool {
        self.restamps >= RESTAMPS_MAX
            && self
                .replicas
                .iter()
                .any(|r| matches!(r, ReplicaState::Done(ReplicaAnswer::HoldsNewer(_))))
    }

    /// What the request does.
    pub fn kind(&self) -> &ReplicaOp {
        &self.kind
    }

    /// True once the client's answer was decided.
    pub fn decided(&self) -> bool {
        self.decided
    }

    /// True once every replica answered or failed.
    pub fn settled(&self) -> bool {
        self.replicas
            .iter()
            .all(|r| matches!(r, ReplicaState::Done(_)))
    }

    fn count(&self, f: impl Fn(&ReplicaAnswer) -> bool) -> usize {
        self.replicas
            .iter()
            .filter(|r| matches!(r, ReplicaState::Done(o) if f(o)))
            .count()
    }

    fn count_in(&self, set: &[usize], f: impl Fn(&ReplicaAnswer) -> bool) -> usize {
        set.iter()
            .filter(|&&p| matches!(&self.replicas[p], ReplicaState::Done(o) if f(o)))
            .count()
    }

    /// (every set reached its ack, some set can no longer reach it)
    fn quorums(&self) -> (bool, bool) {
        let mut all_ok = true;
        let mut any_lost = false;
        for set in &self.sets {
            let ack = self.ack.min(set.len());
            let ok = self.count_in(set, |o| {
                matches!(o, ReplicaAnswer::Written | ReplicaAnswer::Read(_))
            });
            let failed = self.count_in(set, |o| {
                matches!(o, ReplicaAnswer::Failed(_) | ReplicaAnswer::HoldsNewer(_))
            });
            all_ok &= ok >= ack;
            any_lost |= failed > set.len() - ack;
        }
        (all_ok, any_lost)
    }

    fn newest_answer(&self) -> Option<Stamped> {
        let mut best: Option<Stamped> = None;
        for r in &self.replicas {
            if let ReplicaState::Done(ReplicaAnswer::Read(v)) = r
                && newer(v, &best)
            {
                best.clone_from(v);
            }
        }
        best
    }

    /// The planted bug `read-repair-writes-older`: the oldest value any
    /// replica answered, under `newest`'s timestamp (`newest` itself when
    /// no replica answered a value).
    pub fn planted_older_repair(&self, newest: Stamped) -> Stamped {
        let oldest = self
            .replicas
            .iter()
            .filter_map(|r| match r {
                ReplicaState::Done(ReplicaAnswer::Read(Some(v))) if v.value.is_some() => Some(v),
                _ => None,
            })
            .min_by_key(|v| v.ts);
        match oldest {
            Some(v) => Stamped {
                ts: newest.ts,
                value: v.value.clone(),
                deadline_ms: v.deadline_ms,
            },
            None => newest,
        }
    }

    fn failures_text(&self) -> String {
        let reasons: Vec<String> = self
            .replicas
            .iter()
            .filter_map(|r| match r {
                ReplicaState::Done(ReplicaAnswer::Failed(why)) => Some(why.clone()),
                ReplicaState::Done(ReplicaAnswer::HoldsNewer(ts)) => Some(format!(
                    "a replica holds a newer version (ts {ts}) after {} re-stamps",
                    self.restamps
                )),
                _ => None,
            })
            .collect();
        reasons.join("; ")
    }

    /// Records replica `position`'s outcome (a second outcome for the same
    /// replica is ignored) and returns the client's answer if this decided it.
    pub fn record(&mut self, position: usize, outcome: ReplicaAnswer) -> Option<Decision> {
        match self.replicas.get_mut(position) {
            Some(slot @ ReplicaState::Waiting) => *slot = ReplicaState::Done(outcome),
            _ => return None,
        }
        if self.decided {
            return None;
        }
        if let ReplicaState::Done(ReplicaAnswer::HoldsNewer(above)) = self.replicas[position]
            && self.restamps < RESTAMPS_MAX
            && matches!(self.kind, ReplicaOp::Write(_))
        {
            // This round can no longer answer the client: the next one will.
            self.decided = true;
            return Some(Decision::Restamp { above });
        }
        let ok = self.count(|o| matches!(o, ReplicaAnswer::Written | ReplicaAnswer::Read(_)));
        let failed =
            self.count(|o| matches!(o, ReplicaAnswer::Failed(_) | ReplicaAnswer::HoldsNewer(_)));
        let (all_ok, any_lost) = self.quorums();
        let decision = if all_ok {
            Some(match &self.kind {
                ReplicaOp::Read => Decision::Read(self.newest_answer()),
                ReplicaOp::Write(version) => Decision::Written { ts: version.ts },
            })
        } else if any_lost {
            Some(Decision::Failed(format!(
                "{ok} of ack={} replicas answered, {failed} failed: {}",
                self.ack,
                self.failures_text()
            )))
        } else {
            None
        };
        if decision.is_some() {
            self.decided = true;
        }
        decision
    }

    /// The deadline passed: replicas still waiting fail with `why`; returns
    /// the client's 504 if it was not answered yet.
    pub fn expire(&mut self, why: &str) -> Option<Decision> {
        let waiting = self
            .replicas
            .iter()
            .filter(|r| **r == ReplicaState::Waiting)
            .count();
        let ok = self.count(|o| matches!(o, ReplicaAnswer::Written | ReplicaAnswer::Read(_)));
        for r in &mut self.replicas {
            if *r == ReplicaState::Waiting {
                *r = ReplicaState::Done(ReplicaAnswer::Failed(why.to_owned()));
            }
        }
        if self.decided {
            return None;
        }
        self.decided = true;
        Some(Decision::Failed(format!(
            "{ok} of ack={} replicas answered; {waiting} did not answer within {why}",
            self.ack
        )))
    }

    /// What to do after the request settled (every replica answered or the deadline passed).
    pub fn aftermath(&self) -> Aftermath {
        debug_assert!(self.settled());
        match &self.kind {
            ReplicaOp::Read => {
                let Some(newest) = self.newest_answer() else {
                    return Aftermath::default();
                };
                let stale: Vec<usize> = self
                    .replicas
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| match r {
                        ReplicaState::Done(ReplicaAnswer::Read(v))
                            if newer(&Some(newest.clone()), v) =>
                        {
                            Some(i)
                        }
                        _ => None,
                    })
                    .collect();
                Aftermath {
                    repair: (!stale.is_empty()).then_some((newest, stale)),
                    hint: Vec::new(),
                }
            }
            ReplicaOp::Write(_) => Aftermath {
                repair: None,
                hint: self
                    .replicas
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| match r {
                        // A replica with a newer version needs nothing.
                        ReplicaState::Done(
                            ReplicaAnswer::Written | ReplicaAnswer::HoldsNewer(_),
                        ) => None,
                        _ => Some(i),
                    })
                    .collect(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ts: u64, value: Option<&str>) -> Stamped {
        Stamped {
            ts,
            value: value.map(|s| s.as_bytes().to_vec()),
            deadline_ms: None,
        }
    }

    fn write() -> ReplicaOp {
        ReplicaOp::Write(v(10, Some("x")))
    }

    /// A write answers at the ack-th success and hints the replica that failed.
    #[test]
    fn write_quorum_and_hints() {
        let mut c = Coordination::new(write(), 2, 3);
        assert_eq!(c.record(0, ReplicaAnswer::Written), None);
        assert_eq!(c.record(2, ReplicaAnswer::Failed("down".into())), None);
        assert_eq!(
            c.record(1, ReplicaAnswer::Written),
            Some(Decision::Written { ts: 10 })
        );
        assert!(c.settled());
        assert_eq!(c.aftermath().hint, vec![2]);
    }

    /// A write fails as soon as ack can no longer be reached, naming the reasons.
    #[test]
    fn write_fails_early() {
        let mut c = Coordination::new(write(), 3, 3);
        assert_eq!(c.record(0, ReplicaAnswer::Written), None);
        match c.record(1, ReplicaAnswer::Failed("node 1 refused".into())) {
            Some(Decision::Failed(why)) => assert!(why.contains("node 1 refused"), "{why}"),
            other => panic!("{other:?}"),
        }
        // A late success changes nothing; the deadline hints the silent one.
        assert_eq!(c.record(1, ReplicaAnswer::Written), None);
        assert_eq!(c.expire("1000 ms"), None);
        assert_eq!(c.aftermath().hint, vec![1, 2]);
    }

    /// The deadline answers 504 once, and only if nothing was decided.
    #[test]
    fn deadline() {
        let mut c = Coordination::new(ReplicaOp::Read, 2, 2);
        assert_eq!(c.record(0, ReplicaAnswer::Read(None)), None);
        assert!(matches!(c.expire("1000 ms"), Some(Decision::Failed(_))));
        assert_eq!(c.expire("1000 ms"), None);
        assert!(c.settled());
    }

    /// Reads: absent ranks lowest, newer tombstone wins, newer value beats older tombstone.
    #[test]
    fn read_newest_wins() {
        let cases = [
            (None, Some(v(5, Some("a"))), Some(v(5, Some("a")))),
            (Some(v(7, None)), Some(v(5, Some("a"))), Some(v(7, None))),
            (
                Some(v(7, None)),
                Some(v(9, Some("b"))),
                Some(v(9, Some("b"))),
            ),
            (None, None, None),
        ];
        for (a, b, want) in cases {
            let mut c = Coordination::new(ReplicaOp::Read, 2, 2);
            assert_eq!(c.record(0, ReplicaAnswer::Read(a.clone())), None);
            assert_eq!(
                c.record(1, ReplicaAnswer::Read(b.clone())),
                Some(Decision::Read(want.clone()))
            );
            // Read repair targets exactly the replicas that were behind.
            let stale: Vec<usize> = [&a, &b]
                .iter()
                .enumerate()
                .filter(|(_, x)| newer(&want, x))
                .map(|(i, _)| i)
                .collect();
            let after = c.aftermath();
            match want {
                Some(w) if !stale.is_empty() => assert_eq!(after.repair, Some((w, stale))),
                _ => assert_eq!(after.repair, None),
            }
        }
    }

    /// A newer version held by a replica re-stamps an unanswered write: the
    /// next round carries the same value at the new timestamp, and after
    /// `RESTAMPS_MAX` re-stamps such an answer is a failure naming it.
    #[test]
    fn holds_newer_restamps_until_exhausted() {
        let mut c = Coordination::new(write(), 2, 3);
        assert_eq!(c.record(0, ReplicaAnswer::Written), None);
        assert_eq!(
            c.record(1, ReplicaAnswer::HoldsNewer(40)),
            Some(Decision::Restamp { above: 40 })
        );
        // The abandoned round decides nothing more.
        assert_eq!(c.record(2, ReplicaAnswer::Written), None);
        let mut next = c.restamped(41);
        assert_eq!(next.kind(), &ReplicaOp::Write(v(41, Some("x"))));
        assert_eq!(next.restamps(), 1);
        assert!(!next.decided() && !next.settled());
        // A re-stamped write answers with its new timestamp (the version
        // the client is told it wrote, `X-Ataman-Version`).
        let mut answered = next.restamped(41);
        assert_eq!(answered.record(0, ReplicaAnswer::Written), None);
        assert_eq!(
            answered.record(1, ReplicaAnswer::Written),
            Some(Decision::Written { ts: 41 })
        );
        for round in 1..RESTAMPS_MAX {
            assert!(!next.gave_up_restamping());
            assert_eq!(
                next.record(2, ReplicaAnswer::HoldsNewer(50 + u64::from(round))),
                Some(Decision::Restamp {
                    above: 50 + u64::from(round)
                })
            );
            next = next.restamped(60 + u64::from(round));
        }
        assert_eq!(next.restamps(), RESTAMPS_MAX);
        assert!(!next.gave_up_restamping());
        assert_eq!(next.record(0, ReplicaAnswer::HoldsNewer(99)), None);
        assert!(next.gave_up_restamping());
        match next.record(1, ReplicaAnswer::HoldsNewer(99)) {
            Some(Decision::Failed(why)) => assert!(why.contains("newer version"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Replicas holding newer versions get no hint; the silent one does.
        assert_eq!(next.expire("1000 ms"), None);
        assert_eq!(next.aftermath().hint, vec![2]);
    }

    /// A newer version answered after the client was answered changes nothing.
    #[test]
    fn holds_newer_after_the_answer_is_ignored() {
        let mut c = Coordination::new(write(), 1, 2);
        assert_eq!(
            c.record(0, ReplicaAnswer::Written),
            Some(Decision::Written { ts: 10 })
        );
        assert_eq!(c.record(1, ReplicaAnswer::HoldsNewer(99)), None);
        assert!(c.settled());
        assert!(c.aftermath().hint.is_empty());
    }

    /// A read never re-stamps, whatever a confused replica answers.
    #[test]
    fn a_read_is_never_restamped() {
        let mut c = Coordination::new(ReplicaOp::Read, 1, 1);
        assert!(matches!(
            c.record(0, ReplicaAnswer::HoldsNewer(5)),
            Some(Decision::Failed(_))
        ));
    }

    /// Equal timestamps follow the engine's tie rule on every replica:
    /// tombstone, then expiring value, then plain value; a newer timestamp
    /// wins whatever its kind.
    #[test]
    fn equal_timestamps_tombstone_then_expiring_then_plain() {
        let plain = Some(v(5, Some("p")));
        let expiring = Some(Stamped {
            ts: 5,
            value: Some(b"e".to_vec()),
            deadline_ms: Some(9),
        });
        let tombstone = Some(v(5, None));
        assert!(newer(&tombstone, &expiring) && !newer(&expiring, &tombstone));
        assert!(newer(&expiring, &plain) && !newer(&plain, &expiring));
        assert!(newer(&tombstone, &plain) && !newer(&plain, &tombstone));
        assert!(newer(&Some(v(6, Some("p"))), &tombstone));
        assert!(!newer(&plain, &plain));
    }

    /// Regression (issue 31, "the tie rule"): two replicas holding different
    /// values under one timestamp. Whichever answers first, the read
    /// answers the tie rule's winner and read repair sends it to the other,
    /// so both converge (it used to keep the first answer and repair nothing).
    #[test]
    fn equal_timestamps_with_two_values_follow_the_tie_rule() {
        let (a, b) = (v(5, Some("left")), v(5, Some("right")));
        let (winner, loser) = if b.newer_than(&a) { (b, a) } else { (a, b) };
        for (first, second) in [(0, 1), (1, 0)] {
            let answers = [winner.clone(), loser.clone()];
            let mut c = Coordination::new(ReplicaOp::Read, 2, 2);
            assert_eq!(
                c.record(first, ReplicaAnswer::Read(Some(answers[first].clone()))),
                None
            );
            assert_eq!(
                c.record(second, ReplicaAnswer::Read(Some(answers[second].clone()))),
                Some(Decision::Read(Some(winner.clone())))
            );
            assert_eq!(c.aftermath().repair, Some((winner.clone(), vec![1])));
        }
    }

    /// With ack=1 the first answer decides; later answers still feed read repair.
    #[test]
    fn read_repair_after_the_answer() {
        let mut c = Coordination::new(ReplicaOp::Read, 1, 3);
        assert_eq!(
            c.record(1, ReplicaAnswer::Read(Some(v(3, Some("old"))))),
            Some(Decision::Read(Some(v(3, Some("old")))))
        );
        assert_eq!(
            c.record(0, ReplicaAnswer::Read(Some(v(8, Some("new"))))),
            None
        );
        assert_eq!(c.record(2, ReplicaAnswer::Failed("down".into())), None);
        assert_eq!(c.aftermath().repair, Some((v(8, Some("new")), vec![1])));
    }

    /// During a transition a write needs ack in EACH set: two answers in
    /// the old set alone do not decide it (one set of all four would), the
    /// new set's second answer does, and a set that can no longer reach ack
    /// fails it although the other set succeeded.
    #[test]
    fn write_needs_ack_in_each_set() {
        let sets = || vec![vec![0, 1, 2], vec![1, 2, 3]];
        let mut c = Coordination::with_sets(write(), 2, 4, sets());
        assert_eq!(c.record(0, ReplicaAnswer::Written), None);
        assert_eq!(c.record(1, ReplicaAnswer::Written), None);
        assert_eq!(
            c.record(3, ReplicaAnswer::Written),
            Some(Decision::Written { ts: 10 })
        );
        // Negative control: one set of all four decides at the second answer.
        let mut one = Coordination::new(write(), 2, 4);
        assert_eq!(one.record(0, ReplicaAnswer::Written), None);
        assert_eq!(
            one.record(1, ReplicaAnswer::Written),
            Some(Decision::Written { ts: 10 })
        );

        let mut f = Coordination::with_sets(write(), 2, 4, sets());
        assert_eq!(f.record(0, ReplicaAnswer::Written), None);
        assert_eq!(f.record(1, ReplicaAnswer::Written), None);
        assert_eq!(f.record(2, ReplicaAnswer::Failed("down".into())), None);
        assert!(matches!(
            f.record(3, ReplicaAnswer::Failed("down".into())),
            Some(Decision::Failed(_))
        ));
        assert_eq!(f.aftermath().hint, vec![2, 3]);
    }

    /// A set smaller than ack (a lower replication factor in the new
    /// version) needs all of its replicas, not more than it has.
    #[test]
    fn ack_is_capped_by_the_set() {
        let mut c = Coordination::with_sets(write(), 3, 3, vec![vec![0, 1, 2], vec![0, 1]]);
        assert_eq!(c.record(0, ReplicaAnswer::Written), None);
        assert_eq!(c.record(1, ReplicaAnswer::Written), None);
        assert_eq!(
            c.record(2, ReplicaAnswer::Written),
            Some(Decision::Written { ts: 10 })
        );
    }
}
