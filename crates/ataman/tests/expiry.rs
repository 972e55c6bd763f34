//! Expiring keys (`PUT ...&ttl_ms=N`) on real `ataman serve` processes on
//! 127.0.0.1: the course-style check on one node and on three nodes at
//! `ack=2&from=3`, and a key overwritten with a TTL over an older plain
//! value while a replica was down: once expired it stays 404 however the
//! lagging replica catches up (read repair, hints, anti-entropy), and the
//! lagging replica's own copy becomes the expired version's tombstone, not
//! the older value.
//!
//! No timing thresholds: each test sleeps past the deadline, then asserts.
//! Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman_node::peer::frame::{self, Stamped};
use ataman_node::peer::handshake::parse_upgrade_response;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use support::cluster::{TestCluster, assert_status, body, eventually};
use support::{Node, Response};

/// The TTL of the course-style check.
const TTL_MS: u64 = 500;
/// How long a test sleeps after the PUT's answer before checking expiry:
/// past the deadline (stamped before the answer) on every node's clock.
const PAST_DEADLINE: Duration = Duration::from_millis(1000);
/// Bound on convergence (hints, read repair, a repair round).
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(20);
/// Hints and anti-entropy off: only the mechanism under test catches up.
const QUIET: [&str; 4] = ["--hints-bytes-max", "0", "--anti-entropy-interval-ms", "0"];

fn put_ttl(
    node: &Node,
    key: &str,
    value: &[u8],
    ttl: &str,
    ack_from: Option<(u32, u32)>,
) -> Response {
    let mut target = format!("/v0/entity?id={key}&ttl_ms={ttl}");
    if let Some((ack, from)) = ack_from {
        target.push_str(&format!("&ack={ack}&from={from}"));
    }
    node.conn().request("PUT", &target, &[], Some(value))
}

fn get(node: &Node, key: &str, ack_from: Option<(u32, u32)>) -> Response {
    let mut target = format!("/v0/entity?id={key}");
    if let Some((ack, from)) = ack_from {
        target.push_str(&format!("&ack={ack}&from={from}"));
    }
    node.get_target(&target)
}

/// The course-style check on one node: 200 at once, 404 after a second; a
/// plain key beside it stays; a range skips the expired key; bad `ttl_ms`
/// values and a deadline past the maximum are 400 with a reason.
#[test]
fn single_node_value_expires() {
    let node = Node::start(&[]);
    assert_status(&put_ttl(&node, "short", b"v", "500", None), 201, "put ttl");
    assert_status(&node.put(b"plain", b"p"), 201, "put plain");
    let r = get(&node, "short", None);
    assert_eq!((r.status, body(&r).as_str()), (200, "v"), "at once");
    std::thread::sleep(PAST_DEADLINE);
    assert_status(&get(&node, "short", None), 404, "after the deadline");
    let r = get(&node, "plain", None);
    assert_eq!(
        (r.status, body(&r).as_str()),
        (200, "p"),
        "the plain key stays"
    );
    let range = node.get_target("/v0/entities?start=a");
    assert_status(&range, 200, "range");
    assert_eq!(body(&range), "plain\np", "the range skips the expired key");

    // A PUT without ttl_ms over an expired key makes it permanent again.
    assert_status(&node.put(b"short", b"again"), 201, "put plain again");
    assert_eq!(body(&get(&node, "short", None)), "again");

    for (ttl, why) in [
        ("0", "positive integer"),
        ("-1", "positive integer"),
        ("1.5", "positive integer"),
        ("abc", "positive integer"),
        ("281474976710656", "positive integer"),
        ("281474976710655", "past the maximum"),
    ] {
        let r = put_ttl(&node, "bad", b"v", ttl, None);
        assert_status(&r, 400, &format!("ttl_ms={ttl}"));
        assert!(body(&r).contains(why), "ttl_ms={ttl}: {:?}", body(&r));
    }
    let r = node.get_target("/v0/entity?id=plain&ttl_ms=5");
    assert_status(&r, 400, "ttl_ms on a GET");
    assert_status(&get(&node, "bad", None), 404, "nothing stored by a 400");
}

/// The course-style check at `ack=2&from=3`: through every node, 200 at
/// once, 404 after a second.
#[test]
fn cluster_value_expires_at_two_of_three() {
    let c = TestCluster::start(3, &[]);
    let r = put_ttl(c.node(0), "k2of3", b"v", &TTL_MS.to_string(), Some((2, 3)));
    assert_status(&r, 201, "put ttl 2/3");
    for i in 0..3 {
        let r = get(c.node(i), "k2of3", Some((2, 3)));
        assert_eq!(
            (r.status, body(&r).as_str()),
            (200, "v"),
            "node {i} at once"
        );
    }
    std::thread::sleep(PAST_DEADLINE);
    for i in 0..3 {
        assert_status(
            &get(c.node(i), "k2of3", Some((2, 3))),
            404,
            &format!("node {i} after"),
        );
    }
}

/// Node `addr`'s own copy of `key`, read over the peer protocol (a
/// replica's answer: an expired value comes back as a tombstone).
fn own_version(addr: SocketAddr, key: &[u8]) -> Option<Stamped> {
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
    let read = frame::Message::Read {
        id: 1,
        key: key.to_vec(),
    };
    frame::encode(&read, &mut out);
    s.write_all(&out).unwrap();
    loop {
        if let Some((msg, _)) = frame::decode(&buf).unwrap() {
            match msg {
                frame::Message::ReadReply { id: 1, result } => {
                    return result.expect("a replica read failed");
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// How the lagging replica catches up in [`lagging_replica_stays_expired`].
#[derive(Debug, Clone, Copy)]
enum CatchUp {
    ReadRepair,
    Hints,
    AntiEntropy,
}

/// Node 2 holds a plain "old"; while it is down the key is overwritten with
/// a TTL at 2/3; past the deadline node 2 comes back and catches up by
/// `how`. Reads are 404 throughout, and node 2's own copy ends as the
/// expired version's tombstone (newer than "old"), so even alone it answers
/// 404.
fn lagging_replica_stays_expired(how: CatchUp) {
    let args: &[&str] = match how {
        CatchUp::ReadRepair | CatchUp::AntiEntropy => &QUIET,
        CatchUp::Hints => &["--anti-entropy-interval-ms", "0"],
    };
    let mut c = TestCluster::start(3, args);
    let key = format!("lagging-{how:?}");
    let k = key.as_bytes();
    assert_status(&c.put(0, k, b"old", 3, 3), 201, "put old to all");
    let old = own_version(c.node(2).addr(), k).expect("node 2 has old");
    c.terminate(2);
    let r = put_ttl(c.node(0), &key, b"new", &TTL_MS.to_string(), Some((2, 3)));
    assert_status(&r, 201, "put new with a TTL at 2/3");
    std::thread::sleep(PAST_DEADLINE);
    assert_status(&c.get(0, k, 2, 3), 404, "expired with node 2 down");
    c.restart(2);
    match how {
        CatchUp::ReadRepair => {
            // Node 2 still holds old: the test can fail.
            assert_eq!(own_version(c.node(2).addr(), k), Some(old.clone()));
            // Node 0's link to node 2 may fail for a moment after the restart.
            let mut read = c.get(0, k, 3, 3);
            eventually("node 0 reaches node 2 again", CONVERGE_TIMEOUT, || {
                read = c.get(0, k, 3, 3);
                read.status != 504
            });
            assert_status(&read, 404, "3/3 read after the deadline");
        }
        CatchUp::Hints => {
            eventually("hints delivered", CONVERGE_TIMEOUT, || {
                (0..2).all(|i| {
                    let r = c.node(i).get_target("/v0/cluster");
                    r.status == 200 && hints_pending(&body(&r)) == 0
                })
            });
        }
        CatchUp::AntiEntropy => {
            assert_eq!(own_version(c.node(2).addr(), k), Some(old.clone()));
            let r = c
                .node(2)
                .conn()
                .request("POST", "/v0/repair", &[], Some(b""));
            assert_status(&r, 202, "POST /v0/repair");
            let round = json(&r)["round"].as_u64().unwrap();
            let started = Instant::now();
            loop {
                let state = json(&c.node(2).get_target("/v0/repair"));
                if state["last"]["round"].as_u64().is_some_and(|n| n >= round) {
                    break;
                }
                assert!(
                    started.elapsed() < CONVERGE_TIMEOUT,
                    "round {round}: {state}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    eventually(
        "node 2's copy is the expired version",
        CONVERGE_TIMEOUT,
        || own_version(c.node(2).addr(), k).is_some_and(|v| v.value.is_none() && v.ts > old.ts),
    );
    for i in 0..3 {
        assert_status(&c.get(i, k, 2, 3), 404, &format!("via node {i}"));
    }
    // Node 2 alone: its own copy decides.
    c.terminate(0);
    c.terminate(1);
    assert_status(&c.get(2, k, 1, 3), 404, "node 2 alone");
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {:?}", body(r)))
}

/// Sum of `hints_pending` over the nodes of a `/v0/cluster` answer.
fn hints_pending(json: &str) -> u64 {
    json.split("\"hints_pending\":")
        .skip(1)
        .filter_map(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse::<u64>().ok())
        })
        .sum()
}

/// Through read repair.
#[test]
fn lagging_replica_stays_expired_through_read_repair() {
    lagging_replica_stays_expired(CatchUp::ReadRepair);
}

/// Through hinted handoff.
#[test]
fn lagging_replica_stays_expired_through_hints() {
    lagging_replica_stays_expired(CatchUp::Hints);
}

/// Through an anti-entropy round.
#[test]
fn lagging_replica_stays_expired_through_anti_entropy() {
    lagging_replica_stays_expired(CatchUp::AntiEntropy);
}
