use super::*;
use ataman_testkit::rng::Rng;

fn urls(ports: &[u16]) -> Vec<String> {
    ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect()
}

fn layout(version: u64, ports: &[u16]) -> Layout {
    Layout::new(version, urls(ports), 3).unwrap()
}

fn b(round: u64, node: u64) -> Ballot {
    Ballot { round, node }
}

/// An acceptor promises only upward, accepts nothing below its promise,
/// returns what it accepted, and sends other slots away.
#[test]
fn acceptor_rules() {
    let v = layout(2, &[1, 2, 3, 4]);
    let mut a = Acceptor::new(2);
    assert_eq!(
        a.on_prepare(2, b(1, 7)),
        (
            AcceptorReply::Promise {
                ballot: b(1, 7),
                accepted: None
            },
            true
        )
    );
    // The same ballot again: granted, nothing to persist.
    assert!(!a.on_prepare(2, b(1, 7)).1);
    assert_eq!(
        a.on_prepare(2, b(1, 3)).0,
        AcceptorReply::Reject { promised: b(1, 7) }
    );
    assert_eq!(
        a.on_accept(2, b(1, 3), v.clone()).0,
        AcceptorReply::Reject { promised: b(1, 7) }
    );
    assert_eq!(
        a.on_accept(2, b(1, 7), v.clone()),
        (AcceptorReply::Accepted { ballot: b(1, 7) }, true)
    );
    // A value for another version is refused.
    assert!(matches!(
        a.on_accept(2, b(2, 7), layout(3, &[1, 2, 3])).0,
        AcceptorReply::Reject { .. }
    ));
    assert_eq!(
        a.on_prepare(2, b(2, 1)).0,
        AcceptorReply::Promise {
            ballot: b(2, 1),
            accepted: Some((b(1, 7), v.clone()))
        }
    );
    assert_eq!(
        a.on_prepare(1, b(9, 9)).0,
        AcceptorReply::Decided { version: 1 }
    );
    assert_eq!(
        a.on_prepare(3, b(9, 9)).0,
        AcceptorReply::Behind { slot: 2 }
    );
    assert!(a.advance(2));
    assert_eq!(a, Acceptor::new(3));
    assert!(!a.advance(1));
}

/// The acceptor's bytes round-trip and every flipped bit is caught.
#[test]
fn acceptor_codec() {
    let mut a = Acceptor::new(5);
    assert_eq!(Acceptor::decode(&a.encode()), Ok(a.clone()));
    a.on_prepare(5, b(3, 11));
    a.on_accept(5, b(3, 11), layout(5, &[1, 2, 3]));
    let bytes = a.encode();
    assert_eq!(Acceptor::decode(&bytes), Ok(a.clone()));
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x10;
        assert!(Acceptor::decode(&bad).is_err(), "flip {i}");
    }
    for cut in 0..bytes.len() {
        assert!(Acceptor::decode(&bytes[..cut]).is_err(), "cut {cut}");
    }
}

/// A lone proposer with every voter answering chooses its own value; one
/// failure of three still leaves a majority, two do not (503).
#[test]
fn proposer_majority_and_failures() {
    let voters = urls(&[1, 2, 3]);
    let own = layout(2, &[1, 2, 3, 4]);
    let mut p = Proposer::new(b(1, 1), own.clone(), voters.clone());
    let promise = || {
        Some(AcceptorReply::Promise {
            ballot: b(1, 1),
            accepted: None,
        })
    };
    assert_eq!(p.on_reply(&voters[0], promise()), Step::Wait);
    assert_eq!(p.on_reply(&voters[2], None), Step::Wait);
    // A stranger's reply counts for nothing.
    assert_eq!(p.on_reply("http://127.0.0.1:9", promise()), Step::Wait);
    assert_eq!(
        p.on_reply(&voters[1], promise()),
        Step::Accept {
            ballot: b(1, 1),
            value: own.clone()
        }
    );
    let accepted = || Some(AcceptorReply::Accepted { ballot: b(1, 1) });
    assert_eq!(p.on_reply(&voters[0], accepted()), Step::Wait);
    assert_eq!(p.on_reply(&voters[0], accepted()), Step::Wait);
    assert_eq!(
        p.on_reply(&voters[1], accepted()),
        Step::Chosen {
            value: own.clone(),
            own: true
        }
    );

    let mut q = Proposer::new(b(1, 1), own.clone(), voters.clone());
    assert_eq!(q.on_reply(&voters[0], None), Step::Wait);
    assert_eq!(q.on_reply(&voters[1], None), Step::NoMajority);
    let mut r = Proposer::new(b(1, 1), own.clone(), voters.clone());
    assert_eq!(
        r.on_reply(
            &voters[0],
            Some(AcceptorReply::Reject { promised: b(4, 2) })
        ),
        Step::Wait
    );
    assert_eq!(r.on_reply(&voters[1], None), Step::Retry { above: b(4, 2) });
    let mut s = Proposer::new(b(1, 1), own, voters.clone());
    assert_eq!(
        s.on_reply(&voters[1], Some(AcceptorReply::Decided { version: 2 })),
        Step::Stale { version: 2 }
    );
}

/// A proposer whose promises carry another accepted value proposes that
/// value, and its client hears 409 (`own: false`).
#[test]
fn proposer_adopts_the_accepted_value() {
    let voters = urls(&[1, 2, 3]);
    let own = layout(2, &[1, 2, 3, 4]);
    let other = layout(2, &[1, 2, 3, 5]);
    let mut p = Proposer::new(b(2, 1), own, voters.clone());
    p.on_reply(
        &voters[0],
        Some(AcceptorReply::Promise {
            ballot: b(2, 1),
            accepted: Some((b(1, 9), other.clone())),
        }),
    );
    let step = p.on_reply(
        &voters[1],
        Some(AcceptorReply::Promise {
            ballot: b(2, 1),
            accepted: None,
        }),
    );
    assert_eq!(
        step,
        Step::Accept {
            ballot: b(2, 1),
            value: other.clone()
        }
    );
    for v in &voters[..2] {
        p.on_reply(v, Some(AcceptorReply::Accepted { ballot: b(2, 1) }));
    }
    // Already decided: further replies change nothing.
    assert_eq!(
        p.on_reply(
            &voters[2],
            Some(AcceptorReply::Accepted { ballot: b(2, 1) })
        ),
        Step::Wait
    );
}

/// A randomized run of several proposers with lost and reordered
/// messages. Returns the distinct values reported chosen, and how many
/// proposers reported their own value chosen.
fn race(seed: u64, voters_count: u16, forgetful: bool) -> (Vec<Layout>, usize) {
    let mut rng = Rng::new(seed);
    let voters = urls(&(1..=voters_count).collect::<Vec<_>>());
    let mut acceptors: Vec<Acceptor> = voters.iter().map(|_| Acceptor::new(2)).collect();
    let proposals: Vec<Layout> = (0..3u16).map(|i| layout(2, &[1, 2, 3, 100 + i])).collect();
    // (proposer, its Proposer, attempts)
    let mut proposers: Vec<(Proposer, u32)> = proposals
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                Proposer::new(b(1, i as u64 + 1), v.clone(), voters.clone()),
                0,
            )
        })
        .collect();
    // In flight: (proposer index, voter index, request) where request is
    // None for prepare, Some(value) for accept, tagged with the ballot.
    let mut in_flight: Vec<(usize, usize, Ballot, Option<Layout>)> = Vec::new();
    let mut replies: Vec<(usize, usize, Ballot, Option<AcceptorReply>)> = Vec::new();
    for (pi, (p, _)) in proposers.iter().enumerate() {
        for vi in 0..voters.len() {
            in_flight.push((pi, vi, p.ballot(), None));
        }
    }
    let mut chosen: Vec<Layout> = Vec::new();
    let mut own_wins = 0;
    let mut done = vec![false; proposers.len()];
    for _ in 0..5_000 {
        if in_flight.is_empty() && replies.is_empty() {
            break;
        }
        let deliver_request = !in_flight.is_empty() && (replies.is_empty() || rng.percent(50));
        if deliver_request {
            let (pi, vi, ballot, value) = in_flight.swap_remove(rng.index(in_flight.len()));
            if rng.percent(10) {
                replies.push((pi, vi, ballot, None)); // lost: the proposer hears a failure
                continue;
            }
            let mut reply = match value {
                None => acceptors[vi].on_prepare(2, ballot).0,
                Some(v) => acceptors[vi].on_accept(2, ballot, v).0,
            };
            if forgetful && let AcceptorReply::Promise { accepted, .. } = &mut reply {
                *accepted = None;
            }
            replies.push((pi, vi, ballot, Some(reply)));
            continue;
        }
        let (pi, vi, ballot, reply) = replies.swap_remove(rng.index(replies.len()));
        let (p, attempts) = &mut proposers[pi];
        if done[pi] || p.ballot() != ballot {
            continue;
        }
        match p.on_reply(&voters[vi], reply) {
            Step::Wait => {}
            Step::Accept { ballot, value } => {
                for v in 0..voters.len() {
                    in_flight.push((pi, v, ballot, Some(value.clone())));
                }
            }
            Step::Chosen { value, own } => {
                done[pi] = true;
                own_wins += usize::from(own);
                if !chosen.contains(&value) {
                    chosen.push(value);
                }
            }
            Step::Retry { above } => {
                *attempts += 1;
                let round = above.round.max(p.ballot().round) + 1;
                let next = Proposer::new(
                    b(round, pi as u64 + 1),
                    proposals[pi].clone(),
                    voters.clone(),
                );
                if *attempts < 20 {
                    for v in 0..voters.len() {
                        in_flight.push((pi, v, next.ballot(), None));
                    }
                }
                *p = next;
            }
            Step::NoMajority => {
                *attempts += 1;
                let next = Proposer::new(
                    b(p.ballot().round + 1, pi as u64 + 1),
                    proposals[pi].clone(),
                    voters.clone(),
                );
                if *attempts < 20 {
                    for v in 0..voters.len() {
                        in_flight.push((pi, v, next.ballot(), None));
                    }
                }
                *p = next;
            }
            Step::Stale { .. } => done[pi] = true,
        }
    }
    (chosen, own_wins)
}

/// Over many seeds of concurrent proposals, at most one value is ever
/// reported chosen, and at most one proposer hears "yours" (200); the
/// others hear 409 or 503.
#[test]
fn concurrent_proposals_choose_one_value() {
    let mut decided = 0;
    for seed in 0..400 {
        for voters in [3, 5] {
            let (chosen, own) = race(seed, voters, false);
            assert!(chosen.len() <= 1, "seed {seed}: chosen {chosen:?}");
            assert!(own <= 1, "seed {seed}: {own} proposers won");
            decided += chosen.len();
        }
    }
    assert!(decided > 400, "only {decided} runs decided anything");
}

/// Negative control: acceptors that forget what they accepted when they
/// promise let two values be chosen in some run, and the check sees it.
#[test]
fn forgetful_acceptors_are_caught() {
    let split = (0..400)
        .filter(|&seed| race(seed, 3, true).0.len() > 1)
        .count();
    assert!(
        split > 0,
        "no run chose two values with forgetful acceptors"
    );
}
