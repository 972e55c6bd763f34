//! Node ids on real processes (issue 31, "A node identity that never
//! collides"): a node added with `--join` holds the id its layout gave it,
//! not the first bootstrap node's; writes of the same keys at the same
//! moment through the bootstrap node 0 and the joined node leave, after
//! anti-entropy (`ataman ctl repair` on every node), every replica of each
//! key holding one version, judged by the fault harness's checker on the
//! replicas' own copies (`GET /v0/internal/range`); again after the joined
//! node restarts (it keeps its id). The planted bug `joined-takes-id-zero`
//! (the old behaviour) is caught by the same checker as two contents
//! under one timestamp.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::FaultProxy;
use ataman::harness::checker::{Findings, check};
use ataman::harness::history::{Copy, CopyState, History};
use ataman_node::hlc::NODE_BITS;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::time::Duration;
use support::cluster::{TestCluster, body, eventually};
use support::{Conn, Node, Response};

/// No periodic anti-entropy: the repairs are the test's own.
const NO_ROUNDS: [&str; 2] = ["--anti-entropy-interval-ms", "0"];
/// Bound on a transition settling, a restarted node serving.
const SETTLE_WAIT: Duration = Duration::from_secs(120);
/// Keys written by both coordinators in one round.
const KEYS: usize = 300;
/// Rounds of writes the planted bug gets to show itself in.
const PLANTED_ROUNDS_MAX: usize = 4;

fn post(node: &Node, query: &str) -> Response {
    let target = format!("/v0/layout?{query}");
    Conn::open(node.addr()).request("POST", &target, &[], None)
}

fn layout_of(addr: SocketAddr) -> serde_json::Value {
    let r = Conn::open(addr).request("GET", "/v0/layout", &[], None);
    assert_eq!(r.status, 200, "GET /v0/layout");
    serde_json::from_slice(&r.body).unwrap()
}

fn settled_at(addr: SocketAddr, version: u64) -> bool {
    let doc = layout_of(addr);
    doc["version"] == version && doc["settled"] == true && doc["member"] != false
}

/// The node id `/v0/layout` at `addr` shows for member `url`.
fn node_id(addr: SocketAddr, url: &str) -> u64 {
    let doc = layout_of(addr);
    doc["node_ids"][url]
        .as_u64()
        .unwrap_or_else(|| panic!("no node id for {url}: {doc}"))
}

/// A cluster of three bootstrap nodes and a fourth added with `--join`
/// (with `planted` extra arguments), settled at version 2.
fn grown(planted: &[&str]) -> (TestCluster, Node, FaultProxy) {
    let c = TestCluster::start(3, &NO_ROUNDS);
    let proxy = FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    let mut args = vec![
        "--self",
        &url,
        "--join",
        &c.urls()[0],
        NO_ROUNDS[0],
        NO_ROUNDS[1],
    ];
    args.extend_from_slice(planted);
    let joined = Node::start(&args);
    proxy.set_target(joined.addr());
    let r = post(c.node(0), &format!("version=2&add={url}"));
    assert_eq!(r.status, 200, "{}", body(&r));
    let mut all: Vec<SocketAddr> = (0..3).map(|i| c.node(i).addr()).collect();
    all.push(joined.addr());
    for addr in all {
        eventually(&format!("{addr} settles at 2"), SETTLE_WAIT, || {
            settled_at(addr, 2)
        });
    }
    (c, joined, proxy)
}

/// Both coordinators write every key of round `round` at the same moment
/// (a barrier before each key): node 0 one value, the joined node another.
fn concurrent_writes(first: SocketAddr, joined: SocketAddr, round: usize) {
    let barrier = Arc::new(Barrier::new(2));
    let writer = |addr: SocketAddr, tag: &'static str, barrier: Arc<Barrier>| {
        std::thread::spawn(move || {
            let mut answered = 0;
            for i in 0..KEYS {
                barrier.wait();
                let key = format!("c{i:04}");
                let value = format!("{tag}-{round}-{i}");
                let r = Conn::open(addr).put(key.as_bytes(), value.as_bytes());
                // 201, or a 5xx of a contended write: either way a version
                // may be stored.
                answered += usize::from(r.status == 201);
            }
            answered
        })
    };
    let a = writer(first, "a", Arc::clone(&barrier));
    let b = writer(joined, "b", barrier);
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert!(
        a > 0 && b > 0,
        "acknowledged: {a} through node 0, {b} through the joined node"
    );
}

/// `ataman ctl repair` on the node at `addr`: one anti-entropy round with
/// every peer, waited for.
fn repair(addr: SocketAddr) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["ctl", "repair", "--url", &format!("http://{addr}")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctl repair on {addr}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Node `node`'s own newest version of every key `c…` it holds.
fn own_copies(node: usize, addr: SocketAddr) -> Vec<Copy> {
    let r = Conn::open(addr).request("GET", "/v0/internal/range?start=c&end=d", &[], None);
    assert_eq!(r.status, 200, "internal range: {}", body(&r));
    let mut copies = Vec::new();
    for chunk in r.chunks.unwrap_or_default() {
        // ts (8, big-endian), kind (1), key length (4, big-endian), key, value.
        let ts = u64::from_be_bytes(chunk[..8].try_into().unwrap());
        let len = u32::from_be_bytes(chunk[9..13].try_into().unwrap()) as usize;
        let key = String::from_utf8(chunk[13..13 + len].to_vec()).unwrap();
        let state = match chunk[8] {
            0 => CopyState::Tombstone { ts },
            _ => CopyState::Value {
                ts,
                value: String::from_utf8_lossy(&chunk[13 + len..]).into_owned(),
            },
        };
        copies.push(Copy {
            key,
            node,
            at_us: 0,
            state,
        });
    }
    copies
}

/// Repairs on every node of `addrs`, then the harness's checker on every
/// replica's own copies; also how many nodes hold each key.
fn repaired_copies(addrs: &[SocketAddr]) -> (Findings, BTreeMap<String, usize>) {
    for &addr in addrs {
        repair(addr);
    }
    let mut history = History::default();
    for (node, &addr) in addrs.iter().enumerate() {
        history.copies.extend(own_copies(node, addr));
    }
    let mut holders: BTreeMap<String, usize> = BTreeMap::new();
    for c in &history.copies {
        *holders.entry(c.key.clone()).or_default() += 1;
    }
    (check(&history), holders)
}

/// Versions on the replicas of `addrs` whose node bits do not name the
/// coordinator that wrote their value: `a-…` values went through node 0
/// (id 0), `b-…` values through the joined node (id `joined_id`); a
/// re-stamp is its own coordinator's too. Since one tie rule settles two
/// contents under one timestamp (anti-entropy, a replica's store), a
/// reused timestamp no longer always leaves two contents behind, but its
/// stamp still says who issued it.
fn misstamped(addrs: &[SocketAddr], joined_id: u64) -> usize {
    let mask = (1u64 << NODE_BITS) - 1;
    let mut wrong = 0;
    for (node, &addr) in addrs.iter().enumerate() {
        for copy in own_copies(node, addr) {
            if let CopyState::Value { ts, value } = copy.state {
                let want = if value.starts_with("b-") {
                    joined_id
                } else {
                    0
                };
                wrong += usize::from(ts & mask != want);
            }
        }
    }
    wrong
}

fn addrs(c: &TestCluster, joined: &Node) -> Vec<SocketAddr> {
    let mut all: Vec<SocketAddr> = (0..3).map(|i| c.node(i).addr()).collect();
    all.push(joined.addr());
    all
}

/// Checks that every key written is held by its 3 replicas, all with one
/// version: no divergence, no two contents under one timestamp.
fn assert_one_version_per_key(findings: &Findings, holders: &BTreeMap<String, usize>, when: &str) {
    assert_eq!(holders.len(), KEYS, "{when}: keys held: {holders:?}");
    assert!(
        holders.values().all(|&n| n >= 3),
        "{when}: a key with fewer than 3 copies: {holders:?}"
    );
    assert_eq!(
        findings.same_timestamp.count, 0,
        "{when}: {:?}",
        findings.same_timestamp
    );
    assert_eq!(
        findings.divergent.count, 0,
        "{when}: {:?}",
        findings.divergent
    );
}

/// Regression (a joined node issued the same timestamps as the first
/// node): the joined node holds its own id, and concurrent writes of the
/// same keys through it and node 0 leave one version per key on every
/// replica after anti-entropy, also after the joined node restarts.
#[test]
fn joined_node_never_shares_a_timestamp_with_node_zero() {
    let (c, mut joined, proxy) = grown(&[]);
    let url = proxy.url();
    let id = node_id(c.node(0).addr(), &url);
    assert_eq!(id, 3, "the smallest id no bootstrap member holds");
    assert_eq!(node_id(c.node(0).addr(), &c.urls()[0]), 0);
    assert_eq!(
        node_id(joined.addr(), &url),
        id,
        "every node shows the same ids"
    );

    concurrent_writes(c.node(0).addr(), joined.addr(), 0);
    let (findings, holders) = repaired_copies(&addrs(&c, &joined));
    assert_one_version_per_key(&findings, &holders, "before the restart");
    assert_eq!(misstamped(&addrs(&c, &joined), id), 0, "before the restart");

    joined.terminate();
    joined.restart();
    proxy.set_target(joined.addr());
    eventually("the restarted node serves", SETTLE_WAIT, || {
        Conn::open(joined.addr())
            .request("GET", "/v0/status", &[], None)
            .status
            == 200
            && settled_at(joined.addr(), 2)
    });
    assert_eq!(node_id(joined.addr(), &url), id, "kept across the restart");
    concurrent_writes(c.node(0).addr(), joined.addr(), 1);
    let (findings, holders) = repaired_copies(&addrs(&c, &joined));
    assert_one_version_per_key(&findings, &holders, "after the restart");
    assert_eq!(misstamped(&addrs(&c, &joined), id), 0, "after the restart");
}

/// Negative control: with the joined node stamping with id 0
/// (`--debug-planted-bug joined-takes-id-zero`, the old behaviour), the
/// same concurrent writes leave versions whose stamp names node 0 for a
/// write the joined node coordinated, or replicas holding two contents
/// under one timestamp (the harness's checker), in some round.
#[test]
fn planted_joined_takes_id_zero_is_caught() {
    let (c, joined, proxy) = grown(&["--debug-planted-bug", "joined-takes-id-zero"]);
    let id = node_id(c.node(0).addr(), &proxy.url());
    let mut seen = Vec::new();
    for round in 0..PLANTED_ROUNDS_MAX {
        concurrent_writes(c.node(0).addr(), joined.addr(), round);
        let (findings, _) = repaired_copies(&addrs(&c, &joined));
        let wrong = misstamped(&addrs(&c, &joined), id);
        seen.push((findings.same_timestamp.count, wrong));
        if findings.same_timestamp.count > 0 || wrong > 0 {
            eprintln!(
                "round {round}: {} keys with two contents under one timestamp, {wrong} versions stamped by another node",
                findings.same_timestamp.count,
            );
            return;
        }
    }
    panic!("the planted bug was never caught: (two contents, misstamped) per round {seen:?}");
}
