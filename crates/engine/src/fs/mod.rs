//! The seam between the engine and the file system.
//!
//! Every byte the engine reads or writes goes through [`FileSystem`]. The
//! production implementation is [`OsFs`]; tests use [`sim::SimFs`], which
//! remembers what was synced and can build the images a power cut could
//! leave, and can inject write and fsync failures. [`FaultFs`] wraps a real
//! file system and fails writes with ENOSPC while a switch is on (a node's
//! `--fault-control` test hook).
//!
//! # Assumptions about the disk (see `docs/ARCHITECTURE.md`)
//! - Data appended to a file is durable only after [`WritableFile::sync`]
//!   returned `Ok`.
//! - A file's existence (creation, rename, removal) is durable only after
//!   [`FileSystem::sync_dir`] on its directory returned `Ok`.
//! - A write that was in flight at a power cut may be torn at any sector
//!   boundary: a prefix of it may be on disk, the rest missing.

pub mod fault;
pub mod os;
pub mod sim;

pub use fault::FaultFs;
pub use os::OsFs;

use std::io;
use std::path::Path;
use std::sync::Arc;

/// A file opened for appending (WAL segments, SSTables being built, manifest).
///
/// # Thread safety
/// Owned by one thread at a time (`Send`, not `Sync`).
pub trait WritableFile: Send {
    /// Appends all of `data` at the end of the file (one `write` call where the OS allows).
    fn append(&mut self, data: &[u8]) -> io::Result<()>;
    /// Makes everything appended so far durable (`fdatasync`).
    fn sync(&mut self) -> io::Result<()>;
    /// Starts writing back what was appended since the last call, without
    /// waiting for it or promising durability (`sync_file_range` with
    /// `SYNC_FILE_RANGE_WRITE` on Linux), so a large file's dirty pages go
    /// to the disk as it is written, not in one burst at its `sync`. A
    /// hint: errors are left to `sync`. Optional: the default does nothing.
    fn start_writeback(&mut self) {}
    /// Bytes appended so far, including those present when the file was opened.
    fn len(&self) -> u64;
    /// Reserves `bytes` of zeros beyond what was appended, so later appends
    /// within them (and their `sync`) change no file size. Reads past the
    /// appended bytes see zeros. Optional: the default does nothing.
    fn preallocate(&mut self, bytes: u64) -> io::Result<()> {
        let _ = bytes;
        Ok(())
    }
    /// Writes zeros over `[from, from + bytes)` of the preallocated space,
    /// at or beyond the appended bytes, without moving the append position:
    /// later appends there overwrite blocks that were already written, so
    /// their `sync` has no unwritten extents to convert (on ext4 that
    /// conversion is kernel work, in a worker thread, at every sync that
    /// reaches new blocks). The zeros become durable with the next `sync`.
    /// Reads see zeros there either way. Optional: the default does
    /// nothing.
    fn zero_fill(&mut self, from: u64, bytes: u64) -> io::Result<()> {
        let _ = (from, bytes);
        Ok(())
    }
    /// True when nothing has been written.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file opened for positional reads (SSTables, WAL segments during recovery).
///
/// # Thread safety
/// Shared between reader threads (`Send + Sync`); reads do not move a cursor.
pub trait ReadableFile: Send + Sync {
    /// Fills `buf` from `offset`; an error if the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// The file's length when it was opened.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A held directory lock; dropping it releases the lock.
pub trait DirLock: Send {}

/// The operations the engine needs from a file system.
///
/// # Thread safety
/// Shared by all engine threads.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates `path` and its parents if missing.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates (or truncates) a file for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Opens an existing file for positional reads.
    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadableFile>>;
    /// Names (not paths) of the entries of a directory.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes `to` a second name of the file `from` (a hard link: the same
    /// bytes, no copy; the file lives until its last name is removed). A
    /// checkpoint names the immutable SSTables this way. Optional: the
    /// default refuses (`Unsupported`), so a file system without links
    /// fails a checkpoint cleanly.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this file system has no hard links",
        ))
    }
    /// Cuts a file to `len` bytes and makes the new length durable.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// True if `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock on `path` (created if missing), failing at once if held.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirLock>>;
}

/// Reads a whole file into memory (manifest, small files).
pub fn read_all(fs: &dyn FileSystem, path: &Path) -> io::Result<Vec<u8>> {
    let file = fs.open_read(path)?;
    let len = usize::try_from(file.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "file too large"))?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, 0)?;
    Ok(buf)
}
