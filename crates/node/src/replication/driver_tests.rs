//! The driver's rules, event by event (see the `# Rules` of `driver.rs`).

use super::*;

/// Where a test request's answer goes.
type Op = u32;

const TIMEOUT_MS: u64 = 1000;

fn v(ts: u64, value: &str) -> Stamped {
    Stamped {
        ts,
        value: Some(value.as_bytes().to_vec()),
        deadline_ms: None,
    }
}

/// A driver on node 0 of 3.
fn driver() -> Replicator<Op> {
    Replicator::new(DriverConfig {
        self_index: 0,
        nodes: 3,
        timeout_ms: TIMEOUT_MS,
        planted_older_repair: false,
    })
}

fn request(kind: ReplicaOp, ack: usize) -> Request<Op> {
    Request {
        reply_to: 7,
        key: b"k".to_vec(),
        kind,
        ack,
        replicas: vec![0, 1, 2],
        sets: Vec::new(),
    }
}

fn drain(d: &mut Replicator<Op>) -> Vec<Action<Op>> {
    std::iter::from_fn(|| d.next_action()).collect()
}

/// The waiter of the action that asks `node` (local or remote).
fn waiter_of(actions: &[Action<Op>], node: usize) -> Waiter {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Send {
                node: n, waiter, ..
            } if *n == node => Some(*waiter),
            Action::ReadLocal { waiter, .. } if node == 0 => Some(*waiter),
            Action::WriteLocal {
                waiter: Some(waiter),
                ..
            } if node == 0 => Some(*waiter),
            _ => None,
        })
        .unwrap()
}

fn no_clock(_: u64) -> Result<u64, String> {
    panic!("nothing to re-stamp")
}

/// A write asks the local engine and both peers at once, answers at the
/// ack-th success, and hints the replica that failed once all answered.
#[test]
fn write_quorum_answer_and_hint() {
    let mut d = driver();
    d.start(0, request(ReplicaOp::Write(v(10, "x")), 2));
    let asked = drain(&mut d);
    assert_eq!(asked.len(), 3);
    assert!(
        matches!(&asked[0], Action::WriteLocal { waiter: Some(_), version, .. } if version.ts == 10)
    );
    assert!(asked[1..].iter().all(|a| matches!(
        a,
        Action::Send {
            request: PeerRequest::Write { .. },
            deadline_ms: TIMEOUT_MS,
            ..
        }
    )));
    d.on_answer(
        0,
        waiter_of(&asked, 0),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    assert!(drain(&mut d).is_empty());
    d.on_answer(
        1,
        waiter_of(&asked, 1),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    assert_eq!(
        drain(&mut d),
        vec![Action::Reply {
            to: 7,
            answer: Ok(Decision::Written { ts: 10 })
        }]
    );
    assert_eq!(d.live(), 1, "still listening for the last replica");
    d.on_answer(
        2,
        waiter_of(&asked, 2),
        ReplicaAnswer::Failed("down".into()),
        &mut no_clock,
    );
    assert_eq!(
        drain(&mut d),
        vec![Action::KeepHint {
            node: 2,
            key: b"k".to_vec(),
            version: v(10, "x")
        }]
    );
    assert_eq!(d.live(), 0);
    d.invariants().unwrap();
}

/// A read repairs the replicas behind the newest answer, the local one by
/// a local write without waiter, a remote one by a send nobody waits for.
#[test]
fn read_answers_newest_and_repairs() {
    let mut d = driver();
    d.start(5, request(ReplicaOp::Read, 1));
    let asked = drain(&mut d);
    assert!(matches!(asked[0], Action::ReadLocal { .. }));
    d.on_answer(
        0,
        waiter_of(&asked, 0),
        ReplicaAnswer::Read(Some(v(3, "old"))),
        &mut no_clock,
    );
    assert!(matches!(
        drain(&mut d)[..],
        [Action::Reply {
            answer: Ok(Decision::Read(_)),
            ..
        }]
    ));
    d.on_answer(
        1,
        waiter_of(&asked, 1),
        ReplicaAnswer::Read(Some(v(8, "new"))),
        &mut no_clock,
    );
    d.on_answer(
        2,
        waiter_of(&asked, 2),
        ReplicaAnswer::Read(None),
        &mut no_clock,
    );
    let repairs = drain(&mut d);
    assert_eq!(
        repairs,
        vec![
            Action::WriteLocal {
                waiter: None,
                key: b"k".to_vec(),
                version: v(8, "new")
            },
            Action::Send {
                node: 2,
                waiter: Waiter::Repair,
                request: PeerRequest::Write {
                    key: b"k".to_vec(),
                    version: v(8, "new")
                },
                deadline_ms: 5 + TIMEOUT_MS
            }
        ]
    );
    d.invariants().unwrap();
}

/// A newer version held re-stamps the write above it: every replica is
/// asked again with the new stamp and the same deadline, and answers to
/// the earlier round are dropped.
#[test]
fn holds_newer_restamps_and_drops_the_earlier_round() {
    let mut d = driver();
    d.start(0, request(ReplicaOp::Write(v(10, "x")), 2));
    let first = drain(&mut d);
    let mut seen = Vec::new();
    let mut clock = |above: u64| {
        seen.push(above);
        Ok(above + 1)
    };
    d.on_answer(
        1,
        waiter_of(&first, 1),
        ReplicaAnswer::HoldsNewer(40),
        &mut clock,
    );
    assert_eq!(seen, vec![40]);
    let second = drain(&mut d);
    assert_eq!(second[0], Action::Restamped { to: 7, ts: 41 });
    assert_eq!(second.len(), 4);
    assert!(second[1..].iter().all(|a| match a {
        Action::WriteLocal { version, .. } => version.ts == 41,
        Action::Send {
            request: PeerRequest::Write { version, .. },
            deadline_ms,
            ..
        } => version.ts == 41 && *deadline_ms == TIMEOUT_MS,
        _ => false,
    }));
    // Late answers of the first round change nothing.
    d.on_answer(
        0,
        waiter_of(&first, 0),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    d.on_answer(
        2,
        waiter_of(&first, 2),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    assert!(drain(&mut d).is_empty());
    let again = &second[1..];
    d.on_answer(
        0,
        waiter_of(again, 0),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    d.on_answer(
        2,
        waiter_of(again, 2),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    assert_eq!(
        drain(&mut d),
        vec![Action::Reply {
            to: 7,
            answer: Ok(Decision::Written { ts: 41 })
        }]
    );
    d.invariants().unwrap();
}

/// A clock that cannot stamp ends the request with `Err`, no aftermath.
#[test]
fn restamp_without_a_clock_answers_err() {
    let mut d = driver();
    d.start(0, request(ReplicaOp::Write(v(10, "x")), 3));
    let asked = drain(&mut d);
    let mut broken = |_: u64| Err("reservation not durable".to_string());
    d.on_answer(
        2,
        waiter_of(&asked, 2),
        ReplicaAnswer::HoldsNewer(50),
        &mut broken,
    );
    assert_eq!(
        drain(&mut d),
        vec![Action::Reply {
            to: 7,
            answer: Err("reservation not durable".into())
        }]
    );
    assert_eq!(d.live(), 0);
    d.on_answer(
        0,
        waiter_of(&asked, 0),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    assert!(drain(&mut d).is_empty());
    d.invariants().unwrap();
}

/// The deadline answers 504 and hints the silent replicas; nothing before it.
#[test]
fn deadline_expires_and_hints() {
    let mut d = driver();
    d.start(100, request(ReplicaOp::Write(v(10, "x")), 2));
    let asked = drain(&mut d);
    d.on_answer(
        0,
        waiter_of(&asked, 0),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    d.tick(100 + TIMEOUT_MS - 1);
    assert!(drain(&mut d).is_empty());
    d.tick(100 + TIMEOUT_MS);
    let out = drain(&mut d);
    assert!(
        matches!(&out[0], Action::Reply { answer: Ok(Decision::Failed(why)), .. } if why.contains("did not answer"))
    );
    let hinted: Vec<usize> = out
        .iter()
        .filter_map(|a| match a {
            Action::KeepHint { node, .. } => Some(*node),
            _ => None,
        })
        .collect();
    assert_eq!(hinted, vec![1, 2]);
    assert_eq!(d.waiting(), Vec::<Op>::new());
}

/// Shutdown ends every request; entries are reused with a new generation.
#[test]
fn expire_all_and_reuse() {
    let mut d = driver();
    d.start(0, request(ReplicaOp::Read, 2));
    let first = drain(&mut d);
    d.expire_all("the node is stopping");
    assert!(matches!(
        drain(&mut d)[..],
        [Action::Reply {
            answer: Ok(Decision::Failed(_)),
            ..
        }]
    ));
    d.start(0, request(ReplicaOp::Read, 1));
    let second = drain(&mut d);
    assert_ne!(waiter_of(&first, 1), waiter_of(&second, 1));
    // The old generation's answer is dropped; the new one decides.
    d.on_answer(
        1,
        waiter_of(&first, 1),
        ReplicaAnswer::Read(None),
        &mut no_clock,
    );
    assert!(drain(&mut d).is_empty());
    d.on_answer(
        1,
        waiter_of(&second, 1),
        ReplicaAnswer::Read(None),
        &mut no_clock,
    );
    assert_eq!(drain(&mut d).len(), 1);
    d.invariants().unwrap();
}

/// Past `COORDINATIONS_MAX` requests in flight, a request is refused at once.
#[test]
fn table_bound() {
    let mut d = driver();
    for _ in 0..COORDINATIONS_MAX {
        d.start(0, request(ReplicaOp::Read, 1));
    }
    while d.next_action().is_some() {}
    d.start(0, request(ReplicaOp::Read, 1));
    assert!(matches!(
        drain(&mut d)[..],
        [Action::Reply { answer: Err(_), .. }]
    ));
    assert_eq!(d.live(), COORDINATIONS_MAX);
    d.invariants().unwrap();
}

fn hints(seqs: std::ops::RangeInclusive<u64>) -> Vec<Hint> {
    seqs.map(|seq| Hint {
        seq,
        key: format!("h{seq}").into_bytes(),
        version: v(seq, "h"),
    })
    .collect()
}

fn hint_waiters(actions: &[Action<Op>]) -> Vec<Waiter> {
    actions
        .iter()
        .map(|a| match a {
            Action::Send { waiter, .. } => *waiter,
            other => panic!("{other:?}"),
        })
        .collect()
}

/// One round per peer at a time; acknowledged hints are removed when the
/// round ends; a failure keeps the cursor, a clean round moves it.
#[test]
fn hint_rounds_and_cursor() {
    let mut d = driver();
    assert_eq!(d.hint_round_due(0), None, "no hints to itself");
    assert_eq!(
        d.hint_round_due(1),
        Some(HintQuery {
            after: None,
            max: HINT_BATCH_MAX
        })
    );
    d.start_hint_round(0, 1, hints(1..=3));
    let round = hint_waiters(&drain(&mut d));
    assert_eq!(round.len(), 3);
    assert_eq!(d.hint_round_due(1), None);
    assert!(d.delivering_hints());
    d.on_answer(1, round[0], ReplicaAnswer::Written, &mut no_clock);
    d.on_answer(
        1,
        round[1],
        ReplicaAnswer::Failed("lost".into()),
        &mut no_clock,
    );
    d.on_answer(1, round[2], ReplicaAnswer::HoldsNewer(99), &mut no_clock);
    assert_eq!(
        drain(&mut d),
        vec![Action::RemoveHints {
            node: 1,
            seqs: vec![1, 3]
        }]
    );
    assert_eq!(
        d.hint_round_due(1).unwrap().after,
        None,
        "a failure keeps the cursor"
    );
    d.start_hint_round(10, 1, hints(2..=2));
    let round = hint_waiters(&drain(&mut d));
    d.on_answer(1, round[0], ReplicaAnswer::Written, &mut no_clock);
    assert_eq!(
        drain(&mut d),
        vec![Action::RemoveHints {
            node: 1,
            seqs: vec![2]
        }]
    );
    assert_eq!(d.hint_round_due(1).unwrap().after, Some(2));
    // Nothing after the cursor: start over from the beginning next time.
    d.start_hint_round(20, 1, Vec::new());
    assert_eq!(d.hint_round_due(1).unwrap().after, None);
    assert!(!d.delivering_hints());
}

/// A round ends at its deadline; answers to it that come later are dropped.
#[test]
fn hint_round_deadline() {
    let mut d = driver();
    d.start_hint_round(0, 2, hints(1..=2));
    let round = hint_waiters(&drain(&mut d));
    d.on_answer(2, round[0], ReplicaAnswer::Written, &mut no_clock);
    d.tick(TIMEOUT_MS - 1);
    assert!(drain(&mut d).is_empty());
    d.tick(TIMEOUT_MS);
    assert_eq!(
        drain(&mut d),
        vec![Action::RemoveHints {
            node: 2,
            seqs: vec![1]
        }]
    );
    assert_eq!(d.hint_round_due(2).unwrap().after, None);
    d.start_hint_round(TIMEOUT_MS, 2, hints(2..=2));
    let next = hint_waiters(&drain(&mut d));
    d.on_answer(2, round[1], ReplicaAnswer::Written, &mut no_clock);
    assert!(drain(&mut d).is_empty(), "an answer to the ended round");
    d.on_answer(2, next[0], ReplicaAnswer::Written, &mut no_clock);
    assert_eq!(
        drain(&mut d),
        vec![Action::RemoveHints {
            node: 2,
            seqs: vec![2]
        }]
    );
}

/// Negative control: a driver whose live count disagrees with its table
/// fails the invariant check.
#[test]
fn invariants_catch_a_miscount() {
    let mut d = driver();
    d.start(0, request(ReplicaOp::Read, 1));
    d.invariants().unwrap();
    d.live += 1;
    assert!(d.invariants().is_err());
    d.live -= 1;
    d.free.push(0);
    assert!(d.invariants().is_err());
}

/// During a layout transition a write goes to the union of both sets and
/// answers only once each set has ack; the new node (index 3, from
/// `grow_nodes`) is asked and hinted like any other.
#[test]
fn transition_write_needs_both_sets() {
    let mut d = driver();
    d.grow_nodes(4);
    assert!(d.hint_round_due(3).is_some(), "a cursor for the new node");
    let mut r = request(ReplicaOp::Write(v(10, "x")), 2);
    r.replicas = vec![0, 1, 2, 3];
    r.sets = vec![vec![0, 1, 2], vec![1, 2, 3]];
    d.start(0, r);
    let asked = drain(&mut d);
    assert_eq!(asked.len(), 4);
    for node in [0, 1] {
        d.on_answer(
            node,
            waiter_of(&asked, node),
            ReplicaAnswer::Written,
            &mut no_clock,
        );
        assert!(drain(&mut d).is_empty(), "the new set has one ack");
    }
    d.on_answer(
        2,
        waiter_of(&asked, 2),
        ReplicaAnswer::Failed("down".into()),
        &mut no_clock,
    );
    assert!(drain(&mut d).is_empty());
    d.on_answer(
        3,
        waiter_of(&asked, 3),
        ReplicaAnswer::Written,
        &mut no_clock,
    );
    assert_eq!(
        drain(&mut d),
        vec![
            Action::Reply {
                to: 7,
                answer: Ok(Decision::Written { ts: 10 })
            },
            Action::KeepHint {
                node: 2,
                key: b"k".to_vec(),
                version: v(10, "x")
            }
        ]
    );
    d.invariants().unwrap();
}

/// A replica whose link closed for a newer layout version is asked again
/// with the same waiter and deadline, and its answer then counts; past
/// `RESENDS_MAX` resends (or for a finished request, or an older
/// generation) `resend` refuses and the caller answers it failed.
#[test]
fn a_redialed_replica_is_asked_again_within_bounds() {
    let mut d = driver();
    d.start(0, request(ReplicaOp::Write(v(10, "x")), 3));
    let asked = drain(&mut d);
    let w1 = waiter_of(&asked, 1);
    assert!(d.resend(w1));
    let again = drain(&mut d);
    assert_eq!(
        again,
        vec![Action::Send {
            node: 1,
            waiter: w1,
            request: PeerRequest::Write {
                key: b"k".to_vec(),
                version: v(10, "x")
            },
            deadline_ms: TIMEOUT_MS,
        }]
    );
    for node in 0..3 {
        d.on_answer(
            node,
            waiter_of(&asked, node),
            ReplicaAnswer::Written,
            &mut no_clock,
        );
    }
    let done = drain(&mut d);
    assert!(
        done.contains(&Action::Reply {
            to: 7,
            answer: Ok(Decision::Written { ts: 10 })
        }),
        "{done:?}"
    );
    assert_eq!(d.live(), 0);
    // The request is over: nothing to ask again.
    assert!(!d.resend(w1));
    assert!(drain(&mut d).is_empty());
    // A request asks again at most RESENDS_MAX times in all.
    d.start(0, request(ReplicaOp::Read, 2));
    let asked = drain(&mut d);
    let w2 = waiter_of(&asked, 2);
    for _ in 0..RESENDS_MAX {
        assert!(d.resend(w2));
    }
    assert!(!d.resend(w2));
    assert_eq!(drain(&mut d).len(), RESENDS_MAX as usize);
    // A waiter of another generation is not asked again.
    let Waiter::Coordination {
        index, position, ..
    } = w2
    else {
        unreachable!()
    };
    let stale = Waiter::Coordination {
        index,
        generation: 0,
        position,
    };
    assert!(!d.resend(stale));
    d.invariants().unwrap();
}
