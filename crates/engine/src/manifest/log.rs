//! The manifest file: a log of framed version edits.
//!
//! `docs/FORMAT.md`: `dir/MANIFEST` is a sequence of records in
//! the WAL record frame ([`crate::wal::record`]), each holding one encoded
//! [`VersionEdit`]. The first record is a snapshot of the whole state.
//!
//! Install protocol ([`ManifestWriter::create`]): write the snapshot to
//! `dir/MANIFEST.tmp`, fsync it, rename it over `dir/MANIFEST`, fsync the
//! directory. A crash at any point leaves either the old manifest or the
//! new one, each whole. Edits are then appended and fsynced one record at a
//! time; only the last record can be torn, and it was never acknowledged.

pub use super::state::ManifestState;

use super::edit::VersionEdit;
use crate::error::{CorruptionKind, Error, Result};
use crate::fs::{FileSystem, WritableFile, read_all};
use crate::wal::record::{Decoded, RECORD_PAYLOAD_BYTES_MAX, decode_record, encode_record};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Name of the manifest file inside the database directory.
pub const MANIFEST_FILE_NAME: &str = "MANIFEST";

/// Name of the file a new manifest is written to before it is renamed into place.
pub const MANIFEST_TMP_FILE_NAME: &str = "MANIFEST.tmp";

/// Path of the manifest of `dir`.
pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST_FILE_NAME)
}

/// Frames `edit` as one record, after checking it as the reader will.
fn framed(edit: &VersionEdit) -> Result<Vec<u8>> {
    edit.validate()
        .map_err(|e| Error::InvalidArgument(format!("version edit: {e}")))?;
    let mut payload = Vec::new();
    edit.encode(&mut payload);
    if payload.is_empty() || payload.len() > RECORD_PAYLOAD_BYTES_MAX {
        return Err(Error::InvalidArgument(format!(
            "encoded version edit of {} bytes outside 1..={RECORD_PAYLOAD_BYTES_MAX}",
            payload.len()
        )));
    }
    let mut out = Vec::new();
    encode_record(&mut out, &payload);
    Ok(out)
}

/// Appends edits to the manifest file.
///
/// # Invariants
/// - Every record in the file was fsynced before `append` returned `Ok`.
/// - Once a write or sync has failed the writer is poisoned: it never
///   touches the file again, and every later `append` is
///   [`Error::Poisoned`]. A failed fsync is never retried, because the
///   kernel may already have dropped the dirty pages it could not write.
///
/// # Thread safety
/// Owned by one thread (the compaction/flush thread that installs versions).
pub struct ManifestWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    poisoned: Option<String>,
}

impl ManifestWriter {
    /// Writes `state` as a new manifest (temp file, fsync, rename, fsync dir).
    ///
    /// This is also how a manifest with a torn tail is repaired at open:
    /// load it, then create a new one from the loaded state. Appending to a
    /// file with a torn tail would turn that tail into mid-file corruption.
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, state: &ManifestState) -> Result<Self> {
        let record = framed(&state.snapshot_edit())?;
        let tmp = dir.join(MANIFEST_TMP_FILE_NAME);
        let path = manifest_path(dir);
        {
            let mut file = fs.create(&tmp).map_err(|e| Error::io(&tmp, e))?;
            file.append(&record).map_err(|e| Error::io(&tmp, e))?;
            file.sync().map_err(|e| Error::io(&tmp, e))?;
        }
        fs.rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        fs.sync_dir(dir).map_err(|e| Error::io(dir, e))?;
        let file = fs.open_append(&path).map_err(|e| Error::io(&path, e))?;
        if file.len() != record.len() as u64 {
            return Err(Error::io(
                &path,
                io::Error::other(format!(
                    "new manifest holds {} bytes right after writing {}",
                    file.len(),
                    record.len()
                )),
            ));
        }
        Ok(ManifestWriter {
            file,
            path,
            poisoned: None,
        })
    }

    /// Appends one edit as one record and fsyncs.
    ///
    /// An empty edit changes nothing and writes nothing. An edit that does
    /// not validate is [`Error::InvalidArgument`] and writes nothing (the
    /// writer stays usable). A failed write or sync returns [`Error::Io`]
    /// and poisons the writer.
    pub fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        if let Some(reason) = &self.poisoned {
            return Err(Error::Poisoned {
                reason: reason.clone(),
            });
        }
        if edit.is_empty() {
            return Ok(());
        }
        let record = framed(edit)?;
        let result = match self.file.append(&record) {
            Ok(()) => self.file.sync(),
            Err(e) => Err(e),
        };
        result.map_err(|e| {
            self.poisoned = Some(format!("manifest {}: {e}", self.path.display()));
            Error::io(&self.path, e)
        })
    }

    /// True once a write or sync failed; every later append is refused.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    /// Size of the manifest file.
    pub fn bytes(&self) -> u64 {
        self.file.len()
    }

    /// Path of the manifest file.
    pub fn path(&self) -> PathBuf {
        self.path.clone()
    }
}

/// What [`load_manifest_report`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestLoad {
    /// The state all valid records add up to.
    pub state: ManifestState,
    /// Records applied.
    pub records: u64,
    /// Bytes of the valid records (the offset where the torn tail starts, if any).
    pub valid_bytes: u64,
    /// Set when the file ends in a torn append that was ignored.
    pub torn_tail: Option<TornTail>,
}

/// An incomplete or bad last record that was ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Offset of the ignored record.
    pub offset: u64,
    /// Bytes from `offset` to the end of the file.
    pub bytes: u64,
    /// Why the record did not decode.
    pub kind: CorruptionKind,
}

/// Reads the manifest of `dir`: `None` if there is none (a new database).
pub fn load_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestState>> {
    Ok(load_manifest_report(fs, dir)?.map(|load| load.state))
}

/// Like [`load_manifest`], and says how many records were applied and
/// whether a torn last record was ignored (and where).
pub fn load_manifest_report(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestLoad>> {
    let path = manifest_path(dir);
    let buf = match read_all(fs, &path) {
        Ok(buf) => buf,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    replay(&path, &buf).map(Some)
}

/// Decodes and applies every record of `buf`, the contents of `path`.
pub fn replay(path: &Path, buf: &[u8]) -> Result<ManifestLoad> {
    let mut state = ManifestState::default();
    let mut offset = 0usize;
    let mut records = 0u64;
    let mut torn_tail = None;
    while offset < buf.len() {
        let at = offset as u64;
        let bad = match decode_record(&buf[offset..]) {
            Decoded::Record { payload, consumed } => {
                let edit = VersionEdit::decode(payload).map_err(|e| {
                    Error::corruption(path, at, CorruptionKind::Malformed(format!("edit: {e}")))
                })?;
                state.apply(&edit).map_err(|e| {
                    Error::corruption(path, at, CorruptionKind::Malformed(format!("apply: {e}")))
                })?;
                records += 1;
                offset += consumed;
                continue;
            }
            Decoded::Incomplete { needed } => CorruptionKind::Truncated {
                needed,
                available: (buf.len() - offset) as u64,
            },
            Decoded::Corrupt(kind) => kind,
        };
        // A torn append can only damage the last record. If any valid
        // record starts after this one, the damage is in the middle.
        if let Some(next) = next_valid_record(buf, offset + 1) {
            return Err(Error::corruption(
                path,
                at,
                CorruptionKind::Malformed(format!(
                    "{bad}; a valid record follows at offset {next}"
                )),
            ));
        }
        torn_tail = Some(TornTail {
            offset: at,
            bytes: (buf.len() - offset) as u64,
            kind: bad,
        });
        break;
    }
    if records == 0 {
        let kind = match torn_tail {
            Some(torn) => torn.kind,
            None => CorruptionKind::Malformed("empty manifest: no snapshot record".into()),
        };
        return Err(Error::corruption(path, 0, kind));
    }
    Ok(ManifestLoad {
        state,
        records,
        valid_bytes: offset as u64,
        torn_tail,
    })
}

/// The first offset at or after `from` where a whole, checksummed record starts.
///
/// Most offsets are refused by the length check before any checksum is
/// computed; the manifest is small, so the scan is cheap in practice.
fn next_valid_record(buf: &[u8], from: usize) -> Option<usize> {
    (from..buf.len()).find(|&at| matches!(decode_record(&buf[at..]), Decoded::Record { .. }))
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
