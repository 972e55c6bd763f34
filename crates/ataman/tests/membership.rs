//! Online membership change on real processes (issue 16): a cluster grows
//! from 3 to 5 nodes and shrinks back to 3 while a client writes, and a
//! dead node is replaced; afterwards every acknowledged write is readable
//! with a quorum through every member, and every key has its `R` copies
//! on the members (each node's own versions, `GET /v0/internal/range`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::FaultProxy;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::cluster::{TestCluster, body, entity, eventually};
use support::{Conn, Node, Response};

/// No anti-entropy rounds: the copies checked are the transition's own.
const NO_ROUNDS: [&str; 2] = ["--anti-entropy-interval-ms", "0"];
/// Bound on a transition settling on every member.
const SETTLE_WAIT: Duration = Duration::from_secs(120);
/// Writes the background client makes at most.
const WRITES_MAX: u32 = 20_000;
/// Pause between two background writes.
const WRITE_PAUSE: Duration = Duration::from_millis(2);

fn post(node: &Node, query: &str) -> Response {
    let target = format!("/v0/layout?{query}");
    Conn::open(node.addr()).request("POST", &target, &[], None)
}

fn layout_of(addr: std::net::SocketAddr) -> serde_json::Value {
    let r = Conn::open(addr).request("GET", "/v0/layout", &[], None);
    assert_eq!(r.status, 200, "GET /v0/layout");
    serde_json::from_slice(&r.body).unwrap()
}

/// True when the node at `addr` holds only `version`, settled.
fn settled_at(addr: std::net::SocketAddr, version: u64) -> bool {
    let doc = layout_of(addr);
    doc["version"] == version
        && doc["settled"] == true
        && doc["live_versions"] == serde_json::json!([version])
}

/// The keys of the live versions node `addr` holds itself.
fn local_keys(addr: std::net::SocketAddr) -> BTreeSet<Vec<u8>> {
    let r = Conn::open(addr).request("GET", "/v0/internal/range?start=w&end=x", &[], None);
    assert_eq!(r.status, 200, "internal range: {}", body(&r));
    let mut keys = BTreeSet::new();
    for chunk in r.chunks.unwrap_or_default() {
        // ts (8), kind (1), key length (4, big-endian), key, value.
        let len = u32::from_be_bytes(chunk[9..13].try_into().unwrap()) as usize;
        if chunk[8] != 0 {
            keys.insert(chunk[13..13 + len].to_vec());
        }
    }
    keys
}

/// A client writing unique keys with `ack=2 from=3` through the nodes of
/// `targets` in turn, keeping what was acknowledged (201).
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeMap<String, String>>>,
    thread: Option<std::thread::JoinHandle<u32>>,
}

impl Writer {
    fn start(targets: Arc<Mutex<Vec<std::net::SocketAddr>>>) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, a) = (Arc::clone(&stop), Arc::clone(&acked));
        let thread = std::thread::spawn(move || {
            let mut refused = 0;
            for n in 0..WRITES_MAX {
                if s.load(Ordering::Acquire) {
                    break;
                }
                let addrs = targets.lock().unwrap().clone();
                let addr = addrs[n as usize % addrs.len()];
                let (key, value) = (format!("w{n}"), format!("value-{n}"));
                let target = entity(key.as_bytes(), 2, 3);
                let r = Conn::open(addr).request("PUT", &target, &[], Some(value.as_bytes()));
                if r.status == 201 {
                    a.lock().unwrap().insert(key, value);
                } else {
                    refused += 1;
                }
                std::thread::sleep(WRITE_PAUSE);
            }
            refused
        });
        Writer {
            stop,
            acked,
            thread: Some(thread),
        }
    }

    /// Stops it; the acknowledged writes and how many were not.
    fn finish(mut self) -> (BTreeMap<String, String>, u32) {
        self.stop.store(true, Ordering::Release);
        let refused = self.thread.take().unwrap().join().unwrap();
        let acked = std::mem::take(&mut *self.acked.lock().unwrap());
        (acked, refused)
    }
}

/// A node started with `--join` through `seed`, behind a proxy of its own
/// (its URL); returns both.
fn join(seed: &str) -> (Node, FaultProxy) {
    let proxy = FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    let node = Node::start(&["--self", &url, "--join", seed, NO_ROUNDS[0], NO_ROUNDS[1]]);
    proxy.set_target(node.addr());
    (node, proxy)
}

/// Each acknowledged key is held by at least `r` nodes of `addrs` (looked
/// at first: the reads below repair what they find missing), and reads
/// back with `ack=2 from=3` through every one of them.
fn check(acked: &BTreeMap<String, String>, addrs: &[std::net::SocketAddr], r: usize) {
    assert!(acked.len() > 50, "the writer got {} writes in", acked.len());
    let held: Vec<BTreeSet<Vec<u8>>> = addrs.iter().map(|&a| local_keys(a)).collect();
    for key in acked.keys() {
        let copies = held.iter().filter(|h| h.contains(key.as_bytes())).count();
        assert!(copies >= r, "{key}: {copies} copies, want {r}");
    }
    for &addr in addrs {
        for (key, value) in acked {
            let got = Conn::open(addr).request("GET", &entity(key.as_bytes(), 2, 3), &[], None);
            assert_eq!(got.status, 200, "{key} through {addr}: {}", body(&got));
            assert_eq!(body(&got), *value, "{key} through {addr}");
        }
    }
}

/// Waits until every node of `addrs` holds only `version`, settled.
fn wait_settled(addrs: &[std::net::SocketAddr], version: u64) {
    for &addr in addrs {
        eventually(&format!("{addr} settles at {version}"), SETTLE_WAIT, || {
            settled_at(addr, version)
        });
    }
}

/// 3 -> 4 -> 5 -> 3 under writes (two nodes added one at a time, then two
/// of the first three removed in one version): every transition settles,
/// nothing acknowledged is lost, every key keeps its 3 copies, the
/// removed nodes say they can be stopped and serve no client, and a
/// member restarted with its original `--cluster` list keeps the stored
/// layout.
#[test]
fn grow_then_shrink_under_writes() {
    let mut c = TestCluster::start(3, &NO_ROUNDS);
    let first: Vec<std::net::SocketAddr> = (0..3).map(|i| c.node(i).addr()).collect();
    let targets = Arc::new(Mutex::new(first.clone()));
    let writer = Writer::start(Arc::clone(&targets));
    std::thread::sleep(Duration::from_millis(500));

    let (a, a_proxy) = join(&c.urls()[0]);
    let r = post(c.node(0), &format!("version=2&add={}", a_proxy.url()));
    assert_eq!(r.status, 200, "{}", body(&r));
    targets.lock().unwrap().push(a.addr());
    let four = [first.clone(), vec![a.addr()]].concat();
    wait_settled(&four, 2);

    let (b, b_proxy) = join(&a_proxy.url());
    let r = post(&a, &format!("version=3&add={}", b_proxy.url()));
    assert_eq!(r.status, 200, "{}", body(&r));
    targets.lock().unwrap().push(b.addr());
    let five = [four.clone(), vec![b.addr()]].concat();
    wait_settled(&five, 3);

    // Nodes 1 and 2 leave in one version: the writer stops using them first.
    targets
        .lock()
        .unwrap()
        .retain(|x| *x != first[1] && *x != first[2]);
    let r = post(
        c.node(0),
        &format!("version=4&remove={}&remove={}", c.urls()[1], c.urls()[2]),
    );
    assert_eq!(r.status, 200, "{}", body(&r));
    let left = [first[0], a.addr(), b.addr()];
    wait_settled(&left, 4);
    for gone in [1, 2] {
        let addr = c.node(gone).addr();
        eventually(
            &format!("node {gone} says it was removed"),
            SETTLE_WAIT,
            || {
                let doc = layout_of(addr);
                doc["removed"] == true && doc["safe_to_stop"] == true
            },
        );
        let refused = Conn::open(addr).request("GET", &entity(b"w1", 1, 1), &[], None);
        assert_eq!(refused.status, 503, "{}", body(&refused));
        assert!(body(&refused).contains(&c.urls()[0]), "{}", body(&refused));
    }

    let (acked, _refused) = writer.finish();
    // Node 0 restarted with its original `--cluster` list (the three
    // first nodes) keeps the stored layout, version 4.
    c.terminate(0);
    c.restart(0);
    let left = [c.node(0).addr(), a.addr(), b.addr()];
    wait_settled(&left, 4);
    let doc = layout_of(c.node(0).addr());
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 3, "{doc}");
    assert!(doc["nodes"].to_string().contains(&b_proxy.url()), "{doc}");
    check(&acked, &left, 3);
    // The writes coordinated during the transitions went to both sets.
    let both: u64 = left
        .iter()
        .map(|&a| metric(a, "ataman_layout_writes_both_sets_total"))
        .sum();
    assert!(both > 0, "no write counted as sent to both replica sets");
}

/// A member is killed and replaced in one version, declared dead
/// (`remove=DEAD&dead=DEAD&add=NEW`): the transition settles without it,
/// the data comes from the survivors.
#[test]
fn replace_a_dead_node() {
    let mut c = TestCluster::start(3, &NO_ROUNDS);
    let targets = Arc::new(Mutex::new(vec![c.node(0).addr(), c.node(1).addr()]));
    let writer = Writer::start(Arc::clone(&targets));
    std::thread::sleep(Duration::from_millis(800));
    c.kill9(2);
    let (added, proxy) = join(&c.urls()[0]);
    let r = post(
        c.node(0),
        &format!(
            "version=2&remove={}&dead={}&add={}",
            c.urls()[2],
            c.urls()[2],
            proxy.url()
        ),
    );
    assert_eq!(r.status, 200, "{}", body(&r));
    let left = [c.node(0).addr(), c.node(1).addr(), added.addr()];
    wait_settled(&left, 2);
    let (acked, _refused) = writer.finish();
    check(&acked, &left, 3);
}

/// The unlabelled metric `name` on the node at `addr` (0 when absent).
fn metric(addr: std::net::SocketAddr, name: &str) -> u64 {
    let r = Conn::open(addr).request("GET", "/metrics", &[], None);
    String::from_utf8_lossy(&r.body)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `ataman_layout_copy_keys_moved_total` on the node at `addr`.
fn keys_moved(addr: std::net::SocketAddr) -> u64 {
    metric(addr, "ataman_layout_copy_keys_moved_total")
}

/// A joining node killed with `kill -9` in the middle of its copy starts
/// again on its data, resumes (sources it finished are not asked again)
/// and the transition settles with every key on its 3 replicas.
#[test]
fn a_joining_node_killed_mid_copy_resumes() {
    // The slowest anti-entropy rate (1 MiB/s) makes the copy take seconds.
    let slow = ["--anti-entropy-rate-bytes", "1048576"];
    let c = TestCluster::start(3, &[NO_ROUNDS[0], NO_ROUNDS[1], slow[0], slow[1]]);
    let value = vec![b'v'; 1024];
    let mut acked = BTreeMap::new();
    for n in 0..3000u32 {
        let key = format!("w{n}");
        let r = c.put(n as usize % 3, key.as_bytes(), &value, 2, 3);
        assert_eq!(r.status, 201, "{}", body(&r));
        acked.insert(key, String::from_utf8(value.clone()).unwrap());
    }
    let proxy = FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    let seed = c.urls()[0].clone();
    let mut added = Node::start(&[
        "--self",
        &url,
        "--join",
        &seed,
        NO_ROUNDS[0],
        NO_ROUNDS[1],
        slow[0],
        slow[1],
    ]);
    proxy.set_target(added.addr());
    let r = post(c.node(0), &format!("version=2&add={url}"));
    assert_eq!(r.status, 200, "{}", body(&r));
    eventually("the new node copies", SETTLE_WAIT, || {
        keys_moved(added.addr()) > 0
    });
    assert!(
        !settled_at(added.addr(), 2),
        "the copy ended before the kill: nothing was tested"
    );
    added.kill9();
    added.restart();
    proxy.set_target(added.addr());
    let all = [
        c.node(0).addr(),
        c.node(1).addr(),
        c.node(2).addr(),
        added.addr(),
    ];
    wait_settled(&all, 2);
    check(&acked, &all, 3);
}

/// `ataman ctl` against the node at `addr`: exit code and stdout.
fn ctl(addr: std::net::SocketAddr, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ataman"))
        .arg("ctl")
        .args(["--url", &format!("http://{addr}")])
        .args(args)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), format!("{text}{err}"))
}

/// `ctl layout plan` counts exactly the keys the new node gains (every
/// old node holds every key; each counted once); `apply` commits it,
/// `wait` returns once settled, and applying the same version again is
/// refused (409, exit 2).
#[test]
fn ctl_layout_plan_apply_wait() {
    let c = TestCluster::start(3, &NO_ROUNDS);
    let keys: Vec<String> = (0..300).map(|n| format!("k{n}")).collect();
    for key in &keys {
        let r = c.put(0, key.as_bytes(), b"value", 3, 3);
        assert_eq!(r.status, 201, "{}", body(&r));
    }
    let (added, proxy) = join(&c.urls()[0]);
    let url = proxy.url();
    let mut members = c.urls().to_vec();
    members.push(url.clone());
    let next = ataman_node::cluster::layout::Layout::new(2, members, 3).unwrap();
    let gained = keys
        .iter()
        .filter(|k| next.replicas(k.as_bytes()).contains(&url.as_str()))
        .count();
    let (code, out) = ctl(c.node(1).addr(), &["layout", "plan", "--add", &url]);
    assert_eq!(code, 0, "{out}");
    let total: Vec<&str> = out.lines().last().unwrap().split('\t').collect();
    assert_eq!(total[0], "total", "{out}");
    assert_eq!(total[3], gained.to_string(), "{out}");
    let (code, out) = ctl(
        c.node(1).addr(),
        &["layout", "apply", "--version", "2", "--add", &url],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("layout version 2, replication factor 3\n"),
        "{out}"
    );
    let (code, out) = ctl(
        c.node(2).addr(),
        &["layout", "wait", "--timeout-ms", "120000"],
    );
    assert_eq!(code, 0, "{out}");
    // The last line: settled, and the new node copied each gained key once.
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("layout version 2: settled, "), "{out}");
    assert!(last.contains(&format!("keys copied {gained}/")), "{out}");
    assert!(settled_at(added.addr(), 2));
    // Every member shows the new node's copy (the gossip carries it).
    for i in 0..3 {
        eventually(&format!("node {i} shows the copy"), SETTLE_WAIT, || {
            let doc = layout_of(c.node(i).addr());
            doc["moving"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["url"] == url.as_str() && m["keys_copied"] == gained as u64)
        });
    }
    let (code, out) = ctl(
        c.node(0).addr(),
        &["layout", "apply", "--version", "2", "--add", &url],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("409"), "{out}");
}
