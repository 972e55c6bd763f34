//! Parsing a request head (request line and headers) with `httparse`, and
//! applying the node's limits to it.
//!
//! The parser is a pure function over bytes, so the fuzz target and the
//! property tests call exactly what the network thread calls.

use super::Status;
use std::borrow::Cow;

/// Headers a request may carry; more is 431.
pub const HEADERS_MAX: usize = 64;

/// The limits a request head is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Request line plus headers, in bytes.
    pub header_bytes_max: usize,
    /// Body bytes (`Content-Length`).
    pub body_bytes_max: u64,
}

/// The request method, as far as the API cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// GET, and HEAD: a HEAD is routed as a GET and answered without
    /// content ([`RequestHead::head_only`]).
    Get,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// Anything else.
    Other(String),
}

/// A parsed, checked request head. It borrows the bytes it was parsed
/// from (no allocation per request); a connection keeps only the few facts
/// it needs past parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// The method.
    pub method: Method,
    /// The request target's path (before `?`), raw.
    pub path: &'a [u8],
    /// The query (after `?`), raw; empty if none.
    pub query: &'a [u8],
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    /// Body length from `Content-Length` (0 when absent, and for a
    /// chunked body).
    pub content_length: u64,
    /// The body is chunked (`Transfer-Encoding: chunked`,
    /// `super::chunked`): its length is known once it is decoded.
    pub chunked: bool,
    /// Keep the connection open after the answer.
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
    /// The `Upgrade` header's value when the `Connection` header carries
    /// the `upgrade` token (case-insensitive) in an HTTP/1.1 request; else
    /// `None` (an HTTP/1.0 request's `Upgrade` is ignored, RFC 9110 7.8).
    pub upgrade: Option<&'a [u8]>,
    /// The `Authorization` header's value, if any (borrowed, not copied;
    /// read by `net::auth_gate`).
    pub authorization: Option<&'a [u8]>,
    /// The `X-Ataman-Layout` header: the layout version a connecting peer
    /// coordinates with (`peer::handshake::LAYOUT_HEADER`, the fence).
    pub layout_version: Option<u64>,
    /// The `If-Match` header's value (`super::conditional`), borrowed; the
    /// values of several lines joined with `, ` (RFC 9110 5.3).
    pub if_match: Option<Cow<'a, [u8]>>,
    /// The `If-None-Match` header's value, as `if_match`.
    pub if_none_match: Option<Cow<'a, [u8]>>,
    /// The method was HEAD (RFC 9110 9.3.2): answered as the GET of the
    /// same target, its head only (`super::response::strip_body`).
    pub head_only: bool,
    /// Bytes of the head, including the blank line.
    pub head_bytes: usize,
}

/// An error that ends a request (and, when `close`, the connection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// The answer's status.
    pub status: Status,
    /// One line for the body.
    pub message: String,
    /// Close the connection after answering (the stream can no longer be framed).
    pub close: bool,
}

impl HttpError {
    /// An error that leaves the connection usable.
    pub fn keep(status: Status, message: impl Into<String>) -> Self {
        HttpError {
            status,
            message: message.into(),
            close: false,
        }
    }

    /// An error after which the connection is closed.
    pub fn close(status: Status, message: impl Into<String>) -> Self {
        HttpError {
            status,
            message: message.into(),
            close: true,
        }
    }
}

/// The outcome of parsing the bytes received so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A complete, valid head.
    Head(RequestHead<'a>),
    /// More bytes are needed.
    Partial,
    /// The head is invalid or over a limit.
    Error(HttpError),
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// The `Transfer-Encoding` headers of a request, as read (every header
/// line, in order: RFC 9110 5.3 makes them one list).
#[derive(Debug, Default)]
struct TransferEncoding {
    /// Headers seen.
    present: bool,
    /// Codings in order, before the last one (lowercase comparisons later).
    codings: u32,
    /// `chunked` appeared before the last coding.
    chunked_not_last: bool,
    /// The last coding is `chunked`.
    last_is_chunked: bool,
    /// A coding other than `chunked` appeared.
    other: bool,
}

impl TransferEncoding {
    fn add(&mut self, value: &[u8]) {
        self.present = true;
        // A list; empty elements are allowed and ignored (RFC 9110 5.6.1).
        for coding in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if coding.is_empty() {
                continue;
            }
            self.codings += 1;
            self.chunked_not_last |= self.last_is_chunked;
            self.last_is_chunked = coding.eq_ignore_ascii_case(b"chunked");
            self.other |= !self.last_is_chunked;
        }
    }

    /// Whether the body is chunked, or why the request is refused (RFC
    /// 9112 6.1 and 6.3; each closes the connection, the framing being
    /// unknown): a `Transfer-Encoding` together with a `Content-Length`
    /// (request smuggling), in an HTTP/1.0 request, with no coding, or
    /// with `chunked` not last or twice is 400; a coding other than
    /// `chunked` is 501 (the node implements none).
    fn verdict(&self, minor_version: u8, content_length: bool) -> Result<bool, HttpError> {
        if !self.present {
            return Ok(false);
        }
        let bad = |why: &str| Err(HttpError::close(Status::BadRequest, why));
        if content_length {
            return bad("both Transfer-Encoding and Content-Length");
        }
        if minor_version == 0 {
            return bad("Transfer-Encoding in an HTTP/1.0 request");
        }
        if self.codings == 0 {
            return bad("empty Transfer-Encoding");
        }
        if !self.last_is_chunked || self.chunked_not_last {
            return bad("Transfer-Encoding whose last coding is not chunked, or chunked twice");
        }
        if self.other {
            return Err(HttpError::close(
                Status::NotImplemented,
                "transfer codings other than chunked are not supported",
            ));
        }
        Ok(true)
    }
}

/// Parses the head at the start of `buf`.
pub fn parse_head(buf: &[u8], limits: Limits) -> Parsed<'_> {
    // Uninitialized: httparse writes the headers it finds, so the 64 slots
    // are not zeroed on every request.
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut []);
    let head_bytes = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > limits.header_bytes_max {
                return Parsed::Error(HttpError::close(
                    Status::HeaderFieldsTooLarge,
                    format!("request head over {} bytes", limits.header_bytes_max),
                ));
            }
            return Parsed::Partial;
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Error(HttpError::close(
                Status::HeaderFieldsTooLarge,
                format!("more than {HEADERS_MAX} headers"),
            ));
        }
        Err(e) => {
            return Parsed::Error(HttpError::close(
                Status::BadRequest,
                format!("malformed request: {e}"),
            ));
        }
    };
    if head_bytes > limits.header_bytes_max {
        return Parsed::Error(HttpError::close(
            Status::HeaderFieldsTooLarge,
            format!("request head over {} bytes", limits.header_bytes_max),
        ));
    }
    let (Some(method), Some(target), Some(minor_version)) = (req.method, req.path, req.version)
    else {
        return Parsed::Error(HttpError::close(
            Status::BadRequest,
            "incomplete request line",
        ));
    };
    let head_only = method == "HEAD";
    let method = match method {
        "GET" | "HEAD" => Method::Get,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        other => Method::Other(other.to_owned()),
    };
    let mut content_length: Option<u64> = None;
    let mut transfer_encoding = TransferEncoding::default();
    let mut keep_alive = minor_version >= 1;
    let mut expect_continue = false;
    let mut connection_upgrade = false;
    let mut upgrade_value: Option<&[u8]> = None;
    let mut authorization: Option<&[u8]> = None;
    let mut layout_version: Option<u64> = None;
    let mut if_match: Option<Cow<'_, [u8]>> = None;
    let mut if_none_match: Option<Cow<'_, [u8]>> = None;
    for h in req.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let parsed = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            match (parsed, content_length) {
                (None, _) => {
                    return Parsed::Error(HttpError::close(
                        Status::BadRequest,
                        "invalid Content-Length",
                    ));
                }
                (Some(n), Some(prev)) if n != prev => {
                    return Parsed::Error(HttpError::close(
                        Status::BadRequest,
                        "conflicting Content-Length headers",
                    ));
                }
                (Some(n), _) => content_length = Some(n),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding.add(h.value);
        } else if name.eq_ignore_ascii_case("connection") {
            connection_upgrade |= has_token(h.value, "upgrade");
            if has_token(h.value, "close") {
                keep_alive = false;
            } else if has_token(h.value, "keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("expect") {
            if has_token(h.value, "100-continue") {
                expect_continue = true;
            } else {
                return Parsed::Error(HttpError::close(
                    Status::ExpectationFailed,
                    "only Expect: 100-continue is supported",
                ));
            }
        } else if name.eq_ignore_ascii_case("upgrade") {
            upgrade_value = Some(h.value.trim_ascii());
        } else if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(h.value);
        } else if name.eq_ignore_ascii_case("x-ataman-layout") {
            let parsed = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<u64>().ok());
            let Some(v) = parsed else {
                return Parsed::Error(HttpError::close(
                    Status::BadRequest,
                    "invalid X-Ataman-Layout (a layout version, decimal)",
                ));
            };
            layout_version = Some(v);
        } else if name.eq_ignore_ascii_case("if-match") {
            join_line(&mut if_match, h.value);
        } else if name.eq_ignore_ascii_case("if-none-match") {
            join_line(&mut if_none_match, h.value);
        }
    }
    let chunked = match transfer_encoding.verdict(minor_version, content_length.is_some()) {
        Ok(chunked) => chunked,
        Err(e) => return Parsed::Error(e),
    };
    let content_length = content_length.unwrap_or(0);
    if content_length > limits.body_bytes_max {
        return Parsed::Error(HttpError::close(
            Status::PayloadTooLarge,
            format!(
                "body of {content_length} bytes over the limit of {}",
                limits.body_bytes_max
            ),
        ));
    }
    let target = target.as_bytes();
    let (path, query) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], &target[q + 1..]),
        None => (target, &[][..]),
    };
    Parsed::Head(RequestHead {
        method,
        path,
        query,
        minor_version,
        content_length,
        chunked,
        keep_alive,
        expect_continue,
        // A HEAD switches no protocol: its `Upgrade` is ignored.
        upgrade: upgrade_value.filter(|_| connection_upgrade && minor_version >= 1 && !head_only),
        authorization,
        layout_version,
        if_match,
        if_none_match,
        head_only,
        head_bytes,
    })
}

/// Adds one line of a list header to its value: borrowed for the first
/// line, the lines joined with `, ` from the second (RFC 9110 5.3).
///
/// A line with no value (blanks at most) makes the whole value empty, and
/// it stays empty: `If-Match:` followed by `If-Match: "5"` is refused as a
/// lone empty `If-Match:` is (`super::conditional`, "no entity tag"),
/// where joining would have made `, "5"` of it, a list with one tag.
fn join_line<'a>(joined: &mut Option<Cow<'a, [u8]>>, line: &'a [u8]) {
    let line_empty = line.trim_ascii().is_empty();
    match joined {
        None => *joined = Some(Cow::Borrowed(line)),
        Some(value) if line_empty || value.trim_ascii().is_empty() => {
            *value = Cow::Borrowed(&[]);
        }
        Some(value) => {
            let value = value.to_mut();
            value.extend_from_slice(b", ");
            value.extend_from_slice(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: Limits = Limits {
        header_bytes_max: 1024,
        body_bytes_max: 100,
    };

    /// The peer's layout version is read; a malformed one is a 400.
    #[test]
    fn layout_header() {
        let h = head(b"GET /v0/peer HTTP/1.1\r\nX-Ataman-Layout: 12\r\n\r\n");
        assert_eq!(h.layout_version, Some(12));
        assert_eq!(head(b"GET / HTTP/1.1\r\n\r\n").layout_version, None);
        for bad in [&b"x"[..], b"-1", b"", b"99999999999999999999999"] {
            let req = [
                &b"GET / HTTP/1.1\r\nX-Ataman-Layout: "[..],
                bad,
                b"\r\n\r\n",
            ]
            .concat();
            assert!(
                matches!(parse_head(&req, LIMITS), Parsed::Error(e) if e.status == Status::BadRequest)
            );
        }
    }

    fn head(bytes: &[u8]) -> RequestHead<'_> {
        match parse_head(bytes, LIMITS) {
            Parsed::Head(h) => h,
            other => panic!("{other:?}"),
        }
    }

    fn status(bytes: &[u8]) -> Status {
        match parse_head(bytes, LIMITS) {
            Parsed::Error(e) => e.status,
            other => panic!("{other:?}"),
        }
    }

    /// A well-formed PUT is parsed with its length and connection semantics.
    #[test]
    fn parses_put() {
        let req = b"PUT /v0/entity?id=a HTTP/1.1\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello";
        let h = head(req);
        assert_eq!(h.method, Method::Put);
        assert_eq!((h.path, h.query), (&b"/v0/entity"[..], &b"id=a"[..]));
        assert_eq!(
            (h.content_length, h.keep_alive, h.expect_continue),
            (5, true, true)
        );
        assert_eq!(
            h.head_bytes,
            req.len() - 5,
            "the head ends where the body starts"
        );
        let h10 = head(b"GET / HTTP/1.0\r\n\r\n");
        assert!(!h10.keep_alive);
        let h10k = head(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h10k.keep_alive);
        assert!(!head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
    }

    /// `If-Match` and `If-None-Match` are kept as sent (borrowed), in any
    /// case; several lines of one are joined into one list.
    #[test]
    fn conditional_headers() {
        let h =
            head(b"PUT /v0/entity?id=a HTTP/1.1\r\nif-match: \"5\"\r\nIf-None-Match: *\r\n\r\n");
        assert_eq!(h.if_match.as_deref(), Some(&b"\"5\""[..]));
        assert!(matches!(h.if_match, Some(Cow::Borrowed(_))));
        assert_eq!(h.if_none_match.as_deref(), Some(&b"*"[..]));
        let h = head(
            b"GET / HTTP/1.1\r\nIf-Match: \"5\"\r\nHost: x\r\nIF-MATCH: W/\"6\", \"7\"\r\n\r\n",
        );
        assert_eq!(h.if_match.as_deref(), Some(&b"\"5\", W/\"6\", \"7\""[..]));
        assert_eq!(h.if_none_match, None);
        let h = head(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!((h.if_match, h.if_none_match), (None, None));
    }

    /// An empty line of a conditional header empties the joined value, in
    /// any place among its lines: refused as a lone empty one is (it was
    /// joined into `, "5"`, one tag, and the request went on).
    #[test]
    fn an_empty_conditional_line_among_others_empties_the_header() {
        for lines in [
            &["", "\"5\""][..],
            &["\"5\"", ""],
            &["\"5\"", "  ", "\"6\""],
            &[" ", " "],
            &[""],
        ] {
            let mut request = b"PUT /v0/entity?id=a HTTP/1.1\r\n".to_vec();
            for line in lines {
                request.extend_from_slice(format!("If-Match:{line}\r\n").as_bytes());
                request.extend_from_slice(format!("If-None-Match:{line}\r\n").as_bytes());
            }
            request.extend_from_slice(b"\r\n");
            let h = head(&request);
            assert_eq!(h.if_match.as_deref(), Some(&b""[..]), "{lines:?}");
            assert_eq!(h.if_none_match.as_deref(), Some(&b""[..]), "{lines:?}");
            let refused = crate::http::conditional::Preconditions::parse(
                h.if_match.as_deref(),
                h.if_none_match.as_deref(),
            );
            assert!(refused.unwrap_err().contains("no entity tag"), "{lines:?}");
        }
        // Lines with values still join (the control: one tag each).
        let h = head(b"GET / HTTP/1.1\r\nIf-Match: \"5\"\r\nIf-Match: \"6\"\r\n\r\n");
        assert_eq!(h.if_match.as_deref(), Some(&b"\"5\", \"6\""[..]));
    }

    /// `upgrade` is the Upgrade header's value only when Connection carries
    /// the upgrade token, in any case and among other tokens, on HTTP/1.1.
    #[test]
    fn upgrade_needs_the_connection_token() {
        let h = head(b"GET /v0/peer HTTP/1.1\r\nConnection: keep-alive, UPGRADE\r\nUpgrade: ataman-peer/1\r\n\r\n");
        assert_eq!(h.upgrade, Some(&b"ataman-peer/1"[..]));
        assert!(h.keep_alive);
        let h = head(b"GET / HTTP/1.1\r\nUpgrade: ataman-peer/1\r\n\r\n");
        assert_eq!(h.upgrade, None, "no Connection: upgrade");
        let h = head(b"GET / HTTP/1.1\r\nConnection: upgrade\r\n\r\n");
        assert_eq!(h.upgrade, None, "no Upgrade header");
        let h = head(b"GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: ataman-peer/1\r\n\r\n");
        assert_eq!(h.upgrade, None, "HTTP/1.0 cannot upgrade");
        assert_eq!(head(b"GET / HTTP/1.1\r\n\r\n").upgrade, None);
    }

    /// `Transfer-Encoding` (RFC 9112 6.1, 6.3): `chunked` last, once, in
    /// one header or several, is a chunked body; with a `Content-Length`
    /// (either order), in HTTP/1.0, empty, or `chunked` not last or twice
    /// is 400; another coding before `chunked` is 501.
    #[test]
    fn transfer_encoding_rules() {
        let put = |headers: &str| {
            let req = format!("PUT /v0/entity/k HTTP/1.1\r\n{headers}\r\n");
            match parse_head(req.as_bytes(), LIMITS) {
                Parsed::Head(h) => Ok((h.chunked, h.content_length)),
                Parsed::Error(e) => Err((e.status, e.close)),
                Parsed::Partial => panic!("partial: {headers}"),
            }
        };
        assert_eq!(put("Transfer-Encoding: chunked\r\n"), Ok((true, 0)));
        assert_eq!(put("transfer-encoding:  CHUNKED \r\n"), Ok((true, 0)));
        assert_eq!(put("Transfer-Encoding: ,chunked,\r\n"), Ok((true, 0)));
        assert_eq!(put("Content-Length: 3\r\n"), Ok((false, 3)));
        let bad = Err((Status::BadRequest, true));
        for headers in [
            "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n",
            "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: gzip\r\n",
            "Transfer-Encoding: chunked, chunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
            "Transfer-Encoding: \r\n",
        ] {
            assert_eq!(put(headers), bad, "{headers}");
        }
        let not_implemented = Err((Status::NotImplemented, true));
        assert_eq!(put("Transfer-Encoding: gzip, chunked\r\n"), not_implemented);
        assert_eq!(
            put("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
            not_implemented
        );
        let h10 = b"PUT /v0/entity/k HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(status(h10), Status::BadRequest);
    }

    /// Limits and framing errors map to their status codes.
    #[test]
    fn errors_have_their_status() {
        assert_eq!(
            status(b"PUT / HTTP/1.1\r\nContent-Length: 101\r\n\r\n"),
            Status::PayloadTooLarge
        );
        assert_eq!(
            status(b"PUT / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
            Status::BadRequest
        );
        assert_eq!(
            status(b"PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
            Status::BadRequest
        );
        assert_eq!(status(b"\x00\x01garbage\r\n\r\n"), Status::BadRequest);
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.extend(vec![b'a'; 2000]);
        assert_eq!(status(&big), Status::HeaderFieldsTooLarge);
        assert_eq!(
            parse_head(b"GET / HTTP/1.1\r\nHost: x\r\n", LIMITS),
            Parsed::Partial
        );
    }

    proptest! {
        /// Arbitrary bytes never panic, and a parsed head never claims more bytes than given.
        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Parsed::Head(h) = parse_head(&bytes, LIMITS) {
                prop_assert!(h.head_bytes <= bytes.len());
                prop_assert!(h.content_length <= LIMITS.body_bytes_max);
                prop_assert!(!(h.chunked && h.content_length > 0));
            }
        }
    }
}
