//! A connection speaking RESP: its parse and render sides on the same
//! connection core as HTTP (the socket, read bound, answer slots in
//! request order, output buffer and back-pressure of [`super::Conn`]).
//!
//! Each decoded command is planned by the command table
//! ([`crate::net::resp::table`]); a command on keys fans out to one
//! neutral [`Command`] per key through the same dispatcher as HTTP, and
//! its slot gathers their answers ([`Gather`]) into one reply. Each part
//! is addressed as `slot id << PART_BITS | part`, so completions and
//! verdicts find their part without any other bookkeeping.

pub(super) type RegisterResult = Result<crate::replication::register_ops::Outcome, String>;
use super::resp_count::Counted;
use super::resp_info::wants_keys;
use super::{Conn, SLOTS_MAX, Slot};
use crate::net::answer::{Answer, Awaited, Failure};
use crate::net::dispatch::WatchStart;
use crate::net::dispatch::{Command, Dispatched, dispatch, local_only};
use crate::net::resp::auth::{self, Gate};
use crate::net::resp::decode::{self, DecodeError, Decoded};
use crate::net::resp::encode::{self, Proto, Reply};
use crate::net::resp::expiry::{Chain, Next, follow};
use crate::net::resp::key_commands::KeyCommands;
use crate::net::resp::rmw_plan;
use crate::net::resp::session;
use crate::net::resp::slowlog;
use crate::net::resp::table::{self, KeyOp, NodeQuery, Plan, Session};
use crate::net::resp::watch::{Seen, Watched};
use crate::net::resp::write_kind::{is_write, names_a_write};
use crate::net::rmw_local::{self, Op, Started, Update};
use crate::replication::{ReplyTo, Request};
use crate::slowlog::{Facts, Protocol, StageMarks};
use crate::state::NetContext;
use std::borrow::Cow;
use std::mem::take;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Bits of a reply address that name the part of a multi-key command
/// (the slot id is above them); a command has at most
/// [`decode::ARGS_MAX`] parts.
const PART_BITS: u32 = 20;
const _: () = assert!(decode::ARGS_MAX <= 1 << PART_BITS);

/// `CLIENT ID`s, unique in the process.
static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(1);

/// What a RESP connection keeps beyond the connection core.
pub struct RespConn {
    /// `HELLO`, `CLIENT`, `ATAMAN.REPLICATION` state.
    pub(super) session: Session,
    /// Write commands answered later, not yet answered: while any is, a
    /// command that is not a write waits (so a read sees this
    /// connection's earlier writes; writes in a row still reach the
    /// engine in one hand-off).
    writes_pending: usize,
    /// Of those, operations handed to the consensus register: their
    /// version is stamped when the register commits, so while any is
    /// pending every later command waits, writes too (a `SET` stamped
    /// now would sort below the register's commit and lose to it).
    register_pending: usize,
    /// Slot ids of read-then-write commands whose read is answered and
    /// whose second step waits for [`Conn::run_chains`].
    chains_ready: Vec<u64>,
    /// The parts of the last command answered at once, emptied: the next
    /// command's (no allocation per `GET` or `SET`); kept only up to
    /// [`SPARE_PARTS_MAX`].
    spare_parts: Vec<Part>,
    /// The room of the last command's arguments, emptied (`decode::recycle`).
    spare_args: Vec<Cow<'static, [u8]>>,
}

/// Most parts, and arguments, whose room a connection keeps between commands.
const SPARE_PARTS_MAX: usize = 16;

/// A multi-key command's slot: its parts' answers, gathered.
pub struct Gather {
    op: KeyOp,
    /// The `ack` its writes were sent with (`WAIT` counts their copies).
    ack: u32,
    parts: Vec<Part>,
    /// Parts still waiting.
    waiting: usize,
    proto: Proto,
    /// A read-then-write command's second step, until it is taken.
    chain: Option<Box<Chain>>,
    /// A read-then-write command's reply, once its second step decided
    /// it (sent when its write, if any, is durable).
    after: Option<Reply>,
    /// What the slow log keeps of the command, if it turns out slow.
    facts: Facts,
    /// When the command was parsed.
    started: Instant,
    /// The stages of its slowest replicated part, as its parts' verdicts
    /// bring them.
    marks: Option<StageMarks>,
    /// An atomic read-modify-write's update, kept to run again after a
    /// conflict (`crate::net::rmw_local`).
    rmw: Option<Box<Retry>>,
}

/// An atomic read-modify-write in flight.
struct Retry {
    update: Update,
    /// Its chain's id (`rmw_local::finished`).
    epoch: u64,
    /// Conflicts so far (at most `rmw_local::ATTEMPTS_MAX`).
    conflicts: u32,
}

/// One key's share of a command.
enum Part {
    Waiting(Awaited),
    Done(Answer),
}

impl Conn {
    /// A connection accepted on the RESP listener.
    pub fn new_resp(
        stream: crate::tls::transport::Transport,
        generation: u64,
        _ctx: &NetContext,
    ) -> Conn {
        // The session's defaults are read per command (`resp_limits`), not here.
        let id = NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed);
        let mut conn = Conn::new(stream, generation);
        conn.resp = Some(Box::new(RespConn {
            session: Session::new(id),
            writes_pending: 0,
            register_pending: 0,
            chains_ready: Vec::new(),
            spare_parts: Vec::new(),
            spare_args: Vec::new(),
        }));
        conn
    }

    fn proto(&self) -> Proto {
        self.resp.as_ref().map_or(Proto::Resp2, |r| r.session.proto)
    }

    /// Answers the command being executed with `reply`.
    pub(super) fn reply_now(&mut self, reply: &Reply) {
        let proto = self.proto();
        self.answer(|out| encode::encode(out, reply, proto));
    }

    /// Decodes and executes every complete command in the read buffer.
    pub(super) fn parse_resp(
        &mut self,
        ctx: &NetContext,
        token: usize,
        replicated: &mut Vec<Request>,
    ) {
        let bulk_bytes_max = ctx.config.value_bytes_max.max(ctx.config.key_bytes_max);
        let mut consumed = 0;
        // Taken out while commands execute, so values are lent to them
        // without a copy; nothing below reads `self.rbuf`.
        let rbuf = std::mem::take(&mut self.rbuf);
        let mut spare = self
            .resp
            .as_mut()
            .map_or_else(Vec::new, |r| take(&mut r.spare_args));
        while !self.close_after && self.slots.len() < SLOTS_MAX {
            let buf = &rbuf[consumed..];
            if buf.is_empty() {
                break;
            }
            // Chosen per command: an `AUTH` lifts them for the next one.
            let limits = if self.resp_awaits_auth(ctx) {
                decode::Limits::UNAUTHENTICATED
            } else {
                decode::Limits::authenticated(bulk_bytes_max)
            };
            match decode::decode_into(buf, limits, take(&mut spare)) {
                Ok(Decoded::Partial) => {
                    let limit = self.read_limit(ctx);
                    if buf.len() >= limit {
                        // Reading stops at this bound: the command cannot complete.
                        let e = format!("Protocol error: a command over {limit} bytes");
                        self.reply_now(&Reply::err(e));
                        self.close_after = true;
                    }
                    break;
                }
                Ok(Decoded::Skip(n)) => consumed += n,
                Ok(Decoded::Command(request)) => {
                    if self.resp_waits_for_writes()
                        && (!names_a_write(&request.args) || self.resp_waits_for_register())
                    {
                        // Resumed by the last write's answer (`fill_part`).
                        self.parse_paused = true;
                        break;
                    }
                    consumed += request.consumed;
                    self.request_started = None;
                    self.execute_resp(ctx, token, replicated, &request.args);
                    spare = request.args;
                }
                Err(e) => {
                    self.refuse_framing(ctx, &e);
                    break;
                }
            }
        }
        if let Some(state) = self.resp.as_mut()
            && spare.capacity() <= SPARE_PARTS_MAX
        {
            state.spare_args = decode::recycle(spare);
        }
        self.rbuf = rbuf;
        self.parse_paused = (self.slots.len() >= SLOTS_MAX || self.resp_waits_for_writes())
            && self.rbuf.len() > consumed;
        if consumed > 0 {
            self.rbuf.drain(..consumed);
        }
        if !self.rbuf.is_empty() && self.request_started.is_none() {
            self.request_started = Some(ctx.now.get());
        }
        if self.read_closed && !self.rbuf.is_empty() && !self.close_after && !self.parse_paused {
            // The peer closed in the middle of a command: answer what came
            // before, then close.
            self.rbuf.clear();
            self.request_started = None;
            self.close_after = true;
        }
    }

    /// True while client tokens are on and this connection has not
    /// authenticated: it gets the small bounds of
    /// [`decode::Limits::UNAUTHENTICATED`] and of its read buffer.
    pub(super) fn resp_awaits_auth(&self, ctx: &NetContext) -> bool {
        ctx.shared.auth.tokens.is_some()
            && self.resp.as_ref().is_some_and(|r| r.session.role.is_none())
    }

    /// True while this connection's earlier writes are not answered.
    pub(super) fn resp_waits_for_writes(&self) -> bool {
        self.resp.as_ref().is_some_and(|r| r.writes_pending > 0)
    }

    /// True while a consensus register operation of this connection is
    /// not answered ([`RespConn::register_pending`]).
    fn resp_waits_for_register(&self) -> bool {
        self.resp.as_ref().is_some_and(|r| r.register_pending > 0)
    }

    /// Malformed framing or a bulk over the limit: the error, then the
    /// connection closes (the next command's start is unknown).
    fn refuse_framing(&mut self, ctx: &NetContext, e: &DecodeError) {
        ctx.shared.metrics.resp_commands[table::OTHER].fetch_add(1, Ordering::Relaxed);
        self.reply_now(&Reply::err(e));
        self.close_after = true;
    }

    /// A command not received in time: the error, then the connection closes.
    pub(super) fn time_out_resp(&mut self) {
        self.rbuf.clear();
        self.request_started = None;
        self.reply_now(&Reply::err(
            "Protocol error: command not received in time (--request-timeout-ms)",
        ));
        self.close_after = true;
    }

    fn execute_resp(
        &mut self,
        ctx: &NetContext,
        token: usize,
        replicated: &mut Vec<Request>,
        args: &[Cow<'_, [u8]>],
    ) {
        #[cfg(feature = "planted-bugs")]
        if ctx.config.planted_bug == Some(crate::config::PlantedBug::ConnectionPanic)
            && args
                .first()
                .is_some_and(|a| a.eq_ignore_ascii_case(b"ataman.planted-panic"))
        {
            panic!("planted bug connection-panic: ATAMAN.PLANTED-PANIC");
        }
        let Some(state) = self.resp.as_mut() else {
            return;
        };
        let limits = resp_limits(ctx);
        let instead;
        let args = match auth::gate(&ctx.shared.auth, &mut state.session, args) {
            Gate::Plan => args,
            Gate::PlanInstead(rest) => {
                instead = rest;
                &instead[..]
            }
            Gate::Reply(reply) => {
                let index = args
                    .first()
                    .and_then(|name| table::lookup_bytes(name))
                    .map_or(table::OTHER, |(i, _)| i);
                ctx.shared.metrics.resp_commands[index].fetch_add(1, Ordering::Relaxed);
                return self.reply_now(&reply);
            }
        };
        let (index, plan) = table::plan(args, &mut state.session, limits);
        ctx.shared.metrics.resp_commands[index].fetch_add(1, Ordering::Relaxed);
        // While the slow log is off, no facts gathered (never recorded).
        let gather = ctx.shared.metrics.slowlog.gathers_facts();
        let facts = || match table::COMMANDS.get(index) {
            Some(spec) if gather => slowlog::facts(spec, args),
            Some(spec) => Facts::bare(spec.name),
            None => Facts::bare("other"),
        };
        match plan {
            Plan::Reply(reply) => self.reply_now(&reply),
            Plan::Close(reply) => {
                self.reply_now(&reply);
                self.close_after = true;
            }
            Plan::Node(NodeQuery::DbSize) => self.count_keys(ctx, token, Counted::DbSize),
            Plan::Node(NodeQuery::Info(sections)) if wants_keys(&sections) => {
                let figures = Box::new(self.figures(ctx));
                self.count_keys(ctx, token, Counted::Info(sections, figures));
            }
            Plan::Node(NodeQuery::BgSave) => self.bgsave(ctx),
            Plan::Node(query) => {
                let reply = self.node_reply(ctx, query);
                self.reply_now(&reply);
            }
            Plan::Keys(op, commands) => {
                self.fan_out(ctx, token, replicated, op, commands, facts());
            }
            Plan::ReadThen(_, chain)
                if local_only(ctx, &chain.key, chain.ack, chain.from, true) =>
            {
                // Its only replica is this node: atomic with every other write.
                let name = chain.name;
                self.rmw(ctx, token, name, rmw_plan::atomic(*chain), facts());
            }
            Plan::ReadThen(read, chain) => {
                self.read_then(ctx, token, replicated, (read, chain), facts());
            }
            Plan::Scan(scan) => self.scan(ctx, token, scan),
            Plan::Rmw(_, update)
                if !ctx.shared.config.consensus_register
                    && !crate::net::dispatch::rmw_local_only(ctx, &update.key)
                    && update.as_plain_read().is_some() =>
            {
                // `GETRANGE` of a key with replicas on other nodes, the
                // register off: a plain read, as `GET`. With it on, a
                // register read (linearizable with its writes), below.
                let Some(chain) = update.as_plain_read() else {
                    return;
                };
                let read = Command::GetVersion {
                    key: chain.key.clone().into(),
                    ack: chain.ack,
                    from: chain.from,
                };
                self.read_then(ctx, token, replicated, (read, Box::new(chain)), facts());
            }
            Plan::Rmw(name, update) => self.rmw(ctx, token, name, *update, facts()),
            Plan::Watch(key, ack, from) => self.watch(ctx, token, (key, ack, from), facts()),
            Plan::Slowlog(name, op) => self.slowlog_command(ctx, name, op),
        }
    }

    /// Dispatches a read-then-write command's read; its second step runs
    /// once the read is answered (at once for a local read).
    fn read_then(
        &mut self,
        ctx: &NetContext,
        token: usize,
        replicated: &mut Vec<Request>,
        (read, chain): (Command<'_>, Box<Chain>),
        facts: Facts,
    ) {
        let Some(state) = self.resp.as_ref() else {
            return;
        };
        // The command may write (EXPIRE, PERSIST, GETEX …): it needs the
        // write role whatever its read finds, judged now, under the role
        // the connection has when the command arrives.
        let commands = [read, chain.would_write()];
        let auth = &ctx.shared.auth;
        if let Err(denied) = auth::admit_named(auth, &state.session, chain.name, &commands) {
            return self.reply_now(&denied);
        }
        let [read, _] = commands;
        let id = self.base_slot + self.slots.len() as u64;
        let reply_to = ReplyTo {
            token,
            generation: self.generation,
            slot: id << PART_BITS,
        };
        let mut gather = Gather {
            op: KeyOp::Chained,
            ack: chain.ack,
            parts: Vec::with_capacity(1),
            waiting: 0,
            proto: state.session.proto,
            chain: Some(chain),
            after: None,
            facts,
            started: ctx.now.get(),
            marks: None,
            rmw: None,
        };
        match dispatch(ctx, replicated, reply_to, read) {
            Dispatched::Now(answer) => {
                gather.parts.push(Part::Done(answer));
                step(ctx, replicated, reply_to, &mut gather);
            }
            Dispatched::Later(awaited) => {
                gather.parts.push(Part::Waiting(awaited));
                gather.waiting = 1;
            }
            Dispatched::Stream(..) | Dispatched::Feed(_) | Dispatched::Job(_) => {
                gather.parts.push(Part::Done(Answer::Failed(
                    Failure::Internal,
                    "internal error: a range reached RESP".into(),
                )));
                gather.chain = None;
            }
        }
        if gather.waiting == 0 {
            self.answer_gathered(ctx, &gather);
        } else {
            if let Some(state) = self.resp.as_mut() {
                state.writes_pending += 1;
            }
            self.push_slot(Slot::Gather(Box::new(gather)));
        }
    }

    /// Runs the second step of every read-then-write command whose read
    /// was answered since (the event loop calls it after verdicts, with
    /// the requests it starts next).
    pub fn run_chains(&mut self, ctx: &NetContext, token: usize, replicated: &mut Vec<Request>) {
        let Some(state) = self.resp.as_mut() else {
            return;
        };
        let ready = std::mem::take(&mut state.chains_ready);
        for id in ready {
            let Some(index) = id.checked_sub(self.base_slot) else {
                continue;
            };
            let index = index as usize;
            let reply_to = ReplyTo {
                token,
                generation: self.generation,
                slot: id << PART_BITS,
            };
            let Some(Slot::Gather(gather)) = self.slots.get_mut(index) else {
                continue;
            };
            if gather.rmw.is_some() {
                // A retry after a conflict: the local path's only.
                let _ = rmw_again(ctx, reply_to, gather);
            } else {
                step(ctx, replicated, reply_to, gather);
            }
            if gather.waiting == 0 {
                self.finish_gather(ctx, index);
            }
        }
    }

    /// Dispatches a command's keys; answers at once when every part was
    /// answered at once, else queues a [`Gather`] slot.
    fn fan_out(
        &mut self,
        ctx: &NetContext,
        token: usize,
        replicated: &mut Vec<Request>,
        op: KeyOp,
        commands: KeyCommands<'_>,
        facts: Facts,
    ) {
        let Some(state) = self.resp.as_mut() else {
            return;
        };
        // The connection's role against every part, before any is dispatched.
        if let Err(denied) = auth::admit(&ctx.shared.auth, &state.session, op, &commands) {
            return self.reply_now(&denied);
        }
        let proto = state.session.proto;
        let mut parts = std::mem::take(&mut state.spare_parts);
        debug_assert!(parts.is_empty());
        parts.reserve(commands.len());
        let ack = commands
            .iter()
            .find_map(|c| match c {
                Command::Write { ack, .. } => Some(*ack),
                _ => None,
            })
            .unwrap_or(0);
        let id = self.base_slot + self.slots.len() as u64;
        let mut waiting = 0;
        for (part, command) in commands.into_iter().enumerate() {
            let reply_to = ReplyTo {
                token,
                generation: self.generation,
                slot: (id << PART_BITS) | part as u64,
            };
            parts.push(match dispatch(ctx, replicated, reply_to, command) {
                Dispatched::Now(answer) => Part::Done(answer),
                Dispatched::Later(awaited) => {
                    waiting += 1;
                    Part::Waiting(awaited)
                }
                // Keys are reads and writes, never ranges.
                Dispatched::Stream(..) | Dispatched::Feed(_) | Dispatched::Job(_) => {
                    Part::Done(Answer::Failed(
                        Failure::Internal,
                        "internal error: a range reached RESP".into(),
                    ))
                }
            });
        }
        let gather = Gather {
            op,
            ack,
            parts,
            waiting,
            proto,
            chain: None,
            after: None,
            facts,
            started: ctx.now.get(),
            marks: None,
            rmw: None,
        };
        if waiting == 0 {
            self.answer_gathered(ctx, &gather);
            let mut parts = gather.parts;
            for part in parts.drain(..) {
                if let Part::Done(answer) = part {
                    crate::net::answer::give_back(answer, &ctx.value_spare);
                }
            }
            if parts.capacity() <= SPARE_PARTS_MAX
                && let Some(state) = self.resp.as_mut()
            {
                state.spare_parts = parts;
            }
        } else {
            if is_write(op)
                && let Some(state) = self.resp.as_mut()
            {
                state.writes_pending += 1;
            }
            self.push_slot(Slot::Gather(Box::new(gather)));
        }
    }

    /// Fills part of a [`Gather`] slot addressed `address` with the answer
    /// `answer_for` gives; once every part is in, the reply is rendered.
    pub(super) fn fill_part(
        &mut self,
        ctx: &NetContext,
        address: u64,
        marks: Option<StageMarks>,
        answer_for: impl FnOnce(Awaited) -> Answer,
    ) {
        let part = (address & ((1 << PART_BITS) - 1)) as usize;
        let Some(index) = (address >> PART_BITS).checked_sub(self.base_slot) else {
            return;
        };
        let index = index as usize;
        let Some(Slot::Gather(gather)) = self.slots.get_mut(index) else {
            return;
        };
        let Some(Part::Waiting(awaited)) = gather.parts.get(part) else {
            return;
        };
        let answer = answer_for(*awaited);
        if let Some(retry) = &gather.rmw {
            let failed = !matches!(answer, Answer::Done(_));
            rmw_local::finished(ctx, &retry.update.key, retry.epoch, failed);
        }
        gather.parts[part] = Part::Done(answer);
        gather.marks = crate::slowlog::slower(gather.marks, marks);
        gather.waiting -= 1;
        if gather.waiting > 0 {
            return;
        }
        if gather.chain.is_some() {
            // The read is in: the second step runs with the event loop's
            // requests (`run_chains`).
            if let Some(state) = self.resp.as_mut() {
                state.chains_ready.push(address >> PART_BITS);
            }
            return;
        }
        self.finish_gather(ctx, index);
    }

    /// A consensus register operation ended (`net::register_rmw`): its
    /// reply, or its failure, fills its slot.
    pub fn register_done(&mut self, ctx: &NetContext, address: u64, outcome: RegisterResult) {
        if self.resp.is_none() {
            // An HTTP conditional write (`conn/conditional_side.rs`).
            return self.conditional_register_done(ctx, address, outcome);
        }
        let Some(index) = (address >> PART_BITS).checked_sub(self.base_slot) else {
            return;
        };
        let Some(Slot::Gather(gather)) = self.slots.get_mut(index as usize) else {
            return;
        };
        let Some(retry) = gather.rmw.take() else {
            return;
        };
        if let Some(state) = self.resp.as_mut() {
            state.register_pending = state.register_pending.saturating_sub(1);
        }
        let (reply, answer) = match (&retry.update.op, self.resp.as_mut()) {
            (Op::Watch, Some(state)) => match crate::net::register_rmw::watched(ctx, outcome) {
                Ok(seen) => {
                    let key = retry.update.key;
                    state.session.watch = Some(Watched { key, seen });
                    (encode::OK, Answer::Done(Awaited::Read))
                }
                Err(failed) => {
                    // The transaction it guards must not run unguarded.
                    let key = retry.update.key;
                    state.session.watch = Some(Watched {
                        key,
                        seen: Seen::FAILED,
                    });
                    failed
                }
            },
            _ => crate::net::register_rmw::finish(ctx, &retry.update, outcome),
        };
        gather.after = Some(reply);
        self.fill_part(ctx, address, None, |_| answer);
    }

    /// An atomic read-modify-write (`INCR`, `SET … NX`, …), admitted as
    /// a write of its key (`GETRANGE`: a read), started on the dispatcher's path for it; a
    /// write it queued answers with its reply once durable.
    fn rmw(
        &mut self,
        ctx: &NetContext,
        token: usize,
        name: &'static str,
        update: Update,
        facts: Facts,
    ) {
        let Some(state) = self.resp.as_ref() else {
            return;
        };
        let admitted_as = [update.as_command()];
        if let Err(denied) = auth::admit_named(&ctx.shared.auth, &state.session, name, &admitted_as)
        {
            return self.reply_now(&denied);
        }
        let id = self.base_slot + self.slots.len() as u64;
        let reply_to = ReplyTo {
            token,
            generation: self.generation,
            slot: id << PART_BITS,
        };
        let mut gather = Gather {
            op: KeyOp::Chained,
            ack: update.ack,
            parts: vec![Part::Waiting(Awaited::Read)],
            waiting: 1,
            proto: state.session.proto,
            chain: None,
            after: None,
            facts,
            started: ctx.now.get(),
            marks: None,
            rmw: Some(Box::new(Retry {
                update,
                epoch: 0,
                conflicts: 0,
            })),
        };
        let to_register = rmw_again(ctx, reply_to, &mut gather);
        if gather.waiting == 0 {
            self.answer_gathered(ctx, &gather);
        } else {
            if let Some(state) = self.resp.as_mut() {
                state.writes_pending += 1;
                state.register_pending += usize::from(to_register);
            }
            self.push_slot(Slot::Gather(Box::new(gather)));
        }
    }

    /// `WATCH key`: reads what the key is now (after this connection's
    /// earlier writes: `WATCH` is not a write, so it waited) and keeps it
    /// in the session (`crate::net::resp::watch`); a key with replicas on
    /// other nodes is read through the consensus register, and the
    /// connection's later commands wait for it (`register_done`).
    fn watch(
        &mut self,
        ctx: &NetContext,
        token: usize,
        (key, ack, from): (Vec<u8>, u32, u32),
        facts: Facts,
    ) {
        let Some(state) = self.resp.as_mut() else {
            return;
        };
        let read = [Command::Get {
            key: key.clone().into(),
            ack,
            from,
        }];
        if let Err(denied) = auth::admit_named(&ctx.shared.auth, &state.session, "watch", &read) {
            return self.reply_now(&denied);
        }
        let reply = match crate::net::dispatch::watch(ctx, &key) {
            Ok(WatchStart::Seen(seen)) => {
                state.session.watch = Some(Watched { key, seen });
                encode::OK
            }
            Ok(WatchStart::Register) => {
                let update = Update {
                    key,
                    op: Op::Watch,
                    ttl: rmw_local::Ttl::Keep,
                    ack,
                    from,
                    steps: Vec::new(),
                    watch: None,
                };
                return self.rmw(ctx, token, "watch", update, facts);
            }
            Err(Answer::Failed(failure, text)) => {
                // A local read that failed: the transaction it guards must
                // not run unguarded. A refusal (`--consensus-register=false`)
                // watches nothing: that key's `EXEC` is refused anyway.
                if failure != Failure::NotImplemented {
                    state.session.watch = Some(Watched {
                        key,
                        seen: Seen::FAILED,
                    });
                }
                table::failure_reply(failure, &text)
            }
            Err(other) => Reply::err(format!("internal error: WATCH read {other:?}")),
        };
        self.reply_now(&reply);
    }

    /// The conditional write of the read-modify-write at `address` met a
    /// concurrent write: it runs again with the event loop's requests
    /// (`run_chains`), or, past its attempts, answers an error.
    pub fn rmw_conflict(&mut self, ctx: &NetContext, token: usize, address: u64) {
        if self.resp.is_none() {
            // An HTTP conditional write (`conn/conditional_side.rs`).
            return self.conditional_conflict(ctx, token, address);
        }
        let Some(index) = (address >> PART_BITS).checked_sub(self.base_slot) else {
            return;
        };
        let index = index as usize;
        let Some(Slot::Gather(gather)) = self.slots.get_mut(index) else {
            return;
        };
        let Some(retry) = gather.rmw.as_mut() else {
            return;
        };
        rmw_local::finished(ctx, &retry.update.key, retry.epoch, true);
        retry.conflicts += 1;
        let metrics = &ctx.shared.metrics;
        if retry.conflicts < rmw_local::ATTEMPTS_MAX {
            metrics.rmw_retries.fetch_add(1, Ordering::Relaxed);
            if let Some(state) = self.resp.as_mut() {
                state.chains_ready.push(address >> PART_BITS);
            }
            return;
        }
        metrics.rmw_gave_up.fetch_add(1, Ordering::Relaxed);
        gather.rmw = None;
        gather.parts[0] = Part::Done(Answer::Failed(
            Failure::Busy,
            format!(
                "conflict: the key was written concurrently {} times in a row while this \
                 command read and updated it; nothing was applied, retry",
                rmw_local::ATTEMPTS_MAX
            ),
        ));
        gather.waiting = 0;
        self.finish_gather(ctx, index);
    }

    /// Renders the reply of the complete [`Gather`] in slot `index`.
    fn finish_gather(&mut self, ctx: &NetContext, index: usize) {
        let Some(Slot::Gather(gather)) = self.slots.get_mut(index) else {
            return;
        };
        let gather = Gather {
            op: gather.op,
            ack: gather.ack,
            parts: std::mem::take(&mut gather.parts),
            waiting: 0,
            proto: gather.proto,
            chain: None,
            after: gather.after.take(),
            facts: gather.facts,
            started: gather.started,
            marks: gather.marks,
            rmw: None,
        };
        if is_write(gather.op)
            && let Some(state) = self.resp.as_mut()
        {
            state.writes_pending = state.writes_pending.saturating_sub(1);
        }
        self.note_writes(&gather);
        self.fill_with(index, |out| {
            write_gathered(out, &gather);
            crate::http::Status::Ok
        });
        let us = gather.started.elapsed().as_micros() as u64;
        ctx.shared.metrics.resp_key_latency_us.record(us);
        let facts = (Protocol::Resp, &gather.facts);
        self.note_slow(ctx, facts, gather.started, us, gather.marks);
    }

    /// Answers a command whose parts were all answered at once.
    fn answer_gathered(&mut self, ctx: &NetContext, gather: &Gather) {
        self.note_writes(gather);
        self.answer(|out| write_gathered(out, gather));
        let us = gather.started.elapsed().as_micros() as u64;
        ctx.shared.metrics.resp_key_latency_us.record(us);
        let facts = (Protocol::Resp, &gather.facts);
        self.note_slow(ctx, facts, gather.started, us, gather.marks);
    }

    /// `BGSAVE`: admitted as `POST /v0/backup` is (admin), then a node
    /// checkpoint started on a thread of its own; answered at once, as
    /// Redis does (docs/RESP.md, "BGSAVE and LASTSAVE").
    fn bgsave(&mut self, ctx: &NetContext) {
        let Some(state) = self.resp.as_ref() else {
            return;
        };
        let command = [Command::Backup(
            crate::api::BackupAsk::Create {
                lease_s: None,
                at: None,
            },
            b"",
        )];
        if let Err(denied) = auth::admit_named(&ctx.shared.auth, &state.session, "bgsave", &command)
        {
            return self.reply_now(&denied);
        }
        let job = crate::net::backup_http::job(&ctx.shared, None);
        let reply = match job.spawn() {
            Ok(()) => Reply::Simple("Background saving started"),
            Err(crate::backup::Refusal::Running) => {
                Reply::err("Background save already in progress")
            }
            Err(e) => Reply::err(e.to_string()),
        };
        self.reply_now(&reply);
    }

    /// `SLOWLOG …`, `CONFIG SET slowlog-…`: admitted under `name`
    /// (changes need the admin role), then answered at once.
    fn slowlog_command(&mut self, ctx: &NetContext, name: &str, op: crate::slowlog::Op) {
        let Some(state) = self.resp.as_ref() else {
            return;
        };
        let command = [Command::Slowlog(op)];
        if let Err(denied) = auth::admit_named(&ctx.shared.auth, &state.session, name, &command) {
            return self.reply_now(&denied);
        }
        let reply = slowlog::reply(&ctx.shared.metrics.slowlog, op);
        self.reply_now(&reply);
    }

    /// Notes the copies a complete command's writes were confirmed on, for `WAIT`.
    fn note_writes(&mut self, gather: &Gather) {
        if !is_write(gather.op) {
            return;
        }
        let answers = gather.parts.iter().filter_map(|p| match p {
            Part::Done(a) => Some(a),
            Part::Waiting(_) => None,
        });
        if let Some(copies) = session::copies_confirmed(answers, gather.ack)
            && let Some(state) = self.resp.as_mut()
        {
            state.session.note_write(copies);
        }
    }
}

/// The command table's limits now: the node's key and value bounds, and
/// the cluster size and default `from` of the placement this thread works
/// with (refreshed every loop iteration, as HTTP's routing reads them).
pub(super) fn resp_limits(ctx: &NetContext) -> table::Limits {
    let route = ctx.route_config.get();
    table::Limits {
        key_bytes_max: ctx.config.key_bytes_max,
        value_bytes_max: ctx.config.value_bytes_max,
        cluster_size: route.cluster_size,
        from_default: route.from_default,
    }
}

/// A read-then-write command's second step, its read answered: decides
/// the reply and dispatches the write, if any, to the same slot.
fn step(ctx: &NetContext, replicated: &mut Vec<Request>, reply_to: ReplyTo, gather: &mut Gather) {
    let (Some(chain), Some(Part::Done(read))) = (gather.chain.take(), gather.parts.first()) else {
        return;
    };
    match follow(&chain.then, read, crate::hlc::wall_ms()) {
        Next::Reply(reply) => gather.after = Some(reply),
        Next::Write {
            value,
            expiry,
            reply,
        } => {
            let write = Command::Write {
                key: chain.key.into(),
                value: value.as_deref(),
                expiry,
                ack: chain.ack,
                from: chain.from,
            };
            gather.after = Some(reply);
            gather.parts[0] = match dispatch(ctx, replicated, reply_to, write) {
                Dispatched::Now(answer) => Part::Done(answer),
                Dispatched::Later(awaited) => {
                    gather.waiting = 1;
                    Part::Waiting(awaited)
                }
                Dispatched::Stream(..) | Dispatched::Feed(_) | Dispatched::Job(_) => {
                    Part::Done(Answer::Failed(
                        Failure::Internal,
                        "internal error: a range reached RESP".into(),
                    ))
                }
            };
        }
    }
}

/// Runs (again) a read-modify-write's update: its reply at once, or its
/// write queued for this slot.
/// Starts (again) `gather`'s update; true when the consensus register
/// took it (its end comes with `Conn::register_done`).
fn rmw_again(ctx: &NetContext, reply_to: ReplyTo, gather: &mut Gather) -> bool {
    let Some(retry) = gather.rmw.as_mut() else {
        return false;
    };
    let started = crate::net::dispatch::rmw(ctx, reply_to, &retry.update);
    let to_register = matches!(started, Started::Register);
    let (part, waiting) = match started {
        Started::Now(reply) => {
            gather.after = Some(reply);
            gather.rmw = None;
            (Part::Done(Answer::Done(Awaited::Read)), 0)
        }
        Started::Refused(answer) => {
            gather.after = Some(Reply::Null);
            gather.rmw = None;
            (Part::Done(answer), 0)
        }
        Started::PreconditionFailed(_) => {
            // Only HTTP plans a conditional write (`Op::Conditional`).
            gather.after = Some(Reply::err(
                "internal error: an HTTP precondition reached RESP",
            ));
            gather.rmw = None;
            (Part::Done(Answer::Done(Awaited::Read)), 0)
        }
        Started::Later {
            awaited,
            reply,
            epoch,
        } => {
            gather.after = Some(reply);
            retry.epoch = epoch;
            (Part::Waiting(awaited), 1)
        }
        // Its reply comes with its end (`Conn::register_done`).
        Started::Register => (Part::Waiting(Awaited::Read), 1),
    };
    gather.parts[0] = part;
    gather.waiting = waiting;
    to_register
}

/// Appends a gathered command's one reply.
fn write_gathered(out: &mut Vec<u8>, gather: &Gather) {
    if let Some(after) = &gather.after {
        // A read-then-write command: its reply, unless its write failed.
        let reply = match gather.parts.first() {
            Some(Part::Done(Answer::Failed(failure, text))) => table::failure_reply(*failure, text),
            _ => after.clone(),
        };
        return encode::encode(out, &reply, gather.proto);
    }
    // The hot cases without building a reply tree.
    match (gather.op, gather.parts.as_slice()) {
        (KeyOp::Get, [Part::Done(Answer::Value(v, _))]) => return encode::bulk(out, v),
        (KeyOp::Get, [Part::Done(Answer::NotFound(_))]) => return encode::null(out, gather.proto),
        (KeyOp::Set, [Part::Done(Answer::Done(_))]) => return out.extend_from_slice(b"+OK\r\n"),
        _ => {}
    }
    let answers: Vec<Answer> = gather
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Done(a) => Some(a.clone()),
            Part::Waiting(_) => None,
        })
        .collect();
    let now_ms = crate::hlc::wall_ms();
    encode::encode(
        out,
        &table::combine(gather.op, &answers, now_ms),
        gather.proto,
    );
}
