//! The `cas` workload's checks, pure functions of its operations:
//!
//! - **Linearizability**, per key: the key's operations, each placed
//!   between its call and its reply, must have an order in which a
//!   sequential register ([`CasModel`], state `Option<String>`) gives every
//!   observed result. An operation whose outcome is unknown returns "at
//!   infinity" (it may take effect any time after its call, or never); an
//!   operation known to have taken effect without its result (`ERR the
//!   operation took effect …`) returns at its reply with any result; a
//!   refusal that says nothing was applied is left out. A search past
//!   `SEARCH_STEPS_MAX` leaves the key undecided (reported, never a pass).
//!   On a violation the witness is the key's history ([`witness`]: cut
//!   after the operation no order could place, when that alone still
//!   fails), one operation a line.
//! - **Counters**: a counter key (`INCR` only) must end, at its final read
//!   after every fault healed, within [acknowledged `INCR`s, acknowledged
//!   + unknown]: no lost and no phantom increment.
//!
//! Each reply is classified exactly by the node's texts
//! (`replication::register::proposer::RegisterError`,
//! `replication::register_io::REFUSED_IN_TRANSITION`, `register_ops::Refused`):
//! "… may or may not have taken effect" and "the outcome is unknown" are
//! unknown, "… took effect, but only N replicas …" took effect, "…
//! nothing was applied" was not applied. Any other error is counted as
//! unclassified and treated as unknown (it can only hide a violation,
//! never invent one); the report shows how many.

use super::{CasCall, CasOp, CasReply, is_counter_key};
use ataman_testkit::linearizable::{self, Entry, Model, Verdict};
use std::collections::BTreeMap;

/// The error `INCR` answers when the value is not an integer (Redis's).
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
/// Witnesses and examples kept (counts are complete).
pub const WITNESSES_MAX: usize = 5;

/// How an operation ended, by its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It took effect with this result.
    Done(Seen),
    /// It took effect; its result is unknown.
    Applied,
    /// It may or may not take effect, now or later.
    Unknown,
    /// Certainly not applied.
    NotApplied,
}

/// A result the model checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A value or nil (a read, a swap's or getdel's value before).
    Value(Option<String>),
    /// `SET NX`: set (true) or not.
    Set(bool),
    /// `INCR`'s new value.
    Int(i64),
    /// `INCR` of a value that is not an integer.
    NotInteger,
}

/// An outcome's name in the report (its columns).
pub fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Done(_) => "ok",
        Outcome::Applied => "applied",
        Outcome::Unknown => "unknown",
        Outcome::NotApplied => "refused",
    }
}

/// True for an error text that none of the node's known texts explains.
pub fn unclassified(text: &str) -> bool {
    classify_error(text).is_none()
}

fn classify_error(text: &str) -> Option<Outcome> {
    if text.contains("may or may not have taken effect") || text.contains("the outcome is unknown")
    {
        Some(Outcome::Unknown)
    } else if text.contains("the operation took effect") {
        Some(Outcome::Applied)
    } else if text.contains("nothing was applied") {
        Some(Outcome::NotApplied)
    } else {
        None
    }
}

/// The outcome of `op` (the module doc).
pub fn outcome(op: &CasOp) -> Outcome {
    let value = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    match (&op.call, &op.reply) {
        (_, CasReply::Unsent(_)) => Outcome::NotApplied,
        (_, CasReply::NoReply(_)) => Outcome::Unknown,
        (CasCall::Incr, CasReply::Error(e)) if e == NOT_AN_INTEGER => {
            Outcome::Done(Seen::NotInteger)
        }
        (_, CasReply::Error(e)) => classify_error(e).unwrap_or(Outcome::Unknown),
        // GETRANGE of an absent key is "" (no value written is empty).
        (CasCall::Read, CasReply::Bulk(s)) => Outcome::Done(Seen::Value(value(s))),
        (CasCall::Swap(_) | CasCall::GetDel, CasReply::Bulk(s)) => {
            Outcome::Done(Seen::Value(Some(s.clone())))
        }
        (CasCall::Swap(_) | CasCall::GetDel, CasReply::Nil) => Outcome::Done(Seen::Value(None)),
        (CasCall::SetNx(_), CasReply::Simple(s)) if s == "OK" => Outcome::Done(Seen::Set(true)),
        (CasCall::SetNx(_), CasReply::Nil) => Outcome::Done(Seen::Set(false)),
        (CasCall::Incr, CasReply::Int(n)) => Outcome::Done(Seen::Int(*n)),
        // A reply of the wrong shape: the model cannot use it; flagged by
        // `odd_replies`, kept as unknown.
        _ => Outcome::Unknown,
    }
}

/// True for a reply whose shape does not fit its call (a node bug).
pub fn odd_reply(op: &CasOp) -> bool {
    let fits = match (&op.call, &op.reply) {
        (_, CasReply::Unsent(_) | CasReply::NoReply(_) | CasReply::Error(_)) => true,
        (CasCall::Read, CasReply::Bulk(_)) => true,
        (CasCall::Swap(_) | CasCall::GetDel, CasReply::Bulk(_) | CasReply::Nil) => true,
        (CasCall::SetNx(_), CasReply::Simple(s)) => s == "OK",
        (CasCall::SetNx(_), CasReply::Nil) => true,
        (CasCall::Incr, CasReply::Int(_)) => true,
        _ => false,
    };
    !fits
}

/// An operation for the model: what it asked, and its result if known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What it asked.
    pub call: CasCall,
    /// Its result (`None`: unknown, any result is possible).
    pub seen: Option<Seen>,
}

/// The sequential register the key's history must fit.
#[derive(Debug, Clone, Copy, Default)]
pub struct CasModel;

/// `INCR` on `state`: the new value, or `None` (not an integer, or overflow).
pub fn incr(state: &Option<String>) -> Option<i64> {
    let n = match state {
        None => 0,
        // Redis's rule: a canonical decimal integer (no sign +, no
        // leading zero, no blanks) that fits an i64.
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n.to_string() == *s => n,
            _ => return None,
        },
    };
    n.checked_add(1)
}

impl Model for CasModel {
    type State = Option<String>;
    type Op = Step;

    fn init(&self) -> Option<String> {
        None
    }

    fn step(&self, state: &Option<String>, op: &Step) -> Option<Option<String>> {
        let seen = op.seen.as_ref();
        match &op.call {
            CasCall::Read => match seen {
                Some(Seen::Value(v)) => (v == state).then(|| state.clone()),
                _ => Some(state.clone()),
            },
            CasCall::Swap(new) => match seen {
                Some(Seen::Value(v)) if v != state => None,
                _ => Some(Some(new.clone())),
            },
            CasCall::GetDel => match seen {
                Some(Seen::Value(v)) if v != state => None,
                _ => Some(None),
            },
            CasCall::SetNx(new) => match (seen, state.is_some()) {
                (Some(Seen::Set(true)), true) | (Some(Seen::Set(false)), false) => None,
                (_, true) => Some(state.clone()),
                (_, false) => Some(Some(new.clone())),
            },
            CasCall::Incr => match (seen, incr(state)) {
                (Some(Seen::Int(n)), Some(m)) if *n == m => Some(Some(m.to_string())),
                (Some(Seen::NotInteger), None) => Some(state.clone()),
                (None, Some(m)) => Some(Some(m.to_string())),
                (None, None) => Some(state.clone()),
                _ => None,
            },
        }
    }
}

/// The entries of one key's operations for the search (the module doc).
pub fn entries(ops: &[&CasOp]) -> Vec<Entry<Step>> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let (seen, ret) = match outcome(op) {
            Outcome::Done(seen) => (Some(seen), Some(op.end_us)),
            Outcome::Applied => (None, Some(op.end_us)),
            Outcome::Unknown => (None, None),
            Outcome::NotApplied => continue,
        };
        // A read without its result says nothing.
        if op.call == CasCall::Read && seen.is_none() {
            continue;
        }
        out.push(Entry {
            op: Step {
                call: op.call.clone(),
                seen,
            },
            call: op.start_us,
            ret,
        });
    }
    out
}

/// The witness of a violation: the key's operations called before the
/// stuck operation's reply (later ones cannot be ordered before it) when
/// those alone are still not linearizable, else all of them; the stuck
/// one marked.
pub fn witness(history: &[Entry<Step>], stuck: usize) -> Vec<String> {
    let cut = history.get(stuck).and_then(|e| e.ret);
    let keep: Vec<usize> = (0..history.len())
        .filter(|&i| cut.is_none_or(|t| history[i].call <= t))
        .collect();
    let trimmed: Vec<Entry<Step>> = keep.iter().map(|&i| history[i].clone()).collect();
    let shown = if keep.len() < history.len()
        && matches!(
            linearizable::check(&CasModel, &trimmed),
            Verdict::Violation { .. }
        ) {
        keep
    } else {
        (0..history.len()).collect()
    };
    shown
        .into_iter()
        .map(|i| {
            let mark = if i == stuck {
                "  <- no order places this"
            } else {
                ""
            };
            format!("{}{mark}", describe(&history[i]))
        })
        .collect()
}

fn describe(e: &Entry<Step>) -> String {
    let seen = match &e.op.seen {
        None => "?".to_owned(),
        Some(Seen::Value(v)) => format!("{v:?}"),
        Some(Seen::Set(b)) => format!("set={b}"),
        Some(Seen::Int(n)) => n.to_string(),
        Some(Seen::NotInteger) => "not an integer".to_owned(),
    };
    let ret = e
        .ret
        .map_or("never".to_owned(), |r| format!("{:.3}", r as f64 / 1000.0));
    format!(
        "[{:.3}..{ret} ms] {}{} -> {seen}",
        e.call as f64 / 1000.0,
        e.op.call.name(),
        e.op.call.arg().map(|a| format!(" {a}")).unwrap_or_default(),
    )
}

/// A key whose history is not linearizable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witness {
    /// The key.
    pub key: String,
    /// Operations of the key checked.
    pub ops: usize,
    /// The key's non-linearizable history ([`witness`]), one operation a line.
    pub history: Vec<String>,
}

/// What the `cas` checks found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CasFindings {
    /// Operations (final reads included).
    pub ops: u64,
    /// Operations by call and outcome (`ok`, `applied`, `unknown`, `refused`).
    pub by_kind: BTreeMap<(String, String), u64>,
    /// Error replies no known text explains (treated as unknown).
    pub unclassified_errors: u64,
    /// Replies of a shape that does not fit their call.
    pub odd_replies: u64,
    /// Keys checked.
    pub keys: u64,
    /// Keys whose search passed the step bound.
    pub undecided_keys: u64,
    /// Keys whose history is not linearizable.
    pub violations: u64,
    /// The first [`WITNESSES_MAX`] of them.
    pub witnesses: Vec<Witness>,
    /// Counter keys checked (with a final read).
    pub counters: u64,
    /// Counter keys outside [acknowledged, acknowledged + unknown], with why.
    pub counter_violations: Vec<String>,
    /// Counter keys without an answered final read.
    pub counters_unread: u64,
}

impl CasFindings {
    /// Violations: non-linearizable keys, counters out of bounds, odd
    /// replies; and what could not be checked, which is never a pass: keys
    /// whose search passed its step bound, counters without a final read.
    pub fn violation_count(&self) -> u64 {
        self.violations
            + self.counter_violations.len() as u64
            + self.odd_replies
            + self.undecided_keys
            + self.counters_unread
    }

    /// Operations whose outcome was `name`.
    pub fn outcome_count(&self, name: &str) -> u64 {
        self.by_kind
            .iter()
            .filter(|((_, o), _)| o == name)
            .map(|(_, n)| n)
            .sum()
    }
}

/// Runs every check over `ops`.
pub fn check(ops: &[CasOp]) -> CasFindings {
    let mut f = CasFindings {
        ops: ops.len() as u64,
        ..CasFindings::default()
    };
    let mut by_key: BTreeMap<&str, Vec<&CasOp>> = BTreeMap::new();
    for op in ops {
        let o = outcome(op);
        *f.by_kind
            .entry((op.call.name().to_owned(), outcome_name(&o).to_owned()))
            .or_default() += 1;
        if let CasReply::Error(e) = &op.reply
            && !(op.call == CasCall::Incr && e == NOT_AN_INTEGER)
            && unclassified(e)
        {
            f.unclassified_errors += 1;
        }
        f.odd_replies += u64::from(odd_reply(op));
        by_key.entry(&op.key).or_default().push(op);
    }
    for (key, mut ops) in by_key {
        ops.sort_by_key(|o| (o.start_us, o.end_us));
        f.keys += 1;
        let history = entries(&ops);
        match linearizable::check(&CasModel, &history) {
            Verdict::Linearizable => {}
            Verdict::Undecided => f.undecided_keys += 1,
            Verdict::Violation { stuck, .. } => {
                f.violations += 1;
                if f.witnesses.len() < WITNESSES_MAX {
                    f.witnesses.push(Witness {
                        key: key.to_owned(),
                        ops: history.len(),
                        history: witness(&history, stuck),
                    });
                }
            }
        }
        if is_counter_key(key) {
            counter(key, &ops, &mut f);
        }
    }
    f
}

/// The counter check of one counter key.
fn counter(key: &str, ops: &[&CasOp], f: &mut CasFindings) {
    let (mut acked, mut unknown) = (0i64, 0i64);
    for op in ops.iter().filter(|o| o.call == CasCall::Incr) {
        match outcome(op) {
            Outcome::Done(Seen::Int(_)) | Outcome::Applied => acked += 1,
            Outcome::Unknown => unknown += 1,
            _ => {}
        }
    }
    let last = ops
        .iter()
        .filter(|o| o.last && o.call == CasCall::Read)
        .filter_map(|o| match outcome(o) {
            Outcome::Done(Seen::Value(v)) => Some(v),
            _ => None,
        })
        .next_back();
    let Some(value) = last else {
        f.counters_unread += 1;
        return;
    };
    f.counters += 1;
    let end = match incr(&value) {
        Some(n) => n - 1,
        None => {
            f.counter_violations
                .push(format!("{key}: ends at {value:?}, not an integer"));
            return;
        }
    };
    if end < acked || end > acked + unknown {
        let why = if end < acked { "lost" } else { "phantom" };
        f.counter_violations.push(format!(
            "{key}: ends at {end}, {acked} INCRs acknowledged, {unknown} unknown ({why} increments)"
        ));
    }
}
