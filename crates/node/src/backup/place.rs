//! The same-layout restore (docs/BACKUP.md, "Same-layout restore"): one
//! node checkpoint put back, offline, as a node's data directory, at disk
//! speed (`ataman backup restore DIR --data-dir PATH --node N`).
//!
//! # Rules
//! 1. The source is checked first: a cluster backup's `CLUSTER-MANIFEST`
//!    whole and member `N`'s `BACKUP-MANIFEST` the one it records, then
//!    every file of that checkpoint present with its size, nothing
//!    unlisted, and the CRC-32C of every file that will be **linked**
//!    ([`checked_source`]). A file that will be copied has its CRC-32C
//!    checked by its copy (rule 3), as it is read: each byte of the
//!    backup is read once. A damaged source is refused, each problem
//!    naming its file, **nothing written** to `PATH` (a copy's mismatch
//!    removes the temporary tree). (It is not opened as an engine, which
//!    `verify` does on a copy: the node opens it.)
//! 2. `PATH` must be absent or an empty directory ([`target_state`]): a
//!    restore never mixes its files with a store's.
//! 3. The files of `data/` go into `.NAME.restore-tmp` beside `PATH`
//!    (one left by a crash is removed first): the tables (`*.sst`, never
//!    written after they are made) as **hard links** of the backup's, the
//!    other files (the manifests, the clock, the layout: replaced by their
//!    writers, or appended) **copied**, each copy's CRC-32C checked against
//!    the manifest as it is written ([`how`]). A table on another file
//!    system, or with `copy`, is copied too. The copies are fsynced in
//!    batches of [`FSYNC_BATCH_FILES_MAX`] once written, not one by one as
//!    each is written: the kernel writes one back while the next is read.
//! 4. Every directory of the temporary tree is fsynced, the tree renamed
//!    to `PATH`, the parent fsynced. A crash before the rename leaves
//!    `PATH` as it was (absent or empty) and a `.restore-tmp` the next run
//!    removes; after it, the whole data directory.
//!
//! A node started on `PATH` comes back at its checkpoint's point: the
//! writes stamped between a cluster backup's `T` and its checkpoint
//! included (the ingest path drops them).

use super::cluster_manifest::{self, ClusterManifest};
use super::manifest::{FileEntry, MANIFEST_FILE_NAME, Manifest};
use super::verify::{self, Problem};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Copies written and not yet fsynced, at most (open files held).
pub const FSYNC_BATCH_FILES_MAX: usize = 64;
/// Bytes read at a time by a copy.
const COPY_CHUNK_BYTES: usize = 4 << 20;

/// How one file of a checkpoint's `data/` is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// A hard link of the backup's file (an immutable table).
    Link,
    /// A copy, its CRC-32C checked as it is written.
    Copy,
}

/// Rule 3: a table (`*.sst`, in `data/` or `data/hints/`) is linked
/// unless `copy`; every other file is copied.
pub fn how(path: &str, copy: bool) -> How {
    if path.ends_with(".sst") && !copy {
        How::Link
    } else {
        How::Copy
    }
}

/// Rule 2's verdict on `PATH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    /// Nothing there.
    Absent,
    /// An empty directory.
    Empty,
    /// Anything else: refused.
    Occupied,
}

/// Rule 2: what `path` is.
pub fn target_state(path: &Path) -> TargetState {
    match fs::symlink_metadata(path) {
        Err(_) => TargetState::Absent,
        Ok(m) if m.file_type().is_dir() => match fs::read_dir(path).map(|mut e| e.next()) {
            Ok(None) => TargetState::Empty,
            _ => TargetState::Occupied,
        },
        Ok(_) => TargetState::Occupied,
    }
}

/// Why a placement did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaceError {
    /// The source is damaged or incomplete: each problem, naming its file.
    Damaged(Vec<String>),
    /// Refused before anything was written (a bad `--node`, `PATH` occupied).
    Refused(String),
    /// Writing failed (the temporary tree removed).
    Failed(String),
}

/// What was placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placed {
    /// Files hard-linked, and their bytes.
    pub linked: (u64, u64),
    /// Files copied, and their bytes.
    pub copied: (u64, u64),
}

/// Rule 1: the checkpoint of member `node` of backup `dir` (a cluster
/// backup's, or `dir` itself when it is a node checkpoint and `node` is 0
/// or not given) and its manifest, every file checked.
pub fn checked_source(
    dir: &Path,
    node: Option<usize>,
    copy: bool,
) -> Result<(PathBuf, Manifest), PlaceError> {
    let damaged = |problems: Vec<Problem>, prefix: &str| {
        PlaceError::Damaged(problems.iter().map(|p| format!("{prefix}{p}")).collect())
    };
    let (source, prefix) = if cluster_manifest::is_cluster_backup(dir) {
        let top = cluster_manifest::read(dir).map_err(|p| damaged(vec![p], ""))?;
        let member = member_of(&top, node)?;
        let source = dir.join(&member.dir);
        let recorded = fs::read(source.join(MANIFEST_FILE_NAME))
            .map(|bytes| crc32c::crc32c(&bytes))
            .map_err(|_| damaged(vec![Problem::Missing(MANIFEST_FILE_NAME.into())], ""))?;
        let prefix = format!("{}/", member.dir);
        if recorded != member.manifest_crc32c {
            let problem = Problem::Checksum {
                path: MANIFEST_FILE_NAME.into(),
                expected: member.manifest_crc32c,
                found: recorded,
            };
            return Err(damaged(vec![problem], &prefix));
        }
        (source, prefix)
    } else {
        if node.is_some_and(|n| n != 0) {
            let why = "a node checkpoint is node 0 (--node names a cluster backup's member)";
            return Err(PlaceError::Refused(why.into()));
        }
        (dir.to_path_buf(), String::new())
    };
    let manifest = verify::read_manifest(&source).map_err(|p| damaged(vec![p], &prefix))?;
    // Rule 1: a file to be copied is checksummed by its copy; every other
    // (linked, or not placed at all) now.
    let read_now = |path: &str| !(path.starts_with("data/") && how(path, copy) == How::Copy);
    let problems = verify::check_files_reading(&source, &manifest, &read_now);
    if !problems.is_empty() {
        return Err(damaged(problems, &prefix));
    }
    Ok((source, manifest))
}

fn member_of(
    top: &ClusterManifest,
    node: Option<usize>,
) -> Result<&cluster_manifest::Member, PlaceError> {
    let n = top.members.len();
    let index = match node {
        Some(index) => index,
        None if n == 1 => 0,
        None => {
            let why = format!(
                "a backup of {n} members: --node INDEX (0 to {}) says which",
                n - 1
            );
            return Err(PlaceError::Refused(why));
        }
    };
    top.members
        .iter()
        .find(|m| m.index == index)
        .ok_or_else(|| {
            PlaceError::Refused(format!(
                "--node {index}: the backup has members 0 to {}",
                n.saturating_sub(1)
            ))
        })
}

/// Rules 2 to 4: puts the checked checkpoint `source` (its `manifest`)
/// into `data_dir`.
pub fn place(
    source: &Path,
    manifest: &Manifest,
    data_dir: &Path,
    copy: bool,
) -> Result<Placed, PlaceError> {
    if target_state(data_dir) == TargetState::Occupied {
        return Err(PlaceError::Refused(format!(
            "{}: not empty (a restore goes into an absent or empty data directory)",
            data_dir.display()
        )));
    }
    let tmp = temp_path(data_dir)?;
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(|e| failed(&tmp, &e))?;
    }
    let result = fill(source, manifest, &tmp, copy).and_then(|placed| {
        fs::rename(&tmp, data_dir).map_err(|e| failed(data_dir, &e))?;
        sync_dir(parent_of(data_dir))?;
        Ok(placed)
    });
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// `.NAME.restore-tmp` beside `data_dir`.
pub fn temp_path(data_dir: &Path) -> Result<PathBuf, PlaceError> {
    let name = data_dir
        .file_name()
        .ok_or_else(|| PlaceError::Refused(format!("{}: no directory name", data_dir.display())))?;
    Ok(parent_of(data_dir).join(format!(".{}.restore-tmp", name.to_string_lossy())))
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn failed(path: &Path, e: &std::io::Error) -> PlaceError {
    PlaceError::Failed(format!("{}: {e}", path.display()))
}

fn sync_dir(dir: &Path) -> Result<(), PlaceError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| failed(dir, &e))
}

/// Every file of `data/` into `tmp`, every directory of it fsynced.
fn fill(source: &Path, manifest: &Manifest, tmp: &Path, copy: bool) -> Result<Placed, PlaceError> {
    fs::create_dir_all(tmp).map_err(|e| failed(tmp, &e))?;
    let mut dirs = vec![tmp.to_path_buf()];
    let mut placed = Placed::default();
    let mut unsynced: Vec<(PathBuf, fs::File)> = Vec::new();
    let mut buf = vec![0u8; COPY_CHUNK_BYTES];
    for f in &manifest.files {
        let Some(rel) = f.path.strip_prefix("data/") else {
            continue;
        };
        let to = tmp.join(rel);
        if let Some(parent) = to.parent()
            && !dirs.iter().any(|d| d == parent)
        {
            fs::create_dir_all(parent).map_err(|e| failed(parent, &e))?;
            dirs.push(parent.to_path_buf());
        }
        let from = source.join(&f.path);
        let linked = how(&f.path, copy) == How::Link && fs::hard_link(&from, &to).is_ok();
        let count = if linked {
            &mut placed.linked
        } else {
            if unsynced.len() == FSYNC_BATCH_FILES_MAX {
                sync_files(&mut unsynced)?;
            }
            let file = copy_checked(&from, &to, f, &mut buf)?;
            unsynced.push((to, file));
            &mut placed.copied
        };
        *count = (count.0 + 1, count.1 + f.bytes);
    }
    sync_files(&mut unsynced)?;
    // Deepest first, so each directory's entries are durable before its parent's.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in &dirs {
        sync_dir(d)?;
    }
    Ok(placed)
}

/// fsyncs every copy in `files` and forgets them.
fn sync_files(files: &mut Vec<(PathBuf, fs::File)>) -> Result<(), PlaceError> {
    for (path, file) in files.drain(..) {
        file.sync_all().map_err(|e| failed(&path, &e))?;
    }
    Ok(())
}

/// Copies `from` to `to` in one read, checking the bytes against
/// `entry`'s size and CRC-32C (the only check of a file not read before:
/// rule 1); the copy, written and not yet fsynced.
fn copy_checked(
    from: &Path,
    to: &Path,
    entry: &FileEntry,
    buf: &mut [u8],
) -> Result<fs::File, PlaceError> {
    let mut input = fs::File::open(from).map_err(|e| failed(from, &e))?;
    let mut output = fs::File::create(to).map_err(|e| failed(to, &e))?;
    let (mut bytes, mut crc) = (0u64, 0u32);
    loop {
        let n = input.read(buf).map_err(|e| failed(from, &e))?;
        if n == 0 {
            break;
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        bytes += n as u64;
        output.write_all(&buf[..n]).map_err(|e| failed(to, &e))?;
    }
    if bytes != entry.bytes {
        return Err(PlaceError::Damaged(vec![format!(
            "{}: changed while it was copied: {bytes} bytes; the manifest says {}",
            entry.path, entry.bytes
        )]));
    }
    if crc != entry.crc32c {
        let problem = Problem::Checksum {
            path: entry.path.clone(),
            expected: entry.crc32c,
            found: crc,
        };
        return Err(PlaceError::Damaged(vec![problem.to_string()]));
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::take::checksum_tree;
    use std::os::unix::fs::MetadataExt;

    /// A hand-made checkpoint: two tables, the engine's manifest, the
    /// clock, the hint store's manifest and table.
    fn checkpoint(dir: &Path) -> Manifest {
        let data = dir.join("data");
        fs::create_dir_all(data.join("hints")).unwrap();
        for (path, bytes) in [
            ("000002.sst", &b"table two"[..]),
            ("000005.sst", b"table five, longer"),
            ("MANIFEST", b"engine manifest"),
            ("CLOCK", b"clock"),
            ("hints/MANIFEST", b"hints manifest"),
            ("hints/000003.sst", b"hint table"),
        ] {
            fs::write(data.join(path), bytes).unwrap();
        }
        let manifest = Manifest {
            name: "ckpt-1".into(),
            created_ms: 1,
            lease_until_ms: 2,
            files: checksum_tree(dir).unwrap(),
            ..Manifest::default()
        };
        fs::write(dir.join(MANIFEST_FILE_NAME), manifest.render()).unwrap();
        manifest
    }

    #[test]
    fn tables_are_linked_and_the_rest_copied() {
        assert_eq!(how("data/000002.sst", false), How::Link);
        assert_eq!(how("data/hints/000003.sst", false), How::Link);
        assert_eq!(how("data/000002.sst", true), How::Copy);
        for other in [
            "data/MANIFEST",
            "data/CLOCK",
            "data/LAYOUT",
            "data/hints/MANIFEST",
        ] {
            assert_eq!(how(other, false), How::Copy, "{other}");
        }
    }

    /// A checkpoint placed into an absent directory: every file there with
    /// its bytes, the tables sharing the backup's inodes, the rest not; no
    /// temporary tree left. An occupied target is refused.
    #[test]
    fn a_checkpoint_is_placed_whole() {
        let root = tempfile::tempdir().unwrap();
        let backup = root.path().join("b");
        checkpoint(&backup);
        let (source, manifest) = checked_source(&backup, None, false).unwrap();
        let dd = root.path().join("dd");
        let placed = place(&source, &manifest, &dd, false).unwrap();
        assert_eq!(placed.linked.0, 3);
        assert_eq!(placed.copied.0, 3);
        for f in &manifest.files {
            let rel = f.path.strip_prefix("data/").unwrap();
            let (a, b) = (backup.join(&f.path), dd.join(rel));
            assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap(), "{rel}");
            let same = fs::metadata(&a).unwrap().ino() == fs::metadata(&b).unwrap().ino();
            assert_eq!(same, how(&f.path, false) == How::Link, "{rel}");
        }
        assert!(!temp_path(&dd).unwrap().exists());
        assert_eq!(target_state(&dd), TargetState::Occupied);
        let again = place(&source, &manifest, &dd, false);
        assert!(matches!(again, Err(PlaceError::Refused(_))), "{again:?}");

        // Into an empty directory, copies only, a crash's leftover removed.
        let empty = root.path().join("empty");
        fs::create_dir(&empty).unwrap();
        fs::create_dir(temp_path(&empty).unwrap()).unwrap();
        fs::write(temp_path(&empty).unwrap().join("junk"), b"x").unwrap();
        let placed = place(&source, &manifest, &empty, true).unwrap();
        assert_eq!(placed.linked.0, 0);
        assert_eq!(placed.copied.0, 6);
        assert!(!empty.join("junk").exists());
        assert_eq!(
            fs::read(empty.join("hints/000003.sst")).unwrap(),
            b"hint table"
        );
    }

    /// A flipped byte, a missing file or an unlisted one is refused naming
    /// it, before anything is written.
    #[test]
    fn a_damaged_checkpoint_is_refused_naming_the_file() {
        let root = tempfile::tempdir().unwrap();
        let backup = root.path().join("b");
        checkpoint(&backup);
        let table = backup.join("data/000005.sst");
        let mut bytes = fs::read(&table).unwrap();
        bytes[3] ^= 1;
        fs::write(&table, bytes).unwrap();
        fs::remove_file(backup.join("data/CLOCK")).unwrap();
        let Err(PlaceError::Damaged(problems)) = checked_source(&backup, None, false) else {
            panic!("accepted");
        };
        let text = problems.join("\n");
        assert!(
            text.contains("data/000005.sst: checksum mismatch"),
            "{text}"
        );
        assert!(text.contains("data/CLOCK: missing"), "{text}");
        let refused = checked_source(&backup, Some(1), false);
        assert!(
            matches!(refused, Err(PlaceError::Refused(_))),
            "{refused:?}"
        );
    }

    /// A file that changes between the check and its copy is caught by the
    /// copy's own check, and the temporary tree is removed.
    #[test]
    fn a_file_changed_after_the_check_is_caught_by_its_copy() {
        let root = tempfile::tempdir().unwrap();
        let backup = root.path().join("b");
        checkpoint(&backup);
        let (source, manifest) = checked_source(&backup, None, false).unwrap();
        fs::write(backup.join("data/CLOCK"), b"clocK").unwrap();
        let dd = root.path().join("dd");
        let Err(PlaceError::Damaged(problems)) = place(&source, &manifest, &dd, false) else {
            panic!("placed");
        };
        assert!(
            problems[0].starts_with("data/CLOCK: checksum mismatch"),
            "{problems:?}"
        );
        assert_eq!(target_state(&dd), TargetState::Absent);
        assert!(!temp_path(&dd).unwrap().exists());
    }

    /// With `copy`, a table's bytes are read once, by its copy: a flipped
    /// byte passes the first check (its size is right) and is refused by
    /// the copy naming the file, the target left absent, no temporary
    /// tree; without `copy` (linked) the first check refuses it.
    #[test]
    fn a_copy_checks_each_file_in_its_one_read() {
        let root = tempfile::tempdir().unwrap();
        let backup = root.path().join("b");
        checkpoint(&backup);
        let table = backup.join("data/hints/000003.sst");
        let mut bytes = fs::read(&table).unwrap();
        bytes[0] ^= 0x40;
        fs::write(&table, bytes).unwrap();
        let (source, manifest) = checked_source(&backup, None, true).unwrap();
        let dd = root.path().join("dd");
        let Err(PlaceError::Damaged(problems)) = place(&source, &manifest, &dd, true) else {
            panic!("placed a damaged table");
        };
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("data/hints/000003.sst: checksum mismatch"),
            "{problems:?}"
        );
        assert_eq!(target_state(&dd), TargetState::Absent);
        assert!(!temp_path(&dd).unwrap().exists());
        let Err(PlaceError::Damaged(problems)) = checked_source(&backup, None, false) else {
            panic!("the linked restore's check accepted a damaged table");
        };
        assert!(
            problems[0].starts_with("data/hints/000003.sst: checksum mismatch"),
            "{problems:?}"
        );
        // A size change of a file to be copied is caught before anything.
        fs::write(backup.join("data/CLOCK"), b"clock!").unwrap();
        let Err(PlaceError::Damaged(problems)) = checked_source(&backup, None, true) else {
            panic!("accepted a file of another size");
        };
        assert!(
            problems[0].starts_with("data/CLOCK: 6 bytes"),
            "{problems:?}"
        );
    }
}
