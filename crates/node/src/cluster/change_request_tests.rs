use super::*;
use crate::cluster::propose::tests::{BACKOFF, Cluster, grown, url, v1};

/// Nodes 4 and 5 wait to join (they may be added); 6 does not answer;
/// members answer `ok`, and so does `http://localhost:1` (member 1 under
/// another name).
impl Reach for Cluster {
    fn introduce(&self, url_: &str) -> Heard {
        let joining = [url(4), url(5)].iter().any(|u| u == url_);
        let member = [url(1), url(2), url(3)].iter().any(|u| u == url_);
        if self.down.contains(url_) || !(joining || member || url_ == "http://localhost:1") {
            return Heard::Nothing("connection refused".into());
        }
        let body = match joining {
            true => format!(
                "{{\"self\":\"{url_}\",\"joining\":true,\"members\":[\"{}\"]}}",
                url(1)
            ),
            false => "ok\n".to_owned(),
        };
        Heard::Status {
            code: 200,
            body: body.into_bytes(),
        }
    }
}

fn add(p: u16) -> Change {
    Change {
        add: vec![url(p)],
        ..Change::default()
    }
}

fn ask(c: &Cluster, id: u64, version: u64, change: &Change) -> ChangeAnswer {
    answer(&c.nodes[&url(1)], c, id, version, change, BACKOFF)
}

/// 200 with the new layout; the same plan again 200; another change for
/// that version, or the next one while it is pending, 409; the current
/// layout still the one served.
#[test]
fn chosen_then_conflicts() {
    let c = Cluster::new();
    assert_eq!(ask(&c, 1, 2, &add(4)), ChangeAnswer::Chosen(grown(4)));
    assert_eq!(ask(&c, 1, 2, &add(4)), ChangeAnswer::Chosen(grown(4)));
    for (version, change) in [(2, add(5)), (3, add(5)), (1, add(5))] {
        match ask(&c, 1, version, &change) {
            ChangeAnswer::Conflict(layout, _) => assert_eq!(layout, grown(4)),
            other => panic!("version {version}: {other:?}"),
        }
    }
    assert_eq!(
        c.nodes[&url(1)].read(|s| s.acceptor.current().clone()),
        v1()
    );
}

/// 400: an unknown URL to remove, a member added, an impossible `R`, an
/// added node that does not answer; nothing is proposed.
#[test]
fn invalid_requests() {
    let c = Cluster::new();
    let cases = [
        Change {
            remove: vec![url(9)],
            ..Change::default()
        },
        add(2),
        Change {
            replication_factor: Some(4),
            ..Change::default()
        },
        add(6),
    ];
    for change in cases {
        let got = ask(&c, 1, 2, &change);
        assert_eq!(got.status(), 400, "{change:?}: {got:?}");
    }
    for node in c.nodes.values() {
        assert_eq!(node.read(|s| s.acceptor.next().cloned()), None);
        assert!(!node.history().in_transition());
    }
}

/// 503 with two of three members down; the proposal is not chosen.
#[test]
fn no_majority_is_503() {
    let mut c = Cluster::new();
    c.down = [url(2), url(3)].into_iter().collect();
    assert_eq!(ask(&c, 1, 2, &add(4)).status(), 503);
    c.down.clear();
    assert_eq!(ask(&c, 1, 2, &add(4)), ChangeAnswer::Chosen(grown(4)));
}

/// Two concurrent requests for version 2 with different changes: exactly
/// one 200, the other 409.
#[test]
fn concurrent_requests_one_200() {
    for run in 0..20 {
        let c = Cluster::new();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| ask(&c, 11, 2, &add(4)));
            let b = s.spawn(|| answer(&c.nodes[&url(2)], &c, 22, 2, &add(5), BACKOFF));
            (a.join().unwrap(), b.join().unwrap())
        });
        let mut codes = [a.status(), b.status()];
        codes.sort();
        assert_eq!(codes, [200, 409], "run {run}: {a:?} / {b:?}");
    }
}

/// Parameters: repeated add and remove, one version and one `R`; anything
/// else or a malformed number is refused.
#[test]
fn parameters() {
    let (v, change) = parse([
        ("version", "3"),
        ("add", "http://a:1"),
        ("remove", "http://b:1"),
        ("add", "http://c:1"),
        ("replication_factor", "2"),
        ("dead", "http://b:1"),
    ])
    .unwrap();
    assert_eq!(v, 3);
    assert_eq!(change.dead, vec!["http://b:1"]);
    assert_eq!(change.add, vec!["http://a:1", "http://c:1"]);
    assert_eq!(change.remove, vec!["http://b:1"]);
    assert_eq!(change.replication_factor, Some(2));
    for bad in [
        vec![("add", "http://a:1")],
        vec![("version", "x")],
        vec![("version", "1"), ("version", "2")],
        vec![("version", "1"), ("replication_factor", "-1")],
        vec![("version", "1"), ("other", "1")],
    ] {
        assert!(parse(bad.clone()).is_err(), "{bad:?}");
    }
    let many: Vec<(&str, &str)> = std::iter::once(("version", "2"))
        .chain(std::iter::repeat_n(
            ("add", "http://a:1"),
            CHANGE_URLS_MAX + 1,
        ))
        .collect();
    assert!(parse(many).is_err());
    // `dead` counts towards the bound too.
    let at_bound: Vec<(&str, &str)> = std::iter::once(("version", "2"))
        .chain(std::iter::repeat_n(("dead", "http://a:1"), CHANGE_URLS_MAX))
        .collect();
    assert!(parse(at_bound.clone()).is_ok());
    let past = [at_bound, vec![("remove", "http://b:1")]].concat();
    assert!(parse(past).is_err());
}

/// Removes node `remove` (R 3 -> 2: three nodes hold R = 3) declaring
/// node `dead` dead.
fn remove_dead(remove: u16, dead: u16) -> Change {
    Change {
        remove: vec![url(remove)],
        dead: vec![url(dead)],
        replication_factor: Some(2),
        ..Change::default()
    }
}

fn dead_only(p: u16) -> Change {
    Change {
        dead: vec![url(p)],
        ..Change::default()
    }
}

/// `dead=URL`: with a removal it must name the removed node (400), and
/// is declared once the removal is chosen; alone, it is declared for the
/// transition under way (200), refused with 409 for another version or
/// when none is under way, and with 400 for a member.
#[test]
fn dead_declarations() {
    let c = Cluster::new();
    let m = &c.nodes[&url(1)];
    assert!(matches!(
        ask(&c, 1, 2, &dead_only(3)),
        ChangeAnswer::Conflict(..)
    ));
    assert!(matches!(
        ask(&c, 1, 2, &remove_dead(3, 2)),
        ChangeAnswer::Invalid(_)
    ));
    assert_eq!(m.history().current().version, 1, "nothing was proposed");
    let removed = v1()
        .apply(&Change {
            remove: vec![url(3)],
            replication_factor: Some(2),
            ..Change::default()
        })
        .unwrap();
    assert_eq!(
        ask(&c, 1, 2, &remove_dead(3, 3)),
        ChangeAnswer::Chosen(removed.clone())
    );
    assert!(m.history().declared_dead(&url(3)));
    // The others learn it by gossip; alone, on node 2 for the transition.
    let m2 = &c.nodes[&url(2)];
    assert!(!m2.history().declared_dead(&url(3)));
    let answer = answer(m2, &c, 2, 2, &dead_only(3), BACKOFF);
    assert_eq!(answer, ChangeAnswer::Chosen(removed));
    assert!(m2.history().declared_dead(&url(3)));
    assert!(matches!(
        ask(&c, 1, 3, &dead_only(3)),
        ChangeAnswer::Conflict(..)
    ));
    assert!(matches!(
        ask(&c, 1, 2, &dead_only(1)),
        ChangeAnswer::Invalid(_)
    ));
}

/// A member added again under another host name (the reported wedge:
/// one node in two replica slots, the transition never settling) is 400
/// naming the reason, and nothing is proposed; the node's proper URL is
/// then added.
#[test]
fn a_member_under_another_name_is_not_added() {
    let c = Cluster::new();
    let alias = Change {
        add: vec!["http://localhost:1".to_owned()],
        ..Change::default()
    };
    match ask(&c, 1, 2, &alias) {
        ChangeAnswer::Invalid(why) => assert!(why.contains("answers as a member"), "{why}"),
        other => panic!("{other:?}"),
    }
    for node in c.nodes.values() {
        assert_eq!(node.read(|s| s.acceptor.next().cloned()), None);
        assert!(!node.history().in_transition());
    }
    assert_eq!(ask(&c, 1, 2, &add(4)), ChangeAnswer::Chosen(grown(4)));
}

/// What exists for a transition that cannot finish (docs/CLUSTER.md, "A
/// transition that cannot finish"): while node 4's addition is under
/// way, neither a new version removing it (`remove=4&dead=4`: 409, one
/// transition at a time) nor declaring it dead alone (400: only a node
/// the transition removes can be) is taken.
#[test]
fn an_added_node_cannot_be_taken_out_of_its_own_transition() {
    let c = Cluster::new();
    assert_eq!(ask(&c, 1, 2, &add(4)), ChangeAnswer::Chosen(grown(4)));
    let out = Change {
        remove: vec![url(4)],
        dead: vec![url(4)],
        ..Change::default()
    };
    match ask(&c, 1, 3, &out) {
        ChangeAnswer::Conflict(layout, why) => {
            assert_eq!(layout, grown(4));
            assert!(why.contains("under way"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ask(&c, 1, 2, &dead_only(4)),
        ChangeAnswer::Invalid(_)
    ));
}
