//! A raw RESP2 connection to a node (or to `redis-server`) that reads each
//! reply as its bytes, for tests that compare replies byte for byte, and a
//! node started with a RESP listener.

use super::Node;
use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpStream;
use std::time::Duration;

/// Bound on every reply.
pub const WAIT: Duration = Duration::from_secs(30);

/// A node's arguments for the read-modify-write negative controls: two
/// network threads, the conditional write's check planted away.
pub const RMW_PLANTED: [&str; 4] = [
    "--net-threads",
    "2",
    "--debug-planted-bug",
    "rmw-skips-conflict-check",
];

/// One RESP2 connection that reads replies as raw bytes.
pub struct Raw {
    reader: BufReader<TcpStream>,
}

impl Raw {
    pub fn connect(addr: &str) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        Raw {
            reader: BufReader::new(stream),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).unwrap();
    }

    /// One reply's bytes, an array with its elements; a line cut by the
    /// connection's end is returned as read (the caller judges it).
    pub fn reply(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        if line.len() < 3 || !line.ends_with(b"\r\n") {
            return line;
        }
        let n = || -> i64 {
            std::str::from_utf8(&line[1..line.len() - 2])
                .unwrap()
                .parse()
                .unwrap()
        };
        match line.first() {
            Some(b'$') if n() >= 0 => {
                let mut body = vec![0; n() as usize + 2];
                self.reader.read_exact(&mut body).unwrap();
                line.extend_from_slice(&body);
            }
            Some(b'*') if n() > 0 => {
                for _ in 0..n() {
                    let element = self.reply();
                    line.extend_from_slice(&element);
                }
            }
            _ => {}
        }
        line
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        self.send(&frame(args));
        self.reply()
    }
}

/// A command as a RESP array of bulk strings.
pub fn frame(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A node with a RESP listener (and `extra` options): it and that address.
pub fn start(extra: &[&str]) -> (Node, String) {
    let addr = super::fixed_resp_addr();
    let mut args = vec!["--resp-listen", addr.as_str()];
    args.extend_from_slice(extra);
    (Node::start(&args), addr)
}
