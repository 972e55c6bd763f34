//! Tombstone collection during simulated runs (`ataman_sim::collection`):
//! the engines drop dead versions past a short grace once the node's
//! repair-based horizon allows, and no older value reads or stays again.
//! The planted `collect-on-grace-alone` (collection on the grace alone,
//! the rule before repair-based collection) brings deleted values back
//! from a replica that missed the delete; the checker must report it for
//! some seed of a bounded set, and the same seeds without it pass having
//! collected.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_sim::{FaultMix, PlantedBug, SimConfig, ViolationKind, replay_command, run};

/// Seeds tried.
const SEEDS: std::ops::Range<u64> = 1..41;
/// Client operations per seed.
const STEPS: usize = 150;

fn config(planted_bug: Option<PlantedBug>) -> SimConfig {
    SimConfig {
        faults: FaultMix::ALL,
        planted_bug,
        ..SimConfig::default_with_steps(STEPS)
    }
}

/// With the bug, some seed has a deleted value back on a replica, at the
/// end or in a read.
#[test]
fn collect_on_grace_alone_is_caught() {
    let config = config(Some(PlantedBug::CollectOnGraceAlone));
    let mut caught = Vec::new();
    for seed in SEEDS {
        let report = run(seed, &config).unwrap().report;
        let back = [
            ViolationKind::LostOnReplica,
            ViolationKind::LostWrite,
            ViolationKind::StaleRead,
        ]
        .iter()
        .map(|&k| report.count(k))
        .sum::<usize>();
        if back > 0 {
            caught.push((seed, back));
        }
    }
    let n = SEEDS.end - SEEDS.start;
    eprintln!(
        "planted collect-on-grace-alone: {} of {n} seeds report an older version back (seed, violations): {caught:?}",
        caught.len()
    );
    assert!(
        !caught.is_empty(),
        "no seed of {n} caught collection on the grace alone (e.g. {})",
        replay_command(SEEDS.start, &config)
    );
}

/// Without the bug, every seed collects dead versions (the final
/// collection at least) and passes every check.
#[test]
fn same_seeds_without_the_bug_collect_and_pass() {
    let config = config(None);
    let mut collected = 0;
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        assert!(
            result.report.ok(),
            "seed {seed}: {}\nreplay: {}",
            result.report.summary(5),
            replay_command(seed, &config)
        );
        assert!(
            result.stats.collected > 0,
            "seed {seed} collected nothing\nreplay: {}",
            replay_command(seed, &config)
        );
        collected += result.stats.collected;
    }
    eprintln!(
        "without the bug: {collected} dead versions collected over {SEEDS:?}, every check passed"
    );
}
