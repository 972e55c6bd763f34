//! # ataman-engine
//!
//! ataman's storage engine: a log-structured merge tree with a group-commit
//! write-ahead log, written for a database whose every microsecond can be
//! explained.
//!
//! ## Layout
//! - [`db`]: the public handle ([`Db`]): open, write, read, scan, flush,
//!   compact, close; the writer (tx) thread, the read view, recovery.
//! - [`wal`]: the write-ahead log: record frame, segment replay, the WAL
//!   thread with group commit.
//! - [`memtable`]: the in-memory sorted table writes land in.
//! - [`sst`]: SSTables: blocks, bloom filter, index, footer, block cache.
//! - [`manifest`]: the log of version edits that says which files are live.
//! - [`compaction`]: merging iterators, leveled compaction picking,
//!   purge rules (the flush and compaction threads are in [`db`]).
//! - [`fs`]: the file-system seam; [`fs::sim`] simulates power loss.
//! - [`key`], [`batch`], [`coding`]: the byte formats everything shares.
//! - [`expiry`]: expiring values (an absolute deadline per version);
//!   [`clock`]: the wall clock expiry reads.
//! - [`queue`], [`oneshot`]: the hand-offs between threads;
//!   [`thread_priority`]: background threads yielding the CPU.
//!
//! The byte formats are specified in `docs/FORMAT.md`; the threads and the
//! commit and recovery protocol in `docs/ARCHITECTURE.md`.

pub mod batch;
pub mod clock;
pub mod coding;
pub mod compaction;
pub mod db;
pub mod error;
pub mod expiry;
pub mod fs;
pub mod iter;
pub mod key;
pub mod manifest;
pub mod memtable;
pub mod metrics;
pub mod oneshot;
pub mod options;
pub mod queue;
pub mod sst;
pub mod thread_priority;
pub mod version;
pub mod wal;

pub use batch::WriteBatch;
pub use clock::{Clock, SystemClock, VirtualClock};
pub use db::{Condition, Db, Entry, EntryRef, ScanIter, Stats, Submission};
pub use error::{CorruptionKind, Error, Result};
pub use key::{Kind, Timestamp};
pub use options::{CollectionHorizon, Compression, Durability, Options, WalMode};
pub use wal::WriteCallback;
