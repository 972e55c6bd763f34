//! Black-box tests of `ataman cluster start` (real nodes on free ports) and
//! `ataman cluster status` (against fake nodes serving `/v0/cluster`), as
//! docs/CLUSTER.md describes them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::Conn;

/// Bound on `cluster start` printing its node lines.
const START_BOUND: Duration = Duration::from_secs(40);
/// Bound on `cluster start` exiting after SIGTERM (it waits up to 15 s for
/// its children before killing them).
const STOP_BOUND: Duration = Duration::from_secs(30);
/// Attempts at finding three free consecutive ports.
const BASE_PORT_ATTEMPTS: u64 = 8;

/// A base port whose three consecutive ports could be bound just now
/// (below the Linux ephemeral range, so outgoing connections do not take them).
fn free_base_port(attempt: u64) -> u16 {
    for offset in 0..50u64 {
        let seed = u64::from(std::process::id()) * 7919 + (attempt * 50 + offset) * 104_729;
        let base = 20_000 + (seed % 10_000) as u16;
        // The HTTP ports and the RESP ports 1000 above them.
        // A fourth for `cluster add`.
        let free = (0..4).all(|i| {
            [base + i, base + 1000 + i]
                .iter()
                .all(|&p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok())
        });
        if free {
            return base;
        }
    }
    panic!("no three free consecutive ports found");
}

fn ataman() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ataman"))
}

fn sigterm(pid: u32) {
    // SAFETY: kill(2) on a pid this test started and has not reaped.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

fn process_gone(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) != 0 }
}

fn wait_bounded(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A running `ataman cluster start`; dropping it stops the command and,
/// should that fail, kills the nodes it printed.
struct ClusterProcess {
    child: Child,
    stderr: Arc<Mutex<String>>,
    lines: mpsc::Receiver<String>,
    node_pids: Vec<u32>,
}

impl ClusterProcess {
    fn spawn(base: u16, dir: &std::path::Path) -> ClusterProcess {
        let mut child = ataman()
            .args(["cluster", "start", "--nodes", "3", "--base-port"])
            .arg(base.to_string())
            .arg("--dir")
            .arg(dir)
            .args(["--", "--wal-mode", "write"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ataman cluster start");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let mut pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            sink.lock().unwrap().push_str(&text);
        });
        ClusterProcess {
            child,
            stderr,
            lines,
            node_pids: Vec::new(),
        }
    }

    /// The three `node i: …` lines, or `None` if the command exited first.
    fn node_lines(&mut self) -> Option<Vec<String>> {
        let deadline = Instant::now() + START_BOUND;
        let mut lines = Vec::new();
        while lines.len() < 3 {
            assert!(
                Instant::now() < deadline,
                "no node lines within {START_BOUND:?}"
            );
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => lines.push(line),
                Err(_) => {
                    if self.child.try_wait().unwrap().is_some() {
                        return None;
                    }
                }
            }
        }
        Some(lines)
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for ClusterProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            sigterm(self.child.id());
            if wait_bounded(&mut self.child, STOP_BOUND).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        for &pid in &self.node_pids {
            if !process_gone(pid) {
                // SAFETY: a node pid printed by the command; kill(2) only.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGKILL);
                }
            }
        }
    }
}

/// Parses `node I: http://127.0.0.1:PORT, resp 127.0.0.1:PORT (data DIR, pid N)`.
fn parse_node_line(line: &str) -> (usize, SocketAddr, String, u32) {
    let (head, rest) = line.split_once(": http://").expect(line);
    let index = head.strip_prefix("node ").expect(line).parse().expect(line);
    let (addr, rest) = rest.split_once(", resp ").expect(line);
    let (resp, rest) = rest.split_once(" (data ").expect(line);
    let resp: SocketAddr = resp.parse().expect(line);
    let http: SocketAddr = addr.parse().expect(line);
    assert_eq!(resp.port(), http.port() + 1000, "{line}");
    let (dir, pid) = rest.rsplit_once(", pid ").expect(line);
    let pid = pid.strip_suffix(')').expect(line).parse().expect(line);
    (index, addr.parse().expect(line), dir.to_string(), pid)
}

/// `cluster start --nodes 3` starts three answering nodes on consecutive
/// ports, and SIGTERM stops all of them and exits 0.
#[test]
fn start_runs_three_nodes_until_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cluster");
    let mut started = None;
    for attempt in 0..BASE_PORT_ATTEMPTS {
        let base = free_base_port(attempt);
        let mut process = ClusterProcess::spawn(base, &dir);
        match process.node_lines() {
            Some(lines) => {
                started = Some((base, process, lines));
                break;
            }
            // Someone took a port between our check and the command's.
            None if process.stderr().contains("already in use") => continue,
            None => panic!("cluster start exited: {}", process.stderr()),
        }
    }
    let (base, mut process, lines) = started.expect("no attempt found free ports");
    let nodes: Vec<_> = lines.iter().map(|l| parse_node_line(l)).collect();
    process.node_pids = nodes.iter().map(|n| n.3).collect();
    for (i, (index, addr, data, _)) in nodes.iter().enumerate() {
        assert_eq!(*index, i);
        assert_eq!(*addr, SocketAddr::from(([127, 0, 0, 1], base + i as u16)));
        assert_eq!(*data, dir.join(format!("node-{i}")).display().to_string());
        let status = Conn::open(*addr).request("GET", "/v0/status", &[], None);
        assert_eq!(status.status, 200, "node {i}");
    }
    let node0 = nodes[0].1;
    let target = "/v0/entity?id=k&ack=1&from=1";
    let put = Conn::open(node0).request("PUT", target, &[], Some(b"value"));
    assert_eq!(put.status, 201);
    let get = Conn::open(node0).request("GET", target, &[], None);
    assert_eq!((get.status, get.body.as_slice()), (200, &b"value"[..]));

    // `cluster add` starts node 3 through the running supervisor and
    // commits layout version 2; `cluster remove --node 3` takes it out
    // again and the supervisor stops it.
    let grow = ataman()
        .args(["cluster", "add", "--timeout-ms", "60000", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&grow.stdout).into_owned();
    assert!(
        grow.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&grow.stderr)
    );
    assert!(out.contains("layout version 2: settled"), "{out}");
    let added = SocketAddr::from(([127, 0, 0, 1], base + 3));
    let layout = Conn::open(added).request("GET", "/v0/layout", &[], None);
    let doc = String::from_utf8_lossy(&layout.body).into_owned();
    assert!(
        doc.starts_with("{\"version\":2,") && doc.contains("\"member\":true"),
        "{doc}"
    );
    let got = Conn::open(added).request("GET", target, &[], None);
    assert_eq!((got.status, got.body.as_slice()), (200, &b"value"[..]));
    let shrink = ataman()
        .args([
            "cluster",
            "remove",
            "--node",
            "3",
            "--timeout-ms",
            "60000",
            "--dir",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&shrink.stdout).into_owned();
    assert!(
        shrink.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&shrink.stderr)
    );
    assert!(out.contains("layout version 3: settled"), "{out}");
    let deadline = std::time::Instant::now() + STOP_BOUND;
    while TcpStream::connect(added).is_ok() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        TcpStream::connect(added).is_err(),
        "the removed node still listens"
    );

    sigterm(process.child.id());
    let status = wait_bounded(&mut process.child, STOP_BOUND).expect("cluster start did not exit");
    assert!(status.success(), "exit {status}: {}", process.stderr());
    for (i, (_, addr, _, pid)) in nodes.iter().enumerate() {
        assert!(TcpStream::connect(addr).is_err(), "node {i} still listens");
        assert!(process_gone(*pid), "node {i} (pid {pid}) still runs");
    }
}

/// A port in use is refused before any node starts.
#[test]
fn start_refuses_ports_in_use() {
    let root = tempfile::tempdir().unwrap();
    let base = free_base_port(BASE_PORT_ATTEMPTS);
    let _busy = TcpListener::bind((Ipv4Addr::LOCALHOST, base + 1)).unwrap();
    let mut child = ataman()
        .args(["cluster", "start", "--nodes", "3", "--base-port"])
        .arg(base.to_string())
        .arg("--dir")
        .arg(root.path().join("cluster"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_bounded(&mut child, STOP_BOUND).expect("cluster start hung");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("port {} on 127.0.0.1 is already in use", base + 1)),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
    assert!(TcpStream::connect((Ipv4Addr::LOCALHOST, base)).is_err());
    assert!(!root.path().join("cluster").exists(), "created dirs anyway");
}

/// A fake node: answers every request with 200 and the JSON `body(n)`,
/// `n` counting its requests from 0. Stops when dropped.
struct FakeNode {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeNode {
    fn serve(listener: TcpListener, body: impl Fn(u64) -> String + Send + 'static) -> FakeNode {
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let served = AtomicU64::new(0);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            while !flag.load(Ordering::Acquire) && started.elapsed() < Duration::from_secs(60) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let json = body(served.fetch_add(1, Ordering::Relaxed));
                answer(stream, &json);
            }
        });
        FakeNode {
            stop,
            thread: Some(thread),
        }
    }
}

/// Reads one request head (bounded) and answers with `json`.
fn answer(mut stream: TcpStream, json: &str) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    assert!(head.starts_with(b"GET /v0/cluster HTTP/1.1\r\n"));
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    );
    let _ = stream.write_all(response.as_bytes());
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The `/v0/cluster` JSON of node `me` of `urls`, states from `states`
/// (its own entry is `self`), `gets` GET requests so far.
fn view_json(urls: &[String], me: usize, states: &[&str], gets: u64) -> String {
    let nodes: Vec<String> = urls
        .iter()
        .enumerate()
        .map(|(i, url)| {
            let state = if i == me { "self" } else { states[i] };
            let hints = if state == "down" { 5 } else { 0 };
            format!(
                r#"{{"url":"{url}","state":"{state}","hints_pending":{hints},"hint_bytes":{},"sent":{},"failed":0,"future_field":true}}"#,
                hints * 100,
                gets * 2
            )
        })
        .collect();
    format!(
        r#"{{"self":"{}","nodes":[{}],"requests":{{"get":{gets},"put":1}}}}"#,
        urls[me],
        nodes.join(",")
    )
}

fn status(url: &str, interval_ms: u64) -> Output {
    ataman()
        .args(["cluster", "status", "--url", url, "--timeout-ms", "5000"])
        .args(["--interval-ms", &interval_ms.to_string()])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn bind_local() -> (TcpListener, String) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    (listener, url)
}

/// `status` shows every node's view (states, hints) and request rates,
/// and exits 0 when every node answered.
#[test]
fn status_shows_every_nodes_view() {
    let bound: Vec<(TcpListener, String)> = (0..3).map(|_| bind_local()).collect();
    let urls: Vec<String> = bound.iter().map(|(_, url)| url.clone()).collect();
    let states = ["up", "connecting", "down"];
    let _fakes: Vec<FakeNode> = bound
        .into_iter()
        .enumerate()
        .map(|(me, (listener, _))| {
            let urls = urls.clone();
            FakeNode::serve(listener, move |n| view_json(&urls, me, &states, 10 * n))
        })
        .collect();
    let output = status(&urls[0], 200);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    for (i, url) in urls.iter().enumerate() {
        assert!(stdout.contains(&format!("node {i} {url}\n")), "{stdout}");
    }
    for state in ["self", "up", "connecting", "down"] {
        assert!(stdout.contains(&format!("  {state} ")), "{state}: {stdout}");
    }
    // Node 0 sees node 2 down with 5 hints of 500 bytes.
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(&urls[2]) && l.contains("down"))
        .expect(&stdout);
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&fields[1..4], ["down", "5", "500"], "{row}");
    assert!(stdout.contains("requests/s: get "), "{stdout}");
    assert!(!stdout.contains("get 0.0,"), "GET counters grew: {stdout}");
    assert!(stdout.contains("put 0.0"), "PUT counters did not: {stdout}");
    // The health line (`ataman_node::health::cluster_health`): a node
    // that does not say `R` is judged with R = 1.
    assert!(
        stdout.ends_with(
            "3 of 3 nodes answered\nhealth: ok, quorum: all_keys; 3 of 3 members answer\n"
        ),
        "{stdout}"
    );

    let once = status(&urls[1], 0);
    let stdout = String::from_utf8_lossy(&once.stdout);
    assert_eq!(once.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("requests (total): get "), "{stdout}");
}

/// A listed node that does not answer is shown unreachable and makes the
/// exit code 3; so does a dead --url.
#[test]
fn status_exits_3_when_a_node_does_not_answer() {
    let (listener, url) = bind_local();
    let (dead_listener, dead_url) = bind_local();
    drop(dead_listener);
    let urls = vec![url.clone(), dead_url.clone()];
    let _fake = FakeNode::serve(listener, move |n| view_json(&urls, 0, &["", "down"], n));
    let output = status(&url, 50);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains(&format!("node 1 {dead_url}\n  unreachable: ")),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "1 of 2 nodes answered\nhealth: partial, quorum: some_keys; 1 of 2 members answer\n"
        ),
        "{stdout}"
    );

    let output = status(&dead_url, 50);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&dead_url), "{stderr}");
    assert!(output.stdout.is_empty());
}
