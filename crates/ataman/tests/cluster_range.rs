//! Cluster-wide ranges (`GET /v0/entities?...&cluster=1`) on real
//! processes: exactly the model's keys (deletes included) through any node
//! while one node is paused (SIGSTOP) and `ack` allows it; bounds; 504 when
//! too few nodes answer; a node killed mid-stream cuts the answer without
//! its terminating chunk; the node-local form unchanged; a node still
//! receiving its copy of a layout change answers `ack=1` with every key
//! (it is outside the read set: it merges read-set nodes, never answers
//! from its own partial data).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman::http_client::url::target;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use support::cluster::{TestCluster, assert_status};
use support::{IO_TIMEOUT, Rng};

/// A chunked `/v0/entities` answer read from a raw socket to its end.
struct Streamed {
    status: u16,
    /// The entries (key, value), in the order received.
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// The terminating chunk arrived.
    terminated: bool,
    /// The body of a non-chunked answer.
    body: String,
}

/// Reads a chunked answer's chunks until its last chunk or the
/// connection's end; each chunk is `key \n value`.
fn read_chunks(reader: &mut impl BufRead, entries: &mut Vec<(Vec<u8>, Vec<u8>)>) -> bool {
    // Each round reads one chunk; a body has fewer chunks than this.
    for _ in 0..10_000_000 {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        let Ok(size) = usize::from_str_radix(line.trim_end(), 16) else {
            return false;
        };
        if size == 0 {
            let mut end = [0u8; 2];
            return reader.read_exact(&mut end).is_ok() && &end == b"\r\n";
        }
        let mut chunk = vec![0u8; size + 2];
        if reader.read_exact(&mut chunk).is_err() {
            return false;
        }
        chunk.truncate(size);
        let nl = chunk
            .iter()
            .position(|&b| b == b'\n')
            .expect("key \\n value");
        let value = chunk.split_off(nl + 1);
        chunk.pop();
        entries.push((chunk, value));
    }
    panic!("more chunks than any test writes");
}

/// Sends `GET target` with `Connection: close` to `addr`.
fn open(addr: std::net::SocketAddr, target: &str) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    BufReader::new(s)
}

/// Reads the head: the status, and whether the body is chunked (else its
/// `Content-Length`).
fn read_head(reader: &mut impl BufRead) -> (u16, Option<usize>) {
    let mut status = 0;
    let mut length = None;
    for i in 0..100 {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if i == 0 {
            status = line.split(' ').nth(1).unwrap().parse().unwrap();
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = Some(v.trim().parse().unwrap());
        }
        if line == "\r\n" {
            return (status, length);
        }
    }
    panic!("head of more than 100 lines");
}

fn stream(addr: std::net::SocketAddr, target: &str) -> Streamed {
    let mut reader = open(addr, target);
    let (status, length) = read_head(&mut reader);
    let mut out = Streamed {
        status,
        entries: Vec::new(),
        terminated: false,
        body: String::new(),
    };
    match length {
        Some(n) => {
            let mut body = vec![0u8; n];
            reader.read_exact(&mut body).unwrap();
            out.body = String::from_utf8_lossy(&body).into_owned();
        }
        None => out.terminated = read_chunks(&mut reader, &mut out.entries),
    }
    out
}

fn entities(start: &[u8], end: Option<&[u8]>, extra: &[(&str, &[u8])]) -> String {
    let mut params: Vec<(&str, &[u8])> = vec![("start", start)];
    if let Some(end) = end {
        params.push(("end", end));
    }
    params.extend_from_slice(extra);
    target("/v0/entities", &params)
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child process this test started.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(rc, 0, "kill({pid}, {signal})");
}

/// Resumes a paused node when dropped (a failed assertion included).
struct Paused(u32);

impl Drop for Paused {
    fn drop(&mut self) {
        signal(self.0, libc::SIGCONT);
    }
}

fn expect_model(got: &Streamed, model: &BTreeMap<Vec<u8>, Vec<u8>>, context: &str) {
    assert_eq!(got.status, 200, "{context}: {}", got.body);
    assert!(got.terminated, "{context}: no terminating chunk");
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.entries.len(), want.len(), "{context}: count");
    assert!(
        got.entries == want,
        "{context}: entries differ from the model"
    );
}

#[test]
fn cluster_range_matches_the_model_with_a_node_paused() {
    let cluster = TestCluster::start(5, &[]);
    let mut rng = Rng::new(19);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    // Writes, overwrites and deletes through every node, on all 3 replicas.
    for i in 0..400u64 {
        let key = format!("k{:03}", rng.below(250)).into_bytes();
        let via = (i % 5) as usize;
        if rng.below(5) == 0 {
            let r = cluster.delete(via, &key, 3, 3);
            assert_status(&r, 202, "delete");
            model.remove(&key);
        } else {
            let value = format!("v{i}").into_bytes();
            let r = cluster.put(via, &key, &value, 3, 3);
            assert_status(&r, 201, "put");
            model.insert(key, value);
        }
    }
    assert!(model.len() > 100, "a model worth checking");

    // The node-local form is unchanged: node 0's own keys only.
    let local = stream(cluster.node(0).addr(), &entities(b"k", None, &[]));
    let own: BTreeMap<Vec<u8>, Vec<u8>> = model
        .iter()
        .filter(|(k, _)| cluster.replicas(k, 3).contains(&0))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(own.len() < model.len(), "node 0 holds a part only");
    expect_model(&local, &own, "node-local");

    let all = [("cluster", &b"1"[..]), ("ack", b"2"), ("from", b"3")];
    // Node 1 comes early in every coordinator's order of peers: it is
    // asked, does not answer in the replication timeout, and is passed over.
    let paused = Paused(cluster.node(1).pid());
    signal(paused.0, libc::SIGSTOP);
    // ack=2 of from=3 needs 5 - 3 + 2 = 4 nodes: the paused one is not needed.
    for via in [0, 2, 3, 4] {
        let got = stream(cluster.node(via).addr(), &entities(b"k", None, &all));
        expect_model(&got, &model, &format!("cluster range via node {via}"));
    }
    // Bounds: start inclusive, end exclusive.
    let bounded = stream(
        cluster.node(2).addr(),
        &entities(b"k050", Some(b"k150"), &all),
    );
    let part: BTreeMap<Vec<u8>, Vec<u8>> = model
        .range(b"k050".to_vec()..b"k150".to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    expect_model(&bounded, &part, "bounded cluster range");
    // ack=3 of from=3 needs all 5 nodes: 504 before the first byte.
    let strict = [("cluster", &b"1"[..]), ("ack", b"3"), ("from", b"3")];
    let refused = stream(cluster.node(0).addr(), &entities(b"k", None, &strict));
    assert_eq!(refused.status, 504, "too few nodes: {}", refused.body);
    assert!(
        refused.body.contains("needs 5 of 5 nodes"),
        "{}",
        refused.body
    );
    drop(paused);
    // Resumed: the strict range is served again.
    let got = stream(cluster.node(0).addr(), &entities(b"k", None, &strict));
    expect_model(&got, &model, "ack=3 from=3 once every node is back");
}

#[test]
fn a_node_killed_mid_stream_cuts_the_answer() {
    let mut cluster = TestCluster::start(3, &[]);
    // Far more than every buffer between a node and the client together
    // (the range's queue, sockets, the proxy): the stream cannot have
    // been read ahead of the kill.
    const KEYS: usize = 96;
    let value = vec![b'x'; 1 << 20];
    for i in 0..KEYS {
        let r = cluster.put(i % 3, format!("big{i:03}").as_bytes(), &value, 3, 3);
        assert_status(&r, 201, "put");
    }
    let all = [("cluster", &b"1"[..]), ("ack", b"3"), ("from", b"3")];
    let target = entities(b"big", None, &all);
    // Positive control: with every node up the whole range arrives.
    let whole = stream(cluster.node(0).addr(), &target);
    assert_eq!(whole.status, 200);
    assert!(whole.terminated, "the whole range, terminated");
    assert_eq!(whole.entries.len(), KEYS);

    // Four ranges whose clients read nothing hold the four range threads
    // (the queue and the sockets fill; the threads wait): a fifth is 503.
    let addr = cluster.node(0).addr();
    let stalled: Vec<_> = (0..4)
        .map(|_| {
            let mut reader = open(addr, &target);
            assert_eq!(read_head(&mut reader), (200, None), "a stalled range");
            reader
        })
        .collect();
    let over = stream(addr, &target);
    assert_eq!(over.status, 503, "over the range threads: {}", over.body);
    // Their clients gone, each thread ends at its next send: ranges run again.
    drop(stalled);
    let mut started = None;
    support::cluster::eventually("a range thread free again", IO_TIMEOUT, || {
        let mut reader = open(addr, &target);
        let head = read_head(&mut reader);
        if head == (200, None) {
            started = Some(reader);
        }
        started.is_some()
    });
    let mut reader = started.expect("a range started");
    // The head goes out with the range's first batch: the stream is under way.
    cluster.kill9(2);
    let mut entries = Vec::new();
    let terminated = read_chunks(&mut reader, &mut entries);
    assert!(!terminated, "a stream missing a node must not end normally");
    assert!(entries.len() < KEYS, "cut short: {} entries", entries.len());
    let metrics = cluster.node(0).get_target("/metrics");
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    let failed = text
        .lines()
        .find_map(|l| l.strip_prefix("ataman_cluster_ranges_failed_total "))
        .expect("failed counter");
    assert_eq!(failed, "1", "the cut range is counted as failed");
}

/// Keys written before the node is added.
const MID_COPY_KEYS: usize = 1_200;
/// Bytes of each value: the new node's copy (about 3/4 of the keys, at
/// the slowest copy rate the nodes take, 1 MiB/s) lasts seconds.
const MID_COPY_VALUE_BYTES: usize = 16 * 1024;
/// Bound on each wait for the transition (the commit reaching every
/// node, every node acking, the copy starting).
const TRANSITION_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// True when the node at `addr` says (`GET /v0/layout`) that versions 1
/// and 2 are live and that `url` is still copying for version 2: reads,
/// cluster ranges included, use version 1's nodes.
fn copying(addr: std::net::SocketAddr, url: &str) -> bool {
    let r = support::Conn::open(addr).request("GET", "/v0/layout", &[], None);
    assert_status(&r, 200, "GET /v0/layout");
    let doc: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    doc["live_versions"] == serde_json::json!([1, 2])
        && doc["waiting_for"].as_array().is_some_and(|w| {
            w.iter()
                .any(|e| e["node"] == url && e["reason"] == "copying (sync)")
        })
}

/// Three nodes (with `extra`) hold [`MID_COPY_KEYS`] keys on all three;
/// a fourth joins and is added, its copy paced at 1 MiB/s; once it says
/// it is copying, it is asked the cluster range `ack=1&from=3`. Returns
/// the answer, the keys written, and the new node's key count read just
/// after the answer (its own data, at most what it held meanwhile).
fn range_through_a_copying_node(extra: &[&str]) -> (Streamed, usize, usize) {
    let slow = [
        "--anti-entropy-interval-ms",
        "0",
        "--anti-entropy-rate-bytes",
        "1048576",
    ];
    let args = [&slow[..], extra].concat();
    let c = TestCluster::start(3, &args);
    let value = vec![b'v'; MID_COPY_VALUE_BYTES];
    std::thread::scope(|s| {
        for via in 0..3 {
            let (addr, value) = (c.node(via).addr(), &value);
            s.spawn(move || {
                let mut conn = support::Conn::open(addr);
                for i in (via..MID_COPY_KEYS).step_by(3) {
                    let key = format!("m{i:05}");
                    let target = support::cluster::entity(key.as_bytes(), 3, 3);
                    let r = conn.request("PUT", &target, &[], Some(value));
                    assert_status(&r, 201, "put");
                }
            });
        }
    });
    let proxy = ataman::faultproxy::FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    let mut join_args = vec!["--self", url.as_str(), "--join", c.urls()[0].as_str()];
    join_args.extend_from_slice(&args);
    let added = support::Node::start(&join_args);
    proxy.set_target(added.addr());
    let r = support::Conn::open(c.node(0).addr()).request(
        "POST",
        &format!("/v0/layout?version=2&add={url}"),
        &[],
        None,
    );
    assert_status(&r, 200, "the addition");
    support::cluster::eventually("the new node copies", TRANSITION_WAIT, || {
        copying(added.addr(), &url)
    });
    let all = [("cluster", &b"1"[..]), ("ack", b"1"), ("from", b"3")];
    let got = stream(added.addr(), &entities(b"m", None, &all));
    assert!(
        copying(added.addr(), &url),
        "the copy ended before the range was answered: the test saw no copying node (more keys, or larger values)"
    );
    let own = stream(added.addr(), &entities(b"m", None, &[]));
    assert_status_streamed(&own, "the new node's own keys");
    (got, MID_COPY_KEYS, own.entries.len())
}

fn assert_status_streamed(got: &Streamed, context: &str) {
    assert_eq!(got.status, 200, "{context}: {}", got.body);
    assert!(got.terminated, "{context}: no terminating chunk");
}

/// A cluster range with `ack=1&from=3` sent to a node still receiving
/// its copy (regression: it answered alone from its own data, the keys
/// copied so far) holds every key written.
#[test]
fn a_copying_node_answers_a_cluster_range_with_every_key() {
    let (got, written, own) = range_through_a_copying_node(&[]);
    assert!(own < written, "the new node held every key: {own}");
    assert_status_streamed(&got, "the range through the copying node");
    let keys: Vec<String> = got
        .entries
        .iter()
        .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
        .collect();
    let want: Vec<String> = (0..written).map(|i| format!("m{i:05}")).collect();
    assert_eq!(keys.len(), want.len(), "keys in the answer");
    assert!(keys == want, "the answer's keys differ from those written");
    assert!(
        got.entries
            .iter()
            .all(|(_, v)| v.len() == MID_COPY_VALUE_BYTES),
        "every value whole"
    );
}

/// Negative control: with the old rule planted, the copying node answers
/// alone from its own data, and the same check finds keys missing.
#[test]
fn planted_range_alone_outside_read_set_is_caught() {
    let (got, written, own) =
        range_through_a_copying_node(&["--debug-planted-bug", "range-alone-outside-read-set"]);
    assert_status_streamed(&got, "the range through the copying node");
    assert!(
        got.entries.len() < written,
        "the planted rule answered every key ({} of {written}, the node holds {own})",
        got.entries.len()
    );
}

/// Three nodes with a cluster secret and no TLS: a cluster range and the
/// cluster's hot keys through one node prove the secret to the other two.
/// The request without proof must keep its connection open for the
/// challenge: sent with `Connection: close`, the peer hung up after its
/// 401, the proof went nowhere and every such read failed ("response head
/// cut or too long"; found by a black-box attack, 2026-12-07). With TLS
/// (the test above) the same bug hid behind the node certificate.
#[test]
fn cluster_reads_prove_the_secret_without_tls() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a-cluster-secret-0123456789abcdef").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c = TestCluster::start(3, &["--cluster-secret-file", secret.to_str().unwrap()]);
    let request = |i: usize, method: &str, target: &str, body: Option<&[u8]>| {
        support::Conn::open(c.node(i).addr()).request(method, target, &[], body)
    };
    for k in ["key-a", "key-b", "key-c"] {
        let target = format!("/v0/entity?id={k}&ack=3&from=3");
        assert_eq!(
            request(0, "PUT", &target, Some(b"v")).status,
            201,
            "PUT {k}"
        );
    }
    // ack=3 of 3: both peers' internal ranges are needed.
    let r = request(
        1,
        "GET",
        "/v0/entities?start=a&cluster=1&ack=3&from=3",
        None,
    );
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 200, "{body}");
    for k in ["key-a", "key-b", "key-c"] {
        assert!(body.contains(k), "{k} in {body:?}");
    }
    let r = request(1, "GET", "/v0/hotkeys?cluster=1", None);
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 200, "{body}");
    assert!(!body.contains("\"error\""), "every member answered: {body}");
}
