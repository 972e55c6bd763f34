//! The checker on hand-built histories: each rule flags what it must and
//! nothing else. Times are in milliseconds here (µs in the history).

use super::*;
use crate::harness::history::{Convergence, Copy, Crash, FaultEvent, Meta};

const W2: (u32, u32) = (2, 3);

/// An operation on key `k` by `client` from `start` to `end` ms, ack 2 of 3.
fn op(client: u32, kind: OpKind, key: &str, value: Option<&str>, start: u64, end: u64) -> Op {
    let status = match kind {
        OpKind::Put => 201,
        OpKind::Delete => 202,
        OpKind::Get if value.is_some() => 200,
        OpKind::Get => 404,
    };
    Op {
        client,
        phase: Phase::Run,
        workload: Workload::Register,
        kind,
        key: key.into(),
        value: value.map(str::to_owned),
        node: 0,
        ack: W2.0,
        from: W2.1,
        start_us: start * 1000,
        end_us: end * 1000,
        outcome: OpOutcome::Ok,
        status: Some(status),
        error: None,
        version: None,
        ttl_ms: None,
    }
}

fn put(client: u32, key: &str, value: &str, start: u64, end: u64) -> Op {
    op(client, OpKind::Put, key, Some(value), start, end)
}

fn get(client: u32, key: &str, value: Option<&str>, start: u64, end: u64) -> Op {
    op(client, OpKind::Get, key, value, start, end)
}

fn del(client: u32, key: &str, start: u64, end: u64) -> Op {
    op(client, OpKind::Delete, key, None, start, end)
}

fn maybe(mut o: Op, status: Option<u16>) -> Op {
    o.outcome = OpOutcome::Maybe;
    o.status = status;
    o.error = Some("not enough replicas: node 1: timed out".into());
    o
}

fn history(ops: Vec<Op>) -> History {
    History {
        meta: Meta::default(),
        ops,
        ..History::default()
    }
}

fn fault(kind: FaultKind, node: usize, start: u64, end: u64) -> FaultEvent {
    FaultEvent {
        kind,
        targets: vec![node],
        start_us: start * 1000,
        end_us: end * 1000,
        detail: String::new(),
        clock_offset_ms: None,
    }
}

/// A read after an acknowledged write that returns it, or something as
/// new (a concurrent write), is clean.
#[test]
fn reading_the_newest_write_is_clean() {
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        get(2, "k", Some("a"), 11, 12),
        put(1, "k", "b", 20, 30),
        put(2, "k", "c", 25, 35),
        get(3, "k", Some("b"), 40, 41),
        get(3, "k", Some("c"), 42, 43),
        get(3, "k", None, 1, 2),
    ]));
    assert_eq!(f, Findings::default(), "{f:#?}");
    assert_eq!(f.violations(), 0);
}

/// A quorum read that returns a value older than an acknowledged write
/// loses that write; only the newest acknowledged write counts, once.
#[test]
fn an_older_value_after_an_acked_write_is_a_lost_write() {
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        put(1, "k", "b", 20, 30),
        put(1, "k", "c", 40, 50),
        get(2, "k", Some("a"), 60, 61),
        get(3, "k", Some("b"), 62, 63),
    ]));
    assert_eq!(f.lost.count, 1, "{f:#?}");
    assert!(
        f.lost.examples[0].0.contains("k=c"),
        "{:?}",
        f.lost.examples
    );
    assert_eq!(f.ryw.count, 0);
    assert_eq!(f.violations(), 1);
}

/// 404 after an acknowledged put is a loss, unless a delete that may have
/// been applied (even one without an answer) could be as new.
#[test]
fn not_found_needs_a_delete_as_new() {
    let lost = check(&history(vec![
        del(1, "k", 1, 5),
        put(1, "k", "a", 10, 20),
        get(2, "k", None, 30, 31),
    ]));
    assert_eq!(
        lost.lost.count, 1,
        "a delete that ended before the put began: {lost:#?}"
    );
    let concurrent = check(&history(vec![
        put(1, "k", "a", 0, 10),
        del(2, "k", 1, 5),
        get(2, "k", None, 20, 21),
    ]));
    assert_eq!(concurrent.lost.count, 0, "{concurrent:#?}");
    let excused = check(&history(vec![
        put(1, "k", "a", 0, 10),
        maybe(del(2, "k", 15, 18), Some(504)),
        get(3, "k", None, 20, 21),
    ]));
    assert_eq!(excused.lost.count, 0, "{excused:#?}");
    let failed_delete = {
        let mut d = del(2, "k", 15, 18);
        d.outcome = OpOutcome::Fail;
        d.status = None;
        d
    };
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        failed_delete,
        get(3, "k", None, 20, 21),
    ]));
    assert_eq!(f.lost.count, 1, "a failed delete explains nothing: {f:#?}");
}

/// An acknowledged delete is a write too: reading the value it deleted
/// afterwards resurrects it, and the delete is lost.
#[test]
fn a_resurrected_value_loses_the_delete() {
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        del(1, "k", 20, 30),
        get(2, "k", Some("a"), 40, 41),
    ]));
    assert_eq!(f.lost.count, 1, "{f:#?}");
    assert!(f.lost.examples[0].0.contains("delete"));
}

/// Reads that need not meet the write (ack 1 of 3 on both sides) are not
/// judged; a from=1 pair always meets.
#[test]
fn only_intersecting_quorums_are_judged() {
    let mut w = put(1, "k", "b", 20, 30);
    let mut r = get(2, "k", Some("a"), 40, 41);
    (w.ack, w.from, r.ack, r.from) = (1, 3, 1, 3);
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        w.clone(),
        r.clone(),
    ]));
    assert_eq!(f.lost.count, 0, "{f:#?}");
    assert!(!intersects(&w, &r));
    (w.ack, w.from, r.ack, r.from) = (1, 1, 1, 1);
    let mut first = put(1, "k", "a", 0, 10);
    (first.ack, first.from) = (1, 1);
    let f = check(&history(vec![first, w.clone(), r.clone()]));
    assert_eq!(f.lost.count, 1, "{f:#?}");
    // A 3/3 write meets a 1/3 read; a 2/3 write meets a read of a 2-node
    // prefix only if the read asks both (one copy at least is inside).
    assert!(quorums_intersect(3, 3, 1, 3));
    assert!(quorums_intersect(2, 3, 2, 2));
    assert!(!quorums_intersect(2, 3, 1, 2));
    assert!(quorums_intersect(3, 3, 1, 2));
}

/// A write without an answer may land any time after it started: reading
/// it later is fine, even after an acknowledged write.
#[test]
fn maybe_writes_explain_reads_but_are_not_required() {
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        maybe(put(2, "k", "m", 12, 15), None),
        put(1, "k", "b", 20, 30),
        get(3, "k", Some("m"), 40, 41),
        maybe(put(2, "k", "n", 50, 55), Some(504)),
        get(3, "k", Some("b"), 60, 61),
    ]));
    assert_eq!(f.violations(), 0, "{f:#?}");
}

/// Values nobody wrote, values of failed writes and values written after
/// the read are impossible.
#[test]
fn impossible_reads_are_flagged() {
    let mut failed = put(1, "k", "f", 0, 1);
    failed.outcome = OpOutcome::Fail;
    failed.status = None;
    let f = check(&history(vec![
        failed,
        put(1, "k", "late", 50, 60),
        get(2, "k", Some("ghost"), 10, 11),
        get(2, "k", Some("f"), 12, 13),
        get(2, "k", Some("late"), 20, 21),
        put(1, "other", "o", 0, 1),
        get(2, "k", Some("o"), 22, 23),
    ]));
    assert_eq!(f.impossible.count, 4, "{f:#?}");
}

/// A client that misses its own acknowledged write breaks read-your-writes
/// (and loses the write); missing another client's write is only a loss.
#[test]
fn read_your_writes() {
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        put(1, "k", "b", 20, 30),
        get(1, "k", Some("a"), 40, 41),
    ]));
    assert_eq!((f.ryw.count, f.lost.count), (1, 1), "{f:#?}");
    let f = check(&history(vec![
        put(1, "k", "a", 0, 10),
        put(2, "k", "b", 20, 30),
        get(1, "k", Some("a"), 40, 41),
    ]));
    assert_eq!((f.ryw.count, f.lost.count), (0, 1), "{f:#?}");
}

/// A loss across a wipe of the write's replica is a violation like any
/// other (a wiped node restarted with `--refill` answers no read before
/// its refill), in a run read and in a final read alike; a read by the
/// writing client counts in read-your-writes too.
#[test]
fn a_loss_across_a_wiped_replica_is_a_violation() {
    let mut h = history(vec![
        put(1, "k", "a", 0, 10),
        put(1, "k", "b", 20, 30),
        get(2, "k", Some("a"), 40, 41),
    ]);
    h.faults.push(fault(FaultKind::Wipe, 1, 32, 35));
    let f = check(&h);
    assert_eq!((f.lost.count, f.ryw.count), (1, 0), "{f:#?}");
    assert!(f.violations() >= 1, "{f:#?}");
    // The writing client's own read: lost and read-your-writes both.
    h.ops[2].client = 1;
    let f = check(&h);
    assert_eq!((f.lost.count, f.ryw.count), (1, 1), "{f:#?}");
    assert!(f.violations() >= 2, "{f:#?}");
    // A final read after the wipe.
    h.ops[2].client = 2;
    h.ops[2].phase = Phase::Final;
    let f = check(&h);
    assert_eq!((f.lost.count, f.ryw.count), (1, 0), "{f:#?}");
    assert!(f.violations() >= 1, "{f:#?}");
    // The same history reading "b" is clean, wipe or not.
    h.ops[2].value = Some("b".into());
    assert_eq!(check(&h).violations(), 0);
}

/// A loss to a write through another node that ended less than 1 ms
/// before the lost one started is a violation (the coordinator re-stamps a
/// write a replica refuses as older), as it is through the same node or
/// 1 ms apart.
#[test]
fn a_loss_within_one_millisecond_is_a_violation() {
    let mut seen = put(1, "k", "a", 100, 110);
    seen.node = 2;
    seen.end_us = 110_000;
    let mut lost = put(2, "k", "b", 0, 0);
    (lost.start_us, lost.end_us) = (110_500, 111_000);
    let read = get(3, "k", Some("a"), 120, 121);
    let f = check(&history(vec![seen.clone(), lost.clone(), read.clone()]));
    assert_eq!((f.lost.count, f.ryw.count), (1, 0), "{f:#?}");
    assert!(f.violations() >= 1, "{f:#?}");
    // The client that wrote "b" reading "a" misses its own write too.
    let mut own = read.clone();
    own.client = lost.client;
    let f = check(&history(vec![seen.clone(), lost.clone(), own]));
    assert_eq!((f.lost.count, f.ryw.count), (1, 1), "{f:#?}");
    let mut same_node = seen.clone();
    same_node.node = lost.node;
    let f = check(&history(vec![same_node, lost.clone(), read.clone()]));
    assert_eq!(f.lost.count, 1, "{f:#?}");
    (lost.start_us, lost.end_us) = (111_000, 112_000);
    let f = check(&history(vec![seen.clone(), lost.clone(), read.clone()]));
    assert_eq!(f.lost.count, 1, "{f:#?}");
    // Reading the newer write is clean.
    let mut fresh = read;
    fresh.value = Some("b".into());
    assert_eq!(check(&history(vec![seen, lost, fresh])).violations(), 0);
}

/// A loss under a clock jump (a version stamped while a node was ahead,
/// until it caught up; or the lost write stamped while its node was
/// behind) is a violation (the coordinator re-stamps a write a replica
/// refuses as older), as the same loss without the jump is.
#[test]
fn a_loss_under_clock_skew_is_a_violation() {
    let jump = |offset_ms: i64, start, end| FaultEvent {
        clock_offset_ms: Some(offset_ms),
        ..fault(FaultKind::Clock, 0, start, end)
    };
    let ops = vec![
        put(1, "k", "a", 100, 110),
        put(2, "k", "b", 200, 210),
        get(3, "k", Some("a"), 300, 301),
    ];
    let mut h = history(ops);
    assert_eq!(check(&h).lost.count, 1);
    // "a" written while a clock was 5 s ahead (healed at 50 ms, so in effect until 5050).
    // "b" written while a clock was behind; a jump that ended before either.
    for faults in [
        vec![jump(5_000, 10, 50)],
        vec![jump(-5_000, 190, 250)],
        vec![jump(20, 10, 50)],
        vec![jump(-5_000, 10, 50)],
    ] {
        h.faults = faults;
        let f = check(&h);
        assert_eq!((f.lost.count, f.ryw.count), (1, 0), "{f:#?}");
        assert!(f.violations() >= 1, "{f:#?}");
    }
    // The client that wrote "b" reading "a" under the jump: read-your-writes too.
    h.faults = vec![jump(5_000, 10, 50)];
    h.ops[2].client = 2;
    let f = check(&h);
    assert_eq!((f.lost.count, f.ryw.count), (1, 1), "{f:#?}");
    // Reading "b" is clean under the jump.
    h.ops[2].value = Some("b".into());
    assert_eq!(check(&h).violations(), 0);
}

/// Error answers must be 5xx with a reason; a 4xx is a bug; a hang is a
/// violation unless its node was paused.
#[test]
fn answers_and_hangs() {
    let mut bad_request = put(1, "k", "a", 0, 1);
    bad_request.status = Some(400);
    bad_request.outcome = OpOutcome::Fail;
    bad_request.error = Some("bad ack".into());
    let mut no_reason = maybe(put(1, "k", "b", 2, 3), Some(503));
    no_reason.error = Some(" ".into());
    let with_reason = maybe(put(1, "k", "c", 4, 5), Some(504));
    let mut hang = maybe(put(1, "k", "d", 10, 4010), None);
    hang.outcome = OpOutcome::Hang;
    let mut paused_hang = hang.clone();
    paused_hang.node = 2;
    paused_hang.value = Some("e".into());
    let mut h = history(vec![bad_request, no_reason, with_reason, hang, paused_hang]);
    h.faults.push(fault(FaultKind::Pause, 2, 500, 2500));
    let f = check(&h);
    assert_eq!(f.bad_answers.count, 2, "{f:#?}");
    assert_eq!((f.hangs.count, f.hangs_excused), (1, 1), "{f:#?}");
}

/// Replicas that disagree, or a convergence that timed out, are
/// violations; identical copies (including absent everywhere) are not.
#[test]
fn convergence_and_crashes() {
    let copy = |key: &str, node, state| Copy {
        key: key.into(),
        node,
        at_us: 0,
        state,
    };
    let mut h = history(vec![]);
    h.copies = vec![
        copy(
            "a",
            0,
            CopyState::Value {
                ts: 5,
                value: "x".into(),
            },
        ),
        copy(
            "a",
            1,
            CopyState::Value {
                ts: 5,
                value: "x".into(),
            },
        ),
        copy("b", 0, CopyState::Absent),
        copy("b", 1, CopyState::Absent),
        copy("c", 0, CopyState::Tombstone { ts: 9 }),
        copy(
            "c",
            1,
            CopyState::Value {
                ts: 5,
                value: "x".into(),
            },
        ),
        copy("d", 0, CopyState::Error("refused".into())),
        copy("d", 1, CopyState::Error("refused".into())),
    ];
    h.convergence = Some(Convergence {
        converged: true,
        time_ms: 10,
        readings: 1,
        repair: "test".into(),
        collected_tombstones: 0,
        collected_expired: 0,
    });
    let f = check(&h);
    assert_eq!(f.divergent.count, 2, "{f:#?}");
    assert_eq!(f.same_timestamp.count, 0, "{f:#?}");
    assert!(!f.not_converged);
    // Two values under one timestamp (a node id held twice): a finding of
    // its own, as is a value and a tombstone under one timestamp.
    let mut two = history(vec![]);
    two.copies = vec![
        copy(
            "e",
            0,
            CopyState::Value {
                ts: 7,
                value: "x".into(),
            },
        ),
        copy(
            "e",
            1,
            CopyState::Value {
                ts: 7,
                value: "y".into(),
            },
        ),
        copy(
            "e",
            2,
            CopyState::Value {
                ts: 7,
                value: "x".into(),
            },
        ),
        copy("f", 0, CopyState::Tombstone { ts: 8 }),
        copy(
            "f",
            1,
            CopyState::Value {
                ts: 8,
                value: "x".into(),
            },
        ),
    ];
    let f = check(&two);
    assert_eq!(f.same_timestamp.count, 2, "{f:#?}");
    assert!(
        f.same_timestamp.examples[0].0.contains("timestamp 7"),
        "{f:#?}"
    );
    assert_eq!(f.violations(), 4, "{f:#?}");
    h.copies.clear();
    h.convergence = Some(Convergence {
        converged: false,
        time_ms: 60_000,
        readings: 9,
        repair: "test".into(),
        collected_tombstones: 0,
        collected_expired: 0,
    });
    h.crashes.push(Crash {
        node: 2,
        at_us: 1,
        status: "signal: 6 (SIGABRT)".into(),
    });
    let f = check(&h);
    assert!(f.not_converged);
    assert_eq!(f.crashes.count, 1);
    assert_eq!(f.violations(), 2);
}

/// Final reads are tallied per workload; a key never answered at the end
/// is a violation (nothing could be checked); a final read that misses an
/// acknowledged write is a loss like any read.
#[test]
fn final_reads() {
    let fin = |o: Op| Op {
        phase: Phase::Final,
        workload: Workload::Set,
        client: 99,
        ..o
    };
    let mut unanswered = fin(get(99, "s3", None, 100, 101));
    unanswered.outcome = OpOutcome::Fail;
    unanswered.status = None;
    let f = check(&history(vec![
        put(1, "s1", "v1", 0, 10),
        put(1, "s2", "v2", 0, 10),
        put(1, "s3", "v3", 0, 10),
        fin(get(99, "s1", Some("v1"), 100, 101)),
        fin(get(99, "s2", None, 100, 101)),
        unanswered,
    ]));
    let set = &f.final_reads[&Workload::Set];
    assert_eq!(
        (set.keys, set.found, set.not_found, set.unanswered),
        (3, 1, 1, 1)
    );
    assert_eq!((f.lost.count, f.final_unanswered.count), (1, 1), "{f:#?}");
    assert_eq!(f.ryw.count, 0, "final reads are not a client's own reads");
}

/// A value copy whose timestamp's node bits name an id its write's
/// coordinator never held is flagged (another node issues that id's
/// timestamps: the planted `joined-takes-id-zero`); the same copy stamped
/// with one of the coordinator's ids passes, padding is not part of the
/// value, copies of unknown values, tombstones and slots without a known
/// id are not judged, and a history without `node_id` lines skips the rule.
#[test]
fn a_stamp_naming_another_node_is_flagged() {
    let bits = ataman_node::hlc::NODE_BITS;
    let stamp = |ms: u64, id: u64| (ms << bits) | id;
    let via = |node: usize, o: Op| Op { node, ..o };
    let copy = |key: &str, node, ts, value: &str| Copy {
        key: key.into(),
        node,
        at_us: 0,
        state: CopyState::Value {
            ts,
            value: value.into(),
        },
    };
    let mut h = history(vec![
        via(0, put(1, "r1", "c1-1", 0, 10)),
        via(3, put(2, "r1", "c2-1", 0, 10)),
        via(2, put(3, "r2", "c3-1", 0, 10)),
        via(5, put(4, "r3", "c4-1", 0, 10)),
    ]);
    h.node_ids = vec![(0, 0), (1, 1), (2, 2), (3, 3), (3, 6)];
    h.copies = vec![
        copy("r1", 0, stamp(40, 0), "c1-1"),
        copy("r1", 1, stamp(40, 3), "c2-1.."),
        copy("r1", 2, stamp(41, 6), "c2-1"),
        copy("r2", 0, stamp(42, 2), "c3-1"),
        // Slot 5's ids are not known: not judged.
        copy("r3", 0, stamp(42, 0), "c4-1"),
        // A value no put wrote (the impossible-read rule's business).
        copy("r2", 1, stamp(42, 0), "c9-9"),
        Copy {
            key: "r2".into(),
            node: 2,
            at_us: 0,
            state: CopyState::Tombstone { ts: stamp(43, 4) },
        },
    ];
    let f = check(&h);
    assert_eq!(f.foreign_stamps.count, 0, "{f:#?}");
    // The joined slot 3 stamping with node 0's id.
    h.copies.push(copy("r1", 3, stamp(44, 0), "c2-1"));
    let f = check(&h);
    assert_eq!(f.foreign_stamps.count, 1, "{f:#?}");
    assert!(
        f.foreign_stamps.examples[0].0.contains("carries node id 0"),
        "{f:#?}"
    );
    assert!(f.violations() >= 1);
    h.node_ids.clear();
    assert_eq!(check(&h).foreign_stamps.count, 0);
}
