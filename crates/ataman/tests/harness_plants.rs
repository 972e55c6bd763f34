//! The fault harness (`ataman test-cluster`, docs/RELIABILITY.md "Negative
//! controls") catches the two planted membership bugs in its own runs,
//! and the same profiles without the bug pass:
//!
//! - **`leavecut`** (two members removed in one version while cut off
//!   through their link proxies, `R` = 2, writes `ack` 2 of 2 on the set
//!   workload, so about one key in ten lives on the two leaving nodes
//!   only): with `copy-skips-partitioned-leaving-node` the transition
//!   settles while they are cut off, they are stopped and wiped, and the
//!   checker reports acknowledged writes lost; without it the transition
//!   holds until the cut heals and nothing is lost.
//! - **`join` with the same keys written through node 0 and the joined
//!   node** (register keys, 5 of them, and the set workload): with
//!   `joined-takes-id-zero` the checker reports replica copies stamped
//!   with node id 0 for writes the joined node coordinated (and, when the
//!   replicas still disagree, two contents under one timestamp); without
//!   it every stamp names its coordinator.
//!
//! The runs take turns (a lock), so each has the machine's two cores to
//! itself; each is bounded by its duration, its membership step's bounds
//! (`harness/membership.rs`), convergence and the final reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman::harness::faults::{self, FaultKind, Shape};
use ataman::harness::history::{History, OpKind, OpOutcome};
use std::path::Path;
use support::harness_run::{Outcome, one_run_at_a_time, test_cluster};

/// The `leavecut` profile's seed: its one step starts 1 s or more into
/// the run (asserted below), after some hundred set keys were written.
const LEAVE_CUT_SEED: u64 = 3;
/// The `leavecut` profile's workload and fault time, s.
const LEAVE_CUT_DURATION_S: u64 = 6;

/// The `leavecut` profile (docs/RELIABILITY.md), with `planted` if any.
fn leave_cut(dir: &Path, planted: Option<&str>) -> Outcome {
    let shape = Shape {
        members: 5,
        slots: 5,
        min_members: 2,
    };
    let steps = faults::schedule_shaped(
        LEAVE_CUT_SEED,
        shape,
        LEAVE_CUT_DURATION_S * 1000,
        &[FaultKind::LeaveCut],
    );
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert!(steps[0].at_ms >= 1000, "{steps:?}");
    let seed = LEAVE_CUT_SEED.to_string();
    let duration = LEAVE_CUT_DURATION_S.to_string();
    let mut args = vec![
        "--seed",
        &seed,
        "--duration-s",
        &duration,
        "--nodes",
        "5",
        "--spares",
        "0",
        "--replication-factor",
        "2",
        "--from",
        "2",
        "--ack-w",
        "2",
        "--ack-r",
        "2",
        "--faults",
        "leavecut",
        "--workloads",
        "set",
    ];
    if let Some(bug) = planted {
        args.extend(["--planted-bug", bug]);
    }
    test_cluster(dir, &args)
}

/// The `leavecut` step's record in the history.
fn leave_cut_detail(o: &Outcome) -> String {
    let steps: Vec<&str> = o
        .history
        .faults
        .iter()
        .filter(|e| e.kind == FaultKind::LeaveCut)
        .map(|e| e.detail.as_str())
        .collect();
    assert_eq!(steps.len(), 1, "{steps:?}\n{}", o.text);
    steps[0].to_owned()
}

/// Without the bug, two members removed in one version while cut off:
/// the transition holds for the whole cut (no member settles, the
/// members name the leaving nodes in `waiting_for`), settles once the cut
/// heals, both leaving nodes are stopped once safe, and nothing
/// acknowledged is lost.
#[test]
fn leavecut_holds_the_transition_and_loses_nothing() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let o = leave_cut(dir.path(), None);
    println!("{}", o.text);
    let detail = leave_cut_detail(&o);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(o.report["acknowledged_writes_lost"], 0, "{}", o.text);
    assert!(detail.starts_with("committed version 2"), "{detail}");
    assert!(detail.contains("not settled, waiting for"), "{detail}");
    assert!(!detail.contains("SETTLED"), "{detail}");
    assert!(detail.contains("healed, settled after"), "{detail}");
    assert_eq!(
        detail.matches("safe to stop, stopped, wiped").count(),
        2,
        "{detail}"
    );
    assert!(o.text.contains("final layout version 2"), "{}", o.text);
    let acked = o
        .history
        .ops
        .iter()
        .filter(|op| op.kind == OpKind::Put && op.outcome == OpOutcome::Ok)
        .count();
    assert!(acked > 100, "too few writes to judge: {acked}\n{}", o.text);
}

/// Negative control: with `copy-skips-partitioned-leaving-node` (the old
/// rule) the transition settles while both leaving nodes are cut off,
/// they are wiped, and the harness reports the writes only they held as
/// lost (exit 1).
#[test]
fn planted_copy_skips_partitioned_leaving_node_is_caught_by_the_harness() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let o = leave_cut(dir.path(), Some("copy-skips-partitioned-leaving-node"));
    println!("{}", o.text);
    let detail = leave_cut_detail(&o);
    assert!(detail.contains("SETTLED"), "{detail}");
    let lost = o.report["acknowledged_writes_lost"].as_u64().unwrap_or(0);
    assert!(lost > 0, "the planted skip was not caught:\n{}", o.text);
    assert_eq!(o.code, 1, "violations exit 1:\n{}", o.text);
    assert_eq!(
        o.report["planted_bug"],
        "copy-skips-partitioned-leaving-node"
    );
}

/// Negative control: with `copy-skips-keys` (the transition copy leaves
/// out one key in four, the same keys from every source) the `leavecut`
/// profile settles after the cut heals, both leaving nodes are wiped, and
/// the keys whose old replicas were both leaving and that the copy left
/// out are lost (exit 1). The same profile without the bug is
/// `leavecut_holds_the_transition_and_loses_nothing`.
#[test]
fn planted_copy_skips_keys_is_caught_by_the_harness() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let o = leave_cut(dir.path(), Some("copy-skips-keys"));
    println!("{}", o.text);
    let detail = leave_cut_detail(&o);
    assert!(detail.contains("healed, settled after"), "{detail}");
    let lost = o.report["acknowledged_writes_lost"].as_u64().unwrap_or(0);
    assert!(
        lost > 0,
        "the planted copy skip was not caught:\n{}",
        o.text
    );
    assert_eq!(o.code, 1, "violations exit 1:\n{}", o.text);
    assert_eq!(o.report["planted_bug"], "copy-skips-keys");
}

/// The join profile's seed and duration: the join at under 1.5 s settles
/// in some seconds, then clients write through the joined node too.
const JOIN_SEED: u64 = 2;
const JOIN_DURATION_S: &str = "12";

/// The `join` profile (docs/RELIABILITY.md), with `planted` if any.
fn join(dir: &Path, planted: Option<&str>) -> Outcome {
    let seed = JOIN_SEED.to_string();
    let mut args = vec![
        "--seed",
        &seed,
        "--duration-s",
        JOIN_DURATION_S,
        "--nodes",
        "3",
        "--spares",
        "1",
        "--faults",
        "join",
        "--workloads",
        "register,set",
        "--rate",
        "200",
    ];
    if let Some(bug) = planted {
        args.extend(["--planted-bug", bug]);
    }
    test_cluster(dir, &args)
}

/// Acknowledged writes the joined slot 3 coordinated.
fn acked_through_joined(h: &History) -> usize {
    h.ops
        .iter()
        .filter(|op| op.node == 3 && op.kind == OpKind::Put && op.outcome == OpOutcome::Ok)
        .count()
}

/// Without the bug, a node joins (slot 3, node id 3 in the layout) and
/// clients write the same keys through it and the bootstrap nodes: every
/// replica copy's stamp names its write's coordinator, no two contents
/// under one timestamp, nothing lost.
#[test]
fn join_profile_stamps_name_their_coordinator() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let o = join(dir.path(), None);
    println!("{}", o.text);
    assert!(
        o.history.node_ids.contains(&(3, 3)),
        "{:?}",
        o.history.node_ids
    );
    assert!(
        o.history.node_ids.contains(&(0, 0)),
        "{:?}",
        o.history.node_ids
    );
    let through = acked_through_joined(&o.history);
    assert!(
        through > 100,
        "too few writes through the joined node: {through}\n{}",
        o.text
    );
    assert_eq!(o.report["foreign_stamps"], 0, "{}", o.text);
    assert_eq!(o.report["same_timestamp"], 0, "{}", o.text);
    assert_eq!(o.code, 0, "{}", o.text);
}

/// Negative control: with `joined-takes-id-zero` (the old behaviour: the
/// joined node stamps with node 0's id) the checker reports copies
/// stamped with id 0 for writes the joined node coordinated (exit 1).
#[test]
fn planted_joined_takes_id_zero_is_caught_by_the_harness() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let o = join(dir.path(), Some("joined-takes-id-zero"));
    println!("{}", o.text);
    assert!(acked_through_joined(&o.history) > 0, "{}", o.text);
    let foreign = o.report["foreign_stamps"].as_u64().unwrap_or(0);
    assert!(foreign > 0, "the planted id 0 was not caught:\n{}", o.text);
    let example = o.report["examples"]["foreign_stamps"].to_string();
    assert!(example.contains("carries node id 0"), "{example}");
    assert_eq!(o.code, 1, "violations exit 1:\n{}", o.text);
}

/// The exact checker's planted bugs run at the default settings (3
/// nodes, every fault kind, every workload, `ack` 2 of 3), 20 s instead
/// of 30 to bound the suite, seed 1.
fn default_profile(dir: &Path, planted: &str) -> Outcome {
    test_cluster(
        dir,
        &[
            "--seed",
            "1",
            "--duration-s",
            "20",
            "--planted-bug",
            planted,
        ],
    )
}

/// Negative controls at the default settings (docs/RELIABILITY.md, "The
/// exact checker"): each planted bug is caught by the default run (`R` =
/// 3, repair on), by the rule named (the unplanted default run is
/// `fault_harness.rs`'s).
#[test]
fn planted_version_bugs_are_caught_at_the_default_settings() {
    for (bug, finding) in [
        // Caught by the `crash` fault (every member killed at once after a
        // moment of slow disks; seed 1 has three in 20 s).
        ("ack-before-wal", "acknowledged_writes_lost"),
        ("read-repair-writes-older", "impossible_reads"),
        ("expired-value-served", "expiry_violations"),
        ("expires-early", "expiry_violations"),
    ] {
        let _turn = one_run_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let o = default_profile(dir.path(), bug);
        println!("{bug}:\n{}", o.text);
        assert_eq!(o.report["exact_versions"], true, "{}", o.text);
        if bug == "ack-before-wal" {
            let crashes = o.report["faults_injected"]["crash"].as_u64().unwrap_or(0);
            assert!(crashes > 0, "no crash fault ran:\n{}", o.text);
        }
        let found = o.report[finding].as_u64().unwrap_or(0);
        assert!(found > 0, "{bug} not caught ({finding} 0):\n{}", o.text);
        assert_eq!(o.code, 1, "violations exit 1:\n{}", o.text);
    }
}
