//! `POST /v0/layout` between real processes (docs/API.md, "Layout"):
//! three nodes agree on version 2, answered 200, 409, 400 or 503 as
//! issue 16 says; the chosen version survives a restart; a node that
//! missed the commit learns it through gossip.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::LinkMode;
use std::time::Duration;
use support::cluster::{TestCluster, body, eventually};
use support::spare::{held_spare, spare, spare_with};
use support::{Conn, Node, Response};

/// How long every node may take to show what it learned.
const LEARN_WAIT: Duration = Duration::from_secs(20);

fn post(node: &Node, query: &str) -> Response {
    let target = format!("/v0/layout?{query}");
    Conn::open(node.addr()).request("POST", &target, &[], None)
}

fn layout_of(node: &Node) -> String {
    let r = Conn::open(node.addr()).request("GET", "/v0/layout", &[], None);
    assert_eq!(r.status, 200, "GET /v0/layout");
    String::from_utf8(r.body).unwrap()
}

fn shows_next(node: &Node, version: u64) -> bool {
    let doc = layout_of(node);
    doc.contains(&format!("\"next\":{version},")) && doc.contains("\"settled\":false")
}

/// (a) 200 with the new layout; every member shows the next version.
/// (c) a stale or future version: 409 with the current layout.
/// (f) a restarted member keeps the chosen next version.
#[test]
fn add_a_node_then_stale_versions_then_restart() {
    let mut c = TestCluster::start(3, &[]);
    let (_spare_node, _proxy, added) = held_spare(&c);
    let r = post(c.node(0), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "{}", body(&r));
    let doc = body(&r);
    assert!(doc.starts_with("{\"version\":2,\"nodes\":["), "{doc}");
    assert!(doc.contains(&format!("\"{added}\"")), "{doc}");
    assert!(doc.contains("\"replication_factor\":3"), "{doc}");
    for i in 0..3 {
        eventually(&format!("node {i} shows next 2"), LEARN_WAIT, || {
            shows_next(c.node(i), 2)
        });
    }
    let (_other, _other_proxy, other) = spare(&c);
    for version in [2, 5, 1] {
        let r = post(c.node(1), &format!("version={version}&add={other}"));
        assert_eq!(r.status, 409, "version {version}: {}", body(&r));
        let doc = body(&r);
        assert!(
            doc.starts_with("{\"version\":2,"),
            "the current layout: {doc}"
        );
        assert!(doc.contains("\"reason\":"), "{doc}");
    }
    // The same plan again continues the transition under way: 200.
    let r = post(c.node(2), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "{}", body(&r));

    c.terminate(1);
    c.restart(1);
    assert!(shows_next(c.node(1), 2), "{}", layout_of(c.node(1)));
}

/// (b) two concurrent requests for version 2 with different changes:
/// exactly one 200, the other 409.
#[test]
fn concurrent_requests_one_wins() {
    let c = TestCluster::start(3, &[]);
    let (_a_node, _a_proxy, a) = held_spare(&c);
    let (_b_node, _b_proxy, b) = held_spare(&c);
    let (first, second) = std::thread::scope(|s| {
        let one = s.spawn(|| post(c.node(0), &format!("version=2&add={a}")));
        let two = s.spawn(|| post(c.node(1), &format!("version=2&add={b}")));
        (one.join().unwrap(), two.join().unwrap())
    });
    // The winner's transition stays under way: both spares are held.
    let mut codes = [first.status, second.status];
    codes.sort_unstable();
    assert_eq!(codes, [200, 409], "{} / {}", body(&first), body(&second));
    let (winner, loser) = if first.status == 200 {
        (&a, &b)
    } else {
        (&b, &a)
    };
    for i in 0..3 {
        eventually(&format!("node {i} shows next 2"), LEARN_WAIT, || {
            shows_next(c.node(i), 2)
        });
    }
    // Every member holds the winner: its plan continues (200), the
    // loser's conflicts (409).
    for i in 0..3 {
        let r = post(c.node(i), &format!("version=2&add={winner}"));
        assert_eq!(r.status, 200, "node {i}: {}", body(&r));
        let r = post(c.node(i), &format!("version=2&add={loser}"));
        assert_eq!(r.status, 409, "node {i}: {}", body(&r));
    }
}

/// (d) 400: removing a non-member, an impossible R, an added node that
/// does not answer, an added member, a malformed request; a single node.
/// (e) 503 with two of three members unreachable.
#[test]
fn refusals() {
    let c = TestCluster::start(3, &[]);
    let (_spare, _proxy, added) = spare(&c);
    let single = Node::start(&[]);
    let member = c.urls()[1].clone();
    let nobody = "http://127.0.0.1:1";
    for query in [
        format!("version=2&remove={nobody}"),
        "version=2&replication_factor=4".to_owned(),
        format!("version=2&add={nobody}"),
        format!("version=2&add={member}"),
        "add=x".to_owned(),
    ] {
        let r = post(c.node(0), &query);
        support::assert_error(&r, 400, &query);
    }
    let garbage = Conn::open(c.node(0).addr()).request(
        "POST",
        "/v0/internal/layout",
        &[],
        Some(b"not an agreement message"),
    );
    support::assert_error(&garbage, 400, "an undecodable internal body");
    let r = post(&single, "version=2&add=http://127.0.0.1:2");
    support::assert_error(&r, 400, "a single node");
    assert!(body(&r).contains("single node"), "{}", body(&r));

    c.proxy(1).set_mode(LinkMode::Cut);
    c.proxy(2).set_mode(LinkMode::Cut);
    let r = post(c.node(0), &format!("version=2&add={added}"));
    support::assert_error(&r, 503, "two of three members cut off");
    c.proxy(1).set_mode(LinkMode::Pass);
    c.proxy(2).set_mode(LinkMode::Pass);
    let r = post(c.node(0), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "{}", body(&r));
}

/// (g) a member paused and cut off while version 2 is chosen and
/// committed learns it through gossip once it runs again (nothing was
/// delivered to it: its proxy cut every connection meanwhile).
#[test]
fn a_paused_member_learns_through_gossip() {
    let c = TestCluster::start(3, &[]);
    let (_spare, _proxy, added) = spare(&c);
    let pid = c.node(2).pid() as libc::pid_t;
    c.proxy(2).set_mode(LinkMode::Cut);
    // SAFETY: signalling a child process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let r = post(c.node(0), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "{}", body(&r));
    for i in 0..2 {
        eventually(&format!("node {i} shows next 2"), LEARN_WAIT, || {
            shows_next(c.node(i), 2)
        });
    }
    c.proxy(2).set_mode(LinkMode::Pass);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    // It learns version 2 as the next one, or, once the transition it
    // can now take part in has settled (fast on an idle machine), as the
    // current one: either way through gossip, for nothing was sent to it
    // while it was paused.
    eventually("the paused node learns version 2", LEARN_WAIT, || {
        shows_next(c.node(2), 2) || layout_of(c.node(2)).starts_with("{\"version\":2,")
    });
}

/// (h) with tokens and a cluster secret: no token 401, a read or write
/// token 403, the admin token 200 (the voters prove the secret to each
/// other's internal endpoint); a raw internal request without the proof
/// is refused and changes nothing.
#[test]
fn admin_only_and_peers_prove_the_secret() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let tokens = write(
        "tokens",
        "reader-token-0123456789 read\nwriter-token-0123456789 write\nadmin-token-0123456789 admin\n",
    );
    let secret = write("secret", "the-layout-cluster-secret-0123456789");
    let c = TestCluster::start(
        3,
        &[
            "--auth-token-file",
            &tokens,
            "--cluster-secret-file",
            &secret,
        ],
    );
    let (_spare, _proxy, added) = spare_with(&c, &["--cluster-secret-file", &secret]);
    let target = format!("/v0/layout?version=2&add={added}");
    let send = |token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        Conn::open(c.node(0).addr()).request("POST", &target, &headers, None)
    };
    assert_eq!(send(None).status, 401);
    assert_eq!(send(Some("reader-token-0123456789")).status, 403);
    assert_eq!(send(Some("writer-token-0123456789")).status, 403);
    let raw = Conn::open(c.node(1).addr()).request(
        "POST",
        "/v0/internal/layout",
        &[("Authorization", "Bearer admin-token-0123456789")],
        Some(b"not a message"),
    );
    assert_eq!(raw.status, 401, "a client token opens no internal endpoint");
    let r = send(Some("admin-token-0123456789"));
    assert_eq!(r.status, 200, "{}", body(&r));
}

/// A change request waiting on its voters does not hold the network
/// thread: with one network thread, the node answers `/metrics` showing
/// the request's worker still running (its place is given back only when
/// the job ends, so this answer came while it waited for the two paused
/// members), and `GET /v0/status`; the request then ends 503.
#[test]
fn a_waiting_change_does_not_block_the_node() {
    let c = TestCluster::start(3, &["--net-threads", "1"]);
    let (_spare, _proxy, added) = spare(&c);
    let pids = [c.node(1).pid(), c.node(2).pid()].map(|p| p as libc::pid_t);
    for pid in pids {
        // SAFETY: signalling a child process this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    }
    std::thread::scope(|s| {
        let waiting = s.spawn(|| post(c.node(0), &format!("version=2&add={added}")));
        eventually(
            "an answer while the change request runs",
            LEARN_WAIT,
            || {
                let m = Conn::open(c.node(0).addr()).request("GET", "/metrics", &[], None);
                body(&m)
                    .lines()
                    .any(|l| l == "ataman_layout_workers_active 1")
            },
        );
        let r = Conn::open(c.node(0).addr()).request("GET", "/v0/status", &[], None);
        assert_eq!(r.status, 200);
        let r = waiting.join().unwrap();
        support::assert_error(&r, 503, "two of three members paused");
    });
    for pid in pids {
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    }
}

/// Bound on a transition settling on every node.
const SETTLE_WAIT: Duration = Duration::from_secs(120);

/// True when the node at `addr` holds only `version`, settled.
fn settled_at(addr: std::net::SocketAddr, version: u64) -> bool {
    let r = Conn::open(addr).request("GET", "/v0/layout", &[], None);
    let doc: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    doc["settled"] == true && doc["live_versions"] == serde_json::json!([version])
}

/// Asserts `r` is a 400 whose line contains one of `reasons`.
#[track_caller]
fn refused(r: &Response, reasons: &[&str], context: &str) {
    support::assert_error(r, 400, context);
    let line = body(r);
    assert!(
        reasons.iter().any(|reason| line.contains(reason)),
        "{context}: {line:?} names none of {reasons:?}"
    );
}

/// An added URL must name a node waiting to join under exactly that URL
/// (regression: `add=http://localhost:P` beside the member
/// `http://127.0.0.1:P` was accepted, one node took two replica slots
/// with two node ids, the transition never settled and every later change
/// got 409). Each alias is 400 naming why, nothing is proposed, and the
/// cluster then takes the proper URL and settles at version 2.
#[test]
fn an_added_node_must_name_itself_by_the_url_added() {
    let c = TestCluster::start(3, &[]);
    let (spare_node, _proxy, added) = spare(&c);
    let port = |url: &str| url.rsplit(':').next().unwrap().to_owned();
    // Member 1 under its listening address (its URL is its proxy's).
    let direct = format!("http://{}", c.node(1).addr());
    let r = post(c.node(0), &format!("version=2&add={direct}"));
    refused(&r, &["answers as a member"], "a member's second name");
    // Member 1's URL under another host name: refused whether `localhost`
    // resolves to the proxy (a member) or not (no answer).
    let localhost = format!("http://localhost:{}", port(&c.urls()[1]));
    let r = post(c.node(0), &format!("version=2&add={localhost}"));
    refused(
        &r,
        &["answers as a member", "does not answer"],
        "a member under localhost",
    );
    // The joining node under its listening address: it says its name.
    let spare_direct = format!("http://{}", spare_node.addr());
    let r = post(c.node(0), &format!("version=2&add={spare_direct}"));
    refused(
        &r,
        &[&format!("names itself {added}: add it by that URL")],
        "a joining node's second name",
    );
    // A node of another cluster (a single node: a member of its own).
    let single = Node::start(&[]);
    let r = post(
        c.node(0),
        &format!("version=2&add=http://{}", single.addr()),
    );
    refused(&r, &["answers as a member"], "another cluster's node");
    for i in 0..3 {
        assert!(settled_at(c.node(i).addr(), 1), "node {i} left version 1");
    }
    let r = post(c.node(1), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "the proper URL: {}", body(&r));
    let all = [
        c.node(0).addr(),
        c.node(1).addr(),
        c.node(2).addr(),
        spare_node.addr(),
    ];
    for addr in all {
        eventually(&format!("{addr} settles at 2"), SETTLE_WAIT, || {
            settled_at(addr, 2)
        });
    }
}

/// Negative control: with the old check planted (any 200 on
/// `GET /v0/status` admits a URL), the member's second name is accepted
/// (what the test above refuses) and the cluster takes no further change.
#[test]
fn planted_add_checks_only_status_is_caught() {
    let c = TestCluster::start(3, &["--debug-planted-bug", "add-checks-only-status"]);
    let direct = format!("http://{}", c.node(1).addr());
    let r = post(c.node(0), &format!("version=2&add={direct}"));
    assert_eq!(
        r.status,
        200,
        "the planted check refused the alias: {}",
        body(&r)
    );
    let (_spare, _proxy, added) = spare(&c);
    let r = post(c.node(0), &format!("version=3&add={added}"));
    assert_eq!(r.status, 409, "{}", body(&r));
    assert!(body(&r).contains("under way"), "{}", body(&r));
}

/// Bytes the dripping server below sends at most (it stops earlier once
/// the node hangs up).
const DRIP_BYTES_MAX: usize = 600;

/// A server that answers each of `connections` connections with a status
/// line and then one byte every 100 ms: every read gets something within
/// the node's 1 s per read, the answer never ends. Its URL.
fn dripping_server(connections: usize) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for _ in 0..connections {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            std::thread::spawn(move || {
                let _ = conn.read(&mut [0u8; 1024]);
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\n");
                for _ in 0..DRIP_BYTES_MAX {
                    std::thread::sleep(Duration::from_millis(100));
                    if conn.write_all(b"X").is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// An added URL that drips its answer is refused at the call's deadline
/// (the layout worker comes back: the change request answers, and the
/// next change goes through), and an `https` URL on a node without
/// `--tls-ca` is refused as such, not asked over plain HTTP.
#[test]
fn a_dripping_or_unverifiable_added_node_is_refused() {
    let c = TestCluster::start(3, &[]);
    let (_spare_node, _proxy, added) = spare(&c);
    let drip = dripping_server(1);
    let r = post(c.node(0), &format!("version=2&add={drip}"));
    refused(&r, &["does not answer: http"], "a dripping node");
    assert!(body(&r).contains("no whole answer within"), "{}", body(&r));
    let https = added.replacen("http://", "https://", 1);
    let r = post(c.node(0), &format!("version=2&add={https}"));
    refused(
        &r,
        &["is an https URL and this node has no --tls-ca"],
        "https without --tls-ca",
    );
    let r = post(c.node(0), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "the proper URL: {}", body(&r));
}

/// A node that starts with `--join` while a transition is under way does
/// not end it: it gossips its layout to the members (every second), and
/// before the fix it started with the seed's newest layout alone, which
/// the members took for a peer's prune of the old version
/// (`cluster::transition_rules::adopt_peer_prune`) and dropped theirs
/// before the added node had copied anything. The added node is held, so
/// the transition must stay under way whatever gossip says.
#[test]
fn a_node_joining_during_a_transition_does_not_end_it() {
    let c = TestCluster::start(3, &[]);
    let (_held, _held_proxy, added) = held_spare(&c);
    let r = post(c.node(0), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "{}", body(&r));
    for i in 0..3 {
        eventually(&format!("node {i} shows next 2"), LEARN_WAIT, || {
            shows_next(c.node(i), 2)
        });
    }
    let joiner = Node::start_logged(&["--join", c.urls()[0].as_str()]);
    // Its gossip reached every member: its log says so once a round has
    // been answered by them (the reach it keeps), or, more simply, the
    // members' layout documents list it as a node they heard from. Wait
    // for several of its rounds (one per second) by its own count.
    eventually("the joiner gossiped three rounds", LEARN_WAIT, || {
        let m = Conn::open(joiner.addr()).request("GET", "/metrics", &[], None);
        body(&m)
            .lines()
            .filter_map(|l| l.strip_prefix("ataman_layout_gossip_rounds_total "))
            .any(|n| n.parse::<u64>().is_ok_and(|n| n >= 3))
    });
    for i in 0..3 {
        assert!(
            shows_next(c.node(i), 2),
            "node {i}: {}",
            layout_of(c.node(i))
        );
    }
    let r = post(c.node(2), &format!("version=2&add={added}"));
    assert_eq!(r.status, 200, "the same plan continues: {}", body(&r));
}
