//! Many seeds with fsync on and every kind of fault: no acknowledged write
//! is lost (cluster-wide or on the replica that acknowledged it), reads see
//! every write acknowledged before them when quorums intersect, nothing
//! read was never written, and after the faults heal and the repairs run
//! every replica of every key holds the same newest version (then again
//! after a power cut of every node). A failure names its seed and the
//! command that replays it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_sim::{FaultMix, SimConfig, replay_command, run};
use std::collections::BTreeMap;

/// Seeds run: a bounded set, every run of the file well under a minute on
/// a loaded 2-core machine.
const SEEDS: std::ops::Range<u64> = 1..201;
/// Client operations per seed.
const STEPS: usize = 150;

/// Every seed of `SEEDS` passes the checker, and the runs covered what they claim to.
#[test]
fn fsync_on_every_fault_no_violation() {
    let config = SimConfig {
        faults: FaultMix::ALL,
        ..SimConfig::default_with_steps(STEPS)
    };
    let mut failures = Vec::new();
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut acked, mut ryw_pairs, mut reads, mut restarts) = (0, 0, 0, 0);
    for seed in SEEDS {
        let result = run(seed, &config).unwrap();
        acked += result.report.acknowledged_writes;
        ryw_pairs += result.report.ryw_pairs;
        reads += result.report.reads;
        restarts += result.report.restarts;
        for (k, v) in &result.stats.faults {
            *faults.entry(k).or_insert(0) += v;
        }
        if !result.report.ok() {
            failures.push(format!(
                "seed {seed}:\n{}\nreplay: {}",
                result.report.summary(5),
                replay_command(seed, &config)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} seeds failed:\n{}",
        failures.len(),
        SEEDS.end - SEEDS.start,
        failures.join("\n")
    );
    // The runs exercised what the assertions are about.
    let seeds = (SEEDS.end - SEEDS.start) as usize;
    assert!(acked > seeds * 10, "only {acked} acknowledged writes");
    assert!(
        ryw_pairs > seeds * 10,
        "only {ryw_pairs} read-your-writes pairs"
    );
    assert!(reads > seeds * 10, "only {reads} reads");
    assert!(restarts > seeds, "only {restarts} restarts");
    for kind in [
        "crash (power loss)",
        "crash (kill -9)",
        "partition",
        "one-way cut",
        "message loss",
        "clock skew",
        "disk fault",
        "hints dropped",
    ] {
        assert!(
            faults.get(kind).copied().unwrap_or(0) > 0,
            "no {kind}: {faults:?}"
        );
    }
    eprintln!(
        "{seeds} seeds × {STEPS} steps: {acked} acknowledged writes, {reads} reads, {ryw_pairs} read-your-writes pairs, {restarts} restarts, faults {faults:?}"
    );
}
