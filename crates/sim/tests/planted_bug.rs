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

/// Without the bug, the same seeds report no stale read (nor anything else,
/// a reused timestamp included).
#[test]
fn same_seeds_without_the_bug_pass() {
    let config = config(None);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        assert!(
            result.report.ok(),
            "seed {seed}: {}\nreplay: {}",
            result.report.summary(5),
            replay_command(seed, &config)
        );
    }
}

/// Seeds where replicas that store older writes (the planted bug
/// `NoRestamp`: last writer wins by clocks alone, as before re-stamping)
/// let a write that ended earlier beat an acknowledged one: found by
/// `ataman-sim --seeds 1..2001 --planted-bug no-restamp` (7 of 2,000
/// seeds with the test kit's generator: 192, 502, 965, 1279, 1619, 1633,
/// 1718; since the simulation runs the node's own replication driver, 8:
/// 297, 300, 357, 466, 701, 901, 1572, 1727; since a share of PUTs
/// expire, 6 of 2,000: 949, 1110, 1201, 1501, 1701, 1856; since anti-entropy
/// also resolves versions under one timestamp (the tie rule, issue 31), which
/// changes seed 949's run, of 1..4001: 1110, 1201, 1501, 1701, 1856, 2154,
/// 2509, 2625, 2671, 2723, 2867, 3527, 3555, 3717, and none of 1..1001).
const NO_RESTAMP_SEEDS: std::ops::Range<u64> = 1100..1120;

/// The re-stamping control: without it some seed of the range reports a
/// read that returned an earlier write's version; with it none does.
#[test]
fn no_restamp_is_caught_and_restamping_passes() {
    let with_bug = SimConfig {
        planted_bug: Some(PlantedBug::NoRestamp),
        ..SimConfig::default_with_steps(200)
    };
    let caught: Vec<u64> = NO_RESTAMP_SEEDS
        .filter(|&seed| {
            run(seed, &with_bug)
                .unwrap()
                .report
                .count(ViolationKind::StaleRead)
                > 0
        })
        .collect();
    eprintln!("planted bug (no re-stamping): seeds with stale reads: {caught:?}");
    assert!(
        !caught.is_empty(),
        "no seed in {NO_RESTAMP_SEEDS:?} caught replicas storing older writes (e.g. {})",
        replay_command(NO_RESTAMP_SEEDS.start, &with_bug)
    );
    let fixed = SimConfig {
        planted_bug: None,
        ..with_bug
    };
    for seed in caught {
        let result = run(seed, &fixed).unwrap();
        assert!(
            result.report.ok(),
            "seed {seed} with re-stamping: {}\nreplay: {}",
            result.report.summary(5),
            replay_command(seed, &fixed)
        );
    }
}
