//! A TCP proxy that injects link faults between test processes.
//!
//! A [`FaultProxy`] listens on `127.0.0.1:0` and forwards every accepted
//! connection to a target address. At any moment the link can pass bytes,
//! delay them, black-hole them or be cut ([`LinkMode`]), in both directions
//! or in one ([`Direction`]). Mode changes apply to connections already open,
//! within about two [`POLL_INTERVAL`]s.
//!
//! The cluster tests put one proxy in front of each node and give the
//! proxies' URLs to `--cluster`, so faults on proxy `i` hit every peer
//! connection *to* node `i`, while the test talks to node `i` directly.
//!
//! Layout: this file holds the proxy, its listener thread and the shared
//! state; `pump` moves the bytes of one direction of one connection.
//!
//! Bounds: at most [`CONNECTIONS_MAX`] connections, exactly two threads each
//! (one per direction; one for a black hole without a target), reads of at
//! most [`CHUNK_BYTES_MAX`], at most [`DELAY_QUEUE_BYTES_MAX`] waiting per
//! direction, and a bounded join when the proxy is dropped.

mod pump;
#[cfg(test)]
mod tests;

use std::io;
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
// Locked ignoring poisoning: a panic while holding a lock leaves plain
// data that is still consistent.
use ataman_testkit::lock::lock;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often every thread of the proxy looks at the mode and the stop flag:
/// the read timeout of its sockets and the sleep of its listener.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Open connections at most; more are accepted and closed at once.
pub const CONNECTIONS_MAX: usize = 256;
/// Bound on connecting to the target for a newly accepted connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on joining every thread when the proxy is dropped.
pub const JOIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest read, and so the largest chunk a delay is measured for.
pub const CHUNK_BYTES_MAX: usize = 64 * 1024;
/// Bytes waiting out a delay in one direction of one connection, at most;
/// past it the proxy stops reading that direction (back pressure).
pub const DELAY_QUEUE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// What the link does to the bytes of a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkMode {
    /// Forward at once.
    Pass,
    /// Forward each chunk no earlier than this long after it was read,
    /// in order (a chunk also waits for the ones before it).
    Delay(Duration),
    /// A black hole: connections stay open, everything is read and
    /// discarded (bytes still waiting out a delay too); new connections are
    /// accepted and black-holed. An end of stream seen meanwhile is passed
    /// on when the mode changes back.
    Drop,
    /// Close every current connection, and every new one right after
    /// accepting it. A TCP connection cannot be cut one way: a cut in
    /// either direction closes the whole connection.
    Cut,
}

/// One direction of a proxied connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the connecting client to the target.
    ToTarget,
    /// From the target back to the client.
    FromTarget,
}

impl Direction {
    fn index(self) -> usize {
        match self {
            Direction::ToTarget => 0,
            Direction::FromTarget => 1,
        }
    }
}

/// Counters of a proxy since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Connections accepted (including the ones closed at once).
    pub connections_accepted: u64,
    /// Connections closed at once because the target could not be reached.
    pub connections_refused: u64,
    /// Connections closed by a cut, at accept or later.
    pub connections_cut: u64,
    /// Connections whose threads are still running.
    pub connections_open: u64,
    /// Bytes written to the target.
    pub bytes_to_target: u64,
    /// Bytes written back to clients.
    pub bytes_from_target: u64,
    /// Bytes read and discarded (either direction).
    pub bytes_dropped: u64,
}

/// Counters shared by the threads; [`ProxyStats`] is a copy of them.
#[derive(Default)]
struct Counters {
    connections_accepted: AtomicU64,
    connections_refused: AtomicU64,
    connections_cut: AtomicU64,
    bytes_forwarded: [AtomicU64; 2],
    bytes_dropped: AtomicU64,
}

/// One proxied connection: its sockets (to close it from outside) and its
/// threads (to join them).
struct Link {
    sockets: Vec<TcpStream>,
    threads: Vec<JoinHandle<()>>,
}

impl Link {
    fn close(&self) {
        for socket in &self.sockets {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    fn finished(&self) -> bool {
        self.threads.iter().all(JoinHandle::is_finished)
    }
}

/// State shared by the proxy handle, its listener and its pumps.
///
/// Thread safety: every field is an atomic or behind its own mutex; no
/// thread holds two of the mutexes at once, and none holds one while
/// doing I/O other than `shutdown`.
struct Shared {
    /// Where new connections go; `None` closes them at once.
    target: Mutex<Option<SocketAddr>>,
    /// The mode of each direction, indexed by [`Direction::index`].
    modes: Mutex<[LinkMode; 2]>,
    /// Set once, when the proxy is dropped: every thread ends.
    stopped: AtomicBool,
    counters: Counters,
    /// Connections not yet reaped (reaped at accept and at drop).
    links: Mutex<Vec<Link>>,
}

impl Shared {
    fn mode(&self, direction: Direction) -> LinkMode {
        lock(&self.modes)[direction.index()]
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    fn count_forwarded(&self, direction: Direction, bytes: usize) {
        self.counters.bytes_forwarded[direction.index()].fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn count_dropped(&self, bytes: usize) {
        self.counters
            .bytes_dropped
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// True when either direction is cut (which closes whole connections).
    fn cut(&self) -> bool {
        lock(&self.modes).contains(&LinkMode::Cut)
    }

    /// Closes every open connection at once (a cut); the pumps would also
    /// notice the mode within a [`POLL_INTERVAL`], and count the cut.
    fn cut_all(&self) {
        for link in lock(&self.links).iter() {
            link.close();
        }
    }

    /// Takes a newly accepted connection: closes it, black-holes it, or
    /// connects it to the target and starts its two pumps.
    fn admit(self: &Arc<Self>, client: TcpStream) {
        self.counters
            .connections_accepted
            .fetch_add(1, Ordering::Relaxed);
        let modes = *lock(&self.modes);
        if modes.contains(&LinkMode::Cut) {
            self.counters
                .connections_cut
                .fetch_add(1, Ordering::Relaxed);
            return; // Dropping `client` closes it.
        }
        let mut links = lock(&self.links);
        links.retain(|link| !link.finished());
        if links.len() >= CONNECTIONS_MAX {
            self.counters
                .connections_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        drop(links);
        // Accepted sockets are blocking on Linux; say so rather than rely on it.
        if client.set_nonblocking(false).is_err() {
            return;
        }
        let _ = client.set_nodelay(true);
        let target = *lock(&self.target);
        let upstream = target.and_then(|t| TcpStream::connect_timeout(&t, CONNECT_TIMEOUT).ok());
        if let Some(upstream) = &upstream {
            let _ = upstream.set_nodelay(true);
        }
        let black_hole = modes == [LinkMode::Drop, LinkMode::Drop];
        if upstream.is_none() && !black_hole {
            self.counters
                .connections_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        if let Some(link) = self.start_link(client, upstream) {
            lock(&self.links).push(link);
        }
    }

    /// Starts the pumps of one connection; `None` (and the connection
    /// closed) if a socket cannot be duplicated or a thread not started.
    /// Dropping the sockets on a `None` closes the connection.
    fn start_link(
        self: &Arc<Self>,
        client: TcpStream,
        upstream: Option<TcpStream>,
    ) -> Option<Link> {
        let mut link = Link {
            sockets: vec![client.try_clone().ok()?],
            threads: Vec::with_capacity(2),
        };
        let mut pumps = Vec::with_capacity(2);
        match upstream {
            Some(upstream) => {
                link.sockets.push(upstream.try_clone().ok()?);
                let client_dup = client.try_clone().ok()?;
                let upstream_dup = upstream.try_clone().ok()?;
                pumps.push(pump::Pump::new(
                    Arc::clone(self),
                    Direction::ToTarget,
                    client,
                    Some(upstream),
                ));
                pumps.push(pump::Pump::new(
                    Arc::clone(self),
                    Direction::FromTarget,
                    upstream_dup,
                    Some(client_dup),
                ));
            }
            None => pumps.push(pump::Pump::new(
                Arc::clone(self),
                Direction::ToTarget,
                client,
                None,
            )),
        }
        for pump in pumps {
            let name = format!("faultproxy-{:?}", pump.direction());
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || pump.run())
            {
                Ok(handle) => link.threads.push(handle),
                Err(_) => {
                    // The pump already started (if any) ends on the closed sockets.
                    link.close();
                    break;
                }
            }
        }
        Some(link)
    }
}

/// The listener thread: accepts until the proxy stops.
fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stopped() {
        match listener.accept() {
            Ok((client, _)) => shared.admit(client),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // WouldBlock (nothing to accept) or a transient error such as
            // too many open files: look again after a pause.
            Err(_) => std::thread::sleep(POLL_INTERVAL),
        }
    }
}

/// Waits for `handle` until `deadline`; a thread still running then is
/// left detached (it ends on its own at its next look at the stop flag).
fn join_by(handle: JoinHandle<()>, deadline: Instant) {
    while !handle.is_finished() {
        if Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = handle.join();
}

/// A running proxy on `127.0.0.1`. Dropping it stops it: the listener
/// closes, every connection is closed and every thread joined (bounded by
/// [`JOIN_TIMEOUT`]).
///
/// Thread safety: the handle may be shared between threads (`&self`
/// methods only touch `Shared`).
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept_thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy on `127.0.0.1:0` forwarding to `target`, in [`LinkMode::Pass`].
    pub fn start(target: SocketAddr) -> io::Result<FaultProxy> {
        FaultProxy::start_with(Some(target))
    }

    /// Starts a proxy with no target yet: connections are closed at once
    /// until [`FaultProxy::set_target`] (so a URL can be handed out before
    /// the process behind it runs).
    pub fn start_without_target() -> io::Result<FaultProxy> {
        FaultProxy::start_with(None)
    }

    fn start_with(target: Option<SocketAddr>) -> io::Result<FaultProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target: Mutex::new(target),
            modes: Mutex::new([LinkMode::Pass; 2]),
            stopped: AtomicBool::new(false),
            counters: Counters::default(),
            links: Mutex::new(Vec::new()),
        });
        let accept_shared = Arc::clone(&shared);
        let accept_thread = std::thread::Builder::new()
            .name("faultproxy-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(FaultProxy {
            addr,
            shared,
            accept_thread: Some(accept_thread),
        })
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the proxy as a node URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where new connections go.
    pub fn target(&self) -> Option<SocketAddr> {
        *lock(&self.shared.target)
    }

    /// Sends new connections to `target` (a restarted node has a new
    /// port); open connections keep their old target.
    pub fn set_target(&self, target: SocketAddr) {
        *lock(&self.shared.target) = Some(target);
    }

    /// Sets the mode of both directions, for open connections too.
    pub fn set_mode(&self, mode: LinkMode) {
        *lock(&self.shared.modes) = [mode; 2];
        if mode == LinkMode::Cut {
            self.shared.cut_all();
        }
    }

    /// Sets the mode of one direction (a cut still closes whole connections).
    pub fn set_mode_one_way(&self, direction: Direction, mode: LinkMode) {
        lock(&self.shared.modes)[direction.index()] = mode;
        if mode == LinkMode::Cut {
            self.shared.cut_all();
        }
    }

    /// The mode of the link toward the target, which is the mode of both
    /// directions unless [`FaultProxy::set_mode_one_way`] made them differ.
    pub fn mode(&self) -> LinkMode {
        self.shared.mode(Direction::ToTarget)
    }

    /// The mode of one direction.
    pub fn mode_one_way(&self, direction: Direction) -> LinkMode {
        self.shared.mode(direction)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ProxyStats {
        let counters = &self.shared.counters;
        let open = lock(&self.shared.links)
            .iter()
            .filter(|link| !link.finished())
            .count();
        ProxyStats {
            connections_accepted: counters.connections_accepted.load(Ordering::Relaxed),
            connections_refused: counters.connections_refused.load(Ordering::Relaxed),
            connections_cut: counters.connections_cut.load(Ordering::Relaxed),
            connections_open: open as u64,
            bytes_to_target: counters.bytes_forwarded[0].load(Ordering::Relaxed),
            bytes_from_target: counters.bytes_forwarded[1].load(Ordering::Relaxed),
            bytes_dropped: counters.bytes_dropped.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Release);
        let deadline = Instant::now() + JOIN_TIMEOUT;
        // The listener first, so no link is added after the ones taken below.
        if let Some(handle) = self.accept_thread.take() {
            join_by(handle, deadline);
        }
        let links = std::mem::take(&mut *lock(&self.shared.links));
        for link in &links {
            link.close();
        }
        for link in links {
            for handle in link.threads {
                join_by(handle, deadline);
            }
        }
    }
}
