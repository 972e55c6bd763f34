//! Whether a restore is writing into this node (`ataman backup restore`):
//! such a node answers `GET /readyz` 503 `restoring` until every restore
//! writing into it says it is done, so a load balancer sends no client to
//! a half-restored cluster (issue 33: the restored cluster answers clients
//! once every version is on its replicas).
//!
//! # Rules
//! - Each restore names itself with an id (1 to 64 of `A-Z a-z 0-9 - _`,
//!   checked where the request is parsed: `api`), the same on
//!   every request it sends. It marks every member when it starts writing
//!   (`POST /v0/backup?ingest=begin&restore=ID`, after the empty-store
//!   check) and each batch it applies marks again; `ingest=done&restore=ID`,
//!   sent once every member has every batch, clears **its own** mark only.
//! - The node is restoring while any mark holds ([`Marks::under_way`]):
//!   two restores into one node (say two backups restored side by side,
//!   or one run again while the first still writes) each hold it until
//!   their own done; the first to finish does not make it ready while the
//!   other still writes.
//! - A mark lasts [`RESTORE_LEASE_MS`] after its restore's last begin or
//!   batch: a restore that dies (its client killed, a member failing) does
//!   not hold the node out of rotation for ever. Each restore's lease is
//!   its own.
//! - At most [`RESTORES_MAX`] restores are marked at once (bounded
//!   memory); a mark for another while that many hold is refused
//!   ([`Full`]: the request answers 503), expired marks are dropped first.
//! - The marks live in memory only: a restarted node is ready again (a
//!   restore's next batch marks it).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// How long a restore's mark lasts after its last batch, milliseconds.
/// Longer than a batch takes to read and apply (at most one value at the
/// bound, or 4 MiB) by far, and than reading the next member's checkpoint
/// back.
pub const RESTORE_LEASE_MS: u64 = 10 * 60 * 1_000;

/// Restores marked at once, at most.
pub const RESTORES_MAX: usize = 64;

/// Another restore's mark while [`RESTORES_MAX`] hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{RESTORES_MAX} restores are already writing into this node")]
pub struct Full;

/// The marks: each restore's id and the wall-clock time of its last
/// begin or batch, Unix milliseconds. Pure: times are given.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Marks {
    last_ms: BTreeMap<String, u64>,
}

/// What the marks say at one time: restores under way, and the
/// milliseconds since the newest mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnderWay {
    /// Restores whose mark holds.
    pub restores: usize,
    /// Milliseconds since the newest of their marks.
    pub since_ms: u64,
}

impl Marks {
    /// Restore `id` began, or applied a batch, at `now_ms`.
    pub fn mark(&mut self, id: &str, now_ms: u64) -> Result<(), Full> {
        if !self.last_ms.contains_key(id) {
            self.last_ms.retain(|_, last| holds(*last, now_ms));
            if self.last_ms.len() >= RESTORES_MAX {
                return Err(Full);
            }
        }
        let last = self.last_ms.entry(id.to_owned()).or_insert(now_ms);
        *last = (*last).max(now_ms);
        Ok(())
    }

    /// Restore `id` is done; another's mark is kept.
    pub fn end(&mut self, id: &str) {
        self.last_ms.remove(id);
    }

    /// The restores whose mark holds at `now_ms`, or `None`.
    pub fn under_way(&self, now_ms: u64) -> Option<UnderWay> {
        let held = self.last_ms.values().filter(|&&last| holds(last, now_ms));
        let (restores, newest) = held.fold((0, 0), |(n, newest), &last| (n + 1, newest.max(last)));
        (restores > 0).then(|| UnderWay {
            restores,
            since_ms: now_ms.saturating_sub(newest),
        })
    }
}

/// A mark made at `last_ms` still holds at `now_ms` (a clock stepping
/// back keeps it).
fn holds(last_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(last_ms) < RESTORE_LEASE_MS
}

/// The node's marks, shared by its threads.
#[derive(Debug, Default)]
pub struct Restoring {
    marks: Mutex<Marks>,
}

impl Restoring {
    /// [`Marks::mark`].
    pub fn mark(&self, id: &str, now_ms: u64) -> Result<(), Full> {
        self.lock().mark(id, now_ms)
    }

    /// [`Marks::end`].
    pub fn end(&self, id: &str) {
        self.lock().end(id);
    }

    /// [`Marks::under_way`].
    pub fn under_way(&self, now_ms: u64) -> Option<UnderWay> {
        self.lock().under_way(now_ms)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Marks> {
        // The marks are whole after any panic (each change is one map
        // operation): a poisoned lock is used as it is.
        self.marks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = RESTORE_LEASE_MS;

    /// A mark holds until done or until its lease ends after the last
    /// batch; a batch extends it; a clock stepping back does not end it.
    #[test]
    fn a_mark_holds_until_done_or_its_lease_ends() {
        let mut m = Marks::default();
        assert_eq!(m.under_way(1_000), None);
        m.mark("a", 1_000).unwrap();
        let one = |since_ms| {
            Some(UnderWay {
                restores: 1,
                since_ms,
            })
        };
        assert_eq!(m.under_way(1_000), one(0));
        assert_eq!(m.under_way(500), one(0), "a clock stepping back");
        assert_eq!(m.under_way(1_000 + LEASE - 1), one(LEASE - 1));
        assert_eq!(m.under_way(1_000 + LEASE), None, "the lease ended");
        m.mark("a", 1_000 + LEASE / 2).unwrap();
        assert!(m.under_way(1_000 + LEASE).is_some(), "a batch extends it");
        m.mark("a", 10).unwrap();
        assert!(
            m.under_way(1_000 + LEASE).is_some(),
            "an older time does not shorten it"
        );
        m.end("a");
        assert_eq!(m.under_way(1_000 + LEASE), None);
        // A mark at the epoch still counts as one.
        m.mark("a", 0).unwrap();
        assert_eq!(m.under_way(10), one(10));
    }

    /// Two restores: the first one's done leaves the node restoring while
    /// the other's mark holds (the attacker's finding: one mark for all,
    /// and the first done cleared it); each lease is its own.
    #[test]
    fn each_restore_holds_its_own_mark() {
        let mut m = Marks::default();
        m.mark("a", 1_000).unwrap();
        m.mark("b", 2_000).unwrap();
        assert_eq!(
            m.under_way(3_000),
            Some(UnderWay {
                restores: 2,
                since_ms: 1_000
            })
        );
        m.end("a");
        assert_eq!(
            m.under_way(3_000),
            Some(UnderWay {
                restores: 1,
                since_ms: 1_000
            }),
            "b still writes"
        );
        m.end("a");
        assert!(m.under_way(3_000).is_some(), "a second done of a");
        // Each lease is its own: a's ends while b's batches go on.
        m.mark("a", 1_000).unwrap();
        m.mark("b", 1_000 + LEASE).unwrap();
        assert_eq!(
            m.under_way(1_000 + LEASE).map(|u| u.restores),
            Some(1),
            "a's lease ended, b's holds"
        );
        m.end("b");
        assert_eq!(m.under_way(1_000 + LEASE), None);
    }

    /// At most `RESTORES_MAX` marks: another is refused while they hold,
    /// taken once one ends or expires; a held one is re-marked freely.
    #[test]
    fn marks_are_bounded() {
        let mut m = Marks::default();
        for i in 0..RESTORES_MAX {
            m.mark(&format!("r{i}"), 1_000).unwrap();
        }
        assert_eq!(m.mark("late", 1_000), Err(Full));
        assert_eq!(m.mark("r0", 1_500), Ok(()), "a held one is re-marked");
        m.end("r1");
        assert_eq!(m.mark("late", 1_500), Ok(()));
        assert_eq!(m.mark("later", 1_500), Err(Full));
        assert_eq!(m.mark("later", 1_000 + LEASE), Ok(()), "expired ones go");
        assert_eq!(m.last_ms.len(), 3, "r0, late, later");
    }

    #[test]
    fn the_shared_marks_follow_the_rule() {
        let r = Restoring::default();
        r.mark("a", 5).unwrap();
        r.mark("b", 6).unwrap();
        r.end("b");
        assert_eq!(r.under_way(7).map(|u| u.restores), Some(1));
        r.end("a");
        assert_eq!(r.under_way(7), None);
    }
}
