//! The write-ahead log: segment files of checksummed records.
//!
//! - [`record`]: the frame of one record (length, CRC32C, payload).
//! - [`segment`]: segment file names.
//! - [`replay`]: reading segments back at open (torn tails, corruption,
//!   forced recovery); it drives `replay_scan` (reading, verifying and
//!   decoding, over `segment_cursor`) either inline or on the
//!   `reader_thread`.
//! - [`writer`]: the WAL thread and its group commit.
//!
//! [`WriteCallback`] is what the WAL thread runs once a write is as durable
//! as it asked (or failed): the tx thread hands it over with the write.

pub(crate) mod reader_thread;
pub mod record;
pub mod replay;
pub(crate) mod replay_scan;
pub mod segment;
pub(crate) mod segment_cursor;
pub mod writer;

use crate::error::Result;

/// Callback run when a submitted write reaches its durability (or fails),
/// with the write's first sequence number.
pub type WriteCallback = Box<dyn FnOnce(Result<u64>) + Send>;

#[cfg(test)]
mod reader_thread_tests;
#[cfg(test)]
mod replay_props;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod test_segments;
