//! A file system that can pretend the disk is full, switched at run time.
//!
//! [`FaultFs`] wraps another [`FileSystem`] (the real one in a node) and
//! forwards everything to it, except that while its `disk_full` switch is
//! on, every operation that would take space fails with ENOSPC
//! (`io::ErrorKind::StorageFull`): appends, preallocation and creating a
//! file. Reads, renames, removals and syncs still work, as they do on a
//! full disk. The node turns the switch from its `--fault-control` file
//! (docs/API.md, "Test hooks"); the fault-injection harness uses it to fill
//! one node's disk for a while.
//!
//! A second switch, `sync_delay_ms`, makes every file sync take that much
//! longer (a slow disk): the harness's negative control uses it to widen
//! the window in which a write acknowledged before the WAL wrote it can be
//! lost (docs/RELIABILITY.md, "Negative controls").
//!
//! An engine that meets the failure is poisoned like after any failed
//! write (docs/ARCHITECTURE.md, "Assumptions about the disk"): turning the
//! switch off does not bring it back; a restart does.
//!
//! # Thread safety
//! The switch is an `Arc<AtomicBool>` read with `Relaxed` ordering at each
//! operation: a flip is seen by the next operation of any thread, which is
//! all a fault needs (no data is published through it).

use super::{DirLock, FileSystem, ReadableFile, WritableFile};
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// `inner`, but failing writes with ENOSPC while `disk_full` is on, and
/// syncing `sync_delay_ms` slower.
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    disk_full: Arc<AtomicBool>,
    sync_delay_ms: Arc<AtomicU64>,
}

impl FaultFs {
    /// Wraps `inner`; `disk_full` is the switch, shared with whoever flips it.
    pub fn new(inner: Arc<dyn FileSystem>, disk_full: Arc<AtomicBool>) -> FaultFs {
        FaultFs {
            inner,
            disk_full,
            sync_delay_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Also delays every file and directory sync by `sync_delay_ms` (read
    /// at each sync).
    pub fn with_sync_delay(mut self, sync_delay_ms: Arc<AtomicU64>) -> FaultFs {
        self.sync_delay_ms = sync_delay_ms;
        self
    }
}

fn delay(sync_delay_ms: &AtomicU64) {
    let ms = sync_delay_ms.load(Ordering::Relaxed);
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// The error a full disk gives: ENOSPC, "No space left on device".
fn no_space() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOSPC)
}

fn check(disk_full: &AtomicBool) -> io::Result<()> {
    if disk_full.load(Ordering::Relaxed) {
        Err(no_space())
    } else {
        Ok(())
    }
}

/// A writable file of a [`FaultFs`].
struct FaultWritable {
    inner: Box<dyn WritableFile>,
    disk_full: Arc<AtomicBool>,
    sync_delay_ms: Arc<AtomicU64>,
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        check(&self.disk_full)?;
        self.inner.append(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        delay(&self.sync_delay_ms);
        self.inner.sync()
    }

    fn start_writeback(&mut self) {
        self.inner.start_writeback();
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn preallocate(&mut self, bytes: u64) -> io::Result<()> {
        check(&self.disk_full)?;
        self.inner.preallocate(bytes)
    }

    fn zero_fill(&mut self, from: u64, bytes: u64) -> io::Result<()> {
        check(&self.disk_full)?;
        self.inner.zero_fill(from, bytes)
    }
}

impl FaultFs {
    fn wrap(&self, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(FaultWritable {
            inner,
            disk_full: Arc::clone(&self.disk_full),
            sync_delay_ms: Arc::clone(&self.sync_delay_ms),
        })
    }
}

impl FileSystem for FaultFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        check(&self.disk_full)?;
        Ok(self.wrap(self.inner.create(path)?))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(self.wrap(self.inner.open_append(path)?))
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadableFile>> {
        self.inner.open_read(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list_dir(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        check(&self.disk_full)?;
        self.inner.hard_link(from, to)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        delay(&self.sync_delay_ms);
        self.inner.sync_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFs;

    /// With the switch on, appends, preallocation and creation fail with
    /// ENOSPC on files opened before and after the flip; reads and renames
    /// still work; with it off again, writes go through.
    #[test]
    fn switch_fails_writes_with_enospc() {
        let dir = std::env::temp_dir().join(format!("ataman-faultfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let switch = Arc::new(AtomicBool::new(false));
        let fs = FaultFs::new(Arc::new(OsFs), Arc::clone(&switch));
        fs.create_dir_all(&dir).unwrap();
        let a = dir.join("a");
        let mut file = fs.create(&a).unwrap();
        file.append(b"before").unwrap();
        switch.store(true, Ordering::Relaxed);
        let err = file.append(b"during").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert!(file.preallocate(4096).is_err());
        assert!(fs.create(&dir.join("b")).is_err());
        file.sync().unwrap();
        assert_eq!(crate::fs::read_all(&fs, &a).unwrap(), b"before");
        fs.rename(&a, &dir.join("c")).unwrap();
        switch.store(false, Ordering::Relaxed);
        file.append(b"after").unwrap();
        let mut again = fs.open_append(&dir.join("c")).unwrap();
        again.append(b"!").unwrap();
        assert_eq!(
            crate::fs::read_all(&fs, &dir.join("c")).unwrap(),
            b"beforeafter!"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
