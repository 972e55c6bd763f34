//! Node checkpoints (docs/BACKUP.md): the store, the hint store and the
//! node's small files at one point of the node's write order, in
//! `<data-dir>/backups/NAME`, held under a lease.
//!
//! - [`manifest`]: `BACKUP-MANIFEST`, every file's size and CRC-32C (pure).
//! - [`take`]: taking one (temporary name, fsync, rename).
//! - [`lease`]: `Backups`, the held checkpoints, their leases and the
//!   bytes they pin; at most one taken at a time.
//! - [`verify`]: checking a checkpoint directory and opening a copy of it.
//! - [`job`]: a checkpoint taken off the network threads.

pub mod job;
pub mod lease;
pub mod manifest;
pub mod take;
pub mod verify;

pub use lease::{Backups, Refusal};
pub use manifest::Manifest;
