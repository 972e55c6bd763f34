//! The simulation's hint store (`ataman_sim::hint_store`, an in-memory
//! model) against the node's own (`ataman_node::hints::HintStore`, a second
//! engine, here on a simulated disk): the same seeded sequence of adds
//! (several peers, values, tombstones, deadlines), cursor reads and
//! removals (delivered, repeated and unknown sequence numbers) gives the
//! same pending hints, in the same order under the same sequence numbers,
//! and the same counts. The node's store is closed and reopened before each
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

/// Every peer's pending hints, whole and from a cursor, and the counts.
fn compare(node: &NodeHints, sim: &SimHints, rng: &mut Rng, round: usize) -> usize {
    let mut compared = 0;
    for peer in 0..PEERS {
        let all = sim_pending(sim, peer, None, usize::MAX);
        assert_eq!(
            node_pending(node, peer, None, usize::MAX),
            all,
            "round {round}, peer {peer}: pending hints differ"
        );
        assert_eq!(
            node.count(&url(peer)).0,
            sim.count(peer) as u64,
            "round {round}, peer {peer}: counts differ"
        );
        let after = (!all.is_empty()).then(|| all[rng.below(all.len() as u64) as usize].0);
        let max = 1 + rng.below(4) as usize;
        assert_eq!(
            node_pending(node, peer, after, max),
            sim_pending(sim, peer, after, max),
            "round {round}, peer {peer}: pending after {after:?}, at most {max}, differ"
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
        // Deliver some: pending ones, one twice, and an unknown one.
        for peer in 0..PEERS {
            let pending = sim_pending(&sim, peer, None, usize::MAX);
            let mut seqs: Vec<u64> = pending
                .iter()
                .filter(|_| rng.below(2) == 0)
                .map(|h| h.0)
                .collect();
            if let Some(&first) = seqs.first() {
                seqs.push(first);
            }
            seqs.push(1 << 50);
            removed += seqs.len();
            node.remove(&url(peer), &seqs);
            sim.remove(peer, &seqs);
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
