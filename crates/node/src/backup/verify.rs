//! Verifying a checkpoint directory (`ataman backup verify DIR`): its
//! manifest whole, every file listed present with its size and CRC-32C, no
//! file unlisted, and a copy of it opening as an engine directory whose
//! every entry reads back (docs/BACKUP.md, "Verify").
//!
//! The directory itself is never written: the engine's open writes (a new
//! manifest, a WAL segment), so it opens a copy in a temporary directory.

use super::manifest::{MANIFEST_FILE_NAME, Manifest};
use super::take::checksum_file;
use ataman_engine::{Db, Options};
use std::fs;
use std::path::{Path, PathBuf};

/// One thing wrong with a checkpoint, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The manifest is missing, torn or malformed.
    Manifest(String),
    /// A listed file is not there.
    Missing(String),
    /// A listed file has another size.
    Size {
        /// The file.
        path: String,
        /// Its size in the manifest.
        expected: u64,
        /// Its size on disk.
        found: u64,
    },
    /// A listed file's bytes do not match its CRC-32C.
    Checksum {
        /// The file.
        path: String,
        /// The CRC in the manifest.
        expected: u32,
        /// The CRC of its bytes.
        found: u32,
    },
    /// A file the manifest does not list.
    Unlisted(String),
    /// A listed path that is not a regular file of the backup (a symbolic
    /// link, which may point outside it; a FIFO, which would hang the
    /// read; a directory).
    NotRegular(String),
    /// A file could not be read.
    Unreadable(String),
    /// The copy did not open, or an entry did not read back.
    Open(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Manifest(e) => write!(f, "{MANIFEST_FILE_NAME}: {e}"),
            Problem::Missing(p) => write!(f, "{p}: missing"),
            Problem::Size {
                path,
                expected,
                found,
            } => write!(f, "{path}: {found} bytes, the manifest says {expected}"),
            Problem::Checksum {
                path,
                expected,
                found,
            } => write!(
                f,
                "{path}: checksum mismatch: crc32c {found:08x}, the manifest says {expected:08x}"
            ),
            Problem::Unlisted(p) => write!(f, "{p}: not in the manifest"),
            Problem::NotRegular(p) => {
                write!(f, "{p}: not a regular file (a link, FIFO or directory)")
            }
            Problem::Unreadable(e) => write!(f, "{e}"),
            Problem::Open(e) => write!(f, "does not open: {e}"),
        }
    }
}

/// What a verified checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Its manifest.
    pub manifest: Manifest,
    /// Entries (versions and tombstones) its engine holds.
    pub entries: u64,
    /// Entries its hint store holds.
    pub hint_entries: u64,
}

/// Checks `dir` (module header); every problem found, or what it holds.
pub fn verify(dir: &Path) -> Result<Verified, Vec<Problem>> {
    let manifest = read_manifest(dir).map_err(|p| vec![p])?;
    let mut problems = check_files(dir, &manifest);
    if !problems.is_empty() {
        return Err(problems);
    }
    match open_copy(dir) {
        Ok((entries, hint_entries)) => Ok(Verified {
            manifest,
            entries,
            hint_entries,
        }),
        Err(e) => {
            problems.push(Problem::Open(e));
            Err(problems)
        }
    }
}

/// The checkpoint's manifest, parsed.
pub fn read_manifest(dir: &Path) -> Result<Manifest, Problem> {
    let path = dir.join(MANIFEST_FILE_NAME);
    let text = fs::read_to_string(&path)
        .map_err(|e| Problem::Manifest(format!("cannot read {}: {e}", path.display())))?;
    Manifest::parse(&text).map_err(Problem::Manifest)
}

/// Every listed file against the disk, and every file on disk against the list.
pub fn check_files(dir: &Path, manifest: &Manifest) -> Vec<Problem> {
    check_files_reading(dir, manifest, &|_| true)
}

/// [`check_files`], reading (checksumming) only the files `read_now`
/// names; the others are checked for presence, kind and size, their
/// bytes left to whoever reads them next (a restore's copy checks each
/// file's CRC-32C as it copies it: one read, not two).
pub fn check_files_reading(
    dir: &Path,
    manifest: &Manifest,
    read_now: &dyn Fn(&str) -> bool,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for f in &manifest.files {
        let path = dir.join(&f.path);
        // Not followed: a link's target is not the backup's.
        let size = match fs::symlink_metadata(&path) {
            Err(_) => {
                problems.push(Problem::Missing(f.path.clone()));
                continue;
            }
            Ok(m) if !m.file_type().is_file() => {
                problems.push(Problem::NotRegular(f.path.clone()));
                continue;
            }
            Ok(m) => m.len(),
        };
        let checked = if read_now(&f.path) {
            checksum_file(&path)
        } else {
            Ok((size, f.crc32c))
        };
        match checked {
            Err(e) => problems.push(Problem::Unreadable(e.to_string())),
            Ok((bytes, _)) if bytes != f.bytes => problems.push(Problem::Size {
                path: f.path.clone(),
                expected: f.bytes,
                found: bytes,
            }),
            Ok((_, crc)) if crc != f.crc32c => problems.push(Problem::Checksum {
                path: f.path.clone(),
                expected: f.crc32c,
                found: crc,
            }),
            Ok(_) => {}
        }
    }
    match names_on_disk(dir) {
        Ok(on_disk) => problems.extend(
            on_disk
                .into_iter()
                .filter(|d| !manifest.files.iter().any(|f| &f.path == d))
                .map(Problem::Unlisted),
        ),
        Err(e) => problems.push(Problem::Unreadable(e)),
    }
    problems
}

/// Every path under `root` that is not a directory, relative, without
/// reading any (a FIFO among them must not hang the check) and without
/// following links; the manifest itself left out.
fn names_on_disk(root: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let rel = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            if kind.is_dir() {
                stack.push((entry.path(), format!("{rel}/")));
            } else if rel != MANIFEST_FILE_NAME {
                out.push(rel);
            }
        }
    }
    Ok(out)
}

/// Copies `dir/data` to a temporary directory, opens its engine and hint
/// store there and reads every entry; their counts.
fn open_copy(dir: &Path) -> Result<(u64, u64), String> {
    let copy = temp_copy_dir(dir);
    let result = copy_tree(&dir.join("data"), &copy)
        .map_err(|e| format!("cannot copy to {}: {e}", copy.display()))
        .and_then(|()| {
            let entries = count_entries(&copy)?;
            let hint_entries = count_entries(&copy.join("hints"))?;
            Ok((entries, hint_entries))
        });
    let _ = fs::remove_dir_all(&copy);
    result
}

/// A fresh temporary directory's path for a copy of checkpoint `dir`.
pub(super) fn temp_copy_dir(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy().into_owned());
    std::env::temp_dir().join(format!(
        "ataman-verify-{}-{}-{name}",
        std::process::id(),
        super::lease::now_ms()
    ))
}

/// Copies a directory tree.
pub(super) fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Opens the engine directory `dir`, reads every entry (each block's
/// checksum is checked as it is read), closes it; the count.
fn count_entries(dir: &Path) -> Result<u64, String> {
    let db = Db::open(dir, Options::default()).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut n = 0u64;
    let scan = db
        .scan(b"", None, true)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in scan {
        entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        n += 1;
    }
    db.close().map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(n)
}
