//! Taking a node checkpoint into `<data-dir>/backups/NAME` (docs/BACKUP.md).
//!
//! # Steps
//! 1. A fresh temporary directory `backups/.tmp-NAME` (a leftover of a
//!    killed attempt is removed first).
//! 2. The engine's checkpoint into `data/` ([`Db::checkpoint`]: one point
//!    of the write order), then the hint store's into `data/hints/`.
//! 3. The node's small files copied into `data/`, each fsynced: the clock's
//!    reservation (`CLOCK`, copied after the engine's point, so it bounds
//!    every timestamp the checkpoint holds), `LAST-SEEN`, the layout and
//!    its agreement state (`LAYOUT`, `LAYOUT-ACCEPTOR`, `LAYOUT-NEXT`),
//!    the cluster records (`DEAD-*`, `CLEANUP-*`) and `REFILLING`. Each is
//!    replaced whole by its writer (temp, rename), so a copy is one version
//!    of it.
//! 4. Every file's size and CRC-32C into `BACKUP-MANIFEST`, fsynced. A
//!    table the engine (or the hint store) wrote in this process comes
//!    with its CRC-32C, computed over the bytes as they were written
//!    (`CheckpointReport::known_crc32c`): it is recorded as given, the file
//!    not read back, when its size on disk is the one written. Only the
//!    other files are read (the node's small files, the manifests, tables
//!    opened from the manifest at the start). So a checkpoint reads no
//!    table bytes, and a backup's copy is the one read of them.
//! 5. The directory renamed to `backups/NAME`, and `backups/` fsynced.
//!
//! A kill at any step leaves either `backups/NAME` complete, or no
//! `backups/NAME` and a `.tmp-` directory, which the next start removes
//! ([`super::lease::Backups::open`]). A failure removes the temporary
//! directory at once.

use super::figures::Figures;
use super::manifest::{FileEntry, MANIFEST_FILE_NAME, Manifest};
use crate::hints::HintStore;
use ataman_engine::Db;
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The small files of a data directory copied into a checkpoint, by name.
pub const NODE_FILES: &[&str] = &[
    crate::clock_file::FILE_NAME,
    crate::last_seen::FILE_NAME,
    crate::cluster::layout_file::LAYOUT_FILE,
    crate::cluster::layout_file::ACCEPTOR_FILE,
    crate::cluster::layout_file::NEXT_FILE,
    crate::refill::MARKER,
];
/// The small files copied by prefix (the cluster's records).
pub const NODE_FILE_PREFIXES: &[&str] = &["DEAD-", "CLEANUP-"];
/// The prefix of a checkpoint being written.
pub const TEMP_PREFIX: &str = ".tmp-";
/// Bytes read at a time when checksumming a file.
const CHECKSUM_CHUNK_BYTES: usize = 1 << 20;

/// What a checkpoint is taken of.
pub struct Sources<'a> {
    /// The node's data directory.
    pub data_dir: &'a Path,
    /// The node's engine.
    pub db: &'a Db,
    /// The node's hint store.
    pub hints: &'a HintStore,
}

/// Why a checkpoint could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// A file could not be read, written, linked or synced.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The engine or the hint store refused its checkpoint.
    #[error("{0}")]
    Engine(String),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> TakeError + '_ {
    move |source| TakeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Takes a checkpoint named `manifest.name` into `backups_dir` (module
/// header: the steps); `manifest` brings the name, times and lease, and
/// comes back complete.
pub fn take(
    sources: &Sources<'_>,
    backups_dir: &Path,
    mut manifest: Manifest,
    figures: &Figures,
) -> Result<(PathBuf, Manifest), TakeError> {
    fs::create_dir_all(backups_dir).map_err(io_at(backups_dir))?;
    let tmp = backups_dir.join(format!("{TEMP_PREFIX}{}", manifest.name));
    if tmp.exists() {
        fs::remove_dir_all(&tmp).map_err(io_at(&tmp))?;
    }
    let result = fill(sources, &tmp, &mut manifest, figures);
    if let Err(e) = result {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let target = backups_dir.join(&manifest.name);
    if let Err(e) = fs::rename(&tmp, &target) {
        let _ = fs::remove_dir_all(&tmp);
        return Err(io_at(&target)(e));
    }
    sync_dir(backups_dir)?;
    Ok((target, manifest))
}

/// Steps 2 to 4 into `tmp`.
fn fill(
    sources: &Sources<'_>,
    tmp: &Path,
    manifest: &mut Manifest,
    figures: &Figures,
) -> Result<(), TakeError> {
    fs::create_dir_all(tmp).map_err(io_at(tmp))?;
    let started = Instant::now();
    let data = tmp.join("data");
    let engine = sources
        .db
        .checkpoint(&data)
        .map_err(|e| TakeError::Engine(format!("engine checkpoint: {e}")))?;
    let hints = sources
        .hints
        .checkpoint(&data.join("hints"))
        .map_err(|e| TakeError::Engine(format!("hint store checkpoint: {e}")))?;
    manifest.engine_seq = engine.seq;
    manifest.hints_seq = hints.seq;
    manifest.pinned_bytes = engine.linked_bytes() + hints.linked_bytes();
    Figures::set_us(&figures.checkpoint_links_us, started.elapsed());
    let mut known = BTreeMap::new();
    for (prefix, report) in [("data/", &engine), ("data/hints/", &hints)] {
        for (name, bytes, crc32c) in &report.known_crc32c {
            known.insert(format!("{prefix}{name}"), (*bytes, *crc32c));
        }
    }
    for name in node_files(sources.data_dir)? {
        copy_synced(&sources.data_dir.join(&name), &data.join(&name))?;
    }
    sync_dir(&data)?;
    let started = Instant::now();
    manifest.files = checksum_tree_known(tmp, &known)?;
    Figures::set_us(&figures.checkpoint_checksums_us, started.elapsed());
    let path = tmp.join(MANIFEST_FILE_NAME);
    let mut file = fs::File::create(&path).map_err(io_at(&path))?;
    file.write_all(manifest.render().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_at(&path))?;
    sync_dir(tmp)
}

/// The node's small files present in `data_dir` (step 3).
fn node_files(data_dir: &Path) -> Result<Vec<String>, TakeError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(data_dir).map_err(io_at(data_dir))? {
        let entry = entry.map_err(io_at(data_dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let wanted = NODE_FILES.contains(&name.as_str())
            || (NODE_FILE_PREFIXES.iter().any(|p| name.starts_with(p)) && !name.ends_with(".tmp"));
        if wanted && entry.file_type().is_ok_and(|t| t.is_file()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn copy_synced(from: &Path, to: &Path) -> Result<(), TakeError> {
    let bytes = fs::read(from).map_err(io_at(from))?;
    let mut file = fs::File::create(to).map_err(io_at(to))?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(io_at(to))
}

/// Makes a directory's entries durable.
pub fn sync_dir(dir: &Path) -> Result<(), TakeError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_at(dir))
}

/// Every file under `root` but the manifest, in path order, with its size
/// and CRC-32C (paths relative, `/`-separated).
pub fn checksum_tree(root: &Path) -> Result<Vec<FileEntry>, TakeError> {
    checksum_tree_known(root, &BTreeMap::new())
}

/// [`checksum_tree`], taking the size and CRC-32C of a file in `known`
/// (relative path to bytes and CRC) as given, unread, when its size on
/// disk is that size; any other file is read.
pub fn checksum_tree_known(
    root: &Path,
    known: &BTreeMap<String, (u64, u32)>,
) -> Result<Vec<FileEntry>, TakeError> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for entry in fs::read_dir(&dir).map_err(io_at(&dir))? {
            let entry = entry.map_err(io_at(&dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let kind = entry.file_type().map_err(io_at(&entry.path()))?;
            if kind.is_dir() {
                stack.push((entry.path(), format!("{rel}/")));
            } else if rel != MANIFEST_FILE_NAME {
                let size = entry.metadata().map_err(io_at(&entry.path()))?.len();
                let (bytes, crc32c) = match known.get(&rel) {
                    Some(&(bytes, crc32c)) if bytes == size => (bytes, crc32c),
                    _ => checksum_file(&entry.path())?,
                };
                out.push(FileEntry {
                    path: rel,
                    bytes,
                    crc32c,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A file's size and CRC-32C, read a chunk at a time.
pub fn checksum_file(path: &Path) -> Result<(u64, u32), TakeError> {
    let mut file = fs::File::open(path).map_err(io_at(path))?;
    let mut buf = vec![0u8; CHECKSUM_CHUNK_BYTES];
    let (mut bytes, mut crc) = (0u64, 0u32);
    loop {
        let n = file.read(&mut buf).map_err(io_at(path))?;
        if n == 0 {
            return Ok((bytes, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        bytes += n as u64;
    }
}
