//! An atomic read-modify-write of a key with replicas on other nodes,
//! through the consensus register (`replication::register_ops`): the
//! command's pure rule ([`rmw::apply`]) is the operation's update, run on
//! the value a quorum of the key's replicas agreed is current; the reply
//! is the same rule's reply on the value the decided update saw, so it is
//! Redis's exact reply, as on the local path (`net::rmw_local`).
//!
//! # What takes this path
//! A command on a value ([`Op::Value`]) that keeps the key's deadline or
//! sets none (`INCR` and its kin, `APPEND`, `SETRANGE`, `SETNX`, `SET …
//! NX|XX|GET` without an expiry, `GETSET`, `GETDEL`, `GETRANGE`,
//! `STRLEN`). Refused with an error naming why: an expiry set by the
//! command (`SET … PX`, `EXPIRE` and its kin), a `MULTI … EXEC`
//! transaction or a `WATCH`ed one: the register's value carries no
//! deadline yet, and a transaction's steps are not wired to it.
//!
//! # Residual, named
//! - A register write stores the key's new value without a deadline: an
//!   `INCR` of a key that had one (set by a plain `SET … PX`) drops it.
//! - Plain `SET`/`DEL` of the same key still take the last-write-wins
//!   path (docs/decisions/0008): mixed with register writes, a plain
//!   write may be overwritten by a register write that did not see it.

use super::answer::{Answer, Awaited, Failure};
use super::resp::encode::Reply;
use super::resp::rmw::{self, Write};
use super::rmw_local::{Op, Started, Ttl, Update};
use crate::replication::ReplyTo;
use crate::replication::register::proposer::RegisterError;
use crate::replication::register_ops::Outcome;
use crate::state::{NetContext, RegisterStart};
use crate::ttl::Expiry;

/// Queues `update` for this thread's register proposers; its end comes
/// back to the connection's slot (`Conn::register_done`).
pub fn start(ctx: &NetContext, reply_to: ReplyTo, update: &Update) -> Started {
    let op = match supported(update) {
        Ok(op) => op.clone(),
        Err(why) => {
            return Started::Refused(Answer::Failed(Failure::NotImplemented, why.into()));
        }
    };
    let max = ctx.config.value_bytes_max as u64;
    let apply =
        move |current: &Option<Vec<u8>>| match rmw::apply(current.as_deref(), &op, max).write {
            Write::Keep => None,
            Write::Set(v) => Some(Some(v)),
            Write::Delete => Some(None),
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

/// The command of `update` if the register takes it (the module doc).
fn supported(update: &Update) -> Result<&rmw::Rmw, &'static str> {
    if !update.steps.is_empty() || update.watch.is_some() {
        return Err(
            "MULTI/EXEC and WATCH on a key with replicas on other nodes are not built yet \
             (the consensus register takes single commands; issue 37)",
        );
    }
    match (&update.op, update.ttl) {
        (Op::Value(op), Ttl::Keep | Ttl::Set(Expiry::Never)) => Ok(op),
        (Op::Conditional(_), _) => Err(
            "a conditional write (If-Match / If-None-Match) of a key with replicas on other \
             nodes is not built yet (the consensus register takes RESP's commands only; \
             issue 37); this node serves it for keys whose only replica is this node",
        ),
        _ => Err(
            "a read-modify-write that sets an expiry, on a key with replicas on other nodes, \
             is not built yet (the consensus register's value carries no deadline; issue 37)",
        ),
    }
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
        Ok(Outcome::Failed(e @ RegisterError::Indeterminate)) => {
            failed(Failure::Internal, e.to_string())
        }
        Ok(Outcome::Done { before, .. }) => match &update.op {
            Op::Value(op) => {
                let max = ctx.config.value_bytes_max as u64;
                let reply = rmw::apply(before.as_deref(), op, max).reply;
                (reply, Answer::Done(Awaited::Read))
            }
            Op::Expiry(_) | Op::Conditional(_) => failed(
                Failure::Internal,
                "an expiry update or a conditional write reached the register".into(),
            ),
        },
    }
}
