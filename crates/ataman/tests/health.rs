//! The health endpoints on real processes (docs/API.md, "Health"):
//! `/livez` stays 200 with two of three nodes down while the cluster
//! health view says the cluster lost its quorum; `/readyz` is 503 while a
//! joining node copies and 200 after; `/readyz` is 503 while a node
//! replays a long write-ahead log and 200 after; `ataman healthcheck`'s
//! exit codes. Each guarantee has its negative control: a planted bug
//! (`--debug-planted-bug`) the same check catches.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman::faultproxy::FaultProxy;
use ataman::http_client::exchange::exchange;
use ataman::http_client::url::BaseUrl;
use ataman_node::health::startup::STARTING_PREFIX;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::cluster::{TestCluster, body, eventually};
use support::{Conn, Node};

/// No anti-entropy rounds: a transition's copy is the only one.
const NO_ROUNDS: [&str; 2] = ["--anti-entropy-interval-ms", "0"];
/// Bound on the gossip showing a change of the members' reach.
const GOSSIP_WAIT: Duration = Duration::from_secs(30);
/// Bound on a transition settling, and on a replay ending.
const SETTLE_WAIT: Duration = Duration::from_secs(120);
/// `/livez` probes made with two nodes down.
const LIVEZ_PROBES: usize = 20;
/// Bound on one probe of the tests.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two probes of a changing state.
const POLL_PAUSE: Duration = Duration::from_millis(20);

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = Conn::open(addr).request("GET", path, &[], None);
    (r.status, body(&r))
}

/// `GET /v0/cluster/health` of `addr`, parsed.
fn health(addr: SocketAddr) -> serde_json::Value {
    let (status, text) = get(addr, "/v0/cluster/health");
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Three nodes, node 0 with `plant`; once node 0 sees every member
/// answer, nodes 1 and 2 are killed and node 0's view waits to show it;
/// returns the statuses of [`LIVEZ_PROBES`] `/livez` probes of node 0
/// then, and its `/readyz`.
fn livez_with_two_of_three_down(plant: &[&str]) -> (Vec<u16>, u16) {
    let own: Vec<String> = plant.iter().map(|s| s.to_string()).collect();
    let mut c =
        TestCluster::start_each(
            3,
            &NO_ROUNDS,
            |i| {
                if i == 0 { own.clone() } else { Vec::new() }
            },
        );
    let first = c.node(0).addr();
    eventually("node 0 sees every member answer", GOSSIP_WAIT, || {
        let h = health(first);
        h["status"] == "ok" && h["answering"] == 3
    });
    assert_eq!(get(first, "/livez"), (200, "live\n".into()));
    c.kill9(1);
    c.kill9(2);
    eventually("node 0 sees two members down", GOSSIP_WAIT, || {
        let h = health(first);
        h["status"] == "unavailable" && h["quorum"] == "no_keys" && h["answering"] == 1
    });
    let probes = (0..LIVEZ_PROBES)
        .map(|_| {
            std::thread::sleep(POLL_PAUSE);
            get(first, "/livez").0
        })
        .collect();
    (probes, get(first, "/readyz").0)
}

/// `/livez` never fails because peers are down, and neither does
/// `/readyz` (peers are not part of readiness), while the cluster health
/// view says no key has a quorum.
#[test]
fn livez_stays_200_with_two_of_three_down() {
    let (probes, ready) = livez_with_two_of_three_down(&[]);
    assert!(probes.iter().all(|&s| s == 200), "{probes:?}");
    assert_eq!(ready, 200);
}

/// Negative control: with `/livez` planted to follow the peers (etcd's
/// old `/health`), the same check sees it fail.
#[test]
fn planted_livez_following_peers_is_caught() {
    let (probes, _) = livez_with_two_of_three_down(&["--debug-planted-bug", "livez-follows-peers"]);
    assert!(probes.contains(&503), "{probes:?}");
}

/// The `ataman_layout_copy_keys_moved_total` of the node at `addr`.
fn keys_moved(addr: SocketAddr) -> u64 {
    let (_, text) = get(addr, "/metrics");
    text.lines()
        .find_map(|l| {
            l.strip_prefix("ataman_layout_copy_keys_moved_total ")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// What a joining node's `/readyz` said, in order, without repeats (its
/// reason's code or `ready`), from its start until it answered 200; and
/// whether its copy had moved keys when it first did.
struct JoinSeen {
    codes: Vec<String>,
    moved_when_ready: u64,
}

/// Adds the code of a `/readyz` body (its first word) unless it repeats the last.
fn note(codes: &mut Vec<String>, text: &str) {
    let code = text
        .split([':', '\n'])
        .next()
        .unwrap_or_default()
        .to_owned();
    if codes.last() != Some(&code) {
        codes.push(code);
    }
}

/// Three nodes with 3,000 keys of 1 KiB and the slowest copy rate, and a
/// fourth joining with `plant`, added, its `/readyz` polled until 200.
fn readyz_while_joining(plant: &[&str]) -> JoinSeen {
    let slow = ["--anti-entropy-rate-bytes", "1048576"];
    let c = TestCluster::start(3, &[NO_ROUNDS[0], NO_ROUNDS[1], slow[0], slow[1]]);
    let value = vec![b'v'; 1024];
    for n in 0..3000u32 {
        let r = c.put(n as usize % 3, format!("w{n}").as_bytes(), &value, 2, 3);
        assert_eq!(r.status, 201, "{}", body(&r));
    }
    let proxy = FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    let mut args = vec![
        "--self",
        &url,
        "--join",
        &c.urls()[0],
        NO_ROUNDS[0],
        NO_ROUNDS[1],
        slow[0],
        slow[1],
    ];
    args.extend_from_slice(plant);
    let added = Node::start(&args);
    proxy.set_target(added.addr());
    let mut codes = Vec::new();
    let (status, text) = get(added.addr(), "/readyz");
    assert_eq!(status, 503, "{text}");
    note(&mut codes, &text);
    let target = format!("/v0/layout?version=2&add={url}");
    let r = Conn::open(c.node(0).addr()).request("POST", &target, &[], None);
    assert_eq!(r.status, 200, "{}", body(&r));
    let started = Instant::now();
    loop {
        let (status, text) = get(added.addr(), "/readyz");
        note(&mut codes, &text);
        if status == 200 {
            return JoinSeen {
                codes,
                moved_when_ready: keys_moved(added.addr()),
            };
        }
        assert_eq!(status, 503, "{text}");
        assert!(started.elapsed() < SETTLE_WAIT, "not ready: {codes:?}");
        std::thread::sleep(POLL_PAUSE);
    }
}

/// A joining node is 503 `joining` until added, 503 `copying` while it
/// copies, and 200 once its data for the new version is received.
#[test]
fn readyz_is_503_while_a_joining_node_copies() {
    let seen = readyz_while_joining(&[]);
    assert_eq!(
        seen.codes,
        ["joining", "copying", "ready"],
        "{:?}",
        seen.codes
    );
    assert!(seen.moved_when_ready > 0, "no key was copied");
}

/// Negative control: with readiness planted to ignore the copy, the
/// joining node is called ready before it copied, and the check above
/// would see no `copying`.
#[test]
fn planted_readyz_ignoring_the_copy_is_caught() {
    let seen = readyz_while_joining(&["--debug-planted-bug", "readyz-ignores-copy"]);
    assert!(
        !seen.codes.iter().any(|c| c == "copying"),
        "{:?}",
        seen.codes
    );
}

/// One `/readyz` or `/livez` probe during a start: `STATUS first-word`,
/// or `no answer`.
fn probe(addr: SocketAddr, path: &str) -> String {
    let url = BaseUrl {
        host: addr.ip().to_string(),
        port: addr.port(),
        https: false,
    };
    match exchange(&url, "GET", path, None, PROBE_TIMEOUT) {
        Ok(r) => {
            let text = String::from_utf8_lossy(&r.body);
            let word = text
                .split([':', '\n'])
                .next()
                .unwrap_or_default()
                .to_owned();
            format!("{} {word}", r.status)
        }
        Err(_) => "no answer".into(),
    }
}

/// A single node whose memtable never flushes takes `records` writes
/// over RESP (pipelined), is killed, and starts again with `plant`:
/// what `/readyz` and `/livez` said from its first line until `/readyz`
/// answered 200 (each pair once, in order).
fn probes_during_replay(records: u32, plant: &[&str]) -> Vec<(String, String)> {
    let big = ["--memtable-bytes-max", "1073741824"];
    let resp = support::fixed_resp_addr();
    let mut node = Node::start(&[big[0], big[1], "--resp-listen", &resp]);
    let client = redis::Client::open(format!("redis://{resp}/")).unwrap();
    let mut con = client.get_connection().unwrap();
    con.set_read_timeout(Some(PROBE_TIMEOUT)).unwrap();
    for batch in 0..records / 1000 {
        let mut pipe = redis::pipe();
        for n in 0..1000 {
            pipe.cmd("SET")
                .arg(format!("k{batch}-{n}"))
                .arg([b'v'; 100].as_slice())
                .ignore();
        }
        let () = pipe.query(&mut con).unwrap();
    }
    let data_dir = node.data_dir();
    node.kill9();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data_dir)
        .args(big)
        .args(plant)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix(STARTING_PREFIX) {
                let _ = tx.send(url.trim_start_matches("http://").to_owned());
            }
        }
    });
    let addr: SocketAddr = rx.recv_timeout(SETTLE_WAIT).unwrap().parse().unwrap();
    let mut seen: Vec<(String, String)> = Vec::new();
    let started = Instant::now();
    loop {
        let pair = (probe(addr, "/readyz"), probe(addr, "/livez"));
        let ready = pair.0 == "200 ready";
        if seen.last() != Some(&pair) {
            seen.push(pair);
        }
        if ready || started.elapsed() > SETTLE_WAIT {
            break;
        }
        std::thread::sleep(POLL_PAUSE);
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    seen
}

/// Records written before the restart: a write-ahead log whose replay
/// outlasts the first probes.
const REPLAY_RECORDS: u32 = 100_000;

/// A node replaying its log answers `/livez` 200 and `/readyz` 503
/// `replaying`, then 200 once it serves.
#[test]
fn readyz_is_503_during_wal_replay() {
    let seen = probes_during_replay(REPLAY_RECORDS, &[]);
    let replaying = ("503 replaying".to_owned(), "200 live".to_owned());
    assert_eq!(seen.first(), Some(&replaying), "{seen:?}");
    assert_eq!(
        seen.last().map(|p| p.0.as_str()),
        Some("200 ready"),
        "{seen:?}"
    );
    assert!(seen.iter().all(|p| p.1 == "200 live"), "{seen:?}");
}

/// Negative control: without the start-up responder, nothing answers
/// during the replay; the check above sees no `replaying`.
#[test]
fn planted_missing_startup_responder_is_caught() {
    let seen = probes_during_replay(
        REPLAY_RECORDS,
        &["--debug-planted-bug", "no-startup-responder"],
    );
    assert!(!seen.iter().any(|p| p.0 == "503 replaying"), "{seen:?}");
    assert_eq!(
        seen.last().map(|p| p.0.as_str()),
        Some("200 ready"),
        "{seen:?}"
    );
}

/// `ataman healthcheck ARGS`: exit code, stdout, stderr (bounded).
fn healthcheck(args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ataman"))
        .arg("healthcheck")
        .args(args)
        .env_remove("ATAMAN_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < SETTLE_WAIT,
            "healthcheck {args:?} did not end"
        );
        std::thread::sleep(POLL_PAUSE);
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Exit 0 on a 200 (`/livez`, or `/readyz` with `--ready`), 1 with the
/// reason on a 503, 3 when nothing answers (refused, or silent past
/// `--timeout-ms`), 2 on bad arguments; each failure one line of stderr.
#[test]
fn healthcheck_exit_codes() {
    let node = Node::start(&[]);
    let url = format!("http://{}", node.addr());
    let (code, out, _) = healthcheck(&["--url", &url]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("{url}/livez: live").as_str())
    );
    assert_eq!(healthcheck(&["--url", &url, "--ready"]).0, 0);
    // A joining node lives and is not ready.
    let cluster = "http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3";
    let seed = Node::start(&["--cluster", cluster, "--self", "http://127.0.0.1:1"]);
    let seed_url = format!("http://{}", seed.addr());
    let joiner = Node::start(&["--self", "http://127.0.0.1:4", "--join", &seed_url]);
    let joining = format!("http://{}", joiner.addr());
    assert_eq!(healthcheck(&["--url", &joining]).0, 0);
    let (code, _, err) = healthcheck(&["--url", &joining, "--ready"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("answered 503: joining: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Nothing listens.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (code, _, err) = healthcheck(&["--url", &format!("http://{closed}")]);
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // A listener that never answers: the probe's bound ends it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let (code, _, err) = healthcheck(&["--url", &silent_url, "--timeout-ms", "300"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no answer"), "{err}");
    assert_eq!(healthcheck(&["--url", "ftp://x"]).0, 2);
    assert_eq!(healthcheck(&["--url", &url, "--timeout-ms", "0"]).0, 2);
}

/// A listener that answers one connection with `answer`, then holds it
/// until the client closes (bounded); the address.
fn scripted(answer: Vec<u8>) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut sock, _) = listener.accept().unwrap();
        sock.set_read_timeout(Some(SETTLE_WAIT)).unwrap();
        let mut head = [0u8; 1024];
        let _ = sock.read(&mut head);
        let _ = sock.write_all(&answer);
        let _ = sock.read(&mut head);
    });
    addr
}

/// A 200 announcing a 1 GiB body, of which 8 KiB come and then nothing:
/// the probe reads its bounded prefix and exits 0 with the documented
/// line (a probe reading the whole body waits on it until its bound:
/// exit 3). A 503 whose reason holds terminal escapes is printed with
/// them escaped.
#[test]
fn healthcheck_reads_a_bounded_prefix_and_escapes() {
    let mut huge = b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n\x1b[2Jlive\n".to_vec();
    huge.resize(huge.len() + 8 * 1024, b'x');
    let url = format!("http://{}", scripted(huge));
    let (code, out, err) = healthcheck(&["--url", &url, "--timeout-ms", "60000"]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("{url}/livez: live").as_str()),
        "{err}"
    );
    let evil = b"HTTP/1.1 503 x\r\nContent-Length: 13\r\n\r\n\x1b]0;pwned\x07ok\n".to_vec();
    let url = format!("http://{}", scripted(evil));
    let (code, _, err) = healthcheck(&["--url", &url]);
    assert_eq!(code, 1, "{err}");
    assert!(!err.bytes().any(|b| b == 0x1b || b == 0x07), "{err:?}");
    assert!(err.contains("answered 503: \\x1b]0;pwned\\x07ok"), "{err}");
}

/// `https://` without `--tls-ca` is a bad argument (exit 2, saying so);
/// a trailing slash on the URL is not doubled in the printed path.
#[test]
fn healthcheck_url_arguments() {
    let (code, _, err) = healthcheck(&["--url", "https://127.0.0.1:1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("needs --tls-ca"), "{err}");
    let node = Node::start(&[]);
    let url = format!("http://{}", node.addr());
    let (code, out, _) = healthcheck(&["--url", &format!("{url}/")]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("{url}/livez: live").as_str())
    );
}
