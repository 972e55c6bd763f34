//! Faults between nodes, injected through the proxy in front of each node
//! (drop, delay, cut): what clients see, and that the cluster catches up.
//! Real processes on 127.0.0.1; every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman::faultproxy::LinkMode;
use std::time::Duration;
use support::cluster::{TestCluster, assert_status, body};

fn eventually(what: &str, check: impl FnMut() -> bool) {
    support::cluster::eventually(what, CONVERGE_TIMEOUT, check);
}

const CONVERGE_TIMEOUT: Duration = Duration::from_secs(15);

/// A black-holed peer (connections accepted, nothing answered) costs
/// nothing to requests that do not need it: 2/3 writes answer as soon as
/// the two live replicas did. The replication timeout is an hour, so a
/// coordinator that waited for the silent replica would not answer before
/// the test client's read bound (`IO_TIMEOUT`, 10 s) and the request would
/// fail: the bound only limits a wait, it asserts no speed.
#[test]
fn black_holed_peer_does_not_block_a_quorum() {
    let c = TestCluster::start(3, &["--replication-timeout-ms", "3600000"]);
    c.proxy(2).set_mode(LinkMode::Drop);
    for i in 0..20 {
        let key = format!("hole-{i}");
        assert_status(&c.put(0, key.as_bytes(), b"v", 2, 3), 201, "put 2/3");
        assert_status(&c.get(1, key.as_bytes(), 2, 3), 200, "get 2/3");
    }
}

/// A cut link fails fast: ack = from = 3 is 504 at once (naming the node),
/// 2/3 succeeds, node 2 still coordinates reads (its own links are fine);
/// after the cut heals, hints bring node 2 up to date.
#[test]
fn cut_peer_fails_fast_and_catches_up() {
    let mut c = TestCluster::start(3, &[]);
    c.proxy(2).set_mode(LinkMode::Cut);
    let r = c.put(0, b"cut-all", b"v", 3, 3);
    assert_status(&r, 504, "put 3/3 with node 2 cut off");
    assert!(body(&r).contains(&c.urls()[2]), "{:?}", body(&r));
    let keys: Vec<String> = (0..10).map(|i| format!("cut-{i}")).collect();
    for key in &keys {
        assert_status(
            &c.put(0, key.as_bytes(), key.as_bytes(), 2, 3),
            201,
            "put 2/3",
        );
    }
    let r = c.get(2, keys[0].as_bytes(), 2, 3);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, keys[0].as_bytes()),
        "read via the cut node"
    );
    c.proxy(2).set_mode(LinkMode::Pass);
    eventually("hints delivered", || {
        let r = c.node(0).get_target("/v0/cluster");
        r.status == 200 && body(&r).matches("\"hints_pending\":0").count() == 3
    });
    c.terminate(0);
    c.terminate(1);
    for key in &keys {
        let r = c.get(2, key.as_bytes(), 1, 3);
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, key.as_bytes()),
            "node 2 alone: {key}"
        );
    }
}

/// A slow link still counts: with 200 ms of delay to node 2, 3/3 writes and
/// reads succeed (the coordinator waits, pipelined, within its timeout).
#[test]
fn delayed_peer_still_counts() {
    let c = TestCluster::start(3, &["--replication-timeout-ms", "5000"]);
    c.proxy(2)
        .set_mode(LinkMode::Delay(Duration::from_millis(200)));
    for i in 0..5 {
        let key = format!("slow-{i}");
        assert_status(&c.put(0, key.as_bytes(), b"v", 3, 3), 201, "put 3/3");
        let r = c.get(1, key.as_bytes(), 3, 3);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"v"[..]), "get 3/3");
    }
}

/// A link that failed is used again as soon as its peer is back: a client's
/// request retries a refused or closed connection every 50 ms instead of
/// failing until the back-off (up to 1 s) ends. One network thread, so
/// every request meets the same link.
#[test]
fn healed_link_is_used_at_once() {
    let c = TestCluster::start(2, &["--net-threads", "1", "--hints-bytes-max", "0"]);
    c.proxy(1).set_mode(LinkMode::Cut);
    // Failed connects in a row: the background back-off grows towards 1 s.
    for i in 0..8 {
        let key = format!("heal-{i}");
        assert_status(&c.put(0, key.as_bytes(), b"v", 2, 2), 504, "put 2/2, cut");
        std::thread::sleep(Duration::from_millis(60));
    }
    c.proxy(1).set_mode(LinkMode::Pass);
    std::thread::sleep(Duration::from_millis(60));
    assert_status(
        &c.put(0, b"heal", b"v", 2, 2),
        201,
        "the first put 2/2 after the heal",
    );
}
