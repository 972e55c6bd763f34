//! The pure core end to end against a model: trees find the differing
//! buckets, digests of only those buckets are reconciled, and applying the
//! steps converges both replicas.

use super::merkle::{self, Tree};
use super::reconcile::{Step, reconcile};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// A replica in the model: key → (ts, tombstone).
type Model = BTreeMap<Vec<u8>, (u64, bool)>;

fn tree_of(model: &Model, depth: u32) -> Tree {
    let mut t = Tree::new(depth);
    for (k, &(ts, tomb)) in model {
        t.add(k, ts, tomb);
    }
    t.finish();
    t
}

fn digest<'a>(
    model: &'a Model,
    buckets: &'a BTreeSet<u32>,
    depth: u32,
) -> impl Iterator<Item = (Vec<u8>, u64)> + 'a {
    model
        .iter()
        .filter(move |(k, _)| buckets.contains(&merkle::bucket_of(k, depth)))
        .map(|(k, &(ts, _))| (k.clone(), ts))
}

proptest! {
    /// Random replicas that start equal and take random edits (puts,
    /// tombstones, removals, on either side) converge after one round of
    /// compare → digest the differing buckets → reconcile → apply, and the
    /// round touches only keys that differed.
    #[test]
    fn one_round_converges(
        base in proptest::collection::btree_map(
            proptest::collection::vec(any::<u8>(), 0..6),
            (1u64..1000, any::<bool>()),
            0..300,
        ),
        edits in proptest::collection::vec(
            (0u8..4, proptest::collection::vec(any::<u8>(), 0..6), 1u64..1000, any::<bool>()),
            0..60,
        ),
        depth in 0u32..10,
    ) {
        let (mut local, mut remote) = (base.clone(), base);
        for (op, key, ts, tomb) in edits {
            let side = if op % 2 == 0 { &mut local } else { &mut remote };
            if op < 2 { side.insert(key, (ts, tomb)); } else { side.remove(&key); }
        }
        let differing_keys = local.keys().chain(remote.keys())
            .filter(|k| local.get(*k) != remote.get(*k))
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
        // Timestamps are unique per write in the real system; the model may
        // draw one ts for two different writes, which only the tombstone
        // flag can tell apart (reconcile does not look at it).
        let collisions = differing_keys.iter().any(|k| {
            matches!((l0.get(k), r0.get(k)), (Some(a), Some(b)) if a.0 == b.0)
        });
        if !collisions {
            prop_assert_eq!(&local, &remote);
            prop_assert_eq!(tree_of(&local, depth).root(), tree_of(&remote, depth).root());
        }
    }
}
