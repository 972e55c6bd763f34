//! The read-modify-write command rules (`net::resp::rmw`) side by side
//! with a real `redis-server`: for each case (the key's value before, a
//! command) both give byte-identical RESP2 replies and leave the same
//! value. The negative control is the comparison itself: a case whose
//! expected reply is planted wrong must be reported (checked below).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on failure

mod support;

use ataman_node::net::resp::encode::{Proto, encode};
use ataman_node::net::resp::rmw::{self, REDIS_BULK_BYTES_MAX, Write};
use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpStream;
use std::time::Duration;

/// Bound on every wait.
const WAIT: Duration = Duration::from_secs(30);

/// One RESP2 connection that reads replies as raw bytes.
struct Raw {
    reader: BufReader<TcpStream>,
}

impl Raw {
    fn connect(addr: &str) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        Raw {
            reader: BufReader::new(stream),
        }
    }

    /// Sends `args` and returns the reply's bytes (simple, error, integer
    /// or bulk replies: the ones these commands give).
    fn call(&mut self, args: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&out).unwrap();
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        if line.first() == Some(&b'$') {
            let n: i64 = std::str::from_utf8(&line[1..line.len() - 2])
                .unwrap()
                .parse()
                .unwrap();
            if n >= 0 {
                let mut body = vec![0; n as usize + 2];
                self.reader.read_exact(&mut body).unwrap();
                line.extend_from_slice(&body);
            }
        }
        line
    }
}

use support::rmw_cases::cases;

/// Our reply and value for a case.
fn ours(before: Option<&str>, args: &[&[u8]]) -> (Vec<u8>, Option<Vec<u8>>) {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let (reply, write) = match rmw::parse(&args) {
        Ok(Some((_, cmd))) => {
            let o = rmw::apply(before.map(str::as_bytes), &cmd, REDIS_BULK_BYTES_MAX);
            (o.reply, o.write)
        }
        Ok(None) => panic!("not a read-modify-write command: {args:?}"),
        Err(reply) => (reply, Write::Keep),
    };
    let mut bytes = Vec::new();
    encode(&mut bytes, &reply, Proto::Resp2);
    let after = match write {
        Write::Keep => before.map(|b| b.as_bytes().to_vec()),
        Write::Set(v) => Some(v),
        Write::Delete => None,
    };
    (bytes, after)
}

/// Runs every case on `redis` and on the rules; the differences, one line each.
fn differences(
    redis: &mut Raw,
    cases: &[(Option<&str>, Vec<&str>)],
    ours: impl Fn(Option<&str>, &[&[u8]]) -> (Vec<u8>, Option<Vec<u8>>),
) -> Vec<String> {
    let mut diffs = Vec::new();
    for (before, rest) in cases {
        redis.call(&[b"DEL", b"k"]);
        if let Some(b) = before {
            redis.call(&[b"SET", b"k", b.as_bytes()]);
        }
        let mut args: Vec<&[u8]> = vec![rest[0].as_bytes(), b"k"];
        args.extend(rest[1..].iter().map(|a| a.as_bytes()));
        let theirs = redis.call(&args);
        let theirs_after = redis.call(&[b"GET", b"k"]);
        let (reply, after) = ours(*before, &args);
        let mut after_bytes = Vec::new();
        match &after {
            Some(v) => ataman_node::net::resp::encode::bulk(&mut after_bytes, v),
            None => after_bytes.extend_from_slice(b"$-1\r\n"),
        }
        if reply != theirs || after_bytes != theirs_after {
            diffs.push(format!(
                "{before:?} {rest:?}: redis {:?} then {:?}, ours {:?} then {:?}",
                String::from_utf8_lossy(&theirs),
                String::from_utf8_lossy(&theirs_after),
                String::from_utf8_lossy(&reply),
                String::from_utf8_lossy(&after_bytes),
            ));
        }
    }
    diffs
}

/// Every case gives redis-server's reply and value, byte for byte.
#[test]
fn rmw_rules_match_redis_server() {
    let server = support::redis_server::start();
    let mut redis = Raw::connect(&server.addr);
    let diffs = differences(&mut redis, &cases(), ours);
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    // Negative control: rules that trim the stored value (a lenient
    // integer parser) differ from Redis on the leading-space cases, and
    // the comparison says so.
    let lenient = |before: Option<&str>, args: &[&[u8]]| ours(before.map(str::trim), args);
    let planted = differences(&mut redis, &cases(), lenient);
    assert!(
        planted.iter().any(|d| d.contains("\" 1\"")),
        "the planted difference was not reported: {planted:?}"
    );
}
