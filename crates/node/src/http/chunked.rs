//! Decoding a chunked request body (RFC 9112, section 7.1): what
//! `curl -T -` and many HTTP libraries send when they stream a body of
//! unknown length (`Transfer-Encoding: chunked`).
//!
//! ```text
//! chunked-body    = *chunk last-chunk trailer-section CRLF
//! chunk           = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size      = 1*HEXDIG
//! last-chunk      = 1*("0") [ chunk-ext ] CRLF
//! trailer-section = *( field-line CRLF )
//! ```
//!
//! # Rules
//! - [`Decoder`] is an incremental state machine: it takes the bytes as
//!   they arrive, split anywhere (at every byte, in the tests), and
//!   appends the data to the body; no byte is looked at twice.
//! - Lines end with CRLF; a bare LF or CR is malformed (strict framing:
//!   a lenient reader that disagrees with a proxy's is how requests get
//!   smuggled).
//! - A chunk size is hex digits (any number of leading zeros) that fit in
//!   a `u64`; anything else is malformed.
//! - Chunk extensions (`;name=value` after the size, whitespace allowed
//!   before the `;`) are ignored, as RFC 9112 allows; a size line (with them) longer than
//!   [`SIZE_LINE_BYTES_MAX`] is malformed.
//! - Trailer fields are read and dropped (the node has no use for them):
//!   each must look like a field line (`name:` first, a name of token
//!   characters), and all of them together at most [`TRAILER_BYTES_MAX`].
//! - The body is refused as too large as soon as a chunk size would take
//!   it past the limit, before the chunk's data is read (the connection
//!   answers 413 and closes, as for a `Content-Length` over the limit).
//! - Decoding stops right after the final CRLF: bytes after it are the
//!   next request's, never consumed.

use super::Status;
use super::request::HttpError;

/// Longest chunk-size line: the size, its extensions, CRLF. Past it: malformed.
pub const SIZE_LINE_BYTES_MAX: usize = 4096;
/// Most bytes of trailer fields (lines with their CRLFs) one body may
/// carry; they are dropped. Past it: malformed.
pub const TRAILER_BYTES_MAX: usize = 8192;

/// Why a chunked body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkedError {
    /// Bytes that are not a chunked body (400).
    #[error("malformed chunked body: {0}")]
    Malformed(&'static str),
    /// The body would be larger than the limit (413).
    #[error("chunked body over the limit of {limit} bytes")]
    TooLarge {
        /// The limit, bytes.
        limit: u64,
    },
}

/// Where the decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// In a chunk size's hex digits (`digits` read so far).
    Size { digits: u32 },
    /// After the size, in whitespace (BWS) before `;` or the CR.
    SizeSpace,
    /// In the extensions, up to the CR.
    Extension,
    /// The size line's CR was read; its LF must follow.
    SizeLf,
    /// In a chunk's data, `left` bytes to go.
    Data { left: u64 },
    /// After a chunk's data: its CR.
    DataCr,
    /// After a chunk's data and CR: its LF.
    DataLf,
    /// At the start of a trailer line (or of the final CRLF).
    TrailerStart,
    /// In a trailer field's name.
    TrailerName,
    /// In a trailer field's value, up to the CR.
    TrailerValue,
    /// A trailer line's CR was read; its LF must follow.
    TrailerLf,
    /// The final CR was read; its LF must follow.
    FinalLf,
    /// The body is complete.
    Done,
}

/// An incremental decoder of one chunked body.
///
/// # Invariants
/// `body_bytes <= body_bytes_max`; `line_bytes <= SIZE_LINE_BYTES_MAX`;
/// `trailer_bytes <= TRAILER_BYTES_MAX`; after an error the decoder is
/// not fed again (the connection closes).
#[derive(Debug, Clone)]
pub struct Decoder {
    state: State,
    /// The chunk size being read.
    size: u64,
    /// Body bytes so far (declared by the chunk sizes read).
    body_bytes: u64,
    body_bytes_max: u64,
    /// Bytes of the current size line.
    line_bytes: usize,
    /// Bytes of trailer lines so far.
    trailer_bytes: usize,
}

impl Decoder {
    /// A decoder of a body of at most `body_bytes_max` bytes.
    pub fn new(body_bytes_max: u64) -> Decoder {
        Decoder {
            state: State::Size { digits: 0 },
            size: 0,
            body_bytes: 0,
            body_bytes_max,
            line_bytes: 0,
            trailer_bytes: 0,
        }
    }

    /// True once the whole body (with its trailers and final CRLF) is in.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes what it can of `input`, appending chunk data to `body`.
    /// Returns the bytes of `input` consumed: all of them, or fewer once
    /// the body is complete (the rest is the next request's).
    pub fn feed(&mut self, input: &[u8], body: &mut Vec<u8>) -> Result<usize, ChunkedError> {
        let mut i = 0;
        while i < input.len() {
            if let State::Data { left } = self.state {
                let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                body.extend_from_slice(&input[i..i + take]);
                i += take;
                let left = left - take as u64;
                self.state = if left == 0 {
                    State::DataCr
                } else {
                    State::Data { left }
                };
                continue;
            }
            if self.state == State::Done {
                break;
            }
            self.step(input[i])?;
            i += 1;
        }
        Ok(i)
    }

    /// One byte outside chunk data.
    fn step(&mut self, b: u8) -> Result<(), ChunkedError> {
        use ChunkedError::Malformed;
        match self.state {
            State::Size { .. } | State::SizeSpace | State::Extension | State::SizeLf => {
                self.line_bytes += 1;
                if self.line_bytes > SIZE_LINE_BYTES_MAX {
                    return Err(Malformed("chunk-size line too long"));
                }
            }
            State::TrailerStart
            | State::TrailerName
            | State::TrailerValue
            | State::TrailerLf
            | State::FinalLf => {
                self.trailer_bytes += 1;
                if self.trailer_bytes > TRAILER_BYTES_MAX + 2 {
                    return Err(Malformed("trailer fields too long"));
                }
            }
            _ => {}
        }
        self.state = match self.state {
            State::Size { digits } => match hex_value(b) {
                Some(d) => {
                    if self.size > u64::MAX >> 4 {
                        return Err(Malformed("chunk size does not fit 64 bits"));
                    }
                    self.size = self.size << 4 | u64::from(d);
                    State::Size { digits: digits + 1 }
                }
                None if digits == 0 => return Err(Malformed("chunk size is not hex")),
                None => match b {
                    b';' => State::Extension,
                    b' ' | b'\t' => State::SizeSpace,
                    b'\r' => State::SizeLf,
                    _ => return Err(Malformed("bad byte after the chunk size")),
                },
            },
            State::SizeSpace => match b {
                b' ' | b'\t' => State::SizeSpace,
                b';' => State::Extension,
                b'\r' => State::SizeLf,
                _ => return Err(Malformed("bad byte after the chunk size")),
            },
            State::Extension => match b {
                b'\r' => State::SizeLf,
                b'\n' => return Err(Malformed("bare LF in a chunk extension")),
                _ => State::Extension,
            },
            State::SizeLf => {
                if b != b'\n' {
                    return Err(Malformed("chunk-size line not ended by CRLF"));
                }
                self.chunk_start()?
            }
            // `feed` copies data and stops at the end itself; never here.
            State::Data { .. } | State::Done => {
                return Err(Malformed("bytes after the end of the body"));
            }
            State::DataCr if b == b'\r' => State::DataLf,
            State::DataCr => return Err(Malformed("chunk data not followed by CRLF")),
            State::DataLf if b == b'\n' => {
                self.line_bytes = 0;
                State::Size { digits: 0 }
            }
            State::DataLf => return Err(Malformed("chunk data not followed by CRLF")),
            State::TrailerStart => match b {
                b'\r' => State::FinalLf,
                b if is_token(b) => State::TrailerName,
                _ => return Err(Malformed("trailer line is not a field")),
            },
            State::TrailerName => match b {
                b':' => State::TrailerValue,
                b if is_token(b) => State::TrailerName,
                _ => return Err(Malformed("trailer field name")),
            },
            State::TrailerValue => match b {
                b'\r' => State::TrailerLf,
                b'\n' | 0 => return Err(Malformed("bad byte in a trailer field")),
                _ => State::TrailerValue,
            },
            State::TrailerLf if b == b'\n' => State::TrailerStart,
            State::TrailerLf => return Err(Malformed("trailer line not ended by CRLF")),
            State::FinalLf if b == b'\n' => State::Done,
            State::FinalLf => return Err(Malformed("body not ended by CRLF")),
        };
        Ok(())
    }

    /// A size line is complete: the next chunk's data, or the trailers
    /// after the last chunk.
    fn chunk_start(&mut self) -> Result<State, ChunkedError> {
        let size = std::mem::take(&mut self.size);
        if size == 0 {
            return Ok(State::TrailerStart);
        }
        let total = self.body_bytes.saturating_add(size);
        if total > self.body_bytes_max {
            return Err(ChunkedError::TooLarge {
                limit: self.body_bytes_max,
            });
        }
        self.body_bytes = total;
        Ok(State::Data { left: size })
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A `tchar` of RFC 9110 (field names are tokens).
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl ChunkedError {
    /// The answer to a request whose body was refused: 400 or 413, and the
    /// connection closes (what follows can no longer be framed).
    pub fn to_http(&self) -> HttpError {
        let status = match self {
            ChunkedError::Malformed(_) => Status::BadRequest,
            ChunkedError::TooLarge { .. } => Status::PayloadTooLarge,
        };
        HttpError::close(status, self.to_string())
    }
}

/// A chunked body being received: the decoder and the data so far.
#[derive(Debug)]
pub struct ChunkedBody {
    decoder: Decoder,
    body: Vec<u8>,
}

impl ChunkedBody {
    /// A body of at most `body_bytes_max` bytes.
    pub fn new(body_bytes_max: u64) -> ChunkedBody {
        ChunkedBody {
            decoder: Decoder::new(body_bytes_max),
            body: Vec::new(),
        }
    }

    /// Decodes what arrived: the bytes consumed, and the whole body once
    /// it is complete (the bytes after it are not consumed).
    pub fn feed(&mut self, input: &[u8]) -> Result<(usize, Option<Vec<u8>>), ChunkedError> {
        let used = self.decoder.feed(input, &mut self.body)?;
        let done = self
            .decoder
            .is_done()
            .then(|| std::mem::take(&mut self.body));
        Ok((used, done))
    }
}

/// A whole body decoded at once, and the bytes it took (tests, fuzzing).
pub fn decode_all(
    input: &[u8],
    body_bytes_max: u64,
) -> Result<Option<(Vec<u8>, usize)>, ChunkedError> {
    let mut decoder = Decoder::new(body_bytes_max);
    let mut body = Vec::new();
    let used = decoder.feed(input, &mut body)?;
    Ok(decoder.is_done().then_some((body, used)))
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
