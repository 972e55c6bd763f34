//! The fault harness's `cas` workload (issue 37, docs/RELIABILITY.md
//! "Linearizability (issue 37)"): atomic read-modify-writes over RESP
//! through the consensus register, under faults, checked for
//! linearizability per key and for exact counters; and its negative
//! control, the planted acceptor bug `register-accepts-below-promise`,
//! caught by the same run profile. The runs take turns (a lock).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ataman::harness::history::History;
use ataman_testkit::lock::lock;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// One cluster run at a time.
static CLUSTER_RUNS: Mutex<()> = Mutex::new(());

fn one_run_at_a_time() -> MutexGuard<'static, ()> {
    lock(&CLUSTER_RUNS)
}

/// Operations a clean run must have decided (answered with a result)
/// at least: the checker must have had something to judge.
const DECIDED_MIN: u64 = 150;

/// What a run left: exit code, its text, the JSON report, the history.
struct Outcome {
    code: i32,
    text: String,
    report: serde_json::Value,
    history: History,
}

/// Runs `ataman test-cluster --workloads cas` with `args`.
fn test_cluster(dir: &Path, args: &[&str]) -> Outcome {
    let report = dir.join("report.json");
    let history = dir.join("history.jsonl");
    let out = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_ataman")))
        .arg("test-cluster")
        .args(["--workloads", "cas", "--report"])
        .arg(&report)
        .arg("--history")
        .arg(&history)
        .arg("--dir")
        .arg(dir.join("run"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read(&report)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| panic!("no report:\n{text}"));
    let file =
        std::fs::File::open(&history).unwrap_or_else(|e| panic!("no history ({e}):\n{text}"));
    let history = History::read_jsonl(std::io::BufReader::new(file)).unwrap();
    Outcome {
        code: out.status.code().unwrap_or(-1),
        text,
        report,
        history,
    }
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
