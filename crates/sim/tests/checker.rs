//! The checker on hand-built histories: each violation is reported when it
//! is there, and only then.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

use ataman_node::cluster::placement;
use ataman_node::peer::frame::Stamped;
use ataman_sim::check::{ViolationKind, check};
use ataman_sim::history::{Happening, History, Op, OpKind, OpResult};
use ataman_sim::node::{Reopened, State};
use ataman_sim::sim::node_names;

fn history(nodes: usize, replicas: usize) -> History {
    History {
        nodes,
        replicas,
        seeds: placement::seeds(&node_names(nodes)),
        ..History::default()
    }
}

fn v(ts: u64, value: &str) -> Stamped {
    Stamped::value(ts, value.as_bytes().to_vec())
}

fn put(
    id: usize,
    key: &str,
    value: &str,
    ts: u64,
    ack: usize,
    at: (u64, u64),
    result: OpResult,
) -> Op {
    Op {
        id,
        client: 0,
        coordinator: 0,
        key: key.as_bytes().to_vec(),
        kind: OpKind::Put(value.as_bytes().to_vec()),
        ack,
        from: 3,
        ts: Some(ts),
        earlier_ts: Vec::new(),
        deadline_ms: None,
        ttl_ms: None,
        invoked_ms: at.0,
        completed_ms: Some(at.1),
        result,
    }
}

fn get(id: usize, key: &str, ack: usize, at: (u64, u64), got: Option<Stamped>) -> Op {
    Op {
        id,
        client: 1,
        coordinator: 1,
        key: key.as_bytes().to_vec(),
        kind: OpKind::Get,
        ack,
        from: 3,
        ts: None,
        earlier_ts: Vec::new(),
        deadline_ms: None,
        ttl_ms: None,
        invoked_ms: at.0,
        completed_ms: Some(at.1),
        result: OpResult::Read(got),
    }
}

fn state(entries: &[(&str, Stamped)]) -> State {
    entries
        .iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.clone()))
        .collect()
}

fn kinds(h: &History) -> Vec<ViolationKind> {
    check(h).violations.iter().map(|v| v.kind).collect()
}

/// A write acknowledged, read back under intersecting quorums, held by every replica: clean.
#[test]
fn clean_history() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 2, (0, 5), OpResult::Written));
    h.ops.push(get(1, "k", 2, (6, 9), Some(v(10, "a"))));
    h.final_states = vec![state(&[("k", v(10, "a"))]); 3];
    let report = check(&h);
    assert!(report.ok(), "{}", report.summary(10));
    assert_eq!(report.ryw_pairs, 1);
    assert_eq!((report.acknowledged_writes, report.reads), (1, 1));
}

/// An acknowledged write gone from every node is lost; one overwritten by a newer version is not.
#[test]
fn lost_write() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 1, (0, 5), OpResult::Written));
    h.final_states = vec![State::new(); 3];
    assert_eq!(kinds(&h), vec![ViolationKind::LostWrite]);
    h.ops.push(put(
        1,
        "k",
        "b",
        20,
        1,
        (6, 8),
        OpResult::Failed("504".into()),
    ));
    h.final_states = vec![state(&[("k", v(20, "b"))]); 3];
    assert!(check(&h).ok());
}

/// The newest version at the write's timestamp with another value: lost, and a phantom.
#[test]
fn same_timestamp_other_value() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 1, (0, 5), OpResult::Written));
    h.final_states = vec![state(&[("k", v(10, "b"))]); 3];
    let mut k = kinds(&h);
    k.sort();
    assert_eq!(
        k,
        vec![
            ViolationKind::LostWrite,
            ViolationKind::PhantomRead,
            ViolationKind::PhantomRead,
            ViolationKind::PhantomRead
        ]
    );
}

/// Read-your-writes is checked only for reads started after the write's
/// answer and with intersecting quorums.
#[test]
fn stale_reads() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 2, (0, 5), OpResult::Written));
    h.final_states = vec![state(&[("k", v(10, "a"))]); 3];
    // ack 2 + 2 > 3, started after the answer, missed it.
    h.ops.push(get(1, "k", 2, (6, 9), None));
    assert_eq!(kinds(&h), vec![ViolationKind::StaleRead]);
    // ack 2 + 1 = 3: quorums need not intersect.
    h.ops[1] = get(1, "k", 1, (6, 9), None);
    assert!(check(&h).ok());
    assert_eq!(check(&h).ryw_pairs, 0);
    // Started in the millisecond of the answer: concurrent.
    h.ops[1] = get(1, "k", 3, (5, 9), None);
    assert!(check(&h).ok());
    // An older version is as stale as none.
    h.ops
        .insert(0, put(0, "k", "old", 5, 1, (0, 1), OpResult::Written));
    h.ops[1].id = 1;
    h.ops[2] = get(2, "k", 3, (6, 9), Some(v(5, "old")));
    assert_eq!(kinds(&h), vec![ViolationKind::StaleRead]);
}

/// A replica that acknowledged a write must hold it (or newer) after every restart and at the end.
#[test]
fn lost_on_replica() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 3, (0, 5), OpResult::Written));
    h.final_states = vec![state(&[("k", v(10, "a"))]); 3];
    h.happenings.push(Happening::ReplicaWrote {
        at_ms: 3,
        node: 1,
        key: b"k".to_vec(),
        ts: 10,
    });
    h.happenings.push(Happening::Restart {
        at_ms: 20,
        node: 1,
        reopened: Reopened::Clean,
        state: State::new(),
    });
    assert_eq!(kinds(&h), vec![ViolationKind::LostOnReplica]);
    // A restart on another node, or one that kept it, is fine.
    if let Happening::Restart { state: s, .. } = &mut h.happenings[1] {
        *s = state(&[("k", v(10, "a"))]);
    }
    assert!(check(&h).ok());
    // At the end too.
    h.final_states[1] = State::new();
    assert!(kinds(&h).contains(&ViolationKind::LostOnReplica));
}

/// A restart that needed force_recovery or a new disk is unrecoverable; a
/// wiped disk restarts the replica's ledger.
#[test]
fn unrecoverable_restart() {
    let mut h = history(3, 3);
    h.final_states = vec![State::new(); 3];
    h.happenings.push(Happening::ReplicaWrote {
        at_ms: 3,
        node: 2,
        key: b"k".to_vec(),
        ts: 10,
    });
    h.happenings.push(Happening::Restart {
        at_ms: 20,
        node: 2,
        reopened: Reopened::Wiped("bad".into()),
        state: State::new(),
    });
    assert_eq!(kinds(&h), vec![ViolationKind::Unrecoverable]);
    if let Happening::Restart { reopened, .. } = &mut h.happenings[1] {
        *reopened = Reopened::Forced("torn".into());
    }
    let mut k = kinds(&h);
    k.sort();
    // Forced keeps the ledger: the write is missing at the restart and at the end.
    assert_eq!(
        k,
        vec![
            ViolationKind::LostOnReplica,
            ViolationKind::LostOnReplica,
            ViolationKind::Unrecoverable
        ]
    );
}

/// Two writes of one key with one timestamp are flagged; of two keys, not.
/// Nothing sets a reused timestamp or what it leads to aside.
#[test]
fn reused_timestamps() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 1, (0, 5), OpResult::Written));
    h.ops
        .push(put(1, "j", "b", 10, 1, (0, 5), OpResult::Written));
    h.final_states = vec![state(&[("j", v(10, "b")), ("k", v(10, "a"))]); 3];
    assert!(check(&h).ok());
    h.ops
        .push(put(2, "k", "c", 10, 1, (6, 7), OpResult::Written));
    let report = check(&h);
    let mut k: Vec<ViolationKind> = report.violations.iter().map(|v| v.kind).collect();
    k.sort();
    // op 2's "c" lost to "a" at the same timestamp.
    assert_eq!(
        k,
        vec![ViolationKind::LostWrite, ViolationKind::TimestampReused]
    );
    assert!(!report.ok());
    // A refused write wrote nothing: what only it wrote is a phantom.
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 1, (0, 0), OpResult::Refused));
    h.final_states = vec![state(&[("k", v(10, "a"))]); 3];
    assert_eq!(kinds(&h), vec![ViolationKind::PhantomRead; 3]);
}

/// Replicas must agree at the end, and a non-replica must hold nothing.
#[test]
fn divergence() {
    let mut h = history(5, 3);
    h.ops
        .push(put(0, "k", "a", 10, 1, (0, 5), OpResult::Written));
    h.ops
        .push(put(1, "k", "b", 20, 1, (6, 7), OpResult::Unknown));
    let replicas = placement::rank_with_seeds(&h.seeds, b"k", 3);
    let outsider = (0..5).find(|n| !replicas.contains(n)).unwrap();
    let mut states = vec![State::new(); 5];
    for &r in &replicas {
        states[r] = state(&[("k", v(20, "b"))]);
    }
    h.final_states = states.clone();
    assert!(check(&h).ok(), "{}", check(&h).summary(5));
    states[replicas[2]] = state(&[("k", v(10, "a"))]);
    h.final_states = states.clone();
    assert_eq!(kinds(&h), vec![ViolationKind::Diverged]);
    states[replicas[2]] = state(&[("k", v(20, "b"))]);
    states[outsider] = state(&[("k", v(20, "b"))]);
    h.final_states = states;
    assert_eq!(kinds(&h), vec![ViolationKind::Diverged]);
}

/// A cluster that did not settle is reported.
#[test]
fn stuck() {
    let mut h = history(3, 3);
    h.final_states = vec![State::new(); 3];
    h.happenings.push(Happening::Stuck {
        at_ms: 60_000,
        what: "2 hints".into(),
    });
    assert_eq!(kinds(&h), vec![ViolationKind::Stuck]);
}

/// Expiry: deadlines are Unix ms; virtual ms start at `EPOCH_MS`.
fn expiring(ts: u64, value: &str, deadline_ms: u64) -> Stamped {
    Stamped {
        deadline_ms: Some(deadline_ms),
        ..v(ts, value)
    }
}

/// An expiring write read as a tombstone at its timestamp once expired is
/// no stale read, no phantom and no lost write; its value read long past
/// the deadline plus the skew bound is an expired read, and within the
/// bound it is not.
#[test]
fn expired_value_reads_as_not_found_and_not_past_the_skew_bound() {
    use ataman_sim::check::EXPIRY_SKEW_MS;
    use ataman_sim::config::EPOCH_MS;
    let deadline = EPOCH_MS + 100;
    let mut h = history(3, 3);
    let mut w = put(0, "k", "a", 10, 2, (0, 5), OpResult::Written);
    w.deadline_ms = Some(deadline);
    h.ops.push(w);
    h.ops
        .push(get(1, "k", 2, (200, 201), Some(Stamped::tombstone(10))));
    // Within the skew bound a coordinator behind may still show it.
    let within = 100 + EXPIRY_SKEW_MS - 1;
    h.ops.push(get(
        2,
        "k",
        2,
        (within, within),
        Some(expiring(10, "a", deadline)),
    ));
    h.final_states = vec![state(&[("k", Stamped::tombstone(10))]); 3];
    let report = check(&h);
    assert!(report.ok(), "{}", report.summary(10));
    let past = 100 + EXPIRY_SKEW_MS;
    h.ops.push(get(
        3,
        "k",
        2,
        (past, past),
        Some(expiring(10, "a", deadline)),
    ));
    assert_eq!(kinds(&h), vec![ViolationKind::ExpiredRead]);
}

/// An older version read over an expired acknowledged write (intersecting
/// quorums), or left as the newest at the end, is a resurrection.
#[test]
fn older_version_over_an_expired_write_is_a_resurrection() {
    use ataman_sim::config::EPOCH_MS;
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "old", 5, 3, (0, 2), OpResult::Written));
    let mut w = put(1, "k", "a", 10, 2, (3, 5), OpResult::Written);
    w.deadline_ms = Some(EPOCH_MS + 100);
    h.ops.push(w);
    h.ops.push(get(2, "k", 2, (300, 301), Some(v(5, "old"))));
    h.final_states = vec![state(&[("k", Stamped::tombstone(10))]); 3];
    assert_eq!(kinds(&h), vec![ViolationKind::Resurrection]);
    h.ops.pop();
    h.final_states = vec![state(&[("k", v(5, "old"))]); 3];
    assert_eq!(kinds(&h), vec![ViolationKind::Resurrection]);
}

/// Premature expiry: a PUT invoked at 0 with `ttl_ms` 1,000 (deadline
/// stamped correctly or not) read as expired at 999 ms is flagged; at
/// 1,000 ms it is not; with a clock skew of 100 ms in the run the slack is
/// 200 ms (stamping clock behind, reading clock ahead), so 800 passes and
/// 799 does not. A tombstone at another timestamp (a delete) is no expiry.
#[test]
fn expired_before_the_ttl_is_premature() {
    use ataman_sim::config::EPOCH_MS;
    let early = |at: u64, skew: u64| {
        let mut h = history(3, 3);
        h.skew_ms_max = skew;
        let mut w = put(0, "k", "a", 10, 2, (0, 5), OpResult::Written);
        w.ttl_ms = Some(1_000);
        // What a coordinator stamping a quarter of the TTL records.
        w.deadline_ms = Some(EPOCH_MS + 250);
        h.ops.push(w);
        h.ops
            .push(get(1, "k", 2, (at, at), Some(Stamped::tombstone(10))));
        h.final_states = vec![state(&[("k", Stamped::tombstone(10))]); 3];
        h
    };
    assert_eq!(kinds(&early(999, 0)), vec![ViolationKind::PrematureExpiry]);
    assert_eq!(kinds(&early(300, 0)), vec![ViolationKind::PrematureExpiry]);
    assert!(check(&early(1_000, 0)).ok());
    assert!(check(&early(800, 100)).ok());
    assert_eq!(
        kinds(&early(799, 100)),
        vec![ViolationKind::PrematureExpiry]
    );
    let detail = &check(&early(300, 0)).violations[0].detail;
    assert!(detail.contains("ttl_ms 1000"), "{detail}");
    // A delete's tombstone read early is not an expiry.
    let mut h = early(300, 0);
    h.ops
        .push(put(2, "k", "b", 20, 2, (6, 8), OpResult::Written));
    h.ops[2].kind = OpKind::Delete;
    h.ops
        .push(get(3, "k", 2, (9, 9), Some(Stamped::tombstone(20))));
    h.ops.remove(1);
    for (i, op) in h.ops.iter_mut().enumerate() {
        op.id = i;
    }
    h.final_states = vec![state(&[("k", Stamped::tombstone(20))]); 3];
    let report = check(&h);
    assert!(report.ok(), "{}", report.summary(10));
}

fn delete(id: usize, key: &str, ts: u64, at: (u64, u64)) -> Op {
    Op {
        kind: OpKind::Delete,
        ..put(id, key, "", ts, 2, at, OpResult::Written)
    }
}

/// With collection on, a key whose newest version is a tombstone may be
/// absent everywhere, on a replica that acknowledged it, and in a read;
/// without it that absence is a lost write; and an older value back after
/// the collection is reported either way.
#[test]
fn collected_tombstone_is_absence_but_an_older_value_back_is_not() {
    let mut h = history(3, 3);
    h.ops
        .push(put(0, "k", "a", 10, 3, (0, 5), OpResult::Written));
    h.ops.push(delete(1, "k", 20, (6, 8)));
    h.ops.push(get(2, "k", 2, (9, 12), None));
    h.happenings.push(Happening::ReplicaWrote {
        at_ms: 7,
        node: 0,
        key: b"k".to_vec(),
        ts: 20,
    });
    h.final_states = vec![State::new(); 3];
    assert!(
        kinds(&h).contains(&ViolationKind::LostWrite),
        "without collection an absent tombstone is lost: {:?}",
        kinds(&h)
    );
    h.collects = true;
    assert!(check(&h).ok(), "{:?}", kinds(&h));
    // The value the delete covered, back on one replica.
    h.final_states[2] = state(&[("k", v(10, "a"))]);
    let found = kinds(&h);
    assert!(found.contains(&ViolationKind::LostWrite), "{found:?}");
    assert!(found.contains(&ViolationKind::Diverged), "{found:?}");
    // And in a read after the delete was acknowledged.
    h.final_states[2] = State::new();
    h.ops.push(get(3, "k", 2, (13, 15), Some(v(10, "a"))));
    assert_eq!(kinds(&h), vec![ViolationKind::StaleRead]);
}
