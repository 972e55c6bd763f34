//! The fixed-size footer at the end of every table file.
//!
//! `docs/FORMAT.md`, "SSTable: footer" (48 bytes, all little-endian):
//!
//! ```text
//! 0   filter_offset  u64
//! 8   filter_size    u64
//! 16  index_offset   u64
//! 24  index_size     u64
//! 32  crc            u32   CRC32C over bytes 0..32 and 36..48
//! 36  format_version u32   FORMAT_VERSION
//! 40  magic          u64   TABLE_MAGIC
//! ```
//!
//! The reader checks the magic, then the version (either wrong:
//! [`CorruptionKind::BadMagic`]), then the checksum. Version and magic sit
//! at the end so a future format can change everything before them.

use super::block_io::BlockHandle;
use crate::coding;
use crate::error::CorruptionKind;

/// Bytes of the footer ("SSTable: footer").
pub const FOOTER_BYTES: usize = 48;

/// The magic number ending every table file: "atamSST\x01" read as u64 LE.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"atamSST\x01");

/// The table format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;

const CRC_AT: usize = 32;

/// Where the filter and index blocks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The filter block.
    pub filter: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
}

fn footer_crc(bytes: &[u8; FOOTER_BYTES]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&bytes[..CRC_AT]), &bytes[CRC_AT + 4..])
}

impl Footer {
    /// The footer's bytes.
    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut out = [0u8; FOOTER_BYTES];
        out[0..8].copy_from_slice(&self.filter.offset.to_le_bytes());
        out[8..16].copy_from_slice(&self.filter.size.to_le_bytes());
        out[16..24].copy_from_slice(&self.index.offset.to_le_bytes());
        out[24..32].copy_from_slice(&self.index.size.to_le_bytes());
        out[36..40].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[40..48].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        let crc = footer_crc(&out);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and verifies a footer.
    pub fn decode(bytes: &[u8]) -> Result<Footer, CorruptionKind> {
        let bytes: &[u8; FOOTER_BYTES] =
            bytes.try_into().map_err(|_| CorruptionKind::Truncated {
                needed: FOOTER_BYTES as u64,
                available: bytes.len() as u64,
            })?;
        let mut cursor = &bytes[..];
        let mut next_u64 = || coding::get_u64_le(&mut cursor).unwrap_or(0);
        let filter = BlockHandle {
            offset: next_u64(),
            size: next_u64(),
        };
        let index = BlockHandle {
            offset: next_u64(),
            size: next_u64(),
        };
        let mut cursor = &bytes[CRC_AT..];
        let expected = coding::get_u32_le(&mut cursor).unwrap_or(0);
        let version = coding::get_u32_le(&mut cursor).unwrap_or(0);
        let magic = coding::get_u64_le(&mut cursor).unwrap_or(0);
        if magic != TABLE_MAGIC {
            return Err(CorruptionKind::BadMagic(format!(
                "table magic {magic:#018x}, expected {TABLE_MAGIC:#018x}"
            )));
        }
        if version != FORMAT_VERSION {
            return Err(CorruptionKind::BadMagic(format!(
                "table format version {version}, expected {FORMAT_VERSION}"
            )));
        }
        let got = footer_crc(bytes);
        if got != expected {
            return Err(CorruptionKind::ChecksumMismatch { expected, got });
        }
        Ok(Footer { filter, index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Footer {
        Footer {
            filter: BlockHandle {
                offset: 1000,
                size: 77,
            },
            index: BlockHandle {
                offset: 1082,
                size: 300,
            },
        }
    }

    /// A footer round-trips, and every flipped byte is detected.
    #[test]
    fn round_trip_and_flips() {
        let bytes = sample().encode();
        assert_eq!(TABLE_MAGIC, 0x0154_5353_6d61_7461, "as documented");
        assert_eq!(&bytes[40..], b"atamSST\x01");
        assert_eq!(Footer::decode(&bytes), Ok(sample()));
        for i in 0..FOOTER_BYTES {
            let mut bad = bytes;
            bad[i] ^= 0x10;
            let err = Footer::decode(&bad).unwrap_err();
            match i {
                36..=47 => assert!(matches!(err, CorruptionKind::BadMagic(_)), "byte {i}"),
                _ => assert!(
                    matches!(err, CorruptionKind::ChecksumMismatch { .. }),
                    "byte {i}"
                ),
            }
        }
    }

    /// A short footer is reported as truncated.
    #[test]
    fn short_footer() {
        let bytes = sample().encode();
        assert!(matches!(
            Footer::decode(&bytes[1..]),
            Err(CorruptionKind::Truncated { needed: 48, .. })
        ));
    }
}
