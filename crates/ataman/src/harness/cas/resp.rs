//! A small blocking RESP client for the `cas` workload: one connection per
//! node, opened on demand and dropped after any failure (a late reply
//! must never be read as the next command's), every wait bounded by the
//! request timeout, every reply bounded in size.

use super::CasReply;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Bytes of one reply line (a simple string, an error, a length) at most.
pub const LINE_BYTES_MAX: usize = 4096;
/// Bytes of one bulk reply at most (the workload's values are short).
pub const BULK_BYTES_MAX: usize = 64 * 1024;

/// One connection per node.
pub struct RespClient {
    conns: Vec<Option<(SocketAddr, BufReader<TcpStream>)>>,
    timeout: Duration,
}

/// Why a reply could not be read (the connection is dropped).
fn broken(what: impl std::fmt::Display) -> String {
    format!("{what}")
}

impl RespClient {
    /// A client of `nodes` nodes whose every request is bounded by `timeout`.
    pub fn new(nodes: usize, timeout: Duration) -> RespClient {
        RespClient {
            conns: (0..nodes).map(|_| None).collect(),
            timeout,
        }
    }

    /// Sends `args` to node `node` at `addr` and reads its reply.
    pub fn call(&mut self, node: usize, addr: SocketAddr, args: &[Vec<u8>]) -> CasReply {
        let deadline = Instant::now() + self.timeout;
        if self.conns[node].as_ref().is_none_or(|(a, _)| *a != addr) {
            match TcpStream::connect_timeout(&addr, self.timeout) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    self.conns[node] = Some((addr, BufReader::new(stream)));
                }
                Err(e) => return CasReply::Unsent(format!("connect {addr}: {e}")),
            }
        }
        let Some((_, conn)) = self.conns[node].as_mut() else {
            return CasReply::Unsent("no connection".into());
        };
        let result = exchange(conn, args, deadline);
        match result {
            Ok(reply) => reply,
            Err(why) => {
                self.conns[node] = None;
                CasReply::NoReply(why)
            }
        }
    }
}

/// The command as a RESP array of bulk strings.
pub fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn left(deadline: Instant) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err("timed out".into())
    } else {
        Ok(left)
    }
}

fn exchange(
    conn: &mut BufReader<TcpStream>,
    args: &[Vec<u8>],
    deadline: Instant,
) -> Result<CasReply, String> {
    conn.get_ref()
        .set_write_timeout(Some(left(deadline)?))
        .map_err(broken)?;
    conn.get_mut().write_all(&encode(args)).map_err(broken)?;
    read_reply(conn, deadline)
}

/// Reads one reply (not an array) from `input`, bounded by `deadline`
/// (for a socket) and by [`LINE_BYTES_MAX`] and [`BULK_BYTES_MAX`].
pub fn read_reply<R: Read + TimeoutSet>(
    input: &mut BufReader<R>,
    deadline: Instant,
) -> Result<CasReply, String> {
    let line = read_line(input, deadline)?;
    let (head, rest) = line.split_at(1.min(line.len()));
    match head {
        "+" => Ok(CasReply::Simple(rest.to_owned())),
        "-" => Ok(CasReply::Error(rest.to_owned())),
        ":" => rest
            .parse()
            .map(CasReply::Int)
            .map_err(|_| format!("a bad integer reply {line:?}")),
        "$" => {
            let len: i64 = rest
                .parse()
                .map_err(|_| format!("a bad bulk length {line:?}"))?;
            if len < 0 {
                return Ok(CasReply::Nil);
            }
            let len = len as usize;
            if len > BULK_BYTES_MAX {
                return Err(format!("a bulk of {len} bytes, over {BULK_BYTES_MAX}"));
            }
            let mut body = vec![0u8; len + 2];
            input
                .get_ref()
                .set_timeout(left(deadline)?)
                .map_err(broken)?;
            input.read_exact(&mut body).map_err(broken)?;
            if !body.ends_with(b"\r\n") {
                return Err("a bulk not followed by CRLF".into());
            }
            body.truncate(len);
            Ok(CasReply::Bulk(String::from_utf8_lossy(&body).into_owned()))
        }
        "_" => Ok(CasReply::Nil),
        _ => Err(format!("an unexpected reply {line:?}")),
    }
}

/// A reader whose blocking reads can be bounded.
pub trait TimeoutSet {
    /// Bounds the next reads by `timeout`.
    fn set_timeout(&self, timeout: Duration) -> std::io::Result<()>;
}

impl TimeoutSet for TcpStream {
    fn set_timeout(&self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
}

impl TimeoutSet for &[u8] {
    fn set_timeout(&self, _: Duration) -> std::io::Result<()> {
        Ok(())
    }
}

fn read_line<R: Read + TimeoutSet>(
    input: &mut BufReader<R>,
    deadline: Instant,
) -> Result<String, String> {
    let mut line = Vec::new();
    loop {
        input
            .get_ref()
            .set_timeout(left(deadline)?)
            .map_err(broken)?;
        let buf = input.fill_buf().map_err(broken)?;
        if buf.is_empty() {
            return Err("connection closed".into());
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        line.extend_from_slice(&buf[..take]);
        input.consume(take);
        if line.len() > LINE_BYTES_MAX + 2 {
            return Err(format!("a reply line over {LINE_BYTES_MAX} bytes"));
        }
        if done {
            break;
        }
    }
    if !line.ends_with(b"\r\n") {
        return Err("a reply line not ended by CRLF".into());
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}
