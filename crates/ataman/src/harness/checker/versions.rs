//! The exact checker: every read judged against last-write-wins order by
//! the versions the answers named (`X-Ataman-Version`, docs/API.md), as
//! pure rules over one key's recorded operations (docs/RELIABILITY.md,
//! "The exact checker").
//!
//! # Rules
//! A read's version `rv` is the one its answer named: a value's stamp, a
//! 404's tombstone or expired value, or 0 for a 404 naming none (no
//! version at all, or one collected).
//!
//! 1. **Only what was written.** A 200 names a value some put of the key
//!    carried, whose write did not certainly fail and started before the
//!    read ended, under a stamp no newer than the one its write was
//!    acknowledged with (a re-stamp only moves a stamp up). A 404 naming
//!    a version names a delete acknowledged with that stamp or a newer
//!    one (a re-stamped delete leaves its first tombstones on the
//!    replicas that took them: a read during it may find one), an
//!    expiring put with that stamp, or a write not acknowledged (its
//!    stamp is not known) that started before the read ended, in that
//!    order of preference (the write rule 4 then judges); of the
//!    unacknowledged, one that could carry the stamp first (its request's
//!    span, give or take rule 4's skew, holds the stamp's time; of several,
//!    the one that may read as absent first). Anything else is a
//!    version nobody wrote (`impossible`).
//! 2. **Never older than the acknowledged.** Of the acknowledged writes
//!    that ended before the read started and whose quorum intersects the
//!    read's, the newest by stamp `W`: `rv >= W`'s stamp (`lost`), with
//!    one exception: a 404 naming no version is as good as `W` when `W`
//!    is a delete or an expiring put past its deadline (a collected
//!    tombstone or expired value reads as nothing), or when a delete not
//!    acknowledged started after `W` ended and at least the nodes'
//!    tombstone grace before the read started (its tombstone, newer than
//!    `W`, may have been collected: `collectable_delete`). An
//!    unacknowledged write is never required; it can appear only as
//!    itself (rule 1).
//! 3. **Read your writes**: rule 2 over the reading client's own writes
//!    (`ryw`).
//! 4. **Expiry** (an expiring put `P` with `ttl_ms`): a 404 naming `P`'s
//!    stamp before `P` started plus `ttl_ms` minus the skew is premature;
//!    `P`'s value read after its stamp's time plus `ttl_ms` plus the skew
//!    is served late (`expiry`). The deadline lies between those two: it
//!    is stamped once, from a stamp taken after the request started and
//!    no later than the version's. The skew is [`EXPIRY_SKEW_MS`] plus
//!    twice the largest clock jump injected between the write's start and
//!    the read's end (a node whose clock is behind serves late, one ahead
//!    expires early; a stamp ahead of the wall clock, from a hybrid
//!    clock that saw a jumped one, moves the deadline with it).
//! 5. **Seen, then gone.** A final read (every fault healed, replicas
//!    converged) returns no version older than one a read already saw,
//!    unless a wipe began after that read (a wiped replica may lose an
//!    unacknowledged write) or what was seen was a delete's or an
//!    expiring put's and the final read is a 404, or the final read is a
//!    404 naming no version and a delete of the key not acknowledged
//!    may have been collected after what was seen (as in rule 2)
//!    (`regressed`).
//! 6. **Monotonic reads** (counted, not a violation): a read that
//!    started after another ended, quorums intersecting, returning an
//!    older version than it. Read repair is asynchronous
//!    (docs/ARCHITECTURE.md), so a version held by one replica can be read
//!    and then missed until repair or anti-entropy lands: the count shows
//!    how often, rule 5 judges the end.
//!
//! Timestamps order versions: the tie rule (`peer::frame::Stamped`) never
//! matters here, because no two writes share a stamp (the checker's
//! `same_timestamp` rule).

use super::{Findings, describe};
use crate::harness::history::{History, Op, OpKind, OpOutcome, Phase};

/// Allowance between the harness's clock and a node's, for the expiry
/// rules, ms: the clocks of one machine agree, and every delay favours
/// the node (its clock is read after the request started and before the
/// answer ended), so this covers millisecond truncation and the hybrid
/// clock's logical overflow. Clock jumps injected by the run are added.
pub const EXPIRY_SKEW_MS: u64 = 100;

/// What the expiry rules need of a run: its wall-clock start and skew.
#[derive(Debug, Clone)]
pub struct Clock {
    /// The harness's clock at the run's start, Unix ms (0: unknown, the
    /// expiry rules are skipped).
    pub start_unix_ms: u64,
    /// Clock jumps: `(start_us, end_us, |offset| ms)`.
    pub jumps: Vec<(u64, u64, u64)>,
    /// The nodes' tombstone grace, µs (0: not known; no delete counts as
    /// collected).
    pub grace_us: u64,
}

impl Clock {
    /// A history's clock: its start and the skew its clock jumps allow.
    pub fn of(history: &History) -> Clock {
        let jumps = history
            .faults
            .iter()
            .filter_map(|f| Some((f.start_us, f.end_us, f.clock_offset_ms?.unsigned_abs())))
            .collect();
        Clock {
            start_unix_ms: history.meta.start_unix_ms,
            jumps,
            grace_us: history.meta.tombstone_grace_ms.saturating_mul(1000),
        }
    }

    /// Rule 4's allowance for a write started at `from_us` read by a read
    /// ended at `to_us`.
    fn skew_ms(&self, from_us: u64, to_us: u64) -> u64 {
        let jump_ms = self
            .jumps
            .iter()
            .filter(|&&(s, e, _)| s <= to_us && e >= from_us)
            .map(|&(_, _, ms)| ms)
            .max()
            .unwrap_or(0);
        EXPIRY_SKEW_MS + 2 * jump_ms
    }

    fn wall_ms(&self, us: u64) -> Option<u64> {
        (self.start_unix_ms > 0).then(|| self.start_unix_ms + us / 1000)
    }
}

/// The wall-clock milliseconds of a stamp.
fn stamp_ms(ts: u64) -> u64 {
    ataman_node::hlc::millis(ts)
}

/// True when `history` names versions (written by a harness that reads
/// `X-Ataman-Version`): the exact rules apply.
pub fn versioned(history: &History) -> bool {
    history.ops.iter().any(|o| o.version.is_some())
}

fn acked(w: &Op) -> Option<u64> {
    (w.outcome == OpOutcome::Ok).then_some(w.version).flatten()
}

/// What a read returned: its version and the write that explains it.
struct Seen<'a> {
    rv: u64,
    write: Option<&'a Op>,
}

/// Rule 1: the write behind a read's answer, or why there is none.
fn explain<'a>(r: &Op, writes: &[&'a Op], clock: &Clock) -> Result<Seen<'a>, String> {
    match (r.status, &r.value, r.version) {
        (Some(200), Some(v), rv) => {
            let rv = rv.ok_or("a value without a version")?;
            let put = writes
                .iter()
                .copied()
                .find(|w| w.kind == OpKind::Put && w.value.as_deref() == Some(v.as_str()))
                .ok_or("a value nobody wrote")?;
            if put.outcome == OpOutcome::Fail {
                return Err(format!("the value of a failed write {}", describe(put)));
            }
            if put.start_us > r.end_us {
                return Err(format!("a value written after the read: {}", describe(put)));
            }
            if acked(put).is_some_and(|pv| rv > pv) {
                return Err(format!("a stamp newer than its write's: {}", describe(put)));
            }
            Ok(Seen {
                rv,
                write: Some(put),
            })
        }
        (Some(404), _, None) => Ok(Seen { rv: 0, write: None }),
        (Some(404), _, Some(rv)) => {
            let names = |w: &&&Op| {
                w.start_us <= r.end_us
                    && w.outcome.may_be_applied()
                    && (w.kind == OpKind::Delete || w.ttl_ms.is_some())
                    && match acked(w) {
                        // A delete's tombstone may carry a stamp from
                        // before its re-stamp; an expiring put's is its own.
                        Some(v) if w.kind == OpKind::Delete => rv <= v,
                        Some(v) => v == rv,
                        None => w.outcome != OpOutcome::Ok,
                    }
            };
            // The write acknowledged with that very stamp first (stamps
            // are unique: it is the one), then one acknowledged with a
            // newer stamp (a re-stamped delete), then one whose stamp is
            // unknown: an unacknowledged write is a possible explanation,
            // never the one to judge when a known write names the stamp.
            let exact = |w: &&&Op| names(w) && acked(w) == Some(rv);
            let known = |w: &&&Op| names(w) && acked(w).is_some();
            let write = writes
                .iter()
                .find(exact)
                .or_else(|| writes.iter().find(known))
                .or_else(|| unacked_carrying(r, rv, writes.iter().filter(names), clock))
                .or_else(|| writes.iter().find(names))
                .copied();
            let write = write.ok_or("a tombstone or expired version nobody wrote")?;
            Ok(Seen {
                rv,
                write: Some(write),
            })
        }
        _ => Err("an answer without a version to judge".into()),
    }
}

/// Of the unacknowledged writes `candidates` a 404 naming `rv` may name,
/// the ones that can carry that stamp: stamped once, after the request
/// started and before its answer ended, give or take the skew. Of those,
/// the one that may read as absent first (a delete, then the earliest
/// deadline): the most lenient explanation, since the stamp alone cannot
/// tell them apart. `None` without a clock or when none fits.
fn unacked_carrying<'w, 'a>(
    r: &Op,
    rv: u64,
    candidates: impl Iterator<Item = &'w &'a Op>,
    clock: &Clock,
) -> Option<&'w &'a Op> {
    let stamp = stamp_ms(rv);
    let fits = |w: &&&Op| match (clock.wall_ms(w.start_us), clock.wall_ms(w.end_us)) {
        (Some(start), Some(end)) => {
            let skew_ms = clock.skew_ms(w.start_us, r.end_us);
            acked(w).is_none() && start <= stamp + skew_ms && stamp <= end + skew_ms
        }
        _ => false,
    };
    candidates.filter(fits).min_by_key(|w| match w.ttl_ms {
        Some(ttl) if w.kind == OpKind::Put => w.start_us / 1000 + ttl,
        _ => 0,
    })
}

/// True when `w`, an acknowledged write, may read as nothing at `at_us`:
/// a delete, or an expiring put past its latest deadline.
fn may_read_absent(w: &Op, at_us: u64, clock: &Clock) -> bool {
    match (w.kind, w.ttl_ms, acked(w), clock.wall_ms(at_us)) {
        (OpKind::Delete, ..) => true,
        (OpKind::Put, Some(ttl), Some(v), Some(now)) => {
            now + clock.skew_ms(w.start_us, at_us) >= stamp_ms(v) + ttl
        }
        // Without a clock, an expiring put may have expired.
        (OpKind::Put, Some(_), _, None) => true,
        _ => false,
    }
}

/// Rules 2 and 3: the newest acknowledged write `r` must see among
/// `writes` (all of the key's, or one client's).
fn required<'a>(r: &Op, writes: impl Iterator<Item = &'a Op>) -> Option<&'a Op> {
    writes
        .filter(|w| w.end_us < r.start_us && super::intersects(w, r))
        .filter_map(|w| acked(w).map(|v| (v, w)))
        .max_by_key(|(v, _)| *v)
        .map(|(_, w)| w)
}

/// True when some delete among `writes` that was not acknowledged (it
/// may have been applied) started after `after` ended, so its stamp is
/// newer, and at least the grace before `at_us`: its tombstone may have
/// been collected since, and the key read as nothing. A delete within
/// the grace still has its tombstone, which a 404 then names.
fn collectable_delete(writes: &[&Op], after: &Op, at_us: u64, clock: &Clock) -> bool {
    clock.grace_us > 0
        && writes.iter().any(|d| {
            d.kind == OpKind::Delete
                && d.outcome != OpOutcome::Ok
                && d.outcome.may_be_applied()
                && d.start_us > after.end_us
                && d.start_us.saturating_add(clock.grace_us) <= at_us
        })
}

fn misses(r: &Op, seen: &Seen<'_>, w: &Op, writes: &[&Op], clock: &Clock) -> bool {
    let v = acked(w).unwrap_or(0);
    seen.rv < v
        && !(seen.rv == 0
            && (may_read_absent(w, r.start_us, clock)
                || collectable_delete(writes, w, r.start_us, clock)))
}

/// Rule 4 for one read.
fn expiry(r: &Op, seen: &Seen<'_>, clock: &Clock) -> Option<String> {
    let p = seen.write.filter(|p| p.kind == OpKind::Put)?;
    let ttl = p.ttl_ms?;
    let skew_ms = clock.skew_ms(p.start_us, r.end_us);
    let (start_ms, end_ms) = (clock.wall_ms(r.start_us)?, clock.wall_ms(r.end_us)?);
    if r.status == Some(404) {
        let earliest = clock.wall_ms(p.start_us)? + ttl;
        (end_ms + skew_ms < earliest).then(|| {
            format!(
                "expired {} ms before its earliest deadline: {}",
                earliest - end_ms,
                describe(p)
            )
        })
    } else {
        let latest = stamp_ms(seen.rv) + ttl;
        (start_ms > latest + skew_ms).then(|| {
            format!(
                "served {} ms after its latest deadline: {}",
                start_ms - latest,
                describe(p)
            )
        })
    }
}

/// Judges one key's operations by rules 1 to 6.
pub fn check_key(key: &str, ops: &[&Op], wipes_us: &[u64], clock: &Clock, f: &mut Findings) {
    let writes: Vec<&Op> = ops.iter().copied().filter(|o| o.kind.is_write()).collect();
    for w in writes.iter().filter(|w| w.outcome == OpOutcome::Ok) {
        if w.version.is_none() {
            f.impossible
                .add(|| format!("an acknowledged write without a version: {}", describe(w)));
        }
    }
    let mut reads: Vec<(&Op, Seen)> = Vec::new();
    for r in ops.iter().copied() {
        if r.kind != OpKind::Get || r.outcome != OpOutcome::Ok {
            continue;
        }
        let seen = match explain(r, &writes, clock) {
            Ok(seen) => seen,
            Err(why) => {
                f.impossible
                    .add(|| format!("{key}: {why}: read by {}", describe(r)));
                continue;
            }
        };
        if let Some(w) = required(r, writes.iter().copied())
            && misses(r, &seen, w, &writes, clock)
        {
            f.lost.add(|| {
                format!(
                    "{} not seen by {} (version {})",
                    describe(w),
                    describe(r),
                    seen.rv
                )
            });
        }
        let own = writes.iter().copied().filter(|w| w.client == r.client);
        if r.phase == Phase::Run
            && let Some(w) = required(r, own)
            && misses(r, &seen, w, &writes, clock)
        {
            f.ryw
                .add(|| format!("{} did not see its own {}", describe(r), describe(w)));
        }
        if let Some(why) = expiry(r, &seen, clock) {
            f.expiry
                .add(|| format!("{key}: {why}: read by {}", describe(r)));
        }
        reads.push((r, seen));
    }
    judge_order(&reads, &writes, wipes_us, clock, f);
}

/// Rules 5 and 6 over a key's explained reads.
fn judge_order(
    reads: &[(&Op, Seen<'_>)],
    writes: &[&Op],
    wipes_us: &[u64],
    clock: &Clock,
    f: &mut Findings,
) {
    for (late, late_seen) in reads {
        for (early, early_seen) in reads {
            if early.end_us >= late.start_us || late_seen.rv >= early_seen.rv {
                continue;
            }
            if late.phase == Phase::Run {
                if super::quorums_intersect(early.ack, early.from, late.ack, late.from) {
                    f.non_monotonic += 1;
                }
                continue;
            }
            let wiped = wipes_us.iter().any(|&w| w >= early.start_us);
            let absent_ok = late.status == Some(404)
                && early_seen
                    .write
                    .is_some_and(|w| w.kind == OpKind::Delete || w.ttl_ms.is_some());
            let collected = late.status == Some(404)
                && late_seen.rv == 0
                && early_seen
                    .write
                    .is_some_and(|w| collectable_delete(writes, w, late.start_us, clock));
            if !wiped && !absent_ok && !collected {
                f.regressed.add(|| {
                    format!(
                        "{} (version {}) after {} saw version {}",
                        describe(late),
                        late_seen.rv,
                        describe(early),
                        early_seen.rv
                    )
                });
                break;
            }
        }
    }
}

#[cfg(test)]
#[path = "versions_tests.rs"]
mod tests;
