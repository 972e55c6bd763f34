//! The write-ahead log: segment files of checksummed records.
//!
//! - [`record`]: the frame of one record (length, CRC32C, payload).
//! - [`segment`]: segment file names.
//! - [`replay`]: reading segments back at open (torn tails, corruption,
//!   the recovery reader thread).
//! - [`writer`]: the WAL thread and its group commit.

pub mod record;
pub mod replay;
pub mod segment;
pub mod writer;
