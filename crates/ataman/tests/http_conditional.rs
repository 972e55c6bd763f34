//! HTTP conditional requests on `/v0/entity` (docs/API.md "Conditional
//! requests", RFC 9110 section 13) on real `ataman serve` processes on
//! 127.0.0.1: `ETag` on `GET` and `PUT`, 304 for a matching
//! `If-None-Match`, 412 for a failed `If-Match` or a create-only `PUT` of
//! a key that exists, 400 for a malformed header, and the atomicity of the
//! check and the write: many clients that read-modify-write one key with
//! `If-Match` lose no update, and one of many racing `If-None-Match: *`
//! wins; with the conflict check planted away updates are lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};
use support::cluster::{TestCluster, assert_status};
use support::raw_resp::RMW_PLANTED;
use support::{Conn, Node, Response, assert_error, entity, request};

/// The entity tag a response carries, unquoted as a version.
fn etag(r: &Response) -> u64 {
    let tag = r.header_str("ETag").expect("an ETag");
    let inner = tag.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
    inner.expect("a quoted strong tag").parse().unwrap()
}

/// `"v"`.
fn quoted(v: u64) -> String {
    format!("\"{v}\"")
}

fn put_if(conn: &mut Conn, key: &[u8], value: &[u8], headers: &[(&str, &str)]) -> Response {
    conn.request("PUT", &entity(key), headers, Some(value))
}

fn get_if(conn: &mut Conn, key: &[u8], headers: &[(&str, &str)]) -> Response {
    conn.request("GET", &entity(key), headers, None)
}

/// A `PUT` answers its new version's `ETag`, a `GET` the same; a matching
/// `If-None-Match` (the tag, a weak one, one of a list, `*`) is a 304 with
/// the `ETag` and no body; another tag reads the value; a key with no
/// value reads 404 whatever the header says.
#[test]
fn etag_and_not_modified() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    let put = conn.put(b"k", b"v1");
    assert_status(&put, 201, "put");
    let v1 = etag(&put);
    let got = conn.get(b"k");
    assert_status(&got, 200, "get");
    assert_eq!(etag(&got), v1, "a GET's ETag is the PUT's");
    let weak = format!("W/{}", quoted(v1));
    let list = format!("\"1\", {}", quoted(v1));
    for matching in [quoted(v1), weak, list, "*".to_string()] {
        let r = get_if(&mut conn, b"k", &[("If-None-Match", &matching)]);
        assert_eq!(r.status, 304, "{matching}: {r:?}");
        assert_eq!(etag(&r), v1, "{matching}");
        assert!(r.body.is_empty(), "{matching}: a 304 has no body");
        assert_eq!(r.header_str("Content-Length"), None, "{matching}");
    }
    let other = get_if(&mut conn, b"k", &[("If-None-Match", &quoted(v1 + 1))]);
    assert_status(&other, 200, "another tag");
    assert_eq!(other.body, b"v1");
    let absent = get_if(&mut conn, b"nothing", &[("If-None-Match", "*")]);
    assert_status(&absent, 404, "a key without a value");
    // The connection carries on after the 304s (no body was expected).
    assert_eq!(conn.get(b"k").body, b"v1");
}

/// `If-Match` after another client's `PUT` is 412 with the current
/// `ETag`, nothing written; with the current tag it writes; a weak tag
/// never matches; `*` needs a value; `If-None-Match: *` creates once;
/// `DELETE` is conditional the same way.
#[test]
fn if_match_and_create_only() {
    let node = Node::start(&[]);
    let (mut a, mut b) = (node.conn(), node.conn());
    let v1 = etag(&a.put(b"k", b"a1"));
    let v2 = etag(&b.put(b"k", b"b1"));
    assert!(v2 > v1);
    let stale = put_if(&mut a, b"k", b"a2", &[("If-Match", &quoted(v1))]);
    assert_error(&stale, 412, "If-Match of a stale version");
    assert_eq!(etag(&stale), v2, "a 412 names the current version");
    assert_eq!(a.get(b"k").body, b"b1", "nothing written");
    let fresh = put_if(&mut a, b"k", b"a2", &[("If-Match", &quoted(v2))]);
    assert_status(&fresh, 201, "If-Match of the current version");
    let v3 = etag(&fresh);
    assert!(v3 > v2);
    assert_eq!(etag(&a.get(b"k")), v3);
    let weak = format!("W/{}", quoted(v3));
    assert_error(
        &put_if(&mut a, b"k", b"x", &[("If-Match", &weak)]),
        412,
        "weak",
    );
    let any = put_if(&mut a, b"k", b"a3", &[("If-Match", "*")]);
    assert_status(&any, 201, "If-Match: * of a key with a value");
    let none = put_if(&mut a, b"new", b"x", &[("If-Match", "*")]);
    assert_error(&none, 412, "If-Match: * of an absent key");
    assert_eq!(none.header_str("ETag"), None, "no current version to name");
    assert_eq!(a.get(b"new").status, 404, "nothing written");
    let created = put_if(&mut a, b"new", b"n1", &[("If-None-Match", "*")]);
    assert_status(&created, 201, "create-only of an absent key");
    let again = put_if(&mut b, b"new", b"n2", &[("If-None-Match", "*")]);
    assert_error(&again, 412, "create-only of a key that exists");
    assert_eq!(etag(&again), etag(&created));
    assert_eq!(b.get(b"new").body, b"n1");
    // DELETE: a stale tag is refused, the current one deletes.
    let current = etag(&a.get(b"k"));
    let refused = a.request("DELETE", &entity(b"k"), &[("If-Match", &quoted(v1))], None);
    assert_error(&refused, 412, "DELETE with a stale tag");
    assert_eq!(a.get(b"k").status, 200, "not deleted");
    let deleted = a.request(
        "DELETE",
        &entity(b"k"),
        &[("If-Match", &quoted(current))],
        None,
    );
    assert_status(&deleted, 202, "DELETE with the current tag");
    assert_eq!(a.get(b"k").status, 404);
    // A deleted key matches no If-Match, and can be created again.
    let gone = a.request("DELETE", &entity(b"k"), &[("If-Match", "*")], None);
    assert_error(&gone, 412, "DELETE If-Match: * of a deleted key");
    let reborn = put_if(&mut a, b"k", b"again", &[("If-None-Match", "*")]);
    assert_status(&reborn, 201, "create-only after a delete");
}

/// An expired value matches no `If-Match` and lets a create-only `PUT`
/// through.
#[test]
fn an_expired_value_has_no_version_to_match() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    let put = conn.request("PUT", "/v0/entity?id=e&ttl_ms=1", &[], Some(b"v"));
    assert_status(&put, 201, "expiring put");
    let started = Instant::now();
    while conn.get(b"e").status != 404 {
        assert!(started.elapsed() < Duration::from_secs(10), "never expired");
        std::thread::sleep(Duration::from_millis(5));
    }
    let tag = quoted(etag(&put));
    assert_error(
        &put_if(&mut conn, b"e", b"x", &[("If-Match", &tag)]),
        412,
        "expired",
    );
    let create = put_if(&mut conn, b"e", b"y", &[("If-None-Match", "*")]);
    assert_status(&create, 201, "create-only over an expired value");
}

/// A malformed `If-Match` / `If-None-Match` is a 400 naming the header,
/// nothing written, and the connection carries on. An empty line is
/// malformed wherever it stands among the header's lines (it was joined
/// into `, "5"` when another line followed, and the write went on).
#[test]
fn malformed_headers_are_400() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    for headers in [
        &[("If-Match", "5")][..],
        &[("If-Match", "\"5")],
        &[("If-None-Match", "")],
        &[("If-None-Match", "*, \"5\"")],
        &[("If-Match", "\"5\" \"6\"")],
        &[("If-Match", ""), ("If-Match", "\"5\"")],
        &[("If-Match", "\"5\""), ("If-Match", "")],
        &[("If-None-Match", ""), ("If-None-Match", "\"5\"")],
    ] {
        let name = headers[0].0;
        let r = put_if(&mut conn, b"m", b"x", headers);
        assert_error(&r, 400, &format!("{headers:?}"));
        let text = String::from_utf8_lossy(&r.body);
        assert!(text.contains(name), "{headers:?}: {text}");
        let r = get_if(&mut conn, b"m", headers);
        assert_error(&r, 400, &format!("GET {headers:?}"));
    }
    assert_eq!(conn.get(b"m").status, 404, "nothing written");
}

/// `curl` sees the same: a 304 for its `If-None-Match`, a 412 for a
/// stale `If-Match`. Needs curl; fails naming it when absent.
#[test]
fn curl_sees_304_and_412() {
    let node = Node::start(&[]);
    let tag = quoted(etag(&node.put(b"c", b"v")));
    let url = format!("http://{}{}", node.addr(), entity(b"c"));
    let curl = |args: &[&str]| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
            .args(args)
            .arg(&url)
            .output()
            .expect("this test needs curl on PATH (.ci/run installs it)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let inm = format!("If-None-Match: {tag}");
    assert_eq!(curl(&["-H", &inm]), "304");
    let stale = "If-Match: \"1\"";
    assert_eq!(curl(&["-X", "PUT", "--data", "w", "-H", stale]), "412");
    let current = format!("If-Match: {tag}");
    assert_eq!(curl(&["-X", "PUT", "--data", "w", "-H", &current]), "201");
    assert_eq!(node.get(b"c").body, b"w");
}

/// Many clients on two network threads race `If-None-Match: *` on one
/// key: exactly one 201, every other a 412, and the key holds the
/// winner's value.
#[test]
fn create_once_has_one_winner() {
    const CLIENTS: usize = 16;
    let node = Node::start(&["--net-threads", "2"]);
    let addr = node.addr();
    let start = Arc::new(Barrier::new(CLIENTS));
    let racers: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                let value = format!("client {i}");
                start.wait();
                let r = put_if(
                    &mut conn,
                    b"once",
                    value.as_bytes(),
                    &[("If-None-Match", "*")],
                );
                (r.status, value)
            })
        })
        .collect();
    let answers: Vec<(u16, String)> = racers.into_iter().map(|t| t.join().unwrap()).collect();
    let winners: Vec<&String> = answers
        .iter()
        .filter(|a| a.0 == 201)
        .map(|a| &a.1)
        .collect();
    assert_eq!(winners.len(), 1, "{answers:?}");
    assert!(
        answers.iter().all(|a| a.0 == 201 || a.0 == 412),
        "{answers:?}"
    );
    assert_eq!(node.get(b"once").body, winners[0].as_bytes());
}

/// Clients per read-modify-write run.
const CLIENTS: usize = 8;
/// Increments each client makes.
const INCREMENTS: usize = 25;
/// Attempts of one increment before the run gives up (412 after 412).
const ATTEMPTS_MAX: usize = 10_000;

/// `CLIENTS` clients each add 1 to counter `key` `INCREMENTS` times:
/// `GET`, then `PUT` of the value + 1 with `If-Match` of the `GET`'s
/// `ETag` (`If-None-Match: *` while it is absent), again after a 412;
/// client `i` through `addrs[i % len]`. A 500 or 503 (the consensus
/// register's "may or may not have taken effect") is counted and tried
/// again. Returns the counter's final value (read with `ack` of every
/// replica) and the outcomes unknown.
fn increment_run(addrs: &[std::net::SocketAddr], key: &'static [u8]) -> (u64, u64) {
    let unknown = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let addr = addrs[i % addrs.len()];
            let unknown = Arc::clone(&unknown);
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                for _ in 0..INCREMENTS {
                    let mut attempts = 0;
                    loop {
                        attempts += 1;
                        assert!(attempts < ATTEMPTS_MAX, "no progress");
                        let got = conn.get(key);
                        let (n, condition) = match got.status {
                            200 => {
                                let n: u64 = String::from_utf8(got.body.clone())
                                    .unwrap()
                                    .parse()
                                    .unwrap();
                                (n, ("If-Match", quoted(etag(&got))))
                            }
                            404 => (0, ("If-None-Match", "*".to_string())),
                            other => panic!("GET: {other}"),
                        };
                        let value = (n + 1).to_string();
                        let headers = [(condition.0, condition.1.as_str())];
                        let put = put_if(&mut conn, key, value.as_bytes(), &headers);
                        match put.status {
                            201 => break,
                            412 => continue,
                            500 | 503 => {
                                unknown.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            other => panic!("PUT: {other}: {put:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let mut conn = Conn::open(addrs[0]);
    let target = format!("{}&ack={n}&from={n}", entity(key), n = addrs.len());
    let last = conn.request("GET", &target, &[], None);
    let total = String::from_utf8(last.body).unwrap().parse().unwrap();
    (total, unknown.load(std::sync::atomic::Ordering::Relaxed))
}

/// Read-modify-write with `If-Match` retries loses no update: the
/// counter ends at exactly `CLIENTS * INCREMENTS`. Negative control: with
/// the conditional write's check planted away (the precondition then
/// checked on a read, outside the atomic write), updates are lost.
#[test]
fn if_match_loop_loses_no_update_and_the_planted_bug_is_caught() {
    let node = Node::start(&["--net-threads", "2"]);
    let total = increment_run(&[node.addr()], b"counter");
    assert_eq!(total, ((CLIENTS * INCREMENTS) as u64, 0), "lost updates");
    drop(node);
    let planted = Node::start(&RMW_PLANTED);
    let keys: [&'static [u8]; 5] = [b"c0", b"c1", b"c2", b"c3", b"c4"];
    let caught = keys
        .iter()
        .any(|key| increment_run(&[planted.addr()], key).0 != (CLIENTS * INCREMENTS) as u64);
    assert!(caught, "the planted bug lost no update in 5 runs");
}

/// Pipelined behind a pending write on one connection: a plain `PUT`,
/// then a `PUT` whose `If-Match` names the version before it (412, naming
/// the plain one's), then two `PUT`s naming that one (the first writes,
/// the second, behind it, is 412); and a conditional request split
/// across TCP reads inside its `If-Match` header.
#[test]
fn pipelined_and_split() {
    let node = Node::start(&[]);
    let mut conn = node.conn();
    let v0 = etag(&conn.put(b"p", b"v0"));
    let mut bytes = request("PUT", &entity(b"p"), &[], Some(b"v1"));
    bytes.extend(request(
        "PUT",
        &entity(b"p"),
        &[("If-Match", &quoted(v0))],
        Some(b"v2"),
    ));
    conn.send(&bytes).unwrap();
    let plain = conn.read().unwrap();
    assert_status(&plain, 201, "plain put");
    let behind = conn.read().unwrap();
    assert_error(
        &behind,
        412,
        "If-Match of the version the plain put replaced",
    );
    assert_eq!(etag(&behind), etag(&plain));
    let v1 = quoted(etag(&plain));
    let mut bytes = request("PUT", &entity(b"p"), &[("If-Match", &v1)], Some(b"v3"));
    bytes.extend(request(
        "PUT",
        &entity(b"p"),
        &[("If-Match", &v1)],
        Some(b"v4"),
    ));
    conn.send(&bytes).unwrap();
    let first = conn.read().unwrap();
    assert_status(&first, 201, "the first of two on one version");
    let second = conn.read().unwrap();
    assert_error(&second, 412, "the second of two on one version");
    assert_eq!(etag(&second), etag(&first));
    assert_eq!(conn.get(b"p").body, b"v3");
    // Split inside the If-Match header, and between head and body.
    let tag = quoted(etag(&first));
    let bytes = request("PUT", &entity(b"p"), &[("If-Match", &tag)], Some(b"v5"));
    let cut = bytes.windows(9).position(|w| w == b"If-Match:").unwrap() + 12;
    let body_at = bytes.len() - 2;
    for piece in [&bytes[..cut], &bytes[cut..body_at], &bytes[body_at..]] {
        conn.send(piece).unwrap();
        std::thread::sleep(Duration::from_millis(20)); // a read each, likely
    }
    assert_status(&conn.read().unwrap(), 201, "split conditional put");
    assert_eq!(conn.get(b"p").body, b"v5");
}

/// On 3 nodes with R = 3, a conditional write of a key with replicas on
/// other nodes goes through the consensus register, whichever node takes
/// each request: `If-None-Match: *` creates once; `If-Match` of the
/// version a `GET` through another node named writes and names its new
/// version, which the next `GET` names too; a stale tag is 412; a
/// conditional `DELETE` the same; a conditional `GET` is judged on the
/// version that wins. Then clients on every node that read-modify-write
/// one key with `If-Match` lose no update and make none up.
#[test]
fn a_key_on_three_replicas() {
    let cluster = TestCluster::start(3, &[]);
    let mut conns: Vec<Conn> = (0..3).map(|i| Conn::open(cluster.node(i).addr())).collect();
    let target = support::cluster::entity(b"r", 2, 3);
    let mut send = |i: usize, method: &str, header: (&str, &str), body: Option<&[u8]>| {
        conns[i].request(method, &target, &[header], body)
    };
    let created = send(0, "PUT", ("If-None-Match", "*"), Some(b"v1"));
    assert_status(&created, 201, "create-only PUT");
    let v1 = etag(&created);
    let again = send(1, "PUT", ("If-None-Match", "*"), Some(b"x"));
    assert_error(&again, 412, "create-only PUT of a key that exists");
    let got = cluster.get(2, b"r", 3, 3);
    assert_eq!((got.status, etag(&got)), (200, v1), "{got:?}");
    let updated = send(2, "PUT", ("If-Match", &quoted(v1)), Some(b"v2"));
    assert_status(&updated, 201, "If-Match of the current version");
    let v2 = etag(&updated);
    assert!(v2 > v1, "a newer version: {v2} after {v1}");
    let stale = send(1, "PUT", ("If-Match", &quoted(v1)), Some(b"x"));
    assert_error(&stale, 412, "If-Match of the version before");
    let got = cluster.get(1, b"r", 2, 3);
    assert_eq!(
        (got.status, etag(&got), got.body.as_slice()),
        (200, v2, &b"v2"[..])
    );
    let r = send(0, "GET", ("If-None-Match", &quoted(v2)), None);
    assert_eq!(r.status, 304, "{r:?}");
    let r = send(0, "GET", ("If-Match", "\"1\""), None);
    assert_error(&r, 412, "GET with a stale If-Match");
    let r = send(2, "DELETE", ("If-Match", &quoted(v1)), None);
    assert_error(&r, 412, "DELETE with a stale If-Match");
    let r = send(1, "DELETE", ("If-Match", &quoted(v2)), None);
    assert_status(&r, 202, "DELETE with the current If-Match");
    assert_eq!(cluster.get(0, b"r", 3, 3).status, 404, "deleted");
    let r = send(0, "PUT", ("If-Match", "*"), Some(b"x"));
    assert_error(&r, 412, "If-Match: * of a deleted key");

    let addrs: Vec<_> = (0..3).map(|i| cluster.node(i).addr()).collect();
    let (total, unknown) = increment_run(&addrs, b"shared");
    let acked = (CLIENTS * INCREMENTS) as u64;
    println!("If-Match loop on 3 nodes: counter {total}, {unknown} outcomes unknown");
    assert!(
        (acked..=acked + unknown).contains(&total),
        "lost or phantom updates: counter {total}, {acked} acknowledged, {unknown} unknown"
    );
}
