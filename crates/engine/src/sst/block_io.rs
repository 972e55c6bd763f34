//! Where a block lives in a table file and how it is stored there.
//!
//! `docs/FORMAT.md`, "SSTable: block trailer":
//!
//! ```text
//! stored_block := stored_bytes, compression: u8, crc: u32 LE
//! crc          := CRC32C over stored_bytes followed by the compression byte
//! compression  := 0 (none: stored_bytes are the block)
//!               | 1 (lz4: stored_bytes are u32 LE decompressed size ++ LZ4 block)
//! ```
//!
//! A [`BlockHandle`] names `stored_bytes` (offset and size, trailer not
//! included). The reader verifies the checksum before it decompresses, and
//! refuses any size above [`BLOCK_BYTES_MAX`] before it allocates, so a
//! corrupt size cannot make it allocate gigabytes.

use crate::coding;
use crate::error::{CorruptionKind, Error, Result};
use crate::fs::ReadableFile;
use crate::key::{INTERNAL_KEY_TRAILER_BYTES, KEY_BYTES_MAX, VALUE_BYTES_MAX};
use crate::options::Compression;
use std::path::Path;

/// Bytes of the trailer after every stored block ("SSTable: block trailer").
pub const BLOCK_TRAILER_BYTES: usize = 5;

/// Compression byte: the block is stored as built.
pub const COMPRESSION_NONE: u8 = 0;

/// Compression byte: the block is LZ4-compressed with its size prepended.
pub const COMPRESSION_LZ4: u8 = 1;

/// Largest block (stored or decompressed) a reader accepts, in bytes.
///
/// A block holds at least one entry whatever its size, so this must fit the
/// largest entry: a value of [`VALUE_BYTES_MAX`], a key of [`KEY_BYTES_MAX`]
/// plus its trailer, three varint headers and one restart point. The builder
/// closes a block before an entry would push it past this bound.
pub const BLOCK_BYTES_MAX: usize = VALUE_BYTES_MAX + 1024 * 1024;

const _: () = assert!(
    BLOCK_BYTES_MAX
        >= VALUE_BYTES_MAX
            + KEY_BYTES_MAX
            + INTERNAL_KEY_TRAILER_BYTES
            + 3 * coding::VARINT64_BYTES_MAX
            + 8
);
const _: () = assert!(BLOCK_BYTES_MAX <= u32::MAX as usize);

/// The position of a block's stored bytes in a table file (trailer excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHandle {
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// Stored bytes of the block, without its trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (the index block's value format).
    pub fn encode_varint(&self, out: &mut Vec<u8>) {
        coding::put_varint(out, self.offset);
        coding::put_varint(out, self.size);
    }

    /// Decodes a handle written by [`BlockHandle::encode_varint`]; `None` if
    /// malformed or followed by extra bytes.
    pub fn decode_varint(mut input: &[u8]) -> Option<BlockHandle> {
        let offset = coding::get_varint(&mut input)?;
        let size = coding::get_varint(&mut input)?;
        input.is_empty().then_some(BlockHandle { offset, size })
    }

    /// First byte past the block's trailer; `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_BYTES as u64)
    }
}

fn block_crc(stored: &[u8], compression: u8) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(stored), &[compression])
}

/// Turns a built block into the bytes to append: stored bytes plus trailer.
///
/// With [`Compression::Lz4`] the block is stored compressed only when that
/// saves at least 1/8 of its size.
pub fn encode_block(raw: Vec<u8>, compression: Compression) -> Vec<u8> {
    assert!(raw.len() <= BLOCK_BYTES_MAX, "block of {} bytes", raw.len());
    let (mut stored, kind) = match compression {
        Compression::None => (raw, COMPRESSION_NONE),
        Compression::Lz4 => {
            let packed = lz4_flex::block::compress_prepend_size(&raw);
            if packed.len() <= raw.len() - raw.len() / 8 {
                (packed, COMPRESSION_LZ4)
            } else {
                (raw, COMPRESSION_NONE)
            }
        }
    };
    let crc = block_crc(&stored, kind);
    stored.reserve_exact(BLOCK_TRAILER_BYTES);
    stored.push(kind);
    stored.extend_from_slice(&crc.to_le_bytes());
    stored
}

/// Reads the block at `handle`, verifies its checksum, and decompresses it.
///
/// Every error names `path` and the block's offset.
pub fn read_block(file: &dyn ReadableFile, path: &Path, handle: BlockHandle) -> Result<Vec<u8>> {
    let corrupt = |kind| Error::corruption(path, handle.offset, kind);
    let size = usize::try_from(handle.size)
        .ok()
        .filter(|&s| s <= BLOCK_BYTES_MAX)
        .ok_or_else(|| {
            corrupt(CorruptionKind::Malformed(format!(
                "block size {} above {BLOCK_BYTES_MAX}",
                handle.size
            )))
        })?;
    let end = handle.end_with_trailer().unwrap_or(u64::MAX);
    if end > file.len() {
        return Err(corrupt(CorruptionKind::Truncated {
            needed: end,
            available: file.len(),
        }));
    }
    let mut buf = vec![0u8; size + BLOCK_TRAILER_BYTES];
    file.read_exact_at(&mut buf, handle.offset)
        .map_err(|e| Error::io(path, e))?;
    let trailer = buf.split_off(size);
    let kind = trailer[0];
    let expected = u32::from_le_bytes([trailer[1], trailer[2], trailer[3], trailer[4]]);
    let got = block_crc(&buf, kind);
    if got != expected {
        return Err(corrupt(CorruptionKind::ChecksumMismatch { expected, got }));
    }
    match kind {
        COMPRESSION_NONE => Ok(buf),
        COMPRESSION_LZ4 => decompress_lz4(&buf).map_err(corrupt),
        other => Err(corrupt(CorruptionKind::Malformed(format!(
            "unknown compression type {other}"
        )))),
    }
}

/// Decompresses an LZ4 block with its size prepended, refusing sizes above
/// [`BLOCK_BYTES_MAX`] before allocating.
pub fn decompress_lz4(stored: &[u8]) -> std::result::Result<Vec<u8>, CorruptionKind> {
    let mut cursor = stored;
    let declared = coding::get_u32_le(&mut cursor).ok_or(CorruptionKind::Truncated {
        needed: 4,
        available: stored.len() as u64,
    })? as usize;
    if declared > BLOCK_BYTES_MAX {
        return Err(CorruptionKind::Malformed(format!(
            "decompressed size {declared} above {BLOCK_BYTES_MAX}"
        )));
    }
    let out = lz4_flex::block::decompress_size_prepended(stored)
        .map_err(|e| CorruptionKind::Malformed(format!("lz4: {e}")))?;
    if out.len() != declared {
        return Err(CorruptionKind::Malformed(format!(
            "decompressed {} bytes, header says {declared}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::test_file::MemReadable;

    /// A stored block round-trips with and without compression, and
    /// compression is used only when it saves at least 1/8.
    #[test]
    fn round_trip_and_compression_choice() {
        let compressible = vec![7u8; 4000];
        let stored = encode_block(compressible.clone(), Compression::Lz4);
        assert_eq!(stored[stored.len() - BLOCK_TRAILER_BYTES], COMPRESSION_LZ4);
        assert!(stored.len() < 1000);
        let handle = BlockHandle {
            offset: 0,
            size: (stored.len() - BLOCK_TRAILER_BYTES) as u64,
        };
        let file = MemReadable::new(stored);
        assert_eq!(
            read_block(&file, Path::new("t"), handle).ok(),
            Some(compressible)
        );

        let noise: Vec<u8> = (0..4000u32)
            .map(|i| xxhash_rust::xxh3::xxh3_64(&i.to_le_bytes()) as u8)
            .collect();
        let stored = encode_block(noise.clone(), Compression::Lz4);
        assert_eq!(stored[stored.len() - BLOCK_TRAILER_BYTES], COMPRESSION_NONE);
        assert_eq!(stored.len(), noise.len() + BLOCK_TRAILER_BYTES);
    }

    /// A corrupt LZ4 size prefix above the bound is refused without allocating it.
    #[test]
    fn huge_decompressed_size_is_refused() {
        let mut stored = (u32::MAX).to_le_bytes().to_vec();
        stored.extend_from_slice(&[0u8; 16]);
        assert!(matches!(
            decompress_lz4(&stored),
            Err(CorruptionKind::Malformed(_))
        ));
        let mut wrong = 5u32.to_le_bytes().to_vec();
        wrong.extend_from_slice(&lz4_flex::block::compress(b"abcdefgh"));
        assert!(decompress_lz4(&wrong).is_err());
    }

    /// A handle past the end of the file or above the size bound is a corruption, not an allocation.
    #[test]
    fn bad_handles_are_corruption() {
        let file = MemReadable::new(vec![0u8; 100]);
        for handle in [
            BlockHandle {
                offset: 90,
                size: 20,
            },
            BlockHandle {
                offset: u64::MAX - 2,
                size: 10,
            },
            BlockHandle {
                offset: 0,
                size: BLOCK_BYTES_MAX as u64 + 1,
            },
        ] {
            let err = read_block(&file, Path::new("t"), handle);
            assert!(
                matches!(err, Err(Error::Corruption { offset, .. }) if offset == handle.offset)
            );
        }
    }
}
