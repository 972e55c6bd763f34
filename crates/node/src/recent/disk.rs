//! What a node's report says of its data directory beside the engine's
//! own figures: the bytes of its WAL segments and the file system's free
//! and total space (`statvfs(3)`), read when a report is rendered (a
//! directory listing and one system call, every 2 s per open dashboard).
//!
//! Neither is fatal: a directory that cannot be listed counts no WAL
//! bytes and a failed `statvfs` leaves the space unknown (`None`, `null`
//! in the JSON), never a made-up figure.

use std::path::Path;

/// Bytes of the WAL segments (`NNNNNN.wal`, docs/FORMAT.md) in `dir`.
pub fn wal_bytes(dir: &Path) -> u64 {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return 0;
    };
    listing
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(ataman_engine::wal::segment::parse_segment_file_name)
                .is_some()
        })
        .filter_map(|e| e.metadata().ok())
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .sum()
}

/// The file system's space under `dir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged process may still write (`f_bavail`).
    pub free_bytes: u64,
    /// The file system's size (`f_blocks`).
    pub total_bytes: u64,
}

/// `statvfs(dir)`: the free and total bytes, `None` when it fails.
pub fn space(dir: &Path) -> Option<Space> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is plain old data; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string that outlives the call and
    // `st` is a valid, exclusively borrowed `statvfs` the call fills.
    let rc = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    if rc != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some(Space {
        free_bytes: (st.f_bavail as u64).saturating_mul(unit),
        total_bytes: (st.f_blocks as u64).saturating_mul(unit),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only WAL segments count, by their sizes.
    #[test]
    fn wal_bytes_counts_segments_only() {
        let dir = tempfile::tempdir().expect("a directory");
        std::fs::write(dir.path().join("000001.wal"), [0u8; 100]).expect("write");
        std::fs::write(dir.path().join("000007.wal"), [0u8; 23]).expect("write");
        std::fs::write(dir.path().join("000002.sst"), [0u8; 1000]).expect("write");
        std::fs::write(dir.path().join("x.wal"), [0u8; 1000]).expect("write");
        assert_eq!(wal_bytes(dir.path()), 123);
        assert_eq!(wal_bytes(&dir.path().join("missing")), 0);
    }

    /// The space of a real directory is known and consistent; a missing
    /// one's is not.
    #[test]
    fn space_of_a_directory() {
        let dir = tempfile::tempdir().expect("a directory");
        let s = space(dir.path()).expect("statvfs");
        assert!(s.total_bytes > 0 && s.free_bytes <= s.total_bytes, "{s:?}");
        assert_eq!(space(&dir.path().join("missing")), None);
    }
}
