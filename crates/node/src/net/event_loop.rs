//! One network thread's event loop.

use super::conn::{Conn, Next};
use super::{Completion, NetContext, NodeShared};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Token of the listener (thread 0 only).
pub const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the inbox's waker.
pub const WAKER: Token = Token(usize::MAX - 2);
/// Longest sleep in `poll`: timeouts and shutdown are checked at least this often.
const TICK: Duration = Duration::from_millis(50);
/// Events taken per `poll`.
const EVENTS_MAX: usize = 1024;
/// How long shutdown waits for in-flight requests before closing everything.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

struct Slots {
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u64,
}

impl Slots {
    fn insert(&mut self, stream: TcpStream) -> (usize, &mut Conn) {
        self.next_generation += 1;
        let conn = Conn::new(stream, self.next_generation);
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
            None => unreachable!("slot {index} was just filled"),
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
    slots: Slots,
    next_target: usize,
    new_conns: Vec<TcpStream>,
    completions: Vec<Completion>,
    touched: Vec<usize>,
    /// Reused read buffer of every connection of this thread.
    scratch: Vec<u8>,
}

/// Runs network thread `index` until shutdown has drained its connections.
pub fn run_thread(
    shared: Arc<NodeShared>,
    index: usize,
    poll: Poll,
    listener: Option<TcpListener>,
) -> io::Result<()> {
    let mut lp = Loop {
        ctx: NetContext::new(Arc::clone(&shared), index),
        index,
        poll,
        listener,
        slots: Slots {
            conns: Vec::new(),
            free: Vec::new(),
            next_generation: 0,
        },
        next_target: 0,
        new_conns: Vec::new(),
        completions: Vec::new(),
        touched: Vec::new(),
        scratch: vec![0; super::conn::READ_CHUNK_BYTES],
    };
    if let Some(l) = lp.listener.as_mut() {
        lp.poll
            .registry()
            .register(l, LISTENER, Interest::READABLE)?;
    }
    lp.run()
}

impl Loop {
    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(EVENTS_MAX);
        let mut last_tick = Instant::now();
        let mut shutdown_started: Option<Instant> = None;
        loop {
            match self.poll.poll(&mut events, Some(TICK)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => self.take_inbox(),
                    Token(i) => self.on_conn(i, event.is_read_closed() || event.is_error()),
                }
            }
            self.submit_pending();
            self.finish_touched();
            if last_tick.elapsed() >= TICK {
                last_tick = Instant::now();
                self.take_inbox(); // in case a wake-up was lost
                self.submit_pending();
                self.finish_touched();
                self.check_timeouts();
            }
            if self.ctx.shared.stopping() {
                let started = *shutdown_started.get_or_insert_with(Instant::now);
                if let Some(mut l) = self.listener.take() {
                    let _ = self.poll.registry().deregister(&mut l);
                }
                self.close_idle();
                if self.slots.live() == 0 || started.elapsed() > SHUTDOWN_GRACE {
                    return Ok(());
                }
            }
        }
    }

    fn accept(&mut self) {
        let threads = self.ctx.shared.inboxes.len();
        loop {
            let Some(listener) = self.listener.as_ref() else {
                return;
            };
            match listener.accept() {
                Ok((stream, _)) => {
                    let shared = &self.ctx.shared;
                    if shared.connections.load(Ordering::Relaxed) >= self.ctx.config.connections_max
                    {
                        shared
                            .metrics
                            .connections_refused
                            .fetch_add(1, Ordering::Relaxed);
                        drop(stream); // over the limit: closed at once
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
                        self.add(stream);
                    } else {
                        shared.inboxes[target].push_conn(stream);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return, // e.g. EMFILE: try again on the next event
            }
        }
    }

    fn add(&mut self, stream: TcpStream) {
        let (i, conn) = self.slots.insert(stream);
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
        for stream in std::mem::take(&mut self.new_conns) {
            self.add(stream);
        }
        for c in std::mem::take(&mut self.completions) {
            if let Some(Some(conn)) = self.slots.conns.get_mut(c.token)
                && conn.generation == c.generation
            {
                conn.complete(&self.ctx, c.slot, c.result, c.invalid);
                self.touched.push(c.token);
            }
        }
    }

    fn on_conn(&mut self, i: usize, peer_closed: bool) {
        let next = match self.slots.conns.get_mut(i) {
            Some(Some(conn)) => conn.on_ready(&self.ctx, i, &mut self.scratch, peer_closed),
            _ => return,
        };
        if next == Next::Close {
            self.drop_conn(i);
        }
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
        for i in touched.drain(..) {
            let next = match self.slots.conns.get_mut(i) {
                Some(Some(conn)) if conn.read_paused => {
                    conn.on_ready(&self.ctx, i, &mut self.scratch, false)
                }
                Some(Some(conn)) => conn.flush(&self.ctx),
                _ => continue,
            };
            if next == Next::Close {
                self.drop_conn(i);
            }
        }
        self.touched = touched;
    }

    fn check_timeouts(&mut self) {
        let now = Instant::now();
        let idle = self.ctx.config.idle_timeout;
        let request = self.ctx.config.request_timeout;
        for i in 0..self.slots.conns.len() {
            let Some(Some(conn)) = self.slots.conns.get_mut(i) else {
                continue;
            };
            if conn.is_idle() && now.duration_since(conn.last_active) >= idle {
                self.drop_conn(i);
                continue;
            }
            if conn
                .request_started()
                .is_some_and(|t| now.duration_since(t) >= request)
            {
                conn.time_out_request(&self.ctx);
                if conn.flush(&self.ctx) == Next::Close {
                    self.drop_conn(i);
                }
            }
        }
    }

    fn close_idle(&mut self) {
        for i in 0..self.slots.conns.len() {
            if matches!(self.slots.conns.get(i), Some(Some(c)) if c.is_idle()) {
                self.drop_conn(i);
            }
        }
    }

    fn drop_conn(&mut self, i: usize) {
        if let Some(mut conn) = self.slots.remove(i) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            self.ctx.shared.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
