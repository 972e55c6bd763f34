use super::*;
use ataman_testkit::rng::Rng;
use std::collections::BTreeMap;

fn url(p: u16) -> String {
    format!("http://127.0.0.1:{p}")
}

fn layout(version: u64, ports: &[u16], r: usize) -> Layout {
    Layout::new(version, ports.iter().map(|&p| url(p)).collect(), r).unwrap()
}

/// A grow from 3 to 4 nodes walks every rule in order: write both, read
/// old until every node synced, copy only after every node acked, drop the
/// old version after every node saw the sync, and delete only then.
#[test]
fn transition_walk() {
    let mut h = History::settled(layout(1, &[1, 2, 3], 3));
    assert!(h.is_settled() && !h.copy_may_start());
    assert_eq!(h.begin(layout(1, &[1, 2, 3], 3)), Ok(false));
    assert_eq!(
        h.begin(layout(3, &[1, 2, 3, 4], 3)),
        Err(TransitionError::NotNext { current: 1, got: 3 })
    );
    assert_eq!(h.begin(layout(2, &[1, 2, 3, 4], 3)), Ok(true));
    assert_eq!(
        h.begin(layout(3, &[1, 2, 3], 3)),
        Err(TransitionError::Underway { to: 2 })
    );
    let all: Vec<String> = [1, 2, 3, 4].iter().map(|&p| url(p)).collect();
    // Write sets: one per live version.
    let key = (0..100u32)
        .map(|k| k.to_string())
        .find(|k| {
            h.current()
                .replicas(k.as_bytes())
                .contains(&url(4).as_str())
        })
        .unwrap();
    let key = key.as_bytes();
    let sets = h.write_sets(key);
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[0], h.live()[0].replicas(key));
    assert!(sets[1].contains(&url(4).as_str()));
    assert!(h.gains(&url(4), key));
    let sources = h.sources(key);
    let giver = sources[0].to_owned();
    let giver = giver.as_str();
    assert!(!sets[1].contains(&giver), "the giver is first");
    assert_eq!(sources.len(), 3);
    // Copying waits for every node's ack.
    for n in &all[..3] {
        assert!(!h.copy_may_start());
        h.raise(Tracker::Ack, n, 2);
    }
    assert!(!h.copy_may_start());
    h.raise(Tracker::Ack, &all[3], 2);
    assert!(h.copy_may_start());
    // Reads stay old until every node synced.
    for n in &all {
        assert_eq!(h.read_layout().version, 1);
        assert!(!h.prune());
        h.raise(Tracker::Sync, n, 2);
    }
    assert_eq!(h.read_layout().version, 2);
    // Nothing may be deleted while two versions are live.
    assert!(!h.may_delete(giver, key));
    for n in &all {
        assert!(!h.prune(), "pruned before {n} saw the sync");
        assert!(h.observe_synced(n));
    }
    assert!(h.prune());
    assert!(h.is_settled());
    assert_eq!(h.live().len(), 1);
    assert!(h.may_delete(giver, key));
    assert!(!h.may_delete(&url(4), key));
    assert!(h.sources(key).is_empty());
}

/// A shrink: the removed node stays a node of the transition until the
/// prune, then is removed and its trackers are forgotten.
#[test]
fn shrink_removes() {
    let mut h = History::settled(layout(1, &[1, 2, 3, 4], 3));
    h.begin(layout(2, &[1, 2, 3], 3)).unwrap();
    assert!(!h.removed(&url(4)));
    assert_eq!(h.all_nodes().len(), 4);
    for which in [Tracker::Ack, Tracker::Sync] {
        for p in 1..=4 {
            h.raise(which, &url(p), 2);
        }
    }
    for p in 1..=4 {
        h.observe_synced(&url(p));
    }
    assert!(h.prune());
    assert!(h.removed(&url(4)));
    assert_eq!(h.trackers().get(Tracker::Ack, &url(4)), 0);
    // A stranger's tracker is ignored.
    assert!(!h.raise(Tracker::Ack, &url(9), 2));
}

/// Trackers merge by maximum, never go down, and are capped at the newest
/// version.
#[test]
fn trackers_merge_monotone() {
    let mut h = History::settled(layout(1, &[1, 2, 3], 3));
    h.begin(layout(2, &[1, 2, 3, 4], 3)).unwrap();
    let mut other = Trackers::default();
    other.raise(Tracker::Ack, &url(4), 2);
    other.raise(Tracker::Sync, &url(1), 7);
    other.raise(Tracker::Ack, &url(1), 0);
    assert!(h.merge(&other));
    assert!(!h.merge(&other), "merging twice grows nothing");
    assert_eq!(h.trackers().get(Tracker::Ack, &url(4)), 2);
    assert_eq!(h.trackers().get(Tracker::Sync, &url(1)), 2, "capped");
    assert_eq!(h.trackers().get(Tracker::Ack, &url(1)), 1, "never down");
    let mut t = Trackers::default();
    assert!(t.raise(Tracker::Sync, "a", 3));
    assert!(!t.raise(Tracker::Sync, "a", 2));
    assert_eq!(t.get(Tracker::Sync, "a"), 3);
}

/// Mistakes a model run can plant, each one rule of the module broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plant {
    None,
    ReadsEarly,
    WritesSkipNew,
    CleanupEarly,
    CopyEarly,
    OneSource,
    /// Replicas accept writes from a coordinator on an older version.
    NoFence,
}

const ACK: usize = 2;

/// A model run: 4 nodes' stores (key -> newest timestamp), writes reaching
/// exactly `ACK` replicas of each set they are sent to, a transition from
/// `old` to `new` mid-run, copying, gossip, prune and cleanup at random
/// moments. Returns the first stale read found.
fn model(seed: u64, old: &Layout, new: &Layout, plant: Plant) -> Option<String> {
    model_with(seed, old, new, plant, false)
}

/// [`model`]; with `isolate`, the node the new layout removes (if any) is
/// cut off from the transition: it never learns the new version (raises
/// no tracker, serves no copy) and keeps coordinating writes on the old
/// layout, which replicas that know the new version refuse (the fence).
fn model_with(
    seed: u64,
    old: &Layout,
    new: &Layout,
    plant: Plant,
    isolate: bool,
) -> Option<String> {
    let isolated: Option<String> = old
        .nodes
        .iter()
        .find(|n| isolate && !new.is_member(n))
        .cloned();
    let mut rng = Rng::new(seed);
    let nodes: Vec<String> = [1, 2, 3, 4, 5].iter().map(|&p| url(p)).collect();
    let mut stores: BTreeMap<&str, BTreeMap<u32, u64>> = nodes
        .iter()
        .map(|n| (n.as_str(), BTreeMap::new()))
        .collect();
    let mut acked: BTreeMap<u32, u64> = BTreeMap::new();
    let mut h = History::settled(old.clone());
    let mut copied: BTreeMap<String, bool> = BTreeMap::new();
    let mut ts = 0u64;
    let keys = 24u32;
    for step in 0..600 {
        if step == 100 {
            h.begin(new.clone()).unwrap();
        }
        let roll = rng.below(100);
        if roll < 40 {
            // A write through a random coordinator of the current layout.
            let key = rng.below(u64::from(keys)) as u32;
            let kb = key.to_string();
            let mut pool = h.current().nodes.clone();
            pool.extend(isolated.iter().cloned());
            let coordinator = rng.pick(&pool).unwrap().clone();
            let knows = |h: &History, n: &str| h.trackers().get(Tracker::Ack, n) >= new.version;
            let knows_new = Some(&coordinator) != isolated.as_ref() && knows(&h, &coordinator);
            ts += 1;
            let mut sets = if Some(&coordinator) == isolated.as_ref() {
                vec![old.replicas(kb.as_bytes())]
            } else {
                h.write_sets(kb.as_bytes())
            };
            if !knows_new || plant == Plant::WritesSkipNew {
                sets.truncate(1);
            }
            // The fence: a replica that knows the new version refuses a
            // coordinator that does not (a node never refuses itself).
            let refuses =
                |n: &str| plant != Plant::NoFence && !knows_new && n != coordinator && knows(&h, n);
            let mut reached: Vec<&str> = Vec::new();
            let mut acknowledged = true;
            for set in sets {
                let mut have = set.iter().filter(|n| reached.contains(n)).count();
                let mut order: Vec<&str> = set.iter().copied().filter(|n| !refuses(n)).collect();
                while have < ACK && !order.is_empty() {
                    let n = order.swap_remove(rng.index(order.len()));
                    if !reached.contains(&n) {
                        reached.push(n);
                        have += 1;
                    }
                }
                acknowledged &= have >= ACK;
            }
            for n in reached {
                stores.get_mut(n).unwrap().insert(key, ts);
            }
            if !acknowledged {
                continue;
            }
            acked.insert(key, ts);
        } else if roll < 70 {
            // A quorum read: any ACK replicas of the read set.
            let key = rng.below(u64::from(keys)) as u32;
            let kb = key.to_string();
            let layout = if plant == Plant::ReadsEarly {
                h.current()
            } else {
                h.read_layout()
            };
            let mut set = layout.replicas(kb.as_bytes());
            let mut newest = 0;
            for _ in 0..ACK {
                let n = set.swap_remove(rng.index(set.len()));
                newest = newest.max(stores[n].get(&key).copied().unwrap_or(0));
            }
            let want = acked.get(&key).copied().unwrap_or(0);
            if newest < want {
                return Some(format!(
                    "seed {seed} step {step}: key {key} read ts {newest}, acknowledged {want}"
                ));
            }
        } else if roll < 80 {
            // A node learns the new version: it acks it.
            let n = rng.pick(&nodes).unwrap().clone();
            if Some(&n) != isolated.as_ref() {
                h.raise(Tracker::Ack, &n, h.current().version);
            }
        } else if roll < 88 {
            // A node copies what it gains, then says it is synced.
            let n = rng.pick(&nodes).unwrap().clone();
            if Some(&n) == isolated.as_ref() {
                continue;
            }
            let may = h.copy_may_start() || (plant == Plant::CopyEarly && h.in_transition());
            if may && !copied.get(&n).copied().unwrap_or(false) {
                for key in 0..keys {
                    let kb = key.to_string();
                    if !h.gains(&n, kb.as_bytes()) {
                        continue;
                    }
                    let mut sources = h.sources(kb.as_bytes());
                    sources.retain(|s| Some(*s) != isolated.as_deref());
                    if plant == Plant::OneSource {
                        sources.truncate(1);
                    }
                    let best = sources
                        .iter()
                        .filter_map(|s| stores[s].get(&key).copied())
                        .max();
                    if let Some(best) = best {
                        let mine = stores.get_mut(n.as_str()).unwrap().entry(key).or_insert(0);
                        *mine = (*mine).max(best);
                    }
                }
                copied.insert(n.clone(), true);
                h.raise(Tracker::Sync, &n, h.current().version);
            }
        } else if roll < 95 {
            let n = rng.pick(&nodes).unwrap().clone();
            if Some(&n) == isolated.as_ref() {
                continue;
            }
            h.observe_synced(&n);
            h.prune();
        } else {
            // Cleanup on a random node.
            let n = rng.pick(&nodes).unwrap().clone();
            let store = stores.get_mut(n.as_str()).unwrap();
            store.retain(|key, _| {
                let kb = key.to_string();
                let delete = if plant == Plant::CleanupEarly {
                    !h.current().replicas(kb.as_bytes()).contains(&n.as_str())
                } else {
                    h.may_delete(&n, kb.as_bytes())
                };
                !delete
            });
        }
    }
    None
}

fn transitions() -> Vec<(Layout, Layout)> {
    vec![
        (layout(1, &[1, 2, 3], 3), layout(2, &[1, 2, 3, 4], 3)),
        (layout(1, &[1, 2, 3, 4], 3), layout(2, &[1, 2, 3], 3)),
        (layout(1, &[1, 2, 3], 3), layout(2, &[1, 2, 4], 3)),
        (layout(1, &[1, 2, 3, 4], 3), layout(2, &[1, 2, 5], 3)),
    ]
}

/// With the rules as written, no read misses an acknowledged write over
/// many seeds of grow, shrink and replace.
#[test]
fn model_runs_read_every_acknowledged_write() {
    for (old, new) in transitions() {
        for seed in 0..300 {
            assert_eq!(model(seed, &old, &new, Plant::None), None);
        }
    }
}

/// A removed node cut off from the transition (dead, or partitioned and
/// still coordinating on the old layout) loses no acknowledged write: the
/// fence keeps its late writes from being acknowledged (with the fence
/// planted away, a late write is lost). The prune waits for its
/// `sync_ack` (a leaving node serves reads until it drops the old
/// version) unless it is declared dead, and then settles without it.
#[test]
fn isolated_removed_node_neither_stalls_nor_loses_writes() {
    let replace = (layout(1, &[1, 2, 3], 3), layout(2, &[1, 2, 4], 3));
    let shrink = (layout(1, &[1, 2, 3, 4], 3), layout(2, &[1, 2, 3], 3));
    for (old, new) in [&replace, &shrink] {
        for seed in 0..300 {
            assert_eq!(model_with(seed, old, new, Plant::None, true), None);
        }
        // It settles without the isolated node's trackers.
        let mut h = History::settled(old.clone());
        h.begin(new.clone()).unwrap();
        for which in [Tracker::Ack, Tracker::Sync] {
            for n in &new.nodes {
                h.raise(which, n, 2);
            }
        }
        for n in &new.nodes {
            h.observe_synced(n);
        }
        assert!(
            !h.clone().prune(),
            "the removed node's sync_ack is waited for"
        );
        let gone: Vec<String> = old
            .nodes
            .iter()
            .filter(|n| !new.is_member(n))
            .cloned()
            .collect();
        let mut dead = h.clone();
        dead.declare_dead_all(&gone, 2).unwrap();
        assert!(
            dead.prune(),
            "a removed node declared dead is not waited for"
        );
        for n in &gone {
            h.raise(Tracker::Sync, n, 2);
            h.observe_synced(n);
        }
        assert!(h.prune(), "the removed node saw every node synced");
    }
    let caught = [&replace, &shrink]
        .iter()
        .flat_map(|(old, new)| (0..300).map(move |seed| (seed, old, new)))
        .filter(|(seed, old, new)| model_with(*seed, old, new, Plant::NoFence, true).is_some())
        .count();
    assert!(caught > 0, "a missing fence was never caught");
}

/// Negative controls: each rule broken on purpose is caught on some seed.
#[test]
fn model_catches_each_broken_rule() {
    for plant in [
        Plant::ReadsEarly,
        Plant::WritesSkipNew,
        Plant::CleanupEarly,
        Plant::CopyEarly,
        Plant::OneSource,
    ] {
        let caught = transitions()
            .iter()
            .flat_map(|(old, new)| (0..300).map(move |seed| (seed, old, new)))
            .filter(|(seed, old, new)| model(*seed, old, new, plant).is_some())
            .count();
        assert!(caught > 0, "{plant:?} was never caught");
    }
}

/// A node the transition removes can be declared dead for that
/// transition only: not when settled, not for another version, not a
/// member; the declaration merges by maximum (gossip), only for a node
/// the receiver's transition removes, and is forgotten with the prune.
#[test]
fn dead_declarations() {
    let v1 = layout(1, &[1, 2, 3, 4], 2);
    let mut h = History::settled(v1);
    assert_eq!(
        h.declare_dead(&url(4), 1),
        Err(DeadError::NotInTransition { current: 1 })
    );
    h.begin(layout(2, &[1, 2, 3], 2)).unwrap();
    assert_eq!(
        h.declare_dead(&url(4), 3),
        Err(DeadError::OtherVersion {
            underway: 2,
            asked: 3
        })
    );
    for stays in [url(1), url(9)] {
        assert_eq!(h.declare_dead(&stays, 2), Err(DeadError::NotLeaving(stays)));
    }
    assert!(!h.declared_dead(&url(4)));
    let before = h.clone();
    assert_eq!(h.declare_dead(&url(4), 2), Ok(true));
    assert_eq!(h.declare_dead(&url(4), 2), Ok(false));
    assert!(h.declared_dead(&url(4)) && !h.declared_dead(&url(3)));
    assert_eq!(h.dead_nodes(), vec![url(4)]);

    // Gossip: the declaration reaches a peer's history; a declaration of
    // a member, or past the newest version, is not taken as one.
    let mut peer = before;
    assert!(peer.merge(h.trackers()));
    assert!(peer.declared_dead(&url(4)));
    assert!(!peer.merge(h.trackers()), "merged twice");
    let mut bogus = Trackers::default();
    bogus.dead.insert(url(1), 2);
    bogus.dead.insert(url(4), 99);
    let mut fresh = History::settled(layout(1, &[1, 2, 3, 4], 2));
    fresh.begin(layout(2, &[1, 2, 3], 2)).unwrap();
    fresh.merge(&bogus);
    assert!(!fresh.declared_dead(&url(1)));
    assert_eq!(fresh.trackers().dead.get(&url(4)), Some(&2));

    // The prune forgets the removed node and its declaration.
    for n in [1, 2, 3] {
        for which in [Tracker::Ack, Tracker::Sync, Tracker::SyncAck] {
            h.raise(which, &url(n), 2);
        }
    }
    assert!(h.prune());
    assert!(h.trackers().dead.is_empty() && h.dead_nodes().is_empty());
}
