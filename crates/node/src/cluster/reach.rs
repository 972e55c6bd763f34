//! Which nodes answered this node's last layout gossip call
//! (the `ataman-layout-gossip` thread, every second to every node of the live
//! layouts): what `GET /v0/cluster/health` judges the cluster from
//! (the health module's `cluster_health` rule).
//!
//! # Thread safety
//! One mutex over a small map, written by the gossip's call threads (one
//! entry each), read by a network thread serving the health view.
//!
//! # Invariants
//! Only the last round's targets are kept ([`ReachBoard::keep_only`]), so
//! the map is bounded by the live layouts' nodes.

use ataman_testkit::lock::lock;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The last gossip call's outcome per node, and the rounds sent.
#[derive(Debug, Default)]
pub struct ReachBoard {
    seen: Mutex<BTreeMap<String, bool>>,
    rounds: AtomicU64,
}

impl ReachBoard {
    /// `url` answered the last call (`true`) or did not (`false`).
    pub fn note(&self, url: &str, answered: bool) {
        let mut seen = lock(&self.seen);
        match seen.get_mut(url) {
            Some(v) => *v = answered,
            None => {
                seen.insert(url.to_owned(), answered);
            }
        }
    }

    /// Forgets every node but `urls` (a round's targets).
    pub fn keep_only(&self, urls: &[String]) {
        lock(&self.seen).retain(|u, _| urls.iter().any(|k| k == u));
    }

    /// One gossip round ended (every target called, answered or not).
    pub fn round_ended(&self) {
        self.rounds.fetch_add(1, Ordering::Relaxed);
    }

    /// Gossip rounds ended since the node started
    /// (`ataman_layout_gossip_rounds_total`).
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    /// What the last call to `url` did; `None` before the first.
    pub fn seen(&self, url: &str) -> Option<bool> {
        lock(&self.seen).get(url).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last outcome wins; a node never called is unknown; a node no
    /// longer a target is forgotten.
    #[test]
    fn last_outcome_per_target() {
        let b = ReachBoard::default();
        assert_eq!(b.seen("a"), None);
        b.note("a", true);
        b.note("b", true);
        b.note("a", false);
        assert_eq!((b.seen("a"), b.seen("b")), (Some(false), Some(true)));
        b.keep_only(&["a".to_owned()]);
        assert_eq!((b.seen("a"), b.seen("b")), (Some(false), None));
        assert_eq!(b.rounds(), 0);
        b.round_ended();
        b.round_ended();
        assert_eq!(b.rounds(), 2);
    }
}
