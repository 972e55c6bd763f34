//! Copying the data a node gains in a layout transition, on anti-entropy's
//! machinery (docs/ARCHITECTURE.md, "Membership", "Copying"): the same
//! sessions, Merkle comparison and token bucket, scoped to the keys the
//! node gains from each old member.
//!
//! - [`scope`]: which keys a gaining node copies from one source (pure),
//!   and the order it asks its sources in.
//! - [`one_pass`]: the first pass, every source at once, each key once;
//!   [`offers`]: its rule for one key (pure).
//! - [`pull`]: one comparing session as the gaining node (fetch only):
//!   the fallback, source by source.
//! - [`serve`]: both sessions as the source, on `ataman-sync`.
//! - [`copy`]: [`copy_gained`], both passes, retries, resumable.
//! - [`record`]: `<data-dir>/COPY-<version>`, the finished sources and
//!   how far the first pass got.
//! - [`metrics`]: `ataman_layout_copy_*` on `/metrics`.
//! - [`plan`]: what a change would move, per destination (pure), and the
//!   scan that feeds it; [`plan_thread`]: `GET /v0/layout/plan` off the
//!   network thread (not routed yet).
//! - [`planted`]: the planted bug `copy-skips-keys` (a negative control).

pub mod copy;
pub mod metrics;
pub mod offers;
pub mod one_pass;
pub mod plan;
pub mod plan_thread;
pub mod planted;
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
