//! `<data-dir>/CLOCK`: the clock's reservation, an upper bound on every
//! timestamp this node's clock issued (see the clock's module `hlc`, "Reservation",
//! and `docs/FORMAT.md`, "CLOCK").
//!
//! One line, the timestamp (`unix_ms << 16 | logical`) in decimal, written
//! like `LAST-SEEN` ([`crate::decimal_file`]): to `CLOCK.tmp`, fsynced,
//! renamed over `CLOCK`, and the directory fsynced.

use ataman_engine::fs::FileSystem;
use ataman_engine::key::Timestamp;
use std::path::Path;

/// The file's name in the data directory ("CLOCK").
pub const FILE_NAME: &str = "CLOCK";
/// The temporary file a new reservation is written to before the rename.
pub const TEMP_NAME: &str = "CLOCK.tmp";

/// Records `reserved` as the clock's reservation, atomically and durably.
pub fn write(dir: &Path, reserved: Timestamp) -> std::io::Result<()> {
    crate::decimal_file::write(dir, FILE_NAME, TEMP_NAME, reserved)
}

/// [`write()`] on the file system `fs`: the simulation keeps each node's
/// `CLOCK` on its simulated disk this way, so crashes and power loss meet
/// this very write.
pub fn write_on(fs: &dyn FileSystem, dir: &Path, reserved: Timestamp) -> std::io::Result<()> {
    crate::decimal_file::write_on(fs, dir, FILE_NAME, TEMP_NAME, reserved)
}

/// The recorded reservation, `None` when there is no file (a fresh
/// directory, or data from before the file existed).
pub fn read(dir: &Path) -> Result<Option<Timestamp>, String> {
    crate::decimal_file::read(dir, FILE_NAME, WHAT)
}

/// [`read()`] on the file system `fs` (the simulation's disk).
pub fn read_on(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Timestamp>, String> {
    crate::decimal_file::read_on(fs, dir, FILE_NAME, WHAT)
}

/// What the file holds, for the error of one that does not parse.
const WHAT: &str = "a decimal timestamp";

#[cfg(test)]
mod tests {
    use super::*;

    /// Written reservations read back; a torn or foreign file is an error.
    #[test]
    fn write_read_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Ok(None));
        write(dir.path(), u64::MAX).unwrap();
        assert_eq!(read(dir.path()), Ok(Some(u64::MAX)));
        assert!(!dir.path().join(TEMP_NAME).exists());
        std::fs::write(dir.path().join(FILE_NAME), "12\n3\n").unwrap();
        assert!(read(dir.path()).is_err());
    }
}
