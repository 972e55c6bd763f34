//! The set of live SSTables: [`LiveTable`] and [`Version`].
//!
//! A [`Version`] is immutable; a flush or compaction builds a new one and
//! installs it (inside a new [`super::SuperVersion`]).

use super::obsolete::{Doomed, ObsoleteFiles};
use crate::fs::FileSystem;
use crate::key;
use crate::manifest::FileMeta;
use crate::sst::Table;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// An SSTable that is (or was) part of a version.
///
/// When a compaction replaces it, it is marked obsolete; the file is
/// removed when the last version (and so the last reader) holding it is
/// gone, by the engine's reap thread ([`super::obsolete`]).
pub struct LiveTable {
    /// What the manifest says of it.
    pub meta: FileMeta,
    /// The open table.
    pub table: Arc<Table>,
    /// The CRC-32C of the whole file, when this process wrote it
    /// (`TableProperties::file_crc32c`); `None` for a table opened from
    /// the manifest (it is not recorded there).
    pub file_crc32c: Option<u32>,
    path: PathBuf,
    fs: Arc<dyn FileSystem>,
    /// Set when the table is marked obsolete: who removes its file.
    reaper: OnceLock<Arc<ObsoleteFiles>>,
}

impl LiveTable {
    /// Wraps an open table.
    pub fn new(meta: FileMeta, table: Arc<Table>, path: PathBuf, fs: Arc<dyn FileSystem>) -> Self {
        LiveTable {
            meta,
            table,
            file_crc32c: None,
            path,
            fs,
            reaper: OnceLock::new(),
        }
    }

    /// The table with the CRC-32C of its whole file, as its builder wrote it.
    pub fn with_file_crc32c(mut self, file_crc32c: Option<u32>) -> Self {
        self.file_crc32c = file_crc32c;
        self
    }

    /// Marks the file for removal once no version holds it, by `reaper`'s
    /// thread.
    pub fn mark_obsolete_for(&self, reaper: &Arc<ObsoleteFiles>) {
        let _ = self.reaper.set(Arc::clone(reaper));
    }

    /// The user-key range `[smallest, largest]` of the file.
    pub fn user_range(&self) -> (&[u8], &[u8]) {
        (
            key::user_key(&self.meta.smallest),
            key::user_key(&self.meta.largest),
        )
    }

    /// True if `user_key` falls in the file's range.
    pub fn covers(&self, user_key: &[u8]) -> bool {
        let (lo, hi) = self.user_range();
        lo <= user_key && user_key <= hi
    }

    /// True if the file's range meets `[lo, hi]` (user keys, inclusive).
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        let (a, b) = self.user_range();
        a <= hi && lo <= b
    }
}

impl Drop for LiveTable {
    fn drop(&mut self) {
        if let Some(reaper) = self.reaper.get() {
            // The manifest no longer names this file; if removal fails the
            // file is an orphan that the next open removes.
            let doomed = Doomed {
                path: std::mem::take(&mut self.path),
                fs: Arc::clone(&self.fs),
                table: Arc::clone(&self.table),
            };
            if let Err(doomed) = reaper.push(doomed) {
                doomed.remove();
            }
        }
    }
}

/// The live SSTables by level.
///
/// # Invariants
/// - L0 files are ordered newest first (by file number, descending); they may overlap.
/// - Files of L1 and deeper are ordered by smallest key and do not overlap.
#[derive(Clone, Default)]
pub struct Version {
    /// `levels[i]` holds the files of level i.
    pub levels: Vec<Vec<Arc<LiveTable>>>,
}

impl Version {
    /// An empty version with `levels` levels.
    pub fn empty(levels: usize) -> Self {
        Version {
            levels: vec![Vec::new(); levels],
        }
    }

    /// Sorts levels into their invariant order and checks it.
    pub fn normalize(&mut self) {
        if let Some(l0) = self.levels.first_mut() {
            l0.sort_by_key(|t| std::cmp::Reverse(t.meta.number));
        }
        for level in self.levels.iter_mut().skip(1) {
            level.sort_by(|a, b| key::compare_internal(&a.meta.smallest, &b.meta.smallest));
            for pair in level.windows(2) {
                debug_assert!(
                    key::user_key(&pair[0].meta.largest) < key::user_key(&pair[1].meta.smallest),
                    "overlapping files {} and {} in one level",
                    pair[0].meta.number,
                    pair[1].meta.number
                );
            }
        }
    }

    /// Total bytes of a level.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map_or(0, |l| l.iter().map(|t| t.meta.file_bytes).sum())
    }

    /// All files, for listing.
    pub fn all_files(&self) -> impl Iterator<Item = &Arc<LiveTable>> {
        self.levels.iter().flatten()
    }

    /// The file of level `level >= 1` whose range covers `user_key`, if any.
    pub fn file_covering(&self, level: usize, user_key: &[u8]) -> Option<&Arc<LiveTable>> {
        let files = self.levels.get(level)?;
        let idx = files.partition_point(|t| key::user_key(&t.meta.largest) < user_key);
        // The file's largest key is at or after `user_key`: only its
        // smallest key can still rule it out.
        files
            .get(idx)
            .filter(|t| key::user_key(&t.meta.smallest) <= user_key)
    }
}
