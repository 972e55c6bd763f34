use super::*;
use crate::cluster::acceptor_node::AcceptorNode;
use crate::cluster::layout::Change;
use crate::cluster::membership::Membership;
use std::collections::{BTreeMap, BTreeSet};

pub(crate) fn url(p: u16) -> String {
    format!("http://127.0.0.1:{p}")
}

/// Three nodes, each an `AcceptorNode` in its own directory, reached
/// through the wire bytes; the `down` ones never answer.
pub(crate) struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    pub(crate) nodes: BTreeMap<String, Membership>,
    pub(crate) down: BTreeSet<String>,
}

pub(crate) fn v1() -> Layout {
    Layout::new(1, vec![url(1), url(2), url(3)], 3).unwrap()
}

impl Cluster {
    pub(crate) fn new() -> Cluster {
        let mut dirs = Vec::new();
        let mut nodes = BTreeMap::new();
        for u in v1().nodes {
            let dir = tempfile::tempdir().unwrap();
            let node = AcceptorNode::open(dir.path(), v1()).unwrap();
            nodes.insert(u.clone(), Membership::new(u, node));
            dirs.push(dir);
        }
        Cluster {
            _dirs: dirs,
            nodes,
            down: BTreeSet::new(),
        }
    }

    fn dir(&self, i: usize) -> &std::path::Path {
        self._dirs[i].path()
    }
}

impl Voters for Cluster {
    fn call(&self, url: &str, request: &Request) -> Option<Reply> {
        if self.down.contains(url) {
            return None;
        }
        let node = self.nodes.get(url)?;
        let request = Request::decode(&request.encode()).unwrap();
        let reply = crate::cluster::learn::serve(node, request).ok()?;
        Some(Reply::decode(&reply.encode()).unwrap())
    }
}

pub(crate) fn grown(p: u16) -> Layout {
    v1().apply(&Change {
        add: vec![url(p)],
        ..Change::default()
    })
    .unwrap()
}

pub(crate) const BACKOFF: Duration = Duration::from_millis(1);

/// One proposal on a healthy cluster is chosen and learned by every voter.
#[test]
fn chosen_and_learned() {
    let c = Cluster::new();
    let out = propose(&c, 1, &grown(4), &v1().nodes, BACKOFF);
    assert_eq!(
        out,
        Outcome::Chosen {
            value: grown(4),
            own: true
        }
    );
    for node in c.nodes.values() {
        node.read(|s| {
            assert_eq!(s.acceptor.next(), Some(&grown(4)));
            assert_eq!(s.acceptor.current(), &v1(), "LAYOUT is promoted later");
            assert_eq!(s.history.live(), &[v1(), grown(4)]);
        });
    }
}

/// Two concurrent proposals for version 2 with different changes: exactly
/// one is chosen as its own; the other learns the winner (409); every voter
/// holds the winner.
#[test]
fn two_concurrent_proposals_one_wins() {
    for run in 0..20 {
        let c = Cluster::new();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| propose(&c, 11, &grown(4), &v1().nodes, BACKOFF));
            let b = s.spawn(|| propose(&c, 22, &grown(5), &v1().nodes, BACKOFF));
            (a.join().unwrap(), b.join().unwrap())
        });
        let wins: Vec<&Layout> = [&a, &b]
            .into_iter()
            .filter_map(|o| match o {
                Outcome::Chosen { value, own: true } => Some(value),
                _ => None,
            })
            .collect();
        assert_eq!(wins.len(), 1, "run {run}: {a:?} / {b:?}");
        for o in [&a, &b] {
            assert!(matches!(o, Outcome::Chosen { .. }), "run {run}: {o:?}");
        }
        for node in c.nodes.values() {
            assert_eq!(
                node.read(|s| s.acceptor.next().cloned()).as_ref(),
                Some(wins[0]),
                "run {run}"
            );
        }
    }
}

/// A proposal for a version already decided learns the value chosen for
/// it: another one (409), or its own when it repeats it (200).
#[test]
fn decided_slot_names_its_value() {
    let c = Cluster::new();
    assert!(matches!(
        propose(&c, 1, &grown(4), &v1().nodes, BACKOFF),
        Outcome::Chosen { own: true, .. }
    ));
    assert_eq!(
        propose(&c, 2, &grown(5), &v1().nodes, BACKOFF),
        Outcome::Chosen {
            value: grown(4),
            own: false
        }
    );
    assert_eq!(
        propose(&c, 2, &grown(4), &v1().nodes, BACKOFF),
        Outcome::Chosen {
            value: grown(4),
            own: true
        }
    );
}

/// With two of three voters down nothing is chosen (503), and nothing is
/// learned; with one down the proposal is chosen.
#[test]
fn majority_needed() {
    let mut c = Cluster::new();
    c.down = [url(1), url(2)].into_iter().collect();
    assert_eq!(
        propose(&c, 1, &grown(4), &v1().nodes, BACKOFF),
        Outcome::NoMajority
    );
    assert_eq!(c.nodes[&url(3)].read(|s| s.acceptor.next().cloned()), None);
    c.down = [url(1)].into_iter().collect();
    assert!(matches!(
        propose(&c, 1, &grown(4), &v1().nodes, BACKOFF),
        Outcome::Chosen { own: true, .. }
    ));
}

/// A reopened node keeps its promise and its chosen next layout: a
/// prepare under a lower ballot is refused, and a prepare of the decided
/// slot answers `Decided`.
#[test]
fn durable_across_reopen() {
    let c = Cluster::new();
    let high = Ballot { round: 9, node: 1 };
    c.call(
        &url(1),
        &Request::Prepare {
            slot: 2,
            ballot: high,
        },
    )
    .unwrap();
    let mut again = AcceptorNode::open(c.dir(0), v1()).unwrap();
    let low = Ballot { round: 3, node: 1 };
    assert_eq!(
        again
            .handle(Request::Prepare {
                slot: 2,
                ballot: low
            })
            .unwrap(),
        Reply::Acceptor(AcceptorReply::Reject { promised: high })
    );
    drop(again);
    assert!(matches!(
        propose(&c, 1, &grown(4), &v1().nodes, BACKOFF),
        Outcome::Chosen { own: true, .. }
    ));
    for i in 0..3 {
        let mut node = AcceptorNode::open(c.dir(i), v1()).unwrap();
        assert_eq!(node.next(), Some(&grown(4)));
        assert_eq!(node.committed().version, 2);
        assert_eq!(
            node.handle(Request::Prepare {
                slot: 2,
                ballot: high
            })
            .unwrap(),
            Reply::Chosen { value: grown(4) }
        );
    }
}
