use super::*;
use ataman_testkit::rng::Rng;

const TIMEOUT_MS: u64 = 100;
const STEP_MS: u64 = 10;
const STEPS_MAX: u64 = 20_000;

fn url(p: u16) -> String {
    format!("http://127.0.0.1:{p}")
}

fn layout(version: u64, ports: &[u16], r: usize) -> Layout {
    Layout::new(version, ports.iter().map(|&p| url(p)).collect(), r).unwrap()
}

/// The minimum of `which` over every member of a live version.
fn min_of(history: &History, which: Tracker) -> u64 {
    history.trackers().min_over(which, &history.all_nodes())
}

/// A deliberate mistake the model must catch: each step taken early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plant {
    /// Raise `ack` after the bare timeout, without the margin.
    Ack,
    /// Raise `sync` instead of copying.
    Sync,
    /// Prune once every node synced, without waiting for `sync_ack`.
    Prune,
    /// Clean up as soon as the node learned the new version, while two
    /// versions are live.
    Cleanup,
}

/// One node of the model: its view and the truth about it.
struct Node {
    url: String,
    history: History,
    stored: u64,
    progress: Progress,
    /// When it learned the commit (its history holds v).
    learned: bool,
    /// When every one of its threads switched to a placement with v (truth).
    switched_at: Option<u64>,
    /// When its running copy completes.
    copy_done_at: Option<u64>,
}

struct Model {
    nodes: Vec<Node>,
    next: Layout,
    now: u64,
    plant: Option<Plant>,
}

impl Model {
    fn new(old: Layout, next: Layout, plant: Option<Plant>) -> Self {
        let mut urls: Vec<String> = old.nodes.clone();
        for n in &next.nodes {
            if !urls.contains(n) {
                urls.push(n.clone());
            }
        }
        let nodes = urls
            .into_iter()
            .map(|url| Node {
                url,
                history: History::settled(old.clone()),
                stored: old.version,
                progress: Progress {
                    cleaned: old.version,
                    ..Progress::default()
                },
                learned: false,
                switched_at: None,
                copy_done_at: None,
            })
            .collect();
        Model {
            nodes,
            next,
            now: 0,
            plant,
        }
    }

    /// True ack of node `m`: its threads switched longer than the timeout ago.
    fn truly_acked(&self, m: usize) -> bool {
        self.nodes[m]
            .switched_at
            .is_some_and(|s| self.now > s + TIMEOUT_MS + ACK_MARGIN_MS)
    }

    fn actions(&self, n: usize) -> Vec<Action> {
        let node = &self.nodes[n];
        // Without the margin: the ack is raised at the bare timeout.
        let timeout = if self.plant == Some(Plant::Ack) {
            TIMEOUT_MS.saturating_sub(ACK_MARGIN_MS)
        } else {
            TIMEOUT_MS
        };
        let mut out = decide(Inputs {
            self_url: &node.url,
            history: &node.history,
            stored_version: node.stored,
            progress: &node.progress,
            now_ms: self.now,
            replication_timeout_ms: timeout,
            // Safety must not rest on the wait: none here.
            cleanup_wait_ms: 0,
        });
        let h = &node.history;
        let v = h.current().version;
        if self.plant == Some(Plant::Sync) {
            for a in &mut out {
                if *a == Action::StartCopy(v) {
                    *a = Action::Raise(Tracker::Sync, v);
                }
            }
        }
        if self.plant == Some(Plant::Prune)
            && h.in_transition()
            && min_of(h, Tracker::Sync) >= v
            && !out.contains(&Action::Prune)
        {
            out.push(Action::Prune);
        }
        if self.plant == Some(Plant::Cleanup)
            && h.in_transition()
            && node.progress.cleaned < v
            && !out.contains(&Action::Cleanup(v))
        {
            out.push(Action::Cleanup(v));
        }
        out
    }

    /// The truth when node `n` cleans up for `x`: every node that gains
    /// keys copied them, and every member reads `x` (so no read needs a
    /// copy the cleanup deletes).
    fn check_cleanup(&self, n: usize, x: u64) -> Result<(), String> {
        let who = &self.nodes[n].url;
        let v = self.next.version;
        let old = self.nodes[n].history.live()[0].clone();
        for m in &self.nodes {
            let gains = old.version < v && may_gain(&old, &self.next, &m.url);
            if gains && m.progress.copied < v {
                return Err(format!("{who} cleans up {x} before {} copied", m.url));
            }
        }
        for m in self.nodes.iter().filter(|m| self.next.is_member(&m.url)) {
            if m.learned && m.history.read_layout().version < v {
                return Err(format!("{who} cleans up while {} reads v{}", m.url, v - 1));
            }
        }
        if x != v || self.nodes[n].history.in_transition() {
            return Err(format!("{who} cleans up {x} during a transition"));
        }
        if self.nodes[n].stored < x {
            return Err(format!("{who} cleans up {x} before storing it"));
        }
        Ok(())
    }

    /// Applies node `n`'s actions, checking each against the truth.
    fn apply(&mut self, n: usize, actions: Vec<Action>) -> Result<(), String> {
        for action in actions {
            let who = self.nodes[n].url.clone();
            match action {
                Action::Raise(Tracker::Ack, x) => {
                    if !self.truly_acked(n) {
                        return Err(format!("{who} raised ack {x} with old writes in flight"));
                    }
                    self.nodes[n].history.raise(Tracker::Ack, &who, x);
                }
                Action::StartCopy(x) => {
                    // Every node the new version keeps (a removed one is fenced).
                    let kept = |m: &usize| self.next.is_member(&self.nodes[*m].url);
                    if !(0..self.nodes.len())
                        .filter(kept)
                        .all(|m| self.truly_acked(m))
                    {
                        return Err(format!("{who} copies before every node acked"));
                    }
                    self.nodes[n].progress.copy_running = Some(x);
                    self.nodes[n].copy_done_at = Some(self.now + 3 * STEP_MS);
                }
                Action::Raise(Tracker::Sync, x) => {
                    let node = &self.nodes[n];
                    let gains = match node.history.live() {
                        [old, new] => may_gain(old, new, &who),
                        _ => false,
                    };
                    if gains && node.progress.copied < x {
                        return Err(format!("{who} synced {x} before copying"));
                    }
                    self.nodes[n].history.raise(Tracker::Sync, &who, x);
                }
                Action::Raise(Tracker::SyncAck, x) => {
                    self.nodes[n].history.raise(Tracker::SyncAck, &who, x);
                }
                Action::Prune if self.plant == Some(Plant::Prune) => {
                    // The planted prune bypasses the history's own check.
                    let h = &self.nodes[n].history;
                    let current = h.current().clone();
                    let pruned = History::from_parts(vec![current], h.trackers().clone());
                    self.nodes[n].history = pruned.ok_or("from_parts")?;
                }
                Action::Prune => {
                    // The history decides (it may wait for more nodes than
                    // the rules count: then a later tick prunes).
                    self.nodes[n].history.prune();
                }
                Action::Promote(x) => self.nodes[n].stored = x,
                Action::Cleanup(x) => {
                    self.check_cleanup(n, x)?;
                    self.nodes[n].progress.cleaned = x;
                }
            }
        }
        Ok(())
    }

    /// One step: commits learned, placements switched, copies ended,
    /// gossip, then every node's actions.
    fn step(&mut self, rng: &mut Rng) -> Result<(), String> {
        self.now += STEP_MS;
        for n in 0..self.nodes.len() {
            let node = &mut self.nodes[n];
            if !node.learned && rng.below(4) == 0 {
                node.learned = node.history.begin(self.next.clone()).is_ok();
            }
            if node.learned && node.switched_at.is_none() && rng.below(3) == 0 {
                node.switched_at = Some(self.now);
            }
            // The driver sees every thread's placement at its next tick.
            if let Some(s) = node.switched_at
                && node.progress.placement.is_none()
                && self.now > s
            {
                node.progress.placement = Some((self.next.version, self.now));
            }
            let v = self.next.version;
            if node.learned
                && !node.history.in_transition()
                && node.stored == v
                && node.progress.stored_since.is_none()
            {
                node.progress.stored_since = Some((v, self.now));
            }
            if node.copy_done_at.is_some_and(|t| self.now >= t) {
                node.copy_done_at = None;
                node.progress.copy_running = None;
                node.progress.copied = self.next.version;
            }
        }
        for _ in 0..2 {
            let a = rng.below(self.nodes.len() as u64) as usize;
            let b = rng.below(self.nodes.len() as u64) as usize;
            if self.nodes[a].learned && self.nodes[b].learned {
                let t = self.nodes[a].history.trackers().clone();
                let live = self.nodes[a].history.live().to_vec();
                self.nodes[b].history.merge(&t);
                if let Some(pruned) =
                    adopt_peer_prune(&self.nodes[b].history, &self.nodes[a].url, &live)
                {
                    self.nodes[b].history = pruned;
                }
            }
        }
        for n in 0..self.nodes.len() {
            if self.nodes[n].learned {
                let actions = self.actions(n);
                self.apply(n, actions)?;
            }
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.nodes.iter().all(|n| {
            n.history.is_settled()
                && n.stored == self.next.version
                && n.progress.cleaned == self.next.version
        })
    }

    fn run(mut self, seed: u64) -> Result<u64, String> {
        let mut rng = Rng::new(seed);
        while !self.done() {
            if self.now / STEP_MS > STEPS_MAX {
                let views: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| {
                        format!(
                            "{} {:?} stored {} {:?}",
                            n.url, n.history, n.stored, n.progress
                        )
                    })
                    .collect();
                return Err(format!("seed {seed}: not settled: {views:#?}"));
            }
            self.step(&mut rng)?;
        }
        Ok(self.now)
    }
}

fn scenarios() -> Vec<(Layout, Layout)> {
    vec![
        (layout(1, &[1, 2, 3], 3), layout(2, &[1, 2, 3, 4], 3)),
        (layout(1, &[1, 2, 3, 4], 3), layout(2, &[1, 2, 3], 3)),
        (layout(1, &[1, 2, 3], 2), layout(2, &[1, 3, 4], 2)),
        (
            layout(1, &[1, 2, 3, 4, 5], 3),
            layout(2, &[1, 2, 3, 4, 5], 3),
        ),
    ]
}

/// Grow, shrink and replace settle under random delays and gossip, with
/// every action checked against the truth.
#[test]
fn model_settles_without_violations() {
    for (old, new) in scenarios() {
        if old.nodes == new.nodes {
            continue;
        }
        for seed in 0..40 {
            let model = Model::new(old.clone(), new.clone(), None);
            model.run(seed).unwrap();
        }
    }
}

/// Each planted mistake is caught on some seed of some scenario.
#[test]
fn planted_mistakes_are_caught() {
    for plant in [Plant::Ack, Plant::Sync, Plant::Prune, Plant::Cleanup] {
        let caught = scenarios().into_iter().any(|(old, new)| {
            (0..40).any(|seed| {
                Model::new(old.clone(), new.clone(), Some(plant))
                    .run(seed)
                    .is_err()
            })
        });
        assert!(caught, "{plant:?} not caught");
    }
}

/// `may_gain`: only-added nodes with R kept gain nothing on the old
/// members; the added ones, a shrink's survivors and a grown R may.
#[test]
fn who_may_gain() {
    let old = layout(1, &[1, 2, 3], 3);
    let grown = layout(2, &[1, 2, 3, 4], 3);
    assert!(!may_gain(&old, &grown, &url(1)));
    assert!(may_gain(&old, &grown, &url(4)));
    let shrunk = layout(2, &[1, 2], 2);
    assert!(may_gain(&old, &shrunk, &url(1)));
    assert!(!may_gain(&old, &shrunk, &url(3)));
    let old2 = layout(1, &[1, 2, 3], 2);
    assert!(may_gain(&old2, &layout(2, &[1, 2, 3], 3), &url(1)));
}

/// A single decision walk on one node: the timeout gates ack; copy, sync,
/// sync_ack, prune, promote and cleanup follow in order.
#[test]
fn decision_walk() {
    let old = layout(1, &[1, 2], 2);
    let new = layout(2, &[1, 2, 3], 3);
    let me = url(3);
    let mut h = History::settled(old);
    h.begin(new).unwrap();
    let mut p = Progress {
        placement: Some((2, 1_000)),
        cleaned: 1,
        ..Progress::default()
    };
    let ask = |h: &History, p: &Progress, stored: u64, now: u64| {
        decide(Inputs {
            self_url: &me,
            history: h,
            stored_version: stored,
            progress: p,
            now_ms: now,
            replication_timeout_ms: TIMEOUT_MS,
            cleanup_wait_ms: cleanup_wait_ms(TIMEOUT_MS),
        })
    };
    let wait = TIMEOUT_MS + ACK_MARGIN_MS;
    assert!(ask(&h, &p, 1, 1_000 + wait).is_empty());
    assert_eq!(
        ask(&h, &p, 1, 1_001 + wait),
        vec![Action::Raise(Tracker::Ack, 2)]
    );
    for n in [1, 2, 3] {
        h.raise(Tracker::Ack, &url(n), 2);
    }
    assert_eq!(ask(&h, &p, 1, 3_000), vec![Action::StartCopy(2)]);
    p.copy_running = Some(2);
    assert!(ask(&h, &p, 1, 2_000).is_empty());
    p.copy_running = None;
    p.copied = 2;
    assert_eq!(ask(&h, &p, 1, 2_000), vec![Action::Raise(Tracker::Sync, 2)]);
    for n in [1, 2, 3] {
        h.raise(Tracker::Sync, &url(n), 2);
    }
    assert_eq!(
        ask(&h, &p, 1, 2_000),
        vec![Action::Raise(Tracker::SyncAck, 2)]
    );
    for n in [1, 2, 3] {
        h.raise(Tracker::SyncAck, &url(n), 2);
    }
    assert_eq!(ask(&h, &p, 1, 2_000), vec![Action::Prune]);
    assert!(h.prune());
    assert_eq!(ask(&h, &p, 1, 2_000), vec![Action::Promote(2)]);
    // Stored and alone from 2_000: the cleanup waits for the peers.
    p.stored_since = Some((2, 2_000));
    let cleanup_wait = TIMEOUT_MS + ACK_MARGIN_MS + CLEANUP_MARGIN_MS;
    assert!(ask(&h, &p, 2, 1_999 + cleanup_wait).is_empty());
    assert_eq!(
        ask(&h, &p, 2, 2_000 + cleanup_wait),
        vec![Action::Cleanup(2)]
    );
    p.cleaned = 2;
    assert!(ask(&h, &p, 2, 9_000).is_empty());
}

/// Cleanup and copy never overlap: no copy starts while a cleanup runs
/// (a node that lost a key in `v` and gains it back in `v+1` would find
/// it present, skip it, and then lose it), and no cleanup starts while a
/// copy runs; a removed node cleans up too (it keeps nothing).
#[test]
fn cleanup_and_copy_never_overlap() {
    let me = url(3);
    let ask = |h: &History, p: &Progress, stored: u64| {
        decide(Inputs {
            self_url: &me,
            history: h,
            stored_version: stored,
            progress: p,
            now_ms: 10_000,
            replication_timeout_ms: TIMEOUT_MS,
            cleanup_wait_ms: cleanup_wait_ms(TIMEOUT_MS),
        })
    };
    let since = |v: u64| Some((v, 0));
    // Settled on v2 ([1,2,3] R=1 after 3 lost keys), v3 gains them back.
    let mut h = History::settled(layout(2, &[1, 2, 3], 1));
    let mut p = Progress {
        cleaned: 1,
        placement: Some((2, 0)),
        stored_since: since(2),
        ..Progress::default()
    };
    assert_eq!(ask(&h, &p, 2), vec![Action::Cleanup(2)]);
    p.cleanup_running = Some(2);
    assert!(ask(&h, &p, 2).is_empty(), "one cleanup at a time");
    h.begin(layout(3, &[1, 2, 3], 2)).unwrap();
    p.placement = Some((3, 0));
    for n in [1, 2, 3] {
        h.raise(Tracker::Ack, &url(n), 3);
    }
    assert!(h.copy_may_start());
    assert!(
        !ask(&h, &p, 2).contains(&Action::StartCopy(3)),
        "a copy starts while a cleanup runs"
    );
    p.cleanup_running = None;
    assert_eq!(ask(&h, &p, 2), vec![Action::StartCopy(3)]);
    // A copy runs: no cleanup starts (once settled on v3, stored).
    p.copy_running = Some(3);
    let mut settled = History::settled(layout(3, &[1, 2, 3], 2));
    assert!(ask(&settled, &p, 3).is_empty());
    p.copy_running = None;
    assert!(ask(&settled, &p, 3).is_empty(), "v3 not seen stored yet");
    p.stored_since = since(3);
    assert_eq!(ask(&settled, &p, 3), vec![Action::Cleanup(3)]);
    // A removed node cleans up too, after storing the layout.
    settled = History::settled(layout(4, &[1, 2], 2));
    assert_eq!(ask(&settled, &p, 3), vec![Action::Promote(4)]);
    p.stored_since = since(4);
    assert_eq!(ask(&settled, &p, 4), vec![Action::Cleanup(4)]);
}

/// `keeps` is a replica in any live layout, and agrees with the
/// history's `may_delete` once settled.
#[test]
fn keeps_is_any_live_replica() {
    let old = layout(1, &[1, 2, 3], 1);
    let new = layout(2, &[1, 2, 3, 4], 1);
    let mut h = History::settled(old.clone());
    h.begin(new.clone()).unwrap();
    for k in 0..200 {
        let key = format!("k{k}");
        let key = key.as_bytes();
        for n in [1, 2, 3, 4] {
            let me = url(n);
            let want = old.replicas(key).contains(&me.as_str())
                || new.replicas(key).contains(&me.as_str());
            assert_eq!(keeps(h.live(), &me, key), want);
        }
    }
    let settled = History::settled(new.clone());
    for k in 0..200 {
        let key = format!("k{k}");
        for n in [1, 2, 3, 4, 5] {
            let me = url(n);
            assert_eq!(
                keeps(settled.live(), &me, key.as_bytes()),
                !settled.may_delete(&me, key.as_bytes())
            );
        }
    }
}
