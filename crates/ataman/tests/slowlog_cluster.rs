//! The cluster's slow log (`GET /v0/slowlog?cluster=1`, docs/API.md "Slow
//! log") on 3 real nodes with tokens and the cluster secret: the entries
//! of requests made slow on purpose on two other members, read through a
//! third, each naming the node that recorded it; the members' internal
//! endpoint refused to a client; a member paused or killed named, not
//! fatal.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use serde_json::Value;
use std::net::SocketAddr;
use support::cluster::TestCluster;

const READER: &str = "slowlog-cluster-reader-token-0123456789";
const WRITER: &str = "slowlog-cluster-writer-token-0123456789";
const ADMIN: &str = "slowlog-cluster-admin-token-01234567890";

fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    token: Option<&str>,
    body: Option<&[u8]>,
) -> support::Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    support::Conn::open(addr).request(method, target, &headers, body)
}

/// `key` put through `addr` with the slow log recording every request,
/// then nothing: that node's log holds that one write.
fn slow_put(addr: SocketAddr, key: &str) {
    let r = send(
        addr,
        "POST",
        "/v0/slowlog?threshold_us=0",
        Some(ADMIN),
        None,
    );
    assert_eq!(r.status, 200, "lower the threshold");
    let target = support::entity(key.as_bytes());
    let r = send(addr, "PUT", &target, Some(WRITER), Some(b"v"));
    assert!(matches!(r.status, 200 | 201), "the slow put: {}", r.status);
    let r = send(
        addr,
        "POST",
        "/v0/slowlog?threshold_us=-1",
        Some(ADMIN),
        None,
    );
    assert_eq!(r.status, 200, "stop recording");
}

fn cluster_log(addr: SocketAddr) -> Value {
    let r = send(
        addr,
        "GET",
        "/v0/slowlog?cluster=1&limit=50",
        Some(READER),
        None,
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    serde_json::from_slice(&r.body).unwrap()
}

/// The node each entry of `key` names.
fn nodes_of(log: &Value, key: &str) -> Vec<String> {
    log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["key"] == key)
        .map(|e| e["node"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Slow requests on nodes 1 and 2 show through node 0, each naming its
/// node; the read role is needed; a peer's internal endpoint is refused to
/// a client's token; a killed member is named and the rest still merged.
#[test]
fn every_members_slow_entries_through_any_node() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("{READER} read\n{WRITER} write\n{ADMIN} admin\n"),
    )
    .unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "the-slowlog-cluster-secret-0123456789\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        for f in [&tokens, &secret] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    let extra = [
        "--auth-token-file",
        tokens.to_str().unwrap(),
        "--cluster-secret-file",
        secret.to_str().unwrap(),
    ];
    let mut c = TestCluster::start(3, &extra);
    let urls = c.urls().to_vec();
    slow_put(c.node(1).addr(), "slow:on-1");
    slow_put(c.node(2).addr(), "slow:on-2");

    let log = cluster_log(c.node(0).addr());
    assert_eq!(nodes_of(&log, "slow:on-1"), [urls[1].clone()], "{log:#}");
    assert_eq!(nodes_of(&log, "slow:on-2"), [urls[2].clone()], "{log:#}");
    let nodes = log["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{log:#}");
    assert!(nodes.iter().all(|n| n.get("error").is_none()), "{log:#}");
    // Node 0 recorded nothing: its own log says so.
    let r = send(c.node(0).addr(), "GET", "/v0/slowlog", Some(READER), None);
    let own: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(own["len"], 0, "{own}");

    let addr = c.node(0).addr();
    assert_eq!(
        send(addr, "GET", "/v0/slowlog?cluster=1", None, None).status,
        401
    );
    // The members' endpoint opens to a peer's proof only.
    let r = send(
        addr,
        "GET",
        "/v0/internal/slowlog?limit=5",
        Some(ADMIN),
        None,
    );
    assert_ne!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(!String::from_utf8_lossy(&r.body).contains("slow:"));

    // A paused member is named with why in words: no answer within the
    // timeout (attacker, 2026-12-07: "Resource temporarily unavailable
    // (os error 11)").
    let pid = c.node(2).pid() as libc::pid_t;
    // SAFETY: signalling a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let log = cluster_log(addr);
    let error = log["nodes"][2]["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert!(error.contains("no answer within the timeout"), "{log:#}");

    c.kill9(2);
    let log = cluster_log(addr);
    let nodes = log["nodes"].as_array().unwrap();
    assert_eq!(nodes[2]["node"], urls[2].as_str(), "{log:#}");
    assert!(
        nodes[2]["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{log:#}"
    );
    assert_eq!(nodes_of(&log, "slow:on-1"), [urls[1].clone()], "{log:#}");
    assert!(nodes_of(&log, "slow:on-2").is_empty(), "{log:#}");
}
