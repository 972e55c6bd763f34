//! The coordinator's side of a peer-authenticated internal range
//! (`GET /v0/internal/range`): dial over TLS with `--tls-ca`, and with a
//! cluster secret answer the peer's `401` challenge with the same HMAC
//! proof as a peer upgrade (`auth::peer_proof`), on the same connection.
//! The proof covers the name of what it opens ([`RANGE_PROTOCOL`] for the
//! range), so it opens nothing else; other internal endpoints (the layout
//! agreement's, `cluster::agreement_wire::LAYOUT_PROTOCOL`) dial the same way
//! under their own name.

use crate::auth::peer_proof;
use crate::auth::secret::ClusterSecret;
use crate::tls::blocking::BlockingStream;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The name the range proof is bound to (never a protocol upgraded to).
pub const RANGE_PROTOCOL: &str = "ataman-internal-range/1";
/// Longest response head read while authenticating, bytes.
const HEAD_BYTES_MAX: usize = 16 * 1024;

/// A response head, as far as the dial reads it.
struct Head {
    code: u16,
    challenge: Option<Vec<u8>>,
    /// Body bytes to skip (a challenge's `Content-Length`).
    body: usize,
    /// The head's text (for `read_head`'s checks).
    text: Vec<u8>,
}

/// Why a blocking read or write on a dialled member failed, in words: a
/// socket timeout surfaces as `WouldBlock` ("Resource temporarily
/// unavailable (os error 11)") on Linux, which says nothing to someone
/// reading a cluster report; it is "no answer within the timeout".
pub fn io_why(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no answer within the timeout".to_owned()
        }
        _ => e.to_string(),
    }
}

fn read_head_raw<R: BufRead>(reader: &mut R) -> Result<Head, String> {
    let mut text = Vec::new();
    let mut limited = std::io::Read::take(reader, HEAD_BYTES_MAX as u64);
    loop {
        let before = text.len();
        let n = limited
            .read_until(b'\n', &mut text)
            .map_err(|e| format!("response head: {}", io_why(&e)))?;
        if n == 0 {
            return Err("response head cut or too long".into());
        }
        let line = &text[before..];
        if line == b"\r\n" || line == b"\n" {
            break;
        }
    }
    let s = String::from_utf8_lossy(&text).into_owned();
    let mut lines = s.lines();
    let code = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut challenge = None;
    let mut body = 0;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("www-authenticate") {
            challenge = Some(value.trim().as_bytes().to_vec());
        } else if name.eq_ignore_ascii_case("content-length") {
            body = value.trim().parse().unwrap_or(0);
        }
    }
    Ok(Head {
        code,
        challenge,
        body: body.min(HEAD_BYTES_MAX),
        text,
    })
}

/// The head of an internal `GET target` to a peer at `host`, with its
/// `Authorization` value, if any. `challenged`: the dialer holds the
/// cluster secret, so the peer answers a request without proof with a
/// challenge, answered on the same connection: that request must keep it
/// open (no `Connection: close`, which the peer honours after its 401);
/// every other closes it.
pub fn internal_get(
    host: &str,
    target: &str,
    authorization: Option<&str>,
    challenged: bool,
) -> String {
    match authorization {
        None if challenged => format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        None => format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        Some(value) => format!(
            "GET {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {value}\r\nConnection: close\r\n\r\n"
        ),
    }
}

/// Dials `addr` (named `host`), over TLS when `tls` is given, sends
/// `request(authorization)` and, with `secret`, answers a challenge once
/// with a proof bound to `protocol`.
/// Returns the reader positioned after a response head, and that head.
pub fn open(
    sock: TcpStream,
    host: &str,
    timeout: Duration,
    tls: Option<Arc<rustls::ClientConfig>>,
    secret: Option<&ClusterSecret>,
    protocol: &str,
    request: &dyn Fn(Option<&str>) -> String,
) -> Result<(BufReader<BlockingStream>, Vec<u8>), String> {
    let bytes = |authorization: Option<&str>| request(authorization).into_bytes();
    open_bytes(sock, host, timeout, tls, secret, protocol, &bytes)
}

/// [`open`] for a request that is bytes (one with a binary body: the
/// layout agreement's `POST /v0/internal/layout`).
pub fn open_bytes(
    sock: TcpStream,
    host: &str,
    timeout: Duration,
    tls: Option<Arc<rustls::ClientConfig>>,
    secret: Option<&ClusterSecret>,
    protocol: &str,
    request: &dyn Fn(Option<&str>) -> Vec<u8>,
) -> Result<(BufReader<BlockingStream>, Vec<u8>), String> {
    let mut stream = match tls {
        None => BlockingStream::Plain(sock),
        Some(config) => {
            let host_only = host.rsplit_once(':').map_or(host, |(h, _)| h);
            let name = crate::tls::load::server_name(host_only).map_err(|e| e.to_string())?;
            BlockingStream::connect_tls(sock, config, name, timeout)
                .map_err(|e| format!("TLS handshake: {e}"))?
        }
    };
    stream
        .write_all(&request(None))
        .and_then(|()| stream.flush())
        .map_err(|e| format!("send: {}", io_why(&e)))?;
    let mut reader = BufReader::with_capacity(super::source::SOURCE_BUFFER_BYTES, stream);
    let head = read_head_raw(&mut reader)?;
    let (Some(secret), 401, Some(challenge)) = (secret, head.code, head.challenge.as_deref())
    else {
        return Ok((reader, head.text));
    };
    let params = peer_proof::Params::decode(challenge, Some(peer_proof::SCHEME))
        .map_err(|e| format!("peer's challenge: {e}"))?;
    let server = peer_proof::nonce_of(&params).map_err(|e| format!("peer's challenge: {e}"))?;
    let client = crate::peer::auth_dialer::fresh_nonce().ok_or("no randomness for a nonce")?;
    let value = peer_proof::client_authorization(secret, protocol, &server, &client, &[]);
    let mut skip = vec![0u8; head.body];
    std::io::Read::read_exact(&mut reader, &mut skip)
        .map_err(|e| format!("challenge: {}", io_why(&e)))?;
    let stream = reader.get_mut();
    stream
        .write_all(&request(Some(&value)))
        .and_then(|()| stream.flush())
        .map_err(|e| format!("send: {}", io_why(&e)))?;
    let head = read_head_raw(&mut reader)?;
    Ok((reader, head.text))
}

#[cfg(test)]
mod tests {
    use super::io_why;
    use std::io::{Error, ErrorKind};

    /// A socket timeout reads as one in a report, not as `EAGAIN`.
    #[test]
    fn a_timeout_is_named_as_one() {
        let eagain = Error::from_raw_os_error(11);
        assert_eq!(eagain.kind(), ErrorKind::WouldBlock);
        assert_eq!(io_why(&eagain), "no answer within the timeout");
        assert_eq!(
            io_why(&Error::from(ErrorKind::TimedOut)),
            "no answer within the timeout"
        );
        let refused = Error::from(ErrorKind::ConnectionRefused);
        assert_eq!(io_why(&refused), refused.to_string());
    }
}
