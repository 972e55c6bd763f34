//! `<data-dir>/CLEANUP-<version>`: the cleanup after the transition to
//! layout `version` is done (`super::cleanup`), so a restart skips it; a
//! node that stopped during one finds no record and runs it again (a
//! purge is idempotent).
//!
//! The file is text:
//!
//! ```text
//! ataman-cleanup 1
//! keys 1234
//! bytes 567890
//! ```
//!
//! (what that cleanup dropped, for the operator). It is written to
//! `CLEANUP-<version>.tmp`, fsynced, renamed over the file and the
//! directory fsynced; then the records of older versions are removed
//! (the newest says enough). Only the name counts when reading: a
//! damaged body still says the cleanup is done (it was written after the
//! purge completed).

use super::cleanup::Purged;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The file's first line.
const HEADER: &str = "ataman-cleanup 1";
/// The file name's prefix.
const PREFIX: &str = "CLEANUP-";

/// The file name of the record of the cleanup for `version`.
pub fn file_name(version: u64) -> String {
    format!("{PREFIX}{version}")
}

/// The newest version whose cleanup is recorded in `dir`, if any.
pub fn newest(dir: &Path) -> std::io::Result<Option<u64>> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let version = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|v| v.parse::<u64>().ok());
        newest = newest.max(version);
    }
    Ok(newest)
}

/// Records the cleanup for `version` done, durably, then removes the
/// records of older versions (a failure there is not an error: the
/// newest record wins).
pub fn store(dir: &Path, version: u64, purged: Purged) -> std::io::Result<()> {
    let name = file_name(version);
    let temp = dir.join(format!("{name}.tmp"));
    let mut file = File::create(&temp)?;
    file.write_all(format!("{HEADER}\nkeys {}\nbytes {}\n", purged.keys, purged.bytes).as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join(&name))?;
    File::open(dir)?.sync_all()?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let old = entry.file_name();
        let older = old
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v < version);
        if older {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No record reads as none; the newest stored wins and replaces the
    /// older ones; a temporary file left by a crash is not a record.
    #[test]
    fn newest_record_wins() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(newest(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join("CLEANUP-9.tmp"), "x").unwrap();
        assert_eq!(newest(dir.path()).unwrap(), None);
        store(dir.path(), 3, Purged { keys: 1, bytes: 2 }).unwrap();
        store(dir.path(), 5, Purged::default()).unwrap();
        assert_eq!(newest(dir.path()).unwrap(), Some(5));
        assert!(!dir.path().join("CLEANUP-3").exists());
        let text = std::fs::read_to_string(dir.path().join("CLEANUP-5")).unwrap();
        assert_eq!(text, "ataman-cleanup 1\nkeys 0\nbytes 0\n");
    }
}
