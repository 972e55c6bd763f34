//! One client connection: read, parse, hand each request to the
//! dispatcher ([`super::dispatch`]), answer in order ([`super::render`]),
//! and switch protocols on an upgrade.
//!
//! Requests are parsed as bytes arrive; each gets a slot in `slots`, in
//! request order. A read, a status or an error fills its slot at once; a
//! write is handed to the engine and its slot is filled when the completion
//! comes back to this network thread; a range streams its chunks when it
//! reaches the front. Answers leave strictly in slot order (pipelining).
//!
//! A connection accepted on the RESP listener runs on the same core (the
//! socket, read bound, slots, output buffer and back-pressure) and parses
//! and renders RESP instead, in `conn/resp_side.rs` (docs/RESP.md).
//!
//! # Invariants
//! - `slots` never holds more than [`SLOTS_MAX`]; parsing pauses until the
//!   front drains (asserted where a slot is pushed and where one leaves).
//! - Bytes are read only while the read buffer is below its bound.
//! - After an error that closes the connection, nothing more is parsed.

use super::answer::{self, Answer, Awaited};
use super::auth_gate::{Credential, admit, credential};
use super::body_gate::{
    Bounds, body_bytes_max, largest_body_bytes_max, refusal_text, refuse_body, too_large,
};
use super::dispatch::{Command, Dispatched, Encoding, dispatch};
use super::peer_conn::PeerServer;
use super::render::{from_http_error, render};
use crate::api::{Action, Route, allow_for, route};
use crate::http::Status;
use crate::http::chunked::ChunkedBody;
use crate::http::request::{HttpError, Limits, Parsed, parse_head};
use crate::http::response::{Persist, names_head, strip_body};
use crate::replication::{ReplyTo, Request, coordinator::Decision};
use crate::slowlog::{Protocol, StageMarks};
use crate::state::NetContext;
use crate::tls::transport::Transport;
use ataman_engine::ScanIter;
use chunked_body::BodyStep;
use head_facts::HeadFacts;
use internal_side::peer_protocol;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::time::Instant;

mod buffer_trim;
mod chunked_body;
mod conditional_side;
mod head_facts;
mod head_only;
mod http_order;
mod internal_side;
mod resp_count;
mod resp_info;
mod resp_scan;
mod resp_side;
mod slow_note;
mod stream_side;

/// Answers a connection may have outstanding before parsing pauses.
pub const SLOTS_MAX: usize = 256;
/// Output bytes buffered before a streaming range waits for the socket.
pub const STREAM_BUFFER_BYTES: usize = 256 * 1024;
/// Rounds of read and parse per event for a RESP connection read under
/// the bound of one that has not authenticated
/// ([`crate::net::resp::decode::UNAUTHENTICATED_READ_BYTES_MAX`]).
const UNAUTHENTICATED_READ_ROUNDS_MAX: usize = 16;
/// Bytes read per `read` call (the size of each thread's scratch buffer).
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A pending answer.
pub enum Slot {
    /// Bytes ready to send.
    Ready(Vec<u8>),
    /// A request handed to the engine or the coordinator; filled by its
    /// completion or verdict.
    Waiting {
        /// What it waits for (what the answer says on success).
        awaited: Awaited,
        /// Route (metrics).
        route: Route,
        /// Connection persistence for the answer.
        persist: Persist,
        /// When the request was parsed.
        started: Instant,
        /// What the slow log keeps of it, if it turns out slow.
        facts: crate::slowlog::Facts,
    },
    /// A RESP command on keys, gathering its keys' answers into one reply.
    Gather(Box<resp_side::Gather>),
    /// An HTTP request with `If-Match` / `If-None-Match` waiting for its
    /// read or its write (`conn/conditional_side.rs`).
    Conditional(Box<conditional_side::Waiting>),
    /// A RESP `SCAN` page its range thread computes.
    Scan(Box<resp_scan::ScanWait>),
    /// A RESP `DBSIZE` or `INFO` whose keys a range thread counts.
    Count(Box<resp_count::CountWait>),
    /// A range being streamed.
    Stream {
        /// The scan.
        iter: Box<ScanIter>,
        /// How entries are written.
        encoding: Encoding,
        /// Head written already.
        head_written: bool,
        /// Connection persistence for the answer.
        persist: Persist,
        /// When the request was parsed.
        started: Instant,
    },
    /// A layout request a layout worker answers whole
    /// (`crate::layout_io::endpoints`).
    Job {
        /// The job's waiting end.
        job: crate::layout_io::endpoints::LayoutJob,
        /// Route (metrics).
        route: Route,
        /// Connection persistence for the answer.
        persist: Persist,
        /// When the request was parsed.
        started: Instant,
    },
    /// A cluster range its range thread feeds (`crate::range::feed`).
    Feed {
        /// The queue from the range thread.
        feed: crate::range::FeedReceiver,
        /// Head written already.
        head_written: bool,
        /// The queue was found empty: wait for the thread's wake-up.
        starved: bool,
        /// Connection persistence for the answer.
        persist: Persist,
        /// When the request was parsed.
        started: Instant,
    },
}

/// A connection's state.
pub struct Conn {
    /// The socket (plain TCP or TLS).
    pub stream: Transport,
    /// Distinguishes a reused token's connections (completions carry it).
    pub generation: u64,
    rbuf: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    slots: VecDeque<Slot>,
    /// Id of `slots.front()`; slot ids grow by one per request.
    base_slot: u64,
    /// A parsed head waiting for its body.
    pending: Option<PendingRequest>,
    /// Close once everything queued is written.
    close_after: bool,
    /// The peer closed its side (or a read failed).
    read_closed: bool,
    /// Last time anything was read or written.
    pub last_active: Instant,
    /// When the first byte of the request being received arrived.
    request_started: Option<Instant>,
    /// Sent `100 Continue` for the pending head.
    continued: bool,
    /// Reading stopped at a bound (not at `WouldBlock`): the socket may hold
    /// more, and edge-triggered polling will not say so again.
    pub read_paused: bool,
    /// Parsing stopped at [`SLOTS_MAX`] answers owed with requests still in
    /// the read buffer: once answers drain, parsing must resume without a
    /// socket event (none may come: the client waits for those answers).
    pub parse_paused: bool,
    /// A peer asked to upgrade: parse nothing more; once the 101 is out the
    /// connection speaks the peer protocol, or goes to the sync thread.
    upgrading: Option<Upgrade>,
    /// The peer protocol's side of an upgraded connection.
    peer: Option<Box<PeerServer>>,
    /// Set once a sync upgrade's 101 is out: the connection leaves the loop.
    sync_ticket: Option<crate::antientropy::Ticket>,
    /// Counted among peer connections, not clients (set by the event loop).
    pub counted_as_peer: bool,
    /// The nonce of the peer challenge this connection issued (`peer::auth_gate`).
    peer_nonce: Option<crate::auth::peer_proof::Nonce>,
    /// The RESP side of a connection accepted on the RESP listener; `None`: HTTP.
    resp: Option<Box<resp_side::RespConn>>,
    /// The client's address once looked up (`slow_note::client_addr`).
    client_addr: std::cell::Cell<Option<std::net::SocketAddr>>,
    /// The answers owed to HEAD requests (`conn/head_only.rs`).
    heads: head_only::HeadIds,
}

/// A parsed request head waiting for its body.
struct PendingRequest {
    head: HeadFacts,
    route: Route,
    action: Action,
    /// When the request's first byte arrived.
    started: Instant,
    /// Who sent it (`Authorization`, read when the head was parsed).
    credential: Credential,
    /// Its chunked body as far as it arrived (`None`: a `Content-Length` body).
    chunked: Option<Box<ChunkedBody>>,
}

/// What the event loop should do with a connection after handling it.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Keep it.
    Keep,
    /// Close and forget it.
    Close,
    /// The 101 of a sync upgrade is out: take the socket out of the loop and
    /// hand it to the anti-entropy sync thread ([`Conn::into_sync_handoff`]).
    HandOff,
}

/// The protocol a connection switches to once its 101 is written.
#[derive(Debug)]
pub(super) enum Upgrade {
    /// The peer protocol, served on this thread, for a peer on the
    /// layout version it named (if it named one).
    Peer(Option<u64>),
    /// The sync protocol, served by the `ataman-sync` thread; the ticket is
    /// the session's reserved place.
    Sync(crate::antientropy::Ticket),
}

impl Conn {
    /// Wraps an accepted socket.
    pub fn new(stream: Transport, generation: u64) -> Self {
        Conn {
            stream,
            generation,
            rbuf: Vec::new(),
            out: Vec::new(),
            out_pos: 0,
            slots: VecDeque::new(),
            base_slot: 0,
            pending: None,
            close_after: false,
            read_closed: false,
            last_active: Instant::now(),
            request_started: None,
            continued: false,
            read_paused: false,
            parse_paused: false,
            upgrading: None,
            sync_ticket: None,
            peer: None,
            counted_as_peer: false,
            peer_nonce: None,
            resp: None,
            client_addr: std::cell::Cell::new(None),
            heads: head_only::HeadIds::default(),
        }
    }

    /// A connection whose sync upgrade is done ([`Next::HandOff`]): its
    /// socket, the bytes read past the upgrade request, and its session
    /// place. `None` for any other connection.
    pub fn into_sync_handoff(self) -> Option<(Transport, Vec<u8>, crate::antientropy::Ticket)> {
        let ticket = self.sync_ticket?;
        Some((self.stream, self.rbuf, ticket))
    }

    /// True once the connection speaks the peer protocol.
    pub fn is_peer(&self) -> bool {
        self.peer.is_some()
    }

    /// True when no request is in progress and nothing is owed to the client.
    pub fn is_idle(&self) -> bool {
        if let Some(peer) = &self.peer {
            return peer.is_idle();
        }
        self.slots.is_empty()
            && self.pending.is_none()
            && self.rbuf.is_empty()
            && self.out_pos >= self.out.len()
    }

    /// True when parsing stopped at [`SLOTS_MAX`] with requests left in the
    /// read buffer and answers have drained below the bound since: the
    /// event loop must call [`Conn::on_ready`] again (no socket event
    /// will come for bytes already read).
    pub fn parse_resumable(&self) -> bool {
        self.parse_paused
            && self.peer.is_none()
            && self.slots.len() < SLOTS_MAX
            && !self.resp_waits_for_writes()
            && !self.http_waits_for_writes()
    }

    /// When the request being received started, if one is.
    pub fn request_started(&self) -> Option<Instant> {
        self.request_started
    }

    /// Reads what the socket has, parses and executes complete requests, and writes answers.
    /// `peer_closed` is the poller's hint that the peer shut down its side.
    pub fn on_ready(
        &mut self,
        ctx: &NetContext,
        token: usize,
        scratch: &mut [u8],
        replicated: &mut Vec<Request>,
        peer_closed: bool,
    ) -> Next {
        if let Some(peer) = self.peer.as_mut() {
            self.last_active = Instant::now();
            return peer.on_ready(&mut self.stream, ctx, token, self.generation, scratch);
        }
        for _ in 0..UNAUTHENTICATED_READ_ROUNDS_MAX {
            let bounded = self.resp_awaits_auth(ctx);
            self.read(ctx, scratch, peer_closed);
            self.parse(ctx, token, replicated);
            // Read under the small bound of a connection that had not
            // authenticated, which stopped at it and has room now (its
            // commands were answered, or an `AUTH` raised the bound): the
            // socket may hold more and no event will say so.
            let room = self.rbuf.len() < self.read_limit(ctx);
            if !(bounded && self.read_paused && room && !self.close_after && !self.parse_paused) {
                break;
            }
        }
        buffer_trim::trim(&mut self.rbuf);
        let next = self.flush(ctx);
        if next == Next::Keep && self.peer.is_some() {
            // Upgraded in `flush`: frames may have come with the upgrade.
            return self.on_ready(ctx, token, scratch, replicated, false);
        }
        next
    }

    /// A peer's write finished: queue its acknowledgement.
    pub fn peer_ack(&mut self, id: u64, result: Result<(), String>, invalid: bool) {
        if let Some(peer) = self.peer.as_mut() {
            peer.ack(id, result, invalid);
        }
    }

    /// A register acceptor's reply frame for this peer connection.
    pub fn peer_register_reply(&mut self, frame: &[u8]) {
        if let Some(peer) = self.peer.as_mut() {
            peer.register_reply(frame);
        }
    }

    /// Bytes the read buffer may hold: a whole request at its limits, or
    /// less for a RESP connection that has not authenticated yet.
    fn read_limit(&self, ctx: &NetContext) -> usize {
        if self.resp_awaits_auth(ctx) {
            return crate::net::resp::decode::UNAUTHENTICATED_READ_BYTES_MAX;
        }
        let body = largest_body_bytes_max(Bounds::of(&ctx.config)) as usize;
        ctx.config.header_bytes_max + body + READ_CHUNK_BYTES
    }

    /// Reads into `scratch` (the thread's reusable buffer) and appends what
    /// arrived, so no per-read buffer is allocated or zeroed.
    fn read(&mut self, ctx: &NetContext, scratch: &mut [u8], peer_closed: bool) {
        if self.read_closed || self.close_after {
            return;
        }
        let limit = self.read_limit(ctx);
        self.read_paused = true;
        while self.rbuf.len() < limit && self.slots.len() < SLOTS_MAX {
            let room = (limit - self.rbuf.len()).min(scratch.len());
            match self.stream.read(&mut scratch[..room]) {
                Ok(0) => {
                    self.read_closed = true;
                    self.read_paused = false;
                    break;
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&scratch[..n]);
                    self.last_active = ctx.now.get();
                    if self.request_started.is_none() {
                        self.request_started = Some(self.last_active);
                    }
                    if n < room && !peer_closed {
                        // A short read drained the socket: skip the extra
                        // read that would only say WouldBlock. (When the
                        // event also said the peer closed, read on to see
                        // the end: edge-triggered polling will not repeat it.)
                        self.read_paused = false;
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.read_paused = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.read_closed = true;
                    self.read_paused = false;
                    break;
                }
            }
        }
    }

    /// Parses and executes every complete request in the read buffer.
    fn parse(&mut self, ctx: &NetContext, token: usize, replicated: &mut Vec<Request>) {
        if self.resp.is_some() {
            return self.parse_resp(ctx, token, replicated);
        }
        // The head's parser admits the largest route's body; the route's
        // own bound is checked once the head is routed (`body_gate`).
        let bounds = Bounds::of(&ctx.config);
        let limits = Limits {
            header_bytes_max: ctx.config.header_bytes_max,
            body_bytes_max: largest_body_bytes_max(bounds),
        };
        let (mut consumed, mut waits) = (0, false);
        // Taken out while requests execute, so a body is lent to them
        // without a copy; nothing below reads `self.rbuf`.
        let rbuf = std::mem::take(&mut self.rbuf);
        while !self.close_after && self.upgrading.is_none() && self.slots.len() < SLOTS_MAX {
            let buf = &rbuf[consumed..];
            if self.pending.is_none() {
                if buf.is_empty() {
                    break;
                }
                match parse_head(buf, limits) {
                    Parsed::Partial => break,
                    Parsed::Error(e) => {
                        if names_head(buf) {
                            self.note_head();
                        }
                        self.push_error(
                            ctx,
                            Route::Other,
                            &e,
                            Persist::Close,
                            allow_for(b""),
                            ctx.now.get(),
                        );
                        self.close_after = true;
                        break;
                    }
                    Parsed::Head(head) => {
                        if head.head_only {
                            self.note_head();
                        }
                        let (route, action) = route(&head, ctx.route_config.get());
                        // Read-your-writes: parsed again once they are answered.
                        waits = !self.http_may_serve(ctx, &action);
                        if waits {
                            break;
                        }
                        let started = self.request_started.unwrap_or_else(|| ctx.now.get());
                        if let Action::Error(e) = &action
                            && head.expect_continue
                            && (head.content_length > 0 || head.chunked)
                        {
                            // Refuse before the client sends the body it holds back;
                            // the body will not follow, so the stream ends here.
                            let e = HttpError::close(e.status, e.message.clone());
                            self.push_error(
                                ctx,
                                route,
                                &e,
                                Persist::Close,
                                allow_for(head.path),
                                started,
                            );
                            self.close_after = true;
                            break;
                        }
                        if let Some(e) = too_large(&action, bounds, head.content_length) {
                            let allow = allow_for(head.path);
                            self.push_error(ctx, route, &e, Persist::Close, allow, started);
                            self.close_after = true;
                            break;
                        }
                        let credential = credential(&ctx.shared.auth, head.authorization);
                        let auth = &ctx.shared.auth;
                        let tokens_on = auth.tokens.is_some();
                        // A chunked body declares no size: as unbounded.
                        let declared = if head.chunked {
                            u64::MAX
                        } else {
                            head.content_length
                        };
                        if let Some(refusal) = refuse_body(tokens_on, &credential, route, declared)
                        {
                            // A stranger's body is never buffered: refused on
                            // its head, and the stream ends here.
                            auth.metrics.client_refused(refusal.why);
                            let e = HttpError::close(Status::Unauthorized, refusal_text());
                            let allow = allow_for(head.path);
                            self.push_error(ctx, route, &e, Persist::Close, allow, started);
                            self.close_after = true;
                            break;
                        }
                        let chunked_max = body_bytes_max(&action, bounds);
                        self.pending = Some(PendingRequest {
                            head: HeadFacts::of(&head),
                            route,
                            action,
                            started,
                            credential,
                            chunked: head
                                .chunked
                                .then(|| Box::new(ChunkedBody::new(chunked_max))),
                        });
                        self.continued = false;
                    }
                }
            }
            match self.chunked_step(ctx, buf, &mut consumed) {
                BodyStep::NotChunked => {}
                BodyStep::Wait | BodyStep::Refused => break,
                BodyStep::Ready(body) => {
                    let Some(request) = self.pending.take() else {
                        break;
                    };
                    self.request_started = None;
                    self.execute(ctx, token, replicated, request, &body);
                    continue;
                }
            }
            let Some(PendingRequest { head, .. }) = self.pending.as_ref() else {
                break;
            };
            let total = head.head_bytes + head.content_length as usize;
            if buf.len() < total {
                break; // `flush` sends 100 Continue if the client waits for it
            }
            let Some(request) = self.pending.take() else {
                break;
            };
            let body = &buf[request.head.head_bytes..total];
            consumed += total;
            self.request_started = None;
            self.execute(ctx, token, replicated, request, body);
        }
        debug_assert!(self.rbuf.is_empty(), "requests never read or fill rbuf");
        self.rbuf = rbuf;
        self.parse_paused = (self.slots.len() >= SLOTS_MAX || waits) && self.rbuf.len() > consumed;
        if consumed > 0 {
            self.rbuf.drain(..consumed);
            if !self.rbuf.is_empty() && self.request_started.is_none() {
                self.request_started = Some(ctx.now.get());
            }
        }
        if self.read_closed
            && (self.pending.is_some() || !self.rbuf.is_empty())
            && !self.close_after
            && self.upgrading.is_none()
            && !waits
        {
            // The peer closed in the middle of a request (head or body):
            // nothing can answer it; answer what came before, then close.
            self.pending = None;
            self.rbuf.clear();
            self.request_started = None;
            self.close_after = true;
        }
    }

    fn push_error(
        &mut self,
        ctx: &NetContext,
        route: Route,
        e: &HttpError,
        persist: Persist,
        allow: &'static str,
        started: Instant,
    ) {
        let persist = if e.close { Persist::Close } else { persist };
        self.push_answer(ctx, route, persist, started, &from_http_error(e, allow));
    }

    /// Answers the request being executed with `answer`.
    fn push_answer(
        &mut self,
        ctx: &NetContext,
        route: Route,
        persist: Persist,
        started: Instant,
        answer: &Answer,
    ) {
        let mut status = Status::Ok;
        self.answer(|out| status = render(out, answer, persist));
        ctx.shared.metrics.record(route, status, started);
    }

    /// Executes one complete request: an HTTP error or upgrade here, any
    /// other through the dispatcher.
    fn execute(
        &mut self,
        ctx: &NetContext,
        token: usize,
        replicated: &mut Vec<Request>,
        request: PendingRequest,
        body: &[u8],
    ) {
        let PendingRequest {
            head,
            route,
            action,
            started,
            credential,
            ..
        } = request;
        let persist = head.persist;
        self.close_after |= persist == Persist::Close;
        if matches!(action, Action::PeerUpgrade | Action::SyncUpgrade)
            && let Some(why) = crate::tls::refuse_upgrade(ctx.shared.tls.as_ref(), &self.stream)
        {
            // Refused before any frame is read, logged and counted like a
            // missing proof of the secret.
            let remote = self.client_text("?");
            tracing::warn!(remote = %remote, "peer upgrade refused: {why}");
            let metrics = &ctx.shared.auth.metrics;
            metrics.peer_refused(crate::auth::metrics::PeerRefusal::NoCertificate);
            self.close_after = true;
            let e = HttpError::close(Status::Forbidden, why);
            return self.push_error(ctx, route, &e, Persist::Close, head.allow, started);
        }
        if action.has_preconditions() {
            let at = (route, persist, started);
            return self.conditional(ctx, (token, replicated), action, body, at, &credential);
        }
        let command = match action {
            Action::Error(e) => {
                if e.close {
                    self.close_after = true;
                }
                return self.push_error(ctx, route, &e, persist, head.allow, started);
            }
            Action::PeerUpgrade => {
                let protocol = crate::peer::handshake::PEER_PROTOCOL;
                let Some(response) = self.peer_gate(ctx, route, started, protocol, &credential)
                else {
                    return;
                };
                if let Some(why) = super::fence::refuse(ctx, head.layout_version) {
                    self.close_after = true;
                    let e = HttpError::close(Status::Conflict, why);
                    return self.push_error(ctx, route, &e, Persist::Close, head.allow, started);
                }
                let upgrade = Upgrade::Peer(head.layout_version);
                return self.push_upgrade(ctx, route, started, response, upgrade);
            }
            Action::SyncUpgrade => match ctx.shared.antientropy.try_reserve() {
                Some(ticket) => {
                    let protocol = crate::peer::handshake::SYNC_PROTOCOL;
                    let Some(response) = self.peer_gate(ctx, route, started, protocol, &credential)
                    else {
                        return; // the ticket is dropped: its place is free again
                    };
                    let upgrade = Upgrade::Sync(ticket);
                    return self.push_upgrade(ctx, route, started, response, upgrade);
                }
                None => {
                    let busy = answer::busy("anti-entropy busy");
                    return self.push_answer(ctx, route, persist, started, &busy);
                }
            },
            Action::Get { key, ack, from, .. } => Command::get(key.into(), ack, from),
            Action::Put {
                key,
                ack,
                from,
                ttl_ms,
                ..
            } => Command::Write {
                key: key.into(),
                value: Some(body),
                ack,
                from,
                expiry: crate::ttl::Expiry::from_ttl_ms(ttl_ms),
            },
            Action::Delete { key, ack, from, .. } => Command::Write {
                key: key.into(),
                value: None,
                ack,
                from,
                expiry: crate::ttl::Expiry::Never,
            },
            Action::Range { start, end } => Command::Range { start, end },
            Action::ClusterRange {
                start,
                end,
                ack,
                from,
            } => Command::ClusterRange(crate::range::Plan {
                start,
                end,
                ack,
                from,
            }),
            Action::InternalRange { .. }
            | Action::InternalLayout
            | Action::InternalHotKeys
            | Action::InternalRecent
            | Action::InternalSlowlog { .. }
                if !self.range_gate(ctx, route, started, &credential, peer_protocol(&action)) =>
            {
                return;
            }
            Action::InternalRange { start, end } => Command::InternalRange { start, end },
            Action::Status => Command::Status,
            Action::Livez => Command::Livez,
            Action::Readyz => Command::Readyz,
            Action::ClusterHealth => Command::ClusterHealth,
            Action::Cluster => Command::Cluster,
            Action::Layout => Command::Layout,
            Action::LayoutChange { version, change } => Command::LayoutChange { version, change },
            Action::LayoutPlan { change } => Command::LayoutPlan { change },
            Action::InternalLayout => Command::InternalLayout(body),
            Action::RepairStart => Command::RepairStart,
            Action::RepairStatus => Command::RepairStatus,
            Action::Metrics => Command::Metrics,
            Action::Slowlog(op) => Command::Slowlog(op),
            Action::Backup(ask) => Command::Backup(ask, body),
            Action::HotKeys { limit, cluster } => Command::HotKeys { limit, cluster },
            Action::InternalHotKeys => Command::InternalHotKeys,
            Action::InternalRecent => Command::InternalRecent,
            Action::Ui(asset) => Command::Ui(asset),
            Action::Recent { cluster } => Command::Recent { cluster },
            Action::ClusterSlowlog { limit } => Command::ClusterSlowlog { limit },
            Action::InternalSlowlog { limit } => Command::InternalSlowlog { limit },
        };
        if let Err(refusal) = admit(&ctx.shared.auth, &credential, &command) {
            return self.push_answer(ctx, route, persist, started, &refusal);
        }
        let reply_to = ReplyTo {
            token,
            generation: self.generation,
            slot: self.base_slot + self.slots.len() as u64,
        };
        let facts = slow_note::http_facts(ctx, route, &command);
        match dispatch(ctx, replicated, reply_to, command) {
            Dispatched::Now(answer) => {
                self.push_answer(ctx, route, persist, started, &answer);
                answer::give_back(answer, &ctx.value_spare);
                let us = started.elapsed().as_micros() as u64;
                self.note_slow(ctx, (Protocol::Http, &facts), started, us, None);
            }
            Dispatched::Later(awaited) => self.push_slot(Slot::Waiting {
                awaited,
                route,
                persist,
                started,
                facts,
            }),
            Dispatched::Stream(iter, encoding) => self.push_slot(Slot::Stream {
                iter,
                encoding,
                head_written: false,
                persist,
                started,
            }),
            Dispatched::Job(job) => self.push_slot(Slot::Job {
                job,
                route,
                persist,
                started,
            }),
            Dispatched::Feed(feed) => self.push_slot(Slot::Feed {
                feed,
                head_written: false,
                starved: false,
                persist,
                started,
            }),
        }
    }

    /// Fills a replicated request's slot with the coordinator's verdict
    /// (`Err`: refused before it started, 503).
    pub fn decide(
        &mut self,
        ctx: &NetContext,
        slot: u64,
        verdict: Result<Decision, String>,
        marks: Option<StageMarks>,
    ) {
        self.fill(ctx, slot, marks, |awaited| {
            answer::decided(awaited, verdict)
        });
    }

    /// Fills a waiting slot with the engine's answer.
    pub fn complete(
        &mut self,
        ctx: &NetContext,
        slot: u64,
        result: Result<(), String>,
        invalid: bool,
    ) {
        self.fill(ctx, slot, None, |awaited| {
            answer::written(awaited, result, invalid, ctx.db.out_of_space())
        });
    }

    /// Fills waiting slot `slot` with the answer `answer_for` gives for what
    /// it waits for; a slot no longer waiting (the connection moved on) is left.
    fn fill(
        &mut self,
        ctx: &NetContext,
        slot: u64,
        marks: Option<StageMarks>,
        answer_for: impl FnOnce(Awaited) -> Answer,
    ) {
        if self.resp.is_some() {
            return self.fill_part(ctx, slot, marks, answer_for);
        }
        let Some(index) = slot.checked_sub(self.base_slot) else {
            return;
        };
        let index = index as usize;
        let (awaited, route, persist, started, facts) = match self.slots.get(index) {
            Some(&Slot::Waiting {
                awaited,
                route,
                persist,
                started,
                facts,
            }) => (awaited, route, persist, started, facts),
            Some(Slot::Conditional(_)) => {
                return self.fill_conditional(ctx, index, marks, answer_for);
            }
            _ => return,
        };
        let answer = answer_for(awaited);
        let status = self.fill_with(index, |out| render(out, &answer, persist));
        let us = ctx.shared.metrics.record(route, status, started);
        self.note_slow(ctx, (Protocol::Http, &facts), started, us, marks);
    }

    /// Queues `slot` behind the answers owed before it.
    fn push_slot(&mut self, slot: Slot) {
        debug_assert!(self.slots.len() < SLOTS_MAX, "a slot past SLOTS_MAX");
        self.slots.push_back(slot);
    }

    /// Takes the front slot, whose answer is out (or going out now).
    fn pop_slot(&mut self) -> Option<Slot> {
        debug_assert!(self.slots.len() <= SLOTS_MAX, "more slots than SLOTS_MAX");
        let slot = self.slots.pop_front()?;
        self.base_slot += 1;
        Some(slot)
    }

    /// True while the output buffer holds less than its bound: an answer
    /// may go straight into it.
    fn out_has_room(&self) -> bool {
        self.out.len() - self.out_pos < STREAM_BUFFER_BYTES
    }

    /// The output buffer, emptied first if everything in it was written.
    fn out_for_append(&mut self) -> &mut Vec<u8> {
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        &mut self.out
    }

    /// Answers the request being executed (the next slot id). When nothing
    /// is owed before it, the answer is appended to the output buffer at
    /// once (no slot, no buffer of its own); otherwise it waits in a
    /// [`Slot::Ready`] for the answers before it.
    fn answer(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let head_only = self.heads.is_head(self.base_slot + self.slots.len() as u64);
        if self.slots.is_empty() && self.out_has_room() {
            let out = self.out_for_append();
            let start = out.len();
            write(out);
            if head_only {
                strip_body(out, start);
            }
            self.base_slot += 1;
        } else {
            let mut bytes = Vec::new();
            write(&mut bytes);
            if head_only {
                strip_body(&mut bytes, 0);
            }
            self.push_slot(Slot::Ready(bytes));
        }
    }

    /// Fills waiting slot `index` with the answer `write` appends (and
    /// returns its status). The front slot's answer goes straight to the
    /// output buffer (the answers after it follow in `fill_output`).
    fn fill_with(&mut self, index: usize, write: impl FnOnce(&mut Vec<u8>) -> Status) -> Status {
        debug_assert!(matches!(
            self.slots.get(index),
            Some(Slot::Waiting { .. } | Slot::Gather(_) | Slot::Conditional(_))
        ));
        let head_only = self.heads.is_head(self.base_slot + index as u64);
        if index == 0 && self.out_has_room() {
            let out = self.out_for_append();
            let start = out.len();
            let status = write(out);
            if head_only {
                strip_body(out, start);
            }
            self.pop_slot();
            status
        } else {
            let mut bytes = Vec::new();
            let status = write(&mut bytes);
            if head_only {
                strip_body(&mut bytes, 0);
            }
            if let Some(entry) = self.slots.get_mut(index) {
                *entry = Slot::Ready(bytes);
            }
            status
        }
    }

    /// Moves finished answers to the output buffer in order and writes to the socket.
    pub fn flush(&mut self, ctx: &NetContext) -> Next {
        if let Some(peer) = self.peer.as_mut() {
            return peer.flush(&mut self.stream, ctx);
        }
        loop {
            self.maybe_continue();
            self.fill_output(ctx);
            match self.write_out(ctx.now.get()) {
                Ok(true) => {}
                Ok(false) => return Next::Keep, // socket full; wait for writable
                Err(_) => return Next::Close,
            }
            // Output drained: anything more to produce right now?
            let more = matches!(
                self.slots.front(),
                Some(Slot::Ready(_))
                    | Some(Slot::Stream { .. })
                    | Some(Slot::Feed { starved: false, .. })
            );
            if !more {
                break;
            }
        }
        let owed = !self.slots.is_empty() || self.pending.is_some();
        if self.upgrading.is_some() && !owed && self.out_pos >= self.out.len() {
            self.request_started = None;
            match self.upgrading.take() {
                Some(Upgrade::Sync(ticket)) => {
                    // The 101 is out: the sync thread takes the socket.
                    self.sync_ticket = Some(ticket);
                    return Next::HandOff;
                }
                Some(Upgrade::Peer(layout)) => {
                    // The 101 is out: from here on the bytes are peer frames.
                    let client = self.client_text("unknown");
                    if let Err(e) = crate::peer::keepalive::enable(&self.stream) {
                        tracing::warn!(%client, error = %e, "peer connection: keepalive not set");
                    }
                    self.peer = Some(Box::new(PeerServer::new(
                        std::mem::take(&mut self.rbuf),
                        client,
                        layout,
                    )));
                    return Next::Keep;
                }
                None => {}
            }
        }
        if self.close_after && !owed {
            return Next::Close;
        }
        if self.read_closed && !owed && self.rbuf.is_empty() {
            return Next::Close;
        }
        Next::Keep
    }

    /// Sends `100 Continue` for a head waiting for its body once nothing is before it.
    fn maybe_continue(&mut self) {
        if let Some(PendingRequest { head, .. }) = &self.pending
            && head.expect_continue
            && !self.continued
            && self.slots.is_empty()
        {
            self.continued = true;
            self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
    }

    fn fill_output(&mut self, ctx: &NetContext) {
        while self.out.len() - self.out_pos < STREAM_BUFFER_BYTES {
            match self.slots.front_mut() {
                Some(Slot::Ready(_)) => {
                    if let Some(Slot::Ready(bytes)) = self.pop_slot() {
                        if self.out_pos == self.out.len() {
                            self.out.clear();
                            self.out_pos = 0;
                        }
                        self.out.extend_from_slice(&bytes);
                    }
                }
                Some(Slot::Stream { .. }) => {
                    if !self.fill_from_stream(ctx) {
                        return;
                    }
                }
                Some(Slot::Feed { .. }) => {
                    if !self.fill_from_feed(ctx) {
                        return;
                    }
                }
                Some(Slot::Scan(_)) => {
                    if !self.fill_from_scan() {
                        return;
                    }
                }
                Some(Slot::Count(_)) => {
                    if !self.fill_from_count() {
                        return;
                    }
                }
                Some(Slot::Job { .. }) => {
                    if !self.fill_from_job(ctx) {
                        return;
                    }
                }
                _ => return,
            }
        }
    }

    /// Writes buffered output; `Ok(true)` when all of it went out. `now`
    /// is the loop's clock reading ([`NetContext::now`]).
    fn write_out(&mut self, now: Instant) -> io::Result<bool> {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
                Ok(n) => {
                    self.out_pos += n;
                    self.last_active = now;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // TLS: records the socket did not take yet go out first.
        match self.stream.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
        self.out.clear();
        self.out_pos = 0;
        buffer_trim::trim(&mut self.out);
        Ok(true)
    }

    /// Answers 408 to a request that took too long, and closes after it.
    pub fn time_out_request(&mut self, ctx: &NetContext) {
        if self.close_after {
            return;
        }
        if self.resp.is_some() {
            return self.time_out_resp();
        }
        let e = HttpError::close(Status::RequestTimeout, "request not received in time");
        if names_head(&self.rbuf) {
            self.note_head();
        }
        self.pending = None;
        self.rbuf.clear();
        self.request_started = None;
        self.push_error(
            ctx,
            Route::Other,
            &e,
            Persist::Close,
            allow_for(b""),
            ctx.now.get(),
        );
        self.close_after = true;
    }
}
