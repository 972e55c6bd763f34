//! `SLOWLOG GET [n]|LEN|RESET|HELP` and `CONFIG SET slowlog-…` (docs/RESP.md,
//! "Slow log"): the arguments to a [`crate::slowlog::Op`], and the entries
//! to Redis's reply shape.
//!
//! Redis 4 and later answer `SLOWLOG GET` with an array of entries, each an
//! array of six: id (integer), Unix time in seconds (integer), duration
//! in µs (integer), the command's arguments (an array of bulk strings, at
//! most 32: the last one `... (N more arguments)`; each at most 128 bytes
//! then `... (N more bytes)`), the client's `ip:port` (bulk) and its name
//! (bulk). Ataman keeps that shape, with one difference: **no value is
//! ever kept**, so a value argument is shown as the placeholder
//! `(value of N bytes)`, and the arguments after the first key and value
//! are counted, not kept (`... (N more arguments)`).
//!
//! Pure: no socket, no shared state.

use super::encode::Reply;
use super::table::{Spec, wrong_arity};
use crate::slowlog::{Entry, Facts, GET_DEFAULT, KEY_BYTES_MAX, KeyPrefix, Op};
use std::borrow::Cow;

/// `SLOWLOG HELP`'s lines (Redis 7.2's words).
pub const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Print this help.",
];

/// `CONFIG SET`'s name of the threshold.
pub const THRESHOLD_PARAM: &str = "slowlog-log-slower-than";
/// `CONFIG SET`'s name of the ring's capacity.
pub const LEN_MAX_PARAM: &str = "slowlog-max-len";

fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

fn quoted(arg: &[u8]) -> String {
    let text = String::from_utf8_lossy(&arg[..arg.len().min(KEY_BYTES_MAX)]);
    text.replace(['\r', '\n'], " ")
}

/// `SLOWLOG …` (arity checked by the table: at least a subcommand): the
/// operation, or the reply (`HELP`, errors in Redis's words).
pub fn parse(args: &[Cow<'_, [u8]>]) -> Result<Op, Reply> {
    let sub = lower(&args[1]);
    match (sub.as_str(), args.len()) {
        ("get", 2) => Ok(Op::Get { count: GET_DEFAULT }),
        ("get", 3) => {
            let count = super::decode::parse_i64(&args[2])
                .filter(|&n| n >= -1)
                .ok_or_else(|| Reply::err("count should be greater than or equal to -1"))?;
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            Ok(Op::Get { count })
        }
        ("len", 2) => Ok(Op::Len),
        ("reset", 2) => Ok(Op::Reset),
        ("help", 2) => Err(super::describe::help(HELP)),
        ("get" | "len" | "reset" | "help", _) => Err(wrong_arity(&format!("slowlog|{sub}"))),
        _ => Err(Reply::err(format!(
            "unknown subcommand '{}'. Try SLOWLOG HELP.",
            quoted(&args[1])
        ))),
    }
}

/// `CONFIG SET name value [name value …]` (arity checked by the caller:
/// at least `CONFIG SET`): the slow log's settings, all or nothing; any
/// other option is refused (ataman's options are set at start).
pub fn config_set(args: &[Cow<'_, [u8]>]) -> Result<Op, Reply> {
    let pairs = &args[2..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(wrong_arity("config|set"));
    }
    let mut threshold_us = None;
    let mut len_max = None;
    for pair in pairs.chunks_exact(2) {
        let name = lower(&pair[0]);
        let number = || {
            super::decode::parse_i64(&pair[1]).ok_or_else(|| {
                Reply::err(format!(
                    "CONFIG SET failed (possibly related to argument '{name}') - argument \
                     couldn't be parsed into an integer"
                ))
            })
        };
        // Redis refuses a name given twice in one CONFIG SET.
        let given = match name.as_str() {
            THRESHOLD_PARAM => threshold_us.is_some(),
            LEN_MAX_PARAM => len_max.is_some(),
            _ => false,
        };
        if given {
            return Err(Reply::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - duplicate parameter"
            )));
        }
        match name.as_str() {
            THRESHOLD_PARAM => threshold_us = Some(number()?),
            LEN_MAX_PARAM => {
                let n = number()?;
                let bounded = usize::try_from(n)
                    .ok()
                    .filter(|&n| n <= crate::slowlog::LEN_MAX);
                len_max = Some(bounded.ok_or_else(|| {
                    Reply::err(format!(
                        "CONFIG SET failed (possibly related to argument '{name}') - argument \
                         must be between 0 and {} inclusive",
                        crate::slowlog::LEN_MAX
                    ))
                })?);
            }
            _ => {
                return Err(Reply::err(format!(
                    "CONFIG SET {} is not supported: only {THRESHOLD_PARAM} and {LEN_MAX_PARAM} \
                     change at run time; set ataman's other options with flags, the config \
                     file or ATAMAN_* variables, and restart (docs/RESP.md)",
                    quoted(&pair[0])
                )));
            }
        }
    }
    Ok(Op::Set {
        threshold_us,
        len_max,
    })
}

/// What the slow log keeps of a RESP command: its name, first key,
/// keys, values' bytes and argument count ([`Spec::keys`] says which
/// arguments are keys; the values are the arguments after a key of the
/// commands that carry one).
pub fn facts(spec: &Spec, args: &[Cow<'_, [u8]>]) -> Facts {
    let argc = args.len();
    let (first, last, step) = spec.keys;
    let mut facts = Facts::bare(spec.name);
    facts.args = u32::try_from(argc).unwrap_or(u32::MAX);
    if first <= 0 || (first as usize) >= argc {
        return facts;
    }
    let first = first as usize;
    let last = if last < 0 { argc as i64 + last } else { last };
    let last = (last.max(first as i64) as usize).min(argc - 1);
    let step = step.max(1) as usize;
    facts.key = KeyPrefix::of(&args[first]);
    facts.keys = u32::try_from((last - first) / step + 1).unwrap_or(u32::MAX);
    let value_at = |i: usize| args.get(i).map_or(0, |v| v.len() as u64);
    facts.value_bytes = match spec.name {
        "set" => value_at(2),
        "setex" | "psetex" => value_at(3),
        "mset" => (2..argc).step_by(2).map(value_at).sum(),
        _ => 0,
    };
    facts
}

/// A key kept in an entry, as Redis shows an argument it cut.
fn key_arg(key: &KeyPrefix) -> Reply {
    let mut bytes = key.kept().to_vec();
    let more = (key.key_bytes as usize).saturating_sub(bytes.len());
    if more > 0 {
        bytes.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
    }
    Reply::Bulk(bytes)
}

/// An entry's argument array: the command, its first key, a placeholder
/// for its values, and the count of the arguments not shown.
pub fn entry_args(facts: &Facts) -> Reply {
    let mut args = vec![Reply::text(facts.command)];
    if facts.keys > 0 {
        args.push(key_arg(&facts.key));
    }
    if facts.value_bytes > 0 {
        args.push(Reply::text(format!(
            "(value of {} bytes)",
            facts.value_bytes
        )));
    }
    let shown = args.len() as u32;
    if facts.args > shown {
        let more = facts.args - shown;
        args.push(Reply::text(format!("... ({more} more arguments)")));
    }
    Reply::Array(args)
}

/// One entry in Redis's shape.
pub fn entry_reply(entry: &Entry) -> Reply {
    Reply::Array(vec![
        Reply::Int(i64::try_from(entry.id).unwrap_or(i64::MAX)),
        Reply::Int(i64::try_from(entry.unix_time_s).unwrap_or(i64::MAX)),
        Reply::Int(i64::try_from(entry.duration_us).unwrap_or(i64::MAX)),
        entry_args(&entry.facts),
        Reply::text(entry.client_text()),
        Reply::text(entry.client_name.clone()),
    ])
}

/// `SLOWLOG GET`'s reply.
pub fn get_reply(entries: &[Entry]) -> Reply {
    Reply::Array(entries.iter().map(entry_reply).collect())
}

/// The reply to `op` on `log` (the caller admitted it).
pub fn reply(log: &crate::slowlog::SlowLog, op: Op) -> Reply {
    match op {
        Op::Get { count } => get_reply(&log.newest(count)),
        Op::Len => Reply::Int(i64::try_from(log.len()).unwrap_or(i64::MAX)),
        Op::Reset | Op::Set { .. } => match log.apply(op) {
            Ok(()) => super::encode::OK,
            Err(why) => Reply::err(why),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::resp::commands::COMMANDS;
    use crate::net::resp::test_args as args;
    use crate::slowlog::{Protocol, Stages};

    fn spec(name: &str) -> &'static Spec {
        COMMANDS.iter().find(|s| s.name == name).unwrap()
    }

    /// The subcommands and their errors, in Redis's words.
    #[test]
    fn subcommands_parse_as_redis_reads_them() {
        assert_eq!(
            parse(&args(&["slowlog", "get"])),
            Ok(Op::Get { count: GET_DEFAULT })
        );
        assert_eq!(
            parse(&args(&["SLOWLOG", "GET", "3"])),
            Ok(Op::Get { count: 3 })
        );
        assert_eq!(
            parse(&args(&["slowlog", "get", "-1"])),
            Ok(Op::Get { count: usize::MAX })
        );
        assert_eq!(parse(&args(&["slowlog", "len"])), Ok(Op::Len));
        assert_eq!(parse(&args(&["slowlog", "Reset"])), Ok(Op::Reset));
        let err = |words: &[&str]| match parse(&args(words)) {
            Err(Reply::Error(e)) => e,
            other => panic!("{words:?}: {other:?}"),
        };
        assert_eq!(
            err(&["slowlog", "get", "-2"]),
            "ERR count should be greater than or equal to -1"
        );
        assert_eq!(
            err(&["slowlog", "get", "x"]),
            "ERR count should be greater than or equal to -1"
        );
        assert_eq!(
            err(&["slowlog", "len", "1"]),
            "ERR wrong number of arguments for 'slowlog|len' command"
        );
        assert_eq!(
            err(&["slowlog", "nope"]),
            "ERR unknown subcommand 'nope'. Try SLOWLOG HELP."
        );
        let Err(Reply::Array(help)) = parse(&args(&["slowlog", "help"])) else {
            panic!("help is not an array");
        };
        assert_eq!(help.len(), HELP.len());
    }

    /// CONFIG SET takes the two settings (several at once) and refuses
    /// the rest, and out-of-range values, changing nothing.
    #[test]
    fn config_set_takes_the_two_settings() {
        assert_eq!(
            config_set(&args(&["config", "set", "SLOWLOG-LOG-SLOWER-THAN", "0"])),
            Ok(Op::Set {
                threshold_us: Some(0),
                len_max: None
            })
        );
        assert_eq!(
            config_set(&args(&[
                "config",
                "set",
                "slowlog-max-len",
                "5",
                "slowlog-log-slower-than",
                "-1"
            ])),
            Ok(Op::Set {
                threshold_us: Some(-1),
                len_max: Some(5)
            })
        );
        // The whole of i64, as Redis takes it.
        assert_eq!(
            config_set(&args(&[
                "config",
                "set",
                "slowlog-log-slower-than",
                "9223372036854775807"
            ])),
            Ok(Op::Set {
                threshold_us: Some(i64::MAX),
                len_max: None
            })
        );
        for words in [
            &["config", "set", "slowlog-max-len", "-1"][..],
            &["config", "set", "slowlog-max-len", "10001"],
            &["config", "set", "slowlog-log-slower-than", "ten"],
            &["config", "set", "maxmemory", "1"],
            &["config", "set", "slowlog-max-len"],
            // A name twice: Redis says "duplicate parameter" (it was taken,
            // the last one winning).
            &[
                "config",
                "set",
                "slowlog-max-len",
                "8",
                "slowlog-max-len",
                "9",
            ],
            &[
                "config",
                "set",
                "slowlog-log-slower-than",
                "1",
                "SLOWLOG-LOG-SLOWER-THAN",
                "2",
            ],
        ] {
            assert!(
                matches!(config_set(&args(words)), Err(Reply::Error(_))),
                "{words:?}"
            );
        }
    }

    /// Facts keep the key and the values' sizes, never a value.
    #[test]
    fn facts_never_keep_a_value() {
        let f = facts(
            spec("set"),
            &args(&["set", "k1", "secret-value", "EX", "10"]),
        );
        assert_eq!(
            (f.key.kept(), f.keys, f.value_bytes, f.args),
            (&b"k1"[..], 1, 12, 5)
        );
        let f = facts(spec("mset"), &args(&["mset", "a", "12", "b", "345"]));
        assert_eq!((f.keys, f.value_bytes), (2, 5));
        let f = facts(spec("setex"), &args(&["setex", "k", "10", "abc"]));
        assert_eq!(f.value_bytes, 3);
        let f = facts(spec("del"), &args(&["del", "a", "b", "c"]));
        assert_eq!((f.keys, f.value_bytes), (3, 0));
        let f = facts(spec("ping"), &args(&["ping"]));
        assert_eq!((f.keys, f.args), (0, 1));
        let args = entry_args(&facts(
            spec("set"),
            &args(&["set", "k1", "secret", "EX", "10"]),
        ));
        assert_eq!(
            args,
            Reply::Array(vec![
                Reply::text("set"),
                Reply::text("k1"),
                Reply::text("(value of 6 bytes)"),
                Reply::text("... (2 more arguments)"),
            ])
        );
        assert!(!format!("{args:?}").contains("secret"));
    }

    /// An entry is Redis's six fields, a long key cut as Redis cuts it.
    #[test]
    fn an_entry_has_redis_six_fields() {
        let long = "k".repeat(KEY_BYTES_MAX + 3);
        let entry = Entry {
            id: 7,
            unix_time_s: 1_700_000_000,
            duration_us: 12_345,
            protocol: Protocol::Resp,
            facts: facts(spec("get"), &args(&["get", &long])),
            client: Some(([127, 0, 0, 1], 5000).into()),
            client_name: String::new(),
            stages: Stages::default(),
        };
        let Reply::Array(fields) = entry_reply(&entry) else {
            panic!()
        };
        assert_eq!(fields.len(), 6);
        assert_eq!(fields[0], Reply::Int(7));
        assert_eq!(fields[1], Reply::Int(1_700_000_000));
        assert_eq!(fields[2], Reply::Int(12_345));
        let cut = format!("{}... (3 more bytes)", "k".repeat(KEY_BYTES_MAX));
        assert_eq!(
            fields[3],
            Reply::Array(vec![Reply::text("get"), Reply::text(cut)])
        );
        assert_eq!(fields[4], Reply::text("127.0.0.1:5000"));
        assert_eq!(fields[5], Reply::text(""));
    }
}
