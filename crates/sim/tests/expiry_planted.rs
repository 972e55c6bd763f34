//! Expiry under the simulation: a share of PUTs carry a TTL whose deadline
//! the coordinator stamps from its own (skewed) clock, and each node's
//! engine reads expiry from its skewed clock. The engine's planted bug
//! `drop-expired-without-tombstone` (compaction drops an expired version
//! outright instead of keeping it as a tombstone for the grace) must be
//! caught on a meaningful share of a bounded set of seeds; the same seeds
//! without it pass, and expired values really were read as not found.
//!
//! Premature expiry: the node's planted `expires-early` (deadlines a
//! quarter of `ttl_ms` after the stamp, `ataman_node::ttl::Expiry::as_planted`,
//! which the simulation's coordinator stamps through) must be caught as
//! [`ViolationKind::PrematureExpiry`] with every fault but clock skew (the
//! check's slack is twice the run's largest skew), and the same seeds
//! without it pass.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_sim::history::OpResult;
use ataman_sim::{FaultMix, PlantedBug, SimConfig, ViolationKind, replay_command, run};

/// Seeds tried.
const SEEDS: std::ops::Range<u64> = 1..21;
/// Client operations per seed.
const STEPS: usize = 150;
/// Seeds of [`SEEDS`] the planted bug must fail, at least (it fails about
/// two in three over seeds 1..201 with 200 steps).
const CAUGHT_MIN: usize = 5;

fn config(planted_bug: Option<PlantedBug>) -> SimConfig {
    SimConfig {
        faults: FaultMix::ALL,
        planted_bug,
        ..SimConfig::default_with_steps(STEPS)
    }
}

/// With the bug, a meaningful share of the seeds report a violation.
#[test]
fn dropping_expired_without_a_tombstone_is_caught() {
    let config = config(Some(PlantedBug::DropExpiredWithoutTombstone));
    let mut caught = Vec::new();
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        if let Some(first) = result.report.violations.first() {
            caught.push((seed, first.kind));
        }
    }
    eprintln!(
        "drop-expired-without-tombstone: {} of {} seeds caught (seed, first kind): {caught:?}",
        caught.len(),
        SEEDS.end - SEEDS.start
    );
    assert!(
        caught.len() >= CAUGHT_MIN,
        "only {} seeds caught the planted expiry bug (e.g. {})",
        caught.len(),
        replay_command(SEEDS.start, &config)
    );
}

/// Without the bug the same seeds pass, with expiring writes acknowledged
/// and some read answered not found because one had expired.
#[test]
fn same_seeds_without_the_bug_pass_and_expire() {
    let config = config(None);
    let (mut expiring, mut expired_reads) = (0, 0);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        assert!(
            result.report.ok(),
            "seed {seed}: {}\nreplay: {}",
            result.report.summary(5),
            replay_command(seed, &config)
        );
        let history = &result.history;
        expiring += history
            .acknowledged_writes()
            .filter(|op| op.deadline_ms.is_some())
            .count();
        expired_reads += history
            .ops
            .iter()
            .filter(|read| match &read.result {
                OpResult::Read(Some(v)) if v.value.is_none() => history
                    .ops
                    .iter()
                    .any(|w| w.key == read.key && w.ts == Some(v.ts) && w.deadline_ms.is_some()),
                _ => false,
            })
            .count();
    }
    eprintln!("acknowledged expiring writes {expiring}, reads of an expired value {expired_reads}");
    assert!(expiring > 0, "no expiring write was acknowledged");
    assert!(expired_reads > 0, "no read saw an expired value");
}

/// Seeds of [`SEEDS`] `expires-early` must fail with a premature expiry,
/// at least (it fails 160 of seeds 1..201 with 200 steps, 13 of these
/// 20 with 150).
const EARLY_CAUGHT_MIN: usize = 6;

fn no_skew(planted_bug: Option<PlantedBug>) -> SimConfig {
    SimConfig {
        faults: FaultMix::NO_SKEW,
        ..config(planted_bug)
    }
}

/// Deadlines stamped early are caught as premature expiry on a meaningful
/// share of the seeds; the same seeds without the bug pass.
#[test]
fn expiring_early_is_caught_as_premature_expiry() {
    let planted = no_skew(Some(PlantedBug::ExpiresEarly));
    let mut caught = Vec::new();
    for seed in SEEDS {
        let result = run(seed, &planted).unwrap();
        let premature = result.report.count(ViolationKind::PrematureExpiry);
        if premature > 0 {
            caught.push((seed, premature));
        }
        let clean = run(seed, &no_skew(None)).unwrap();
        assert!(
            clean.report.ok(),
            "seed {seed} without the bug: {}\nreplay: {}",
            clean.report.summary(5),
            replay_command(seed, &no_skew(None))
        );
    }
    eprintln!(
        "expires-early: {} of {} seeds caught (seed, premature expiries): {caught:?}",
        caught.len(),
        SEEDS.end - SEEDS.start
    );
    assert!(
        caught.len() >= EARLY_CAUGHT_MIN,
        "only {} seeds caught expires-early (e.g. {})",
        caught.len(),
        replay_command(SEEDS.start, &planted)
    );
}
