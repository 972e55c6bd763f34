//! The client side of the peer protocol: one network thread's connection
//! to one other node.
//!
//! A link connects lazily (on the first request, or when hints wait),
//! upgrades the HTTP connection (`handshake`), then pipelines frames:
//! requests are encoded into one buffer as they are made and written with
//! one call per loop iteration ([`PeerLink::flush`]), so a batch of requests
//! costs one `write`; answers are matched to requests by id.
//!
//! # Failure
//! A refused connect, a lost connection, a bad answer or a silent peer
//! fails every request in flight at once (the coordinator decides 504 or
//! success from the other replicas) and puts the link in back-off: until the
//! next try, requests to the node fail immediately (a client request may
//! retry a refused connect every 50 ms, so a node that comes back is used
//! at once). Nothing ever blocks on a dead peer. Each request carries its coordinator's deadline; [`PeerLink::tick`]
//! fails the expired ones.
//!
//! # Invariants
//! - At most `inflight_max` requests in flight; a request over it fails at once.
//! - Frames are written only once the 101 arrived; bytes queued before are
//!   dropped with their requests if the connect fails.

use super::auth_dialer::{Dialer, Step, answer_status, fresh_nonce};
use super::frame::{self, Applied, Message, ReplicaErrorKind, Stamped};
use crate::tls::transport::Transport;
use ataman_engine::metrics::Histogram;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a link waits before the first reconnect after a failure.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(50);
/// The longest wait between reconnects.
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Bytes queued for one peer before new requests to it fail at once.
pub const LINK_OUT_BYTES_MAX: usize = 64 * 1024 * 1024;
/// A connect plus upgrade that takes longer fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Written bytes at the front of the output buffer that are dropped when a write would block.
const OUT_COMPACT_BYTES: usize = 1024 * 1024;
/// Bytes read per call.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// A link's state as `/v0/cluster` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LinkState {
    /// This node.
    Myself = 0,
    /// Connected and upgraded.
    Up = 1,
    /// Connecting or waiting for the 101.
    Connecting = 2,
    /// Not connected (refused, lost); requests fail at once until the next try.
    Down = 3,
    /// Never connected: nothing needed the node yet.
    Idle = 4,
}

impl LinkState {
    /// The JSON spelling.
    pub fn label(self) -> &'static str {
        match self {
            LinkState::Myself => "self",
            LinkState::Up => "up",
            LinkState::Connecting => "connecting",
            LinkState::Down => "down",
            LinkState::Idle => "idle",
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            0 => LinkState::Myself,
            1 => LinkState::Up,
            2 => LinkState::Connecting,
            4 => LinkState::Idle,
            _ => LinkState::Down,
        }
    }
}

/// One node's link figures as this node sees them.
///
/// # Thread safety
/// Relaxed atomics: every network thread has its own link to the node and
/// updates these; the state is the last one any thread reported.
#[derive(Debug, Default)]
pub struct PeerStatus {
    state: AtomicU8,
    /// Requests sent to the node.
    pub sent: AtomicU64,
    /// Requests to the node that failed (refused, lost, timed out, link full).
    pub failed: AtomicU64,
    /// Writes of frames to the node (each carries a batch of requests).
    pub batches: AtomicU64,
    /// Read repairs sent to the node.
    pub repairs: AtomicU64,
    /// Hints delivered to the node.
    pub hints_delivered: AtomicU64,
    /// Microseconds from queueing a write (a replica's, a repair's or a
    /// hint's) on a link to the node to reading its answer, for writes the
    /// node answered stored or holding newer (failures are in `failed`).
    pub write_us: Histogram,
    /// The same for reads the node answered with its version.
    pub read_us: Histogram,
    /// The address its name resolved to, shared by every thread's link to
    /// the node and resolved again after a link failed (`super::address`).
    pub address: super::address::AddressCache,
}

impl PeerStatus {
    /// A status starting in `state`.
    pub fn new(state: LinkState) -> Self {
        let s = PeerStatus::default();
        s.set_state(state);
        s
    }

    /// Records the link's state.
    pub fn set_state(&self, state: LinkState) {
        self.state.store(state as u8, Ordering::Relaxed);
    }

    /// The link's last reported state.
    pub fn state(&self) -> LinkState {
        LinkState::from_u8(self.state.load(Ordering::Relaxed))
    }
}

/// What a link reads and updates outside itself: the figures of its node
/// shared by every network thread, this node's URL (named in the upgrade
/// request), the node's batch-size histogram, and how long a peer that
/// owes answers may stay silent.
pub struct LinkEnv<'a> {
    /// The linked node's figures and state.
    pub status: &'a PeerStatus,
    /// This node's URL.
    pub self_url: &'a str,
    /// Frames per write to a peer (`/metrics`).
    pub batch_frames: &'a Histogram,
    /// A peer owing answers this long is taken for gone.
    pub silence_timeout: Duration,
    /// The cluster secret to prove and demand in the upgrade, if any.
    pub secret: Option<&'a crate::auth::secret::ClusterSecret>,
    /// TLS (`--tls-ca`): peers are dialled with its client configuration.
    pub tls: Option<&'a crate::tls::NodeTls>,
    /// The layout version this node coordinates with, named in the upgrade
    /// (`handshake::LAYOUT_HEADER`; the fence, `net::fence`).
    pub layout_version: u64,
    /// `--debug-planted-bug peer-address-resolved-once`: a peer's name is
    /// resolved once and its address kept (the old behaviour).
    pub resolve_once: bool,
}

/// Who waits for a request's answer: the link keeps it with the request
/// and hands it back with the outcome (the replication driver's waiter).
pub trait LinkWaiter: Copy {
    /// True for a client request's replica, which may reconnect a link
    /// that is down sooner than background work (hints, repairs) may.
    fn is_client_request(&self) -> bool;
}

/// What a peer replied to one request, or why no reply came (the
/// coordinator's `ReplicaAnswer` of a remote replica is made from it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerReply {
    /// The write is durable on the peer.
    Written,
    /// The peer did not store the write: it holds a newer version stamped so.
    HoldsNewer(u64),
    /// The peer's newest version.
    Read(Option<Stamped>),
    /// Why there is no answer.
    Failed(String),
    /// No answer: the connection closed because this node learned a newer
    /// layout version than it named (the peer would refuse the request on
    /// it, the fence); the request may be sent again, on the next one.
    Redialed(String),
    /// A consensus register Reply: its frame's bytes (decoded above this
    /// layer, `replication::register::wire`).
    Register(Vec<u8>),
    /// No answer: the peer knows a newer layout version than this node
    /// placed the request with (it answered `StaleLayout`, the fence, and
    /// closed the connection). The request may be sent again once this
    /// node places with a newer version ([`PeerLink::fenced`]).
    Fenced(String),
}

/// A request sent and not answered yet.
#[derive(Debug, Clone, Copy)]
struct Inflight<W> {
    waiter: W,
    /// When it was queued.
    sent: Instant,
    /// When its coordinator stops waiting.
    deadline: Instant,
    /// A Read (answered by ReadReply) rather than a Write.
    is_read: bool,
    /// A register Ask (answered by a register Reply).
    is_register: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Down,
    Connecting,
    Handshaking,
    Up,
}

/// One network thread's connection to one peer.
pub struct PeerLink<W> {
    url: String,
    dial: String,
    token: Token,
    inflight_max: usize,
    phase: Phase,
    stream: Option<Transport>,
    /// When the current connect started.
    since: Instant,
    retry_at: Instant,
    /// When the last connect was tried.
    tried_at: Instant,
    /// The link went down because the peer did not answer in time (a black
    /// hole): only the back-off retries it, requests do not.
    down_silent: bool,
    backoff: Duration,
    why_down: String,
    /// The upgrade request, while it is being written.
    hello: Vec<u8>,
    /// The upgrade handshake in progress (`auth_dialer`).
    dialer: Option<Dialer>,
    out: Vec<u8>,
    out_pos: usize,
    frames_queued: u64,
    rbuf: Vec<u8>,
    next_id: u64,
    /// Request id to who waits and when it was sent, expires and whether it is a read.
    inflight: HashMap<u64, Inflight<W>>,
    /// When the link last went down by a failure (refused, lost, silent):
    /// a failure after the peer's name was resolved asks for a fresh
    /// resolution (`super::address::plan`).
    failed_at: Option<Instant>,
    last_heard: Instant,
    /// The layout version the connection's upgrade named.
    dialed_version: u64,
    /// The peer refused this layout version (`StaleLayout`, the fence)
    /// at this instant: the link dials no connection naming it again
    /// ([`PeerLink::fenced`]).
    fenced: Option<(u64, Instant)>,
}

impl<W: LinkWaiter> PeerLink<W> {
    /// A link to the node at `url`, dialling `dial` (`host:port`), not connected yet.
    pub fn new(url: String, dial: String, token: Token, inflight_max: usize) -> Self {
        let now = Instant::now();
        PeerLink {
            url,
            dial,
            token,
            inflight_max,
            phase: Phase::Down,
            stream: None,
            since: now,
            retry_at: now,
            tried_at: now,
            down_silent: false,
            backoff: RECONNECT_BACKOFF_MIN,
            why_down: "not connected yet".into(),
            hello: Vec::new(),
            dialer: None,
            out: Vec::new(),
            out_pos: 0,
            frames_queued: 0,
            rbuf: Vec::new(),
            next_id: 1,
            inflight: HashMap::new(),
            last_heard: now,
            failed_at: None,
            dialed_version: 0,
            fenced: None,
        }
    }

    /// Closes a connection whose upgrade named a layout version older than
    /// `env.layout_version` (this node learned a newer one), answering what
    /// is in flight [`PeerReply::Redialed`] (the driver may send it again),
    /// so that the next request dials again naming the new version: a peer
    /// that knows it would refuse every request on the old connection (the
    /// fence). The reconnect is not delayed.
    pub fn redial_if_older(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) {
        if self.phase == Phase::Down || self.dialed_version >= env.layout_version {
            return;
        }
        let now = Instant::now();
        let why = format!(
            "{}: layout version {} learned, the connection named {}",
            self.url, env.layout_version, self.dialed_version
        );
        self.go_down_answering(env, Some(registry), now, why, PeerReply::Redialed, outcomes);
        self.retry_at = now;
        self.backoff = RECONNECT_BACKOFF_MIN;
        // Not down: the next request dials at once (`/v0/cluster` shows idle).
        env.status.set_state(LinkState::Idle);
    }

    /// Why a request placed with `env.layout_version` must not be sent
    /// now: the peer refused that version (the fence) and would refuse it
    /// again, on this connection or the next. `None` once this node places
    /// with a newer version, or after `env.silence_timeout` (then the
    /// link dials again, and the peer's upgrade answer says whether it
    /// still refuses).
    pub fn fenced(&mut self, env: &LinkEnv<'_>, now: Instant) -> Option<String> {
        let (version, at) = self.fenced?;
        if env.layout_version > version || now.duration_since(at) >= env.silence_timeout {
            self.fenced = None;
            return None;
        }
        Some(format!(
            "{}: knows a layout version newer than {version} (the fence)",
            self.url
        ))
    }

    /// Requests in flight.
    pub fn inflight(&self) -> usize {
        self.inflight.len()
    }

    /// True unless the link is in back-off (what background work, hint
    /// delivery, waits for).
    pub fn may_try(&self, now: Instant) -> bool {
        self.phase != Phase::Down || now >= self.retry_at
    }

    /// Whether a client's request may connect now. Besides the back-off, a
    /// request may reconnect a link that went down by a refused connect or a
    /// closed connection once `RECONNECT_BACKOFF_MIN` passed since the last
    /// try: a node that comes back is used within 50 ms, not after a back-off
    /// of up to a second, and a refused connect costs one syscall. A link
    /// that went down silent (black hole) waits for the back-off, so requests
    /// fail at once instead of waiting out another connect timeout.
    fn may_try_for_request(&self, now: Instant) -> bool {
        self.may_try(now)
            || (!self.down_silent && now.duration_since(self.tried_at) >= RECONNECT_BACKOFF_MIN)
    }

    fn publish(&self, env: &LinkEnv<'_>) {
        let state = match self.phase {
            Phase::Down => LinkState::Down,
            Phase::Connecting | Phase::Handshaking => LinkState::Connecting,
            Phase::Up => LinkState::Up,
        };
        env.status.set_state(state);
    }

    /// Queues a request (`make` gets its id); `Err` says why it fails at once.
    pub fn send(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        now: Instant,
        deadline: Instant,
        waiter: W,
        make: impl FnOnce(u64) -> Message,
    ) -> Result<(), String> {
        self.send_frame(env, registry, now, deadline, waiter, |id, out| {
            let msg = make(id);
            frame::encode(&msg, out);
            (matches!(msg, Message::Read { .. }), false)
        })
    }

    /// Queues a consensus register Ask: `encode` appends its frame with
    /// the id given; the answer comes back as [`PeerReply::Register`].
    pub fn send_register(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        now: Instant,
        deadline: Instant,
        waiter: W,
        encode: impl FnOnce(u64, &mut Vec<u8>),
    ) -> Result<(), String> {
        self.send_frame(env, registry, now, deadline, waiter, |id, out| {
            encode(id, out);
            (false, true)
        })
    }

    /// Queues one frame (`encode` appends it with the id given and says
    /// whether it is a Read, and whether a register Ask); `Err` says why
    /// it fails at once.
    fn send_frame(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        now: Instant,
        deadline: Instant,
        waiter: W,
        encode: impl FnOnce(u64, &mut Vec<u8>) -> (bool, bool),
    ) -> Result<(), String> {
        let status = &env.status;
        let refused = |why: String| {
            status.failed.fetch_add(1, Ordering::Relaxed);
            Err(why)
        };
        if self.inflight.len() >= self.inflight_max {
            return refused(format!(
                "{}: {} requests already in flight",
                self.url, self.inflight_max
            ));
        }
        if self.out.len() - self.out_pos > LINK_OUT_BYTES_MAX {
            return refused(format!(
                "{}: over {LINK_OUT_BYTES_MAX} bytes queued",
                self.url
            ));
        }
        if self.phase == Phase::Down {
            let may = if waiter.is_client_request() {
                self.may_try_for_request(now)
            } else {
                self.may_try(now)
            };
            if !may {
                return refused(format!("{}: down ({})", self.url, self.why_down));
            }
            if let Err(why) = self.connect(env, registry, now) {
                return refused(why);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let (is_read, is_register) = encode(id, &mut self.out);
        self.frames_queued += 1;
        self.inflight.insert(
            id,
            Inflight {
                waiter,
                sent: now,
                deadline,
                is_read,
                is_register,
            },
        );
        status.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn connect(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        now: Instant,
    ) -> Result<(), String> {
        self.tried_at = now;
        let addr = match env.status.address.address(
            &self.dial,
            self.failed_at,
            now,
            env.resolve_once,
            super::address::resolve_system,
        ) {
            Ok(addr) => addr,
            Err(why) => return Err(self.go_down_now(env, now, why)),
        };
        let tls = match env.tls.and_then(|t| t.client()) {
            None => None,
            Some(config) => {
                let host = crate::cluster::dial_address(&self.url);
                let host = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
                match crate::tls::load::server_name(host) {
                    Ok(name) => Some((config, name)),
                    Err(e) => return Err(self.go_down_now(env, now, format!("TLS: {e}"))),
                }
            }
        };
        let stream = match TcpStream::connect(addr) {
            Ok(s) => s,
            Err(e) => return Err(self.go_down_now(env, now, format!("connect: {e}"))),
        };
        let mut stream = match Transport::dial(stream, tls) {
            Ok(s) => s,
            Err(e) => return Err(self.go_down_now(env, now, format!("TLS: {e}"))),
        };
        if let Err(e) = registry.register(
            &mut stream,
            self.token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            return Err(self.go_down_now(env, now, format!("register: {e}")));
        }
        self.stream = Some(stream);
        self.phase = Phase::Connecting;
        self.since = now;
        self.publish(env);
        Ok(())
    }

    /// Goes down with nothing in flight yet to fail (a refused connect); returns the reason.
    fn go_down_now(&mut self, env: &LinkEnv<'_>, now: Instant, why: String) -> String {
        let why = format!("{}: {why}", self.url);
        let mut none = Vec::new();
        self.go_down(env, None, now, why.clone(), &mut none);
        debug_assert!(none.is_empty());
        why
    }

    /// Closes the connection, fails everything in flight with `why`, and backs off.
    fn go_down(
        &mut self,
        env: &LinkEnv<'_>,
        registry: Option<&Registry>,
        now: Instant,
        why: String,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) {
        self.failed_at = Some(now);
        self.go_down_answering(env, registry, now, why, PeerReply::Failed, outcomes);
    }

    /// [`Self::go_down`], answering what is in flight `answer(why)`.
    fn go_down_answering(
        &mut self,
        env: &LinkEnv<'_>,
        registry: Option<&Registry>,
        now: Instant,
        why: String,
        answer: fn(String) -> PeerReply,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) {
        if let Some(mut stream) = self.stream.take()
            && let Some(registry) = registry
        {
            let _ = registry.deregister(&mut stream);
        }
        let status = &env.status;
        // A connection the peer fenced: nothing on it was served, and all
        // of it may be sent again under a newer version.
        let fenced = self.fenced.is_some_and(|(v, _)| v == self.dialed_version);
        let answer = if fenced { PeerReply::Fenced } else { answer };
        for (_, Inflight { waiter, .. }) in self.inflight.drain() {
            status.failed.fetch_add(1, Ordering::Relaxed);
            outcomes.push((waiter, answer(why.clone())));
        }
        if self.phase == Phase::Up {
            // A working connection broke: try again soon.
            self.backoff = RECONNECT_BACKOFF_MIN;
        }
        self.phase = Phase::Down;
        self.down_silent = false;
        self.retry_at = now + self.backoff;
        self.backoff = (self.backoff * 2).min(RECONNECT_BACKOFF_MAX);
        self.why_down = why;
        self.hello.clear();
        self.out.clear();
        self.out_pos = 0;
        self.frames_queued = 0;
        self.rbuf.clear();
        self.publish(env);
    }

    /// Handles readiness of the link's socket.
    pub fn on_event(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        readable: bool,
        writable: bool,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) {
        let now = Instant::now();
        if let Err(why) = self.advance(env, registry, readable, writable, outcomes) {
            let why = format!("{}: {why}", self.url);
            self.go_down(env, Some(registry), now, why, outcomes);
        }
    }

    fn advance(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        readable: bool,
        writable: bool,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) -> Result<(), String> {
        if self.phase == Phase::Connecting {
            let Some(stream) = self.stream.as_ref() else {
                return Err("no socket".into());
            };
            if let Ok(Some(e)) | Err(e) = stream.tcp().take_error() {
                return Err(format!("connect: {e}"));
            }
            match stream.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(()), // still connecting
                Err(e) => return Err(format!("connect: {e}")),
            }
            let _ = stream.tcp().set_nodelay(true);
            if let Err(e) = super::keepalive::enable(stream) {
                tracing::warn!(peer = %self.url, error = %e, "peer link: keepalive not set");
            }
            let host = crate::tls::strip_scheme(&self.url);
            let me = env.self_url;
            let secret = env.secret.cloned();
            let dialer = Dialer::new(super::handshake::PEER_PROTOCOL, host, me, secret)
                .with_layout(env.layout_version);
            self.dialed_version = env.layout_version;
            self.hello = dialer.first_request();
            self.dialer = Some(dialer);
            self.phase = Phase::Handshaking;
        }
        if self.phase == Phase::Handshaking && !self.write_hello()? {
            return Ok(());
        }
        if writable && let Some(stream) = self.stream.as_mut() {
            // TLS: records the socket did not take before go out now.
            match stream.flush() {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                    return Err(format!("write: {e}"));
                }
                _ => {}
            }
        }
        if readable || self.phase == Phase::Handshaking {
            self.read(env, outcomes)?;
        }
        if writable && self.phase == Phase::Up {
            self.write_out(env)?;
        }
        let _ = registry;
        Ok(())
    }

    /// Writes the upgrade request; `Ok(false)` while the socket is full.
    fn write_hello(&mut self) -> Result<bool, String> {
        let Some(stream) = self.stream.as_mut() else {
            return Err("no socket".into());
        };
        while !self.hello.is_empty() {
            match stream.write(&self.hello) {
                Ok(0) => return Err("connection closed during the upgrade".into()),
                Ok(n) => {
                    self.hello.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("upgrade request: {e}")),
            }
        }
        Ok(true)
    }

    fn read(
        &mut self,
        env: &LinkEnv<'_>,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) -> Result<(), String> {
        let Some(stream) = self.stream.as_mut() else {
            return Err("no socket".into());
        };
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        let mut closed = false;
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => self.rbuf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        if self.phase == Phase::Handshaking {
            let Some(dialer) = self.dialer.as_mut() else {
                return Err("no handshake".into());
            };
            let step = dialer.on_answer(&self.rbuf, &mut fresh_nonce);
            if step.is_err() && answer_status(&self.rbuf) == Some(FENCED_UPGRADE_STATUS) {
                // The peer fenced the version this upgrade named: what
                // waits for the connection is answered `Fenced`.
                self.fenced = Some((self.dialed_version, Instant::now()));
            }
            match step? {
                Step::NeedMore if closed => {
                    return Err("connection closed before the upgrade answer".into());
                }
                Step::NeedMore => return Ok(()),
                Step::Send { consumed, request } => {
                    self.rbuf.drain(..consumed);
                    self.hello = request;
                    self.write_hello()?;
                    if closed {
                        return Err("connection closed during the upgrade".into());
                    }
                    return Ok(());
                }
                Step::Up { consumed: n } => {
                    self.dialer = None;
                    self.rbuf.drain(..n);
                    self.phase = Phase::Up;
                    self.backoff = RECONNECT_BACKOFF_MIN;
                    self.last_heard = Instant::now();
                    self.publish(env);
                    self.write_out(env)?;
                }
            }
        }
        let mut consumed = 0;
        loop {
            match self.register_reply(env, consumed, outcomes)? {
                Some(0) => break,
                Some(n) => {
                    consumed += n;
                    continue;
                }
                None => {}
            }
            let Some((msg, n)) = frame::decode(&self.rbuf[consumed..])
                .map_err(|e| format!("bad frame from peer: {e}"))?
            else {
                break;
            };
            consumed += n;
            self.last_heard = Instant::now();
            let id = msg.id();
            let answers_read = matches!(msg, Message::ReadReply { .. });
            if let Some(request) = self.inflight.get(&id)
                && (request.is_read != answers_read || request.is_register)
            {
                return Err(format!(
                    "peer answered request {id} with the wrong kind of answer"
                ));
            }
            let outcome = match msg {
                Message::WriteAck {
                    result: Ok(Applied::Stored),
                    ..
                } => PeerReply::Written,
                Message::WriteAck {
                    result: Ok(Applied::HoldsNewer { ts }),
                    ..
                } => PeerReply::HoldsNewer(ts),
                Message::ReadReply { result: Ok(v), .. } => PeerReply::Read(v),
                Message::WriteAck { result: Err(e), .. }
                | Message::ReadReply { result: Err(e), .. }
                    if e.kind == ReplicaErrorKind::StaleLayout =>
                {
                    // The peer closes the connection next; what is still in
                    // flight on it is answered `Fenced` too (`go_down_answering`).
                    self.fenced = Some((self.dialed_version, Instant::now()));
                    PeerReply::Fenced(format!("{}: {}", self.url, e.message))
                }
                Message::WriteAck { result: Err(e), .. }
                | Message::ReadReply { result: Err(e), .. } => {
                    PeerReply::Failed(format!("{}: {:?}: {}", self.url, e.kind, e.message))
                }
                Message::Write { .. } | Message::Read { .. } => {
                    return Err("peer sent a request on a client link".into());
                }
            };
            if let Some(Inflight {
                waiter,
                sent,
                is_read,
                ..
            }) = self.inflight.remove(&id)
            {
                if matches!(outcome, PeerReply::Failed(_)) {
                    env.status.failed.fetch_add(1, Ordering::Relaxed);
                }
                if matches!(
                    outcome,
                    PeerReply::Written | PeerReply::HoldsNewer(_) | PeerReply::Read(_)
                ) {
                    let took = self.last_heard.saturating_duration_since(sent);
                    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
                    let histogram = if is_read {
                        &env.status.read_us
                    } else {
                        &env.status.write_us
                    };
                    histogram.record(us);
                }
                outcomes.push((waiter, outcome));
            }
            // An unknown id answered a request that already expired.
        }
        self.rbuf.drain(..consumed);
        if closed {
            return Err("connection closed by the peer".into());
        }
        Ok(())
    }

    /// A register Reply at `self.rbuf[at..]`: handed to its waiter,
    /// `Ok(Some(bytes))` consumed; `Ok(Some(0))` one not whole yet (wait
    /// for more); `Ok(None)` when the next frame is not a register Reply
    /// (the peer frame decoder takes it).
    fn register_reply(
        &mut self,
        env: &LinkEnv<'_>,
        at: usize,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) -> Result<Option<usize>, String> {
        let buf = &self.rbuf[at..];
        if buf.get(frame::FRAME_HEADER_BYTES) != Some(&frame::KIND_REGISTER_REPLY) {
            return Ok(None);
        }
        let (body, n) = match super::framing::split(buf, frame::REGISTER_BODY_BYTES_MAX) {
            Ok(Some(whole)) => whole,
            Ok(None) => return Ok(Some(0)),
            Err(e) => return Err(format!("bad register frame from peer: {e:?}")),
        };
        let Some(raw) = body.get(1..9) else {
            return Err("a register Reply without its id".into());
        };
        let mut id = [0u8; 8];
        id.copy_from_slice(raw);
        let id = u64::from_le_bytes(id);
        self.last_heard = Instant::now();
        if let Some(request) = self.inflight.get(&id)
            && !request.is_register
        {
            return Err(format!(
                "peer answered request {id} with the wrong kind of answer"
            ));
        }
        if let Some(Inflight { waiter, sent, .. }) = self.inflight.remove(&id) {
            let took = self.last_heard.saturating_duration_since(sent);
            env.status
                .write_us
                .record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
            outcomes.push((waiter, PeerReply::Register(self.rbuf[at..at + n].to_vec())));
        }
        Ok(Some(n))
    }

    fn write_out(&mut self, env: &LinkEnv<'_>) -> Result<(), String> {
        if self.out_pos >= self.out.len() {
            return Ok(());
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err("no socket".into());
        };
        if self.frames_queued > 0 {
            env.batch_frames.record(self.frames_queued);
            env.status.batches.fetch_add(1, Ordering::Relaxed);
            self.frames_queued = 0;
        }
        while self.out_pos < self.out.len() {
            match stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err("connection closed while writing".into()),
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.out_pos >= OUT_COMPACT_BYTES {
                        // Under steady load the buffer never drains: drop the
                        // written prefix so it does not grow without end.
                        self.out.drain(..self.out_pos);
                        self.out_pos = 0;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        // TLS: a full socket keeps the rest for the next writable event.
        match stream.flush() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(format!("write: {e}")),
            _ => Ok(()),
        }
    }

    /// Writes what was queued in this loop iteration (one batch).
    pub fn flush(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) {
        if self.phase != Phase::Up {
            return;
        }
        if let Err(why) = self.write_out(env) {
            let why = format!("{}: {why}", self.url);
            self.go_down(env, Some(registry), Instant::now(), why, outcomes);
        }
    }

    /// Fails requests past their deadline; drops a connect that takes too long
    /// and a connection that went silent while requests expired on it.
    pub fn tick(
        &mut self,
        env: &LinkEnv<'_>,
        registry: &Registry,
        now: Instant,
        outcomes: &mut Vec<(W, PeerReply)>,
    ) {
        if matches!(self.phase, Phase::Connecting | Phase::Handshaking)
            && now.duration_since(self.since) >= CONNECT_TIMEOUT
        {
            let why = format!(
                "{}: no connection within {} ms",
                self.url,
                CONNECT_TIMEOUT.as_millis()
            );
            self.go_down(env, Some(registry), now, why, outcomes);
            self.down_silent = true;
            return;
        }
        let expired: Vec<(u64, Instant)> = self
            .inflight
            .iter()
            .filter(|(_, request)| request.deadline <= now)
            .map(|(&id, request)| (id, request.sent))
            .collect();
        let Some(oldest_sent) = expired.iter().map(|&(_, sent)| sent).min() else {
            return;
        };
        let status = &env.status;
        for (id, _) in expired {
            if let Some(Inflight { waiter, .. }) = self.inflight.remove(&id) {
                status.failed.fetch_add(1, Ordering::Relaxed);
                outcomes.push((
                    waiter,
                    PeerReply::Failed(format!("{}: no answer in time", self.url)),
                ));
            }
        }
        // Silence counts from the later of the last frame heard and the send
        // of the oldest request that just expired: a link idle for minutes
        // is not silent, nor is one whose request had a short deadline.
        let silent_since = self.last_heard.max(oldest_sent);
        if self.phase == Phase::Up && now.duration_since(silent_since) >= env.silence_timeout {
            // Requests expire and nothing comes back: the connection is dead
            // or black-holed. Start over.
            let why = format!(
                "{}: silent for {} ms with requests in flight",
                self.url,
                now.duration_since(silent_since).as_millis()
            );
            self.go_down(env, Some(registry), now, why, outcomes);
            self.down_silent = true;
        }
    }
}

/// The status a node answers a peer upgrade naming an older layout
/// version with (the fence, `net::fence`; no other refusal of a peer
/// upgrade uses it).
const FENCED_UPGRADE_STATUS: u16 = 409;

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
