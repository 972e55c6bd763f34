//! The final collection: after the final repairs, every node collects
//! what repair allows, so every run drops dead versions at least once
//! (`crate::collection`) and the final states, the power cut after it and
//! the checker see what collection left.
//!
//! The virtual clock runs on past the horizon's margin and the grace
//! (the cluster's periodic work goes on; faults stay healed), then every
//! node runs two anti-entropy rounds with every other node (two sessions
//! each, as the rule asks), then compacts everything it holds.

use super::Sim;
use crate::collection::{HORIZON_MARGIN_MS, SIM_TOMBSTONE_GRACE};

/// Most events the wait past the margin takes (the periodic ticks of a
/// few seconds of virtual time are far fewer).
const WAIT_EVENTS_MAX: usize = 1_000_000;

impl Sim {
    /// The phase (module header).
    pub(super) fn final_collection(&mut self) {
        let grace_ms = u64::try_from(SIM_TOMBSTONE_GRACE.as_millis()).unwrap_or(u64::MAX);
        let until_ms = self.now() + HORIZON_MARGIN_MS + grace_ms;
        for _ in 0..WAIT_EVENTS_MAX {
            if self.now() >= until_ms {
                break;
            }
            match self.world.next_at_ms() {
                Some(at) if at <= until_ms => {}
                _ => break,
            }
            let Some(event) = self.world.pop() else {
                break;
            };
            self.handle(event);
        }
        let n = self.nodes.len();
        for _ in 0..2 {
            for a in 0..n {
                for b in (0..n).filter(|&b| b != a) {
                    if self.nodes[a].is_up() && self.nodes[b].is_up() {
                        self.anti_entropy(a, b, ataman_node::antientropy::merkle::DEPTH);
                    }
                }
            }
        }
        for node in 0..n {
            if let Some(reopened) = self.nodes[node].compact() {
                self.record_restart(node, reopened);
            }
        }
        self.run_until_quiet("after the final collection");
    }
}
