//! The handles a [`SimFs`](super::SimFs) hands out: writable and readable
//! files and directory locks. Each holds the shared model and locks it per call.

use super::model::Ino;
use super::{FaultOp, Shared, lock};
use crate::fs::{DirLock, ReadableFile, WritableFile};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Releases one open handle on `ino`.
pub(super) fn close_handle(shared: &Mutex<Shared>, ino: Ino) {
    let mut shared = lock(shared);
    if let Some(count) = shared.model.open_handles.get_mut(&ino) {
        *count -= 1;
        if *count == 0 {
            shared.model.open_handles.remove(&ino);
        }
    }
}

pub(super) fn gone(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: file is gone", path.display()),
    )
}

/// A file of a [`SimFs`] open for appending.
pub(super) struct SimWritable {
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) ino: Ino,
    pub(super) path: PathBuf,
    pub(super) len: u64,
}

impl WritableFile for SimWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut guard = lock(&self.shared);
        let shared = &mut *guard;
        shared.faults.before(FaultOp::Write, &self.path)?;
        let inode = shared
            .model
            .inodes
            .get_mut(&self.ino)
            .ok_or_else(|| gone(&self.path))?;
        if !data.is_empty() {
            inode.data.extend_from_slice(data);
            inode.write_ends.push(inode.data.len());
        }
        shared.faults.stats.writes += 1;
        shared.faults.stats.bytes_written += data.len() as u64;
        self.len += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut guard = lock(&self.shared);
        let shared = &mut *guard;
        let inode = shared
            .model
            .inodes
            .get_mut(&self.ino)
            .ok_or_else(|| gone(&self.path))?;
        if let Err(e) = shared.faults.before(FaultOp::Sync, &self.path) {
            // Writeback failed: the dirty pages are dropped, not kept for a retry.
            inode.data.truncate(inode.durable_len);
            inode.write_ends.clear();
            return Err(e);
        }
        inode.durable_len = inode.data.len();
        inode.write_ends.clear();
        shared.faults.stats.syncs += 1;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for SimWritable {
    fn drop(&mut self) {
        close_handle(&self.shared, self.ino);
    }
}

/// A file of a [`SimFs`] open for reading; reads see the live bytes, up to
/// the length the file had when it was opened.
pub(super) struct SimReadable {
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) ino: Ino,
    pub(super) path: PathBuf,
    pub(super) len: u64,
}

impl ReadableFile for SimReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let shared = lock(&self.shared);
        let data = &shared
            .model
            .inodes
            .get(&self.ino)
            .ok_or_else(|| gone(&self.path))?
            .data;
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&end| end <= self.len);
        let range = end
            .and_then(|end| Some(usize::try_from(offset).ok()?..usize::try_from(end).ok()?))
            .and_then(|range| data.get(range));
        let bytes = range.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{}: read past end", self.path.display()),
            )
        })?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for SimReadable {
    fn drop(&mut self) {
        close_handle(&self.shared, self.ino);
    }
}

/// A held lock in a [`SimFs`]'s lock table; released on drop.
pub(super) struct SimLock {
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) path: PathBuf,
}

impl DirLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        lock(&self.shared).locks.remove(&self.path);
    }
}
