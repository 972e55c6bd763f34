//! RESP replies, in RESP2 or RESP3 (after `HELLO 3`): the [`Reply`] tree
//! the command table and the combiner build, and its encoder.
//!
//! The two protocols differ only where RESP3 has a type of its own: a null
//! (`$-1` / `*-1` in RESP2, `_` in RESP3), a map (a flat array of
//! alternating keys and values in RESP2, `%` in RESP3), and a set (an
//! array in RESP2, `~` in RESP3).

use ataman_engine::coding::push_decimal;

/// The protocol a connection speaks (`HELLO 2|3`; 2 until told).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// RESP2.
    Resp2,
    /// RESP3.
    Resp3,
}

/// A reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+text` (no CR or LF in it).
    Simple(&'static str),
    /// `-text`: an error line; its first word is the error code (`ERR`,
    /// `NOPROTO`, …). CR and LF are replaced by spaces when encoded.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$len\r\nbytes`.
    Bulk(Vec<u8>),
    /// The null bulk (a missing value).
    Null,
    /// The null array (`*-1` in RESP2, `_` in RESP3): `EXEC` aborted by
    /// a watched key's change.
    NullArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map (a flat array in RESP2).
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    /// `-ERR text`.
    pub fn err(text: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {text}"))
    }

    /// A bulk of `text`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(text.into().into_bytes())
    }
}

/// `+OK`.
pub const OK: Reply = Reply::Simple("OK");

/// Appends `reply` in `proto` to `out`.
pub fn encode(out: &mut Vec<u8>, reply: &Reply, proto: Proto) {
    match reply {
        Reply::Simple(text) => line(out, b'+', text.as_bytes()),
        Reply::Error(text) => error(out, text),
        Reply::Int(n) => int(out, *n),
        Reply::Bulk(bytes) => bulk(out, bytes),
        Reply::Null => null(out, proto),
        Reply::NullArray => match proto {
            Proto::Resp2 => out.extend_from_slice(b"*-1\r\n"),
            Proto::Resp3 => out.extend_from_slice(b"_\r\n"),
        },
        Reply::Array(items) => {
            header(out, b'*', items.len());
            for item in items {
                encode(out, item, proto);
            }
        }
        Reply::Map(pairs) => {
            match proto {
                Proto::Resp2 => header(out, b'*', pairs.len() * 2),
                Proto::Resp3 => header(out, b'%', pairs.len()),
            }
            for (key, value) in pairs {
                encode(out, key, proto);
                encode(out, value, proto);
            }
        }
    }
}

fn line(out: &mut Vec<u8>, marker: u8, text: &[u8]) {
    out.push(marker);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

/// `-text\r\n`, CR and LF made spaces (an error is one line).
pub fn error(out: &mut Vec<u8>, text: &str) {
    out.push(b'-');
    out.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// `:n\r\n`.
pub fn int(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    if n < 0 {
        out.push(b'-');
    }
    push_decimal(out, n.unsigned_abs());
    out.extend_from_slice(b"\r\n");
}

/// `<marker>len\r\n`, the digits written in place (no `String` per
/// reply: every bulk has one).
fn header(out: &mut Vec<u8>, marker: u8, len: usize) {
    out.push(marker);
    push_decimal(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

/// `$len\r\nbytes\r\n`.
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A missing value: `$-1\r\n` in RESP2, `_\r\n` in RESP3.
pub fn null(out: &mut Vec<u8>, proto: Proto) {
    match proto {
        Proto::Resp2 => out.extend_from_slice(b"$-1\r\n"),
        Proto::Resp3 => out.extend_from_slice(b"_\r\n"),
    }
}

/// An array's header (its items follow).
pub fn array_header(out: &mut Vec<u8>, len: usize) {
    header(out, b'*', len);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply, proto: Proto) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, reply, proto);
        out
    }

    #[test]
    fn scalars_are_the_same_in_both_protocols_but_null() {
        for proto in [Proto::Resp2, Proto::Resp3] {
            assert_eq!(encoded(&OK, proto), b"+OK\r\n");
            assert_eq!(encoded(&Reply::Int(-3), proto), b":-3\r\n");
            assert_eq!(
                encoded(&Reply::Bulk(b"a\r\n\0".to_vec()), proto),
                b"$4\r\na\r\n\0\r\n"
            );
            assert_eq!(
                encoded(&Reply::err("bad\r\nthing"), proto),
                b"-ERR bad  thing\r\n"
            );
        }
        assert_eq!(encoded(&Reply::Null, Proto::Resp2), b"$-1\r\n");
        // Integers and lengths at their extremes, digits written in place.
        for (n, text) in [
            (0, ":0\r\n"),
            (-1, ":-1\r\n"),
            (i64::MAX, ":9223372036854775807\r\n"),
            (i64::MIN, ":-9223372036854775808\r\n"),
        ] {
            assert_eq!(encoded(&Reply::Int(n), Proto::Resp2), text.as_bytes());
        }
        let long = vec![b'x'; 1234];
        assert!(encoded(&Reply::Bulk(long), Proto::Resp2).starts_with(b"$1234\r\nxxx"));
        assert_eq!(
            encoded(&Reply::Bulk(Vec::new()), Proto::Resp2),
            b"$0\r\n\r\n"
        );
        assert_eq!(encoded(&Reply::Null, Proto::Resp3), b"_\r\n");
    }

    #[test]
    fn a_map_is_a_flat_array_in_resp2() {
        let map = Reply::Map(vec![(Reply::text("k"), Reply::Int(1))]);
        assert_eq!(encoded(&map, Proto::Resp2), b"*2\r\n$1\r\nk\r\n:1\r\n");
        assert_eq!(encoded(&map, Proto::Resp3), b"%1\r\n$1\r\nk\r\n:1\r\n");
        let array = Reply::Array(vec![Reply::Null, OK]);
        assert_eq!(encoded(&array, Proto::Resp2), b"*2\r\n$-1\r\n+OK\r\n");
    }
}
