//! The checker: judges a [`History`] against what the API promises
//! (docs/API.md, "Replication"), knowing nothing of how the run was made.
//!
//! | violation | the promise |
//! | --- | --- |
//! | [`ViolationKind::LostWrite`] | a write answered 201/202 is never lost: at the end the newest version of its key, over all nodes, is it or newer |
//! | [`ViolationKind::LostOnReplica`] | a replica acknowledges a write only once it is durable: after every restart, and at the end, the replica holds it or newer |
//! | [`ViolationKind::StaleRead`] | read-your-writes when quorums intersect: a read started after a write was acknowledged, with `ack_w + ack_r > max(from_w, from_r)`, returns it or newer, and not a version of an acknowledged write that ended before it began (when the two writes' quorums meet) |
//! | [`ViolationKind::PhantomRead`] | every version read or stored was written by some client |
//! | [`ViolationKind::TimestampReused`] | no two writes of one key carry the same timestamp |
//! | [`ViolationKind::Diverged`] | after the faults heal and the repairs run, every replica of a key holds the same newest version, and no other node holds it |
//! | [`ViolationKind::Unrecoverable`] | a restarted engine opens on its disk without `force_recovery` |
//! | [`ViolationKind::Stuck`] | once healed, the cluster finishes its requests, messages and hints |
//! | [`ViolationKind::ExpiredRead`] | a read completed at `t` returns no value whose every written version had its deadline at or before `t` minus [`EXPIRY_SKEW_MS`] (a coordinator whose clock is behind may still show it within that window) |
//! | [`ViolationKind::PrematureExpiry`] | an expiring write (invoked at `i` with `ttl_ms` `t`) never reads as expired (a tombstone at its timestamp) in a read completed before `i + t - 2 × skew`, `skew` the run's largest clock skew ([`History::skew_ms_max`]): its coordinator's clock may stamp the deadline `skew` early and a replica's clock may be `skew` ahead |
//! | [`ViolationKind::Resurrection`] | an acknowledged expiring write, once expired, reads as not found, never as an older version: no read under intersecting quorums and no final state returns a version older than it |
//!
//! Expiry: an expired version reads as a tombstone at its timestamp (the
//! engine and the coordinator both show it so), so it counts as the same
//! version as the value it was, for durability, phantoms and convergence.
//!
//! "Newer" is by timestamp: the newest timestamp wins. A write through a
//! coordinator whose clock is behind is re-stamped above any newer version
//! a replica holds, so it does not lose to an earlier acknowledged write
//! whose quorum meets its own; the stale-read check holds it to that.

use crate::config::EPOCH_MS;
use crate::history::{Happening, History, Op, OpResult};
use ataman_node::cluster::placement;
use ataman_node::peer::frame::Stamped;
use std::collections::{BTreeMap, BTreeSet};

/// Kinds of violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ViolationKind {
    /// An acknowledged write is gone from every node.
    LostWrite,
    /// A replica lost a write it had acknowledged.
    LostOnReplica,
    /// A read missed a write acknowledged before it under intersecting quorums.
    StaleRead,
    /// A read or a node returned a version nobody wrote.
    PhantomRead,
    /// Two writes of one key got the same timestamp.
    TimestampReused,
    /// Replicas of a key disagree at the end, or a non-replica holds it.
    Diverged,
    /// A restart needed `force_recovery`, or lost the whole disk.
    Unrecoverable,
    /// The cluster did not settle after the faults healed.
    Stuck,
    /// A read returned a value past its deadline plus the skew bound.
    ExpiredRead,
    /// A version older than an acknowledged expiring write came back.
    Resurrection,
    /// An expiring write read as expired before its TTL could have run out.
    PrematureExpiry,
}

/// The skew bound of expiry: nodes' wall clocks are within this of the
/// virtual clock ([`crate::faults::SKEW_MS_MAX`]), so a coordinator may
/// still show a value this long after its deadline.
pub const EXPIRY_SKEW_MS: u64 = crate::faults::SKEW_MS_MAX.unsigned_abs();

/// The same version for comparisons at the end: an expiring value and the
/// tombstone it reads as once expired are one version.
fn settled(v: Option<Stamped>) -> Option<Stamped> {
    v.map(|v| match v.deadline_ms {
        Some(_) => Stamped::tombstone(v.ts),
        None => v,
    })
}

/// Whether a node may hold nothing of `v`'s key instead of `v` at virtual
/// time `at_ms`, the nodes collecting (`History::collects`): `v` is a
/// tombstone, or an expiring value past its deadline on every node's
/// clock; a client cannot tell such a version from its absence (both
/// read 404). What collection gets wrong shows as an *older* version
/// read or held, which the checks still judge.
fn collectable(history: &History, v: &Stamped, at_ms: u64) -> bool {
    history.collects
        && (v.value.is_none()
            || v.deadline_ms
                .is_some_and(|d| d.saturating_add(history.skew_ms_max) <= EPOCH_MS + at_ms))
}

/// Every version some client may have written of each key, with when its
/// write was invoked (virtual ms).
fn versions_by_key(history: &History) -> BTreeMap<&[u8], Vec<(Stamped, u64)>> {
    let mut by_key: BTreeMap<&[u8], Vec<(Stamped, u64)>> = BTreeMap::new();
    for op in &history.ops {
        if op.result != OpResult::Refused {
            let written = op.versions().into_iter().map(|v| (v, op.invoked_ms));
            by_key.entry(&op.key).or_default().extend(written);
        }
    }
    by_key
}

/// One violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What kind.
    pub kind: ViolationKind,
    /// The key it is about, if one.
    pub key: Option<Vec<u8>>,
    /// Which operations, keys, nodes and timestamps.
    pub detail: String,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Every violation, in the order the checks found them.
    pub violations: Vec<Violation>,
    /// Client operations.
    pub ops: usize,
    /// Writes answered 201/202.
    pub acknowledged_writes: usize,
    /// Reads answered 200/404.
    pub reads: usize,
    /// (read, earlier acknowledged write) pairs with intersecting quorums checked.
    pub ryw_pairs: usize,
    /// Restarts checked against what the replica had acknowledged.
    pub restarts: usize,
}

impl Report {
    /// Violations of one kind.
    pub fn count(&self, kind: ViolationKind) -> usize {
        self.violations.iter().filter(|v| v.kind == kind).count()
    }

    /// True when nothing was violated.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The first `n` violations, one per line.
    pub fn summary(&self, n: usize) -> String {
        let mut lines: Vec<String> = self
            .violations
            .iter()
            .take(n)
            .map(|v| format!("{:?}: {}", v.kind, v.detail))
            .collect();
        if self.violations.len() > n {
            lines.push(format!("… and {} more", self.violations.len() - n));
        }
        lines.join("\n")
    }

    fn push(&mut self, kind: ViolationKind, detail: String) {
        self.violations.push(Violation {
            kind,
            key: None,
            detail,
        });
    }

    fn push_key(&mut self, kind: ViolationKind, key: &[u8], detail: String) {
        self.violations.push(Violation {
            kind,
            key: Some(key.to_vec()),
            detail,
        });
    }
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn ts_of(v: &Option<Stamped>) -> Option<u64> {
    v.as_ref().map(|v| v.ts)
}

/// Judges `history`.
pub fn check(history: &History) -> Report {
    let mut report = Report {
        ops: history.ops.len(),
        ..Report::default()
    };
    let written = written_versions(history, &mut report);
    lost_writes(history, &mut report);
    replica_durability(history, &mut report);
    stale_reads(history, &mut report);
    phantoms(history, &written, &mut report);
    expired_reads(history, &written, &mut report);
    premature_expiry(history, &mut report);
    convergence(history, &mut report);
    for h in &history.happenings {
        match h {
            Happening::Restart {
                at_ms,
                node,
                reopened,
                ..
            } if *reopened != crate::node::Reopened::Clean => report.push(
                ViolationKind::Unrecoverable,
                format!("node {node} at {at_ms} ms: {reopened:?}"),
            ),
            Happening::Stuck { at_ms, what } => {
                report.push(ViolationKind::Stuck, format!("at {at_ms} ms: {what}"))
            }
            _ => {}
        }
    }
    report
}

/// Versions clients may have written, by (key, ts).
type Written = BTreeMap<(Vec<u8>, u64), Vec<Stamped>>;

/// Every version some client may have written, by (key, ts); a timestamp
/// given to two writes of one key is a violation (replicas could not agree
/// which is newest; across keys a repeated timestamp does no harm).
fn written_versions(history: &History, report: &mut Report) -> Written {
    let mut written = BTreeMap::new();
    let mut by_ts: BTreeMap<(&[u8], u64), &Op> = BTreeMap::new();
    for op in &history.ops {
        if op.result == OpResult::Refused {
            continue;
        }
        for version in op.versions() {
            if let Some(first) = by_ts.insert((&op.key, version.ts), op) {
                report.push_key(
                ViolationKind::TimestampReused,
                &op.key,
                format!(
                    "ops {} ({} via node {} at {} ms) and {} ({} via node {} at {} ms) both carry ts {}",
                    first.id,
                    show(&first.key),
                    first.coordinator,
                    first.invoked_ms,
                    op.id,
                    show(&op.key),
                    op.coordinator,
                    op.invoked_ms,
                    version.ts
                ),
            );
            }
            written
                .entry((op.key.clone(), version.ts))
                .or_insert_with(Vec::new)
                .push(version);
        }
    }
    written
}

/// The newest version of `key` over all final states.
fn newest_final(history: &History, key: &[u8]) -> Option<Stamped> {
    history
        .final_states
        .iter()
        .filter_map(|s| s.get(key))
        .max_by_key(|v| v.ts)
        .cloned()
}

fn lost_writes(history: &History, report: &mut Report) {
    let versions = versions_by_key(history);
    for op in history.acknowledged_writes() {
        report.acknowledged_writes += 1;
        let Some(mine) = op.version() else {
            continue;
        };
        let newest = newest_final(history, &op.key);
        let kept = match &newest {
            Some(n) if n.ts > mine.ts => true,
            // An expiring value may have expired: a tombstone at its ts.
            Some(n) if n.ts == mine.ts => {
                n.value == mine.value || (mine.deadline_ms.is_some() && n.value.is_none())
            }
            // It, or a dead version written over it, collected
            // everywhere, nothing older left.
            None => versions.get(op.key.as_slice()).is_some_and(|vs| {
                vs.iter()
                    .any(|(v, _)| v.ts >= mine.ts && collectable(history, v, history.final_ms))
            }),
            _ => false,
        };
        let kind = match &newest {
            Some(n) if mine.deadline_ms.is_some() && n.ts < mine.ts => ViolationKind::Resurrection,
            _ => ViolationKind::LostWrite,
        };
        if !kept {
            report.push_key(
                kind,
                &op.key,
                format!(
                    "op {} ({:?} of {} at ts {}, ack {}/{}, answered at {:?} ms): newest at the end is ts {:?}",
                    op.id,
                    op.kind,
                    show(&op.key),
                    mine.ts,
                    op.ack,
                    op.from,
                    op.completed_ms,
                    ts_of(&newest)
                ),
            );
        }
    }
}

/// Every replica holds what it acknowledged, after each restart and at the end.
fn replica_durability(history: &History, report: &mut Report) {
    let mut acked: Vec<BTreeMap<Vec<u8>, u64>> = vec![BTreeMap::new(); history.nodes];
    let versions = versions_by_key(history);
    // The version of `key` at `ts` may be absent at `at_ms` (collected).
    let collected = |key: &[u8], ts: u64, at_ms: u64| {
        versions.get(key).is_some_and(|vs| {
            vs.iter()
                .any(|(v, _)| v.ts == ts && collectable(history, v, at_ms))
        })
    };
    let verify = |node: usize,
                  state: &crate::node::State,
                  acked: &BTreeMap<Vec<u8>, u64>,
                  (when, at_ms): (&str, u64),
                  report: &mut Report| {
        for (key, ts) in acked {
            let have = state.get(key).map(|v| v.ts);
            if have.is_none() && collected(key, *ts, at_ms) {
                continue;
            }
            if have.is_none_or(|h| h < *ts) {
                report.push_key(
                    ViolationKind::LostOnReplica,
                    key,
                    format!(
                        "node {node} {when}: {} acknowledged at ts {ts}, holds {have:?}",
                        show(key)
                    ),
                );
            }
        }
    };
    for h in &history.happenings {
        match h {
            Happening::ReplicaWrote { node, key, ts, .. } => {
                let slot = acked[*node].entry(key.clone()).or_insert(0);
                *slot = (*slot).max(*ts);
            }
            // A cleanup removed a copy the node no longer replicates: it
            // owes nothing it acknowledged up to that version.
            Happening::CopyDropped { node, key, ts, .. }
                if acked[*node].get(key).is_some_and(|a| a <= ts) =>
            {
                acked[*node].remove(key);
            }
            Happening::Restart {
                at_ms,
                node,
                reopened,
                state,
            } => {
                report.restarts += 1;
                if matches!(reopened, crate::node::Reopened::Wiped(_)) {
                    // Reported as unrecoverable; start the ledger over.
                    acked[*node].clear();
                    continue;
                }
                verify(
                    *node,
                    state,
                    &acked[*node],
                    (&format!("restarted at {at_ms} ms"), *at_ms),
                    report,
                );
            }
            _ => {}
        }
    }
    for (node, state) in history.final_states.iter().enumerate() {
        verify(
            node,
            state,
            &acked[node],
            ("at the end", history.final_ms),
            report,
        );
    }
}

fn stale_reads(history: &History, report: &mut Report) {
    let mut writes: BTreeMap<&[u8], Vec<&Op>> = BTreeMap::new();
    let mut by_version: BTreeMap<(&[u8], u64), &Op> = BTreeMap::new();
    for op in history.acknowledged_writes() {
        writes.entry(&op.key).or_default().push(op);
        if let Some(ts) = op.ts {
            by_version.insert((&op.key, ts), op);
        }
    }
    let versions = versions_by_key(history);
    for read in &history.ops {
        let OpResult::Read(got) = &read.result else {
            continue;
        };
        report.reads += 1;
        // A 404 without a version: some dead version of the key, collected.
        let collected_since = |wts: u64| {
            got.is_none()
                && read.completed_ms.is_some_and(|at_ms| {
                    versions.get(read.key.as_slice()).is_some_and(|vs| {
                        vs.iter().any(|(v, invoked_ms)| {
                            v.ts >= wts && *invoked_ms < at_ms && collectable(history, v, at_ms)
                        })
                    })
                })
        };
        let Some(candidates) = writes.get(read.key.as_slice()) else {
            continue;
        };
        for w in candidates {
            let before = w.completed_ms.is_some_and(|c| c < read.invoked_ms);
            let intersect = w.ack + read.ack > w.from.max(read.from);
            if !before || !intersect {
                continue;
            }
            report.ryw_pairs += 1;
            let (Some(wts), got_ts) = (w.ts, ts_of(got)) else {
                continue;
            };
            // What the read returned was written by an acknowledged write
            // that ended before `w` began, under write quorums that meet:
            // `w` must have been stamped above it (re-stamping), whatever
            // the clocks said.
            let older_won = got_ts
                .and_then(|g| by_version.get(&(read.key.as_slice(), g)))
                .is_some_and(|o| {
                    o.id != w.id
                        && o.completed_ms.is_some_and(|c| c < w.invoked_ms)
                        && o.from == w.from
                        && o.ack + w.ack > w.from
                });
            let seen = || {
                format!(
                    "op {} (GET {} ack {}/{} at {} ms via node {}) returned ts {:?}",
                    read.id,
                    show(&read.key),
                    read.ack,
                    read.from,
                    read.invoked_ms,
                    read.coordinator,
                    got_ts
                )
            };
            let why = if older_won {
                Some(format!(
                    "{}, written by an acknowledged write that ended before op {} (ack {}/{}, ts {wts}, invoked at {} ms) began",
                    seen(),
                    w.id,
                    w.ack,
                    w.from,
                    w.invoked_ms
                ))
            } else if got_ts.is_none_or(|g| g < wts) && !collected_since(wts) {
                Some(format!(
                    "{}; op {} (ack {}/{}, ts {wts}) was acknowledged at {:?} ms",
                    seen(),
                    w.id,
                    w.ack,
                    w.from,
                    w.completed_ms
                ))
            } else {
                None
            };
            // An older version read over an acknowledged expiring write:
            // the expired write let it come back.
            let kind = match got_ts {
                Some(g) if g < wts && w.deadline_ms.is_some() => ViolationKind::Resurrection,
                _ => ViolationKind::StaleRead,
            };
            if let Some(why) = why {
                report.push_key(kind, &read.key, why);
            }
        }
    }
}

fn phantoms(history: &History, written: &Written, report: &mut Report) {
    // An expired value reads as a tombstone at its timestamp.
    let known = |key: &[u8], v: &Stamped| {
        written.get(&(key.to_vec(), v.ts)).is_some_and(|vs| {
            vs.contains(v) || (v.value.is_none() && vs.iter().any(|w| w.deadline_ms.is_some()))
        })
    };
    for op in &history.ops {
        if let OpResult::Read(Some(v)) = &op.result
            && !known(&op.key, v)
        {
            report.push_key(
                ViolationKind::PhantomRead,
                &op.key,
                format!("op {} read {} = {v:?}, never written", op.id, show(&op.key)),
            );
        }
    }
    for (node, state) in history.final_states.iter().enumerate() {
        for (key, v) in state {
            if !known(key, v) {
                report.push_key(
                    ViolationKind::PhantomRead,
                    key,
                    format!("node {node} holds {} = {v:?}, never written", show(key)),
                );
            }
        }
    }
}

/// A read answered at `completed_ms` that returned a value every written
/// version of which (at its timestamp) had a deadline more than
/// [`EXPIRY_SKEW_MS`] before then.
fn expired_reads(history: &History, written: &Written, report: &mut Report) {
    for op in &history.ops {
        let (OpResult::Read(Some(v)), Some(done)) = (&op.result, op.completed_ms) else {
            continue;
        };
        if v.value.is_none() {
            continue;
        }
        let wall_ms = EPOCH_MS + done;
        let Some(candidates) = written.get(&(op.key.clone(), v.ts)) else {
            continue;
        };
        let all_expired = !candidates.is_empty()
            && candidates.iter().all(|c| {
                c.deadline_ms
                    .is_some_and(|d| d.saturating_add(EXPIRY_SKEW_MS) <= wall_ms)
            });
        if all_expired {
            report.push_key(
                ViolationKind::ExpiredRead,
                &op.key,
                format!(
                    "op {} (GET {} via node {}, answered at {done} ms = {wall_ms} Unix ms) returned ts {} with deadline {:?}, skew bound {EXPIRY_SKEW_MS} ms",
                    op.id,
                    show(&op.key),
                    op.coordinator,
                    v.ts,
                    v.deadline_ms
                ),
            );
        }
    }
}

/// A read that shows an expiring write as expired (a tombstone at one of
/// its timestamps) although it was answered before the write's TTL could
/// have run out. The deadline is judged from what the client asked (the
/// write's `ttl_ms` from when it was invoked), not from the deadline the
/// coordinator stamped, so a coordinator that stamps too early is caught.
/// Slack: the stamping clock up to `skew` behind the virtual clock, the
/// reading replica's up to `skew` ahead ([`History::skew_ms_max`]).
fn premature_expiry(history: &History, report: &mut Report) {
    let slack = history.skew_ms_max.saturating_mul(2);
    let mut expiring: BTreeMap<(&[u8], u64), &Op> = BTreeMap::new();
    for w in &history.ops {
        if w.ttl_ms.is_none() || w.result == OpResult::Refused {
            continue;
        }
        for version in w.versions() {
            expiring.insert((&w.key, version.ts), w);
        }
    }
    for read in &history.ops {
        let (OpResult::Read(Some(v)), Some(done)) = (&read.result, read.completed_ms) else {
            continue;
        };
        if v.value.is_some() {
            continue;
        }
        let Some(w) = expiring.get(&(read.key.as_slice(), v.ts)) else {
            continue;
        };
        let ttl_ms = w.ttl_ms.unwrap_or(0);
        let owed_ms = (w.invoked_ms + ttl_ms).saturating_sub(slack);
        if done < owed_ms {
            report.push_key(
                ViolationKind::PrematureExpiry,
                &read.key,
                format!(
                    "op {} (GET {} via node {}, answered at {done} ms) read op {}'s ts {} as expired; \
                     it was invoked at {} ms with ttl_ms {ttl_ms} (deadline stamped {:?} Unix ms), \
                     so it lives until at least {owed_ms} ms (skew bound {} ms)",
                    read.id,
                    show(&read.key),
                    read.coordinator,
                    w.id,
                    v.ts,
                    w.invoked_ms,
                    w.deadline_ms,
                    history.skew_ms_max
                ),
            );
        }
    }
}

fn convergence(history: &History, report: &mut Report) {
    if history.final_states.is_empty() {
        return;
    }
    let keys: BTreeSet<&Vec<u8>> = history
        .final_states
        .iter()
        .flat_map(|s| s.keys())
        .chain(history.ops.iter().map(|o| &o.key))
        .collect();
    for key in keys {
        let replicas = placement::rank_with_seeds(&history.seeds, key, history.replicas);
        let newest_raw = newest_final(history, key);
        let newest = settled(newest_raw.clone());
        // A replica that collected the newest (dead) version holds nothing.
        let newest_collectable = newest_raw
            .as_ref()
            .is_some_and(|v| collectable(history, v, history.final_ms));
        for (node, state) in history.final_states.iter().enumerate() {
            let have = settled(state.get(key.as_slice()).cloned());
            if replicas.contains(&node) {
                if have != newest && !(have.is_none() && newest_collectable) {
                    report.push_key(
                        ViolationKind::Diverged,
                        key,
                        format!(
                            "{}: replica {node} holds ts {:?}, newest is ts {:?} (replicas {replicas:?})",
                            show(key),
                            ts_of(&have),
                            ts_of(&newest)
                        ),
                    );
                }
            } else if have.is_some() {
                report.push_key(
                    ViolationKind::Diverged,
                    key,
                    format!(
                        "{}: node {node} is not a replica ({replicas:?}) but holds ts {:?}",
                        show(key),
                        ts_of(&have)
                    ),
                );
            }
        }
    }
}
