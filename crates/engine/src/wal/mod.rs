//! The write-ahead log: segment files of checksummed records.
//!
//! - [`record`]: the frame of one record (length, CRC32C, payload).
//! - [`segment`]: segment file names.
//! - [`replay`]: reading segments back at open (torn tails, corruption,
//!   forced recovery); it drives `replay_scan` (reading, verifying and
//!   decoding, over `segment_cursor`) either inline or on the
//!   `reader_thread`.
//! - [`writer`]: the WAL thread and its group commit.

pub(crate) mod reader_thread;
pub mod record;
pub mod replay;
pub(crate) mod replay_scan;
pub mod segment;
pub(crate) mod segment_cursor;
pub mod writer;

#[cfg(test)]
mod reader_thread_tests;
#[cfg(test)]
mod replay_props;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod test_segments;
