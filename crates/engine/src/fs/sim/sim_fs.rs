//! [`SimFs`]: the simulated file system itself, its live and durable
//! state behind one mutex (`Shared`), and its [`FileSystem`] side.

use super::super::{DirLock, FileSystem, ReadableFile, WritableFile};
use super::crash::{self, CrashMode};
use super::fault::{Fault, FaultOp, Faults, SimStats};
use super::handle::{SimLock, SimReadable, SimWritable, gone};
use super::model::{Ino, Model};
use ataman_testkit::lock::lock;
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The shared state behind every clone of a [`SimFs`] and its handles.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) model: Model,
    pub(super) faults: Faults,
    pub(super) locks: BTreeSet<PathBuf>,
}

/// An in-memory [`FileSystem`] that remembers what is durable.
///
/// Cheap to clone; clones share one simulated disk.
#[derive(Debug, Clone, Default)]
pub struct SimFs {
    /// Locked ignoring poisoning: a panic while holding it (a failing
    /// test) leaves a consistent model, every operation checks before it
    /// mutates.
    pub(super) shared: Arc<Mutex<Shared>>,
}

impl SimFs {
    /// An empty file system (not even a root directory; use `create_dir_all`).
    pub fn new() -> SimFs {
        SimFs::default()
    }

    /// A new, independent file system holding a state a power cut now could
    /// leave, every choice drawn from `seed` ([`CrashMode::random`]).
    pub fn crash_image(&self, seed: u64) -> SimFs {
        self.crash_image_with(CrashMode::random(seed))
    }

    /// A crash image with the choices forced by `mode`.
    pub fn crash_image_with(&self, mode: CrashMode) -> SimFs {
        let model = crash::crash_image(&lock(&self.shared).model, mode);
        SimFs {
            shared: Arc::new(Mutex::new(Shared {
                model,
                ..Shared::default()
            })),
        }
    }

    /// What a process crash (kill -9) leaves while the machine stays up:
    /// a new, independent file system with the live names and bytes (the
    /// page cache keeps them), nothing more durable than it was, and no open
    /// handles or locks (they die with the process). A crash image of the
    /// result can still lose what was never synced.
    pub fn process_crash_image(&self) -> SimFs {
        let mut model = lock(&self.shared).model.clone();
        model.open_handles.clear();
        model.collect_garbage();
        SimFs {
            shared: Arc::new(Mutex::new(Shared {
                model,
                ..Shared::default()
            })),
        }
    }

    /// Arms a fault; it fires once, on its `nth` matching operation.
    pub fn inject(&self, fault: Fault) {
        lock(&self.shared).faults.arm(fault);
    }

    /// Disarms every fault that has not fired yet.
    pub fn clear_faults(&self) {
        lock(&self.shared).faults.clear();
    }

    /// Faults armed that have not fired yet.
    pub fn faults_armed(&self) -> usize {
        lock(&self.shared).faults.armed()
    }

    /// Operation counters since this file system (or image) was made.
    pub fn stats(&self) -> SimStats {
        lock(&self.shared).faults.stats
    }

    /// The live bytes of the file `path` names, if any.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        lock(&self.shared)
            .model
            .inode(path)
            .ok()
            .map(|f| f.data.clone())
    }

    /// The durable length of the file `path` names (live namespace), if any.
    pub fn durable_len(&self, path: &Path) -> Option<u64> {
        let shared = lock(&self.shared);
        shared.model.inode(path).ok().map(|f| f.durable_len as u64)
    }

    /// Names of the files in `dir` as of its last `sync_dir`, sorted.
    pub fn durable_names(&self, dir: &Path) -> Vec<String> {
        let shared = lock(&self.shared);
        shared
            .model
            .dirs
            .get(dir)
            .map(|d| d.durable.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        lock(&self.shared).model.check_invariants();
    }

    fn open_handle(&self, path: &Path) -> io::Result<(Ino, u64)> {
        let mut shared = lock(&self.shared);
        let ino = shared.model.lookup(path)?;
        let len = shared.model.inode(path)?.data.len() as u64;
        *shared.model.open_handles.entry(ino).or_default() += 1;
        Ok((ino, len))
    }
}

impl FileSystem for SimFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        lock(&self.shared).model.create_dir_all(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let ino = {
            let mut shared = lock(&self.shared);
            let ino = shared.model.create(path)?;
            *shared.model.open_handles.entry(ino).or_default() += 1;
            ino
        };
        Ok(Box::new(SimWritable {
            shared: self.shared.clone(),
            ino,
            path: path.to_path_buf(),
            len: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let (ino, len) = self.open_handle(path)?;
        Ok(Box::new(SimWritable {
            shared: self.shared.clone(),
            ino,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadableFile>> {
        let (ino, len) = self.open_handle(path)?;
        Ok(Arc::new(SimReadable {
            shared: self.shared.clone(),
            ino,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        lock(&self.shared).model.list_dir(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        lock(&self.shared).model.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        lock(&self.shared).model.remove(path)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut shared = lock(&self.shared);
        let ino = shared.model.lookup(path)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        let inode = shared
            .model
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| gone(path))?;
        inode.data.resize(len, 0);
        inode.durable_len = len;
        inode.write_ends.clear();
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut guard = lock(&self.shared);
        let shared = &mut *guard;
        if !shared.model.dirs.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such directory", path.display()),
            ));
        }
        shared.faults.before(FaultOp::SyncDir, path)?;
        shared.model.sync_dir(path)?;
        shared.faults.stats.dir_syncs += 1;
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let shared = lock(&self.shared);
        shared.model.dirs.contains_key(path) || shared.model.lookup(path).is_ok()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        let mut shared = lock(&self.shared);
        if shared.locks.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{}: lock held", path.display()),
            ));
        }
        if shared.model.lookup(path).is_err() {
            shared.model.create(path)?;
        }
        shared.locks.insert(path.to_path_buf());
        Ok(Box::new(SimLock {
            shared: self.shared.clone(),
            path: path.to_path_buf(),
        }))
    }
}
