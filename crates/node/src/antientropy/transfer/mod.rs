//! Copying the data a node gains in a layout transition, on anti-entropy's
//! machinery (docs/ARCHITECTURE.md, "Membership", "Copying"): the same
//! sessions, Merkle comparison and token bucket, scoped to the keys the
//! node gains from each old member.
//!
//! - [`scope`]: which keys a gaining node copies from one source (pure),
//!   and the order it asks its sources in.
//! - [`pull`]: one session as the gaining node (fetch only).
//! - [`serve`]: the same session as the source, on `ataman-sync`.
//! - [`copy`]: [`copy_gained`], every source with retries, resumable.
//! - [`record`]: `<data-dir>/COPY-<version>`, the finished sources.
//! - [`metrics`]: `ataman_layout_copy_*` on `/metrics`.
//! - [`plan`]: what a change would move, per destination (pure), and the
//!   scan that feeds it; [`plan_thread`]: `GET /v0/layout/plan` off the
//!   network thread (not routed yet).

pub mod copy;
pub mod metrics;
pub mod plan;
pub mod plan_thread;
pub mod pull;
pub mod record;
pub mod scope;
pub mod serve;

pub use copy::{
    CopyError, CopyOptions, CopyReport, SourceReport, SourceState, copy_gained, copy_gained_with,
};
pub use metrics::{CopyMetrics, CopyProgress};

/// The bytes a version counts for in copying figures: its key and value.
pub fn moved_bytes(key: &[u8], value: Option<&[u8]>) -> u64 {
    (key.len() + value.map_or(0, <[u8]>::len)) as u64
}

#[cfg(test)]
mod tests;
