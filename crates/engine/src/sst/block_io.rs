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
/// saves at least 1/8 of its size. One-off form of [`BlockEncoder::encode`].
pub fn encode_block(raw: Vec<u8>, compression: Compression) -> Vec<u8> {
    BlockEncoder::new(compression).encode(raw)
}

/// Consecutive data blocks LZ4 did not shrink by 1/8 after which a
/// [`BlockEncoder`] stops trying for [`LZ4_SKIP_BLOCKS`] blocks.
pub const LZ4_MISSES_BEFORE_SKIP: u32 = 4;

/// Data blocks stored without an LZ4 attempt after [`LZ4_MISSES_BEFORE_SKIP`]
/// misses in a row; the next block probes again.
pub const LZ4_SKIP_BLOCKS: u32 = 15;

/// Encodes the blocks of one table, reusing one compression buffer.
///
/// Data blocks go through [`BlockEncoder::encode_data`], which backs off from
/// LZ4 while it keeps failing: after [`LZ4_MISSES_BEFORE_SKIP`] misses in a
/// row (LZ4 saved less than 1/8) the next [`LZ4_SKIP_BLOCKS`] blocks are
/// stored uncompressed without an attempt, then one block probes again. On
/// incompressible values (random, encrypted or already compressed) that cuts
/// the LZ4 work of a flush or compaction to one block in 16; on compressible
/// data every block is still compressed (a success resets the count), and
/// data that turns compressible mid-table waits at most [`LZ4_SKIP_BLOCKS`]
/// blocks. Readers see no difference: each block's trailer says how it is
/// stored.
///
/// # Invariants
/// `skip_left > 0` only after `misses_in_row >= LZ4_MISSES_BEFORE_SKIP`.
#[derive(Debug)]
pub struct BlockEncoder {
    compression: Compression,
    /// LZ4 output buffer: the 4-byte size prefix, then the LZ4 block. Kept
    /// between blocks so it is allocated and zeroed once per table, not per block.
    scratch: Vec<u8>,
    misses_in_row: u32,
    skip_left: u32,
}

impl BlockEncoder {
    /// An encoder for blocks stored with `compression`.
    pub fn new(compression: Compression) -> Self {
        BlockEncoder {
            compression,
            scratch: Vec::new(),
            misses_in_row: 0,
            skip_left: 0,
        }
    }

    /// Encodes a data block, skipping LZ4 while it keeps failing (see the type's doc).
    pub fn encode_data(&mut self, raw: Vec<u8>) -> Vec<u8> {
        if self.compression == Compression::None {
            return seal(raw, COMPRESSION_NONE);
        }
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return seal(raw, COMPRESSION_NONE);
        }
        let stored = self.encode(raw);
        if stored[stored.len() - BLOCK_TRAILER_BYTES] == COMPRESSION_LZ4 {
            self.misses_in_row = 0;
        } else {
            self.misses_in_row = self.misses_in_row.saturating_add(1);
            if self.misses_in_row >= LZ4_MISSES_BEFORE_SKIP {
                self.skip_left = LZ4_SKIP_BLOCKS;
            }
        }
        debug_assert!(self.skip_left == 0 || self.misses_in_row >= LZ4_MISSES_BEFORE_SKIP);
        stored
    }

    /// Encodes a block, always trying the configured compression.
    pub fn encode(&mut self, raw: Vec<u8>) -> Vec<u8> {
        assert!(raw.len() <= BLOCK_BYTES_MAX, "block of {} bytes", raw.len());
        match self.compression {
            Compression::None => seal(raw, COMPRESSION_NONE),
            Compression::Lz4 => {
                let bound = 4 + lz4_flex::block::get_maximum_output_size(raw.len());
                if self.scratch.len() < bound {
                    self.scratch.resize(bound, 0);
                }
                let packed_len = match lz4_flex::block::compress_into(&raw, &mut self.scratch[4..])
                {
                    Ok(n) => 4 + n,
                    // Unreachable: the buffer has the documented worst-case size.
                    Err(_) => usize::MAX,
                };
                if packed_len <= raw.len() - raw.len() / 8 {
                    let size = u32::try_from(raw.len()).unwrap_or(u32::MAX);
                    self.scratch[..4].copy_from_slice(&size.to_le_bytes());
                    let mut stored = Vec::with_capacity(packed_len + BLOCK_TRAILER_BYTES);
                    stored.extend_from_slice(&self.scratch[..packed_len]);
                    seal(stored, COMPRESSION_LZ4)
                } else {
                    seal(raw, COMPRESSION_NONE)
                }
            }
        }
    }
}

/// Appends the trailer (compression byte and CRC) to stored bytes.
fn seal(mut stored: Vec<u8>, kind: u8) -> Vec<u8> {
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

    fn stored_kind(stored: &[u8]) -> u8 {
        stored[stored.len() - BLOCK_TRAILER_BYTES]
    }

    fn noise_block(seed: u32) -> Vec<u8> {
        (0..4000u32)
            .map(|i| xxhash_rust::xxh3::xxh3_64(&(seed * 4000 + i).to_le_bytes()) as u8)
            .collect()
    }

    /// After LZ4_MISSES_BEFORE_SKIP incompressible data blocks in a row the
    /// encoder stores LZ4_SKIP_BLOCKS blocks without trying (even compressible
    /// ones), then probes again and compresses from there on; every stored
    /// block reads back as built, and the always-trying `encode` (index
    /// blocks) is not affected by the back-off.
    #[test]
    fn data_blocks_back_off_from_lz4_while_it_fails() {
        let mut enc = BlockEncoder::new(Compression::Lz4);
        let mut blocks = Vec::new();
        for seed in 0..LZ4_MISSES_BEFORE_SKIP {
            blocks.push((noise_block(seed), COMPRESSION_NONE));
        }
        for _ in 0..LZ4_SKIP_BLOCKS {
            blocks.push((vec![7u8; 4000], COMPRESSION_NONE));
        }
        blocks.push((vec![8u8; 4000], COMPRESSION_LZ4));
        blocks.push((noise_block(99), COMPRESSION_NONE));
        blocks.push((vec![9u8; 4000], COMPRESSION_LZ4));
        let mut file = Vec::new();
        let mut handles = Vec::new();
        for (i, (raw, expected_kind)) in blocks.iter().enumerate() {
            if i == LZ4_MISSES_BEFORE_SKIP as usize {
                // Mid back-off: an index block still gets compressed.
                let index = enc.encode(vec![5u8; 4000]);
                assert_eq!(stored_kind(&index), COMPRESSION_LZ4);
            }
            let stored = enc.encode_data(raw.clone());
            assert_eq!(stored_kind(&stored), *expected_kind, "block {i}");
            handles.push(BlockHandle {
                offset: file.len() as u64,
                size: (stored.len() - BLOCK_TRAILER_BYTES) as u64,
            });
            file.extend_from_slice(&stored);
        }
        let file = MemReadable::new(file);
        for ((raw, _), handle) in blocks.iter().zip(handles) {
            assert_eq!(
                read_block(&file, Path::new("t"), handle).ok().as_ref(),
                Some(raw)
            );
        }
    }

    /// The reused buffer produces exactly the bytes of a fresh compression,
    /// for blocks that shrink, grow and differ in size.
    #[test]
    fn reused_buffer_matches_fresh_compression() {
        let mut enc = BlockEncoder::new(Compression::Lz4);
        let mut inputs = vec![
            vec![1u8; 9000],
            vec![2u8; 100],
            b"abcabcabcabcabcabc".repeat(50),
        ];
        inputs.push(noise_block(3));
        for raw in inputs {
            assert_eq!(enc.encode(raw.clone()), encode_block_fresh(&raw));
        }
    }

    /// The format written before the encoder reused its buffer.
    fn encode_block_fresh(raw: &[u8]) -> Vec<u8> {
        let packed = lz4_flex::block::compress_prepend_size(raw);
        let (stored, kind) = if packed.len() <= raw.len() - raw.len() / 8 {
            (packed, COMPRESSION_LZ4)
        } else {
            (raw.to_vec(), COMPRESSION_NONE)
        };
        seal(stored, kind)
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
