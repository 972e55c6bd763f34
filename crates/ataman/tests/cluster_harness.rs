//! Smoke tests of the cluster harness: three real nodes behind fault
//! proxies, restarts that the proxies follow, and cuts that only hit the
//! proxied path.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::LinkMode;
use std::time::Duration;
use support::cluster::TestCluster;
use support::{Conn, Node};

/// How long a cut connection may take to be seen closed.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

fn status_through_proxy(cluster: &TestCluster, i: usize) -> u16 {
    Conn::open(cluster.proxy(i).addr())
        .request("GET", "/v0/status", &[], None)
        .status
}

fn status_direct(node: &Node) -> u16 {
    node.get_target("/v0/status").status
}

/// Three nodes start with the proxy URLs as --cluster and answer both
/// directly and through their proxies; local writes are readable.
#[test]
fn three_nodes_answer_directly_and_through_proxies() {
    let cluster = TestCluster::start(3, &[]);
    assert_eq!(cluster.urls().len(), 3);
    for i in 0..3 {
        assert_eq!(cluster.urls()[i], cluster.proxy(i).url());
        assert!(cluster.is_running(i));
        assert_eq!(status_direct(cluster.node(i)), 200, "node {i} directly");
        assert_eq!(status_through_proxy(&cluster, i), 200, "node {i} via proxy");
    }
    assert_eq!(cluster.put(0, b"k", b"v", 1, 1).status, 201);
    let read = cluster.get(0, b"k", 1, 1);
    assert_eq!((read.status, read.body.as_slice()), (200, &b"v"[..]));
    assert_eq!(cluster.delete(0, b"k", 1, 1).status, 202);
    assert_eq!(cluster.get(0, b"k", 1, 1).status, 404);
    let replicas = cluster.replicas(b"k", 2);
    assert_eq!(replicas.len(), 2);
    assert_ne!(replicas[0], replicas[1]);
}

/// A killed node restarts on a new port and its proxy follows it; a
/// terminated one exits cleanly and restarts too.
#[test]
fn restart_is_followed_by_the_proxy() {
    let mut cluster = TestCluster::start(3, &[]);
    assert_eq!(cluster.put(1, b"durable", b"yes", 1, 1).status, 201);
    let old = cluster.node(1).addr();
    cluster.kill9(1);
    assert!(!cluster.is_running(1));
    assert!(std::net::TcpStream::connect(old).is_err());
    cluster.restart(1);
    assert!(cluster.is_running(1));
    assert_eq!(cluster.proxy(1).target(), Some(cluster.node(1).addr()));
    assert_eq!(status_through_proxy(&cluster, 1), 200);
    assert_eq!(cluster.get(1, b"durable", 1, 1).body, b"yes");
    cluster.terminate(2);
    assert!(!cluster.is_running(2));
    cluster.restart(2);
    assert_eq!(status_through_proxy(&cluster, 2), 200);
}

/// Cut on a proxy closes connections through it while the node still
/// answers directly; Pass restores the path.
#[test]
fn cut_hits_only_the_proxied_path() {
    let cluster = TestCluster::start(3, &[]);
    let mut through = Conn::open(cluster.proxy(0).addr());
    assert_eq!(through.request("GET", "/v0/status", &[], None).status, 200);
    cluster.proxy(0).set_mode(LinkMode::Cut);
    assert!(
        through.closed_within(CLOSE_BOUND),
        "open connection survived"
    );
    let mut fresh = Conn::open(cluster.proxy(0).addr());
    assert!(fresh.closed_within(CLOSE_BOUND), "new connection survived");
    assert_eq!(status_direct(cluster.node(0)), 200);
    assert_eq!(status_through_proxy(&cluster, 1), 200);
    cluster.proxy(0).set_mode(LinkMode::Pass);
    assert_eq!(status_through_proxy(&cluster, 0), 200);
}
