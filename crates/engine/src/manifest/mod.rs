//! The manifest: which SSTables make up the tree, as a log of version edits.
//!
//! - [`edit`]: one version edit and its encoding.
//! - [`state`]: the state edits add up to, and how an edit applies.
//! - [`log`]: the manifest file: written whole to a temp file and renamed at
//!   open, then appended to with one fsynced record per edit; loading it,
//!   with a torn last record ignored.
//!
//! The format is specified in `docs/FORMAT.md`.

pub mod edit;
pub mod log;
pub mod state;

#[cfg(test)]
mod test_support;

#[cfg(test)]
mod sim_tests;

pub use edit::{FileMeta, LEVELS_MAX, VersionEdit};
pub use log::{
    ManifestLoad, ManifestState, ManifestWriter, TornTail, load_manifest, load_manifest_report,
};
