//! Reading a file that holds secrets (the token file, the cluster secret):
//! refused when anyone but its owner may read or write it.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Permission bits that must be clear: any access by group or others.
pub const GROUP_OTHER_BITS: u32 = 0o077;

/// Why a private file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PrivateFileError {
    /// Group or others may read or write it.
    #[error(
        "{file} is accessible by group or others (mode {mode:04o}); it holds secrets: `chmod 600 {file}`"
    )]
    Exposed {
        /// The file.
        file: String,
        /// Its permission bits.
        mode: u32,
    },
    /// It cannot be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// What the system said.
        source: std::io::Error,
    },
}

/// The permission rule alone, on mode bits.
pub fn exposed(mode: u32) -> bool {
    mode & GROUP_OTHER_BITS != 0
}

/// Reads `path` as text after checking its permissions.
pub fn read_private(path: &Path) -> Result<String, PrivateFileError> {
    let file = || path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|source| PrivateFileError::Read {
        file: file(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o7777;
    if exposed(mode) {
        return Err(PrivateFileError::Exposed { file: file(), mode });
    }
    std::fs::read_to_string(path).map_err(|source| PrivateFileError::Read {
        file: file(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_may_have_access() {
        assert!(!exposed(0o600));
        assert!(!exposed(0o400));
        assert!(!exposed(0o700));
        assert!(exposed(0o640));
        assert!(exposed(0o604));
        assert!(exposed(0o620));
        assert!(exposed(0o644));
    }

    #[test]
    fn a_readable_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_private(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("0644"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_private(&path).unwrap(), "x");
        let e = read_private(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read "), "{e}");
    }
}
