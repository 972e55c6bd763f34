//! One network thread's event loop.

use super::conn::{Conn, Next};
use crate::replication::{ReplicationIo, Request};
use crate::state::{Completion, NetContext, NodeShared, Protocol, RegisterTo, Target};
use crate::tls::transport::Transport;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Token of the listener (thread 0 only).
pub const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the RESP listener (thread 0 only, with `--resp-listen`).
pub const RESP_LISTENER: Token = Token(usize::MAX - 3);
/// Token of the inbox's waker.
pub const WAKER: Token = Token(usize::MAX - 2);
/// Longest sleep in `poll`: timeouts and shutdown are checked at least this often.
const TICK: Duration = Duration::from_millis(50);
/// Rounds of [`Loop::after_events`] per loop iteration.
const AFTER_EVENTS_ROUNDS_MAX: usize = 4;
/// Events taken per `poll`.
const EVENTS_MAX: usize = 1024;
/// How long shutdown waits for in-flight requests before closing everything.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// After an `accept` failed for lack of descriptors or memory, it is tried
/// again this often until the backlog is drained (the edge-triggered
/// listener brings no new event for connections already queued).
pub const ACCEPT_RETRY: Duration = Duration::from_millis(20);
/// Connections accepted per call of [`Loop::accept`]; the rest of the
/// backlog is taken on the next loop iteration.
const ACCEPTS_PER_CALL_MAX: usize = 1024;

/// This thread's connections by token (a token is an index; freed ones
/// are reused, told apart by the connection's generation).
struct ConnTable {
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u64,
}

impl ConnTable {
    fn insert(
        &mut self,
        ctx: &NetContext,
        stream: Transport,
        protocol: Protocol,
    ) -> (usize, &mut Conn) {
        self.next_generation += 1;
        let conn = match protocol {
            Protocol::Http => Conn::new(stream, self.next_generation),
            Protocol::Resp => Conn::new_resp(stream, self.next_generation, ctx),
        };
        let index = match self.free.pop() {
            Some(i) => {
                self.conns[i] = Some(conn);
                i
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        let conn = self.conns[index].as_mut();
        // Just stored above.
        match conn {
            Some(c) => (index, c),
            None => unreachable!("entry {index} was just filled"),
        }
    }

    fn remove(&mut self, index: usize) -> Option<Conn> {
        let conn = self.conns.get_mut(index)?.take();
        if conn.is_some() {
            self.free.push(index);
        }
        conn
    }

    fn live(&self) -> usize {
        self.conns.len() - self.free.len()
    }
}

struct Loop {
    ctx: NetContext,
    index: usize,
    poll: Poll,
    listener: Option<TcpListener>,
    /// The RESP listener (`--resp-listen`), on thread 0.
    resp_listener: Option<TcpListener>,
    table: ConnTable,
    next_target: usize,
    new_conns: Vec<(TcpStream, Protocol)>,
    completions: Vec<Completion>,
    touched: Vec<usize>,
    /// Reused read buffer of every connection of this thread.
    scratch: Vec<u8>,
    /// Replicated requests and links to the other nodes.
    repl: ReplicationIo,
    /// Replicated requests parsed in this loop iteration, started together.
    replicated: Vec<Request>,
    /// When to call `accept` again without a listener event: the last call
    /// stopped before the backlog was drained (an error, or its bound).
    accept_retry_at: Option<Instant>,
    /// The same for the RESP listener.
    resp_accept_retry_at: Option<Instant>,
    /// The last `accept` failed (logged once per run of failures).
    accept_failing: bool,
}

/// Runs network thread `index` until shutdown has drained its connections.
pub fn run_thread(
    shared: Arc<NodeShared>,
    index: usize,
    poll: Poll,
    listener: Option<TcpListener>,
    resp_listener: Option<TcpListener>,
) -> io::Result<()> {
    let ctx = NetContext::new(Arc::clone(&shared), index);
    let repl = ReplicationIo::new(&ctx);
    let mut lp = Loop {
        ctx,
        repl,
        replicated: Vec::new(),
        index,
        poll,
        listener,
        resp_listener,
        table: ConnTable {
            conns: Vec::new(),
            free: Vec::new(),
            next_generation: 0,
        },
        next_target: 0,
        new_conns: Vec::new(),
        completions: Vec::new(),
        touched: Vec::new(),
        scratch: vec![0; super::conn::READ_CHUNK_BYTES],
        accept_retry_at: None,
        resp_accept_retry_at: None,
        accept_failing: false,
    };
    if let Some(l) = lp.listener.as_mut() {
        lp.poll
            .registry()
            .register(l, LISTENER, Interest::READABLE)?;
    }
    if let Some(l) = lp.resp_listener.as_mut() {
        lp.poll
            .registry()
            .register(l, RESP_LISTENER, Interest::READABLE)?;
    }
    lp.run()
}

impl Loop {
    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_MAX);
        let mut last_tick = Instant::now();
        let mut shutdown_started: Option<Instant> = None;
        loop {
            let retry_at = match (self.accept_retry_at, self.resp_accept_retry_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timeout = match retry_at {
                _ if self.has_pending_work() => Duration::ZERO,
                Some(at) => at.saturating_duration_since(Instant::now()).min(TICK),
                None => TICK,
            };
            // A register operation's back-off or round timeout wakes the loop.
            let timeout = self
                .repl
                .register_wait()
                .map_or(timeout, |w| w.min(timeout));
            match self.poll.poll(&mut events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            let now = Instant::now();
            self.ctx.now.set(now);
            if self.ctx.refresh_placement() {
                // The layout changed: a node the table gained gets a link,
                // and links that named an older version dial again.
                self.repl.grow_links(&self.ctx);
                self.repl
                    .redial_stale_links(&self.ctx, self.poll.registry());
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(Protocol::Http),
                    RESP_LISTENER => self.accept(Protocol::Resp),
                    WAKER => self.take_inbox(),
                    token => match ReplicationIo::link_of(token) {
                        Some(node) => self.repl.on_link_event(
                            &self.ctx,
                            self.poll.registry(),
                            node,
                            event.is_readable() || event.is_read_closed() || event.is_error(),
                            event.is_writable(),
                        ),
                        None => self.on_conn(token.0, event.is_read_closed() || event.is_error()),
                    },
                }
            }
            if self.accept_retry_at.is_some_and(|at| now >= at) {
                self.accept(Protocol::Http);
            }
            if self.resp_accept_retry_at.is_some_and(|at| now >= at) {
                self.accept(Protocol::Resp);
            }
            self.repl.register_tick(&self.ctx, self.poll.registry());
            self.after_events();
            if now.duration_since(last_tick) >= TICK {
                last_tick = now;
                self.take_inbox(); // in case a wake-up was lost
                self.repl.tick(&self.ctx, self.poll.registry());
                self.after_events();
                self.check_timeouts();
            }
            if self.ctx.shared.stopping() {
                let started = *shutdown_started.get_or_insert_with(Instant::now);
                for mut l in [self.listener.take(), self.resp_listener.take()]
                    .into_iter()
                    .flatten()
                {
                    let _ = self.poll.registry().deregister(&mut l);
                }
                self.close_idle();
                if self.table.live() == 0 || started.elapsed() > SHUTDOWN_GRACE {
                    // Requests still waiting for replicas end now and keep
                    // their hints (the hint store closes after this thread).
                    self.repl.expire_all(&self.ctx, self.poll.registry());
                    self.submit_pending();
                    return Ok(());
                }
            }
        }
    }

    /// Takes the listener's backlog: each connection is dealt to a thread,
    /// or closed at once past the client cap (and counted). An `accept`
    /// that fails for lack of descriptors or memory (EMFILE, ENFILE,
    /// ENOBUFS, ENOMEM) leaves the rest queued and is retried every
    /// [`ACCEPT_RETRY`] until the backlog is drained, so queued clients are
    /// served once descriptors are free without waiting for another one.
    fn accept(&mut self, protocol: Protocol) {
        *self.retry_at(protocol) = None;
        let threads = self.ctx.shared.inboxes.len();
        for _ in 0..ACCEPTS_PER_CALL_MAX {
            let listener = match protocol {
                Protocol::Http => self.listener.as_ref(),
                Protocol::Resp => self.resp_listener.as_ref(),
            };
            let Some(listener) = listener else {
                return;
            };
            match listener.accept() {
                Ok((stream, _)) => {
                    self.accept_failing = false;
                    let shared = &self.ctx.shared;
                    let cap = shared.connections_cap.load(Ordering::Relaxed);
                    if shared.connections.load(Ordering::Relaxed) >= cap {
                        let counter = if cap < self.ctx.config.connections_max {
                            &shared.metrics.connections_refused_descriptors
                        } else {
                            &shared.metrics.connections_refused_max
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        drop(stream); // over the cap: closed at once
                        continue;
                    }
                    shared.connections.fetch_add(1, Ordering::Relaxed);
                    shared
                        .metrics
                        .connections_accepted
                        .fetch_add(1, Ordering::Relaxed);
                    let _ = stream.set_nodelay(true);
                    let target = self.next_target % threads;
                    self.next_target = self.next_target.wrapping_add(1);
                    if target == self.index {
                        self.add(stream, protocol);
                    } else {
                        shared.inboxes[target].push_conn(stream, protocol);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_failing = false;
                    return;
                }
                // Interrupted, or a queued connection reset before it was taken.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS, ENOMEM, or anything else:
                    // the connections stay queued; try again shortly.
                    self.ctx
                        .shared
                        .metrics
                        .accept_failures
                        .fetch_add(1, Ordering::Relaxed);
                    if !std::mem::replace(&mut self.accept_failing, true) {
                        tracing::warn!(
                            error = %e,
                            retry_ms = ACCEPT_RETRY.as_millis() as u64,
                            "accept failed; retrying until the backlog is drained (counted in \
                             ataman_accept_failures_total)"
                        );
                    }
                    *self.retry_at(protocol) = Some(Instant::now() + ACCEPT_RETRY);
                    return;
                }
            }
        }
        // The bound, not the end of the backlog: go on next iteration.
        *self.retry_at(protocol) = Some(Instant::now());
    }

    /// When the listener of `protocol` is to be tried again.
    fn retry_at(&mut self, protocol: Protocol) -> &mut Option<Instant> {
        match protocol {
            Protocol::Http => &mut self.accept_retry_at,
            Protocol::Resp => &mut self.resp_accept_retry_at,
        }
    }

    /// Every accepted socket, HTTP and RESP, speaks TLS with `--tls-cert`.
    fn add(&mut self, stream: TcpStream, protocol: Protocol) {
        let tls = self.ctx.shared.tls.as_ref().map(|t| t.server());
        let Ok(stream) = Transport::accept(stream, tls) else {
            self.ctx.shared.connections.fetch_sub(1, Ordering::Relaxed);
            return;
        };
        let (i, conn) = self.table.insert(&self.ctx, stream, protocol);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(&mut conn.stream, Token(i), interest)
            .is_err()
        {
            self.drop_conn(i);
        }
    }

    fn take_inbox(&mut self) {
        let inbox = Arc::clone(&self.ctx.shared.inboxes[self.index]);
        inbox.take(&mut self.new_conns, &mut self.completions);
        for (stream, protocol) in std::mem::take(&mut self.new_conns) {
            self.add(stream, protocol);
        }
        let mut completions = std::mem::take(&mut self.completions);
        for c in completions.drain(..) {
            match c.target {
                Target::Slot {
                    token,
                    generation,
                    slot,
                } => {
                    let (result, invalid, conflict) = (c.result, c.invalid, c.conflict);
                    let done = self.guarded(token, Some(generation), |conn, ctx, repl, _| {
                        if conflict {
                            // Read again and retried (`net::rmw_local`).
                            conn.rmw_conflict(ctx, token, slot);
                            conn.run_chains(ctx, token, repl);
                        } else {
                            conn.complete(ctx, slot, result, invalid);
                        }
                    });
                    if done.is_some() {
                        self.touched.push(token);
                    }
                }
                Target::Peer {
                    token,
                    generation,
                    id,
                } => {
                    let (result, invalid) = (c.result, c.invalid);
                    let done = self.guarded(token, Some(generation), |conn, _, _, _| {
                        conn.peer_ack(id, result, invalid);
                    });
                    if done.is_some() {
                        self.touched.push(token);
                    }
                }
                Target::Replica {
                    coordination,
                    generation,
                    position,
                } => self.repl.on_local_write(
                    &self.ctx,
                    self.poll.registry(),
                    coordination,
                    generation,
                    position,
                    c.result,
                ),
                Target::Feed { token, generation } => {
                    if let Some(Some(conn)) = self.table.conns.get(token)
                        && conn.generation == generation
                    {
                        self.touched.push(token);
                    }
                }
                Target::Register { step } => {
                    if let Some(port) = self.ctx.shared.register.clone() {
                        port.written(&self.ctx, step, c.result);
                    }
                }
                Target::Nobody => {}
            }
        }
        self.completions = completions;
        self.take_register_replies();
    }

    /// Delivers the register acceptor's replies queued for this thread: a
    /// peer's to its connection, this node's own to its proposer.
    fn take_register_replies(&mut self) {
        let mut replies = Vec::new();
        self.ctx.shared.inboxes[self.index].take_register(&mut replies);
        for d in replies {
            match d.to {
                RegisterTo::Peer { token, generation } => {
                    let done = self.guarded(token, Some(generation), |conn, _, _, _| {
                        conn.peer_register_reply(&d.frame);
                    });
                    if done.is_some() {
                        self.touched.push(token);
                    }
                }
                RegisterTo::Local => {
                    self.repl
                        .register_reply(&self.ctx, self.poll.registry(), &d.frame)
                }
            }
        }
    }

    /// What every loop iteration ends with: start the replicated requests
    /// parsed in it, hand its writes to the engine at once, send what was
    /// queued for each peer in one write, and answer what was decided.
    ///
    /// Answering can resume a paused connection, which can parse more
    /// requests; a few rounds take those too, and whatever is left makes the
    /// next `poll` return at once.
    fn after_events(&mut self) {
        for _ in 0..AFTER_EVENTS_ROUNDS_MAX {
            let requests = std::mem::take(&mut self.replicated);
            if !requests.is_empty() {
                self.repl.start(&self.ctx, self.poll.registry(), requests);
            }
            let starts = std::mem::take(&mut *self.ctx.register_starts.borrow_mut());
            if !starts.is_empty() {
                self.repl
                    .register_start(&self.ctx, self.poll.registry(), starts);
            }
            self.submit_pending();
            self.repl.flush(&self.ctx, self.poll.registry());
            for (to, verdict, marks) in self.repl.take_replies() {
                let done = self.guarded(to.token, Some(to.generation), |conn, ctx, repl, _| {
                    conn.decide(ctx, to.slot, verdict, marks);
                    conn.run_chains(ctx, to.token, repl);
                });
                if done.is_some() {
                    self.touched.push(to.token);
                }
            }
            for (to, outcome) in self.repl.take_register_done() {
                let done = self.guarded(to.token, Some(to.generation), |conn, ctx, repl, _| {
                    conn.register_done(ctx, to.slot, outcome);
                    conn.run_chains(ctx, to.token, repl);
                });
                if done.is_some() {
                    self.touched.push(to.token);
                }
            }
            self.finish_touched();
            if !self.has_pending_work() {
                break;
            }
        }
    }

    /// Work parsed but not yet handed on.
    fn has_pending_work(&self) -> bool {
        !self.ctx.pending_writes.borrow().is_empty()
            || !self.replicated.is_empty()
            || !self.ctx.register_starts.borrow().is_empty()
            || !self.touched.is_empty()
    }

    fn on_conn(&mut self, i: usize, peer_closed: bool) {
        let next = self.guarded(i, None, |conn, ctx, replicated, scratch| {
            conn.on_ready(ctx, i, scratch, replicated, peer_closed)
        });
        let Some(next) = next else {
            return;
        };
        self.after_conn(i, next);
        self.resume_if_paused(i);
    }

    /// Queues connection `i` for another round when it stopped parsing at
    /// its bound of answers owed and has room again (requests already
    /// read bring no new socket event).
    fn resume_if_paused(&mut self, i: usize) {
        if let Some(Some(conn)) = self.table.conns.get(i)
            && conn.parse_resumable()
        {
            self.touched.push(i);
        }
    }

    /// Closes or hands off connection `i` as `next` says.
    fn after_conn(&mut self, i: usize, next: Next) {
        match next {
            Next::Keep => self.count_upgrade(i),
            Next::Close => self.drop_conn(i),
            Next::HandOff => self.hand_off(i),
        }
    }

    /// A connection just upgraded to the peer protocol moves from the
    /// client count to the peer count (its descriptor is reserved, not
    /// one of the clients').
    fn count_upgrade(&mut self, i: usize) {
        if let Some(Some(conn)) = self.table.conns.get_mut(i)
            && conn.is_peer()
            && !conn.counted_as_peer
        {
            conn.counted_as_peer = true;
            let shared = &self.ctx.shared;
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            shared.peer_connections.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes a sync-upgraded connection out of this loop and gives its
    /// socket to the anti-entropy sync thread (blocking I/O happens there,
    /// never here).
    fn hand_off(&mut self, i: usize) {
        let Some(mut conn) = self.table.remove(i) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.ctx.shared.connections.fetch_sub(1, Ordering::Relaxed);
        let Some((stream, leftover, ticket)) = conn.into_sync_handoff() else {
            return;
        };
        let Ok(stream) = stream.into_blocking() else {
            return; // the ticket's place is released as it drops
        };
        self.ctx
            .shared
            .antientropy
            .hand_off(crate::antientropy::Handoff {
                stream,
                leftover,
                ticket,
            });
    }

    /// Hands every write parsed in this iteration to the engine at once;
    /// refused ones are answered through the completion inbox like any other.
    fn submit_pending(&mut self) {
        let pending = std::mem::take(&mut *self.ctx.pending_writes.borrow_mut());
        if pending.is_empty() {
            return;
        }
        for (done, e) in self.ctx.db.submit_many(pending) {
            done(Err(e));
        }
    }

    /// Writes answers completed by the engine (and resumes paused reads).
    fn finish_touched(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for &i in &touched {
            let next = self.guarded(i, None, |conn, ctx, replicated, scratch| {
                // A peer connection may have paused reading at its bound of
                // pending writes; acknowledgements free room. A client
                // connection may have paused reading or parsing at its
                // bound of answers owed; answers written free room.
                if conn.read_paused || conn.parse_paused || conn.is_peer() {
                    conn.on_ready(ctx, i, scratch, replicated, false)
                } else {
                    conn.flush(ctx)
                }
            });
            let Some(next) = next else {
                continue;
            };
            self.after_conn(i, next);
        }
        // Those that parsed up to their bound again and drained below it go
        // round once more (each round answers at least one request).
        touched
            .retain(|&i| matches!(self.table.conns.get(i), Some(Some(c)) if c.parse_resumable()));
        debug_assert!(
            self.touched.is_empty(),
            "nothing touches connections while they finish"
        );
        self.touched = touched;
    }

    fn check_timeouts(&mut self) {
        let now = Instant::now();
        let idle = self.ctx.config.idle_timeout;
        let request = self.ctx.config.request_timeout;
        for i in 0..self.table.conns.len() {
            let Some(Some(conn)) = self.table.conns.get_mut(i) else {
                continue;
            };
            if conn.is_peer() {
                continue; // peers keep their connections; TCP keepalive ends a vanished one
            }
            if conn.is_idle() && now.duration_since(conn.last_active) >= idle {
                self.drop_conn(i);
                continue;
            }
            if conn
                .request_started()
                .is_some_and(|t| now.duration_since(t) >= request)
            {
                let next = self.guarded(i, None, |conn, ctx, _, _| {
                    conn.time_out_request(ctx);
                    conn.flush(ctx)
                });
                if let Some(next) = next {
                    self.after_conn(i, next);
                }
            }
        }
    }

    fn close_idle(&mut self) {
        for i in 0..self.table.conns.len() {
            if matches!(self.table.conns.get(i), Some(Some(c)) if c.is_idle()) {
                self.drop_conn(i);
            }
        }
    }

    /// Runs `work` on connection `i` (of `generation`, when given) with
    /// the thread's context, its replicated requests and its read buffer;
    /// `None` when there is no such connection, or when `work` panicked.
    ///
    /// # Containment
    /// A panic here is a bug in handling one connection's input or
    /// answers. It ends that connection only: the connection is dropped
    /// with its slots and buffers (nothing of it is read again), the panic
    /// is logged at error with the peer's address and counted
    /// (`ataman_connection_panics_total`), and the thread goes on. What
    /// outlives the connection is addressed by token and generation, so it
    /// finds no connection and is dropped: completions of its writes
    /// (`take_inbox`), verdicts of its replicated requests (`after_events`)
    /// and touches. The thread's own state is left consistent: the
    /// `RefCell`s of the context are released as the panic unwinds, and
    /// the replicated requests and pending writes queued before the panic
    /// are whole entries (each pushed in one call).
    fn guarded<R>(
        &mut self,
        i: usize,
        generation: Option<u64>,
        work: impl FnOnce(&mut Conn, &NetContext, &mut Vec<Request>, &mut [u8]) -> R,
    ) -> Option<R> {
        let conn = match self.table.conns.get_mut(i) {
            Some(Some(conn)) if generation.is_none_or(|g| g == conn.generation) => conn,
            _ => return None,
        };
        let (ctx, replicated, scratch) = (&self.ctx, &mut self.replicated, &mut self.scratch);
        match catch_unwind(AssertUnwindSafe(|| work(conn, ctx, replicated, scratch))) {
            Ok(r) => Some(r),
            Err(payload) => {
                let peer = conn
                    .stream
                    .peer_addr()
                    .map_or_else(|_| "?".into(), |a| a.to_string());
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(
                    peer = %peer,
                    panic = %what,
                    "a connection panicked (a bug): closed; the node serves the others \
                     (counted in ataman_connection_panics_total)"
                );
                let metrics = &self.ctx.shared.metrics;
                metrics.connection_panics.fetch_add(1, Ordering::Relaxed);
                self.drop_conn(i);
                None
            }
        }
    }

    fn drop_conn(&mut self, i: usize) {
        if let Some(mut conn) = self.table.remove(i) {
            conn.stream.close_notify();
            let _ = self.poll.registry().deregister(&mut conn.stream);
            let shared = &self.ctx.shared;
            let count = if conn.counted_as_peer {
                &shared.peer_connections
            } else {
                &shared.connections
            };
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
