//! Planted-bug control at the logic level: a coordinator that answers a
//! write after `ack - 1` durable replicas (the simulation's test-only
//! `PlantedBug::AckMinusOne`, never in production code) breaks
//! read-your-writes when quorums intersect; the checker must report it for
//! some seed of a bounded set. The same seeds without the bug pass.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_sim::{FaultMix, PlantedBug, SimConfig, ViolationKind, replay_command, run};

/// Seeds tried.
const SEEDS: std::ops::Range<u64> = 1..51;
/// Client operations per seed.
const STEPS: usize = 150;

fn config(planted_bug: Option<PlantedBug>) -> SimConfig {
    SimConfig {
        faults: FaultMix::ALL,
        planted_bug,
        ..SimConfig::default_with_steps(STEPS)
    }
}

/// With the bug, some seed has a read that misses an acknowledged write.
#[test]
fn ack_minus_one_is_caught() {
    let config = config(Some(PlantedBug::AckMinusOne));
    let mut caught = Vec::new();
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        let stale = result.report.count(ViolationKind::StaleRead);
        if stale > 0 {
            caught.push((seed, stale));
        }
    }
    let n = SEEDS.end - SEEDS.start;
    eprintln!(
        "planted bug (answer after ack - 1): {} of {n} seeds report stale reads (seed, reads): {caught:?}",
        caught.len()
    );
    assert!(
        !caught.is_empty(),
        "no seed of {n} caught a coordinator answering after ack - 1 (e.g. {})",
        replay_command(SEEDS.start, &config)
    );
}

/// Without the bug, the same seeds report no stale read (nor anything else
/// beyond the known reused-timestamp bug).
#[test]
fn same_seeds_without_the_bug_pass() {
    let config = config(None);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        let beyond = result.report.beyond_reused_timestamps();
        assert!(
            beyond.is_empty(),
            "seed {seed}: {beyond:?}\nreplay: {}",
            replay_command(seed, &config)
        );
    }
}
