//! Anti-entropy on real processes: a node that missed writes, overwrites
//! and deletes, or lost its whole directory, holds exactly the newest
//! version of every key after a repair; a converged cluster repairs
//! nothing; a node down longer than the tombstone grace refuses its old
//! data; a busy sync server answers 503.
//!
//! Hints are off (`--hints-bytes-max 0`: every hint is refused as over the
//! bound) and rounds run only on demand (`--anti-entropy-interval-ms 0`),
//! so nothing but the repair under test can bring a replica back. A
//! node's own copy is read through the peer protocol (`Read` frames), which
//! answers from that node's engine alone, timestamps included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman::faultproxy::LinkMode;
use ataman_node::antientropy::wire::{self, Message};
use ataman_node::peer::frame::{self, Stamped};
use ataman_node::peer::handshake::{
    parse_upgrade_response, parse_upgrade_response_for, upgrade_request_for,
};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};
use support::cluster::{TestCluster, assert_status, body, eventually};
use support::{Node, Response};

/// Extra arguments of every node here: no hints, rounds only on demand.
const QUIET: [&str; 4] = ["--hints-bytes-max", "0", "--anti-entropy-interval-ms", "0"];
/// Bound on one repair round in these tests.
const REPAIR_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads `keys` from node `addr`'s own engine over the peer protocol:
/// the newest version of each (tombstones included), `None` when absent.
fn own_versions(addr: SocketAddr, keys: &[Vec<u8>]) -> Vec<Option<Stamped>> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&support::peer_upgrade_request(addr, "http://test-reader:1"))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the 101");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(used) = parse_upgrade_response(&buf).unwrap() {
            buf.drain(..used);
            break;
        }
    }
    let mut out = Vec::new();
    for (id, key) in keys.iter().enumerate() {
        frame::encode(
            &frame::Message::Read {
                id: id as u64,
                key: key.clone(),
            },
            &mut out,
        );
    }
    s.write_all(&out).unwrap();
    let mut answers: HashMap<u64, Option<Stamped>> = HashMap::new();
    while answers.len() < keys.len() {
        if let Some((msg, used)) = frame::decode(&buf).unwrap() {
            buf.drain(..used);
            match msg {
                frame::Message::ReadReply { id, result } => {
                    answers.insert(id, result.expect("a replica read failed"));
                }
                other => panic!("unexpected {other:?}"),
            }
            continue;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before every answer");
        buf.extend_from_slice(&chunk[..n]);
    }
    (0..keys.len() as u64)
        .map(|id| answers.remove(&id).unwrap())
        .collect()
}

/// `ataman ctl repair --url` on node `i`: exit status and stdout.
fn ctl_repair(addr: SocketAddr) -> (std::process::ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["ctl", "repair", "--url", &format!("http://{addr}")])
        .args(["--timeout-ms", &REPAIR_TIMEOUT.as_millis().to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stderr.is_empty() || !out.status.success(),
        "ctl repair succeeded but wrote {stderr:?}"
    );
    (out.status, format!("{stdout}{stderr}"))
}

/// POST /v0/repair on `node`, then polls GET until that round finished;
/// returns the round's report (`last`).
fn repair_over_http(node: &Node) -> serde_json::Value {
    let r = node.conn().request("POST", "/v0/repair", &[], Some(b""));
    assert_status(&r, 202, "POST /v0/repair");
    let started = json(&r);
    let round = started["round"].as_u64().unwrap();
    let deadline = Instant::now() + REPAIR_TIMEOUT;
    loop {
        let r = node.get_target("/v0/repair");
        assert_status(&r, 200, "GET /v0/repair");
        let state = json(&r);
        if state["last"]["round"].as_u64().is_some_and(|n| n >= round) {
            assert_eq!(state["state"], "idle", "{state}");
            return state["last"].clone();
        }
        assert_eq!(state["state"], "running", "{state}");
        assert!(Instant::now() < deadline, "round {round} did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {:?}", body(r)))
}

/// The sum of one per-peer field of a round report.
fn peer_sum(last: &serde_json::Value, field: &str) -> u64 {
    last["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[field].as_u64().unwrap())
        .sum()
}

fn keys(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i:04}").into_bytes())
        .collect()
}

/// Asserts that node `i`'s own copy of every key is exactly node `j`'s.
fn assert_same_copies(c: &TestCluster, i: usize, j: usize, keys: &[Vec<u8>]) {
    let mine = own_versions(c.node(i).addr(), keys);
    let theirs = own_versions(c.node(j).addr(), keys);
    for ((key, a), b) in keys.iter().zip(&mine).zip(&theirs) {
        assert_eq!(
            a,
            b,
            "node {i} and node {j} differ on {}",
            String::from_utf8_lossy(key)
        );
    }
}

/// A node down during writes, overwrites and deletes comes back; `ctl
/// repair` on it fetches exactly the newest version of every key (the
/// deletes as tombstones); a second repair, on a converged cluster, moves
/// nothing.
#[test]
fn a_returning_node_gets_what_it_missed() {
    let mut c = TestCluster::start(3, &QUIET);
    let base = keys("base", 120);
    let fresh = keys("fresh", 80);
    for key in &base {
        assert_status(&c.put(0, key, b"old", 3, 3), 201, "put to all");
    }
    c.terminate(2);
    for (n, key) in base.iter().enumerate() {
        let r = match n % 3 {
            0 => c.put(0, key, format!("new-{n}").as_bytes(), 2, 3),
            1 => c.delete(0, key, 2, 3),
            _ => continue,
        };
        assert!(r.status == 201 || r.status == 202, "{}", body(&r));
    }
    for key in &fresh {
        assert_status(
            &c.put(1, key, b"fresh", 2, 3),
            201,
            "put while node 2 is down",
        );
    }
    // Delete some fresh keys too: node 2 never saw them at all.
    for key in fresh.iter().step_by(4) {
        assert_status(&c.delete(0, key, 2, 3), 202, "delete while node 2 is down");
    }
    c.restart(2);
    let all: Vec<Vec<u8>> = base.iter().chain(&fresh).cloned().collect();
    // Without a repair node 2 still misses them (the test can fail).
    let before = own_versions(c.node(2).addr(), &fresh);
    assert!(
        before.iter().all(Option::is_none),
        "node 2 saw writes it missed"
    );

    let (status, out) = ctl_repair(c.node(2).addr());
    assert!(status.success(), "ctl repair failed: {out}");
    assert!(out.starts_with("round 1: ok"), "{out}");
    assert_eq!(out.lines().count(), 3, "one line per peer: {out}");
    assert_same_copies(&c, 2, 0, &all);
    assert_same_copies(&c, 2, 1, &all);
    let copies = own_versions(c.node(2).addr(), &all);
    for (n, v) in copies.iter().enumerate().take(base.len()) {
        let v = v.as_ref().expect("every base key has a version");
        match n % 3 {
            0 => assert_eq!(v.value.as_deref(), Some(format!("new-{n}").as_bytes())),
            1 => assert_eq!(v.value, None, "base {n} is deleted"),
            _ => assert_eq!(v.value.as_deref(), Some(&b"old"[..])),
        }
    }
    for (n, v) in copies[base.len()..].iter().enumerate() {
        let v = v.as_ref().expect("every fresh key has a version");
        let want: Option<&[u8]> = if n % 4 == 0 { None } else { Some(b"fresh") };
        assert_eq!(v.value.as_deref(), want, "fresh {n}");
    }

    let last = repair_over_http(c.node(2));
    assert_eq!(last["ok"], true, "{last}");
    assert_eq!(peer_sum(&last, "keys_fetched"), 0, "{last}");
    assert_eq!(peer_sum(&last, "keys_pushed"), 0, "{last}");
    assert_eq!(peer_sum(&last, "buckets_differing"), 0, "{last}");
    let metrics = body(&c.node(2).get_target("/metrics"));
    assert!(
        metrics.contains("ataman_antientropy_rounds_total{result=\"ok\"} 2"),
        "{metrics}"
    );
}

/// A node restarted on a wiped data directory refills completely when a
/// peer runs a round (the versions are pushed to it).
#[test]
fn a_wiped_node_refills() {
    let mut c = TestCluster::start(3, &QUIET);
    let all = keys("wiped", 300);
    for (n, key) in all.iter().enumerate() {
        assert_status(
            &c.put(n % 3, key, format!("v{n}").as_bytes(), 3, 3),
            201,
            "put",
        );
    }
    for key in all.iter().step_by(5) {
        assert_status(&c.delete(1, key, 3, 3), 202, "delete");
    }
    c.terminate(1);
    c.node(1).wipe_data();
    c.restart(1);
    assert!(
        own_versions(c.node(1).addr(), &all)
            .iter()
            .all(Option::is_none),
        "a wiped node has nothing"
    );
    let last = repair_over_http(c.node(0));
    assert_eq!(last["ok"], true, "{last}");
    assert_eq!(peer_sum(&last, "keys_pushed"), all.len() as u64, "{last}");
    assert_eq!(peer_sum(&last, "keys_fetched"), 0, "{last}");
    assert_same_copies(&c, 1, 0, &all);
    assert_same_copies(&c, 1, 2, &all);
}

/// `--refill` (docs/CLUSTER.md): a node restarted on a wiped directory
/// serves no reads of its own copies until an anti-entropy round with every
/// peer has completed, even across a restart without the option; then it
/// holds what its peers hold and serves reads again.
#[test]
fn a_refilling_node_serves_no_reads_until_its_round_completes() {
    let mut c = TestCluster::start(3, &QUIET);
    let all = keys("refill", 60);
    for key in &all {
        assert_status(&c.put(0, key, b"v", 3, 3), 201, "put");
    }
    let own = all
        .iter()
        .find(|k| c.replicas(k, 1) == vec![1])
        .expect("a key node 1 keeps first")
        .clone();
    c.terminate(1);
    c.node(1).wipe_data();
    // Node 2 unreachable: node 1's refill cannot complete.
    c.proxy(2).set_mode(LinkMode::Cut);
    c.restart_with(1, &["--refill"]);
    let refused = |c: &TestCluster| {
        let local = c.get(1, &own, 1, 1);
        assert_eq!(
            local.status,
            503,
            "local read while refilling: {}",
            body(&local)
        );
        assert!(body(&local).contains("refilling"), "{}", body(&local));
        let quorum = c.get(0, &own, 2, 3);
        assert_eq!(quorum.status, 504, "ack=2 read: {}", body(&quorum));
        assert!(body(&quorum).contains("refilling"), "{}", body(&quorum));
        let repair = json(&c.node(1).get_target("/v0/repair"));
        assert_eq!(repair["refilling"], true, "{repair}");
    };
    refused(&c);
    let metrics = body(&c.node(1).get_target("/metrics"));
    assert!(metrics.contains("\nataman_refilling 1\n"), "{metrics}");
    // Writes are kept but node 1's copy does not count towards ack (a key
    // on nodes 0 and 1: node 2 is cut off).
    let new_key = (0..1000)
        .map(|i| format!("refill-new-{i}").into_bytes())
        .find(|k| !c.replicas(k, 2).contains(&2))
        .expect("a key kept by nodes 0 and 1");
    for coordinator in [0, 1] {
        let both = c.put(coordinator, &new_key, b"n", 2, 2);
        assert_eq!(
            both.status,
            504,
            "ack=2 via node {coordinator}: {}",
            body(&both)
        );
        assert!(body(&both).contains("does not count"), "{}", body(&both));
    }
    assert_status(
        &c.put(1, &new_key, b"n", 1, 2),
        201,
        "ack=1 put while refilling",
    );
    // A restart without the option keeps refilling (the REFILLING marker).
    c.terminate(1);
    c.restart(1);
    refused(&c);
    c.proxy(2).set_mode(LinkMode::Pass);
    eventually("the refill completes", REPAIR_TIMEOUT, || {
        json(&c.node(1).get_target("/v0/repair"))["refilling"] == false
    });
    assert_eq!(
        c.get(1, &own, 1, 1).status,
        200,
        "local read after the refill"
    );
    assert_same_copies(&c, 1, 0, &all);
    assert!(!c.node(1).data_dir().join("REFILLING").exists());
}

/// A node stopped for longer than the tombstone grace refuses to start on
/// its old data, naming the directory, the grace, why and the procedure;
/// wiped, it starts and a repair refills it, deletes included.
#[test]
fn a_node_away_longer_than_the_grace_is_refused() {
    let grace_ms = 2000;
    let mut args = QUIET.to_vec();
    let grace = grace_ms.to_string();
    args.extend_from_slice(&["--tombstone-grace-ms", &grace]);
    let mut c = TestCluster::start(3, &args);
    let all = keys("grace", 60);
    for key in &all {
        assert_status(&c.put(0, key, b"before", 3, 3), 201, "put");
    }
    c.terminate(2);
    let stopped = Instant::now();
    for key in all.iter().step_by(2) {
        assert_status(&c.delete(0, key, 2, 3), 202, "delete while node 2 is down");
    }
    // Past the grace since node 2 last recorded LAST-SEEN (at its shutdown).
    let wait = Duration::from_millis(grace_ms + 300).saturating_sub(stopped.elapsed());
    std::thread::sleep(wait);
    let (status, stderr) = c.node(2).start_expecting_exit();
    assert!(!status.success(), "a stale node started: {stderr}");
    let dir = c.node(2).data_dir().display().to_string();
    for part in [
        "refusing to start",
        dir.as_str(),
        "2000 ms",
        "tombstones",
        "remove the directory",
        "ataman ctl repair",
    ] {
        assert!(stderr.contains(part), "{part:?} missing from {stderr}");
    }
    c.node(2).wipe_data();
    c.restart(2);
    let (status, out) = ctl_repair(c.node(2).addr());
    assert!(status.success(), "ctl repair failed: {out}");
    assert_same_copies(&c, 2, 0, &all);
    let copies = own_versions(c.node(2).addr(), &all);
    // The deletes are older than the grace by now, so a compaction on the
    // live nodes may have dropped their tombstones: a deleted key is either
    // a tombstone or nothing at all on the refilled node, never a value.
    for (n, v) in copies.iter().enumerate() {
        if n % 2 == 0 {
            let value = v.as_ref().and_then(|v| v.value.as_deref());
            assert_eq!(value, None, "deleted key {n} came back");
        } else {
            let v = v.as_ref().expect("a live key's version");
            assert_eq!(v.value.as_deref(), Some(&b"before"[..]), "live key {n}");
        }
    }
}

/// Opens a sync connection to `addr`: the answer's status line and, on a
/// 101, the socket and the bytes after the head.
fn sync_upgrade(addr: SocketAddr) -> Result<(TcpStream, Vec<u8>), String> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&upgrade_request_for(
        ataman_node::peer::handshake::SYNC_PROTOCOL,
        &addr.to_string(),
        "http://test-peer:1",
    ))
    .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match parse_upgrade_response_for(&buf, ataman_node::peer::handshake::SYNC_PROTOCOL) {
            Ok(Some(used)) => {
                buf.drain(..used);
                return Ok((s, buf));
            }
            Ok(None) => {}
            Err(e) => return Err(e),
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before an answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// One sync frame from `s`.
fn sync_answer(s: &mut TcpStream, buf: &mut Vec<u8>) -> Message {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((msg, used)) = wire::decode(buf).unwrap() {
            buf.drain(..used);
            return msg;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The sync server serves one session and queues four: a sixth upgrade
/// gets 503 `anti-entropy busy`; once the sessions close, upgrades succeed
/// again. A Hello from another cluster is refused with a clear error.
#[test]
fn a_busy_sync_server_answers_503() {
    let c = TestCluster::start(2, &QUIET);
    let addr = c.node(0).addr();
    let held: Vec<(TcpStream, Vec<u8>)> = (0..5)
        .map(|i| sync_upgrade(addr).unwrap_or_else(|e| panic!("upgrade {i}: {e}")))
        .collect();
    let e = sync_upgrade(addr).expect_err("a sixth session was accepted");
    assert!(e.contains("503"), "{e}");
    let metrics = body(&c.node(0).get_target("/metrics"));
    assert!(
        metrics.contains("ataman_antientropy_sessions_refused_total 1"),
        "{metrics}"
    );
    drop(held);
    let mut upgraded = None;
    eventually(
        "a sync upgrade after the sessions closed",
        REPAIR_TIMEOUT,
        || {
            upgraded = sync_upgrade(addr).ok();
            upgraded.is_some()
        },
    );
    let (mut s, mut buf) = upgraded.unwrap();
    let mut out = Vec::new();
    wire::encode(
        &Message::Hello {
            version: wire::VERSION,
            url: c.urls()[1].clone(),
            replicas: 2,
            depth: ataman_node::antientropy::merkle::DEPTH,
            fingerprint: 42,
        },
        &mut out,
    );
    s.write_all(&out).unwrap();
    match sync_answer(&mut s, &mut buf) {
        Message::Error { message } => {
            assert!(message.contains("cluster lists differ"), "{message}")
        }
        other => panic!("expected an Error, got {other:?}"),
    }
}

/// With `--replication-factor 2` of three nodes, writes made with `from=1`
/// get their second copy from anti-entropy, on exactly the key's second
/// replica, and never a third copy.
#[test]
fn writes_below_the_replication_factor_get_their_other_copies() {
    let mut args = QUIET.to_vec();
    args.extend_from_slice(&["--replication-factor", "2"]);
    let c = TestCluster::start(3, &args);
    let all = keys("r2", 90);
    for key in &all {
        let owner = c.replicas(key, 1)[0];
        assert_status(&c.put(owner, key, b"one", 1, 1), 201, "put 1/1");
    }
    let copies = |node: usize| own_versions(c.node(node).addr(), &all);
    let before: usize = (0..3).map(|n| copies(n).iter().flatten().count()).sum();
    assert_eq!(before, all.len(), "from=1 makes one copy");
    for n in 0..3 {
        let last = repair_over_http(c.node(n));
        assert_eq!(last["ok"], true, "{last}");
    }
    let per_node: Vec<Vec<Option<Stamped>>> = (0..3).map(copies).collect();
    for (k, key) in all.iter().enumerate() {
        let mut holders: Vec<usize> = (0..3).filter(|&n| per_node[n][k].is_some()).collect();
        holders.sort_unstable();
        let mut want = c.replicas(key, 2);
        want.sort_unstable();
        assert_eq!(holders, want, "{}", String::from_utf8_lossy(key));
    }
}
