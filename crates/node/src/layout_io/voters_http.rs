//! The proposer's blocking calls over HTTP (`crate::cluster::propose::Voters`) and
//! whether an added node answers (`crate::cluster::change_request::Reach`).
//!
//! # Rules
//! - A voter is asked with `POST /v0/internal/layout`, the request's
//!   `crate::cluster::agreement_wire` bytes as the body, dialled like a cluster
//!   range's peer (`crate::range::peer_auth`: over TLS with `--tls-ca`,
//!   the cluster secret's proof bound to [`LAYOUT_PROTOCOL`]). Only a 200
//!   whose body decodes as a reply counts as an answer.
//! - This node, when it is a voter, is asked directly (`crate::cluster::learn`),
//!   not over HTTP.
//! - An added node is asked `GET /v0/status`; what it answers (or that it
//!   did not) is decided on by `crate::cluster::added_identity`.
//! - Every call is bounded by [`LAYOUT_CALL_TIMEOUT`] per socket operation
//!   (connect, each read, each write) and, whole, by
//!   [`LAYOUT_CALL_DEADLINE`]: past it a watchdog shuts the socket down and
//!   the call fails with [`CallError::Deadline`] (a node that drips its
//!   answer a byte at a time cannot hold a layout worker).
//! - An `https` URL is dialled over TLS only: without `--tls-ca` the call
//!   fails with [`CallError::NoTlsCa`] (never a plain-HTTP fallback).

use crate::auth::secret::ClusterSecret;
use crate::cluster::added_identity::{Heard, Mode as IdentityMode};
use crate::cluster::agreement_wire::{LAYOUT_PROTOCOL, MESSAGE_BYTES_MAX, Reply, Request};
use crate::cluster::change_request::Reach;
use crate::cluster::learn;
use crate::cluster::membership::Membership;
use crate::cluster::propose::Voters;
use std::io::Read;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The bound on each socket operation of one call to a node.
pub const LAYOUT_CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// The bound on one whole call to a node (connect, TLS, the proof's
/// round, the answer's head and body).
pub const LAYOUT_CALL_DEADLINE: Duration = Duration::from_secs(3);

/// Why a call to a node failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The whole call outlasted its deadline.
    #[error("{url}: no whole answer within {deadline:?}")]
    Deadline {
        /// The node's URL.
        url: String,
        /// The deadline spent.
        deadline: Duration,
    },
    /// An `https` URL, and this node has no `--tls-ca` to check it with.
    #[error("{url} is an https URL and this node has no --tls-ca to check it over TLS")]
    NoTlsCa {
        /// The node's URL.
        url: String,
    },
    /// Any other failure (resolve, connect, TLS, a cut or too long answer).
    #[error("{0}")]
    Failed(String),
}
/// The internal layout endpoint.
pub const INTERNAL_LAYOUT_PATH: &str = "/v0/internal/layout";

/// The calls of a proposer (or the gossip) on node `membership`.
pub struct HttpVoters<'a> {
    /// This node's membership (its own voter).
    pub membership: &'a Membership,
    /// The TLS client configuration, with `--tls-ca`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The cluster secret, when the cluster has one.
    pub secret: Option<&'a ClusterSecret>,
    /// The rule deciding on an added node's answer (planted only in the
    /// tests' negative controls).
    pub identity_mode: IdentityMode,
}

/// A response's status and body.
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body, whole.
    pub body: Vec<u8>,
}

impl HttpVoters<'_> {
    /// One exchange with the node at `url`: `method path` with `body`.
    fn exchange(
        &self,
        url: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<Response, CallError> {
        exchange(url, method, path, body, self.tls.clone(), self.secret)
    }
}

/// Shuts a call's socket down once its deadline passes, unless the call
/// ends first (dropping the watchdog wakes and joins its thread).
struct Watchdog {
    done: Option<mpsc::Sender<()>>,
    fired: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Watches `sock` (a clone of the call's socket) for `left`.
    fn start(sock: TcpStream, left: Duration) -> std::io::Result<Watchdog> {
        let (done, wait) = mpsc::channel::<()>();
        let fired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&fired);
        let thread = std::thread::Builder::new()
            .name("ataman-layout-deadline".into())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(left) {
                    flag.store(true, Ordering::SeqCst);
                    let _ = sock.shutdown(Shutdown::Both);
                }
            })?;
        Ok(Watchdog {
            done: Some(done),
            fired,
            thread: Some(thread),
        })
    }

    fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One exchange with the node at `url` as a peer: `method path` with
/// `body`, over TLS with `tls` for an `https` URL, proving `secret` (bound
/// to [`LAYOUT_PROTOCOL`]) when the node asks for it.
pub fn exchange(
    url: &str,
    method: &str,
    path: &str,
    body: &[u8],
    tls: Option<Arc<rustls::ClientConfig>>,
    secret: Option<&ClusterSecret>,
) -> Result<Response, CallError> {
    exchange_within(
        url,
        (method, path, body),
        tls,
        secret,
        Some(LAYOUT_CALL_DEADLINE),
    )
}

/// [`exchange`] with the whole call bounded by `deadline` (`None`: only
/// each socket operation, for the tests' control).
fn exchange_within(
    url: &str,
    (method, path, body): (&str, &str, &[u8]),
    tls: Option<Arc<rustls::ClientConfig>>,
    secret: Option<&ClusterSecret>,
    deadline: Option<Duration>,
) -> Result<Response, CallError> {
    let tls = match (url.starts_with("https://"), tls) {
        (true, None) => return Err(CallError::NoTlsCa { url: url.into() }),
        (true, tls) => tls,
        (false, _) => None,
    };
    let started = Instant::now();
    let host = crate::cluster::dial_address(url);
    let addr = host
        .to_socket_addrs()
        .map_err(|e| CallError::Failed(format!("resolve {host}: {e}")))?
        .next()
        .ok_or_else(|| CallError::Failed(format!("no address for {host}")))?;
    let sock = TcpStream::connect_timeout(&addr, LAYOUT_CALL_TIMEOUT)
        .map_err(|e| CallError::Failed(format!("connect {host}: {e}")))?;
    let watchdog = match deadline {
        Some(d) => {
            let left = d.saturating_sub(started.elapsed());
            let clone = sock
                .try_clone()
                .map_err(|e| CallError::Failed(format!("socket: {e}")))?;
            Some(
                Watchdog::start(clone, left)
                    .map_err(|e| CallError::Failed(format!("deadline thread: {e}")))?,
            )
        }
        None => None,
    };
    let result = call_on(sock, url, &host, (method, path, body), tls, secret);
    match (result, watchdog) {
        (Err(_), Some(w)) if w.fired() => Err(CallError::Deadline {
            url: url.into(),
            deadline: deadline.unwrap_or_default(),
        }),
        (result, _) => result.map_err(CallError::Failed),
    }
}

/// The call itself on the connected `sock`.
fn call_on(
    sock: TcpStream,
    url: &str,
    host: &str,
    (method, path, body): (&str, &str, &[u8]),
    tls: Option<Arc<rustls::ClientConfig>>,
    secret: Option<&ClusterSecret>,
) -> Result<Response, String> {
    {
        sock.set_read_timeout(Some(LAYOUT_CALL_TIMEOUT))
            .and_then(|()| sock.set_write_timeout(Some(LAYOUT_CALL_TIMEOUT)))
            .and_then(|()| sock.set_nodelay(true))
            .map_err(|e| format!("socket: {e}"))?;
        let request = |authorization: Option<&str>| {
            let mut head = format!(
                "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n",
                body.len()
            );
            if let Some(value) = authorization {
                head.push_str(&format!("Authorization: {value}\r\n"));
            }
            head.push_str("\r\n");
            let mut bytes = head.into_bytes();
            bytes.extend_from_slice(body);
            bytes
        };
        let (mut reader, head) = crate::range::peer_auth::open_bytes(
            sock,
            host,
            LAYOUT_CALL_TIMEOUT,
            tls,
            secret,
            LAYOUT_PROTOCOL,
            &request,
        )?;
        let (status, length) = status_and_length(&head);
        if length > MESSAGE_BYTES_MAX {
            return Err(format!("{url} answered {length} bytes"));
        }
        let mut body = vec![0u8; length];
        reader
            .read_exact(&mut body)
            .map_err(|e| format!("{url}: body: {e}"))?;
        Ok(Response { status, body })
    }
}

/// The status code and `Content-Length` of a response head (0 when absent).
fn status_and_length(head: &[u8]) -> (u16, usize) {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    (status, length)
}

impl Voters for HttpVoters<'_> {
    fn call(&self, url: &str, request: &Request) -> Option<Reply> {
        if url == self.membership.self_url() {
            return match learn::serve(self.membership, request.clone()) {
                Ok(reply) => Some(reply),
                Err(e) => {
                    tracing::warn!(error = %e, "layout agreement: this node's acceptor failed");
                    None
                }
            };
        }
        let response = self
            .exchange(url, "POST", INTERNAL_LAYOUT_PATH, &request.encode())
            .map_err(|e| tracing::debug!(voter = url, error = %e, "layout call failed"))
            .ok()?;
        if response.status != 200 {
            tracing::debug!(voter = url, status = response.status, "layout call refused");
            return None;
        }
        Reply::decode(&response.body).ok()
    }
}

/// What the added-node check heard from a call's outcome.
fn heard(outcome: Result<Response, CallError>) -> Heard {
    match outcome {
        Ok(r) => Heard::Status {
            code: r.status,
            body: r.body,
        },
        Err(CallError::NoTlsCa { .. }) => Heard::NoTlsCa,
        Err(why) => Heard::Nothing(why.to_string()),
    }
}

impl Reach for HttpVoters<'_> {
    fn introduce(&self, url: &str) -> Heard {
        heard(self.exchange(url, "GET", "/v0/status", b""))
    }

    fn identity_mode(&self) -> IdentityMode {
        self.identity_mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head's status and length, in any case and spacing; absent ones
    /// read as 0.
    #[test]
    fn head_fields() {
        let head = b"HTTP/1.1 409 Conflict\r\ncontent-LENGTH:  17\r\n\r\n";
        assert_eq!(status_and_length(head), (409, 17));
        assert_eq!(status_and_length(b"HTTP/1.1 200 OK\r\n\r\n"), (200, 0));
        assert_eq!(status_and_length(b"garbage"), (0, 0));
    }

    /// Bytes a dripping server sends after its status line, at most, when
    /// the caller does not hang up first (far past any deadline below).
    const DRIP_BYTES_MAX: usize = 600;
    /// Bytes the control's server sends before it closes.
    const DRIP_BYTES_CONTROL: usize = 20;
    /// Time between two dripped bytes.
    const DRIP_EVERY: Duration = Duration::from_millis(100);

    /// A server that answers one connection with a status line, then one
    /// header byte every [`DRIP_EVERY`] (each read of the caller gets
    /// something well within [`LAYOUT_CALL_TIMEOUT`]), `bytes` of them
    /// (or until the caller hangs up), then closes.
    fn dripping_server(bytes: usize) -> (String, std::thread::JoinHandle<()>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = conn.read(&mut request);
            if conn.write_all(b"HTTP/1.1 200 OK\r\n").is_err() {
                return;
            }
            for _ in 0..bytes {
                std::thread::sleep(DRIP_EVERY);
                if conn.write_all(b"X").is_err() {
                    return;
                }
            }
        });
        (url, server)
    }

    /// A node that drips its answer is cut at the whole call's deadline,
    /// with its own error: the call returns, so the layout worker running
    /// it is free again. Control: bounded only per read, the same server
    /// is waited on until it stops dripping, and the call fails otherwise.
    #[test]
    fn a_dripping_answer_fails_at_the_call_s_deadline() {
        let call = |deadline, bytes| {
            let (url, server) = dripping_server(bytes);
            let got = exchange_within(&url, ("GET", "/v0/status", b""), None, None, deadline);
            server.join().unwrap();
            (url, got)
        };
        let (url, got) = call(Some(Duration::from_millis(500)), DRIP_BYTES_MAX);
        assert_eq!(
            got.err(),
            Some(CallError::Deadline {
                url,
                deadline: Duration::from_millis(500)
            })
        );
        let (_, control) = call(None, DRIP_BYTES_CONTROL);
        assert!(
            matches!(&control, Err(CallError::Failed(why)) if why.contains("response head")),
            "{:?}",
            control.err()
        );
    }

    /// The added-node check of a dripping node is "does not answer", with
    /// the deadline as the reason (the check a proposer's worker runs).
    #[test]
    fn introducing_a_dripping_node_hears_nothing() {
        let (url, server) = dripping_server(DRIP_BYTES_MAX);
        let heard = heard(exchange(&url, "GET", "/v0/status", b"", None, None));
        server.join().unwrap();
        assert!(
            matches!(&heard, Heard::Nothing(why) if why.contains("no whole answer")),
            "{heard:?}"
        );
    }

    /// An `https` URL is never dialled over plain HTTP: without a TLS
    /// client configuration the call fails before connecting (the listener
    /// below is never accepted from), and the added-node check refuses it
    /// with its own reason.
    #[test]
    fn an_https_url_without_tls_is_refused_not_dialled_plain() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let got = exchange(&url, "GET", "/v0/status", b"", None, None);
        assert_eq!(got.err(), Some(CallError::NoTlsCa { url: url.clone() }));
        let got = heard(exchange(&url, "GET", "/v0/status", b"", None, None));
        assert_eq!(got, Heard::NoTlsCa);
        listener.set_nonblocking(true).unwrap();
        assert!(listener.accept().is_err(), "nothing was dialled");
        // Control: the same listener under http is dialled.
        let plain = url.replacen("https", "http", 1);
        let _ = exchange_within(
            &plain,
            ("GET", "/v0/status", b""),
            None,
            None,
            Some(Duration::from_millis(200)),
        );
        assert!(listener.accept().is_ok(), "the http URL was dialled");
    }
}
