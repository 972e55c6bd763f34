//! The pure core end to end against a model: trees find the differing
//! buckets, digests of only those buckets are reconciled, and applying the
//! steps converges both replicas.

use super::merkle::{self, Tree};
use super::reconcile::{Step, reconcile};
use crate::version_order::{Kind, Tag};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// A replica in the model: key → (ts, kind 0..3, value digest).
type Model = BTreeMap<Vec<u8>, (u64, u8, u64)>;

fn tag((ts, kind, digest): (u64, u8, u64)) -> Tag {
    let kind = [Kind::Value, Kind::Tombstone, Kind::Expiring][kind as usize % 3];
    let digest = if kind == Kind::Tombstone { 0 } else { digest };
    Tag { ts, kind, digest }
}

fn tree_of(model: &Model, depth: u32) -> Tree {
    let mut t = Tree::new(depth);
    for (k, &v) in model {
        t.add(k, &tag(v));
    }
    t.finish();
    t
}

fn digest<'a>(
    model: &'a Model,
    buckets: &'a BTreeSet<u32>,
    depth: u32,
) -> impl Iterator<Item = (Vec<u8>, Tag)> + 'a {
    model
        .iter()
        .filter(move |(k, _)| buckets.contains(&merkle::bucket_of(k, depth)))
        .map(|(k, &v)| (k.clone(), tag(v)))
}

proptest! {
    /// Random replicas that start equal and take random edits (puts,
    /// tombstones, removals, on either side; few timestamps, so two
    /// versions under one timestamp are common, as a timestamp issued twice
    /// makes them) converge after one round of compare → digest the
    /// differing buckets → reconcile → apply, and the round touches only
    /// keys that differed.
    #[test]
    fn one_round_converges(
        base in proptest::collection::btree_map(
            proptest::collection::vec(any::<u8>(), 0..6),
            (1u64..6, 0u8..3, 0u64..3),
            0..300,
        ),
        edits in proptest::collection::vec(
            (0u8..4, proptest::collection::vec(any::<u8>(), 0..6), (1u64..6, 0u8..3, 0u64..3)),
            0..60,
        ),
        depth in 0u32..10,
    ) {
        let (mut local, mut remote) = (base.clone(), base);
        for (op, key, v) in edits {
            let side = if op % 2 == 0 { &mut local } else { &mut remote };
            if op < 2 { side.insert(key, v); } else { side.remove(&key); }
        }
        let same = |a: Option<&(u64, u8, u64)>, b: Option<&(u64, u8, u64)>| {
            a.map(|&v| tag(v)) == b.map(|&v| tag(v))
        };
        let differing_keys = local.keys().chain(remote.keys())
            .filter(|k| !same(local.get(*k), remote.get(*k)))
            .cloned().collect::<BTreeSet<_>>();
        let buckets: BTreeSet<u32> = tree_of(&local, depth)
            .differing_leaves(&tree_of(&remote, depth))
            .into_iter().collect();
        let steps = reconcile(digest(&local, &buckets, depth), digest(&remote, &buckets, depth));
        let (l0, r0) = (local.clone(), remote.clone());
        for step in steps {
            match step {
                Step::Fetch(k) => {
                    prop_assert!(differing_keys.contains(&k));
                    local.insert(k.clone(), r0[&k]);
                }
                Step::Push(k) => {
                    prop_assert!(differing_keys.contains(&k));
                    remote.insert(k.clone(), l0[&k]);
                }
            }
        }
        // No filter: two versions under one timestamp converge too (issue 31).
        let tags = |m: &Model| m.iter().map(|(k, &v)| (k.clone(), tag(v))).collect::<Vec<_>>();
        prop_assert_eq!(tags(&local), tags(&remote));
        prop_assert_eq!(tree_of(&local, depth).root(), tree_of(&remote, depth).root());
    }
}
