//! Sessions between two in-process nodes over real sockets: enough keys to
//! cross every batch bound (digest pages, fetch and push batches), both
//! directions, tombstones, the replication-factor scope, a refused Hello,
//! and a stop request.
//!
//! Node B's "network thread" is played by a test thread that accepts the
//! connection, answers the upgrade with a 101 and hands the socket to B's
//! `ataman-sync` thread exactly as the event loop does.

use super::rounds;
use super::wire::{FETCH_KEYS_MAX, PROTOCOL, PUSH_ITEMS_MAX};
use super::{AntiEntropy, Handoff};
use crate::cluster::Topology;
use crate::config::{NodeConfig, ServeArgs};
use crate::hints::HintStore;
use crate::hlc::Hlc;
use crate::metrics::NodeMetrics;
use crate::net::NodeShared;
use crate::peer::handshake::upgrade_response_for;
use ataman_engine::{Db, Durability, Entry, Options, WalMode, WriteBatch};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

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
        let (antientropy, receiver) = AntiEntropy::new(config.anti_entropy_rate_bytes);
        let shared = Arc::new(NodeShared {
            db,
            hlc: Hlc::for_node(me),
            topology: Topology::new(urls.to_vec(), me),
            config,
            metrics: NodeMetrics::default(),
            connections: AtomicUsize::new(0),
            shutting_down: AtomicBool::new(false),
            inboxes: Vec::new(),
            hints: Arc::new(hints),
            peers: Vec::new(),
            antientropy,
            write_durability: ataman_engine::Durability::Complete,
        });
        let threads = super::start(&shared, receiver).unwrap();
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
                stream,
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

    let report = rounds::run_round(&a.shared, 1);
    assert!(report.ok(), "{report:?}");
    let peer = &report.peers[0];
    assert_eq!(peer.keys_pushed, (only_a + 1500) as u64, "{peer:?}");
    assert_eq!(peer.keys_fetched, (only_b + 1500) as u64, "{peer:?}");
    assert!(peer.buckets_differing > 0 && peer.bytes_sent > 0 && peer.bytes_received > 0);
    let contents = a.contents();
    assert_eq!(contents, b.contents());
    assert_eq!(contents.len(), only_a + only_b + 6000);
    assert_eq!(contents[&key("both", 0)].ts, 20);

    let again = rounds::run_round(&a.shared, 2);
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
    let report = rounds::run_round(&a.shared, 1);
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
    let report = rounds::run_round(&a.shared, 1);
    let error = report.peers[0].error.clone().unwrap_or_default();
    assert!(error.contains("replication factor differs"), "{error}");
    assert!(b.contents().is_empty());
}

/// A round asked to stop ends its sessions early and reports it; the
/// rounds thread and the sync thread of both nodes end (Drop joins them).
#[test]
fn a_stop_request_ends_a_round() {
    let urls = urls(2);
    let b = TestNode::start(&urls, 1, 2, &[]);
    let a = TestNode::start(&urls, 0, 2, &[(1, front_door(&b))]);
    a.write(&[(b"k".to_vec(), 5, Some(b"v".to_vec()))]);
    a.shared.shutting_down.store(true, Ordering::Release);
    let report = rounds::run_round(&a.shared, 1);
    assert!(!report.ok());
    let error = report.peers[0].error.clone().unwrap_or_default();
    assert!(error.contains("stop"), "{error}");
}
