//! An HTTP request on `/v0/entity` with `If-Match` or `If-None-Match`
//! (`crate::http::conditional`, docs/API.md "Conditional requests").
//!
//! - A `GET` is read as any `GET` is (this node's engine, or a replicated
//!   read for `ack`/`from`); the rules then judge the version its answer
//!   names: 304, 412, or the answer itself.
//! - A `PUT` or `DELETE` is an atomic read-modify-write of its key,
//!   started where RESP's are ([`crate::net::dispatch::rmw`], an
//!   [`Op::Conditional`]): the preconditions are checked on the version
//!   read, and the write is made only if no other write came between;
//!   after such a conflict it runs again (at most
//!   [`rmw_local::ATTEMPTS_MAX`] times), the preconditions evaluated on the
//!   newer version. A key with replicas on other nodes is written through
//!   the consensus register (`net::register_rmw`, "Versions"): the
//!   preconditions are evaluated on the version a quorum agreed on, in the
//!   round that writes; its end comes back to
//!   [`Conn::conditional_register_done`].
//!
//! A request without these headers never comes here: its path and cost
//! are the plain ones (`Conn::execute`).

use super::{Conn, Slot, slow_note};
use crate::api::{Action, Route};
use crate::http::conditional::{Method, Preconditions, Verdict};
use crate::http::response::Persist;
use crate::net::answer::{self, Answer, Awaited, Failure};
use crate::net::auth_gate::{Credential, admit};
use crate::net::dispatch::{Command, Dispatched, dispatch};
use crate::net::render::render;
use crate::net::rmw_local::{self, Conditional, Op, Started, Ttl, Update};
use crate::replication::{ReplyTo, Request};
use crate::slowlog::{Facts, Protocol, StageMarks};
use crate::state::NetContext;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A conditional request waiting for its read's verdict or its write's
/// completion ([`Slot::Conditional`]).
pub struct Waiting {
    /// What its answer waits for.
    awaited: Awaited,
    route: Route,
    persist: Persist,
    /// When the request was parsed.
    started: Instant,
    /// What the slow log keeps of it.
    facts: Facts,
    /// A read's preconditions, judged on its answer.
    read: Option<Box<Preconditions>>,
    /// A write's update, kept to run again after a conflict.
    write: Option<Retry>,
}

impl Waiting {
    /// True for a conditional `PUT` or `DELETE` (a read has preconditions
    /// to judge on its answer, a write has none left).
    pub(super) fn is_write(&self) -> bool {
        self.read.is_none()
    }
}

/// A conditional write in flight.
struct Retry {
    update: Update,
    /// Its chain's id (`rmw_local::finished`).
    epoch: u64,
    /// Conflicts so far (at most `rmw_local::ATTEMPTS_MAX`).
    conflicts: u32,
}

/// A read's answer once its preconditions are judged on the version it
/// names: 304 or 412 in place of a value; any other answer (404, an
/// error) as it is.
fn judged_read(preconditions: &Preconditions, answer: Answer) -> Answer {
    let Answer::Value(_, ts) = &answer else {
        return answer;
    };
    match preconditions.evaluate(Method::Read, Some(*ts)) {
        Verdict::Proceed => answer,
        Verdict::NotModified => Answer::NotModified(*ts),
        Verdict::PreconditionFailed => Answer::PreconditionFailed(Some(*ts)),
    }
}

/// (Route, persistence, when parsed) of the request being executed.
pub(super) type At = (Route, Persist, Instant);

impl Conn {
    /// Executes a `GET`, `PUT` or `DELETE` of `/v0/entity` that carries
    /// preconditions (`action`'s are `Some`); `body` is a `PUT`'s value.
    pub(super) fn conditional(
        &mut self,
        ctx: &NetContext,
        (token, replicated): (usize, &mut Vec<Request>),
        action: Action,
        body: &[u8],
        at: At,
        credential: &Credential,
    ) {
        let (command, preconditions) = match action {
            Action::Get {
                key,
                ack,
                from,
                preconditions: Some(p),
            } => (
                Command::Get {
                    key: key.into(),
                    ack,
                    from,
                },
                p,
            ),
            Action::Put {
                key,
                ack,
                from,
                ttl_ms,
                preconditions: Some(p),
            } => {
                let expiry = crate::ttl::Expiry::from_ttl_ms(ttl_ms);
                let value = Some(body);
                (
                    Command::Write {
                        key: key.into(),
                        value,
                        ack,
                        from,
                        expiry,
                    },
                    p,
                )
            }
            Action::Delete {
                key,
                ack,
                from,
                preconditions: Some(p),
            } => {
                let expiry = crate::ttl::Expiry::Never;
                let value = None;
                (
                    Command::Write {
                        key: key.into(),
                        value,
                        ack,
                        from,
                        expiry,
                    },
                    p,
                )
            }
            other => {
                let why = format!("internal error: {other:?} is not a conditional request");
                let failed = Answer::Failed(Failure::Internal, why);
                return self.push_answer(ctx, at.0, at.1, at.2, &failed);
            }
        };
        if let Err(refusal) = admit(&ctx.shared.auth, credential, &command) {
            return self.push_answer(ctx, at.0, at.1, at.2, &refusal);
        }
        // A write is refused where a plain one is (a joining or removed
        // node); a read meets the same gate in `dispatch`.
        let gate = crate::net::membership_gate::refusal(&ctx.shared.transition, &command);
        if let Some(refused) = gate.filter(|_| matches!(command, Command::Write { .. })) {
            return self.push_answer(ctx, at.0, at.1, at.2, &refused);
        }
        let reply_to = ReplyTo {
            token,
            generation: self.generation,
            slot: self.base_slot + self.slots.len() as u64,
        };
        let facts = slow_note::http_facts(ctx, at.0, &command);
        match command {
            Command::Write {
                key,
                value,
                ack,
                from,
                expiry,
            } => {
                let update = Update {
                    key: key.into(),
                    op: Op::Conditional(Box::new(Conditional {
                        preconditions: *preconditions,
                        value: value.map(<[u8]>::to_vec),
                    })),
                    ttl: Ttl::Set(expiry),
                    ack,
                    from,
                    steps: Vec::new(),
                    watch: None,
                };
                self.conditional_write(ctx, reply_to, update, at, facts);
            }
            read => {
                self.conditional_read(ctx, (reply_to, replicated), read, preconditions, at, facts)
            }
        }
    }

    /// A conditional `GET`: read as a plain one, judged on its answer.
    fn conditional_read(
        &mut self,
        ctx: &NetContext,
        (reply_to, replicated): (ReplyTo, &mut Vec<Request>),
        read: Command<'_>,
        preconditions: Box<Preconditions>,
        (route, persist, started): At,
        facts: Facts,
    ) {
        match dispatch(ctx, replicated, reply_to, read) {
            Dispatched::Now(answer) => {
                let answer = judged_read(&preconditions, answer);
                self.push_answer(ctx, route, persist, started, &answer);
                let us = started.elapsed().as_micros() as u64;
                self.note_slow(ctx, (Protocol::Http, &facts), started, us, None);
            }
            Dispatched::Later(awaited) => self.push_slot(Slot::Conditional(Box::new(Waiting {
                awaited,
                route,
                persist,
                started,
                facts,
                read: Some(preconditions),
                write: None,
            }))),
            _ => {
                let why = "internal error: a read of one key was not answered as one";
                let failed = Answer::Failed(Failure::Internal, why.into());
                self.push_answer(ctx, route, persist, started, &failed);
            }
        }
    }

    /// A conditional `PUT` or `DELETE`: started as an atomic update; its
    /// answer now (412, a refusal) or when its write completes.
    fn conditional_write(
        &mut self,
        ctx: &NetContext,
        reply_to: ReplyTo,
        update: Update,
        (route, persist, started): At,
        facts: Facts,
    ) {
        let mut waiting = Waiting {
            awaited: Awaited::Read,
            route,
            persist,
            started,
            facts,
            read: None,
            write: Some(Retry {
                update,
                epoch: 0,
                conflicts: 0,
            }),
        };
        match start_write(ctx, reply_to, &mut waiting) {
            Some(answer) => {
                self.push_answer(ctx, route, persist, started, &answer);
                let us = started.elapsed().as_micros() as u64;
                self.note_slow(ctx, (Protocol::Http, &waiting.facts), started, us, None);
            }
            None => self.push_slot(Slot::Conditional(Box::new(waiting))),
        }
    }

    /// Fills the conditional request's slot `index` with the answer
    /// `answer_for` gives for what it waits for (a write's chain told it
    /// finished; a read's answer judged).
    pub(super) fn fill_conditional(
        &mut self,
        ctx: &NetContext,
        index: usize,
        marks: Option<StageMarks>,
        answer_for: impl FnOnce(Awaited) -> Answer,
    ) {
        let Some(Slot::Conditional(waiting)) = self.slots.get(index) else {
            return;
        };
        let mut answer = answer_for(waiting.awaited);
        if let Some(retry) = &waiting.write {
            let failed = !matches!(answer, Answer::Done(_));
            rmw_local::finished(ctx, &retry.update.key, retry.epoch, failed);
        }
        if let Some(preconditions) = &waiting.read {
            answer = judged_read(preconditions, answer);
        }
        let (route, persist, started, facts) = (
            waiting.route,
            waiting.persist,
            waiting.started,
            waiting.facts,
        );
        let status = self.fill_with(index, |out| render(out, &answer, persist));
        let us = ctx.shared.metrics.record(route, status, started);
        self.note_slow(ctx, (Protocol::Http, &facts), started, us, marks);
    }

    /// The conditional write in slot `slot` ended in the consensus register
    /// (`net::register_rmw::finish`): 201 or 202 naming the version it
    /// wrote, 412 naming the live version, or why it failed.
    pub(super) fn conditional_register_done(
        &mut self,
        ctx: &NetContext,
        slot: u64,
        outcome: super::resp_side::RegisterResult,
    ) {
        let Some(index) = slot.checked_sub(self.base_slot) else {
            return;
        };
        let index = index as usize;
        let Some(Slot::Conditional(waiting)) = self.slots.get_mut(index) else {
            return;
        };
        // Taken: no chain of the local path to finish.
        let Some(retry) = waiting.write.take() else {
            return;
        };
        let (_, answer) = crate::net::register_rmw::finish(ctx, &retry.update, outcome);
        self.fill_conditional(ctx, index, None, |_| answer);
    }

    /// The conditional write in slot `slot` met a concurrent write of its
    /// key: it runs again now, its preconditions judged on the newer
    /// version, or, past its attempts, answers 503.
    pub(super) fn conditional_conflict(&mut self, ctx: &NetContext, token: usize, slot: u64) {
        let Some(index) = slot.checked_sub(self.base_slot) else {
            return;
        };
        let index = index as usize;
        let Some(Slot::Conditional(waiting)) = self.slots.get_mut(index) else {
            return;
        };
        let Some(retry) = waiting.write.as_mut() else {
            return;
        };
        rmw_local::finished(ctx, &retry.update.key, retry.epoch, true);
        retry.conflicts += 1;
        let metrics = &ctx.shared.metrics;
        let answer = if retry.conflicts < rmw_local::ATTEMPTS_MAX {
            metrics.rmw_retries.fetch_add(1, Ordering::Relaxed);
            let reply_to = ReplyTo {
                token,
                generation: self.generation,
                slot,
            };
            match start_write(ctx, reply_to, waiting) {
                None => return, // queued again
                Some(answer) => answer,
            }
        } else {
            metrics.rmw_gave_up.fetch_add(1, Ordering::Relaxed);
            answer::busy(format!(
                "conflict: the key was written concurrently {} times in a row while this \
                 request read and wrote it; nothing was written, retry",
                rmw_local::ATTEMPTS_MAX
            ))
        };
        waiting.write = None;
        self.fill_conditional(ctx, index, None, |_| answer);
    }
}

/// Starts (again) `waiting`'s write: `Some(answer)` when it is decided
/// at once (412, a refusal), `None` when its write is queued.
fn start_write(ctx: &NetContext, reply_to: ReplyTo, waiting: &mut Waiting) -> Option<Answer> {
    let retry = waiting.write.as_mut()?;
    match crate::net::dispatch::rmw(ctx, reply_to, &retry.update) {
        Started::Later { awaited, epoch, .. } => {
            waiting.awaited = awaited;
            retry.epoch = epoch;
            None
        }
        Started::PreconditionFailed(current) => Some(Answer::PreconditionFailed(current)),
        Started::Refused(answer) => Some(answer),
        Started::Now(reply) => Some(Answer::Failed(
            Failure::Internal,
            format!("internal error: a conditional write answered {reply:?}"),
        )),
        // Its end comes back to `Conn::conditional_register_done`.
        Started::Register => {
            waiting.awaited = Awaited::Read;
            retry.epoch = 0;
            None
        }
    }
}
