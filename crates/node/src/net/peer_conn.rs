//! The server side of the peer protocol: an HTTP connection a peer upgraded
//! (the client side is [`crate::peer::link`]).
//!
//! Frames are decoded as they arrive. A read is answered on the spot from
//! the engine's read view; a write goes to the engine with the loop
//! iteration's other writes (one hand-off to tx) and is acknowledged when
//! its completion comes back. Answers are appended to one buffer and
//! written once per loop iteration, so acknowledgements leave in batches.
//!
//! # Invariants
//! - Reading pauses while [`PEER_WRITES_PENDING_MAX`] writes wait for the
//!   engine, so a peer cannot queue unbounded work here.
//! - A frame that does not decode closes the connection (the stream can no
//!   longer be framed); the peer's requests then fail on its side.

use super::conn::Next;
use crate::peer::frame::{self, Applied, Message, ReplicaError, ReplicaErrorKind, Stamped};
use crate::peer::refusal::refuse_version;
use crate::replication::local_write;
use crate::state::{NetContext, Target};
use crate::tls::transport::Transport;
use std::io::{self, Read, Write};

/// Writes of one peer connection waiting for the engine before reading pauses.
pub const PEER_WRITES_PENDING_MAX: usize = 16_384;
/// Unsent answer bytes before reading pauses (reads are answered on the spot:
/// without this a peer that never reads could make the node buffer without end).
pub const PEER_OUT_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Bytes buffered from a peer before reading pauses (a frame may be this large).
const READ_BUFFER_BYTES_MAX: usize = frame::FRAME_HEADER_BYTES + frame::FRAME_BODY_BYTES_MAX;

/// Rounds of read, serve, flush per readiness event when the output bound paused reading.
const RESUME_ROUNDS_MAX: usize = 8;

/// Why a peer's write is refused, if it is: the node's own key and value
/// limits apply to replicas too, and a timestamp far ahead of this node's
/// clock is refused (see `hlc::PEER_CLOCK_AHEAD_MS_MAX`).
fn refuse_write(ctx: &NetContext, key: &[u8], version: &Stamped) -> Option<String> {
    refuse_version(&ctx.config, key, version)
}

/// An upgraded connection's peer-protocol state.
pub struct PeerServer {
    rbuf: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    frames_queued: u64,
    writes_pending: usize,
    /// Register Asks handed to the acceptor and not answered yet
    /// (bounded with the writes: [`PEER_WRITES_PENDING_MAX`]).
    register_pending: usize,
    closing: bool,
    /// The connecting side's address, for the log.
    client: String,
    /// The layout version the peer named in its upgrade (`super::fence`).
    layout: Option<u64>,
}

impl PeerServer {
    /// Starts with the bytes that arrived after the upgrade request from
    /// `client` (its address, named in log events).
    pub fn new(leftover: Vec<u8>, client: String, layout: Option<u64>) -> Self {
        PeerServer {
            layout,
            rbuf: leftover,
            out: Vec::new(),
            out_pos: 0,
            frames_queued: 0,
            writes_pending: 0,
            register_pending: 0,
            closing: false,
            client,
        }
    }

    /// Nothing in progress.
    pub fn is_idle(&self) -> bool {
        self.writes_pending == 0
            && self.register_pending == 0
            && self.out_pos >= self.out.len()
            && self.rbuf.is_empty()
    }

    /// Reads, serves complete frames, writes answers.
    pub fn on_ready(
        &mut self,
        stream: &mut Transport,
        ctx: &NetContext,
        token: usize,
        generation: u64,
        scratch: &mut [u8],
    ) -> Next {
        // Reading stops at the output bound; once a flush drains it, go on
        // (edge-triggered polling will not report the unread bytes again).
        for _ in 0..RESUME_ROUNDS_MAX {
            let out_was_full = self.out_full();
            let next = self.read_serve_flush(stream, ctx, token, generation, scratch);
            if next == Next::Close || !out_was_full || self.out_full() {
                return next;
            }
        }
        Next::Keep
    }

    fn out_full(&self) -> bool {
        self.out.len() - self.out_pos >= PEER_OUT_BYTES_MAX
    }

    fn read_serve_flush(
        &mut self,
        stream: &mut Transport,
        ctx: &NetContext,
        token: usize,
        generation: u64,
        scratch: &mut [u8],
    ) -> Next {
        let mut eof = false;
        while !self.closing
            && !self.out_full()
            && self.rbuf.len() < READ_BUFFER_BYTES_MAX
            && self.pending() < PEER_WRITES_PENDING_MAX
        {
            match stream.read(scratch) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => self.rbuf.extend_from_slice(&scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        self.serve(ctx, token, generation);
        if eof {
            // The peer is gone: nobody will read acknowledgements.
            return Next::Close;
        }
        self.flush(stream, ctx)
    }

    fn serve(&mut self, ctx: &NetContext, token: usize, generation: u64) {
        let mut consumed = 0;
        // The thread's placement does not change within one call.
        let known = ctx.placement().version();
        while !self.closing && !self.out_full() && self.pending() < PEER_WRITES_PENDING_MAX {
            match self.register_frame(ctx, token, generation, consumed, known) {
                Some(Ok(n)) => {
                    consumed += n;
                    continue;
                }
                Some(Err(())) => break,
                None => {}
            }
            let msg = match frame::decode(&self.rbuf[consumed..]) {
                Ok(Some((msg, n))) => {
                    consumed += n;
                    msg
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(
                        client = %self.client,
                        error = %e,
                        "closing a peer connection: bad frame"
                    );
                    self.closing = true;
                    break;
                }
            };
            if let Some(why) = super::fence::stale(self.layout, known) {
                // The fence: answered, then the connection closes (the
                // peer dials again with the version it learns).
                let error = ReplicaError::new(ReplicaErrorKind::StaleLayout, why);
                match msg {
                    Message::Write { id, .. } => self.push(&Message::WriteAck {
                        id,
                        result: Err(error),
                    }),
                    Message::Read { id, .. } => self.push(&Message::ReadReply {
                        id,
                        result: Err(error),
                    }),
                    Message::WriteAck { .. } | Message::ReadReply { .. } => {}
                }
                self.closing = true;
                break;
            }
            match msg {
                Message::Write { id, key, version } => {
                    if let Some(why) = refuse_write(ctx, &key, &version) {
                        let result = Err(ReplicaError::new(ReplicaErrorKind::Invalid, why));
                        self.push(&Message::WriteAck { id, result });
                        continue;
                    }
                    ctx.shared.hlc.observe(version.ts);
                    // Refilling: kept, but not counted (crate::refill).
                    if ctx.shared.refill.active() {
                        local_write(ctx, &key, &version, Target::Nobody);
                        let result = Err(ReplicaError::new(
                            ReplicaErrorKind::Unavailable,
                            crate::refill::WRITE_NOT_COUNTED,
                        ));
                        self.push(&Message::WriteAck { id, result });
                        continue;
                    }
                    // A version older than the one held is not stored: the
                    // coordinator learns the newer timestamp and re-stamps
                    // (docs/ARCHITECTURE.md, "Re-stamping"). The check reads
                    // the engine's current view, so it sees every write this
                    // replica acknowledged before; a write still in flight
                    // here is concurrent with this one and may go either way.
                    // "Older" is the one tie rule's (crate::version_order):
                    // under the same timestamp with other contents (a
                    // timestamp issued twice, a bit flip) the rule's loser
                    // is refused and re-stamped above, its winner stored,
                    // so a repair or hint carrying the winner converges.
                    match ctx.db.get(&key).map(|held| held.map(Stamped::from_entry)) {
                        Ok(Some(held)) if held.newer_than(&version) => {
                            ctx.shared
                                .metrics
                                .peer_writes_superseded
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let result = Ok(Applied::HoldsNewer { ts: held.ts });
                            self.push(&Message::WriteAck { id, result });
                            continue;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            let result = Err(ReplicaError::new(
                                ReplicaErrorKind::Failed,
                                format!("read before write failed: {e}"),
                            ));
                            self.push(&Message::WriteAck { id, result });
                            continue;
                        }
                    }
                    self.writes_pending += 1;
                    let target = Target::Peer {
                        token,
                        generation,
                        id,
                    };
                    local_write(ctx, &key, &version, target);
                }
                Message::Read { id, .. } if ctx.shared.refill.active() => {
                    let result = Err(ReplicaError::new(
                        ReplicaErrorKind::Unavailable,
                        crate::refill::REFUSAL,
                    ));
                    self.push(&Message::ReadReply { id, result });
                }
                Message::Read { id, key } => {
                    let result = match ctx.db.get(&key) {
                        Ok(entry) => Ok(entry.map(Stamped::from_entry)),
                        Err(e) => Err(ReplicaError::new(
                            ReplicaErrorKind::Failed,
                            format!("read failed: {e}"),
                        )),
                    };
                    self.push(&Message::ReadReply { id, result });
                }
                Message::WriteAck { .. } | Message::ReadReply { .. } => {
                    tracing::warn!(
                        client = %self.client,
                        "closing a peer connection: it sent an answer as a request"
                    );
                    self.closing = true;
                }
            }
        }
        self.rbuf.drain(..consumed);
    }

    /// Writes and register Asks waiting for this node.
    fn pending(&self) -> usize {
        self.writes_pending + self.register_pending
    }

    /// A register frame at `self.rbuf[at..]` (kind byte
    /// `wire::KIND_REGISTER_ASK`) handed to the acceptor: `None` when the
    /// next frame is not one (or not whole yet: `Some(Err)` then too, and
    /// reading goes on), `Some(Ok(bytes))` consumed, `Some(Err(()))` stop
    /// (incomplete, or the connection closes: a bad frame, the fence).
    fn register_frame(
        &mut self,
        ctx: &NetContext,
        token: usize,
        generation: u64,
        at: usize,
        known: u64,
    ) -> Option<Result<usize, ()>> {
        use crate::replication::register::wire;
        let buf = &self.rbuf[at..];
        let kind = *buf.get(crate::peer::framing::FRAME_HEADER_BYTES)?;
        if kind != wire::KIND_REGISTER_ASK && kind != wire::KIND_REGISTER_REPLY {
            return None;
        }
        let n = match crate::peer::framing::split(buf, wire::REGISTER_BODY_BYTES_MAX) {
            Ok(Some((_, n))) => n,
            Ok(None) => return Some(Err(())),
            Err(e) => {
                tracing::warn!(client = %self.client, error = ?e, "closing a peer connection: bad register frame");
                self.closing = true;
                return Some(Err(()));
            }
        };
        if let Some(why) = super::fence::stale(self.layout, known) {
            // The fence: no register step on a connection that names an
            // older layout; the proposer's link fails what it sent.
            tracing::debug!(client = %self.client, why, "closing a peer connection: register Ask under an older layout");
            self.closing = true;
            return Some(Err(()));
        }
        let Some(port) = ctx.shared.register.as_ref() else {
            tracing::warn!(client = %self.client, "closing a peer connection: register Ask and no acceptor");
            self.closing = true;
            return Some(Err(()));
        };
        let to = crate::state::RegisterTo::Peer { token, generation };
        match port.ask(ctx, to, &self.rbuf[at..at + n]) {
            Ok(()) => {
                self.register_pending += 1;
                Some(Ok(n))
            }
            Err(why) => {
                tracing::warn!(client = %self.client, why, "closing a peer connection: bad register frame");
                self.closing = true;
                Some(Err(()))
            }
        }
    }

    /// The acceptor's reply to a register Ask: queued as it came (the
    /// Reply frame's bytes).
    pub fn register_reply(&mut self, frame: &[u8]) {
        self.register_pending = self.register_pending.saturating_sub(1);
        self.out.extend_from_slice(frame);
        self.frames_queued += 1;
    }

    fn push(&mut self, msg: &Message) {
        debug_assert!(self.out.len() - self.out_pos <= PEER_OUT_BYTES_MAX + READ_BUFFER_BYTES_MAX);
        frame::encode(msg, &mut self.out);
        self.frames_queued += 1;
    }

    /// A write finished in the engine: queue its acknowledgement.
    pub fn ack(&mut self, id: u64, result: Result<(), String>, invalid: bool) {
        self.writes_pending = self.writes_pending.saturating_sub(1);
        let result = result.map(|()| Applied::Stored).map_err(|message| {
            let kind = if invalid {
                ReplicaErrorKind::Invalid
            } else {
                ReplicaErrorKind::Failed
            };
            // Cut at the frame's message bound.
            ReplicaError::new(kind, message)
        });
        self.push(&Message::WriteAck { id, result });
    }

    /// Writes queued answers (one batch).
    pub fn flush(&mut self, stream: &mut Transport, ctx: &NetContext) -> Next {
        if self.frames_queued > 0 {
            ctx.shared
                .metrics
                .peer_reply_batch_frames
                .record(self.frames_queued);
            self.frames_queued = 0;
        }
        while self.out_pos < self.out.len() {
            match stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Next::Close,
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        // TLS: records the socket did not take yet go out first.
        match stream.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
            Err(_) => return Next::Close,
        }
        self.out.clear();
        self.out_pos = 0;
        if self.closing {
            return Next::Close;
        }
        Next::Keep
    }

    /// Reading paused at the pending-writes bound and can resume.
    pub fn can_resume(&self) -> bool {
        !self.closing && self.pending() < PEER_WRITES_PENDING_MAX / 2 && !self.rbuf.is_empty()
    }
}
