use super::*;
use crate::replication::register::acceptor::{self, KeyState, Mode, Request};
use crate::replication::register::proposer::{Current, Next};
use crate::replication::register::quorum;

/// A clock that only grows, as the node's HLC (node bits left zero),
/// past the time it is given as the node's clock observes it.
fn tick_clock(above: u64) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NOW: AtomicU64 = AtomicU64::new(1 << 30);
    let next = (above | 0xff) + 1;
    NOW.fetch_max(next, Ordering::Relaxed);
    NOW.fetch_add(1 << 8, Ordering::Relaxed)
}

fn three() -> Quorum {
    Quorum::new(vec![vec![0, 1, 2]], quorum::Mode::Sound).unwrap_or_else(|e| panic!("{e}"))
}

/// An increment of a decimal counter (absent reads as 0).
fn incr() -> UpdateFn {
    Box::new(|c: &Current| {
        let n: u64 = c
            .value
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Some(Next {
            value: Some((n + 1).to_string().into_bytes()),
            deadline_ms: None,
        })
    })
}

/// Three in-memory acceptors answering every send at once (`down`: these
/// do not answer).
fn deliver(ops: &mut RegisterOps<u32>, states: &mut [KeyState; 3], down: &[usize], now: Instant) {
    let mut clock = tick_clock;
    for _ in 0..64 {
        let sends = ops.take_sends();
        if sends.is_empty() {
            return;
        }
        for s in sends {
            if down.contains(&s.node) {
                continue;
            }
            let step = acceptor::step(&states[s.node], &s.request, Mode::Sound);
            states[s.node] = step.next;
            if let Some(answer) = step.answer {
                ops.on_answer(s.op, s.node, answer, now, &mut clock);
            }
        }
    }
}

/// Delivers with `down` silent and the clock moving 5 ms a step (round
/// timeouts, back-offs) until every operation has its outcome, at most
/// 10,000 steps.
fn until_settled(
    ops: &mut RegisterOps<u32>,
    states: &mut [KeyState; 3],
    down: &[usize],
    now: Instant,
) {
    let mut clock = tick_clock;
    let mut t = now;
    for _ in 0..10_000 {
        deliver(ops, states, down, t);
        if ops.is_empty() {
            return;
        }
        t += Duration::from_millis(5);
        ops.tick(t, &mut clock);
    }
}

/// Two operations of one key from one thread run one after the other:
/// the second sends nothing until the first has its outcome, and both
/// increments land (2, not a duel).
#[test]
fn one_operation_per_key_at_a_time() {
    let now = Instant::now();
    let mut ops: RegisterOps<u32> = RegisterOps::new(1, Duration::from_secs(1), 7);
    let mut clock = tick_clock;
    ops.start(b"k".to_vec(), three(), incr(), 1, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    ops.start(b"k".to_vec(), three(), incr(), 2, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    let first = ops.take_sends();
    assert!(
        first.iter().all(|s| s.op == 1),
        "only the first runs: {first:?}"
    );
    assert_eq!(first.len(), 3);
    // Put them back to be delivered.
    ops.sends = first;
    let mut states: [KeyState; 3] = Default::default();
    deliver(&mut ops, &mut states, &[], now);
    let outcomes = ops.take_outcomes();
    assert_eq!(outcomes.len(), 2);
    let befores: Vec<Option<Vec<u8>>> = outcomes
        .iter()
        .map(|(_, o, _)| match o {
            Outcome::Done { before, .. } => before.value.clone(),
            Outcome::Failed(e) => panic!("{e}"),
        })
        .collect();
    assert_eq!(befores, vec![None, Some(b"1".to_vec())]);
    assert!(ops.is_empty());
}

/// With one replica of three silent, operations still decide (2 of 3);
/// with two silent, rounds time out, back off and end `Exhausted`.
#[test]
fn quorum_of_two_and_timeouts() {
    let now = Instant::now();
    let mut ops: RegisterOps<u32> = RegisterOps::new(1, Duration::from_millis(10), 7);
    let mut clock = tick_clock;
    let mut states: [KeyState; 3] = Default::default();
    ops.start(b"k".to_vec(), three(), incr(), 1, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    deliver(&mut ops, &mut states, &[2], now);
    assert!(matches!(
        ops.take_outcomes()[..],
        [(1, Outcome::Done { written: true, .. }, _)]
    ));
    ops.start(b"k".to_vec(), three(), incr(), 2, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    until_settled(&mut ops, &mut states, &[1, 2], now);
    let outcomes = ops.take_outcomes();
    assert!(
        matches!(
            &outcomes[..],
            [(2, Outcome::Failed(RegisterError::Exhausted { .. }), _)]
        ),
        "{outcomes:?}"
    );
}

/// The thread's bound refuses the operation past it, and nothing of it
/// is sent.
#[test]
fn the_bound_refuses() {
    let now = Instant::now();
    let mut ops: RegisterOps<u32> = RegisterOps::new(1, Duration::from_secs(1), 7);
    let mut clock = tick_clock;
    for i in 0..OPS_MAX {
        ops.start(b"k".to_vec(), three(), incr(), i as u32, now, &mut clock)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let _ = ops.take_sends();
    assert_eq!(
        ops.start(b"k".to_vec(), three(), incr(), 0, now, &mut clock),
        Err(Refused::Full)
    );
    assert!(ops.take_sends().is_empty());
}

/// Operations queued behind a running one ride one round: five `INCR`s
/// of one key started at once take two rounds (the first alone, the
/// other four together), each sees the value the one before it left, and
/// all five land.
#[test]
fn waiting_operations_of_a_key_ride_one_round() {
    let now = Instant::now();
    let mut ops: RegisterOps<u32> = RegisterOps::new(1, Duration::from_secs(1), 7);
    let mut clock = tick_clock;
    for to in 1..=5 {
        ops.start(b"k".to_vec(), three(), incr(), to, now, &mut clock)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut states: [KeyState; 3] = Default::default();
    let mut prepares = 0;
    for _ in 0..64 {
        let sends = ops.take_sends();
        if sends.is_empty() {
            break;
        }
        prepares += sends
            .iter()
            .filter(|s| matches!(s.request, Request::Prepare(_)))
            .count();
        for s in sends {
            let step = acceptor::step(&states[s.node], &s.request, Mode::Sound);
            states[s.node] = step.next;
            if let Some(answer) = step.answer {
                ops.on_answer(s.op, s.node, answer, now, &mut clock);
            }
        }
    }
    assert_eq!(prepares, 2 * 3, "two rounds of three prepares");
    let mut outcomes = ops.take_outcomes();
    outcomes.sort_by_key(|(to, _, _)| *to);
    let seen: Vec<(u32, Option<Vec<u8>>, bool)> = outcomes
        .iter()
        .map(|(to, o, _)| match o {
            Outcome::Done {
                before, written, ..
            } => (*to, before.value.clone(), *written),
            Outcome::Failed(e) => panic!("{e}"),
        })
        .collect();
    let expected: Vec<(u32, Option<Vec<u8>>, bool)> = (1..=5)
        .map(|to| {
            let before = (to > 1).then(|| (to - 1).to_string().into_bytes());
            (to, before, true)
        })
        .collect();
    assert_eq!(seen, expected);
    assert!(ops.is_empty());
    let stored = states
        .iter()
        .filter(|s| s.committed.as_ref().and_then(|p| p.value.clone()) == Some(b"5".to_vec()))
        .count();
    assert!(stored >= 2, "a quorum stores 5: {states:?}");
}

/// A batch whose round fails fails every operation that rode it, and a
/// batch mixing a read with writes gives the read the value before it
/// and no write of its own.
#[test]
fn a_batch_fails_together_and_reads_ride_too() {
    let now = Instant::now();
    let mut ops: RegisterOps<u32> = RegisterOps::new(1, Duration::from_millis(10), 7);
    let mut clock = tick_clock;
    ops.start(b"k".to_vec(), three(), incr(), 1, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    let read: UpdateFn = Box::new(|_: &Current| None);
    ops.start(b"k".to_vec(), three(), read, 2, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    ops.start(b"k".to_vec(), three(), incr(), 3, now, &mut clock)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut states: [KeyState; 3] = Default::default();
    deliver(&mut ops, &mut states, &[], now);
    let mut outcomes = ops.take_outcomes();
    outcomes.sort_by_key(|(to, _, _)| *to);
    let got: Vec<(Option<Vec<u8>>, bool)> = outcomes
        .iter()
        .map(|(_, o, _)| match o {
            Outcome::Done {
                before, written, ..
            } => (before.value.clone(), *written),
            Outcome::Failed(e) => panic!("{e}"),
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (None, true),
            (Some(b"1".to_vec()), false),
            (Some(b"1".to_vec()), true)
        ]
    );
    // Two replicas of three silent: the next batch fails whole.
    for to in 4..=6 {
        ops.start(b"k".to_vec(), three(), incr(), to, now, &mut clock)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    until_settled(&mut ops, &mut states, &[1, 2], now);
    let outcomes = ops.take_outcomes();
    assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|(_, o, _)| matches!(o, Outcome::Failed(RegisterError::Exhausted { .. }))),
        "{outcomes:?}"
    );
}
