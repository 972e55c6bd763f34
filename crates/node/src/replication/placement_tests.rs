//! The network thread's replication under a live layout history: a
//! request placed on two live versions needs `ack` in each set (on the
//! real driver), reads stay on the read version, links grow with the node
//! table, and hints for a node that left go to the keys' current replicas.

use super::*;
use crate::cluster::acceptor_node::AcceptorNode;
use crate::cluster::history::Tracker;
use crate::cluster::layout::{Change, Layout};
use crate::cluster::live::{LivePlacement, Placement};
use crate::cluster::membership::Membership;
use crate::config::{NodeConfig, ServeArgs};
use crate::peer::frame::Stamped;
use crate::state::{Inbox, NodeShared};
use ataman_engine::{Db, Options, WalMode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

fn url(p: u16) -> String {
    format!("http://127.0.0.1:{p}")
}

fn urls(ports: &[u16]) -> Vec<String> {
    ports.iter().map(|&p| url(p)).collect()
}

const REPLY: ReplyTo = ReplyTo {
    token: 1,
    generation: 1,
    slot: 1,
};

/// Commits `next` as the membership's next layout.
fn commit(m: &Membership, next: &Layout) {
    m.update(|s| {
        s.acceptor.learn(next.clone()).unwrap();
        (s.history.begin(next.clone()).unwrap(), ())
    });
}

/// Node `url(1)` of version 1 = {1, 2, 3} (R = 3), in transition to
/// version 2 = {1, 2, 3, 4}.
fn growing(dir: &std::path::Path) -> (Arc<Membership>, LivePlacement) {
    let v1 = Layout::new(1, urls(&[1, 2, 3]), 3).unwrap();
    let m = Arc::new(Membership::new(
        url(1),
        AcceptorNode::open(dir, v1.clone()).unwrap(),
    ));
    let live = LivePlacement::new(&urls(&[1, 2, 3]), 0, &[], 3, 1, Some(Arc::clone(&m)));
    let v2 = v1
        .apply(&Change {
            add: urls(&[4]),
            ..Change::default()
        })
        .unwrap();
    commit(&m, &v2);
    (m, live)
}

fn write_request(key: &[u8], ack: usize, from: usize) -> Request {
    Request {
        reply_to: REPLY,
        key: key.to_vec(),
        kind: ReplicaOp::Write(Stamped {
            ts: 7 << 8,
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        }),
        ack,
        from,
    }
}

/// A key version 2 moved from one old replica to node 4 (index 3).
fn moved_key(p: &Placement) -> Vec<u8> {
    (0..1000u32)
        .map(|k| k.to_string().into_bytes())
        .find(|k| p.write(k, 3).replicas.len() == 4)
        .unwrap()
}

/// During 3 -> 4, a write of a moved key asks the union of both sets and
/// is answered only once `ack` replicas of EACH set acknowledged: two
/// acknowledgements from the old set (one of them the replica that gives
/// the key up) are not enough while the new set has one.
#[test]
fn a_write_needs_ack_in_each_live_set() {
    let dir = tempfile::tempdir().unwrap();
    let (_m, live) = growing(dir.path());
    let p = live.get();
    let key = moved_key(&p);
    let placed = placed_request(&p, write_request(&key, 2, 3)).unwrap();
    assert_eq!(placed.replicas.len(), 4);
    assert_eq!(placed.sets.len(), 2, "both versions' sets");
    let old: Vec<usize> = placed.sets[0].iter().map(|&i| placed.replicas[i]).collect();
    let new: Vec<usize> = placed.sets[1].iter().map(|&i| placed.replicas[i]).collect();
    let gone = *old.iter().find(|n| !new.contains(n)).unwrap();
    let gained = *new.iter().find(|n| !old.contains(n)).unwrap();
    assert_eq!(gained, 3, "the new node gains the key");
    let kept = *old.iter().find(|&&n| n != gone).unwrap();

    let mut driver: Replicator<ReplyTo> = Replicator::new(DriverConfig {
        self_index: p.self_index(),
        nodes: p.len(),
        timeout_ms: 1000,
        planted_older_repair: false,
    });
    driver.start(0, placed);
    let mut waiters = std::collections::BTreeMap::new();
    while let Some(action) = driver.next_action() {
        match action {
            Action::Send { node, waiter, .. } => {
                waiters.insert(node, waiter);
            }
            Action::WriteLocal {
                waiter: Some(waiter),
                ..
            } => {
                waiters.insert(p.self_index(), waiter);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(waiters.len(), 4, "every replica of the union asked");
    let mut stamp = |_: u64| -> Result<u64, String> { Err("no re-stamp".into()) };
    let replied = |driver: &mut Replicator<ReplyTo>| {
        let mut out = None;
        while let Some(action) = driver.next_action() {
            if let Action::Reply { answer, .. } = action {
                out = Some(answer);
            }
        }
        out
    };
    for node in [gone, kept] {
        driver.on_answer(node, waiters[&node], ReplicaAnswer::Written, &mut stamp);
    }
    assert!(
        replied(&mut driver).is_none(),
        "answered with ack in the old set only"
    );
    driver.on_answer(gained, waiters[&gained], ReplicaAnswer::Written, &mut stamp);
    let answer = replied(&mut driver).expect("ack in both sets answers");
    assert!(matches!(answer, Ok(Decision::Written { .. })), "{answer:?}");
}

/// Reads ask the read version's set only (the old one until every node
/// synced the new one), and a request whose `ack` the placement cannot
/// give any more is refused, not started.
#[test]
fn reads_use_the_read_version() {
    let dir = tempfile::tempdir().unwrap();
    let (m, live) = growing(dir.path());
    let p = live.get();
    let key = moved_key(&p);
    let read = Request {
        kind: ReplicaOp::Read,
        ..write_request(&key, 2, 3)
    };
    let placed = placed_request(&p, read).unwrap();
    assert_eq!(placed.replicas.len(), 3);
    assert!(
        !placed.replicas.contains(&3),
        "read the new node before sync"
    );
    let too_many = Request {
        kind: ReplicaOp::Read,
        ..write_request(&key, 4, 3)
    };
    assert!(placed_request(&p, too_many).is_err(), "ack 4 of 3 replicas");

    m.update(|s| {
        let mut grew = false;
        for n in [1, 2, 3, 4] {
            grew |= s.history.raise(Tracker::Sync, &url(n), 2);
        }
        (grew, ())
    });
    let p = live.get();
    let read = Request {
        kind: ReplicaOp::Read,
        ..write_request(&key, 2, 3)
    };
    let placed = placed_request(&p, read).unwrap();
    assert!(placed.replicas.contains(&3), "synced: reads use version 2");
}

/// An in-process node (no threads) following `membership`.
struct TestShared {
    shared: Arc<NodeShared>,
    _poll: mio::Poll,
    _dir: tempfile::TempDir,
}

fn test_shared(membership: Arc<Membership>, nodes: &[String], me: usize) -> TestShared {
    let dir = tempfile::tempdir().unwrap();
    let args = ServeArgs {
        listen: Some("127.0.0.1:1".into()),
        data_dir: Some(dir.path().join("data")),
        cluster: Some(nodes.join(",")),
        self_url: Some(nodes[me].clone()),
        wal_mode: Some("none".into()),
        ..ServeArgs::default()
    };
    let config = NodeConfig::resolve(&args).unwrap();
    let opts = Options {
        wal_mode: WalMode::None,
        ..Options::default()
    };
    let db = Arc::new(Db::open(&config.data_dir, opts).unwrap());
    let hints =
        crate::hints::HintStore::open(&dir.path().join("hints"), 1 << 20, WalMode::None).unwrap();
    let (antientropy, _receiver) = crate::antientropy::AntiEntropy::new(1 << 20);
    let poll = mio::Poll::new().unwrap();
    let waker = mio::Waker::new(poll.registry(), mio::Token(0)).unwrap();
    let placement = LivePlacement::new(
        &config.cluster,
        config.self_index,
        &config.peer_via,
        config.replication_factor,
        1,
        Some(Arc::clone(&membership)),
    );
    let shared = Arc::new(NodeShared {
        tls: None,
        refill: crate::refill::Refill::off(&config.data_dir),
        db,
        hlc: crate::hlc::Hlc::for_node(me),
        topology: crate::cluster::Topology::new(nodes.to_vec(), me),
        membership: Some(membership),
        placement,
        transition: Arc::new(crate::cluster::transition_state::TransitionShared::new(1)),
        config,
        metrics: crate::metrics::NodeMetrics::default(),
        connections: AtomicUsize::new(0),
        peer_connections: AtomicUsize::new(0),
        connections_cap: AtomicUsize::new(usize::MAX),
        shutting_down: AtomicBool::new(false),
        inboxes: vec![Arc::new(Inbox::new(waker))],
        hints: Arc::new(hints),
        backups: Arc::new(crate::backup::Backups::open(dir.path()).unwrap()),
        peers: NodeShared::peer_statuses(me),
        antientropy,
        ranges: crate::range::Ranges::default(),
        register: None,
        write_durability: ataman_engine::Durability::Complete,
        auth: crate::auth::Auth::disabled(),
    });
    TestShared {
        shared,
        _poll: poll,
        _dir: dir,
    }
}

/// A node the table gains (version 2 adds node 4) gets a link on every
/// network thread once the thread refreshes its placement; nothing
/// changes while the generation stays.
#[test]
fn a_grown_table_gets_links() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = Layout::new(1, urls(&[1, 2, 3]), 3).unwrap();
    let m = Arc::new(Membership::new(
        url(1),
        AcceptorNode::open(dir.path(), v1.clone()).unwrap(),
    ));
    let t = test_shared(Arc::clone(&m), &urls(&[1, 2, 3]), 0);
    let ctx = NetContext::new(Arc::clone(&t.shared), 0);
    let mut io = ReplicationIo::new(&ctx);
    assert_eq!(io.links_len(), 3);
    assert!(!ctx.refresh_placement());
    let v2 = v1
        .apply(&Change {
            add: urls(&[4]),
            ..Change::default()
        })
        .unwrap();
    commit(&m, &v2);
    assert!(ctx.refresh_placement(), "the generation moved");
    io.grow_links(&ctx);
    assert_eq!(io.links_len(), 4);
    assert_eq!(ctx.placement().url(3), url(4));
    assert!(!ctx.refresh_placement());
    // `from` may now name the read version's members only (still 3).
    assert_eq!(ctx.route_config.get().cluster_size, 3);
}

/// Version 2 replaces node 3 by node 4 (R = 2) and is the only live one:
/// node 3's hints are kept again for each key's current replicas (written
/// locally when this node is one), and removed from node 3's, none lost.
#[test]
fn hints_for_a_node_that_left_go_to_the_current_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = Layout::new(1, urls(&[1, 2, 3]), 2).unwrap();
    let m = Arc::new(Membership::new(
        url(1),
        AcceptorNode::open(dir.path(), v1.clone()).unwrap(),
    ));
    let t = test_shared(Arc::clone(&m), &urls(&[1, 2, 3]), 0);
    let shared = &t.shared;
    let keys: Vec<Vec<u8>> = (0..40u32).map(|k| format!("k{k}").into_bytes()).collect();
    for (i, key) in keys.iter().enumerate() {
        let ts = (100 + i as u64) << 8;
        shared
            .hints
            .add_expiring(&url(3), key, ts, Some(b"v"), None)
            .unwrap();
    }
    let v2 = v1
        .apply(&Change {
            add: urls(&[4]),
            remove: urls(&[3]),
            ..Change::default()
        })
        .unwrap();
    commit(&m, &v2);
    m.update(|s| {
        for n in [1, 2, 3, 4] {
            for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
                s.history.raise(which, &url(n), 2);
            }
        }
        (s.history.prune(), ())
    });
    let ctx = NetContext::new(Arc::clone(shared), 0);
    let p = ctx.placement();
    let gone = p.urls().iter().position(|u| *u == url(3)).unwrap();
    assert!(!p.is_live_member(gone) && !p.in_transition());

    // `add_expiring` queues the hint's write: wait until the hint engine
    // applied them all (a scan sees them).
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while shared.hints.pending(&url(3), None, 1000).unwrap().len() < keys.len()
        && std::time::Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let busy = super::super::rehome::Rehoming::default();
    assert_eq!(
        super::super::rehome::rehome_hints(&ctx, &p, gone, &busy),
        keys.len()
    );
    // What the event loop does at the end of its iteration.
    let pending = std::mem::take(&mut *ctx.pending_writes.borrow_mut());
    for (done, e) in ctx.db.submit_many(pending) {
        done(Err(e));
    }
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while shared.hints.count(&url(3)).0 > 0 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(shared.hints.count(&url(3)).0, 0, "node 3's hints removed");
    let me = p.self_index();
    let mut want: std::collections::BTreeMap<String, u64> = Default::default();
    for (i, key) in keys.iter().enumerate() {
        let replicas = p.placed().write(key).replicas;
        assert_eq!(replicas.len(), 2);
        for r in replicas {
            if r == me {
                let got = ctx.db.get(key).unwrap().expect("written locally");
                assert_eq!(got.ts, (100 + i as u64) << 8);
            } else {
                *want.entry(p.url(r).to_owned()).or_default() += 1;
            }
        }
    }
    for n in [2, 4] {
        let expected = want.get(&url(n)).copied().unwrap_or(0);
        assert_eq!(
            shared.hints.count(&url(n)).0,
            expected,
            "hints for node {n}"
        );
    }
    assert!(want.values().sum::<u64>() > 0);
}
