//! The simulation's hint store (`ataman_sim::hint_store`, an in-memory
//! model) against the node's own (`ataman_node::hints::HintStore`, a second
//! engine, here on a simulated disk): the same seeded sequence of adds
//! (several peers, values, tombstones, deadlines), cursor reads and
//! removals (delivered, repeated and unknown sequence numbers) gives the
//! same pending hints in the same order, and the same counts. Sequence
//! numbers are compared by position, not value: after a reopen the node's
//! store may reuse the numbers of removed hints whose tombstones were
//! compacted away (it recounts from the disk), which the model never does;
//! harmless, since the driver's cursor dies with the process, and both
//! stores take the same cursor and removals (each in its own numbers). The node's store is closed and reopened before each
//! comparison (its `pending` may not see a hint `add` just queued; a
//! reopen recounts from the disk), so this compares what the two keep,
//! not when an add becomes visible. What survives a crash is compared in
//! neither (the model's documented simplification: docs/RELIABILITY.md,
//! "The simulation's models").

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_engine::WalMode;
use ataman_engine::fs::FileSystem;
use ataman_engine::fs::sim::SimFs;
use ataman_node::hints::HintStore as NodeHints;
use ataman_node::peer::frame::Stamped;
use ataman_sim::hint_store::HintStore as SimHints;
use ataman_testkit::rng::Rng;
use std::path::Path;
use std::sync::Arc;

const PEERS: usize = 3;
const DIR: &str = "/hints";

fn url(peer: usize) -> String {
    format!("http://127.0.0.1:{}", 7000 + peer)
}

/// One hint as (seq, key, ts, value, deadline), from either store.
type Flat = (u64, Vec<u8>, u64, Option<Vec<u8>>, Option<u64>);

fn open(fs: &SimFs) -> NodeHints {
    NodeHints::open_on(
        Path::new(DIR),
        u64::MAX,
        WalMode::Fsync,
        Arc::new(fs.clone()),
    )
    .unwrap()
}

fn node_pending(store: &NodeHints, peer: usize, after: Option<u64>, max: usize) -> Vec<Flat> {
    store
        .pending(&url(peer), after, max)
        .unwrap()
        .into_iter()
        .map(|h| (h.seq, h.key, h.ts, h.value, h.deadline_ms))
        .collect()
}

fn sim_pending(store: &SimHints, peer: usize, after: Option<u64>, max: usize) -> Vec<Flat> {
    store
        .pending(peer, after, max)
        .into_iter()
        .map(|h| {
            let v = h.version;
            (h.seq, h.key, v.ts, v.value, v.deadline_ms)
        })
        .collect()
}

/// The hints with their sequence numbers zeroed.
fn unnumbered(hints: &[Flat]) -> Vec<Flat> {
    hints
        .iter()
        .map(|h| (0, h.1.clone(), h.2, h.3.clone(), h.4))
        .collect()
}

/// Every peer's pending hints, whole and from a cursor, and the counts.
fn compare(node: &NodeHints, sim: &SimHints, rng: &mut Rng, round: usize) -> usize {
    let mut compared = 0;
    for peer in 0..PEERS {
        let all = sim_pending(sim, peer, None, usize::MAX);
        let node_all = node_pending(node, peer, None, usize::MAX);
        let same = |a: &[Flat], b: &[Flat]| unnumbered(a) == unnumbered(b);
        assert!(
            same(&node_all, &all),
            "round {round}, peer {peer}: pending hints differ\nnode {node_all:?}\nmodel {all:?}"
        );
        assert!(
            node_all.windows(2).all(|w| w[0].0 < w[1].0),
            "round {round}, peer {peer}: node's hints out of sequence order"
        );
        assert_eq!(
            node.count(&url(peer)).0,
            sim.count(peer) as u64,
            "round {round}, peer {peer}: counts differ"
        );
        // The cursor: the same hint, each store in its own numbers.
        let at = (!all.is_empty()).then(|| rng.below(all.len() as u64) as usize);
        let max = 1 + rng.below(4) as usize;
        let from_node = node_pending(node, peer, at.map(|i| node_all[i].0), max);
        let from_sim = sim_pending(sim, peer, at.map(|i| all[i].0), max);
        assert!(
            same(&from_node, &from_sim),
            "round {round}, peer {peer}: pending after hint {at:?}, at most {max}, differ"
        );
        compared += all.len();
    }
    compared
}

#[test]
fn the_model_keeps_what_the_node_keeps() {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new(DIR)).unwrap();
    let mut node = open(&fs);
    let mut sim = SimHints::default();
    let mut rng = Rng::new(36);
    let (mut compared, mut removed) = (0, 0);
    for round in 0..12 {
        for _ in 0..rng.between(1, 12) {
            let peer = rng.below(PEERS as u64) as usize;
            let key = format!("k{}", rng.below(20)).into_bytes();
            let ts = rng.between(1, 1 << 40);
            let version = match rng.below(4) {
                0 => Stamped::tombstone(ts),
                1 => Stamped {
                    deadline_ms: Some(rng.between(1, 1 << 40)),
                    ..Stamped::value(ts, vec![b'e'; rng.below(5) as usize])
                },
                _ => Stamped::value(ts, vec![b'v'; rng.below(9) as usize]),
            };
            node.add_expiring(
                &url(peer),
                &key,
                version.ts,
                version.value.as_deref(),
                version.deadline_ms,
            )
            .unwrap();
            sim.add(peer, key, version);
        }
        node.close().unwrap();
        node = open(&fs);
        compared += compare(&node, &sim, &mut rng, round);
        // Deliver some: pending ones, one twice, and an unknown one (each
        // store's removal in its own numbers, the same hints).
        for peer in 0..PEERS {
            let pending = sim_pending(&sim, peer, None, usize::MAX);
            let node_pending = node_pending(&node, peer, None, usize::MAX);
            let mut picked: Vec<usize> = (0..pending.len()).filter(|_| rng.below(2) == 0).collect();
            if let Some(&first) = picked.first() {
                picked.push(first);
            }
            let mut sim_seqs: Vec<u64> = picked.iter().map(|&i| pending[i].0).collect();
            let mut node_seqs: Vec<u64> = picked.iter().map(|&i| node_pending[i].0).collect();
            sim_seqs.push(1 << 50);
            node_seqs.push(1 << 50);
            removed += sim_seqs.len();
            node.remove(&url(peer), &node_seqs);
            sim.remove(peer, &sim_seqs);
        }
        node.close().unwrap();
        node = open(&fs);
        compared += compare(&node, &sim, &mut rng, round);
    }
    eprintln!(
        "hints compared {compared}, removals asked {removed}, delivered {}",
        sim.delivered
    );
    assert!(
        compared > 50 && sim.delivered > 10,
        "too little compared: {compared}"
    );
}
