//! A real `ataman serve` under a low file descriptor limit (soft and hard
//! `RLIMIT_NOFILE` lowered for the process): client connections are capped
//! below what the node reserves for itself, writes and flushes go on with
//! every client slot taken, no write is acknowledged while the clock's
//! reservation cannot be persisted, and connections queued while the
//! process had no descriptor left are served once it has, without another
//! client arriving (docs/API.md, "File descriptors").
//!
//! Every wait is bounded in count and time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use ataman::faultproxy::FaultProxy;
use ataman_node::antientropy::transfer::plan_thread::PLAN_THREADS_MAX;
use ataman_node::cluster::workers::LAYOUT_WORKERS_MAX;
use ataman_node::descriptors;
use ataman_node::range::feed::RANGE_THREADS_MAX;
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Conn, Node, Response, request};

/// The descriptor limit of the nodes under test: above the node's reserve
/// (about 170 for one network thread), well under a common 1024.
const FD_LIMIT: u64 = 256;
/// Connections opened past the cap.
const EXTRA_CONNECTIONS: usize = 5;
/// Bound on waiting for the server to close a connection past the cap.
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// Bound on every other wait for the node to get somewhere.
const WAIT: Duration = Duration::from_secs(10);
/// Pause between two tries of a bounded wait.
const POLL: Duration = Duration::from_millis(20);

/// The value of metric `name` (with its labels, e.g.
/// `ataman_connections_refused_total{reason="descriptors"}`) in a
/// `/metrics` page.
fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no metric {name} in /metrics"))
        .trim()
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("metric {name}: {e}")) as u64
}

fn metrics(conn: &mut Conn) -> String {
    let r = conn.request("GET", "/metrics", &[], None);
    assert_eq!(r.status, 200);
    String::from_utf8(r.body).unwrap()
}

/// Polls `/metrics` on `conn` until `ok` holds for metric `name` (bounded
/// by [`WAIT`]); returns the last page.
fn wait_metric(conn: &mut Conn, name: &str, ok: impl Fn(u64) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let page = metrics(conn);
        let value = metric(&page, name);
        if ok(value) {
            return page;
        }
        assert!(
            Instant::now() < deadline,
            "{name} stayed at {value} for {WAIT:?}"
        );
        std::thread::sleep(POLL);
    }
}

/// A connection that has been served once (so the node has accepted and
/// counted it).
fn served(node: &Node) -> Conn {
    let mut conn = node.conn();
    let r = conn.request("GET", "/v0/status", &[], None);
    assert_eq!(r.status, 200);
    conn
}

fn sst_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        })
        .count()
}

fn body_text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// Sets the soft descriptor limit of process `pid` (the hard one is kept).
fn set_soft_limit(pid: u32, soft: u64) {
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: FD_LIMIT,
    };
    // SAFETY: prlimit(2) on our own child, reading `new` only.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &new,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// A limit that leaves no client connection after the reserve: the node
/// refuses to start and says what it reserves.
#[test]
fn a_limit_below_the_reserve_is_refused_at_start() {
    let node = Node::stopped(&[], Some(64));
    let (status, stderr) = node.start_expecting_exit();
    assert!(!status.success());
    assert!(
        stderr.contains("descriptor limit 64 leaves no client connection")
            && stderr.contains("reserves"),
        "stderr: {stderr}"
    );
}

/// Idle clients take every connection the cap allows; those past it are
/// closed at once and counted; writes go on and the memtable is flushed
/// to SSTables meanwhile; once the idle clients leave, new ones are served.
#[test]
fn idle_clients_take_the_cap_and_writes_and_flushes_go_on() {
    let node = Node::start_with_fd_limit(&["--memtable-bytes-max", "65536"], FD_LIMIT);
    let mut worker = served(&node);
    // The start-up probe's connection may still be counted: wait until
    // the worker is the only client.
    let page = wait_metric(&mut worker, "ataman_connections_open", |n| n == 1);
    let cap = metric(&page, "ataman_connections_max") as usize;
    let reserved = metric(&page, "ataman_descriptors_reserved");
    assert_eq!(metric(&page, "ataman_descriptors_limit"), FD_LIMIT);
    assert_eq!(cap as u64, FD_LIMIT - reserved, "cap = limit - reserve");
    assert!(cap > 1 && cap < 10_000, "cap {cap}");

    let idle: Vec<Conn> = (1..cap).map(|_| served(&node)).collect();
    for i in 0..EXTRA_CONNECTIONS {
        let mut extra = node.conn();
        assert!(
            extra.closed_within(CLOSE_WAIT),
            "connection {i} past the cap of {cap} was kept open"
        );
    }
    let page = wait_metric(&mut worker, "ataman_connections_open", |n| n == cap as u64);
    assert_eq!(
        metric(
            &page,
            "ataman_connections_refused_total{reason=\"descriptors\"}"
        ),
        EXTRA_CONNECTIONS as u64
    );

    // Writes through the one client slot left, past several memtables.
    let value = vec![b'v'; 1024];
    for i in 0..400 {
        let r = worker.put(format!("flush-{i}").as_bytes(), &value);
        assert_eq!(r.status, 201, "write {i}: {}", body_text(&r));
    }
    let deadline = Instant::now() + WAIT;
    while sst_files(&node.data_dir()) == 0 {
        assert!(Instant::now() < deadline, "no SSTable within {WAIT:?}");
        std::thread::sleep(POLL);
    }
    let page = metrics(&mut worker);
    assert!(metric(&page, "ataman_engine_flushes_total") >= 1);
    assert_eq!(metric(&page, "ataman_engine_poisoned"), 0);
    for i in [0, 199, 399] {
        let r = worker.get(format!("flush-{i}").as_bytes());
        assert_eq!((r.status, r.body.len()), (200, value.len()), "key {i}");
    }

    // The idle clients leave: new clients are served (a try may still
    // meet the cap until the node has seen the closes).
    drop(idle);
    let deadline = Instant::now() + WAIT;
    let mut fresh = Vec::new();
    while fresh.len() < EXTRA_CONNECTIONS {
        let mut conn = node.conn();
        conn.send(&request("GET", "/v0/status", &[], None)).unwrap();
        match conn.read() {
            Ok(r) => {
                assert_eq!(r.status, 200);
                fresh.push(conn);
            }
            Err(_) => {
                assert!(
                    Instant::now() < deadline,
                    "no client served within {WAIT:?}"
                );
                std::thread::sleep(POLL);
            }
        }
    }
}

/// With no descriptor left (the soft limit of the running node lowered to
/// 3: only the standard streams), the clock's reservation cannot be
/// persisted: once the durable reservation is used up every write answers
/// 503 with the reason and none is acknowledged. Connections made
/// meanwhile wait in the backlog; once descriptors are back they are
/// served without any other client arriving, writes resume, and the
/// refused writes are not there.
#[test]
fn no_write_is_acknowledged_while_the_clock_cannot_be_persisted() {
    let node = Node::start_with_fd_limit(&[], FD_LIMIT);
    let pid = node.pid();
    let mut worker = served(&node);
    assert_eq!(worker.put(b"before", b"1").status, 201);

    set_soft_limit(pid, 3);
    // Writes within the durable reservation (at most a lease, 500 ms) are
    // acknowledged; then the first 503 comes.
    let deadline = Instant::now() + WAIT;
    let mut i = 0;
    let first_refusal = loop {
        let r = worker.put(format!("early-{i}").as_bytes(), b"x");
        i += 1;
        match r.status {
            201 => {}
            503 => break body_text(&r),
            other => panic!("write {i}: {other} {}", body_text(&r)),
        }
        assert!(Instant::now() < deadline, "no 503 within {WAIT:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        first_refusal.contains("clock reservation not durable")
            && first_refusal.contains("Too many open files"),
        "{first_refusal}"
    );
    // From then on, nothing is acknowledged.
    let refused: Vec<String> = (0..20).map(|i| format!("refused-{i}")).collect();
    for key in &refused {
        let r = worker.put(key.as_bytes(), b"x");
        assert_eq!(r.status, 503, "{key}: {}", body_text(&r));
        assert!(body_text(&r).contains("clock reservation not durable"));
        assert!(r.header_str("retry-after").is_some());
    }
    let r = worker.delete(b"before");
    assert_eq!(r.status, 503, "delete: {}", body_text(&r));
    wait_metric(&mut worker, "ataman_clock_reservation_failing", |n| n == 1);

    // Clients arriving now wait in the backlog (accept fails with EMFILE).
    let mut queued: Vec<Conn> = (0..3).map(|_| node.conn()).collect();
    for conn in &mut queued {
        conn.send(&request("GET", "/v0/status", &[], None)).unwrap();
    }

    // The node has tried to take them, and failed.
    wait_metric(&mut worker, "ataman_accept_failures_total", |n| n >= 1);

    set_soft_limit(pid, FD_LIMIT);
    // Served with no other client arriving: the node retries `accept`.
    for (i, conn) in queued.iter_mut().enumerate() {
        let r = conn
            .read()
            .unwrap_or_else(|e| panic!("queued client {i}: no answer: {e}"));
        assert_eq!(r.status, 200, "queued client {i}");
    }

    // Writes resume once a reservation is persisted again.
    let deadline = Instant::now() + WAIT;
    loop {
        let r = worker.put(b"after", b"2");
        if r.status == 201 {
            break;
        }
        assert_eq!(r.status, 503, "{}", body_text(&r));
        assert!(
            Instant::now() < deadline,
            "writes did not resume within {WAIT:?}"
        );
        std::thread::sleep(POLL);
    }
    for i in 0..20 {
        let r = worker.put(format!("later-{i}").as_bytes(), b"y");
        assert_eq!(r.status, 201, "later-{i}: {}", body_text(&r));
    }
    for key in &refused {
        assert_eq!(worker.get(key.as_bytes()).status, 404, "{key} was refused");
    }
    assert_eq!(worker.get(b"before").status, 200, "the refused delete");
    assert_eq!(worker.get(b"after").body, b"2");
    let page = metrics(&mut worker);
    assert_eq!(metric(&page, "ataman_engine_poisoned"), 0);
    let page = wait_metric(&mut worker, "ataman_clock_reservation_failing", |n| n == 0);
    assert!(
        metric(
            &page,
            "ataman_http_requests_total{route=\"entity_put\",status=\"503\"}"
        ) >= 20
    );
}

/// A peer's link to a node is a peer connection, not a client: it takes no
/// client slot; the reserve holds, per other node of the live layouts, two
/// descriptors per network thread for the links and a dial for each thread
/// that may call peers (range, layout, plan, gossip, a copy source).
#[test]
fn peer_links_are_reserved_not_counted_as_clients() {
    let single = Node::start(&[]);
    let mut probe = served(&single);
    let single_reserved = metric(&metrics(&mut probe), "ataman_descriptors_reserved");

    let c = support::cluster::TestCluster::start(2, &[]);
    let r = c.put(0, b"replicated", b"v", 2, 2);
    assert_eq!(r.status, 201, "{}", body_text(&r));
    let mut worker = served(c.node(1));
    wait_metric(&mut worker, "ataman_peer_connections_open", |n| n >= 1);
    let page = wait_metric(&mut worker, "ataman_connections_open", |n| n == 1);
    assert_eq!(
        metric(&page, "ataman_descriptors_reserved"),
        single_reserved + reserved_per_other_node(),
        "one network thread, one other node"
    );
}

/// What one more node of the live layouts adds to the reserve of a node
/// with one network thread and fewer than 8 other nodes: its links both
/// ways, a dial from each range, layout, plan and gossip thread, and one
/// more copy source.
fn reserved_per_other_node() -> u64 {
    (descriptors::PEER_CONNECTIONS_PER_NET_THREAD
        + (RANGE_THREADS_MAX + LAYOUT_WORKERS_MAX + PLAN_THREADS_MAX + 1) * descriptors::DIAL
        + descriptors::DIAL) as u64
}

/// The reserve follows the live layouts, not `--cluster`: once a node
/// added with `--join` is in the layout, a bootstrap member reserves one
/// more node's links and dials (the reserve was counted once from the
/// start-up list).
#[test]
fn the_reserve_is_recounted_when_the_layout_grows() {
    let c = support::cluster::TestCluster::start(2, &["--net-threads", "1"]);
    let mut probe = served(c.node(0));
    let before = metric(&metrics(&mut probe), "ataman_descriptors_reserved");
    let proxy = FaultProxy::start_without_target().unwrap();
    let url = proxy.url();
    let joined = Node::start(&["--self", &url, "--join", &c.urls()[0], "--net-threads", "1"]);
    proxy.set_target(joined.addr());
    let r = Conn::open(c.node(0).addr()).request(
        "POST",
        &format!("/v0/layout?version=2&add={url}"),
        &[],
        None,
    );
    assert_eq!(r.status, 200, "{}", body_text(&r));
    let grown = before + reserved_per_other_node();
    wait_metric(&mut probe, "ataman_descriptors_reserved", |n| n == grown);
}
