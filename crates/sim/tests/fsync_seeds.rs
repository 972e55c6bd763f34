//! Many seeds with fsync on and every kind of fault (crashes with
//! power-loss and kill -9 images, partitions, one-way cuts, message loss,
//! clock skew, disk faults, dropped hints): no acknowledged write is lost
//! (cluster-wide, or on the replica that acknowledged it), reads see every
//! write acknowledged before them when quorums intersect, nothing read was
//! never written, and after the faults heal and anti-entropy runs every
//! replica of every key holds the same newest version, also after a final
//! power cut of every node, and no two writes of a key carry the same
//! timestamp (`TimestampReused`: a node's clock issuing a timestamp again
//! after a restart, fixed by the clock's durable reservation,
//! docs/ARCHITECTURE.md "Deterministic simulation"). A failure names its
//! seed and the command that replays it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_sim::{FaultMix, SimConfig, replay_command, run};
use std::collections::BTreeMap;

/// Client operations per seed.
const STEPS: usize = 200;

/// Runs `seeds` with `config`; panics with every failing seed, and checks
/// that the runs exercised what the assertions are about.
fn run_seeds(config: &SimConfig, seeds: std::ops::Range<u64>) {
    let mut failures = Vec::new();
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut acked, mut ryw_pairs, mut reads, mut restarts, mut copies) = (0, 0, 0, 0, 0);
    for seed in seeds.clone() {
        let result = run(seed, config).unwrap();
        acked += result.report.acknowledged_writes;
        ryw_pairs += result.report.ryw_pairs;
        reads += result.report.reads;
        restarts += result.report.restarts;
        copies += result.stats.anti_entropy_copies;
        for (k, v) in &result.stats.faults {
            *faults.entry(k).or_insert(0) += v;
        }
        let violations = &result.report.violations;
        if !violations.is_empty() {
            let lines: Vec<String> = violations
                .iter()
                .take(5)
                .map(|v| format!("{:?}: {}", v.kind, v.detail))
                .collect();
            failures.push(format!(
                "seed {seed}: {} violations:\n{}\nreplay: {}",
                violations.len(),
                lines.join("\n"),
                replay_command(seed, config)
            ));
        }
    }
    let n = (seeds.end - seeds.start) as usize;
    assert!(
        failures.is_empty(),
        "{} of {n} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(acked > n * 20, "only {acked} acknowledged writes");
    assert!(reads > n * 10, "only {reads} reads");
    assert!(
        ryw_pairs > n * 10,
        "only {ryw_pairs} read-your-writes pairs"
    );
    assert!(restarts > n, "only {restarts} restarts");
    assert!(copies > 0, "anti-entropy never copied a version");
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
        "{} nodes / {} replicas, {n} seeds × {STEPS} steps: {acked} acknowledged writes, {reads} reads, {ryw_pairs} read-your-writes pairs, {restarts} restarts, {copies} anti-entropy copies; faults {faults:?}",
        config.nodes, config.replicas
    );
}

/// Three nodes, every key on all three.
#[test]
fn three_nodes_three_replicas() {
    let config = SimConfig {
        faults: FaultMix::ALL,
        ..SimConfig::default_with_steps(STEPS)
    };
    run_seeds(&config, 1..201);
}

/// Five nodes, every key on three: coordinators are often not replicas.
#[test]
fn five_nodes_three_replicas() {
    let config = SimConfig {
        nodes: 5,
        replicas: 3,
        faults: FaultMix::ALL,
        ..SimConfig::default_with_steps(STEPS)
    };
    run_seeds(&config, 1..101);
}
