use super::*;
use crate::cluster::acceptor_node::AcceptorNode;
use crate::cluster::history::Tracker;
use crate::cluster::layout::Change;

fn url(p: u16) -> String {
    format!("http://127.0.0.1:{p}")
}

fn urls(ports: &[u16]) -> Vec<String> {
    ports.iter().map(|&p| url(p)).collect()
}

/// A membership at `v1` for node `url(me)`, in `dir`.
fn membership(dir: &std::path::Path, v1: &Layout, me: u16) -> Arc<Membership> {
    let acceptor = AcceptorNode::open(dir, v1.clone()).unwrap();
    Arc::new(Membership::new(url(me), acceptor))
}

/// Commits `next` as the membership's next layout (what the agreement
/// does once a version is chosen).
fn commit(m: &Membership, next: &Layout) {
    m.update(|s| {
        s.acceptor.learn(next.clone()).unwrap();
        let began = s.history.begin(next.clone()).unwrap();
        (began, ())
    });
}

/// A fixed placement (a node without a membership) places keys exactly
/// as the `--cluster` list always did: the same replicas for every `from`,
/// one set, this node's index its list index.
#[test]
fn fixed_placement_is_the_cluster_list() {
    let nodes = urls(&[5, 3, 9]);
    let topology = Topology::new(nodes.clone(), 1);
    let p = Placement::fixed(&nodes, 1, &[], 3, 1);
    assert_eq!(p.self_index(), 1);
    assert_eq!(p.urls(), nodes.as_slice());
    assert_eq!(p.read_members(), &[0, 1, 2]);
    for k in 0..300u32 {
        let key = k.to_string();
        for from in 1..=3 {
            let w = p.write(key.as_bytes(), from);
            assert_eq!(w.replicas, topology.replicas(key.as_bytes(), from));
            assert_eq!(w.sets.len(), 1);
            assert_eq!(p.read(key.as_bytes(), from), w);
        }
    }
    let view = p.read_view().unwrap();
    assert_eq!(view.nodes(), nodes.as_slice());
    assert_eq!((view.self_index(), view.replication_factor()), (1, 3));
}

/// 3 -> 4 nodes: once version 2 is committed, the next `get` rebuilds:
/// the table grows by the new node (old indices kept), writes target the
/// union of both versions' sets (each set exactly its layout's replicas),
/// reads stay on version 1 until every node synced version 2.
#[test]
fn grow_three_to_four_follows_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = Layout::new(1, urls(&[1, 2, 3]), 3).unwrap();
    let m = membership(dir.path(), &v1, 2);
    let live = LivePlacement::new(&urls(&[2, 1, 3]), 0, &[], 3, 1, Some(Arc::clone(&m)));
    let before = live.get();
    assert_eq!((before.self_index(), before.len()), (0, 3));
    assert!(Arc::ptr_eq(&before, &live.get()), "no change, no rebuild");

    let v2 = v1
        .apply(&Change {
            add: urls(&[4]),
            ..Change::default()
        })
        .unwrap();
    commit(&m, &v2);
    let p = live.get();
    assert!(!Arc::ptr_eq(&before, &p), "a new generation rebuilds");
    assert_eq!(p.len(), 4);
    assert_eq!(&p.urls()[..3], &urls(&[2, 1, 3])[..], "indices never move");
    assert_eq!(p.url(3), url(4));
    assert_eq!(p.versions(), &[1, 2]);
    assert_eq!(p.read_version(), 1);
    assert!(p.in_transition() && p.is_live_member(3));
    assert_eq!(p.read_members(), &[0, 1, 2]);
    let mut unions = 0;
    for k in 0..300u32 {
        let key = k.to_string();
        let w = p.write(key.as_bytes(), 3);
        assert_eq!(w.sets.len(), 2);
        for (set, layout) in w.sets.iter().zip([&v1, &v2]) {
            let got: Vec<&str> = set.iter().map(|&pos| p.url(w.replicas[pos])).collect();
            assert_eq!(got, layout.replicas(key.as_bytes()), "{key}");
        }
        unions += usize::from(w.replicas.len() == 4);
        let r = p.read(key.as_bytes(), 3);
        assert!(
            !r.replicas.contains(&3),
            "{key}: read the new node before sync"
        );
        assert_eq!(r.sets.len(), 1);
    }
    assert!(unions > 50, "{unions} of 300 keys moved to the new node");
    assert_eq!(p.read_view().unwrap().version(), 1);

    // Every node synced version 2: reads move to it (a read of a moved
    // key now asks the new node).
    m.update(|s| {
        let mut grew = false;
        for n in [1, 2, 3, 4] {
            grew |= s.history.raise(Tracker::Sync, &url(n), 2);
        }
        (grew, ())
    });
    let p = live.get();
    assert_eq!(p.read_version(), 2);
    assert_eq!(p.read_members(), &[0, 1, 2, 3]);
    assert!((0..300u32).any(|k| p.read(k.to_string().as_bytes(), 3).replicas.contains(&3)));
    let view = p.read_view().unwrap();
    assert_eq!((view.version(), view.len(), view.self_index()), (2, 4, 0));
}

/// A node that is a member of no live layout (here: joining, not yet
/// added) still has an index, no read view, and is never a replica.
#[test]
fn a_non_member_has_an_index_and_no_read_view() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = Layout::new(1, urls(&[1, 2, 3]), 2).unwrap();
    let m = membership(dir.path(), &v1, 7);
    let live = LivePlacement::new(&urls(&[1, 2, 3]), 0, &[], 2, 1, Some(m));
    let p = live.get();
    assert_eq!(p.url(p.self_index()), url(7));
    assert!(!p.is_live_member(p.self_index()));
    assert!(p.read_view().is_none());
    for k in 0..100u32 {
        let w = p.write(k.to_string().as_bytes(), 2);
        assert!(!w.replicas.contains(&p.self_index()));
    }
}

/// Regression (a joined node stamped with id 0): a joining node's
/// placement holds no node id, and once the layout adding it is committed,
/// the id that layout gave it, not a position in a list; the fixed
/// placement's ids are its list order.
#[test]
fn self_id_comes_from_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let v1 = Layout::bootstrap(&urls(&[3, 1, 2]), Some(2)).unwrap();
    let m = membership(dir.path(), &v1, 7);
    let live = LivePlacement::new(&urls(&[7]), 0, &[], 1, 1, Some(Arc::clone(&m)));
    assert_eq!(live.get().self_id(), None);
    let v2 = v1
        .apply(&Change {
            add: vec![url(7)],
            ..Change::default()
        })
        .unwrap();
    commit(&m, &v2);
    let p = live.get();
    assert_eq!(p.self_id(), Some(3));
    assert_eq!(p.self_id(), v2.id_of(&url(7)));
    // A bootstrap member's id is its place in the `--cluster` list.
    let dir = tempfile::tempdir().unwrap();
    let m = membership(dir.path(), &v1, 1);
    let live = LivePlacement::new(&urls(&[3, 1, 2]), 1, &[], 2, 1, Some(m));
    assert_eq!(live.get().self_id(), Some(1));
    assert_eq!(
        Placement::fixed(&urls(&[5, 3, 9]), 2, &[], 3, 1).self_id(),
        Some(2)
    );
}
