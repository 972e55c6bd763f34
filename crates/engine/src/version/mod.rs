//! Versions: which SSTables are live, and the read view built around them.
//!
//! - [`files`]: [`LiveTable`] (an SSTable of a version, removed once no
//!   version holds it) and [`Version`] (the live tables by level).
//! - [`super_version`]: [`SuperVersion`], memtables plus a version: what a
//!   reader holds.
//! - [`set`]: [`VersionSet`], the manifest writer and the state it recorded.
//! - [`level_iter`]: [`LevelIter`], one level's tables as one sorted stream.
//! - [`obsolete`]: [`ObsoleteFiles`], the queue the last holder of an
//!   obsolete table hands its file to, and the reap thread that removes it.

pub mod files;
pub mod level_iter;
pub mod obsolete;
pub mod set;
pub mod super_version;

pub use files::{LiveTable, Version};
pub use level_iter::LevelIter;
pub use obsolete::ObsoleteFiles;
pub use set::VersionSet;
pub use super_version::SuperVersion;
