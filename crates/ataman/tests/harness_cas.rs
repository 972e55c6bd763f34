//! The fault harness's `cas` workload (issue 37, docs/RELIABILITY.md
//! "Linearizability (issue 37)"): atomic read-modify-writes over RESP
//! through the consensus register, under faults, checked for
//! linearizability per key and for exact counters; and its negative
//! control, the planted acceptor bug `register-accepts-below-promise`,
//! caught by the same run profile. The runs take turns (a lock).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use support::harness_run::{self, Outcome, one_run_at_a_time};

/// Operations a clean run must have decided (answered with a result)
/// at least: the checker must have had something to judge.
const DECIDED_MIN: u64 = 150;

/// Runs `ataman test-cluster --workloads cas` with `args`; it must
/// write its report.
fn test_cluster(dir: &Path, args: &[&str]) -> Outcome {
    let mut all = vec!["--workloads", "cas"];
    all.extend_from_slice(args);
    let o = harness_run::test_cluster(dir, &all);
    assert!(!o.report.is_null(), "no report:\n{}", o.text);
    o
}

fn count(report: &serde_json::Value, path: &[&str]) -> u64 {
    let mut v = report;
    for p in path {
        v = &v[*p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no {path:?} in the report: {report:#}"))
}

/// The profile both tests run: 3 nodes, 4 unpaced clients, 12 s.
const PROFILE: [&str; 8] = [
    "--seed",
    "1",
    "--duration-s",
    "12",
    "--clients",
    "4",
    "--rate",
    "0",
];

/// Under kill, pause, partition and clock faults every key's history of
/// register operations is linearizable and every counter exact, with at
/// least DECIDED_MIN operations decided and a counter checked.
#[test]
fn cas_under_faults_is_linearizable() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut args = PROFILE.to_vec();
    args.extend(["--faults", "kill,pause,partition,clock"]);
    let o = test_cluster(dir.path(), &args);
    assert_eq!(o.code, 0, "{}", o.text);
    assert_eq!(count(&o.report, &["linearizability_violations"]), 0);
    let ok = count(&o.report, &["cas", "by_outcome", "ok"]);
    assert!(ok >= DECIDED_MIN, "{ok} decided:\n{}", o.text);
    assert!(count(&o.report, &["cas", "counters"]) >= 1, "{}", o.text);
    assert!(
        count(&o.report, &["faults_injected", "kill"]) >= 1,
        "{}",
        o.text
    );
    assert!(o.history.cas.iter().any(|op| op.last), "no final read");
    println!("{}", o.text);
}

/// Negative control: with `register-accepts-below-promise` planted in
/// every node (an acceptor takes an accept below its promise, so two
/// proposers can both decide), the same profile without faults (more
/// duels) reports a key whose history is not linearizable, exit 1, and
/// prints its witness.
#[test]
fn planted_acceptor_bug_is_caught() {
    let _turn = one_run_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut args = PROFILE.to_vec();
    args.extend([
        "--faults",
        "none",
        "--planted-bug",
        "register-accepts-below-promise",
    ]);
    let o = test_cluster(dir.path(), &args);
    assert_eq!(o.code, 1, "{}", o.text);
    let found = count(&o.report, &["linearizability_violations"])
        + o.report["cas"]["counter_violations"]
            .as_array()
            .map_or(0, |a| a.len() as u64);
    assert!(found >= 1, "{}", o.text);
    assert!(
        o.text.contains("not linearizable: key") || o.text.contains("counter:"),
        "{}",
        o.text
    );
}
