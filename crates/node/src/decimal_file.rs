//! One-line decimal files in the data directory (`LAST-SEEN`, `CLOCK`):
//! a `u64` in decimal and a newline, written to a temporary file, fsynced,
//! renamed over the file, and the directory fsynced, so a reader sees the
//! old value or the new one, never a torn one, and the new one survives a
//! power loss once [`write()`] returns.

use ataman_engine::fs::{FileSystem, OsFs, read_all};
use std::path::Path;

/// Longest file accepted, bytes (a decimal u64 and a newline).
const FILE_BYTES_MAX: usize = 32;

/// Writes `value` to `dir/name` through `dir/temp`, atomically and durably.
pub fn write(dir: &Path, name: &str, temp: &str, value: u64) -> std::io::Result<()> {
    write_on(&OsFs, dir, name, temp, value)
}

/// [`write()`] on the file system `fs` (the simulation's disk).
pub fn write_on(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &str,
    temp: &str,
    value: u64,
) -> std::io::Result<()> {
    let temp = dir.join(temp);
    let mut file = fs.create(&temp)?;
    file.append(format!("{value}\n").as_bytes())?;
    file.sync()?;
    drop(file);
    fs.rename(&temp, &dir.join(name))?;
    fs.sync_dir(dir)
}

/// The value in `dir/name`, `None` when there is no file; anything but one
/// line of decimal digits is an error naming the file and `what` it should hold.
pub fn read(dir: &Path, name: &str, what: &str) -> Result<Option<u64>, String> {
    read_on(&OsFs, dir, name, what)
}

/// [`read()`] on the file system `fs` (the simulation's disk).
pub fn read_on(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &str,
    what: &str,
) -> Result<Option<u64>, String> {
    let path = dir.join(name);
    let bytes = match read_all(fs, &path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let text = std::str::from_utf8(&bytes[..bytes.len().min(FILE_BYTES_MAX)])
        .ok()
        .filter(|_| bytes.len() <= FILE_BYTES_MAX);
    text.and_then(|t| t.strip_suffix('\n'))
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            format!(
                "{} is not one line of {what}: {:?}",
                path.display(),
                String::from_utf8_lossy(&bytes[..bytes.len().min(FILE_BYTES_MAX)])
            )
        })
}
