//! The version set: the manifest writer and the state it has recorded.
//!
//! Every change to the set of live files is an edit appended to the
//! manifest (fsynced) before it is applied to the in-memory state.
//!
//! # Thread safety
//! Not shared by itself: the engine keeps it under the `versions` mutex
//! of its shared state (touched by the background thread, and by `open`
//! before threads start).

use crate::error::{Error, Result};
use crate::manifest::{ManifestState, ManifestWriter};

/// The manifest writer and the state it has recorded.
pub struct VersionSet {
    /// Appends edits.
    pub manifest: ManifestWriter,
    /// What the manifest says now.
    pub state: ManifestState,
}

impl VersionSet {
    /// Appends `edit` to the manifest (fsynced) and applies it to the state.
    pub fn log_and_apply(&mut self, edit: &crate::manifest::VersionEdit) -> Result<()> {
        self.manifest.append(edit)?;
        self.state
            .apply(edit)
            .map_err(|e| Error::InvalidArgument(format!("manifest edit does not apply: {e}")))
    }
}
