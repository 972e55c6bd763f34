//! Layout transitions (`--grow`: a fourth node added mid-run, on the
//! node's own layout rules): each of the three planted transition bugs is
//! caught on some seed of a bounded set, and the same seeds without a bug
//! pass (beyond the known reused-timestamp bug, as `planted_bug.rs`)
//! with every run settled at version 2.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_sim::{FaultMix, PlantedBug, SimConfig, replay_command, run};

/// Seeds tried (since expiring PUTs joined the traffic, `writes-skip-new`
/// is caught on about one seed in twenty: 67 here).
const SEEDS: std::ops::Range<u64> = 41..81;
/// Client operations per seed.
const STEPS: usize = 200;

fn config(planted_bug: Option<PlantedBug>) -> SimConfig {
    SimConfig {
        nodes: 4,
        replicas: 3,
        faults: FaultMix::ALL,
        planted_bug,
        grow: true,
        ..SimConfig::default_with_steps(STEPS)
    }
}

fn caught(bug: PlantedBug) -> Vec<u64> {
    let config = config(Some(bug));
    SEEDS
        .filter(|&seed| {
            !run(seed, &config)
                .unwrap()
                .report
                .beyond_reused_timestamps()
                .is_empty()
        })
        .collect()
}

/// Each planted transition bug fails some seed.
#[test]
fn each_planted_transition_bug_is_caught() {
    for bug in [
        PlantedBug::ReadsBeforeSync,
        PlantedBug::WritesSkipNew,
        PlantedBug::CleanupEarly,
    ] {
        let seeds = caught(bug);
        eprintln!(
            "{}: {} of {} seeds caught: {seeds:?}",
            bug.name(),
            seeds.len(),
            SEEDS.end - SEEDS.start
        );
        assert!(
            !seeds.is_empty(),
            "{} was never caught (e.g. {})",
            bug.name(),
            replay_command(SEEDS.start, &config(Some(bug)))
        );
    }
}

/// Without a bug the same seeds pass, and every run's transition settled.
#[test]
fn same_seeds_without_a_bug_pass_and_settle() {
    let config = config(None);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        let beyond = result.report.beyond_reused_timestamps();
        assert!(
            beyond.is_empty(),
            "seed {seed}: {beyond:?}\nreplay: {}",
            replay_command(seed, &config)
        );
        assert!(result.stats.layout_settled, "seed {seed} did not settle");
        assert!(result.stats.layout_copied > 0, "seed {seed} copied nothing");
    }
}
