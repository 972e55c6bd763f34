//! A `MULTI … EXEC` transaction of one key as a pure rule: the key's
//! value and deadline, the queued steps and the time in; the key's new
//! state and the array of the steps' replies out. `crate::net::rmw_local`
//! runs it as one read-modify-write (read, apply, conditional write), so
//! the steps apply atomically: no other write of the key falls between
//! them.
//!
//! # Rules (Redis 7's `execCommand`, checked side by side in
//! `crates/ataman/tests/resp_multi.rs`)
//! 1. The steps run in order, each on the state the previous left; each
//!    reply is one element of the array, an error included (a step that
//!    fails changes nothing; the ones after it still run).
//! 2. A read-modify-write step is [`rmw::apply`]; when it writes a value
//!    its expiry is its own rule (`INCR` keeps the deadline, `SET` drops
//!    or sets one); a delete drops the deadline.
//! 3. `EXPIRE`/`PEXPIRE`/`EXPIREAT`/`PEXPIREAT` of a present key whose
//!    `NX|XX|GT|LT` condition holds (`super::expiry::condition_holds`, as
//!    outside a transaction) set the deadline (not after now: the key is
//!    deleted) and answer 1; of an absent key, or when the condition
//!    fails, 0.
//! 4. `TTL`/`PTTL` answer as outside a transaction (-2, -1, the time left).
//! 5. The write is the difference between the state read and the state
//!    left: nothing when both the value and the deadline are unchanged.

use super::encode::Reply;
use super::expiry::{Condition, Unit, condition_holds, time_left};
use super::rmw::{self, Rmw, Write};
use crate::net::answer::Answer;
use crate::ttl::{DEADLINE_MS_MAX, Expiry};

/// One queued command, parsed for its key.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Its reply, decided when it was parsed (`PING`, `ECHO`, a syntax error).
    Reply(Reply),
    /// A read-modify-write ([`rmw::apply`]) and the expiry a value it
    /// writes gets (`None`: the key's deadline is kept).
    Rmw(Rmw, Option<Expiry>),
    /// `GET`.
    Get,
    /// `DEL key [key …]` of the one key.
    Del,
    /// `EXISTS key [key …]`: the key named this many times.
    Exists(i64),
    /// `EXPIRE`/`PEXPIRE`/`EXPIREAT`/`PEXPIREAT` (`None`: not after now,
    /// a delete) on its `NX|XX|GT|LT` condition.
    Expire(Option<Expiry>, Condition),
    /// `TTL`/`PTTL`.
    Ttl(Unit),
}

// A float in `Rmw` is never NaN (the parser refuses it).
impl Eq for Step {}

/// The key's state: its value (`None`: absent or expired) and deadline.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct State {
    /// The value.
    pub value: Option<Vec<u8>>,
    /// Its deadline, Unix milliseconds.
    pub deadline_ms: Option<u64>,
}

/// A transaction's effect and reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What to write (rule 5).
    pub write: Write,
    /// The deadline the written value gets.
    pub deadline_ms: Option<u64>,
    /// True when the deadline differs from the one read.
    pub deadline_changed: bool,
    /// The array of the steps' replies.
    pub reply: Reply,
}

/// Runs `steps` on `base` at `now_ms` (the "Rules").
pub fn apply(base: &State, steps: &[Step], now_ms: u64, value_bytes_max: u64) -> Outcome {
    let mut state = base.clone();
    let replies = steps
        .iter()
        .map(|step| run(&mut state, step, now_ms, value_bytes_max))
        .collect();
    let write = if state == *base {
        Write::Keep
    } else {
        match state.value {
            Some(ref v) => Write::Set(v.clone()),
            None => Write::Delete,
        }
    };
    Outcome {
        write,
        deadline_ms: state.deadline_ms,
        deadline_changed: state.deadline_ms != base.deadline_ms,
        reply: Reply::Array(replies),
    }
}

/// The deadline `expiry` means at `now_ms`; `Err`: past the maximum.
fn deadline_at(expiry: Expiry, now_ms: u64) -> Result<Option<u64>, ()> {
    let at = match expiry {
        Expiry::Never => return Ok(None),
        Expiry::AfterMs(ms) => now_ms.saturating_add(ms),
        Expiry::AtMs(at) => at,
    };
    if at > DEADLINE_MS_MAX {
        return Err(());
    }
    Ok(Some(at))
}

/// One step (rules 2–4).
fn run(state: &mut State, step: &Step, now_ms: u64, value_bytes_max: u64) -> Reply {
    let present = state.value.is_some();
    match step {
        Step::Reply(reply) => reply.clone(),
        Step::Get => state.value.clone().map_or(Reply::Null, Reply::Bulk),
        Step::Del => {
            *state = State::default();
            Reply::Int(i64::from(present))
        }
        Step::Exists(n) => Reply::Int(if present { *n } else { 0 }),
        Step::Ttl(unit) => {
            let answer = match &state.value {
                Some(v) => Answer::ValueUntil(v.clone(), state.deadline_ms),
                None => Answer::NotFound(None),
            };
            time_left(&answer, *unit, now_ms)
        }
        Step::Expire(..) if !present => Reply::Int(0),
        Step::Expire(expiry, condition)
            if !condition_holds(*condition, state.deadline_ms, *expiry, now_ms) =>
        {
            Reply::Int(0)
        }
        Step::Expire(None, _) => {
            *state = State::default();
            Reply::Int(1)
        }
        Step::Expire(Some(expiry), _) => match deadline_at(*expiry, now_ms) {
            // An absolute deadline not after now deletes, as Redis.
            Ok(Some(at)) if at <= now_ms => {
                *state = State::default();
                Reply::Int(1)
            }
            Ok(deadline) => {
                state.deadline_ms = deadline;
                Reply::Int(1)
            }
            Err(()) => Reply::err("invalid expire time in 'expire' command"),
        },
        Step::Rmw(op, expiry) => {
            let out = rmw::apply(state.value.as_deref(), op, value_bytes_max);
            match out.write {
                Write::Keep => {}
                Write::Delete => *state = State::default(),
                Write::Set(v) => {
                    let deadline = match expiry {
                        None => Ok(state.deadline_ms),
                        Some(e) => deadline_at(*e, now_ms),
                    };
                    let Ok(deadline) = deadline else {
                        return Reply::err("invalid expire time in 'set' command");
                    };
                    *state = State {
                        value: Some(v),
                        deadline_ms: deadline,
                    };
                }
            }
            out.reply
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::resp::encode::OK;

    const MAX: u64 = 1 << 20;

    fn set(v: &str, expiry: Option<Expiry>) -> Step {
        let op = Rmw::Set {
            value: v.as_bytes().to_vec(),
            if_absent: None,
            get: false,
        };
        Step::Rmw(op, Some(expiry.unwrap_or(Expiry::Never)))
    }

    fn bulk(v: &str) -> Reply {
        Reply::Bulk(v.as_bytes().to_vec())
    }

    /// SET, INCR twice, GET: each step sees the one before; one write.
    #[test]
    fn steps_see_each_other_and_write_once() {
        let steps = [
            set("10", None),
            Step::Rmw(Rmw::IncrBy(1), None),
            Step::Rmw(Rmw::IncrBy(5), None),
            Step::Get,
        ];
        let out = apply(&State::default(), &steps, 0, MAX);
        assert_eq!(
            out.reply,
            Reply::Array(vec![OK, Reply::Int(11), Reply::Int(16), bulk("16")])
        );
        assert_eq!(out.write, Write::Set(b"16".to_vec()));
        assert!(!out.deadline_changed);
    }

    /// A failing step answers its error in place; the rest still run.
    #[test]
    fn an_error_is_one_element_and_the_rest_run() {
        let base = State {
            value: Some(b"abc".to_vec()),
            deadline_ms: None,
        };
        let steps = [
            Step::Rmw(Rmw::IncrBy(1), None),
            Step::Rmw(Rmw::Append(b"d".to_vec()), None),
        ];
        let out = apply(&base, &steps, 0, MAX);
        assert_eq!(
            out.reply,
            Reply::Array(vec![
                Reply::err("value is not an integer or out of range"),
                Reply::Int(4)
            ])
        );
        assert_eq!(out.write, Write::Set(b"abcd".to_vec()));
    }

    /// Reads only: nothing written; DEL then GET sees the delete.
    #[test]
    fn reads_write_nothing_and_del_is_seen() {
        let base = State {
            value: Some(b"v".to_vec()),
            deadline_ms: Some(5_000),
        };
        let reads = [Step::Get, Step::Exists(2), Step::Ttl(Unit::Millis)];
        let out = apply(&base, &reads, 1_000, MAX);
        assert_eq!(out.write, Write::Keep);
        assert_eq!(
            out.reply,
            Reply::Array(vec![bulk("v"), Reply::Int(2), Reply::Int(4_000)])
        );
        let out = apply(&base, &[Step::Del, Step::Get, Step::Del], 1_000, MAX);
        assert_eq!(out.write, Write::Delete);
        assert_eq!(
            out.reply,
            Reply::Array(vec![Reply::Int(1), Reply::Null, Reply::Int(0)])
        );
    }

    /// EXPIRE sets the deadline (a write of the same value), INCR keeps
    /// it, SET drops it; EXPIRE of an absent key is 0; not after now deletes.
    #[test]
    fn expiry_follows_redis_rules() {
        let base = State {
            value: Some(b"1".to_vec()),
            deadline_ms: None,
        };
        let steps = [
            Step::Expire(Some(Expiry::AfterMs(10_000)), Condition::Always),
            Step::Rmw(Rmw::IncrBy(1), None),
            Step::Ttl(Unit::Seconds),
        ];
        let out = apply(&base, &steps, 1_000, MAX);
        assert_eq!(out.deadline_ms, Some(11_000));
        assert!(out.deadline_changed);
        assert_eq!(out.write, Write::Set(b"2".to_vec()));
        assert_eq!(
            out.reply,
            Reply::Array(vec![Reply::Int(1), Reply::Int(2), Reply::Int(10)])
        );
        let dropped = apply(&out_state(&out), &[set("x", None)], 1_000, MAX);
        assert_eq!(dropped.deadline_ms, None);
        let absent = apply(
            &State::default(),
            &[Step::Expire(None, Condition::Always)],
            0,
            MAX,
        );
        assert_eq!(absent.reply, Reply::Array(vec![Reply::Int(0)]));
        let gone = apply(&base, &[Step::Expire(None, Condition::Always)], 0, MAX);
        assert_eq!(gone.write, Write::Delete);
    }

    /// Rule 3: `NX|XX|GT|LT` inside a transaction judge the deadline the
    /// earlier steps left, as outside one.
    #[test]
    fn expire_conditions_see_the_earlier_steps() {
        let base = State {
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        };
        let expire = |ms, condition| Step::Expire(Some(Expiry::AfterMs(ms)), condition);
        let steps = [
            expire(10_000, Condition::Xx),
            expire(10_000, Condition::Gt),
            expire(10_000, Condition::Nx),
            expire(5_000, Condition::Gt),
            expire(20_000, Condition::Gt),
            expire(30_000, Condition::Lt),
            expire(1_000, Condition::Lt),
            expire(1_000, Condition::Xx),
        ];
        let out = apply(&base, &steps, 1_000, MAX);
        let replies = [0, 0, 1, 0, 1, 0, 1, 1].map(Reply::Int).to_vec();
        assert_eq!(out.reply, Reply::Array(replies));
        assert_eq!(out.deadline_ms, Some(2_000));
        assert!(out.deadline_changed);
        let lt = apply(&base, &[Step::Expire(None, Condition::Lt)], 1_000, MAX);
        assert_eq!(lt.write, Write::Delete, "LT on no deadline holds");
        let gt = apply(&base, &[Step::Expire(None, Condition::Gt)], 1_000, MAX);
        assert_eq!(gt.write, Write::Keep, "GT on no deadline never holds");
    }

    fn out_state(out: &Outcome) -> State {
        match &out.write {
            Write::Set(v) => State {
                value: Some(v.clone()),
                deadline_ms: out.deadline_ms,
            },
            _ => State::default(),
        }
    }
}
