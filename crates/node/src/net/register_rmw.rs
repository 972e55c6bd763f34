//! An atomic read-modify-write of a key with replicas on other nodes,
//! through the consensus register (`replication::register_ops`): the
//! command's pure rule (`rmw::apply`) is the operation's update, run on
//! the value a quorum of the key's replicas agreed is current; the reply
//! is the same rule's reply on the value the decided update saw, so it is
//! Redis's exact reply, as on the local path (`net::rmw_local`).
//!
//! # What takes this path
//! One command of a key's value ([`Op::Value`]: `INCR` and its kin,
//! `APPEND`, `SETRANGE`, `SETNX`, `SET … NX|XX|GET|PX|KEEPTTL`, `GETSET`,
//! `GETDEL`, `STRLEN`), a `MULTI … EXEC` transaction on one key (its
//! `EXPIRE` steps included), `WATCH` ([`Op::Watch`]: a read of the key's
//! version), a `WATCH`ed transaction, and an HTTP conditional write
//! ([`Op::Conditional`]). The register's value carries its deadline
//! (`register::acceptor::Proposal::deadline_ms`): a value whose deadline
//! is at or before the round's ballot time reads as absent, `INCR` keeps
//! the deadline, `SET` drops it, `SET … PX` stamps it from the ballot time
//! (the version's timestamp). (`EXPIRE` and its kin on such a key do not
//! come here: they are a read then a write, `net::resp::expiry`.)
//!
//! # Versions
//! The value the update sees carries its version
//! ([`Current::version`]): the decided proposal's ballot time, which is
//! the timestamp of the key's stored version once committed, so the one a
//! plain `GET` names (`X-Ataman-Version`, `ETag`). A version decided by
//! this round is stored under its ballot time ([`Current::at`]).
//! - **`WATCH`** remembers the version a register read decided
//!   ([`watched`]); its `EXEC` runs only if the version the transaction's
//!   own round decides on is still that one (`watch::holds`), in the same
//!   round that writes, so no write can come between the check and the
//!   write. A read of the key between `WATCH` and `EXEC` that reads a
//!   quorum sees that version or a newer one (the register's read commits
//!   what it found to a quorum before it answers).
//! - **An HTTP conditional write** evaluates `If-Match`/`If-None-Match`
//!   on the live value's version ([`crate::http::conditional`]), in the
//!   round that writes: two clients that both `PUT` with `If-Match` of
//!   one version cannot both win.
//!
//! # Residual, named
//! - Plain `SET`/`DEL` of the same key still take the last-write-wins
//!   path (docs/decisions/0008): mixed with register writes, a plain
//!   write may be overwritten by a register write that did not see it.
//! - A read of a `WATCH`ed key on a session that asked for `ack` of
//!   fewer than a quorum may read a version older than the one watched,
//!   and `EXEC` then applies what the client computed from it.

use super::answer::{Answer, Awaited, Failure};
use super::resp::encode::Reply;
use super::resp::watch::{self, Seen};
use super::rmw_local::{self, Op, Started, Ttl, Update};
use crate::config::PlantedBug;
use crate::http::conditional::{Method, Verdict};
use crate::replication::ReplyTo;
use crate::replication::register::proposer::{Current, Next, RegisterError};
use crate::replication::register_ops::Outcome;
use crate::state::{NetContext, RegisterRead, RegisterStart};

/// Queues `update` for this thread's register proposers; its end comes
/// back to the connection's slot (`Conn::register_done`).
pub fn start(ctx: &NetContext, reply_to: ReplyTo, update: &Update) -> Started {
    let max = ctx.config.value_bytes_max as u64;
    let planted = ctx.shared.config.planted_bug;
    let command = update.clone();
    let apply = move |read: &RegisterRead<'_>| {
        let current = Current {
            value: read.value.clone(),
            deadline_ms: read.deadline_ms,
            at: read.at,
            version: read.version,
        };
        match effect(&command, &current, max, planted) {
            Effect::Write(next, _) => Some((next.value, next.deadline_ms)),
            Effect::Keep(_) | Effect::Unmet(_) | Effect::Refused(_) => None,
        }
    };
    ctx.register_starts.borrow_mut().push(RegisterStart {
        key: update.key.clone(),
        token: reply_to.token,
        generation: reply_to.generation,
        slot: reply_to.slot,
        update: Box::new(apply),
    });
    Started::Register
}

/// A command's effect on the register's current value.
#[derive(Debug, PartialEq)]
enum Effect {
    /// Write this, then answer this reply.
    Write(Next, Reply),
    /// Write nothing; this reply.
    Keep(Reply),
    /// An HTTP conditional write's preconditions failed: nothing written;
    /// the key's live version (`None`: no value).
    Unmet(Option<u64>),
    /// Refused (a deadline past the maximum): nothing written.
    Refused(String),
}

/// `update`'s rule on `current` (pure): a watch or a precondition judged
/// on the current version first (the module doc, "Versions"), then the
/// same rule as the local path's (`rmw_local::decide_on`), expiry judged
/// at the round's ballot time, a new deadline stamped from it (the
/// version's timestamp). The update and the reply both run it on the
/// same [`Current`], so they agree.
fn effect(update: &Update, current: &Current, max: u64, planted: Option<PlantedBug>) -> Effect {
    let now_ms = crate::hlc::millis(current.at);
    if let Some(seen) = update.watch
        && planted != Some(PlantedBug::RegisterWatchIgnoresVersion)
        && !watch::holds(seen, seen_of(current))
    {
        return Effect::Keep(Reply::NullArray);
    }
    if let Op::Conditional(write) = &update.op {
        let version = live_version(current);
        if write.preconditions.evaluate(Method::Write, version) != Verdict::Proceed {
            return Effect::Unmet(version);
        }
    }
    let decided = rmw_local::decide_on(
        update,
        current.value.as_deref(),
        current.deadline_ms,
        now_ms,
        max,
    );
    let (value, ttl, reply) = match decided {
        Ok(decided) => decided,
        Err(reply) => return Effect::Keep(reply),
    };
    let live_deadline = current
        .value
        .as_ref()
        .and(current.deadline_ms)
        .filter(|d| *d > now_ms);
    let deadline_ms = match (&value, ttl) {
        (None, _) => None,
        (Some(_), Ttl::Keep) => live_deadline,
        (Some(_), Ttl::Set(expiry)) => match expiry.as_planted(planted).deadline_ms(current.at) {
            Ok(d) => d,
            Err(why) => return Effect::Refused(why),
        },
    };
    Effect::Write(Next { value, deadline_ms }, reply)
}

/// What `WATCH` would see of `current` ([`Seen`]), judged at its ballot
/// time.
fn seen_of(current: &Current) -> Seen {
    let now_ms = crate::hlc::millis(current.at);
    Seen::of(
        current.version,
        current.value.is_some(),
        current.deadline_ms,
        now_ms,
    )
}

/// The version a precondition compares with: `current`'s, when it holds
/// a value live at the round's ballot time; `None` otherwise (absent,
/// deleted, expired), as on the local path.
fn live_version(current: &Current) -> Option<u64> {
    let now_ms = crate::hlc::millis(current.at);
    let live = current.value.is_some() && current.deadline_ms.is_none_or(|d| d > now_ms);
    current.version.filter(|_| live)
}

/// The reply and the slot's answer for `update`'s end.
pub fn finish(
    ctx: &NetContext,
    update: &Update,
    outcome: Result<Outcome, String>,
) -> (Reply, Answer) {
    let failed = |failure, text: String| (Reply::Null, Answer::Failed(failure, text));
    match outcome {
        Err(why) => failed(Failure::Busy, why),
        Ok(Outcome::Failed(e @ RegisterError::Exhausted { .. })) => {
            failed(Failure::Busy, e.to_string())
        }
        Ok(Outcome::Failed(
            e @ (RegisterError::Indeterminate | RegisterError::Unconfirmed { .. }),
        )) => failed(Failure::Internal, e.to_string()),
        Ok(Outcome::Done { before, .. }) => {
            let max = ctx.config.value_bytes_max as u64;
            match effect(update, &before, max, ctx.shared.config.planted_bug) {
                Effect::Write(next, reply) => (reply, written(update, &next, before.at)),
                Effect::Keep(reply) => {
                    if update.watch.is_some() && reply == Reply::NullArray {
                        ctx.shared
                            .metrics
                            .watch_aborts
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    (reply, Answer::Done(Awaited::Read))
                }
                Effect::Unmet(version) => (Reply::Null, Answer::PreconditionFailed(version)),
                Effect::Refused(why) => failed(Failure::Invalid, why),
            }
        }
    }
}

/// The answer of an update that wrote `next` in the round of ballot time
/// `at`: an HTTP conditional write names the version it wrote (the
/// round's ballot time, the stored version's timestamp); RESP replies
/// carry their own.
fn written(update: &Update, next: &Next, at: u64) -> Answer {
    match (&update.op, &next.value) {
        (Op::Conditional(_), Some(_)) => Answer::Done(Awaited::Put(at)),
        (Op::Conditional(_), None) => Answer::Done(Awaited::Delete(at)),
        _ => Answer::Done(Awaited::Read),
    }
}

/// What a `WATCH` through the register ([`Op::Watch`]) saw: the version
/// the round decided on, or its failure's reply and answer.
pub fn watched(
    ctx: &NetContext,
    outcome: Result<Outcome, String>,
) -> Result<Seen, (Reply, Answer)> {
    match outcome {
        Ok(Outcome::Done { before, .. }) => Ok(seen_of(&before)),
        failed => {
            let update = Update {
                key: Vec::new(),
                op: Op::Watch,
                ttl: Ttl::Keep,
                ack: 0,
                from: 0,
                steps: Vec::new(),
                watch: None,
            };
            Err(finish(ctx, &update, failed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::resp::multi_apply::Step;
    use crate::net::resp::rmw::Rmw;
    use crate::ttl::Expiry;
    use ataman_engine::key::timestamp_from_millis;

    const MAX: u64 = 1 << 20;

    fn update(op: Rmw, ttl: Ttl) -> Update {
        Update {
            key: b"k".to_vec(),
            op: Op::Value(op),
            ttl,
            ack: 2,
            from: 3,
            steps: Vec::new(),
            watch: None,
        }
    }

    /// The register's value `value` with `deadline_ms`, seen at `now_ms`
    /// (stored under version 42 when present).
    fn at(value: Option<&[u8]>, deadline_ms: Option<u64>, now_ms: u64) -> Current {
        Current {
            value: value.map(<[u8]>::to_vec),
            deadline_ms,
            at: timestamp_from_millis(now_ms, 7),
            version: value.map(|_| 42),
        }
    }

    /// `INCR` keeps a live deadline; of an expired value it starts from
    /// absent and writes none; its reply agrees with its write.
    #[test]
    fn incr_keeps_a_live_deadline_and_starts_over_after_it() {
        let incr = update(Rmw::IncrBy(1), Ttl::Keep);
        let live = effect(&incr, &at(Some(b"5"), Some(2_000), 1_000), MAX, None);
        assert_eq!(
            live,
            Effect::Write(
                Next {
                    value: Some(b"6".to_vec()),
                    deadline_ms: Some(2_000)
                },
                Reply::Int(6)
            )
        );
        // At the deadline exactly the value has expired (`d > now` is live).
        for now in [2_000, 9_000] {
            let gone = effect(&incr, &at(Some(b"5"), Some(2_000), now), MAX, None);
            assert_eq!(
                gone,
                Effect::Write(
                    Next {
                        value: Some(b"1".to_vec()),
                        deadline_ms: None
                    },
                    Reply::Int(1)
                ),
                "now {now}"
            );
        }
    }

    /// `SET … NX PX` stamps its deadline from the round's ballot time (the
    /// version's timestamp); `NX` of a live value writes nothing and
    /// answers nil; of an expired one it writes.
    #[test]
    fn set_nx_px_stamps_from_the_ballot_time() {
        let set = update(
            Rmw::Set {
                value: b"me".to_vec(),
                if_absent: Some(true),
                get: false,
            },
            Ttl::Set(Expiry::AfterMs(500)),
        );
        let fresh = effect(&set, &at(None, None, 10_000), MAX, None);
        assert_eq!(
            fresh,
            Effect::Write(
                Next {
                    value: Some(b"me".to_vec()),
                    deadline_ms: Some(10_500)
                },
                crate::net::resp::encode::OK
            )
        );
        let held = effect(&set, &at(Some(b"x"), Some(20_000), 10_000), MAX, None);
        assert_eq!(held, Effect::Keep(Reply::Null));
        let expired = effect(&set, &at(Some(b"x"), Some(9_999), 10_000), MAX, None);
        assert!(matches!(expired, Effect::Write(..)), "{expired:?}");
    }

    /// `GETSET` drops the deadline and answers the live value; a deadline
    /// past the maximum is refused, nothing written.
    #[test]
    fn replacement_drops_the_deadline_and_bad_deadlines_are_refused() {
        let getset = update(Rmw::GetSet(b"n".to_vec()), Ttl::Set(Expiry::Never));
        let out = effect(&getset, &at(Some(b"o"), Some(5_000), 1_000), MAX, None);
        assert_eq!(
            out,
            Effect::Write(
                Next {
                    value: Some(b"n".to_vec()),
                    deadline_ms: None
                },
                Reply::Bulk(b"o".to_vec())
            )
        );
        let far = update(
            Rmw::Set {
                value: b"v".to_vec(),
                if_absent: None,
                get: false,
            },
            Ttl::Set(Expiry::AtMs(u64::MAX)),
        );
        assert!(matches!(
            effect(&far, &at(None, None, 1_000), MAX, None),
            Effect::Refused(why) if why.contains("maximum")
        ));
    }

    /// A `WATCH`ed transaction runs only on the version `WATCH` saw: a
    /// newer version, or a live value that expired since, aborts it
    /// (`EXEC`'s null array, nothing written); the planted bug ignores it.
    #[test]
    fn a_watched_transaction_runs_only_on_the_version_seen() {
        let mut exec = update(Rmw::IncrBy(1), Ttl::Keep);
        exec.steps = vec![Step::Rmw(Rmw::IncrBy(1), None)];
        exec.watch = Some(Seen::of(Some(42), true, None, 1_000));
        let same = effect(&exec, &at(Some(b"5"), None, 2_000), MAX, None);
        assert!(matches!(same, Effect::Write(ref n, _) if n.value.as_deref() == Some(&b"6"[..])));
        let mut newer = at(Some(b"5"), None, 2_000);
        newer.version = Some(43);
        assert_eq!(
            effect(&exec, &newer, MAX, None),
            Effect::Keep(Reply::NullArray)
        );
        let planted = Some(PlantedBug::RegisterWatchIgnoresVersion);
        assert!(matches!(
            effect(&exec, &newer, MAX, planted),
            Effect::Write(..)
        ));
        let mut expiring = exec.clone();
        expiring.watch = Some(Seen::of(Some(42), true, Some(1_500), 1_000));
        let expired = effect(&expiring, &at(Some(b"5"), Some(1_500), 2_000), MAX, None);
        assert_eq!(expired, Effect::Keep(Reply::NullArray));
        // Absent when watched and still absent: it runs.
        let mut absent = exec.clone();
        absent.watch = Some(Seen::of(None, false, None, 1_000));
        assert!(matches!(
            effect(&absent, &at(None, None, 2_000), MAX, None),
            Effect::Write(..)
        ));
    }

    /// An HTTP conditional write is judged on the live value's version:
    /// `If-Match` of it writes, of another or of an expired value is
    /// unmet (naming the live version); `If-None-Match: *` writes only
    /// where nothing lives; the answer names the round's version.
    #[test]
    fn a_conditional_write_is_judged_on_the_live_version() {
        use crate::http::conditional::Preconditions;
        let put = |if_match: Option<&[u8]>, if_none_match: Option<&[u8]>| Update {
            op: Op::Conditional(Box::new(rmw_local::Conditional {
                preconditions: Preconditions::parse(if_match, if_none_match)
                    .unwrap()
                    .unwrap(),
                value: Some(b"new".to_vec()),
            })),
            ..update(Rmw::Strlen, Ttl::Set(Expiry::Never))
        };
        let live = at(Some(b"old"), None, 2_000);
        let matching = effect(&put(Some(b"\"42\""), None), &live, MAX, None);
        let Effect::Write(next, _) = matching else {
            panic!("If-Match of the live version: {matching:?}");
        };
        assert_eq!(next.value.as_deref(), Some(&b"new"[..]));
        assert_eq!(
            written(&put(None, Some(b"*")), &next, 77),
            Answer::Done(Awaited::Put(77))
        );
        let other = effect(&put(Some(b"\"41\""), None), &live, MAX, None);
        assert_eq!(other, Effect::Unmet(Some(42)));
        let expired = at(Some(b"old"), Some(1_500), 2_000);
        let gone = effect(&put(Some(b"\"42\""), None), &expired, MAX, None);
        assert_eq!(gone, Effect::Unmet(None));
        let fresh = effect(&put(None, Some(b"*")), &at(None, None, 2_000), MAX, None);
        assert!(matches!(fresh, Effect::Write(..)), "{fresh:?}");
        let taken = effect(&put(None, Some(b"*")), &live, MAX, None);
        assert_eq!(taken, Effect::Unmet(Some(42)));
        let mut delete = put(Some(b"\"42\""), None);
        if let Op::Conditional(c) = &mut delete.op {
            c.value = None;
        }
        let Effect::Write(gone, _) = effect(&delete, &live, MAX, None) else {
            panic!("a conditional delete of the live version writes");
        };
        assert_eq!(
            written(&delete, &gone, 78),
            Answer::Done(Awaited::Delete(78))
        );
    }
}
