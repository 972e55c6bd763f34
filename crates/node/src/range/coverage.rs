//! How many nodes a cluster range must stream from so that every key's
//! `ack` copies are covered, and which nodes it may stream from.
//!
//! # The rule
//! With `n` nodes in the read set and each key on `from` of them, a range
//! merges the streams of any [`sources_needed`]`(n, ack, from)` =
//! `n - from + ack` nodes.
//!
//! **Claim.** Any set `S` of at least `n - from + ack` nodes holds at least
//! `ack` of the `from` replicas of every key, whatever the placement.
//!
//! **Proof.** Let `R` be a key's replicas, `|R| = from`. The nodes of `S`
//! outside `R` are among the `n - from` nodes outside `R`, so
//! `|S ∩ R| = |S| - |S \ R| >= (n - from + ack) - (n - from) = ack`. ∎
//!
//! **Tightness.** For a key whose replicas are `R`, the set made of the
//! `n - from` nodes outside `R` and `ack - 1` nodes of `R` has
//! `n - from + ack - 1` nodes and only `ack - 1` of that key's replicas, so
//! no smaller number works for every placement (under rendezvous hashing
//! every `from`-set of nodes is some key's replica set once there are
//! enough keys).
//!
//! **What it buys.** The range answers each key as a `GET` with the same
//! `ack` and `from` would: a version acknowledged by `w` replicas with
//! `w + ack > from` is on at least one of the `ack` replicas streamed, and
//! the merge keeps the newest version it sees. The defaults are the
//! `GET`'s: `from` = the cluster size, `ack` = `from / 2 + 1`; with those
//! a 5-node cluster streams from 3 nodes and tolerates 2 unreachable.
//! With `from < n` more nodes are needed (`ack=2&from=3` on 5 nodes: 4).

use crate::cluster::live::Placement;

/// Nodes a cluster range must stream from (see the module's proof):
/// `n - from + ack`, for `1 <= ack <= from <= n`. A `from` above `n` (the
/// read layout shrank since the request was routed) counts as `n`.
pub fn sources_needed(nodes: usize, ack: usize, from: usize) -> usize {
    debug_assert!(1 <= ack && ack <= from);
    let from = from.min(nodes);
    nodes - from + ack.min(from)
}

/// The nodes a cluster range may read from, by node-table index: the
/// members of the read layout (during a transition the old one until
/// every node synced the new one, as a `GET` reads).
pub fn read_set(placement: &Placement) -> Vec<usize> {
    placement.read_members().to_vec()
}

/// True when this node's own data alone answers a cluster range: the
/// sources needed are one, and this node (`me`) is in the read set. A
/// node outside it — one still receiving its copy of the new layout, whose
/// reads use the old one — counts for nothing, however `ack` and `from`
/// are set; its range goes through the merge of read-set nodes.
pub fn answers_alone(read_set: &[usize], me: usize, ack: usize, from: usize) -> bool {
    read_set.contains(&me) && sources_needed(read_set.len(), ack, from) == 1
}

/// The old rule, kept as a planted bug (`--debug-planted-bug
/// range-alone-outside-read-set`, the negative control of
/// `tests/cluster_range.rs`): one source needed is enough, wherever this
/// node stands, so a node still receiving its copy answers with the keys
/// it has so far.
pub fn answers_alone_planted(read_set: &[usize], ack: usize, from: usize) -> bool {
    sources_needed(read_set.len(), ack, from) == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster range with `ack=1&from=N` was answered from the local
    /// data of a node outside the read set (still receiving its copy): it
    /// only does so from a node in the read set.
    #[test]
    fn only_a_read_set_node_answers_alone() {
        let read_set = [0, 1, 2];
        assert!(answers_alone(&read_set, 1, 1, 3));
        // Node 3 was added and is copying: reads still use {0, 1, 2}.
        assert!(!answers_alone(&read_set, 3, 1, 3));
        // More than one source needed: never alone.
        assert!(!answers_alone(&read_set, 1, 2, 3));
        assert!(!answers_alone(&read_set, 1, 1, 2));
        assert!(answers_alone(&[4], 4, 1, 1));
        assert!(!answers_alone(&[], 4, 1, 1));
        // The planted old rule answers from node 3 too.
        assert!(answers_alone_planted(&read_set, 1, 3));
        assert!(!answers_alone_planted(&read_set, 2, 3));
    }
    use crate::cluster::placement::rank_with_seeds;
    use proptest::prelude::*;

    /// Replicas of `key` among `chosen`.
    fn covered(seeds: &[u64], key: &[u8], from: usize, chosen: &[bool]) -> usize {
        rank_with_seeds(seeds, key, from)
            .into_iter()
            .filter(|&node| chosen[node])
            .count()
    }

    /// A cluster size, `from`, `ack`, and random node seeds (a placement).
    fn case() -> impl Strategy<Value = (usize, usize, usize, Vec<u64>)> {
        (1usize..9).prop_flat_map(|n| {
            (1..=n).prop_flat_map(move |from| {
                (
                    Just(n),
                    Just(from),
                    1..=from,
                    prop::collection::vec(any::<u64>(), n),
                )
            })
        })
    }

    proptest! {
        /// Over random node seeds (placements), random keys and a random
        /// set of `sources_needed` nodes: every key has `ack` replicas in it.
        #[test]
        fn any_needed_set_covers_ack_replicas(
            (n, from, ack, seeds) in case(),
            keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..8), 1..64),
            pick in prop::collection::vec(any::<u64>(), 9),
        ) {
            let need = sources_needed(n, ack, from);
            // A random `need`-subset: nodes sorted by a random priority.
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|&i| pick[i]);
            let mut chosen = vec![false; n];
            for &i in order.iter().take(need) {
                chosen[i] = true;
            }
            for key in &keys {
                prop_assert!(covered(&seeds, key, from, &chosen) >= ack);
            }
        }

        /// One node fewer is not enough: for some key, the set of the nodes
        /// outside its replicas plus `ack - 1` of them misses.
        #[test]
        fn one_fewer_can_miss(
            (n, from, ack, seeds) in case(),
            key in prop::collection::vec(any::<u8>(), 1..8),
        ) {
            let replicas = rank_with_seeds(&seeds, &key, from);
            let mut chosen = vec![true; n];
            for &r in &replicas {
                chosen[r] = false;
            }
            for &r in replicas.iter().take(ack - 1) {
                chosen[r] = true;
            }
            prop_assert_eq!(chosen.iter().filter(|&&c| c).count(), sources_needed(n, ack, from) - 1);
            prop_assert!(covered(&seeds, &key, from, &chosen) < ack);
        }
    }

    /// The negative control: a rule that streams from only `ack` nodes
    /// (enough when `from = n`, not otherwise) is refuted by the same check.
    #[test]
    fn streaming_from_ack_nodes_is_refuted() {
        let seeds: Vec<u64> = (0..5u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let (ack, from) = (2, 3);
        let chosen = [true, true, false, false, false];
        let missed = (0..1000u32)
            .map(|i| i.to_be_bytes())
            .any(|key| covered(&seeds, &key, from, &chosen) < ack);
        assert!(missed, "a 2-node set covered 2 of 3 replicas of every key");
    }

    #[test]
    fn defaults_and_examples() {
        assert_eq!(sources_needed(5, 3, 5), 3);
        assert_eq!(sources_needed(5, 2, 3), 4);
        assert_eq!(sources_needed(5, 1, 5), 1);
        assert_eq!(sources_needed(1, 1, 1), 1);
        assert_eq!(sources_needed(3, 3, 3), 3);
    }
}
