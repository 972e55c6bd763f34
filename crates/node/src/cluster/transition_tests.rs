use super::*;
use crate::cluster::acceptor_node::AcceptorNode;
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
            for b in 0..self.members.len() {
                self.members[b].update(|s| {
                    let mut grew = s.history.merge(&trackers);
                    if let Some(pruned) = adopt_peer_prune(&s.history, &live) {
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
    // The tick after the promotion takes the (logged) cleanup step.
    c.round();
    for d in &c.drivers {
        assert_eq!(d.progress.cleaned, 2);
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
