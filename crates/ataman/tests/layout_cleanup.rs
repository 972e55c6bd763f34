//! Cleanup after a layout change on real processes (issue 16, "Clean up
//! last"): 3 nodes at R = 2 with data (values and tombstones) grow to 4,
//! then one of the first three is removed, while a client writes. After
//! each change settles and every node's cleanup is done, each member
//! holds (its own versions, `GET /v0/internal/range`) exactly the keys it
//! replicates in the new layout: none it lost, none missing, so every key
//! has its `R` copies; the removed node holds nothing at all; every
//! acknowledged write reads back through every member; and a restarted
//! member finds its cleanup recorded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::FaultProxy;
use ataman_node::cluster::placement;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::cluster::{TestCluster, body, entity, eventually};
use support::{Conn, Node, Response};

/// The replication factor (and the writes' `from`).
const R: usize = 2;
/// Bound on a transition settling, and its cleanup ending, on every node.
const SETTLE_WAIT: Duration = Duration::from_secs(120);
/// Keys written before the first change.
const KEYS: u32 = 400;
/// Writes the background client makes at most.
const WRITES_MAX: u32 = 20_000;
/// Pause between two background writes.
const WRITE_PAUSE: Duration = Duration::from_millis(5);

/// What a key should read as: a value, or deleted (404).
type Expected = BTreeMap<String, Option<String>>;

fn args() -> Vec<&'static str> {
    // No anti-entropy rounds: the copies checked are the writes' and the
    // transitions' own.
    vec![
        "--replication-factor",
        "2",
        "--anti-entropy-interval-ms",
        "0",
    ]
}

fn post(node: &Node, query: &str) -> Response {
    Conn::open(node.addr()).request("POST", &format!("/v0/layout?{query}"), &[], None)
}

fn layout_of(addr: SocketAddr) -> serde_json::Value {
    let r = Conn::open(addr).request("GET", "/v0/layout", &[], None);
    assert_eq!(r.status, 200, "GET /v0/layout");
    serde_json::from_slice(&r.body).unwrap()
}

/// Settled on `version` (stored, one live version) and its cleanup done.
fn cleaned_at(addr: SocketAddr, version: u64) -> bool {
    let doc = layout_of(addr);
    doc["version"] == version
        && doc["settled"] == true
        && doc["live_versions"] == serde_json::json!([version])
        && doc["cleanup"]["version"] == version
        && doc["cleanup"]["running"] == 0
}

/// Every key (tombstones included) the node at `addr` holds itself (every
/// key the test writes starts with a letter after `a`).
fn held(addr: SocketAddr) -> BTreeSet<String> {
    let r = Conn::open(addr).request("GET", "/v0/internal/range?start=a", &[], None);
    assert_eq!(r.status, 200, "internal range of {addr}: {}", body(&r));
    let mut keys = BTreeSet::new();
    for chunk in r.chunks.unwrap_or_default() {
        // ts (8), kind (1), key length (4, big-endian), key, value.
        let len = u32::from_be_bytes(chunk[9..13].try_into().unwrap()) as usize;
        keys.insert(String::from_utf8(chunk[13..13 + len].to_vec()).unwrap());
    }
    keys
}

/// A node started with `--join` through `seed`, behind its own proxy.
fn join(seed: &str) -> (Node, FaultProxy) {
    let proxy = FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    // R comes from the seed's layout.
    let node = Node::start(&[
        "--self",
        &url,
        "--join",
        seed,
        "--anti-entropy-interval-ms",
        "0",
    ]);
    proxy.set_target(node.addr());
    (node, proxy)
}

/// A client writing `{prefix}{n}` with `ack=2 from=2` through `targets`
/// in turn, keeping what was acknowledged, and every key it tried.
struct Writer {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Expected>>,
    tried: Arc<Mutex<BTreeSet<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(targets: Arc<Mutex<Vec<SocketAddr>>>, prefix: &'static str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(Expected::new()));
        let tried = Arc::new(Mutex::new(BTreeSet::new()));
        let (s, a, t) = (Arc::clone(&stop), Arc::clone(&acked), Arc::clone(&tried));
        let thread = std::thread::spawn(move || {
            for n in 0..WRITES_MAX {
                if s.load(Ordering::Acquire) {
                    break;
                }
                let addrs = targets.lock().unwrap().clone();
                let addr = addrs[n as usize % addrs.len()];
                let (key, value) = (format!("{prefix}{n}"), format!("value-{n}"));
                let target = entity(key.as_bytes(), 2, 2);
                t.lock().unwrap().insert(key.clone());
                let r = Conn::open(addr).request("PUT", &target, &[], Some(value.as_bytes()));
                if r.status == 201 {
                    a.lock().unwrap().insert(key, Some(value));
                }
                std::thread::sleep(WRITE_PAUSE);
            }
        });
        Writer {
            stop,
            acked,
            tried,
            thread: Some(thread),
        }
    }

    /// Stops it; the acknowledged writes and every key tried.
    fn finish(mut self) -> (Expected, BTreeSet<String>) {
        self.stop.store(true, Ordering::Release);
        self.thread.take().unwrap().join().unwrap();
        let acked = std::mem::take(&mut *self.acked.lock().unwrap());
        (acked, std::mem::take(&mut *self.tried.lock().unwrap()))
    }
}

/// Each member holds exactly the keys of `acked` it replicates in the
/// layout they report, so each has its `R` copies; and no member holds a
/// key of `tried` (a superset) it does not replicate. A write the client
/// saw fail may be on some of its replicas only: where it is missing is
/// not checked.
fn check_placement(
    members: &[SocketAddr],
    acked: &BTreeSet<String>,
    tried: &BTreeSet<String>,
    label: &str,
) {
    let doc = layout_of(members[0]);
    let nodes: Vec<String> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(nodes.len(), members.len(), "{label}: {doc}");
    let mut copies: BTreeMap<&str, usize> = BTreeMap::new();
    for &addr in members {
        let me = layout_of(addr)["self"].as_str().unwrap().to_owned();
        let i = nodes.iter().position(|n| *n == me).unwrap();
        let held = held(addr);
        let unknown: Vec<_> = held.iter().filter(|k| !tried.contains(*k)).collect();
        assert!(
            unknown.is_empty(),
            "{label}: {me} holds {unknown:?}, never written"
        );
        let (mut lost, mut missing) = (Vec::new(), Vec::new());
        for key in tried {
            let mine = placement::replicas(&nodes, key.as_bytes(), R).contains(&i);
            match (mine, held.contains(key)) {
                (true, true) => *copies.entry(key).or_default() += 1,
                (true, false) if acked.contains(key) => missing.push(key),
                (false, true) => lost.push(key),
                _ => {}
            }
        }
        assert!(
            lost.is_empty(),
            "{label}: {me} still holds keys it lost: {lost:?}"
        );
        assert!(
            missing.is_empty(),
            "{label}: {me} lacks keys it replicates: {missing:?}"
        );
    }
    for key in acked {
        assert_eq!(
            copies.get(key.as_str()),
            Some(&R),
            "{label}: copies of {key}"
        );
    }
}

/// Every expected key reads back through every member (`ack=2 from=2`).
fn check_reads(members: &[SocketAddr], expected: &Expected, label: &str) {
    for &addr in members {
        for (key, value) in expected {
            let got = Conn::open(addr).request("GET", &entity(key.as_bytes(), 2, 2), &[], None);
            match value {
                Some(v) => {
                    assert_eq!(got.status, 200, "{label}: {key} via {addr}: {}", body(&got));
                    assert_eq!(body(&got), *v, "{label}: {key} via {addr}");
                }
                None => assert_eq!(got.status, 404, "{label}: deleted {key} via {addr}"),
            }
        }
    }
}

/// Grow 3 -> 4, then remove one of the first three, at R = 2 under
/// writes: after each change every node holds exactly its share, and the
/// removed node nothing.
#[test]
fn cleanup_leaves_each_node_exactly_its_share() {
    let mut c = TestCluster::start(3, &args());
    let mut expected = Expected::new();
    for n in 0..KEYS {
        let key = format!("k{n}");
        let value = format!("v{n}");
        let r = c.put(n as usize % 3, key.as_bytes(), value.as_bytes(), 2, 2);
        assert_eq!(r.status, 201, "{key}: {}", body(&r));
        if n % 5 == 0 {
            // A tombstone: deleted keys move and are cleaned up too.
            let r = c.delete((n as usize + 1) % 3, key.as_bytes(), 2, 2);
            assert_eq!(r.status, 202, "delete {key}: {}", body(&r));
            expected.insert(key, None);
        } else {
            expected.insert(key, Some(value));
        }
    }
    let targets = Arc::new(Mutex::new(vec![
        c.node(0).addr(),
        c.node(1).addr(),
        c.node(2).addr(),
    ]));
    let writer = Writer::start(Arc::clone(&targets), "b");

    let (added, proxy) = join(&c.urls()[0]);
    let r = post(c.node(0), &format!("version=2&add={}", proxy.url()));
    assert_eq!(r.status, 200, "{}", body(&r));
    let grown = [
        c.node(0).addr(),
        c.node(1).addr(),
        c.node(2).addr(),
        added.addr(),
    ];
    for addr in grown {
        eventually(&format!("{addr} cleaned up at 2"), SETTLE_WAIT, || {
            cleaned_at(addr, 2)
        });
    }
    // The old members gave keys up to the new one and deleted them.
    let purged: u64 = grown[..3]
        .iter()
        .map(|&a| layout_of(a)["cleanup"]["keys_purged"].as_u64().unwrap())
        .sum();
    assert!(purged > 0, "no old member deleted a key it gave up");
    // The writer stops for the check (each of its keys is then final).
    let (acked, mut tried) = writer.finish();
    expected.extend(acked);
    tried.extend(expected.keys().cloned());
    let acked_keys: BTreeSet<String> = expected.keys().cloned().collect();
    check_placement(&grown, &acked_keys, &tried, "after the grow");

    // Node 1 leaves, under writes again.
    targets.lock().unwrap().retain(|a| *a != c.node(1).addr());
    targets.lock().unwrap().push(added.addr());
    let writer = Writer::start(Arc::clone(&targets), "c");
    let r = post(c.node(2), &format!("version=3&remove={}", c.urls()[1]));
    assert_eq!(r.status, 200, "{}", body(&r));
    let left = [c.node(0).addr(), c.node(2).addr(), added.addr()];
    for addr in left {
        eventually(&format!("{addr} cleaned up at 3"), SETTLE_WAIT, || {
            cleaned_at(addr, 3)
        });
    }
    eventually("the removed node cleaned up", SETTLE_WAIT, || {
        let doc = layout_of(c.node(1).addr());
        doc["removed"] == true
            && doc["safe_to_stop"] == true
            && doc["cleanup"]["version"] == 3
            && doc["cleanup"]["running"] == 0
    });
    let (acked, tried_later) = writer.finish();
    expected.extend(acked);
    tried.extend(tried_later);
    assert!(
        held(c.node(1).addr()).is_empty(),
        "the removed node still holds data"
    );
    let acked_keys: BTreeSet<String> = expected.keys().cloned().collect();
    check_placement(&left, &acked_keys, &tried, "after the removal");
    check_reads(&left, &expected, "after the removal");

    // A restart finds its cleanup recorded (`CLEANUP-3`): done at once,
    // and what it deleted stays deleted.
    c.terminate(0);
    c.restart(0);
    let again = [c.node(0).addr(), c.node(2).addr(), added.addr()];
    let doc = layout_of(again[0]);
    assert_eq!(doc["cleanup"]["version"], 3, "{doc}");
    assert_eq!(doc["cleanup"]["running"], 0, "{doc}");
    check_placement(&again, &acked_keys, &tried, "after a restart");
}
