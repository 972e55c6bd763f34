//! Commands that describe a key rather than answer its value: `TYPE`,
//! `STRLEN` and `MEMORY USAGE`, what Redis's own tools ask of each key
//! they find (`redis-cli --bigkeys` asks `TYPE` then `STRLEN`, `--memkeys`
//! asks `MEMORY USAGE`). Each is one read of the key; its answer becomes
//! the reply here. Pure: no socket, no engine.
//!
//! - `TYPE key`: `string` (every value ataman stores is one), `none` when
//!   the key has no value.
//! - `STRLEN key`: the value's length in bytes, 0 when absent.
//! - `MEMORY USAGE key [SAMPLES n]`: the bytes the key's newest version
//!   takes in this node's memtable, as the engine counts it there (key,
//!   value, the internal key's trailer and a skip-list node's mean
//!   overhead: [`VERSION_OVERHEAD_BYTES`]); nil when absent. One copy: a
//!   cluster holds `R` of them, and on disk a version takes its
//!   compressed size instead. `SAMPLES` is accepted and has nothing to
//!   sample (a value is one string).

use super::encode::Reply;
use crate::net::answer::Answer;
use std::borrow::Cow;

/// Bytes a version takes in a memtable besides its key and value: the
/// internal key's trailer (timestamp, sequence number and kind) and a
/// skip-list node's header and links, on average (the engine's own count,
/// `ataman_engine::memtable`).
pub const VERSION_OVERHEAD_BYTES: usize = ataman_engine::key::INTERNAL_KEY_TRAILER_BYTES
    + ataman_engine::memtable::skiplist::NODE_OVERHEAD_BYTES_MEAN;

const _: () = assert!(VERSION_OVERHEAD_BYTES > ataman_engine::key::INTERNAL_KEY_TRAILER_BYTES);

/// What a describing command answers of the key it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Describe {
    /// `TYPE`.
    Type,
    /// `STRLEN`.
    Strlen,
    /// `MEMORY USAGE` of a key of this length.
    MemoryUsage {
        /// The key's length.
        key_bytes: usize,
    },
}

impl Describe {
    /// The command's name (in refusals).
    pub fn command(self) -> &'static str {
        match self {
            Describe::Type => "type",
            Describe::Strlen => "strlen",
            Describe::MemoryUsage { .. } => "memory|usage",
        }
    }
}

/// The reply to `describe` from its read's `answer` (a failure is
/// answered before this, by the table's `combine`).
pub fn reply(describe: Describe, answer: Option<&Answer>) -> Reply {
    let value = match answer {
        Some(Answer::Value(v, _) | Answer::ValueUntil(v, _)) => Some(v),
        _ => None,
    };
    match (describe, value) {
        (Describe::Type, Some(_)) => Reply::Simple("string"),
        (Describe::Type, None) => Reply::Simple("none"),
        (Describe::Strlen, v) => Reply::Int(v.map_or(0, |v| v.len() as i64)),
        (Describe::MemoryUsage { key_bytes }, Some(v)) => {
            Reply::Int((key_bytes + v.len() + VERSION_OVERHEAD_BYTES) as i64)
        }
        (Describe::MemoryUsage { .. }, None) => Reply::Null,
    }
}

/// `MEMORY HELP`'s lines.
const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "USAGE <key> [SAMPLES <count>]",
    "    Bytes the key's newest version takes in this node's memtable (key, value,",
    "    the engine's per-version overhead); one copy of R (docs/RESP.md).",
    "HELP",
    "    Print this help.",
];

/// `MEMORY …`: `Ok` with the key of a `MEMORY USAGE` (then read), or the
/// reply of anything else (`HELP`, an error in Redis's words).
pub fn memory<'b>(args: &'b [Cow<'_, [u8]>]) -> Result<&'b [u8], Reply> {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("help", 2) => Err(help(MEMORY_HELP)),
        ("usage", 3) => Ok(&args[2]),
        ("usage", 5) if args[3].eq_ignore_ascii_case(b"samples") => {
            match super::decode::parse_i64(&args[4]) {
                Some(n) if n >= 0 => Ok(&args[2]),
                _ => Err(Reply::err("value is not an integer or out of range")),
            }
        }
        ("usage", n) if n > 3 => Err(Reply::err("syntax error")),
        _ => Err(Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(&args[1][..args[1].len().min(64)])
        ))),
    }
}

/// A `HELP` subcommand's reply: its lines, as Redis answers them.
pub fn help(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::Simple(l)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::net::resp::test_args as args;

    /// Each command's reply to a value and to no value.
    #[test]
    fn replies_to_a_value_and_to_none() {
        let v = Answer::Value(b"hello".to_vec(), 1);
        let gone = Answer::NotFound(None);
        assert_eq!(reply(Describe::Type, Some(&v)), Reply::Simple("string"));
        assert_eq!(reply(Describe::Type, Some(&gone)), Reply::Simple("none"));
        assert_eq!(reply(Describe::Strlen, Some(&v)), Reply::Int(5));
        assert_eq!(reply(Describe::Strlen, Some(&gone)), Reply::Int(0));
        let usage = Describe::MemoryUsage { key_bytes: 3 };
        assert_eq!(
            reply(usage, Some(&v)),
            Reply::Int((3 + 5 + VERSION_OVERHEAD_BYTES) as i64)
        );
        assert_eq!(reply(usage, Some(&gone)), Reply::Null);
    }

    /// `MEMORY USAGE` with and without `SAMPLES`; `HELP`; the errors.
    #[test]
    fn memory_subcommands() {
        let a = args(&["memory", "usage", "k"]);
        assert_eq!(memory(&a), Ok(&b"k"[..]));
        let a = args(&["MEMORY", "USAGE", "k", "SAMPLES", "0"]);
        assert_eq!(memory(&a), Ok(&b"k"[..]));
        let a = args(&["memory", "help"]);
        assert!(matches!(memory(&a), Err(Reply::Array(lines)) if lines.len() == MEMORY_HELP.len()));
        for (words, error) in [
            (
                &["memory", "usage", "k", "samples", "x"][..],
                "not an integer",
            ),
            (&["memory", "usage", "k", "bogus"], "syntax error"),
            (&["memory", "doctor"], "Try MEMORY HELP"),
            (&["memory", "usage"], "Try MEMORY HELP"),
        ] {
            let a = args(words);
            let got = memory(&a);
            assert!(
                matches!(&got, Err(Reply::Error(e)) if e.contains(error)),
                "{words:?}: {got:?}"
            );
        }
    }
}
