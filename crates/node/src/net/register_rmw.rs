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
//! `GETDEL`, `STRLEN`), and a `MULTI … EXEC` transaction on one key that
//! no `WATCH` guards (its `EXPIRE` steps included). The register's value
//! carries its deadline (`register::acceptor::Proposal::deadline_ms`): a
//! value whose deadline is at or before the round's ballot time reads as
//! absent, `INCR` keeps the deadline, `SET` drops it, `SET … PX` stamps it
//! from the ballot time (the version's timestamp). Refused with an error
//! naming why: a `WATCH`ed transaction and an HTTP conditional write.
//! (`EXPIRE` and its kin on such a key do not come here: they are a read
//! then a write, `net::resp::expiry`.)
//!
//! # Residual, named
//! - Plain `SET`/`DEL` of the same key still take the last-write-wins
//!   path (docs/decisions/0008): mixed with register writes, a plain
//!   write may be overwritten by a register write that did not see it.

use super::answer::{Answer, Awaited, Failure};
use super::resp::encode::Reply;
use super::rmw_local::{self, Op, Started, Ttl, Update};
use crate::config::PlantedBug;
use crate::replication::ReplyTo;
use crate::replication::register::proposer::{Current, Next, RegisterError};
use crate::replication::register_ops::Outcome;
use crate::state::{NetContext, RegisterStart};

/// Queues `update` for this thread's register proposers; its end comes
/// back to the connection's slot (`Conn::register_done`).
pub fn start(ctx: &NetContext, reply_to: ReplyTo, update: &Update) -> Started {
    if let Err(why) = supported(update) {
        return Started::Refused(Answer::Failed(Failure::NotImplemented, why.into()));
    }
    let max = ctx.config.value_bytes_max as u64;
    let planted = ctx.shared.config.planted_bug;
    let command = update.clone();
    let apply = move |value: &Option<Vec<u8>>, deadline_ms: Option<u64>, at: u64| {
        let current = Current {
            value: value.clone(),
            deadline_ms,
            at,
        };
        match effect(&command, &current, max, planted) {
            Effect::Write(next, _) => Some((next.value, next.deadline_ms)),
            Effect::Keep(_) | Effect::Refused(_) => None,
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

/// Whether the register takes `update` (the module doc).
fn supported(update: &Update) -> Result<(), &'static str> {
    if update.watch.is_some() {
        return Err(
            "WATCH on a key with replicas on other nodes is not built yet (the consensus \
             register takes single commands and unwatched transactions; issue 37)",
        );
    }
    if let Op::Conditional(_) = update.op {
        return Err(
            "a conditional write (If-Match / If-None-Match) of a key with replicas on other \
             nodes is not built yet (the consensus register takes RESP's commands only; \
             issue 37); this node serves it for keys whose only replica is this node",
        );
    }
    Ok(())
}

/// A command's effect on the register's current value.
#[derive(Debug, PartialEq)]
enum Effect {
    /// Write this, then answer this reply.
    Write(Next, Reply),
    /// Write nothing; this reply.
    Keep(Reply),
    /// Refused (a deadline past the maximum): nothing written.
    Refused(String),
}

/// `update`'s rule on `current` (pure): the same rule as the local path's
/// (`rmw_local::decide_on`), expiry judged at the round's ballot time, a
/// new deadline stamped from it (the version's timestamp). The update and
/// the reply both run it on the same [`Current`], so they agree.
fn effect(update: &Update, current: &Current, max: u64, planted: Option<PlantedBug>) -> Effect {
    let now_ms = crate::hlc::millis(current.at);
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
                Effect::Write(_, reply) | Effect::Keep(reply) => {
                    (reply, Answer::Done(Awaited::Read))
                }
                Effect::Refused(why) => failed(Failure::Invalid, why),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// The register's value `value` with `deadline_ms`, seen at `now_ms`.
    fn at(value: Option<&[u8]>, deadline_ms: Option<u64>, now_ms: u64) -> Current {
        Current {
            value: value.map(<[u8]>::to_vec),
            deadline_ms,
            at: timestamp_from_millis(now_ms, 7),
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

    /// A `WATCH`ed transaction and a conditional write are refused, saying
    /// why; a plain command is taken.
    #[test]
    fn what_the_register_takes() {
        assert!(supported(&update(Rmw::IncrBy(1), Ttl::Keep)).is_ok());
        let mut watched = update(Rmw::IncrBy(1), Ttl::Keep);
        watched.watch = Some(crate::net::resp::watch::Seen {
            ts: None,
            live: false,
        });
        assert!(supported(&watched).is_err_and(|why| why.contains("WATCH")));
    }
}
