//! Sessions between two in-process nodes over real sockets: enough keys to
//! cross every batch bound (digest pages, fetch and push batches), both
//! directions, tombstones, the replication-factor scope, a refused Hello,
//! and a stop request.
//!
//! Node B's "network thread" is played by a test thread that accepts the
//! connection, answers the upgrade with a 101 and hands the socket to B's
//! `ataman-sync` thread exactly as the event loop does.

use super::rounds;
use super::stream::{KeepAlive, Timing};
use super::wire::Message;
use super::wire::{FETCH_KEYS_MAX, PUSH_ITEMS_MAX};
use super::{AntiEntropy, Handoff};
use crate::cluster::Topology;
use crate::cluster::live::LivePlacement;
use crate::config::{NodeConfig, ServeArgs};
use crate::hints::HintStore;
use crate::hlc::Hlc;
use crate::metrics::NodeMetrics;
use crate::peer::handshake::SYNC_PROTOCOL as PROTOCOL;
use crate::peer::handshake::upgrade_response_for;
use crate::state::NodeShared;
use ataman_engine::{Db, Durability, Entry, Options, WalMode, WriteBatch};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A version to write: key, timestamp, value (`None`: a tombstone).
type TestVersion = (Vec<u8>, u64, Option<Vec<u8>>);

/// A node of a test cluster whose nodes are `urls`.
struct TestNode {
    shared: Arc<NodeShared>,
    threads: Vec<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestNode {
    fn start(urls: &[String], me: usize, replicas: usize, via: &[(usize, String)]) -> TestNode {
        Self::start_with(urls, me, replicas, via, |_| {})
    }

    /// As `start`, with `tune` applied to the node's anti-entropy state
    /// (rate, timing) before its threads start.
    fn start_with(
        urls: &[String],
        me: usize,
        replicas: usize,
        via: &[(usize, String)],
        tune: impl FnOnce(&mut AntiEntropy),
    ) -> TestNode {
        let dir = tempfile::tempdir().unwrap();
        let peer_via: Vec<String> = via
            .iter()
            .map(|(i, addr)| format!("{}={addr}", urls[*i]))
            .collect();
        let args = ServeArgs {
            listen: Some("127.0.0.1:0".into()),
            data_dir: Some(dir.path().join("data")),
            cluster: Some(urls.join(",")),
            self_url: Some(urls[me].clone()),
            wal_mode: Some("none".into()),
            replication_factor: Some(replicas),
            anti_entropy_interval_ms: Some(0),
            peer_via: Some(peer_via.join(",")),
            ..ServeArgs::default()
        };
        let config = NodeConfig::resolve(&args).unwrap();
        let opts = Options {
            wal_mode: WalMode::None,
            ..Options::default()
        };
        let db = Arc::new(Db::open(&config.data_dir, opts).unwrap());
        let hints = HintStore::open(&dir.path().join("hints"), 0, WalMode::None).unwrap();
        let (mut antientropy, receiver) = AntiEntropy::new(config.anti_entropy_rate_bytes);
        tune(&mut antientropy);
        let refill = crate::refill::Refill::off(&config.data_dir);
        let shared = Arc::new(NodeShared {
            tls: None,
            refill,
            db,
            hlc: Hlc::for_node(me),
            topology: Topology::new(urls.to_vec(), me),
            membership: None,
            placement: LivePlacement::new(
                &config.cluster,
                config.self_index,
                &config.peer_via,
                config.replication_factor,
                1,
                None,
            ),
            transition: Arc::new(crate::cluster::transition_state::TransitionShared::new(1)),
            config,
            metrics: NodeMetrics::default(),
            connections: AtomicUsize::new(0),
            peer_connections: AtomicUsize::new(0),
            connections_cap: AtomicUsize::new(usize::MAX),
            shutting_down: AtomicBool::new(false),
            inboxes: Vec::new(),
            hints: Arc::new(hints),
            backups: Arc::new(crate::backup::Backups::open(dir.path()).unwrap()),
            peers: Vec::new(),
            antientropy,
            ranges: crate::range::Ranges::default(),
            register: None,
            write_durability: ataman_engine::Durability::Complete,
            auth: crate::auth::Auth::disabled(),
        });
        let threads = super::start(&shared, NodeShared::antientropy_node, receiver).unwrap();
        TestNode {
            shared,
            threads,
            _dir: dir,
        }
    }

    fn write(&self, versions: &[TestVersion]) {
        for chunk in versions.chunks(1000) {
            let mut batch = WriteBatch::new();
            for (key, ts, value) in chunk {
                match value {
                    Some(v) => batch.put(key, v, *ts),
                    None => batch.delete(key, *ts),
                };
            }
            self.shared.db.write(batch, Durability::Complete).unwrap();
        }
    }

    fn contents(&self) -> BTreeMap<Vec<u8>, Entry> {
        self.shared
            .db
            .scan(b"", None, true)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

impl Drop for TestNode {
    fn drop(&mut self) {
        self.shared.shutting_down.store(true, Ordering::Release);
        self.shared.antientropy.status.wake();
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

/// Plays `node`'s network thread for sync upgrades: every connection to
/// the returned address gets a 101 and goes to the node's sync thread.
fn front_door(node: &TestNode) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shared = Arc::clone(&node.shared);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if stream.read(&mut byte).unwrap_or(0) == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).to_string();
            assert!(text.contains(&format!("Upgrade: {PROTOCOL}")), "{text}");
            let Some(ticket) = shared.antientropy.try_reserve() else {
                return;
            };
            stream.write_all(&upgrade_response_for(PROTOCOL)).unwrap();
            shared.antientropy.hand_off(Handoff {
                stream: crate::tls::blocking::BlockingStream::Plain(stream),
                leftover: Vec::new(),
                ticket,
            });
        }
    });
    addr
}

fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("http://127.0.0.1:{}", 1 + i))
        .collect()
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}-{i:06}").into_bytes()
}

/// Thousands of keys missing or older on either side, tombstones among
/// them: one round makes both engines identical, crossing the fetch and
/// push batch bounds and several digest pages; a second round moves nothing.
#[test]
fn one_round_converges_two_nodes_across_batches() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    let only_a = PUSH_ITEMS_MAX + 500;
    let only_b = 2 * FETCH_KEYS_MAX + 300;
    let mut on_a = Vec::new();
    let mut on_b = Vec::new();
    for i in 0..only_a {
        let value = (i % 7 != 0).then(|| format!("a{i}").into_bytes());
        on_a.push((key("a", i), 100 + i as u64, value));
    }
    for i in 0..only_b {
        let value = (i % 5 != 0).then(|| format!("b{i}").into_bytes());
        on_b.push((key("b", i), 100 + i as u64, value));
    }
    for i in 0..3000 {
        // Both have the key; the newer side alternates.
        let (older, newer) = if i % 2 == 0 {
            (&mut on_a, &mut on_b)
        } else {
            (&mut on_b, &mut on_a)
        };
        older.push((key("both", i), 10, Some(b"old".to_vec())));
        newer.push((key("both", i), 20, (i % 3 != 0).then(|| b"new".to_vec())));
        // And some keys are the same write on both sides.
        on_a.push((key("same", i), 30, Some(b"same".to_vec())));
        on_b.push((key("same", i), 30, Some(b"same".to_vec())));
    }
    a.write(&on_a);
    b.write(&on_b);
    assert_ne!(a.contents(), b.contents());

    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(report.ok(), "{report:?}");
    let peer = &report.peers[0];
    assert_eq!(peer.keys_pushed, (only_a + 1500) as u64, "{peer:?}");
    assert_eq!(peer.keys_fetched, (only_b + 1500) as u64, "{peer:?}");
    assert!(peer.buckets_differing > 0 && peer.bytes_sent > 0 && peer.bytes_received > 0);
    let contents = a.contents();
    assert_eq!(contents, b.contents());
    assert_eq!(contents.len(), only_a + only_b + 6000);
    assert_eq!(contents[&key("both", 0)].ts, 20);

    let again = rounds::run_round(&a.shared.antientropy_node(), 2);
    assert!(again.ok(), "{again:?}");
    let peer = &again.peers[0];
    assert_eq!(
        (peer.buckets_differing, peer.keys_fetched, peer.keys_pushed),
        (0, 0, 0),
        "{peer:?}"
    );
    assert_eq!(
        b.shared
            .antientropy
            .metrics
            .sessions_served
            .load(Ordering::Relaxed),
        2
    );
}

/// Issue 31: two replicas holding different versions of keys under one
/// timestamp (a timestamp issued twice) are found (the leaves hash the value
/// digest), counted as conflicts in the report and on /metrics, and resolved
/// by the one tie rule: both end with the rule's winner, in whichever
/// direction it has to go; a second round finds nothing.
#[test]
fn conflicts_under_one_timestamp_are_found_counted_and_resolved() {
    use crate::version_order::{VersionRef, wins};
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
    let values = 300;
    for i in 0..values {
        on_a.push((key("v", i), 50, Some(format!("a{i}").into_bytes())));
        on_b.push((key("v", i), 50, Some(format!("b{i}").into_bytes())));
        // The same write on both sides: no conflict.
        on_a.push((key("same", i), 50, Some(b"same".to_vec())));
        on_b.push((key("same", i), 50, Some(b"same".to_vec())));
    }
    let tombstones = 40;
    for i in 0..tombstones {
        // A tombstone against a value: the tombstone wins, on either side.
        let (dead, live) = if i % 2 == 0 {
            (&mut on_a, &mut on_b)
        } else {
            (&mut on_b, &mut on_a)
        };
        dead.push((key("t", i), 60, None));
        live.push((key("t", i), 60, Some(b"live".to_vec())));
    }
    a.write(&on_a);
    b.write(&on_b);

    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(report.ok(), "{report:?}");
    let peer = &report.peers[0];
    let conflicts = (values + tombstones) as u64;
    assert_eq!(peer.conflicts, conflicts, "{peer:?}");
    assert_eq!(peer.keys_fetched + peer.keys_pushed, conflicts, "{peer:?}");
    let metric = &a.shared.antientropy.metrics.conflicts;
    assert_eq!(metric.load(Ordering::Relaxed), conflicts);
    let contents = a.contents();
    assert_eq!(contents, b.contents());
    for i in 0..values {
        let (va, vb) = (format!("a{i}").into_bytes(), format!("b{i}").into_bytes());
        fn version(v: &[u8]) -> VersionRef<'_> {
            VersionRef {
                ts: 50,
                value: Some(v),
                expiring: false,
            }
        }
        let winner = if wins(version(&va), version(&vb)) {
            va
        } else {
            vb
        };
        assert_eq!(
            contents[&key("v", i)].value.as_ref(),
            Some(&winner),
            "key {i}"
        );
    }
    for i in 0..tombstones {
        assert_eq!(contents[&key("t", i)].value, None, "key {i}");
    }

    let again = rounds::run_round(&a.shared.antientropy_node(), 2);
    assert!(again.ok(), "{again:?}");
    let peer = &again.peers[0];
    assert_eq!((peer.buckets_differing, peer.conflicts), (0, 0), "{peer:?}");
}

/// With R = 2 of 3 nodes, a session between A and B moves exactly the keys
/// whose top two replicas are A and B; a round ends ok for the peer it
/// reached and reports the unreachable one.
#[test]
fn replication_factor_scopes_what_moves() {
    let urls = urls(3);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let unreachable = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b)), (2, unreachable)]);
    let seeds = crate::cluster::placement::seeds(&urls);
    let versions: Vec<_> = (0..3000)
        .map(|i| (key("k", i), 5, Some(b"v".to_vec())))
        .collect();
    a.write(&versions);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(!report.ok());
    assert!(report.peers[0].error.is_none(), "{report:?}");
    assert!(report.peers[1].error.is_some(), "{report:?}");
    let on_b = b.contents();
    let mut expected = 0;
    for (k, _, _) in &versions {
        let shared = super::scope::shared(&seeds, k, 2, 0, 1);
        assert_eq!(
            on_b.contains_key(k),
            shared,
            "{}",
            String::from_utf8_lossy(k)
        );
        expected += usize::from(shared);
    }
    assert!(
        expected > 500,
        "only {expected} keys shared by nodes 0 and 1"
    );
    assert_eq!(report.peers[0].keys_pushed, expected as u64);
}

/// A Hello with another replication factor is refused with a clear error,
/// and the refusal is the peer's report; nothing moves.
#[test]
fn a_mismatched_hello_is_refused() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 1, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    a.write(&[(b"k".to_vec(), 5, Some(b"v".to_vec()))]);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    let error = report.peers[0].error.clone().unwrap_or_default();
    assert!(error.contains("replication factor differs"), "{error}");
    assert!(b.contents().is_empty());
}

/// A round started on a stopping node ends at its first stop check (the
/// local scan's rate limiter) without opening a session and reports the
/// stop for every peer; the rounds thread and the sync thread of both nodes
/// end (Drop joins them). A stop in the middle of a session is checked by
/// the same flag between batches (`client.rs`); no test reaches into one.
#[test]
fn a_stop_request_ends_a_round() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    a.write(&[(b"k".to_vec(), 5, Some(b"v".to_vec()))]);
    a.shared.shutting_down.store(true, Ordering::Release);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(!report.ok());
    let error = report.peers[0].error.clone().unwrap_or_default();
    assert!(error.contains("stop"), "{error}");
}

/// Versions fetched from the first peer update the tree compared with the
/// second: a node missing what both peers have fetches it once, and its
/// session with the second peer finds no difference (one scan per round).
#[test]
fn what_one_peer_sent_is_no_difference_with_the_next() {
    let urls = urls(3);
    let b = TestNode::start(&urls, 1, 3, &[]);
    let c = TestNode::start(&urls, 2, 3, &[]);
    let a = TestNode::start(&urls, 0, 3, &[(1, front_door(&b)), (2, front_door(&c))]);
    let versions: Vec<TestVersion> = (0..2000)
        .map(|i| (key("k", i), 7, (i % 4 != 0).then(|| b"v".to_vec())))
        .collect();
    // A has older versions of some keys, nothing of the others.
    let old: Vec<TestVersion> = (0..2000)
        .step_by(3)
        .map(|i| (key("k", i), 3, Some(b"old".to_vec())))
        .collect();
    a.write(&old);
    b.write(&versions);
    c.write(&versions);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.peers[0].keys_fetched, 2000, "{report:?}");
    assert_eq!(
        (
            report.peers[1].buckets_differing,
            report.peers[1].keys_fetched
        ),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(a.contents(), c.contents());
}

/// Values of a few MiB: fetch answers and pushes split at the batch bound
/// (a large value never joins a full batch), and everything still arrives.
#[test]
fn large_values_split_batches() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    let big = |i: usize| Some(vec![i as u8; super::wire::BATCH_BYTES_MAX * 3 / 4]);
    let on_b: Vec<TestVersion> = (0..4).map(|i| (key("fetch", i), 9, big(i))).collect();
    let on_a: Vec<TestVersion> = (0..4).map(|i| (key("push", i), 9, big(i))).collect();
    b.write(&on_b);
    a.write(&on_a);
    // A Fetch of all four is answered with one version: a second would
    // take the answer past the batch bound.
    let keys: Vec<Vec<u8>> = on_b.iter().map(|v| v.0.clone()).collect();
    match super::local::read_versions(&b.shared.antientropy_node(), keys, &mut Quiet).unwrap() {
        super::wire::Message::Versions { items } => assert_eq!(items.len(), 1),
        other => panic!("{other:?}"),
    }
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(report.ok(), "{:?}", report.peers[0].error);
    assert_eq!(
        (report.peers[0].keys_fetched, report.peers[0].keys_pushed),
        (4, 4)
    );
    assert_eq!(a.contents(), b.contents());
}

/// Slows a node down: a tiny rate and short silence timeouts, with
/// keep-alives every `keep_alive`.
fn slow(keep_alive: Duration) -> impl FnOnce(&mut AntiEntropy) {
    move |ae: &mut AntiEntropy| {
        ae.rate = super::rate::RateLimiter::new(64 * 1024);
        ae.timing = Timing {
            keep_alive,
            silence: Duration::from_millis(500),
            welcome: Duration::from_millis(500),
        };
    }
}

/// Local work longer than the silence timeout (scans at 64 KiB/s of more
/// than 64 KiB: the responder's tree and digest page, the initiator's
/// side of the page's range, the fetch answer) does not end a session
/// whose sides send keep-alives while they work; without them (a period
/// longer than the timeout) the same session times out.
#[test]
fn long_local_work_keeps_the_session_alive() {
    let urls = urls(2);
    let value = |i: usize| Some(vec![i as u8; 48 * 1024]);
    let on_a: Vec<TestVersion> = (0..2).map(|i| (key("a", i), 9, value(i))).collect();
    let on_b: Vec<TestVersion> = (0..2).map(|i| (key("b", i), 9, value(i))).collect();

    let quiet = Duration::from_secs(3600);
    let b = TestNode::start_with(&urls, 1, 2, &[], slow(quiet));
    let a = TestNode::start_with(&urls, 0, 2, &[(1, front_door(&b))], slow(quiet));
    a.write(&on_a);
    b.write(&on_b);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    let error = report.peers[0].error.clone().unwrap_or_default();
    assert!(
        error.contains("timed out") || error.contains("no Welcome"),
        "{report:?}"
    );
    drop((a, b));

    let b = TestNode::start_with(&urls, 1, 2, &[], slow(Duration::from_millis(50)));
    let a = TestNode::start_with(
        &urls,
        0,
        2,
        &[(1, front_door(&b))],
        slow(Duration::from_millis(50)),
    );
    a.write(&on_a);
    b.write(&on_b);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    assert!(report.ok(), "{report:?}");
    assert_eq!(
        (report.peers[0].keys_fetched, report.peers[0].keys_pushed),
        (2, 2)
    );
    assert_eq!(a.contents(), b.contents());
}

/// A stream that never needs keeping alive (local calls outside a session).
struct Quiet;

impl KeepAlive for Quiet {
    fn keep_alive(&mut self) -> Result<(), super::stream::SessionError> {
        Ok(())
    }
}

/// A digest page of large values ends after `DIGEST_SCAN_BYTES_MAX`
/// scanned, with a resume key, long before its entry bounds.
#[test]
fn a_digest_page_is_bounded_in_bytes_scanned() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let mib = 1024 * 1024;
    let n = (super::local::DIGEST_SCAN_BYTES_MAX / mib) as usize + 4;
    let versions: Vec<TestVersion> = (0..n)
        .map(|i| (key("big", i), 9, Some(vec![1; mib as usize])))
        .collect();
    b.write(&versions);
    let all = vec![0xff; super::wire::bitmap_bytes(super::merkle::DEPTH)];
    let page = super::local::digest_page(
        &b.shared.antientropy_node(),
        0,
        super::merkle::DEPTH,
        &all,
        None,
        4096,
        &mut Quiet,
    )
    .unwrap();
    match page {
        Message::DigestPage { entries, next } => {
            assert!(entries.len() < n, "{} entries", entries.len());
            assert_eq!(next.as_deref(), entries.last().map(|e| e.key.as_slice()));
        }
        other => panic!("{other:?}"),
    }
}

/// An initiator that closed its end after its Hello (it gave up while its
/// session waited behind another) is dropped before the responder builds
/// a tree for it.
#[test]
fn an_initiator_that_left_is_not_served() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let mut s = std::net::TcpStream::connect(front_door(&b)).unwrap();
    let mut bytes = crate::peer::handshake::upgrade_request_for(PROTOCOL, "127.0.0.1:2", &urls[0]);
    super::wire::encode(
        &Message::Hello {
            version: super::wire::VERSION,
            url: urls[0].clone(),
            replicas: 2,
            depth: super::merkle::DEPTH,
            fingerprint: super::wire::layout_fingerprint(&urls, 1),
        },
        &mut bytes,
    );
    s.write_all(&bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let abandoned = &b.shared.antientropy.metrics.sessions_abandoned;
    let served = &b.shared.antientropy.metrics.sessions_served;
    let until = Instant::now() + Duration::from_secs(30);
    while abandoned.load(Ordering::Relaxed) == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(abandoned.load(Ordering::Relaxed), 1);
    assert_eq!(served.load(Ordering::Relaxed), 1);
}

/// A scan re-opened after every entry sees a key written after it started
/// (it keeps no read view); one never re-opened does not (the view it pins).
#[test]
fn long_scans_reopen_their_read_view() {
    let urls = urls(2);
    let node = TestNode::start(&urls, 1, 2, &[]);
    let shared = &node.shared.antientropy_node();
    node.write(&[
        (b"a".to_vec(), 1, Some(b"1".to_vec())),
        (b"b".to_vec(), 1, Some(b"1".to_vec())),
    ]);
    for (reopen_bytes, late, seen_late) in [(1, b"z1", true), (u64::MAX, b"z2", false)] {
        let mut seen = Vec::new();
        let mut meter = super::local::Meter::new(shared);
        super::local::scan_each_reopening(shared, b"", None, &mut meter, reopen_bytes, |key, _| {
            if key == b"a" {
                node.write(&[(late.to_vec(), 2, Some(b"1".to_vec()))]);
            }
            seen.push(key);
            Ok(true)
        })
        .unwrap();
        assert_eq!(seen.contains(&late.to_vec()), seen_late, "{seen:?}");
    }
}

/// A pushed version the peer refuses (a timestamp far ahead of its clock)
/// does not end the session: the other versions are pushed and fetched,
/// the refusal is counted (report, metrics) and named in the report.
#[test]
fn a_refused_pushed_version_does_not_end_the_session() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    let mut on_a: Vec<TestVersion> = (0..10)
        .map(|i| (key("a", i), 9, Some(b"v".to_vec())))
        .collect();
    on_a.push((b"a-future".to_vec(), u64::MAX - 1, Some(b"v".to_vec())));
    let on_b: Vec<TestVersion> = (0..10)
        .map(|i| (key("b", i), 9, Some(b"v".to_vec())))
        .collect();
    a.write(&on_a);
    b.write(&on_b);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    let peer = &report.peers[0];
    assert_eq!(
        (peer.keys_pushed, peer.keys_fetched, peer.keys_refused),
        (10, 10, 1),
        "{peer:?}"
    );
    let error = peer.error.clone().unwrap_or_default();
    assert!(
        error.contains("1 version(s) refused") && error.contains("a-future"),
        "{error}"
    );
    let on_b_now = b.contents();
    assert!(!on_b_now.contains_key(&b"a-future"[..]));
    assert_eq!(on_b_now.len(), 20);
    for node in [&a, &b] {
        let refused = node
            .shared
            .antientropy
            .metrics
            .keys_refused
            .load(Ordering::Relaxed);
        assert_eq!(refused, 1);
    }
}

/// A Welcome from another node than the peer the session is for (here a
/// `--peer-via` pointing at node C for node B) fails that session with an
/// error naming both; nothing moves.
#[test]
fn a_welcome_from_the_wrong_node_fails_the_session() {
    let urls = urls(3);
    let c = TestNode::start(&urls, 2, 3, &[]);
    let a = TestNode::start(&urls, 0, 3, &[(1, front_door(&c)), (2, front_door(&c))]);
    a.write(&[(b"k".to_vec(), 5, Some(b"v".to_vec()))]);
    let report = rounds::run_round(&a.shared.antientropy_node(), 1);
    let error = report.peers[0].error.clone().unwrap_or_default();
    assert!(
        error.contains(&format!("Welcome came from {}", urls[2])) && error.contains(&urls[1]),
        "{report:?}"
    );
    assert!(report.peers[1].error.is_none(), "{report:?}");
    assert_eq!(report.peers[0].keys_pushed, 0);
}

/// Two nodes on the same members under different layout versions refuse
/// each other's Hello, naming the version; the same version is accepted.
#[test]
fn a_different_layout_version_is_refused() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let node = b.shared.antientropy_node();
    let v1 = node.read_view().unwrap();
    assert_eq!(v1.version(), 1);
    let hello = |fingerprint| {
        super::server::refuse_hello(
            &node.with_view(&v1),
            super::wire::VERSION,
            &urls[0],
            2,
            super::merkle::DEPTH,
            fingerprint,
        )
    };
    assert_eq!(hello(super::wire::layout_fingerprint(&urls, 1)), None);
    let why = hello(super::wire::layout_fingerprint(&urls, 2)).unwrap();
    assert!(why.contains("cluster lists differ"), "{why}");
    assert!(why.contains("layout version 1"), "{why}");
}
