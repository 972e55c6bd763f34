//! Anti-entropy rounds between two simulated nodes, with the real pure
//! core (`ataman_node::antientropy`): each side builds a Merkle tree
//! ([`Tree`]) over the keys both keep ([`scope::shared`]), the trees are
//! compared ([`Tree::differing_leaves`]), the `(key, tag)` digests of the
//! differing buckets are merge-joined ([`reconcile`]), and each
//! [`Step::Fetch`] / [`Step::Push`] copies the tie rule's winner
//! (`ataman_node::version_order`) to the side that lacks it, applied as the real node applies a peer's versions
//! (`antientropy::local::apply`: a timestamp too far ahead is refused, the
//! clock observes the rest, one durable write).
//!
//! A round here runs at one virtual instant between two nodes that are up
//! and can reach each other both ways: the sync protocol's framing,
//! paging, rate limit and concurrency with writes (a session spans many
//! loop iterations on real nodes) are not simulated; the real-process
//! anti-entropy tests cover those.

use crate::node::{SimNode, State};
use ataman_node::antientropy::merkle::{Tree, bucket_of};
use ataman_node::antientropy::reconcile::{Step, reconcile};
use ataman_node::antientropy::scope;
use ataman_node::peer::frame::Stamped;
use ataman_node::version_order::Tag;
use std::collections::BTreeSet;

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundReport {
    /// Buckets whose leaves differed.
    pub buckets: usize,
    /// Versions copied to the initiator.
    pub fetched: Vec<(Vec<u8>, u64)>,
    /// Versions copied to the other side.
    pub pushed: Vec<(Vec<u8>, u64)>,
}

/// The tree of `state`'s keys that `me` keeps together with `peer`.
fn tree_of(
    state: &State,
    seeds: &[u64],
    replicas: usize,
    me: usize,
    peer: usize,
    depth: u32,
) -> Tree {
    let mut tree = Tree::new(depth);
    for (key, v) in state {
        if scope::shared(seeds, key, replicas, me, peer) {
            tree.add(key, &Tag::of(v.as_version()));
        }
    }
    tree.finish();
    tree
}

/// The `(key, tag)` digest of `state`'s keys shared by `me` and `peer` in `buckets`, in key order.
fn digest<'a>(
    state: &'a State,
    seeds: &'a [u64],
    replicas: usize,
    (me, peer): (usize, usize),
    depth: u32,
    buckets: &'a BTreeSet<u32>,
) -> impl Iterator<Item = (Vec<u8>, Tag)> + 'a {
    state
        .iter()
        .filter(move |(key, _)| {
            buckets.contains(&bucket_of(key, depth))
                && scope::shared(seeds, key, replicas, me, peer)
        })
        .map(|(key, v)| (key.clone(), Tag::of(v.as_version())))
}

/// One round between `a` (the initiator) and `b` at virtual time
/// `now_ms`, with trees of `depth` levels. Both must be up.
pub fn round(
    a: &mut SimNode,
    b: &mut SimNode,
    seeds: &[u64],
    replicas: usize,
    depth: u32,
    now_ms: u64,
) -> Result<RoundReport, String> {
    let (ia, ib) = (a.index, b.index);
    let state_a = a.state()?;
    let state_b = b.state()?;
    let tree_a = tree_of(&state_a, seeds, replicas, ia, ib, depth);
    let tree_b = tree_of(&state_b, seeds, replicas, ib, ia, depth);
    let differing: BTreeSet<u32> = tree_a.differing_leaves(&tree_b).into_iter().collect();
    let mut report = RoundReport {
        buckets: differing.len(),
        ..RoundReport::default()
    };
    if differing.is_empty() {
        return Ok(report);
    }
    let steps = reconcile(
        digest(&state_a, seeds, replicas, (ia, ib), depth, &differing),
        digest(&state_b, seeds, replicas, (ib, ia), depth, &differing),
    );
    let mut to_a: Vec<(Vec<u8>, Stamped)> = Vec::new();
    let mut to_b: Vec<(Vec<u8>, Stamped)> = Vec::new();
    for step in steps {
        match step {
            Step::Fetch(key) => {
                if let Some(v) = state_b.get(&key) {
                    to_a.push((key, v.clone()));
                }
            }
            Step::Push(key) => {
                if let Some(v) = state_a.get(&key) {
                    to_b.push((key, v.clone()));
                }
            }
        }
    }
    report.fetched = a.apply_versions(now_ms, to_a)?;
    report.pushed = b.apply_versions(now_ms, to_b)?;
    Ok(report)
}
