//! The real file system, through `std::fs`.

use super::{DirLock, FileSystem, ReadableFile, WritableFile};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

struct OsWritable {
    file: File,
    len: u64,
    /// Bytes already handed to `start_writeback`.
    written_back: u64,
    /// Opened with `O_APPEND`, where a positional write would append
    /// instead: `zero_fill` does nothing then.
    append_mode: bool,
}

/// Zeros written per `pwrite` by `zero_fill`.
const ZERO_FILL_WRITE_BYTES: usize = 256 * 1024;

impl WritableFile for OsWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn start_writeback(&mut self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let (from, to) = (self.written_back, self.len);
            if to > from {
                // SAFETY: a plain system call on a descriptor this value
                // owns; it reads no memory of ours. Its result is a hint's.
                let _ = unsafe {
                    libc::sync_file_range(
                        self.file.as_raw_fd(),
                        from as libc::off64_t,
                        (to - from) as libc::off64_t,
                        libc::SYNC_FILE_RANGE_WRITE,
                    )
                };
                self.written_back = to;
            }
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn zero_fill(&mut self, from: u64, bytes: u64) -> io::Result<()> {
        if self.append_mode || bytes == 0 {
            return Ok(());
        }
        if from < self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "zero fill at {from} would overwrite appended bytes (up to {})",
                    self.len
                ),
            ));
        }
        let zeros =
            vec![0u8; ZERO_FILL_WRITE_BYTES.min(usize::try_from(bytes).unwrap_or(usize::MAX))];
        let end = from.saturating_add(bytes);
        let mut at = from;
        while at < end {
            let n = usize::try_from(end - at).map_or(zeros.len(), |left| left.min(zeros.len()));
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        Ok(())
    }

    fn preallocate(&mut self, bytes: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let total = self.len.saturating_add(bytes);
        let len = libc::off_t::try_from(total).map_err(io::Error::other)?;
        // SAFETY: fallocate on a valid, open descriptor owned by `self.file`.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, 0, len) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // File systems without fallocate: extend with a hole instead.
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => self.file.set_len(total),
            _ => Err(err),
        }
    }
}

struct OsReadable {
    file: File,
    len: u64,
}

impl ReadableFile for OsReadable {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct OsLock {
    _file: File,
}

impl DirLock for OsLock {}

impl FileSystem for OsFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(OsWritable {
            file,
            len: 0,
            written_back: 0,
            append_mode: false,
        }))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().append(true).open(path)?;
        let len = file.metadata()?.len();
        Ok(Box::new(OsWritable {
            file,
            len,
            written_back: len,
            append_mode: true,
        }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Arc<dyn ReadableFile>> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Arc::new(OsReadable { file, len }))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn DirLock>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsLock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "lock held by another process",
            )),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zeros are written into reserved space without moving the append
    /// position; appended bytes are never overwritten; an append-mode file
    /// is left alone.
    #[test]
    fn zero_fill_writes_ahead_of_appends_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let mut f = OsFs.create(&path).unwrap();
        f.append(b"abc").unwrap();
        f.preallocate(1 << 20).unwrap();
        // Garbage where the zeros go proves they are really written.
        {
            let raw = OpenOptions::new().write(true).open(&path).unwrap();
            raw.write_all_at(&[0xee; 600_000], 10).unwrap();
        }
        f.zero_fill(3, 600_100).unwrap();
        f.append(b"def").unwrap();
        f.sync().unwrap();
        assert_eq!(f.len(), 6);
        let bytes = fs::read(&path).unwrap();
        assert_eq!(&bytes[..6], b"abcdef");
        assert!(bytes[6..600_103].iter().all(|&b| b == 0));
        let err = f.zero_fill(5, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(&fs::read(&path).unwrap()[..6], b"abcdef");

        let mut a = OsFs.open_append(&path).unwrap();
        let size = fs::metadata(&path).unwrap().len();
        a.zero_fill(size, 4096).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().len(), size);
    }
}
