//! Hand-written HTTP/1.1 server on `mio` + `httparse`, for the framing benchmark.
//!
//! Behaviour (same as the `hyper` binary):
//! - `GET /v0/entity?id=K`  -> 200 with a fixed 16-byte body;
//! - `PUT /v0/entity?id=K`  -> reads the Content-Length body, 201 with an empty body;
//! - keep-alive, pipelining (every complete request in the buffer is answered,
//!   responses are written in one batch per readiness event).
//!
//! Layout: `--threads N` event-loop threads, each with its own `Poll`, edge-triggered.
//! Thread 0 owns the listener and deals accepted connections round-robin; a connection
//! handed to another thread goes through that thread's queue + `mio::Waker`.
//!
//! `--tx` models the node's write path: the PUTs parsed in one event-loop iteration are
//! handed to one "transaction" thread in one batch (one lock, at most one wake-up); tx
//! drains everything queued in one wake-up and hands the completions back to the owning network thread through a mutex-protected queue and
//! that thread's `Waker` (woken only when its queue went from empty to non-empty).
//! While a PUT is at tx, the connection parses nothing further, so pipelined responses
//! stay in order.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use mio::net::{TcpListener, TcpStream};
use http_framing_bench::TxQueue;
use mio::{Events, Interest, Poll, Token, Waker};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);

const BODY: &[u8; 16] = b"0123456789abcdef";
const RBUF_INITIAL: usize = 16 * 1024;
const MAX_HEAD: usize = 16 * 1024;
const MAX_BODY: usize = 1024 * 1024;
/// Stop parsing a connection's input while this many response bytes wait to be written.
const WBUF_HIGH: usize = 256 * 1024;
const MAX_HEADERS: usize = 32;

struct Args {
    addr: SocketAddr,
    threads: usize,
    tx: bool,
}

fn parse_args() -> Args {
    let mut args = Args { addr: "127.0.0.1:8080".parse().unwrap(), threads: 1, tx: false };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--addr" => args.addr = it.next().expect("--addr ADDR").parse().expect("bad --addr"),
            "--threads" => args.threads = it.next().expect("--threads N").parse().expect("bad --threads"),
            "--tx" => args.tx = true,
            _ => {
                eprintln!("usage: mio-httparse [--addr 127.0.0.1:PORT] [--threads N] [--tx]");
                std::process::exit(2);
            }
        }
    }
    assert!(args.addr.ip().is_loopback(), "this benchmark server binds loopback only");
    assert!(args.threads >= 1);
    args
}

/// What other threads hand to a network thread.
#[derive(Default)]
struct Inbox {
    /// Connections accepted by thread 0 for this thread.
    conns: Vec<TcpStream>,
    /// Write completions from tx: (token, generation).
    done: Vec<(usize, u32)>,
}

struct Shared {
    inbox: Mutex<Inbox>,
    waker: Waker,
}

impl Shared {
    /// Push under the lock; wake the owner only if its inbox was empty.
    fn push(&self, f: impl FnOnce(&mut Inbox)) {
        let was_empty = {
            let mut inbox = self.inbox.lock().unwrap();
            let was_empty = inbox.conns.is_empty() && inbox.done.is_empty();
            f(&mut inbox);
            was_empty
        };
        if was_empty {
            self.waker.wake().expect("wake");
        }
    }
}

/// A write handed to the transaction thread.
struct TxReq {
    worker: usize,
    token: usize,
    generation: u32,
}

fn main() {
    let args = parse_args();
    let listener = TcpListener::bind(args.addr).expect("bind");

    let mut polls = Vec::new();
    let mut shared = Vec::new();
    for _ in 0..args.threads {
        let poll = Poll::new().expect("poll");
        let waker = Waker::new(poll.registry(), WAKER).expect("waker");
        shared.push(Arc::new(Shared { inbox: Mutex::new(Inbox::default()), waker }));
        polls.push(poll);
    }
    let shared: Arc<[Arc<Shared>]> = shared.into();

    let tx_sender = if args.tx {
        let shared = shared.clone();
        let mut per_worker: Vec<Vec<(usize, u32)>> = vec![Vec::new(); shared.len()];
        Some(TxQueue::spawn("tx", move |batch: &mut Vec<TxReq>| tx_apply(batch, &shared, &mut per_worker)))
    } else {
        None
    };

    let mut listener = Some(listener);
    let mut handles = Vec::new();
    for (id, poll) in polls.into_iter().enumerate() {
        let worker = Worker {
            id,
            poll,
            shared: shared.clone(),
            listener: if id == 0 { listener.take() } else { None },
            conns: Vec::new(),
            free: Vec::new(),
            next_target: 0,
            tx: tx_sender.clone(),
            to_tx: Vec::new(),
            date: DateCache::new(),
        };
        handles.push(
            std::thread::Builder::new()
                .name(format!("net-{id}"))
                .spawn(move || worker.run())
                .expect("spawn net"),
        );
    }
    eprintln!("mio-httparse listening on {} with {} thread(s), tx={}", args.addr, args.threads, args.tx);
    for h in handles {
        h.join().unwrap();
    }
}

/// The stand-in transaction thread's work on one drained batch: "apply" it and hand the
/// completions back, one push (and at most one wake-up) per network thread.
fn tx_apply(batch: &mut Vec<TxReq>, shared: &[Arc<Shared>], per_worker: &mut [Vec<(usize, u32)>]) {
    for r in batch.drain(..) {
        per_worker[r.worker].push((r.token, r.generation));
    }
    for (w, done) in per_worker.iter_mut().enumerate() {
        if !done.is_empty() {
            shared[w].push(|inbox| inbox.done.append(done));
        }
    }
}

struct Worker {
    id: usize,
    poll: Poll,
    shared: Arc<[Arc<Shared>]>,
    listener: Option<TcpListener>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_target: usize,
    tx: Option<Arc<TxQueue<TxReq>>>,
    /// PUTs parsed in this event-loop iteration, handed to tx in one batch at its end.
    to_tx: Vec<TxReq>,
    date: DateCache,
}

/// Per-event-loop context a connection needs while processing requests.
struct Ctx<'a> {
    worker: usize,
    tx: bool,
    to_tx: &'a mut Vec<TxReq>,
    date: &'a [u8],
}

impl Worker {
    fn run(mut self) {
        if let Some(l) = self.listener.as_mut() {
            self.poll.registry().register(l, LISTENER, Interest::READABLE).expect("register listener");
        }
        let mut events = Events::with_capacity(1024);
        let mut inbox = Inbox::default();
        loop {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                panic!("poll: {e}");
            }
            self.date.refresh();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {
                        {
                            let mut guard = self.shared[self.id].inbox.lock().unwrap();
                            std::mem::swap(&mut *guard, &mut inbox);
                        }
                        for stream in inbox.conns.drain(..) {
                            self.add_conn(stream);
                        }
                        for i in 0..inbox.done.len() {
                            let (token, generation) = inbox.done[i];
                            self.complete(token, generation);
                        }
                        inbox.done.clear();
                    }
                    Token(t) => {
                        let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                        self.drive(t, readable);
                    }
                }
            }
            if let Some(tx) = &self.tx {
                tx.push_all(&mut self.to_tx);
            }
        }
    }

    fn accept(&mut self) {
        loop {
            let res = self.listener.as_ref().unwrap().accept();
            match res {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let target = self.next_target;
                    self.next_target = (self.next_target + 1) % self.shared.len();
                    if target == self.id {
                        self.add_conn(stream);
                    } else {
                        self.shared[target].push(|inbox| inbox.conns.push(stream));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: report and retry on the next event.
                    eprintln!("accept: {e}");
                    return;
                }
            }
        }
    }

    fn add_conn(&mut self, mut stream: TcpStream) {
        let t = match self.free.pop() {
            Some(t) => t,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        if self
            .poll
            .registry()
            .register(&mut stream, Token(t), Interest::READABLE | Interest::WRITABLE)
            .is_err()
        {
            self.free.push(t);
            return;
        }
        // Bump the generation so stale tx completions for a previous owner of the slot are ignored.
        static GEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let generation = GEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.conns[t] = Some(Conn::new(stream, t, generation));
        // Data may already be waiting; edge-triggered registration reports it, but be safe.
        self.drive(t, true);
    }

    fn complete(&mut self, token: usize, generation: u32) {
        let Some(Some(conn)) = self.conns.get_mut(token) else { return };
        if conn.generation != generation || !conn.waiting_tx {
            return;
        }
        conn.waiting_tx = false;
        let close = conn.close_after_tx;
        conn.respond(201, b"", close, self.date.get());
        self.drive(token, false);
    }

    fn drive(&mut self, t: usize, readable: bool) {
        let mut ctx = Ctx { worker: self.id, tx: self.tx.is_some(), to_tx: &mut self.to_tx, date: self.date.get() };
        let Some(Some(conn)) = self.conns.get_mut(t) else { return };
        if readable {
            conn.may_read = true;
        }
        if conn.drive(&mut ctx) {
            return;
        }
        let mut conn = self.conns[t].take().unwrap();
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.free.push(t);
    }
}

struct Conn {
    stream: TcpStream,
    token: usize,
    generation: u32,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    /// The socket may hold unread data (no WouldBlock / short read seen since the last edge).
    may_read: bool,
    eof: bool,
    /// Close once everything queued is written.
    closing: bool,
    /// A PUT of this connection is at tx; parse nothing more until it completes.
    waiting_tx: bool,
    /// The PUT at tx asked for `Connection: close`.
    close_after_tx: bool,
}

enum Step {
    Progress,
    Idle,
}

impl Conn {
    fn new(stream: TcpStream, token: usize, generation: u32) -> Conn {
        Conn {
            stream,
            token,
            generation,
            rbuf: vec![0; RBUF_INITIAL],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            may_read: true,
            eof: false,
            closing: false,
            waiting_tx: false,
            close_after_tx: false,
        }
    }

    /// Read, parse and answer, write; repeat while anything moves. Returns false to close.
    fn drive(&mut self, ctx: &mut Ctx) -> bool {
        loop {
            let mut moved = false;
            match self.read() {
                Ok(Step::Progress) => moved = true,
                Ok(Step::Idle) => {}
                Err(_) => return false,
            }
            if self.process(ctx) {
                moved = true;
            }
            match self.flush() {
                Ok(Step::Progress) => moved = true,
                Ok(Step::Idle) => {}
                Err(_) => return false,
            }
            let flushed = self.wpos == self.wbuf.len();
            if flushed && self.closing {
                return false;
            }
            if flushed && self.eof && !self.waiting_tx {
                // Peer closed its side and everything it asked for is answered.
                return false;
            }
            if !moved {
                return true;
            }
        }
    }

    /// Read until WouldBlock, a short read (the socket buffer is drained: epoll will
    /// report the next arrival as a new edge, as tokio also assumes), EOF or a full buffer.
    fn read(&mut self) -> io::Result<Step> {
        if !self.may_read || self.eof || self.closing {
            return Ok(Step::Idle);
        }
        let mut got = false;
        loop {
            if self.rstart == self.rend {
                self.rstart = 0;
                self.rend = 0;
            } else if self.rbuf.len() - self.rend < 2048 && self.rstart > 0 {
                self.rbuf.copy_within(self.rstart..self.rend, 0);
                self.rend -= self.rstart;
                self.rstart = 0;
            }
            let space = self.rbuf.len() - self.rend;
            if space == 0 {
                // Full of unparsed input (process() grows the buffer for a large body
                // it has accepted); come back after parsing made room.
                return Ok(if got { Step::Progress } else { Step::Idle });
            }
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(Step::Progress);
                }
                Ok(n) => {
                    self.rend += n;
                    got = true;
                    if n < space {
                        self.may_read = false;
                        return Ok(Step::Progress);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.may_read = false;
                    return Ok(if got { Step::Progress } else { Step::Idle });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn flush(&mut self) -> io::Result<Step> {
        let mut wrote = false;
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    wrote = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        Ok(if wrote { Step::Progress } else { Step::Idle })
    }

    /// Parse and answer every complete request in the buffer. Returns whether any was consumed.
    fn process(&mut self, ctx: &mut Ctx) -> bool {
        let mut consumed = false;
        while !self.waiting_tx && !self.closing && self.rstart < self.rend {
            if self.wbuf.len() - self.wpos > WBUF_HIGH {
                break; // the peer is not reading; resume when the socket drains
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            let input = &self.rbuf[self.rstart..self.rend];
            let head_len = match req.parse(input) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => {
                    if input.len() >= MAX_HEAD {
                        self.respond(431, b"", true, ctx.date);
                    } else if self.rstart + MAX_HEAD > self.rbuf.len() && self.rstart > 0 {
                        self.compact();
                    }
                    break;
                }
                Err(_) => {
                    self.respond(400, b"", true, ctx.date);
                    break;
                }
            };

            // Framing headers.
            let mut content_length: Option<usize> = None;
            let mut close = req.version == Some(0);
            let mut bad = false;
            let mut chunked = false;
            for h in req.headers.iter() {
                if h.name.eq_ignore_ascii_case("content-length") {
                    let v = std::str::from_utf8(h.value).ok().and_then(|s| s.trim().parse::<usize>().ok());
                    match (v, content_length) {
                        (Some(v), None) => content_length = Some(v),
                        (Some(v), Some(old)) if v == old => {}
                        _ => bad = true,
                    }
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = true;
                } else if h.name.eq_ignore_ascii_case("connection") {
                    for tok in h.value.split(|&b| b == b',') {
                        let tok = tok.trim_ascii();
                        if tok.eq_ignore_ascii_case(b"close") {
                            close = true;
                        } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                            close = false;
                        }
                    }
                }
            }
            if bad {
                self.respond(400, b"", true, ctx.date);
                break;
            }
            if chunked {
                // Not needed by the API's clients; refuse rather than mis-frame.
                self.respond(501, b"", true, ctx.date);
                break;
            }
            let body_len = content_length.unwrap_or(0);
            if body_len > MAX_BODY {
                self.respond(413, b"", true, ctx.date);
                break;
            }
            let total = head_len + body_len;
            if input.len() < total {
                // Wait for the rest of the body; make sure it fits.
                if self.rstart + total > self.rbuf.len() {
                    self.compact();
                    if total > self.rbuf.len() {
                        self.rbuf.resize(total.next_power_of_two(), 0);
                    }
                }
                break;
            }

            let route = route(req.method.unwrap_or(""), req.path.unwrap_or(""));
            self.rstart += total;
            consumed = true;
            match route {
                Route::Get => self.respond(200, BODY, close, ctx.date),
                Route::Put => {
                    // The body is input[head_len..total]; a real node would copy it into the write.
                    if ctx.tx {
                        ctx.to_tx.push(TxReq { worker: ctx.worker, token: self.token, generation: self.generation });
                        self.waiting_tx = true;
                        self.close_after_tx = close;
                    } else {
                        self.respond(201, b"", close, ctx.date);
                    }
                }
                Route::Status(code) => self.respond(code, b"", close, ctx.date),
            }
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        consumed
    }

    fn compact(&mut self) {
        if self.rstart > 0 {
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
    }

    fn respond(&mut self, code: u16, body: &[u8], close: bool, date: &[u8]) {
        let status: &[u8] = match code {
            200 => b"HTTP/1.1 200 OK\r\n",
            201 => b"HTTP/1.1 201 Created\r\n",
            400 => b"HTTP/1.1 400 Bad Request\r\n",
            404 => b"HTTP/1.1 404 Not Found\r\n",
            405 => b"HTTP/1.1 405 Method Not Allowed\r\n",
            413 => b"HTTP/1.1 413 Payload Too Large\r\n",
            431 => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
            _ => b"HTTP/1.1 501 Not Implemented\r\n",
        };
        let w = &mut self.wbuf;
        w.extend_from_slice(status);
        w.extend_from_slice(b"content-length: ");
        push_decimal(w, body.len());
        w.extend_from_slice(b"\r\ndate: ");
        w.extend_from_slice(date);
        if close {
            w.extend_from_slice(b"\r\nconnection: close");
            self.closing = true;
        }
        w.extend_from_slice(b"\r\n\r\n");
        w.extend_from_slice(body);
    }
}

enum Route {
    Get,
    Put,
    Status(u16),
}

fn route(method: &str, target: &str) -> Route {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    if path != "/v0/entity" {
        return Route::Status(404);
    }
    let has_id = query.split('&').any(|kv| kv.strip_prefix("id=").is_some_and(|v| !v.is_empty()));
    match method {
        _ if !has_id => Route::Status(400),
        "GET" => Route::Get,
        "PUT" => Route::Put,
        _ => Route::Status(405),
    }
}

fn push_decimal(w: &mut Vec<u8>, mut n: usize) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    w.extend_from_slice(&tmp[i..]);
}

/// IMF-fixdate for the `date` header, formatted once per second (hyper does the same).
struct DateCache {
    secs: u64,
    text: [u8; 29],
}

impl DateCache {
    fn new() -> DateCache {
        let mut d = DateCache { secs: u64::MAX, text: [b' '; 29] };
        d.refresh();
        d
    }

    fn get(&self) -> &[u8] {
        &self.text
    }

    fn refresh(&mut self) {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        if secs == self.secs {
            return;
        }
        self.secs = secs;
        let days = (secs / 86400) as i64;
        let sod = secs % 86400;
        let (y, m, d) = civil_from_days(days);
        const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MON: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let s = format!(
            "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
            WD[(days % 7) as usize],
            d,
            MON[(m - 1) as usize],
            y,
            sod / 3600,
            sod / 60 % 60,
            sod % 60
        );
        self.text.copy_from_slice(&s.as_bytes()[..29]);
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
