//! The RESP command table: a command's name and arity, and what it becomes:
//! an immediate reply, a change of the connection's session, one or more
//! protocol-neutral [`Command`]s (whose answers [`combine`] makes one
//! reply), or a question for the node (`INFO`, `DBSIZE`, …).
//!
//! Pure: no socket, no engine. Refusals say why (docs/RESP.md): commands
//! that need an atomic read-modify-write, which a leaderless
//! last-writer-wins store cannot honour; commands of types ataman does not
//! have; the expiry commands that need a read then a write, until they
//! are wired.

use super::commands::{ATOMIC, OTHER_TYPES};
pub use super::commands::{COMMANDS, OTHER, Spec};
use super::describe::{self, Describe};
use super::encode::{OK, Proto, Reply};
use super::expiry::{
    Chain, SetExpiry, Then, Unit, expire_args, expiry_of, getex_args, invalid_expire, set_options,
    time_left,
};
use super::key_commands::KeyCommands;
use super::scan::glob_match;
use crate::net::answer::{Answer, Failure};
use crate::net::dispatch::Command;
use crate::ttl::Expiry;
use std::borrow::Cow;

pub use super::session::{Limits, Session};

/// What the keys of a command fan out to, and how their answers combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOp {
    /// `GET`: one read.
    Get,
    /// `SET`: one write.
    Set,
    /// `SET … EX|PX|EXAT|PXAT`, `SETEX`, `PSETEX` (the command's name, for
    /// Redis's error when the deadline is past the maximum): one write.
    SetExpiring(&'static str),
    /// `TTL`, `PTTL`: one read of the version, its deadline answered in
    /// this unit.
    Ttl(Unit),
    /// A read of the version, then maybe a write ([`Plan::ReadThen`]).
    Chained,
    /// `DEL`, `UNLINK`: a delete per key.
    Del,
    /// `EXISTS`: a read per key, counted.
    Exists,
    /// `MGET`: a read per key.
    MGet,
    /// `MSET`: a write per pair.
    MSet,
    /// `TYPE`, `STRLEN`, `MEMORY USAGE`: one read, described
    /// ([`super::describe`]).
    Describe(Describe),
}

/// The `'static` name of a served command (for errors that name it).
fn spec_name(name: &str) -> &'static str {
    lookup(name).map_or("set", |(_, spec)| spec.name)
}

/// What the node is asked (the connection layer answers these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeQuery {
    /// `INFO [section…]` (lower-case; empty: the default sections).
    Info(Vec<String>),
    /// `DBSIZE`.
    DbSize,
    /// `TIME`.
    Time,
    /// `CONFIG GET pattern…`.
    ConfigGet(Vec<Vec<u8>>),
    /// `CLIENT INFO`.
    ClientInfo,
    /// `BGSAVE [SCHEDULE]`: take a node checkpoint in the background.
    BgSave,
    /// `LASTSAVE`.
    LastSave,
    /// `ATAMAN.HOTKEYS [count]`: at most `count` hot keys.
    HotKeys(usize),
}

/// What a command becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan<'a> {
    /// Answered at once.
    Reply(Reply),
    /// Answered at once; then the connection closes (`QUIT`).
    Close(Reply),
    /// Work for the dispatcher, one command per key.
    Keys(KeyOp, KeyCommands<'a>),
    /// A read of one key's version ([`Command::GetVersion`]), then the
    /// chain's second step ([`super::expiry::follow`]).
    ReadThen(Command<'a>, Box<Chain>),
    /// A question for the node.
    Node(NodeQuery),
    /// A page of a cluster-wide `SCAN` (computed on a range thread).
    Scan(super::scan::ScanArgs),
    /// A slow-log operation (`SLOWLOG`, `CONFIG SET`), admitted under the
    /// command's name ([`crate::net::authorize`]).
    Slowlog(&'static str, crate::slowlog::Op),
    /// An atomic read-modify-write of one key (`INCR`, `SET … NX`, …),
    /// admitted as a write under the command's name.
    Rmw(&'static str, Box<crate::net::rmw_local::Update>),
    /// `WATCH key` (`ack`, `from` for the read's admission): read the
    /// key's version and keep it in the session ([`super::watch`]).
    Watch(Vec<u8>, u32, u32),
}

/// The spec of `name` (lower-case), if served.
pub fn lookup(name: &str) -> Option<(usize, &'static Spec)> {
    lookup_bytes(name.as_bytes())
}

/// The spec of `name` in any case, if served (no allocation: the hot path).
pub fn lookup_bytes(name: &[u8]) -> Option<(usize, &'static Spec)> {
    COMMANDS
        .iter()
        .enumerate()
        .find(|(_, s)| s.name.as_bytes().eq_ignore_ascii_case(name))
}

fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

/// Longest name or argument quoted back in an error.
const QUOTED_BYTES_MAX: usize = 128;

fn quoted(arg: &[u8]) -> String {
    let text = String::from_utf8_lossy(&arg[..arg.len().min(QUOTED_BYTES_MAX)]);
    text.replace(['\r', '\n'], " ")
}

/// Redis's unknown-command error.
pub fn unknown_command(args: &[Cow<'_, [u8]>]) -> Reply {
    let mut text = format!(
        "unknown command '{}', with args beginning with: ",
        quoted(&args[0])
    );
    for arg in args.iter().skip(1).take(8) {
        text.push_str(&format!("'{}' ", quoted(arg)));
    }
    Reply::err(text)
}

/// Redis's wrong-arity error (`name` as Redis names it: `get`, `client|setname`).
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{name}' command"))
}

pub(super) fn refusal(args: &[Cow<'_, [u8]>], name: &str) -> Option<Reply> {
    let upper = name.to_ascii_uppercase();
    if ATOMIC.contains(&name) {
        return Some(Reply::err(format!(
            "{upper} is not supported: it needs an atomic read-modify-write, which ataman's \
             leaderless last-writer-wins replication cannot honour (docs/RESP.md)"
        )));
    }
    if name == "keys" {
        return Some(Reply::err(
            "KEYS is not supported: its one reply holding every key of the cluster has no \
             bound; iterate with SCAN instead (docs/RESP.md)",
        ));
    }
    if OTHER_TYPES.contains(&name) {
        return Some(Reply::err(format!(
            "{upper} is not supported: ataman stores string values only (no lists, hashes, \
             sets, sorted sets, streams, pub/sub or scripting; docs/RESP.md)"
        )));
    }
    let _ = args;
    None
}

/// What `args` (never empty: the decoder yields a name) ask for; the
/// index in [`COMMANDS`] counts it ([`OTHER`] for the rest).
pub fn plan<'b>(
    args: &'b [Cow<'_, [u8]>],
    session: &mut Session,
    limits: Limits,
) -> (usize, Plan<'b>) {
    match super::multi::intercept(args, &mut session.multi, &mut session.watch) {
        super::multi::Verdict::Pass => {}
        super::multi::Verdict::Reply(reply) => return (OTHER, Plan::Reply(reply)),
        super::multi::Verdict::Watch(key) => {
            let plan = match (check_key(&key, limits), session.ack_from(limits)) {
                (Err(reply), _) => Plan::Reply(reply),
                (_, Err(e)) => Plan::Reply(Reply::err(e)),
                (Ok(()), Ok((ack, from))) => Plan::Watch(key, ack, from),
            };
            return (OTHER, plan);
        }
        super::multi::Verdict::Exec(queue, watched) => {
            let plan = match session.ack_from(limits) {
                Ok(pair) => super::multi::exec(queue, watched, limits, pair),
                Err(e) => Plan::Reply(Reply::err(e)),
            };
            return (OTHER, plan);
        }
    }
    let Some((index, spec)) = lookup_bytes(&args[0]) else {
        let name = lower(&args[0]);
        let reply = refusal(args, &name).unwrap_or_else(|| unknown_command(args));
        return (OTHER, Plan::Reply(reply));
    };
    let argc = args.len() as i64;
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        return (index, Plan::Reply(wrong_arity(spec.name)));
    }
    let plan = match spec.name {
        "ping" => Plan::Reply(match args.get(1) {
            _ if args.len() > 2 => wrong_arity("ping"),
            Some(arg) => Reply::Bulk(arg.to_vec()),
            None => Reply::Simple("PONG"),
        }),
        "echo" => Plan::Reply(Reply::Bulk(args[1].to_vec())),
        "quit" => Plan::Close(OK),
        "reset" => {
            *session = Session::new(session.id);
            Plan::Reply(Reply::Simple("RESET"))
        }
        "hello" => Plan::Reply(hello(args, session, limits)),
        // With client tokens, `AUTH` is answered before the table (`super::auth`).
        "auth" => Plan::Reply(Reply::err(
            "AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        )),
        "select" => Plan::Reply(match &*args[1] {
            b"0" => OK,
            _ => Reply::err("DB index is out of range (ataman has one database: 0)"),
        }),
        "client" => client(args, session),
        "command" => Plan::Reply(command(args)),
        "info" => Plan::Node(NodeQuery::Info(
            args[1..].iter().map(|a| lower(a)).collect(),
        )),
        "config" => config(args),
        "slowlog" => match super::slowlog::parse(args) {
            Ok(op) => Plan::Slowlog("slowlog", op),
            Err(reply) => Plan::Reply(reply),
        },
        "dbsize" => Plan::Node(NodeQuery::DbSize),
        "bgsave" => match args.get(1).map(|a| lower(a)) {
            None => Plan::Node(NodeQuery::BgSave),
            // Redis's `SCHEDULE` waits for a running rewrite; here none runs.
            Some(word) if word == "schedule" && args.len() == 2 => Plan::Node(NodeQuery::BgSave),
            Some(_) => Plan::Reply(Reply::err("syntax error")),
        },
        "lastsave" => Plan::Node(NodeQuery::LastSave),
        "time" => Plan::Node(NodeQuery::Time),
        "scan" => match super::scan::parse_args(args) {
            Ok(scan) => Plan::Scan(scan),
            Err(reply) => Plan::Reply(reply),
        },
        "wait" => Plan::Reply(super::session::wait(args, session)),
        "ataman.replication" => Plan::Reply(super::session::replication(args, session, limits)),
        "ataman.hotkeys" => hotkeys(args),
        _ => keys(spec.name, args, session, limits),
    };
    (index, plan)
}

/// `ATAMAN.HOTKEYS [count]`: `count` between 1 and the counters
/// (default `crate::hotkeys::report::KEYS_DEFAULT`).
fn hotkeys<'b>(args: &[Cow<'_, [u8]>]) -> Plan<'b> {
    use crate::hotkeys::{report::KEYS_DEFAULT, sampler::COUNTERS};
    match args.get(1..).unwrap_or_default() {
        [] => Plan::Node(NodeQuery::HotKeys(KEYS_DEFAULT)),
        [count] => match super::decode::parse_i64(count) {
            Some(n) if (1..=COUNTERS as i64).contains(&n) => {
                Plan::Node(NodeQuery::HotKeys(n as usize))
            }
            _ => Plan::Reply(Reply::err(format!(
                "count must be an integer between 1 and {COUNTERS}"
            ))),
        },
        _ => Plan::Reply(wrong_arity("ataman.hotkeys")),
    }
}

fn hello(args: &[Cow<'_, [u8]>], session: &mut Session, limits: Limits) -> Reply {
    let mut proto = session.proto;
    let mut name = None;
    if let Some(version) = args.get(1) {
        proto = match &**version {
            b"2" => Proto::Resp2,
            b"3" => Proto::Resp3,
            _ if super::decode::parse_i64(version).is_none() => {
                return Reply::err("Protocol version is not an integer or out of range");
            }
            _ => return Reply::Error("NOPROTO unsupported protocol version".into()),
        };
        let mut i = 2;
        while i < args.len() {
            match (lower(&args[i]).as_str(), args.get(i + 1)) {
                ("setname", Some(n)) => {
                    if !valid_name(n) {
                        return bad_name();
                    }
                    name = Some(n.to_vec());
                    i += 2;
                }
                ("auth", _) => {
                    return Reply::err(
                        "HELLO AUTH is not supported: this node has no authentication",
                    );
                }
                (option, _) => {
                    return Reply::err(format!("Syntax error in HELLO option '{option}'"));
                }
            }
        }
    }
    session.proto = proto;
    if name.is_some() {
        session.name = name;
    }
    let _ = limits;
    let proto_number = match proto {
        Proto::Resp2 => 2,
        Proto::Resp3 => 3,
    };
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("redis")),
        (Reply::text("version"), Reply::text(super::REDIS_VERSION)),
        (Reply::text("proto"), Reply::Int(proto_number)),
        (Reply::text("id"), Reply::Int(session.id as i64)),
        (Reply::text("mode"), Reply::text("standalone")),
        (Reply::text("role"), Reply::text("master")),
        (Reply::text("modules"), Reply::Array(Vec::new())),
    ])
}

/// A client name has no spaces, newlines or other special characters (as Redis).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn bad_name() -> Reply {
    Reply::err("Client names cannot contain spaces, newlines or special characters.")
}

/// `CLIENT HELP`'s lines: the subcommands served.
const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Set client library name or version.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "HELP",
    "    Print this help.",
];

fn client<'b>(args: &[Cow<'_, [u8]>], session: &mut Session) -> Plan<'b> {
    let sub = lower(&args[1]);
    let arity = |n: usize| args.len() == n;
    let reply = match sub.as_str() {
        "setname" if arity(3) => {
            if !valid_name(&args[2]) {
                return Plan::Reply(bad_name());
            }
            session.name = (!args[2].is_empty()).then(|| args[2].to_vec());
            OK
        }
        "getname" if arity(2) => session.name.clone().map_or(Reply::Null, Reply::Bulk),
        "id" if arity(2) => Reply::Int(session.id as i64),
        "info" if arity(2) => return Plan::Node(NodeQuery::ClientInfo),
        "setinfo" if arity(4) => {
            let value = args[3].to_vec();
            match lower(&args[2]).as_str() {
                "lib-name" => session.lib_name = Some(value),
                "lib-ver" => session.lib_ver = Some(value),
                attribute => {
                    return Plan::Reply(Reply::err(format!("Unrecognized option '{attribute}'")));
                }
            }
            OK
        }
        "help" if arity(2) => describe::help(CLIENT_HELP),
        "setname" | "getname" | "id" | "info" | "setinfo" | "help" => {
            wrong_arity(&format!("client|{sub}"))
        }
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try CLIENT HELP.",
            quoted(&args[1])
        )),
    };
    Plan::Reply(reply)
}

fn command_info(spec: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::text(spec.name),
        Reply::Int(spec.arity),
        Reply::Array(spec.flags.iter().map(|f| Reply::text(*f)).collect()),
        Reply::Int(spec.keys.0),
        Reply::Int(spec.keys.1),
        Reply::Int(spec.keys.2),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

fn command_docs(spec: &Spec) -> Reply {
    Reply::Map(vec![
        (Reply::text("summary"), Reply::text(spec.summary)),
        (Reply::text("since"), Reply::text("1.0.0")),
        (Reply::text("group"), Reply::text(spec.group)),
    ])
}

fn command(args: &[Cow<'_, [u8]>]) -> Reply {
    let Some(sub) = args.get(1).map(|a| lower(a)) else {
        return Reply::Array(COMMANDS.iter().map(command_info).collect());
    };
    let named = || args[2..].iter().map(|a| lookup(&lower(a)).map(|(_, s)| s));
    match sub.as_str() {
        "count" if args.len() == 2 => Reply::Int(COMMANDS.len() as i64),
        "count" => wrong_arity("command|count"),
        "info" if args.len() == 2 => Reply::Array(COMMANDS.iter().map(command_info).collect()),
        "info" => Reply::Array(
            named()
                .map(|s| s.map_or(Reply::Null, command_info))
                .collect(),
        ),
        "docs" if args.len() == 2 => Reply::Map(
            COMMANDS
                .iter()
                .map(|s| (Reply::text(s.name), command_docs(s)))
                .collect(),
        ),
        "docs" => Reply::Map(
            named()
                .flatten()
                .map(|s| (Reply::text(s.name), command_docs(s)))
                .collect(),
        ),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. Try COMMAND HELP.",
            quoted(&args[1])
        )),
    }
}

fn config<'b>(args: &[Cow<'_, [u8]>]) -> Plan<'b> {
    match lower(&args[1]).as_str() {
        "get" if args.len() >= 3 => Plan::Node(NodeQuery::ConfigGet(
            args[2..].iter().map(|a| a.to_vec()).collect(),
        )),
        "get" => Plan::Reply(wrong_arity("config|get")),
        "set" => match super::slowlog::config_set(args) {
            Ok(op) => Plan::Slowlog("config", op),
            Err(reply) => Plan::Reply(reply),
        },
        "rewrite" | "resetstat" => Plan::Reply(Reply::err(format!(
            "CONFIG {} is not supported: set ataman's options with flags, the config file or \
             ATAMAN_* variables, and restart (docs/RESP.md)",
            lower(&args[1]).to_ascii_uppercase()
        ))),
        _ => Plan::Reply(Reply::err(format!(
            "unknown subcommand '{}'. Try CONFIG HELP.",
            quoted(&args[1])
        ))),
    }
}

/// `CONFIG GET`'s reply: the `(name, value)` pairs whose name matches any
/// of `patterns` (globs of `*` and `?`), each once.
pub fn config_get(patterns: &[Vec<u8>], pairs: &[(&str, String)]) -> Reply {
    let matching = pairs
        .iter()
        .filter(|(name, _)| {
            patterns
                .iter()
                .any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes()))
        })
        .map(|(name, value)| (Reply::text(*name), Reply::text(value.clone())))
        .collect();
    Reply::Map(matching)
}

pub(super) fn check_key(key: &[u8], limits: Limits) -> Result<(), Reply> {
    if key.is_empty() {
        return Err(Reply::err("empty keys are not supported"));
    }
    if key.len() > limits.key_bytes_max {
        return Err(Reply::err(format!(
            "key of {} bytes over the limit of {} (--key-bytes-max)",
            key.len(),
            limits.key_bytes_max
        )));
    }
    Ok(())
}

pub(super) fn check_value(value: &[u8], limits: Limits) -> Result<(), Reply> {
    if value.len() > limits.value_bytes_max {
        return Err(Reply::err(format!(
            "value of {} bytes over the limit of {} (--value-bytes-max)",
            value.len(),
            limits.value_bytes_max
        )));
    }
    Ok(())
}

fn keys<'b>(name: &str, args: &'b [Cow<'_, [u8]>], session: &Session, limits: Limits) -> Plan<'b> {
    let (ack, from) = match session.ack_from(limits) {
        Ok(pair) => pair,
        Err(e) => return Plan::Reply(Reply::err(e)),
    };
    let get = |key: &'b [u8]| Command::Get {
        key: Cow::Borrowed(key),
        ack,
        from,
    };
    let write_until = |key: &'b [u8], value: Option<&'b [u8]>, expiry| Command::Write {
        key: Cow::Borrowed(key),
        value,
        expiry,
        ack,
        from,
    };
    let write = |key: &'b [u8], value| write_until(key, value, Expiry::Never);
    let read_then = |then| {
        let key = args[1].to_vec();
        let version = Command::GetVersion {
            key: Cow::Borrowed(args[1].as_ref()),
            ack,
            from,
        };
        Plan::ReadThen(
            version,
            Box::new(Chain {
                name: spec_name(name),
                key,
                ack,
                from,
                then,
            }),
        )
    };
    let checked = || -> Result<Plan<'b>, Reply> {
        Ok(match name {
            "get" => {
                check_key(&args[1], limits)?;
                Plan::Keys(KeyOp::Get, KeyCommands::One(get(&args[1])))
            }
            "set" if !set_options(&args[3..])?.1.is_empty() => {
                super::rmw_plan::set(args, limits, ack, from)?
            }
            "incr" | "decr" | "incrby" | "decrby" | "incrbyfloat" | "append" | "getset"
            | "getdel" | "setnx" | "setrange" | "getrange" => {
                super::rmw_plan::update(spec_name(name), args, limits, ack, from)?
            }
            "set" => {
                let expiry = match set_options(&args[3..])?.0 {
                    SetExpiry::To(expiry) => expiry,
                    SetExpiry::Keep => {
                        check_key(&args[1], limits)?;
                        check_value(&args[2], limits)?;
                        return Ok(read_then(Then::KeepTtl(args[2].to_vec())));
                    }
                };
                check_key(&args[1], limits)?;
                check_value(&args[2], limits)?;
                let op = match expiry {
                    Expiry::Never => KeyOp::Set,
                    _ => KeyOp::SetExpiring("set"),
                };
                let set = write_until(&args[1], Some(&args[2]), expiry);
                Plan::Keys(op, KeyCommands::One(set))
            }
            "setex" | "psetex" => {
                let unit = if name == "setex" { "ex" } else { "px" };
                let expiry = expiry_of(name, unit, &args[2])?;
                check_key(&args[1], limits)?;
                check_value(&args[3], limits)?;
                let set = write_until(&args[1], Some(&args[3]), expiry);
                Plan::Keys(KeyOp::SetExpiring(spec_name(name)), KeyCommands::One(set))
            }
            "expire" | "pexpire" | "expireat" | "pexpireat" => {
                let (expiry, condition) = expire_args(name, &args[2], &args[3..])?;
                check_key(&args[1], limits)?;
                read_then(Then::Expire(expiry, condition))
            }
            "persist" => {
                check_key(&args[1], limits)?;
                read_then(Then::Persist)
            }
            "getex" => {
                let then = getex_args(&args[2..])?;
                check_key(&args[1], limits)?;
                read_then(then)
            }
            "ttl" | "pttl" | "expiretime" | "pexpiretime" => {
                check_key(&args[1], limits)?;
                let version = Command::GetVersion {
                    key: Cow::Borrowed(args[1].as_ref()),
                    ack,
                    from,
                };
                let unit = match name {
                    "ttl" => Unit::Seconds,
                    "pttl" => Unit::Millis,
                    "expiretime" => Unit::AtSeconds,
                    _ => Unit::AtMillis,
                };
                Plan::Keys(KeyOp::Ttl(unit), KeyCommands::One(version))
            }
            "type" | "strlen" => {
                check_key(&args[1], limits)?;
                let describe = match name {
                    "type" => Describe::Type,
                    _ => Describe::Strlen,
                };
                Plan::Keys(KeyOp::Describe(describe), KeyCommands::One(get(&args[1])))
            }
            "memory" => {
                let key = describe::memory(args)?;
                check_key(key, limits)?;
                let usage = Describe::MemoryUsage {
                    key_bytes: key.len(),
                };
                Plan::Keys(KeyOp::Describe(usage), KeyCommands::One(get(key)))
            }
            "mset" => {
                if args.len().is_multiple_of(2) {
                    return Err(wrong_arity("mset"));
                }
                let mut commands = Vec::with_capacity(args.len() / 2);
                for pair in args[1..].chunks_exact(2) {
                    check_key(&pair[0], limits)?;
                    check_value(&pair[1], limits)?;
                    commands.push(write(&pair[0], Some(&pair[1])));
                }
                Plan::Keys(KeyOp::MSet, commands.into())
            }
            "del" | "unlink" => {
                // Each distinct key once: first its read (was it there?),
                // then its delete; the reply counts the reads that found a
                // value ([`combine`]).
                let mut keys: Vec<&[u8]> = Vec::with_capacity(args.len() - 1);
                for key in &args[1..] {
                    check_key(key, limits)?;
                    if !keys.contains(&&key[..]) {
                        keys.push(key);
                    }
                }
                let reads = keys.iter().map(|k| get(k));
                let deletes = keys.iter().map(|k| write(k, None));
                Plan::Keys(
                    KeyOp::Del,
                    KeyCommands::Many(reads.chain(deletes).collect()),
                )
            }
            _ => {
                let mut commands = Vec::with_capacity(args.len() - 1);
                for key in &args[1..] {
                    check_key(key, limits)?;
                    commands.push(get(key));
                }
                let op = match name {
                    "exists" => KeyOp::Exists,
                    _ => KeyOp::MGet,
                };
                Plan::Keys(op, commands.into())
            }
        })
    };
    checked().unwrap_or_else(Plan::Reply)
}

/// A failed answer as a RESP error, its code telling the kind.
pub fn failure_reply(failure: Failure, text: &str) -> Reply {
    let code = match failure {
        Failure::Busy => "TRYAGAIN",
        Failure::NotEnoughReplicas => "NOREPLICAS",
        Failure::DiskFull => "MISCONF",
        _ => "ERR",
    };
    Reply::Error(format!("{code} {text}"))
}

/// The one reply of a command whose keys were answered `answers` (in key
/// order). The first failure, if any, is the reply: some of an `MSET`'s or
/// `DEL`'s keys may be written even so (docs/RESP.md, atomicity).
pub fn combine(op: KeyOp, answers: &[Answer], now_ms: u64) -> Reply {
    if let Some(Answer::Failed(failure, text)) =
        answers.iter().find(|a| matches!(a, Answer::Failed(..)))
    {
        // The only invalid an expiring write meets is its deadline, past
        // the maximum once stamped: Redis's words for it.
        if let (KeyOp::SetExpiring(command), Failure::Invalid) = (op, failure) {
            return invalid_expire(command);
        }
        return failure_reply(*failure, text);
    }
    let value = |a: &Answer| match a {
        Answer::Value(v, _) => Reply::Bulk(v.clone()),
        _ => Reply::Null,
    };
    match op {
        KeyOp::Get => answers.first().map_or(Reply::Null, value),
        KeyOp::MGet => Reply::Array(answers.iter().map(value).collect()),
        KeyOp::Set | KeyOp::SetExpiring(_) | KeyOp::MSet => OK,
        // Answered by the chain's step (`super::expiry::follow`).
        KeyOp::Chained => Reply::err("internal error: a chained command without its step"),
        KeyOp::Ttl(unit) => answers
            .first()
            .map_or(Reply::Int(-2), |a| time_left(a, unit, now_ms)),
        // The reads of the distinct keys, then their deletes (all done,
        // or a failure above): the keys that held a value when read, just
        // before their delete (docs/RESP.md).
        KeyOp::Del => Reply::Int(
            answers[..answers.len() / 2]
                .iter()
                .filter(|a| matches!(a, Answer::Value(..)))
                .count() as i64,
        ),
        KeyOp::Describe(d) => describe::reply(d, answers.first()),
        KeyOp::Exists => Reply::Int(
            answers
                .iter()
                .filter(|a| matches!(a, Answer::Value(..)))
                .count() as i64,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::answer::Awaited;
    use crate::net::resp::expiry::Condition;

    const LIMITS: Limits = Limits {
        key_bytes_max: 8,
        value_bytes_max: 16,
        cluster_size: 3,
        from_default: 3,
    };

    use crate::net::resp::test_args as args;

    fn planned(words: &[&str]) -> Plan<'static> {
        let a: &'static [Cow<'static, [u8]>] = Box::leak(args(words).into_boxed_slice());
        plan(a, &mut Session::new(7), LIMITS).1
    }

    fn error_of(p: Plan<'_>) -> String {
        match p {
            Plan::Reply(Reply::Error(e)) => e,
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn unknown_and_wrong_arity_are_worded_as_redis_words_them() {
        assert_eq!(
            error_of(planned(&["FOO", "a", "b"])),
            "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
        );
        assert_eq!(
            error_of(planned(&["GET"])),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            error_of(planned(&["mset", "a", "1", "b"])),
            "ERR wrong number of arguments for 'mset' command"
        );
        assert_eq!(
            error_of(planned(&["client", "getname", "x"])),
            "ERR wrong number of arguments for 'client|getname' command"
        );
    }

    #[test]
    fn read_modify_write_other_types_and_expiry_are_refused_saying_why() {
        for (words, why) in [
            (&["WATCH", "k", "j"][..], "a transaction touches one key"),
            (&["msetnx", "a", "1"], "atomic"),
            (&["set", "k", "v", "NX", "XX"], "syntax error"),
            (&["set", "k", "v", "NX", "EX"], "syntax error"),
            (&["incrby", "k", "1.5"], "not an integer"),
            (&["keys", "*"], "no bound"),
            (&["lpush", "k", "v"], "string values only"),
            (&["subscribe", "c"], "pub/sub"),
            (&["set", "k", "v", "bogus"], "syntax error"),
        ] {
            let e = error_of(planned(words));
            assert!(e.starts_with("ERR ") && e.contains(why), "{words:?}: {e}");
        }
    }

    /// `SET`'s expiry options become one expiring write; bad ones are
    /// refused with Redis's words.
    #[test]
    fn set_expiry_options_become_an_expiring_write() {
        let expiry_of_plan = |words: &[&str]| match planned(words) {
            Plan::Keys(op, commands) => match commands.as_slice() {
                [Command::Write { expiry, .. }] => (op, *expiry),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        assert_eq!(
            expiry_of_plan(&["set", "k", "v"]),
            (KeyOp::Set, Expiry::Never)
        );
        assert_eq!(
            expiry_of_plan(&["set", "k", "v", "ex", "10"]),
            (KeyOp::SetExpiring("set"), Expiry::AfterMs(10_000))
        );
        assert_eq!(
            expiry_of_plan(&["SET", "k", "v", "PX", "250"]),
            (KeyOp::SetExpiring("set"), Expiry::AfterMs(250))
        );
        assert_eq!(
            expiry_of_plan(&["set", "k", "v", "exat", "1700000000"]).1,
            Expiry::AtMs(1_700_000_000_000)
        );
        assert_eq!(
            expiry_of_plan(&["set", "k", "v", "pxat", "1700000000123"]).1,
            Expiry::AtMs(1_700_000_000_123)
        );
        assert_eq!(
            expiry_of_plan(&["setex", "k", "3", "v"]),
            (KeyOp::SetExpiring("setex"), Expiry::AfterMs(3_000))
        );
        assert_eq!(
            expiry_of_plan(&["psetex", "k", "3", "v"]),
            (KeyOp::SetExpiring("psetex"), Expiry::AfterMs(3))
        );
        let too_far = (crate::ttl::DEADLINE_MS_MAX + 1).to_string();
        let huge = "999999999999999999";
        for (words, error) in [
            (
                &["set", "k", "v", "ex", "0"][..],
                "ERR invalid expire time in 'set' command",
            ),
            (
                &["set", "k", "v", "px", "-5"],
                "ERR invalid expire time in 'set' command",
            ),
            (
                &["set", "k", "v", "pxat", &too_far],
                "ERR invalid expire time in 'set' command",
            ),
            (
                &["set", "k", "v", "ex", huge],
                "ERR invalid expire time in 'set' command",
            ),
            (
                &["setex", "k", "0", "v"],
                "ERR invalid expire time in 'setex' command",
            ),
            (
                &["set", "k", "v", "ex", "ten"],
                "ERR value is not an integer or out of range",
            ),
            (&["set", "k", "v", "ex"], "ERR syntax error"),
            (&["set", "k", "v", "ex", "1", "px", "1"], "ERR syntax error"),
        ] {
            assert_eq!(error_of(planned(words)), error, "{words:?}");
        }
    }

    /// A deadline past the maximum once stamped is Redis's error too.
    #[test]
    fn an_expiring_write_refused_at_the_stamp_reads_as_redis_words_it() {
        let refused = Answer::Failed(Failure::Invalid, "deadline past the maximum".into());
        assert_eq!(
            combine(KeyOp::SetExpiring("set"), &[refused], 0),
            Reply::err("invalid expire time in 'set' command")
        );
    }

    /// `TTL`, `PTTL` read the version; `EXPIRE` and its kin, `PERSIST`,
    /// `GETEX` and `SET … KEEPTTL` read it, then follow up.
    #[test]
    fn ttl_reads_the_version_and_expire_chains_a_write() {
        let Plan::Keys(KeyOp::Ttl(Unit::Seconds), commands) = planned(&["ttl", "k"]) else {
            panic!("ttl is not a read of the version");
        };
        assert!(matches!(commands.as_slice(), [Command::GetVersion { .. }]));
        for (words, then) in [
            (
                &["expire", "k", "10", "nx"][..],
                Then::Expire(Some(Expiry::AfterMs(10_000)), Condition::Nx),
            ),
            (&["persist", "k"], Then::Persist),
            (&["getex", "k"], Then::GetEx(None)),
            (&["set", "k", "v", "keepttl"], Then::KeepTtl(b"v".to_vec())),
        ] {
            let Plan::ReadThen(Command::GetVersion { key, .. }, chain) = planned(words) else {
                panic!("{words:?} is not a read then a write");
            };
            assert_eq!((key.as_ref(), &chain.then), (&b"k"[..], &then), "{words:?}");
        }
    }

    #[test]
    fn keys_fan_out_with_the_sessions_replication() {
        let Plan::Keys(op, commands) = planned(&["MSET", "a", "1", "b", "2"]) else {
            panic!()
        };
        assert_eq!(op, KeyOp::MSet);
        assert_eq!(
            commands[1],
            Command::Write {
                key: b"b".to_vec().into(),
                value: Some(b"2"),
                expiry: crate::ttl::Expiry::Never,
                ack: 2,
                from: 3
            }
        );
        let Plan::Keys(KeyOp::Del, commands) = planned(&["del", "a", "a", "b"]) else {
            panic!()
        };
        // a and b once each: two reads, then two deletes.
        assert_eq!(commands.len(), 4);
        assert!(matches!(&commands[1], Command::Get { key, .. } if key.as_ref() == b"b"));
        assert!(
            matches!(&commands[2], Command::Write { key, value: None, .. } if key.as_ref() == b"a")
        );
        assert!(error_of(planned(&["get", "123456789"])).contains("--key-bytes-max"));
        assert!(
            error_of(planned(&["set", "k", "01234567890123456"])).contains("--value-bytes-max")
        );
        assert!(error_of(planned(&["get", ""])).contains("empty keys"));
        assert!(matches!(
            planned(&["set", "k", "v"]),
            Plan::Keys(KeyOp::Set, _)
        ));
    }

    #[test]
    fn session_commands_change_the_session() {
        let mut session = Session::new(7);
        let run = |session: &mut Session, words: &[&str]| {
            let a = args(words);
            match plan(&a, session, LIMITS).1 {
                Plan::Reply(r) => r,
                other => panic!("{other:?}"),
            }
        };
        let hello = run(&mut session, &["HELLO", "3", "SETNAME", "me"]);
        assert!(matches!(hello, Reply::Map(_)));
        assert_eq!(session.proto, Proto::Resp3);
        assert_eq!(run(&mut session, &["client", "getname"]), Reply::text("me"));
        assert_eq!(
            run(&mut session, &["hello", "4"]),
            Reply::Error("NOPROTO unsupported protocol version".into())
        );
        assert_eq!(
            run(&mut session, &["ataman.replication", "1", "1"]),
            Reply::Array(vec![Reply::Int(1), Reply::Int(1)])
        );
        assert_eq!(run(&mut session, &["wait", "1", "0"]), Reply::Int(0));
        assert!(matches!(
            run(&mut session, &["ataman.replication", "2", "1"]),
            Reply::Error(_)
        ));
        assert_eq!(run(&mut session, &["reset"]), Reply::Simple("RESET"));
        assert_eq!(session, Session::new(7));
        // Inside MULTI commands are queued, not run; a refused one aborts EXEC.
        assert_eq!(run(&mut session, &["multi"]), OK);
        assert_eq!(
            run(&mut session, &["set", "k", "v"]),
            Reply::Simple("QUEUED")
        );
        assert!(matches!(run(&mut session, &["mget", "k"]), Reply::Error(_)));
        let exec = run(&mut session, &["EXEC"]);
        assert!(
            matches!(&exec, Reply::Error(e) if e.starts_with("EXECABORT")),
            "{exec:?}"
        );
        assert_eq!(session, Session::new(7));
        assert_eq!(run(&mut session, &["select", "0"]), OK);
        assert!(matches!(
            run(&mut session, &["select", "1"]),
            Reply::Error(_)
        ));
        assert_eq!(run(&mut session, &["ping"]), Reply::Simple("PONG"));
        assert_eq!(
            run(&mut session, &["command", "count"]),
            Reply::Int(COMMANDS.len() as i64)
        );
    }

    #[test]
    fn config_get_matches_globs() {
        let pairs = [("save", String::new()), ("appendonly", "yes".into())];
        let got = config_get(&[b"APPEND*".to_vec(), b"sav?".to_vec()], &pairs);
        assert_eq!(
            got,
            Reply::Map(vec![
                (Reply::text("save"), Reply::text("")),
                (Reply::text("appendonly"), Reply::text("yes")),
            ])
        );
        assert!(glob_match(b"*", b""));
        assert!(glob_match(b"a*b*c", b"aXbYbc"));
        assert!(!glob_match(b"a*b", b"ac"));
    }

    #[test]
    fn answers_combine_into_one_reply() {
        let v = |s: &str| Answer::Value(s.as_bytes().to_vec(), 1);
        assert_eq!(
            combine(KeyOp::MGet, &[v("1"), Answer::NotFound(None)], 0),
            Reply::Array(vec![Reply::text("1"), Reply::Null])
        );
        assert_eq!(
            combine(KeyOp::Exists, &[v("1"), Answer::NotFound(None), v("1")], 0),
            Reply::Int(2)
        );
        let done = Answer::Done(Awaited::Delete(1));
        // Two keys: one held a value when read, one did not.
        let del = [v("1"), Answer::NotFound(None), done.clone(), done];
        assert_eq!(combine(KeyOp::Del, &del, 0), Reply::Int(1));
        let failed = Answer::Failed(
            Failure::NotEnoughReplicas,
            "not enough replicas: 1 of 2".into(),
        );
        assert_eq!(
            combine(KeyOp::MSet, &[Answer::Done(Awaited::Put(1)), failed], 0),
            Reply::Error("NOREPLICAS not enough replicas: 1 of 2".into())
        );
    }
}
