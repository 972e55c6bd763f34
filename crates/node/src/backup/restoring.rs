//! Whether a restore is writing into this node (`ataman backup restore`):
//! such a node answers `GET /readyz` 503 `restoring` until the restore
//! says it is done, so a load balancer sends no client to a half-restored
//! cluster (issue 33: the restored cluster answers clients once every
//! version is on its replicas).
//!
//! # Rules
//! - The restore marks every member when it starts writing
//!   (`POST /v0/backup?ingest=begin`, after the empty-store check) and
//!   each batch it applies marks again; `ingest=done`, sent once every
//!   member has every batch, clears the mark.
//! - A mark lasts [`RESTORE_LEASE_MS`] after the last one: a restore
//!   that dies (its client killed, a member failing) does not hold the
//!   node out of rotation for ever. The mark lives in memory only: a
//!   restarted node is ready again (the restore's next batch marks it).

use std::sync::atomic::{AtomicU64, Ordering};

/// How long a restore's mark lasts after its last batch, milliseconds.
/// Longer than a batch takes to read and apply (at most 4 MiB) by far,
/// and than reading the next member's checkpoint back.
pub const RESTORE_LEASE_MS: u64 = 10 * 60 * 1_000;

/// The mark: the wall-clock time of the restore's last begin or batch,
/// Unix milliseconds, 0 for none.
#[derive(Debug, Default)]
pub struct Restoring {
    last_ms: AtomicU64,
}

impl Restoring {
    /// A restore began, or applied a batch, at `now_ms`.
    pub fn mark(&self, now_ms: u64) {
        self.last_ms.store(now_ms.max(1), Ordering::Relaxed);
    }

    /// The restore is done: the node is ready again.
    pub fn end(&self) {
        self.last_ms.store(0, Ordering::Relaxed);
    }

    /// [`under_way`] of the mark held.
    pub fn under_way(&self, now_ms: u64) -> Option<u64> {
        under_way(self.last_ms.load(Ordering::Relaxed), now_ms)
    }
}

/// The milliseconds since the restore's last mark, when one marked at
/// `last_ms` (0: none) still holds at `now_ms`.
pub fn under_way(last_ms: u64, now_ms: u64) -> Option<u64> {
    let since = now_ms.saturating_sub(last_ms);
    (last_ms != 0 && since < RESTORE_LEASE_MS).then_some(since)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mark holds until done or until its lease ends after the last
    /// batch; a batch extends it; a clock stepping back does not end it.
    #[test]
    fn a_mark_holds_until_done_or_its_lease_ends() {
        assert_eq!(under_way(0, 5_000), None);
        let r = Restoring::default();
        assert_eq!(r.under_way(1_000), None);
        r.mark(1_000);
        assert_eq!(r.under_way(1_000), Some(0));
        assert_eq!(r.under_way(500), Some(0), "a clock stepping back");
        assert_eq!(
            r.under_way(1_000 + RESTORE_LEASE_MS - 1),
            Some(RESTORE_LEASE_MS - 1)
        );
        assert_eq!(
            r.under_way(1_000 + RESTORE_LEASE_MS),
            None,
            "the lease ended"
        );
        r.mark(1_000 + RESTORE_LEASE_MS / 2);
        assert!(
            r.under_way(1_000 + RESTORE_LEASE_MS).is_some(),
            "a batch extends it"
        );
        r.end();
        assert_eq!(r.under_way(1_000 + RESTORE_LEASE_MS), None);
        // A mark at the epoch still counts as one.
        r.mark(0);
        assert_eq!(r.under_way(10), Some(9));
    }
}
