//! Redis's read-modify-write string commands as pure rules: the key's
//! current value (or absent) and a command in, the new value and the exact
//! reply out. The consensus register (`replication::register`) applies
//! [`apply`] to the value it finds, so the command is atomic.
//!
//! Commands: `INCR`, `INCRBY`, `DECR`, `DECRBY`, `INCRBYFLOAT`, `APPEND`,
//! `SETNX`, `SET key value [NX|XX] [GET]`, `GETSET`, `GETDEL`, `SETRANGE`,
//! `GETRANGE`, `STRLEN`. Replies and errors are Redis 7's, checked side by
//! side with a real `redis-server` (`crates/ataman/tests/resp_rmw_rules.rs`).
//!
//! # Rules (Redis's, `t_string.c`)
//! - Integers are parsed as Redis's `string2ll`: an optional `-`, digits,
//!   no leading zero (but `0`), no `+`, no space, within `i64`; else
//!   `ERR value is not an integer or out of range`. A result outside `i64`
//!   is `ERR increment or decrement would overflow`; `DECRBY` of
//!   `i64::MIN` is `ERR decrement would overflow`.
//! - Floats (`INCRBYFLOAT`) are parsed as `strtold` with no space around
//!   (`+1`, `1e3`, `.5` are numbers; `nan` is not): else
//!   `ERR value is not a valid float`; a NaN or infinite result is
//!   `ERR increment would produce NaN or Infinity`. The result is printed
//!   in the shortest form that reads back (Redis prints 17 digits of a
//!   `long double`, trailing zeros cut: the same text for the values of
//!   ordinary use; this one computes in `f64`, documented in docs/RESP.md).
//! - `SETRANGE`: a negative offset is `ERR offset is out of range`; an
//!   empty value writes nothing and answers the current length; an offset
//!   plus length past `value_bytes_max` is `ERR string exceeds maximum
//!   allowed size (proto-max-bulk-len)`; a gap is filled with zero bytes.
//! - Every value a command builds (an `INCRBYFLOAT` or `INCRBY` result
//!   too) longer than `value_bytes_max` is that same error, nothing written.
//! - `GETRANGE`: negative indices count from the end, both clamped to the
//!   string; an empty range (or an absent key) is the empty bulk.
//! - `SET … NX|XX`: both is `ERR syntax error`; a failed condition
//!   answers nil (with `GET`: the old value) and writes nothing.

use super::decode::parse_i64;
use super::encode::{OK, Reply};

/// Redis's default `proto-max-bulk-len`, bytes.
pub const REDIS_BULK_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// A parsed command.
#[derive(Debug, Clone, PartialEq)]
pub enum Rmw {
    /// `INCR`, `INCRBY`, `DECR`, `DECRBY`: add this.
    IncrBy(i64),
    /// `INCRBYFLOAT`.
    IncrByFloat(f64),
    /// `APPEND`.
    Append(Vec<u8>),
    /// `SETNX`.
    SetNx(Vec<u8>),
    /// `SET key value [NX|XX] [GET]`.
    Set {
        /// The value.
        value: Vec<u8>,
        /// `Some(true)`: NX (only if absent); `Some(false)`: XX (only if present).
        if_absent: Option<bool>,
        /// `GET`: answer the old value.
        get: bool,
    },
    /// `GETSET`.
    GetSet(Vec<u8>),
    /// `GETDEL`.
    GetDel,
    /// `SETRANGE`.
    SetRange {
        /// Byte offset (at least 0).
        offset: u64,
        /// The bytes written there.
        value: Vec<u8>,
    },
    /// `GETRANGE`.
    GetRange {
        /// First index (negative: from the end).
        start: i64,
        /// Last index, included.
        end: i64,
    },
    /// `STRLEN`.
    Strlen,
}

/// What the command does to the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Nothing.
    Keep,
    /// Store this value.
    Set(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// The command's effect and reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The key's new state.
    pub write: Write,
    /// The client's reply.
    pub reply: Reply,
}

const NOT_INTEGER: &str = "value is not an integer or out of range";
const NOT_FLOAT: &str = "value is not a valid float";
const TOO_LONG: &str = "string exceeds maximum allowed size (proto-max-bulk-len)";

/// Parses `args` (the command's name first, then its key and arguments)
/// into the key and the command; `Err` is the reply (wrong arity, bad
/// number, bad option); `Ok(None)`: not one of this module's commands.
pub fn parse(args: &[Vec<u8>]) -> Result<Option<(Vec<u8>, Rmw)>, Reply> {
    let Some(name) = args.first() else {
        return Ok(None);
    };
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    let arity = |n: usize, exact: bool| -> Result<(), Reply> {
        let ok = if exact {
            args.len() == n
        } else {
            args.len() >= n
        };
        if ok {
            Ok(())
        } else {
            Err(Reply::err(format!(
                "wrong number of arguments for '{lower}' command"
            )))
        }
    };
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let int = |i: usize| parse_i64(&arg(i)).ok_or_else(|| Reply::err(NOT_INTEGER));
    let cmd = match lower.as_str() {
        "incr" => {
            arity(2, true)?;
            Rmw::IncrBy(1)
        }
        "decr" => {
            arity(2, true)?;
            Rmw::IncrBy(-1)
        }
        "incrby" => {
            arity(3, true)?;
            Rmw::IncrBy(int(2)?)
        }
        "decrby" => {
            arity(3, true)?;
            let by = int(2)?;
            if by == i64::MIN {
                return Err(Reply::err("decrement would overflow"));
            }
            Rmw::IncrBy(-by)
        }
        "incrbyfloat" => {
            arity(3, true)?;
            Rmw::IncrByFloat(parse_float(&arg(2)).ok_or_else(|| Reply::err(NOT_FLOAT))?)
        }
        "append" => {
            arity(3, true)?;
            Rmw::Append(arg(2))
        }
        "setnx" => {
            arity(3, true)?;
            Rmw::SetNx(arg(2))
        }
        "getset" => {
            arity(3, true)?;
            Rmw::GetSet(arg(2))
        }
        "getdel" => {
            arity(2, true)?;
            Rmw::GetDel
        }
        "strlen" => {
            arity(2, true)?;
            Rmw::Strlen
        }
        "setrange" => {
            arity(4, true)?;
            let offset = int(2)?;
            let offset = u64::try_from(offset).map_err(|_| Reply::err("offset is out of range"))?;
            Rmw::SetRange {
                offset,
                value: arg(3),
            }
        }
        "getrange" => {
            arity(4, true)?;
            Rmw::GetRange {
                start: int(2)?,
                end: int(3)?,
            }
        }
        "set" => {
            arity(3, false)?;
            parse_set(args)?
        }
        _ => return Ok(None),
    };
    Ok(Some((arg(1), cmd)))
}

/// `SET key value [NX|XX] [GET]` (options in any order, case-insensitive).
fn parse_set(args: &[Vec<u8>]) -> Result<Rmw, Reply> {
    let mut if_absent = None;
    let mut get = false;
    for opt in args.iter().skip(3) {
        match opt.to_ascii_lowercase().as_slice() {
            b"nx" if if_absent != Some(false) => if_absent = Some(true),
            b"xx" if if_absent != Some(true) => if_absent = Some(false),
            b"get" => get = true,
            _ => return Err(Reply::err("syntax error")),
        }
    }
    Ok(Rmw::Set {
        value: args.get(2).cloned().unwrap_or_default(),
        if_absent,
        get,
    })
}

/// `strtold` with nothing around the number, no NaN (the "Rules").
pub fn parse_float(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let first = text.bytes().next()?;
    let last = text.bytes().last()?;
    if first.is_ascii_whitespace() || last.is_ascii_whitespace() {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if unsigned.starts_with("nan") {
        return None;
    }
    let value: f64 = lower.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

/// Redis's text of a float result (the "Rules").
fn float_text(value: f64) -> String {
    if value == 0.0 {
        return "0".to_owned();
    }
    format!("{value}")
}

/// Applies `cmd` to the key's `current` value; `value_bytes_max` bounds
/// every value the command builds (`APPEND`, `SETRANGE`, `INCRBYFLOAT`'s
/// printed result, every other one too): past it, nothing is written and
/// the answer is `ERR string exceeds maximum allowed size`.
pub fn apply(current: Option<&[u8]>, cmd: &Rmw, value_bytes_max: u64) -> Outcome {
    let outcome = compute(current, cmd, value_bytes_max);
    match &outcome.write {
        Write::Set(v) if v.len() as u64 > value_bytes_max => Outcome {
            write: Write::Keep,
            reply: Reply::err(TOO_LONG),
        },
        _ => outcome,
    }
}

/// [`apply`] before the final bound on the value built.
fn compute(current: Option<&[u8]>, cmd: &Rmw, value_bytes_max: u64) -> Outcome {
    let keep = |reply| Outcome {
        write: Write::Keep,
        reply,
    };
    let set = |value: Vec<u8>, reply| Outcome {
        write: Write::Set(value),
        reply,
    };
    let old = || current.map_or(Reply::Null, |v| Reply::Bulk(v.to_vec()));
    let len = |n: usize| Reply::Int(i64::try_from(n).unwrap_or(i64::MAX));
    match cmd {
        Rmw::IncrBy(by) => {
            let now = match current {
                None => 0,
                Some(v) => match parse_i64(v) {
                    Some(n) => n,
                    None => return keep(Reply::err(NOT_INTEGER)),
                },
            };
            match now.checked_add(*by) {
                Some(n) => set(n.to_string().into_bytes(), Reply::Int(n)),
                None => keep(Reply::err("increment or decrement would overflow")),
            }
        }
        Rmw::IncrByFloat(by) => {
            let now = match current {
                None => 0.0,
                Some(v) => match parse_float(v) {
                    Some(n) => n,
                    None => return keep(Reply::err(NOT_FLOAT)),
                },
            };
            let n = now + by;
            if !n.is_finite() {
                return keep(Reply::err("increment would produce NaN or Infinity"));
            }
            let text = float_text(n).into_bytes();
            set(text.clone(), Reply::Bulk(text))
        }
        Rmw::Append(tail) => {
            let head = current.unwrap_or_default();
            let total = head.len() as u64 + tail.len() as u64;
            if total > value_bytes_max {
                return keep(Reply::err(TOO_LONG));
            }
            let mut v = head.to_vec();
            v.extend_from_slice(tail);
            let n = v.len();
            set(v, len(n))
        }
        Rmw::SetNx(value) => match current {
            Some(_) => keep(Reply::Int(0)),
            None => set(value.clone(), Reply::Int(1)),
        },
        Rmw::Set {
            value,
            if_absent,
            get,
        } => {
            let allowed = match if_absent {
                None => true,
                Some(true) => current.is_none(),
                Some(false) => current.is_some(),
            };
            let reply = match (get, allowed) {
                (true, _) => old(),
                (false, true) => OK,
                (false, false) => Reply::Null,
            };
            if allowed {
                set(value.clone(), reply)
            } else {
                keep(reply)
            }
        }
        Rmw::GetSet(value) => set(value.clone(), old()),
        Rmw::GetDel => match current {
            Some(v) => Outcome {
                write: Write::Delete,
                reply: Reply::Bulk(v.to_vec()),
            },
            None => keep(Reply::Null),
        },
        Rmw::Strlen => keep(len(current.map_or(0, <[u8]>::len))),
        Rmw::SetRange { offset, value } => {
            let head = current.unwrap_or_default();
            if value.is_empty() {
                return keep(len(head.len()));
            }
            let total = offset.saturating_add(value.len() as u64);
            if total > value_bytes_max {
                return keep(Reply::err(TOO_LONG));
            }
            // Below `value_bytes_max`, so it fits in memory's index type.
            let (offset, total) = (*offset as usize, total as usize);
            let mut v = head.to_vec();
            if v.len() < total {
                v.resize(total, 0);
            }
            v[offset..total].copy_from_slice(value);
            let n = v.len();
            set(v, len(n))
        }
        Rmw::GetRange { start, end } => keep(get_range(current, *start, *end)),
    }
}

/// `GETRANGE`'s reply (Redis 7's `getrangeCommand`).
fn get_range(current: Option<&[u8]>, start: i64, end: i64) -> Reply {
    let empty = Reply::Bulk(Vec::new());
    if start < 0 && end < 0 && start > end {
        return empty;
    }
    let Some(s) = current else {
        return empty;
    };
    let n = i64::try_from(s.len()).unwrap_or(i64::MAX);
    let mut start = if start < 0 { n + start } else { start };
    let mut end = if end < 0 { n + end } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= n {
        end = n - 1;
    }
    if start > end || n == 0 {
        return empty;
    }
    // 0 <= start <= end < n.
    Reply::Bulk(s[start as usize..=end as usize].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(current: Option<&[u8]>, args: &[&str]) -> Outcome {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        match parse(&args) {
            Ok(Some((_, cmd))) => apply(current, &cmd, REDIS_BULK_BYTES_MAX),
            Ok(None) => panic!("not an rmw command: {args:?}"),
            Err(reply) => Outcome {
                write: Write::Keep,
                reply,
            },
        }
    }

    /// The integer grammar is string2ll's.
    #[test]
    fn integers_are_strict() {
        for bad in [
            "",
            " 1",
            "1 ",
            "+1",
            "01",
            "-0",
            "1.0",
            "9223372036854775808",
            "a",
        ] {
            assert_eq!(parse_i64(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
    }

    /// INCR family: values, overflow, bad values, absent keys.
    #[test]
    fn incr_family() {
        assert_eq!(run(None, &["INCR", "k"]).reply, Reply::Int(1));
        assert_eq!(
            run(Some(b"10"), &["INCRBY", "k", "-15"]).write,
            Write::Set(b"-5".to_vec())
        );
        let over = run(Some(b"9223372036854775807"), &["INCR", "k"]);
        assert_eq!(over.write, Write::Keep);
        assert_eq!(
            over.reply,
            Reply::err("increment or decrement would overflow")
        );
        assert_eq!(
            run(Some(b" 1"), &["INCR", "k"]).reply,
            Reply::err(NOT_INTEGER)
        );
        assert_eq!(
            run(None, &["DECRBY", "k", "-9223372036854775808"]).reply,
            Reply::err("decrement would overflow")
        );
        assert_eq!(
            run(None, &["INCR"]).reply,
            Reply::err("wrong number of arguments for 'incr' command")
        );
    }

    /// Every value an RMW builds respects `value_bytes_max`: a printed
    /// INCRBYFLOAT or INCRBY result past it is refused, nothing written.
    #[test]
    fn every_built_value_respects_the_bound() {
        let parsed = |args: &[&str]| {
            let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
            parse(&args).unwrap().unwrap().1
        };
        let too_long = Outcome {
            write: Write::Keep,
            reply: Reply::err(TOO_LONG),
        };
        let float = parsed(&["INCRBYFLOAT", "f", "1e200"]);
        assert_eq!(apply(Some(b"1"), &float, 100), too_long);
        assert!(matches!(
            apply(Some(b"1"), &float, 300).write,
            Write::Set(_)
        ));
        let int = parsed(&["INCRBY", "i", "-9223372036854775807"]);
        assert_eq!(apply(None, &int, 10), too_long);
        assert_eq!(
            apply(None, &int, 20).write,
            Write::Set(b"-9223372036854775807".to_vec())
        );
    }

    /// INCRBYFLOAT: exponent, sign, bad floats, printing.
    #[test]
    fn incrbyfloat() {
        assert_eq!(
            run(Some(b"10.5"), &["INCRBYFLOAT", "k", "0.1"]).reply,
            Reply::text("10.6")
        );
        assert_eq!(
            run(None, &["INCRBYFLOAT", "k", "1e3"]).reply,
            Reply::text("1000")
        );
        assert_eq!(
            run(Some(b"1"), &["INCRBYFLOAT", "k", "+1"]).reply,
            Reply::text("2")
        );
        assert_eq!(
            run(None, &["INCRBYFLOAT", "k", "nan"]).reply,
            Reply::err(NOT_FLOAT)
        );
        assert_eq!(
            run(Some(b"x"), &["INCRBYFLOAT", "k", "1"]).reply,
            Reply::err(NOT_FLOAT)
        );
    }

    /// SETRANGE bounds and padding; GETRANGE negative indices.
    #[test]
    fn ranges() {
        assert_eq!(
            run(None, &["SETRANGE", "k", "-1", "x"]).reply,
            Reply::err("offset is out of range")
        );
        assert_eq!(
            run(None, &["SETRANGE", "k", "536870912", "x"]).reply,
            Reply::err(TOO_LONG)
        );
        assert_eq!(
            run(Some(b"ab"), &["SETRANGE", "k", "4", "z"]).write,
            Write::Set(b"ab\0\0z".to_vec())
        );
        assert_eq!(
            run(Some(b"hello"), &["GETRANGE", "k", "-3", "-1"]).reply,
            Reply::text("llo")
        );
        assert_eq!(
            run(Some(b"hello"), &["GETRANGE", "k", "-1", "-3"]).reply,
            Reply::text("")
        );
        assert_eq!(
            run(Some(b"hello"), &["GETRANGE", "k", "1", "100"]).reply,
            Reply::text("ello")
        );
    }

    /// SET conditions and GET.
    #[test]
    fn set_conditions() {
        assert_eq!(run(Some(b"a"), &["SET", "k", "b", "NX"]).reply, Reply::Null);
        assert_eq!(
            run(Some(b"a"), &["SET", "k", "b", "XX", "GET"]).reply,
            Reply::text("a")
        );
        assert_eq!(
            run(None, &["SET", "k", "b", "NX", "XX"]).reply,
            Reply::err("syntax error")
        );
    }
}
