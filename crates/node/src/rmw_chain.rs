//! A network thread's chains of in-flight atomic read-modify-writes, per
//! key (`net/rmw_local.rs`, rule 4): the result of the newest update of a
//! key still in flight, so the next update of the key starts from it and
//! expects its timestamp instead of conflicting with it.
//!
//! A chain ends when its last update is durable or any of its updates
//! fails (the later ones, expecting a version never written, fail too).
//! A connection closed with an update in flight leaves its count: the
//! head then lives until the next conflict of the key ends it (its value
//! is still the thread's newest write of the key, or a conflict shows it
//! is not). At most [`CHAIN_KEYS_MAX`] keys per thread.

use std::collections::HashMap;

/// Keys with a chain of in-flight updates kept per network thread.
pub const CHAIN_KEYS_MAX: usize = 4096;

/// The result of this thread's newest in-flight update of a key.
pub struct Head {
    pub value: Option<Vec<u8>>,
    pub deadline_ms: Option<u64>,
    pub ts: u64,
    pub read_seq: u64,
    pub inflight: u32,
    pub epoch: u64,
}

/// A network thread's chains (rule 4).
///
/// # Thread safety
/// One per network thread, in its `NetContext`; never shared.
#[derive(Default)]
pub struct Chains {
    heads: HashMap<Vec<u8>, Head>,
    next_epoch: u64,
}

impl Chains {
    /// The key's newest in-flight update on this thread, if chained.
    pub fn head(&self, key: &[u8]) -> Option<&Head> {
        self.heads.get(key)
    }

    /// Makes `head` the key's newest in-flight update; its chain's epoch
    /// (0: not chained, at [`CHAIN_KEYS_MAX`]).
    pub fn push(&mut self, key: &[u8], mut head: Head) -> u64 {
        if let Some(old) = self.heads.get_mut(key) {
            head.inflight = old.inflight + 1;
            head.epoch = old.epoch;
            *old = head;
            return old.epoch;
        }
        if self.heads.len() >= CHAIN_KEYS_MAX {
            return 0;
        }
        self.next_epoch += 1;
        head.epoch = self.next_epoch;
        self.heads.insert(key.to_vec(), head);
        self.next_epoch
    }

    pub fn finish(&mut self, key: &[u8], epoch: u64, failed: bool) {
        let Some(head) = self.heads.get_mut(key) else {
            return;
        };
        if head.epoch != epoch {
            return;
        }
        head.inflight = head.inflight.saturating_sub(1);
        if failed || head.inflight == 0 {
            self.heads.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CHAIN_KEYS_MAX, Chains, Head};

    fn head(ts: u64) -> Head {
        Head {
            value: Some(ts.to_string().into_bytes()),
            deadline_ms: None,
            ts,
            read_seq: 1,
            inflight: 1,
            epoch: 0,
        }
    }

    /// A chain lives while an update of it is in flight; a failure ends
    /// it, and the stale epoch's later completions leave a new chain alone.
    #[test]
    fn a_chain_ends_with_its_last_update_or_its_first_failure() {
        let mut chains = Chains::default();
        let e = chains.push(b"k", head(1));
        assert_eq!(chains.push(b"k", head(2)), e);
        chains.finish(b"k", e, false);
        assert_eq!(chains.heads[&b"k"[..]].ts, 2);
        chains.finish(b"k", e, false);
        assert!(chains.heads.is_empty());
        let e = chains.push(b"k", head(3));
        chains.push(b"k", head(4));
        chains.finish(b"k", e, true);
        assert!(chains.heads.is_empty());
        let fresh = chains.push(b"k", head(5));
        assert_ne!(fresh, e);
        chains.finish(b"k", e, true);
        assert_eq!(chains.heads[&b"k"[..]].ts, 5, "a stale epoch ends nothing");
    }

    /// Past the bound a key is not chained (epoch 0) and nothing grows.
    #[test]
    fn chains_are_bounded() {
        let mut chains = Chains::default();
        for i in 0..CHAIN_KEYS_MAX {
            assert_ne!(chains.push(format!("{i}").as_bytes(), head(1)), 0);
        }
        assert_eq!(chains.push(b"one more", head(1)), 0);
        assert_eq!(chains.heads.len(), CHAIN_KEYS_MAX);
    }
}
