//! In-process tests of a cluster range's sources: this node's engine and
//! a peer served by a scripted internal range stream on 127.0.0.1, merged
//! and paged; a peer cut mid-stream fails the page, one that does not
//! answer is not opened.

use super::merge::Version;
use super::source::{Node, PageError, Plan, page};
use super::wire;
use crate::cluster::live::LivePlacement;
use crate::config::{NodeConfig, ServeArgs};
use crate::http::response::{write_chunk, write_chunked_head, write_last_chunk};
use crate::http::{Status, response::Persist};
use crate::peer::link::{LinkState, PeerStatus};
use crate::range::Ranges;
use crate::refill::Refill;
use ataman_engine::{Db, Durability, Options, WalMode};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;

/// How the scripted peer answers.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Every version from the requested start, then the last chunk.
    Whole,
    /// Every version, then the connection closes without the last chunk.
    Cut,
    /// 503 before anything.
    Busy,
}

/// The peer's versions; serves `connections` requests as `script` says.
fn scripted_peer(versions: PeerVersions, script: Script, connections: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for _ in 0..connections {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let line = String::from_utf8_lossy(&head).into_owned();
            // The test's keys need no escapes.
            let start = line
                .split("start=")
                .nth(1)
                .and_then(|r| r.split([' ', '&']).next())
                .unwrap_or_default()
                .replace("%00", "\0");
            let mut out = Vec::new();
            if script == Script::Busy {
                out.extend_from_slice(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n",
                );
            } else {
                write_chunked_head(&mut out, Status::Ok, wire::CONTENT_TYPE, Persist::Close);
                for v in versions.range(start.into_bytes()..).map(|(_, v)| v) {
                    let h = wire::header(&v.key, v.ts, v.value.as_deref(), v.expiring);
                    write_chunk(&mut out, &[&h, &v.key, v.value.as_deref().unwrap_or(&[])]);
                }
                if script == Script::Whole {
                    write_last_chunk(&mut out);
                }
            }
            let _ = s.write_all(&out);
        }
    });
    url
}

struct Local {
    _dir: tempfile::TempDir,
    db: Db,
    config: NodeConfig,
    placement: LivePlacement,
    peers: Vec<PeerStatus>,
    refill: Refill,
    ranges: Ranges,
}

impl Local {
    /// Node 0 of `[self, peer]`, holding `versions`.
    fn new(peer_url: &str, versions: &[Version]) -> Local {
        let dir = tempfile::tempdir().unwrap();
        let urls = vec!["http://127.0.0.1:1".to_owned(), peer_url.to_owned()];
        let args = ServeArgs {
            listen: Some("127.0.0.1:1".into()),
            data_dir: Some(dir.path().join("data")),
            cluster: Some(urls.join(",")),
            self_url: Some(urls[0].clone()),
            wal_mode: Some("none".into()),
            ..ServeArgs::default()
        };
        let config = NodeConfig::resolve(&args).unwrap();
        let opts = Options {
            wal_mode: WalMode::None,
            ..Options::default()
        };
        let db = Db::open(&config.data_dir, opts).unwrap();
        for v in versions {
            match &v.value {
                Some(value) => db.put(&v.key, value, v.ts, Durability::Complete),
                None => db.delete(&v.key, v.ts, Durability::Complete),
            }
            .unwrap();
        }
        Local {
            refill: Refill::off(&config.data_dir),
            _dir: dir,
            db,
            config,
            placement: LivePlacement::new(&urls, 0, &[], 2, 1, None),
            peers: vec![
                PeerStatus::new(LinkState::Myself),
                PeerStatus::new(LinkState::Up),
            ],
            ranges: Ranges::default(),
        }
    }

    fn node(&self) -> Node<'_> {
        Node {
            db: &self.db,
            placement: &self.placement,
            peers: &self.peers,
            config: &self.config,
            refill: &self.refill,
            ranges: &self.ranges,
            tls: None,
            secret: None,
        }
    }
}

fn v(key: &str, ts: u64, value: Option<&str>) -> Version {
    Version {
        key: key.as_bytes().to_vec(),
        ts,
        value: value.map(|s| s.as_bytes().to_vec()),
        expiring: false,
    }
}

/// Both nodes' versions: newer on one or the other, tombstones on both sides.
/// A peer's versions by key.
type PeerVersions = BTreeMap<Vec<u8>, Version>;

fn data() -> (
    Vec<Version>,
    PeerVersions,
    Vec<(&'static str, &'static str)>,
) {
    let local = vec![
        v("a", 5, Some("a-local")),
        v("b", 1, Some("b-old")),
        v("c", 9, None),
        v("e", 3, Some("e-local")),
    ];
    let peer: PeerVersions = [
        v("a", 2, Some("a-peer")),
        v("b", 4, Some("b-peer")),
        v("c", 8, Some("c-resurrected?")),
        v("d", 6, None),
        v("f", 1, Some("f-peer")),
    ]
    .into_iter()
    .map(|v| (v.key.clone(), v))
    .collect();
    let want = vec![
        ("a", "a-local"),
        ("b", "b-peer"),
        ("e", "e-local"),
        ("f", "f-peer"),
    ];
    (local, peer, want)
}

fn plan(start: &[u8]) -> Plan {
    Plan {
        start: start.to_vec(),
        end: None,
        ack: 2,
        from: 2,
    }
}

#[test]
fn pages_of_the_merged_cluster_match_the_newest_versions() {
    let (local, peer, want) = data();
    let url = scripted_peer(peer, Script::Whole, 8);
    let node = Local::new(&url, &local);
    let mut got = Vec::new();
    let mut start = b"a".to_vec();
    for _ in 0..8 {
        let (items, next) = page(&node.node(), &plan(&start), 3).unwrap();
        got.extend(items.into_iter().map(|l| (l.key, l.value)));
        match next {
            Some(next) => start = next,
            None => break,
        }
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = want
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_peer_cut_mid_stream_fails_the_page() {
    let (local, peer, _) = data();
    let url = scripted_peer(peer, Script::Cut, 1);
    let node = Local::new(&url, &local);
    let result = page(&node.node(), &plan(b"a"), 100);
    assert!(
        matches!(result, Err(PageError::Source(_))),
        "a cut stream must fail, got {result:?}"
    );
}

#[test]
fn a_peer_that_refuses_is_not_enough() {
    let (local, peer, _) = data();
    let url = scripted_peer(peer, Script::Busy, 1);
    let node = Local::new(&url, &local);
    match page(&node.node(), &plan(b"a"), 100) {
        Err(PageError::NotEnoughNodes(e)) => {
            let text = e.to_string();
            assert!(text.contains("needs 2 of 2 nodes"), "{text}");
            assert!(text.contains("answered HTTP/1.1 503"), "{text}");
        }
        other => panic!("expected 504's reason, got {other:?}"),
    }
    // ack=1 of from=2 needs one node: this one alone.
    let one = Plan {
        ack: 1,
        ..plan(b"a")
    };
    let (items, next) = page(&node.node(), &one, 100).unwrap();
    assert_eq!(next, None);
    let keys: Vec<&[u8]> = items.iter().map(|l| l.key.as_slice()).collect();
    assert_eq!(keys, vec![&b"a"[..], b"b", b"e"]);
}

/// A `SCAN` page on a range thread: it arrives through the receiver after
/// the wake-up; with every range thread's place taken the page is refused
/// (RESP answers `-TRYAGAIN`), and the place a page took is given back.
#[test]
fn scan_pages_run_on_range_threads_within_the_bound() {
    use super::feed::{RANGE_THREADS_MAX, take_place};
    use super::page_thread;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    let (local, peer, _) = data();
    let url = scripted_peer(peer, Script::Whole, 2);
    let node = Arc::new(Local::new(&url, &local));
    let (woken, wakes) = std::sync::mpsc::channel();
    let wake = Box::new(move || {
        let _ = woken.send(());
    });
    let page = page_thread::start(&node, Local::node, wake, plan(b"a"), 3).unwrap();
    wakes
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    let (keys, next) = page.poll().unwrap().unwrap();
    assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec(), b"e".to_vec()]);
    assert_eq!(next, Some(b"e\0".to_vec()));
    assert_eq!(node.ranges.active.load(Ordering::Acquire), 0);
    for _ in 0..RANGE_THREADS_MAX {
        take_place(&node.ranges).unwrap();
    }
    let refused = page_thread::start(&node, Local::node, Box::new(|| {}), plan(b"a"), 3);
    assert!(
        refused.is_err(),
        "a page past RANGE_THREADS_MAX must be refused"
    );
    assert_eq!(node.ranges.refused_busy.load(Ordering::Relaxed), 1);
}
