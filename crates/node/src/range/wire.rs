//! The internal range stream between nodes (`GET /v0/internal/range`):
//! a chunked HTTP body whose every chunk is one version of a key, so a
//! coordinator can merge versions, not just values.
//!
//! A chunk's payload (docs/API.md, "Internal endpoints"):
//!
//! | bytes | what |
//! | --- | --- |
//! | 8 | timestamp, big-endian |
//! | 1 | 1: a value follows the key; 2: a value with a deadline follows the key (the deadline itself is not sent); 0: a tombstone (nothing follows) |
//! | 4 | key length, big-endian |
//! | key length | the key |
//! | the rest | the value |
//!
//! [`ChunkReader`] reads such a body from a blocking reader, holding one
//! chunk at a time (bounded by the key and value limits).

use super::merge::Version;
use std::io::BufRead;

/// Content type of the internal range stream.
pub const CONTENT_TYPE: &str = "application/x-ataman-versions";
/// Bytes of a payload before the key.
const FIXED_BYTES: usize = 8 + 1 + 4;
/// Longest chunk-size line accepted (hex digits, extensions, CRLF).
const SIZE_LINE_BYTES_MAX: usize = 1024;

/// Why an internal range stream could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed or timed out.
    #[error("read failed: {0}")]
    Io(#[from] std::io::Error),
    /// The stream ended before its last chunk.
    #[error("stream cut before its end")]
    Cut,
    /// Bytes that are not a chunked body of versions.
    #[error("malformed stream: {0}")]
    Malformed(&'static str),
    /// A chunk over the limit.
    #[error("chunk of {0} bytes over the limit")]
    TooLarge(u64),
}

/// The tag byte of a version: 0 a tombstone, 1 a value, 2 an expiring value.
fn tag_of(value: Option<&[u8]>, expiring: bool) -> u8 {
    match (value, expiring) {
        (None, _) => 0,
        (Some(_), false) => 1,
        (Some(_), true) => 2,
    }
}

/// The value and whether it expires, from a tag and the bytes after the key.
fn value_of(tag: u8, value: Vec<u8>) -> Result<(Option<Vec<u8>>, bool), WireError> {
    match tag {
        1 => Ok((Some(value), false)),
        2 => Ok((Some(value), true)),
        0 if value.is_empty() => Ok((None, false)),
        _ => Err(WireError::Malformed("bad version tag")),
    }
}

/// The payload of `key`'s version (`value` `None`: a tombstone; `expiring`:
/// the value has a deadline), appended to `out`.
pub fn encode_into(out: &mut Vec<u8>, key: &[u8], ts: u64, value: Option<&[u8]>, expiring: bool) {
    out.extend_from_slice(&ts.to_be_bytes());
    out.push(tag_of(value, expiring));
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    if let Some(value) = value {
        out.extend_from_slice(value);
    }
}

/// The bytes of one payload's parts, for [`crate::http::response::write_chunk`].
pub fn header(key: &[u8], ts: u64, value: Option<&[u8]>, expiring: bool) -> [u8; FIXED_BYTES] {
    let mut h = [0u8; FIXED_BYTES];
    h[..8].copy_from_slice(&ts.to_be_bytes());
    h[8] = tag_of(value, expiring);
    h[9..].copy_from_slice(&(key.len() as u32).to_be_bytes());
    h
}

/// A version from one payload.
pub fn decode(payload: &[u8]) -> Result<Version, WireError> {
    let Some((fixed, rest)) = payload.split_first_chunk::<FIXED_BYTES>() else {
        return Err(WireError::Malformed("short payload"));
    };
    let (ts, tag, key_len) = fixed_fields(fixed);
    if rest.len() < key_len {
        return Err(WireError::Malformed("key past the payload"));
    }
    let (key, value) = rest.split_at(key_len);
    let (value, expiring) = value_of(tag, value.to_vec())?;
    Ok(Version {
        key: key.to_vec(),
        ts,
        value,
        expiring,
    })
}

/// Reads versions from a chunked body (the head already read).
pub struct ChunkReader<R> {
    reader: R,
    chunk_bytes_max: u64,
    done: bool,
    line: Vec<u8>,
}

impl<R: BufRead> ChunkReader<R> {
    /// A reader of `reader`'s chunks, refusing chunks over `chunk_bytes_max`.
    pub fn new(reader: R, chunk_bytes_max: u64) -> Self {
        ChunkReader {
            reader,
            chunk_bytes_max,
            done: false,
            line: Vec::new(),
        }
    }

    /// One CRLF-ended line, bounded.
    fn read_line(&mut self) -> Result<(), WireError> {
        self.line.clear();
        let mut limited = std::io::Read::take(&mut self.reader, SIZE_LINE_BYTES_MAX as u64);
        let n = limited.read_until(b'\n', &mut self.line)?;
        if n == 0 || self.line.last() != Some(&b'\n') {
            return Err(if n == 0 || n < SIZE_LINE_BYTES_MAX {
                WireError::Cut
            } else {
                WireError::Malformed("chunk-size line too long")
            });
        }
        Ok(())
    }

    /// The next version, `Ok(None)` after the last chunk.
    pub fn next_version(&mut self) -> Result<Option<Version>, WireError> {
        if self.done {
            return Ok(None);
        }
        self.read_line()?;
        let digits = self
            .line
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        if digits == 0 || digits > 16 {
            return Err(WireError::Malformed("bad chunk size"));
        }
        let text = std::str::from_utf8(&self.line[..digits])
            .map_err(|_| WireError::Malformed("bad chunk size"))?;
        let size =
            u64::from_str_radix(text, 16).map_err(|_| WireError::Malformed("bad chunk size"))?;
        if size == 0 {
            // The last chunk: no trailers are sent, just the final CRLF.
            self.read_line()?;
            self.done = true;
            return Ok(None);
        }
        if size > self.chunk_bytes_max {
            return Err(WireError::TooLarge(size));
        }
        let size = size as usize;
        if size < FIXED_BYTES {
            return Err(WireError::Malformed("short payload"));
        }
        // The fixed fields, then the key and the value straight into their own buffers.
        let mut fixed = [0u8; FIXED_BYTES];
        read_exact(&mut self.reader, &mut fixed)?;
        let (ts, tag, key_len) = fixed_fields(&fixed);
        let rest = size - FIXED_BYTES;
        if key_len > rest {
            return Err(WireError::Malformed("key past the payload"));
        }
        let mut key = vec![0u8; key_len];
        read_exact(&mut self.reader, &mut key)?;
        let mut value = vec![0u8; rest - key_len];
        read_exact(&mut self.reader, &mut value)?;
        let (value, expiring) = value_of(tag, value)?;
        let mut crlf = [0u8; 2];
        read_exact(&mut self.reader, &mut crlf)?;
        if &crlf != b"\r\n" {
            return Err(WireError::Malformed("chunk not followed by CRLF"));
        }
        Ok(Some(Version {
            key,
            ts,
            value,
            expiring,
        }))
    }
}

/// The timestamp, the tag and the key length of a payload's fixed bytes.
fn fixed_fields(fixed: &[u8; FIXED_BYTES]) -> (u64, u8, usize) {
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&fixed[..8]);
    let mut len = [0u8; 4];
    len.copy_from_slice(&fixed[9..FIXED_BYTES]);
    (
        u64::from_be_bytes(ts),
        fixed[8],
        u32::from_be_bytes(len) as usize,
    )
}

fn read_exact(reader: &mut impl std::io::Read, buf: &mut [u8]) -> Result<(), WireError> {
    reader.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => WireError::Cut,
        _ => WireError::Io(e),
    })
}

impl<R: BufRead> Iterator for ChunkReader<R> {
    type Item = Result<Version, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_version() {
            Ok(Some(v)) => Some(Ok(v)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::{write_chunk, write_last_chunk};
    use proptest::prelude::*;

    fn body(versions: &[Version], last: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for v in versions {
            let h = header(&v.key, v.ts, v.value.as_deref(), v.expiring);
            write_chunk(&mut out, &[&h, &v.key, v.value.as_deref().unwrap_or(&[])]);
        }
        if last {
            write_last_chunk(&mut out);
        }
        out
    }

    fn version() -> impl Strategy<Value = Version> {
        (
            prop::collection::vec(any::<u8>(), 0..20),
            any::<u64>(),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
            any::<bool>(),
        )
            .prop_map(|(key, ts, value, expiring)| Version {
                key,
                ts,
                expiring: expiring && value.is_some(),
                value,
            })
    }

    proptest! {
        #[test]
        fn round_trips(versions in prop::collection::vec(version(), 0..20)) {
            let bytes = body(&versions, true);
            let got: Result<Vec<_>, _> = ChunkReader::new(&bytes[..], 1 << 20).collect();
            prop_assert_eq!(got.unwrap(), versions.clone());
            let mut one = Vec::new();
            for v in &versions {
                one.clear();
                encode_into(&mut one, &v.key, v.ts, v.value.as_deref(), v.expiring);
                prop_assert_eq!(decode(&one).unwrap(), v.clone());
            }
        }

        /// Any cut of a body before its end is an error, never a short success.
        #[test]
        fn a_cut_body_is_an_error(versions in prop::collection::vec(version(), 1..6), at in any::<prop::sample::Index>()) {
            let bytes = body(&versions, true);
            let cut = at.index(bytes.len());
            let got: Result<Vec<_>, _> = ChunkReader::new(&bytes[..cut], 1 << 20).collect();
            prop_assert!(got.is_err());
        }
    }

    #[test]
    fn oversized_chunk_is_refused() {
        let v = Version {
            key: b"k".to_vec(),
            ts: 1,
            value: Some(vec![7; 100]),
            expiring: false,
        };
        let bytes = body(&[v], true);
        let mut r = ChunkReader::new(&bytes[..], 50);
        assert!(matches!(r.next_version(), Err(WireError::TooLarge(_))));
    }
}
