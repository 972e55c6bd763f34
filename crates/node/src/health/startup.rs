//! The start-up responder: from the bind of `--listen` until the network
//! threads take the listener over, one thread answers `GET /livez` (200)
//! and `GET /readyz` (503 with the start's phase,
//! `super::readiness`), and every other request 503 with the same reason,
//! so a probe tells a node replaying a long write-ahead log from a dead one
//! (docs/API.md, "Health").
//!
//! # Why a thread of its own
//! The network threads need the engine (`crate::state::NodeShared` holds
//! it), and the engine exists only once its log is replayed. This thread
//! needs nothing but the listener and the phase: it accepts, and serves
//! each connection on a thread of its own with blocking I/O (bounded by
//! [`STARTUP_CONNECTION_MS_MAX`]), one request per connection
//! (`Connection: close`), so a silent connection (a port scanner, a load
//! balancer's TCP check) never delays a probe. At most
//! [`STARTUP_CONNECTIONS_MAX`] are served at once; one beyond is closed
//! at once and counted (`startup_refused`). It hands the listener back on
//! [`Responder::finish`]: a connection still in the accept queue then is
//! accepted by a network thread (none is lost between the two); one being
//! served finishes on its own thread within its bound.
//!
//! It says nothing but the phase: no key, no member, no configuration.
//! With TLS it speaks TLS (the listener's own server configuration).

use super::readiness::{self, NotReady, Phase};
use crate::http::Status;
use crate::http::request::{Limits, Method, Parsed, parse_head};
use crate::http::response::{Extra, Persist, names_head, strip_body, write_text};
use crate::tls::blocking::BlockingStream;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The line a starting node prints once the responder answers, before
/// the address (`http://HOST:PORT` or `https://…`); the
/// `ataman: listening on` line follows once the node serves.
pub const STARTING_PREFIX: &str = "ataman: starting; /livez and /readyz answer on ";
/// Longest request head read, in bytes.
pub const STARTUP_HEAD_BYTES_MAX: usize = 8 * 1024;
/// Longest time one connection is served, in milliseconds (a client
/// slower than that is dropped; the next one waits at most this long).
pub const STARTUP_CONNECTION_MS_MAX: u64 = 2_000;
/// `Retry-After` of the 503s, in seconds (as the network threads').
pub const STARTUP_RETRY_AFTER_SEC: u32 = 1;
/// Connections served at once; one more is closed at once (counted).
pub const STARTUP_CONNECTIONS_MAX: usize = 64;
/// Pause between two looks at the accept queue, in milliseconds.
pub const STARTUP_ACCEPT_POLL_MS: u64 = 10;

/// The running responder.
///
/// # Thread safety
/// The phase and the stop flag are atomics the starting thread writes
/// and the responder reads; the listener moves into the responder's
/// thread and back out through its join.
pub struct Responder {
    phase: Arc<AtomicU8>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<TcpListener>,
}

fn phase_code(phase: Phase) -> u8 {
    match phase {
        Phase::Replaying => 0,
        Phase::Starting => 1,
        Phase::Serving => 2,
    }
}

fn phase_of(code: u8) -> Phase {
    match code {
        0 => Phase::Replaying,
        1 => Phase::Starting,
        _ => Phase::Serving,
    }
}

/// Starts answering on `listener` (already bound), TLS with `tls`, in
/// phase [`Phase::Replaying`]; with `answering` false (the planted bug
/// `no-startup-responder`), holds the listener without accepting.
pub fn start(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    answering: bool,
) -> std::io::Result<Responder> {
    listener.set_nonblocking(true)?;
    let phase = Arc::new(AtomicU8::new(phase_code(Phase::Replaying)));
    let stop = Arc::new(AtomicBool::new(false));
    let (p, s) = (Arc::clone(&phase), Arc::clone(&stop));
    let thread = std::thread::Builder::new()
        .name("ataman-startup".into())
        .spawn(move || {
            if answering {
                run(&listener, tls.as_ref(), &p, &s);
            } else {
                while !s.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(STARTUP_ACCEPT_POLL_MS));
                }
            }
            listener
        })?;
    Ok(Responder {
        phase,
        stop,
        thread,
    })
}

impl Responder {
    /// The start moved on to `phase`.
    pub fn set_phase(&self, phase: Phase) {
        self.phase.store(phase_code(phase), Ordering::Release);
    }

    /// Stops accepting and gives the listener back; connections being
    /// served finish on their own threads (each within
    /// [`STARTUP_CONNECTION_MS_MAX`]).
    pub fn finish(self) -> std::io::Result<TcpListener> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .map_err(|_| std::io::Error::other("the start-up responder panicked"))
    }
}

/// Whether one more connection may be served while `active` are: the
/// bound [`STARTUP_CONNECTIONS_MAX`].
fn admits(active: usize) -> bool {
    active < STARTUP_CONNECTIONS_MAX
}

/// Decrements the count of connections being served when dropped.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn run(
    listener: &TcpListener,
    tls: Option<&Arc<rustls::ServerConfig>>,
    phase: &AtomicU8,
    stop: &AtomicBool,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut refused: u64 = 0;
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((sock, _)) => {
                // Rules 1 and 2 of `super::readiness`; past them (serving)
                // the network threads take over at once.
                let reason = match phase_of(phase.load(Ordering::Acquire)) {
                    Phase::Replaying => NotReady::Replaying,
                    Phase::Starting | Phase::Serving => NotReady::Starting,
                };
                if !admits(active.load(Ordering::Acquire)) {
                    refused += 1;
                    if refused == 1 || refused.is_power_of_two() {
                        tracing::warn!(
                            startup_refused = refused,
                            "start-up responder: {STARTUP_CONNECTIONS_MAX} connections \
                             served at once; closed one more"
                        );
                    }
                    drop(sock);
                    continue;
                }
                active.fetch_add(1, Ordering::AcqRel);
                let slot = Slot(Arc::clone(&active));
                let tls = tls.cloned();
                let spawned = std::thread::Builder::new()
                    .name("ataman-startup-conn".into())
                    .spawn(move || {
                        let _slot = slot;
                        if let Err(e) = serve_one(sock, tls.as_ref(), reason) {
                            tracing::debug!(error = %e, "start-up responder: a connection failed");
                        }
                    });
                if let Err(e) = spawned {
                    // The closure (socket and slot) was dropped with it.
                    tracing::warn!(error = %e, "start-up responder: cannot start a thread");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(STARTUP_ACCEPT_POLL_MS));
            }
            Err(e) => {
                tracing::warn!(error = %e, "start-up responder: accept failed");
                std::thread::sleep(Duration::from_millis(STARTUP_ACCEPT_POLL_MS));
            }
        }
    }
}

/// Reads one request head from `sock` and answers it ([`answer`]).
fn serve_one(
    sock: TcpStream,
    tls: Option<&Arc<rustls::ServerConfig>>,
    reason: NotReady,
) -> std::io::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(STARTUP_CONNECTION_MS_MAX);
    sock.set_nonblocking(false)?;
    let slice = Duration::from_millis(STARTUP_CONNECTION_MS_MAX / 4);
    sock.set_read_timeout(Some(slice))?;
    sock.set_write_timeout(Some(slice))?;
    let mut stream = match tls {
        Some(config) => {
            let conn =
                rustls::ServerConnection::new(Arc::clone(config)).map_err(std::io::Error::other)?;
            BlockingStream::tls(conn.into(), sock)
        }
        None => BlockingStream::Plain(sock),
    };
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let limits = Limits {
        header_bytes_max: STARTUP_HEAD_BYTES_MAX,
        body_bytes_max: 0,
    };
    let mut out = loop {
        if Instant::now() > deadline {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
        match parse_head(&head, limits) {
            Parsed::Partial => continue,
            Parsed::Error(_) => break answer(None, reason),
            Parsed::Head(h) => break answer(Some((&h.method, h.path)), reason),
        }
    };
    if names_head(&head) {
        // A HEAD is answered as a GET, its head only (RFC 9110 9.3.2).
        strip_body(&mut out, 0);
    }
    stream.write_all(&out)?;
    stream.flush()
}

/// The response to a request for `path` by `method` (`None`: a head that
/// did not parse) while the start is at `reason`.
pub fn answer(request: Option<(&Method, &[u8])>, reason: NotReady) -> Vec<u8> {
    use crate::api::Endpoint;
    let mut out = Vec::with_capacity(256);
    let endpoint = request.and_then(|(_, path)| crate::api::endpoint(path));
    let get = request.is_some_and(|(m, _)| *m == Method::Get);
    let unavailable = Extra {
        retry_after_sec: Some(STARTUP_RETRY_AFTER_SEC),
        ..Extra::default()
    };
    match endpoint {
        Some(Endpoint::Livez) if get => write_text(
            &mut out,
            Status::Ok,
            Extra::default(),
            Persist::Close,
            readiness::LIVE_TEXT,
        ),
        Some(Endpoint::Livez | Endpoint::Readyz) if !get => write_text(
            &mut out,
            Status::MethodNotAllowed,
            Extra {
                allow: Some("GET, HEAD"),
                ..Extra::default()
            },
            Persist::Close,
            "method not allowed; allowed: GET, HEAD",
        ),
        _ => write_text(
            &mut out,
            Status::Unavailable,
            unavailable,
            Persist::Close,
            &reason.line(),
        ),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &[u8]) -> String {
        String::from_utf8_lossy(out).into_owned()
    }

    /// `/livez` is 200, `/readyz` and every other path 503 with the
    /// phase's reason, a wrong method on the health paths 405.
    #[test]
    fn answers_by_path() {
        let live = text(&answer(
            Some((&Method::Get, b"/livez")),
            NotReady::Replaying,
        ));
        assert!(live.starts_with("HTTP/1.1 200 OK\r\n"), "{live}");
        assert!(live.ends_with("\r\n\r\nlive\n"), "{live}");
        let ready = text(&answer(
            Some((&Method::Get, b"/readyz")),
            NotReady::Replaying,
        ));
        assert!(ready.starts_with("HTTP/1.1 503 "), "{ready}");
        assert!(
            ready.ends_with("replaying: replaying the write-ahead log\n"),
            "{ready}"
        );
        assert!(ready.contains("Retry-After: 1\r\n"), "{ready}");
        let other = text(&answer(
            Some((&Method::Get, b"/v0/entity")),
            NotReady::Starting,
        ));
        assert!(other.starts_with("HTTP/1.1 503 "), "{other}");
        assert!(other.contains("starting: "), "{other}");
        let put = text(&answer(
            Some((&Method::Other("PUT".into()), b"/livez")),
            NotReady::Replaying,
        ));
        assert!(put.starts_with("HTTP/1.1 405 "), "{put}");
        assert!(text(&answer(None, NotReady::Replaying)).starts_with("HTTP/1.1 503 "));
    }

    /// A real socket: answered during the phase set, then the listener
    /// comes back and still holds a connection made meanwhile.
    #[test]
    fn serves_then_hands_the_listener_back() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let responder = start(listener, None, true).unwrap();
        let ask = |path: &str| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut got = String::new();
            s.read_to_string(&mut got).unwrap();
            got
        };
        assert!(ask("/livez").starts_with("HTTP/1.1 200 "));
        assert!(ask("/readyz").contains("replaying: "));
        responder.set_phase(Phase::Starting);
        assert!(ask("/readyz").contains("starting: "));
        let listener = responder.finish().unwrap();
        let _waiting = TcpStream::connect(addr).unwrap();
        listener.set_nonblocking(false).unwrap();
        assert!(listener.accept().is_ok());
    }

    /// Whether `sock` (nonblocking, the server sends nothing unasked)
    /// was closed by the server: end of file or a reset, not "would block".
    fn closed_by_server(sock: &mut TcpStream) -> bool {
        sock.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        !matches!(sock.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    fn probe_livez(addr: std::net::SocketAddr) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(s, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        got
    }

    /// Silent connections made first do not hold a probe back: its answer
    /// arrives while every one of them is still open (a responder serving
    /// one at a time answers it only after closing each at its bound).
    #[test]
    fn idle_connections_do_not_delay_a_probe() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let responder = start(listener, None, true).unwrap();
        let mut idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
        assert!(probe_livez(addr).starts_with("HTTP/1.1 200 "));
        for (i, sock) in idle.iter_mut().enumerate() {
            assert!(
                !closed_by_server(sock),
                "idle connection {i} was closed before the probe's answer"
            );
        }
        drop(responder.finish().unwrap());
    }

    /// At the bound, one more connection is closed at once, while the
    /// ones served are still open; once they go, probes are answered.
    #[test]
    fn beyond_the_bound_is_closed_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let responder = start(listener, None, true).unwrap();
        let mut idle: Vec<TcpStream> = (0..STARTUP_CONNECTIONS_MAX)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let mut extra = TcpStream::connect(addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut got = Vec::new();
        // End of file or a reset: closed without an answer.
        let _ = extra.read_to_end(&mut got);
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        for (i, sock) in idle.iter_mut().enumerate() {
            assert!(!closed_by_server(sock), "served connection {i} was closed");
        }
        drop(idle);
        // The slots free as the served threads see end of file; a
        // bounded number of tries.
        let mut answered = false;
        for _ in 0..200 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let _ = write!(s, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut got = String::new();
            let _ = s.read_to_string(&mut got);
            if got.starts_with("HTTP/1.1 200 ") {
                answered = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(STARTUP_ACCEPT_POLL_MS));
        }
        assert!(
            answered,
            "no probe answered after the idle connections closed"
        );
        drop(responder.finish().unwrap());
    }

    #[test]
    fn admits_up_to_the_bound() {
        assert!(admits(0));
        assert!(admits(STARTUP_CONNECTIONS_MAX - 1));
        assert!(!admits(STARTUP_CONNECTIONS_MAX));
    }
}
