//! Typed errors of the storage engine.
//!
//! Corruption is kept apart from I/O: a corrupt byte on disk is never a
//! retryable condition, and callers (the node) map the two to different
//! answers. Every corruption names the file and the byte offset where it was
//! found, so an operator can look at it with a hex dump.

use std::io;
use std::path::PathBuf;

/// The engine's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// What can go wrong inside the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The operating system refused a read, write, sync or rename.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Bytes on disk do not decode or do not match their checksum.
    #[error("corruption in {path} at offset {offset}: {kind}")]
    Corruption {
        /// The file the bad bytes are in.
        path: PathBuf,
        /// Byte offset of the record or block that failed.
        offset: u64,
        /// What exactly failed.
        kind: CorruptionKind,
    },

    /// A write or fsync failed earlier; the engine no longer accepts writes.
    ///
    /// A failed fsync leaves the page cache in an unknown state (the kernel
    /// may have dropped the dirty pages), so retrying it could report success
    /// for data that is gone. The only recovery is a restart, which replays
    /// the WAL from what is really on disk.
    #[error("engine is read-only after a failed write: {reason}")]
    Poisoned {
        /// The first failure, as it was reported.
        reason: String,
    },

    /// A bounded queue or memory budget is full; try again later.
    #[error("engine is busy: {what}")]
    Busy {
        /// Which limit was reached.
        what: &'static str,
    },

    /// The caller passed something the engine will not store.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Another process (or another handle in this one) has the directory open.
    #[error("database directory {path} is locked by another process")]
    Locked {
        /// The directory.
        path: PathBuf,
    },

    /// A conditional write's key was written since it was read (the
    /// engine's `db/condition.rs`): read again and retry.
    #[error("conflict: the key was written since it was read")]
    Conflict,

    /// The engine has been closed.
    #[error("engine is closed")]
    Closed,
}

impl Error {
    /// True for an I/O failure because the disk or the quota was full
    /// (ENOSPC, EDQUOT).
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, Error::Io { source, .. }
            if matches!(source.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded))
    }

    /// The poisoned error this failure leaves the engine in, for every
    /// caller waiting on it: errors are not `Clone` (they hold an
    /// `io::Error`), and after a failed write or sync each waiter is told
    /// the same first reason. A `Poisoned` error keeps its reason.
    pub fn to_poisoned(&self) -> Error {
        match self {
            Error::Poisoned { reason } => Error::Poisoned {
                reason: reason.clone(),
            },
            other => Error::Poisoned {
                reason: other.to_string(),
            },
        }
    }
}

/// The specific kind of a corruption.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorruptionKind {
    /// A stored checksum does not match the bytes it covers.
    #[error("checksum mismatch: expected {expected:#010x}, got {got:#010x}")]
    ChecksumMismatch {
        /// The checksum stored on disk.
        expected: u32,
        /// The checksum computed over the bytes read.
        got: u32,
    },
    /// A record or block ends before its declared length.
    #[error("truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the header promised.
        needed: u64,
        /// Bytes actually present.
        available: u64,
    },
    /// A magic number or version does not match.
    #[error("bad magic or version: {0}")]
    BadMagic(String),
    /// Any other malformed content, described.
    #[error("{0}")]
    Malformed(String),
}

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds a corruption error.
    pub fn corruption(path: impl Into<PathBuf>, offset: u64, kind: CorruptionKind) -> Self {
        Error::Corruption {
            path: path.into(),
            offset,
            kind,
        }
    }

    /// True for errors caused by bytes on disk, as opposed to the OS or the caller.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}
