//! Incremental HTTP/1.1 response reader: feed it what the socket gave, it
//! says when one whole response is in. Heads are parsed by `httparse`;
//! bodies are counted and dropped, never copied.
//!
//! Supported framing: `Content-Length`, no body (1xx, 204, 304), and
//! read-until-close. A chunked response is refused as a protocol error:
//! none of the endpoints the workloads hit send one.

/// Most header lines a response may carry.
const RESPONSE_HEADERS_MAX: usize = 32;

/// Largest response head accepted, bytes (status line and headers).
pub const RESPONSE_HEAD_BYTES_MAX: usize = 64 * 1024;

/// What feeding bytes gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The response is not complete yet.
    More,
    /// One whole response; `close` when the server will close (or closed) the connection.
    Done {
        /// HTTP status code.
        status: u16,
        /// The connection must not be reused.
        close: bool,
    },
    /// The bytes are not a response we can frame.
    Invalid(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body {
        status: u16,
        remaining: u64,
        close: bool,
    },
    UntilClose {
        status: u16,
    },
}

/// One connection's response framing state plus its receive buffer.
///
/// # Invariants
/// `buf[start..end]` holds received bytes not yet consumed;
/// `start <= end <= buf.len()`. `buf` only grows (zero-filled once), so a
/// read costs no memset.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl ResponseReader {
    /// An empty reader with `capacity` bytes of buffer.
    pub fn new(capacity: usize) -> ResponseReader {
        ResponseReader {
            state: State::Head,
            buf: vec![0; capacity],
            start: 0,
            end: 0,
        }
    }

    /// Forgets everything (the connection was reopened).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.start = 0;
        self.end = 0;
    }

    /// Whether bytes of a response have arrived and not yet been framed.
    pub fn has_pending(&self) -> bool {
        self.start < self.end || self.state != State::Head
    }

    /// Room to read into: at least `min_free` bytes past the data.
    pub fn spare(&mut self, min_free: usize) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end < min_free {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() - self.end < min_free {
                self.buf.resize(self.end + min_free, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Keeps the first `n` bytes of what `spare` handed out.
    pub fn commit(&mut self, n: usize) {
        debug_assert!(self.end + n <= self.buf.len());
        self.end += n;
    }

    /// Frames what is buffered.
    pub fn advance(&mut self) -> Progress {
        loop {
            match self.state {
                State::Head => {
                    let data = &self.buf[self.start..self.end];
                    if data.is_empty() {
                        return Progress::More;
                    }
                    let mut headers = [httparse::EMPTY_HEADER; RESPONSE_HEADERS_MAX];
                    let mut response = httparse::Response::new(&mut headers);
                    let head_len = match response.parse(data) {
                        Ok(httparse::Status::Complete(n)) => n,
                        Ok(httparse::Status::Partial) => {
                            if data.len() > RESPONSE_HEAD_BYTES_MAX {
                                return Progress::Invalid("response head too large");
                            }
                            return Progress::More;
                        }
                        Err(_) => return Progress::Invalid("malformed response head"),
                    };
                    let status = response.code.unwrap_or(0);
                    let http10 = response.version == Some(0);
                    let mut length = None;
                    let mut close = http10;
                    for h in response.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            match std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse().ok())
                            {
                                Some(n) => length = Some(n),
                                None => return Progress::Invalid("bad Content-Length"),
                            }
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            return Progress::Invalid("chunked responses are not supported");
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            let v = h.value;
                            if v.eq_ignore_ascii_case(b"close") {
                                close = true;
                            } else if v.eq_ignore_ascii_case(b"keep-alive") {
                                close = false;
                            }
                        }
                    }
                    self.start += head_len;
                    self.state = if (100..200).contains(&status) {
                        // Interim answer: the real one follows.
                        State::Head
                    } else if status == 204 || status == 304 {
                        State::Body {
                            status,
                            remaining: 0,
                            close,
                        }
                    } else {
                        match length {
                            Some(remaining) => State::Body {
                                status,
                                remaining,
                                close,
                            },
                            None => State::UntilClose { status },
                        }
                    };
                }
                State::Body {
                    status,
                    remaining,
                    close,
                } => {
                    let available = (self.end - self.start) as u64;
                    let take = available.min(remaining);
                    self.start += take as usize;
                    let remaining = remaining - take;
                    if remaining > 0 {
                        self.state = State::Body {
                            status,
                            remaining,
                            close,
                        };
                        return Progress::More;
                    }
                    self.state = State::Head;
                    if self.start < self.end {
                        // One request in flight: nothing may follow the answer.
                        return Progress::Invalid("bytes after the response");
                    }
                    return Progress::Done { status, close };
                }
                State::UntilClose { .. } => {
                    self.start = self.end;
                    return Progress::More;
                }
            }
        }
    }

    /// The peer closed the connection: completes a read-until-close body.
    pub fn eof(&mut self) -> Progress {
        match self.state {
            State::UntilClose { status } => {
                self.state = State::Head;
                Progress::Done {
                    status,
                    close: true,
                }
            }
            _ => Progress::Invalid("connection closed before the response was complete"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: usize = 4096;

    fn feed(r: &mut ResponseReader, bytes: &[u8]) -> Progress {
        let spare = r.spare(FREE);
        spare[..bytes.len()].copy_from_slice(bytes);
        r.commit(bytes.len());
        r.advance()
    }

    /// A response split anywhere is framed exactly once, at its last byte.
    #[test]
    fn split_anywhere() {
        let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for cut in 1..whole.len() {
            let mut r = ResponseReader::new(16);
            assert_eq!(feed(&mut r, &whole[..cut]), Progress::More, "cut {cut}");
            assert_eq!(
                feed(&mut r, &whole[cut..]),
                Progress::Done {
                    status: 200,
                    close: false
                }
            );
            assert!(!r.has_pending());
        }
    }

    /// 100 Continue is skipped, 204 has no body, HTTP/1.0 and Connection: close mean close.
    #[test]
    fn framing_rules() {
        let mut r = ResponseReader::new(16);
        assert_eq!(
            feed(
                &mut r,
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
            ),
            Progress::Done {
                status: 204,
                close: false
            }
        );
        assert_eq!(
            feed(&mut r, b"HTTP/1.0 500 X\r\nContent-Length: 0\r\n\r\n"),
            Progress::Done {
                status: 500,
                close: true
            }
        );
        assert_eq!(
            feed(
                &mut r,
                b"HTTP/1.1 404 X\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
            ),
            Progress::Done {
                status: 404,
                close: true
            }
        );
        assert_eq!(feed(&mut r, b"HTTP/1.0 200 OK\r\n\r\nbody"), Progress::More);
        assert_eq!(
            r.eof(),
            Progress::Done {
                status: 200,
                close: true
            }
        );
    }

    /// Garbage, chunked bodies, extra bytes and early close are errors.
    #[test]
    fn refuses_what_it_cannot_frame() {
        let mut r = ResponseReader::new(16);
        assert!(matches!(
            feed(&mut r, b"SSH-2.0\r\n\r\n"),
            Progress::Invalid(_)
        ));
        let mut r = ResponseReader::new(16);
        assert!(matches!(
            feed(
                &mut r,
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            ),
            Progress::Invalid(_)
        ));
        let mut r = ResponseReader::new(16);
        assert!(matches!(
            feed(&mut r, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"),
            Progress::Invalid(_)
        ));
        let mut r = ResponseReader::new(16);
        assert_eq!(
            feed(&mut r, b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab"),
            Progress::More
        );
        assert!(matches!(r.eof(), Progress::Invalid(_)));
    }
}
