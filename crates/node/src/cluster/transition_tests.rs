use super::*;
use crate::cluster::acceptor_node::AcceptorNode;
use crate::cluster::cleanup::{Cleaner, Purged};
use crate::cluster::layout_file;
use crate::cluster::transition_rules::adopt_peer_prune;
use std::sync::atomic::{AtomicUsize, Ordering};

const ROUNDS_MAX: usize = 1_000;

fn url(p: u16) -> String {
    format!("http://127.0.0.1:{p}")
}

fn layout(version: u64, ports: &[u16], r: usize) -> Layout {
    Layout::new(version, ports.iter().map(|&p| url(p)).collect(), r).unwrap()
}

struct Counting(AtomicUsize);

impl Copier for Counting {
    fn copy(&self, _old: &Layout, new: &Layout) -> Result<bool, String> {
        assert_eq!(new.version, 2);
        // The first attempt stops early: the driver starts it again.
        Ok(self.0.fetch_add(1, Ordering::SeqCst) > 0)
    }
}

struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    paths: Vec<std::path::PathBuf>,
    members: Vec<Arc<Membership>>,
    drivers: Vec<Driver>,
    shared: Vec<Arc<TransitionShared>>,
}

/// Nodes 1..=3 that learned v2 (grow [1,2] -> [1,2,3]); node 3 copies
/// through `copier`, the others gain nothing.
fn cluster(copier: Arc<dyn Copier>) -> Cluster {
    let (v1, v2) = (layout(1, &[1, 2], 2), layout(2, &[1, 2, 3], 2));
    cluster_of(v1, v2, copier, 3)
}

/// Nodes 1..=3 going from `v1` to `v2`; node `copying` copies through
/// `copier`, the others through `NotWired`.
fn cluster_of(v1: Layout, v2: Layout, copier: Arc<dyn Copier>, copying: u16) -> Cluster {
    let mut c = Cluster {
        _dirs: Vec::new(),
        paths: Vec::new(),
        members: Vec::new(),
        drivers: Vec::new(),
        shared: Vec::new(),
    };
    for p in [1, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        layout_file::store(dir.path(), &v1).unwrap();
        let mut a = AcceptorNode::open(dir.path(), v1.clone()).unwrap();
        a.learn(v2.clone()).unwrap();
        let m = Arc::new(Membership::new(url(p), a));
        let shared = Arc::new(TransitionShared::new(1));
        shared.note_placement(0, 2);
        let copier = if p == copying {
            Arc::clone(&copier)
        } else {
            Arc::new(NotWired) as Arc<dyn Copier>
        };
        let mut d = Driver::new(
            Arc::clone(&m),
            Arc::clone(&shared),
            copier,
            Duration::ZERO,
            None,
        );
        c.shared.push(shared);
        d.copy_retry_at = None;
        c.paths.push(dir.path().to_owned());
        c._dirs.push(dir);
        c.members.push(m);
        c.drivers.push(d);
    }
    c
}

impl Cluster {
    /// Every driver ticks, then every node gossips to every other.
    fn round(&mut self) {
        for d in &mut self.drivers {
            d.tick();
            // A copy that stopped early is retried at once here.
            d.copy_retry_at = None;
        }
        for a in 0..self.members.len() {
            let (trackers, live) =
                self.members[a].read(|s| (s.history.trackers().clone(), s.history.live().to_vec()));
            let peer = self.members[a].self_url().to_owned();
            for b in 0..self.members.len() {
                self.members[b].update(|s| {
                    let mut grew = s.history.merge(&trackers);
                    if let Some(pruned) = adopt_peer_prune(&s.history, &peer, &live) {
                        s.history = pruned;
                        grew = true;
                    }
                    (grew, ())
                });
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    fn settled_at(&self, v: u64) -> bool {
        self.members
            .iter()
            .all(|m| m.read(|s| s.history.is_settled() && s.acceptor.current().version == v))
    }
}

/// A grow runs to its end through the drivers: ack, copy (stopped early
/// once, then complete), sync, sync_ack, prune and the promotion of
/// `LAYOUT` on every node, `LAYOUT-NEXT` removed.
#[test]
fn grow_settles_and_promotes() {
    let copier = Arc::new(Counting(AtomicUsize::new(0)));
    let mut c = cluster(Arc::clone(&copier) as Arc<dyn Copier>);
    let mut rounds = 0;
    while !c.settled_at(2) {
        assert!(rounds < ROUNDS_MAX, "not settled");
        c.round();
        rounds += 1;
    }
    assert_eq!(
        copier.0.load(Ordering::SeqCst),
        2,
        "copied twice on node 3 only"
    );
    for path in &c.paths {
        assert_eq!(
            layout_file::load(path).unwrap(),
            Some(layout(2, &[1, 2, 3], 2))
        );
        assert!(layout_file::load_next(path).unwrap().is_none());
    }
    // The ticks after the promotion run the cleanup (on its own thread).
    let mut rounds = 0;
    while !c.drivers.iter().all(|d| d.progress.cleaned == 2) {
        assert!(rounds < ROUNDS_MAX, "not cleaned");
        c.round();
        rounds += 1;
    }
}

/// Without a copier the node that gains keys never syncs: reads stay on
/// the old version and nothing is pruned or promoted.
#[test]
fn no_copier_waits_on_the_old_version() {
    let mut c = cluster(Arc::new(NotWired));
    // Until every node acked (after the ack margin), then longer.
    let mut rounds = 0;
    while !c.members[0].history().copy_may_start() {
        assert!(rounds < ROUNDS_MAX, "never acked");
        c.round();
        rounds += 1;
    }
    for _ in 0..20 {
        c.round();
    }
    for m in &c.members {
        m.read(|s| {
            assert!(s.history.in_transition());
            assert_eq!(s.history.read_layout().version, 1);
            assert_eq!(s.acceptor.current().version, 1);
        });
    }
    // Every node acked: only the copy is missing.
    let h = c.members[0].history();
    assert!(h.copy_may_start());
}

struct Complete;

impl Copier for Complete {
    fn copy(&self, _old: &Layout, _new: &Layout) -> Result<bool, String> {
        Ok(true)
    }
}

/// A shrink: node 3 stays a member while the transition runs, then is
/// removed, settled and safe to stop; the others stay members.
#[test]
fn removed_node_is_safe_to_stop_once_settled() {
    let (v1, v2) = (layout(1, &[1, 2, 3], 2), layout(2, &[1, 2], 2));
    // Nodes 1 and 2 may gain (node 3 leaves): both copy.
    let mut c = cluster_of(v1, v2, Arc::new(Complete), 1);
    c.drivers[1].copier = Arc::new(Complete);
    assert_eq!(c.shared[2].standing(), Standing::Member);
    let mut rounds = 0;
    while !c.settled_at(2) {
        assert!(rounds < ROUNDS_MAX, "not settled");
        assert!(!c.shared[2].safe_to_stop());
        c.round();
        rounds += 1;
    }
    c.round();
    assert_eq!(c.shared[2].standing(), Standing::Removed);
    assert!(c.shared[2].safe_to_stop());
    assert_eq!(c.shared[2].members(), vec![url(1), url(2)]);
    for s in &c.shared[..2] {
        assert_eq!(s.standing(), Standing::Member);
        assert!(s.settled() && !s.safe_to_stop());
    }
}

/// A member whose network threads never noted a placement with a live
/// version (a node added while it ran alone) does not serve yet; once
/// they do, it is a member.
#[test]
fn a_member_serves_once_its_threads_place_with_a_live_version() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = layout(1, &[1, 2], 2);
    let a = AcceptorNode::open(dir.path(), v1).unwrap();
    let m = Arc::new(Membership::new(url(1), a));
    let shared = Arc::new(TransitionShared::new(2));
    /// A seed that never answers.
    struct Silent;
    impl crate::cluster::join::AskSeed for Silent {
        fn live(
            &self,
            seed: &str,
        ) -> Result<Vec<crate::cluster::layout::Layout>, crate::cluster::join::SeedError> {
            Err(crate::cluster::join::SeedError::Unreachable(format!(
                "{seed}: connect: refused"
            )))
        }
    }
    let seed = Some(crate::cluster::join::Seed {
        url: url(2),
        ask: Arc::new(Silent),
    });
    let mut d = Driver::new(
        m,
        Arc::clone(&shared),
        Arc::new(NotWired),
        Duration::ZERO,
        seed,
    );
    assert_eq!(shared.standing(), Standing::Joining);
    shared.note_placement(0, 1);
    d.tick();
    assert_eq!(shared.standing(), Standing::Joining, "one thread of two");
    shared.note_placement(1, 1);
    d.tick();
    assert_eq!(shared.standing(), Standing::Member);
}

/// A cleaner that records what it was asked, and its record.
#[derive(Default)]
struct Recording {
    calls: std::sync::Mutex<Vec<(u64, crate::cluster::cleanup::KeepFn)>>,
    done: std::sync::Mutex<Option<u64>>,
}

impl Cleaner for Recording {
    fn clean(&self, version: u64, keep: crate::cluster::cleanup::KeepFn) -> Result<Purged, String> {
        self.calls.lock().unwrap().push((version, keep));
        *self.done.lock().unwrap() = Some(version);
        Ok(Purged { keys: 1, bytes: 2 })
    }

    fn cleaned(&self) -> Option<u64> {
        *self.done.lock().unwrap()
    }
}

/// A shrink cleans up once per node, after the promotion: the members
/// keep exactly what they replicate in v2, the removed node nothing; a
/// restart with the record does not clean again, one without it does.
#[test]
fn cleanup_runs_once_after_promotion_and_survives_a_restart() {
    use crate::cluster::transition_rules::keeps;
    let (v1, v2) = (layout(1, &[1, 2, 3], 2), layout(2, &[1, 2], 1));
    let mut c = cluster_of(v1, v2.clone(), Arc::new(Complete), 1);
    c.drivers[1].copier = Arc::new(Complete);
    let cleaners: Vec<Arc<Recording>> = (0..3).map(|_| Arc::default()).collect();
    let drivers = std::mem::take(&mut c.drivers);
    for (d, r) in drivers.into_iter().zip(&cleaners) {
        c.drivers
            .push(d.with_cleaner(Arc::clone(r) as Arc<dyn Cleaner>));
    }
    let mut rounds = 0;
    while !c.drivers.iter().all(|d| d.progress.cleaned == 2) {
        assert!(rounds < ROUNDS_MAX, "not cleaned");
        for (m, r) in c.members.iter().zip(&cleaners) {
            if !r.calls.lock().unwrap().is_empty() {
                // Only once settled and stored.
                m.read(|s| {
                    assert!(s.history.is_settled());
                    assert_eq!(s.acceptor.current().version, 2);
                });
            }
        }
        c.round();
        rounds += 1;
    }
    for _ in 0..5 {
        c.round();
    }
    for (p, r) in [1u16, 2, 3].into_iter().zip(&cleaners) {
        let calls = r.calls.lock().unwrap();
        assert_eq!(calls.len(), 1, "node {p}: one cleanup");
        let (version, keep) = &calls[0];
        assert_eq!(*version, 2);
        let mut kept = 0;
        for k in 0..300 {
            let key = format!("key-{k}");
            let want = keeps(std::slice::from_ref(&v2), &url(p), key.as_bytes());
            assert_eq!(keep(key.as_bytes()), want, "node {p} {key}");
            kept += usize::from(want);
        }
        if p == 3 {
            assert_eq!(kept, 0, "the removed node keeps nothing");
        } else {
            assert!(kept > 0 && kept < 300, "node {p} keeps its share: {kept}");
        }
    }
    assert_eq!(
        c.shared[0].cleanup.json(),
        "{\"version\":2,\"running\":0,\"keys_purged\":1,\"bytes_purged\":2}"
    );
    // Restarts: with the record nothing runs; without it, the cleanup again.
    for (record, calls_after) in [(true, 1), (false, 1)] {
        let recorded: Arc<Recording> = Arc::default();
        if record {
            *recorded.done.lock().unwrap() = Some(2);
        }
        let mut d = Driver::new(
            Arc::clone(&c.members[0]),
            Arc::new(TransitionShared::new(1)),
            Arc::new(NotWired),
            Duration::ZERO,
            None,
        )
        .with_cleaner(Arc::clone(&recorded) as Arc<dyn Cleaner>);
        for _ in 0..ROUNDS_MAX {
            d.tick();
            if d.progress.cleaned == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(d.progress.cleaned, 2);
        let expect = if record { 0 } else { calls_after };
        assert_eq!(
            recorded.calls.lock().unwrap().len(),
            expect,
            "record {record}"
        );
    }
}
