//! The manifest: which SSTables make up the tree, as a log of version edits.
//!
//! - [`edit`]: one version edit and its encoding.
//! - [`log`]: the manifest file: written whole to a temp file and renamed at
//!   open, then appended to with one fsynced record per edit.

pub mod edit;
pub mod log;

pub use edit::{FileMeta, VersionEdit};
pub use log::{ManifestState, ManifestWriter, load_manifest};
