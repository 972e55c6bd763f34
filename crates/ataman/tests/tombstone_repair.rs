//! Repair-based tombstone collection on real processes
//! (docs/decisions/0007): with one replica stopped, the others keep the
//! tombstones of the keys it shares with them however long past the
//! grace; once it is back and anti-entropy rounds complete with it, they
//! collect them, and no deleted key reads again. The planted bug
//! `collect-on-grace-alone` (collection on the grace, as before) is this
//! test's negative control.
//!
//! Hints are off (`--hints-bytes-max 0`), so only anti-entropy brings the
//! stopped replica the deletes it missed; a short grace and small
//! memtables make compactions judge the tombstones during the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman::faultproxy::LinkMode;
use std::time::{Duration, Instant};
use support::Node;
use support::cluster::{TestCluster, assert_status, body, eventually};

const GRACE_MS: u64 = 3_000;
const KEYS: usize = 40;
/// Bound on each phase that waits for compactions or rounds.
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);

fn args(planted: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "--hints-bytes-max",
        "0",
        "--anti-entropy-interval-ms",
        "300",
        "--tombstone-grace-ms",
        &GRACE_MS.to_string(),
        "--memtable-bytes-max",
        "65536",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if planted {
        a.extend([
            "--debug-planted-bug".into(),
            "collect-on-grace-alone".into(),
        ]);
    }
    a
}

fn metric(node: &Node, name: &str) -> u64 {
    let page = String::from_utf8_lossy(&node.get_target("/metrics").body).into_owned();
    page.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
        .trim()
        .parse()
        .unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// Writes filler keys between the deleted ones through nodes `via`
/// (`ack` of 3), enough to flush memtables and run compactions that
/// rewrite the tombstones.
fn filler(c: &TestCluster, via: usize, ack: u32, round: usize) {
    let value = vec![b'f'; 1024];
    for i in 0..KEYS * 4 {
        let k = format!("k{:04}-{round}-{i}", i % KEYS).into_bytes();
        assert_status(&c.put(via, &k, &value, ack, 3), 201, "filler put");
    }
}

/// Runs the scenario; `Err` names the first resurrection or early
/// collection seen.
fn scenario(planted: bool) -> Result<(), String> {
    let a = args(planted);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let c = TestCluster::start(3, &a);
    for i in 0..KEYS {
        assert_status(&c.put(0, &key(i), b"old", 3, 3), 201, "put to all");
    }
    // Node 2 stopped: paused, and its link cut so sessions with it fail fast.
    let pid = c.node(2).pid() as libc::pid_t;
    // SAFETY: kill(2) on a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    c.proxy(2).set_mode(LinkMode::Cut);
    for i in 0..KEYS {
        assert_status(&c.delete(0, &key(i), 2, 3), 202, "delete without node 2");
    }
    let deleted_at = Instant::now();
    // Past the grace, compactions on nodes 0 and 1 judge the tombstones.
    let mut round = 0;
    let deadline = Instant::now() + PHASE_TIMEOUT;
    while deleted_at.elapsed() < Duration::from_millis(2 * GRACE_MS)
        || metric(
            c.node(0),
            "ataman_engine_tombstones_waiting_past_grace_total",
        ) == 0
        || metric(
            c.node(1),
            "ataman_engine_tombstones_waiting_past_grace_total",
        ) == 0
    {
        for n in [0, 1] {
            let dropped = metric(c.node(n), "ataman_engine_tombstones_dropped_total");
            if dropped > 0 {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGCONT) };
                return Err(format!(
                    "node {n} collected {dropped} tombstones while node 2 was stopped"
                ));
            }
        }
        assert!(
            Instant::now() < deadline,
            "no compaction judged a tombstone past the grace"
        );
        filler(&c, round % 2, 2, round);
        round += 1;
    }
    // Reported after a round of node 0's (rounds every 300 ms).
    eventually(
        "node 2 reported as unrepaired past the grace",
        PHASE_TIMEOUT,
        || metric(c.node(0), "ataman_antientropy_peers_unrepaired_past_grace") >= 1,
    );
    // Node 2 back: two rounds with it, then compactions collect.
    c.proxy(2).set_mode(LinkMode::Pass);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    let deadline = Instant::now() + PHASE_TIMEOUT;
    loop {
        let dropped: Vec<u64> = (0..3)
            .map(|n| metric(c.node(n), "ataman_engine_tombstones_dropped_total"))
            .collect();
        if dropped.iter().all(|&d| d >= KEYS as u64) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "tombstones not collected after node 2 returned: dropped {dropped:?}"
        );
        filler(&c, round % 3, 2, round);
        round += 1;
    }
    for n in 0..3 {
        for i in 0..KEYS {
            let r = c.get(n, &key(i), 3, 3);
            if r.status != 404 {
                return Err(format!(
                    "key {i} reads {} {:?} on node {n} after collection",
                    r.status,
                    body(&r)
                ));
            }
        }
    }
    drop(c);
    Ok(())
}

/// Tombstones wait for repair with every replica, not the grace; after it
/// they are collected and no deleted key reads again.
#[test]
fn tombstones_wait_for_repair_with_every_replica() {
    scenario(false).unwrap();
}

/// Negative control: collected on the grace alone, the tombstones go
/// while node 2 is stopped.
#[test]
fn planted_collect_on_grace_alone_is_caught() {
    let e = scenario(true).expect_err("collection on the grace alone not caught");
    assert!(e.contains("while node 2 was stopped"), "{e}");
}
