//! The `cas` workload (issue 37's proof): clients talking RESP to random
//! members, running atomic read-modify-writes of a few hot keys through
//! the nodes' consensus register, and a checker that every key's history
//! is linearizable against a sequential register (`ataman_testkit::
//! linearizable`, Wing & Gong with Lowe's memoization).
//!
//! # Operations (all through the register: decision 0008)
//! | call | command | observed |
//! | --- | --- | --- |
//! | read | `GETRANGE k 0 -1` | the value (`""`: absent; no value written is empty) |
//! | swap | `SET k v GET` | the value before |
//! | setnx | `SET k v NX` | `OK` (was absent) or nil (was present) |
//! | incr | `INCR k` | the new integer, or `ERR value is not an integer …` (the value was not one: nothing written) |
//! | getdel | `GETDEL k` | the value before; the key is then absent |
//!
//! No plain `SET`/`DEL`/`GET` touches these keys: mixed in, a plain write
//! is not ordered with the register's (decision 0008).
//!
//! # Independent keys
//! Every operation takes the next number of a counter the clients share;
//! number `n` goes to key slot `n % HOT_KEYS`, and a slot moves to a
//! fresh key every [`OPS_PER_KEY_MAX`] numbers (Jepsen's "independent"
//! keys): [`HOT_KEYS`] keys are hot at once, and each key's history stays
//! small enough for the search. Every [`COUNTER_EVERY`]th key gets only
//! `INCR`s (a counter: the counter check, [`check`]). Which key an
//! operation lands on depends on the interleaving; what each client asks
//! (kind, value, node) depends on the seed alone.

pub mod check;
pub mod resp;
pub mod workload;

#[cfg(test)]
mod tests;

use serde_json::{Value, json};

/// Keys hot at once.
pub const HOT_KEYS: u64 = 2;
/// Operations one key gets during the run at most (its final read aside).
pub const OPS_PER_KEY_MAX: u64 = 40;
/// Every this many keys, one is a counter key (`INCR` only).
pub const COUNTER_EVERY: u64 = 4;
/// The prefix of the keys of the workload.
pub const KEY_PREFIX: &str = "cas-";

/// Key number `index`: `cas-n<index>` for a counter key, else `cas-m<index>`.
pub fn key_name(index: u64) -> String {
    let kind = if is_counter_index(index) { 'n' } else { 'm' };
    format!("{KEY_PREFIX}{kind}{index}")
}

fn is_counter_index(index: u64) -> bool {
    index % COUNTER_EVERY == COUNTER_EVERY - 1
}

/// True for a counter key's name.
pub fn is_counter_key(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX)
        .is_some_and(|rest| rest.starts_with('n'))
}

/// The key operation number `n` lands on (the module doc).
pub fn key_of(n: u64) -> String {
    let slot = n % HOT_KEYS;
    let generation = n / (HOT_KEYS * OPS_PER_KEY_MAX);
    key_name(generation * HOT_KEYS + slot)
}

/// What an operation asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasCall {
    /// `GETRANGE k 0 -1`.
    Read,
    /// `SET k v GET`.
    Swap(String),
    /// `SET k v NX`.
    SetNx(String),
    /// `INCR k`.
    Incr,
    /// `GETDEL k`.
    GetDel,
}

impl CasCall {
    /// The name in the history and the report.
    pub fn name(&self) -> &'static str {
        match self {
            CasCall::Read => "read",
            CasCall::Swap(_) => "swap",
            CasCall::SetNx(_) => "setnx",
            CasCall::Incr => "incr",
            CasCall::GetDel => "getdel",
        }
    }

    /// Every name, in the report's order.
    pub const NAMES: [&'static str; 5] = ["read", "swap", "setnx", "incr", "getdel"];

    /// The value it writes, if it names one.
    pub fn arg(&self) -> Option<&str> {
        match self {
            CasCall::Swap(v) | CasCall::SetNx(v) => Some(v),
            _ => None,
        }
    }

    fn parse(name: &str, arg: Option<String>) -> Option<CasCall> {
        Some(match (name, arg) {
            ("read", None) => CasCall::Read,
            ("swap", Some(v)) => CasCall::Swap(v),
            ("setnx", Some(v)) => CasCall::SetNx(v),
            ("incr", None) => CasCall::Incr,
            ("getdel", None) => CasCall::GetDel,
            _ => return None,
        })
    }

    /// The RESP command.
    pub fn command(&self, key: &str) -> Vec<Vec<u8>> {
        let words: Vec<&str> = match self {
            CasCall::Read => vec!["GETRANGE", key, "0", "-1"],
            CasCall::Swap(v) => vec!["SET", key, v, "GET"],
            CasCall::SetNx(v) => vec!["SET", key, v, "NX"],
            CasCall::Incr => vec!["INCR", key],
            CasCall::GetDel => vec!["GETDEL", key],
        };
        words.into_iter().map(|w| w.as_bytes().to_vec()).collect()
    }
}

/// What came back, as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasReply {
    /// A bulk string (lossy UTF-8: every value written is ASCII).
    Bulk(String),
    /// A nil reply.
    Nil,
    /// A simple string (`OK`).
    Simple(String),
    /// An integer.
    Int(i64),
    /// An error reply, its whole text.
    Error(String),
    /// Never sent: no connection could be made (certainly not applied).
    Unsent(String),
    /// Sent, no reply: a timeout, a lost connection, a reply that does not
    /// parse (the outcome is unknown).
    NoReply(String),
}

impl CasReply {
    fn kind(&self) -> &'static str {
        match self {
            CasReply::Bulk(_) => "bulk",
            CasReply::Nil => "nil",
            CasReply::Simple(_) => "simple",
            CasReply::Int(_) => "int",
            CasReply::Error(_) => "error",
            CasReply::Unsent(_) => "unsent",
            CasReply::NoReply(_) => "noreply",
        }
    }

    fn text(&self) -> Option<String> {
        match self {
            CasReply::Bulk(s)
            | CasReply::Simple(s)
            | CasReply::Error(s)
            | CasReply::Unsent(s)
            | CasReply::NoReply(s) => Some(s.clone()),
            CasReply::Int(n) => Some(n.to_string()),
            CasReply::Nil => None,
        }
    }

    fn parse(kind: &str, text: Option<String>) -> Option<CasReply> {
        Some(match (kind, text) {
            ("bulk", Some(s)) => CasReply::Bulk(s),
            ("nil", None) => CasReply::Nil,
            ("simple", Some(s)) => CasReply::Simple(s),
            ("int", Some(s)) => CasReply::Int(s.parse().ok()?),
            ("error", Some(s)) => CasReply::Error(s),
            ("unsent", Some(s)) => CasReply::Unsent(s),
            ("noreply", Some(s)) => CasReply::NoReply(s),
            _ => return None,
        })
    }
}

/// One operation of the workload (a `cas` line of the history).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasOp {
    /// The client (final reads: numbers after the workload's clients).
    pub client: u32,
    /// A final read (after every fault healed), else false.
    pub last: bool,
    /// The key.
    pub key: String,
    /// What it asked.
    pub call: CasCall,
    /// The slot it went to.
    pub node: usize,
    /// When it was sent (µs since the run started).
    pub start_us: u64,
    /// When its reply came, or the client gave up.
    pub end_us: u64,
    /// What came back.
    pub reply: CasReply,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn us(v: &Value) -> Option<u64> {
    let ms = v.as_f64()?;
    (ms >= 0.0).then(|| (ms * 1000.0).round() as u64)
}

impl CasOp {
    /// The history line.
    pub fn to_json(&self) -> Value {
        json!({
            "type": "cas", "client": self.client, "final": self.last, "key": self.key,
            "call": self.call.name(), "arg": self.call.arg(), "node": self.node,
            "start_ms": ms(self.start_us), "end_ms": ms(self.end_us),
            "reply": self.reply.kind(), "text": self.reply.text(),
        })
    }

    /// Reads a history line written by [`CasOp::to_json`].
    pub fn from_json(v: &Value) -> Option<CasOp> {
        let text = v["text"].as_str().map(str::to_owned);
        Some(CasOp {
            client: u32::try_from(v["client"].as_u64()?).ok()?,
            last: v["final"].as_bool()?,
            key: v["key"].as_str()?.to_owned(),
            call: CasCall::parse(v["call"].as_str()?, v["arg"].as_str().map(str::to_owned))?,
            node: usize::try_from(v["node"].as_u64()?).ok()?,
            start_us: us(&v["start_ms"])?,
            end_us: us(&v["end_ms"])?,
            reply: CasReply::parse(v["reply"].as_str()?, text)?,
        })
    }
}
