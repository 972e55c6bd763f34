//! Reading one HTTP/1.1 response from a byte stream.
//!
//! The status line and headers are parsed with `httparse`; the body is framed
//! as RFC 9112 section 6.3 says: none for 1xx, 204 and 304; `chunked` when
//! `Transfer-Encoding` ends with it (chunk boundaries are kept, because the
//! `/v0/entities` answer puts one entry in each chunk); else
//! `Content-Length`; else everything up to the close of the connection.
//!
//! The reader stops exactly at the end of the response, so pipelined
//! answers can be read one after another from the same `BufRead`. Every
//! read is bounded by the limits below; malformed input is an error, never
//! a panic.

use std::io::{BufRead, Read};

/// Longest status line plus headers accepted, in bytes.
pub const RESPONSE_HEAD_BYTES_MAX: usize = 64 * 1024;
/// Most headers accepted in one response.
pub const RESPONSE_HEADERS_MAX: usize = 100;
/// Largest body accepted (all chunks together), in bytes.
pub const RESPONSE_BODY_BYTES_MAX: usize = 1024 * 1024 * 1024;
/// Longest chunk-size line (size, extensions, CRLF) accepted, in bytes.
pub const CHUNK_LINE_BYTES_MAX: usize = 1024;

/// Why no response could be read.
#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    /// The peer closed the connection before sending any byte.
    #[error("connection closed before any response byte")]
    Closed,
    /// The peer closed the connection in the middle of a response.
    #[error("connection closed in the middle of the response ({0})")]
    Truncated(&'static str),
    /// Reading from the connection failed (reset, timeout, …).
    #[error("reading the response failed: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not an HTTP/1.x response.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The answer is a TLS record (an alert: the node speaks TLS and took
    /// the plaintext request for a broken handshake).
    #[error("the server answered with TLS: use an https:// URL (with --tls-ca)")]
    TlsAnswer,
    /// A limit above was exceeded.
    #[error("response {what} over {limit_bytes} bytes")]
    TooLarge {
        /// Which part: "head", "body" or "chunk-size line".
        what: &'static str,
        /// The limit that was exceeded.
        limit_bytes: usize,
    },
}

/// One parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Minor HTTP version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version_minor: u8,
    /// Status code.
    pub status: u16,
    /// Reason phrase as sent.
    pub reason: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body (chunks concatenated for a chunked body).
    pub body: Vec<u8>,
    /// The chunks of a chunked body in order (`None` otherwise).
    pub chunks: Option<Vec<Vec<u8>>>,
}

impl Response {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    /// The first header called `name` as text (lossy).
    pub fn header_str(&self, name: &str) -> Option<String> {
        self.header(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    /// True when the server announced `Connection: close`.
    pub fn closes_connection(&self) -> bool {
        self.header_str("connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// Reads one line ending in `\n` (kept), at most `limit_bytes` long.
/// `Ok(empty)` means end of stream before any byte.
fn read_line_bounded<R: BufRead>(
    reader: &mut R,
    limit_bytes: usize,
    what: &'static str,
) -> Result<Vec<u8>, ResponseError> {
    let mut line = Vec::new();
    let limit = u64::try_from(limit_bytes).unwrap_or(u64::MAX);
    reader.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') && line.len() >= limit_bytes {
        return Err(ResponseError::TooLarge { what, limit_bytes });
    }
    Ok(line)
}

/// Whether `bytes` begin like a TLS record (RFC 8446, section 5.1): the
/// content type alert (21) or handshake (22), then the major byte of the
/// legacy record version (3). No HTTP/1.x status line starts so.
pub fn is_tls_record(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, ..])
}

/// Reads the status line and headers, up to and including the empty line.
fn read_head<R: BufRead>(reader: &mut R) -> Result<Vec<u8>, ResponseError> {
    let mut head = Vec::new();
    loop {
        let remaining = RESPONSE_HEAD_BYTES_MAX - head.len();
        let line = read_line_bounded(reader, remaining, "head")?;
        if head.is_empty() && is_tls_record(&line) {
            return Err(ResponseError::TlsAnswer);
        }
        if line.is_empty() {
            return Err(if head.is_empty() {
                ResponseError::Closed
            } else {
                ResponseError::Truncated("head")
            });
        }
        if line.last() != Some(&b'\n') {
            return Err(ResponseError::Truncated("head"));
        }
        let blank = line == b"\r\n" || line == b"\n";
        if blank && head.is_empty() {
            return Err(ResponseError::Malformed(
                "empty line before the status line".to_string(),
            ));
        }
        head.extend_from_slice(&line);
        if blank {
            return Ok(head);
        }
    }
}

/// How the body of a response is delimited.
enum Framing {
    None,
    Chunked,
    Length(usize),
    UntilClose,
}

fn framing(response: &Response) -> Result<Framing, ResponseError> {
    if (100..200).contains(&response.status) || matches!(response.status, 204 | 304) {
        return Ok(Framing::None);
    }
    if let Some(te) = response.header_str("transfer-encoding") {
        let last = te
            .rsplit(',')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if last == "chunked" {
            return Ok(Framing::Chunked);
        }
        return Err(ResponseError::Malformed(format!(
            "unsupported Transfer-Encoding {te:?}"
        )));
    }
    let mut length: Option<usize> = None;
    for (name, value) in &response.headers {
        if !name.eq_ignore_ascii_case("content-length") {
            continue;
        }
        let text = std::str::from_utf8(value).unwrap_or("").trim();
        let parsed = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse::<usize>().ok()
        } else {
            None
        };
        let parsed = parsed.ok_or_else(|| {
            ResponseError::Malformed(format!(
                "bad Content-Length {:?}",
                String::from_utf8_lossy(value)
            ))
        })?;
        if length.is_some_and(|l| l != parsed) {
            return Err(ResponseError::Malformed(
                "conflicting Content-Length headers".to_string(),
            ));
        }
        length = Some(parsed);
    }
    Ok(match length {
        Some(l) => Framing::Length(l),
        None => Framing::UntilClose,
    })
}

fn read_exact_body<R: BufRead>(
    reader: &mut R,
    length: usize,
    what: &'static str,
) -> Result<Vec<u8>, ResponseError> {
    if length > RESPONSE_BODY_BYTES_MAX {
        return Err(ResponseError::TooLarge {
            what: "body",
            limit_bytes: RESPONSE_BODY_BYTES_MAX,
        });
    }
    let mut body = Vec::new();
    let want = u64::try_from(length).unwrap_or(u64::MAX);
    reader.by_ref().take(want).read_to_end(&mut body)?;
    if body.len() != length {
        return Err(ResponseError::Truncated(what));
    }
    Ok(body)
}

fn expect_crlf<R: BufRead>(reader: &mut R) -> Result<(), ResponseError> {
    let mut crlf = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        let n = reader.read(&mut crlf[got..])?;
        if n == 0 {
            return Err(ResponseError::Truncated("chunk"));
        }
        got += n;
    }
    if &crlf != b"\r\n" {
        return Err(ResponseError::Malformed(
            "chunk data not followed by CRLF".to_string(),
        ));
    }
    Ok(())
}

/// Parses a chunk-size line: hex digits, optional `;extensions`, CRLF.
fn chunk_size(line: &[u8]) -> Result<usize, ResponseError> {
    let bad = || {
        ResponseError::Malformed(format!(
            "bad chunk-size line {:?}",
            String::from_utf8_lossy(line)
        ))
    };
    let text = line.strip_suffix(b"\r\n").ok_or_else(bad)?;
    let digits = match text.iter().position(|&b| b == b';') {
        Some(semicolon) => &text[..semicolon],
        None => text,
    };
    let digits = std::str::from_utf8(digits).map_err(|_| bad())?.trim_end();
    // At most 15 hex digits: the value then fits any usize of 64 bits.
    if digits.is_empty() || digits.len() > 15 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    usize::from_str_radix(digits, 16).map_err(|_| bad())
}

fn read_chunked<R: BufRead>(reader: &mut R) -> Result<(Vec<u8>, Vec<Vec<u8>>), ResponseError> {
    let mut body = Vec::new();
    let mut chunks = Vec::new();
    loop {
        let line = read_line_bounded(reader, CHUNK_LINE_BYTES_MAX, "chunk-size line")?;
        if line.last() != Some(&b'\n') {
            return Err(ResponseError::Truncated("chunk-size line"));
        }
        let size = chunk_size(&line)?;
        if size == 0 {
            break;
        }
        if size > RESPONSE_BODY_BYTES_MAX - body.len() {
            return Err(ResponseError::TooLarge {
                what: "body",
                limit_bytes: RESPONSE_BODY_BYTES_MAX,
            });
        }
        let chunk = read_exact_body(reader, size, "chunk")?;
        expect_crlf(reader)?;
        body.extend_from_slice(&chunk);
        chunks.push(chunk);
    }
    // Trailer section: header lines until the empty line.
    let mut trailer_bytes = 0usize;
    loop {
        let line = read_line_bounded(reader, RESPONSE_HEAD_BYTES_MAX - trailer_bytes, "head")?;
        if line.last() != Some(&b'\n') {
            return Err(ResponseError::Truncated("trailer"));
        }
        if line == b"\r\n" || line == b"\n" {
            return Ok((body, chunks));
        }
        trailer_bytes += line.len();
    }
}

/// Reads and parses a response's head; the body is left to read.
fn response_head<R: BufRead>(reader: &mut R) -> Result<Response, ResponseError> {
    let head = read_head(reader)?;
    let mut header_slots = [httparse::EMPTY_HEADER; RESPONSE_HEADERS_MAX];
    let mut parsed = httparse::Response::new(&mut header_slots);
    match parsed.parse(&head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Ok(_) => {
            return Err(ResponseError::Malformed(
                "head did not end where expected".to_string(),
            ));
        }
        Err(e) => return Err(ResponseError::Malformed(format!("{e}"))),
    }
    let (Some(version_minor), Some(status)) = (parsed.version, parsed.code) else {
        return Err(ResponseError::Malformed(
            "incomplete status line".to_string(),
        ));
    };
    Ok(Response {
        version_minor,
        status,
        reason: parsed.reason.unwrap_or("").to_string(),
        headers: parsed
            .headers
            .iter()
            .map(|h| (h.name.to_string(), h.value.to_vec()))
            .collect(),
        body: Vec::new(),
        chunks: None,
    })
}

/// Reads exactly one response from `reader`.
///
/// 1xx answers (such as `100 Continue`) are returned as responses of their
/// own; call again for the final answer.
pub fn read_response<R: BufRead>(reader: &mut R) -> Result<Response, ResponseError> {
    let mut response = response_head(reader)?;
    match framing(&response)? {
        Framing::None => {}
        Framing::Length(length) => response.body = read_exact_body(reader, length, "body")?,
        Framing::Chunked => {
            let (body, chunks) = read_chunked(reader)?;
            response.body = body;
            response.chunks = Some(chunks);
        }
        Framing::UntilClose => {
            let limit = u64::try_from(RESPONSE_BODY_BYTES_MAX).unwrap_or(u64::MAX);
            reader
                .by_ref()
                .take(limit + 1)
                .read_to_end(&mut response.body)?;
            if response.body.len() > RESPONSE_BODY_BYTES_MAX {
                return Err(ResponseError::TooLarge {
                    what: "body",
                    limit_bytes: RESPONSE_BODY_BYTES_MAX,
                });
            }
        }
    }
    Ok(response)
}

/// Reads one response like [`read_response`], but at most
/// `body_bytes_max` bytes of its body (decoded): reading stops there and
/// the rest is left unread (for a probe that quotes a line of it).
pub fn read_response_prefix<R: BufRead>(
    reader: &mut R,
    body_bytes_max: usize,
) -> Result<Response, ResponseError> {
    let mut response = response_head(reader)?;
    let cap = u64::try_from(body_bytes_max).unwrap_or(u64::MAX);
    match framing(&response)? {
        Framing::None => {}
        Framing::Length(length) => {
            let want = u64::try_from(length).unwrap_or(u64::MAX).min(cap);
            reader.by_ref().take(want).read_to_end(&mut response.body)?;
            if (response.body.len() as u64) < want {
                return Err(ResponseError::Truncated("body"));
            }
        }
        Framing::Chunked => {
            while response.body.len() < body_bytes_max {
                let line = read_line_bounded(reader, CHUNK_LINE_BYTES_MAX, "chunk-size line")?;
                if line.last() != Some(&b'\n') {
                    return Err(ResponseError::Truncated("chunk-size line"));
                }
                let size = chunk_size(&line)?;
                if size == 0 {
                    break;
                }
                let want = size.min(body_bytes_max - response.body.len());
                let part = read_exact_body(reader, want, "chunk")?;
                response.body.extend_from_slice(&part);
                if want == size {
                    expect_crlf(reader)?;
                }
            }
        }
        Framing::UntilClose => {
            reader.by_ref().take(cap).read_to_end(&mut response.body)?;
        }
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Response, ResponseError> {
        read_response(&mut &bytes[..])
    }

    /// A TLS alert in place of a status line (a plaintext request to a TLS
    /// port) is told apart from a truncated answer, whatever follows it.
    #[test]
    fn tls_alert_is_named() {
        // What a rustls server sends a plaintext client: a fatal decode_error alert.
        let alert = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32];
        assert!(matches!(parse(&alert), Err(ResponseError::TlsAnswer)));
        let with_newline = [&alert[..], b"\n\r\n"].concat();
        assert!(matches!(
            parse(&with_newline),
            Err(ResponseError::TlsAnswer)
        ));
        let handshake = [0x16, 0x03, 0x01, 0x00, 0x05];
        assert!(matches!(parse(&handshake), Err(ResponseError::TlsAnswer)));
        let message = ResponseError::TlsAnswer.to_string();
        assert!(message.contains("https://"), "{message}");
        // A truncated HTTP head is still that.
        assert!(matches!(
            parse(b"HTTP/1.1 200"),
            Err(ResponseError::Truncated("head"))
        ));
    }

    /// A Content-Length body is read exactly, and the next response follows.
    #[test]
    fn content_length_and_pipelined_responses() {
        let bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabcHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        let mut reader = &bytes[..];
        let first = read_response(&mut reader).unwrap();
        assert_eq!((first.status, first.version_minor), (200, 1));
        assert_eq!(first.reason, "OK");
        assert_eq!(first.body, b"abc");
        assert_eq!(first.header("x-a"), Some(&b"b"[..]));
        assert_eq!(first.chunks, None);
        let second = read_response(&mut reader).unwrap();
        assert_eq!(second.status, 404);
        assert!(second.body.is_empty());
        assert!(matches!(
            read_response(&mut reader),
            Err(ResponseError::Closed)
        ));
    }

    /// Chunks are decoded, kept apart, and extensions and trailers skipped.
    #[test]
    fn chunked_body_keeps_chunks() {
        let bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\nb\r\nA;ext=1\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nrest";
        let mut reader = &bytes[..];
        let response = read_response(&mut reader).unwrap();
        assert_eq!(response.body, b"a\nb0123456789");
        assert_eq!(
            response.chunks,
            Some(vec![b"a\nb".to_vec(), b"0123456789".to_vec()])
        );
        assert_eq!(reader, b"rest");
    }

    /// An empty chunked body has no chunks.
    #[test]
    fn chunked_empty_body() {
        let response =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").unwrap();
        assert_eq!(response.chunks, Some(Vec::new()));
        assert!(response.body.is_empty());
    }

    /// 100 Continue has no body; the final answer follows it.
    #[test]
    fn informational_then_final() {
        let bytes =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
        let mut reader = &bytes[..];
        assert_eq!(read_response(&mut reader).unwrap().status, 100);
        assert_eq!(read_response(&mut reader).unwrap().status, 201);
    }

    /// Without framing headers the body runs to the end of the stream.
    #[test]
    fn body_until_close() {
        let response = parse(b"HTTP/1.0 200 OK\r\n\r\nhello").unwrap();
        assert_eq!(response.version_minor, 0);
        assert_eq!(response.body, b"hello");
    }

    /// Bare LF line endings are accepted, as RFC 9112 allows.
    #[test]
    fn bare_lf_head() {
        let response = parse(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok").unwrap();
        assert_eq!(response.body, b"ok");
    }

    /// `Connection: close` is recognised among other tokens.
    #[test]
    fn connection_close_detected() {
        let response =
            parse(b"HTTP/1.1 400 Bad Request\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n")
                .unwrap();
        assert!(response.closes_connection());
    }

    /// Truncated and malformed responses are errors of the right kind.
    #[test]
    fn malformed_responses_are_errors() {
        assert!(matches!(parse(b""), Err(ResponseError::Closed)));
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Le"),
            Err(ResponseError::Truncated(_))
        ));
        assert!(matches!(
            parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc"),
            Err(ResponseError::Truncated(_))
        ));
        for bad in [
            &b"garbage\r\n\r\n"[..],
            b"\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/2 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\n",
        ] {
            match parse(bad) {
                Err(ResponseError::Malformed(_)) | Err(ResponseError::TooLarge { .. }) => {}
                other => panic!(
                    "{:?}: expected an error, got {other:?}",
                    String::from_utf8_lossy(bad)
                ),
            }
        }
        for truncated in [
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
        ] {
            assert!(
                matches!(parse(truncated), Err(ResponseError::Truncated(_))),
                "{:?}",
                String::from_utf8_lossy(truncated)
            );
        }
    }

    /// A head longer than the limit is refused without reading further.
    #[test]
    fn oversized_head_refused() {
        let mut bytes = b"HTTP/1.1 200 OK\r\nX-Pad: ".to_vec();
        bytes.resize(RESPONSE_HEAD_BYTES_MAX + 10, b'a');
        bytes.extend_from_slice(b"\r\n\r\n");
        assert!(matches!(
            parse(&bytes),
            Err(ResponseError::TooLarge { what: "head", .. })
        ));
    }

    /// Arbitrary bytes never panic the parser (a small deterministic fuzz).
    #[test]
    fn random_bytes_never_panic() {
        let seeds: [&[u8]; 3] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
            b"HTTP/1.1 100 Continue\r\n\r\n",
        ];
        let mut rng = ataman_testkit::rng::Rng::new(1);
        for round in 0..3000 {
            let mut bytes = seeds[round % seeds.len()].to_vec();
            for _ in 0..4 {
                let state = rng.next_u64();
                let at = (state % bytes.len() as u64) as usize;
                match state % 3 {
                    0 => bytes[at] = (state >> 32) as u8,
                    1 => bytes.truncate(at),
                    _ => bytes.insert(at, (state >> 40) as u8),
                }
                if bytes.is_empty() {
                    break;
                }
            }
            let _ = parse(&bytes);
        }
    }

    /// A prefix read stops at its bound in every framing and decodes
    /// chunks; a shorter body is read whole; a length cut short is
    /// truncated.
    #[test]
    fn a_prefix_read_stops_at_its_bound() {
        let prefix = |bytes: &[u8], cap| read_response_prefix(&mut &bytes[..], cap);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
        assert_eq!(prefix(chunked, 4).unwrap().body, b"abcd");
        assert_eq!(prefix(chunked, 100).unwrap().body, b"abcdef");
        let long = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nlive\nxx";
        assert_eq!(prefix(long, 5).unwrap().body, b"live\n");
        assert!(matches!(
            prefix(long, 100),
            Err(ResponseError::Truncated(_))
        ));
        let close = b"HTTP/1.0 200 OK\r\n\r\nlive\nmore";
        assert_eq!(prefix(close, 3).unwrap().body, b"liv");
    }
}
