//! One client thread: many keep-alive connections on one `mio` poll, each
//! with at most one request in flight (as wrk2), driven by its
//! [`Schedule`].
//!
//! The loop: send every request whose planned time has come, poll for
//! socket events and the [`Timer`] set to the next planned time, frame
//! responses, record latencies. A request is charged from its planned
//! time (corrected) and from the moment its first byte was written
//! (uncorrected). Requests, responses and buffers are reused: the steady
//! state allocates once per second (the per-second histogram handed to the
//! main thread), not per request.
//!
//! Connection `i` of the phase (its global index) talks to target
//! `i % targets` for the whole phase, reconnecting there after a failure.
//!
//! Failures (refused connection, I/O error, unframeable response, timeout)
//! are counted, the connection is dropped, and the next planned request
//! opens a new one. In a closed loop a failed connection waits
//! [`RECONNECT_BACKOFF_MS`] first, so a dead port is not hammered in a spin.

use super::response::{Progress, ResponseReader};
use super::schedule::Schedule;
use super::stats::{Counts, Failure, Second, Totals, second_histogram};
use super::timer::Timer;
use super::wake::WakeWindow;
use super::workload::Requests;
use crate::error::{BenchError, Result};
use ataman_node::tls::transport::Transport;
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// Socket events taken per poll.
const EVENTS_CAPACITY: usize = 1024;

/// Bytes of free buffer offered to each `read`.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Initial capacity of a connection's request buffer, bytes.
const REQUEST_BUFFER_BYTES: usize = 512;

/// How often in-flight requests are checked against the timeout, ms.
const TIMEOUT_SCAN_INTERVAL_MS: u64 = 10;

/// Closed loop only: wait this long before reopening a failed connection.
pub const RECONNECT_BACKOFF_MS: u64 = 10;

/// Nanoseconds per second.
const NS_PER_SEC: u64 = 1_000_000_000;

/// Nanoseconds per millisecond.
const NS_PER_MS: u64 = 1_000_000;

/// Token of the timer; connections use their index.
const TIMER_TOKEN: Token = Token(usize::MAX);

/// The time frame every thread of one phase shares.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Time zero of all `_ns` values.
    pub epoch: Instant,
    /// Planned time of the first requests (a little after the epoch, so
    /// threads that start late are not charged for their own start-up).
    pub start_ns: u64,
    /// Requests planned before this are sent but not recorded (warm-up).
    pub measure_start_ns: u64,
    /// Nothing planned at or after this is sent; `u64::MAX` = until the plan ends.
    pub end_ns: u64,
    /// A request unanswered this long after sending is a timeout.
    pub timeout: Duration,
    /// Total requests/s of all threads (0 = closed loop).
    pub rate: u64,
    /// Connections of all threads.
    pub connections_total: usize,
    /// How late the timer may wake the thread for a planned send while
    /// requests are in flight (see [`super::wake`]); 0 = exactly on time.
    pub send_slack_ns: u64,
    /// TLS for the `https://` targets.
    pub tls: Option<Arc<ClientTls>>,
}

/// The client configuration and, by target index, the name its
/// certificate is checked against (`None`: a plain `http://` target).
#[derive(Debug)]
pub struct ClientTls {
    /// Trusts `--tls-ca`.
    pub config: Arc<rustls::ClientConfig>,
    /// By target index.
    pub names: Vec<Option<rustls::pki_types::ServerName<'static>>>,
}

/// TLS for `targets`: `None` when none is `https://`; an `https://` target
/// needs `ca_file`.
pub fn tls_for(
    targets: &[super::target::Target],
    ca_file: Option<&std::path::Path>,
) -> Result<Option<Arc<ClientTls>>> {
    if !targets.iter().any(|t| t.tls) {
        return Ok(None);
    }
    let bad = |why: String| BenchError::InvalidArgument(why);
    let ca_file = ca_file.ok_or_else(|| bad("an https:// --url needs --tls-ca FILE".into()))?;
    let config = ataman_node::tls::load::client_config_for_ca(ca_file)
        .map_err(|e| bad(format!("--tls-ca: {e}")))?;
    let names = targets
        .iter()
        .map(|t| {
            t.tls
                .then(|| ataman_node::tls::load::server_name(&t.name))
                .transpose()
                .map_err(|e| bad(format!("--url {}: {e}", t.url)))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Arc::new(ClientTls { config, names })))
}

/// One thread's share of a phase.
pub struct ThreadJob {
    /// Thread number (for the per-second messages).
    pub thread: usize,
    /// Global indexes of its connections (they place them on the shared schedule).
    pub connections: Vec<usize>,
    /// Builds its requests.
    pub requests: Requests,
    /// Receives one message per second with what completed in it (None: don't report).
    pub seconds: Option<Sender<Second>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No request in flight; in the heap if another one is planned.
    Idle,
    /// Waiting for the TCP handshake.
    Connecting,
    /// Request partly written.
    Writing,
    /// Request written, response not complete.
    Reading,
    /// Nothing more to send.
    Finished,
}

/// One connection and its request in flight.
struct Conn {
    /// Index of its target in the phase's address list.
    target: usize,
    stream: Option<Transport>,
    state: State,
    schedule: Schedule,
    request: Vec<u8>,
    written: usize,
    reader: ResponseReader,
    /// Planned time of the request in flight.
    due_ns: u64,
    /// When its first byte was written.
    sent_ns: u64,
    /// When the current step (connect or request) began, for the timeout.
    step_start_ns: u64,
    /// Bytes received for the request in flight.
    bytes_read: u64,
    /// A readable edge arrived while not reading: read when the request is out.
    readable_pending: bool,
}

/// The thread's state.
struct Client<'a> {
    phase: &'a Phase,
    /// The targets' addresses, by target index.
    addrs: &'a [SocketAddr],
    poll: Poll,
    timer: Timer,
    /// The wake-up the timer is set for, if it has not fired yet.
    armed_ns: Option<u64>,
    conns: Vec<Conn>,
    /// Idle connections by planned time of their next request.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    finished: usize,
    requests: Requests,
    totals: Totals,
    thread: usize,
    seconds: Option<Sender<Second>>,
    second_index: u64,
    second_counts: Counts,
    second_latency_us: Histogram<u64>,
}

/// Runs one thread's connections through the phase against `addrs` (at
/// least one); returns what it measured.
pub fn run_thread(addrs: &[SocketAddr], phase: &Phase, job: ThreadJob) -> Result<Totals> {
    if addrs.is_empty() {
        return Err(BenchError::InvalidArgument(
            "no target to connect to".into(),
        ));
    }
    let io = |e: std::io::Error| BenchError::Check(format!("client event loop: {e}"));
    let poll = Poll::new().map_err(io)?;
    let timer = Timer::new().map_err(io)?;
    timer.register(poll.registry(), TIMER_TOKEN).map_err(io)?;
    let mut heap = BinaryHeap::with_capacity(job.connections.len());
    let conns: Vec<Conn> = job
        .connections
        .iter()
        .enumerate()
        .map(|(local, &global)| {
            let mut schedule =
                Schedule::new(phase.start_ns, global, phase.connections_total, phase.rate);
            let due = schedule.next_due(phase.start_ns);
            heap.push(Reverse((due, local)));
            Conn {
                target: global % addrs.len(),
                stream: None,
                state: State::Idle,
                schedule,
                request: Vec::with_capacity(REQUEST_BUFFER_BYTES),
                written: 0,
                reader: ResponseReader::new(READ_CHUNK_BYTES),
                due_ns: 0,
                sent_ns: 0,
                step_start_ns: 0,
                bytes_read: 0,
                readable_pending: false,
            }
        })
        .collect();
    let mut client = Client {
        phase,
        addrs,
        poll,
        timer,
        armed_ns: None,
        conns,
        heap,
        finished: 0,
        requests: job.requests,
        totals: Totals::new(addrs.len())?,
        thread: job.thread,
        seconds: job.seconds,
        second_index: 0,
        second_counts: Counts::default(),
        second_latency_us: second_histogram()?,
    };
    client.run()?;
    Ok(client.totals)
}

impl Client<'_> {
    fn now(&self) -> u64 {
        u64::try_from(self.phase.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn run(&mut self) -> Result<()> {
        let mut events = Events::with_capacity(EVENTS_CAPACITY);
        let drain_limit_ns = self
            .phase
            .end_ns
            .saturating_add(u64::try_from(self.phase.timeout.as_nanos()).unwrap_or(u64::MAX));
        let mut next_scan_ns = 0u64;
        while self.finished < self.conns.len() {
            let mut now = self.now();
            while let Some(&Reverse((due, i))) = self.heap.peek() {
                if due > now {
                    break;
                }
                self.heap.pop();
                self.begin(i, due, now);
                now = self.now();
            }
            if now >= next_scan_ns {
                self.expire(now);
                next_scan_ns = now + TIMEOUT_SCAN_INTERVAL_MS * NS_PER_MS;
            }
            self.tick(now);
            if now >= drain_limit_ns {
                self.abandon(now);
                break;
            }
            if self.finished == self.conns.len() {
                break;
            }
            let next_second_ns = self
                .phase
                .measure_start_ns
                .saturating_add((self.second_index + 1).saturating_mul(NS_PER_SEC));
            let other_ns = next_scan_ns.min(next_second_ns).min(drain_limit_ns);
            let due_ns = self.heap.peek().map(|&Reverse((due, _))| due);
            let in_flight = self
                .conns
                .len()
                .saturating_sub(self.finished + self.heap.len());
            let window = WakeWindow::new(due_ns, other_ns, in_flight, self.phase.send_slack_ns);
            let timeout = if window.earliest_ns <= now {
                Some(Duration::ZERO)
            } else {
                if !window.keeps(self.armed_ns, now) {
                    self.timer
                        .arm(Duration::from_nanos(window.latest_ns - now))
                        .map_err(|e| BenchError::Check(format!("timerfd: {e}")))?;
                    self.armed_ns = Some(window.latest_ns);
                }
                None
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(BenchError::Check(format!("poll: {e}"))),
            }
            for event in events.iter() {
                if event.token() == TIMER_TOKEN {
                    // No read: each expiry is a new edge, and re-arming resets it.
                    self.armed_ns = None;
                    continue;
                }
                let i = event.token().0;
                if i >= self.conns.len() {
                    continue;
                }
                match self.conns[i].state {
                    State::Connecting => self.on_connect_event(i),
                    State::Writing => {
                        if event.is_readable() || event.is_read_closed() {
                            self.conns[i].readable_pending = true;
                        }
                        if event.is_writable() || event.is_error() {
                            self.write(i);
                        }
                    }
                    State::Reading => self.read(i),
                    State::Idle => {
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.read_idle(i);
                        }
                    }
                    State::Finished => {}
                }
            }
        }
        self.flush_second();
        Ok(())
    }

    /// Starts the request planned at `due` on connection `i`.
    fn begin(&mut self, i: usize, due: u64, now: u64) {
        let conn = &mut self.conns[i];
        if self
            .requests
            .next_into(&mut conn.request, conn.target)
            .is_none()
        {
            conn.state = State::Finished;
            conn.stream = None;
            self.finished += 1;
            return;
        }
        conn.due_ns = due;
        conn.written = 0;
        conn.bytes_read = 0;
        if conn.stream.is_some() {
            self.write(i);
            return;
        }
        conn.step_start_ns = now;
        let Some(&addr) = self.addrs.get(conn.target) else {
            return self.fail(i, Failure::Connect);
        };
        let tls = self.phase.tls.as_ref().and_then(|t| {
            let name = t.names.get(conn.target)?.clone()?;
            Some((Arc::clone(&t.config), name))
        });
        match TcpStream::connect(addr).and_then(|s| Transport::dial(s, tls)) {
            Ok(mut stream) => {
                let registered = self.poll.registry().register(
                    &mut stream,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                );
                if registered.is_err() {
                    self.fail(i, Failure::Connect);
                    return;
                }
                let _ = stream.tcp().set_nodelay(true);
                let conn = &mut self.conns[i];
                conn.stream = Some(stream);
                conn.state = State::Connecting;
                conn.readable_pending = false;
            }
            Err(_) => self.fail(i, Failure::Connect),
        }
    }

    /// A connecting socket signalled: connected, failed, or not yet.
    fn on_connect_event(&mut self, i: usize) {
        let Some(stream) = &self.conns[i].stream else {
            return;
        };
        match stream.tcp().take_error() {
            Ok(None) => {}
            Ok(Some(_)) | Err(_) => {
                self.fail(i, Failure::Connect);
                return;
            }
        }
        match stream.peer_addr() {
            Ok(_) => self.write(i),
            Err(e) if e.kind() == ErrorKind::NotConnected => {}
            Err(_) => self.fail(i, Failure::Connect),
        }
    }

    /// Writes as much of the request as the socket takes.
    fn write(&mut self, i: usize) {
        let now = self.now();
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else {
            return;
        };
        if conn.written == 0 {
            conn.sent_ns = now;
            conn.step_start_ns = now;
        }
        while conn.written < conn.request.len() {
            match stream.write(&conn.request[conn.written..]) {
                Ok(0) => return self.fail(i, Failure::Io),
                Ok(n) => conn.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    conn.state = State::Writing;
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.fail(i, Failure::Io),
            }
        }
        // TLS: records the socket did not take yet go out on a writable event.
        match stream.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                conn.state = State::Writing;
                return;
            }
            Err(_) => return self.fail(i, Failure::Io),
        }
        conn.state = State::Reading;
        if std::mem::take(&mut conn.readable_pending) {
            self.read(i);
        }
    }

    /// Reads until the socket is empty or the response is complete.
    fn read(&mut self, i: usize) {
        loop {
            let conn = &mut self.conns[i];
            let Some(stream) = conn.stream.as_mut() else {
                return;
            };
            let progress = match stream.read(conn.reader.spare(READ_CHUNK_BYTES)) {
                Ok(0) => conn.reader.eof(),
                Ok(n) => {
                    conn.reader.commit(n);
                    conn.bytes_read += n as u64;
                    conn.reader.advance()
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return self.fail(i, Failure::Io),
            };
            match progress {
                Progress::More => {}
                Progress::Done { status, close } => return self.complete(i, status, close),
                Progress::Invalid(_) => return self.fail(i, Failure::Io),
            }
        }
    }

    /// An idle keep-alive connection became readable: the server closed it
    /// (or sent something unasked). Drop it; the next request reconnects.
    fn read_idle(&mut self, i: usize) {
        let conn = &mut self.conns[i];
        let Some(stream) = conn.stream.as_mut() else {
            return;
        };
        let mut probe = [0u8; 1];
        match stream.read(&mut probe) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            _ => {
                conn.stream = None;
                conn.reader.reset();
            }
        }
    }

    /// The response to connection `i`'s request is in.
    fn complete(&mut self, i: usize, status: u16, close: bool) {
        let now = self.now();
        self.tick(now);
        let conn = &mut self.conns[i];
        if conn.due_ns >= self.phase.measure_start_ns {
            self.totals.record(conn.due_ns, conn.sent_ns, now);
            let corrected = Duration::from_nanos(now.saturating_sub(conn.due_ns));
            let us = u64::try_from(corrected.as_micros()).unwrap_or(u64::MAX);
            self.second_latency_us
                .saturating_record(us.clamp(1, self.second_latency_us.high()));
            let bytes = conn.bytes_read;
            let non_2xx = u64::from(!(200..300).contains(&status));
            let per_target = self.totals.targets.get_mut(conn.target);
            for counts in [&mut self.totals.counts, &mut self.second_counts]
                .into_iter()
                .chain(per_target)
            {
                counts.requests += 1;
                counts.non_2xx += non_2xx;
                counts.bytes_read += bytes;
            }
            self.totals.last_completion_ns = now.saturating_sub(self.phase.measure_start_ns);
        }
        if close {
            conn.stream = None;
        }
        conn.reader.reset();
        self.plan_next(i, now, 0);
    }

    /// Connection `i`'s request failed: count it, drop the connection, go on.
    fn fail(&mut self, i: usize, why: Failure) {
        let now = self.now();
        self.tick(now);
        let conn = &mut self.conns[i];
        if conn.due_ns >= self.phase.measure_start_ns {
            self.totals.counts.fail(why);
            self.second_counts.fail(why);
            if let Some(counts) = self.totals.targets.get_mut(conn.target) {
                counts.fail(why);
            }
        }
        conn.stream = None;
        conn.reader.reset();
        let backoff_ns = if conn.schedule.is_open_loop() {
            0
        } else {
            RECONNECT_BACKOFF_MS * NS_PER_MS
        };
        self.plan_next(i, now, backoff_ns);
    }

    /// Puts connection `i` back in the heap for its next planned request, or finishes it.
    fn plan_next(&mut self, i: usize, now: u64, delay_ns: u64) {
        let conn = &mut self.conns[i];
        let due = conn.schedule.next_due(now + delay_ns);
        if due >= self.phase.end_ns {
            conn.state = State::Finished;
            conn.stream = None;
            self.finished += 1;
        } else {
            conn.state = State::Idle;
            self.heap.push(Reverse((due, i)));
        }
    }

    /// Fails every request in flight longer than the timeout.
    fn expire(&mut self, now: u64) {
        let timeout_ns = u64::try_from(self.phase.timeout.as_nanos()).unwrap_or(u64::MAX);
        for i in 0..self.conns.len() {
            let conn = &self.conns[i];
            let in_flight = matches!(
                conn.state,
                State::Connecting | State::Writing | State::Reading
            );
            if in_flight && now.saturating_sub(conn.step_start_ns) > timeout_ns {
                self.fail(i, Failure::Timeout);
            }
        }
    }

    /// The drain limit struck: what is in flight times out, what is still
    /// planned before the end is counted as never sent.
    fn abandon(&mut self, now: u64) {
        let end = self.phase.end_ns;
        for conn in &mut self.conns {
            let measured = conn.due_ns >= self.phase.measure_start_ns;
            match conn.state {
                State::Connecting | State::Writing | State::Reading => {
                    if measured {
                        self.totals.counts.timeouts += 1;
                        if let Some(counts) = self.totals.targets.get_mut(conn.target) {
                            counts.timeouts += 1;
                        }
                    }
                }
                State::Idle | State::Finished => {}
            }
            if conn.state != State::Finished {
                let mut unsent = 0;
                while conn.schedule.is_open_loop() && conn.schedule.next_due(now) < end {
                    unsent += 1;
                }
                self.totals.unsent += unsent;
            }
            conn.state = State::Finished;
            conn.stream = None;
        }
        // Idle connections' heap entries were planned before the end too.
        while let Some(Reverse((due, _))) = self.heap.pop() {
            if due < end && due >= self.phase.measure_start_ns {
                self.totals.unsent += 1;
            }
        }
        self.finished = self.conns.len();
    }

    /// Hands the finished second to the main thread when the clock passed it.
    fn tick(&mut self, now: u64) {
        if now < self.phase.measure_start_ns {
            return;
        }
        let index = (now - self.phase.measure_start_ns) / NS_PER_SEC;
        if index > self.second_index {
            self.flush_second();
            self.second_index = index;
        }
    }

    fn flush_second(&mut self) {
        if self.second_counts == Counts::default() {
            return;
        }
        let Some(sender) = &self.seconds else {
            self.second_counts = Counts::default();
            self.second_latency_us.reset();
            return;
        };
        let fresh = match second_histogram() {
            Ok(h) => h,
            Err(_) => {
                self.second_latency_us.reset();
                return;
            }
        };
        let second = Second {
            thread: self.thread,
            index: self.second_index,
            counts: std::mem::take(&mut self.second_counts),
            latency_us: std::mem::replace(&mut self.second_latency_us, fresh),
        };
        // The main thread may have stopped listening (it failed): nothing to do.
        let _ = sender.send(second);
    }
}
