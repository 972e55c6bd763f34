//! One `ataman test-cluster` run from a test: the run's exit code, its
//! text, its JSON report and its history, and the lock that makes a test
//! file's runs take turns (each starts a cluster of its own).

use ataman::harness::history::History;
use ataman_testkit::lock::lock;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// One cluster run at a time.
static CLUSTER_RUNS: Mutex<()> = Mutex::new(());

/// Holds the turn until dropped.
pub fn one_run_at_a_time() -> MutexGuard<'static, ()> {
    lock(&CLUSTER_RUNS)
}

/// What a run left: exit code, stdout and stderr, the JSON report
/// (`Null` when it wrote none), the history.
pub struct Outcome {
    pub code: i32,
    pub text: String,
    pub report: serde_json::Value,
    pub history: History,
}

/// Runs `ataman test-cluster` with `args` (and a report, a history and
/// the nodes' directories in `dir`).
pub fn test_cluster(dir: &Path, args: &[&str]) -> Outcome {
    let report = dir.join("report.json");
    let history = dir.join("history.jsonl");
    let out = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_ataman")))
        .arg("test-cluster")
        .arg("--report")
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
        .unwrap_or(serde_json::Value::Null);
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
