//! The directory a benchmark works in: the one the user named, or a fresh
//! temporary one removed when the benchmark ends.

use crate::error::{BenchError, Result};
use std::path::{Path, PathBuf};

/// A benchmark's work directory; a temporary one lives as long as this value.
pub struct WorkDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl WorkDir {
    /// `dir` if given, else a new temporary directory named `prefix…`.
    pub fn new(dir: Option<&Path>, prefix: &str) -> Result<WorkDir> {
        match dir {
            Some(d) => Ok(WorkDir {
                path: d.to_path_buf(),
                _temp: None,
            }),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix(prefix)
                    .tempdir()
                    .map_err(|e| BenchError::io(std::env::temp_dir(), e))?;
                Ok(WorkDir {
                    path: temp.path().to_path_buf(),
                    _temp: Some(temp),
                })
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
