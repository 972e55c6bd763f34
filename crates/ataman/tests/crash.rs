//! Crash test with real processes: a child writes with durability
//! `complete` and prints every acknowledged write; the parent kills it with
//! SIGKILL at a random moment, reopens the database and checks that every
//! acknowledged write is there (and that no value was invented).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman::crash_writer::{crash_options, value_for};
use ataman_engine::Db;
use ataman_testkit::rng::Rng;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Cycles in the test suite; `scripts/soak-crash` runs thousands.
const CYCLES: u64 = 30;

fn cycles() -> u64 {
    std::env::var("ATAMAN_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CYCLES)
}

/// Runs one child until killed after `delay`; returns its acknowledged (key, ts) pairs.
fn run_child(dir: &std::path::Path, cycle: u64, delay: Duration) -> Vec<(String, u64)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args([
            "internal",
            "crash-writer",
            "--cycle",
            &cycle.to_string(),
            "--dir",
        ])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn crash writer");
    let stdout = child.stdout.take().expect("child stdout");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut ready = false;
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        // Only newline-terminated lines count: the kill may cut the last one.
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if line.last() != Some(&b'\n') {
                break;
            }
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            line.clear();
            if text == "ready" {
                ready = true;
                let _ = ready_tx.send(());
                continue;
            }
            let parts: Vec<&str> = text.split(' ').collect();
            match parts.as_slice() {
                ["ack", key, ts] => {
                    acks.push((key.to_string(), ts.parse::<u64>().expect("ack ts")))
                }
                _ => panic!("unexpected line from the crash writer: {text:?}"),
            }
        }
        (ready, acks)
    });
    // The kill delay counts from the child being ready (open done), so a
    // slow start on a loaded machine still leaves time for writes.
    let became_ready = ready_rx.recv_timeout(Duration::from_secs(60)).is_ok();
    std::thread::sleep(delay);
    // SAFETY: plain kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill failed");
    let status = child.wait().expect("wait child");
    assert!(!status.success(), "child exited on its own: {status:?}");
    let (ready, acks) = reader.join().expect("reader thread");
    assert!(
        ready && became_ready,
        "cycle {cycle}: child never became ready"
    );
    acks
}

/// Every write acknowledged before a kill -9 survives, across many cycles.
#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    // key -> highest acknowledged timestamp, over all cycles.
    let mut acked: HashMap<String, u64> = HashMap::new();
    let mut rng = Rng::new(0x5eed_1234 ^ u64::from(std::process::id()));
    let started = Instant::now();
    let mut total_acks = 0usize;
    for cycle in 1..=cycles() {
        let delay = Duration::from_millis(150 + rng.below(400));
        let acks = run_child(dir.path(), cycle, delay);
        total_acks += acks.len();
        for (key, ts) in acks {
            let slot = acked.entry(key).or_insert(0);
            *slot = (*slot).max(ts);
        }
        let db = Db::open(dir.path(), crash_options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen failed: {e}"));
        for (key, &ts) in &acked {
            let entry = db
                .get(key.as_bytes())
                .unwrap()
                .unwrap_or_else(|| panic!("cycle {cycle}: acknowledged {key}@{ts} lost"));
            assert!(
                entry.ts >= ts,
                "cycle {cycle}: {key} has ts {} older than acknowledged {ts}",
                entry.ts
            );
            // Whatever version is there was really written: its value matches.
            assert_eq!(
                entry.value.as_deref(),
                Some(value_for(key, entry.ts).as_slice()),
                "cycle {cycle}: {key} holds a value never written"
            );
        }
        db.close().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "crash test exceeded its time bound"
        );
    }
    assert!(total_acks > 0, "no write was ever acknowledged");
    eprintln!(
        "crash test: {} cycles, {total_acks} acknowledged writes, {} keys checked",
        cycles(),
        acked.len()
    );
}
