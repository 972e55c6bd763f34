//! An atomic read-modify-write of a key whose only replica is this node
//! (every key of a single `ataman serve`): read, apply the pure update
//! ([`crate::net::resp::rmw::apply`]), write under a condition the writer
//! thread checks (`ataman_engine::db::condition`), retry on a conflict.
//!
//! # Rules
//! 1. **Read.** The key's newest version at read view `read_seq`
//!    (`Db::get_at`); an expired value reads as absent (at its timestamp).
//!    If this thread has a read-modify-write of the key still in flight,
//!    its result is the base instead (the *chain*, rule 4).
//! 2. **Stamp above what was read.** The new version's timestamp is above
//!    the version read (the clock observes it first if it is ahead), so
//!    it wins every read after it.
//! 3. **Conditional write.** Submitted with
//!    `Condition { expected_ts: the version read, read_seq }`: the writer
//!    applies it only if the key's newest version is still that one and
//!    nothing since `read_seq` left the memtables; else
//!    `Error::Conflict` comes back at once and the caller reads again and
//!    retries, at most [`ATTEMPTS_MAX`] times, then answers an error.
//!    Linearizable against every write applied on this node (plain `SET`,
//!    `DEL`, other threads' read-modify-writes): the write's effect is the
//!    update applied to the newest value at the moment it is applied.
//! 4. **One key's updates from one thread queue, not conflict.** A second
//!    update of a key with one in flight on this thread starts from the
//!    first one's result and expects its timestamp: they reach the writer
//!    in order, so it passes when the first did (and fails when it failed).
//!    At most `crate::rmw_chain::CHAIN_KEYS_MAX` keys are chained per thread; past it, an
//!    update reads the engine (a conflict and a retry at worst).
//! 5. **Answered when durable**, as a plain write is (the node's write
//!    durability); an update that writes nothing is answered at once.
//!
//! 6. **An HTTP conditional write** ([`Op::Conditional`]) evaluates its
//!    `If-Match` / `If-None-Match` on the version read (rule 1) and, when
//!    they hold, writes under rule 3's condition: a write that came
//!    between the read and the write fails the condition, and the retry
//!    evaluates the preconditions again on the newer version. So two
//!    clients that both read version `v` and both `PUT` with
//!    `If-Match: "v"` cannot both succeed (`tests/http_conditional.rs`).
//!
//! # Residual
//! A plain write stamped on another network thread before a
//! read-modify-write's stamp but applied after it sits below it in the
//! timestamp order, unseen by the update (docs/decisions/0008).

use super::answer::{self, Answer, Awaited};
use super::resp::encode::Reply;
use super::resp::expiry::{self, Next, Then};
use super::resp::multi_apply::{self, Step};
use super::resp::rmw::{self, Rmw, Write};
use super::resp::watch::{self, Seen};
use crate::replication::ReplyTo;
use crate::rmw_chain::Head;
use crate::state::{NetContext, Target};
use crate::ttl::Expiry;
use ataman_engine::{Condition, Submission, WriteBatch};

/// Attempts of one update before it is refused (each after a conflict
/// with a concurrent write of its key).
pub const ATTEMPTS_MAX: u32 = 64;

/// What an update does to the key's expiry when it writes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Keep the deadline the key has (`INCR`, `APPEND`, `SETRANGE`,
    /// `SET … KEEPTTL`).
    Keep,
    /// This expiry (`SET … NX PX 100`; `Never` for `SET`, `GETSET`, `SETNX`).
    Set(Expiry),
}

/// What an update does, a pure rule run on the value (and deadline) read.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A change of the value ([`rmw::apply`] runs it; `Update::ttl` says
    /// what becomes of the deadline).
    Value(Rmw),
    /// A change of the deadline (`EXPIRE` and its kin, `PERSIST`, `GETEX`):
    /// [`expiry::follow`] decides the write and the reply from the value
    /// and deadline read (`Update::ttl` unused).
    Expiry(Then),
    /// An HTTP conditional write (`PUT` or `DELETE` with `If-Match` or
    /// `If-None-Match`): its preconditions are evaluated on the version
    /// read ([`crate::http::conditional`], rule 6) and the write is made
    /// under the same condition as every update's, so no other write
    /// comes between the check and the write.
    Conditional(Box<Conditional>),
    /// `WATCH` of a key with replicas on other nodes: a read of the
    /// version through the consensus register (`net::register_rmw`,
    /// "Versions"); writes nothing, answers `+OK`.
    Watch,
}

/// An HTTP conditional write ([`Op::Conditional`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditional {
    /// `If-Match` and `If-None-Match`.
    pub preconditions: crate::http::conditional::Preconditions,
    /// The value a `PUT` writes (`Update::ttl` its expiry); `None`: a `DELETE`.
    pub value: Option<Vec<u8>>,
}

/// One read-modify-write of one key, whatever protocol asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// The key.
    pub key: Vec<u8>,
    /// The update.
    pub op: Op,
    /// What a value update does to the key's deadline.
    pub ttl: Ttl,
    /// Replicas that must answer (the session's; decides the path).
    pub ack: u32,
    /// Replicas asked.
    pub from: u32,
    /// A `MULTI … EXEC` transaction's steps, run in place of `op`
    /// ([`multi_apply::apply`]); empty for one command.
    pub steps: Vec<Step>,
    /// A transaction's watch ([`crate::net::resp::watch`]): it runs only
    /// if the key is still as `WATCH` saw it, else `EXEC` answers the
    /// null array; `None` for one command or a transaction unwatched.
    pub watch: Option<Seen>,
}

// `op`'s float is never NaN (the parser refuses it).
impl Eq for Update {}

impl Update {
    /// The plain command it is admitted as (`crate::net::authorize`): a
    /// read for `GETRANGE`, else a write of its key (it may write
    /// whatever its read finds).
    pub fn as_command(&self) -> super::dispatch::Command<'static> {
        use super::dispatch::Command;
        match self.op {
            Op::Value(Rmw::GetRange { .. }) | Op::Watch => Command::Get {
                key: self.key.clone().into(),
                ack: self.ack,
                from: self.from,
            },
            _ => Command::Write {
                key: self.key.clone().into(),
                value: None,
                ack: self.ack,
                from: self.from,
                expiry: Expiry::Never,
            },
        }
    }

    /// A read-only command (`GETRANGE`) as a plain read's second step,
    /// for a key with replicas on other nodes; `None` for the others.
    pub fn as_plain_read(&self) -> Option<super::resp::expiry::Chain> {
        match &self.op {
            Op::Value(op @ Rmw::GetRange { .. }) if self.steps.is_empty() => {
                Some(super::resp::expiry::Chain {
                    name: "getrange",
                    key: self.key.clone(),
                    ack: self.ack,
                    from: self.from,
                    then: super::resp::expiry::Then::Read(op.clone()),
                })
            }
            _ => None,
        }
    }

    /// The default expiry rule of `op`: an update of a value keeps its
    /// deadline, a replacement drops it (Redis's).
    pub fn ttl_of(op: &Rmw) -> Ttl {
        match op {
            Rmw::IncrBy(_) | Rmw::IncrByFloat(_) | Rmw::Append(_) | Rmw::SetRange { .. } => {
                Ttl::Keep
            }
            _ => Ttl::Set(Expiry::Never),
        }
    }
}

/// What became of an update.
#[derive(Debug)]
pub enum Started {
    /// Decided without a write (a read, a failed condition, an error).
    Now(Reply),
    /// Its write is queued: `reply` once it is durable ([`finished`]).
    Later {
        /// What the write waits for.
        awaited: Awaited,
        /// The reply once it is.
        reply: Reply,
        /// Its chain's id ([`finished`]).
        epoch: u64,
    },
    /// Refused (the clock, a deadline past the maximum, a failed read).
    Refused(Answer),
    /// An [`Op::Conditional`]'s preconditions failed on the version read
    /// (rule 6): nothing written; the key's current version (`None`: no
    /// value now).
    PreconditionFailed(Option<u64>),
    /// Handed to the consensus register (`net::register_rmw`): its end
    /// comes back to the slot (`Conn::register_done`).
    Register,
}

/// What an update starts from.
struct Base {
    value: Option<Vec<u8>>,
    deadline_ms: Option<u64>,
    ts: Option<u64>,
    read_seq: u64,
}

/// Starts `update` (rules 1–3); its write, if any, answers `reply_to`.
pub fn start(ctx: &NetContext, reply_to: ReplyTo, update: &Update) -> Started {
    let now_ms = crate::hlc::wall_ms();
    let base = match base(ctx, &update.key, now_ms) {
        Ok(base) => base,
        Err(answer) => return Started::Refused(answer),
    };
    if let Op::Conditional(write) = &update.op {
        use crate::http::conditional::{Method, Verdict};
        let current = base.live_version(now_ms);
        if write.preconditions.evaluate(Method::Write, current) != Verdict::Proceed {
            return Started::PreconditionFailed(current);
        }
    }
    if let Some(seen) = update.watch {
        let now = Seen::of(base.ts, base.value.is_some(), base.deadline_ms, now_ms);
        if !watch::holds(seen, now) {
            ctx.shared
                .metrics
                .watch_aborts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Started::Now(Reply::NullArray);
        }
    }
    let max = ctx.config.value_bytes_max as u64;
    let (value, ttl, reply) = match decide(update, &base, now_ms, max) {
        Ok(decided) => decided,
        Err(reply) => return Started::Now(reply),
    };
    let value = value.as_deref();
    let ts = match stamp_above(ctx, base.ts) {
        Ok(ts) => ts,
        Err(answer) => return Started::Refused(answer),
    };
    let deadline_ms = match (value, ttl) {
        (None, _) => None,
        (Some(_), Ttl::Keep) => base.deadline_ms,
        (Some(_), Ttl::Set(expiry)) => match super::dispatch::stamp_deadline(ctx, ts, expiry) {
            Ok(d) => d,
            Err(answer) => return Started::Refused(answer),
        },
    };
    let key = &update.key;
    let mut batch = WriteBatch::with_capacity_for_one(key.len(), value.map_or(0, <[u8]>::len));
    match (value, deadline_ms) {
        (Some(v), Some(d)) => batch.put_expiring(key, v, ts, d),
        (Some(v), None) => batch.put(key, v, ts),
        (None, _) => batch.delete(key, ts),
    };
    let skips =
        ctx.shared.config.planted_bug == Some(crate::config::PlantedBug::RmwSkipsConflictCheck);
    let condition = (!skips).then(|| Condition {
        key: key.clone(),
        expected_ts: base.ts,
        read_seq: base.read_seq,
    });
    ctx.pending_writes.borrow_mut().push(Submission {
        batch,
        durability: ctx.shared.write_durability,
        done: ctx.completions.callback(Target::Slot {
            token: reply_to.token,
            generation: reply_to.generation,
            slot: reply_to.slot,
        }),
        condition,
    });
    let head = Head {
        value: value.map(<[u8]>::to_vec),
        deadline_ms,
        ts,
        read_seq: base.read_seq,
        inflight: 1,
        epoch: 0,
    };
    let epoch = ctx.rmw_chains.borrow_mut().push(key, head);
    let awaited = match value {
        Some(_) => Awaited::Put(ts),
        None => Awaited::Delete(ts),
    };
    Started::Later {
        awaited,
        reply,
        epoch,
    }
}

/// The update's pure rule on `base`: the value to write (`None`: a
/// delete), its deadline rule and the reply; `Err`: no write, this reply.
fn decide(
    update: &Update,
    base: &Base,
    now_ms: u64,
    max: u64,
) -> Result<(Option<Vec<u8>>, Ttl, Reply), Reply> {
    if !update.steps.is_empty() || update.watch.is_some() {
        return transaction(update, base, now_ms, max);
    }
    match &update.op {
        Op::Value(op) => {
            let outcome = rmw::apply(base.value.as_deref(), op, max);
            match outcome.write {
                Write::Keep => Err(outcome.reply),
                Write::Set(v) => Ok((Some(v), update.ttl, outcome.reply)),
                Write::Delete => Ok((None, update.ttl, outcome.reply)),
            }
        }
        Op::Expiry(then) => {
            let read = match &base.value {
                Some(v) if base.deadline_ms.is_none_or(|d| d > now_ms) => {
                    Answer::ValueUntil(v.clone(), base.deadline_ms)
                }
                _ => Answer::NotFound(None),
            };
            match expiry::follow(then, &read, now_ms) {
                Next::Reply(reply) => Err(reply),
                Next::Write {
                    value,
                    expiry,
                    reply,
                } => Ok((value, Ttl::Set(expiry), reply)),
            }
        }
        // Its preconditions held (checked in `start`); HTTP answers from
        // the write's completion, not from a RESP reply.
        Op::Conditional(write) => Ok((write.value.clone(), update.ttl, Reply::Null)),
        Op::Watch => Err(super::resp::encode::OK),
    }
}

/// [`decide`] on a value read elsewhere (the consensus register's,
/// `net::register_rmw`): `value` with `deadline_ms`, judged at `now_ms`
/// (expired: absent). Pure.
pub(super) fn decide_on(
    update: &Update,
    value: Option<&[u8]>,
    deadline_ms: Option<u64>,
    now_ms: u64,
    max: u64,
) -> Result<(Option<Vec<u8>>, Ttl, Reply), Reply> {
    let live = value.is_some() && deadline_ms.is_none_or(|d| d > now_ms);
    let base = Base {
        value: value.filter(|_| live).map(<[u8]>::to_vec),
        deadline_ms: deadline_ms.filter(|_| live),
        ts: None,
        read_seq: 0,
    };
    decide(update, &base, now_ms, max)
}

/// A transaction's effect on `base` ([`multi_apply::apply`]): its value,
/// its own deadline rule and the array of replies; `Err`: no write.
fn transaction(
    update: &Update,
    base: &Base,
    now_ms: u64,
    value_bytes_max: u64,
) -> Result<(Option<Vec<u8>>, Ttl, Reply), Reply> {
    let state = multi_apply::State {
        value: base.value.clone(),
        deadline_ms: base.deadline_ms,
    };
    let tx = multi_apply::apply(&state, &update.steps, now_ms, value_bytes_max);
    let ttl = match (tx.deadline_changed, tx.deadline_ms) {
        (false, _) => Ttl::Keep,
        (true, None) => Ttl::Set(Expiry::Never),
        (true, Some(at)) => Ttl::Set(Expiry::AtMs(at)),
    };
    match tx.write {
        Write::Keep => Err(tx.reply),
        Write::Set(v) => Ok((Some(v), ttl, tx.reply)),
        Write::Delete => Ok((None, ttl, tx.reply)),
    }
}

/// An update's write of chain `epoch` finished: durable (`failed` false),
/// or refused or failed, which breaks the chain (rule 4).
pub fn finished(ctx: &NetContext, key: &[u8], epoch: u64, failed: bool) {
    ctx.rmw_chains.borrow_mut().finish(key, epoch, failed);
}

impl Base {
    /// The version a conditional request compares with: the one read,
    /// when it holds a value not expired at `now_ms`; `None` otherwise
    /// (absent, deleted, expired).
    fn live_version(&self, now_ms: u64) -> Option<u64> {
        let live = self.value.is_some() && self.deadline_ms.is_none_or(|d| d > now_ms);
        self.ts.filter(|_| live)
    }
}

/// Rule 1's base: the chain's head, else a read.
fn base(ctx: &NetContext, key: &[u8], now_ms: u64) -> Result<Base, Answer> {
    if let Some(head) = ctx.rmw_chains.borrow().head(key) {
        let expired = head.deadline_ms.is_some_and(|d| d <= now_ms);
        return Ok(Base {
            value: if expired { None } else { head.value.clone() },
            deadline_ms: if expired { None } else { head.deadline_ms },
            ts: Some(head.ts),
            read_seq: head.read_seq,
        });
    }
    let (entry, read_seq) = ctx
        .db
        .get_at(key)
        .map_err(|e| Answer::Failed(answer::Failure::Internal, format!("read failed: {e}")))?;
    Ok(match entry {
        Some(e) => Base {
            deadline_ms: e.value.as_ref().and(e.deadline_ms),
            value: e.value,
            ts: Some(e.ts),
            read_seq,
        },
        None => Base {
            value: None,
            deadline_ms: None,
            ts: None,
            read_seq,
        },
    })
}

/// What `WATCH` sees of `key` on this node, for
/// [`crate::net::resp::watch`]: the engine's newest version, what a `GET`
/// after it reads, never a chain's head (an update still in flight). A
/// watch that saw the head while the client's `GET` read the older value
/// let `EXEC` write from that older value: redis-py's retry loop lost
/// increments (`tests/resp_multi.rs`).
pub fn seen(ctx: &NetContext, key: &[u8]) -> Result<Seen, Answer> {
    let now_ms = crate::hlc::wall_ms();
    let (entry, _) = ctx
        .db
        .get_at(key)
        .map_err(|e| Answer::Failed(answer::Failure::Internal, format!("read failed: {e}")))?;
    Ok(match entry {
        Some(e) => Seen::of(Some(e.ts), e.value.is_some(), e.deadline_ms, now_ms),
        None => Seen::of(None, false, None, now_ms),
    })
}

/// Rule 2: a timestamp from the node's clock above `read_ts`.
fn stamp_above(ctx: &NetContext, read_ts: Option<u64>) -> Result<u64, Answer> {
    let clock = &ctx.shared.hlc;
    let busy = |e: crate::hlc::Unstamped| answer::busy(e.to_string());
    let mut ts = clock.now().map_err(busy)?;
    if let Some(read) = read_ts
        && ts <= read
    {
        clock.observe(read);
        ts = clock.now().map_err(busy)?;
    }
    assert!(
        read_ts.is_none_or(|read| ts > read),
        "a new version above the one read"
    );
    Ok(ts)
}
