//! Moves never drop the only copy (issue 31, part 3), on real processes:
//! the two replicas of some keys leave in one version while both are cut
//! off through their proxies. The transition holds until they answer (or
//! are declared dead), and no acknowledged write is lost. The planted
//! `copy-skips-partitioned-leaving-node` (the old rule) settles while they
//! are cut off and loses those writes: the same checks catch it.
//! Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::LinkMode;
use std::time::Duration;
use support::cluster::{TestCluster, body, entity, eventually};
use support::{Conn, Response};

/// Nodes of the cluster: 3 stay, 2 leave (a majority of 5 answers while
/// the 2 are cut off).
const NODES: usize = 5;
/// The leaving nodes.
const LEAVING: [usize; 2] = [3, 4];
/// Keys written whose two replicas are both leaving nodes.
const LEAVING_ONLY_KEYS: usize = 20;
/// Keys written with any placement.
const OTHER_KEYS: usize = 20;
/// Bound on each wait for the cluster (copy tries, retries, settling).
const WAIT: Duration = Duration::from_secs(120);

fn layout_of(addr: std::net::SocketAddr) -> serde_json::Value {
    let r = Conn::open(addr).request("GET", "/v0/layout", &[], None);
    assert_eq!(r.status, 200, "GET /v0/layout: {}", body(&r));
    serde_json::from_slice(&r.body).unwrap()
}

fn post(addr: std::net::SocketAddr, query: &str) -> Response {
    let target = format!("/v0/layout?{query}");
    Conn::open(addr).request("POST", &target, &[], None)
}

/// True when the node at `addr` holds only `version`, settled.
fn settled_at(addr: std::net::SocketAddr, version: u64) -> bool {
    let doc = layout_of(addr);
    doc["settled"] == true && doc["live_versions"] == serde_json::json!([version])
}

/// True when `doc`'s `waiting_for` names `url` as a leaving copy source.
fn waits_for_leaving(doc: &serde_json::Value, url: &str) -> bool {
    doc["waiting_for"].as_array().is_some_and(|w| {
        w.iter().any(|e| {
            e["node"] == url
                && e["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("leaving copy source"))
        })
    })
}

/// The cluster with `planted` (if any), the keys written and acknowledged
/// (each its value), the leaving nodes cut off, the removal committed.
fn start(planted: Option<&str>) -> (TestCluster, Vec<(String, String)>) {
    let mut extra = vec![
        "--replication-factor",
        "2",
        "--anti-entropy-interval-ms",
        "0",
    ];
    if let Some(bug) = planted {
        extra.extend(["--debug-planted-bug", bug]);
    }
    let c = TestCluster::start(NODES, &extra);
    let mut acked = Vec::new();
    let (mut leaving_only, mut n) = (0, 0);
    // Bounded: one key in ten has both replicas among the 2 leaving of 5.
    while leaving_only < LEAVING_ONLY_KEYS && n < 10_000 {
        let key = format!("k{n}");
        n += 1;
        let mut replicas = c.replicas(key.as_bytes(), 2);
        replicas.sort_unstable();
        let only_leaving = replicas == LEAVING;
        if !only_leaving && n > OTHER_KEYS {
            continue;
        }
        let value = format!("v{n}");
        let r = c.put(0, key.as_bytes(), value.as_bytes(), 2, 2);
        assert_eq!(r.status, 201, "put {key}: {}", body(&r));
        leaving_only += usize::from(only_leaving);
        acked.push((key, value));
    }
    assert_eq!(
        leaving_only, LEAVING_ONLY_KEYS,
        "keys held by leaving nodes only"
    );
    for i in LEAVING {
        c.proxy(i).set_mode(LinkMode::Cut);
    }
    let r = post(
        c.node(0).addr(),
        &format!(
            "version=2&remove={}&remove={}",
            c.urls()[LEAVING[0]],
            c.urls()[LEAVING[1]]
        ),
    );
    assert_eq!(r.status, 200, "the removal: {}", body(&r));
    (c, acked)
}

/// Waits until node 0 either says its copy waits for leaving node `i`
/// or is settled; true when it waits (false: it settled without it).
fn held_by(c: &TestCluster, i: usize) -> bool {
    let url = c.urls()[i].clone();
    let mut waiting = false;
    eventually("node 0 waits for the leaving node or settles", WAIT, || {
        let doc = layout_of(c.node(0).addr());
        waiting = waits_for_leaving(&doc, &url);
        waiting || doc["settled"] == true
    });
    waiting
}

/// The acknowledged keys that do not read back (with their value) through
/// each staying node, `ack=2 from=2`.
fn lost(c: &TestCluster, acked: &[(String, String)]) -> Vec<String> {
    let mut lost = Vec::new();
    for i in 0..3 {
        for (key, value) in acked {
            let r = Conn::open(c.node(i).addr()).request(
                "GET",
                &entity(key.as_bytes(), 2, 2),
                &[],
                None,
            );
            if r.status != 200 || body(&r) != *value {
                lost.push(format!("{key} via node {i}: {} {}", r.status, body(&r)));
            }
        }
    }
    lost
}

/// A partitioned leaving node holds the transition: node 0's copy waits
/// for both (named in `waiting_for`), nothing settles; one declared dead
/// is no longer waited for, the other still is; once that one is back
/// the transition settles with the dead one still cut off, and every
/// acknowledged write reads back through every staying node.
#[test]
fn partitioned_leaving_node_holds_the_transition() {
    let (c, acked) = start(None);
    assert!(held_by(&c, LEAVING[0]), "settled without leaving node 3");
    let doc = layout_of(c.node(0).addr());
    assert!(waits_for_leaving(&doc, &c.urls()[LEAVING[1]]), "{doc}");
    for i in 0..3 {
        assert!(!settled_at(c.node(i).addr(), 2), "node {i} settled");
    }
    let dead = &c.urls()[LEAVING[1]];
    let r = post(c.node(1).addr(), &format!("version=2&dead={dead}"));
    assert_eq!(r.status, 200, "declare dead: {}", body(&r));
    // Not a node the transition removes: 400.
    let r = post(c.node(1).addr(), &format!("version=2&dead={}", c.urls()[0]));
    assert_eq!(r.status, 400, "declare a member dead: {}", body(&r));
    // The declaration reaches node 0 and its next copy round drops the
    // dead node from what it waits for, still holding for node 3.
    eventually("node 0 stops waiting for the dead node", WAIT, || {
        let doc = layout_of(c.node(0).addr());
        !waits_for_leaving(&doc, dead) && waits_for_leaving(&doc, &c.urls()[LEAVING[0]])
    });
    assert!(!settled_at(c.node(0).addr(), 2));
    c.proxy(LEAVING[0]).set_mode(LinkMode::Pass);
    for i in 0..3 {
        eventually(&format!("node {i} settles at 2"), WAIT, || {
            settled_at(c.node(i).addr(), 2)
        });
    }
    let lost = lost(&c, &acked);
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

/// Negative control: with the old rule planted, the transition settles
/// while both leaving nodes are cut off, and the writes only they held
/// are lost (what the test above would report).
#[test]
fn planted_copy_skips_partitioned_leaving_node_is_caught() {
    let (c, acked) = start(Some("copy-skips-partitioned-leaving-node"));
    assert!(
        !held_by(&c, LEAVING[0]),
        "the planted rule waited for the leaving node"
    );
    for i in 0..3 {
        eventually(&format!("node {i} settles at 2"), WAIT, || {
            settled_at(c.node(i).addr(), 2)
        });
    }
    for i in LEAVING {
        c.proxy(i).set_mode(LinkMode::Pass);
    }
    let lost = lost(&c, &acked);
    assert!(
        !lost.is_empty(),
        "the planted skip lost nothing: the scenario has no write only the leaving nodes held"
    );
}
