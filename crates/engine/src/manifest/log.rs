//! The manifest file. (stub: being written)

use super::edit::{FileMeta, VersionEdit};
use crate::error::Result;
use crate::fs::FileSystem;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The state all edits add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestState {
    /// Live files, in no particular order.
    pub files: Vec<FileMeta>,
    /// WAL segments below this number are obsolete.
    pub wal_segment_min: u64,
    /// Next unused file number.
    pub next_file_number: u64,
    /// Highest sequence number in the SSTables.
    pub last_seq: u64,
}

impl ManifestState {
    /// Applies an edit; an error if it removes a file that is not live or adds one twice.
    pub fn apply(&mut self, edit: &VersionEdit) -> std::result::Result<(), String> {
        let _ = edit;
        todo!()
    }
    /// One edit that recreates this state from nothing.
    pub fn snapshot_edit(&self) -> VersionEdit {
        todo!()
    }
}

/// Appends edits to the manifest file.
pub struct ManifestWriter {}

impl ManifestWriter {
    /// Writes `state` as a new manifest (temp file, fsync, rename, fsync dir).
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, state: &ManifestState) -> Result<Self> {
        let _ = (fs, dir, state);
        todo!()
    }
    /// Appends one edit as one record and fsyncs.
    pub fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        let _ = edit;
        todo!()
    }
    /// Size of the manifest file.
    pub fn bytes(&self) -> u64 {
        todo!()
    }
    /// Path of the manifest file.
    pub fn path(&self) -> PathBuf {
        todo!()
    }
}

/// Reads the manifest of `dir`: `None` if there is none (a new database).
pub fn load_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ManifestState>> {
    let _ = (fs, dir);
    todo!()
}
