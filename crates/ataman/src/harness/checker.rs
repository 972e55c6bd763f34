//! The checker: a pure function of a [`History`] that finds what must not
//! happen (definitions in docs/RELIABILITY.md).
//!
//! A history whose answers name their versions (`X-Ataman-Version`) has
//! its reads judged exactly, by last-write-wins order ([`versions`]); the
//! two read rules below (lost writes, read your writes, impossible reads)
//! judge an older history by values and times alone. The other rules
//! apply to both.
//!
//! - **Lost acknowledged writes.** A read `R` that succeeded, whose `ack`
//!   and `from` intersect those of an acknowledged write `W` of the same key
//!   (every `ack`-subset of the read's replicas meets every `ack`-subset of
//!   the write's: with one `from`, `ack_w + ack_r > from`), and which
//!   started after `W` ended, must not return a version strictly older than
//!   `W`: a value whose write ended before `W` started, or 404 when no
//!   delete that may have been applied could be as new as `W`. `W` is then
//!   lost. Only the newest acknowledged writes before `R` count (a write
//!   that a later acknowledged write superseded is not lost when `R` misses
//!   it). A write that was not acknowledged (timeout, 5xx, lost connection)
//!   may be applied at any time after it started: it can explain what a
//!   read returns, but is never required.
//! - **Read your writes**: the same rule with only the reading client's
//!   own writes (a subset of the above, counted per read).
//! - **Impossible reads**: a value nobody wrote for that key, the value of
//!   a write that certainly failed, a value whose write started after the
//!   read ended.
//! - **Answers**: every error answer is a 5xx with a non-empty reason; a
//!   4xx (other than a read's 404) or any other status is a harness bug or
//!   a node bug.
//! - **Hangs**: no request goes unanswered past the client timeout, unless
//!   the node it went to was paused (SIGSTOP) meanwhile.
//! - **Convergence**: at the end every replica of every key holds the same
//!   version (same timestamp, same value or tombstone, or none at all).
//! - **One timestamp, one write**: no two replicas of a key hold different
//!   contents (two values, or a value and a tombstone) under the same
//!   timestamp. Anti-entropy and read repair count equal timestamps as the
//!   same write, so such replicas would disagree for good: two coordinators
//!   issued one timestamp (a node id held twice, `cluster::node_ids`).
//! - **Stamps name their coordinator**: the low bits of a timestamp are
//!   the node id of the node that issued it (`ataman_node::hlc`), and a
//!   write's versions are stamped (and re-stamped) by the node the client
//!   sent it to; hints, read repair, anti-entropy and the transition copy
//!   carry the stamp unchanged. So every value a replica holds at the end
//!   carries an id its write's coordinator held in some layout of the run
//!   (the history's `node_id` lines). One that carries another id means
//!   two nodes issue that id's timestamps: one timestamp can then carry
//!   two writes (what the rule above sees only while the replicas still
//!   disagree; the tie rule settles them on one of the two, silently
//!   dropping the other). Judged only where the coordinator's ids are
//!   known.
//! - **Crashes**: no node exited unless the harness stopped it.
//! - **Linearizability and counters** of the `cas` workload's keys
//!   (`cas/check.rs`).
//!
//! Nothing excuses a lost write: losses under clock skew, within one
//! millisecond, or across a wiped replica are violations like any other,
//! because the node re-stamps a write that a replica refuses as older than
//! the version it holds (the coordinator stamps it above that version), and
//! a wiped node restarted with `--refill` does not answer reads before its
//! refill (an anti-entropy round with every peer) completes.

use super::cas::check::CasFindings;
use super::faults::FaultKind;
use super::history::{CopyState, History, Op, OpKind, OpOutcome, Phase, Workload};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Examples kept per kind of finding (the counts are complete).
pub const EXAMPLES_MAX: usize = 20;

/// A finding, with the operations that show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example(pub String);

/// Counted findings with a few examples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// How many.
    pub count: u64,
    /// The first [`EXAMPLES_MAX`].
    pub examples: Vec<Example>,
}

impl Tally {
    fn add(&mut self, text: impl FnOnce() -> String) {
        self.count += 1;
        if self.examples.len() < EXAMPLES_MAX {
            self.examples.push(Example(text()));
        }
    }
}

/// The final reads, per workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinalReads {
    /// Keys read at the end.
    pub keys: u64,
    /// Of them, found (200).
    pub found: u64,
    /// Of them, not found (404): fine when no acknowledged write needs them.
    pub not_found: u64,
    /// Of them, without a successful answer after every retry.
    pub unanswered: u64,
}

/// Everything the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Acknowledged writes a later intersecting read did not see.
    pub lost: Tally,
    /// Reads that missed their own client's acknowledged write.
    pub ryw: Tally,
    /// Reads of values that cannot be there.
    pub impossible: Tally,
    /// Expiring values read as absent before their deadline, or served
    /// after it (the exact rules, [`versions`]).
    pub expiry: Tally,
    /// Final reads older than a version a read saw ([`versions`] rule 5).
    pub regressed: Tally,
    /// Reads older than an earlier read's version, quorums intersecting
    /// (counted, not a violation: [`versions`] rule 6).
    pub non_monotonic: u64,
    /// The reads were judged by versions (the history names them).
    pub exact: bool,
    /// Answers outside the contract (a 4xx, a 5xx without a reason, ...).
    pub bad_answers: Tally,
    /// Requests without an answer within the timeout, node not paused.
    pub hangs: Tally,
    /// The same, on a paused node (not a violation).
    pub hangs_excused: u64,
    /// Keys whose replicas disagree at the end.
    pub divergent: Tally,
    /// Keys two replicas of which hold different contents under one timestamp.
    pub same_timestamp: Tally,
    /// Replica copies whose timestamp carries a node id their write's
    /// coordinator never held (another node issues that id's timestamps).
    pub foreign_stamps: Tally,
    /// Nodes that died on their own (or exited uncleanly when stopped).
    pub crashes: Tally,
    /// The final reads, by workload.
    pub final_reads: BTreeMap<Workload, FinalReads>,
    /// Final reads that never got an answer (the state could not be checked).
    pub final_unanswered: Tally,
    /// Convergence was checked and not reached within its bound.
    pub not_converged: bool,
    /// The `cas` workload's checks (`cas/check.rs`).
    pub cas: CasFindings,
}

impl Findings {
    /// Violations of every kind together; 0 for a clean run.
    pub fn violations(&self) -> u64 {
        self.lost.count
            + self.ryw.count
            + self.impossible.count
            + self.expiry.count
            + self.regressed.count
            + self.bad_answers.count
            + self.hangs.count
            + self.divergent.count
            + self.same_timestamp.count
            + self.foreign_stamps.count
            + self.crashes.count
            + self.final_unanswered.count
            + u64::from(self.not_converged)
            + self.cas.violation_count()
    }
}

fn describe(op: &Op) -> String {
    format!(
        "client {} {} {} {}={} via node {} ack={}/from={} [{:.3}..{:.3} ms] {} {}",
        op.client,
        match op.phase {
            Phase::Run => "run",
            Phase::Final => "final",
        },
        op.kind.name(),
        op.key,
        op.value.as_deref().unwrap_or("-"),
        op.node,
        op.ack,
        op.from,
        op.start_us as f64 / 1000.0,
        op.end_us as f64 / 1000.0,
        op.outcome.name(),
        op.status.map_or("no answer".to_string(), |s| s.to_string()),
    )
}

/// True when every `w.ack` replicas of the write's `w.from` meet every
/// `r.ack` replicas of the read's `r.from` (replica lists are prefixes of
/// one ranking, so a smaller `from` is a prefix of a larger one).
pub fn intersects(w: &Op, r: &Op) -> bool {
    quorums_intersect(w.ack, w.from, r.ack, r.from)
}

/// [`intersects`] on the parameters alone.
pub fn quorums_intersect(ack_w: u32, from_w: u32, ack_r: u32, from_r: u32) -> bool {
    // Copies of W certain to be among R's replicas.
    let inside = ack_w.saturating_sub(from_w.saturating_sub(from_r));
    inside + ack_r > from_r
}

/// When a write's effect may become visible, at the latest: its end when
/// acknowledged; without an acknowledgement it may land at any time.
fn visible_by(w: &Op) -> u64 {
    if w.outcome == OpOutcome::Ok {
        w.end_us
    } else {
        u64::MAX
    }
}

/// Acknowledged writes of one key (or one key and client) sorted by end,
/// grouped by `(ack, from)`, with the running maximum of their starts.
#[derive(Default)]
struct AckedIndex<'a> {
    groups: Vec<Group<'a>>,
}

struct Group<'a> {
    ack: u32,
    from: u32,
    /// Sorted by `end_us`.
    ops: Vec<&'a Op>,
    /// `prefix_max_start[i]`: the latest start among `ops[..=i]`.
    prefix_max_start: Vec<u64>,
}

impl<'a> AckedIndex<'a> {
    fn new(writes: impl Iterator<Item = &'a Op>) -> AckedIndex<'a> {
        let mut by_params: HashMap<(u32, u32), Vec<&'a Op>> = HashMap::new();
        for w in writes.filter(|w| w.outcome == OpOutcome::Ok) {
            by_params.entry((w.ack, w.from)).or_default().push(w);
        }
        let mut groups: Vec<Group<'a>> = by_params
            .into_iter()
            .map(|((ack, from), mut ops)| {
                ops.sort_by_key(|w| (w.end_us, w.start_us));
                let mut max = 0;
                let prefix_max_start = ops
                    .iter()
                    .map(|w| {
                        max = max.max(w.start_us);
                        max
                    })
                    .collect();
                Group {
                    ack,
                    from,
                    ops,
                    prefix_max_start,
                }
            })
            .collect();
        groups.sort_by_key(|g| (g.ack, g.from));
        AckedIndex { groups }
    }

    /// The acknowledged writes `read` must not miss: those it intersects
    /// that ended before it started and that no other such write
    /// superseded (started after they ended); with the latest start among
    /// them. Empty when there are none.
    fn required(&self, read: &Op) -> (u64, Vec<&'a Op>) {
        let mut latest_start = None;
        let mut spans = Vec::new();
        for g in &self.groups {
            if !quorums_intersect(g.ack, g.from, read.ack, read.from) {
                continue;
            }
            let before = g.ops.partition_point(|w| w.end_us < read.start_us);
            if before == 0 {
                continue;
            }
            let s = g.prefix_max_start[before - 1];
            latest_start = Some(latest_start.map_or(s, |l: u64| l.max(s)));
            spans.push((g, before));
        }
        let Some(latest) = latest_start else {
            return (0, Vec::new());
        };
        let mut required = Vec::new();
        for (g, before) in spans {
            let first = g.ops[..before].partition_point(|w| w.end_us < latest);
            required.extend_from_slice(&g.ops[first..before]);
        }
        (latest, required)
    }
}

/// Checks a history. Pure: the same history gives the same findings.
pub fn check(history: &History) -> Findings {
    let mut f = Findings::default();
    let mut by_key: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in &history.ops {
        by_key.entry(op.key.as_str()).or_default().push(op);
    }
    let mut lost_seen: HashSet<(&str, u64, u32)> = HashSet::new();
    f.exact = versions::versioned(history);
    let clock = versions::Clock::of(history);
    let wipes_us: Vec<u64> = history
        .faults
        .iter()
        .filter(|e| e.kind == FaultKind::Wipe)
        .map(|e| e.start_us)
        .collect();
    for (key, ops) in &by_key {
        if f.exact {
            versions::check_key(key, ops, &wipes_us, &clock, &mut f);
        } else {
            check_key(key, ops, &mut lost_seen, &mut f);
        }
    }
    check_answers(history, &mut f);
    check_final_reads(&by_key, &mut f);
    check_copies(history, &mut f);
    check_stamps(history, &mut f);
    f.cas = super::cas::check::check(&history.cas);
    for c in &history.crashes {
        f.crashes.add(|| {
            format!(
                "node {} at {:.3} ms: {}",
                c.node,
                c.at_us as f64 / 1000.0,
                c.status
            )
        });
    }
    f
}

/// Rules (a), (b) and the impossible reads for one key.
fn check_key<'a>(
    key: &'a str,
    ops: &[&'a Op],
    lost_seen: &mut HashSet<(&'a str, u64, u32)>,
    f: &mut Findings,
) {
    let writes: Vec<&Op> = ops.iter().copied().filter(|o| o.kind.is_write()).collect();
    let all_acked = AckedIndex::new(writes.iter().copied());
    let mut by_client: HashMap<u32, AckedIndex> = HashMap::new();
    let mut puts_by_value: HashMap<&str, &Op> = HashMap::new();
    for w in &writes {
        if w.kind == OpKind::Put
            && let Some(v) = &w.value
        {
            puts_by_value.insert(v.as_str(), w);
        }
    }
    let deletes: Vec<&Op> = writes
        .iter()
        .copied()
        .filter(|w| w.kind == OpKind::Delete && w.outcome.may_be_applied())
        .collect();
    for r in ops.iter().copied().filter(|o| o.kind == OpKind::Get) {
        if r.outcome != OpOutcome::Ok {
            continue;
        }
        // What the read saw: the write (None for a 404 with no delete that
        // could explain it: the initial absence, older than every write).
        let seen: Option<&Op> = match (r.status, &r.value) {
            (Some(200), Some(v)) => match puts_by_value.get(v.as_str()) {
                None => {
                    f.impossible
                        .add(|| format!("a value nobody wrote to {key}: {}", describe(r)));
                    continue;
                }
                Some(p) if p.outcome == OpOutcome::Fail => {
                    f.impossible.add(|| {
                        format!(
                            "the value of a failed write: {} read by {}",
                            describe(p),
                            describe(r)
                        )
                    });
                    continue;
                }
                Some(p) if p.start_us > r.end_us => {
                    f.impossible.add(|| {
                        format!(
                            "a value written after the read: {} read by {}",
                            describe(p),
                            describe(r)
                        )
                    });
                    continue;
                }
                Some(p) => Some(*p),
            },
            (Some(404), _) => deletes
                .iter()
                .copied()
                .filter(|d| d.start_us < r.end_us)
                .max_by_key(|d| visible_by(d)),
            // An answer the checker does not judge here (bad_answers does).
            _ => continue,
        };
        // When what it saw became visible, at the latest (µs).
        let seen_by = seen.map(visible_by);
        let older_than = |start_us: u64| seen_by.is_none_or(|s| s < start_us);
        let (latest, required) = all_acked.required(r);
        if !required.is_empty() && older_than(latest) {
            for w in required.iter().filter(|w| older_than(w.start_us)) {
                if !lost_seen.insert((key, w.start_us, w.client)) {
                    continue;
                }
                f.lost
                    .add(|| format!("{} not seen by {}", describe(w), describe(r)));
            }
        }
        if r.phase == Phase::Run {
            let own = by_client.entry(r.client).or_insert_with(|| {
                AckedIndex::new(writes.iter().copied().filter(|w| w.client == r.client))
            });
            let (latest_own, required_own) = own.required(r);
            let missed: Vec<&&Op> = required_own
                .iter()
                .filter(|w| older_than(w.start_us))
                .collect();
            if !missed.is_empty() && older_than(latest_own) {
                f.ryw.add(|| {
                    format!(
                        "{} did not see its own {}",
                        describe(r),
                        describe(missed[0])
                    )
                });
            }
        }
    }
}

/// Statuses and reasons, and hangs.
fn check_answers(history: &History, f: &mut Findings) {
    let pauses: Vec<(usize, u64, u64)> = history
        .faults
        .iter()
        .filter(|e| e.kind == FaultKind::Pause)
        .flat_map(|e| e.targets.iter().map(move |&n| (n, e.start_us, e.end_us)))
        .collect();
    for op in &history.ops {
        if op.outcome == OpOutcome::Hang {
            let paused = pauses
                .iter()
                .any(|&(n, s, e)| n == op.node && s <= op.end_us && e >= op.start_us);
            if paused {
                f.hangs_excused += 1;
            } else {
                f.hangs.add(|| describe(op));
            }
        }
        let Some(status) = op.status else { continue };
        let expected = match op.kind {
            OpKind::Get => status == 200 || status == 404,
            OpKind::Put => status == 201,
            OpKind::Delete => status == 202,
        };
        if expected {
            continue;
        }
        let reason = op.error.as_deref().unwrap_or("").trim();
        if (500..600).contains(&status) {
            if reason.is_empty() {
                f.bad_answers
                    .add(|| format!("{status} without a reason: {}", describe(op)));
            }
        } else {
            f.bad_answers
                .add(|| format!("{status} {reason:?}: {}", describe(op)));
        }
    }
}

/// The final reads: every key read at the end got an answer.
fn check_final_reads(by_key: &BTreeMap<&str, Vec<&Op>>, f: &mut Findings) {
    for (key, ops) in by_key {
        let finals: Vec<&&Op> = ops
            .iter()
            .filter(|o| o.phase == Phase::Final && o.kind == OpKind::Get)
            .collect();
        let Some(first) = finals.first() else {
            continue;
        };
        let tally = f.final_reads.entry(first.workload).or_default();
        tally.keys += 1;
        match finals.iter().find(|o| o.outcome == OpOutcome::Ok) {
            Some(o) if o.status == Some(200) => tally.found += 1,
            Some(_) => tally.not_found += 1,
            None => {
                tally.unanswered += 1;
                f.final_unanswered
                    .add(|| format!("{key}: {}", describe(finals[finals.len() - 1])));
            }
        }
    }
}

/// Rule (c): every replica of a key holds the same version at the end.
fn check_copies(history: &History, f: &mut Findings) {
    if let Some(c) = &history.convergence {
        f.not_converged = !c.converged;
    }
    let mut by_key: BTreeMap<&str, Vec<(usize, &CopyState)>> = BTreeMap::new();
    for c in &history.copies {
        by_key
            .entry(c.key.as_str())
            .or_default()
            .push((c.node, &c.state));
    }
    for (key, copies) in by_key {
        let agree = copies
            .iter()
            .all(|(_, s)| !matches!(s, CopyState::Error(_)) && *s == copies[0].1);
        if !agree {
            f.divergent.add(|| format!("{key}: {copies:?}"));
        }
        let mut by_ts: BTreeMap<u64, Vec<(usize, &CopyState)>> = BTreeMap::new();
        for &(node, state) in &copies {
            if let CopyState::Value { ts, .. } | CopyState::Tombstone { ts } = state {
                by_ts.entry(*ts).or_default().push((node, state));
            }
        }
        for (ts, held) in by_ts {
            if held.iter().any(|(_, s)| *s != held[0].1) {
                f.same_timestamp
                    .add(|| format!("{key}: two contents under timestamp {ts}: {held:?}"));
            }
        }
    }
}

/// The value id a replica's copy holds: the written id without the
/// padding `--value-bytes` adds (`workload::wire_value`).
fn copy_value_id(value: &str) -> &str {
    value.trim_end_matches(super::workload::PADDING as char)
}

/// Every value copy's timestamp carries a node id its write's
/// coordinator held (the `node_id` lines); skipped without them.
fn check_stamps(history: &History, f: &mut Findings) {
    if history.node_ids.is_empty() {
        return;
    }
    let mask = (1u64 << ataman_node::hlc::NODE_BITS) - 1;
    let mut ids: HashMap<usize, Vec<u64>> = HashMap::new();
    for &(node, id) in &history.node_ids {
        ids.entry(node).or_default().push(id);
    }
    let mut puts: HashMap<(&str, &str), &Op> = HashMap::new();
    for op in history.ops.iter().filter(|o| o.kind == OpKind::Put) {
        if let Some(v) = &op.value {
            puts.insert((op.key.as_str(), v.as_str()), op);
        }
    }
    for c in &history.copies {
        let CopyState::Value { ts, value } = &c.state else {
            continue;
        };
        let Some(op) = puts.get(&(c.key.as_str(), copy_value_id(value))) else {
            continue;
        };
        let Some(held) = ids.get(&op.node) else {
            continue;
        };
        let stamped = ts & mask;
        if !held.contains(&stamped) {
            f.foreign_stamps.add(|| {
                format!(
                    "{}: node {}'s copy at timestamp {ts} carries node id {stamped}, \
                     but its coordinator (slot {}) held ids {held:?}: {}",
                    c.key,
                    c.node,
                    op.node,
                    describe(op)
                )
            });
        }
    }
}

pub mod versions;

#[cfg(test)]
mod tests;
