//! `MULTI`, `EXEC`, `DISCARD` as pure rules: a connection's queue of
//! commands, checked as they come, and `EXEC`'s plan: one atomic update
//! of the transaction's one key ([`super::multi_apply`]).
//!
//! # Rules (Redis 7's replies, checked side by side in
//! `crates/ataman/tests/resp_multi.rs`)
//! 1. `MULTI` opens the queue (`+OK`); inside it, `MULTI` is
//!    `ERR MULTI calls can not be nested` and `WATCH` is
//!    `ERR WATCH inside MULTI is not allowed`; neither is queued.
//!    `EXEC` and `DISCARD` without `MULTI` are
//!    `ERR EXEC without MULTI`, `ERR DISCARD without MULTI`; `EXEC` with
//!    arguments inside `MULTI` discards the transaction (`EXECABORT`).
//!    `WATCH` and `UNWATCH` outside it follow [`super::watch`]: the
//!    watched key is the transaction's key, and `EXEC` (any answer),
//!    `DISCARD` and `UNWATCH` clear the watch.
//! 2. Inside the queue every other command is checked when it arrives
//!    (its name, its arity, that a transaction may hold it, that it names
//!    the transaction's key) and answered `+QUEUED`, or its error, which
//!    marks the transaction failed: `EXEC` then answers
//!    `EXECABORT Transaction discarded because of previous errors.` and
//!    runs nothing. `QUIT` and `RESET` are not queued (they end the
//!    connection's session, the queue with it).
//! 3. **One key.** Every queued command names the same key (`PING` and
//!    `ECHO` name none): the first key named is the transaction's; a
//!    command naming another is refused (rule 2's failure). A transaction
//!    may hold `GET`, `SET` (any options), `DEL`, `EXISTS`, the `INCR`
//!    family, `APPEND`, `STRLEN`, `GETRANGE`, `SETRANGE`, `GETSET`,
//!    `GETDEL`, `SETNX`, `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT`
//!    (with `NX|XX|GT|LT`), `TTL`,
//!    `PTTL`, `PING`, `ECHO`, `UNWATCH` ([`TX_COMMANDS`]).
//! 4. **Bounded.** At most [`TX_QUEUED_MAX`] commands and
//!    [`TX_QUEUED_BYTES_MAX`] bytes of arguments are queued; the command
//!    past either bound is refused (rule 2's failure).
//! 5. `EXEC` of an empty queue answers the empty array; of a queue naming
//!    no key, the array of the replies; else one update of the key
//!    (`crate::net::rmw_local`) whose reply is the array. A syntax error
//!    Redis finds only when it runs the command (`SET k v BAD`,
//!    `INCRBY k x`) is that command's element of the array, as in Redis.

use super::encode::{OK, Reply};
use super::expiry::{Unit, expire_args};
use super::multi_apply::Step;
use super::table::{Limits, Plan, lookup_bytes, refusal, unknown_command, wrong_arity};
use super::watch::Watched;
use crate::net::resp::rmw::Rmw;
use crate::net::rmw_local::{Op, Ttl, Update};
use std::borrow::Cow;

/// Commands one transaction may queue (rule 4).
pub const TX_QUEUED_MAX: usize = 1_024;
/// Bytes of arguments one transaction may queue (rule 4).
pub const TX_QUEUED_BYTES_MAX: usize = 16 << 20;

/// The commands a transaction may hold (rule 3).
pub const TX_COMMANDS: &[&str] = &[
    "ping",
    "echo",
    "unwatch",
    "get",
    "set",
    "del",
    "exists",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "incrbyfloat",
    "append",
    "strlen",
    "getrange",
    "setrange",
    "getset",
    "getdel",
    "setnx",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "ttl",
    "pttl",
];

/// A connection's open transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queue {
    /// The queued commands, name first.
    commands: Vec<Vec<Vec<u8>>>,
    /// Their bytes.
    bytes: usize,
    /// The transaction's key, once a command named one.
    key: Option<Vec<u8>>,
    /// A command was refused (rule 2): `EXEC` runs nothing.
    failed: bool,
}

/// What the command table does with a command, given the transaction.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not a transaction's business: planned as usual.
    Pass,
    /// Answered now (queued, refused, opened, discarded).
    Reply(Reply),
    /// `EXEC` of this queue (the transaction is closed) under this watch
    /// (taken: cleared).
    Exec(Queue, Option<Watched>),
    /// `WATCH`: read this key and keep it ([`super::watch`]).
    Watch(Vec<u8>),
}

/// Rules 1, 2: `args` (never empty) against the connection's `open`
/// transaction and its `watched` key.
pub fn intercept(
    args: &[Cow<'_, [u8]>],
    open: &mut Option<Queue>,
    watched: &mut Option<Watched>,
) -> Verdict {
    let is = |n: &str| args[0].eq_ignore_ascii_case(n.as_bytes());
    let refuse = |open: &mut Option<Queue>, reply: Reply| {
        if let Some(q) = open.as_mut() {
            q.failed = true;
        }
        Verdict::Reply(reply)
    };
    let control = ["multi", "exec", "discard"].iter().any(|n| is(n));
    if is("exec") && args.len() != 1 && open.take().is_some() {
        *watched = None;
        return Verdict::Reply(Reply::Error(
            "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' \
             command"
                .into(),
        ));
    }
    if control && args.len() != 1 {
        return refuse(
            open,
            wrong_arity(&String::from_utf8_lossy(&args[0]).to_lowercase()),
        );
    }
    match open {
        None if is("multi") => {
            *open = Some(Queue {
                key: watched.as_ref().map(|w| w.key.clone()),
                ..Queue::default()
            });
            Verdict::Reply(OK)
        }
        None if is("exec") => Verdict::Reply(Reply::err("EXEC without MULTI")),
        None if is("discard") => Verdict::Reply(Reply::err("DISCARD without MULTI")),
        None if is("unwatch") && args.len() == 1 => {
            *watched = None;
            Verdict::Reply(OK)
        }
        None if is("unwatch") => Verdict::Reply(wrong_arity("unwatch")),
        None if is("watch") && args.len() < 2 => Verdict::Reply(wrong_arity("watch")),
        None if is("watch") => match super::watch::watch(&args[1..], watched.as_ref()) {
            super::watch::Verdict::Read(key) => Verdict::Watch(key),
            super::watch::Verdict::Reply(reply) => Verdict::Reply(reply),
        },
        None => Verdict::Pass,
        Some(_) if is("quit") || is("reset") => Verdict::Pass,
        Some(_) if is("multi") => Verdict::Reply(Reply::err("MULTI calls can not be nested")),
        Some(_) if is("watch") => Verdict::Reply(Reply::err("WATCH inside MULTI is not allowed")),
        Some(_) if is("discard") => {
            *open = None;
            *watched = None;
            Verdict::Reply(OK)
        }
        Some(_) if is("exec") => Verdict::Exec(open.take().unwrap_or_default(), watched.take()),
        Some(queue) => match queue.push(args) {
            Ok(()) => Verdict::Reply(Reply::Simple("QUEUED")),
            Err(reply) => refuse(open, reply),
        },
    }
}

impl Queue {
    /// Rules 2–4 for one command.
    fn push(&mut self, args: &[Cow<'_, [u8]>]) -> Result<(), Reply> {
        let (name, arity) = match lookup_bytes(&args[0]) {
            Some((_, spec)) => (spec.name, spec.arity),
            None if args[0].eq_ignore_ascii_case(b"unwatch") => ("unwatch", 1),
            None => {
                let lower = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
                return Err(refusal(args, &lower).unwrap_or_else(|| unknown_command(args)));
            }
        };
        let argc = args.len() as i64;
        if (arity > 0 && argc != arity) || argc < -arity {
            return Err(wrong_arity(name));
        }
        if !TX_COMMANDS.contains(&name) {
            return Err(Reply::err(format!(
                "{} inside MULTI is not supported: a transaction holds commands of one key \
                 ({}; docs/RESP.md)",
                name.to_ascii_uppercase(),
                TX_COMMANDS.join(" ").to_ascii_uppercase()
            )));
        }
        let keys: &[Cow<'_, [u8]>] = match name {
            "ping" | "echo" | "unwatch" => &[],
            "del" | "exists" => &args[1..],
            _ => &args[1..2],
        };
        for key in keys {
            match &self.key {
                Some(k) if k[..] != key[..] => {
                    return Err(Reply::err(format!(
                        "a transaction touches one key: '{}' after '{}' (docs/RESP.md)",
                        String::from_utf8_lossy(&key[..key.len().min(64)]),
                        String::from_utf8_lossy(&k[..k.len().min(64)]),
                    )));
                }
                Some(_) => {}
                None => self.key = Some(key.to_vec()),
            }
        }
        let bytes: usize = args.iter().map(|a| a.len()).sum();
        if self.commands.len() >= TX_QUEUED_MAX || self.bytes + bytes > TX_QUEUED_BYTES_MAX {
            return Err(Reply::err(format!(
                "a transaction holds at most {TX_QUEUED_MAX} commands and \
                 {TX_QUEUED_BYTES_MAX} bytes of arguments (docs/RESP.md)"
            )));
        }
        self.bytes += bytes;
        self.commands
            .push(args.iter().map(|a| a.to_vec()).collect());
        Ok(())
    }
}

/// Rule 5: `EXEC` of `queue` with the session's `ack`/`from`, under the
/// watch `watched` had (its key is the queue's: [`intercept`]).
pub fn exec<'b>(
    queue: Queue,
    watched: Option<Watched>,
    limits: Limits,
    (ack, from): (u32, u32),
) -> Plan<'b> {
    if queue.failed {
        return Plan::Reply(Reply::Error(
            "EXECABORT Transaction discarded because of previous errors.".into(),
        ));
    }
    let steps: Vec<Step> = queue
        .commands
        .iter()
        .map(|args| step(args, limits))
        .collect();
    let Some(key) = queue.key else {
        let replies = steps.into_iter().map(|s| match s {
            Step::Reply(r) => r,
            _ => Reply::err("internal error: a keyed step without a key"),
        });
        return Plan::Reply(Reply::Array(replies.collect()));
    };
    let watch = watched.map(|w| {
        debug_assert!(w.key == key, "the watched key is the transaction's");
        w.seen
    });
    let update = Update {
        key,
        // Unused: a transaction runs `steps` (`Update::steps`).
        op: Op::Value(Rmw::Strlen),
        ttl: Ttl::Keep,
        ack,
        from,
        steps,
        watch,
    };
    Plan::Rmw("exec", Box::new(update))
}

/// One queued command (checked by [`Queue::push`]) as a step.
fn step(args: &[Vec<u8>], limits: Limits) -> Step {
    let args: Vec<Cow<'_, [u8]>> = args.iter().map(|a| Cow::Borrowed(&a[..])).collect();
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let rmw = |plan: Result<Plan<'_>, Reply>| match plan {
        Ok(Plan::Rmw(_, u)) => match u.op {
            Op::Value(op) => Step::Rmw(
                op,
                match u.ttl {
                    Ttl::Keep => None,
                    Ttl::Set(e) => Some(e),
                },
            ),
            Op::Expiry(_) | Op::Conditional(_) | Op::Watch => {
                Step::Reply(Reply::err("internal error: not a value update"))
            }
        },
        Ok(_) => Step::Reply(Reply::err("internal error: not a read-modify-write")),
        Err(reply) => Step::Reply(reply),
    };
    let keyless = ["ping", "echo", "unwatch"].contains(&name.as_str());
    if let Some(Err(reply)) = (!keyless).then(|| super::table::check_key(&args[1], limits)) {
        return Step::Reply(reply);
    }
    match name.as_str() {
        "ping" if args.len() > 2 => Step::Reply(wrong_arity("ping")),
        "ping" if args.len() == 2 => Step::Reply(Reply::Bulk(args[1].to_vec())),
        "ping" => Step::Reply(Reply::Simple("PONG")),
        "echo" => Step::Reply(Reply::Bulk(args[1].to_vec())),
        "unwatch" => Step::Reply(OK),
        "get" => Step::Get,
        "del" => Step::Del,
        "exists" => Step::Exists(args.len() as i64 - 1),
        "ttl" => Step::Ttl(Unit::Seconds),
        "pttl" => Step::Ttl(Unit::Millis),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            match expire_args(&name, &args[2], &args[3..]) {
                Ok((expiry, condition)) => Step::Expire(expiry, condition),
                Err(reply) => Step::Reply(reply),
            }
        }
        "set" => rmw(super::rmw_plan::set(&args, limits, 0, 0)),
        _ => {
            let spec = lookup_bytes(&args[0]).map_or("unwatch", |(_, s)| s.name);
            rmw(super::rmw_plan::update(spec, &args, limits, 0, 0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::resp::test_args as args;

    const LIMITS: Limits = Limits {
        key_bytes_max: 8,
        value_bytes_max: 16,
        cluster_size: 1,
        from_default: 1,
    };

    fn send(open: &mut Option<Queue>, words: &[&str]) -> Verdict {
        intercept(&args(words), open, &mut None)
    }

    fn reply(open: &mut Option<Queue>, words: &[&str]) -> Reply {
        match send(open, words) {
            Verdict::Reply(r) => r,
            other => panic!("{words:?}: {other:?}"),
        }
    }

    /// Rule 1: the control commands' replies, in and out of a transaction.
    #[test]
    fn control_commands_answer_as_redis() {
        let mut open = None;
        assert_eq!(
            reply(&mut open, &["exec"]),
            Reply::err("EXEC without MULTI")
        );
        assert_eq!(
            reply(&mut open, &["DISCARD"]),
            Reply::err("DISCARD without MULTI")
        );
        assert_eq!(send(&mut open, &["get", "k"]), Verdict::Pass);
        assert_eq!(reply(&mut open, &["multi"]), OK);
        let nested = reply(&mut open, &["multi"]);
        assert_eq!(nested, Reply::err("MULTI calls can not be nested"));
        assert_eq!(send(&mut open, &["quit"]), Verdict::Pass);
        assert_eq!(reply(&mut open, &["discard"]), OK);
        assert_eq!(open, None);
    }

    /// Rules 2, 3: queued, refused for another key or a command a
    /// transaction cannot hold; a refusal fails the transaction.
    #[test]
    fn queueing_checks_each_command() {
        let mut open = None;
        reply(&mut open, &["multi"]);
        let queued = Reply::Simple("QUEUED");
        assert_eq!(reply(&mut open, &["set", "k", "1"]), queued);
        assert_eq!(reply(&mut open, &["ping"]), queued);
        assert_eq!(reply(&mut open, &["del", "k", "k"]), queued);
        assert!(open.as_ref().is_some_and(|q| !q.failed));
        let other = reply(&mut open, &["del", "k", "j"]);
        assert!(
            matches!(&other, Reply::Error(e) if e.contains("one key")),
            "{other:?}"
        );
        assert!(
            open.as_ref()
                .is_some_and(|q| q.failed && q.commands.len() == 3)
        );
        let Verdict::Exec(queue, None) = send(&mut open, &["exec"]) else {
            panic!("not an exec")
        };
        let aborted = exec(queue, None, LIMITS, (1, 1));
        assert!(matches!(aborted, Plan::Reply(Reply::Error(e)) if e.starts_with("EXECABORT")));
        reply(&mut open, &["multi"]);
        let mget = reply(&mut open, &["mget", "k"]);
        assert!(matches!(&mget, Reply::Error(e) if e.contains("MGET inside MULTI")));
    }

    /// Rule 1 with a watch: `WATCH` asks for a read; the watched key is
    /// the queue's; `EXEC` takes the watch (cleared whatever it answers),
    /// `DISCARD` and `UNWATCH` clear it, `EXEC` without `MULTI` keeps it.
    #[test]
    fn the_watch_is_the_transactions_key_and_is_cleared() {
        use super::super::watch::{Seen, Watched};
        let watched = || {
            Some(Watched {
                key: b"w".to_vec(),
                seen: Seen::of(Some(3), true, None, 0),
            })
        };
        let (mut open, mut w) = (None, None);
        let send = |open: &mut Option<Queue>, w: &mut Option<Watched>, words: &[&str]| {
            intercept(&args(words), open, w)
        };
        assert_eq!(
            send(&mut open, &mut w, &["watch", "w"]),
            Verdict::Watch(b"w".to_vec())
        );
        let arity = send(&mut open, &mut w, &["watch"]);
        assert_eq!(arity, Verdict::Reply(wrong_arity("watch")));
        w = watched();
        assert!(matches!(
            send(&mut open, &mut w, &["exec"]),
            Verdict::Reply(Reply::Error(_))
        ));
        assert_eq!(w, watched(), "EXEC without MULTI keeps the watch");
        assert_eq!(send(&mut open, &mut w, &["multi"]), Verdict::Reply(OK));
        let other = send(&mut open, &mut w, &["get", "x"]);
        assert!(matches!(other, Verdict::Reply(Reply::Error(e)) if e.contains("one key")));
        let Verdict::Exec(queue, Some(taken)) = send(&mut open, &mut w, &["exec"]) else {
            panic!("EXEC without its watch")
        };
        assert_eq!((queue.key.as_deref(), w.as_ref()), (Some(&b"w"[..]), None));
        assert_eq!(Some(taken), watched());
        w = watched();
        send(&mut open, &mut w, &["multi"]);
        assert_eq!(send(&mut open, &mut w, &["discard"]), Verdict::Reply(OK));
        assert_eq!(w, None, "DISCARD clears the watch");
        w = watched();
        assert_eq!(send(&mut open, &mut w, &["unwatch"]), Verdict::Reply(OK));
        assert_eq!(w, None, "UNWATCH clears the watch");
        // A keyless transaction under a watch is a check of the watched key.
        w = watched();
        send(&mut open, &mut w, &["multi"]);
        let Verdict::Exec(queue, taken) = send(&mut open, &mut w, &["exec"]) else {
            panic!("not an exec")
        };
        let Plan::Rmw("exec", update) = exec(queue, taken, LIMITS, (1, 1)) else {
            panic!("a watched EXEC is not an update")
        };
        assert_eq!(
            (update.key, update.watch),
            (b"w".to_vec(), Some(Seen::of(Some(3), true, None, 0)))
        );
    }

    /// Rule 4: the command past the bound is refused.
    #[test]
    fn the_queue_is_bounded() {
        let mut open = None;
        reply(&mut open, &["multi"]);
        for _ in 0..TX_QUEUED_MAX {
            assert_eq!(reply(&mut open, &["incr", "k"]), Reply::Simple("QUEUED"));
        }
        let past = reply(&mut open, &["incr", "k"]);
        assert!(
            matches!(&past, Reply::Error(e) if e.contains("at most")),
            "{past:?}"
        );
        assert!(open.as_ref().is_some_and(|q| q.failed));
    }

    /// Rule 5: an empty or keyless `EXEC` answers at once; a keyed one is
    /// one update of the key whose steps are the queued commands, a
    /// runtime syntax error kept as its step's reply.
    #[test]
    fn exec_plans_one_update_of_the_key() {
        let mut open = None;
        let run = |open: &mut Option<Queue>, cmds: &[&[&str]]| {
            reply(open, &["multi"]);
            for c in cmds {
                reply(open, c);
            }
            match send(open, &["exec"]) {
                Verdict::Exec(q, w) => exec(q, w, LIMITS, (1, 1)),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(run(&mut open, &[]), Plan::Reply(Reply::Array(vec![])));
        assert_eq!(
            run(&mut open, &[&["ping"], &["echo", "e"]]),
            Plan::Reply(Reply::Array(vec![Reply::Simple("PONG"), Reply::text("e")]))
        );
        let plan = run(
            &mut open,
            &[&["set", "k", "v", "bad"], &["incr", "k"], &["ttl", "k"]],
        );
        let Plan::Rmw("exec", update) = plan else {
            panic!("{plan:?}")
        };
        assert_eq!(update.key, b"k");
        assert_eq!(
            update.steps,
            vec![
                Step::Reply(Reply::err("syntax error")),
                Step::Rmw(Rmw::IncrBy(1), None),
                Step::Ttl(Unit::Seconds)
            ]
        );
    }
}
