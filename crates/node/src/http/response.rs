//! Response heads and bodies, written straight into a connection's output buffer.
//!
//! Every answer of the hot path goes through [`write_full`], so it writes
//! bytes and decimal digits directly (no `fmt` machinery) and reserves the
//! whole response once (no growth while appending).

use ataman_engine::coding::push_decimal;

/// The statuses the node answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// 100 (interim, before a body the client holds back).
    Continue,
    /// 101 (the connection now speaks the peer protocol).
    SwitchingProtocols,
    /// 200.
    Ok,
    /// 201.
    Created,
    /// 202.
    Accepted,
    /// 304 (a conditional read whose `If-None-Match` matched; no body).
    NotModified,
    /// 400.
    BadRequest,
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 408.
    RequestTimeout,
    /// 409.
    Conflict,
    /// 412 (a precondition, `If-Match` or `If-None-Match`, failed).
    PreconditionFailed,
    /// 413.
    PayloadTooLarge,
    /// 414.
    UriTooLong,
    /// 417.
    ExpectationFailed,
    /// 431.
    HeaderFieldsTooLarge,
    /// 500.
    InternalError,
    /// 501.
    NotImplemented,
    /// 503.
    Unavailable,
    /// 504.
    GatewayTimeout,
    /// 507.
    InsufficientStorage,
}

impl Status {
    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Status::Continue => 100,
            Status::SwitchingProtocols => 101,
            Status::Ok => 200,
            Status::Created => 201,
            Status::Accepted => 202,
            Status::NotModified => 304,
            Status::BadRequest => 400,
            Status::Unauthorized => 401,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::Conflict => 409,
            Status::PreconditionFailed => 412,
            Status::NotImplemented => 501,
            Status::PayloadTooLarge => 413,
            Status::UriTooLong => 414,
            Status::ExpectationFailed => 417,
            Status::HeaderFieldsTooLarge => 431,
            Status::InternalError => 500,
            Status::Unavailable => 503,
            Status::GatewayTimeout => 504,
            Status::InsufficientStorage => 507,
        }
    }

    /// The status line, including the trailing CRLF.
    pub fn line(self) -> &'static [u8] {
        match self {
            Status::Continue => b"HTTP/1.1 100 Continue\r\n",
            Status::SwitchingProtocols => b"HTTP/1.1 101 Switching Protocols\r\n",
            Status::Ok => b"HTTP/1.1 200 OK\r\n",
            Status::Created => b"HTTP/1.1 201 Created\r\n",
            Status::Accepted => b"HTTP/1.1 202 Accepted\r\n",
            Status::NotModified => b"HTTP/1.1 304 Not Modified\r\n",
            Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\n",
            Status::Unauthorized => b"HTTP/1.1 401 Unauthorized\r\n",
            Status::Forbidden => b"HTTP/1.1 403 Forbidden\r\n",
            Status::NotFound => b"HTTP/1.1 404 Not Found\r\n",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\n",
            Status::RequestTimeout => b"HTTP/1.1 408 Request Timeout\r\n",
            Status::Conflict => b"HTTP/1.1 409 Conflict\r\n",
            Status::PreconditionFailed => b"HTTP/1.1 412 Precondition Failed\r\n",
            Status::NotImplemented => b"HTTP/1.1 501 Not Implemented\r\n",
            Status::PayloadTooLarge => b"HTTP/1.1 413 Payload Too Large\r\n",
            Status::UriTooLong => b"HTTP/1.1 414 URI Too Long\r\n",
            Status::ExpectationFailed => b"HTTP/1.1 417 Expectation Failed\r\n",
            Status::HeaderFieldsTooLarge => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
            Status::InternalError => b"HTTP/1.1 500 Internal Server Error\r\n",
            Status::Unavailable => b"HTTP/1.1 503 Service Unavailable\r\n",
            Status::GatewayTimeout => b"HTTP/1.1 504 Gateway Timeout\r\n",
            Status::InsufficientStorage => b"HTTP/1.1 507 Insufficient Storage\r\n",
        }
    }
}

/// How the connection continues after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    /// HTTP/1.1 default: nothing to say.
    Default,
    /// HTTP/1.0 keep-alive: say `Connection: keep-alive`.
    KeepAlive10,
    /// Say `Connection: close` (the connection ends after this response).
    Close,
}

/// Extra headers of a response.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    /// `Content-Type`.
    pub content_type: Option<&'a str>,
    /// `Allow` (405).
    pub allow: Option<&'a str>,
    /// `Retry-After` seconds (503).
    pub retry_after_sec: Option<u32>,
    /// `WWW-Authenticate` (401).
    pub www_authenticate: Option<&'a str>,
    /// `X-Ataman-Version`: the timestamp of the version a read or write
    /// answer concerns (docs/API.md, "Versions").
    pub version: Option<u64>,
    /// Also say `ETag: "<version>"` (a read's value, docs/API.md).
    pub etag: bool,
    /// `Content-Security-Policy`, with `X-Content-Type-Options: nosniff`
    /// (the dashboard's assets, `crate::ui`).
    pub csp: Option<&'a str>,
    /// `Cache-Control`.
    pub cache_control: Option<&'a str>,
}

fn persist_header(out: &mut Vec<u8>, persist: Persist) {
    match persist {
        Persist::Default => {}
        Persist::KeepAlive10 => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        Persist::Close => out.extend_from_slice(b"Connection: close\r\n"),
    }
}

/// Appends `n` in lower-case hexadecimal (`write!(out, "{n:x}")`).
fn push_hex(out: &mut Vec<u8>, mut n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = HEX[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `Name: value\r\n`.
fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Bytes of the head [`write_full`] writes, beyond the status line and
/// the variable values: header names, separators, the blank line, the
/// longest `Connection` header, the version and its `ETag` (20 digits each),
/// and an asset's `Content-Security-Policy`, `X-Content-Type-Options` and
/// `Cache-Control` names.
const HEAD_FIXED_BYTES_MAX: usize = 288;

/// Appends a response head for a `Content-Length` body of `body_bytes`,
/// and reserves room for that body too.
pub fn write_head(
    out: &mut Vec<u8>,
    status: Status,
    extra: Extra<'_>,
    persist: Persist,
    body_bytes: usize,
) {
    let line = status.line();
    out.reserve(
        line.len()
            + HEAD_FIXED_BYTES_MAX
            + extra.content_type.map_or(0, str::len)
            + extra.allow.map_or(0, str::len)
            + extra.www_authenticate.map_or(0, str::len)
            + extra.csp.map_or(0, str::len)
            + extra.cache_control.map_or(0, str::len)
            + body_bytes,
    );
    out.extend_from_slice(line);
    out.extend_from_slice(b"Content-Length: ");
    push_decimal(out, body_bytes as u64);
    out.extend_from_slice(b"\r\n");
    if let Some(ct) = extra.content_type {
        push_header(out, b"Content-Type: ", ct.as_bytes());
    }
    if let Some(allow) = extra.allow {
        push_header(out, b"Allow: ", allow.as_bytes());
    }
    if let Some(scheme) = extra.www_authenticate {
        push_header(out, b"WWW-Authenticate: ", scheme.as_bytes());
    }
    if let Some(csp) = extra.csp {
        push_header(out, b"Content-Security-Policy: ", csp.as_bytes());
        out.extend_from_slice(b"X-Content-Type-Options: nosniff\r\n");
    }
    if let Some(cache) = extra.cache_control {
        push_header(out, b"Cache-Control: ", cache.as_bytes());
    }
    if let Some(secs) = extra.retry_after_sec {
        out.extend_from_slice(b"Retry-After: ");
        push_decimal(out, u64::from(secs));
        out.extend_from_slice(b"\r\n");
    }
    if let Some(ts) = extra.version {
        out.extend_from_slice(b"X-Ataman-Version: ");
        push_decimal(out, ts);
        out.extend_from_slice(b"\r\n");
        if extra.etag {
            out.extend_from_slice(b"ETag: \"");
            push_decimal(out, ts);
            out.extend_from_slice(b"\"\r\n");
        }
    }
    persist_header(out, persist);
    out.extend_from_slice(b"\r\n");
}

/// Appends a `304 Not Modified` for the version `ts`: its `ETag` and
/// `X-Ataman-Version`, and no body, so no `Content-Length` (RFC 9110
/// 15.4.5: a 304 has no content; its `Content-Length` would describe the
/// 200's).
pub fn write_not_modified(out: &mut Vec<u8>, ts: u64, persist: Persist) {
    out.extend_from_slice(Status::NotModified.line());
    out.extend_from_slice(b"X-Ataman-Version: ");
    push_decimal(out, ts);
    out.extend_from_slice(b"\r\nETag: \"");
    push_decimal(out, ts);
    out.extend_from_slice(b"\"\r\n");
    persist_header(out, persist);
    out.extend_from_slice(b"\r\n");
}

/// Cuts the response that starts at `start` of `out` to its head: what a
/// HEAD is answered with (RFC 9110 9.3.2: the GET's status and headers,
/// `Content-Length` included, and no content). The head ends at the first
/// blank line after `start` (no header holds one); a response with no
/// complete head is left as it is.
pub fn strip_body(out: &mut Vec<u8>, start: usize) {
    let Some(response) = out.get(start..) else {
        return;
    };
    if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
        out.truncate(start + at + 4);
    }
}

/// True when `request` (the bytes of a request, its head perhaps not
/// all in) names the method HEAD: a refusal of a head that did not parse
/// is still owed no content.
pub fn names_head(request: &[u8]) -> bool {
    request.starts_with(b"HEAD ")
}

/// Appends a whole response with a `Content-Length` body.
pub fn write_full(
    out: &mut Vec<u8>,
    status: Status,
    extra: Extra<'_>,
    persist: Persist,
    body: &[u8],
) {
    write_head(out, status, extra, persist, body.len());
    out.extend_from_slice(body);
}

/// Appends a `text/plain` error or message response (one line).
pub fn write_text(
    out: &mut Vec<u8>,
    status: Status,
    extra: Extra<'_>,
    persist: Persist,
    text: &str,
) {
    let extra = Extra {
        content_type: Some("text/plain; charset=utf-8"),
        ..extra
    };
    // The body is the text and a newline, appended after the head (no
    // intermediate copy).
    write_head(out, status, extra, persist, text.len() + 1);
    out.extend_from_slice(text.as_bytes());
    out.push(b'\n');
}

/// Appends the head of a chunked response.
pub fn write_chunked_head(out: &mut Vec<u8>, status: Status, content_type: &str, persist: Persist) {
    out.extend_from_slice(status.line());
    push_header(out, b"Content-Type: ", content_type.as_bytes());
    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    persist_header(out, persist);
    out.extend_from_slice(b"\r\n");
}

/// Appends one chunk made of `parts` (a chunk must not be empty: that ends the body).
pub fn write_chunk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    debug_assert!(len > 0);
    push_hex(out, len as u64);
    out.extend_from_slice(b"\r\n");
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk of a chunked body.
pub fn write_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    /// The `fmt`-based writer this module replaced: the reference the
    /// byte-for-byte tests compare against.
    fn reference_full(status: Status, extra: Extra<'_>, persist: Persist, body: &[u8]) -> Vec<u8> {
        let mut out = status.line().to_vec();
        write!(out, "Content-Length: {}\r\n", body.len()).unwrap();
        if let Some(ct) = extra.content_type {
            write!(out, "Content-Type: {ct}\r\n").unwrap();
        }
        if let Some(allow) = extra.allow {
            write!(out, "Allow: {allow}\r\n").unwrap();
        }
        if let Some(scheme) = extra.www_authenticate {
            write!(out, "WWW-Authenticate: {scheme}\r\n").unwrap();
        }
        if let Some(secs) = extra.retry_after_sec {
            write!(out, "Retry-After: {secs}\r\n").unwrap();
        }
        if let Some(ts) = extra.version {
            write!(out, "X-Ataman-Version: {ts}\r\n").unwrap();
            if extra.etag {
                write!(out, "ETag: \"{ts}\"\r\n").unwrap();
            }
        }
        match persist {
            Persist::Default => {}
            Persist::KeepAlive10 => out.extend_from_slice(b"Connection: keep-alive\r\n"),
            Persist::Close => out.extend_from_slice(b"Connection: close\r\n"),
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }

    const STATUSES: [Status; 5] = [
        Status::Ok,
        Status::Created,
        Status::NotFound,
        Status::MethodNotAllowed,
        Status::Unavailable,
    ];
    const PERSISTS: [Persist; 3] = [Persist::Default, Persist::KeepAlive10, Persist::Close];

    /// Decimal and hex digits match `fmt` at the edges of their widths.
    #[test]
    fn digits_match_fmt() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            65_535,
            1 << 32,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut d = Vec::new();
            push_decimal(&mut d, n);
            assert_eq!(d, n.to_string().into_bytes());
            let mut h = Vec::new();
            push_hex(&mut h, n);
            assert_eq!(h, format!("{n:x}").into_bytes());
        }
    }

    /// A chunked body is framed exactly as before (head, hex sizes, last chunk).
    #[test]
    fn chunked_framing() {
        let mut out = Vec::new();
        write_chunked_head(
            &mut out,
            Status::Ok,
            "application/octet-stream",
            Persist::Close,
        );
        write_chunk(&mut out, &[&[b'k'; 300], b"\n", b"v"]);
        write_last_chunk(&mut out);
        let mut want = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n12e\r\n".to_vec();
        want.extend_from_slice(&[b'k'; 300]);
        want.extend_from_slice(b"\nv\r\n0\r\n\r\n");
        assert_eq!(out, want);
    }

    /// A HEAD's answer keeps the head (its `Content-Length` of the GET's
    /// body) and nothing after the blank line; what was in the buffer
    /// before the response stays.
    #[test]
    fn strip_body_keeps_the_head_only() {
        let mut out = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec();
        let before = out.clone();
        let start = out.len();
        write_text(
            &mut out,
            Status::NotFound,
            Extra::default(),
            Persist::Default,
            "not\r\n\r\nfound",
        );
        strip_body(&mut out, start);
        let mut want = before.clone();
        want.extend_from_slice(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 13\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&want)
        );
        // A chunked head loses its chunks.
        let start = out.len();
        write_chunked_head(
            &mut out,
            Status::Ok,
            "application/octet-stream",
            Persist::Close,
        );
        let head_end = out.len();
        write_chunk(&mut out, &[b"k\nv"]);
        write_last_chunk(&mut out);
        strip_body(&mut out, start);
        assert_eq!(out.len(), head_end);
        // Bytes with no blank line yet, or a start past the end: left alone.
        let mut partial = b"HTTP/1.1 200 OK\r\n".to_vec();
        strip_body(&mut partial, 0);
        assert_eq!(partial, b"HTTP/1.1 200 OK\r\n");
        strip_body(&mut partial, 99);
        assert_eq!(partial, b"HTTP/1.1 200 OK\r\n");
    }

    /// Only the method HEAD, spelled exactly, is a HEAD.
    #[test]
    fn names_head_is_the_method_only() {
        assert!(names_head(b"HEAD /v0/entity?id=k HTTP/1.1\r\n"));
        assert!(names_head(b"HEAD "));
        for other in [
            &b"GET / HTTP/1.1"[..],
            b"HEADER / HTTP/1.1",
            b"head / HTTP/1.1",
            b"HEAD",
            b"",
        ] {
            assert!(!names_head(other), "{}", String::from_utf8_lossy(other));
        }
    }

    proptest! {
        /// `write_full` and `write_text` write exactly what the `fmt`-based
        /// writer wrote, for every header combination, appended to what
        /// the buffer held.
        #[test]
        fn same_bytes_as_fmt(
            status in 0..STATUSES.len(),
            persist in 0..PERSISTS.len(),
            content_type in proptest::option::of("[a-z/;= -]{0,40}"),
            allow in proptest::option::of("[A-Z, ]{0,20}"),
            retry_after_sec in proptest::option::of(any::<u32>()),
            www_authenticate in proptest::option::of("[A-Za-z]{1,12}"),
            version in proptest::option::of(any::<u64>()),
            etag in any::<bool>(),
            body in proptest::collection::vec(any::<u8>(), 0..300),
            text in "[ -~]{0,80}",
            prefix in proptest::collection::vec(any::<u8>(), 0..20),
        ) {
            let (status, persist) = (STATUSES[status], PERSISTS[persist]);
            let extra = Extra {
                content_type: content_type.as_deref(),
                allow: allow.as_deref(),
                retry_after_sec,
                www_authenticate: www_authenticate.as_deref(),
                version,
                etag,
                ..Extra::default()
            };
            let mut out = prefix.clone();
            write_full(&mut out, status, extra, persist, &body);
            let mut want = prefix.clone();
            want.extend(reference_full(status, extra, persist, &body));
            prop_assert_eq!(&out, &want);

            let mut out = prefix.clone();
            write_text(&mut out, status, extra, persist, &text);
            let text_extra = Extra { content_type: Some("text/plain; charset=utf-8"), ..extra };
            let mut want = prefix;
            want.extend(reference_full(status, text_extra, persist, format!("{text}\n").as_bytes()));
            prop_assert_eq!(out, want);
        }
    }
}
