//! A spare node for layout changes: a node waiting to join a test
//! cluster, and one held (paused, its proxy answering for it) so that the
//! transition that adds it stays under way (`tests/layout_change.rs`,
//! `tests/dashboard/`).

use super::cluster::{TestCluster, eventually};
use super::{Conn, Node};
use ataman::faultproxy::FaultProxy;
use std::time::Duration;

/// How long the spare may take to show its seed's members.
const LEARN_WAIT: Duration = Duration::from_secs(20);

/// A node waiting to join `c` (`--join` its node 0, with `extra`), named
/// by its proxy's URL: what a change may add (`cluster::added_identity`).
/// The node, its proxy (both must live while it is used) and its URL.
pub fn spare_with(c: &TestCluster, extra: &[&str]) -> (Node, FaultProxy, String) {
    let proxy = FaultProxy::start_without_target().expect("start a fault proxy");
    let url = proxy.url();
    let mut args = vec!["--self", url.as_str(), "--join", c.urls()[0].as_str()];
    args.extend_from_slice(extra);
    let node = Node::start(&args);
    proxy.set_target(node.addr());
    (node, proxy, url)
}

/// [`spare_with`] no further arguments.
pub fn spare(c: &TestCluster) -> (Node, FaultProxy, String) {
    spare_with(c, &[])
}

/// Pauses a node (SIGSTOP; the test's end kills it).
pub fn hold(node: &Node) {
    // SAFETY: signalling a child process this test started.
    assert_eq!(
        unsafe { libc::kill(node.pid() as libc::pid_t, libc::SIGSTOP) },
        0
    );
}

/// Connections the stand-in below answers at most.
const STAND_IN_CONNECTIONS_MAX: usize = 2_000;

/// A spare that is held (paused) before any change can add it, so that
/// the transition that adds it stays under way whatever the machine's
/// load: its own status answer is recorded through its proxy, the node is
/// paused, and the proxy is pointed at a stand-in that replays that
/// answer to `GET /v0/status` (the proposer's identity check,
/// `cluster::added_identity`) and 503 to anything else, as a node that
/// never acks. Pausing after the change's 200 instead raced the spare's
/// own ack on a loaded machine (CI).
pub fn held_spare(c: &TestCluster) -> (Node, FaultProxy, String) {
    held_spare_with(c, &[])
}

/// [`held_spare`] started with `extra` (a token file, the cluster secret).
pub fn held_spare_with(c: &TestCluster, extra: &[&str]) -> (Node, FaultProxy, String) {
    use std::io::{Read, Write};
    let (node, proxy, url) = spare_with(c, extra);
    // Recorded once it knows the members its seed named (the identity
    // check's rule 7 reads them).
    let seed = format!("\"{}\"", c.urls()[0]);
    let mut recorded = None;
    eventually("the spare names its seed's members", LEARN_WAIT, || {
        let r = Conn::open(proxy.addr()).request("GET", "/v0/status", &[], None);
        let text = String::from_utf8_lossy(&r.body).into_owned();
        let ready = text.contains("\"joining\":true") && text.contains(&seed);
        recorded = Some((r.status, r.body));
        ready
    });
    let (status, doc) = recorded.unwrap();
    hold(&node);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    proxy.set_target(listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for _ in 0..STAND_IN_CONNECTIONS_MAX {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let mut head = [0u8; 4096];
            let n = conn.read(&mut head).unwrap_or(0);
            let (code, reason, answer): (u16, &str, &[u8]) =
                if head[..n].starts_with(b"GET /v0/status ") {
                    (status, "OK", &doc)
                } else {
                    (503, "Service Unavailable", b"held")
                };
            let reply = format!(
                "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n",
                answer.len()
            );
            let _ = conn.write_all(reply.as_bytes());
            let _ = conn.write_all(answer);
        }
    });
    (node, proxy, url)
}
