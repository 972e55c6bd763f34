//! Simulated file system for power-loss and fault-injection tests.
//!
//! [`SimFs`] keeps everything in memory and models the assumptions of
//! [`crate::fs`] about the disk:
//!
//! - Each file has **live** bytes (what reads see) and a **durable length**.
//!   Appended bytes become durable when [`WritableFile::sync`](crate::fs::WritableFile::sync) on the file
//!   returns `Ok`. [`FileSystem::truncate`](crate::fs::FileSystem::truncate) is durable at once.
//! - Each directory has a **live** and a **durable** namespace. Creations,
//!   renames and removals become durable when [`FileSystem::sync_dir`](crate::fs::FileSystem::sync_dir) on
//!   that directory returns `Ok`: a synced file in an unsynced directory can
//!   vanish, a removed file can come back, a rename can be undone.
//! - [`SimFs::crash_image`] builds a state a power cut now could leave
//!   ([`crash`] says exactly which), [`SimFs::crash_image_with`] forces a mode.
//! - [`SimFs::inject`] arms a write, sync or dir-sync failure ([`Fault`]).
//!   A failed append writes nothing. A failed sync also **drops the file's
//!   unsynced bytes from the live content**, as Linux drops dirty pages after
//!   a writeback error, so a retried sync that "succeeds" has lost data.
//!   The writable handle keeps counting the bytes it appended (like a file
//!   descriptor's view), so its `len` then exceeds the file's.
//!
//! Simplifications: directories are durable as soon as they are created;
//! `create` of an existing name is modelled as a new file replacing the old
//! name (the old content stays durable until the directory is synced);
//! renames across directories are refused with `Unsupported`.
//!
//! The file system itself is `sim_fs.rs`; `model` its state, `handle`
//! the handles it gives out, `crash` its crash images, `fault` injected
//! faults.
//!
//! # Thread safety
//! `SimFs` is a handle to one shared model behind a mutex: clones share it,
//! every operation takes the lock once, and handles lock it per call.

pub mod crash;
pub mod fault;
mod handle;
mod model;

#[cfg(test)]
mod tests;

pub use crash::{CrashMode, NamespaceMode, PAGE_BYTES, SECTOR_BYTES, TailMode};
pub use fault::{Fault, FaultKind, FaultOp, SimStats};

mod sim_fs;

use ataman_testkit::lock::lock;
use sim_fs::Shared;
pub use sim_fs::SimFs;
