//! RESP's expiry commands, pure: parsing their options into an
//! [`Expiry`], `TTL`/`PTTL`'s replies, and the second step of the commands
//! that read a key's version and then may write a new one (`EXPIRE` and
//! its kin, `PERSIST`, `GETEX`, `SET … KEEPTTL`): [`follow`] decides the
//! write and the reply from the read's answer.
//!
//! Such a command is a read then a write, not an atomic step: a `SET` of
//! the same key from another client between the two can be overwritten
//! by the new version (same value as read, new deadline), or win over it
//! by its timestamp (docs/RESP.md). On a key whose only replica is this
//! node the command is an atomic update instead (`rmw_plan::atomic`,
//! `net::rmw_local`), which runs [`follow`] on what it read.

use super::encode::Reply;
use super::table::failure_reply;
use crate::net::answer::Answer;
use crate::ttl::{DEADLINE_MS_MAX, Expiry};
use std::borrow::Cow;

fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

/// The unit `TTL` (seconds) and `PTTL` (milliseconds) answer in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, rounded to the nearest (as Redis rounds them).
    Seconds,
    /// Milliseconds.
    Millis,
    /// The deadline itself, Unix seconds (`EXPIRETIME`).
    AtSeconds,
    /// The deadline itself, Unix milliseconds (`PEXPIRETIME`).
    AtMillis,
}

impl Unit {
    /// The command that answers in this unit.
    pub fn command(self) -> &'static str {
        match self {
            Unit::Seconds => "ttl",
            Unit::Millis => "pttl",
            Unit::AtSeconds => "expiretime",
            Unit::AtMillis => "pexpiretime",
        }
    }
}

/// `TTL`/`PTTL`'s reply to `answer` at `now_ms`: -2 for a missing (or
/// just expired) key, -1 for a key that never expires, else the time left.
pub fn time_left(answer: &Answer, unit: Unit, now_ms: u64) -> Reply {
    let left_ms = match answer {
        Answer::ValueUntil(_, None) | Answer::Value(..) => return Reply::Int(-1),
        Answer::ValueUntil(_, Some(deadline)) if *deadline > now_ms => deadline - now_ms,
        Answer::Failed(failure, text) => return failure_reply(*failure, text),
        _ => return Reply::Int(-2),
    };
    let left = match unit {
        Unit::Seconds => left_ms.saturating_add(500) / 1_000,
        Unit::Millis => left_ms,
        Unit::AtSeconds => now_ms.saturating_add(left_ms) / 1_000,
        Unit::AtMillis => now_ms.saturating_add(left_ms),
    };
    Reply::Int(i64::try_from(left).unwrap_or(i64::MAX))
}

/// Redis's error for an expiry that is not positive or overflows.
pub(super) fn invalid_expire(command: &str) -> Reply {
    Reply::err(format!("invalid expire time in '{command}' command"))
}

/// The expiry `amount` of `unit` asks for (`ex`, `px`, `exat`, `pxat`):
/// positive and at most [`DEADLINE_MS_MAX`] in milliseconds, as Redis
/// bounds them (a relative one past the maximum once stamped is refused
/// by the stamp, with the same error).
pub(super) fn expiry_of(command: &str, unit: &str, amount: &[u8]) -> Result<Expiry, Reply> {
    let Some(n) = super::decode::parse_i64(amount) else {
        return Err(Reply::err("value is not an integer or out of range"));
    };
    let ms = match unit {
        "ex" | "exat" => n.checked_mul(1_000),
        _ => Some(n),
    };
    let ms = match ms.and_then(|ms| u64::try_from(ms).ok()) {
        Some(ms) if (1..=DEADLINE_MS_MAX).contains(&ms) => ms,
        _ => return Err(invalid_expire(command)),
    };
    Ok(match unit {
        "ex" | "px" => Expiry::AfterMs(ms),
        _ => Expiry::AtMs(ms),
    })
}

/// What `SET`'s options ask of the key's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetExpiry {
    /// This expiry (`Never` without an option).
    To(Expiry),
    /// `KEEPTTL`: the deadline the key has (a read, then the write).
    Keep,
}

/// The options of `SET` (`command` "set") or `GETEX` ("getex") as
/// Redis 7's `parseExtendedStringArgumentsOrReply` parses them, in one
/// pass: a word is refused (`syntax error`) only when it is unknown, not
/// allowed for the command, or clashes with an option already given; a
/// repeat of the same option is allowed (`KEEPTTL KEEPTTL`, `NX NX`,
/// `EX 10 EX 20`: the last amount counts). Only the last amount is
/// checked, after the whole parse (`EX abc EX 20` is fine, as in Redis).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Extended {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    /// The expiry option (lower-case unit) and its amount.
    expiry: Option<(String, Vec<u8>)>,
}

fn extended(options: &[Cow<'_, [u8]>], command: &str) -> Result<Extended, Reply> {
    let set = command == "set";
    let mut o = Extended::default();
    let mut i = 0;
    while i < options.len() {
        let word = lower(&options[i]);
        let unit_other =
            |o: &Extended, unit: &str| o.expiry.as_ref().is_some_and(|(u, _)| u != unit);
        match word.as_str() {
            "nx" if set && !o.xx => o.nx = true,
            "xx" if set && !o.nx => o.xx = true,
            "get" if set => o.get = true,
            "keepttl" if set && o.expiry.is_none() => o.keepttl = true,
            "persist" if !set && o.expiry.is_none() => o.persist = true,
            "ex" | "px" | "exat" | "pxat"
                if !o.keepttl && !o.persist && !unit_other(&o, &word) && i + 1 < options.len() =>
            {
                i += 1;
                o.expiry = Some((word, options[i].to_vec()));
            }
            _ => return Err(Reply::err("syntax error")),
        }
        i += 1;
    }
    Ok(o)
}

/// `SET`'s options ([`Extended`]'s rules): the expiry (`EX`, `PX`,
/// `EXAT`, `PXAT`, `KEEPTTL`) and the condition words (`NX`, `XX`, `GET`,
/// as given) for `super::rmw::parse`.
pub(super) fn set_options(options: &[Cow<'_, [u8]>]) -> Result<(SetExpiry, Vec<Vec<u8>>), Reply> {
    let o = extended(options, "set")?;
    let expiry = match (&o.expiry, o.keepttl) {
        (Some((unit, amount)), _) => SetExpiry::To(expiry_of("set", unit, amount)?),
        (None, true) => SetExpiry::Keep,
        (None, false) => SetExpiry::To(Expiry::Never),
    };
    let conditions = [(o.nx, "nx"), (o.xx, "xx"), (o.get, "get")]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, word)| word.as_bytes().to_vec())
        .collect();
    Ok((expiry, conditions))
}

/// `EXPIRE`'s condition on the key's current deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Always.
    Always,
    /// `NX`: only a key with no deadline.
    Nx,
    /// `XX`: only a key with a deadline.
    Xx,
    /// `GT`: only when the new deadline is later (no deadline counts as
    /// infinite, so never for a key without one).
    Gt,
    /// `LT`: only when the new deadline is sooner (no deadline counts as
    /// infinite).
    Lt,
    /// `XX LT`: only a key with a deadline, and the new one sooner.
    XxLt,
}

/// What the second step does with the read version.
#[derive(Debug, Clone, PartialEq)]
pub enum Then {
    /// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`: the new expiry (`None`:
    /// a time not after now, which deletes the key), on a condition.
    Expire(Option<Expiry>, Condition),
    /// `PERSIST`.
    Persist,
    /// `GETEX`: the value, with a new expiry if one is given
    /// (`Some(Expiry::Never)`: `PERSIST`).
    GetEx(Option<Expiry>),
    /// `GETEX` whose time is not an integer or out of range: Redis 7 looks
    /// the key up before it checks the time, so a missing key answers nil
    /// and an existing one this error (`GETEX nokey EX 0` is nil).
    GetExRefused(Reply),
    /// `SET key value KEEPTTL`: this value, with the deadline the key has.
    KeepTtl(Vec<u8>),
    /// A read-only string command (`GETRANGE`) answered from the value
    /// read: on a key with replicas on other nodes it is a plain read
    /// (`ack` of `from`, as `GET`), never a write.
    Read(super::rmw::Rmw),
}

// The float of an `Rmw` is never NaN (the parser refuses it).
impl Eq for Then {}

/// A read-then-write command's key, replication and second step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The command's name (for a refusal that names it).
    pub name: &'static str,
    /// The key.
    pub key: Vec<u8>,
    /// Replicas that must answer (the session's).
    pub ack: u32,
    /// Replicas asked.
    pub from: u32,
    /// The second step.
    pub then: Then,
}

impl Chain {
    /// The write the command may make, whatever its read finds: it is
    /// admitted under the write role before its read runs.
    pub fn would_write(&self) -> crate::net::dispatch::Command<'static> {
        if let Then::Read(_) = self.then {
            return crate::net::dispatch::Command::Get {
                key: self.key.clone().into(),
                ack: self.ack,
                from: self.from,
            };
        }
        crate::net::dispatch::Command::Write {
            key: self.key.clone().into(),
            value: None,
            expiry: crate::ttl::Expiry::Never,
            ack: self.ack,
            from: self.from,
        }
    }
}

/// The second step's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// No write: this reply.
    Reply(Reply),
    /// Write this (`None`: a delete); once durable, reply `reply`.
    Write {
        /// The new version's value (`None`: a delete).
        value: Option<Vec<u8>>,
        /// Its expiry.
        expiry: Expiry,
        /// The reply once it is durable.
        reply: Reply,
    },
}

/// The deadline an expiry would give a version stamped at `now_ms`.
fn deadline_at(expiry: Option<Expiry>, now_ms: u64) -> u64 {
    match expiry {
        None => 0,
        Some(Expiry::Never) => u64::MAX,
        Some(Expiry::AfterMs(ms)) => now_ms.saturating_add(ms),
        Some(Expiry::AtMs(at)) => at,
    }
}

/// `EXPIRE`'s `condition` on a key whose deadline is `current`, for the
/// new `expiry` (`None`: not after now) at `now_ms` (also inside
/// `MULTI`: `super::multi_apply`).
pub fn condition_holds(
    condition: Condition,
    current: Option<u64>,
    expiry: Option<Expiry>,
    now_ms: u64,
) -> bool {
    holds(condition, current, deadline_at(expiry, now_ms))
}

fn holds(condition: Condition, current: Option<u64>, new_ms: u64) -> bool {
    match (condition, current) {
        (Condition::Always, _) => true,
        (Condition::Nx, current) => current.is_none(),
        (Condition::Xx, current) => current.is_some(),
        (Condition::Gt, Some(current)) => new_ms > current,
        (Condition::Gt, None) => false,
        (Condition::Lt, Some(current)) => new_ms < current,
        (Condition::Lt, None) => true,
        (Condition::XxLt, Some(current)) => new_ms < current,
        (Condition::XxLt, None) => false,
    }
}

/// The second step of `then` given the read's answer `read` at `now_ms`.
pub fn follow(then: &Then, read: &Answer, now_ms: u64) -> Next {
    let (value, current) = match read {
        Answer::ValueUntil(value, deadline) => (value, *deadline),
        Answer::Value(value, _) => (value, None),
        Answer::Failed(failure, text) => return Next::Reply(failure_reply(*failure, text)),
        _ => {
            return Next::Reply(match then {
                Then::Expire(..) | Then::Persist => Reply::Int(0),
                Then::GetEx(_) | Then::GetExRefused(_) => Reply::Null,
                Then::Read(op) => super::rmw::apply(None, op, u64::MAX).reply,
                Then::KeepTtl(new) => {
                    return Next::Write {
                        value: Some(new.clone()),
                        expiry: Expiry::Never,
                        reply: super::encode::OK,
                    };
                }
            });
        }
    };
    let write = |value: Option<&Vec<u8>>, expiry, reply| Next::Write {
        value: value.cloned(),
        expiry,
        reply,
    };
    match then {
        Then::Expire(expiry, condition) => {
            if !holds(*condition, current, deadline_at(*expiry, now_ms)) {
                return Next::Reply(Reply::Int(0));
            }
            match expiry {
                Some(expiry) => write(Some(value), *expiry, Reply::Int(1)),
                None => write(None, Expiry::Never, Reply::Int(1)),
            }
        }
        Then::Persist if current.is_none() => Next::Reply(Reply::Int(0)),
        Then::Persist => write(Some(value), Expiry::Never, Reply::Int(1)),
        Then::GetExRefused(error) => Next::Reply(error.clone()),
        Then::GetEx(None) => Next::Reply(Reply::Bulk(value.clone())),
        Then::GetEx(Some(Expiry::Never)) if current.is_none() => {
            Next::Reply(Reply::Bulk(value.clone()))
        }
        Then::GetEx(Some(expiry)) => write(Some(value), *expiry, Reply::Bulk(value.clone())),
        Then::Read(op) => {
            let live = current.is_none_or(|d| d > now_ms).then_some(&value[..]);
            Next::Reply(super::rmw::apply(live, op, u64::MAX).reply)
        }
        Then::KeepTtl(new) => write(
            Some(new),
            current.map_or(Expiry::Never, Expiry::AtMs),
            super::encode::OK,
        ),
    }
}

/// `EXPIRE key n [NX|XX|GT|LT]` and its kin (`name` lower-case): the new
/// expiry (`None`: not after now, a delete) and the condition.
pub(super) fn expire_args(
    name: &str,
    amount: &[u8],
    options: &[Cow<'_, [u8]>],
) -> Result<(Option<Expiry>, Condition), Reply> {
    let Some(n) = super::decode::parse_i64(amount) else {
        return Err(Reply::err("value is not an integer or out of range"));
    };
    let ms = match name {
        "expire" | "expireat" => n.checked_mul(1_000),
        _ => Some(n),
    }
    .ok_or_else(|| invalid_expire(name))?;
    let expiry = match name {
        _ if ms <= 0 => None,
        _ if ms as u64 > DEADLINE_MS_MAX => return Err(invalid_expire(name)),
        "expire" | "pexpire" => Some(Expiry::AfterMs(ms as u64)),
        _ => Some(Expiry::AtMs(ms as u64)),
    };
    // Redis's order: every option parsed first (an unknown one answered at
    // once), then NX beside any other, then GT beside LT.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in options {
        match lower(option).as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "gt" => gt = true,
            "lt" => lt = true,
            _ => {
                let given = String::from_utf8_lossy(option);
                return Err(Reply::err(format!("Unsupported option {given}")));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(Reply::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(Reply::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    // XX GT is GT (a key without a deadline never passes GT).
    let condition = match (nx, xx, gt, lt) {
        (true, ..) => Condition::Nx,
        (_, _, true, _) => Condition::Gt,
        (_, true, _, true) => Condition::XxLt,
        (_, _, _, true) => Condition::Lt,
        (_, true, ..) => Condition::Xx,
        _ => Condition::Always,
    };
    Ok((expiry, condition))
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]`: a syntax error now,
/// else the second step: the new expiry, if any, or
/// [`Then::GetExRefused`] when its time is refused (answered only once
/// the key is found, as Redis 7 orders it).
pub(super) fn getex_args(options: &[Cow<'_, [u8]>]) -> Result<Then, Reply> {
    let o = extended(options, "getex")?;
    Ok(match (o.expiry, o.persist) {
        (Some((unit, amount)), _) => match expiry_of("getex", &unit, &amount) {
            Ok(expiry) => Then::GetEx(Some(expiry)),
            Err(refused) => Then::GetExRefused(refused),
        },
        (None, true) => Then::GetEx(Some(Expiry::Never)),
        (None, false) => Then::GetEx(None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::answer::Failure;

    use crate::net::resp::test_args as args;

    /// `XX` beside `GT` or `LT` is valid (`XX GT` is `GT`); `NX` beside
    /// any other is refused before `GT` beside `LT`, and both only once
    /// every option parsed, as Redis 7 does.
    #[test]
    fn expire_options_combine_as_redis_combines_them() {
        let cond = |words: &[&str]| expire_args("expire", b"10", &args(words)).map(|(_, c)| c);
        assert_eq!(cond(&["XX", "GT"]), Ok(Condition::Gt));
        assert_eq!(cond(&["gt", "xx"]), Ok(Condition::Gt));
        assert_eq!(cond(&["XX", "LT"]), Ok(Condition::XxLt));
        assert_eq!(cond(&["LT", "XX", "lt"]), Ok(Condition::XxLt));
        assert_eq!(cond(&["XX", "XX"]), Ok(Condition::Xx));
        assert_eq!(cond(&[]), Ok(Condition::Always));
        let text = |r: Result<Condition, Reply>| format!("{:?}", r.unwrap_err());
        assert!(text(cond(&["GT", "LT", "NX"])).contains("NX and XX, GT or LT"));
        assert!(text(cond(&["GT", "LT"])).contains("GT and LT"));
        assert!(text(cond(&["GT", "LT", "bogus"])).contains("Unsupported option bogus"));
    }

    /// `TTL` and `PTTL`: -2 missing or expired, -1 no deadline, else the
    /// time left (seconds rounded to the nearest, as Redis does).
    #[test]
    fn time_left_as_redis_answers_it() {
        let v = |deadline| Answer::ValueUntil(b"v".to_vec(), deadline);
        assert_eq!(
            time_left(&Answer::NotFound(None), Unit::Seconds, 0),
            Reply::Int(-2)
        );
        assert_eq!(time_left(&v(None), Unit::Millis, 0), Reply::Int(-1));
        assert_eq!(time_left(&v(Some(10)), Unit::Millis, 10), Reply::Int(-2));
        assert_eq!(
            time_left(&v(Some(2_345)), Unit::Millis, 0),
            Reply::Int(2_345)
        );
        assert_eq!(time_left(&v(Some(2_345)), Unit::Seconds, 0), Reply::Int(2));
        assert_eq!(time_left(&v(Some(2_500)), Unit::Seconds, 0), Reply::Int(3));
        assert_eq!(
            time_left(&v(Some(2_500)), Unit::AtSeconds, 7),
            Reply::Int(2)
        );
        assert_eq!(
            time_left(&v(Some(2_500)), Unit::AtMillis, 7),
            Reply::Int(2_500)
        );
        assert_eq!(time_left(&v(None), Unit::AtMillis, 7), Reply::Int(-1));
    }

    #[test]
    fn expire_arguments_as_redis_takes_them() {
        assert_eq!(
            expire_args("expire", b"10", &[]),
            Ok((Some(Expiry::AfterMs(10_000)), Condition::Always))
        );
        assert_eq!(
            expire_args("pexpireat", b"1234", &args(&["gt"])),
            Ok((Some(Expiry::AtMs(1234)), Condition::Gt))
        );
        assert_eq!(
            expire_args("expire", b"0", &[]),
            Ok((None, Condition::Always))
        );
        assert_eq!(
            expire_args("pexpire", b"-5", &args(&["NX", "nx"])),
            Ok((None, Condition::Nx))
        );
        let e = |r: Result<_, Reply>| match r {
            Err(Reply::Error(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            e(expire_args("expire", b"999999999999999999", &[])),
            "ERR invalid expire time in 'expire' command"
        );
        assert!(e(expire_args("expire", b"x", &[])).contains("not an integer"));
        assert!(e(expire_args("expire", b"1", &args(&["gt", "lt"]))).contains("GT and LT"));
        assert!(e(expire_args("expire", b"1", &args(&["nx", "xx"]))).contains("NX and XX"));
        assert!(e(expire_args("expire", b"1", &args(&["bogus"]))).contains("Unsupported option"));
        assert_eq!(getex_args(&[]), Ok(Then::GetEx(None)));
        assert_eq!(
            getex_args(&args(&["PERSIST"])),
            Ok(Then::GetEx(Some(Expiry::Never)))
        );
        assert_eq!(
            getex_args(&args(&["px", "5"])),
            Ok(Then::GetEx(Some(Expiry::AfterMs(5))))
        );
        assert!(getex_args(&args(&["px"])).is_err());
        // A refused time is answered only once the key is found.
        let invalid = Reply::err("invalid expire time in 'getex' command");
        assert_eq!(
            getex_args(&args(&["ex", "0"])),
            Ok(Then::GetExRefused(invalid.clone()))
        );
        let not_integer = Reply::err("value is not an integer or out of range");
        assert_eq!(
            getex_args(&args(&["px", "abc"])),
            Ok(Then::GetExRefused(not_integer.clone()))
        );
        let refused = Then::GetExRefused(invalid.clone());
        assert_eq!(
            follow(&refused, &Answer::NotFound(None), 0),
            Next::Reply(Reply::Null)
        );
        assert_eq!(
            follow(&refused, &Answer::ValueUntil(b"v".to_vec(), None), 0),
            Next::Reply(invalid)
        );
    }

    /// Redis 7's one-pass option parser: a repeat is allowed (the last
    /// amount counts, only it is checked), a clash is a syntax error
    /// before any amount is checked.
    #[test]
    fn repeated_options_parse_as_redis_does() {
        let set = |words: &[&str]| set_options(&args(words));
        let syntax = Err(Reply::err("syntax error"));
        let nx = vec![b"nx".to_vec()];
        assert_eq!(set(&["keepttl", "KEEPTTL"]), Ok((SetExpiry::Keep, vec![])));
        assert_eq!(
            set(&["nx", "NX"]),
            Ok((SetExpiry::To(Expiry::Never), nx.clone()))
        );
        assert_eq!(
            set(&["ex", "abc", "EX", "20"]),
            Ok((SetExpiry::To(Expiry::AfterMs(20_000)), vec![]))
        );
        assert_eq!(set(&["ex", "10", "px", "20"]), syntax);
        assert_eq!(set(&["keepttl", "ex", "10"]), syntax);
        assert_eq!(set(&["ex", "10", "keepttl"]), syntax);
        assert_eq!(set(&["ex", "10", "ex"]), syntax);
        assert_eq!(set(&["nx", "ex", "abc", "xx"]), syntax);
        assert_eq!(set(&["persist"]), syntax);
        let not_integer = Err(Reply::err("value is not an integer or out of range"));
        assert_eq!(set(&["ex", "nx"]), not_integer);
        assert_eq!(
            getex_args(&args(&["persist", "persist"])),
            Ok(Then::GetEx(Some(Expiry::Never)))
        );
        assert_eq!(
            getex_args(&args(&["ex", "0", "ex", "1"])),
            Ok(Then::GetEx(Some(Expiry::AfterMs(1_000))))
        );
        let syntax = Err(Reply::err("syntax error"));
        assert_eq!(getex_args(&args(&["ex", "1", "persist"])), syntax);
        assert_eq!(getex_args(&args(&["keepttl"])), syntax);
    }

    /// `GETRANGE` as a plain read's second step: Redis's replies from the
    /// value read, an expired or missing value as empty, never a write.
    #[test]
    fn a_read_only_step_answers_from_the_value_read() {
        let range = Then::Read(crate::net::resp::rmw::Rmw::GetRange { start: 1, end: -1 });
        let v = |deadline| Answer::ValueUntil(b"hello".to_vec(), deadline);
        let bulk = |b: &[u8]| Next::Reply(Reply::Bulk(b.to_vec()));
        assert_eq!(follow(&range, &v(None), 0), bulk(b"ello"));
        assert_eq!(follow(&range, &v(Some(10)), 5), bulk(b"ello"));
        assert_eq!(follow(&range, &v(Some(10)), 10), bulk(b""));
        assert_eq!(follow(&range, &Answer::NotFound(None), 0), bulk(b""));
    }

    /// The second step: replies for a missing key, conditions on the
    /// current deadline, and the new version written.
    #[test]
    fn the_second_step_follows_redis() {
        let v = |deadline| Answer::ValueUntil(b"v".to_vec(), deadline);
        let put = |expiry, reply| Next::Write {
            value: Some(b"v".to_vec()),
            expiry,
            reply,
        };
        let expire = |c| Then::Expire(Some(Expiry::AtMs(5_000)), c);
        // Missing keys.
        assert_eq!(
            follow(&expire(Condition::Always), &Answer::NotFound(None), 0),
            Next::Reply(Reply::Int(0))
        );
        assert_eq!(
            follow(&Then::Persist, &Answer::NotFound(None), 0),
            Next::Reply(Reply::Int(0))
        );
        assert_eq!(
            follow(&Then::GetEx(None), &Answer::NotFound(None), 0),
            Next::Reply(Reply::Null)
        );
        // EXPIRE and its conditions.
        assert_eq!(
            follow(&expire(Condition::Always), &v(None), 0),
            put(Expiry::AtMs(5_000), Reply::Int(1))
        );
        assert_eq!(
            follow(&Then::Expire(None, Condition::Always), &v(None), 0),
            Next::Write {
                value: None,
                expiry: Expiry::Never,
                reply: Reply::Int(1)
            }
        );
        for (condition, current, applies) in [
            (Condition::Nx, None, true),
            (Condition::Nx, Some(9_000), false),
            (Condition::Xx, None, false),
            (Condition::Xx, Some(9_000), true),
            (Condition::Gt, None, false),
            (Condition::Gt, Some(4_000), true),
            (Condition::Gt, Some(9_000), false),
            (Condition::Lt, None, true),
            (Condition::Lt, Some(4_000), false),
            (Condition::Lt, Some(9_000), true),
            (Condition::XxLt, None, false),
            (Condition::XxLt, Some(4_000), false),
            (Condition::XxLt, Some(9_000), true),
        ] {
            let next = follow(&expire(condition), &v(current), 0);
            assert_eq!(
                matches!(next, Next::Write { .. }),
                applies,
                "{condition:?} {current:?}"
            );
        }
        // PERSIST, GETEX, KEEPTTL.
        assert_eq!(
            follow(&Then::Persist, &v(None), 0),
            Next::Reply(Reply::Int(0))
        );
        assert_eq!(
            follow(&Then::Persist, &v(Some(9)), 0),
            put(Expiry::Never, Reply::Int(1))
        );
        let bulk = Reply::Bulk(b"v".to_vec());
        assert_eq!(
            follow(&Then::GetEx(None), &v(Some(9)), 0),
            Next::Reply(bulk.clone())
        );
        assert_eq!(
            follow(&Then::GetEx(Some(Expiry::AfterMs(7))), &v(None), 0),
            put(Expiry::AfterMs(7), bulk.clone())
        );
        assert_eq!(
            follow(&Then::GetEx(Some(Expiry::Never)), &v(Some(9)), 0),
            put(Expiry::Never, bulk)
        );
        let keep = Then::KeepTtl(b"v".to_vec());
        assert_eq!(
            follow(&keep, &v(Some(9)), 0),
            put(Expiry::AtMs(9), super::super::encode::OK)
        );
        assert_eq!(
            follow(&keep, &Answer::NotFound(None), 0),
            put(Expiry::Never, super::super::encode::OK)
        );
        let busy = Answer::Failed(Failure::Busy, "later".into());
        assert_eq!(
            follow(&keep, &busy, 0),
            Next::Reply(Reply::Error("TRYAGAIN later".into()))
        );
    }
}
