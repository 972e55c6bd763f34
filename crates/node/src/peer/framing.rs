//! The framing the peer protocol and the sync protocol share
//! (`docs/FORMAT.md`, "Peer frame", "Frame"; "Sync frame" uses the same):
//! `u32 body_len`, `u32 crc32c(body)`, then the body. Each protocol has its
//! own body codec and its own body bound; this file is the part they have
//! in common, so both check lengths and checksums the same way.
//!
//! [`Cursor`] reads fields off a body: every read checks what is left
//! before it slices, so no input makes a decoder panic or read past its
//! frame. Its errors are the reason text of the protocol's `Malformed`.

/// Bytes before the body: `u32 body_len`, `u32 crc32c(body)` ("Peer frame", "Frame").
pub const FRAME_HEADER_BYTES: usize = 8;

/// Why bytes are not a frame (before the body is decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramingError {
    /// The header announces a body over the protocol's bound.
    TooLarge {
        /// The announced body length, bytes.
        len: usize,
        /// The bound, bytes.
        max: usize,
    },
    /// The body's CRC32C is not the one in the header.
    ChecksumMismatch {
        /// The checksum in the header.
        expected: u32,
        /// The checksum of the body received.
        found: u32,
    },
}

/// Starts a frame at the end of `out`: reserves the header. Returns where
/// the frame starts, for [`seal`].
pub fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
    start
}

/// Ends the frame begun at `start`: writes the body's length and CRC32C
/// into its header. The body must be at most `body_max` bytes (the
/// encoder's contract, debug-asserted).
pub fn seal(out: &mut [u8], start: usize, body_max: usize) {
    let body = &out[start + FRAME_HEADER_BYTES..];
    debug_assert!(
        body.len() <= body_max,
        "frame body of {} bytes over its bound of {body_max}",
        body.len()
    );
    let body_len = (body.len() as u32).to_le_bytes();
    let crc = crc32c::crc32c(body).to_le_bytes();
    out[start..start + 4].copy_from_slice(&body_len);
    out[start + 4..start + FRAME_HEADER_BYTES].copy_from_slice(&crc);
}

/// Reads a header: `(body_len, crc)`, the length checked against `body_max`
/// (so a reader never buffers toward an oversized body).
pub fn header(
    bytes: &[u8; FRAME_HEADER_BYTES],
    body_max: usize,
) -> Result<(usize, u32), FramingError> {
    let body_len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if body_len > body_max {
        return Err(FramingError::TooLarge {
            len: body_len,
            max: body_max,
        });
    }
    Ok((body_len, crc))
}

/// Checks a body against the CRC32C of its header.
pub fn check(body: &[u8], expected: u32) -> Result<(), FramingError> {
    let found = crc32c::crc32c(body);
    if found != expected {
        return Err(FramingError::ChecksumMismatch { expected, found });
    }
    Ok(())
}

/// The first frame of `buf`: `Ok(None)` while incomplete, else its checked
/// body and the bytes it occupies. An oversized length is an error as soon
/// as the header is in.
pub fn split(buf: &[u8], body_max: usize) -> Result<Option<(&[u8], usize)>, FramingError> {
    let Some(head) = buf.first_chunk::<FRAME_HEADER_BYTES>() else {
        return Ok(None);
    };
    let (body_len, expected) = header(head, body_max)?;
    let frame_bytes = FRAME_HEADER_BYTES + body_len;
    let Some(body) = buf.get(FRAME_HEADER_BYTES..frame_bytes) else {
        return Ok(None);
    };
    check(body, expected)?;
    Ok(Some((body, frame_bytes)))
}

/// Appends a `u32` length then the bytes.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    debug_assert!(u32::try_from(bytes.len()).is_ok());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads fields off the front of a body; every read checks what is left.
/// Errors are the text of a `Malformed` error, naming the field.
pub struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `body`.
    pub fn new(body: &'a [u8]) -> Self {
        Cursor { rest: body }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Succeeds only when every byte was read.
    pub fn finish(&self) -> Result<(), String> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} bytes after the last field of the body",
                self.rest.len()
            ))
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], String> {
        if self.rest.len() < n {
            return Err(format!(
                "{field}: needs {n} bytes, the body has {} left",
                self.rest.len()
            ));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], String> {
        let bytes = self.take(N, field)?;
        bytes
            .try_into()
            .map_err(|_| format!("{field}: not {N} bytes"))
    }

    /// A `u8`.
    pub fn u8(&mut self, field: &str) -> Result<u8, String> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A `u32` LE.
    pub fn u32(&mut self, field: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// A `u64` LE.
    pub fn u64(&mut self, field: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A `u8` that must be 0 or 1.
    pub fn flag(&mut self, field: &str) -> Result<bool, String> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(format!("{field}: {other}, not 0 or 1")),
        }
    }

    /// A `u32` length, at most `max`, then that many bytes.
    pub fn bytes(&mut self, field: &str, max: usize) -> Result<Vec<u8>, String> {
        let len = self.u32(field)? as usize;
        if len > max {
            return Err(format!("{field}: length {len} over the limit of {max}"));
        }
        Ok(self.take(len, field)?.to_vec())
    }

    /// A `u32` length, at most `max`, then that many bytes of UTF-8.
    pub fn string(&mut self, field: &str, max: usize) -> Result<String, String> {
        let bytes = self.bytes(field, max)?;
        String::from_utf8(bytes).map_err(|e| format!("{field}: not UTF-8 ({e})"))
    }

    /// A `u32` count of items at most `max`, each at least `item_bytes_min`
    /// bytes: a count the rest of the body cannot hold is refused before
    /// anything is allocated for it.
    pub fn count(
        &mut self,
        field: &str,
        max: usize,
        item_bytes_min: usize,
    ) -> Result<usize, String> {
        let n = self.u32(field)? as usize;
        if n > max {
            return Err(format!("{field}: {n} over the limit of {max}"));
        }
        if n.saturating_mul(item_bytes_min) > self.rest.len() {
            return Err(format!(
                "{field}: {n} items cannot fit in the {} bytes left",
                self.rest.len()
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sealed frame splits back into its body; a cut frame is incomplete;
    /// a flipped bit or an oversized length is an error.
    #[test]
    fn seal_and_split() {
        let mut out = vec![9u8];
        let start = begin(&mut out);
        out.extend_from_slice(b"body");
        seal(&mut out, start, 16);
        let frame = &out[1..];
        assert_eq!(split(frame, 16), Ok(Some((&b"body"[..], 12))));
        for cut in 0..frame.len() {
            assert_eq!(split(&frame[..cut], 16), Ok(None), "cut {cut}");
        }
        assert_eq!(
            split(frame, 3),
            Err(FramingError::TooLarge { len: 4, max: 3 })
        );
        let mut bad = frame.to_vec();
        bad[9] ^= 1;
        assert!(matches!(
            split(&bad, 16),
            Err(FramingError::ChecksumMismatch { .. })
        ));
    }

    /// Counts the body cannot hold are refused before allocation.
    #[test]
    fn count_is_checked_against_the_rest() {
        let mut body = 1000u32.to_le_bytes().to_vec();
        body.extend_from_slice(&[0; 8]);
        let mut c = Cursor::new(&body);
        assert!(c.count("n", 5000, 1).unwrap_err().contains("cannot fit"));
        let mut c = Cursor::new(&body);
        assert!(c.count("n", 10, 0).unwrap_err().contains("over the limit"));
        let body = 2u32.to_le_bytes();
        assert_eq!(Cursor::new(&body).count("n", 10, 0), Ok(2));
    }
}
