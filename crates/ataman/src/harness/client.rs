//! The workload's HTTP client: blocking HTTP/1.1 with keep-alive, one
//! connection per node per client thread, every exchange bounded by the
//! request timeout, and the answer classified as the history needs it.
//!
//! The classification (docs/RELIABILITY.md):
//!
//! | what happened | read | write |
//! | --- | --- | --- |
//! | 2xx (a read's 404 too) | ok | ok |
//! | no connection | fail | fail (never sent) |
//! | sent, then an I/O error or the connection closed | fail | maybe |
//! | a 5xx, or any other status | fail | maybe |
//! | nothing within the timeout | hang | hang (maybe applied) |
//!
//! A connection is dropped after any failure and after an answer with
//! `Connection: close`; the next request opens a new one (to the node's
//! current address: a restarted node listens on a new port).

use super::history::OpOutcome;
use crate::http_client::response::{ResponseError, read_response};
use ataman_node::tls::blocking::BlockingStream;
use std::io::{self, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Largest error body kept in the history, bytes (the node's are one line).
pub const ERROR_BODY_BYTES_MAX: usize = 512;

/// One request's result, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// How it ended.
    pub outcome: OpOutcome,
    /// The status, if an answer came.
    pub status: Option<u16>,
    /// The body of a 200 (a read's value).
    pub body: Option<Vec<u8>>,
    /// The error body or the I/O error.
    pub error: Option<String>,
    /// The answer's `X-Ataman-Version`, if it named one.
    pub version: Option<u64>,
}

/// A keep-alive connection to one node.
struct Connection {
    addr: SocketAddr,
    /// The socket (or TLS over it), read through the buffer, written through `get_mut`.
    reader: BufReader<BlockingStream>,
}

/// A client's connections, one per node.
pub struct Client {
    connections: Vec<Option<Connection>>,
    timeout: Duration,
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn short(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(&text[..text.len().min(ERROR_BODY_BYTES_MAX)]);
    text.trim_end().to_owned()
}

impl Client {
    /// A client for `nodes` nodes whose requests give up after `timeout`.
    pub fn new(nodes: usize, timeout: Duration) -> Client {
        Client {
            connections: (0..nodes).map(|_| None).collect(),
            timeout,
        }
    }

    /// Sends `method target` (with `body` for a write) to node `node` at
    /// `addr`; `write` says how a lost answer counts (maybe, not fail).
    pub fn send(
        &mut self,
        node: usize,
        addr: SocketAddr,
        method: &str,
        target: &str,
        body: Option<&[u8]>,
        write: bool,
    ) -> Answer {
        let lost = if write {
            OpOutcome::Maybe
        } else {
            OpOutcome::Fail
        };
        let started = Instant::now();
        let slot = &mut self.connections[node];
        if slot.as_ref().is_some_and(|c| c.addr != addr) {
            *slot = None;
        }
        if slot.is_none() {
            match connect(addr, self.timeout) {
                Ok(c) => *slot = Some(c),
                Err(e) => {
                    return Answer {
                        outcome: if is_timeout(&e) {
                            OpOutcome::Hang
                        } else {
                            OpOutcome::Fail
                        },
                        status: None,
                        body: None,
                        error: Some(format!("connect to {addr}: {e}")),
                        version: None,
                    };
                }
            }
        }
        let Some(conn) = slot.as_mut() else {
            return Answer {
                outcome: OpOutcome::Fail,
                status: None,
                body: None,
                error: Some("no connection".into()),
                version: None,
            };
        };
        let result = exchange(conn, method, target, body, self.timeout, started);
        let answer = match result {
            Ok(response) => {
                let status = response.status;
                let keep = !response.closes_connection();
                let ok = (200..300).contains(&status) || (!write && status == 404);
                let answer = Answer {
                    outcome: if ok { OpOutcome::Ok } else { lost },
                    status: Some(status),
                    body: (status == 200).then_some(response.body.clone()),
                    error: (!ok).then(|| short(&response.body)),
                    version: response
                        .header("X-Ataman-Version")
                        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok()),
                };
                if !keep {
                    *slot = None;
                }
                return answer;
            }
            Err(Failure::Timeout(e)) => Answer {
                outcome: OpOutcome::Hang,
                status: None,
                body: None,
                error: Some(format!("no answer within {:?}: {e}", self.timeout)),
                version: None,
            },
            Err(Failure::Other(e)) => Answer {
                outcome: lost,
                status: None,
                body: None,
                error: Some(e),
                version: None,
            },
        };
        *slot = None;
        answer
    }
}

fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<Connection> {
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    let url = crate::http_client::url::BaseUrl {
        host: addr.ip().to_string(),
        port: addr.port(),
        https: crate::http_client::tls::enabled(),
    };
    let stream = crate::http_client::exchange::secure(&url, stream, timeout)
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(Connection {
        addr,
        reader: BufReader::new(stream),
    })
}

enum Failure {
    Timeout(String),
    Other(String),
}

fn exchange(
    conn: &mut Connection,
    method: &str,
    target: &str,
    body: Option<&[u8]>,
    timeout: Duration,
    started: Instant,
) -> Result<crate::http_client::response::Response, Failure> {
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {}\r\n{}",
        conn.addr,
        crate::http_client::token::header_line()
    );
    if let Some(body) = body {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    let mut bytes = request.into_bytes();
    if let Some(body) = body {
        bytes.extend_from_slice(body);
    }
    let io_failure = |e: io::Error| {
        if is_timeout(&e) {
            Failure::Timeout(e.to_string())
        } else {
            Failure::Other(e.to_string())
        }
    };
    let stream = conn.reader.get_mut();
    stream
        .write_all(&bytes)
        .and_then(|()| stream.flush())
        .map_err(io_failure)?;
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    conn.reader
        .get_ref()
        .tcp()
        .set_read_timeout(Some(left))
        .map_err(io_failure)?;
    // A 1xx is not expected (no Expect header); skip a few, bounded.
    for _ in 0..=crate::http_client::exchange::INFORMATIONAL_RESPONSES_MAX {
        let response = read_response(&mut conn.reader).map_err(|e| match e {
            ResponseError::Io(e) => io_failure(e),
            other => Failure::Other(other.to_string()),
        })?;
        if started.elapsed() > timeout {
            return Err(Failure::Timeout(format!(
                "answered after {:?}",
                started.elapsed()
            )));
        }
        if !(100..200).contains(&response.status) {
            return Ok(response);
        }
    }
    Err(Failure::Other("too many informational answers".into()))
}

/// One request on a new connection (status checks, repair, metrics).
pub fn request_once(
    addr: SocketAddr,
    method: &str,
    target: &str,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let url = crate::http_client::url::BaseUrl {
        host: addr.ip().to_string(),
        port: addr.port(),
        https: crate::http_client::tls::enabled(),
    };
    crate::http_client::exchange::exchange(&url, method, target, None, timeout)
        .map(|r| (r.status, r.body))
        .map_err(|e| e.to_string())
}
