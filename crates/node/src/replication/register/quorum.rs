//! Which answers make a quorum of the register: a majority of every
//! replica set the operation names.
//!
//! # Rules
//! - An operation names one replica set per live layout version
//!   (`cluster::history`): one outside a transition, the old and the new
//!   set during one. It reaches a quorum once a majority (`len / 2 + 1`) of
//!   EACH set answered yes. Two operations' quorums then meet in every set
//!   they both name, so a proposer still on the old version alone and one
//!   in the transition (old and new) still meet in the old set; one past
//!   it (new alone) and one in it meet in the new set.
//! - Messages go to every replica of every set (the union, each once).
//! - [`Mode::PlantedNewSetOnly`] (the simulation's planted bug
//!   `register-quorum-new-only`) counts only the last set: a proposer in
//!   the transition and one still on the old version then hold disjoint
//!   majorities, and both decide.

use crate::cluster::layout::NodeId;
use std::collections::BTreeSet;

/// How [`Quorum::reached`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// A majority of every set.
    #[default]
    Sound,
    /// A planted bug: a majority of the last set only.
    PlantedNewSetOnly,
}

/// The replica sets one operation must reach a majority of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quorum {
    sets: Vec<Vec<NodeId>>,
    mode: Mode,
}

/// Why a [`Quorum`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuorumError {
    /// No replica set given.
    #[error("the register needs at least one replica set")]
    NoSet,
    /// A set is empty.
    #[error("replica set {index} is empty")]
    EmptySet {
        /// The set's position.
        index: usize,
    },
}

impl Quorum {
    /// The quorum over `sets` (duplicates within a set are ignored).
    pub fn new(sets: Vec<Vec<NodeId>>, mode: Mode) -> Result<Quorum, QuorumError> {
        if sets.is_empty() {
            return Err(QuorumError::NoSet);
        }
        let mut clean = Vec::with_capacity(sets.len());
        for (index, set) in sets.into_iter().enumerate() {
            let set: BTreeSet<NodeId> = set.into_iter().collect();
            if set.is_empty() {
                return Err(QuorumError::EmptySet { index });
            }
            clean.push(set.into_iter().collect());
        }
        Ok(Quorum { sets: clean, mode })
    }

    /// Every replica of every set, each once, in id order.
    pub fn replicas(&self) -> Vec<NodeId> {
        let all: BTreeSet<NodeId> = self.sets.iter().flatten().copied().collect();
        all.into_iter().collect()
    }

    /// The sets, in the order given.
    pub fn sets(&self) -> &[Vec<NodeId>] {
        &self.sets
    }

    /// True once `no` leaves some counted set without a possible majority:
    /// no quorum can ever say yes to what they refused.
    pub fn blocked(&self, no: &BTreeSet<NodeId>) -> bool {
        self.counted().iter().any(|set| {
            let open = set.iter().filter(|id| !no.contains(id)).count();
            open <= set.len() / 2
        })
    }

    fn counted(&self) -> &[Vec<NodeId>] {
        match self.mode {
            Mode::Sound => &self.sets,
            Mode::PlantedNewSetOnly => match self.sets.split_last() {
                Some((last, _)) => std::slice::from_ref(last),
                None => &self.sets,
            },
        }
    }

    /// True once `yes` holds a majority of every set (the "Rules").
    pub fn reached(&self, yes: &BTreeSet<NodeId>) -> bool {
        self.counted().iter().all(|set| {
            let answered = set.iter().filter(|id| yes.contains(id)).count();
            answered > set.len() / 2
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[NodeId]) -> BTreeSet<NodeId> {
        list.iter().copied().collect()
    }

    /// One set: a strict majority, not half.
    #[test]
    fn one_set_needs_a_majority() {
        let q = Quorum::new(vec![vec![0, 1, 2, 3]], Mode::Sound).unwrap_or_else(|e| panic!("{e}"));
        assert!(!q.reached(&ids(&[0, 1])));
        assert!(q.reached(&ids(&[0, 1, 3])));
        assert_eq!(q.replicas(), vec![0, 1, 2, 3]);
    }

    /// In a transition, a majority of the new set alone is not enough; the
    /// planted mode takes it (its negative control).
    #[test]
    fn transition_needs_both_sets() {
        let sets = vec![vec![0, 1, 2], vec![2, 3, 4]];
        let q = Quorum::new(sets.clone(), Mode::Sound).unwrap_or_else(|e| panic!("{e}"));
        assert!(!q.reached(&ids(&[3, 4])));
        assert!(!q.reached(&ids(&[0, 1])));
        assert!(q.reached(&ids(&[1, 2, 3])));
        assert!(q.blocked(&ids(&[3, 4])));
        assert!(!q.blocked(&ids(&[0, 4])));
        assert_eq!(q.replicas(), vec![0, 1, 2, 3, 4]);
        let planted = Quorum::new(sets, Mode::PlantedNewSetOnly).unwrap_or_else(|e| panic!("{e}"));
        assert!(planted.reached(&ids(&[3, 4])));
    }

    /// Bad input is an error, not a panic.
    #[test]
    fn empty_sets_are_refused() {
        assert_eq!(Quorum::new(vec![], Mode::Sound), Err(QuorumError::NoSet));
        assert_eq!(
            Quorum::new(vec![vec![1], vec![]], Mode::Sound),
            Err(QuorumError::EmptySet { index: 1 })
        );
    }
}
