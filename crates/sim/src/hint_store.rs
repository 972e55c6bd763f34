//! A simulated node's hint store: writes a replica did not acknowledge,
//! kept until they are delivered. Delivery itself (rounds, cursor,
//! removal) is the node's own driver's
//! (`ataman_node::replication::driver`); this is only the store it reads.
//!
//! The real store (`ataman_node::hints::HintStore`) is a second engine
//! whose `add` returns before its fsync. Here the hints are an in-memory
//! list with the same interface: `add`, `count`, `pending` after a cursor
//! in sequence order, `remove` by sequence number. What survives a crash
//! follows the hint store's WAL mode (the node's): with `fsync` every hint
//! survives (simplification: the real store makes a hint durable one group
//! commit after `add`); with `write` they survive kill -9 but not power
//! loss; with `none` no crash. Hints can also be dropped on purpose (the
//! store's byte bound), see [`HintStore::drop_all`].

use crate::config::CrashKind;
use ataman_engine::WalMode;
use ataman_node::peer::frame::Stamped;
use ataman_node::replication::driver::Hint;
use std::collections::BTreeMap;

/// Hints one node keeps, all peers together; more are dropped (counted),
/// as the real store drops hints at `--hints-bytes-max`.
pub const HINTS_MAX: usize = 100_000;

/// A node's hints, by peer and sequence number.
#[derive(Debug, Default)]
pub struct HintStore {
    pending: BTreeMap<(usize, u64), (Vec<u8>, Stamped)>,
    next_seq: u64,
    /// Hints dropped at [`HINTS_MAX`] or by [`HintStore::drop_all`].
    pub dropped: u64,
    /// Hints removed as delivered.
    pub delivered: u64,
}

impl HintStore {
    /// Keeps a hint for `peer`.
    pub fn add(&mut self, peer: usize, key: Vec<u8>, version: Stamped) {
        if self.pending.len() >= HINTS_MAX {
            self.dropped += 1;
            return;
        }
        self.next_seq += 1;
        self.pending.insert((peer, self.next_seq), (key, version));
    }

    /// Hints pending for `peer`.
    pub fn count(&self, peer: usize) -> usize {
        self.pending.range((peer, 0)..=(peer, u64::MAX)).count()
    }

    /// Up to `max` hints for `peer` with a sequence number above `after`, in order.
    pub fn pending(&self, peer: usize, after: Option<u64>, max: usize) -> Vec<Hint> {
        let from = after.map_or(0, |s| s.saturating_add(1));
        self.pending
            .range((peer, from)..=(peer, u64::MAX))
            .take(max)
            .map(|((_, seq), (key, version))| Hint {
                seq: *seq,
                key: key.clone(),
                version: version.clone(),
            })
            .collect()
    }

    /// Removes `peer`'s hints `seqs` (delivered); unknown ones are ignored.
    pub fn remove(&mut self, peer: usize, seqs: &[u64]) {
        for seq in seqs {
            if self.pending.remove(&(peer, *seq)).is_some() {
                self.delivered += 1;
            }
        }
    }

    /// Hints pending, all peers.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no hint is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Drops every pending hint (the store's byte bound, or a crash that loses them).
    pub fn drop_all(&mut self) {
        self.dropped += self.pending.len() as u64;
        self.pending.clear();
    }

    /// What a crash of kind `kind` leaves of the hints, with the node's WAL mode.
    pub fn crash(&mut self, kind: CrashKind, wal_mode: WalMode) {
        let survive = match wal_mode {
            WalMode::Fsync => true,
            WalMode::Write => kind == CrashKind::Kill,
            WalMode::None => false,
        };
        if !survive {
            self.drop_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(ts: u64) -> Stamped {
        Stamped {
            ts,
            value: Some(b"v".to_vec()),
            deadline_ms: None,
        }
    }

    /// Pending hints come per peer, in sequence order, after the cursor, at
    /// most `max`; removed ones are counted delivered once.
    #[test]
    fn pending_after_a_cursor() {
        let mut h = HintStore::default();
        for ts in 1..=5 {
            h.add(1, b"a".to_vec(), v(ts));
        }
        h.add(2, b"b".to_vec(), v(9));
        let seqs = |hints: Vec<Hint>| hints.iter().map(|x| x.seq).collect::<Vec<_>>();
        assert_eq!(seqs(h.pending(1, None, 3)), vec![1, 2, 3]);
        assert_eq!(seqs(h.pending(1, Some(3), 3)), vec![4, 5]);
        assert_eq!(seqs(h.pending(2, None, 3)), vec![6]);
        h.remove(1, &[1, 3, 3, 42]);
        assert_eq!(h.count(1), 3);
        assert_eq!(h.delivered, 2);
        assert_eq!(h.len(), 4);
    }

    /// What survives a crash depends on the WAL mode and the kind of crash.
    #[test]
    fn crash_survival() {
        let cases = [
            (WalMode::Fsync, CrashKind::PowerLoss, 1),
            (WalMode::Write, CrashKind::Kill, 1),
            (WalMode::Write, CrashKind::PowerLoss, 0),
            (WalMode::None, CrashKind::Kill, 0),
        ];
        for (mode, kind, left) in cases {
            let mut h = HintStore::default();
            h.add(1, b"a".to_vec(), v(1));
            h.crash(kind, mode);
            assert_eq!(h.len(), left, "{mode:?} {kind:?}");
        }
    }
}
