//! Response heads and bodies, written straight into a connection's output buffer.

use std::io::Write;

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
    /// 400.
    BadRequest,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 408.
    RequestTimeout,
    /// 411.
    LengthRequired,
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
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::LengthRequired => 411,
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
            Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\n",
            Status::NotFound => b"HTTP/1.1 404 Not Found\r\n",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\n",
            Status::RequestTimeout => b"HTTP/1.1 408 Request Timeout\r\n",
            Status::LengthRequired => b"HTTP/1.1 411 Length Required\r\n",
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
}

fn persist_header(out: &mut Vec<u8>, persist: Persist) {
    match persist {
        Persist::Default => {}
        Persist::KeepAlive10 => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        Persist::Close => out.extend_from_slice(b"Connection: close\r\n"),
    }
}

/// Appends a whole response with a `Content-Length` body.
pub fn write_full(
    out: &mut Vec<u8>,
    status: Status,
    extra: Extra<'_>,
    persist: Persist,
    body: &[u8],
) {
    out.extend_from_slice(status.line());
    // Writing into a Vec cannot fail.
    let _ = write!(out, "Content-Length: {}\r\n", body.len());
    if let Some(ct) = extra.content_type {
        let _ = write!(out, "Content-Type: {ct}\r\n");
    }
    if let Some(allow) = extra.allow {
        let _ = write!(out, "Allow: {allow}\r\n");
    }
    if let Some(secs) = extra.retry_after_sec {
        let _ = write!(out, "Retry-After: {secs}\r\n");
    }
    persist_header(out, persist);
    out.extend_from_slice(b"\r\n");
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
    let mut body = Vec::with_capacity(text.len() + 1);
    body.extend_from_slice(text.as_bytes());
    body.push(b'\n');
    let extra = Extra {
        content_type: Some("text/plain; charset=utf-8"),
        ..extra
    };
    write_full(out, status, extra, persist, &body);
}

/// Appends the head of a chunked response.
pub fn write_chunked_head(out: &mut Vec<u8>, status: Status, content_type: &str, persist: Persist) {
    out.extend_from_slice(status.line());
    let _ = write!(
        out,
        "Content-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n"
    );
    persist_header(out, persist);
    out.extend_from_slice(b"\r\n");
}

/// Appends one chunk made of `parts` (a chunk must not be empty: that ends the body).
pub fn write_chunk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    debug_assert!(len > 0);
    let _ = write!(out, "{len:x}\r\n");
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends the last chunk of a chunked body.
pub fn write_last_chunk(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n\r\n");
}
