//! The proposer's rules against in-memory acceptors with direct delivery.

use super::acceptor::{self, Answer, KeyState, Proposal, Value};
use super::ballot::Ballot;
use super::proposer::{Cause, Current, Limits, Next, Output, Proposer, RegisterError, backoff_ms};
use super::quorum::{Mode, Quorum};
use crate::cluster::layout::NodeId;

fn quorum(ids: &[NodeId]) -> Quorum {
    Quorum::new(vec![ids.to_vec()], Mode::Sound).unwrap_or_else(|e| panic!("{e}"))
}

/// Delivers the proposer's outbox to `acceptors` (those in `down` drop
/// it) until it has an outcome or nothing is left to deliver.
fn drive<F: FnMut(&Current) -> Option<Next>>(
    p: &mut Proposer<F>,
    acceptors: &mut [KeyState],
    down: &[NodeId],
) -> Output {
    let mut last = Output::Wait;
    for _ in 0..16 {
        let out = p.take_outbox();
        if out.is_empty() {
            return last;
        }
        let up = out
            .into_iter()
            .filter(|(to, _)| !down.contains(to))
            .collect();
        let o = deliver(p, acceptors, up);
        if o != Output::Wait {
            last = o;
        }
    }
    last
}

fn set(v: &[u8]) -> impl FnMut(&Current) -> Option<Next> {
    let v = v.to_vec();
    move |_: &Current| {
        Some(Next {
            value: Some(v.clone()),
            deadline_ms: None,
        })
    }
}

fn read(_: &Current) -> Option<Next> {
    None
}

/// An outcome's value seen, whether it wrote, round trips (`None`: not done).
fn done(out: &Output) -> Option<(Value, bool, u32)> {
    match out {
        Output::Done {
            before,
            written,
            round_trips,
        } => Some((before.value.clone(), *written, *round_trips)),
        _ => None,
    }
}

/// An uncontended write takes three round trips (prepare, accept, commit)
/// and leaves no Paxos record once every replica acknowledged its commit;
/// a read then takes one.
#[test]
fn write_three_round_trips_read_one() {
    let mut acc = vec![KeyState::default(); 3];
    let mut w = Proposer::new(0, quorum(&[0, 1, 2]), Limits::default(), set(b"a"));
    w.start(10);
    let out = drive(&mut w, &mut acc, &[]);
    assert_eq!(done(&out), Some((None, true, 3)));
    assert!(w.uncommitted().is_empty());
    assert!(acc.iter().all(|s| !s.holds_record()));
    let mut r = Proposer::new(1, quorum(&[0, 1, 2]), Limits::default(), read);
    r.start(20);
    let out = drive(&mut r, &mut acc, &[]);
    assert_eq!(done(&out), Some((Some(b"a".to_vec()), false, 1)));
    assert!(
        acc.iter().all(|s| !s.holds_record()),
        "the read released its promise: {acc:?}"
    );
}

/// A read that finds a proposal accepted by a minority (in flight)
/// completes it with an accept round, and a commit round, before it
/// answers.
#[test]
fn read_completes_what_is_in_flight() {
    let mut acc = vec![KeyState::default(); 3];
    let inflight = Proposal {
        ballot: Ballot::new(5, 2),
        value: Some(b"x".to_vec()),
        deadline_ms: None,
    };
    acc[0].accepted = Some(inflight.clone());
    acc[0].promised = inflight.ballot;
    let mut r = Proposer::new(1, quorum(&[0, 1, 2]), Limits::default(), read);
    r.start(9);
    let out = drive(&mut r, &mut acc, &[]);
    assert_eq!(done(&out), Some((Some(b"x".to_vec()), false, 3)));
    assert!(
        acc.iter()
            .all(|s| s.committed_ballot() == Ballot::new(9, 1))
    );
}

/// A refusal ends the round with a back-off, the retry outranks the
/// floor it was told, and the bound turns into a clear error.
#[test]
fn refusal_backs_off_then_fails_at_the_bound() {
    let mut acc = vec![KeyState::default(); 3];
    for s in acc.iter_mut() {
        s.promised = Ballot::new(100, 7);
    }
    let limits = Limits {
        attempts_max: 2,
        ..Limits::default()
    };
    let mut w = Proposer::new(0, quorum(&[0, 1, 2]), limits, set(b"a"));
    w.start(10);
    assert_eq!(drive(&mut w, &mut acc, &[]), Output::Backoff { attempt: 1 });
    w.retry(11);
    assert!(w.ballot() > Ballot::new(100, 7));
    // The acceptors are down: the round times out, the second and last.
    assert_eq!(drive(&mut w, &mut acc, &[0, 1, 2]), Output::Wait);
    let out = w.timed_out();
    assert_eq!(
        out,
        Output::Failed(RegisterError::Exhausted {
            attempts: 2,
            last: Cause::Timeout
        })
    );
    let Output::Failed(e) = out else {
        panic!("failed");
    };
    assert!(e.to_string().contains("after 2 rounds"), "{e}");
}

/// A minority down does not stop an operation; a majority down does.
#[test]
fn minority_down_still_decides() {
    let mut acc = vec![KeyState::default(); 3];
    let mut w = Proposer::new(0, quorum(&[0, 1, 2]), Limits::default(), set(b"a"));
    w.start(10);
    assert!(matches!(
        drive(&mut w, &mut acc, &[2]),
        Output::Done { written: true, .. }
    ));
    assert_eq!(w.uncommitted(), vec![2]);
    let mut w = Proposer::new(0, quorum(&[0, 1, 2]), Limits::default(), set(b"b"));
    w.start(20);
    assert_eq!(drive(&mut w, &mut acc, &[1, 2]), Output::Wait);
}

/// Back-off bounds grow, are capped, and come from the caller's number.
#[test]
fn backoff_is_bounded_jitter() {
    assert_eq!(backoff_ms(1, 5), 5 % 3);
    assert!((0..100).all(|r| backoff_ms(1, r) <= 2));
    assert!((0..1000).all(|r| backoff_ms(30, r) <= 200));
    assert_eq!(backoff_ms(30, 200), 200);
}

/// Duplicated and late answers do not count twice or for the wrong round.
#[test]
fn stale_answers_are_ignored() {
    let mut w = Proposer::new(0, quorum(&[0, 1, 2]), Limits::default(), set(b"a"));
    w.start(10);
    let b = w.ballot();
    let promise = Answer::Promise {
        ballot: b,
        accepted: None,
        committed: None,
    };
    assert_eq!(w.on_answer(1, promise.clone()), Output::Wait);
    assert_eq!(
        w.on_answer(1, promise),
        Output::Wait,
        "one replica counts once"
    );
    let old = Answer::Accepted(Ballot::new(3, 0));
    assert_eq!(w.on_answer(2, old), Output::Wait);
    let late_refusal = Answer::Refused {
        ballot: Ballot::new(3, 0),
        floor: Ballot::new(4, 0),
    };
    assert_eq!(w.on_answer(2, late_refusal), Output::Wait);
}

/// A write's accept refused by every replica that promised it (a
/// competitor prepared in between) is known untaken when each request is
/// delivered at most once: the retry applies the update afresh to the
/// competitor's value. Without that promise (the simulation's network
/// duplicates) the same history is `Indeterminate`: the negative control.
#[test]
fn an_accept_every_promiser_refused_is_not_doubtful_at_most_once() {
    for at_most_once in [true, false] {
        let limits = Limits {
            at_most_once,
            ..Limits::default()
        };
        let mut acc = vec![KeyState::default(); 3];
        let mut a = Proposer::new(0, quorum(&[0, 1, 2]), limits, set(b"a"));
        a.start(10);
        // A's prepare reaches every replica and is promised.
        for (to, req) in a.take_outbox() {
            let step = acceptor::step(&acc[usize::from(to)], &req, acceptor::Mode::Sound);
            acc[usize::from(to)] = step.next;
            if let Some(answer) = step.answer {
                assert_eq!(a.on_answer(to, answer), Output::Wait);
            }
        }
        let accepts = a.take_outbox();
        assert_eq!(accepts.len(), 3);
        // B prepares above A everywhere and writes "b" first.
        let mut b = Proposer::new(1, quorum(&[0, 1, 2]), Limits::default(), set(b"b"));
        b.start(20);
        assert!(matches!(drive(&mut b, &mut acc, &[]), Output::Done { .. }));
        // A's accepts arrive late: every replica refuses.
        let mut out = Output::Wait;
        for (to, req) in accepts {
            let step = acceptor::step(&acc[usize::from(to)], &req, acceptor::Mode::Sound);
            acc[usize::from(to)] = step.next;
            if let Some(answer) = step.answer {
                let o = a.on_answer(to, answer);
                if o != Output::Wait {
                    out = o;
                }
            }
        }
        assert_eq!(out, Output::Backoff { attempt: 1 });
        a.retry(30);
        let end = drive(&mut a, &mut acc, &[]);
        if at_most_once {
            assert_eq!(done(&end), Some((Some(b"b".to_vec()), true, 5)));
        } else {
            assert_eq!(end, Output::Failed(RegisterError::Indeterminate));
        }
    }
}

/// Delivers `requests` to `acceptors`, their answers to `p`; the last
/// output other than `Wait`.
fn deliver<F: FnMut(&Current) -> Option<Next>>(
    p: &mut Proposer<F>,
    acceptors: &mut [KeyState],
    requests: Vec<(NodeId, acceptor::Request)>,
) -> Output {
    let mut last = Output::Wait;
    for (to, req) in requests {
        let step = acceptor::step(&acceptors[usize::from(to)], &req, acceptor::Mode::Sound);
        acceptors[usize::from(to)] = step.next;
        if let Some(answer) = step.answer {
            let o = p.on_answer(to, answer);
            if o != Output::Wait {
                last = o;
            }
        }
    }
    last
}

/// The newest stored version a plain read of `replicas` finds (the
/// main store's quorum read: the highest committed ballot wins).
fn plain_read(acceptors: &[KeyState], replicas: &[NodeId]) -> Option<Vec<u8>> {
    replicas
        .iter()
        .filter_map(|&id| acceptors[usize::from(id)].committed.clone())
        .max_by_key(|p| p.ballot)
        .and_then(|p| p.value)
}

/// The outcome waits for a quorum of stored versions: with the accepts
/// taken everywhere but the commits not yet delivered, the write is not
/// done (replying then let a plain read miss it); one commit is not
/// enough; the second makes the quorum, and from then on a plain read of
/// any majority finds the value.
#[test]
fn a_write_is_done_only_once_a_quorum_stored_it() {
    let mut acc = vec![KeyState::default(); 3];
    acc[1].committed = Some(Proposal {
        ballot: Ballot::new(2, 1),
        value: Some(b"old".to_vec()),
        deadline_ms: None,
    });
    let mut w = Proposer::new(0, quorum(&[0, 1, 2]), Limits::default(), set(b"new"));
    w.start(10);
    let prepares = w.take_outbox();
    assert_eq!(deliver(&mut w, &mut acc, prepares), Output::Wait);
    let accepts = w.take_outbox();
    assert_eq!(
        deliver(&mut w, &mut acc, accepts),
        Output::Wait,
        "decided, not yet stored"
    );
    assert_eq!(plain_read(&acc, &[1, 2]), Some(b"old".to_vec()));
    let mut commits = w.take_outbox();
    assert_eq!(commits.len(), 3);
    assert!(
        commits
            .iter()
            .all(|(_, r)| matches!(r, acceptor::Request::Commit(_)))
    );
    let last = commits.split_off(1);
    assert_eq!(deliver(&mut w, &mut acc, commits), Output::Wait);
    let out = deliver(&mut w, &mut acc, last);
    assert_eq!(done(&out), Some((Some(b"old".to_vec()), true, 3)));
    for pair in [[0, 1], [0, 2], [1, 2]] {
        assert_eq!(plain_read(&acc, &pair), Some(b"new".to_vec()), "{pair:?}");
    }
}

/// A commit round without a quorum backs off; the retry sends `Commit`
/// again only to the replicas that did not confirm it, with no new
/// ballot; at the bound the operation fails `Unconfirmed` (it did take
/// effect), and a late confirmation before the bound still completes it.
#[test]
fn a_commit_round_is_retried_then_unconfirmed() {
    for confirm_late in [false, true] {
        let mut acc = vec![KeyState::default(); 3];
        let limits = Limits {
            attempts_max: 3,
            ..Limits::default()
        };
        let mut w = Proposer::new(0, quorum(&[0, 1, 2]), limits, set(b"a"));
        w.start(10);
        let ballot = w.ballot();
        let prepares = w.take_outbox();
        deliver(&mut w, &mut acc, prepares);
        let accepts = w.take_outbox();
        deliver(&mut w, &mut acc, accepts);
        // Only replica 0 takes the commit; 1 and 2 are cut off.
        let commits: Vec<_> = w
            .take_outbox()
            .into_iter()
            .filter(|(to, _)| *to == 0)
            .collect();
        assert_eq!(deliver(&mut w, &mut acc, commits), Output::Wait);
        assert_eq!(w.timed_out(), Output::Backoff { attempt: 1 });
        w.retry(20);
        assert_eq!(w.ballot(), ballot, "no new ballot for a decided value");
        let again = w.take_outbox();
        let to: Vec<NodeId> = again.iter().map(|(to, _)| *to).collect();
        assert_eq!(to, vec![1, 2]);
        assert!(
            again
                .iter()
                .all(|(_, r)| matches!(r, acceptor::Request::Commit(p) if p.ballot == ballot))
        );
        if confirm_late {
            let out = deliver(&mut w, &mut acc, again);
            assert!(
                matches!(
                    out,
                    Output::Done {
                        written: true,
                        round_trips: 4,
                        ..
                    }
                ),
                "{out:?}"
            );
            continue;
        }
        assert_eq!(w.timed_out(), Output::Backoff { attempt: 2 });
        w.retry(30);
        let _ = w.take_outbox();
        let out = w.timed_out();
        assert_eq!(
            out,
            Output::Failed(RegisterError::Unconfirmed {
                attempts: 3,
                confirmed: 1
            })
        );
        let Output::Failed(e) = out else {
            panic!("failed");
        };
        assert!(e.to_string().contains("took effect"), "{e}");
    }
}

/// A read whose promisers hold the value committed at a quorum is done in
/// one round trip; one that finds it committed at a single promiser (the
/// writer's commit reached one replica before the writer failed) commits
/// it to a quorum first: two round trips, and a plain read then finds it.
#[test]
fn a_read_commits_what_a_minority_stored() {
    let decided = Proposal {
        ballot: Ballot::new(5, 2),
        value: Some(b"x".to_vec()),
        deadline_ms: None,
    };
    let mut acc = vec![KeyState::default(); 3];
    for s in acc.iter_mut() {
        s.accepted = Some(decided.clone());
        s.promised = decided.ballot;
    }
    acc[0].committed = Some(decided.clone());
    acc[0].accepted = None;
    let mut r = Proposer::new(1, quorum(&[0, 1, 2]), Limits::default(), read);
    r.start(9);
    let prepares: Vec<_> = r
        .take_outbox()
        .into_iter()
        .filter(|(to, _)| *to != 2)
        .collect();
    assert_eq!(deliver(&mut r, &mut acc, prepares), Output::Wait);
    assert_eq!(plain_read(&acc, &[1, 2]), None, "stored at replica 0 only");
    let out = drive(&mut r, &mut acc, &[]);
    assert_eq!(done(&out), Some((Some(b"x".to_vec()), false, 2)));
    assert_eq!(plain_read(&acc, &[1, 2]), Some(b"x".to_vec()));
    let mut again = Proposer::new(2, quorum(&[0, 1, 2]), Limits::default(), read);
    again.start(30);
    assert!(matches!(
        drive(&mut again, &mut acc, &[]),
        Output::Done { round_trips: 1, .. }
    ));
}
