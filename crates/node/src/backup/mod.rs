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
//! - [`point_in_time`]: a cluster backup's rule, when a member checkpoints
//!   and which versions a restore keeps (pure).
//! - [`ingest_wire`]: a restore's versions on the wire (pure).
//! - [`cluster_manifest`]: a cluster backup's top manifest and its check.
//! - [`read_back`]: a checkpoint's versions read back (a restore's source).
//! - [`figures`]: a cluster backup's and a restore's counters.
//! - [`restoring`]: whether a restore is writing into this node (`/readyz`).
//! - [`place`]: a checkpoint put back as a data directory, offline (the
//!   same-layout restore).

pub mod cluster_manifest;
pub mod figures;
pub mod ingest_wire;
pub mod job;
pub mod lease;
pub mod manifest;
pub mod place;
pub mod point_in_time;
pub mod read_back;
pub mod restoring;
pub mod take;
pub mod verify;

pub use lease::{Backups, Refusal};
pub use manifest::Manifest;
